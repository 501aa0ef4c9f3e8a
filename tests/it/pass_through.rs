//! Pass-through calls (docs/design.md §14) seen on the wire: a client that writes
//! JSON-RPC lines to `mcpfleet connect` itself and reads every line that comes
//! back, in order, so that what an SDK smooths over shows: the order of progress
//! and answer, the ids and tokens, what comes back for a cancelled call, and the
//! answer to a call whose server goes down. Behind the gateway: the published
//! server-everything (its `trigger-long-running-operation` reports progress at
//! each step, then answers) and a fixture server.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

const ANSWER: Duration = Duration::from_secs(45);

/// `mcpfleet connect`, spoken to line by line.
pub(crate) struct Wire {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// The gateway's answer to `initialize`.
    pub(crate) initialized: Value,
}

impl Wire {
    pub(crate) fn connect(fleet: &TestFleet) -> Wire {
        Wire::connect_with(fleet, json!({}))
    }

    /// A session whose client declares `capabilities`.
    pub(crate) fn connect_with(fleet: &TestFleet, capabilities: Value) -> Wire {
        let mut child = fleet
            .command(&["connect"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn connect");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("stdout carries nothing but JSON-RPC ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut wire = Wire {
            child,
            stdin,
            lines,
            initialized: Value::Null,
        };
        wire.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": "mcpfleet-tests-wire", "version": "1"}}}),
        );
        let init = wire.answer(0);
        assert_eq!(init["result"]["serverInfo"]["name"], "mcpfleet", "{init}");
        wire.initialized = init.clone();
        wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        wire
    }

    pub(crate) fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn next(&self) -> Value {
        self.lines
            .recv_timeout(ANSWER)
            .expect("connect said nothing within the bound")
    }

    /// Reads up to the answer to `id`; what came before it is dropped.
    pub(crate) fn answer(&self, id: u64) -> Value {
        self.until(id).1
    }

    /// Reads up to the answer to `id`: the lines before it, and it.
    pub(crate) fn until(&self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let line = self.next();
            if line["id"] == id && line.get("method").is_none() {
                return (before, line);
            }
            before.push(line);
        }
    }

    fn call(&mut self, id: u64, name: &str, arguments: Value, token: Option<&str>) {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(token) = token {
            params["_meta"] = json!({"progressToken": token});
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    }

    /// Reads until a progress notification under `token` arrives.
    fn first_progress(&self, token: &str) -> Value {
        loop {
            let line = self.next();
            if line["method"] == "notifications/progress"
                && line["params"]["progressToken"] == token
            {
                return line;
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn progress_of<'a>(lines: &'a [Value], token: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["method"] == "notifications/progress" && l["params"]["progressToken"] == token
        })
        .collect()
}

#[test]
fn progress_comes_in_order_before_the_answer_and_a_cancelled_call_gets_none() {
    let fleet = fleet_of(
        "pass-progress",
        &[everything("everything"), fixture_server("fix", &[], "")],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let generation = server(&fleet.run_json(&["status"]).1, "everything")["generation"]
        .as_u64()
        .unwrap();
    let mut wire = Wire::connect(&fleet);
    wire.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let list = wire.answer(1);
    assert!(
        list["result"]["tools"].as_array().unwrap().len() > 10,
        "{list}"
    );

    // A call's progress reaches the client under the client's own token, every
    // step and in order, all before the call's answer; a quick call sent behind
    // it is not held up.
    for round in 0..3u64 {
        let (long, quick) = (10 + 2 * round, 11 + 2 * round);
        wire.call(
            long,
            "everything__trigger-long-running-operation",
            json!({"duration": 1, "steps": 5}),
            Some("mine"),
        );
        wire.call(quick, "fix__echo", json!({"round": round}), None);
        let (before, answer) = wire.until(long);
        assert!(
            before.iter().any(|l| l["id"] == quick),
            "the quick call was answered before the long one: {before:?}"
        );
        let progress = progress_of(&before, "mine");
        let steps: Vec<f64> = progress
            .iter()
            .map(|p| p["params"]["progress"].as_f64().unwrap())
            .collect();
        assert_eq!(
            steps,
            vec![1.0, 2.0, 3.0, 4.0, 5.0],
            "round {round}: {before:?}"
        );
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["total"].as_f64() == Some(5.0))
        );
        let result = &answer["result"];
        assert!(text(result).contains("Steps: 5"), "{answer}");
        assert_eq!(result["_meta"]["mcpfleet/server"], "everything", "{answer}");
        assert_eq!(
            result["_meta"]["mcpfleet/generation"], generation,
            "{answer}"
        );
    }

    // A cancelled call gets no answer, and is counted as cancelled.
    wire.call(
        30,
        "everything__trigger-long-running-operation",
        json!({"duration": 20, "steps": 20}),
        Some("cancel-me"),
    );
    wire.first_progress("cancel-me");
    wire.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 30, "reason": "test"}}),
    );
    wire.call(31, "fix__echo", json!({}), None);
    let (before, _) = wire.until(31);
    assert!(!before.iter().any(|l| l["id"] == 30), "{before:?}");
    std::thread::sleep(Duration::from_millis(1500));
    wire.call(32, "fix__echo", json!({}), None);
    let (before, _) = wire.until(32);
    assert!(
        !before.iter().any(|l| l["id"] == 30),
        "a cancelled call was answered: {before:?}"
    );
    assert!(
        progress_of(&before, "cancel-me").len() <= 1,
        "progress of a cancelled call went on: {before:?}"
    );
    let metrics = stdout(&fleet.run(&["metrics"]));
    let cancelled = metrics
        .lines()
        .find(|l| {
            l.starts_with("mcpfleet_calls_total{")
                && l.contains("server=\"everything\"")
                && l.contains("outcome=\"cancelled\"")
        })
        .unwrap_or_else(|| panic!("no cancelled calls counted:\n{metrics}"));
    assert!(cancelled.ends_with(" 1"), "{cancelled}");

    // A call in flight when its server goes down is answered at once, naming it.
    wire.call(
        40,
        "everything__trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
        Some("down"),
    );
    wire.first_progress("down");
    let asked = Instant::now();
    assert_code(&fleet.run(&["down", "everything"]), 0);
    let answer = wire.answer(40);
    assert!(asked.elapsed() < Duration::from_secs(15), "{answer}");
    let error = &answer["error"];
    assert_eq!(error["code"], -32001, "{answer}");
    assert_eq!(error["data"]["server"], "everything", "{answer}");
    assert_eq!(error["data"]["kind"], "cancelled", "{answer}");
    assert_eq!(error["data"]["generation"], generation, "{answer}");

    // The client closing its input ends connect, which exits 0.
    drop(wire.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = wire.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "connect did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    down_and_no_leftovers(&fleet);
}

/// Over the stdio door, `tools/list` gives each tool with every field its
/// server wrote (fields rmcp does not model, numbers as written), the name
/// aside.
#[test]
fn tools_are_listed_as_their_server_wrote_them() {
    let fields = format!("echo={}", crate::gateway::TOOL_FIELDS);
    let fleet = fleet_of(
        "pass-tool-fields",
        &[fixture_server("fx", &["--tool-fields", &fields], "")],
    );
    assert_code(&fleet.run(&["up"]), 0);
    let mut wire = Wire::connect(&fleet);
    wire.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let list = wire.answer(1);
    let echo = list["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "fx__echo"))
        .unwrap_or_else(|| panic!("no fx__echo: {list}"));
    assert_eq!(*echo, crate::gateway::echo_as_written("fx"));
    drop(wire);
    down_and_no_leftovers(&fleet);
}

/// Over the stdio door, a server's progress and its requests of the client
/// carry their numbers as the server wrote them: progress `1`, not `1.0`;
/// `temperature` 0.7, not `0.699999988079071`.
#[test]
fn numbers_pass_as_their_server_wrote_them() {
    let fleet = fleet_of("pass-numbers", &crate::gateway::number_servers());
    assert_code(&fleet.run(&["up"]), 0);
    let mut wire = Wire::connect_with(&fleet, json!({"sampling": {}}));
    wire.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    wire.answer(1);
    for (id, tool) in [(2, "fp__echo"), (3, "fs__echo")] {
        wire.call(id, tool, json!({}), Some("p"));
        let (mut progress, mut asked) = (Vec::new(), 0);
        loop {
            let line = wire.next();
            if line["method"] == "notifications/progress" {
                progress.push(line["params"].clone());
            } else if line["method"] == "sampling/createMessage" {
                asked += 1;
                // As written: no `_meta.progressToken` the server never wrote.
                assert_eq!(
                    line["params"],
                    crate::gateway::sampling_as_written(),
                    "{line}"
                );
                wire.send(
                    json!({"jsonrpc": "2.0", "id": line["id"], "result": {"role": "assistant",
                    "content": {"type": "text", "text": "raw"}, "model": "raw"}}),
                );
            } else if line["id"] == id {
                assert_eq!(line["result"]["content"][0]["type"], "text", "{line}");
                break;
            }
        }
        if tool == "fp__echo" {
            assert_eq!(progress, crate::gateway::progress_as_written("p"));
        } else {
            assert_eq!(asked, 1);
        }
    }
    drop(wire);
    down_and_no_leftovers(&fleet);
}

/// Every progress notification a server writes before its answer reaches the
/// client before that answer, on the wire: many calls to a fixture server that
/// reports progress 1 to 3 and answers at once, both ways through the stdio door
/// (passed through, and the long way: a call with a parameter beyond `name`,
/// `arguments` and `_meta` goes through rmcp and the gateway's desk).
#[test]
fn every_progress_of_a_call_comes_before_its_answer_both_ways() {
    let fleet = fleet_of(
        "pass-progress-order",
        &[fixture_server("fp", &["--progress", "3"], "")],
    );
    let mut wire = Wire::connect(&fleet);
    const CALLS: u64 = 200;
    for id in 1..=CALLS {
        let token = format!("t{id}");
        let mut params = json!({"name": "fp__echo", "arguments": {},
            "_meta": {"progressToken": token}});
        let long_way = id % 2 == 0;
        if long_way {
            params["x-extra"] = json!(1);
        }
        wire.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
        let (before, answer) = wire.until(id);
        assert!(answer.get("result").is_some(), "call {id}: {answer}");
        let progress: Vec<&Value> = progress_of(&before, &token)
            .into_iter()
            .map(|line| &line["params"]["progress"])
            .collect();
        assert_eq!(
            progress,
            [&json!(1), &json!(2), &json!(3)],
            "call {id} ({}): the progress before its answer",
            if long_way {
                "the long way"
            } else {
                "passed through once it can be"
            }
        );
    }
    drop(wire);
    down_and_no_leftovers(&fleet);
}

/// A legacy client may send its requests right behind `notifications/initialized`,
/// which opens its session at the gateway a moment later: `logging/setLevel`,
/// `resources/subscribe` and `resources/unsubscribe` sent at once after it find
/// the session open (and are not refused as coming before it), each time.
#[test]
fn requests_right_after_initialized_find_the_session_open() {
    let fleet = fleet_of(
        "pass-right-after",
        &[fixture_server("fx", &["--log-and-subscribe"], "")],
    );
    assert_code(&fleet.run(&["up"]), 0);
    for round in 0..8 {
        let mut wire = Wire::connect(&fleet);
        let params = [
            ("logging/setLevel", json!({"level": "info"})),
            ("resources/subscribe", json!({"uri": "fixture://r"})),
            ("resources/unsubscribe", json!({"uri": "fixture://r"})),
        ];
        for (id, (method, params)) in (1u64..).zip(&params) {
            wire.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        }
        // Answered in any order: the three are served at once.
        let mut answers = std::collections::BTreeMap::new();
        while answers.len() < params.len() {
            let line = wire.next();
            if let Some(id) = line["id"].as_u64()
                && line.get("method").is_none()
            {
                answers.insert(id, line);
            }
        }
        for (id, (method, _)) in (1u64..).zip(&params) {
            let answer = &answers[&id];
            assert_eq!(
                answer["result"],
                json!({}),
                "round {round}: {method}: {answer}"
            );
        }
    }
    down_and_no_leftovers(&fleet);
}
