//! The supervisor through the real binary, against real fixture processes: `up`,
//! `status`, `down`, `reconnect` and `reset` as thin clients of one supervisor per
//! fleet (docs/design.md §3), and the lifecycle rules across processes (L2, L3, L4, L6, L7,
//! L10, L11, L12), checked on the replies, on `events.ndjson`, on `state.json` and
//! on `/proc`.
//!
//! Every test runs its body under a time limit (`within`): a hang fails the test and
//! kills what it started instead of blocking CI. Some fleets carry a `keeper` server
//! that stays up for the whole test: a supervisor with a running server never goes
//! idle, so the property under test is not mixed up with the idle exit (which has a
//! test of its own, `a_command_sent_while_the_idle_supervisor_lingers_is_answered`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// The limit of one command of a test.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------
// Harness

/// Runs `body` on its own thread and fails the test if it has not finished within
/// `limit`; then everything carrying the test's id is killed.
fn within(limit: Duration, fleet: TestFleet, body: impl FnOnce(&TestFleet) + Send + 'static) {
    let fleet = Arc::new(fleet);
    let inner = fleet.clone();
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        body(&inner);
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().expect("test body"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let left = fleet.alive();
            kill_all(&left);
            panic!("the test did not finish within {limit:?} (killed {left:?})");
        }
    }
}

/// `mcpfleet --output json ARGS`, bounded, with its parsed document.
fn json(fleet: &TestFleet, args: &[&str]) -> (Output, Value) {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let out = run_bounded(fleet.command(&all), COMMAND_LIMIT);
    let doc = parse_doc(&out);
    (out, doc)
}

/// Waits for a spawned command, bounded.
fn finish(child: Child, limit: Duration) -> Output {
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for mcpfleet"),
        Err(_) => {
            kill_all(&[pid]);
            panic!("mcpfleet did not finish within {limit:?}");
        }
    }
}

/// Polls `probe` until it gives a value, failing the test after `limit`.
#[track_caller]
fn wait_for<T>(limit: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The pid of the running supervisor (lock file pid, alive).
#[track_caller]
fn supervisor_pid(fleet: &TestFleet) -> i32 {
    let pid = fleet.lock_pid().expect("supervisor.lock names a pid");
    assert!(is_alive(pid), "the supervisor {pid} is not alive");
    assert!(
        cmdline(pid).iter().any(|a| a == "supervise"),
        "pid {pid} is not a supervisor: {:?}",
        cmdline(pid)
    );
    pid
}

fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Field 22 of `/proc/PID/stat`: with the pid, identifies a process.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The environment of `pid`, as `NAME=VALUE` entries.
fn environ(pid: i32) -> Vec<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| b.split(|c| *c == 0).map(<[u8]>::to_vec).collect())
        .unwrap_or_default()
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Living `mcpfleet supervise` processes of this test, as (pid, start time).
fn supervise_processes(fleet: &TestFleet) -> Vec<(i32, u64)> {
    supervise_processes_of(&fleet.test_id)
        .into_iter()
        .map(|(pid, start, _)| (pid, start))
        .collect()
}

/// Living `mcpfleet supervise` processes of the test: pid, start time, parent pid.
fn supervise_processes_of(test_id: &str) -> Vec<(i32, u64, i32)> {
    let id = format!("{TEST_ID_VAR}={test_id}").into_bytes();
    all_pids()
        .into_iter()
        .filter(|p| is_alive(*p))
        .filter(|p| environ(*p).contains(&id))
        .filter(|p| cmdline(*p).iter().any(|a| a == "supervise"))
        .filter_map(|p| Some((p, start_time(p)?, parent_pid(p)?)))
        .collect()
}

/// Field 4 of `/proc/PID/stat`.
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Living processes of one server, by generation.
type Generations = BTreeMap<u64, Vec<i32>>;

/// Living processes of this test that carry a generation tag of `server`, by
/// generation.
fn live_generations(fleet: &TestFleet, server: &str) -> Generations {
    live_generations_of(&fleet.test_id, server)
}

fn live_generations_of(test_id: &str, server: &str) -> Generations {
    let id = format!("{TEST_ID_VAR}={test_id}").into_bytes();
    let mut out = Generations::new();
    for pid in all_pids() {
        // Only fixture processes can carry a server's tag here; reading the short
        // stat line first keeps a sample fast.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let state = stat[close + 1..].split_whitespace().next();
        if !"mcpfleet-fixture".starts_with(comm) || matches!(state, Some("Z" | "X") | None) {
            continue;
        }
        let env = environ(pid);
        if !env.contains(&id) {
            continue;
        }
        let Some(tag) = env.iter().find_map(|e| e.strip_prefix(b"MCPFLEET_TAG=")) else {
            continue;
        };
        // <scope>:<server>:<generation>
        let tag = String::from_utf8_lossy(tag).into_owned();
        let mut parts = tag.rsplitn(3, ':');
        let (Some(generation), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        if name != server {
            continue;
        }
        if let Ok(g) = generation.parse() {
            out.entry(g).or_default().push(pid);
        }
    }
    out
}

/// VmRSS of `pid` in KiB.
fn vm_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// The event log, one JSON value per line.
fn events(fleet: &TestFleet) -> Vec<Value> {
    let text = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}")))
        .collect()
}

fn events_of(fleet: &TestFleet, server: &str) -> Vec<Value> {
    events(fleet)
        .into_iter()
        .filter(|e| e["server"] == server)
        .collect()
}

/// (generation, from, to, cause) of each event, for messages.
fn steps(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "g{} {}->{} ({})",
                e["generation"], e["from"], e["to"], e["cause"]
            )
        })
        .collect()
}

fn gen_of(s: &Value) -> u64 {
    s["generation"]
        .as_u64()
        .unwrap_or_else(|| panic!("no generation in {s}"))
}

fn pid_of(s: &Value) -> i32 {
    s["pid"].as_i64().unwrap_or_else(|| panic!("no pid in {s}")) as i32
}

/// Calls `probe` every few milliseconds on its own thread until dropped or stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(every: Duration, mut probe: impl FnMut() + Send + 'static) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                probe();
                thread::sleep(every);
            }
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().expect("sampler");
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Runs each command on its own thread, all released at once, and returns their
/// outputs in order.
fn run_together(commands: Vec<std::process::Command>) -> Vec<Output> {
    let barrier = Arc::new(Barrier::new(commands.len()));
    let threads: Vec<_> = commands
        .into_iter()
        .map(|cmd| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                run_bounded(cmd, COMMAND_LIMIT)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("command thread"))
        .collect()
}

fn signal(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid), sig);
}

/// A plain fixture server that stays up for the whole test.
const KEEPER: (&str, &[&str], &str) = ("keeper", &[], "");

// ---------------------------------------------------------------------------------
// 1. up / status / down

#[test]
fn up_status_down_round_trip_and_the_idle_supervisor_leaves() {
    let fleet = TestFleet::fixtures(
        "sv-roundtrip",
        &[("alpha", &["--tools", "4"], ""), ("beta", &[], "")],
    );
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        assert_eq!(up["schema_version"], 1);
        assert_eq!(up["command"], "up");
        assert_eq!(up["exit_code"], 0);
        let mut pids = BTreeMap::new();
        for (name, tools) in [("alpha", 4), ("beta", 3)] {
            let s = server(&up, name);
            assert_eq!(s["state"], "running", "{s}");
            assert_eq!(s["generation"], 1, "{s}");
            assert_eq!(s["tools"], tools, "{s}");
            assert_eq!(s["error"], Value::Null, "{s}");
            let pid = pid_of(s);
            assert!(is_alive(pid), "{name}: pid {pid} is not alive");
            pids.insert(name, pid);
        }
        let supervisor = supervisor_pid(fleet);
        let socket = fleet.state_dir().join("control.sock");
        assert!(socket.exists(), "no control socket while serving");
        let starts_before = count(&events(fleet), "starting");
        assert_eq!(starts_before, 2, "{:?}", steps(&events(fleet)));

        // `status` shows the same generations and pids, and starts nothing.
        let (out, status) = json(fleet, &["status"]);
        assert_code(&out, 0);
        assert_eq!(status["command"], "status");
        for (name, pid) in &pids {
            let s = server(&status, name);
            assert_eq!(s["state"], "running", "{s}");
            assert_eq!(s["generation"], 1, "{s}");
            assert_eq!(pid_of(s), *pid, "{s}");
        }
        assert_eq!(count(&events(fleet), "starting"), starts_before);
        assert_eq!(
            supervisor_pid(fleet),
            supervisor,
            "status replaced the supervisor"
        );

        // `down`: verified, clean teardown of both.
        let (out, down) = json(fleet, &["down"]);
        assert_code(&out, 0);
        assert_eq!(down["command"], "down");
        for (name, pid) in &pids {
            let s = server(&down, name);
            assert_eq!(s["state"], "stopped", "{s}");
            assert_eq!(s["pid"], Value::Null, "{s}");
            assert_eq!(s["generation"], 1, "{s}");
            let t = &s["teardown"];
            assert_eq!(t["outcome"], "clean", "{s}");
            assert_eq!(t["leftover_pids"], serde_json::json!([]), "{s}");
            assert!(!is_alive(*pid), "{name}: pid {pid} outlived down");
        }

        // Idle, the supervisor leaves by itself and removes its socket.
        let gone_at = Instant::now();
        wait_for(Duration::from_secs(8), "the idle supervisor exits", || {
            (!is_alive(supervisor)).then_some(())
        });
        assert!(
            gone_at.elapsed() < Duration::from_secs(6),
            "{:?}",
            gone_at.elapsed()
        );
        assert!(!socket.exists(), "the socket outlived its supervisor");

        // With nothing running: `down` exits 0 and `status` reads state.json;
        // neither starts a supervisor.
        let (out, down) = json(fleet, &["down"]);
        assert_code(&out, 0);
        for name in pids.keys() {
            assert_eq!(server(&down, name)["state"], "stopped");
        }
        let (out, status) = json(fleet, &["status"]);
        assert_code(&out, 0);
        for name in pids.keys() {
            let s = server(&status, name);
            assert_eq!(s["state"], "stopped", "{s}");
            assert_eq!(s["generation"], 1, "state.json keeps the generation: {s}");
            assert_eq!(s["pid"], Value::Null, "{s}");
        }
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            assert_eq!(
                supervise_processes(fleet),
                vec![],
                "status or down started a supervisor"
            );
            thread::sleep(Duration::from_millis(20));
        }
        assert!(!socket.exists());
        assert_eq!(count(&events(fleet), "starting"), 2);
        fleet.assert_no_leftovers();
    });
}

fn count(events: &[Value], to: &str) -> usize {
    events.iter().filter(|e| e["to"] == to).count()
}

// ---------------------------------------------------------------------------------
// 2. Ten concurrent `up`

#[test]
fn ten_concurrent_ups_make_one_supervisor_and_one_generation_per_server() {
    let fleet = TestFleet::fixtures("sv-ten-ups", &[("a", &[], ""), ("b", &[], "")]);
    within(Duration::from_secs(60), fleet, |fleet| {
        let seen_supervise: Arc<Mutex<BTreeSet<(i32, u64, i32)>>> = Arc::default();
        let seen_lock: Arc<Mutex<BTreeSet<i32>>> = Arc::default();
        let seen_generations: Arc<Mutex<BTreeSet<(String, u64)>>> = Arc::default();
        let sampler = {
            let (sv, lk, gens) = (
                seen_supervise.clone(),
                seen_lock.clone(),
                seen_generations.clone(),
            );
            let (id, dir) = (fleet.test_id.clone(), fleet.state_dir());
            Sampler::start(Duration::from_millis(5), move || {
                sv.lock().unwrap().extend(supervise_processes_of(&id));
                if let Some(p) = lock_pid_in(&dir) {
                    lk.lock().unwrap().insert(p);
                }
                for name in ["a", "b"] {
                    for g in live_generations_of(&id, name).keys() {
                        gens.lock().unwrap().insert((name.to_owned(), *g));
                    }
                }
            })
        };

        let outs = run_together(
            (0..10)
                .map(|_| fleet.command(&["--output", "json", "up"]))
                .collect(),
        );
        for out in &outs {
            assert_code(out, 0);
            let doc = parse_doc(out);
            for name in ["a", "b"] {
                let s = server(&doc, name);
                assert_eq!(s["state"], "running", "{s}");
                assert_eq!(s["generation"], 1, "{s}");
            }
        }
        let supervisor = supervisor_pid(fleet);
        let (out, status) = json(fleet, &["status"]);
        assert_code(&out, 0);
        for name in ["a", "b"] {
            assert_eq!(server(&status, name)["generation"], 1);
            assert_eq!(
                count(&events_of(fleet, name), "starting"),
                1,
                "{name}: {:?}",
                steps(&events_of(fleet, name))
            );
        }
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        // Until every process of the test is gone: a supervisor that started late
        // would show up here too.
        wait_for(Duration::from_secs(12), "every process exits", || {
            fleet.alive().is_empty().then_some(())
        });
        sampler.stop();

        let generations = seen_generations.lock().unwrap().clone();
        let expected: BTreeSet<(String, u64)> = [("a".to_owned(), 1), ("b".to_owned(), 1)].into();
        assert_eq!(generations, expected, "generations seen alive in /proc");
        // One supervisor: one pid ever in the lock file, one `supervise` process
        // ever alive (a process that lost the lock race still waits for the lock,
        // and takes over when the winner leaves).
        let locks = seen_lock.lock().unwrap().clone();
        let seen = seen_supervise.lock().unwrap().clone();
        // A detached supervisor forks its guardian first (docs/design.md §3): the
        // parent, until it execs `__guard`, still reads `supervise`. It is the
        // supervisor's parent, not a second supervisor.
        let supervisors: Vec<_> = seen
            .iter()
            .filter(|(p, _, _)| !seen.iter().any(|(_, _, parent)| parent == p))
            .collect();
        let described: Vec<String> = seen
            .iter()
            .map(|(p, t, parent)| format!("pid {p} (start time {t}, parent {parent})"))
            .collect();
        assert!(
            locks == BTreeSet::from([supervisor]) && supervisors.len() == 1,
            "ten concurrent ups: pids written to supervisor.lock: {locks:?} (the first \
             lock holder was {supervisor}); `mcpfleet supervise` processes seen: \
             {} {described:?}",
            supervisors.len()
        );
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 3. up racing down racing reconnect

#[test]
fn up_down_and_reconnect_racing_never_overlap_generations() {
    let fleet = TestFleet::fixtures("sv-races", &[("racer", &[], ""), KEEPER]);
    within(Duration::from_secs(90), fleet, |fleet| {
        let (out, _) = json(fleet, &["up"]);
        assert_code(&out, 0);

        let overlaps: Arc<Mutex<Vec<Generations>>> = Arc::default();
        let samples = Arc::new(Mutex::new(0u64));
        let sampler = {
            let (overlaps, samples) = (overlaps.clone(), samples.clone());
            let id = fleet.test_id.clone();
            Sampler::start(Duration::from_millis(1), move || {
                let live = live_generations_of(&id, "racer");
                if live.len() > 1 {
                    overlaps.lock().unwrap().push(live);
                }
                *samples.lock().unwrap() += 1;
            })
        };

        let mut results: Vec<(String, Output)> = Vec::new();
        let mut last_generation = 1u64;
        for round in 0..10 {
            // Fence on the generation of the moment: the fenced reconnect then wins
            // some races and loses others.
            let (out, now) = json(fleet, &["status", "racer"]);
            assert_code(&out, 0);
            let fence = server(&now, "racer")["generation"]
                .as_u64()
                .unwrap_or(last_generation)
                .to_string();
            let mut commands: Vec<Vec<&str>> = vec![
                vec!["up", "racer"],
                vec!["reconnect", "racer"],
                vec!["down", "racer"],
                vec!["reconnect", "racer", "--if-generation", &fence],
                vec!["up", "racer"],
                vec!["reconnect", "racer"],
            ];
            let n = commands.len();
            commands.rotate_left(round % n);
            let outs = run_together(
                commands
                    .iter()
                    .map(|args| {
                        let mut all = vec!["--output", "json"];
                        all.extend_from_slice(args);
                        fleet.command(&all)
                    })
                    .collect(),
            );
            for (args, out) in commands.iter().zip(outs) {
                if let Ok(doc) = serde_json::from_slice::<Value>(&out.stdout)
                    && let Some(g) = server(&doc, "racer")["generation"].as_u64()
                {
                    last_generation = last_generation.max(g);
                }
                results.push((args.join(" "), out));
            }
        }
        sampler.stop();

        // Every command answered, with 0, or 6 for a fenced reconnect.
        for (what, out) in &results {
            match out.status.code() {
                Some(0) => {}
                Some(6) if what.contains("--if-generation") => {
                    let doc = parse_doc(out);
                    let s = server(&doc, "racer");
                    assert_eq!(s["error"]["kind"], "fenced", "{what}: {s}");
                }
                other => panic!(
                    "`{what}` exited {other:?}\nstdout:\n{}\nstderr:\n{}",
                    stdout(out),
                    stderr(out)
                ),
            }
        }
        let mut codes: BTreeMap<Option<i32>, usize> = BTreeMap::new();
        for (_, out) in &results {
            *codes.entry(out.status.code()).or_default() += 1;
        }
        eprintln!(
            "races: exit codes {codes:?}, {} samples of /proc, last generation {last_generation}",
            samples.lock().unwrap()
        );
        let overlaps = overlaps.lock().unwrap().clone();
        assert!(
            overlaps.is_empty(),
            "two generations of racer alive at once ({} of {} samples): {:?}",
            overlaps.len(),
            samples.lock().unwrap(),
            &overlaps[..overlaps.len().min(5)]
        );

        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        let log = events_of(fleet, "racer");
        assert_consistent(&log);
        let starts = count(&log, "starting") as u64;
        assert!(starts >= 2, "the races started nothing: {:?}", steps(&log));
        assert_eq!(
            starts,
            log.iter()
                .filter_map(|e| e["generation"].as_u64())
                .max()
                .unwrap(),
            "every generation started once: {:?}",
            steps(&log)
        );
        fleet.assert_no_leftovers();
    });
}

/// Replays one server's events: generations only grow (by one per start), a new
/// generation starts only after the previous one has stopped (or failed), and each
/// transition leaves from the state the previous one reached.
#[track_caller]
fn assert_consistent(log: &[Value]) {
    let shown = steps(log);
    let mut state = "stopped".to_owned();
    let mut current: Option<u64> = None;
    let mut highest = 0u64;
    for (i, e) in log.iter().enumerate() {
        let from = e["from"].as_str().unwrap();
        let to = e["to"].as_str().unwrap();
        let generation = e["generation"].as_u64();
        assert_eq!(
            from, state,
            "event {i} leaves from the wrong state: {shown:?}"
        );
        if let Some(g) = generation {
            assert!(g >= highest, "event {i}: generation went back: {shown:?}");
        }
        if to == "starting" {
            let g = generation.expect("a start has a generation");
            assert!(
                current.is_none() && matches!(from, "stopped" | "failed" | "quarantined"),
                "event {i}: generation {g} started while {current:?} may be alive: {shown:?}"
            );
            assert_eq!(
                g,
                highest + 1,
                "event {i}: generations grow by one: {shown:?}"
            );
            current = Some(g);
            highest = g;
        } else if from != to {
            assert_eq!(
                generation, current,
                "event {i} is about another generation: {shown:?}"
            );
        }
        if matches!(to, "stopped" | "failed") {
            current = None;
        }
        state = to.to_owned();
    }
    assert_eq!(
        state, "stopped",
        "the log ends with the server down: {shown:?}"
    );
}

// ---------------------------------------------------------------------------------
// 4. SIGKILL of the supervisor, then recovery

/// Recovery signals the processes it found; one of them may leave a new process
/// behind as it dies (here: it forks on SIGTERM). Recovery looks again by the
/// generation's tag and ends that one too, so nothing of the fleet survives it.
#[test]
fn recovery_also_ends_what_a_leftover_forks_as_it_dies() {
    let fleet = TestFleet::fixtures(
        "sv-recovery-fork",
        &[(
            "forker",
            &["--ignore-eof", "--fork-on-sigterm"],
            "cleanup_timeout: 2s",
        )],
    );
    within(Duration::from_secs(60), fleet, move |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        let forker = pid_of(server(&up, "forker"));
        let supervisor = supervisor_pid(fleet);
        signal(supervisor, Signal::SIGKILL);
        wait_for(Duration::from_secs(5), "the supervisor dies", || {
            (!is_alive(supervisor)).then_some(())
        });
        assert!(is_alive(forker), "the forker left with its supervisor");
        // A new supervisor recovers before it stops anything: SIGTERM makes the
        // forker leave a child, which must not outlive the recovery.
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        assert!(!is_alive(forker));
        // The supervisor and its guardian: `down` waited for them (its exit 0
        // says so). What the forker left is ended by the recovery; the harness
        // names anything of the fleet still alive after its grace.
        fleet.assert_no_leftovers();
    });
}

/// A supervisor killed before `state.json` records a generation leaves that
/// generation running with no record of it (here the record is removed by hand,
/// which is what such a kill leaves). `down` finds its processes by the fleet's
/// tag, starts a supervisor that recovers them, and leaves nothing.
#[test]
fn down_recovers_a_generation_that_state_json_never_recorded() {
    let fleet = TestFleet::fixtures("sv-unrecorded", &[("keeper", &["--ignore-eof"], "")]);
    within(Duration::from_secs(60), fleet, move |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        let keeper = pid_of(server(&up, "keeper"));
        let supervisor = supervisor_pid(fleet);
        signal(supervisor, Signal::SIGKILL);
        wait_for(Duration::from_secs(5), "the supervisor dies", || {
            (!is_alive(supervisor)).then_some(())
        });
        let state = fleet.state_dir().join("state.json");
        std::fs::remove_file(&state).expect("remove state.json");
        assert!(is_alive(keeper), "the keeper left with its supervisor");
        let (out, down) = json(fleet, &["down"]);
        assert_code(&out, 0);
        assert!(!is_alive(keeper), "down left the keeper running: {down}");
        // The supervisor that `down` started to recover exits once idle: within
        // the grace, nothing of this fleet runs.
        fleet.assert_no_leftovers();
    });
}

#[test]
fn a_killed_supervisor_leaves_leftovers_that_status_reports_and_up_recovers() {
    let scratch = tempfile::tempdir().unwrap();
    let grand_pids = scratch.path().join("grand.pid");
    let stubborn_pids = scratch.path().join("stubborn.pid");
    let fleet = TestFleet::fixtures(
        "sv-recovery",
        &[
            ("plain", &[], ""),
            (
                "stubborn",
                &[
                    "--ignore-eof",
                    "--ignore-sigterm",
                    "--pid-file",
                    stubborn_pids.to_str().unwrap(),
                ],
                "cleanup_timeout: 2s",
            ),
            (
                "grand",
                &["--grandchild", "--pid-file", grand_pids.to_str().unwrap()],
                "cleanup_timeout: 2s",
            ),
        ],
    );
    within(Duration::from_secs(60), fleet, move |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        for name in ["plain", "stubborn", "grand"] {
            assert_eq!(server(&up, name)["generation"], 1);
        }
        let (stubborn, _) = read_pid_file(&stubborn_pids);
        let (grand, grandchildren) = read_pid_file(&grand_pids);
        assert_eq!(grandchildren.len(), 1);
        let grandchild = grandchildren[0];
        let plain = pid_of(server(&up, "plain"));
        let supervisor = supervisor_pid(fleet);

        signal(supervisor, Signal::SIGKILL);
        wait_for(Duration::from_secs(5), "the supervisor dies", || {
            (!is_alive(supervisor)).then_some(())
        });
        // Their stdin closed with the supervisor: the plain server and the
        // grandchild's parent leave; the stubborn one and the grandchild stay.
        wait_for(
            Duration::from_secs(5),
            "plain and grand exit on EOF",
            || (!is_alive(plain) && !is_alive(grand)).then_some(()),
        );
        assert!(
            is_alive(stubborn),
            "the stubborn server died with its supervisor"
        );
        assert!(
            is_alive(grandchild),
            "the grandchild died with its supervisor"
        );

        // `status` without a supervisor reports the leftovers, exit 5, and starts
        // nothing.
        let (out, status) = json(fleet, &["status"]);
        assert_code(&out, 5);
        for name in ["stubborn", "grand"] {
            let s = server(&status, name);
            assert_eq!(s["error"]["kind"], "quarantined", "{name}: {s}");
            assert_ne!(s["state"], "stopped", "{name}: {s}");
            assert_eq!(s["exit_code"], 5, "{s}");
        }
        let message = server(&status, "stubborn")["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(&stubborn.to_string()), "{message}");
        let message = server(&status, "grand")["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(&grandchild.to_string()), "{message}");
        assert_eq!(server(&status, "plain")["state"], "stopped");
        assert_eq!(server(&status, "plain")["exit_code"], 0);
        thread::sleep(Duration::from_millis(200));
        assert_eq!(
            supervise_processes(fleet),
            vec![],
            "status started a supervisor"
        );
        assert!(is_alive(stubborn) && is_alive(grandchild));

        // `up` recovers: the leftovers go before anything new starts, and the new
        // generations are above the old ones.
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        for pid in [stubborn, grandchild, grand, plain] {
            assert!(
                !is_alive(pid),
                "pid {pid} of the crashed generation is alive"
            );
        }
        for name in ["plain", "stubborn", "grand"] {
            let s = server(&up, name);
            assert_eq!(s["state"], "running", "{s}");
            assert!(gen_of(s) > 1, "{name}: generation did not grow: {s}");
            assert!(
                live_generations(fleet, name).keys().all(|g| *g > 1),
                "{name}: an old generation is alive: {:?}",
                live_generations(fleet, name)
            );
        }
        assert_ne!(supervisor_pid(fleet), supervisor);
        let all = events(fleet);
        let recovered: Vec<&Value> = all.iter().filter(|e| e["cause"] == "recovery").collect();
        for name in ["stubborn", "grand"] {
            assert!(
                recovered
                    .iter()
                    .any(|e| e["server"] == name && e["generation"] == 1),
                "no recovery event for {name}: {:?}",
                steps(&all)
            );
        }
        let text = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap();
        assert!(text.contains(r#""cause":"recovery""#), "{text}");
        // The recovery events come before the new generations start.
        for name in ["stubborn", "grand"] {
            let log = events_of(fleet, name);
            let rec = log.iter().position(|e| e["cause"] == "recovery").unwrap();
            let start = log
                .iter()
                .position(|e| e["to"] == "starting" && e["generation"].as_u64() > Some(1))
                .unwrap();
            assert!(rec < start, "{name}: {:?}", steps(&log));
        }

        let (out, down) = json(fleet, &["down"]);
        assert_code(&out, 0);
        for name in ["plain", "stubborn", "grand"] {
            assert_eq!(server(&down, name)["state"], "stopped");
        }
        fleet.assert_no_leftovers();
        drop(scratch);
    });
}

// ---------------------------------------------------------------------------------
// 5. Fencing

#[test]
fn two_reconnects_fenced_on_the_same_generation_make_one_new_generation() {
    let fleet = TestFleet::fixtures("sv-fence", &[("fenced", &[], "")]);
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        assert_eq!(server(&up, "fenced")["generation"], 1);

        let fenced = [
            "--output",
            "json",
            "reconnect",
            "fenced",
            "--if-generation",
            "1",
        ];
        let outs = run_together(vec![fleet.command(&fenced), fleet.command(&fenced)]);
        let mut codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap_or(-1)).collect();
        codes.sort_unstable();
        assert_eq!(
            codes,
            vec![0, 6],
            "{:?}",
            outs.iter().map(stdout).collect::<Vec<_>>()
        );
        for out in &outs {
            let doc = parse_doc(out);
            let s = server(&doc, "fenced");
            if out.status.code() == Some(0) {
                assert_eq!(s["generation"], 2, "{s}");
                assert_eq!(s["state"], "running", "{s}");
                assert_eq!(s["error"], Value::Null, "{s}");
            } else {
                assert_eq!(doc["exit_code"], 6);
                assert_eq!(s["error"]["kind"], "fenced", "{s}");
                assert_eq!(s["exit_code"], 6, "{s}");
            }
        }
        let (out, status) = json(fleet, &["status"]);
        assert_code(&out, 0);
        assert_eq!(server(&status, "fenced")["generation"], 2);
        assert_eq!(count(&events_of(fleet, "fenced"), "starting"), 2);
        assert_eq!(
            live_generations(fleet, "fenced")
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![2]
        );
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 6. Ctrl-C of `down`

#[test]
fn ctrl_c_of_down_leaves_the_supervisor_to_finish_the_teardown() {
    let fleet = TestFleet::fixtures(
        "sv-ctrl-c-down",
        &[
            (
                "slow",
                &["--ignore-eof", "--ignore-sigterm"],
                "cleanup_timeout: 3s",
            ),
            KEEPER,
        ],
    );
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        let slow = pid_of(server(&up, "slow"));

        let spawned = Instant::now();
        let down = fleet.spawn(&["down", "slow"]);
        // The request has reached the authority once `stopping` is logged.
        wait_for(Duration::from_secs(10), "slow is stopping", || {
            events_of(fleet, "slow")
                .iter()
                .any(|e| e["to"] == "stopping")
                .then_some(())
        });
        if let Some(rest) = Duration::from_millis(300).checked_sub(spawned.elapsed()) {
            thread::sleep(rest);
        }
        let interrupted = Instant::now();
        signal(down.id() as i32, Signal::SIGINT);
        let out = finish(down, Duration::from_secs(5));
        assert_code(&out, 130);
        let err = stderr(&out);
        assert!(
            err.contains("interrupted") && err.contains("carries on"),
            "{err}"
        );
        assert!(
            interrupted.elapsed() < Duration::from_secs(2),
            "the interrupted CLI waited for the teardown"
        );
        // Nothing has forced the server out yet: the teardown is still running.
        assert!(is_alive(slow), "the slow server is already gone");

        // The supervisor finishes the teardown within the cleanup deadline.
        let status = wait_for(Duration::from_secs(8), "slow is stopped", || {
            let (out, doc) = json(fleet, &["status", "slow"]);
            assert_code(&out, 0);
            (server(&doc, "slow")["state"] == "stopped").then_some(doc)
        });
        let took = interrupted.elapsed();
        assert!(
            took < Duration::from_secs(6),
            "teardown took {took:?} after Ctrl-C"
        );
        assert!(!is_alive(slow), "slow ({slow}) survived its teardown");
        let s = server(&status, "slow");
        assert_eq!(s["teardown"]["outcome"], "escalated", "{s}");
        assert_eq!(s["teardown"]["signal"], "SIGKILL", "{s}");
        let log = events_of(fleet, "slow");
        let stopping = log
            .iter()
            .position(|e| e["from"] == "running" && e["to"] == "stopping")
            .unwrap_or_else(|| panic!("{:?}", steps(&log)));
        let stopped = log
            .iter()
            .position(|e| e["from"] == "stopping" && e["to"] == "stopped")
            .unwrap_or_else(|| panic!("no stopping -> stopped: {:?}", steps(&log)));
        assert!(stopping < stopped);
        assert_eq!(log[stopped]["generation"], 1);
        assert_eq!(log[stopped]["cause"], "stop");

        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 7. Quarantine

#[test]
fn a_quarantined_server_is_refused_until_forced_and_reset_waits_for_its_processes() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("esc.pid");
    // Each generation leaves a grandchild that no signal ends until it is thawed.
    let freezer = Freezer::new("sv-quarantine");
    let fleet = TestFleet::fixtures(
        "sv-quarantine",
        &[
            (
                "esc",
                &[
                    "--frozen-grandchild",
                    freezer.path(),
                    "--pid-file",
                    pid_file.to_str().unwrap(),
                ],
                "cleanup_timeout: 1s",
            ),
            KEEPER,
        ],
    );
    within(Duration::from_secs(60), fleet, move |fleet| {
        let _scratch = scratch;
        let freezer = Arc::new(freezer);
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        assert_eq!(server(&up, "esc")["generation"], 1);
        let (_, escaped) = read_pid_file(&pid_file);
        let escaped = escaped[0];
        assert!(is_alive(escaped));

        // The escaped grandchild outlives the teardown: failed, quarantined.
        let (out, down) = json(fleet, &["down", "esc"]);
        assert_code(&out, 5);
        let s = server(&down, "esc");
        assert_eq!(s["state"], "quarantined", "{s}");
        assert_eq!(s["teardown"]["outcome"], "failed", "{s}");
        assert_eq!(s["error"]["kind"], "teardown_failed", "{s}");
        let leftover: Vec<i64> = s["teardown"]["leftover_pids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_i64().unwrap())
            .collect();
        assert!(leftover.contains(&i64::from(escaped)), "{s}");
        assert!(is_alive(escaped));

        let (out, status) = json(fleet, &["status", "esc"]);
        assert_code(&out, 5);
        assert_eq!(server(&status, "esc")["state"], "quarantined");

        // `up` is refused, and starts nothing.
        let (out, up) = json(fleet, &["up", "esc"]);
        assert_code(&out, 6);
        let s = server(&up, "esc");
        assert_eq!(s["error"]["kind"], "quarantined", "{s}");
        assert_eq!(s["state"], "quarantined", "{s}");
        assert_eq!(count(&events_of(fleet, "esc"), "starting"), 1);

        // `reset` refuses while the escaped process lives.
        let out = run_bounded(fleet.command(&["reset", "esc"]), COMMAND_LIMIT);
        assert_ne!(
            out.status.code(),
            Some(0),
            "reset cleared a live quarantine"
        );
        assert!(is_alive(escaped));
        let (out, status) = json(fleet, &["status", "esc"]);
        assert_code(&out, 5);
        assert_eq!(server(&status, "esc")["state"], "quarantined");

        // `up --force` SIGKILLs it, confirms, and starts generation 2. The
        // process is thawed a moment after --force began: only then can it die.
        let thawing = freezer.clone();
        let thaw = thread::spawn(move || {
            thread::sleep(Duration::from_millis(500));
            thawing.thaw();
        });
        let (out, up) = json(fleet, &["up", "esc", "--force"]);
        thaw.join().unwrap();
        assert_code(&out, 0);
        let s = server(&up, "esc");
        assert_eq!(s["state"], "running", "{s}");
        assert_eq!(s["generation"], 2, "{s}");
        assert!(
            !is_alive(escaped),
            "the escaped pid {escaped} survived --force"
        );

        // Generation 2 escapes too: its `down` quarantines it again. Once its
        // escaped process is gone (here: killed by the test), `reset` clears it.
        let escaped2 = wait_for(Duration::from_secs(5), "generation 2's pid file", || {
            let (_, gc) = read_pid_file(&pid_file);
            (gc[0] != escaped).then_some(gc[0])
        });
        let (out, down) = json(fleet, &["down", "esc"]);
        assert_code(&out, 5);
        assert_eq!(server(&down, "esc")["state"], "quarantined");
        freezer.thaw();
        kill_all(&[escaped2]);
        wait_for(Duration::from_secs(5), "the escaped pid dies", || {
            (!is_alive(escaped2)).then_some(())
        });
        let (out, reset) = json(fleet, &["reset", "esc"]);
        assert_code(&out, 0);
        assert_eq!(server(&reset, "esc")["state"], "stopped");

        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 8. Garbage on the control socket

#[test]
fn garbage_on_the_control_socket_gets_errors_and_the_supervisor_keeps_serving() {
    let fleet = TestFleet::fixtures("sv-garbage", &[("steady", &[], "")]);
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, up) = json(fleet, &["up"]);
        assert_code(&out, 0);
        let pid = pid_of(server(&up, "steady"));
        let supervisor = supervisor_pid(fleet);
        let socket = fleet.state_dir().join("control.sock");
        let still_serving = |what: &str| {
            let (out, status) = json(fleet, &["status"]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "status after {what}: {}",
                stderr(&out)
            );
            let s = server(&status, "steady");
            assert_eq!(s["state"], "running", "after {what}: {s}");
            assert_eq!(pid_of(s), pid, "after {what}: {s}");
            assert_eq!(supervisor_pid(fleet), supervisor, "after {what}");
            let rss = vm_rss_kib(supervisor);
            assert!(rss < 100 * 1024, "after {what}: VmRSS {rss} KiB");
        };

        // A line of garbage: an error line.
        let answer = exchange(&socket, b"this is not json\n", true);
        let reply = error_line(&answer, "garbage");
        assert!(reply.contains("not JSON"), "{reply}");
        still_serving("garbage");

        // A truncated line, then the client goes away: nothing to answer.
        let answer = exchange(&socket, br#"{"v":1,"op":"sta"#, true);
        assert!(
            answer.is_empty() || error_line(&answer, "truncated").contains("error"),
            "{answer:?}"
        );
        still_serving("a truncated line");

        // Another protocol version: an error line that says so.
        let answer = exchange(&socket, br#"{"v":99,"op":"status"}"#.as_slice(), false);
        assert!(
            answer.is_empty(),
            "answered before the line ended: {answer:?}"
        );
        let answer = exchange(&socket, b"{\"v\":99,\"op\":\"status\"}\n", true);
        let reply = error_line(&answer, "version 99");
        assert!(reply.contains("99"), "{reply}");
        still_serving("protocol version 99");

        // A line over the limit, ended: an error line.
        let mut long = vec![b'x'; 9 * 1024 * 1024];
        long.push(b'\n');
        let answer = exchange(&socket, &long, true);
        let reply = error_line(&answer, "9 MiB line");
        assert!(reply.contains("longer than"), "{reply}");
        still_serving("a 9 MiB line");

        // 100 MB without a newline, in chunks: the supervisor reads it in bounded
        // memory and answers with an error or closes; it never crashes.
        let mut stream = UnixStream::connect(&socket).expect("connect");
        stream
            .set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let chunk = vec![b'{'; 1024 * 1024];
        let mut peak = 0;
        let mut written = 0usize;
        for i in 0..100 {
            match stream.write_all(&chunk) {
                Ok(()) => written += chunk.len(),
                // The supervisor may close early: that is allowed.
                Err(e) => {
                    eprintln!("write stopped after {written} bytes: {e}");
                    break;
                }
            }
            if i % 10 == 9 {
                peak = peak.max(vm_rss_kib(supervisor));
            }
        }
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        assert!(
            read.is_ok() || answer.is_empty(),
            "reading the answer: {read:?}"
        );
        if !answer.is_empty() {
            error_line(&String::from_utf8_lossy(&answer), "100 MB line");
        }
        assert!(
            peak < 100 * 1024,
            "VmRSS reached {peak} KiB while reading a 100 MB line"
        );
        still_serving("a 100 MB line");

        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

/// Sends `bytes` on a new connection, half-closes it when `close`, and returns what
/// came back before the supervisor closed (or within a short wait when not closing).
fn exchange(socket: &Path, bytes: &[u8], close: bool) -> String {
    let mut stream = UnixStream::connect(socket).expect("connect to the control socket");
    let wait = if close { 10_000 } else { 300 };
    stream
        .set_read_timeout(Some(Duration::from_millis(wait)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).expect("send");
    if close {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e)
                if !close
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                break;
            }
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// The message of the one error line in `answer`.
#[track_caller]
fn error_line(answer: &str, what: &str) -> String {
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: one answer line expected: {answer:?}"
    );
    let v: Value = serde_json::from_str(lines[0]).expect("the answer is JSON");
    assert_eq!(v["type"], "error", "{what}: {v}");
    v["message"].as_str().expect("a message").to_owned()
}

// ---------------------------------------------------------------------------------
// 9. --wait-timeout

#[test]
fn a_request_that_misses_its_wait_timeout_is_withdrawn_and_never_runs() {
    let fleet = TestFleet::fixtures(
        "sv-wait-timeout",
        &[("slow", &["--init-delay-ms", "3000"], "connect_timeout: 10s")],
    );
    within(Duration::from_secs(60), fleet, |fleet| {
        let first = fleet.spawn(&["--output", "json", "up", "slow"]);
        wait_for(Duration::from_secs(10), "slow is starting", || {
            events_of(fleet, "slow")
                .iter()
                .any(|e| e["to"] == "starting")
                .then_some(())
        });
        let asked = Instant::now();
        let (out, doc) = json(fleet, &["reconnect", "slow", "--wait-timeout", "200ms"]);
        let took = asked.elapsed();
        assert_code(&out, 7);
        assert!(took < Duration::from_secs(2), "busy after {took:?}");
        assert_eq!(doc["exit_code"], 7);
        let s = server(&doc, "slow");
        assert_eq!(s["error"]["kind"], "busy", "{s}");

        let out = finish(first, Duration::from_secs(20));
        assert_code(&out, 0);
        let up = parse_doc(&out);
        let s = server(&up, "slow");
        assert_eq!(s["generation"], 1, "{s}");
        let pid = pid_of(s);

        // Had the withdrawn reconnect run after the start, generation 2 would follow.
        thread::sleep(Duration::from_millis(500));
        let (out, status) = json(fleet, &["status"]);
        assert_code(&out, 0);
        let s = server(&status, "slow");
        assert_eq!(s["state"], "running", "{s}");
        assert_eq!(s["generation"], 1, "the withdrawn reconnect ran: {s}");
        assert_eq!(pid_of(s), pid);
        let log = events_of(fleet, "slow");
        assert_eq!(count(&log, "starting"), 1, "{:?}", steps(&log));
        assert!(
            log.iter().all(|e| e["cause"] != "reconnect"),
            "{:?}",
            steps(&log)
        );
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 10. The idle supervisor's last moments

/// A script's next command usually follows at once (`down NAME; up`, `down
/// NAME; status`): a command that reaches the socket while the idle supervisor
/// lingers must be answered, by that supervisor or by the next one, never dropped.
#[test]
fn a_command_sent_while_the_idle_supervisor_lingers_is_answered() {
    let fleet = TestFleet::fixtures("sv-linger", &[("solo", &[], "")]);
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, _) = json(fleet, &["up"]);
        assert_code(&out, 0);
        let supervisor = supervisor_pid(fleet);
        // A `down` that names the server (one of the whole fleet ends the
        // supervisor at once, and waits for it).
        let (out, _) = json(fleet, &["down", "solo"]);
        assert_code(&out, 0);
        // Now idle: the supervisor lingers a moment before it exits.
        thread::sleep(Duration::from_millis(700));
        assert!(
            is_alive(supervisor),
            "the supervisor left without lingering"
        );
        let outs = run_together(vec![
            fleet.command(&["--output", "json", "status"]),
            fleet.command(&["--output", "json", "up"]),
        ]);
        let (status_out, up_out) = (&outs[0], &outs[1]);
        let status = String::from_utf8_lossy(&status_out.stdout);
        let up = String::from_utf8_lossy(&up_out.stdout);
        assert!(
            status_out.status.code() == Some(0) && up_out.status.code() == Some(0),
            "commands sent 700 ms after the last `down`, while the idle supervisor \
             lingered:\nstatus exited {:?}: {status}\nstderr: {}\nup exited {:?}: \
             {up}\nstderr: {}",
            status_out.status.code(),
            stderr(status_out),
            up_out.status.code(),
            stderr(up_out)
        );
        let up = parse_doc(up_out);
        assert_eq!(server(&up, "solo")["state"], "running");
        assert_eq!(server(&up, "solo")["generation"], 2);
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 11. Orphans of a server are reaped

/// The supervisor is a child subreaper: a server's descendants whose parent exits
/// are re-parented to it. Once they are killed, it must reap them (by pid, docs/design.md
/// §11), or every such generation leaves a zombie in the supervisor for its life.
#[test]
fn a_grandchild_reparented_to_the_supervisor_is_reaped_after_teardown() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("grand.pid");
    let fleet = TestFleet::fixtures(
        "sv-reap",
        &[
            (
                "grand",
                &["--grandchild", "--pid-file", pid_file.to_str().unwrap()],
                "cleanup_timeout: 1s",
            ),
            KEEPER,
        ],
    );
    within(Duration::from_secs(60), fleet, move |fleet| {
        let _scratch = &scratch;
        let (out, _) = json(fleet, &["up"]);
        assert_code(&out, 0);
        let supervisor = supervisor_pid(fleet);
        let (_, grandchildren) = read_pid_file(&pid_file);
        let grandchild = grandchildren[0];
        let born = start_time(grandchild).expect("the grandchild runs");

        let (out, down) = json(fleet, &["down", "grand"]);
        assert_code(&out, 0);
        let s = server(&down, "grand");
        assert_eq!(s["state"], "stopped", "{s}");
        assert_eq!(s["teardown"]["leftover_pids"], serde_json::json!([]), "{s}");
        assert!(!is_alive(grandchild));

        // A zombie child of the supervisor, with the grandchild's identity.
        let zombie = || {
            let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let same = fields.get(19)?.parse::<u64>().ok()? == born;
            (same && fields[0] == "Z").then(|| format!("{grandchild}: {}", stat.trim()))
        };
        let deadline = Instant::now() + Duration::from_secs(3);
        while zombie().is_some() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        let zombies: Vec<String> = all_pids()
            .into_iter()
            .filter_map(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                let rest = &stat[stat.rfind(')')? + 1..];
                let mut fields = rest.split_whitespace();
                let (state, ppid) = (fields.next()?, fields.next()?);
                (state == "Z" && ppid == supervisor.to_string()).then(|| stat.trim().to_owned())
            })
            .collect();
        assert!(
            zombie().is_none() && zombies.is_empty(),
            "the supervisor ({supervisor}) did not reap the grandchild {grandchild} 3s after \
             its teardown; zombie children of the supervisor: {zombies:?}"
        );

        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

// ---------------------------------------------------------------------------------
// 12. `status` while a server is starting

/// `status` reports what is happening now: a server whose start is under way is
/// `starting`, and asking does not wait for the start to end (L2: no unbounded
/// wait; with `connect_timeout: none` the start may never end).
#[test]
fn status_during_a_slow_start_answers_at_once_and_shows_starting() {
    let fleet = TestFleet::fixtures(
        "sv-status-starting",
        &[
            ("slow", &["--init-delay-ms", "3000"], "connect_timeout: 10s"),
            KEEPER,
        ],
    );
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, _) = json(fleet, &["up", "keeper"]);
        assert_code(&out, 0);
        let first = fleet.spawn(&["--output", "json", "up", "slow"]);
        let began = Instant::now();
        wait_for(Duration::from_secs(10), "slow is starting", || {
            events_of(fleet, "slow")
                .iter()
                .any(|e| e["to"] == "starting")
                .then_some(())
        });
        let asked = Instant::now();
        let (out, status) = json(fleet, &["status"]);
        let took = asked.elapsed();
        let up = finish(first, Duration::from_secs(20));
        assert_code(&up, 0);
        assert_code(&out, 0);
        let s = server(&status, "slow");
        assert!(
            took < Duration::from_secs(1) && s["state"] == "starting",
            "status asked {:?} into a 3 s start took {took:?} and showed {}",
            asked - began,
            s
        );
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

/// `down` of the whole fleet returns once nothing of the fleet is left: the
/// supervisor and its guardian have exited by then, with no lingering, and the
/// report says so. `down` of some servers leaves the supervisor to the others.
/// The same holds for a `down` from the copy recorded in the state directory.
#[test]
fn down_of_the_whole_fleet_returns_with_nothing_of_it_left() {
    let fleet = TestFleet::fixtures(
        "down-nothing-left",
        &[("a", &[], ""), ("b", &["--grandchild"], "")],
    );
    let describe = |pids: &[i32]| -> Vec<String> {
        pids.iter()
            .map(|p| format!("{p} {}", cmdline(*p).join(" ")))
            .collect()
    };
    for from_copy in [false, true] {
        assert_code(&fleet.run(&["up"]), 0);
        let supervisor = supervisor_pid(&fleet);
        let guardian = parent_pid(supervisor).expect("the supervisor's parent");
        assert!(
            fleet.alive().contains(&guardian),
            "the guardian carries the test's id"
        );
        if !from_copy {
            assert_code(&fleet.run(&["down", "a"]), 0);
            assert!(is_alive(supervisor), "b runs: the supervisor stays");
        } else {
            std::fs::rename(&fleet.path, fleet.dir.path().join("elsewhere.yaml")).unwrap();
        }
        let (out, doc) = json(&fleet, &["down"]);
        // Looked at at once: nothing is polled for.
        let left = fleet.alive();
        assert!(left.is_empty(), "left after down: {:?}", describe(&left));
        assert_code(&out, 0);
        assert_eq!(doc["supervisor"]["pid"], supervisor, "{doc}");
        assert_eq!(doc["supervisor"]["guardian"], guardian, "{doc}");
        assert_eq!(doc["supervisor"]["exited"], true, "{doc}");
        if from_copy {
            assert!(
                stderr(&out).contains("is gone; using the copy"),
                "{}",
                stderr(&out)
            );
            std::fs::rename(fleet.dir.path().join("elsewhere.yaml"), &fleet.path).unwrap();
        }
    }
}

/// A `down` of the whole fleet while a `connect` session is open stops every
/// server, but the supervisor serves that session on: `down` says so, and
/// exits 5 rather than 0, since a process of the fleet is left. Once the
/// session ends, the supervisor goes.
#[test]
fn down_says_what_keeps_the_supervisor_and_exits_5() {
    let fleet = TestFleet::fixtures("down-stays", &[("a", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let supervisor = supervisor_pid(&fleet);
    let mut connect = fleet
        .command(&["connect"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn connect");
    let mut stdin = connect.stdin.take().expect("piped stdin");
    let stdout = connect.stdout.take().expect("piped stdout");
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "down-stays", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    let answer = lines
        .recv_timeout(Duration::from_secs(30))
        .expect("an answer to initialize")
        .unwrap();
    assert!(answer.contains("\"id\":1"), "{answer}");

    let (out, doc) = json(&fleet, &["down"]);
    assert_code(&out, 5);
    assert_eq!(server(&doc, "a")["state"], "stopped", "{doc}");
    assert_eq!(doc["supervisor"]["exited"], false, "{doc}");
    let err = stderr(&out);
    assert!(
        err.contains("stays") && err.contains("mcpfleet connect"),
        "{err}"
    );
    assert!(is_alive(supervisor), "it serves the session");

    drop(stdin);
    let exited = finish(connect, Duration::from_secs(30));
    assert!(exited.status.code().is_some(), "connect ended");
    fleet.assert_no_leftovers();
}

#[test]
fn status_counts_a_failed_server_as_not_ok_in_text_and_json() {
    let fleet = TestFleet::fixtures(
        "sup-status-failed",
        &[
            ("keeper", &[], ""),
            ("broken", &["--exit-during-init", "1"], ""),
        ],
    );
    within(Duration::from_secs(60), fleet, |fleet| {
        let (out, _) = json(fleet, &["up"]);
        assert_code(&out, 3);
        // The failed server is not ok, and the command says so: the summary, the
        // server's own code and the command's code agree.
        let out = fleet.run(&["status"]);
        assert_code(&out, 3);
        let text = stdout(&out);
        assert!(
            text.contains("status: 2 server(s), 1 ok, 1 not ok; exit 3"),
            "{text}"
        );
        let (out, doc) = json(fleet, &["status"]);
        assert_code(&out, 3);
        assert_eq!(doc["exit_code"], 3, "{doc}");
        let broken = server(&doc, "broken");
        assert_eq!(broken["state"], "failed", "{broken}");
        assert_eq!(broken["exit_code"], 3, "{broken}");
        assert_eq!(server(&doc, "keeper")["exit_code"], 0, "{doc}");
        // Asked about the running server alone, `status` is ok.
        let (out, _) = json(fleet, &["status", "keeper"]);
        assert_code(&out, 0);
        let (out, _) = json(fleet, &["down"]);
        assert_code(&out, 0);
        fleet.assert_no_leftovers();
    });
}

/// A supervisor of another mcpfleet build (`tests/fakes/old_supervisor.py`):
/// it holds the fleet's lock, runs one process tagged as generation 1 of the
/// server `one`, and refuses every request as a supervisor of protocol 1
/// refuses one of protocol 2. Killed when dropped, should a test fail.
struct OldSupervisor {
    /// The supervisor, or its guardian when it has one.
    child: Child,
    supervisor: i32,
    guardian: Option<i32>,
    /// Its "server".
    server: i32,
}

impl OldSupervisor {
    fn start(fleet: &TestFleet, forget_server: bool, guardian: bool) -> OldSupervisor {
        let state = fleet.state_dir();
        let dir = mcpfleet::state::StateDir::open(&state).expect("state dir");
        let tag = format!("{}:one:1", mcpfleet::state::tag_scope(&dir));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/old_supervisor.py");
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(script)
            .arg(&state)
            .arg(&tag)
            .env(TEST_ID_VAR, &fleet.test_id)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        if forget_server {
            cmd.arg("--forget-server");
        }
        if guardian {
            cmd.arg("__guard");
        }
        let mut child = cmd.spawn().expect("python3");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
            let _ = tx.send(line);
        });
        let ready = rx.recv_timeout(Duration::from_secs(20));
        assert_eq!(
            ready.as_deref(),
            Ok("ready\n"),
            "the old supervisor did not start"
        );
        let tagged = processes_with(&format!("MCPFLEET_TAG={tag}"));
        assert_eq!(tagged.len(), 1, "its server: {tagged:?}");
        let supervisor = fleet.lock_pid().expect("the lock's pid");
        let guardian = guardian.then_some(child.id() as i32);
        assert_eq!(guardian.is_none(), supervisor == child.id() as i32);
        OldSupervisor {
            child,
            supervisor,
            guardian,
            server: tagged[0],
        }
    }

    /// Whether it (and its guardian) have exited.
    fn exited(&mut self) -> bool {
        let child = self.child.try_wait().expect("try_wait").is_some();
        child && !is_alive(self.supervisor)
    }
}

impl Drop for OldSupervisor {
    fn drop(&mut self) {
        kill_all(&[self.supervisor]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// After an upgrade, the supervisor that runs is of the previous build and
/// refuses every request of this one. `down` of the whole fleet still tears
/// it down: by SIGTERM, whose handling tears its servers down, then waiting
/// until it is gone. Other commands say what it is and what to do, exit 8.
#[test]
fn down_stops_a_supervisor_of_another_build_and_other_commands_say_how() {
    let fleet = TestFleet::fixtures("other-build", &[("one", &[], "")]);
    let mut old = OldSupervisor::start(&fleet, false, true);
    let pid = old.supervisor;

    let out = fleet.run(&["status"]);
    assert_code(&out, 8);
    let err = stderr(&out);
    for said in [
        &format!("the supervisor of this fleet (pid {pid}) is of another mcpfleet build"),
        "it speaks control protocol 1, this mcpfleet speaks 2",
        "stop it with `mcpfleet down`",
        "then run `mcpfleet status` again",
    ] {
        assert!(err.contains(said), "{said:?} in {err}");
    }
    let (out, doc) = json(&fleet, &["tools"]);
    assert_code(&out, 8);
    assert_eq!(doc["error"]["kind"], "unreachable", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("(pid {pid})"))),
        "{doc}"
    );
    // A part of the fleet cannot be stopped by signal: said, nothing done.
    let out = fleet.run(&["down", "one"]);
    assert_code(&out, 8);
    let err = stderr(&out);
    assert!(
        err.contains("`mcpfleet down` with no server named stops the whole fleet"),
        "{err}"
    );
    assert!(!old.exited(), "down SERVER stopped the supervisor");
    assert!(is_alive(old.server));

    let started = Instant::now();
    let (out, doc) = json(&fleet, &["down"]);
    assert_code(&out, 0);
    let err = stderr(&out);
    for said in [
        &format!("the supervisor of this fleet (pid {pid}) is of another mcpfleet build"),
        "stopped it with SIGTERM, and it tore its servers down itself",
        "its event log (`mcpfleet events`)",
    ] {
        assert!(err.contains(said), "{said:?} in {err}");
    }
    assert_eq!(doc["exit_code"], 0, "{doc}");
    assert_eq!(doc["supervisor"]["pid"], pid, "{doc}");
    assert_eq!(
        doc["supervisor"]["guardian"],
        old.guardian.unwrap(),
        "{doc}"
    );
    assert_eq!(doc["supervisor"]["exited"], true, "{doc}");
    assert_eq!(server(&doc, "one")["state"], "stopped", "{doc}");
    // Gone when `down` returned: the supervisor, its server, its lock.
    assert!(old.exited(), "the old supervisor still runs");
    assert!(!is_alive(old.server), "its server still runs");
    assert!(
        !mcpfleet::state::supervisor_runs(&fleet.state_dir()).unwrap(),
        "the lock is still held"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    fleet.assert_no_leftovers();
}

/// When a supervisor of another build leaves a server running as it stops,
/// `down` says which, with its pid, and exits 5.
#[test]
fn down_names_what_a_supervisor_of_another_build_left() {
    let fleet = TestFleet::fixtures("other-build-left", &[("one", &[], "")]);
    let mut old = OldSupervisor::start(&fleet, true, false);
    let out = fleet.run(&["down"]);
    assert_code(&out, 5);
    assert!(old.exited(), "the old supervisor still runs");
    let err = stderr(&out);
    assert!(err.contains("stopped it with SIGTERM"), "{err}");
    assert!(
        err.contains("left after the supervisor stopped: `one`")
            && err.contains(&old.server.to_string()),
        "{err}"
    );
    assert!(is_alive(old.server));
    kill_all(&[old.server]);
    fleet.assert_no_leftovers();
}
