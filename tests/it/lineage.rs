//! Clean means clean: every descendant of a server is ended with it, whatever its
//! process group, session or environment (L13), under `check`, under `up`/`down`,
//! and after the supervisor was SIGKILLed (recovery); the server's stdout is still
//! read while it shuts down; a state directory of any length works.
//!
//! The escapees are the fixture's `--escape` shapes. Those that clear their
//! environment carry neither mcpfleet's tag nor the test's id: each notes its pid
//! in a file, and the tests check by pid that it is gone.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// Each escape shape and how many processes it leaves outside the group.
const SHAPES: [(&str, usize); 4] = [
    ("setsid-env-clear", 1),
    ("double-fork", 1),
    ("escapee-with-child", 2),
    ("new-group", 1),
];

fn pids(v: &Value) -> Vec<i32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|p| p.as_i64().unwrap() as i32)
        .collect()
}

fn escaper(label: &str, shape: &str, extra: &str) -> (TestFleet, std::path::PathBuf) {
    let fleet = TestFleet::raw(label, "");
    let pid_file = fleet.dir.path().join(format!("{shape}.pid"));
    let body = format!(
        "version: 1\nservers:\n{}",
        fixture_server(
            "esc",
            &["--escape", shape, "--pid-file", pid_file.to_str().unwrap()],
            extra
        )
    );
    std::fs::write(&fleet.path, body).unwrap();
    (fleet, pid_file)
}

fn assert_all_gone(escapees: &Escapees, context: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while escapees.0.iter().any(|p| is_alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let alive: Vec<i32> = escapees
        .0
        .iter()
        .copied()
        .filter(|p| is_alive(*p))
        .collect();
    assert!(
        alive.is_empty(),
        "{context}: escapees still alive: {alive:?}"
    );
}

#[test]
fn check_ends_every_escape_shape_and_never_calls_it_clean() {
    for (shape, n) in SHAPES {
        let (fleet, pid_file) = escaper(&format!("lineage-check-{shape}"), shape, "");
        // The escapees are started before the handshake is answered: they exist
        // by the time check tears the server down.
        let (out, doc) = fleet.run_json(&["check"]);
        let escapees = wait_escapees(&pid_file, n);
        assert_code(&out, 0);
        let s = server(&doc, "esc");
        let t = &s["teardown"];
        assert_eq!(t["outcome"], "escalated", "{shape}: {s}");
        assert_eq!(t["leftover_pids"], serde_json::json!([]), "{shape}: {s}");
        let escaped = pids(&t["escaped_pids"]);
        for p in &escapees.0 {
            assert!(
                escaped.contains(p),
                "{shape}: {p} not in escaped_pids {escaped:?}"
            );
        }
        assert_eq!(s["state"], "stopped", "{shape}: {s}");
        assert_all_gone(&escapees, shape);
        fleet.assert_no_leftovers();
    }
}

#[test]
fn check_strict_counts_an_escapee_as_not_clean() {
    let (fleet, pid_file) = escaper("lineage-strict", "setsid-env-clear", "");
    let (out, doc) = fleet.run_json(&["check", "--strict"]);
    let escapees = wait_escapees(&pid_file, 1);
    assert_code(&out, 5);
    assert_eq!(server(&doc, "esc")["teardown"]["outcome"], "escalated");
    assert_all_gone(&escapees, "strict");
    fleet.assert_no_leftovers();
}

#[test]
fn down_ends_every_escape_shape_of_a_running_fleet() {
    let fleet = TestFleet::raw("lineage-down", "");
    let mut body = String::from("version: 1\nservers:\n");
    let mut files = Vec::new();
    for (shape, n) in SHAPES {
        let pid_file = fleet.dir.path().join(format!("{shape}.pid"));
        body.push_str(&fixture_server(
            &shape.replace('-', "_"),
            &["--escape", shape, "--pid-file", pid_file.to_str().unwrap()],
            "",
        ));
        files.push((shape, n, pid_file));
    }
    std::fs::write(&fleet.path, body).unwrap();
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let all: Vec<(&str, Escapees)> = files
        .iter()
        .map(|(shape, n, file)| (*shape, wait_escapees(file, *n)))
        .collect();
    for (shape, escapees) in &all {
        assert!(
            escapees.0.iter().all(|p| is_alive(*p)),
            "{shape} escapees run"
        );
    }
    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    for (shape, escapees) in &all {
        let s = server(&doc, &shape.replace('-', "_"));
        assert_eq!(s["state"], "stopped", "{shape}: {s}");
        assert_eq!(s["teardown"]["outcome"], "escalated", "{shape}: {s}");
        assert_eq!(s["teardown"]["leftover_pids"], serde_json::json!([]));
        // The double fork's escapee is an orphan from its first moment: with four
        // servers running it stays undecided between them, and since all of them
        // are torn down together, each teardown takes it (none is called clean).
        let escaped = pids(&s["teardown"]["escaped_pids"]);
        for p in &escapees.0 {
            assert!(escaped.contains(p), "{shape}: {p} not in {escaped:?}");
        }
        assert_all_gone(escapees, shape);
    }
    fleet.assert_no_leftovers();
}

/// Waits until the supervisor has written `pids` as lineage members of `server`'s
/// live generation in state.json.
fn wait_recorded(fleet: &TestFleet, server: &str, pids: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text =
            std::fs::read_to_string(fleet.state_dir().join("state.json")).unwrap_or_default();
        let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let recorded: Vec<i32> = doc["servers"][server]["live"]["lineage"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m["pid"].as_i64())
                    .map(|p| p as i32)
                    .collect()
            })
            .unwrap_or_default();
        if pids.iter().all(|p| recorded.contains(p)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "lineage of {server} not recorded: want {pids:?}, state.json: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn recovery_ends_escapees_it_knows_only_by_their_recorded_identity() {
    for (shape, n) in SHAPES {
        let (fleet, pid_file) = escaper(&format!("lineage-recovery-{shape}"), shape, "");
        let (out, _) = fleet.run_json(&["up"]);
        assert_code(&out, 0);
        let escapees = wait_escapees(&pid_file, n);
        wait_recorded(&fleet, "esc", &escapees.0);
        let supervisor = fleet.lock_pid().expect("a supervisor");
        kill_all(&[supervisor]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_alive(supervisor) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            escapees.0.iter().all(|p| is_alive(*p)),
            "{shape}: outlived the supervisor"
        );
        // A new supervisor recovers before it does anything else.
        let (out, doc) = fleet.run_json(&["down"]);
        assert_code(&out, 0);
        assert_eq!(server(&doc, "esc")["state"], "stopped", "{shape}: {doc}");
        assert_all_gone(&escapees, shape);
        let events = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap();
        assert!(
            events.contains("\"recovery\""),
            "{shape}: no recovery event:\n{events}"
        );
        fleet.assert_no_leftovers();
    }
}

#[test]
fn a_server_that_writes_while_it_shuts_down_is_read_to_its_end() {
    // The fixture writes a line 100 ms after stdin EOF and exits 1 if that write
    // fails: closing stdin must not also close the reading end of its stdout.
    let fleet = TestFleet::fixtures("lineage-eof-write", &[("talker", &["--write-on-eof"], "")]);
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    let t = &server(&doc, "talker")["teardown"];
    assert_eq!(t["outcome"], "clean", "{t}");
    assert_eq!(t["exit"], "exit code 0", "{t}");
    // Under the supervisor too.
    assert_code(&fleet.run(&["up"]), 0);
    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    let t = &server(&doc, "talker")["teardown"];
    assert_eq!(t["outcome"], "clean", "{t}");
    assert_eq!(t["exit"], "exit code 0", "{t}");
    fleet.assert_no_leftovers();
}

#[test]
fn a_state_directory_of_200_characters_works() {
    let fleet = TestFleet::fixtures("lineage-long-dir", &[("plain", &[], "")]);
    let mut dir = fleet.dir.path().to_path_buf();
    while dir.as_os_str().len() < 200 {
        dir.push("a-rather-long-directory-name");
    }
    let run = |args: &[&str]| {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let mut cmd = fleet.command(&all);
        cmd.env("MCPFLEET_STATE_DIR", &dir);
        let out = run_bounded(cmd, Duration::from_secs(60));
        let doc = parse_doc(&out);
        (out, doc)
    };
    assert!(dir.as_os_str().len() >= 200);
    let (out, doc) = run(&["up"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "plain")["state"], "running");
    let (out, doc) = run(&["status"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "plain")["state"], "running");
    assert!(
        dir.join("control.sock").exists(),
        "the socket lives in the state directory"
    );
    let (out, doc) = run(&["down"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "plain")["state"], "stopped");
    fleet.assert_no_leftovers();
}

#[test]
fn a_teardown_that_cannot_end_a_frozen_process_fails_and_quarantines() {
    let freezer = Freezer::new("lineage-frozen");
    let fleet = TestFleet::fixtures(
        "lineage-frozen",
        &[(
            "stuck",
            &["--frozen-grandchild", freezer.path()],
            "cleanup_timeout: 1s",
        )],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 5);
    let s = server(&doc, "stuck");
    assert_eq!(s["teardown"]["outcome"], "failed", "{s}");
    let frozen = freezer.pids();
    assert_eq!(frozen.len(), 1, "{frozen:?}");
    assert_eq!(pids(&s["teardown"]["leftover_pids"]), frozen, "{s}");
    assert_eq!(s["state"], "quarantined");
    drop(freezer);
    fleet.assert_no_leftovers();
}

#[test]
fn a_quarantined_generations_leftover_is_never_charged_to_another_server() {
    // `stuck`'s frozen grandchild outlives its quarantined generation as an orphan
    // of the supervisor, carrying `stuck`'s tag. When `crashy`, the one server
    // still running, then exits, its sweep must not take that orphan for its own.
    let freezer = Freezer::new("lineage-leftover");
    let fleet = TestFleet::fixtures(
        "lineage-leftover",
        &[
            (
                "stuck",
                &["--frozen-grandchild", freezer.path()],
                "cleanup_timeout: 1s",
            ),
            (
                "crashy",
                &[],
                "restart: { policy: on-failure, max_restarts: 0 }",
            ),
        ],
    );
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let (out, doc) = fleet.run_json(&["down", "stuck"]);
    assert_code(&out, 5);
    assert_eq!(server(&doc, "stuck")["state"], "quarantined");
    let (_, doc) = fleet.run_json(&["status"]);
    let crashy = server(&doc, "crashy")["pid"].as_i64().expect("crashy runs") as i32;
    kill_all(&[crashy]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let crashy = loop {
        let (_, doc) = fleet.run_json(&["status"]);
        let s = server(&doc, "crashy").clone();
        if s["state"] != "running" {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "crashy never noticed its exit: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(crashy["state"], "crash-loop", "{crashy}");
    assert_eq!(crashy["error"]["kind"], "crash_loop", "{crashy}");
    drop(freezer);
    let (out, _) = fleet.run_json(&["reset", "stuck"]);
    assert_code(&out, 0);
    let (out, _) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
}

#[test]
fn an_escapee_not_yet_recorded_when_the_supervisor_is_killed_is_still_ended() {
    // The double fork's escapee is an orphan of the supervisor from its first
    // moment, and the server is still in its handshake (3 s): nothing of the
    // escapee is in state.json when the supervisor is SIGKILLed. The guardian
    // above the supervisor adopts it, and the next supervisor's recovery ends it.
    let (fleet, pid_file) = escaper("lineage-unrecorded", "double-fork", "connect_timeout: 20s");
    let body = std::fs::read_to_string(&fleet.path).unwrap().replace(
        "\"double-fork\",",
        "\"double-fork\", \"--init-delay-ms\", \"3000\",",
    );
    std::fs::write(&fleet.path, body).unwrap();
    let up = fleet.spawn(&["up"]);
    let escapees = wait_escapees(&pid_file, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let supervisor = loop {
        if let Some(pid) = fleet.lock_pid() {
            break pid;
        }
        assert!(Instant::now() < deadline, "no supervisor");
        std::thread::sleep(Duration::from_millis(10));
    };
    let state = std::fs::read_to_string(fleet.state_dir().join("state.json")).unwrap();
    assert!(
        !state.contains(&format!("\"pid\":{}", escapees.0[0])),
        "the escapee is already recorded; the test would not test the guardian: {state}"
    );
    kill_all(&[supervisor]);
    let out = up.wait_with_output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(0),
        "up succeeded with its supervisor killed"
    );
    assert!(
        is_alive(escapees.0[0]),
        "the escapee outlived its supervisor"
    );
    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "esc")["state"], "stopped", "{doc}");
    assert_all_gone(&escapees, "unrecorded double fork");
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_just_spawned_is_never_taken_for_another_generations_orphan() {
    // Servers that die during the handshake are torn down while the others are
    // still being spawned: a new server is a child of mcpfleet that leads its own
    // group, as an orphan that changed its process group would. Taken for one,
    // it would be ended by the other server's teardown.
    let mut servers: Vec<(String, Vec<&str>)> =
        (0..24).map(|i| (format!("fine{i}"), vec![])).collect();
    for i in 0..4 {
        servers.push((format!("dies{i}"), vec!["--exit-during-init", "1"]));
    }
    let list: Vec<(&str, &[&str], &str)> = servers
        .iter()
        .map(|(n, a)| (n.as_str(), a.as_slice(), ""))
        .collect();
    let fleet = TestFleet::fixtures("lineage-no-mixup", &list);
    for round in 0..6 {
        let (out, doc) = fleet.run_json(&["check"]);
        assert_code(&out, 3);
        for (name, args) in &servers {
            let s = server(&doc, name);
            let want = if args.is_empty() { 0 } else { 3 };
            assert_eq!(s["exit_code"], want, "round {round}: {s}");
            assert_eq!(
                s["teardown"]["escaped_pids"],
                serde_json::json!([]),
                "round {round}: {s}"
            );
        }
    }
    fleet.assert_no_leftovers();
}
