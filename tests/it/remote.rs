//! Remote servers over streamable HTTP, against a real one: the published
//! `@modelcontextprotocol/server-everything` in `streamableHttp` mode, which
//! `.ci/run` installs from npm into `.cache/npm`, also restarted under a running
//! fleet. Also a listener that accepts and never answers, a session whose DELETE
//! cannot succeed, and a small HTTP stub for answers that server never gives (a
//! wrong path, a demand for authorization, the legacy HTTP+SSE transport, a DELETE
//! answered 500 or 404).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

const SECRET: &str = "s3cret-token-never-shown";

fn server_everything() -> PathBuf {
    published_servers()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts server-everything on `port`, tagged with the test's id; its output goes
/// to `log`.
pub(crate) fn start_remote(fleet: &TestFleet, port: u16, log: &std::path::Path) -> Child {
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

/// Kills and reaps a node server this test started.
fn stop_remote(mut server: Child) {
    let _ = server.kill();
    let _ = server.wait();
}

/// Polls `status --output json` until `done` holds for the fleet's one server.
fn wait_for_status(fleet: &TestFleet, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let out = run_with_secret(fleet, &["--output", "json", "status"]);
        let doc = parse_doc(&out);
        let s = doc["servers"][0].clone();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "status never got there: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The server restarts under a running fleet (same port, none of its old
/// sessions): the next request fails at once naming the lost session, the
/// generation ends like a server that exited, and the restart policy starts a new
/// session.
#[test]
fn a_session_lost_to_a_server_restart_fails_the_call_at_once_and_is_restarted() {
    let port = free_port();
    let fleet = remote_fleet(
        "remote-restarted",
        &format!("http://127.0.0.1:{port}/mcp"),
        "    restart: { policy: on-failure, backoff: { initial: 1500ms, max: 1500ms } }\n",
    );
    let server = start_remote(&fleet, port, &fleet.dir.path().join("remote-1.log"));
    let up = run_with_secret(&fleet, &["--output", "json", "up"]);
    assert_code(&up, 0);
    assert_eq!(parse_doc(&up)["servers"][0]["generation"], 1);
    stop_remote(server);
    let server = start_remote(&fleet, port, &fleet.dir.path().join("remote-2.log"));

    let started = Instant::now();
    let call = run_with_secret(
        &fleet,
        &[
            "--output",
            "json",
            "call",
            "remote",
            "echo",
            "--args",
            r#"{"message": "after the restart"}"#,
            "--timeout",
            "10s",
        ],
    );
    let took = started.elapsed();
    assert_code(&call, 3);
    assert!(took < Duration::from_secs(5), "the call took {took:?}");
    assert!(!stdout(&call).contains(SECRET) && !stderr(&call).contains(SECRET));
    let doc = parse_doc(&call);
    assert_eq!(doc["error"]["kind"], "session_lost", "{doc}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no longer knows this session"),
        "{message}"
    );

    // The authority noticed: generation 1 is over, and the policy waits to restart.
    let s = wait_for_status(&fleet, Duration::from_secs(2), |s| s["state"] != "running");
    assert_eq!(s["state"], "backoff", "{s}");
    assert_eq!(s["generation"], 1, "{s}");
    assert_eq!(s["error"]["kind"], "session_lost", "{s}");
    assert_eq!(s["error"]["phase"], "running", "{s}");
    assert!(
        s["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer knows this session"),
        "{s}"
    );
    let events = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap();
    assert!(
        events
            .lines()
            .any(|l| l.contains("\"cause\":\"exited\"") && l.contains("session_lost")),
        "no event with cause exited:\n{events}"
    );

    // A new generation starts a new session with the new server, and serves.
    let s = wait_for_status(&fleet, Duration::from_secs(30), |s| {
        s["state"] == "running" && s["generation"] == 2
    });
    assert_eq!(s["error"], Value::Null, "{s}");
    let call = run_with_secret(
        &fleet,
        &[
            "call",
            "remote",
            "echo",
            "--args",
            r#"{"message": "after the restart"}"#,
        ],
    );
    assert_code(&call, 0);
    assert!(
        stdout(&call).contains("after the restart"),
        "{}",
        stdout(&call)
    );

    assert_code(&run_with_secret(&fleet, &["down"]), 0);
    for file in ["events.ndjson", "supervisor.log"] {
        let text = std::fs::read_to_string(fleet.state_dir().join(file)).unwrap_or_default();
        assert!(!text.contains(SECRET), "{file} shows the secret");
    }
    stop_remote(server);
    fleet.assert_no_leftovers();
}

/// `down` after the server restarted: its DELETE is answered with "no such
/// session", which means there is nothing left to end: a clean teardown.
#[test]
fn down_after_the_server_restarted_is_a_clean_teardown() {
    let port = free_port();
    let fleet = remote_fleet(
        "remote-down-restarted",
        &format!("http://127.0.0.1:{port}/mcp"),
        "    cleanup_timeout: 5s\n",
    );
    let server = start_remote(&fleet, port, &fleet.dir.path().join("remote-1.log"));
    assert_code(&run_with_secret(&fleet, &["up"]), 0);
    stop_remote(server);
    let server = start_remote(&fleet, port, &fleet.dir.path().join("remote-2.log"));

    let down = run_with_secret(&fleet, &["--output", "json", "down"]);
    assert_code(&down, 0);
    let doc = parse_doc(&down);
    let s = &doc["servers"][0];
    assert_eq!(s["state"], "stopped", "{s}");
    assert_eq!(s["error"], Value::Null, "{s}");
    assert_eq!(s["teardown"]["outcome"], "clean", "{s}");
    assert!(
        s["teardown"]["exit"]
            .as_str()
            .is_some_and(|e| e.contains("had already ended the session")),
        "{s}"
    );
    stop_remote(server);
    fleet.assert_no_leftovers();
}

/// How the stub HTTP server answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stub {
    /// Every request: 404 with the body `Cannot POST /sse`.
    WrongPath,
    /// Every request: 401 with a Bearer challenge, and a body that echoes the
    /// credentials it was sent.
    NeedsAuth,
    /// The legacy HTTP+SSE transport: GET opens an event stream whose first event
    /// is `endpoint`; POST is not allowed (405), or with `json_400` gets a 400
    /// with a JSON-RPC error that has no id.
    LegacySse { json_400: bool },
    /// A server of the modern era only (2026-07-28): POST only, no sessions;
    /// `server/discover` answered, `initialize` refused with -32022 naming only
    /// 2026-07-28, any request without the modern version in its `_meta` and
    /// its `MCP-Protocol-Version` refused with -32020, one tool `echo`. With
    /// `events`, results come as an event stream, else as JSON; with `slow`,
    /// `server/discover` is answered after 1.5 s.
    Modern { events: bool, slow: bool },
    /// A working session (plain JSON answers, and `{}` to any method it does not
    /// know, `server/discover` among them); its DELETE gets this status, or
    /// with 0 no answer at all.
    Session { delete: u16 },
}

/// A small HTTP/1.1 server on loopback for one test: one thread per connection,
/// one request per connection, at most `MAX_CONNECTIONS`; it stops when dropped,
/// and by itself after a minute.
struct StubServer {
    port: u16,
    /// One line per request: `METHOD PATH rpc=METHOD|- version=V|- session=ID|- auth=yes|no`
    /// (`rpc` the JSON-RPC method, `version` the `MCP-Protocol-Version` header).
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const MAX_CONNECTIONS: usize = 64;
const STUB_SESSION: &str = "stub-session-1";

impl StubServer {
    fn start(mode: Stub) -> StubServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut handlers = Vec::new();
                while !stop.load(Ordering::SeqCst)
                    && Instant::now() < deadline
                    && handlers.len() < MAX_CONNECTIONS
                {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (seen, stop) = (seen.clone(), stop.clone());
                            handlers.push(std::thread::spawn(move || {
                                let _ = stub_answer(stream, mode, &seen, &stop);
                            }));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
                for h in handlers {
                    let _ = h.join();
                }
            })
        };
        StubServer {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request and answers it as `mode` says.
fn stub_answer(
    mut stream: TcpStream,
    mode: Stub,
    seen: &Mutex<Vec<String>>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf)?;
        if n == 0 || raw.len() > 64 * 1024 {
            return Ok(());
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let (method, path) = (
        first.next().unwrap_or_default().to_owned(),
        first.next().unwrap_or_default().to_owned(),
    );
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while raw.len() < head_end + length.min(1024 * 1024) {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let body: Value = serde_json::from_slice(&raw[head_end..]).unwrap_or(Value::Null);
    seen.lock().unwrap().push(format!(
        "{method} {path} rpc={} version={} session={} auth={}",
        body["method"].as_str().unwrap_or("-"),
        header("mcp-protocol-version").unwrap_or_else(|| "-".into()),
        header("mcp-session-id").unwrap_or_else(|| "-".into()),
        if header("authorization").is_some() {
            "yes"
        } else {
            "no"
        }
    ));

    let reply = |stream: &mut TcpStream, status: &str, extra: &str, body: &str| {
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
            body.len()
        )
    };
    match mode {
        Stub::WrongPath => reply(
            &mut stream,
            "404 Not Found",
            "Content-Type: text/plain\r\n",
            "Cannot POST /sse",
        ),
        Stub::NeedsAuth => reply(
            &mut stream,
            "401 Unauthorized",
            "Content-Type: text/plain\r\nWWW-Authenticate: Bearer realm=\"mcp\", scope=\"tools\"\r\n",
            &format!(
                "bad credentials: {}",
                header("authorization").unwrap_or_default()
            ),
        ),
        Stub::LegacySse { .. } if method == "GET" => {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\nevent: endpoint\r\ndata: /messages?sessionId=legacy-1\r\n\r\n"
            )?;
            stream.flush()?;
            // Held open like a real event stream, until the client goes away.
            stream.set_read_timeout(Some(Duration::from_millis(100)))?;
            let held = Instant::now();
            while !stop.load(Ordering::SeqCst) && held.elapsed() < Duration::from_secs(3) {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
            Ok(())
        }
        Stub::LegacySse { json_400: false } => reply(
            &mut stream,
            "405 Method Not Allowed",
            "Content-Type: text/plain\r\nAllow: GET\r\n",
            "Method Not Allowed",
        ),
        Stub::LegacySse { json_400: true } => reply(
            &mut stream,
            "400 Bad Request",
            "Content-Type: application/json\r\n",
            r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request"}}"#,
        ),
        Stub::Modern { events, slow } => {
            if slow && body["method"] == "server/discover" {
                std::thread::sleep(Duration::from_millis(1500));
            }
            if method != "POST" {
                return reply(&mut stream, "405 Method Not Allowed", "Allow: POST\r\n", "");
            }
            let modern = "2026-07-28";
            let rpc = body["method"].as_str().unwrap_or_default();
            let named = body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
            let error = |code: i64, message: &str, data: Value| json!({"code": code, "message": message, "data": data});
            let outcome = match rpc {
                "server/discover" if named == Some(modern) => Ok(json!({
                    "resultType": "complete",
                    "supportedVersions": [modern],
                    "capabilities": {"tools": {}},
                    "ttlMs": 60000,
                    "cacheScope": "public",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "stub-modern", "version": "1.0.0"}},
                })),
                "server/discover" | "initialize" => Err((
                    "400 Bad Request",
                    error(
                        -32022,
                        "unsupported protocol version",
                        json!({"supported": [modern]}),
                    ),
                )),
                _ if named != Some(modern)
                    || header("mcp-protocol-version").as_deref() != Some(modern) =>
                {
                    Err((
                        "400 Bad Request",
                        error(
                            -32020,
                            "Header mismatch: MCP-Protocol-Version and _meta",
                            Value::Null,
                        ),
                    ))
                }
                "tools/list" => Ok(json!({
                    "tools": [{"name": "echo", "description": "echoes", "inputSchema": {"type": "object"}}],
                    "ttlMs": 60000,
                    "cacheScope": "public",
                })),
                "tools/call" => Ok(json!({
                    "content": [{"type": "text", "text": body["params"]["arguments"].to_string()}],
                })),
                _ => Err((
                    "404 Not Found",
                    error(-32601, "method not found", Value::Null),
                )),
            };
            match (body.get("id").cloned(), outcome) {
                (None, _) => reply(&mut stream, "202 Accepted", "", ""),
                (Some(id), Ok(result)) => {
                    let message = json!({"jsonrpc": "2.0", "id": id, "result": result});
                    if events {
                        reply(
                            &mut stream,
                            "200 OK",
                            "Content-Type: text/event-stream\r\n",
                            &format!("event: message\r\ndata: {message}\r\n\r\n"),
                        )
                    } else {
                        reply(
                            &mut stream,
                            "200 OK",
                            "Content-Type: application/json\r\n",
                            &message.to_string(),
                        )
                    }
                }
                (Some(id), Err((status, error))) => reply(
                    &mut stream,
                    status,
                    "Content-Type: application/json\r\n",
                    &json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string(),
                ),
            }
        }
        Stub::Session { delete } => match method.as_str() {
            "POST" => {
                let id = body.get("id").cloned();
                let result = match body["method"].as_str().unwrap_or_default() {
                    "initialize" => json!({
                        "protocolVersion": body["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "stub", "version": "1.0.0"},
                    }),
                    "tools/list" => json!({"tools": [{
                        "name": "noop",
                        "description": "does nothing",
                        "inputSchema": {"type": "object"},
                    }]}),
                    _ => json!({}),
                };
                match id {
                    None => reply(&mut stream, "202 Accepted", "", ""),
                    Some(id) => reply(
                        &mut stream,
                        "200 OK",
                        &format!(
                            "Content-Type: application/json\r\nMcp-Session-Id: {STUB_SESSION}\r\n"
                        ),
                        &json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
                    ),
                }
            }
            "DELETE" => match delete {
                500 => reply(
                    &mut stream,
                    "500 Internal Server Error",
                    "Content-Type: text/plain\r\n",
                    "the session store is down\r\n\u{1b}[31mretry later",
                ),
                404 => reply(&mut stream, "404 Not Found", "", ""),
                0 => {
                    // Never answered: held until the client goes away.
                    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
                    let held = Instant::now();
                    while !stop.load(Ordering::SeqCst) && held.elapsed() < Duration::from_secs(20) {
                        match stream.read(&mut buf) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                    }
                    Ok(())
                }
                _ => reply(&mut stream, "200 OK", "", ""),
            },
            _ => reply(
                &mut stream,
                "405 Method Not Allowed",
                "Allow: POST, DELETE\r\n",
                "",
            ),
        },
    }
}

/// `check` of one remote server at `url`, as JSON; the document and the output.
fn check_remote(label: &str, url: &str) -> (TestFleet, std::process::Output, Value) {
    let fleet = remote_fleet(
        label,
        url,
        "    connect_timeout: 10s\n    cleanup_timeout: 5s\n",
    );
    let out = run_with_secret(&fleet, &["--output", "json", "check"]);
    let doc = parse_doc(&out);
    let s = doc["servers"][0].clone();
    (fleet, out, s)
}

#[test]
fn a_wrong_path_is_named_with_its_http_status_and_body() {
    let stub = StubServer::start(Stub::WrongPath);
    let (fleet, out, s) = check_remote("remote-404", &stub.url());
    assert_code(&out, 3);
    assert_eq!(s["error"]["kind"], "connect_failed", "{s}");
    let message = s["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 404 Not Found: Cannot POST /sse"),
        "{message}"
    );
    assert!(
        message.contains("/mcp"),
        "says where endpoints usually are: {message}"
    );
    assert!(!stdout(&out).contains(SECRET) && !stderr(&out).contains(SECRET));
    assert!(
        stub.seen().iter().any(|l| l.starts_with("POST /mcp")),
        "{:?}",
        stub.seen()
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_that_needs_authorization_is_unauthorized_with_realm_and_scope() {
    let stub = StubServer::start(Stub::NeedsAuth);
    let (fleet, out, s) = check_remote("remote-401", &stub.url());
    assert_code(&out, 3);
    assert_eq!(s["error"]["kind"], "unauthorized", "{s}");
    let message = s["error"]["message"].as_str().unwrap();
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(message.contains("realm \"mcp\""), "{message}");
    assert!(message.contains("scope \"tools\""), "{message}");
    // The credentials that were sent (and echoed by the server) are never shown.
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains(SECRET), "{all}");
    assert!(
        stub.seen().iter().any(|l| l.ends_with("auth=yes")),
        "{:?}",
        stub.seen()
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_legacy_http_sse_endpoint_is_named_with_what_to_do_instead() {
    for json_400 in [false, true] {
        let stub = StubServer::start(Stub::LegacySse { json_400 });
        let (fleet, out, s) = check_remote("remote-legacy", &stub.url());
        assert_code(&out, 3);
        let kind = s["error"]["kind"].as_str().unwrap();
        assert!(kind == "protocol" || kind == "connect_failed", "{s}");
        let message = s["error"]["message"].as_str().unwrap();
        assert!(message.contains("legacy HTTP+SSE"), "{message}");
        assert!(message.contains("streamable HTTP"), "{message}");
        assert!(message.contains("`url:`"), "{message}");
        assert!(
            stub.seen().iter().any(|l| l.starts_with("GET /mcp")),
            "{:?}",
            stub.seen()
        );
        fleet.assert_no_leftovers();
    }
}

#[test]
fn a_delete_answered_500_is_a_failed_teardown_that_names_the_answer() {
    let stub = StubServer::start(Stub::Session { delete: 500 });
    let (fleet, out, s) = check_remote("remote-delete-500", &stub.url());
    assert_code(&out, 5);
    assert_eq!(s["tools"], 1, "{s}");
    assert_eq!(s["teardown"]["outcome"], "failed", "{s}");
    assert_eq!(s["error"]["kind"], "teardown_failed", "{s}");
    let message = s["error"]["message"].as_str().unwrap();
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(message.contains("the session store is down"), "{message}");
    // The server's control characters reach no terminal as they are.
    assert!(!message.contains('\u{1b}'), "{message:?}");
    assert!(
        stub.seen()
            .iter()
            .any(|l| l.starts_with("DELETE /mcp") && l.contains(STUB_SESSION)),
        "{:?}",
        stub.seen()
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_delete_answered_404_is_a_clean_teardown_with_a_note() {
    let stub = StubServer::start(Stub::Session { delete: 404 });
    let (fleet, out, s) = check_remote("remote-delete-404", &stub.url());
    assert_code(&out, 0);
    assert_eq!(s["teardown"]["outcome"], "clean", "{s}");
    assert_eq!(s["error"], Value::Null, "{s}");
    let note = s["teardown"]["exit"].as_str().unwrap_or_default();
    assert!(
        note.contains("had already ended the session") && note.contains("HTTP 404"),
        "{s}"
    );
    assert!(
        stub.seen()
            .iter()
            .any(|l| l.starts_with("DELETE /mcp") && l.contains(STUB_SESSION)),
        "{:?}",
        stub.seen()
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_delete_that_gets_no_answer_is_a_failed_teardown() {
    let stub = StubServer::start(Stub::Session { delete: 0 });
    let fleet = remote_fleet(
        "remote-delete-hangs",
        &stub.url(),
        "    connect_timeout: 10s\n    cleanup_timeout: 20s\n",
    );
    let started = Instant::now();
    let out = run_with_secret(&fleet, &["--output", "json", "check"]);
    assert_code(&out, 5);
    assert!(started.elapsed() < Duration::from_secs(20));
    let s = parse_doc(&out)["servers"][0].clone();
    assert_eq!(s["teardown"]["outcome"], "failed", "{s}");
    assert_eq!(s["error"]["kind"], "teardown_failed", "{s}");
    assert!(
        s["error"]["message"].as_str().unwrap().contains("DELETE"),
        "{s}"
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_modern_only_server_over_http_is_started_listed_called_and_stopped() {
    for events in [false, true] {
        let stub = StubServer::start(Stub::Modern {
            events,
            slow: false,
        });
        let fleet = remote_fleet(
            &format!("remote-modern-{events}"),
            &stub.url(),
            "    connect_timeout: 10s\n",
        );
        let up = run_with_secret(&fleet, &["--output", "json", "up"]);
        assert_code(&up, 0);
        let s = parse_doc(&up)["servers"][0].clone();
        assert_eq!(s["state"], "running", "{s}");
        assert_eq!(s["tools"], 1, "{s}");
        assert_eq!(s["protocol_version"], "2026-07-28", "{s}");
        assert_eq!(s["server_info"], "stub-modern 1.0.0", "{s}");

        let tools = run_with_secret(&fleet, &["tools", "remote"]);
        assert_code(&tools, 0);
        assert!(stdout(&tools).contains("echo"), "{}", stdout(&tools));
        let call = run_with_secret(
            &fleet,
            &[
                "call",
                "remote",
                "echo",
                "--args",
                r#"{"over": "modern http"}"#,
            ],
        );
        assert_code(&call, 0);
        assert!(stdout(&call).contains("modern http"), "{}", stdout(&call));
        let status = run_with_secret(&fleet, &["--output", "json", "status"]);
        assert_code(&status, 0);
        let s = parse_doc(&status)["servers"][0].clone();
        assert_eq!(
            (s["state"].as_str(), s["protocol_version"].as_str()),
            (Some("running"), Some("2026-07-28")),
            "{s}"
        );

        let down = run_with_secret(&fleet, &["--output", "json", "down"]);
        assert_code(&down, 0);
        assert_eq!(
            parse_doc(&down)["servers"][0]["teardown"]["outcome"],
            "clean"
        );
        fleet.assert_no_leftovers();

        let seen = stub.seen();
        assert!(
            seen.iter().all(|l| l.starts_with("POST /mcp")
                && l.contains("session=-")
                && l.ends_with("auth=yes")),
            "only POSTs with credentials, and no session: {seen:?}"
        );
        assert!(
            !seen
                .iter()
                .any(|l| l.contains("rpc=initialize") || l.contains("rpc=ping")),
            "{seen:?}"
        );
        assert!(
            seen[0].contains("rpc=server/discover version=2026-07-28"),
            "the probe comes first, with the modern header: {seen:?}"
        );
    }
}

#[test]
fn a_server_that_answers_discover_with_an_empty_result_over_http_is_legacy() {
    let stub = StubServer::start(Stub::Session { delete: 200 });
    let (fleet, out, s) = check_remote("remote-empty-discover", &stub.url());
    assert_code(&out, 0);
    assert_eq!(s["protocol_version"], "2025-11-25", "{s}");
    let seen = stub.seen();
    assert!(
        seen[0].contains("rpc=server/discover version=2026-07-28 session=-")
            && seen[1].contains("rpc=initialize"),
        "the probe, then initialize at the same URL: {seen:?}"
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_modern_only_server_slower_than_the_probe_s_bound_starts_modern_over_http() {
    let stub = StubServer::start(Stub::Modern {
        events: false,
        slow: true,
    });
    let (fleet, out, s) = check_remote("remote-modern-slow", &stub.url());
    assert_code(&out, 0);
    assert_eq!(s["protocol_version"], "2026-07-28", "{s}");
    let rpcs: Vec<String> = stub
        .seen()
        .iter()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect();
    assert_eq!(
        rpcs[..3],
        [
            "rpc=server/discover",
            "rpc=initialize",
            "rpc=server/discover"
        ],
        "the probe (answered too late), the refused initialize, then a modern start"
    );
    fleet.assert_no_leftovers();
}
