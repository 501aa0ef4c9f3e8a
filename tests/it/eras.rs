//! Protocol eras toward servers over stdio: the probe that finds a server's era
//! before its session (docs/design.md §11, "Eras"), a session in each era, the
//! health check of each era, and lists that reach the server. Against the
//! fixture's `--era` modes, which note every request they get
//! (`--note-requests`). The same over HTTP is in `remote.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A fleet of one fixture server `name` with `args`, noting its requests; the
/// fleet and the file of notes.
fn noted(label: &str, name: &str, args: &[&str], extra: &str) -> (TestFleet, PathBuf) {
    let probe = TestFleet::raw(label, "");
    let notes = probe.dir.path().join("requests.txt");
    let notes_arg = notes.to_str().unwrap().to_owned();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--note-requests", &notes_arg]);
    let body = format!(
        "version: 1\nservers:\n{}",
        fixture_server(name, &all, extra)
    );
    std::fs::write(&probe.path, body).unwrap();
    (probe, notes)
}

/// The methods of the requests the fixture got, in order.
fn requests(notes: &Path) -> Vec<String> {
    std::fs::read_to_string(notes)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn count(notes: &Path, method: &str) -> usize {
    requests(notes).iter().filter(|m| *m == method).count()
}

/// `up` of the whole fleet, as JSON; the server's line.
fn up(fleet: &TestFleet, name: &str) -> Value {
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let s = server(&doc, name).clone();
    assert_eq!(s["state"], "running", "{s}");
    s
}

#[test]
fn a_modern_only_server_over_stdio_is_started_listed_called_and_stopped() {
    let (fleet, notes) = noted("eras-modern", "modern", &["--era", "modern"], "");
    let s = up(&fleet, "modern");
    assert_eq!(s["tools"], 3, "{s}");
    assert!(
        s["server_info"]
            .as_str()
            .is_some_and(|i| i.starts_with("mcpfleet-fixture ")),
        "the server's name comes from its discover answer: {s}"
    );
    assert_eq!(s["protocol_version"], "2026-07-28", "{s}");

    let tools = tools_of(&fleet, "modern");
    assert_eq!(tools, ["echo", "tool_2", "tool_3"]);
    let (out, doc) = fleet.run_json(&["call", "modern", "echo", "--args", r#"{"era":"modern"}"#]);
    assert_code(&out, 0);
    assert!(doc.to_string().contains(r#"{\"era\":\"modern\"}"#), "{doc}");

    let (out, doc) = fleet.run_json(&["status"]);
    assert_code(&out, 0);
    let s = server(&doc, "modern");
    assert_eq!(s["state"], "running");
    assert_eq!(s["protocol_version"], "2026-07-28", "{s}");

    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "modern")["teardown"]["outcome"], "clean");
    fleet.assert_no_leftovers();
    let got = requests(&notes);
    assert!(
        !got.iter().any(|m| m == "initialize" || m == "ping"),
        "a modern session never sends initialize or ping: {got:?}"
    );
    assert_eq!(
        got.first().map(String::as_str),
        Some("server/discover"),
        "{got:?}"
    );
}

#[test]
fn a_dual_era_server_is_spoken_to_in_the_legacy_era() {
    let (fleet, notes) = noted("eras-dual", "dual", &["--era", "dual"], "");
    let s = up(&fleet, "dual");
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    assert_eq!(tools_of(&fleet, "dual").len(), 3);
    down_and_no_leftovers(&fleet);
    let got = requests(&notes);
    assert_eq!(
        got[..2],
        ["server/discover", "initialize"],
        "the probe, then the legacy handshake on the same pipe"
    );
}

#[test]
fn a_legacy_server_that_refuses_discover_starts_with_initialize() {
    let (fleet, notes) = noted("eras-legacy", "legacy", &[], "");
    let s = up(&fleet, "legacy");
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    let (out, doc) = fleet.run_json(&["call", "legacy", "echo", "--args", r#"{"era":"legacy"}"#]);
    assert_code(&out, 0);
    assert!(doc.to_string().contains("legacy"), "{doc}");
    down_and_no_leftovers(&fleet);
    assert_eq!(
        requests(&notes)[..3],
        ["server/discover", "initialize", "tools/list"],
        "the probe, then the legacy handshake on the same pipe"
    );
}

#[test]
fn a_server_that_answers_discover_with_an_empty_result_is_legacy() {
    let (fleet, notes) = noted("eras-empty", "empty", &["--era", "empty"], "");
    let s = up(&fleet, "empty");
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    assert_eq!(tools_of(&fleet, "empty").len(), 3);
    down_and_no_leftovers(&fleet);
    assert_eq!(requests(&notes)[..2], ["server/discover", "initialize"]);
}

#[test]
fn a_legacy_server_silent_on_unknown_methods_starts_within_the_probe_s_bound() {
    // The same legacy server, once answering the probe and once silent on it:
    // silence costs the start the probe's bound (1 s) and no more.
    let (answers, _) = noted("eras-answers", "answers", &[], "");
    let (silent, notes) = noted("eras-silent", "silent", &["--era", "silent"], "");
    let started = Instant::now();
    let s = up(&silent, "silent");
    let took = started.elapsed();
    let quiet = s["connect_ms"].as_u64().unwrap();
    let fast = up(&answers, "answers")["connect_ms"].as_u64().unwrap();
    eprintln!("connect_ms: {fast} answering the probe, {quiet} silent on it");
    assert!(
        (1000..3000).contains(&quiet),
        "a silent probe waits 1 s, then initialize goes on: {quiet} ms"
    );
    assert!(
        took < Duration::from_secs(10),
        "well within the connect timeout"
    );
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    assert_eq!(requests(&notes)[..2], ["server/discover", "initialize"]);
    down_and_no_leftovers(&silent);
    down_and_no_leftovers(&answers);
}

#[test]
fn the_probe_s_bound_is_at_most_a_quarter_of_the_connect_timeout() {
    let (fleet, _) = noted(
        "eras-short",
        "silent",
        &["--era", "silent"],
        "connect_timeout: 1200ms",
    );
    let s = up(&fleet, "silent");
    let took = s["connect_ms"].as_u64().unwrap();
    assert!(
        (300..1000).contains(&took),
        "waited 300 ms for the probe: {took} ms"
    );
    down_and_no_leftovers(&fleet);
}

#[test]
fn health_of_a_modern_server_is_checked_with_discover_never_ping() {
    let (fleet, notes) = noted(
        "eras-health",
        "modern",
        &["--era", "modern"],
        "health: { interval: 200ms, timeout: 150ms, failures: 1 }",
    );
    up(&fleet, "modern");
    let deadline = Instant::now() + Duration::from_secs(10);
    // The probe and rmcp's discover come first; three more are health checks.
    while count(&notes, "server/discover") < 5 {
        assert!(
            Instant::now() < deadline,
            "no health checks: {:?}",
            requests(&notes)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (out, doc) = fleet.run_json(&["status"]);
    assert_code(&out, 0);
    let s = server(&doc, "modern");
    assert_eq!(
        (s["state"].as_str(), s["generation"].as_u64()),
        (Some("running"), Some(1)),
        "every check was answered: {s}"
    );
    down_and_no_leftovers(&fleet);
    assert_eq!(count(&notes, "ping"), 0, "{:?}", requests(&notes));
}

#[test]
fn a_modern_server_is_asked_for_its_tools_every_time() {
    // The fixture's lists say they stay fresh for a minute (ttlMs); mcpfleet asks
    // all the same, so that a list never outlives a change.
    let (fleet, notes) = noted("eras-lists", "modern", &["--era", "modern"], "");
    up(&fleet, "modern");
    // The start lists the tools, and so does the gateway's catalog as soon as the
    // generation runs (its prefetch, which may come after `up` answers): wait for
    // both before counting.
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&notes, "tools/list") < 2 {
        assert!(Instant::now() < deadline, "{:?}", requests(&notes));
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = count(&notes, "tools/list");
    assert_eq!(before, 2, "{:?}", requests(&notes));
    tools_of(&fleet, "modern");
    tools_of(&fleet, "modern");
    assert_eq!(
        count(&notes, "tools/list"),
        before + 2,
        "{:?}",
        requests(&notes)
    );
    down_and_no_leftovers(&fleet);
}

#[test]
fn a_new_generation_probes_again() {
    let (fleet, notes) = noted("eras-again", "modern", &["--era", "modern"], "");
    up(&fleet, "modern");
    let before = count(&notes, "server/discover");
    let (out, doc) = fleet.run_json(&["reconnect", "modern"]);
    assert_code(&out, 0);
    let s = server(&doc, "modern");
    assert_eq!(
        (s["generation"].as_u64(), s["protocol_version"].as_str()),
        (Some(2), Some("2026-07-28")),
        "{s}"
    );
    assert!(
        count(&notes, "server/discover") >= before + 2,
        "{:?}",
        requests(&notes)
    );
    down_and_no_leftovers(&fleet);
}

#[test]
fn a_modern_server_slower_to_start_than_the_probe_s_bound_starts_modern() {
    // It reads nothing for 1.5 s: the probe goes unanswered, `initialize`
    // follows, and the server then answers the probe and refuses `initialize`.
    let (fleet, notes) = noted(
        "eras-slow",
        "slow",
        &["--era", "modern", "--boot-delay-ms", "1500"],
        "",
    );
    let s = up(&fleet, "slow");
    assert_eq!(s["protocol_version"], "2026-07-28", "{s}");
    let (out, doc) = fleet.run_json(&["call", "slow", "echo", "--args", r#"{"late":true}"#]);
    assert_code(&out, 0);
    assert!(doc.to_string().contains("late"), "{doc}");
    down_and_no_leftovers(&fleet);
    assert_eq!(
        requests(&notes)[..3],
        ["server/discover", "initialize", "server/discover"],
        "the probe, the refused initialize, then rmcp's discover"
    );
}
