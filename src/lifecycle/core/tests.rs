//! The core against a test double of the executor: every rule of the lifecycle
//! contract (docs/design.md §4.3) and the supervision of §8, without a process.
//! The real-process tests in `tests/` prove the same rules against the OS.
//!
//! The tests run without a runtime and without a clock: the double keeps the time
//! it gives the core, and a test moves it; every core is made with a seed, so its
//! jitter is the same on every run.

use std::collections::VecDeque;
use std::sync::LazyLock;

use super::*;
use crate::config::{HealthCheck, RestartMode, RestartPolicy};
use crate::lifecycle::error::ErrorPhase;

/// A scripted launch: a running process (its pid), or an error with the cleanup
/// of what was spawned (`None`: nothing was).
type Launched = Result<Option<i32>, (ServerError, Option<Ended>)>;

/// Where the tests' clock begins: any instant does, since the core only adds
/// durations to the times it is given and compares them.
static T0: LazyLock<Instant> = LazyLock::new(Instant::now);

/// An executor that answers from a script and logs every effect it is given.
struct Double {
    /// The time given to the core with every input; a test moves it.
    now: Instant,
    /// Answers to launches, in order; when empty, a process with pid 100 + generation.
    launches: VecDeque<Launched>,
    /// Answers to teardowns, in order; when empty, clean.
    teardowns: VecDeque<Ended>,
    /// Answers to sweeps; when empty, an exit with status 1 and nothing left.
    sweeps: VecDeque<(Option<ExitKind>, Vec<i32>)>,
    /// Leftovers still alive after each clear; when empty, none.
    clears: VecDeque<Vec<i32>>,
    /// Answers to pings; when empty, answered.
    pings: VecDeque<bool>,
    /// A reservation error for every reservation, when set.
    reserve_error: Option<ServerError>,
    /// How much greater than the one asked for is the generation each
    /// reservation gives (a ledger shared across hosts gives its own, L20).
    reserve_skip: u64,
    /// Every effect, in the order it was carried out.
    log: Vec<Effect>,
}

impl Default for Double {
    fn default() -> Double {
        Double {
            now: *T0,
            launches: VecDeque::new(),
            teardowns: VecDeque::new(),
            sweeps: VecDeque::new(),
            clears: VecDeque::new(),
            pings: VecDeque::new(),
            reserve_error: None,
            reserve_skip: 0,
            log: Vec::new(),
        }
    }
}

/// Feeds `input` to the core at the double's time and carries out what it decides
/// with the double, feeding the answers back until no effect is left: the
/// authority's loop (`authority::drive`), on the test's clock.
fn drive(core: &mut Core, double: &mut Double, input: Input) {
    let mut effects: VecDeque<Effect> = core.step(input, double.now).into();
    while let Some(effect) = effects.pop_front() {
        if let Some(next) = double.execute(effect) {
            effects.extend(core.step(next, double.now));
        }
    }
}

impl Double {
    /// Carries out `effect` from the script.
    fn execute(&mut self, effect: Effect) -> Option<Input> {
        self.log.push(effect.clone());
        match effect {
            Effect::Reserve(generation) => Some(Input::Reserved(match &self.reserve_error {
                Some(e) => Err(e.clone()),
                None => Ok(generation + self.reserve_skip),
            })),
            Effect::Launch(generation) => {
                let answer = self
                    .launches
                    .pop_front()
                    .unwrap_or(Ok(Some(100 + generation as i32)));
                let (result, cleanup) = match answer {
                    Ok(pid) => (Ok(pid), None),
                    Err((error, cleanup)) => (Err(error), cleanup),
                };
                Some(Input::Started(Started {
                    generation,
                    result,
                    cleanup,
                    took: ms(20),
                }))
            }
            Effect::TearDown(_) => Some(Input::TornDown(
                self.teardowns.pop_front().unwrap_or_else(clean),
            )),
            Effect::Sweep(generation) => {
                let (exit, leftover_pids) = self
                    .sweeps
                    .pop_front()
                    .unwrap_or((Some(ExitKind::Code(1)), Vec::new()));
                Some(Input::Swept {
                    error: ServerError::new(
                        ErrorKind::Exited,
                        ErrorPhase::Running,
                        format!("generation {generation} exited"),
                    ),
                    ended: Ended {
                        leftover_pids,
                        exit,
                        ..clean()
                    },
                    up_for: ms(50),
                })
            }
            Effect::Clear { .. } => Some(Input::Cleared {
                alive: self.clears.pop_front().unwrap_or_default(),
                took: ms(1),
            }),
            Effect::Ping { .. } => Some(Input::Pinged {
                answered: self.pings.pop_front().unwrap_or(true),
            }),
            Effect::NoteEnd { .. } | Effect::Record(_) | Effect::Answer(_) => None,
        }
    }

    /// The transitions recorded, as (from, to, cause).
    fn records(&self) -> Vec<(Phase, Phase, Cause)> {
        self.log
            .iter()
            .filter_map(|e| match e {
                Effect::Record(t) => Some((t.from, t.to, t.cause)),
                _ => None,
            })
            .collect()
    }

    fn answers(&self) -> Vec<Result<(), ErrorKind>> {
        self.log
            .iter()
            .filter_map(|e| match e {
                Effect::Answer(r) => Some(r.clone().map_err(|e| e.kind)),
                _ => None,
            })
            .collect()
    }

    fn count(&self, wanted: fn(&Effect) -> bool) -> usize {
        self.log.iter().filter(|e| wanted(e)).count()
    }

    fn forget(&mut self) {
        self.log.clear();
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn clean() -> Ended {
    Ended {
        took: ms(5),
        ..Ended::default()
    }
}

fn left(pids: &[i32]) -> Ended {
    Ended {
        leftover_pids: pids.to_vec(),
        ..clean()
    }
}

fn new_core(supervision: Supervision) -> Core {
    Core::new(State::Stopped, 0, supervision, *T0, 7)
}

fn restarting(max_restarts: u32) -> Supervision {
    Supervision {
        restart: RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: ms(100),
            backoff_max: ms(1000),
            max_restarts,
            window: Duration::from_secs(60),
        },
        ..Supervision::default()
    }
}

fn request(intent: Intent) -> Input {
    Input::Request {
        intent,
        force: false,
        stale: false,
        waited: Duration::ZERO,
    }
}

/// A converge, with the last generation's definition current or `stale`.
fn converge(stale: bool) -> Input {
    Input::Request {
        intent: Intent::Converge,
        force: false,
        stale,
        waited: Duration::ZERO,
    }
}

const START: Intent = Intent::Start;
const STOP: Intent = Intent::Stop;
const RECONNECT: Intent = Intent::Reconnect {
    if_generation: None,
};

fn up(core: &mut Core, double: &mut Double) {
    drive(core, double, request(START));
    assert!(matches!(core.state(), State::Running { .. }), "{core:?}");
}

use Phase::{Backoff, Failed, Quarantined, Running, Starting, Stopped, Stopping};

#[test]
fn l1_one_request_at_a_time_each_answered_once_in_order() {
    let mut core = new_core(Supervision::default());
    let mut double = Double::default();
    for intent in [START, START, STOP, STOP] {
        drive(&mut core, &mut double, request(intent));
    }
    // The second start finds the server running and spawns nothing; the second
    // stop finds it stopped.
    assert_eq!(double.count(|e| matches!(e, Effect::Launch(_))), 1);
    assert_eq!(double.count(|e| matches!(e, Effect::TearDown(_))), 1);
    assert_eq!(double.answers(), vec![Ok(()); 4]);
    assert_eq!(
        double.records(),
        vec![
            (Stopped, Starting, Cause::Start),
            (Starting, Running, Cause::Start),
            (Running, Stopping, Cause::Stop),
            (Stopping, Stopped, Cause::Stop),
        ]
    );
    // An exit seen while nothing runs changes nothing.
    double.forget();
    drive(&mut core, &mut double, Input::ExitSeen);
    assert!(double.log.is_empty());
}

#[test]
fn l2_the_wait_goes_on_the_first_record_and_timers_live_in_their_states() {
    let mut core = new_core(restarting(3));
    let mut double = Double::default();
    drive(
        &mut core,
        &mut double,
        Input::Request {
            intent: START,
            force: false,
            stale: false,
            waited: ms(7),
        },
    );
    let waits: Vec<Duration> = double
        .log
        .iter()
        .filter_map(|e| match e {
            Effect::Record(t) => Some(t.waited),
            _ => None,
        })
        .collect();
    assert_eq!(waits, vec![ms(7), Duration::ZERO]);
    // An exit schedules a retry, bounded by the policy's maximum delay...
    drive(&mut core, &mut double, Input::ExitSeen);
    let due = core.retry_at().expect("a retry is scheduled");
    assert!(due <= double.now + ms(1200));
    // ...and a user's stop drops it with the state it served.
    drive(&mut core, &mut double, request(STOP));
    assert_eq!(core.state(), &State::Stopped);
    assert_eq!(core.retry_at(), None);
}

#[test]
fn l20_the_generation_is_the_one_the_ledger_gives_and_never_goes_back() {
    let mut core = Core::new(State::Stopped, 9, Supervision::default(), *T0, 7);
    let mut double = Double {
        reserve_skip: 90,
        ..Double::default()
    };
    up(&mut core, &mut double);
    assert!(double.log.contains(&Effect::Launch(100)), "{:?}", double.log);
    assert_eq!(core.state().generation(), Some(100));
    // The next start asks for 101 and takes what it is given.
    drive(&mut core, &mut double, request(RECONNECT));
    assert_eq!(core.state().generation(), Some(191));

    // A ledger that gives less than asked is refused: nothing launches.
    let mut core = Core::new(State::Stopped, 9, Supervision::default(), *T0, 7);
    let double = Double::default();
    let effects = core.step(request(START), double.now);
    assert!(effects.contains(&Effect::Reserve(10)), "{effects:?}");
    let after = core.step(Input::Reserved(Ok(4)), double.now);
    assert!(!after.iter().any(|e| matches!(e, Effect::Launch(_))), "{after:?}");
    assert_eq!(core.state(), &State::Stopped);
    assert!(
        after.iter().any(|e| matches!(e, Effect::Answer(Err(_)))),
        "{after:?}"
    );
}

#[test]
fn l3_each_start_reserves_a_new_generation_before_it_launches() {
    let mut core = Core::new(State::Stopped, 9, Supervision::default(), *T0, 7);
    let mut double = Double::default();
    up(&mut core, &mut double);
    let order: Vec<&Effect> = double
        .log
        .iter()
        .filter(|e| matches!(e, Effect::Reserve(_) | Effect::Launch(_)))
        .collect();
    assert_eq!(order, vec![&Effect::Reserve(10), &Effect::Launch(10)]);
    drive(&mut core, &mut double, request(RECONNECT));
    assert_eq!(core.state().generation(), Some(11));

    // A reservation that cannot be written refuses the start: nothing launches
    // and the state stays as it was.
    let mut core = core_stopped();
    let mut double = Double {
        reserve_error: Some(ServerError::new(
            ErrorKind::SpawnFailed,
            ErrorPhase::Spawn,
            "disk full",
        )),
        ..Double::default()
    };
    drive(&mut core, &mut double, request(START));
    assert_eq!(double.count(|e| matches!(e, Effect::Launch(_))), 0);
    assert_eq!(double.answers(), vec![Err(ErrorKind::SpawnFailed)]);
    assert_eq!(core.state(), &State::Stopped);
    assert_eq!(core.last_generation(), 0);
}

fn core_stopped() -> Core {
    new_core(Supervision::default())
}

#[test]
fn l4_no_generation_starts_while_an_earlier_one_may_live() {
    // A reconnect whose teardown leaves something never starts the next one.
    let mut core = core_stopped();
    let mut double = Double::default();
    up(&mut core, &mut double);
    double.teardowns.push_back(left(&[4242]));
    double.forget();
    drive(&mut core, &mut double, request(RECONNECT));
    assert_eq!(double.count(|e| matches!(e, Effect::Reserve(_))), 0);
    assert_eq!(core.state().phase(), Quarantined);
    assert_eq!(double.answers(), vec![Err(ErrorKind::TeardownFailed)]);

    // An exit whose sweep leaves something is quarantined, never retried.
    let mut core = new_core(restarting(3));
    let mut double = Double::default();
    up(&mut core, &mut double);
    double.sweeps.push_back((Some(ExitKind::Code(1)), vec![77]));
    drive(&mut core, &mut double, Input::ExitSeen);
    assert_eq!(core.state().phase(), Quarantined);
    assert_eq!(core.retry_at(), None);

    // A health restart whose stop leaves something: the same.
    let mut core = new_core(Supervision {
        health: Some(HealthCheck {
            interval: ms(100),
            timeout: ms(50),
            failures: 1,
        }),
        ..Supervision::default()
    });
    let mut double = Double::default();
    up(&mut core, &mut double);
    double.pings.push_back(false);
    double.teardowns.push_back(left(&[5]));
    double.forget();
    drive(&mut core, &mut double, Input::Ping);
    assert_eq!(double.count(|e| matches!(e, Effect::Reserve(_))), 0);
    assert_eq!(core.state().phase(), Quarantined);
}

#[test]
fn l5_a_stop_is_stopped_only_once_the_teardown_is_confirmed() {
    let mut core = core_stopped();
    let mut double = Double::default();
    up(&mut core, &mut double);
    double.forget();
    drive(&mut core, &mut double, request(STOP));
    assert_eq!(
        double.log.iter().map(kind).collect::<Vec<_>>(),
        vec!["record", "teardown", "note-end", "record", "answer"]
    );
    assert_eq!(core.state(), &State::Stopped);

    // A teardown that fails without leftovers (a session that could not be
    // ended) is not confirmed either.
    up(&mut core, &mut double);
    double.teardowns.push_back(Ended {
        failure: Some(ServerError::new(
            ErrorKind::TeardownFailed,
            ErrorPhase::Teardown,
            "the DELETE failed",
        )),
        ..clean()
    });
    drive(&mut core, &mut double, request(STOP));
    match core.state() {
        State::Quarantined { error, .. } => assert_eq!(error.message, "the DELETE failed"),
        other => panic!("expected quarantine, got {other:?}"),
    }
}

fn kind(e: &Effect) -> &'static str {
    match e {
        Effect::Reserve(_) => "reserve",
        Effect::Launch(_) => "launch",
        Effect::TearDown(_) => "teardown",
        Effect::Sweep(_) => "sweep",
        Effect::Clear { .. } => "clear",
        Effect::Ping { .. } => "ping",
        Effect::NoteEnd { .. } => "note-end",
        Effect::Record(_) => "record",
        Effect::Answer(_) => "answer",
    }
}

#[test]
fn l6_the_outcome_is_recorded_before_anyone_is_answered() {
    let mut core = core_stopped();
    let mut double = Double::default();
    double.launches.push_back(Err((
        ServerError::new(ErrorKind::ConnectTimeout, ErrorPhase::Initialize, "slow"),
        Some(clean()),
    )));
    for intent in [START, START, STOP, RECONNECT] {
        drive(&mut core, &mut double, request(intent));
        // The answer is the last thing of every request, after its records.
        assert_eq!(double.log.last().map(kind), Some("answer"));
        double.forget();
    }
    // An operation nobody asked for is recorded all the same.
    drive(&mut core, &mut double, Input::Shutdown);
    assert_eq!(
        double.records(),
        vec![
            (Running, Stopping, Cause::Shutdown),
            (Stopping, Stopped, Cause::Shutdown)
        ]
    );
}

#[test]
fn l7_a_failed_teardown_is_kept_before_it_is_reported_and_refuses_until_cleared() {
    let mut core = core_stopped();
    let mut double = Double::default();
    up(&mut core, &mut double);
    double.teardowns.push_back(left(&[31, 32]));
    double.forget();
    drive(&mut core, &mut double, request(STOP));
    let note = double
        .log
        .iter()
        .position(|e| matches!(e, Effect::NoteEnd { quarantine: Some(q), .. } if q.leftover_pids == [31, 32]))
        .expect("the quarantine goes to the ledger");
    let record = double
        .log
        .iter()
        .position(|e| matches!(e, Effect::Record(t) if t.to == Quarantined))
        .unwrap();
    assert!(note < record, "kept before it is recorded");

    // Start, stop and reconnect are refused, each recorded as from == to.
    for intent in [START, STOP, RECONNECT] {
        double.forget();
        drive(&mut core, &mut double, request(intent));
        assert_eq!(double.answers(), vec![Err(ErrorKind::Quarantined)]);
        assert_eq!(
            double.records().first().map(|r| (r.0, r.1)),
            Some((Quarantined, Quarantined))
        );
    }
    // `reset` while something lives: refused, still quarantined.
    double.clears.push_back(vec![31]);
    double.forget();
    drive(&mut core, &mut double, request(Intent::Reset));
    assert_eq!(double.answers(), vec![Err(ErrorKind::Quarantined)]);
    assert_eq!(core.state().phase(), Quarantined);
    // `--force`: kill, confirm, then the next generation.
    double.forget();
    drive(
        &mut core,
        &mut double,
        Input::Request {
            intent: START,
            force: true,
            stale: false,
            waited: Duration::ZERO,
        },
    );
    assert_eq!(
        double.log.iter().map(kind).collect::<Vec<_>>()[..5],
        ["clear", "note-end", "record", "reserve", "record"]
    );
    assert!(matches!(
        double.log[0],
        Effect::Clear {
            generation: 1,
            kill: true
        }
    ));
    assert_eq!(core.state().generation(), Some(2));
    assert_eq!(core.state().phase(), Running);
}

#[test]
fn l8_a_half_start_is_torn_down_before_the_answer() {
    let timeout = || ServerError::new(ErrorKind::ConnectTimeout, ErrorPhase::Initialize, "");
    let mut core = core_stopped();
    let mut double = Double::default();
    double.launches.push_back(Err((timeout(), Some(clean()))));
    drive(&mut core, &mut double, request(START));
    assert_eq!(core.state().phase(), Failed);
    assert_eq!(double.count(|e| matches!(e, Effect::NoteEnd { .. })), 1);

    // The cleanup could not confirm everything gone: quarantined instead.
    double
        .launches
        .push_back(Err((timeout(), Some(left(&[9])))));
    drive(&mut core, &mut double, request(START));
    assert_eq!(core.state().phase(), Quarantined);

    // Nothing was spawned (a spawn error): failed, with no ledger note; an
    // interrupted start is recorded with cause `interrupt`.
    let mut core = core_stopped();
    let mut double = Double::default();
    double
        .launches
        .push_back(Err((ServerError::cancelled("the start"), None)));
    drive(&mut core, &mut double, request(START));
    assert_eq!(core.state().phase(), Failed);
    assert_eq!(double.count(|e| matches!(e, Effect::NoteEnd { .. })), 0);
    assert_eq!(
        double.records().last(),
        Some(&(Starting, Failed, Cause::Interrupt))
    );
}

#[test]
fn l9_shutdown_tears_down_what_runs_and_nothing_else() {
    let mut core = core_stopped();
    let mut double = Double::default();
    drive(&mut core, &mut double, Input::Shutdown);
    assert!(double.log.is_empty());
    up(&mut core, &mut double);
    double.forget();
    drive(&mut core, &mut double, Input::Shutdown);
    assert_eq!(double.count(|e| matches!(e, Effect::TearDown(1))), 1);
    assert_eq!(core.state(), &State::Stopped);
}

#[test]
fn l10_a_core_begins_from_what_an_earlier_holder_left() {
    let state = State::Quarantined {
        generation: 4,
        error: ServerError::teardown_failed(&[66]),
        leftover_pids: vec![66],
    };
    let mut core = Core::new(state, 4, Supervision::default(), *T0, 7);
    let mut double = Double::default();
    drive(&mut core, &mut double, request(START));
    assert_eq!(double.answers(), vec![Err(ErrorKind::Quarantined)]);
    drive(
        &mut core,
        &mut double,
        Input::Request {
            intent: RECONNECT,
            force: true,
            stale: false,
            waited: Duration::ZERO,
        },
    );
    assert_eq!(core.state().generation(), Some(5));
}

#[test]
fn l11_a_fenced_reconnect_runs_only_on_the_generation_it_names() {
    let fenced = |n| {
        request(Intent::Reconnect {
            if_generation: Some(n),
        })
    };
    let mut core = core_stopped();
    let mut double = Double::default();
    // A stopped server has no current generation.
    drive(&mut core, &mut double, fenced(0));
    assert_eq!(double.answers(), vec![Err(ErrorKind::Fenced)]);
    up(&mut core, &mut double);
    double.forget();
    // Two scripts reconnect generation 1: one new generation.
    drive(&mut core, &mut double, fenced(1));
    drive(&mut core, &mut double, fenced(1));
    assert_eq!(double.answers(), vec![Ok(()), Err(ErrorKind::Fenced)]);
    assert_eq!(core.state().generation(), Some(2));
    assert_eq!(
        double.records().last(),
        Some(&(Running, Running, Cause::Reconnect))
    );
}

#[test]
fn l12_every_change_of_state_is_recorded_once_and_the_records_chain() {
    let mut core = new_core(restarting(5));
    let mut double = Double::default();
    let mut phase = Stopped;
    let mut check = |core: &Core, double: &mut Double| {
        for t in double.log.iter().filter_map(|e| match e {
            Effect::Record(t) => Some(t),
            _ => None,
        }) {
            if t.from != t.to {
                assert_eq!(t.from, phase, "{t:?} does not follow the last record");
                phase = t.to;
            }
        }
        assert_eq!(core.state().phase(), phase);
        double.forget();
    };
    up(&mut core, &mut double);
    check(&core, &mut double);
    drive(&mut core, &mut double, Input::ExitSeen);
    check(&core, &mut double);
    drive(&mut core, &mut double, Input::Retry);
    check(&core, &mut double);
    drive(&mut core, &mut double, request(RECONNECT));
    check(&core, &mut double);
    drive(&mut core, &mut double, request(STOP));
    check(&core, &mut double);
    assert_eq!(core.state(), &State::Stopped);
}

#[test]
fn l13_a_descendant_left_outside_the_group_quarantines_the_generation() {
    // The process layer reports a lineage member it could not end as left.
    let mut core = new_core(restarting(3));
    let mut double = Double::default();
    up(&mut core, &mut double);
    double
        .sweeps
        .push_back((Some(ExitKind::Code(0)), vec![888]));
    drive(&mut core, &mut double, Input::ExitSeen);
    match core.state() {
        State::Quarantined { leftover_pids, .. } => assert_eq!(leftover_pids, &[888]),
        other => panic!("expected quarantine, got {other:?}"),
    }
}

#[test]
fn restarts_back_off_until_a_crash_loop_which_only_reconnect_ends() {
    let mut core = new_core(restarting(2));
    let mut double = Double::default();
    up(&mut core, &mut double);
    let mut delays = Vec::new();
    for _ in 0..2 {
        drive(&mut core, &mut double, Input::ExitSeen);
        assert_eq!(core.state().phase(), Backoff);
        delays.push(core.retry_at().unwrap() - double.now);
        drive(&mut core, &mut double, Input::Retry);
        assert_eq!(core.state().phase(), Running);
    }
    assert!(delays[1] > delays[0], "the delay grows: {delays:?}");
    drive(&mut core, &mut double, Input::ExitSeen);
    match core.state() {
        State::CrashLoop { error, .. } => assert_eq!(error.kind, ErrorKind::CrashLoop),
        other => panic!("expected a crash loop, got {other:?}"),
    }
    assert_eq!(core.retry_at(), None);
    double.forget();
    drive(&mut core, &mut double, request(START));
    assert_eq!(double.answers(), vec![Err(ErrorKind::CrashLoop)]);
    drive(&mut core, &mut double, request(RECONNECT));
    assert_eq!(core.state().phase(), Running);
    assert_eq!(
        core.restarts(),
        0,
        "a person's reconnect starts the count anew"
    );
}

#[test]
fn a_restart_that_does_not_come_up_counts_as_a_failure() {
    let mut core = new_core(restarting(3));
    let mut double = Double::default();
    up(&mut core, &mut double);
    drive(&mut core, &mut double, Input::ExitSeen);
    double.launches.push_back(Err((
        ServerError::new(ErrorKind::ConnectFailed, ErrorPhase::Initialize, "closed"),
        Some(clean()),
    )));
    double.forget();
    drive(&mut core, &mut double, Input::Retry);
    assert_eq!(
        double.records(),
        vec![
            (Backoff, Starting, Cause::Restart),
            (Starting, Failed, Cause::Restart),
            (Failed, Backoff, Cause::Restart),
        ]
    );
    assert_eq!(core.restarts(), 2);
    assert!(core.retry_at().is_some());
}

#[test]
fn a_clean_exit_is_not_restarted_on_failure_and_never_is_failed() {
    let mut core = new_core(restarting(3));
    let mut double = Double::default();
    up(&mut core, &mut double);
    double.sweeps.push_back((Some(ExitKind::Code(0)), vec![]));
    drive(&mut core, &mut double, Input::ExitSeen);
    assert_eq!(core.state().phase(), Failed);
    let mut core = core_stopped();
    up(&mut core, &mut double);
    drive(&mut core, &mut double, Input::ExitSeen);
    assert_eq!(core.state().phase(), Failed);
    assert_eq!(
        double.records().last(),
        Some(&(Running, Failed, Cause::Exited))
    );
}

#[test]
fn missed_pings_in_a_row_restart_the_server_and_an_answer_resets_the_count() {
    let mut core = new_core(Supervision {
        health: Some(HealthCheck {
            interval: ms(100),
            timeout: ms(50),
            failures: 2,
        }),
        ..Supervision::default()
    });
    let mut double = Double::default();
    up(&mut core, &mut double);
    assert_eq!(core.ping_at(), Some(double.now + ms(100)));
    double.pings.extend([false, true, false]);
    for _ in 0..3 {
        drive(&mut core, &mut double, Input::Ping);
    }
    assert_eq!(core.state().generation(), Some(1), "no two misses in a row");
    double.pings.push_back(false);
    double.forget();
    drive(&mut core, &mut double, Input::Ping);
    assert_eq!(
        double.records(),
        vec![
            (Running, Stopping, Cause::Health),
            (Stopping, Stopped, Cause::Health),
            (Stopped, Starting, Cause::Health),
            (Starting, Running, Cause::Health),
        ]
    );
    assert_eq!(core.state().generation(), Some(2));
}

#[test]
fn an_idle_server_is_stopped_and_a_use_starts_its_timer_over() {
    let mut core = new_core(Supervision {
        idle_timeout: Some(ms(1000)),
        ..Supervision::default()
    });
    let mut double = Double::default();
    assert_eq!(core.idle_at(), None, "only a running server idles");
    up(&mut core, &mut double);
    let first = core.idle_at().unwrap();
    double.now += ms(400);
    drive(&mut core, &mut double, Input::Used);
    assert_eq!(core.idle_at(), Some(first + ms(400)));
    double.forget();
    drive(&mut core, &mut double, Input::Idle);
    assert_eq!(
        double.records().last(),
        Some(&(Stopping, Stopped, Cause::Idle))
    );
    assert_eq!(core.idle_at(), None);
}

#[test]
fn converge_restarts_only_a_running_generation_of_another_definition() {
    let mut core = new_core(Supervision::default());
    let mut double = Double::default();
    // Not running: a start, whatever the definition.
    drive(&mut core, &mut double, converge(true));
    assert_eq!(
        double.records(),
        vec![
            (Stopped, Starting, Cause::Start),
            (Starting, Running, Cause::Start)
        ]
    );
    // Running, same definition: nothing at all.
    double.forget();
    drive(&mut core, &mut double, converge(false));
    assert!(double.records().is_empty());
    assert_eq!(double.answers(), vec![Ok(())]);
    assert_eq!(core.state().generation(), Some(1));
    // Running, another definition: stop, confirmed, then the next generation (L4).
    double.forget();
    drive(&mut core, &mut double, converge(true));
    assert_eq!(
        double.records(),
        vec![
            (Running, Stopping, Cause::Reconcile),
            (Stopping, Stopped, Cause::Reconcile),
            (Stopped, Starting, Cause::Reconcile),
            (Starting, Running, Cause::Reconcile),
        ]
    );
    assert_eq!(core.state().generation(), Some(2));
    // A teardown that fails leaves the next generation unstarted (L4, L7).
    double.forget();
    double.teardowns.push_back(left(&[9]));
    drive(&mut core, &mut double, converge(true));
    assert!(matches!(core.state(), State::Quarantined { .. }));
    assert_eq!(double.count(|e| matches!(e, Effect::Launch(_))), 0);
    // ... and a quarantine refuses a converge like a start.
    double.forget();
    drive(&mut core, &mut double, converge(true));
    assert_eq!(double.answers(), vec![Err(ErrorKind::Quarantined)]);
}

#[test]
fn converge_starts_a_crash_loop_only_for_a_new_definition() {
    let mut core = new_core(restarting(0));
    let mut double = Double::default();
    up(&mut core, &mut double);
    drive(&mut core, &mut double, Input::ExitSeen);
    assert!(matches!(core.state(), State::CrashLoop { .. }), "{core:?}");
    double.forget();
    drive(&mut core, &mut double, converge(false));
    assert_eq!(double.answers(), vec![Err(ErrorKind::CrashLoop)]);
    double.forget();
    drive(&mut core, &mut double, converge(true));
    assert_eq!(double.answers(), vec![Ok(())]);
    assert!(matches!(core.state(), State::Running { generation: 2, .. }));
}

#[test]
fn new_settings_apply_without_a_restart() {
    let mut core = new_core(Supervision::default());
    let mut double = Double::default();
    up(&mut core, &mut double);
    assert_eq!(core.ping_at(), None);
    assert_eq!(core.idle_at(), None);
    let health = HealthCheck {
        interval: ms(300),
        timeout: ms(100),
        failures: 2,
    };
    let now = double.now;
    double.forget();
    drive(
        &mut core,
        &mut double,
        Input::Configure(Supervision {
            health: Some(health),
            idle_timeout: Some(ms(5000)),
            ..Supervision::default()
        }),
    );
    // Nothing is recorded, started or stopped; the timers follow the settings.
    assert!(double.log.is_empty());
    assert!(matches!(core.state(), State::Running { generation: 1, .. }));
    assert_eq!(core.ping_at(), Some(now + ms(300)));
    assert!(core.idle_at().is_some());
    drive(
        &mut core,
        &mut double,
        Input::Configure(Supervision::default()),
    );
    assert_eq!(core.ping_at(), None);
    assert_eq!(core.idle_at(), None);
    assert!(double.log.is_empty());
}

/// A server that crashes 50 ms after each start, restarted when its retry is due,
/// four times, by a core seeded with `seed`: every effect, and each restart delay.
fn crash_and_restart(seed: u64) -> (Vec<Effect>, Vec<Duration>) {
    let mut core = Core::new(State::Stopped, 0, restarting(5), *T0, seed);
    let mut double = Double::default();
    up(&mut core, &mut double);
    let mut delays = Vec::new();
    for _ in 0..4 {
        double.now += ms(50);
        drive(&mut core, &mut double, Input::ExitSeen);
        let due = core.retry_at().expect("a retry is scheduled");
        delays.push(due - double.now);
        double.now = due;
        drive(&mut core, &mut double, Input::Retry);
        assert_eq!(core.state().phase(), Running);
    }
    (double.log, delays)
}

#[test]
fn the_same_seed_and_inputs_give_the_same_effects_and_the_same_jitter() {
    let (log, delays) = crash_and_restart(11);
    assert_eq!(crash_and_restart(11), (log.clone(), delays.clone()));
    assert_eq!(log.iter().filter(|e| matches!(e, Effect::Launch(_))).count(), 5);
    // The jitter is drawn: the delays are not the undisturbed 100, 200, 400, 800 ms.
    assert_ne!(delays, vec![ms(100), ms(200), ms(400), ms(800)]);
}

#[test]
fn different_seeds_give_different_jitter_within_the_same_bounds() {
    assert_ne!(crash_and_restart(1).1, crash_and_restart(2).1);
    let mut first = Vec::new();
    for seed in 0..16 {
        let (_, delays) = crash_and_restart(seed);
        // Restart n waits 100 ms × 2^n, times a factor in [0.8, 1.2) (design §8).
        for (n, delay) in delays.iter().enumerate() {
            let base = ms(100) * 2u32.pow(n as u32);
            assert!(
                *delay >= base.mul_f64(0.8) && *delay < base.mul_f64(1.2),
                "seed {seed}, restart {n}: {delay:?}"
            );
        }
        first.push(delays[0]);
    }
    first.sort();
    first.dedup();
    assert!(first.len() >= 12, "16 seeds, {} first delays", first.len());
}
