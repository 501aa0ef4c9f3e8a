//! What travels between a `Handle` and its authority: the request messages, the
//! reply, and why a request may get none.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::super::error::ServerError;
use super::super::state::Intent;
use super::super::summary::TeardownSummary;
use crate::config::Timeout;
use crate::process::session::ListedTool;

use super::config::{CallOptions};
use super::snapshot::{Snapshot};

/// The answer to a transition request.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The state after the request.
    pub snapshot: Snapshot,
    /// `Err` when the request did not get what it asked for.
    pub result: Result<(), ServerError>,
    /// Spawn to ready (handshake and tools/list), when this request started a generation.
    pub connect: Option<Duration>,
    /// The teardown this request performed (a stop, or the cleanup of a failed start).
    pub teardown: Option<TeardownSummary>,
    /// The tools the generation this request started listed, in the server's
    /// order: what `check --expect-tools` compares (docs/design.md §6).
    pub listed: Option<Arc<[ListedTool]>>,
}

/// Why a request got no reply from the authority.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("the authority of `{0}` did not accept the request within {1}; it was withdrawn")]
    Busy(String, Timeout),
    #[error("the authority of `{0}` has stopped")]
    Gone(String),
}

/// Why [`Handle::running`] has no peer to give.
#[derive(Debug)]
pub enum NotRunning {
    /// The start was refused, failed or not answered: the outcome of its request.
    NotStarted(Box<Result<Reply, RequestError>>),
    /// The server started, and stopped again before its peer was read.
    StoppedAgain,
    /// This host may not serve calls now (a fenced host of a fleet that spans
    /// hosts, L24).
    Refused(crate::lifecycle::error::ServerError),
}

pub(super) enum Message {
    Transition {
        intent: Intent,
        options: CallOptions,
        enqueued: Instant,
        /// Settled when the authority takes the request. If the caller has dropped
        /// the receiver by then, the request was withdrawn and is skipped.
        accepted: oneshot::Sender<()>,
        reply: oneshot::Sender<Reply>,
    },
    /// The server was just used (`tools`, `call`): its idle timer starts over.
    Touch,
}
