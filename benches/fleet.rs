//! Start, tools/list and teardown of N servers by every manager, side by side in
//! one run on the same machine, beside the physical limit. Prints tables; asserts
//! nothing about time (this machine is shared and noisy: compare ratios, not ms).
//!
//! ```text
//! cargo bench --bench fleet                        # fixture N=1,10,50,200; Python N=1,10,50
//! cargo bench --bench fleet -- --fixture 1000 --python none --no-peer
//! ```
//!
//! Managers:
//! - **limit**: a minimal hand-written client that spawns N servers, does the
//!   initialize handshake on each in parallel, lists their tools in parallel, then
//!   closes their stdin and waits for them to exit. Nothing a manager could do is
//!   faster.
//! - **mcpfleet up/tools/down**: through the supervisor, one CLI call per phase.
//! - **mcpfleet check**: one process that starts, lists, and tears down (one
//!   figure: the whole run).
//! - **openai-agents**: `MCPServerManager` in parallel mode, with its default
//!   timeouts and with every timeout raised to 120 s (`benches/peer/`).
//!
//! Servers: the fixture server (Rust, starts in a millisecond: the manager's own
//! cost shows) and `mcp-server-time` (Python: CPU contention at start shows).
//!
//! Every process a manager starts carries `MCPFLEET_TEST_ID=<tag>`; "left" counts
//! those still alive when the manager said it was done, and "teardown" lasts until
//! none is left. Whatever is left is then killed, so the benchmark leaves nothing.

#[path = "common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use common::{ms, tagged};

struct Server {
    label: &'static str,
    program: PathBuf,
}

/// One manager's run on N servers. Times are wall milliseconds.
struct Row {
    manager: String,
    ready: usize,
    init: Option<f64>,
    tools: Option<f64>,
    teardown: Option<f64>,
    total: f64,
    rss_kb: Option<u64>,
    left: usize,
    note: String,
}

struct Args {
    fixture: Vec<usize>,
    python: Vec<usize>,
    peer: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        fixture: vec![1, 10, 50, 200],
        python: vec![1, 10, 50],
        peer: true,
    };
    let list = |v: Option<String>| -> Vec<usize> {
        v.unwrap_or_default()
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect()
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--fixture" => args.fixture = list(it.next()),
            "--python" => args.python = list(it.next()),
            "--no-peer" => args.peer = false,
            // `cargo bench` passes --bench to every target.
            _ => {}
        }
    }
    args
}

fn main() {
    let args = parse_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = mcpfleet::process::limits::raise_open_files();
    let fixture = Server {
        label: "fixture server (Rust)",
        program: common::release_fixture(),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let peer = if args.peer { peer_python(root) } else { None };
    println!(
        "open-files limit {} (hard {}); {} cores",
        files.soft,
        files.hard,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for &n in &args.fixture {
        run_all(&rt, &fixture, n, peer.as_deref(), files.shortfall(n));
    }
    if !args.python.is_empty() {
        let python = Server {
            label: "mcp-server-time (Python)",
            program: python_server(root),
        };
        for &n in &args.python {
            run_all(&rt, &python, n, peer.as_deref(), files.shortfall(n));
        }
    }
}

fn run_all(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    n: usize,
    peer: Option<&Path>,
    shortfall: Option<String>,
) {
    println!();
    println!("{}, N = {n}", server.label);
    if let Some(warning) = shortfall {
        println!("  warning: {warning}");
    }
    let mut rows = vec![rt.block_on(limit(&server.program, n))];
    rows.push(mcpfleet_up_tools_down(&server.program, n));
    rows.push(mcpfleet_check(&server.program, n));
    if let Some(python) = peer {
        for mode in ["default", "raised"] {
            rows.push(agents_manager(python, &server.program, n, mode));
        }
    }
    print_table(n, &rows);
}

fn print_table(n: usize, rows: &[Row]) {
    let base = rows[0].total;
    println!(
        "  {:<26} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>5}",
        "manager", "ready", "init", "tools", "teardown", "total", "ratio", "peak RSS", "left"
    );
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}ms"));
    for r in rows {
        println!(
            "  {:<26} {:>7} {:>9} {:>9} {:>9} {:>7.0}ms {:>6.2}x {:>9} {:>5}  {}",
            r.manager,
            format!("{}/{n}", r.ready),
            opt(r.init),
            opt(r.tools),
            opt(r.teardown),
            r.total,
            r.total / base,
            r.rss_kb.map_or_else(
                || "-".to_string(),
                |k| format!("{:.1}MB", k as f64 / 1024.0)
            ),
            r.left,
            r.note
        );
    }
}

/// The physical limit: spawn, handshake, tools/list, close stdin, wait; all N in
/// parallel.
async fn limit(program: &Path, n: usize) -> Row {
    let tag = format!("bench-limit-{}", std::process::id());
    let t = Instant::now();
    let mut children = Vec::new();
    let mut sessions = tokio::task::JoinSet::new();
    for _ in 0..n {
        let mut child = tokio::process::Command::new(program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("MCPFLEET_TEST_ID", &tag)
            .spawn()
            .expect("spawn server");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        sessions.spawn(async move {
            let mut s = (stdin, stdout);
            let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"limit","version":"1"}}}"#;
            let ok = exchange(&mut s, init).await;
            if ok {
                let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
                let _ = s.0.write_all(note.as_bytes()).await;
            }
            (ok, s)
        });
        children.push(child);
    }
    let mut ready = Vec::new();
    while let Some(r) = sessions.join_next().await {
        let (ok, s) = r.unwrap();
        if ok {
            ready.push(s);
        }
    }
    let init = t.elapsed();
    let t = Instant::now();
    let mut lists = tokio::task::JoinSet::new();
    for mut s in ready {
        lists.spawn(async move {
            let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
            exchange(&mut s, list).await;
            s
        });
    }
    let mut sessions = Vec::new();
    while let Some(r) = lists.join_next().await {
        sessions.push(r.unwrap());
    }
    let tools = t.elapsed();
    let ready = sessions.len();
    let t = Instant::now();
    drop(sessions);
    for mut c in children {
        c.wait().await.unwrap();
    }
    let (teardown, left) = until_gone(&tag, t);
    Row {
        manager: "limit (minimal client)".into(),
        ready,
        init: Some(ms(init)),
        tools: Some(ms(tools)),
        teardown: Some(ms(teardown)),
        total: ms(init + tools + teardown),
        rss_kb: None,
        left,
        note: String::new(),
    }
}

/// Writes one request line and reads lines until the answer with an `id` comes.
async fn exchange(
    s: &mut (
        tokio::process::ChildStdin,
        BufReader<tokio::process::ChildStdout>,
    ),
    request: &str,
) -> bool {
    if s.0
        .write_all(format!("{request}\n").as_bytes())
        .await
        .is_err()
    {
        return false;
    }
    let mut line = String::new();
    loop {
        line.clear();
        match s.1.read_line(&mut line).await {
            Ok(0) | Err(_) => return false,
            Ok(_) if line.contains("\"id\"") => return line.contains("\"result\""),
            Ok(_) => {}
        }
    }
}

fn fleet_file(dir: &Path, program: &Path, n: usize) -> PathBuf {
    let fleet = dir.join("fleet.yaml");
    let mut body = String::from("version: 1\nservers:\n");
    for i in 0..n {
        body.push_str(&format!("  s{i:04}:\n    command: {}\n", program.display()));
    }
    std::fs::write(&fleet, body).unwrap();
    fleet
}

fn mcpfleet(fleet: &Path, state: &Path, tag: &str, args: &[&str]) -> Command {
    let mut c = Command::new(common::mcpfleet_binary());
    c.arg("-f")
        .arg(fleet)
        .args(args)
        .env("MCPFLEET_STATE_DIR", state)
        .env("MCPFLEET_TEST_ID", tag)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Runs a command; returns its wall time and stdout parsed as JSON.
fn timed_json(mut c: Command) -> (Duration, serde_json::Value) {
    let t = Instant::now();
    let out = c.output().expect("run mcpfleet");
    let took = t.elapsed();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (took, doc)
}

fn servers_ok(doc: &serde_json::Value) -> usize {
    doc["servers"].as_array().map_or(0, |s| {
        s.iter()
            .filter(|s| s["exit_code"].as_i64() == Some(0))
            .count()
    })
}

fn mcpfleet_up_tools_down(program: &Path, n: usize) -> Row {
    let tag = format!("bench-up-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_file(dir.path(), program, n);
    let state = dir.path().join("state");
    let (up, doc) = timed_json(mcpfleet(&fleet, &state, &tag, &["up", "--output", "json"]));
    let ready = servers_ok(&doc);
    let (tools, doc) = timed_json(mcpfleet(
        &fleet,
        &state,
        &tag,
        &["tools", "--output", "json"],
    ));
    let listed = doc["servers"].as_array().map_or(0, Vec::len);
    let supervisor = supervisor_pid(&state);
    // The supervisor's guardian (its parent) outlives `down` with it.
    let guardian = supervisor.and_then(parent_of);
    let t = Instant::now();
    let (_, doc) = timed_json(mcpfleet(
        &fleet,
        &state,
        &tag,
        &["down", "--output", "json"],
    ));
    let manager: Vec<i32> = supervisor.into_iter().chain(guardian).collect();
    let (teardown, left) = until_gone_but(&tag, t, &manager);
    let stopped = servers_ok(&doc);
    // The manager's memory is the supervisor's and its guardian's.
    let rss = supervisor
        .and_then(|pid| status_kb(pid, "VmHWM:"))
        .map(|kb| kb + guardian.and_then(|g| status_kb(g, "VmHWM:")).unwrap_or(0));
    // Let the supervisor go now rather than after its idle linger.
    if let Some(pid) = supervisor {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    until_gone(&tag, Instant::now());
    Row {
        manager: "mcpfleet up/tools/down".into(),
        ready,
        init: Some(ms(up)),
        tools: Some(ms(tools)),
        teardown: Some(ms(teardown)),
        total: ms(up + tools + teardown),
        rss_kb: rss,
        left,
        note: format!("listed {listed}, stopped {stopped} (supervisor + guardian RSS)"),
    }
}

fn mcpfleet_check(program: &Path, n: usize) -> Row {
    let tag = format!("bench-check-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_file(dir.path(), program, n);
    let state = dir.path().join("state");
    let t = Instant::now();
    let child = mcpfleet(&fleet, &state, &tag, &["check", "--output", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run mcpfleet check");
    let pid = child.id() as i32;
    let sampler = std::thread::spawn(move || {
        let mut peak = None;
        while let Some(kb) = status_kb(pid, "VmHWM:") {
            peak = Some(kb);
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    let out = child.wait_with_output().expect("wait for check");
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let (_, left) = until_gone(&tag, t);
    Row {
        manager: "mcpfleet check".into(),
        ready: servers_ok(&doc),
        init: None,
        tools: None,
        teardown: None,
        total: ms(t.elapsed()),
        rss_kb: sampler.join().unwrap(),
        left,
        note: "one process, all phases".into(),
    }
}

fn agents_manager(python: &Path, program: &Path, n: usize, mode: &str) -> Row {
    let tag = format!("bench-peer-{}", std::process::id());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peer/agents_manager.py");
    let t = Instant::now();
    let out = Command::new(python)
        .arg(&script)
        .args([
            "--n",
            &n.to_string(),
            "--timeouts",
            mode,
            "--tag",
            &tag,
            "--",
        ])
        .arg(program)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run the peer");
    let wall = t.elapsed();
    let (_, killed_after) = until_gone(&tag, Instant::now());
    let doc: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(serde_json::Value::Null);
    let f = |k: &str| doc[k].as_f64();
    let init = f("init_ms");
    let tools = f("tools_ms");
    let teardown = f("teardown_ms");
    let left = doc["left_after_cleanup"].as_u64().unwrap_or(0) as usize;
    let mut note = String::new();
    if let Some(e) = doc["first_error"].as_str().filter(|e| !e.is_empty()) {
        let e: String = e.chars().take(60).collect();
        note = format!("first error: {e}");
    }
    if doc.is_null() {
        note = format!("no result (exit {:?})", out.status.code());
    }
    if killed_after > 0 {
        note.push_str(&format!(" ({killed_after} killed by the benchmark)"));
    }
    Row {
        manager: format!("openai-agents ({mode})"),
        ready: doc["ready"].as_u64().unwrap_or(0) as usize,
        init,
        tools,
        teardown,
        total: match (init, tools, teardown) {
            (Some(a), Some(b), Some(c)) => a + b + c,
            _ => ms(wall),
        },
        rss_kb: doc["peak_rss_kb"].as_u64(),
        left,
        note,
    }
}

/// Waits (at most 20 s) until no process carries `MCPFLEET_TEST_ID=<tag>`.
/// Returns the time since `since` and how many were alive at the first look;
/// whatever is still alive after the bound is killed.
fn until_gone(tag: &str, since: Instant) -> (Duration, usize) {
    until_gone_but(tag, since, &[])
}

/// `until_gone`, not counting the processes `except` (the supervisor and its
/// guardian, which carry the tag of the run that started them and outlive `down`
/// for a moment).
fn until_gone_but(tag: &str, since: Instant, except: &[i32]) -> (Duration, usize) {
    let entry = format!("MCPFLEET_TEST_ID={tag}");
    let alive = || {
        let mut pids = tagged(&entry);
        pids.retain(|p| !except.contains(p));
        pids
    };
    let first = alive().len();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive = alive();
        if alive.is_empty() {
            return (since.elapsed(), first);
        }
        if Instant::now() >= deadline {
            for pid in alive {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return (since.elapsed(), first);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The parent of a living process.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn supervisor_pid(state: &Path) -> Option<i32> {
    std::fs::read_to_string(state.join("supervisor.lock"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn status_kb(pid: i32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .trim_start_matches(field)
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .ok()
}

/// The Python server, installed by `.ci/install-servers` if it is missing.
fn python_server(root: &Path) -> PathBuf {
    let program = root.join(".cache/venv/bin/mcp-server-time");
    if !program.exists() {
        let status = Command::new("bash")
            .arg(root.join(".ci/install-servers"))
            .status()
            .expect("run .ci/install-servers");
        assert!(status.success(), ".ci/install-servers failed");
    }
    program
}

/// The peer's Python, installed by `benches/peer/install` if it is missing.
fn peer_python(root: &Path) -> Option<PathBuf> {
    let python = root.join(".cache/peer-venv/bin/python");
    if !python.exists() {
        let ok = Command::new("bash")
            .arg(root.join("benches/peer/install"))
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("the peer could not be installed (benches/peer/install failed): left out");
            return None;
        }
    }
    Some(python)
}
