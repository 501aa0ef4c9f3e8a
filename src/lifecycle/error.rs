//! What went wrong with a server, in the terms of docs/design.md §6: a kind that scripts
//! match on, the phase it happened in, a message for people, and the tail of the
//! server's stderr.

use serde::{Deserialize, Serialize};

use super::Generation;

/// The error kinds of the JSON output. Never renamed; new kinds may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    SpawnFailed,
    ConnectFailed,
    ConnectTimeout,
    Protocol,
    TeardownFailed,
    Quarantined,
    Fenced,
    Busy,
    /// The operation was interrupted (Ctrl-C) or its authority was shut down.
    Cancelled,
    /// A running server exited (or closed its output) on its own.
    Exited,
    /// A server was restarted too often within its restart window.
    CrashLoop,
    /// A remote server no longer knows the running generation's session (it
    /// restarted, or ended the session).
    SessionLost,
    /// A remote server wants credentials, or other ones (HTTP 401 or 403).
    Unauthorized,
    /// A remote server with `auth:` has no usable token: no login yet, a
    /// refresh refused, or a scope the grant lacks. The message names the
    /// command that fixes it (`mcpfleet login NAME`).
    AuthRequired,
    /// In a fleet that spans hosts, another host owns the server and runs it
    /// (docs/design.md §19); the message names the host.
    OwnedElsewhere,
}

/// Where in a server's life the error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorPhase {
    Spawn,
    Initialize,
    ListTools,
    Teardown,
    /// While running.
    Running,
    /// Refused before anything was done.
    Request,
}

#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct ServerError {
    pub kind: ErrorKind,
    pub phase: ErrorPhase,
    pub message: String,
    /// The last lines the server wrote to stderr before the error, oldest first.
    pub stderr_tail: Vec<String>,
}

impl ServerError {
    pub fn new(kind: ErrorKind, phase: ErrorPhase, message: impl Into<String>) -> ServerError {
        ServerError {
            kind,
            phase,
            message: message.into(),
            stderr_tail: Vec::new(),
        }
    }

    pub fn with_stderr(mut self, tail: Vec<String>) -> ServerError {
        self.stderr_tail = tail;
        self
    }

    pub fn fenced(expected: Generation, current: Option<Generation>) -> ServerError {
        let current = current.map_or_else(|| "none".to_owned(), |g| g.to_string());
        ServerError::new(
            ErrorKind::Fenced,
            ErrorPhase::Request,
            format!("refused: expected generation {expected}, current generation is {current}"),
        )
    }

    pub fn quarantined(generation: Generation, leftover_pids: &[i32]) -> ServerError {
        ServerError::new(
            ErrorKind::Quarantined,
            ErrorPhase::Request,
            format!(
                "refused: generation {generation} is quarantined because its teardown could not be confirmed (still alive: {})",
                pid_list(leftover_pids)
            ),
        )
    }

    /// A quarantine that cannot be cleared: `alive` of its leftovers still live.
    pub fn still_alive(generation: Generation, alive: &[i32]) -> ServerError {
        ServerError::new(
            ErrorKind::Quarantined,
            ErrorPhase::Request,
            format!(
                "generation {generation} still has living processes ({}); use --force to SIGKILL them",
                pid_list(alive)
            ),
        )
    }

    pub fn teardown_failed(leftover_pids: &[i32]) -> ServerError {
        ServerError::new(
            ErrorKind::TeardownFailed,
            ErrorPhase::Teardown,
            format!(
                "teardown could not confirm that every process is gone (still alive: {})",
                pid_list(leftover_pids)
            ),
        )
    }

    pub fn cancelled(what: &str) -> ServerError {
        ServerError::new(
            ErrorKind::Cancelled,
            ErrorPhase::Request,
            format!("{what} was interrupted"),
        )
    }
}

pub(crate) fn pid_list(pids: &[i32]) -> String {
    if pids.is_empty() {
        return "unknown".to_owned();
    }
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
