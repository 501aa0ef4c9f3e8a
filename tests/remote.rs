//! Remote servers over streamable HTTP, against a real one: the published
//! `@modelcontextprotocol/server-everything` in `streamableHttp` mode, which
//! `.ci/run` installs from npm into `.cache/npm`. Also a listener that accepts and
//! never answers, and a session whose DELETE cannot succeed.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SECRET: &str = "s3cret-token-never-shown";

fn server_everything() -> PathBuf {
    published_servers()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts server-everything on `port`, tagged with the test's id; its output goes
/// to `log`.
fn start_remote(fleet: &TestFleet, port: u16, log: &std::path::Path) -> Child {
    let out = std::fs::File::create(log).unwrap();
    let child = Command::new("node")
        .arg(server_everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .env(TEST_ID_VAR, &fleet.test_id)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start node");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn remote_fleet(label: &str, url: &str, extra: &str) -> TestFleet {
    TestFleet::raw(
        label,
        &format!(
            "version: 1\nservers:\n  remote:\n    url: {url}\n    headers:\n      Authorization: \"Bearer ${{env:MCPFLEET_TEST_TOKEN}}\"\n{extra}"
        ),
    )
}

fn run_with_secret(fleet: &TestFleet, args: &[&str]) -> std::process::Output {
    let mut cmd = fleet.command(args);
    cmd.env("MCPFLEET_TEST_TOKEN", SECRET);
    run_bounded(cmd, Duration::from_secs(60))
}

#[test]
fn up_tools_call_and_down_against_a_real_streamable_http_server() {
    let port = free_port();
    let fleet = remote_fleet("remote-real", &format!("http://127.0.0.1:{port}/mcp"), "");
    let log = fleet.dir.path().join("remote.log");
    let mut server = start_remote(&fleet, port, &log);

    let mut outputs = Vec::new();
    let up = run_with_secret(&fleet, &["--output", "json", "up"]);
    assert_code(&up, 0);
    let doc: serde_json::Value = serde_json::from_slice(&up.stdout).unwrap();
    let s = &doc["servers"][0];
    assert_eq!(s["transport"], "http");
    assert_eq!(s["state"], "running");
    assert_eq!(s["pid"], serde_json::Value::Null);
    assert!(s["tools"].as_u64().unwrap() > 5, "{s}");
    outputs.push(up);

    let tools = run_with_secret(&fleet, &["tools", "remote"]);
    assert_code(&tools, 0);
    assert!(stdout(&tools).contains("echo"), "{}", stdout(&tools));
    outputs.push(tools);
    let call = run_with_secret(
        &fleet,
        &[
            "call",
            "remote",
            "echo",
            "--args",
            r#"{"message": "over http"}"#,
        ],
    );
    assert_code(&call, 0);
    assert!(stdout(&call).contains("over http"), "{}", stdout(&call));
    outputs.push(call);

    let down = run_with_secret(&fleet, &["--output", "json", "down"]);
    assert_code(&down, 0);
    let doc: serde_json::Value = serde_json::from_slice(&down.stdout).unwrap();
    assert_eq!(doc["servers"][0]["teardown"]["outcome"], "clean");
    outputs.push(down);
    outputs.push(run_with_secret(&fleet, &["validate"]));
    outputs.push(run_with_secret(&fleet, &["--output", "json", "status"]));

    // The session was ended with a DELETE: the server says so.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut text = String::new();
        std::fs::File::open(&log)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        if text.contains("session termination request") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no DELETE seen by the server:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The header's secret never appears: not in any output, event or log.
    for out in &outputs {
        assert!(!stdout(out).contains(SECRET) && !stderr(out).contains(SECRET));
    }
    for file in ["events.ndjson", "supervisor.log", "state.json"] {
        let text = std::fs::read_to_string(fleet.state_dir().join(file)).unwrap_or_default();
        assert!(!text.contains(SECRET), "{file} shows the secret");
    }
    let _ = server.kill();
    let _ = server.wait();
    fleet.assert_no_leftovers();
}

#[test]
fn a_listener_that_never_answers_times_out_with_exit_4() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold every connection, never answering.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            match stream {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
    });
    let fleet = remote_fleet(
        "remote-blackhole",
        &format!("http://127.0.0.1:{port}/mcp"),
        "    connect_timeout: 1s\n    cleanup_timeout: 1s\n",
    );
    let started = Instant::now();
    let out = run_with_secret(&fleet, &["--output", "json", "check"]);
    assert_code(&out, 4);
    assert!(started.elapsed() < Duration::from_secs(10));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["servers"][0]["error"]["kind"], "connect_timeout");
    assert!(!stdout(&out).contains(SECRET));
    fleet.assert_no_leftovers();
}

#[test]
fn a_session_that_cannot_be_ended_is_a_failed_teardown_and_is_retained() {
    let port = free_port();
    let fleet = remote_fleet(
        "remote-failed-delete",
        &format!("http://127.0.0.1:{port}/mcp"),
        "    cleanup_timeout: 3s\n",
    );
    let log = fleet.dir.path().join("remote.log");
    let mut server = start_remote(&fleet, port, &log);
    assert_code(&run_with_secret(&fleet, &["up"]), 0);
    // The server goes away; the DELETE that ends the session cannot succeed.
    let _ = server.kill();
    let _ = server.wait();
    let down = run_with_secret(&fleet, &["--output", "json", "down"]);
    assert_code(&down, 5);
    let doc: serde_json::Value = serde_json::from_slice(&down.stdout).unwrap();
    let s = &doc["servers"][0];
    assert_eq!(s["teardown"]["outcome"], "failed", "{s}");
    assert_eq!(s["state"], "quarantined");
    assert_eq!(s["error"]["kind"], "teardown_failed");
    // Retained: up is refused until the quarantine is cleared (nothing is alive).
    assert_code(&run_with_secret(&fleet, &["up"]), 6);
    assert_code(&run_with_secret(&fleet, &["reset", "remote"]), 0);
    assert_code(&run_with_secret(&fleet, &["down"]), 0);
    fleet.assert_no_leftovers();
}
