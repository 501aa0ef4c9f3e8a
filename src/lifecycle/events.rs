//! Transition events (rule L12): every change of a server's state is recorded with
//! its time, generation, cause, duration, the time the request waited for the
//! authority, and the error. The authority hands each event to an `EventSink`
//! before it answers the request that caused it.

use std::time::Duration;

use serde::Serialize;

use super::Generation;
use super::error::ServerError;
use super::state::Phase;
pub use super::stamp::{millis, rfc3339};
use super::summary::Outcome;

/// Why a transition happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    Start,
    Stop,
    Reconnect,
    /// The caller was interrupted; the authority cleans up what it acquired.
    Interrupt,
    /// The authority itself is shutting down.
    Shutdown,
    /// A quarantine was cleared (`reset`, or `--force`).
    Reset,
    /// A supervisor found a generation its predecessor left running (L10).
    Recovery,
    /// The server exited on its own.
    Exited,
    /// The restart policy started a new generation after an exit.
    Restart,
    /// Health checks failed; the server is restarted.
    Health,
    /// No call for `idle_timeout`: the server is stopped.
    Idle,
    /// `up` brought the server to the fleet file's definition (docs/design.md §16).
    Reconcile,
}

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    pub server: String,
    pub generation: Option<Generation>,
    pub from: Phase,
    pub to: Phase,
    pub cause: Cause,
    /// How long the operation that ended in this transition took.
    pub duration_ms: u64,
    /// How long the request waited in the authority's queue before it was taken.
    pub waited_ms: u64,
    pub error: Option<ServerError>,
    /// How the teardown that ended in this transition went: on the transition
    /// that concluded a teardown (a stop, the sweep after an exit, the cleanup
    /// of a failed start, a recovery), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teardown: Option<Outcome>,
}

/// Where events go: the `check` reporter, or the supervisor's event log.
/// `record` must have stored (or forwarded) the event when it returns.
pub trait EventSink: Send + Sync {
    fn record(&self, event: &Event);

    /// The authority took a request that had waited `waited` in its queue: for
    /// the metrics of the wait (docs/design.md §17). Not an event.
    fn accepted(&self, _server: &str, _waited: Duration) {}

    /// A request was withdrawn unanswered: its wait for the authority ran out
    /// (L2). Not an event: nothing changed, the authority never saw it.
    fn busy(&self, _server: &str) {}
}
