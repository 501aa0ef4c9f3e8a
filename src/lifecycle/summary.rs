//! How a teardown ended, as the lifecycle reports it: the outcome that exit codes
//! rank and the summary every caller sees. Built from the facts the process layer
//! found (`process::teardown::TeardownReport`); the process layer itself knows no
//! outcome.

use serde::{Deserialize, Serialize};

use super::Generation;
use super::stamp::millis;
use crate::process::teardown::TeardownReport;

/// How teardown ended (L5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Closing stdin sufficed, and nothing had left the process group.
    Clean,
    /// A signal was needed (or a process outside the group had to be ended),
    /// and then everything was confirmed gone.
    Escalated,
    /// Something could not be confirmed gone within the deadline.
    Failed,
}

impl Outcome {
    /// The outcome as output names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::Escalated => "escalated",
            Outcome::Failed => "failed",
        }
    }

    /// The outcome of what a teardown found: anything left, or a session that
    /// could not be ended, is a failure; any signal, or any process that had to
    /// be ended outside the group (L13), an escalation.
    pub fn of(report: &TeardownReport) -> Outcome {
        if !report.leftover_pids.is_empty() || report.failure.is_some() {
            Outcome::Failed
        } else if report.signal.is_some() || !report.escaped_pids.is_empty() {
            Outcome::Escalated
        } else {
            Outcome::Clean
        }
    }
}

/// A teardown's result as reported to callers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeardownSummary {
    pub generation: Generation,
    pub outcome: Outcome,
    pub signal: Option<String>,
    pub duration_ms: u64,
    pub leftover_pids: Vec<i32>,
    /// Processes of the generation that had left its process group (L13): each was
    /// signalled on its own, so the teardown was at best `escalated`.
    #[serde(default)]
    pub escaped_pids: Vec<i32>,
    /// How the server's main process ended, e.g. "exit code 0", "killed by SIGKILL";
    /// for a remote server, a note when the server had already ended the session.
    pub exit: Option<String>,
}

impl TeardownSummary {
    pub fn new(generation: Generation, report: &TeardownReport) -> TeardownSummary {
        TeardownSummary {
            generation,
            outcome: Outcome::of(report),
            signal: report.signal.map(|s| s.name().to_owned()),
            duration_ms: millis(report.duration),
            leftover_pids: report.leftover_pids.clone(),
            escaped_pids: report.escaped_pids.clone(),
            exit: report
                .exit
                .map(|e| e.to_string())
                .or_else(|| report.note.clone()),
        }
    }
}
