//! What an authority is started with: its environment (events, cancellation,
//! task tracking, shared start slots) and what an earlier holder left.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::super::events::EventSink;
use super::super::ledger::QuarantineRecord;
use super::super::state::Generation;
use crate::process::notice::Listener;


/// Where the authority's environment comes from: events, cancellation, tracking.
#[derive(Clone)]
pub struct Context {
    pub events: Arc<dyn EventSink>,
    /// Aborts starts in progress and refuses new ones; never cuts a teardown short.
    pub interrupt: CancellationToken,
    /// Ends the authority: it answers its queue, tears down and exits.
    pub shutdown: CancellationToken,
    /// Cuts the grace periods of teardowns short: SIGKILL at once (a second Ctrl-C).
    pub escalate: CancellationToken,
    pub tracker: TaskTracker,
    /// Distinguishes this host's generations from any other's in process tags.
    pub tag_scope: String,
    /// Handshakes that may run at once, across all servers (see [`default_start_slots`]).
    pub start_slots: Arc<Semaphore>,
}

/// Four handshakes per core may run at once: starting is mostly waiting on the
/// server, but 50 servers that all start at once on two cores share the CPU so
/// thinly that they all miss their connect deadlines together. A server waits for
/// a slot in state `starting`; its connect timeout counts from its spawn.
pub fn default_start_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 4
}

pub fn start_slots(n: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(n.max(1)))
}

/// Where an authority starts from: what an earlier holder of the server left.
#[derive(Clone, Default)]
pub struct Initial {
    pub last_generation: Generation,
    /// A quarantine that must survive the restart of whatever holds the authority.
    pub quarantine: Option<QuarantineRecord>,
    /// Hears what the server's sessions send unasked (the gateway, §14).
    pub listener: Option<Arc<dyn Listener>>,
}
