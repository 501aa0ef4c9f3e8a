//! The states of one server, and what a request means in each: `plan` decides
//! from the state alone; `after_start` and `after_teardown` say where an
//! operation's result leads. The core (`lifecycle::core`) calls these and decides
//! the rest (exits, restarts, health, idle, timers). No I/O and no time here.
//!
//! ```text
//!              start              ok                    stop, reconnect, health, idle
//!  stopped ──────────► starting ─────► running ──────────────────────► stopping
//!  failed  ──────────►  │  │            │  │ exit: swept, nothing left    │   │
//!     ▲   error, all gone │  │ error,    │  ├──► failed (no restart)       │   │ confirmed
//!     └───────────────────┘  │ left      │  ├──► backoff ──(retry)──► starting │
//!                            ▼           │  └──► crash-loop ──(reconnect)──► starting
//!                      quarantined ◄─────┘ exit, something left       │   ▼
//!                            ▲                                        │ stopped
//!                            └──────────── teardown not confirmed ────┘
//!  quarantined ──(reset, or --force after SIGKILL and confirmation)──► stopped
//!  backoff, crash-loop ──(stop)──► stopped;  failed ──(a restart failed)──► backoff | crash-loop
//! ```
//!
//! Every transition is numbered and explained in docs/design.md §4.2.

use serde::{Deserialize, Serialize};

use super::error::ServerError;

pub use super::Generation;

/// The name of a state, as shown in output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Stopped,
    Starting,
    Running,
    Stopping,
    Failed,
    Quarantined,
    /// Waiting to restart a server that exited.
    Backoff,
    /// Restarted too often within the window: left down until a user starts it.
    CrashLoop,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Stopped => "stopped",
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopping => "stopping",
            Phase::Failed => "failed",
            Phase::Quarantined => "quarantined",
            Phase::Backoff => "backoff",
            Phase::CrashLoop => "crash-loop",
        }
    }
}

/// A server's state. Each variant carries only what is valid in it.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Stopped,
    Starting {
        generation: Generation,
    },
    Running {
        generation: Generation,
        /// The main process; `None` for a remote server.
        pid: Option<i32>,
    },
    Stopping {
        generation: Generation,
    },
    /// A start did not succeed, and nothing of it is alive.
    Failed {
        generation: Generation,
        error: ServerError,
    },
    /// A teardown could not be confirmed: something of `generation` may be alive.
    Quarantined {
        generation: Generation,
        error: ServerError,
        leftover_pids: Vec<i32>,
    },
    /// `generation` exited and nothing of it is alive; a restart is due later.
    Backoff {
        generation: Generation,
        error: ServerError,
    },
    /// `generation` exited once too often within the restart window.
    CrashLoop {
        generation: Generation,
        error: ServerError,
    },
}

impl State {
    pub fn phase(&self) -> Phase {
        match self {
            State::Stopped => Phase::Stopped,
            State::Starting { .. } => Phase::Starting,
            State::Running { .. } => Phase::Running,
            State::Stopping { .. } => Phase::Stopping,
            State::Failed { .. } => Phase::Failed,
            State::Quarantined { .. } => Phase::Quarantined,
            State::Backoff { .. } => Phase::Backoff,
            State::CrashLoop { .. } => Phase::CrashLoop,
        }
    }

    /// The generation the state is about, if any.
    pub fn generation(&self) -> Option<Generation> {
        match self {
            State::Stopped => None,
            State::Starting { generation }
            | State::Running { generation, .. }
            | State::Stopping { generation }
            | State::Failed { generation, .. }
            | State::Quarantined { generation, .. }
            | State::Backoff { generation, .. }
            | State::CrashLoop { generation, .. } => Some(*generation),
        }
    }

    pub fn pid(&self) -> Option<i32> {
        match self {
            State::Running { pid, .. } => *pid,
            _ => None,
        }
    }
}

/// A transition that a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Start,
    Stop,
    /// Stop the current generation (if any), confirm it stopped, start a new one.
    Reconnect {
        if_generation: Option<Generation>,
    },
    /// Clear a quarantine, only once nothing of the quarantined generation is alive.
    Reset,
    /// Bring the server to its current definition (`up` after an edit of the fleet
    /// file, docs/design.md §16): start it unless it runs; restart a running one
    /// whose generation was started from another definition. [`converge`] says
    /// which, at the moment the authority takes the request.
    Converge,
}

/// What [`Intent::Converge`] means in `state`: `stale` says that the last
/// generation was started from a definition other than the current one. A running
/// (or crash-looping) server is restarted only when stale; anything else is a
/// start, refused like one (a quarantine without `--force`, a crash loop of an
/// unchanged definition).
pub fn converge(state: &State, stale: bool) -> Intent {
    match state {
        State::Running { .. } | State::CrashLoop { .. } if stale => Intent::Reconnect {
            if_generation: None,
        },
        _ => Intent::Start,
    }
}

/// What the authority must do for a request, decided from the state alone.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Already where the caller wants it: answer with the current state.
    Nothing,
    /// Refuse without touching anything.
    Refuse(ServerError),
    /// Start generation `next`.
    Start { next: Generation },
    /// Tear down `generation`.
    Stop { generation: Generation },
    /// Tear down `generation`; only if that is confirmed, start `next`.
    Restart {
        generation: Generation,
        next: Generation,
    },
    /// `--force` on a quarantined server: SIGKILL what is left of `generation`,
    /// confirm it is gone, then start `next`.
    Recover {
        generation: Generation,
        next: Generation,
    },
    /// Clear the quarantine of `generation` if nothing of it is alive.
    Clear { generation: Generation },
    /// Nothing is alive; just become `stopped` (a stop during backoff or crash loop).
    Settle,
}

/// Decides what `intent` means in `state` (a converge that reaches here,
/// undecided by [`converge`], is a start). `last` is the highest generation ever
/// given to this server, so that ids never repeat. `force` allows recovering a
/// quarantined server (L7).
pub fn plan(state: &State, intent: Intent, last: Generation, force: bool) -> Plan {
    let next = last + 1;
    if let Intent::Reconnect {
        if_generation: Some(expected),
    } = intent
        && state.generation() != Some(expected)
    {
        return Plan::Refuse(ServerError::fenced(expected, state.generation()));
    }
    match (state, intent) {
        (State::Quarantined { generation, .. }, Intent::Reset) => Plan::Clear {
            generation: *generation,
        },
        (_, Intent::Reset) => Plan::Nothing,
        (
            State::Quarantined { generation, .. },
            Intent::Start | Intent::Converge | Intent::Reconnect { .. },
        ) if force => Plan::Recover {
            generation: *generation,
            next,
        },
        (
            State::Quarantined {
                generation,
                leftover_pids,
                ..
            },
            _,
        ) => Plan::Refuse(ServerError::quarantined(*generation, leftover_pids)),
        // A user's request goes first: a pending retry is dropped (a new start
        // replaces it; a stop leaves the server stopped).
        (State::Backoff { .. } | State::CrashLoop { .. }, Intent::Stop) => Plan::Settle,
        (State::Backoff { .. }, Intent::Start | Intent::Converge | Intent::Reconnect { .. }) => {
            Plan::Start { next }
        }
        // `up` does not silently start a crash-looping server again; `reconnect` does.
        (State::CrashLoop { error, .. }, Intent::Start | Intent::Converge) => {
            Plan::Refuse(error.clone())
        }
        (State::CrashLoop { .. }, Intent::Reconnect { .. }) => Plan::Start { next },
        (State::Running { .. }, Intent::Start | Intent::Converge) => Plan::Nothing,
        (State::Running { generation, .. }, Intent::Stop) => Plan::Stop {
            generation: *generation,
        },
        (State::Running { generation, .. }, Intent::Reconnect { .. }) => Plan::Restart {
            generation: *generation,
            next,
        },
        (State::Stopped | State::Failed { .. }, Intent::Stop) => Plan::Nothing,
        (
            State::Stopped | State::Failed { .. },
            Intent::Start | Intent::Converge | Intent::Reconnect { .. },
        ) => Plan::Start { next },
        // The authority handles one request at a time, so it never plans while a
        // start or stop is under way; answering with the state is the safe reading.
        (State::Starting { .. } | State::Stopping { .. }, _) => Plan::Nothing,
    }
}

/// Where a start leads: `leftover_pids` are what the emergency teardown of a failed
/// start could not confirm gone (L8).
pub fn after_start(
    generation: Generation,
    result: Result<Option<i32>, ServerError>,
    leftover_pids: Vec<i32>,
) -> State {
    match result {
        Ok(pid) => State::Running { generation, pid },
        Err(error) if leftover_pids.is_empty() => State::Failed { generation, error },
        Err(error) => State::Quarantined {
            generation,
            error,
            leftover_pids,
        },
    }
}

/// Where a teardown leads: stopped when everything is confirmed gone, quarantined
/// otherwise (L7).
pub fn after_teardown(
    generation: Generation,
    leftover_pids: Vec<i32>,
    error: Option<ServerError>,
) -> State {
    match error {
        None if leftover_pids.is_empty() => State::Stopped,
        other => State::Quarantined {
            generation,
            error: other.unwrap_or_else(|| ServerError::teardown_failed(&leftover_pids)),
            leftover_pids,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::error::ErrorKind;

    fn running(generation: Generation) -> State {
        State::Running {
            generation,
            pid: Some(100),
        }
    }

    fn quarantined(generation: Generation) -> State {
        State::Quarantined {
            generation,
            error: ServerError::teardown_failed(&[7]),
            leftover_pids: vec![7],
        }
    }

    #[test]
    fn start_from_stopped_or_failed_takes_the_next_generation() {
        assert_eq!(
            plan(&State::Stopped, Intent::Start, 0, false),
            Plan::Start { next: 1 }
        );
        let failed = State::Failed {
            generation: 4,
            error: ServerError::teardown_failed(&[]),
        };
        assert_eq!(
            plan(&failed, Intent::Start, 4, false),
            Plan::Start { next: 5 }
        );
        // Ids never repeat, even when the state has forgotten older generations.
        assert_eq!(
            plan(&State::Stopped, Intent::Start, 9, false),
            Plan::Start { next: 10 }
        );
    }

    #[test]
    fn start_of_a_running_server_does_nothing_and_stop_tears_it_down() {
        assert_eq!(plan(&running(3), Intent::Start, 3, false), Plan::Nothing);
        assert_eq!(
            plan(&running(3), Intent::Stop, 3, false),
            Plan::Stop { generation: 3 }
        );
        assert_eq!(plan(&State::Stopped, Intent::Stop, 3, false), Plan::Nothing);
    }

    #[test]
    fn reconnect_stops_before_it_starts() {
        assert_eq!(
            plan(
                &running(3),
                Intent::Reconnect {
                    if_generation: None
                },
                3,
                false
            ),
            Plan::Restart {
                generation: 3,
                next: 4
            }
        );
        assert_eq!(
            plan(
                &State::Stopped,
                Intent::Reconnect {
                    if_generation: None
                },
                3,
                false
            ),
            Plan::Start { next: 4 }
        );
    }

    #[test]
    fn fencing_refuses_a_stale_generation() {
        let p = plan(
            &running(5),
            Intent::Reconnect {
                if_generation: Some(4),
            },
            5,
            false,
        );
        match p {
            Plan::Refuse(e) => assert_eq!(e.kind, ErrorKind::Fenced),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            plan(
                &running(5),
                Intent::Reconnect {
                    if_generation: Some(5)
                },
                5,
                false
            ),
            Plan::Restart {
                generation: 5,
                next: 6
            }
        );
    }

    #[test]
    fn a_quarantined_server_refuses_everything() {
        for intent in [
            Intent::Start,
            Intent::Stop,
            Intent::Reconnect {
                if_generation: None,
            },
        ] {
            match plan(&quarantined(2), intent, 2, false) {
                Plan::Refuse(e) => assert_eq!(e.kind, ErrorKind::Quarantined),
                other => panic!("{intent:?}: expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn force_recovers_and_reset_clears_only_a_quarantine() {
        assert_eq!(
            plan(&quarantined(2), Intent::Start, 2, true),
            Plan::Recover {
                generation: 2,
                next: 3
            }
        );
        assert_eq!(
            plan(&quarantined(2), Intent::Reset, 2, false),
            Plan::Clear { generation: 2 }
        );
        assert_eq!(plan(&running(2), Intent::Reset, 2, false), Plan::Nothing);
        assert_eq!(
            plan(&running(2), Intent::Start, 2, true),
            Plan::Nothing,
            "force changes nothing outside quarantine"
        );
    }

    #[test]
    fn results_lead_to_the_right_states() {
        assert_eq!(after_start(1, Ok(Some(42)), vec![]), running_pid(1, 42));
        let err = ServerError::teardown_failed(&[]);
        assert_eq!(
            after_start(1, Err(err.clone()), vec![]).phase(),
            Phase::Failed
        );
        assert_eq!(
            after_start(1, Err(err), vec![9]).phase(),
            Phase::Quarantined
        );
        assert_eq!(after_teardown(2, vec![], None), State::Stopped);
        match after_teardown(2, vec![11, 12], None) {
            State::Quarantined {
                generation,
                leftover_pids,
                ..
            } => {
                assert_eq!(generation, 2);
                assert_eq!(leftover_pids, vec![11, 12]);
            }
            other => panic!("expected quarantine, got {other:?}"),
        }
    }

    fn running_pid(generation: Generation, pid: i32) -> State {
        State::Running {
            generation,
            pid: Some(pid),
        }
    }
}
