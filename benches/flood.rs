//! A flood of idle and slow connections against both HTTP doors of a supervisor
//! (the gateway's, opened by `serve`, and the metrics' own), beside a baseline
//! measured in the same run: `status` with no flood. Run with `cargo bench --bench
//! flood [-- CONNECTIONS [SECONDS]]` (default 20000 connections for 60 s).
//!
//! The connections are held by holder processes (this binary again, `--hold`),
//! each keeping its share open: three in four at the gateway's door, the rest at
//! the metrics door; one in four sends its headers a byte a second, the others
//! say nothing. A connection the supervisor closes (a `503` at the cap, the header
//! timeout) is opened again, at most 2000 a second per holder, so that the doors
//! stay full for the whole run. Meanwhile `status` runs again and again; the table
//! gives its latency, the supervisor's CPU and descriptors, the size of its logs
//! against their bound, and whether anything of the fleet is alive right after
//! `down` returns. It asserts nothing about time (this machine is shared and
//! noisy); the targets are printed beside the figures.

#[path = "common.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::ms;

/// Each holder keeps at most this many connections (a process's descriptors).
const PER_HOLDER: usize = 7000;
/// Reconnections a holder makes at most per tick of [`TICK`].
const RECONNECTS_PER_TICK: usize = 200;
const TICK: Duration = Duration::from_millis(100);
/// The run's tag: every process it starts carries it.
const TAG: &str = "bench-flood";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--hold") {
        hold(&args[1..]);
        return;
    }
    let numbers: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let connections = numbers.first().copied().unwrap_or(20_000) as usize;
    let seconds = numbers.get(1).copied().unwrap_or(60);
    raise_open_files();

    let fixture = common::release_fixture();
    let mcpfleet = common::mcpfleet_binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = dir.path().join("fleet.yaml");
    let metrics_port = free_port();
    std::fs::write(
        &fleet,
        format!(
            "version: 1\nmetrics:\n  listen: 127.0.0.1:{metrics_port}\nservers:\n  a:\n    command: {}\n",
            fixture.display()
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let run = |args: &[&str]| {
        Command::new(&mcpfleet)
            .arg("-f")
            .arg(&fleet)
            .args(args)
            .env("MCPFLEET_STATE_DIR", &state)
            .env("MCPFLEET_TEST_ID", TAG)
            .stdin(Stdio::null())
            .output()
            .expect("run mcpfleet")
    };
    let out = run(&["serve", "--listen", "127.0.0.1:0", "--output", "json"]);
    assert!(out.status.success(), "serve failed: {out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("serve's JSON");
    let url = doc["gateway"]["url"].as_str().expect("the door's URL");
    let gateway: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("the door's address");
    let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let supervisor = lock_pid(&state).expect("a supervisor");
    let status_times = |rounds: usize| -> Vec<Duration> {
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let out = run(&["status", "--output", "json"]);
                let took = t.elapsed();
                assert!(out.status.success(), "status failed: {out:?}");
                took
            })
            .collect()
    };

    // The baseline: no flood.
    let quiet = status_times(20);

    // The flood.
    let gateway_share = connections * 3 / 4;
    let mut holders: Vec<Child> = Vec::new();
    for (addr, count) in [
        (gateway, gateway_share),
        (metrics, connections - gateway_share),
    ] {
        let mut left = count;
        while left > 0 {
            let n = left.min(PER_HOLDER);
            left -= n;
            holders.push(
                Command::new(std::env::current_exe().unwrap())
                    .args(["--hold", &addr.to_string(), &n.to_string()])
                    .env("MCPFLEET_TEST_ID", TAG)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("a holder"),
            );
        }
    }
    let mut opened = 0usize;
    for holder in &mut holders {
        let mut line = String::new();
        let mut out = holder.stdout.take().unwrap();
        let mut byte = [0u8; 1];
        while out.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
            line.push(byte[0] as char);
        }
        opened += line.trim().parse::<usize>().unwrap_or(0);
    }
    let flood_began = Instant::now();
    let cpu_flood_began = cpu_time(supervisor);
    let mut flooded = Vec::new();
    let mut peak_fds = 0usize;
    let mut busiest_second = 0.0f64;
    let mut last = (Instant::now(), cpu_time(supervisor));
    while flood_began.elapsed() < Duration::from_secs(seconds) {
        flooded.extend(status_times(1));
        peak_fds = peak_fds.max(descriptors(supervisor));
        if last.0.elapsed() >= Duration::from_secs(1) {
            let now = (Instant::now(), cpu_time(supervisor));
            busiest_second =
                busiest_second.max((now.1 - last.1).as_secs_f64() / (now.0 - last.0).as_secs_f64());
            last = now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let flood_took = flood_began.elapsed();
    let cpu_flood = cpu_time(supervisor) - cpu_flood_began;
    for holder in &mut holders {
        drop(holder.stdin.take());
    }
    for holder in &mut holders {
        let _ = holder.wait();
    }

    let logs = log_sizes(&state);
    let down_began = Instant::now();
    let out = run(&["down"]);
    let down_took = down_began.elapsed();
    let left = common::tagged(&format!("MCPFLEET_TEST_ID={TAG}"));
    let left: Vec<i32> = left
        .into_iter()
        .filter(|&pid| pid != std::process::id() as i32)
        .collect();

    let pct = |v: &[Duration], p: f64| -> f64 {
        let mut v: Vec<Duration> = v.to_vec();
        v.sort();
        ms(v[((v.len() as f64 - 1.0) * p).round() as usize])
    };
    let over = flooded
        .iter()
        .filter(|d| **d >= Duration::from_secs(1))
        .count();
    println!(
        "flood: {opened} connections open at once ({} asked), {} holders, {:.0} s; supervisor pid {supervisor}",
        connections,
        holders.len(),
        flood_took.as_secs_f64()
    );
    println!("{:<34} {:>12} {:>12}  target", "", "baseline", "flood");
    println!(
        "{:<34} {:>12.1} {:>12.1}  -",
        "status p50 (ms)",
        pct(&quiet, 0.5),
        pct(&flooded, 0.5)
    );
    println!(
        "{:<34} {:>12.1} {:>12.1}  < 1000: {}",
        "status max (ms)",
        pct(&quiet, 1.0),
        pct(&flooded, 1.0),
        verdict(over == 0)
    );
    println!(
        "{:<34} {:>12} {:>12}  0",
        "status runs of 1 s or more",
        0,
        format!("{over}/{}", flooded.len())
    );
    let flood_cores = cpu_flood.as_secs_f64() / flood_took.as_secs_f64();
    println!(
        "{:<34} {:>12} {:>12.3}  < 1: {}",
        "supervisor CPU, cores (mean)",
        "-",
        flood_cores,
        verdict(flood_cores < 1.0)
    );
    println!(
        "{:<34} {:>12} {:>12.3}  < 1: {}",
        "supervisor CPU, busiest second",
        "-",
        busiest_second,
        verdict(busiest_second < 1.0)
    );
    println!(
        "{:<34} {:>12} {:>12}  -",
        "supervisor descriptors (peak)", "-", peak_fds
    );
    for (name, (total, largest, bound)) in &logs {
        println!(
            "{:<34} {:>12} {:>12}  each <= {bound}: {}",
            format!("{name} (all files, largest)"),
            "-",
            format!("{total}, {largest}"),
            verdict(largest <= bound)
        );
    }
    println!(
        "{:<34} {:>12} {:>12}  exit 0, nothing left: {}",
        "down (exit, ms; left after it)",
        "-",
        format!(
            "{}, {:.0}; {}",
            out.status.code().unwrap_or(-1),
            ms(down_took),
            left.len()
        ),
        verdict(out.status.success() && left.is_empty())
    );
    if !left.is_empty() {
        eprintln!("left after down: {left:?}");
        for pid in left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISS" }
}

/// A holder: keeps COUNT connections open to ADDR until its stdin closes; one in
/// four sends its headers a byte a second. Prints how many it opened at first.
fn hold(args: &[String]) {
    raise_open_files();
    let addr: SocketAddr = args[0].parse().expect("ADDR");
    let count: usize = args[1].parse().expect("COUNT");
    let connect = || -> Option<TcpStream> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let mut streams: Vec<Option<TcpStream>> = (0..count).map(|_| connect()).collect();
    let opened = streams.iter().filter(|s| s.is_some()).count();
    println!("{opened}");
    let _ = std::io::stdout().flush();
    // Closing stdin (the bench is done) ends the holder.
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = done_tx.send(());
    });
    let header = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ");
    let mut tick = 0usize;
    while done.try_recv().is_err() {
        let mut reconnects = 0;
        for (i, slot) in streams.iter_mut().enumerate() {
            let closed = match slot {
                None => true,
                Some(s) => {
                    let mut buf = [0u8; 512];
                    // Anything read (a 503, say) or the end: the door is done with it.
                    match s.read(&mut buf) {
                        // Closed, or answered: either way it is done with.
                        Ok(0) => true,
                        Ok(_answered) => true,
                        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                    }
                }
            };
            if closed {
                if reconnects < RECONNECTS_PER_TICK {
                    reconnects += 1;
                    *slot = connect();
                } else {
                    *slot = None;
                }
                continue;
            }
            // The slow ones: a byte of their headers a second, never the end.
            if i % 4 == 0
                && tick % 10 == i % 10
                && let Some(s) = slot
            {
                let byte = header.as_bytes()[(tick / 10) % header.len()];
                let _ = s.write(&[byte]);
            }
        }
        tick += 1;
        std::thread::sleep(TICK);
    }
}

/// Raises this process's soft open-files limit to the hard one.
fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The pid the state directory's lock file names.
fn lock_pid(state: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(state.join("supervisor.lock")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The CPU time (user and system) of process `pid` so far.
fn cpu_time(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    Duration::from_secs_f64(ticks as f64 / per_second)
}

fn descriptors(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Per log of the state directory: the bytes of all its files, the largest
/// file, and the bound each file keeps (its rotation size, plus a line).
fn log_sizes(state: &Path) -> Vec<(&'static str, (u64, u64, u64))> {
    const MIB: u64 = 1024 * 1024;
    [
        ("supervisor.log", 16 * MIB),
        ("gateway.log", 16 * MIB),
        ("events.ndjson", 16 * MIB),
    ]
    .into_iter()
    .map(|(name, bound)| {
        let sizes: Vec<u64> = std::fs::read_dir(state)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(name))
            .filter_map(|e| e.metadata().ok().map(|m| m.len()))
            .collect();
        let total = sizes.iter().sum();
        let largest = sizes.iter().copied().max().unwrap_or(0);
        (name, (total, largest, bound + 64 * 1024))
    })
    .collect()
}
