//! Soak: a supervisor restarting a crash-looping server several times a second
//! for minutes, at a small `max_file_size`, with `RUST_LOG=mcpfleet=debug` so that
//! `supervisor.log` grows too. Sampled every few seconds: the sizes of
//! `events.ndjson*` and `supervisor.log*` (each file within the size, no more files
//! than kept), the supervisor's resident memory (`VmRSS`) and its open
//! descriptors (`/proc/PID/fd`), which must stay flat after a warm-up. The
//! figures are printed (`cargo test --test it soak:: -- --nocapture`).
//!
//! `MCPFLEET_SOAK_SECS` sets the duration (default 120).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

const MAX: u64 = 16 * 1024;
const KEEP: usize = 2;

struct Sample {
    at: Duration,
    rss_kib: u64,
    fds: usize,
    /// Bytes of `events.ndjson*` and the number of its files.
    events: (u64, usize),
    /// Bytes of `supervisor.log*` and the number of its files.
    log: (u64, usize),
    generation: u64,
}

/// The files `NAME` and `NAME.n` in `dir`: the size of each.
fn sizes(dir: &Path, name: &str) -> Vec<(String, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let file = e.file_name().to_str()?.to_owned();
            let rotated = file
                .strip_prefix(&format!("{name}."))
                .is_some_and(|n| n.parse::<u32>().is_ok());
            (file == name || rotated).then(|| (file, e.metadata().map_or(0, |m| m.len())))
        })
        .collect()
}

fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The generation of the last event in `events.ndjson`.
fn last_generation(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("events.ndjson")).unwrap_or_default();
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|e| e["generation"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_crash_loop_for_minutes_keeps_files_bounded_and_the_supervisor_flat() {
    let secs: u64 = std::env::var("MCPFLEET_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let fleet = TestFleet::raw(
        "soak",
        &format!(
            "version: 1\nsupervisor: {{max_file_size: 16KiB, keep_files: {KEEP}}}\nservers:\n{}",
            fixture_server(
                "crashy",
                &["--crash-after-ms", "100"],
                "restart: { policy: always, backoff: { initial: 50ms, max: 50ms }, max_restarts: 4294967295, window: 1s }"
            )
        ),
    );
    let state = fleet.state_dir();
    let mut up = fleet.command(&["up"]);
    up.env("RUST_LOG", "mcpfleet=debug");
    assert_code(&run_bounded(up, Duration::from_secs(60)), 0);
    let pid = fleet.lock_pid().expect("the supervisor's pid");

    let every = Duration::from_secs(5);
    let total = Duration::from_secs(secs);
    let start = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    println!("   time   rss KiB  fds  events.ndjson* (files)  supervisor.log* (files)  generation");
    loop {
        assert!(is_alive(pid), "the supervisor died");
        let events = sizes(&state, "events.ndjson");
        let log = sizes(&state, "supervisor.log");
        for (name, size) in events.iter().chain(&log) {
            // supervisor.log is checked before each tracing line; what reaches
            // fd 2 otherwise (none is expected here) could add to it.
            assert!(*size <= MAX, "{name} is {size} bytes, over {MAX}");
        }
        assert!(events.len() <= KEEP + 1, "{events:?}");
        assert!(log.len() <= KEEP + 1, "{log:?}");
        let sample = Sample {
            at: start.elapsed(),
            rss_kib: rss_kib(pid),
            fds: fds(pid),
            events: (events.iter().map(|(_, s)| s).sum(), events.len()),
            log: (log.iter().map(|(_, s)| s).sum(), log.len()),
            generation: last_generation(&state),
        };
        println!(
            "{:>6.0}s  {:>8}  {:>3}  {:>14} ({})  {:>15} ({})  {:>10}",
            sample.at.as_secs_f64(),
            sample.rss_kib,
            sample.fds,
            sample.events.0,
            sample.events.1,
            sample.log.0,
            sample.log.1,
            sample.generation
        );
        samples.push(sample);
        if start.elapsed() >= total {
            break;
        }
        std::thread::sleep(every.min(total.saturating_sub(start.elapsed())));
    }
    let status = {
        let (_, doc) = fleet.run_json(&["status", "crashy"]);
        doc["servers"][0].clone()
    };
    assert_code(&fleet.run(&["down"]), 0);

    // The crash loop ran all along: several restarts a second.
    let last = samples.last().unwrap();
    assert!(
        last.generation >= secs * 3,
        "only {} generations in {secs} s; {status}",
        last.generation
    );
    // Rotated many times: the oldest event left is of a late generation.
    let events = fleet.run(&["events"]);
    let first: Value =
        serde_json::from_str(stdout(&events).lines().next().expect("events")).unwrap();
    assert!(
        first["generation"].as_u64().unwrap() > last.generation / 2,
        "{first}"
    );
    assert_eq!(last.events.1, KEEP + 1, "events.ndjson was rotated");
    assert_eq!(last.log.1, KEEP + 1, "supervisor.log was rotated");

    // Flat after the warm-up (the first fifth, at least 20 s): the last samples
    // against the first ones after it. The descriptors of one generation come
    // and go (its pipes), so the largest count of each stretch is compared; the
    // memory of a busy allocator moves by some pages.
    let warm = Duration::from_secs((secs / 5).max(20)).min(total / 2);
    let after: Vec<&Sample> = samples.iter().filter(|s| s.at >= warm).collect();
    assert!(after.len() >= 4, "too few samples after the warm-up");
    let quarter = (after.len() / 4).max(1);
    let (early, late) = (&after[..quarter], &after[after.len() - quarter..]);
    let max = |s: &[&Sample], f: fn(&Sample) -> u64| s.iter().map(|s| f(s)).max().unwrap();
    let (rss_early, rss_late) = (max(early, |s| s.rss_kib), max(late, |s| s.rss_kib));
    let (fds_early, fds_late) = (max(early, |s| s.fds as u64), max(late, |s| s.fds as u64));
    println!(
        "after {secs} s, {} generations: RSS {rss_early} KiB early, {rss_late} KiB late; descriptors {fds_early} early, {fds_late} late",
        last.generation
    );
    assert!(
        rss_late <= rss_early + rss_early / 10 + 1024,
        "RSS grew from {rss_early} KiB to {rss_late} KiB"
    );
    assert!(
        fds_late <= fds_early + 2,
        "descriptors grew from {fds_early} to {fds_late}"
    );
    fleet.assert_no_leftovers();
}
