//! The chaos harness: randomized rounds of concurrent commands and injected faults
//! against a fleet of misbehaving fixture servers, with the lifecycle invariants
//! checked during and after every round. It prints one figure line:
//!
//! ```text
//! chaos: seed=S rounds=R commands=C faults=F edits=E samples=N violations=0 leftovers=0
//! ```
//!
//! Short mode (the default, in CI): a few rounds. Long mode:
//! `MCPFLEET_CHAOS_ROUNDS=200 cargo test --release --test it chaos:: -- --nocapture`;
//! `MCPFLEET_CHAOS_SEED=S` replays a seed's choices (timing still differs).
//!
//! Faults: concurrent `up`, `down`, `reconnect`, `status`, `call`, `up --force` and
//! `reset` on overlapping servers; SIGKILL of the supervisor at a random moment
//! (during starts, during teardowns); SIGINT and SIGKILL of callers; servers that
//! crash (restarted by policy), hang (restarted by their health check), ignore
//! stdin EOF and SIGTERM, leave a grandchild in their group, leave descendants
//! outside it (`setsid`, `setsid` with a cleared environment and a child of its
//! own, a double fork that is an orphan from its first moment, a new process group
//! only: each must be ended with its generation), or leave a grandchild that no
//! signal ends (frozen: its teardown fails and the server is quarantined).
//! Between rounds the fleet file is edited (a server added, a server's arguments
//! changed, the added server removed, in turn) and `up` converges on it
//! (docs/design.md §16): the same invariants hold across the restarts and
//! orphans that brings.
//!
//! Invariants:
//! 1. never two live generations of one server (sampled from /proc throughout
//!    the round; a sighting is confirmed by the older generation still being
//!    alive after the newer one was seen);
//! 2. every command that was not killed answers within a bound, with an exit code
//!    of the documented set that equals the `exit_code` of its JSON document, and
//!    is 0 exactly when every server line of the document is 0;
//! 3. generations only grow (the event log, across supervisor restarts);
//! 4. `status` agrees with the processes alive: a running server's pid is alive
//!    and carries its generation's tag, a stopped one has nothing alive;
//! 5. after the final `down`, nothing of the fleet is alive but what that `down`
//!    reported as left (the frozen grandchild), and that is killed by the
//!    harness, not lost; no escapee of any generation (each notes its pid, since
//!    those that clear their environment carry no tag) is alive.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

const SERVERS: &[&str] = &[
    "plain", "slow", "stubborn", "crashy", "hangs", "family", "escapee", "regroup", "daemon",
    "dfork", "stuck",
];
/// Servers whose descendants leave the group, and the fixture's shape for each.
const ESCAPING: &[(&str, &str)] = &[
    ("regroup", "new-group"),
    ("daemon", "escapee-with-child"),
    ("dfork", "double-fork"),
];
/// Servers whose state only changes by a command (no restarts on their own).
const STEADY: &[&str] = &["plain", "slow", "stubborn", "family"];
/// Exit codes a command may end with (docs/design.md §5); 2 (usage) would be a harness bug.
const CODES: &[i32] = &[0, 1, 3, 4, 5, 6, 7, 8, 130];
/// How long any command may take before it counts as a hang.
const ANSWER_BOUND: Duration = Duration::from_secs(60);

/// The escapees' notes of `server` (see the fixture's `--escape`).
fn escapee_note(scratch: &std::path::Path, server: &str) -> std::path::PathBuf {
    scratch.join(format!("{server}.pid.escapees"))
}

/// Noted escapees of every generation that are still alive.
fn escapees_alive(scratch: &std::path::Path) -> Vec<(String, i32)> {
    let mut alive = Vec::new();
    for (server, _) in ESCAPING {
        let note = escapee_note(scratch, server);
        let text = std::fs::read_to_string(&note).unwrap_or_default();
        for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // The pid of a long-gone escapee may be reused: only one whose
            // command line names this note is one of ours.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let ours = String::from_utf8_lossy(&cmdline).contains(note.to_str().unwrap());
            if ours && is_alive(pid) {
                alive.push((server.to_string(), pid));
            }
        }
    }
    alive
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// How the harness has edited the fleet file so far: between rounds it adds a
/// server, changes the arguments of one, or removes the one it added, and `up`
/// converges on the edit (docs/design.md §16) while the invariants still hold.
#[derive(Debug, Clone, Default)]
struct Edits {
    /// `extra` (a plain server) is in the file.
    extra: bool,
    /// How many tools `plain` is given (its arguments change with it).
    plain_tools: Option<u32>,
    /// Edits made.
    count: usize,
}

impl Edits {
    /// The servers commands may name: the file's. (Not an orphan: a supervisor
    /// that was killed takes up the file afresh and no longer knows it.)
    fn servers(&self) -> Vec<&'static str> {
        let mut all = SERVERS.to_vec();
        if self.extra {
            all.push(EXTRA);
        }
        all
    }
}

/// The server the harness adds to the fleet file and removes again.
const EXTRA: &str = "extra";

fn fleet_text(scratch: &std::path::Path, freezer: &Freezer, edits: &Edits) -> String {
    let pid_file = |server: &str| scratch.join(format!("{server}.pid"));
    let (regroup, daemon, dfork) = (pid_file("regroup"), pid_file("daemon"), pid_file("dfork"));
    let escaping = |shape: &'static str, file: &std::path::Path| -> Vec<String> {
        vec![
            "--escape".into(),
            shape.into(),
            "--pid-file".into(),
            file.to_str().unwrap().into(),
        ]
    };
    let regroup = escaping(ESCAPING[0].1, &regroup);
    let daemon = escaping(ESCAPING[1].1, &daemon);
    let dfork = escaping(ESCAPING[2].1, &dfork);
    let (regroup, daemon, dfork) = (strs(&regroup), strs(&daemon), strs(&dfork));
    let tools = edits.plain_tools.map(|n| n.to_string());
    let plain: Vec<&str> = match &tools {
        Some(n) => vec!["--tools", n.as_str()],
        None => Vec::new(),
    };
    let stuck = ["--frozen-grandchild", freezer.path()];
    let mut servers: Vec<(&str, &[&str], &str)> = vec![
        ("plain", &plain, ""),
        ("slow", &["--init-delay-ms", "300"], ""),
        (
            "stubborn",
            &["--ignore-eof", "--ignore-sigterm"],
            "cleanup_timeout: 1s",
        ),
        (
            "crashy",
            &["--crash-after-ms", "600"],
            "restart: { policy: on-failure, backoff: { initial: 100ms, max: 400ms }, max_restarts: 1000, window: 60s }",
        ),
        (
            "hangs",
            &["--hang-after-ms", "500"],
            "health: { interval: 200ms, timeout: 150ms, failures: 2 }\ncleanup_timeout: 1s",
        ),
        ("family", &["--grandchild"], ""),
        ("escapee", &["--escape-grandchild"], "cleanup_timeout: 1s"),
        ("regroup", &regroup, "cleanup_timeout: 1s"),
        ("daemon", &daemon, "cleanup_timeout: 1s"),
        ("dfork", &dfork, "cleanup_timeout: 1s"),
        ("stuck", &stuck, "cleanup_timeout: 1s"),
    ];
    if edits.extra {
        servers.push((EXTRA, &[], ""));
    }
    let mut body = String::from("version: 1\nservers:\n");
    for (name, args, extra) in servers {
        body.push_str(&fixture_server(name, args, extra));
    }
    body
}

fn fleet(scratch: &std::path::Path, freezer: &Freezer) -> TestFleet {
    TestFleet::raw("chaos", &fleet_text(scratch, freezer, &Edits::default()))
}

/// Edits the fleet file between rounds (in turn: add `extra`, change `plain`'s
/// arguments, remove `extra`) and runs `up` on it (sometimes with
/// `--remove-orphans`), whose answer is held to invariant 2 like any command's.
fn edit_fleet(
    fleet: &TestFleet,
    scratch: &std::path::Path,
    freezer: &Freezer,
    edits: &mut Edits,
    rng: &mut Rng,
    tally: &mut Tally,
    round: usize,
) {
    let mut up: Vec<String> = vec!["up".into()];
    match edits.count % 3 {
        0 => edits.extra = true,
        1 => edits.plain_tools = Some(if edits.plain_tools == Some(4) { 3 } else { 4 }),
        _ => {
            edits.extra = false;
            if rng.chance(50) {
                up.push("--remove-orphans".into());
            }
        }
    }
    edits.count += 1;
    std::fs::write(&fleet.path, fleet_text(scratch, freezer, edits)).unwrap();
    let mut args: Vec<&str> = vec!["--output", "json"];
    args.extend(up.iter().map(String::as_str));
    let out = fleet.run(&args);
    tally.commands += 1;
    let doc: Option<Value> = serde_json::from_slice(&out.stdout).ok();
    check_answer(&up, &out, doc.as_ref(), tally, &format!("edit {round}"));
}

/// What the harness counted.
#[derive(Default)]
struct Tally {
    commands: usize,
    faults: usize,
    violations: Vec<String>,
    leftovers: usize,
}

/// A command started in a round.
struct Caller {
    args: Vec<String>,
    child: Child,
    started: Instant,
    interrupted: bool,
    killed: bool,
}

#[test]
fn chaos_rounds_keep_every_invariant() {
    let rounds: usize = std::env::var("MCPFLEET_CHAOS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let seed: u64 = std::env::var("MCPFLEET_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("chaos: seed={seed} rounds={rounds}");
    let mut rng = Rng::new(seed);
    let scratch = tempfile::tempdir().unwrap();
    let freezer = Freezer::new("chaos");
    let fleet = fleet(scratch.path(), &freezer);
    let mut tally = Tally::default();

    // Invariant 1, sampled in the background for the whole run.
    let stop = Arc::new(AtomicBool::new(false));
    let two_live = Arc::new(Mutex::new(Vec::<String>::new()));
    let samples = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (stop, two_live, samples) = (stop.clone(), two_live.clone(), samples.clone());
        let entry = format!("{TEST_ID_VAR}={}", fleet.test_id);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Some(v) = two_generations(&entry) {
                    two_live.lock().unwrap().push(v);
                }
                samples.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    };

    let mut edits = Edits::default();
    for round in 0..rounds {
        run_round(&fleet, &mut rng, &mut tally, round, &edits.servers());
        check_status(&fleet, &mut tally, round);
        edit_fleet(
            &fleet,
            scratch.path(),
            &freezer,
            &mut edits,
            &mut rng,
            &mut tally,
            round,
        );
    }

    // Invariant 5: the final down leaves nothing but what it reports.
    let (out, doc) = fleet.run_json(&["down"]);
    tally.commands += 1;
    check_answer(&["down".into()], &out, Some(&doc), &mut tally, "final");
    let reported: BTreeSet<i32> = doc["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| {
            s["teardown"]["leftover_pids"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(s["error"]["leftover_pids"].as_array().into_iter().flatten())
                .filter_map(Value::as_i64)
                .map(|p| p as i32)
                .collect::<Vec<_>>()
        })
        .collect();
    let supervisor = supervisor_pid(&fleet);
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let mut quarantined_alive = Vec::new();
    for pid in fleet.alive() {
        // The supervisor, and guardians (the current one, and one whose
        // supervisor was killed and that still holds what it adopted, such as a
        // frozen grandchild). That they all end once what they hold is gone is
        // the last check of the test.
        if Some(pid) == supervisor || is_supervise(pid) {
            continue;
        }
        if reported.contains(&pid) || quarantine_pids(&fleet).contains(&pid) {
            quarantined_alive.push(pid);
        } else {
            tally.leftovers += 1;
            tally.violations.push(format!(
                "final: pid {pid} alive after down and not reported"
            ));
        }
    }
    for (server, pid) in escapees_alive(scratch.path()) {
        tally.leftovers += 1;
        tally
            .violations
            .push(format!("final: escapee {pid} of {server} alive after down"));
        kill_all(&[pid]);
    }
    // What was reported is ours to end: thaw it, kill it, clear the quarantine,
    // and prove that nothing at all is left.
    freezer.thaw();
    kill_all(&quarantined_alive);
    for name in SERVERS {
        let _ = fleet.run(&["reset", name]);
    }
    let _ = fleet.run(&["down"]);
    tally.violations.extend(two_live.lock().unwrap().drain(..));
    check_generations(&fleet, &mut tally);

    println!(
        "chaos: seed={seed} rounds={rounds} commands={} faults={} edits={} samples={} violations={} leftovers={}",
        tally.commands,
        tally.faults,
        edits.count,
        samples.load(Ordering::SeqCst),
        tally.violations.len(),
        tally.leftovers
    );
    assert!(
        tally.violations.is_empty(),
        "invariant violations (seed {seed}):\n{}",
        tally.violations.join("\n")
    );
    fleet.assert_no_leftovers();
}

fn run_round(fleet: &TestFleet, rng: &mut Rng, tally: &mut Tally, round: usize, servers: &[&str]) {
    let n = 3 + rng.below(5);
    let mut callers = Vec::new();
    let round_start = Instant::now();
    // The supervisor may be killed once per round, at a random moment.
    let kill_supervisor_at = rng.chance(45).then(|| rng.millis_below(900));
    let mut plan: Vec<(Duration, Vec<String>)> = (0..n)
        .map(|_| (rng.millis_below(400), command(rng, servers)))
        .collect();
    plan.sort_by_key(|(at, _)| *at);
    // Callers interrupted (SIGINT) or killed (SIGKILL) later in the round.
    let mut signals: Vec<(Duration, usize, bool)> = Vec::new();
    for (i, (start, _)) in plan.iter().enumerate() {
        if rng.chance(20) {
            let at = *start + Duration::from_millis(20) + rng.millis_below(500);
            signals.push((at, i, rng.chance(40)));
        }
    }
    let mut supervisor_killed = false;
    let mut next = 0;
    while next < plan.len()
        || !signals.is_empty()
        || kill_supervisor_at.is_some_and(|_| !supervisor_killed)
    {
        let now = round_start.elapsed();
        if next < plan.len() && plan[next].0 <= now {
            let args = plan[next].1.clone();
            let mut all: Vec<&str> = vec!["--output", "json"];
            all.extend(args.iter().map(String::as_str));
            callers.push(Caller {
                child: fleet.spawn(&all),
                args,
                started: Instant::now(),
                interrupted: false,
                killed: false,
            });
            tally.commands += 1;
            next += 1;
            continue;
        }
        if let Some(at) = kill_supervisor_at
            && !supervisor_killed
            && at <= now
        {
            supervisor_killed = true;
            if let Some(pid) = supervisor_pid(fleet) {
                kill_all(&[pid]);
                tally.faults += 1;
            }
            continue;
        }
        if let Some(k) = signals
            .iter()
            .position(|(at, i, _)| *at <= now && *i < callers.len())
        {
            let (_, i, kill) = signals.remove(k);
            let c = &mut callers[i];
            if kill {
                kill_all(&[c.child.id() as i32]);
                c.killed = true;
            } else {
                sigint(c.child.id());
                c.interrupted = true;
            }
            tally.faults += 1;
            continue;
        }
        // Signals aimed at callers never started (plan shorter than the index) are dropped.
        signals.retain(|(_, i, _)| *i < plan.len());
        std::thread::sleep(Duration::from_millis(5));
    }
    // Invariant 2: every caller answers.
    for c in callers {
        let pid = c.child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        let child = c.child;
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let left = ANSWER_BOUND.saturating_sub(c.started.elapsed());
        match rx.recv_timeout(left) {
            Ok(Ok(out)) if c.killed => drop(out),
            Ok(Ok(out)) => {
                let doc: Option<Value> = serde_json::from_slice(&out.stdout).ok();
                let label = format!("round {round}");
                // A Ctrl-C answered with 130, or one that came before the
                // command set up its handler and ended it the default way.
                if c.interrupted
                    && (out.status.code() == Some(130)
                        || std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(2))
                {
                    continue;
                }
                check_answer(&c.args, &out, doc.as_ref(), tally, &label);
            }
            Ok(Err(e)) => tally
                .violations
                .push(format!("round {round}: {:?}: cannot wait: {e}", c.args)),
            Err(_) => {
                kill_all(&[pid as i32]);
                tally.violations.push(format!(
                    "round {round}: {:?} gave no answer within {ANSWER_BOUND:?}",
                    c.args
                ));
            }
        }
    }
}

/// One random command on one or more of `servers`.
fn command(rng: &mut Rng, servers: &[&str]) -> Vec<String> {
    let some = |rng: &mut Rng| -> Vec<String> {
        let mut names: Vec<String> = servers
            .iter()
            .filter(|_| rng.chance(40))
            .map(|s| s.to_string())
            .collect();
        if names.is_empty() {
            names.push(rng.pick(servers).to_string());
        }
        names
    };
    let op = rng.below(100);
    let mut args: Vec<String> = match op {
        0..=29 => vec!["up".into()],
        30..=49 => vec!["down".into()],
        50..=61 => vec!["reconnect".into(), rng.pick(servers).to_string()],
        62..=71 => vec!["status".into()],
        72..=85 => {
            let server = rng.pick(&["plain", "slow", "family", "crashy"]).to_string();
            return vec![
                "call".into(),
                server,
                "echo".into(),
                "--args".into(),
                r#"{"chaos":true}"#.into(),
            ];
        }
        86..=92 => return vec!["up".into(), "--force".into(), "stuck".into()],
        _ => return vec!["reset".into(), "stuck".into()],
    };
    if op < 50 && rng.chance(70) {
        args.extend(some(rng));
    }
    args
}

/// Invariant 2 for one finished command.
fn check_answer(args: &[String], out: &Output, doc: Option<&Value>, tally: &mut Tally, when: &str) {
    let code = out.status.code();
    let Some(code) = code else {
        tally.violations.push(format!(
            "{when}: {args:?} ended by a signal: {:?}",
            out.status
        ));
        return;
    };
    if !CODES.contains(&code) {
        tally.violations.push(format!(
            "{when}: {args:?} exit {code}, not a documented code; stderr: {}",
            stderr(out)
        ));
        return;
    }
    let Some(doc) = doc else {
        // A command that lost its supervisor answers with a message on stderr and
        // exit 1; anything else must be a JSON document.
        if code != 1 && code != 130 {
            tally.violations.push(format!(
                "{when}: {args:?} exit {code} without a JSON document; stderr: {}",
                stderr(out)
            ));
        }
        return;
    };
    if let Some(said) = doc["exit_code"].as_i64()
        && said != i64::from(code)
    {
        tally.violations.push(format!(
            "{when}: {args:?} exit {code} but its document says {said}"
        ));
    }
    if let Some(lines) = doc["servers"].as_array() {
        let all_ok = lines
            .iter()
            .all(|s| s["exit_code"].as_i64().is_none_or(|c| c == 0));
        let lines_have_codes = lines.iter().any(|s| s["exit_code"].is_i64());
        if lines_have_codes && all_ok != (code == 0) {
            tally.violations.push(format!(
                "{when}: {args:?} exit {code} but its server lines say all_ok={all_ok}: {doc}"
            ));
        }
    }
}

/// Invariant 4: `status` agrees with the processes alive.
///
/// Right after a round the fleet may still be settling (a server that lost its
/// killed supervisor exits on stdin EOF a moment later), so a disagreement counts
/// only when it is still there after three looks, 300 ms apart.
fn check_status(fleet: &TestFleet, tally: &mut Tally, round: usize) {
    let mut found = Vec::new();
    for _ in 0..3 {
        found = status_disagreements(fleet, tally, round);
        if found.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    tally.violations.extend(found);
}

fn status_disagreements(fleet: &TestFleet, tally: &mut Tally, round: usize) -> Vec<String> {
    let mut found = Vec::new();
    let (out, doc) = fleet.run_json(&["status"]);
    tally.commands += 1;
    check_answer(&["status".into()], &out, Some(&doc), tally, "status");
    let alive = tagged_generations(&format!("{TEST_ID_VAR}={}", fleet.test_id));
    for name in STEADY {
        let line = server(&doc, name);
        let state = line["state"].as_str().unwrap_or("?");
        let generation = line["generation"].as_u64();
        let mine: Vec<&(u64, i32)> = alive
            .get(*name)
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        match state {
            "running" => {
                let pid = line["pid"].as_i64().map(|p| p as i32);
                let ok = pid.is_some_and(|p| {
                    is_alive(p) && mine.iter().any(|(g, q)| Some(*g) == generation && *q == p)
                });
                if !ok {
                    found.push(format!(
                        "round {round}: status says {name} running (gen {generation:?}, pid {pid:?}) but its processes are {mine:?}"
                    ));
                }
            }
            "stopped" | "failed" if !mine.is_empty() => {
                found.push(format!(
                    "round {round}: status says {name} {state} but {mine:?} are alive"
                ));
            }
            _ => {}
        }
    }
    found
}

/// Invariant 3: in the event log, each server's generations never go down.
fn check_generations(fleet: &TestFleet, tally: &mut Tally) {
    let text = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap_or_default();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(server), Some(generation)) =
            (event["server"].as_str(), event["generation"].as_u64())
        else {
            continue;
        };
        if event["to"] != "starting" || event["from"] == "starting" {
            continue;
        }
        if let Some(before) = last.get(server)
            && generation <= *before
        {
            tally.violations.push(format!(
                "events: {server} started generation {generation} after {before}"
            ));
        }
        last.insert(server.to_owned(), generation);
    }
    if last.is_empty() {
        tally
            .violations
            .push("events: no start was ever logged".to_string());
    }
}

/// Living processes of the run, by server: (generation, pid), read from their
/// `MCPFLEET_TAG` (`scope:server:generation`).
fn tagged_generations(entry: &str) -> BTreeMap<String, Vec<(u64, i32)>> {
    let mut out: BTreeMap<String, Vec<(u64, i32)>> = BTreeMap::new();
    for pid in processes_with(entry) {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let Some(tag) = environ
            .split(|b| *b == 0)
            .find_map(|e| e.strip_prefix(b"MCPFLEET_TAG=".as_slice()))
        else {
            continue;
        };
        let tag = String::from_utf8_lossy(tag);
        let mut parts = tag.rsplitn(3, ':');
        let (Some(generation), Some(server)) = (parts.next(), parts.next()) else {
            continue;
        };
        if let Ok(generation) = generation.parse() {
            out.entry(server.to_owned())
                .or_default()
                .push((generation, pid));
        }
    }
    out
}

/// A confirmed sighting of two live generations of one server, if any.
fn two_generations(entry: &str) -> Option<String> {
    for (server, procs) in tagged_generations(entry) {
        let generations: BTreeSet<u64> = procs.iter().map(|(g, _)| *g).collect();
        if generations.len() < 2 {
            continue;
        }
        // The scan is not atomic: an old process that died while the scan read on
        // is no sighting. Confirm that the older one is still alive now that the
        // newer one has been seen.
        let newest = *generations.iter().next_back().unwrap();
        let older_alive: Vec<&(u64, i32)> = procs
            .iter()
            .filter(|(g, p)| *g < newest && is_alive(*p))
            .collect();
        if !older_alive.is_empty() {
            return Some(format!(
                "{server}: generation {newest} alive while {older_alive:?} still are"
            ));
        }
    }
    None
}

/// A supervisor or a guardian (`mcpfleet __guard PID DIR`) of one.
fn is_supervise(pid: i32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .collect();
    args.last() == Some(&b"supervise".as_slice()) || args.get(1) == Some(&b"__guard".as_slice())
}

fn supervisor_pid(fleet: &TestFleet) -> Option<i32> {
    fleet.lock_pid().filter(|pid| is_alive(*pid))
}

/// The leftover pids that `state.json` records for quarantined servers.
fn quarantine_pids(fleet: &TestFleet) -> BTreeSet<i32> {
    let text = std::fs::read_to_string(fleet.state_dir().join("state.json")).unwrap_or_default();
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    doc["servers"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(_, s)| {
            s["quarantine"]["leftover_pids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_i64)
                .map(|p| p as i32)
                .collect::<Vec<_>>()
        })
        .collect()
}
