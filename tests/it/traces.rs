//! Traces (docs/design.md §18) through the real binary: a supervisor started with
//! `OTEL_EXPORTER_OTLP_*` in its environment exports its spans to a small OTLP/HTTP
//! receiver that the test runs on loopback (`tests/clients/otlp_receiver.py`). The
//! receiver parses every body with the OpenTelemetry project's own protobuf
//! messages (PyPI `opentelemetry-proto`), not with mcpfleet's code, and prints the
//! spans as JSON lines for the test to read.
//!
//! Behind the supervisor: fixture servers. A call goes through the gateway the way
//! an MCP client makes it: the official Python SDK's client (`tests/clients/client.py`)
//! launches `mcpfleet connect`. The spans are checked against the event log they
//! derive from, span for span, and for what a collector needs (ids, no parent,
//! times, status). Also: `http/json`, a collector that refuses connections or never
//! answers (warnings, no hang), grpc and https (refused with one warning), and no
//! endpoint at all (no connection made).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::*;
use serde_json::{Value, json};

/// The bound on anything a test waits for.
const LIMIT: Duration = Duration::from_secs(45);

// ---------------------------------------------------------------------------------
// The receiver

/// `otlp_receiver.py`, running; it exits when its stdin closes (on drop).
struct Collector {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    port: u16,
}

impl Collector {
    fn start(fleet: &TestFleet) -> Collector {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/otlp_receiver.py");
        let mut child = Command::new(published_servers().join("venv/bin/python"))
            .arg(script)
            .env(TEST_ID_VAR, &fleet.test_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(fleet.dir.path().join("receiver.stderr")).unwrap())
            .spawn()
            .expect("start the OTLP receiver");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the receiver printed no JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let first = lines
            .recv_timeout(LIMIT)
            .expect("the receiver says where it listens");
        let port = first["listening"].as_u64().expect("a port") as u16;
        Collector {
            child,
            stdin,
            lines,
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every line printed until none came for `quiet` (bounded by [`LIMIT`]).
    fn drain(&self, quiet: Duration) -> Vec<Value> {
        let deadline = Instant::now() + LIMIT;
        let mut out = Vec::new();
        while Instant::now() < deadline {
            match self.lines.recv_timeout(quiet) {
                Ok(v) => out.push(v),
                Err(_) => break,
            }
        }
        out
    }

    /// Lines until `done` holds for what was received, bounded by [`LIMIT`].
    fn until(&self, got: &mut Vec<Value>, done: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + LIMIT;
        while !done(got) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => got.push(v),
                Err(_) => panic!(
                    "the receiver got not what was expected within {LIMIT:?}; so far:\n{}",
                    lines(got)
                ),
            }
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The spans among the receiver's lines, failing on any body it could not parse.
fn spans(got: &[Value]) -> Vec<Value> {
    for v in got {
        assert!(v.get("error").is_none(), "the receiver refused a body: {v}");
    }
    got.iter()
        .filter(|v| v.get("span").is_some())
        .cloned()
        .collect()
}

fn requests(got: &[Value]) -> Vec<Value> {
    got.iter()
        .filter_map(|v| v.get("request").cloned())
        .collect()
}

// ---------------------------------------------------------------------------------
// The supervisor

/// `mcpfleet ARGS` with `otel` as the only `OTEL_*` variables of its environment.
fn command(fleet: &TestFleet, otel: &[(&str, String)], args: &[&str]) -> Command {
    let mut cmd = fleet.command(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in otel {
        cmd.env(k, v);
    }
    cmd
}

#[track_caller]
fn run(fleet: &TestFleet, otel: &[(&str, String)], args: &[&str], code: i32) -> Value {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let out = run_bounded(command(fleet, otel, &all), LIMIT);
    assert_code(&out, code);
    parse_doc(&out)
}

/// Waits until the supervisor `pid` has exited (its final flush is done then).
#[track_caller]
fn wait_exit(pid: i32, limit: Duration) -> Duration {
    let t0 = Instant::now();
    while is_alive(pid) {
        assert!(
            t0.elapsed() < limit,
            "the supervisor {pid} still runs after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

fn supervisor_log(fleet: &TestFleet) -> String {
    std::fs::read_to_string(fleet.state_dir().join("supervisor.log")).unwrap_or_default()
}

/// The remote ports of the TCP connections process `pid` holds.
fn tcp_peers(pid: i32) -> Vec<u16> {
    let mut inodes = BTreeSet::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in dir.flatten() {
            if let Ok(link) = std::fs::read_link(e.path()) {
                let link = link.to_string_lossy().into_owned();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                {
                    inodes.insert(inode.to_owned());
                }
            }
        }
    }
    let mut peers = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if cols.len() > 9 && inodes.contains(cols[9]) {
                let port = cols[2].rsplit(':').next().unwrap_or("0");
                peers.push(u16::from_str_radix(port, 16).unwrap_or(0));
            }
        }
    }
    peers
}

/// The lifecycle lines of the event log.
fn lifecycle_events(fleet: &TestFleet) -> Vec<Value> {
    std::fs::read_to_string(fleet.state_dir().join("events.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("an event is JSON"))
        .filter(|e| e.get("from").is_some())
        .collect()
}

/// Milliseconds since the epoch of an event's `time` (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
fn epoch_ms(time: &str) -> u64 {
    let t = humantime::parse_rfc3339(time).unwrap_or_else(|e| panic!("{time}: {e}"));
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A lifecycle span as the test compares it: (name, server, generation, cause,
/// to, end ms, duration ms, outcome).
type Seen = (String, String, u64, String, String, u64, u64, String);

/// The span an event should have become (docs/design.md §18); `None` for an
/// event that opens an operation.
fn expected(e: &Value) -> Option<Seen> {
    let (from, to) = (e["from"].as_str().unwrap(), e["to"].as_str().unwrap());
    let duration = e["duration_ms"].as_u64().unwrap();
    if from != to && (to == "starting" || to == "stopping") && duration == 0 && e["error"].is_null()
    {
        return None;
    }
    let name = if e["cause"] == "recovery" {
        "recovery"
    } else if from == to {
        "refused"
    } else {
        match from {
            "starting" => "connect",
            "stopping" => "teardown",
            "running" => "exit",
            "quarantined" => "clear",
            _ => "transition",
        }
    };
    let outcome = e["error"]["kind"].as_str().unwrap_or("ok");
    Some((
        name.into(),
        e["server"].as_str().unwrap().into(),
        e["generation"].as_u64().unwrap(),
        e["cause"].as_str().unwrap().into(),
        to.into(),
        epoch_ms(e["time"].as_str().unwrap()),
        duration,
        outcome.into(),
    ))
}

/// The same tuple, read from a received span.
fn as_expected(s: &Value) -> Seen {
    let span = &s["span"];
    let a = &span["attributes"];
    let (start, end) = (
        span["start"].as_u64().unwrap(),
        span["end"].as_u64().unwrap(),
    );
    (
        span["name"].as_str().unwrap().into(),
        a["mcpfleet.server"].as_str().unwrap().into(),
        a["mcpfleet.generation"].as_u64().unwrap(),
        a["mcpfleet.cause"].as_str().unwrap().into(),
        a["mcpfleet.to"].as_str().unwrap().into(),
        end / 1_000_000,
        (end - start) / 1_000_000,
        a["mcpfleet.outcome"].as_str().unwrap().into(),
    )
}

/// What every span must be for a collector: a root (no parent), ids of the right
/// size, not zero, and unique, times within the test, sampled, its status an
/// error exactly when its outcome is not `ok`.
#[track_caller]
fn well_formed(spans: &[Value], began: SystemTime) {
    let began = began.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 - 1_000_000_000;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut traces = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for s in spans {
        let span = &s["span"];
        let (trace, id) = (
            span["trace_id"].as_str().unwrap(),
            span["span_id"].as_str().unwrap(),
        );
        assert_eq!(trace.len(), 32, "{s}");
        assert_eq!(id.len(), 16, "{s}");
        assert_ne!(trace, "0".repeat(32), "{s}");
        assert_ne!(id, "0".repeat(16), "{s}");
        assert!(traces.insert(trace.to_owned()), "trace id twice: {s}");
        assert!(ids.insert(id.to_owned()), "span id twice: {s}");
        assert_eq!(span["parent_span_id"], "", "a root span: {s}");
        assert_eq!(span["flags"], 1, "sampled: {s}");
        let (start, end) = (
            span["start"].as_u64().unwrap(),
            span["end"].as_u64().unwrap(),
        );
        assert!(began <= start && start <= end && end <= now, "times: {s}");
        let outcome = &span["attributes"]["mcpfleet.outcome"];
        if outcome == "ok" {
            assert_eq!(span["status"]["code"], 0, "unset on success: {s}");
        } else {
            assert_eq!(span["status"]["code"], 2, "error: {s}");
            assert!(
                !span["status"]["message"].as_str().unwrap().is_empty(),
                "{s}"
            );
            assert_eq!(span["attributes"]["error.type"], *outcome, "{s}");
        }
    }
}

// ---------------------------------------------------------------------------------
// A client of the gateway

/// The Python SDK's client, launching `mcpfleet connect` as its server.
struct Gateway {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Gateway {
    /// `connect SERVERS`: the gateway scoped to those servers.
    fn open(fleet: &TestFleet, otel: &[(&str, String)], servers: &[&str]) -> Gateway {
        let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
        let mut args = vec!["connect"];
        args.extend_from_slice(servers);
        let connect = command(fleet, otel, &args);
        let mut cmd = Command::new(published_servers().join("venv/bin/python"));
        cmd.arg(clients.join("client.py"))
            .arg("--stdio")
            .arg(connect.get_program())
            .args(connect.get_args());
        for (k, v) in connect.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child = cmd
            .env("MCP_CLIENT_TIMEOUT_MS", "30000")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(fleet.dir.path().join("client.stderr")).unwrap())
            .spawn()
            .expect("start the MCP client");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Gateway {
            stdin: child.stdin.take(),
            child,
            lines,
        };
        let first = client.answer();
        assert_eq!(first["ok"], true, "the client did not connect: {first}");
        client
    }

    fn answer(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(LIMIT)
            .expect("the client answers in time");
        serde_json::from_str(&line).unwrap()
    }

    fn op(&mut self, command: Value) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.answer()
    }

    fn close(mut self) {
        let closed = self.op(json!({"op": "close"}));
        assert_eq!(closed["closed"], true, "{closed}");
        drop(self.stdin.take());
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(t0.elapsed() < LIMIT, "the client did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// ---------------------------------------------------------------------------------
// Tests

#[test]
fn lifecycle_operations_and_gateway_calls_arrive_as_spans_over_protobuf() {
    let fleet = TestFleet::fixtures(
        "traces-protobuf",
        &[
            ("alpha", &["--call-delay-ms", "150"], ""),
            ("beta", &["--ignore-eof"], "cleanup_timeout: 5s"),
            (
                "gamma",
                &["--crash-after-ms", "400"],
                "restart: { policy: on-failure, backoff: { initial: 100ms, max: 1s }, max_restarts: 1, window: 60s }",
            ),
        ],
    );
    let collector = Collector::start(&fleet);
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-test-tenant=team%20a".into(),
        ),
        ("OTEL_SERVICE_NAME", "fleet-under-test".into()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=test".into(),
        ),
    ];
    let began = SystemTime::now();

    let up = run(&fleet, &otel, &["up"], 0);
    assert_eq!(server(&up, "alpha")["state"], "running", "{up}");
    let supervisor = fleet.lock_pid().expect("a supervisor");

    // gamma crashes, is restarted once, crashes again: crash-loop.
    let deadline = Instant::now() + LIMIT;
    loop {
        // A crash loop is not ok: `status` exits 3 once gamma is in one.
        let out = run_bounded(
            command(&fleet, &otel, &["--output", "json", "status", "gamma"]),
            LIMIT,
        );
        let status = parse_doc(&out);
        if server(&status, "gamma")["state"] == "crash-loop" {
            assert_code(&out, 3);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gamma never crash-looped: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A call through the gateway, and one of a tool nobody offers.
    let mut client = Gateway::open(&fleet, &otel, &["alpha"]);
    let called = client.op(json!({"op": "call", "name": "alpha__echo", "arguments": {"x": 1}}));
    assert_eq!(called["ok"], true, "{called}");
    let unknown = client.op(json!({"op": "call", "name": "nobody__echo", "arguments": {}}));
    assert_eq!(unknown["ok"], false, "{unknown}");
    client.close();

    let reconnected = run(&fleet, &otel, &["reconnect", "alpha"], 0);
    assert_eq!(
        server(&reconnected, "alpha")["generation"],
        2,
        "{reconnected}"
    );

    // Exported while the supervisor runs: the connection to the collector is the
    // supervisor's (kept open between exports).
    let mut got = Vec::new();
    collector.until(&mut got, |g| {
        spans(g).iter().any(|s| s["span"]["name"] == "tools/call")
    });
    assert!(
        tcp_peers(supervisor).contains(&collector.port),
        "the supervisor holds no connection to the collector: {:?}",
        tcp_peers(supervisor)
    );

    run(&fleet, &otel, &["down"], 0);
    wait_exit(supervisor, LIMIT);
    got.extend(collector.drain(Duration::from_millis(300)));
    let all = spans(&got);

    // Every request: the traces path appended to the endpoint, protobuf, our
    // headers, our user agent.
    for r in requests(&got) {
        assert_eq!(r["path"], "/v1/traces", "{r}");
        assert_eq!(r["content_type"], "application/x-protobuf", "{r}");
        assert_eq!(r["headers"]["x-test-tenant"], "team a", "{r}");
        assert!(
            r["user_agent"].as_str().unwrap().starts_with("mcpfleet/"),
            "{r}"
        );
    }
    for s in &all {
        let resource = &s["resource"];
        assert_eq!(resource["service.name"], "fleet-under-test", "{s}");
        assert_eq!(resource["deployment.environment"], "test", "{s}");
        assert_eq!(resource["process.pid"], supervisor.to_string(), "{s}");
        assert_eq!(s["scope"]["name"], "mcpfleet", "{s}");
    }
    well_formed(&all, began);

    // The lifecycle spans are the event log's operations, one for one: same
    // server, generation, cause, end time and duration.
    let mut want: Vec<_> = lifecycle_events(&fleet)
        .iter()
        .filter_map(expected)
        .collect();
    let mut have: Vec<_> = all
        .iter()
        .filter(|s| s["span"]["name"] != "tools/call")
        .map(as_expected)
        .collect();
    want.sort();
    have.sort();
    assert_eq!(have, want, "spans:\n{}", lines(&all));

    // What those are, by name.
    let by = |name: &str, server: &str| -> Vec<Value> {
        all.iter()
            .filter(|s| {
                s["span"]["name"] == name && s["span"]["attributes"]["mcpfleet.server"] == server
            })
            .map(|s| s["span"].clone())
            .collect()
    };
    let causes = |spans: &[Value]| -> Vec<String> {
        spans
            .iter()
            .map(|s| {
                s["attributes"]["mcpfleet.cause"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    let alpha_connects = by("connect", "alpha");
    assert_eq!(causes(&alpha_connects), ["start", "reconnect"]);
    assert_eq!(alpha_connects[1]["attributes"]["mcpfleet.generation"], 2);
    assert_eq!(causes(&by("teardown", "alpha")), ["reconnect", "stop"]);
    // beta ignores the end of its stdin: its teardown waited for SIGTERM.
    let beta_teardown = &by("teardown", "beta")[0];
    let took = beta_teardown["end"].as_u64().unwrap() - beta_teardown["start"].as_u64().unwrap();
    assert!(took >= 1_000_000_000, "{beta_teardown}");
    // gamma: an exit, the restart's connect, an exit into crash-loop.
    let gamma_exits = by("exit", "gamma");
    assert_eq!(gamma_exits.len(), 2, "{}", lines(&all));
    assert_eq!(gamma_exits[0]["attributes"]["mcpfleet.to"], "backoff");
    assert_eq!(gamma_exits[0]["attributes"]["mcpfleet.outcome"], "exited");
    // The error of the exit that was one too many; the state says crash-loop.
    assert_eq!(gamma_exits[1]["attributes"]["mcpfleet.to"], "crash-loop");
    assert_eq!(gamma_exits[1]["attributes"]["mcpfleet.outcome"], "exited");
    assert_eq!(causes(&by("connect", "gamma")), ["start", "restart"]);
    let kinds: BTreeSet<_> = all
        .iter()
        .map(|s| s["span"]["kind"].as_u64().unwrap())
        .collect();
    assert!(kinds.contains(&1), "internal spans");

    // The gateway's calls: server, tool, generation, outcome, and the server's
    // call delay inside the span.
    let calls: Vec<&Value> = all
        .iter()
        .filter(|s| s["span"]["name"] == "tools/call")
        .map(|s| &s["span"])
        .collect();
    assert_eq!(calls.len(), 2, "{}", lines(&all));
    let ok = calls
        .iter()
        .find(|c| c["attributes"]["mcpfleet.tool"] == "alpha__echo")
        .expect("the call of alpha__echo");
    assert_eq!(ok["kind"], 2, "a server span: {ok}");
    assert_eq!(ok["attributes"]["mcpfleet.server"], "alpha");
    assert_eq!(ok["attributes"]["mcpfleet.generation"], 1);
    assert_eq!(ok["attributes"]["mcpfleet.outcome"], "ok");
    assert_eq!(ok["attributes"]["mcp.method.name"], "tools/call");
    let took = ok["end"].as_u64().unwrap() - ok["start"].as_u64().unwrap();
    assert!(
        (150_000_000..30_000_000_000).contains(&took),
        "the call took {took} ns: {ok}"
    );
    let refused = calls
        .iter()
        .find(|c| c["attributes"]["mcpfleet.tool"] == "nobody__echo")
        .expect("the call of an unknown tool");
    assert_eq!(refused["attributes"]["mcpfleet.outcome"], "jsonrpc_error");
    assert!(
        refused["attributes"].get("mcpfleet.server").is_none(),
        "{refused}"
    );
    assert!(
        refused["status"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{refused}"
    );

    let log = supervisor_log(&fleet);
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("traces")),
        "{log}"
    );
    drop(collector);
    fleet.assert_no_leftovers();
}

#[test]
fn http_json_goes_to_the_traces_endpoint_as_given() {
    let fleet = TestFleet::fixtures("traces-json", &[("alpha", &[], "")]);
    let collector = Collector::start(&fleet);
    let otel = [
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/custom/traces", collector.url()),
        ),
        // Not used: the traces' own endpoint wins, with no path appended.
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9".into()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".into()),
    ];
    let began = SystemTime::now();
    // In the foreground, Ctrl-C tears down and exits at once: the teardown's
    // span leaves with the final flush, not with a periodic export.
    let mut foreground = command(&fleet, &otel, &["up", "--foreground"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("up --foreground");
    let deadline = Instant::now() + LIMIT;
    loop {
        let out = run_bounded(
            command(&fleet, &otel, &["--output", "json", "status"]),
            LIMIT,
        );
        if out.status.code() == Some(0) && server(&parse_doc(&out), "alpha")["state"] == "running" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "alpha never ran in the foreground"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sigint(foreground.id());
    let t0 = Instant::now();
    while foreground.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < LIMIT,
            "the foreground supervisor did not exit"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = collector.drain(Duration::from_millis(300));
    let all = spans(&got);
    assert!(!requests(&got).is_empty(), "nothing received");
    for r in requests(&got) {
        assert_eq!(r["path"], "/custom/traces", "{r}");
        assert_eq!(r["content_type"], "application/json", "{r}");
    }
    let names: Vec<&str> = all
        .iter()
        .map(|s| s["span"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["connect", "teardown"], "{}", lines(&all));
    assert_eq!(all[0]["resource"]["service.name"], "mcpfleet");
    well_formed(&all, began);
    let mut want: Vec<_> = lifecycle_events(&fleet)
        .iter()
        .filter_map(expected)
        .collect();
    let mut have: Vec<_> = all.iter().map(as_expected).collect();
    want.sort();
    have.sort();
    assert_eq!(have, want);
    drop(collector);
    fleet.assert_no_leftovers();
}

/// A collector that refuses connections, or accepts them and never answers:
/// the lifecycle goes on at its pace, the supervisor exits within the export
/// timeout, and the failures are a warning, not one per export.
#[test]
fn an_unreachable_collector_costs_a_warning_never_a_hang() {
    // Refused: a port that was free a moment ago.
    let refused_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Silent: accepts (the kernel does, from its backlog) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    for (label, port) in [("refused", refused_port), ("silent", silent_port)] {
        let fleet = TestFleet::fixtures(&format!("traces-{label}"), &[("alpha", &[], "")]);
        let otel = [
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "700".into()),
        ];
        let t0 = Instant::now();
        run(&fleet, &otel, &["up"], 0);
        let supervisor = fleet.lock_pid().expect("a supervisor");
        // Several exports, each failing: one a second at most.
        for _ in 0..3 {
            let t = Instant::now();
            run(&fleet, &otel, &["reconnect", "alpha"], 0);
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{label}: reconnect took {:?}",
                t.elapsed()
            );
            std::thread::sleep(Duration::from_millis(1100));
        }
        let status = run(&fleet, &otel, &["status"], 0);
        assert_eq!(server(&status, "alpha")["state"], "running", "{status}");
        run(&fleet, &otel, &["down"], 0);
        let down_at = Instant::now();
        // No linger after a `down` of the whole fleet; a final flush bounded by
        // the 700 ms timeout.
        let exit = wait_exit(supervisor, Duration::from_secs(15));
        assert!(
            exit < Duration::from_secs(6),
            "{label}: the supervisor took {exit:?} to exit after down"
        );
        let log = supervisor_log(&fleet);
        let failed: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("traces: export to"))
            .collect();
        assert_eq!(failed.len(), 1, "{label}: one warning, then quiet:\n{log}");
        assert!(
            failed[0].contains(&format!("127.0.0.1:{port}/v1/traces")),
            "{log}"
        );
        if label == "silent" {
            assert!(
                failed[0].contains("no answer within 700 ms") || failed[0].contains("timed out"),
                "{log}"
            );
        }
        // The rest is told in the supervisor's last report.
        assert!(
            log.contains("export(s) to") && log.contains("failed since the last report"),
            "{label}:\n{log}"
        );
        let _ = (t0, down_at);
        fleet.assert_no_leftovers();
    }
    drop(silent);
}

#[test]
fn grpc_and_https_are_refused_with_one_warning_and_the_fleet_runs() {
    let cases = [
        (
            "grpc",
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "PLACEHOLDER".to_owned()),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
            ],
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported",
        ),
        (
            "https",
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "PLACEHOLDER-TLS".to_owned())],
            "mcpfleet exports spans over plain HTTP only",
        ),
    ];
    for (label, mut otel, says) in cases {
        let fleet = TestFleet::fixtures(&format!("traces-{label}"), &[("alpha", &[], "")]);
        let collector = Collector::start(&fleet);
        for (_, v) in &mut otel {
            if v == "PLACEHOLDER" {
                *v = collector.url();
            } else if v == "PLACEHOLDER-TLS" {
                *v = collector.url().replace("http://", "https://");
            }
        }
        run(&fleet, &otel, &["up"], 0);
        let supervisor = fleet.lock_pid().expect("a supervisor");
        run(&fleet, &otel, &["reconnect", "alpha"], 0);
        run(&fleet, &otel, &["down"], 0);
        wait_exit(supervisor, LIMIT);
        let log = supervisor_log(&fleet);
        let warned: Vec<&str> = log.lines().filter(|l| l.contains("traces")).collect();
        assert_eq!(warned.len(), 1, "{label}: one line about traces:\n{log}");
        assert!(
            warned[0].contains("WARN") && warned[0].contains(says),
            "{label}:\n{log}"
        );
        assert!(
            collector.drain(Duration::from_millis(300)).is_empty(),
            "{label}: nothing is sent"
        );
        drop(collector);
        fleet.assert_no_leftovers();
    }
}

/// No endpoint: whatever else of OpenTelemetry's is set, the supervisor opens
/// no connection and says nothing about traces.
#[test]
fn without_an_endpoint_nothing_is_started() {
    let fleet = TestFleet::fixtures("traces-unset", &[("alpha", &[], "")]);
    let collector = Collector::start(&fleet);
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", String::new()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".into()),
        ("OTEL_SERVICE_NAME", "nobody-listens".into()),
    ];
    run(&fleet, &otel, &["up"], 0);
    let supervisor = fleet.lock_pid().expect("a supervisor");
    let mut client = Gateway::open(&fleet, &otel, &[]);
    let called = client.op(json!({"op": "call", "name": "alpha__echo", "arguments": {}}));
    assert_eq!(called["ok"], true, "{called}");
    client.close();
    run(&fleet, &otel, &["reconnect", "alpha"], 0);
    // Long enough for an export tick.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        tcp_peers(supervisor),
        Vec::<u16>::new(),
        "no TCP connection"
    );
    run(&fleet, &otel, &["down"], 0);
    wait_exit(supervisor, LIMIT);
    assert!(collector.drain(Duration::from_millis(300)).is_empty());
    let log = supervisor_log(&fleet);
    assert!(!log.contains("traces"), "{log}");
    // The same events were recorded: only their export is off.
    let events: BTreeMap<String, usize> =
        lifecycle_events(&fleet)
            .iter()
            .fold(BTreeMap::new(), |mut m, e| {
                *m.entry(e["to"].as_str().unwrap().to_owned()).or_default() += 1;
                m
            });
    assert_eq!(events.get("running"), Some(&2), "{events:?}");
    drop(collector);
    fleet.assert_no_leftovers();
}
