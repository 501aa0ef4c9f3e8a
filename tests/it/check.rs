//! `mcpfleet check` against real fixture processes, through the real binary: each
//! lifecycle rule that holds in one process (L1, L2, L4, L5, L7, L8, L9) and the
//! exit codes of docs/design.md §5.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

#[test]
fn healthy_servers_start_list_tools_and_tear_down_clean() {
    let fleet = TestFleet::fixtures(
        "healthy",
        &[
            ("alpha", &["--tools", "5"], ""),
            ("beta", &["--tools", "7", "--page-size", "2"], ""),
        ],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["command"], "check");
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["interrupted"], false);
    assert_eq!(doc["servers"].as_array().unwrap().len(), 2);
    for (name, tools) in [("alpha", 5), ("beta", 7)] {
        let s = server(&doc, name);
        assert_eq!(s["transport"], "stdio");
        assert_eq!(s["state"], "stopped");
        assert_eq!(s["generation"], 1);
        assert_eq!(s["pid"], Value::Null);
        assert_eq!(
            s["tools"], tools,
            "{name}: paginated tools/list is followed"
        );
        assert!(s["connect_ms"].as_u64().is_some(), "{s}");
        assert_eq!(s["error"], Value::Null);
        assert_eq!(s["exit_code"], 0);
        assert_eq!(s["server_info"], format!("mcpfleet-fixture {}", "0.1.0"));
        let t = &s["teardown"];
        assert_eq!(t["outcome"], "clean", "{s}");
        assert_eq!(t["signal"], Value::Null);
        assert_eq!(t["leftover_pids"], serde_json::json!([]));
        assert_eq!(t["exit"], "exit code 0");
        assert!(t["duration_ms"].as_u64().unwrap() < 3000, "{t}");
    }
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_that_never_answers_initialize_is_killed_at_its_deadline() {
    let fleet = TestFleet::fixtures(
        "never-init",
        &[
            (
                "mute",
                &["--never-answer-init", "--ignore-eof"],
                "connect_timeout: 1s\ncleanup_timeout: 2s",
            ),
            ("fine", &[], ""),
        ],
    );
    let started = Instant::now();
    let (out, doc) = fleet.run_json(&["check"]);
    let took = started.elapsed();
    assert_code(&out, 4);
    assert_eq!(doc["exit_code"], 4);
    let s = server(&doc, "mute");
    assert_eq!(s["state"], "failed");
    assert_eq!(s["error"]["kind"], "connect_timeout");
    assert_eq!(s["error"]["phase"], "initialize");
    assert!(
        s["error"]["message"].as_str().unwrap().contains("1s"),
        "{s}"
    );
    // It ignores EOF, so the half-started process needed a signal (L8).
    assert_eq!(s["teardown"]["outcome"], "escalated");
    assert_eq!(s["teardown"]["signal"], "SIGTERM");
    assert_eq!(s["exit_code"], 4);
    // The other server is not held up by the mute one (L1).
    assert_eq!(server(&doc, "fine")["exit_code"], 0);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_that_exits_during_initialize_reports_its_stderr() {
    let fleet = TestFleet::fixtures(
        "exit-init",
        &[(
            "dies",
            &[
                "--stderr-line",
                "config file missing: /etc/thing.conf",
                "--exit-during-init",
                "7",
            ],
            "",
        )],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 3);
    let s = server(&doc, "dies");
    assert_eq!(s["state"], "failed");
    assert_eq!(s["error"]["kind"], "connect_failed");
    assert_eq!(s["error"]["phase"], "initialize");
    let message = s["error"]["message"].as_str().unwrap();
    assert!(message.contains("exit code 7"), "{message}");
    let tail: Vec<&str> = s["error"]["stderr_tail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        tail.contains(&"config file missing: /etc/thing.conf"),
        "{tail:?}"
    );
    assert!(
        tail.contains(&"fixture: exiting during initialize with code 7"),
        "{tail:?}"
    );
    // Text output carries the same facts for a person.
    let text = fleet.run(&["check"]);
    assert_code(&text, 3);
    let shown = stdout(&text);
    assert!(shown.contains("connect_failed"), "{shown}");
    assert!(shown.contains("| config file missing"), "{shown}");
    fleet.assert_no_leftovers();
}

#[test]
fn a_missing_command_is_a_spawn_failure() {
    let fleet = TestFleet::raw(
        "spawn-fail",
        "version: 1\nservers:\n  ghost:\n    command: /nonexistent/mcp-server\n",
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 3);
    let s = server(&doc, "ghost");
    assert_eq!(s["error"]["kind"], "spawn_failed");
    assert_eq!(s["error"]["phase"], "spawn");
    assert_eq!(s["teardown"], Value::Null);
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_ignoring_eof_and_sigterm_is_sigkilled_within_its_cleanup_deadline() {
    let fleet = TestFleet::fixtures(
        "stubborn",
        &[(
            "stubborn",
            &["--ignore-eof", "--ignore-sigterm"],
            "cleanup_timeout: 2s",
        )],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    let t = &server(&doc, "stubborn")["teardown"];
    assert_eq!(t["outcome"], "escalated", "{t}");
    assert_eq!(t["signal"], "SIGKILL");
    assert_eq!(t["exit"], "killed by SIGKILL");
    assert_eq!(t["leftover_pids"], serde_json::json!([]));
    let ms = t["duration_ms"].as_u64().unwrap();
    // 30% of 2s for EOF, then 50% for SIGTERM: SIGKILL at about 1.6s, within 2s.
    assert!((1500..2000).contains(&ms), "teardown took {ms}ms");
    fleet.assert_no_leftovers();

    let (strict, doc) = fleet.run_json(&["check", "--strict"]);
    assert_code(&strict, 5);
    assert_eq!(server(&doc, "stubborn")["exit_code"], 5);
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_ignoring_eof_gets_sigterm() {
    let fleet = TestFleet::fixtures(
        "no-eof",
        &[("lingers", &["--ignore-eof"], "cleanup_timeout: 1s")],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    let t = &server(&doc, "lingers")["teardown"];
    assert_eq!(t["outcome"], "escalated");
    assert_eq!(t["signal"], "SIGTERM");
    assert_eq!(t["exit"], "killed by SIGTERM");
    fleet.assert_no_leftovers();
}

#[test]
fn a_grandchild_in_the_process_group_is_gone_after_teardown() {
    let fleet = TestFleet::raw("grandchild", "");
    let pid_file = fleet.dir.path().join("pids.json");
    let body = format!(
        "version: 1\nservers:\n{}",
        fixture_server(
            "parent",
            &["--grandchild", "--pid-file", pid_file.to_str().unwrap()],
            ""
        )
    );
    std::fs::write(&fleet.path, body).unwrap();
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    let (pid, grandchildren) = read_pid_file(&pid_file);
    assert_eq!(grandchildren.len(), 1);
    assert!(!is_alive(pid));
    assert!(
        !is_alive(grandchildren[0]),
        "grandchild {} survived",
        grandchildren[0]
    );
    // The leader exited on EOF but its grandchild did not: a signal was needed.
    let t = &server(&doc, "parent")["teardown"];
    assert_eq!(t["outcome"], "escalated", "{t}");
    assert_eq!(t["signal"], "SIGTERM");
    fleet.assert_no_leftovers();
}

#[test]
fn a_grandchild_that_escaped_with_setsid_is_ended_and_reported() {
    let fleet = TestFleet::raw("escape", "");
    let pid_file = fleet.dir.path().join("pids.json");
    let body = format!(
        "version: 1\nservers:\n{}",
        fixture_server(
            "leaky",
            &[
                "--escape-grandchild",
                "--pid-file",
                pid_file.to_str().unwrap()
            ],
            "cleanup_timeout: 1s"
        )
    );
    std::fs::write(&fleet.path, body).unwrap();
    let (out, doc) = fleet.run_json(&["check"]);
    let (_, grandchildren) = read_pid_file(&pid_file);
    let escaped = grandchildren[0];
    // It left the group and the session: the group's signal did not reach it, so
    // it was signalled on its own, and the teardown is not clean (L13).
    assert_code(&out, 0);
    let s = server(&doc, "leaky");
    assert_eq!(s["teardown"]["outcome"], "escalated", "{s}");
    assert_eq!(s["teardown"]["escaped_pids"], serde_json::json!([escaped]));
    assert_eq!(s["teardown"]["leftover_pids"], serde_json::json!([]));
    assert_eq!(s["state"], "stopped");
    assert!(!is_alive(escaped), "the escaped grandchild still runs");
    fleet.assert_no_leftovers();
}

#[test]
fn a_stderr_flood_neither_blocks_the_server_nor_grows_memory() {
    // The fixture writes 64 MiB to stderr before it reads stdin: if mcpfleet did not
    // drain stderr, the pipe would fill and the handshake would time out.
    let fleet = TestFleet::fixtures(
        "flood",
        &[(
            "chatty",
            &["--stderr-flood-mb", "64"],
            "connect_timeout: 60s",
        )],
    );
    let child = fleet.spawn(&["--output", "json", "check"]);
    let pid = child.id();
    let sampler = std::thread::spawn(move || {
        let mut peak_kb = 0u64;
        loop {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                return peak_kb;
            };
            if status.contains("State:\tZ") {
                return peak_kb;
            }
            for line in status.lines() {
                if let Some(v) = line.strip_prefix("VmHWM:") {
                    let kb: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                    peak_kb = peak_kb.max(kb);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let out = child.wait_with_output().unwrap();
    let peak_kb = sampler.join().unwrap();
    assert_code(&out, 0);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(server(&doc, "chatty")["tools"], 3);
    // 64 MiB went through; the peak resident size stays far below it.
    assert!(peak_kb > 0 && peak_kb < 40 * 1024, "peak RSS {peak_kb} kB");
    fleet.assert_no_leftovers();
}

#[test]
fn fifty_servers_start_and_stop_cleanly_with_default_settings() {
    let names: Vec<String> = (0..50).map(|i| format!("s{i:02}")).collect();
    let servers: Vec<(&str, &[&str], &str)> = names
        .iter()
        .map(|n| (n.as_str(), &["--init-delay-ms", "50"][..], ""))
        .collect();
    let fleet = TestFleet::fixtures("fifty", &servers);
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    let servers = doc["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 50);
    for s in servers {
        assert_eq!(s["state"], "stopped", "{s}");
        assert_eq!(s["teardown"]["outcome"], "clean", "{s}");
        assert_eq!(s["tools"], 3);
    }
    fleet.assert_no_leftovers();
}

#[test]
fn requests_from_the_server_such_as_roots_list_with_id_zero_are_answered() {
    // The fixture holds tools/list back until its roots/list (id 0) is answered.
    let fleet = TestFleet::fixtures(
        "roots",
        &[(
            "asks",
            &["--request-roots", "--tools", "4"],
            "connect_timeout: 5s",
        )],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "asks")["tools"], 4);
    fleet.assert_no_leftovers();
}

#[test]
fn a_failing_tools_list_is_a_protocol_error_and_the_server_is_torn_down() {
    let fleet = TestFleet::fixtures("tools-fail", &[("broken", &["--fail-tools-list"], "")]);
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 3);
    let s = server(&doc, "broken");
    assert_eq!(s["error"]["kind"], "protocol");
    assert_eq!(s["error"]["phase"], "list-tools");
    assert_eq!(s["teardown"]["outcome"], "clean");
    fleet.assert_no_leftovers();
}

#[test]
fn the_highest_ranked_outcome_wins() {
    // 4 (connect timeout) outranks 3 (start failure).
    let fleet = TestFleet::fixtures(
        "ranking",
        &[
            ("dies", &["--exit-during-init", "1"], ""),
            ("mute", &["--never-answer-init"], "connect_timeout: 500ms"),
            ("fine", &[], ""),
        ],
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 4);
    assert_eq!(server(&doc, "dies")["exit_code"], 3);
    assert_eq!(server(&doc, "mute")["exit_code"], 4);
    assert_eq!(server(&doc, "fine")["exit_code"], 0);
    // Checking a subset checks only those.
    let (out, doc) = fleet.run_json(&["check", "dies", "fine"]);
    assert_code(&out, 3);
    assert_eq!(doc["servers"].as_array().unwrap().len(), 2);
    fleet.assert_no_leftovers();
}

#[test]
fn ndjson_streams_events_then_the_summary() {
    let fleet = TestFleet::fixtures("ndjson", &[("one", &[], "")]);
    let out = fleet.run(&["--output", "ndjson", "check"]);
    assert_code(&out, 0);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let transitions: Vec<(String, String)> = lines
        .iter()
        .filter(|l| l["type"] == "event")
        .map(|l| {
            assert_eq!(l["server"], "one");
            assert_eq!(l["generation"], 1);
            assert!(l["time"].as_str().unwrap().ends_with('Z'));
            (
                l["from"].as_str().unwrap().to_owned(),
                l["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("stopped", "starting"),
        ("starting", "running"),
        ("running", "stopping"),
        ("stopping", "stopped"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(transitions, expected);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(last["exit_code"], 0);
    assert_eq!(server(last, "one")["teardown"]["outcome"], "clean");
    fleet.assert_no_leftovers();
}

#[test]
fn ctrl_c_during_check_tears_everything_down_and_exits_130() {
    let fleet = TestFleet::fixtures(
        "interrupt",
        &[
            ("up1", &["--ignore-eof"], "cleanup_timeout: 1s"),
            ("up2", &[], ""),
            (
                "slow",
                &["--init-delay-ms", "30000"],
                "connect_timeout: 60s",
            ),
        ],
    );
    let child = fleet.spawn(&["--output", "json", "check"]);
    // Wait until the slow one's process exists, then interrupt.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fleet.alive().len() < 4 {
        assert!(Instant::now() < deadline, "servers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    sigint(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_code(&out, 130);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["interrupted"], true);
    assert_eq!(doc["exit_code"], 130);
    let slow = server(&doc, "slow");
    assert_eq!(slow["error"]["kind"], "cancelled");
    assert!(slow["teardown"]["outcome"].is_string(), "{slow}");
    assert_eq!(server(&doc, "up1")["teardown"]["outcome"], "escalated");
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    fleet.assert_no_leftovers();
}

#[test]
fn a_second_ctrl_c_during_check_sigkills_instead_of_waiting() {
    let fleet = TestFleet::fixtures(
        "second-ctrl-c",
        &[(
            "stubborn",
            &["--ignore-eof", "--ignore-sigterm"],
            "cleanup_timeout: 30s",
        )],
    );
    let child = fleet.spawn(&["--output", "json", "check"]);
    // The start is instant; teardown then waits 9 s (30% of 30 s) for EOF.
    std::thread::sleep(Duration::from_millis(1000));
    let started = Instant::now();
    for _ in 0..2 {
        sigint(child.id());
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_code(&out, 130);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &server(&doc, "stubborn")["teardown"];
    assert_eq!(t["outcome"], "escalated", "{t}");
    assert_eq!(t["signal"], "SIGKILL");
    assert_eq!(t["leftover_pids"], serde_json::json!([]));
    fleet.assert_no_leftovers();
}

/// With an open-files limit too low for the fleet, `check` says so before it
/// starts anything (with the numbers), servers beyond the limit fail with a message
/// that names the limit, and nothing is left.
#[test]
fn an_open_files_limit_too_low_for_the_fleet_is_named() {
    use std::os::unix::process::CommandExt;
    let servers: Vec<(String, Vec<&str>, &str)> = (0..40)
        .map(|i| (format!("s{i:02}"), Vec::new(), ""))
        .collect();
    let specs: Vec<(&str, &[&str], &str)> = servers
        .iter()
        .map(|(n, a, e)| (n.as_str(), a.as_slice(), *e))
        .collect();
    let fleet = TestFleet::fixtures("nofile", &specs);
    let mut cmd = fleet.command(&["--output", "json", "check", "--jobs", "40"]);
    // SAFETY: setrlimit(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 64, 64)
                .map_err(std::io::Error::from)
        });
    }
    let out = run_bounded(cmd, Duration::from_secs(120));
    let err = stderr(&out);
    assert!(
        err.contains("open-files limit is 64 (hard limit 64)") && err.contains("304"),
        "{err}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("a JSON document");
    let failed: Vec<&Value> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["error"]["kind"] == "spawn_failed")
        .collect();
    assert!(
        !failed.is_empty(),
        "40 servers fit in 64 descriptors? {doc}"
    );
    let message = failed[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("too many open files (limit 64"),
        "{message}"
    );
    assert_code(&out, 3);
    fleet.assert_no_leftovers();
}
