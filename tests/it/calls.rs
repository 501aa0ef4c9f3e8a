//! `tools`, `call`, `logs` and `events` through the real binary and a supervisor.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

#[test]
fn tools_and_call_go_through_the_supervisor_and_start_the_server_if_needed() {
    let fleet = TestFleet::fixtures(
        "calls-basic",
        &[("a", &["--tools", "4"], ""), ("b", &[], "")],
    );
    // `call` of a stopped server starts it (a new generation), like `up` would.
    let out = fleet.run(&["call", "a", "echo", "--args", r#"{"k": [1, 2]}"#]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out).trim(), r#"{"k":[1,2]}"#);
    let (out, doc) = fleet.run_json(&["call", "a", "tool_3"]);
    assert_code(&out, 0);
    assert_eq!(doc["command"], "call");
    assert_eq!(doc["generation"], 1);
    assert_eq!(doc["result"]["content"][0]["text"], "tool_3");

    // Only running servers are listed without a name: b was never started.
    let (out, doc) = fleet.run_json(&["tools"]);
    assert_code(&out, 0);
    let servers = doc["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1, "{doc}");
    assert_eq!(servers[0]["name"], "a");
    let names: Vec<&str> = servers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "tool_2", "tool_3", "tool_4"]);
    let text = fleet.run(&["tools", "a"]);
    assert_code(&text, 0);
    assert!(stdout(&text).contains("tool_4"), "{}", stdout(&text));

    // Errors: an unknown tool is the server's answer (3); bad --args is usage (2).
    let out = fleet.run(&["call", "a", "nosuch"]);
    assert_code(&out, 3);
    assert!(stderr(&out).contains("unknown tool"), "{}", stderr(&out));
    assert_code(&fleet.run(&["call", "a", "echo", "--args", "[1]"]), 2);
    assert_code(&fleet.run(&["call", "a", "echo", "--args", "{"]), 2);
    assert_code(&fleet.run(&["call", "nosuch", "echo"]), 2);

    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_call_in_flight_when_its_server_is_torn_down_fails_at_once() {
    let fleet = TestFleet::fixtures(
        "calls-inflight",
        &[("slow", &["--call-delay-ms", "20000"], "cleanup_timeout: 1s")],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let started = Instant::now();
    let call = fleet.spawn(&["--output", "json", "call", "slow", "echo"]);
    std::thread::sleep(Duration::from_millis(500));
    let down = fleet.run(&["down"]);
    assert_code(&down, 0);
    let out = call.wait_with_output().unwrap();
    let took = started.elapsed();
    assert_ne!(out.status.code(), Some(0), "the call cannot have succeeded");
    assert!(took < Duration::from_secs(10), "the call hung for {took:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("a JSON answer");
    assert_eq!(doc["error"]["kind"], "connect_failed", "{doc}");
    fleet.assert_no_leftovers();
}

#[test]
fn logs_and_events_read_the_state_directory() {
    let fleet = TestFleet::fixtures(
        "calls-logs",
        &[
            (
                "a",
                &[
                    "--stderr-line",
                    "hello from a",
                    "--stderr-line",
                    "second line",
                ],
                "",
            ),
            ("b", &["--stderr-line", "hello from b"], ""),
        ],
    );
    assert_code(&fleet.run(&["up"]), 0);
    // The drain appends as the server writes; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = fleet.run(&["logs"]);
        assert_code(&out, 0);
        let text = stdout(&out);
        if text.contains("a | hello from a") && text.contains("b | hello from b") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "logs never showed both servers:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let one = fleet.run(&["logs", "a", "-n", "1"]);
    assert_code(&one, 0);
    assert_eq!(stdout(&one), "second line\n");
    assert_code(&fleet.run(&["logs", "nosuch"]), 2);

    assert_code(&fleet.run(&["down"]), 0);
    let out = fleet.run(&["events"]);
    assert_code(&out, 0);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON"))
        .collect();
    let of_a: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["server"] == "a")
        .map(|e| {
            (
                e["from"].as_str().unwrap().into(),
                e["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("stopped", "starting"),
        ("starting", "running"),
        ("running", "stopping"),
        ("stopping", "stopped"),
    ]
    .iter()
    .map(|(f, t)| (f.to_string(), t.to_string()))
    .collect();
    assert_eq!(of_a, want);
    let last = fleet.run(&["events", "-n", "1"]);
    assert_eq!(stdout(&last).lines().count(), 1);
    fleet.assert_no_leftovers();
}

#[test]
fn tools_prints_a_table_whose_columns_line_up() {
    let long = "a-server-with-a-long-name";
    let fleet = TestFleet::fixtures("calls-table", &[(long, &[], ""), ("b", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let out = fleet.run(&["tools"]);
    assert_code(&out, 0);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("SERVER")
            && lines[0].contains("TOOL")
            && lines[0].contains("DESCRIPTION"),
        "a header first:\n{text}"
    );
    let column = lines[0].find("TOOL").unwrap();
    assert!(
        column > long.len(),
        "the server column holds {long}:\n{text}"
    );
    let rows = &lines[1..];
    assert_eq!(rows.len(), 6, "three tools of each server:\n{text}");
    for row in rows {
        let (server, rest) = row.split_at(column);
        assert!(
            server.trim_end() == long || server.trim_end() == "b",
            "the tool column starts at the header's:\n{text}"
        );
        assert!(
            rest.starts_with("echo") || rest.starts_with("tool_"),
            "{text}"
        );
    }
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_call_or_tools_of_a_server_that_cannot_start_says_why_on_stderr() {
    let fleet = TestFleet::fixtures(
        "calls-nostart",
        &[(
            "broken",
            &[
                "--stderr-line",
                "broken: missing API key",
                "--exit-during-init",
                "1",
            ],
            "",
        )],
    );
    // Text: stdout has no result, and stderr says which server did not start,
    // its error and its last stderr lines.
    for args in [&["call", "broken", "echo"][..], &["tools", "broken"][..]] {
        let out = fleet.run(args);
        assert_code(&out, 3);
        assert_eq!(stdout(&out), "", "{args:?}");
        let said = stderr(&out);
        assert!(
            said.contains(&format!("mcpfleet {}: `broken` did not start", args[0])),
            "{args:?}: {said}"
        );
        assert!(said.contains("error ["), "{args:?}: {said}");
        assert!(
            said.contains("| broken: missing API key"),
            "{args:?}: {said}"
        );
    }
    // JSON says the same, with the start's line.
    let (out, doc) = fleet.run_json(&["call", "broken", "echo"]);
    assert_code(&out, 3);
    assert_eq!(doc["exit_code"], 3, "{doc}");
    assert_eq!(doc["servers"][0]["name"], "broken", "{doc}");
    assert!(doc["servers"][0]["error"]["kind"].is_string(), "{doc}");
    down_and_no_leftovers(&fleet);
}
