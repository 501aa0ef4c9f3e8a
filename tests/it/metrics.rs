//! The supervisor's metrics, read the way operators read them: checked by
//! `promtool check metrics`, parsed by the Prometheus Python client's parsers
//! (both formats), and scraped by a real Prometheus server whose HTTP API is
//! then asked for the counters and gauges that a restart, an escalated teardown
//! and a quarantine must have moved. Prometheus and promtool come from Debian's
//! `prometheus` package, the parser from PyPI (`.ci/install-servers`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` over HTTP/1.0, with `headers`: the status and the body.
fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, head.to_owned(), body.to_owned())
}

fn token(fleet: &TestFleet) -> String {
    std::fs::read_to_string(fleet.state_dir().join("gateway.token"))
        .expect("the gateway's token")
        .trim()
        .to_owned()
}

/// `promtool check metrics` of `text`: its exit code must be 0 and it must say
/// nothing (it prints every lint problem it finds).
#[track_caller]
fn promtool_accepts(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's `prometheus`; run .ci/install-servers)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{text}"
    );
}

/// Every sample of `text` as the Prometheus client's parser for `format` reads it.
#[track_caller]
fn parsed(text: &str, format: &str) -> Vec<Value> {
    let python = published_servers().join("venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/parse_metrics.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python of the venv");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the {format} parser refused the text: {}\n{text}",
        stderr(&out)
    );
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The value of the sample `name` with exactly `labels` among `samples`.
#[track_caller]
fn value(samples: &[Value], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Value> = samples
        .iter()
        .filter(|s| {
            s["name"] == name
                && labels.iter().all(|(k, v)| s["labels"][k] == *v)
                && s["labels"].as_object().unwrap().len() == labels.len()
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0]["value"].as_f64().unwrap()
}

#[test]
fn the_exposition_passes_promtool_and_both_reference_parsers() {
    let port = free_port();
    let fleet = TestFleet::raw(
        "metrics-expo",
        &format!(
            "version: 1\nmetrics:\n  listen: 127.0.0.1:{port}\nservers:\n{}{}",
            fixture_server("a", &[], ""),
            fixture_server("b", &[], ""),
        ),
    );
    // Without a supervisor: the gauges from state.json, and no counters.
    let out = fleet.run(&["metrics"]);
    assert_code(&out, 0);
    let offline = stdout(&out);
    promtool_accepts(&offline);
    let samples = parsed(&offline, "prometheus");
    assert_eq!(value(&samples, "mcpfleet_supervisor_up", &[]), 0.0);
    assert!(!offline.contains("_total"), "{offline}");

    assert_code(&fleet.run(&["up"]), 0);
    assert_code(&fleet.run(&["reconnect", "a"]), 0);
    let out = fleet.run(&["call", "a", "echo", "--args", "{\"x\":1}"]);
    assert_code(&out, 0);
    let out = fleet.run(&["call", "a", "no_such_tool"]);
    assert_ne!(out.status.code(), Some(0));

    // `mcpfleet metrics`, in both formats.
    let out = fleet.run(&["metrics"]);
    assert_code(&out, 0);
    let text = stdout(&out);
    promtool_accepts(&text);
    let samples = parsed(&text, "prometheus");
    assert_eq!(value(&samples, "mcpfleet_supervisor_up", &[]), 1.0);
    let a = ("server", "a");
    let b = ("server", "b");
    assert_eq!(
        value(
            &samples,
            "mcpfleet_server_restarts_total",
            &[a, ("cause", "reconnect")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "mcpfleet_server_starts_total",
            &[a, ("outcome", "ok")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &samples,
            "mcpfleet_server_starts_total",
            &[b, ("outcome", "ok")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "mcpfleet_server_teardowns_total",
            &[a, ("outcome", "clean")]
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "mcpfleet_calls_total", &[a, ("outcome", "ok")]),
        1.0
    );
    assert_eq!(
        value(&samples, "mcpfleet_call_duration_seconds_count", &[a]),
        2.0
    );
    assert_eq!(value(&samples, "mcpfleet_server_generation", &[a]), 2.0);
    assert_eq!(
        value(
            &samples,
            "mcpfleet_server_state",
            &[a, ("state", "running")]
        ),
        1.0
    );
    // Three requests reached a's authority: up, reconnect, and nothing else
    // (calls go around it).
    assert_eq!(
        value(&samples, "mcpfleet_authority_wait_seconds_count", &[a]),
        2.0
    );
    assert!(value(&samples, "process_resident_memory_bytes", &[]) > 1e6);
    assert_eq!(
        value(
            &samples,
            "mcpfleet_log_rotations_total",
            &[("file", "events")]
        ),
        0.0
    );

    let out = fleet.run(&["metrics", "--openmetrics"]);
    assert_code(&out, 0);
    let om = stdout(&out);
    assert!(om.ends_with("# EOF\n"), "{om}");
    let samples = parsed(&om, "openmetrics");
    assert_eq!(
        value(
            &samples,
            "mcpfleet_server_restarts_total",
            &[a, ("cause", "reconnect")]
        ),
        1.0
    );

    // The door at `metrics.listen`: the token, then the format the scraper asks for.
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (status, _, _) = get(addr, "/metrics", &[]);
    assert_eq!(status, 401);
    let (status, _, _) = get(addr, "/metrics", &[("Authorization", "Bearer wrong")]);
    assert_eq!(status, 401);
    let bearer = format!("Bearer {}", token(&fleet));
    let (status, _, _) = get(addr, "/mcp", &[("Authorization", &bearer)]);
    assert_eq!(status, 404);
    let (status, head, body) = get(addr, "/metrics", &[("Authorization", &bearer)]);
    assert_eq!(status, 200);
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    promtool_accepts(&body);
    let (status, head, body) = get(
        addr,
        "/metrics",
        &[
            ("Authorization", &bearer),
            ("Accept", "application/openmetrics-text; version=1.0.0"),
        ],
    );
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    let samples = parsed(&body, "openmetrics");
    assert_eq!(value(&samples, "mcpfleet_gateway_sessions", &[]), 0.0);

    // The gateway's door serves them too, with the same token.
    let http = serve(&fleet, &[]);
    let door: SocketAddr = http
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let (status, _, _) = get(door, "/metrics", &[]);
    assert_eq!(status, 401);
    let (status, _, body) = get(
        door,
        "/metrics",
        &[("Authorization", &format!("Bearer {}", http.token))],
    );
    assert_eq!(status, 200);
    promtool_accepts(&body);

    // Both doors rendered on the supervisor's renderer thread, which the kernel
    // runs only when a core is free (SCHED_IDLE, policy 5).
    let supervisor = fleet.lock_pid().expect("the supervisor's pid");
    let policies = thread_policies(supervisor, "metrics-render");
    assert_eq!(policies, vec![5], "the renderer threads' policies");

    down_and_no_leftovers(&fleet);
}

/// The scheduling policy (field 41 of `/proc/PID/task/TID/stat`) of each of
/// `pid`'s threads named `name`.
fn thread_policies(pid: i32, name: &str) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the supervisor's threads");
    let mut policies = Vec::new();
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap();
        // The fields after the command's closing parenthesis start at field 3.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let policy = rest.split(' ').nth(41 - 3).unwrap().parse().unwrap();
        policies.push(policy);
    }
    policies
}

/// A Prometheus server of the test's own on a loopback port, tagged with the
/// test's id so that the leak check finds it; killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _data: tempfile::TempDir,
}

impl Prometheus {
    fn start(fleet: &TestFleet, target: SocketAddr, token_file: &Path) -> Prometheus {
        let data = tempfile::tempdir().unwrap();
        let config = data.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n\
                 scrape_configs:\n  - job_name: mcpfleet\n    authorization:\n      \
                 credentials_file: {}\n    static_configs:\n      - targets: ['{target}']\n",
                quoted(token_file)
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = std::fs::File::create(data.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .env(TEST_ID_VAR, &fleet.test_id)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus (Debian's `prometheus`; run .ci/install-servers)");
        let p = Prometheus {
            child,
            addr,
            _data: data,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect(addr).is_ok() && get(addr, "/-/ready", &[]).0 == 200 {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not get ready: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._data.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The value of an instant query that must return exactly one series.
    fn query(&self, promql: &str) -> Option<f64> {
        let mut q = String::new();
        for b in promql.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => q.push(b as char),
                _ => q.push_str(&format!("%{b:02X}")),
            }
        }
        let (status, _, body) = get(self.addr, &format!("/api/v1/query?query={q}"), &[]);
        assert_eq!(status, 200, "{promql}: {body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        let result = doc["data"]["result"].as_array()?;
        if result.len() != 1 {
            return None;
        }
        result[0]["value"][1].as_str()?.parse().ok()
    }

    /// Waits until `promql` is `want` (the scrape runs every second).
    #[track_caller]
    fn wait_for(&self, promql: &str, want: f64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.query(promql);
            if got == Some(want) {
                return;
            }
            if Instant::now() > deadline {
                let up = self.query("up");
                panic!(
                    "{promql}: want {want}, Prometheus says {got:?} (up: {up:?})\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_prometheus_scrapes_restarts_escalations_and_quarantine() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("esc.pid");
    // Its generation leaves a grandchild no signal ends until thawed: quarantine.
    let freezer = Freezer::new("metrics-quarantine");
    let port = free_port();
    let fleet = TestFleet::raw(
        "metrics-prom",
        &format!(
            "version: 1\nmetrics:\n  listen: 127.0.0.1:{port}\nservers:\n{}{}{}",
            fixture_server("plain", &[], ""),
            fixture_server("stubborn", &["--ignore-eof"], "cleanup_timeout: 2s"),
            fixture_server(
                "esc",
                &[
                    "--frozen-grandchild",
                    freezer.path(),
                    "--pid-file",
                    pid_file.to_str().unwrap(),
                ],
                "cleanup_timeout: 1s"
            ),
        ),
    );
    assert_code(&fleet.run(&["up"]), 0);
    let target: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let prometheus = Prometheus::start(&fleet, target, &fleet.state_dir().join("gateway.token"));
    prometheus.wait_for(r#"up{job="mcpfleet"}"#, 1.0);
    prometheus.wait_for(
        r#"mcpfleet_server_state{server="esc",state="running"}"#,
        1.0,
    );

    // A forced restart, a teardown that needs SIGTERM, a teardown that fails.
    assert_code(&fleet.run(&["reconnect", "plain"]), 0);
    assert_code(&fleet.run(&["down", "stubborn"]), 0);
    assert_code(&fleet.run(&["down", "esc"]), 5);
    // `up` of the quarantined server is refused.
    assert_code(&fleet.run(&["up", "esc"]), 6);

    prometheus.wait_for(
        r#"mcpfleet_server_restarts_total{server="plain",cause="reconnect"}"#,
        1.0,
    );
    prometheus.wait_for(r#"mcpfleet_server_generation{server="plain"}"#, 2.0);
    prometheus.wait_for(
        r#"mcpfleet_server_teardowns_total{server="stubborn",outcome="escalated"}"#,
        1.0,
    );
    prometheus.wait_for(
        r#"mcpfleet_server_state{server="stubborn",state="stopped"}"#,
        1.0,
    );
    prometheus.wait_for(
        r#"mcpfleet_server_teardowns_total{server="esc",outcome="failed"}"#,
        1.0,
    );
    prometheus.wait_for(r#"mcpfleet_servers_quarantined"#, 1.0);
    prometheus.wait_for(
        r#"mcpfleet_requests_refused_total{server="esc",reason="quarantined"}"#,
        1.0,
    );
    prometheus.wait_for(r#"sum(mcpfleet_server_starts_total{outcome="ok"})"#, 4.0);
    // The escalated teardown took the 30% of its 2 s given to closing stdin.
    let took = prometheus
        .query(r#"mcpfleet_teardown_duration_seconds_sum{server="stubborn"}"#)
        .expect("a teardown duration");
    assert!((0.5..2.5).contains(&took), "{took}");

    // The quarantined generation's grandchild is thawed and ended; `reset`
    // clears the quarantine once nothing of it is alive.
    freezer.thaw();
    let (_, escaped) = read_pid_file(&pid_file);
    kill_all(&escaped);
    drop(prometheus);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fleet.run(&["reset", "esc"]).status.code() != Some(0) {
        assert!(Instant::now() < deadline, "reset did not clear esc");
        std::thread::sleep(Duration::from_millis(100));
    }
    down_and_no_leftovers(&fleet);
}

#[test]
fn up_opens_and_closes_a_metrics_listen_edited_while_the_supervisor_runs() {
    let servers = fixture_server("a", &[], "");
    let fleet = TestFleet::raw(
        "metrics-follow",
        &format!("version: 1\nservers:\n{servers}"),
    );
    assert_code(&fleet.run(&["up"]), 0);
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // `metrics.listen` added to the file: the next `up` opens the door.
    std::fs::write(
        &fleet.path,
        format!("version: 1\nmetrics:\n  listen: 127.0.0.1:{port}\nservers:\n{servers}"),
    )
    .unwrap();
    assert_code(&fleet.run(&["up"]), 0);
    let bearer = format!("Bearer {}", token(&fleet));
    let (status, _, body) = get(addr, "/metrics", &[("Authorization", &bearer)]);
    assert_eq!(status, 200);
    assert!(body.contains("mcpfleet_supervisor_up 1"), "{body}");
    // Taken out of the file again: the next `up` closes it.
    std::fs::write(&fleet.path, format!("version: 1\nservers:\n{servers}")).unwrap();
    assert_code(&fleet.run(&["up"]), 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
        assert!(Instant::now() < deadline, "the door at {addr} stayed open");
        std::thread::sleep(Duration::from_millis(20));
    }
    down_and_no_leftovers(&fleet);
}
