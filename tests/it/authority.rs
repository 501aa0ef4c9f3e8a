//! The authority against real fixture processes, through the library API: the
//! lifecycle rules of docs/design.md §4 that one authority (or a few side by side) must keep,
//! checked on generations, on the event sequence and on `/proc`.
//!
//! Every process a test starts carries its own `MCPFLEET_TEST_ID`, so that the end of
//! each test can assert that nothing it started is alive. The event sink stores each
//! event a little late on purpose: an event emitted after its reply would then be
//! missing when the caller looks, which is what the L12 checks catch. When it records
//! a transition to `starting`, it also notes which processes of the server's earlier
//! generations are still alive (L4: there must be none).

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{
    Freezer, TEST_ID_VAR, TestFleet, fixture_bin, is_alive, kill_all, read_pid_file,
};
use mcpfleet::config::Timeout;
use mcpfleet::lifecycle::authority::{
    self, CallOptions, Context, Endpoint, Handle, Reply, RequestError, ServerConfig,
};
use mcpfleet::lifecycle::error::ErrorKind;
use mcpfleet::lifecycle::events::{Cause, Event, EventSink};
use mcpfleet::lifecycle::state::{Generation, Intent, Phase};
use mcpfleet::lifecycle::summary::Outcome;
use mcpfleet::process::spawn::{Launch, Tag};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long the sink waits before it stores an event. Long enough that a caller woken
/// by a reply sent before the event was recorded would look before it is stored.
const RECORD_DELAY: Duration = Duration::from_millis(15);

/// The limit of every test body: a hang fails the test instead of blocking CI.
const TEST_LIMIT: Duration = Duration::from_secs(20);

const RECONNECT: Intent = Intent::Reconnect {
    if_generation: None,
};

/// One event as the sink saw it.
#[derive(Debug, Clone)]
struct Recorded {
    event: Event,
    /// For a transition to `starting`: the living processes of the server's earlier
    /// generations at that moment.
    earlier_alive: Vec<i32>,
}

struct Recorder {
    /// The authorities' tag scope, to find a generation's processes by their tag.
    scope: String,
    log: Mutex<Vec<Recorded>>,
}

impl EventSink for Recorder {
    fn record(&self, event: &Event) {
        let mut earlier_alive = Vec::new();
        if event.to == Phase::Starting && event.from != Phase::Starting {
            let earlier: BTreeSet<Generation> = self
                .log
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r.event.server == event.server)
                .filter_map(|r| r.event.generation)
                .filter(|g| Some(*g) != event.generation)
                .collect();
            let entries: Vec<Vec<u8>> = earlier
                .into_iter()
                .map(|g| Tag::new(&self.scope, &event.server, g).environ_entry())
                .collect();
            earlier_alive = alive_with_any(&entries);
        }
        // Not under the lock: a reader must not be made to wait for the event.
        std::thread::sleep(RECORD_DELAY);
        self.log.lock().unwrap().push(Recorded {
            event: event.clone(),
            earlier_alive,
        });
    }
}

/// Living processes whose environment holds one of `entries` exactly.
fn alive_with_any(entries: &[Vec<u8>]) -> Vec<i32> {
    if entries.is_empty() {
        return Vec::new();
    }
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|var| entries.iter().any(|e| e == var))
            })
        })
        .filter(|pid| is_alive(*pid))
        .collect()
}

/// One test's authorities, their event sink, and the processes tagged with its id.
struct Harness {
    fleet: TestFleet,
    sink: Arc<Recorder>,
    ctx: Context,
}

/// A fixture server's deadlines and history.
struct Server<'a> {
    name: &'a str,
    args: &'a [&'a str],
    connect: Option<Duration>,
    cleanup: Option<Duration>,
    last_generation: Generation,
}

impl<'a> Server<'a> {
    fn new(name: &'a str, args: &'a [&'a str]) -> Server<'a> {
        Server {
            name,
            args,
            connect: Some(Duration::from_secs(5)),
            cleanup: Some(Duration::from_secs(1)),
            last_generation: 0,
        }
    }
}

impl Harness {
    fn new(label: &str) -> Harness {
        let fleet = TestFleet::raw(label, "version: 1\nservers: {}\n");
        let scope = format!("authority-test-{}", fleet.test_id);
        let sink = Arc::new(Recorder {
            scope: scope.clone(),
            log: Mutex::default(),
        });
        let ctx = Context {
            events: sink.clone(),
            interrupt: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            escalate: CancellationToken::new(),
            tracker: TaskTracker::new(),
            tag_scope: scope,
            start_slots: mcpfleet::lifecycle::authority::start_slots(64),
        };
        Harness { fleet, sink, ctx }
    }

    fn spawn(&self, server: Server<'_>) -> Handle {
        let program = fixture_bin().to_str().expect("fixture path is UTF-8");
        let args: Vec<String> = server.args.iter().map(|a| a.to_string()).collect();
        let env = vec![(TEST_ID_VAR.to_owned(), self.fleet.test_id.clone())];
        let config = ServerConfig {
            name: server.name.to_owned(),
            endpoint: Endpoint::Stdio(Launch::new(
                program,
                &args,
                false,
                env,
                self.fleet.dir.path().to_path_buf(),
                server.name,
            )),
            command_shown: program.to_owned(),
            connect_timeout: server.connect.map_or(Timeout::Never, Timeout::After),
            cleanup_timeout: server.cleanup.map_or(Timeout::Never, Timeout::After),
            stderr_log: None,
            supervision: Default::default(),
            definition: Default::default(),
        };
        authority::spawn(config, server.last_generation, self.ctx.clone())
    }

    fn pid_file(&self, name: &str) -> String {
        let path = self.fleet.dir.path().join(format!("{name}.pid"));
        path.to_str().expect("temp path is UTF-8").to_owned()
    }

    fn recorded(&self, server: &str) -> Vec<Recorded> {
        let log = self.sink.log.lock().unwrap();
        log.iter()
            .filter(|r| r.event.server == server)
            .cloned()
            .collect()
    }

    fn events(&self, server: &str) -> Vec<Event> {
        self.recorded(server).into_iter().map(|r| r.event).collect()
    }

    /// Living processes that carry this test's id.
    fn alive(&self) -> Vec<i32> {
        let mut pids = self.fleet.alive();
        pids.sort_unstable();
        pids
    }

    /// Waits until the sink holds an event that `wanted` accepts.
    async fn wait_for_event(
        &self,
        server: &str,
        limit: Duration,
        wanted: impl Fn(&Event) -> bool,
    ) -> Event {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(e) = self.events(server).into_iter().find(&wanted) {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no such event of `{server}` within {limit:?}: {:#?}",
                self.events(server)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// L12, checked right after a reply arrives: the transitions it reports are
    /// already in the sink.
    #[track_caller]
    fn assert_recorded(&self, reply: &Reply) {
        let snapshot = &reply.snapshot;
        let events = self.events(&snapshot.name);
        let has = |f: &dyn Fn(&Event) -> bool| events.iter().any(f);
        if reply.connect.is_some() {
            assert!(
                has(&|e| e.generation == snapshot.generation
                    && e.from == Phase::Starting
                    && e.to == Phase::Running),
                "the start of a reply is not in the sink: {reply:#?}\n{events:#?}"
            );
        }
        if let Some(t) = &reply.teardown {
            assert!(
                has(&|e| e.generation == Some(t.generation)
                    && matches!(e.from, Phase::Stopping | Phase::Starting)
                    && matches!(e.to, Phase::Stopped | Phase::Failed | Phase::Quarantined)),
                "the teardown of a reply is not in the sink: {reply:#?}\n{events:#?}"
            );
        }
        // A request cancelled before it ran changed nothing and has no event.
        if let Err(error) = &reply.result
            && error.kind != ErrorKind::Cancelled
        {
            assert!(
                has(&|e| e.error.as_ref().map(|x| x.kind) == Some(error.kind)),
                "the error of a reply is not in the sink: {reply:#?}\n{events:#?}"
            );
        }
        // A server that never had a generation is in its first state, which no
        // event records (a stop that found nothing to do, whenever it is checked).
        let untouched = snapshot.state == Phase::Stopped && snapshot.generation.is_none();
        if !(untouched || events.is_empty() && snapshot.state == Phase::Stopped) {
            assert!(
                has(&|e| e.to == snapshot.state
                    && (snapshot.state == Phase::Stopped || e.generation == snapshot.generation)),
                "the state of a reply was never recorded: {reply:#?}\n{events:#?}"
            );
        }
    }

    /// Ends every authority, waits for their tasks, and fails on any process still
    /// alive 2 s later (what is left is killed first).
    async fn finish(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        tokio::time::timeout(Duration::from_secs(10), self.ctx.tracker.wait())
            .await
            .expect("the authorities did not end within 10 s of shutdown");
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let alive = self.alive();
            if alive.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                kill_all(&alive);
                panic!("processes left behind: {alive:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn within<T>(body: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_LIMIT, body)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {TEST_LIMIT:?}"))
}

async fn request(handle: &Handle, intent: Intent) -> Reply {
    handle
        .request(intent, CallOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{intent:?} got no reply: {e}"))
}

/// (generation, from, to, cause, error kind): what the sequence tests compare.
type Step = (Option<Generation>, Phase, Phase, Cause, Option<ErrorKind>);

fn steps(events: &[Event]) -> Vec<Step> {
    events
        .iter()
        .map(|e| {
            (
                e.generation,
                e.from,
                e.to,
                e.cause,
                e.error.as_ref().map(|x| x.kind),
            )
        })
        .collect()
}

/// L1 and L4 on one server's events: each transition starts where the previous one
/// ended, a generation starts only from `stopped` or `failed` and only once nothing
/// of an earlier generation is alive, and each generation moves on alone.
#[track_caller]
fn assert_one_at_a_time(recorded: &[Recorded]) {
    let all: Vec<&Event> = recorded.iter().map(|r| &r.event).collect();
    let mut phase = Phase::Stopped;
    let mut current: Option<Generation> = None;
    let mut last_start: Generation = 0;
    for (i, r) in recorded.iter().enumerate() {
        let e = &r.event;
        assert_eq!(
            e.from, phase,
            "event {i} does not start where the one before ended: {all:#?}"
        );
        match (e.from, e.to) {
            (Phase::Stopped | Phase::Failed, Phase::Starting) => {
                let g = e.generation.expect("a start has a generation");
                assert!(g > last_start, "generation {g} reused: {all:#?}");
                assert!(
                    r.earlier_alive.is_empty(),
                    "generation {g} started while {:?} of an earlier one lived",
                    r.earlier_alive
                );
                last_start = g;
                current = Some(g);
            }
            (Phase::Starting, Phase::Running | Phase::Failed | Phase::Quarantined)
            | (Phase::Running, Phase::Stopping)
            | (Phase::Stopping, Phase::Stopped | Phase::Quarantined) => {
                assert_eq!(e.generation, current, "event {i}: {all:#?}");
            }
            (from, to) if from == to => {
                assert!(e.error.is_some(), "event {i} changes nothing: {all:#?}");
            }
            (from, to) => panic!("event {i}: no transition from {from:?} to {to:?}: {all:#?}"),
        }
        phase = e.to;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_requests_from_many_tasks_run_one_at_a_time_in_arrival_order() {
    let h = Harness::new("authority-l1-order");
    within(async {
        let server = h.spawn(Server::new("turns", &["--init-delay-ms", "400"]));
        // Every request is sent while the first start is still under way, 50 ms apart,
        // each from its own task: they queue, and run in the order they arrived.
        let intents = [
            Intent::Start,
            Intent::Stop,
            RECONNECT,
            Intent::Stop,
            RECONNECT,
        ];
        let began = Instant::now();
        let tasks: Vec<_> = intents
            .into_iter()
            .enumerate()
            .map(|(i, intent)| {
                let server = server.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50) * i as u32).await;
                    request(&server, intent).await
                })
            })
            .collect();
        let mut replies = Vec::new();
        for task in tasks {
            let reply = task.await.expect("request task");
            h.assert_recorded(&reply);
            assert!(reply.result.is_ok(), "{reply:#?}");
            replies.push(reply);
        }
        let states: Vec<(Phase, Option<Generation>)> = replies
            .iter()
            .map(|r| (r.snapshot.state, r.snapshot.generation))
            .collect();
        assert_eq!(
            states,
            vec![
                (Phase::Running, Some(1)),
                // A stopped server shows the generation it last had.
                (Phase::Stopped, Some(1)),
                (Phase::Running, Some(2)),
                (Phase::Stopped, Some(2)),
                (Phase::Running, Some(3)),
            ]
        );
        use Cause::{Reconnect, Start, Stop};
        use Phase::{Running, Starting, Stopped, Stopping};
        let recorded = h.recorded("turns");
        assert_one_at_a_time(&recorded);
        let events: Vec<Event> = recorded.into_iter().map(|r| r.event).collect();
        assert_eq!(
            steps(&events),
            vec![
                (Some(1), Stopped, Starting, Start, None),
                (Some(1), Starting, Running, Start, None),
                (Some(1), Running, Stopping, Stop, None),
                (Some(1), Stopping, Stopped, Stop, None),
                (Some(2), Stopped, Starting, Reconnect, None),
                (Some(2), Starting, Running, Reconnect, None),
                (Some(2), Running, Stopping, Stop, None),
                (Some(2), Stopping, Stopped, Stop, None),
                (Some(3), Stopped, Starting, Reconnect, None),
                (Some(3), Starting, Running, Reconnect, None),
            ]
        );
        // The stop sent 50 ms in waited for the 400 ms start before it was taken.
        assert!(events[2].waited_ms >= 250, "{:#?}", events[2]);
        // Three starts of 400 ms each, one after the other.
        assert!(began.elapsed() >= Duration::from_millis(1200));
        assert_eq!(h.alive(), vec![replies[4].snapshot.pid.unwrap()]);
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_a_burst_of_concurrent_requests_never_overlaps_generations() {
    let h = Harness::new("authority-l1-burst");
    within(async {
        let server = h.spawn(Server::new("burst", &["--init-delay-ms", "150"]));
        let intents = [
            Intent::Start,
            RECONNECT,
            Intent::Stop,
            Intent::Start,
            RECONNECT,
        ];
        let barrier = Arc::new(tokio::sync::Barrier::new(intents.len()));
        let tasks: Vec<_> = intents
            .into_iter()
            .map(|intent| {
                let (server, barrier) = (server.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    request(&server, intent).await
                })
            })
            .collect();
        let mut replies = Vec::new();
        for task in tasks {
            let reply = task.await.expect("request task");
            h.assert_recorded(&reply);
            assert!(reply.result.is_ok(), "{reply:#?}");
            replies.push(reply);
        }
        let recorded = h.recorded("burst");
        assert_one_at_a_time(&recorded);
        let events: Vec<Event> = recorded.into_iter().map(|r| r.event).collect();
        let starts: Vec<Generation> = events
            .iter()
            .filter(|e| e.to == Phase::Starting)
            .filter_map(|e| e.generation)
            .collect();
        let started: BTreeSet<Generation> = replies
            .iter()
            .filter(|r| r.connect.is_some())
            .filter_map(|r| r.snapshot.generation)
            .collect();
        // Each reconnect starts a generation whatever the order; ids run 1, 2, 3...
        assert!(starts.len() >= 2, "{events:#?}");
        assert_eq!(starts, (1..=starts.len() as u64).collect::<Vec<_>>());
        assert_eq!(started, starts.iter().copied().collect());
        let stops = events.iter().filter(|e| e.to == Phase::Stopped).count();
        let torn_down = replies.iter().filter(|r| r.teardown.is_some()).count();
        assert_eq!(stops, torn_down, "{events:#?}");
        let alive = h.alive();
        assert!(
            alive.len() <= 1,
            "more than one generation alive: {alive:?}"
        );
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_a_slow_server_does_not_delay_another() {
    let h = Harness::new("authority-l1-independent");
    within(async {
        let slow = h.spawn(Server::new("slow", &["--init-delay-ms", "3000"]));
        let fast = h.spawn(Server::new("fast", &[]));
        let slow_start = tokio::spawn({
            let slow = slow.clone();
            async move { request(&slow, Intent::Start).await }
        });
        h.wait_for_event("slow", Duration::from_secs(2), |e| e.to == Phase::Starting)
            .await;

        let t = Instant::now();
        let started = request(&fast, Intent::Start).await;
        h.assert_recorded(&started);
        assert!(started.result.is_ok(), "{started:#?}");
        let stopped = request(&fast, Intent::Stop).await;
        h.assert_recorded(&stopped);
        assert!(stopped.result.is_ok(), "{stopped:#?}");
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(1500),
            "start and stop of `fast` took {took:?} while `slow` was starting"
        );
        assert!(
            !h.events("slow").iter().any(|e| e.to == Phase::Running),
            "`slow` was already running: the 3 s start cannot have delayed `fast`"
        );

        let slow_reply = slow_start.await.expect("slow start task");
        h.assert_recorded(&slow_reply);
        assert!(slow_reply.result.is_ok(), "{slow_reply:#?}");
        assert!(slow_reply.connect.unwrap() >= Duration::from_millis(3000));
        let stop = request(&slow, Intent::Stop).await;
        h.assert_recorded(&stop);
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_a_request_that_misses_its_wait_deadline_is_withdrawn_and_never_runs() {
    let h = Harness::new("authority-l2-withdrawn");
    within(async {
        let server = h.spawn(Server::new("slow", &["--init-delay-ms", "2000"]));
        let start = tokio::spawn({
            let server = server.clone();
            async move { request(&server, Intent::Start).await }
        });
        h.wait_for_event("slow", Duration::from_secs(2), |e| e.to == Phase::Starting)
            .await;

        let impatient = CallOptions {
            wait_timeout: Timeout::After(Duration::from_millis(100)),
            ..CallOptions::default()
        };
        let t = Instant::now();
        let (reconnect, stop) = tokio::join!(
            server.request(RECONNECT, impatient),
            server.request(Intent::Stop, impatient)
        );
        let took = t.elapsed();
        for outcome in [reconnect, stop] {
            match outcome {
                Err(RequestError::Busy(name, wait)) => {
                    assert_eq!(name, "slow");
                    assert_eq!(wait, Timeout::After(Duration::from_millis(100)));
                }
                other => panic!("expected Busy, got {other:?}"),
            }
        }
        assert!(
            (Duration::from_millis(100)..Duration::from_millis(500)).contains(&took),
            "Busy came after {took:?}"
        );

        let started = start.await.expect("start task");
        h.assert_recorded(&started);
        assert!(started.result.is_ok(), "{started:#?}");
        let pid = started.snapshot.pid.expect("a running server has a pid");
        // A snapshot is answered after everything queued before it: had the withdrawn
        // reconnect or stop run, it would show here.
        let snapshot = server.snapshot().await.expect("snapshot");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let later = server.snapshot().await.expect("snapshot");
        for s in [&snapshot, &later] {
            assert_eq!(
                (s.state, s.generation, s.pid),
                (Phase::Running, Some(1), Some(pid))
            );
        }
        use Phase::{Running, Starting, Stopped};
        assert_eq!(
            steps(&h.events("slow")),
            vec![
                (Some(1), Stopped, Starting, Cause::Start, None),
                (Some(1), Starting, Running, Cause::Start, None),
            ]
        );
        assert_eq!(h.alive(), vec![pid]);

        // The wait deadline bounds only the wait to be taken: a request taken in time
        // runs to its end, here a 2 s reconnect under a 100 ms wait deadline.
        let reconnect = server
            .request(RECONNECT, impatient)
            .await
            .expect("an idle authority takes the request at once");
        h.assert_recorded(&reconnect);
        assert!(reconnect.result.is_ok(), "{reconnect:#?}");
        assert_eq!(reconnect.snapshot.generation, Some(2));
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l3_l4_reconnect_confirms_the_old_generation_gone_before_the_next_starts() {
    let h = Harness::new("authority-l4-reconnect");
    within(async {
        let server = h.spawn(Server {
            last_generation: 41,
            ..Server::new("recon", &[])
        });
        let first = request(&server, Intent::Start).await;
        h.assert_recorded(&first);
        assert!(first.result.is_ok(), "{first:#?}");
        // One more than the highest generation this server ever had.
        assert_eq!(first.snapshot.generation, Some(42));
        let old = first.snapshot.pid.unwrap();
        assert!(is_alive(old));

        let second = request(&server, RECONNECT).await;
        h.assert_recorded(&second);
        assert!(second.result.is_ok(), "{second:#?}");
        assert_eq!(second.snapshot.state, Phase::Running);
        assert_eq!(second.snapshot.generation, Some(43));
        assert!(second.connect.is_some());
        let new = second.snapshot.pid.unwrap();
        assert_ne!(new, old);
        let teardown = second
            .teardown
            .as_ref()
            .expect("the reconnect tore down 42");
        assert_eq!(teardown.generation, 42);
        assert_eq!(teardown.outcome, Outcome::Clean);
        assert!(teardown.leftover_pids.is_empty());
        assert!(!is_alive(old), "generation 42 ({old}) is still alive");
        assert!(is_alive(new));

        use Phase::{Running, Starting, Stopped, Stopping};
        let recorded = h.recorded("recon");
        assert_one_at_a_time(&recorded);
        let events: Vec<Event> = recorded.iter().map(|r| r.event.clone()).collect();
        assert_eq!(
            steps(&events[2..]),
            vec![
                (Some(42), Running, Stopping, Cause::Reconnect, None),
                (Some(42), Stopping, Stopped, Cause::Reconnect, None),
                (Some(43), Stopped, Starting, Cause::Reconnect, None),
                (Some(43), Starting, Running, Cause::Reconnect, None),
            ]
        );
        // Checked by the sink at the moment 43 began: nothing of 42 was alive.
        assert_eq!(recorded[4].earlier_alive, Vec::<i32>::new());
        assert_eq!(h.alive(), vec![new]);
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l11_fencing_refuses_a_stale_generation_and_admits_one_of_two_racers() {
    let h = Harness::new("authority-l11-fencing");
    within(async {
        let server = h.spawn(Server::new("fenced", &[]));
        let first = request(&server, Intent::Start).await;
        h.assert_recorded(&first);
        let pid = first.snapshot.pid.unwrap();
        assert_eq!(first.snapshot.generation, Some(1));

        let stale = request(
            &server,
            Intent::Reconnect {
                if_generation: Some(7),
            },
        )
        .await;
        h.assert_recorded(&stale);
        let error = stale
            .result
            .as_ref()
            .expect_err("a stale generation is refused");
        assert_eq!(error.kind, ErrorKind::Fenced);
        assert_eq!(
            (
                stale.snapshot.state,
                stale.snapshot.generation,
                stale.snapshot.pid
            ),
            (Phase::Running, Some(1), Some(pid))
        );
        assert!(stale.teardown.is_none() && stale.connect.is_none());
        assert!(is_alive(pid));
        let events = h.events("fenced");
        assert_eq!(
            steps(&events[2..]),
            vec![(
                Some(1),
                Phase::Running,
                Phase::Running,
                Cause::Reconnect,
                Some(ErrorKind::Fenced)
            )]
        );

        // Two scripts that both saw generation 1 decide to reconnect it.
        let fence = Intent::Reconnect {
            if_generation: Some(1),
        };
        let (a, b) = tokio::join!(request(&server, fence), request(&server, fence));
        h.assert_recorded(&a);
        h.assert_recorded(&b);
        let (won, lost) = if a.result.is_ok() { (a, b) } else { (b, a) };
        assert!(won.result.is_ok(), "{won:#?}");
        assert_eq!(won.snapshot.generation, Some(2));
        assert_eq!(
            lost.result.as_ref().map_err(|e| e.kind),
            Err(ErrorKind::Fenced),
            "{lost:#?}"
        );
        assert_eq!(lost.snapshot.generation, Some(2));
        let recorded = h.recorded("fenced");
        assert_one_at_a_time(&recorded);
        let starts = recorded
            .iter()
            .filter(|r| r.event.to == Phase::Starting)
            .count();
        assert_eq!(starts, 2, "two reconnects with one fence started twice");
        assert!(!is_alive(pid));
        assert_eq!(h.alive(), vec![won.snapshot.pid.unwrap()]);
    })
    .await;
    h.finish().await;
}

/// A process that is not a subreaper adopts no orphans: a child that something
/// else in the process started while a server runs (here the test itself) is
/// neither taken for that server's orphan nor ended by its teardown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l13_a_child_the_host_started_is_not_taken_for_a_servers_orphan() {
    let h = Harness::new("authority-l13-host-child");
    within(async {
        let server = h.spawn(Server::new("lone", &[]));
        let started = request(&server, Intent::Start).await;
        h.assert_recorded(&started);
        let mut neighbour = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = neighbour.id() as i32;
        // The lineages are refreshed by every pass over the process table; a
        // stop makes passes of its own before and during the teardown.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stopped = request(&server, Intent::Stop).await;
        h.assert_recorded(&stopped);
        assert!(
            is_alive(pid),
            "the teardown of a server ended a child it did not start"
        );
        kill_all(&[pid]);
        let _ = neighbour.wait();
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_teardown_outlives_the_caller_that_asked_for_it() {
    let h = Harness::new("authority-l6-caller-gone");
    within(async {
        let pid_file = h.pid_file("stubborn");
        let args = ["--ignore-eof", "--ignore-sigterm", "--pid-file", &pid_file];
        let server = h.spawn(Server {
            cleanup: Some(Duration::from_secs(2)),
            ..Server::new("stubborn", &args)
        });
        let started = request(&server, Intent::Start).await;
        h.assert_recorded(&started);
        let pid = started.snapshot.pid.unwrap();
        assert_eq!(read_pid_file(pid_file.as_ref()).0, pid);

        let caller = tokio::spawn({
            let server = server.clone();
            async move { server.request(Intent::Stop, CallOptions::default()).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        caller.abort();
        let gone = caller.await.expect_err("the caller was aborted");
        assert!(gone.is_cancelled());
        drop(server);
        // stdin EOF and SIGTERM are ignored: only SIGKILL, 1.6 s in, ends it.
        assert!(is_alive(pid), "the teardown cannot be over yet");
        h.wait_for_event("stubborn", Duration::from_secs(5), |e| {
            e.from == Phase::Stopping && e.to == Phase::Stopped
        })
        .await;
        assert!(!is_alive(pid), "stopped is recorded, but {pid} is alive");
        let events = h.events("stubborn");
        use Phase::{Running, Stopped, Stopping};
        assert_eq!(
            steps(&events[2..]),
            vec![
                (Some(1), Running, Stopping, Cause::Stop, None),
                (Some(1), Stopping, Stopped, Cause::Stop, None),
            ]
        );
        assert!(events[3].duration_ms >= 1500, "{:#?}", events[3]);
        assert_eq!(h.alive(), Vec::<i32>::new());
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l7_a_failed_teardown_quarantines_and_start_is_refused() {
    let h = Harness::new("authority-l7-quarantine");
    // A grandchild that no signal ends until it is thawed: the teardown cannot
    // confirm it gone. On failure, dropping the freezer thaws and kills it.
    within(async {
        let freezer = Freezer::new("authority-l7");
        let pid_file = h.pid_file("leaky");
        let args = [
            "--frozen-grandchild",
            freezer.path(),
            "--pid-file",
            &pid_file,
        ];
        let server = h.spawn(Server::new("leaky", &args));
        let started = request(&server, Intent::Start).await;
        h.assert_recorded(&started);
        assert!(started.result.is_ok(), "{started:#?}");
        let (pid, grandchildren) = read_pid_file(pid_file.as_ref());
        assert_eq!(started.snapshot.pid, Some(pid));
        let [gc] = grandchildren[..] else {
            panic!("one grandchild expected: {grandchildren:?}")
        };
        assert!(is_alive(gc));

        let stop = request(&server, Intent::Stop).await;
        h.assert_recorded(&stop);
        let error = stop.result.as_ref().expect_err("the teardown failed");
        assert_eq!(error.kind, ErrorKind::TeardownFailed);
        let teardown = stop.teardown.as_ref().expect("a teardown summary");
        assert_eq!(teardown.generation, 1);
        assert_eq!(teardown.outcome, Outcome::Failed);
        assert!(teardown.leftover_pids.contains(&gc), "{teardown:#?}");
        assert_eq!(stop.snapshot.state, Phase::Quarantined);
        assert_eq!(stop.snapshot.generation, Some(1));
        assert_eq!(
            stop.snapshot.error.as_ref().map(|e| e.kind),
            Some(ErrorKind::TeardownFailed)
        );
        assert!(!is_alive(pid));
        assert!(is_alive(gc));

        std::fs::remove_file(&pid_file).expect("remove pid file");
        for intent in [Intent::Start, RECONNECT] {
            let refused = request(&server, intent).await;
            h.assert_recorded(&refused);
            assert_eq!(
                refused.result.as_ref().map_err(|e| e.kind),
                Err(ErrorKind::Quarantined),
                "{intent:?}: {refused:#?}"
            );
            assert_eq!(refused.snapshot.state, Phase::Quarantined);
            assert_eq!(refused.snapshot.generation, Some(1));
            assert!(refused.connect.is_none() && refused.teardown.is_none());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !std::path::Path::new(&pid_file).exists(),
            "a refused start spawned a server"
        );
        assert_eq!(h.alive(), vec![gc], "only the frozen grandchild lives");
        use Phase::{Quarantined, Running, Stopping};
        let quarantined = Some(ErrorKind::Quarantined);
        assert_eq!(
            steps(&h.events("leaky")[2..]),
            vec![
                (Some(1), Running, Stopping, Cause::Stop, None),
                (
                    Some(1),
                    Stopping,
                    Quarantined,
                    Cause::Stop,
                    Some(ErrorKind::TeardownFailed)
                ),
                (Some(1), Quarantined, Quarantined, Cause::Start, quarantined),
                (
                    Some(1),
                    Quarantined,
                    Quarantined,
                    Cause::Reconnect,
                    quarantined
                ),
            ]
        );
        // The grandchild was frozen on purpose; it is ours to end.
        drop(freezer);
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l8_a_start_that_times_out_is_torn_down_before_the_reply() {
    let h = Harness::new("authority-l8-timeout");
    within(async {
        let pid_file = h.pid_file("mute");
        let args = [
            "--never-answer-init",
            "--ignore-eof",
            "--pid-file",
            &pid_file,
        ];
        let server = h.spawn(Server {
            // Long enough for the fixture to have written its pid file even on a
            // loaded machine, where a start can stall for hundreds of ms.
            connect: Some(Duration::from_millis(1500)),
            ..Server::new("mute", &args)
        });
        let t = Instant::now();
        let reply = request(&server, Intent::Start).await;
        let took = t.elapsed();
        // Looked at before anything else: the process must already be gone.
        let alive_at_reply = h.alive();
        h.assert_recorded(&reply);
        let (pid, _) = read_pid_file(pid_file.as_ref());
        assert_eq!(alive_at_reply, Vec::<i32>::new());
        assert!(!is_alive(pid));
        let error = reply.result.as_ref().expect_err("the start timed out");
        assert_eq!(error.kind, ErrorKind::ConnectTimeout, "{error:#?}");
        let teardown = reply
            .teardown
            .as_ref()
            .expect("the half-start was torn down");
        assert_eq!(teardown.generation, 1);
        assert_eq!(teardown.outcome, Outcome::Escalated);
        assert_eq!(teardown.signal.as_deref(), Some("SIGTERM"));
        assert_eq!(reply.snapshot.state, Phase::Failed);
        assert!(took >= Duration::from_millis(1500), "{took:?}");
        use Phase::{Failed, Starting, Stopped};
        assert_eq!(
            steps(&h.events("mute")),
            vec![
                (Some(1), Stopped, Starting, Cause::Start, None),
                (
                    Some(1),
                    Starting,
                    Failed,
                    Cause::Start,
                    Some(ErrorKind::ConnectTimeout)
                ),
            ]
        );
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l8_a_half_start_whose_teardown_fails_is_quarantined() {
    let h = Harness::new("authority-l8-quarantine");
    // On failure, dropping the freezer thaws and kills the frozen grandchild.
    within(async {
        let freezer = Freezer::new("authority-l8");
        let pid_file = h.pid_file("leaky");
        let args = [
            "--frozen-grandchild",
            freezer.path(),
            "--exit-during-init",
            "3",
            "--pid-file",
            &pid_file,
        ];
        let server = h.spawn(Server::new("leaky", &args));
        let reply = request(&server, Intent::Start).await;
        h.assert_recorded(&reply);
        let (pid, grandchildren) = read_pid_file(pid_file.as_ref());
        let [gc] = grandchildren[..] else {
            panic!("one grandchild expected: {grandchildren:?}")
        };
        let error = reply.result.as_ref().expect_err("the server exited");
        assert_eq!(error.kind, ErrorKind::ConnectFailed);
        let teardown = reply
            .teardown
            .as_ref()
            .expect("the half-start was torn down");
        assert_eq!(teardown.outcome, Outcome::Failed);
        assert_eq!(teardown.leftover_pids, vec![gc]);
        assert_eq!(reply.snapshot.state, Phase::Quarantined);
        assert!(!is_alive(pid));
        assert_eq!(h.alive(), vec![gc]);
        let refused = request(&server, Intent::Start).await;
        h.assert_recorded(&refused);
        assert_eq!(
            refused.result.as_ref().map_err(|e| e.kind),
            Err(ErrorKind::Quarantined)
        );
        use Phase::{Quarantined, Starting, Stopped};
        let connect_failed = Some(ErrorKind::ConnectFailed);
        assert_eq!(
            steps(&h.events("leaky")),
            vec![
                (Some(1), Stopped, Starting, Cause::Start, None),
                (Some(1), Starting, Quarantined, Cause::Start, connect_failed),
                (
                    Some(1),
                    Quarantined,
                    Quarantined,
                    Cause::Start,
                    Some(ErrorKind::Quarantined)
                ),
            ]
        );
        assert_eq!(h.alive(), vec![gc], "the refused start spawned something");
        drop(freezer);
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l8_an_interrupted_start_is_torn_down_and_answered_cancelled() {
    let h = Harness::new("authority-l8-interrupt");
    within(async {
        let pid_file = h.pid_file("slow");
        let args = ["--init-delay-ms", "2000", "--pid-file", &pid_file];
        let server = h.spawn(Server::new("slow", &args));
        let start = tokio::spawn({
            let server = server.clone();
            async move { request(&server, Intent::Start).await }
        });
        let (pid, _) = tokio::task::block_in_place(|| read_pid_file(pid_file.as_ref()));
        assert!(is_alive(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = Instant::now();
        h.ctx.interrupt.cancel();
        let reply = start.await.expect("start task");
        let took = t.elapsed();
        let alive_at_reply = h.alive();
        h.assert_recorded(&reply);
        assert_eq!(alive_at_reply, Vec::<i32>::new());
        assert!(!is_alive(pid));
        let error = reply
            .result
            .as_ref()
            .expect_err("the start was interrupted");
        assert_eq!(error.kind, ErrorKind::Cancelled);
        assert!(reply.teardown.is_some(), "{reply:#?}");
        assert_eq!(reply.snapshot.state, Phase::Failed);
        // Well before the 2 s initialize delay would have ended on its own.
        assert!(took < Duration::from_millis(1500), "{took:?}");
        let events = h.events("slow");
        let last = events.last().unwrap();
        assert_eq!(
            (last.generation, last.from, last.to, last.cause),
            (Some(1), Phase::Starting, Phase::Failed, Cause::Interrupt)
        );

        // The interrupt also refuses new starts, without spawning anything.
        std::fs::remove_file(&pid_file).expect("remove pid file");
        let again = request(&server, Intent::Start).await;
        h.assert_recorded(&again);
        assert_eq!(
            again.result.as_ref().map_err(|e| e.kind),
            Err(ErrorKind::Cancelled)
        );
        assert_eq!(again.snapshot.generation, Some(1));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!std::path::Path::new(&pid_file).exists());
        assert_eq!(h.events("slow").len(), events.len());
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l9_shutdown_answers_every_queued_request() {
    let h = Harness::new("authority-l9-shutdown");
    within(async {
        let server = h.spawn(Server::new("slow", &["--init-delay-ms", "2000"]));
        let start = tokio::spawn({
            let server = server.clone();
            async move { request(&server, Intent::Start).await }
        });
        h.wait_for_event("slow", Duration::from_secs(2), |e| e.to == Phase::Starting)
            .await;
        let queued: Vec<_> = [Intent::Stop, RECONNECT, Intent::Start, Intent::Stop]
            .into_iter()
            .map(|intent| {
                let server = server.clone();
                tokio::spawn(async move { (intent, request(&server, intent).await) })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        h.ctx.shutdown.cancel();

        let started = tokio::time::timeout(Duration::from_secs(5), start)
            .await
            .expect("the start in progress was answered")
            .expect("start task");
        h.assert_recorded(&started);
        // Shutdown ends the start in progress, and what it spawned is torn down (L8, L9).
        assert_eq!(
            started.result.as_ref().map_err(|e| e.kind),
            Err(ErrorKind::Cancelled),
            "{started:#?}"
        );
        assert!(started.teardown.is_some(), "{started:#?}");
        for task in queued {
            let (intent, reply) = tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("a queued request was never answered")
                .expect("request task");
            h.assert_recorded(&reply);
            assert_eq!(
                reply.result.as_ref().map_err(|e| e.kind),
                Err(ErrorKind::Cancelled),
                "{intent:?}: {reply:#?}"
            );
            assert!(reply.connect.is_none() && reply.teardown.is_none());
        }
        h.ctx.tracker.close();
        tokio::time::timeout(Duration::from_secs(5), h.ctx.tracker.wait())
            .await
            .expect("the authority ended");
        assert_eq!(h.alive(), Vec::<i32>::new());
        let events = h.events("slow");
        assert_eq!(events.len(), 2, "{events:#?}");
        assert_eq!(
            (events[0].from, events[0].to),
            (Phase::Stopped, Phase::Starting)
        );
        assert_eq!(
            (
                events[1].generation,
                events[1].from,
                events[1].to,
                events[1].cause
            ),
            (Some(1), Phase::Starting, Phase::Failed, Cause::Interrupt)
        );
        assert_eq!(
            server
                .request(Intent::Start, CallOptions::default())
                .await
                .map(|_| ()),
            Err(RequestError::Gone("slow".to_owned()))
        );
    })
    .await;
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l12_every_transition_is_recorded_before_the_reply() {
    let h = Harness::new("authority-l12-events");
    within(async {
        use Cause::{Reconnect, Start, Stop};
        use Phase::{Failed, Running, Starting, Stopped, Stopping};
        let server = h.spawn(Server::new("seq", &[]));
        let mut expected: Vec<Step> = Vec::new();
        let mut check = |reply: &Reply, added: &[Step]| {
            expected.extend_from_slice(added);
            assert_eq!(
                steps(&h.events("seq")),
                expected,
                "the sink right after the reply {reply:#?}"
            );
            h.assert_recorded(reply);
        };

        let r = request(&server, Intent::Start).await;
        assert!(r.connect.is_some());
        check(
            &r,
            &[
                (Some(1), Stopped, Starting, Start, None),
                (Some(1), Starting, Running, Start, None),
            ],
        );
        let r = request(&server, Intent::Start).await;
        assert!(r.result.is_ok() && r.connect.is_none());
        check(&r, &[]);
        let r = request(&server, RECONNECT).await;
        check(
            &r,
            &[
                (Some(1), Running, Stopping, Reconnect, None),
                (Some(1), Stopping, Stopped, Reconnect, None),
                (Some(2), Stopped, Starting, Reconnect, None),
                (Some(2), Starting, Running, Reconnect, None),
            ],
        );
        let fence = Intent::Reconnect {
            if_generation: Some(1),
        };
        let r = request(&server, fence).await;
        let fenced = Some(ErrorKind::Fenced);
        check(&r, &[(Some(2), Running, Running, Reconnect, fenced)]);
        let r = request(&server, Intent::Stop).await;
        check(
            &r,
            &[
                (Some(2), Running, Stopping, Stop, None),
                (Some(2), Stopping, Stopped, Stop, None),
            ],
        );
        let r = request(&server, Intent::Stop).await;
        assert!(r.result.is_ok() && r.teardown.is_none());
        check(&r, &[]);

        let crashing = h.spawn(Server::new("crashing", &["--exit-during-init", "3"]));
        let r = request(&crashing, Intent::Start).await;
        assert_eq!(
            steps(&h.events("crashing")),
            vec![
                (Some(1), Stopped, Starting, Start, None),
                (
                    Some(1),
                    Starting,
                    Failed,
                    Start,
                    Some(ErrorKind::ConnectFailed)
                ),
            ]
        );
        h.assert_recorded(&r);
        let teardown = r
            .teardown
            .as_ref()
            .expect("the failed start was cleaned up");
        assert_eq!(teardown.exit.as_deref(), Some("exit code 3"));

        // Every event carries its time; in order, and the server's name.
        let all: Vec<Event> = h
            .sink
            .log
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.event.clone())
            .collect();
        assert!(all.windows(2).all(|w| w[0].time <= w[1].time), "{all:#?}");
        assert!(
            all.iter()
                .all(|e| e.time.ends_with('Z') && e.time.len() == 24)
        );
    })
    .await;
    h.finish().await;
}

/// L9 with an unbounded connect: shutdown must still end the start in progress, so
/// that the requests queued behind it are answered and the authority ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l9_shutdown_ends_an_authority_stuck_in_an_unbounded_start() {
    let h = Harness::new("authority-l9-unbounded");
    within(async {
        let server = h.spawn(Server {
            connect: None,
            ..Server::new("mute", &["--never-answer-init"])
        });
        let start = tokio::spawn({
            let s = server.clone();
            async move { request(&s, Intent::Start).await }
        });
        h.wait_for_event("mute", Duration::from_secs(2), |e| e.to == Phase::Starting)
            .await;
        let queued = tokio::spawn({
            let s = server.clone();
            async move { request(&s, Intent::Stop).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        h.ctx.shutdown.cancel();
        let answered = tokio::time::timeout(Duration::from_secs(3), queued).await;
        let start_done = start.is_finished();
        h.ctx.tracker.close();
        let ended = tokio::time::timeout(Duration::from_secs(1), h.ctx.tracker.wait()).await;
        assert!(
            answered.is_ok() && ended.is_ok(),
            "3 s after shutdown: queued Stop answered: {}, start answered: {start_done}, authority ended: {}",
            answered.is_ok(),
            ended.is_ok()
        );
    })
    .await;
    h.finish().await;
}
