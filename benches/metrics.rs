//! What serving the metrics costs a supervisor: two supervisors of the same
//! fleet of N fixture servers run side by side in one run, one with no metrics
//! door and nobody scraping it (the baseline), the other with `metrics.listen`
//! and a scraper reading `/metrics` every SCRAPE_MS (default 100 ms, ten times
//! Prometheus' usual rate). Both get the same work: a `reconnect` of one server
//! every 500 ms (events to count), and `status` requests on the control socket,
//! alternating between the two so that the machine's noise falls on both alike.
//! Prints `status` latency (p50, p99) and each supervisor's RSS (after the
//! warm-up, at the end, and the median of a reading a second over the run's
//! second half, which the target is read from), with the ratio and the target
//! (within 5%), and how far the p99's ratio moves over ten consecutive parts of
//! the run. The default run is 300 s: in 30 s runs on a
//! shared 2-core machine the p99's ratio moved by 20% between runs of the same
//! code. Counting itself is always on, in both: it is a
//! few additions under a lock per event and per call.
//!
//! `cargo bench --bench metrics [-- N [SECONDS [SCRAPE_MS]]]` (defaults 20 servers,
//! 300 s of measurement, a scrape every 100 ms).

#[path = "common.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::ms;

const TAG: &str = "bench-metrics";

struct Side {
    fleet: PathBuf,
    state: PathBuf,
}

impl Side {
    fn new(dir: &Path, name: &str, n: usize, fixture: &Path, listen: Option<SocketAddr>) -> Side {
        let root = dir.join(name);
        std::fs::create_dir_all(&root).unwrap();
        let fleet = root.join("fleet.yaml");
        let mut body = String::from("version: 1\n");
        if let Some(addr) = listen {
            body.push_str(&format!("metrics:\n  listen: {addr}\n"));
        }
        body.push_str("servers:\n");
        for i in 0..n {
            body.push_str(&format!("  s{i:04}:\n    command: {}\n", fixture.display()));
        }
        std::fs::write(&fleet, body).unwrap();
        Side {
            fleet,
            state: root.join("state"),
        }
    }

    fn run(&self, args: &[&str]) {
        let out = Command::new(common::mcpfleet_binary())
            .arg("-f")
            .arg(&self.fleet)
            .args(args)
            .env("MCPFLEET_STATE_DIR", &self.state)
            .env("MCPFLEET_TEST_ID", TAG)
            .stdin(Stdio::null())
            .output()
            .expect("run mcpfleet");
        assert!(
            out.status.success(),
            "mcpfleet {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn supervisor(&self) -> i32 {
        let text = std::fs::read_to_string(self.state.join("supervisor.lock")).unwrap();
        text.lines().next().unwrap().trim().parse().unwrap()
    }

    /// One request on the control socket, to its reply line.
    fn request(&self, op: &str) -> Duration {
        let t = Instant::now();
        let mut stream = UnixStream::connect(self.state.join("control.sock")).expect("socket");
        stream
            .write_all(format!("{{\"v\":1,{op}}}\n").as_bytes())
            .unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader.read_line(&mut line).unwrap();
            assert!(n > 0, "the supervisor closed the connection");
            if line.contains("\"type\":\"reply\"") {
                return t.elapsed();
            }
            assert!(!line.contains("\"type\":\"error\""), "{line}");
        }
    }
}

/// VmRSS and RssAnon (the process's own pages: heap and stacks, not the
/// binary's code pages it has touched) of `pid`, in KiB.
fn rss_kib(pid: i32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("RssAnon:"))
}

fn scrape(addr: SocketAddr, token: &str) -> usize {
    let mut s = TcpStream::connect(addr).expect("metrics door");
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    let status = String::from_utf8_lossy(&body[..body.len().min(12)]).into_owned();
    assert!(status.ends_with(" 200"), "scrape refused: {status}");
    body.len()
}

fn percentile(v: &[Duration], p: usize) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

/// The parts a run is cut into for the p99's median ratio.
const BLOCKS: usize = 10;

/// The (VmRSS, RssAnon) of the baseline and of the metered supervisor, in KiB.
type Pair = ((u64, u64), (u64, u64));

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(20) as usize;
    let seconds = Duration::from_secs(args.get(1).copied().unwrap_or(300));
    let scrape_every = Duration::from_millis(args.get(2).copied().unwrap_or(100));
    let fixture = common::release_fixture();
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let plain = Side::new(dir.path(), "plain", n, &fixture, None);
    let metered = Side::new(dir.path(), "metered", n, &fixture, Some(port));
    plain.run(&["up", "-q"]);
    metered.run(&["up", "-q"]);
    let (plain_pid, metered_pid) = (plain.supervisor(), metered.supervisor());
    let token = std::fs::read_to_string(metered.state.join("gateway.token")).unwrap();
    let token = token.trim().to_owned();

    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scraped_bytes = Arc::new(AtomicU64::new(0));
    let scraper = {
        let (stop, scrapes, bytes, token) = (
            stop.clone(),
            scrapes.clone(),
            scraped_bytes.clone(),
            token.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let size = scrape(port, &token);
                scrapes.fetch_add(1, Ordering::Relaxed);
                bytes.store(size as u64, Ordering::Relaxed);
                std::thread::sleep(scrape_every);
            }
        })
    };
    let churn = {
        let stop = stop.clone();
        let sides = [
            (plain.fleet.clone(), plain.state.clone()),
            (metered.fleet.clone(), metered.state.clone()),
        ];
        std::thread::spawn(move || {
            let mut reconnects = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (fleet, state) in &sides {
                    Side {
                        fleet: fleet.clone(),
                        state: state.clone(),
                    }
                    .request(r#""op":"reconnect","servers":["s0000"]"#);
                }
                reconnects += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
            reconnects
        })
    };

    // Warm-up, then the RSS both start the measured part with.
    for _ in 0..100 {
        plain.request(r#""op":"status""#);
        metered.request(r#""op":"status""#);
    }
    let rss_before = (rss_kib(plain_pid), rss_kib(metered_pid));
    let mut times = (Vec::new(), Vec::new());
    let started = Instant::now();
    let mut i = 0usize;
    // Both supervisors' RSS, once a second: one reading at the end falls on
    // whatever the supervisor holds at that instant (a scrape's copies, say).
    let mut rss_samples: Vec<Pair> = Vec::new();
    let mut next_sample = Instant::now();
    while started.elapsed() < seconds {
        i += 1;
        if Instant::now() >= next_sample {
            next_sample += Duration::from_secs(1);
            rss_samples.push((rss_kib(plain_pid), rss_kib(metered_pid)));
        }
        std::thread::sleep(Duration::from_millis(2));
        // Alternate which goes first, so neither always follows the other.
        if i.is_multiple_of(2) {
            times.0.push(plain.request(r#""op":"status""#));
            times.1.push(metered.request(r#""op":"status""#));
        } else {
            times.1.push(metered.request(r#""op":"status""#));
            times.0.push(plain.request(r#""op":"status""#));
        }
    }
    let measured = started.elapsed();
    let rss_after = (rss_kib(plain_pid), rss_kib(metered_pid));
    stop.store(true, Ordering::Relaxed);
    scraper.join().unwrap();
    let reconnects = churn.join().unwrap();
    plain.run(&["down", "-q"]);
    metered.run(&["down", "-q"]);

    println!(
        "metrics: {n} servers, {} `status` requests per supervisor over {:.1}s, alternating; \
         {} scrapes of the metered one ({} bytes each), {reconnects} reconnects of each",
        times.0.len(),
        measured.as_secs_f64(),
        scrapes.load(Ordering::Relaxed),
        scraped_bytes.load(Ordering::Relaxed)
    );
    println!(
        "{:<46} {:>12} {:>12} {:>8}",
        "", "baseline", "metered", "ratio"
    );
    let row = |what: &str, a: f64, b: f64, unit: &str, target: Option<f64>| {
        let ratio = b / a;
        let verdict = match target {
            Some(t) if ratio <= t => format!("  PASS (<= {t:.2})"),
            Some(t) => format!("  MISS (<= {t:.2})"),
            None => String::new(),
        };
        println!(
            "{:<46} {:>10.3}{unit} {:>10.3}{unit} {:>7.3}x{verdict}",
            what, a, b, ratio
        );
    };
    row(
        "status p50 (control socket round trip)",
        ms(percentile(&times.0, 50)),
        ms(percentile(&times.1, 50)),
        "ms",
        Some(1.05),
    );
    row(
        "status p99",
        ms(percentile(&times.0, 99)),
        ms(percentile(&times.1, 99)),
        "ms",
        Some(1.05),
    );
    // How far the p99 moves within the run: the run in BLOCKS consecutive parts,
    // the p99 of each side in each part, their ratios (information: a part has a
    // tenth of the run's tail, so its p99 is the noisier one).
    let len = times.0.len().min(times.1.len());
    let block = (len / BLOCKS).max(1);
    let mut ratios: Vec<(f64, f64, f64)> = (0..len / block)
        .map(|k| {
            let (a, b) = (
                &times.0[k * block..(k + 1) * block],
                &times.1[k * block..(k + 1) * block],
            );
            let (a, b) = (ms(percentile(a, 99)), ms(percentile(b, 99)));
            (b / a, a, b)
        })
        .collect();
    ratios.sort_by(|x, y| x.0.total_cmp(&y.0));
    if let Some(&(_, a, b)) = ratios.get(ratios.len() / 2) {
        row(
            &format!("status p99, median of {} parts", ratios.len()),
            a,
            b,
            "ms",
            None,
        );
        let shown: Vec<String> = ratios.iter().map(|r| format!("{:.2}", r.0)).collect();
        println!("{:<46} {}", "  the parts' ratios, sorted", shown.join(" "));
    }
    let mb = |kib: u64| kib as f64 / 1024.0;
    row(
        "supervisor VmRSS after warm-up",
        mb(rss_before.0.0),
        mb(rss_before.1.0),
        "MB",
        None,
    );
    row(
        "supervisor VmRSS at the end",
        mb(rss_after.0.0),
        mb(rss_after.1.0),
        "MB",
        None,
    );
    row(
        "  of which its own pages (RssAnon), at the end",
        mb(rss_after.0.1),
        mb(rss_after.1.1),
        "MB",
        None,
    );
    // The target is read from the second half of the run, once a second: by
    // then both have run every path of the work many times.
    let steady = &rss_samples[rss_samples.len() / 2..];
    let median = |pick: &dyn Fn(&Pair) -> u64| -> f64 {
        let mut v: Vec<u64> = steady.iter().map(pick).collect();
        v.sort_unstable();
        v.get(v.len() / 2).map_or(0.0, |k| mb(*k))
    };
    row(
        &format!("supervisor VmRSS, median of {} samples (*)", steady.len()),
        median(&|s| s.0.0),
        median(&|s| s.1.0),
        "MB",
        Some(1.05),
    );
    row(
        "  of which its own pages (RssAnon), the same",
        median(&|s| s.0.1),
        median(&|s| s.1.1),
        "MB",
        Some(1.05),
    );
    println!(
        "  (*) read once a second over the second half of the run; VmRSS counts the \
         binary's code pages that each has run, RssAnon only its own memory"
    );
    let left = common::tagged(&format!("MCPFLEET_TEST_ID={TAG}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = left;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = common::tagged(&format!("MCPFLEET_TEST_ID={TAG}"));
    }
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
