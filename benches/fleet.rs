//! Start and teardown of N servers, measured beside the physical limit in the same
//! run on the same machine. Run with `cargo bench --bench fleet [-- N...]`
//! (default N = 1 10 50 200). Prints a table; asserts nothing about time.
//!
//! - **limit**: a minimal hand-written client that spawns N fixture servers, does
//!   the initialize handshake on each in parallel, then closes their stdin and waits
//!   for them to exit. Nothing a manager could do is faster.
//! - **check**: `mcpfleet check` (in one process: start, tools/list, verified
//!   teardown of every server).
//! - **up / down**: through the supervisor.

#[path = "common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use common::ms;

fn main() {
    let ns: Vec<usize> = {
        let v: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if v.is_empty() {
            vec![1, 10, 50, 200]
        } else {
            v
        }
    };
    let fixture = common::release_fixture();
    let mcpfleet = PathBuf::from(env!("CARGO_BIN_EXE_mcpfleet"));
    let rt = tokio::runtime::Runtime::new().unwrap();

    println!("start + teardown of N fixture servers (wall time; same machine, same run)");
    println!(
        "{:>5}  {:>12} {:>12}  {:>12} {:>7}  {:>10} {:>10} {:>7}  {:>9}",
        "N", "limit start", "limit stop", "check", "ratio", "up", "down", "ratio", "sup. RSS"
    );
    for n in ns {
        let (start, stop) = rt.block_on(limit(&fixture, n));
        let limit_total = start + stop;
        let dir = tempfile::tempdir().unwrap();
        let fleet = dir.path().join("fleet.yaml");
        let mut body = String::from("version: 1\nservers:\n");
        for i in 0..n {
            body.push_str(&format!("  s{i:04}:\n    command: {}\n", fixture.display()));
        }
        std::fs::write(&fleet, body).unwrap();
        let state = dir.path().join("state");
        let run = |args: &[&str]| {
            let t = Instant::now();
            let out = Command::new(&mcpfleet)
                .arg("-f")
                .arg(&fleet)
                .args(args)
                .env("MCPFLEET_STATE_DIR", &state)
                .env("MCPFLEET_TEST_ID", "bench-fleet")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .output()
                .expect("run mcpfleet");
            assert!(out.status.success(), "mcpfleet {args:?} failed");
            t.elapsed()
        };
        let check = run(&["check", "--quiet"]);
        let up = run(&["up", "--quiet"]);
        let rss = supervisor_rss_kb(&state);
        let down = run(&["down", "--quiet"]);
        println!(
            "{:>5}  {:>10.0}ms {:>10.0}ms  {:>10.0}ms {:>6.2}x  {:>8.0}ms {:>8.0}ms {:>6.2}x  {:>7}kB",
            n,
            ms(start),
            ms(stop),
            ms(check),
            ms(check) / ms(limit_total),
            ms(up),
            ms(down),
            (ms(up) + ms(down)) / ms(limit_total),
            rss
        );
    }
}

/// The physical limit: spawn, handshake, close stdin, wait; all N in parallel.
async fn limit(fixture: &Path, n: usize) -> (Duration, Duration) {
    let t = Instant::now();
    let mut children = Vec::new();
    let mut handshakes = tokio::task::JoinSet::new();
    for _ in 0..n {
        let mut child = tokio::process::Command::new(fixture)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("MCPFLEET_TEST_ID", "bench-fleet")
            .spawn()
            .expect("spawn fixture");
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        handshakes.spawn(async move {
            let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"limit","version":"1"}}}"#;
            stdin.write_all(format!("{init}\n").as_bytes()).await.unwrap();
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).await.unwrap();
            stdin
                .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
                .await
                .unwrap();
            stdin
        });
        children.push(child);
    }
    let mut stdins = Vec::new();
    while let Some(r) = handshakes.join_next().await {
        stdins.push(r.unwrap());
    }
    let start = t.elapsed();
    let t = Instant::now();
    drop(stdins);
    for mut c in children {
        c.wait().await.unwrap();
    }
    (start, t.elapsed())
}

fn supervisor_rss_kb(state: &Path) -> String {
    let pid = std::fs::read_to_string(state.join("supervisor.lock"))
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok());
    let Some(pid) = pid else { return "-".into() };
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| {
                l.trim_start_matches("VmRSS:")
                    .trim()
                    .trim_end_matches(" kB")
                    .to_owned()
            })
        })
        .unwrap_or_else(|| "-".into())
}
