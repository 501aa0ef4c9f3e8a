//! `status` of a large fleet through the supervisor, beside a baseline measured in
//! the same run: the cost of starting the CLI at all (`mcpfleet --version`). Run
//! with `cargo bench --bench status [-- N]` (default N = 200). Prints a table; it
//! asserts nothing about time (this machine is shared and noisy), only that
//! `status` spawns nothing.

#[expect(
    dead_code,
    reason = "`status` spawns nothing, so it looks for no processes by tag"
)]
#[path = "common.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::ms;

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let fixture = common::release_fixture();
    let mcpfleet = common::mcpfleet_binary();

    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = dir.path().join("fleet.yaml");
    let mut body = String::from("version: 1\nservers:\n");
    for i in 0..n {
        body.push_str(&format!("  s{i:04}:\n    command: {}\n", fixture.display()));
    }
    std::fs::write(&fleet, body).unwrap();
    let state = dir.path().join("state");
    let run = |args: &[&str]| {
        let out = Command::new(&mcpfleet)
            .arg("-f")
            .arg(&fleet)
            .args(args)
            .env("MCPFLEET_STATE_DIR", &state)
            .env("MCPFLEET_TEST_ID", "bench-status")
            .stdin(Stdio::null())
            .output()
            .expect("run mcpfleet");
        (out.status.code(), out.stdout)
    };
    let timed = |args: &[&str], rounds: usize| -> Vec<Duration> {
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let (code, _) = run(args);
                let took = t.elapsed();
                assert!(code == Some(0), "mcpfleet {args:?} exited {code:?}");
                took
            })
            .collect()
    };

    let offline = timed(&["status", "--output", "json"], 10);
    let t = Instant::now();
    let (code, _) = run(&["up", "--output", "json"]);
    let up = t.elapsed();
    assert_eq!(code, Some(0), "up failed");
    let generations = |json: &[u8]| -> u64 {
        let v: serde_json::Value = serde_json::from_slice(json).unwrap();
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["generation"].as_u64().unwrap_or(0))
            .sum()
    };
    let before = generations(&run(&["status", "--output", "json"]).1);
    let baseline = timed(&["--version"], 20);
    let online = timed(&["status", "--output", "json"], 20);
    let after = generations(&run(&["status", "--output", "json"]).1);
    let t = Instant::now();
    let (code, _) = run(&["down", "--output", "json"]);
    let down = t.elapsed();
    assert_eq!(code, Some(0), "down failed");
    assert_eq!(before, after, "status started something");

    println!("status of {n} servers (median / p95 of the runs; same machine, same run)");
    println!(
        "{:<44} {:>10} {:>10} {:>8}",
        "what", "median", "p95", "ratio"
    );
    let base = median(&baseline);
    for (what, samples) in [
        ("baseline: `mcpfleet --version` (CLI start)", &baseline),
        ("status through the supervisor", &online),
        ("status with no supervisor (state.json)", &offline),
    ] {
        println!(
            "{:<44} {:>8.1}ms {:>8.1}ms {:>7.2}x",
            what,
            ms(median(samples)),
            ms(p95(samples)),
            ms(median(samples)) / ms(base)
        );
    }
    println!(
        "(for scale: up of {n} servers took {:.0}ms, down {:.0}ms)",
        ms(up),
        ms(down)
    );
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn p95(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[(v.len() * 95 / 100).min(v.len() - 1)]
}
