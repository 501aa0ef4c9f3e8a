//! What the authority publishes for everyone else: the server's state at one
//! instant, and how to reach its running generation.

use std::time::Instant;

use serde::Serialize;

use super::super::error::ServerError;
use super::super::state::{Generation, Phase};
use super::super::summary::TeardownSummary;
use crate::process::session::{self};


/// A server's state as seen from outside, at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    pub state: Phase,
    pub generation: Option<Generation>,
    pub pid: Option<i32>,
    /// Tools listed by the running generation.
    pub tools: Option<usize>,
    /// The server's name and version from its initialize answer.
    pub server_info: Option<String>,
    /// The protocol version the running generation's session speaks (its era:
    /// 2026-07-28 and later are modern).
    pub protocol_version: Option<String>,
    /// How long the running generation has been ready.
    pub uptime_ms: Option<u64>,
    /// When the running generation became ready, to compute `uptime_ms` when read.
    #[serde(skip)]
    pub ready_at: Option<Instant>,
    /// Restarts by the restart policy within the current window.
    pub restarts: u32,
    /// In `backoff`: how long until the next restart.
    pub retry_in_ms: Option<u64>,
    #[serde(skip)]
    pub retry_at: Option<tokio::time::Instant>,
    /// The error that put the server in `failed` or `quarantined`.
    pub error: Option<ServerError>,
    /// The last teardown of this server, kept until the next one.
    pub last_teardown: Option<TeardownSummary>,
    /// The definition the last generation was started from (the running one's,
    /// while it runs); `None` before any start.
    #[serde(skip)]
    pub definition: Option<crate::config::Definition>,
}

impl Snapshot {
    /// The generation of a running server, else `None`.
    pub fn running_generation(&self) -> Option<Generation> {
        (self.state == Phase::Running)
            .then_some(self.generation)
            .flatten()
    }
}

/// How callers outside the authority reach its running generation (G2).
#[derive(Clone)]
pub struct Reach {
    pub generation: Generation,
    /// Its session's peer and, over stdio, its link for the gateway's
    /// pass-through calls.
    pub session: session::Reachable,
}
