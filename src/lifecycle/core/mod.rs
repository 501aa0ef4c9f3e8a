//! The pure core of one server's lifecycle: every transition is decided here, from
//! the state and what happened, and nothing here does I/O, reads a clock or draws
//! on entropy.
//!
//! The authority feeds the core an [`Input`] (a request, the result of an effect,
//! a timer that fired, an exit it saw) together with the time, and gets back the
//! [`Effect`]s to carry out, in order. An effect that does something (reserve,
//! launch, tear down, sweep, clear, ping) answers with the next input; the others
//! (note the end of a generation, record a transition, answer the caller) do not.
//! The loop that carries effects out and feeds the answers back, with the time of
//! each step, is the authority's (`authority::drive`); the tests (`tests.rs`) run
//! the same loop against a scripted double, on a clock of their own.
//!
//! ```text
//!  Request ─► plan ─► Reserve ─► Reserved ─► Launch ─► Started ─► running | failed | quarantined
//!                  └► TearDown ─► TornDown ─► stopped (─► Reserve of the next, for a restart)
//!                  │                        └► quarantined (L7; the next never starts, L4)
//!                  └► Clear ─► Cleared ─► stopped (─► Reserve, for --force) | still quarantined
//!  ExitSeen ─► Sweep ─► Swept ─► failed | backoff (retry timer) | crash-loop | quarantined
//!  Retry ─► Reserve ...        Ping ─► Pinged ─► (after `failures` misses) TearDown, then Reserve
//!  Idle, Shutdown ─► TearDown
//! ```
//!
//! The core also owns the timers (retry, ping, idle) as instants of the clock it is
//! given; the authority sleeps until the earliest and feeds the matching input
//! (docs/design.md §8). The jitter of restart delays comes from a generator in the
//! core's state, seeded by whoever makes the core: the same seed and the same
//! inputs, at the same times, give the same effects and the same timers.

use std::time::{Duration, Instant};

use super::Generation;
use super::error::{ErrorKind, ErrorPhase, ServerError};
use super::events::Cause;
use super::policy::{self, RestartHistory, Supervision};
use super::state::{self, Intent, Phase, Plan, State};
use crate::config::Timeout;
use crate::platform::ExitKind;

#[cfg(test)]
mod tests;

/// What happened, as the core learns it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Input {
    /// A caller asks for a transition; `waited` is how long it queued (L12).
    /// `stale`: the last generation was started from another definition than
    /// the one a new generation would get (for [`Intent::Converge`]).
    Request {
        intent: Intent,
        force: bool,
        stale: bool,
        waited: Duration,
    },
    /// The fleet file's settings changed: they apply from now on, without a
    /// restart (docs/design.md §16).
    Configure(Supervision),
    /// The answer to [`Effect::Reserve`]: the generation the ledger gave, the
    /// one asked for or a greater one (a ledger shared across hosts gives its
    /// own, docs/design.md L20).
    Reserved(Result<Generation, ServerError>),
    /// The answer to [`Effect::Launch`].
    Started(Started),
    /// The answer to [`Effect::TearDown`].
    TornDown(Ended),
    /// The running generation's process exited, or its session ended.
    ExitSeen,
    /// The answer to [`Effect::Sweep`]: why the generation ended, and the sweep.
    Swept {
        error: ServerError,
        ended: Ended,
        /// How long the generation had been ready.
        up_for: Duration,
    },
    /// The answer to [`Effect::Clear`]: the leftovers still alive after it.
    Cleared { alive: Vec<i32>, took: Duration },
    /// The retry timer fired.
    Retry,
    /// The ping timer fired.
    Ping,
    /// The answer to [`Effect::Ping`].
    Pinged { answered: bool },
    /// The idle timer fired.
    Idle,
    /// The server was used (`tools`, `call`): its idle timer starts over.
    Used,
    /// The authority is ending: a running generation is torn down (L9).
    Shutdown,
}

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Started {
    pub generation: Generation,
    /// The main process (`None` for a remote server), or why the start failed.
    pub result: Result<Option<i32>, ServerError>,
    /// The teardown of a half start (L8); `None` when nothing was spawned.
    pub cleanup: Option<Ended>,
    /// From the reservation to ready, or to the end of the cleanup.
    pub took: Duration,
}

/// What a teardown or sweep found.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Ended {
    /// What could not be confirmed gone (L7, L13).
    pub leftover_pids: Vec<i32>,
    /// Why the teardown failed, when it did without leftovers (a session that
    /// could not be ended).
    pub failure: Option<ServerError>,
    /// How the main process ended, when that is known.
    pub exit: Option<ExitKind>,
    pub took: Duration,
}

/// What the authority must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Take `generation`, or a greater one the ledger gives, before anything
    /// is spawned (L3); answer [`Input::Reserved`]. Refused at once when the
    /// authority is interrupted.
    Reserve(Generation),
    /// Spawn or connect `generation`, handshake and list its tools under the
    /// connect deadline; tear down a half start (L8). Answer [`Input::Started`].
    Launch(Generation),
    /// Close the running generation's session and tear it down, verified (L5);
    /// answer [`Input::TornDown`].
    TearDown(Generation),
    /// Sweep what is left of a generation that ended by itself; answer
    /// [`Input::Swept`].
    Sweep(Generation),
    /// Find the quarantined generation's leftovers and, with `kill`, SIGKILL them
    /// (L7); answer [`Input::Cleared`].
    Clear { generation: Generation, kill: bool },
    /// Ping the running generation within `timeout`; answer [`Input::Pinged`].
    Ping { timeout: Duration },
    /// Note in the ledger that `generation` ended, with its quarantine, and wait
    /// until the note is kept: a quarantine is never reported before (L7).
    NoteEnd {
        generation: Generation,
        quarantine: Option<Quarantine>,
    },
    /// Record a transition (or a refusal, `from == to`) and publish the state (L12).
    Record(Transition),
    /// The operation is over: answer the caller, if one waits, with this result.
    Answer(Result<(), ServerError>),
}

/// What a quarantine keeps: why, and which pids were left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quarantine {
    pub message: String,
    pub leftover_pids: Vec<i32>,
}

/// One recorded transition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Transition {
    pub from: Phase,
    pub to: Phase,
    pub generation: Option<Generation>,
    pub cause: Cause,
    /// How long the operation took.
    pub duration: Duration,
    /// How long the request waited for the authority: on its first record only.
    pub waited: Duration,
    pub error: Option<ServerError>,
}

/// The operation under way, and what follows it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Op {
    cause: Cause,
    kind: OpKind,
    /// After a confirmed stop (or a cleared quarantine): start this generation.
    then_start: Option<Generation>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum OpKind {
    Starting(Generation),
    Stopping(Generation),
    Sweeping(Generation),
    Clearing(Generation),
}

/// One server's lifecycle: its state, its highest generation, its restart history
/// and its timers.
#[derive(Debug)]
pub(crate) struct Core {
    state: State,
    last_generation: Generation,
    supervision: Supervision,
    history: RestartHistory,
    /// When the pending restart is due (only in `backoff`).
    retry_at: Option<Instant>,
    /// When the next health ping is due (only while running with `health`).
    ping_at: Option<Instant>,
    missed_pings: u32,
    /// The last use of the server (a start, `tools`, `call`).
    last_used: Instant,
    op: Option<Op>,
    /// The current request's wait, given to its first record.
    waited: Duration,
    /// The jitter of restart delays (docs/design.md §8): a generator seeded by
    /// the caller, never from entropy.
    rng: fastrand::Rng,
}

impl Core {
    /// A core in `state` (stopped, or quarantined as an earlier holder left it),
    /// whose generations continue after `last_generation` (L3, L10), made at `now`,
    /// whose restart delays are spread by jitter drawn from `seed`.
    pub(crate) fn new(
        state: State,
        last_generation: Generation,
        supervision: Supervision,
        now: Instant,
        seed: u64,
    ) -> Core {
        Core {
            state,
            last_generation,
            supervision,
            history: RestartHistory::default(),
            retry_at: None,
            ping_at: None,
            missed_pings: 0,
            last_used: now,
            op: None,
            waited: Duration::ZERO,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    pub(crate) fn last_generation(&self) -> Generation {
        self.last_generation
    }

    /// Restarts by the restart policy within the current window.
    pub(crate) fn restarts(&self) -> u32 {
        self.history.count()
    }

    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    pub(crate) fn ping_at(&self) -> Option<Instant> {
        self.ping_at
    }

    /// When the running server is due to be stopped for idleness.
    pub(crate) fn idle_at(&self) -> Option<Instant> {
        let idle = self.supervision.idle_timeout?;
        matches!(self.state, State::Running { .. }).then(|| self.last_used + idle)
    }

    pub(crate) fn missed_pings(&self) -> u32 {
        self.missed_pings
    }

    /// Decides what `input` leads to.
    pub(crate) fn step(&mut self, input: Input, now: Instant) -> Vec<Effect> {
        let mut out = Vec::new();
        match input {
            Input::Request {
                intent,
                force,
                stale,
                waited,
            } => self.request(intent, force, stale, waited, &mut out),
            Input::Configure(supervision) => self.configure(supervision, now),
            Input::Reserved(result) => self.reserved(result, now, &mut out),
            Input::Started(started) => self.started(started, now, &mut out),
            Input::TornDown(ended) => self.torn_down(ended, &mut out),
            Input::ExitSeen => {
                if let State::Running { generation, .. } = self.state {
                    self.begin(Cause::Exited, OpKind::Sweeping(generation), None);
                    out.push(Effect::Sweep(generation));
                }
            }
            Input::Swept {
                error,
                ended,
                up_for,
            } => self.swept(error, ended, up_for, now, &mut out),
            Input::Cleared { alive, took } => self.cleared(alive, took, &mut out),
            Input::Retry => {
                self.retry_at = None;
                if matches!(self.state, State::Backoff { .. }) {
                    self.start(Cause::Restart, self.last_generation + 1, &mut out);
                }
            }
            Input::Ping => match (self.supervision.health, &self.state) {
                (Some(health), State::Running { .. }) => out.push(Effect::Ping {
                    timeout: health.timeout,
                }),
                _ => self.ping_at = None,
            },
            Input::Pinged { answered } => self.pinged(answered, now, &mut out),
            Input::Idle => self.stop_running(Cause::Idle, &mut out),
            Input::Shutdown => self.stop_running(Cause::Shutdown, &mut out),
            Input::Used => self.last_used = now,
        }
        out
    }

    fn begin(&mut self, cause: Cause, kind: OpKind, then_start: Option<Generation>) {
        self.op = Some(Op {
            cause,
            kind,
            then_start,
        });
    }

    /// The operation under way; an answer with none is a bug of the executor.
    fn op(&self) -> Op {
        self.op.unwrap_or(Op {
            cause: Cause::Start,
            kind: OpKind::Starting(self.last_generation + 1),
            then_start: None,
        })
    }

    /// Ends the operation and answers its caller.
    fn finish(&mut self, result: Result<(), ServerError>, out: &mut Vec<Effect>) {
        self.op = None;
        self.waited = Duration::ZERO;
        out.push(Effect::Answer(result));
    }

    /// Takes new settings: the restart policy counts from the next exit, the
    /// idle timer from the last use, and the health timer starts over when the
    /// health check changed (or stops when there is none).
    fn configure(&mut self, supervision: Supervision, now: Instant) {
        let health_changed = supervision.health != self.supervision.health;
        self.supervision = supervision;
        if health_changed {
            self.missed_pings = 0;
            self.ping_at = match (supervision.health, &self.state) {
                (Some(h), State::Running { .. }) => Some(now + h.interval),
                _ => None,
            };
        }
    }

    fn request(
        &mut self,
        intent: Intent,
        force: bool,
        stale: bool,
        waited: Duration,
        out: &mut Vec<Effect>,
    ) {
        let (intent, cause) = match intent {
            Intent::Start => (intent, Cause::Start),
            Intent::Stop => (intent, Cause::Stop),
            Intent::Reconnect { .. } => (intent, Cause::Reconnect),
            Intent::Reset => (intent, Cause::Reset),
            // A converge that starts a server is a start; one that replaces a
            // generation of another definition is the reconcile.
            Intent::Converge => match state::converge(&self.state, stale) {
                Intent::Start => (Intent::Start, Cause::Start),
                other => (other, Cause::Reconcile),
            },
        };
        self.waited = waited;
        match state::plan(&self.state, intent, self.last_generation, force) {
            Plan::Nothing => self.finish(Ok(()), out),
            Plan::Refuse(error) => {
                self.refuse(cause, Duration::ZERO, error.clone(), out);
                self.finish(Err(error), out);
            }
            Plan::Start { next } => self.start(cause, next, out),
            Plan::Stop { generation } => self.stop(generation, cause, None, out),
            Plan::Restart { generation, next } => self.stop(generation, cause, Some(next), out),
            Plan::Recover { generation, next } => {
                self.begin(cause, OpKind::Clearing(generation), Some(next));
                out.push(Effect::Clear {
                    generation,
                    kill: true,
                });
            }
            Plan::Clear { generation } => {
                self.begin(cause, OpKind::Clearing(generation), None);
                out.push(Effect::Clear {
                    generation,
                    kill: false,
                });
            }
            Plan::Settle => {
                self.enter(State::Stopped, cause, Duration::ZERO, None, out);
                self.finish(Ok(()), out);
            }
        }
    }

    /// Records a refusal: an event whose `from` and `to` are the same state.
    fn refuse(&mut self, cause: Cause, took: Duration, error: ServerError, out: &mut Vec<Effect>) {
        let phase = self.state.phase();
        out.push(Effect::Record(Transition {
            from: phase,
            to: phase,
            generation: self.state.generation(),
            cause,
            duration: took,
            waited: std::mem::take(&mut self.waited),
            error: Some(error),
        }));
    }

    fn stop(
        &mut self,
        generation: Generation,
        cause: Cause,
        then_start: Option<Generation>,
        out: &mut Vec<Effect>,
    ) {
        self.begin(cause, OpKind::Stopping(generation), then_start);
        self.enter(
            State::Stopping { generation },
            cause,
            Duration::ZERO,
            None,
            out,
        );
        out.push(Effect::TearDown(generation));
    }

    fn stop_running(&mut self, cause: Cause, out: &mut Vec<Effect>) {
        if let State::Running { generation, .. } = self.state {
            self.stop(generation, cause, None, out);
        }
    }

    fn reserved(&mut self, result: Result<Generation, ServerError>, now: Instant, out: &mut Vec<Effect>) {
        let op = self.op();
        let OpKind::Starting(next) = op.kind else {
            return self.finish(result.map(|_| ()), out);
        };
        // A generation never goes back, whatever the ledger says (L3).
        let result = result.and_then(|given| match given >= next {
            true => Ok(given),
            false => Err(ServerError::new(
                ErrorKind::SpawnFailed,
                ErrorPhase::Spawn,
                format!("the ledger gave generation {given}, below {next}: refused"),
            )),
        });
        match result {
            Ok(next) => {
                self.last_generation = next;
                self.enter(
                    State::Starting { generation: next },
                    op.cause,
                    Duration::ZERO,
                    None,
                    out,
                );
                out.push(Effect::Launch(next));
            }
            Err(error) => {
                // Nothing was taken or spawned: the state stays as it was, except
                // that a restart that cannot begin counts as a failed one.
                if op.cause == Cause::Restart
                    && let State::Backoff { generation, .. } = self.state
                {
                    let state = self.after_failure(generation, error.clone(), None, now);
                    self.enter(state, Cause::Restart, Duration::ZERO, None, out);
                }
                self.finish(Err(error), out);
            }
        }
    }

    fn started(&mut self, started: Started, now: Instant, out: &mut Vec<Effect>) {
        let op = self.op();
        let generation = started.generation;
        match started.result {
            Ok(pid) => {
                self.last_used = now;
                self.missed_pings = 0;
                self.ping_at = self.supervision.health.map(|h| now + h.interval);
                let running = state::after_start(generation, Ok(pid), Vec::new());
                self.enter(running, op.cause, started.took, None, out);
                self.finish(Ok(()), out);
            }
            Err(error) => {
                let leftover = started
                    .cleanup
                    .as_ref()
                    .map_or_else(Vec::new, |e| e.leftover_pids.clone());
                let next = state::after_start(generation, Err(error.clone()), leftover);
                if started.cleanup.is_some() {
                    out.push(note_end(generation, &next));
                }
                let cause = if error.kind == ErrorKind::Cancelled {
                    Cause::Interrupt
                } else {
                    op.cause
                };
                self.enter(next, cause, started.took, Some(error.clone()), out);
                // A restart that did not come up counts as one more failure
                // (transition 18); its exit status is not a clean exit.
                if op.cause == Cause::Restart && matches!(self.state, State::Failed { .. }) {
                    let state = self.after_failure(generation, error.clone(), None, now);
                    if !matches!(state, State::Failed { .. }) {
                        self.enter(state, Cause::Restart, Duration::ZERO, None, out);
                    }
                }
                self.finish(Err(error), out);
            }
        }
    }

    fn torn_down(&mut self, ended: Ended, out: &mut Vec<Effect>) {
        let op = self.op();
        let OpKind::Stopping(generation) = op.kind else {
            return self.finish(Ok(()), out);
        };
        let next = state::after_teardown(generation, ended.leftover_pids, ended.failure);
        let error = match &next {
            State::Quarantined { error, .. } => Some(error.clone()),
            _ => None,
        };
        out.push(note_end(generation, &next));
        self.enter(next, op.cause, ended.took, error.clone(), out);
        match (error, op.then_start) {
            // L4: the next generation starts only once this one is confirmed gone.
            (None, Some(next)) => self.start(op.cause, next, out),
            (error, _) => self.finish(error.map_or(Ok(()), Err), out),
        }
    }

    /// Begins the start of generation `next`: first its reservation (L3).
    fn start(&mut self, cause: Cause, next: Generation, out: &mut Vec<Effect>) {
        self.begin(cause, OpKind::Starting(next), None);
        out.push(Effect::Reserve(next));
    }

    fn swept(
        &mut self,
        error: ServerError,
        ended: Ended,
        up_for: Duration,
        now: Instant,
        out: &mut Vec<Effect>,
    ) {
        let OpKind::Sweeping(generation) = self.op().kind else {
            return self.finish(Ok(()), out);
        };
        self.history
            .forget_if_stable(&self.supervision.restart, up_for);
        // L4: backoff and crash-loop only once nothing of the generation is left.
        let next = if ended.leftover_pids.is_empty() {
            self.after_failure(generation, error.clone(), ended.exit, now)
        } else {
            state::after_teardown(generation, ended.leftover_pids, None)
        };
        out.push(note_end(generation, &next));
        self.enter(next, Cause::Exited, ended.took, Some(error), out);
        self.finish(Ok(()), out);
    }

    fn cleared(&mut self, alive: Vec<i32>, took: Duration, out: &mut Vec<Effect>) {
        let op = self.op();
        let OpKind::Clearing(generation) = op.kind else {
            return self.finish(Ok(()), out);
        };
        if !alive.is_empty() {
            let error = ServerError::still_alive(generation, &alive);
            self.refuse(op.cause, took, error.clone(), out);
            return self.finish(Err(error), out);
        }
        out.push(Effect::NoteEnd {
            generation,
            quarantine: None,
        });
        self.enter(State::Stopped, op.cause, took, None, out);
        match op.then_start {
            Some(next) => self.start(op.cause, next, out),
            None => self.finish(Ok(()), out),
        }
    }

    fn pinged(&mut self, answered: bool, now: Instant, out: &mut Vec<Effect>) {
        let Some(health) = self.supervision.health else {
            self.ping_at = None;
            return;
        };
        self.ping_at = Some(now + health.interval);
        if answered {
            self.missed_pings = 0;
            return;
        }
        self.missed_pings += 1;
        if self.missed_pings < health.failures {
            return;
        }
        // The same path as `reconnect`: the old generation is confirmed gone
        // before the new one starts (L4).
        self.missed_pings = 0;
        if let State::Running { generation, .. } = self.state {
            self.stop(
                generation,
                Cause::Health,
                Some(self.last_generation + 1),
                out,
            );
        }
    }

    /// After a generation failed (exited, or a restart did not come up): `failed`,
    /// `backoff` with the retry timer set, or `crash-loop`.
    fn after_failure(
        &mut self,
        generation: Generation,
        error: ServerError,
        exit: Option<ExitKind>,
        now: Instant,
    ) -> State {
        let restart = self.supervision.restart;
        if !policy::restarts_after(restart.policy, exit) {
            return State::Failed { generation, error };
        }
        if self.history.record(&restart, now) {
            let mut error = error;
            error.kind = ErrorKind::CrashLoop;
            error.message = format!(
                "{}; it was restarted {} times within {}, so it stays down until `reconnect`",
                error.message,
                restart.max_restarts,
                Timeout::After(restart.window)
            );
            return State::CrashLoop { generation, error };
        }
        let delay = policy::backoff(&restart, self.history.count() - 1, self.rng.f64());
        self.retry_at = Some(now + delay);
        State::Backoff { generation, error }
    }

    /// Changes state and records the transition.
    fn enter(
        &mut self,
        next: State,
        cause: Cause,
        duration: Duration,
        error: Option<ServerError>,
        out: &mut Vec<Effect>,
    ) {
        let from = self.state.phase();
        // A transition to `stopped` is still about the generation that stopped.
        let generation = next.generation().or(self.state.generation());
        // Timers belong to the states they serve: leaving them drops the timer, so
        // a user's request always cancels a pending restart.
        if !matches!(next, State::Backoff { .. }) {
            self.retry_at = None;
        }
        if !matches!(next, State::Running { .. }) {
            self.ping_at = None;
        }
        if matches!(
            cause,
            Cause::Start | Cause::Reconnect | Cause::Stop | Cause::Reconcile
        ) && matches!(next, State::Starting { .. } | State::Stopped)
        {
            // A person asked for this: the restart count begins anew.
            self.history.clear();
        }
        self.state = next;
        out.push(Effect::Record(Transition {
            from,
            to: self.state.phase(),
            generation,
            cause,
            duration,
            waited: std::mem::take(&mut self.waited),
            error,
        }));
    }
}

/// The ledger note of a generation that ended in `next`.
fn note_end(generation: Generation, next: &State) -> Effect {
    let quarantine = match next {
        State::Quarantined {
            error,
            leftover_pids,
            ..
        } => Some(Quarantine {
            message: error.message.clone(),
            leftover_pids: leftover_pids.clone(),
        }),
        _ => None,
    };
    Effect::NoteEnd {
        generation,
        quarantine,
    }
}
