//! Exit detection, restart with backoff and crash loop, health checks and idle stop,
//! end to end: the real binary, a supervisor and fixture servers that crash, hang
//! and idle. Timings here are generous bounds on behaviour, not performance claims.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

fn events(fleet: &TestFleet, server: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["server"] == server)
        .collect()
}

fn status_of(fleet: &TestFleet, server: &str) -> Value {
    let (_, doc) = fleet.run_json(&["status", server]);
    doc["servers"][0].clone()
}

/// Polls `status` until `pred` holds for the server, or fails after `limit`.
fn wait_status(
    fleet: &TestFleet,
    server: &str,
    limit: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let s = status_of(fleet, server);
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{server} never reached the expected state: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn millis_of(time: &Value) -> i64 {
    // "YYYY-MM-DDTHH:MM:SS.mmmZ": enough for differences within a test.
    let t = time.as_str().unwrap();
    let h: i64 = t[11..13].parse().unwrap();
    let m: i64 = t[14..16].parse().unwrap();
    let s: i64 = t[17..19].parse().unwrap();
    let ms: i64 = t[20..23].parse().unwrap();
    ((h * 60 + m) * 60 + s) * 1000 + ms
}

#[test]
fn a_crashing_server_is_restarted_with_growing_delays_then_stops_in_crash_loop() {
    let fleet = TestFleet::fixtures(
        "restart-crashloop",
        &[(
            "crashy",
            &["--crash-after-ms", "200"],
            "restart: { policy: on-failure, backoff: { initial: 200ms, max: 5s }, max_restarts: 3, window: 60s }",
        )],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let s = wait_status(&fleet, "crashy", Duration::from_secs(20), |s| {
        s["state"] == "crash-loop"
    });
    assert_eq!(
        s["generation"], 4,
        "three restarts: generations 2, 3, 4; {s}"
    );
    assert_eq!(s["restarts"], 3);
    assert_eq!(s["error"]["kind"], "crash_loop");
    assert!(
        s["error"]["stderr_tail"]
            .to_string()
            .contains("fixture: crashing after 200 ms"),
        "{s}"
    );

    // Each restart waited longer than the one before (200ms, 400ms, 800ms ±20%).
    let ev = events(&fleet, "crashy");
    let exits: Vec<i64> = ev
        .iter()
        .filter(|e| e["cause"] == "exited")
        .map(|e| millis_of(&e["time"]))
        .collect();
    let restarts: Vec<i64> = ev
        .iter()
        .filter(|e| e["cause"] == "restart" && e["to"] == "starting")
        .map(|e| millis_of(&e["time"]))
        .collect();
    assert_eq!(exits.len(), 4, "{ev:#?}");
    assert_eq!(restarts.len(), 3, "{ev:#?}");
    let delays: Vec<i64> = restarts.iter().zip(&exits).map(|(r, e)| r - e).collect();
    assert!(
        delays[0] >= 150 && delays[1] > delays[0] && delays[2] > delays[1],
        "{delays:?}"
    );

    // `up` does not quietly start a crash-looping server: it says so and fails.
    let (out, doc) = fleet.run_json(&["up", "crashy"]);
    assert_code(&out, 3);
    assert_eq!(doc["servers"][0]["error"]["kind"], "crash_loop");
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn with_policy_never_an_exited_server_stays_failed_with_its_stderr() {
    let fleet = TestFleet::fixtures(
        "restart-never",
        &[("once", &["--crash-after-ms", "300"], "")],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let s = wait_status(&fleet, "once", Duration::from_secs(10), |s| {
        s["state"] == "failed"
    });
    assert_eq!(s["generation"], 1);
    assert_eq!(s["error"]["kind"], "exited");
    assert!(
        s["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exit code 1"),
        "{s}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        status_of(&fleet, "once")["generation"],
        1,
        "never restarted"
    );
    // The exit was noticed at once, not at the next request.
    let ev = events(&fleet, "once");
    let running = ev.iter().find(|e| e["to"] == "running").unwrap();
    let failed = ev.iter().find(|e| e["to"] == "failed").unwrap();
    let gap = millis_of(&failed["time"]) - millis_of(&running["time"]);
    assert!((250..1500).contains(&gap), "exit noticed after {gap}ms");
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

/// A server that closes its stdout but runs on no longer serves: its session's
/// end is noticed like an exit, its process is torn down (it ignores stdin EOF, so
/// with a signal), and it is reported as a protocol failure, not left `running`.
#[test]
fn a_server_whose_session_ends_while_it_runs_is_torn_down_and_reported() {
    let fleet = TestFleet::fixtures(
        "session-ends",
        &[(
            "mute",
            &["--close-stdout-after-ms", "400", "--ignore-eof"],
            "cleanup_timeout: 2s",
        )],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let pid = status_of(&fleet, "mute")["pid"].as_i64().unwrap() as i32;
    let s = wait_status(&fleet, "mute", Duration::from_secs(10), |s| {
        s["state"] == "failed"
    });
    assert_eq!(s["error"]["kind"], "protocol", "{s}");
    assert!(
        s["error"]["message"]
            .as_str()
            .unwrap()
            .contains("closed its stdout"),
        "{s}"
    );
    assert_eq!(s["teardown"]["signal"], "SIGTERM", "{s}");
    assert!(!is_alive(pid), "the muted server {pid} still runs");
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_backoff_longer_than_the_idle_linger_keeps_the_supervisor_for_the_restart() {
    // The only server crashes and backs off for longer than an idle supervisor
    // lingers. Nobody talks to the supervisor meanwhile: it must not take the
    // pending restart for "every server is down" and exit.
    let fleet = TestFleet::fixtures(
        "restart-long-backoff",
        &[(
            "crashy",
            &["--crash-after-ms", "300"],
            "restart: { policy: on-failure, backoff: { initial: 3500ms, max: 3500ms }, max_restarts: 5, window: 60s }",
        )],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let restarted = events(&fleet, "crashy")
            .iter()
            .any(|e| e["to"] == "starting" && e["generation"] == 2);
        if restarted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "generation 2 never started: {:#?}",
            events(&fleet, "crashy")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_down_during_backoff_cancels_the_pending_restart() {
    let fleet = TestFleet::fixtures(
        "restart-down-in-backoff",
        &[(
            "crashy",
            &["--crash-after-ms", "200"],
            "restart: { policy: always, backoff: { initial: 2s, max: 2s } }",
        )],
    );
    assert_code(&fleet.run(&["up"]), 0);
    wait_status(&fleet, "crashy", Duration::from_secs(10), |s| {
        s["state"] == "backoff"
    });
    let (out, doc) = fleet.run_json(&["down", "crashy"]);
    assert_code(&out, 0);
    assert_eq!(doc["servers"][0]["state"], "stopped");
    // Well past the backoff: no restart happened.
    std::thread::sleep(Duration::from_millis(3000));
    let ev = events(&fleet, "crashy");
    assert!(!ev.iter().any(|e| e["cause"] == "restart"), "{ev:#?}");
    assert_eq!(status_of(&fleet, "crashy")["generation"], 1);
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_that_stops_answering_pings_is_restarted() {
    let fleet = TestFleet::fixtures(
        "restart-health",
        &[(
            "hangs",
            &["--hang-after-ms", "400"],
            "health: { interval: 300ms, timeout: 200ms, failures: 2 }",
        )],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let first_pid = status_of(&fleet, "hangs")["pid"].as_i64().unwrap() as i32;
    let s = wait_status(&fleet, "hangs", Duration::from_secs(10), |s| {
        s["state"] == "running" && s["generation"].as_u64() >= Some(2)
    });
    assert!(
        !is_alive(first_pid),
        "the hung generation was torn down first"
    );
    assert_ne!(s["pid"].as_i64().unwrap() as i32, first_pid);
    let ev = events(&fleet, "hangs");
    let health: Vec<(String, String)> = ev
        .iter()
        .filter(|e| e["cause"] == "health")
        .take(4)
        .map(|e| {
            (
                e["from"].as_str().unwrap().into(),
                e["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("running", "stopping"),
        ("stopping", "stopped"),
        ("stopped", "starting"),
        ("starting", "running"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(health, want);
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_health_restart_racing_a_fenced_reconnect_makes_one_generation() {
    let fleet = TestFleet::fixtures(
        "restart-health-race",
        &[(
            "hangs",
            &["--hang-after-ms", "300"],
            "health: { interval: 200ms, timeout: 100ms, failures: 1 }",
        )],
    );
    assert_code(&fleet.run(&["up"]), 0);
    // The script decided to reconnect generation 1; the health check gets there too.
    std::thread::sleep(Duration::from_millis(700));
    let (out, doc) = fleet.run_json(&["reconnect", "hangs", "--if-generation", "1"]);
    let gen_after = status_of(&fleet, "hangs")["generation"].as_u64().unwrap();
    match out.status.code() {
        // The health check restarted first: the script's reconnect is fenced.
        Some(6) => assert_eq!(doc["servers"][0]["error"]["kind"], "fenced"),
        // The script came first: its reconnect made generation 2.
        Some(0) => assert_eq!(doc["servers"][0]["generation"], 2),
        other => panic!("unexpected exit {other:?}: {doc}"),
    }
    // Generations are consecutive: no restart was done twice for one cause.
    let starts: Vec<u64> = events(&fleet, "hangs")
        .iter()
        .filter(|e| e["to"] == "starting")
        .map(|e| e["generation"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=starts.len() as u64).collect();
    assert_eq!(starts, expected);
    assert!(gen_after >= 2);
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn an_idle_server_is_stopped_and_the_next_call_starts_it_again() {
    let fleet = TestFleet::fixtures("restart-idle", &[("lazy", &[], "idle_timeout: 600ms")]);
    assert_code(&fleet.run(&["up"]), 0);
    let s = wait_status(&fleet, "lazy", Duration::from_secs(10), |s| {
        s["state"] == "stopped"
    });
    assert_eq!(s["generation"], 1);
    let ev = events(&fleet, "lazy");
    assert!(
        ev.iter()
            .any(|e| e["cause"] == "idle" && e["to"] == "stopped"),
        "{ev:#?}"
    );
    // A call starts a new generation, serialized like any other start.
    let out = fleet.run(&["call", "lazy", "echo", "--args", r#"{"again": true}"#]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out).trim(), r#"{"again":true}"#);
    assert_eq!(status_of(&fleet, "lazy")["generation"], 2);
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn check_reports_a_server_that_exits_while_running() {
    let fleet = TestFleet::fixtures(
        "restart-check",
        &[(
            "dies",
            &["--crash-after-ms", "100", "--init-delay-ms", "0"],
            "",
        )],
    );
    // `check` lists tools right after the handshake; make the teardown come later
    // than the crash by giving check something slow to wait for.
    let slow = fixture_server("slow", &["--init-delay-ms", "1500"], "");
    let mut body = std::fs::read_to_string(&fleet.path).unwrap();
    body.push_str(&slow);
    std::fs::write(&fleet.path, body).unwrap();
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 3);
    let s = server(&doc, "dies");
    assert_eq!(s["error"]["kind"], "exited", "{s}");
    assert_eq!(s["exit_code"], 3);
    assert_eq!(server(&doc, "slow")["exit_code"], 0);
    fleet.assert_no_leftovers();
}
