//! The supervisor's own files rotated while it runs (`supervisor:` in the fleet
//! file), through the real binary: `events` and `events -f` read across the
//! rotations, every line once and in order; `supervisor.log` is rotated while
//! the supervisor writes to it, and when a supervisor starts with it past its
//! size, and keeps its size when the supervisor has no descriptor left. The soak
//! test (`tests/it/soak.rs`) runs the same for minutes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// `max_file_size` of these tests: a few events per file.
const MAX: u64 = 2048;
/// `keep_files`: enough that nothing written here is dropped.
const KEEP: u32 = 20;

/// `NAME.keep` … `NAME.1`, `NAME`: the files of `name` in the state directory,
/// oldest first, as they are now.
fn chain(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let file = p.file_name()?.to_str()?.to_owned();
            if file == name {
                return Some((0, p));
            }
            let n = file.strip_prefix(&format!("{name}."))?.parse().ok()?;
            Some((n, p))
        })
        .collect();
    files.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    files.into_iter().map(|(_, p)| p).collect()
}

/// The lines of every file of `name`, oldest first.
fn all_lines(dir: &Path, name: &str) -> Vec<String> {
    chain(dir, name)
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `mcpfleet events -f`, its lines gathered by a thread as they come.
struct Follower {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Follower {
    fn start(fleet: &TestFleet) -> Follower {
        let mut child = fleet.spawn(&["events", "-f"]);
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let gathered = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                gathered.lock().unwrap().push(line);
            }
        });
        Follower {
            child,
            lines,
            reader,
        }
    }

    fn count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// Waits until it printed `n` lines (or more), at most `limit`.
    fn wait_for(&self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.count() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ctrl-C, then its lines and its stderr.
    fn stop(mut self) -> (Vec<String>, String) {
        sigint(self.child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "events -f did not stop on SIGINT"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.reader.join().unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let lines = self.lines.lock().unwrap().clone();
        (lines, err)
    }
}

fn lines_of(out: &std::process::Output) -> Vec<String> {
    stdout(out).lines().map(str::to_owned).collect()
}

#[test]
fn events_are_read_across_rotations_once_and_in_order_and_followed_through_them() {
    let fleet = TestFleet::raw(
        "rotation-events",
        &format!(
            "version: 1\nsupervisor: {{max_file_size: 2KiB, keep_files: {KEEP}}}\nservers:\n{}",
            fixture_server("a", &[], "")
        ),
    );
    let state = fleet.state_dir();
    // A supervisor.log left past the size by an earlier supervisor: the next
    // one rotates it as it starts.
    std::fs::create_dir(&state).unwrap();
    let old_log = "a line of an earlier supervisor\n".repeat(100);
    std::fs::write(state.join("supervisor.log"), &old_log).unwrap();

    let follower = Follower::start(&fleet);
    let mut up = fleet.command(&["up"]);
    up.env("RUST_LOG", "mcpfleet=debug");
    assert_code(&run_bounded(up, Duration::from_secs(60)), 0);
    let reconnects = 30;
    for _ in 0..reconnects {
        assert_code(&fleet.run(&["reconnect", "a"]), 0);
    }
    // The metrics count the rotations, also those whose files are gone.
    let out = fleet.run(&["metrics"]);
    assert_code(&out, 0);
    let rotated: f64 = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix(r#"mcpfleet_log_rotations_total{file="events"} "#))
        .expect("the rotations of the event log")
        .parse()
        .unwrap();
    assert!(rotated >= 9.0, "{rotated} rotations counted");
    assert_code(&fleet.run(&["down"]), 0);

    let written = all_lines(&state, "events.ndjson");
    let files = chain(&state, "events.ndjson");
    assert!(
        files.len() >= 10,
        "at least 9 rotations of events.ndjson: {files:?}"
    );
    assert!(files.len() <= KEEP as usize + 1, "{files:?}");
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len <= MAX, "{} is {len} bytes", f.display());
        assert!(
            std::fs::read_to_string(f).unwrap().ends_with('\n'),
            "{} ends inside a line",
            f.display()
        );
    }

    // The events of the file, in order: up, each reconnect (stop, then start of
    // the next generation), down, nothing lost or repeated.
    let events: Vec<Value> = written
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for pair in events.windows(2) {
        assert_eq!(
            pair[0]["to"], pair[1]["from"],
            "each event starts where the one before ended: {pair:?}"
        );
    }
    let running: Vec<u64> = events
        .iter()
        .filter(|e| e["to"] == "running")
        .map(|e| e["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(running, (1..=reconnects + 1).collect::<Vec<u64>>());
    assert_eq!(events.last().unwrap()["to"], "stopped");

    // `events`: every file, oldest first, as written.
    assert_eq!(lines_of(&fleet.run(&["events"])), written);
    // `-n`: the last lines, across files.
    let out = fleet.run(&["events", "-n", "25"]);
    assert_eq!(lines_of(&out), written[written.len() - 25..]);
    // `--since`: from the first event at that time on, across files.
    let times: Vec<&str> = events.iter().map(|e| e["time"].as_str().unwrap()).collect();
    let from = (written.len() / 3..written.len())
        .find(|&i| times[i] > times[i - 1])
        .expect("two events with different times");
    let out = fleet.run(&["events", "--since", times[from]]);
    assert_eq!(lines_of(&out), written[from..]);
    let out = fleet.run(&["events", "--since", times[from], "--tail", "3"]);
    assert_eq!(lines_of(&out), written[written.len() - 3..]);

    // `events -f`, started before the first event, saw each line once, in order,
    // through every rotation.
    follower.wait_for(written.len(), Duration::from_secs(10));
    let (followed, err) = follower.stop();
    assert_eq!(followed, written, "events -f; stderr: {err}");
    assert!(!err.contains("rotated away"), "{err}");

    // supervisor.log: rotated as the supervisor started, then while it ran.
    let logs = chain(&state, "supervisor.log");
    assert!(logs.len() >= 3, "{logs:?}");
    // The oldest is the earlier supervisor's, and what this one wrote before it
    // took the lock.
    let oldest = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(oldest.starts_with(&old_log), "{oldest}");
    for f in &logs[1..] {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(
            text.len() as u64 <= MAX,
            "{}: {} bytes",
            f.display(),
            text.len()
        );
        assert!(text.ends_with('\n'), "{} ends inside a line", f.display());
    }
    // Each teardown is logged once, in one of the files.
    let log_text: String = logs
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(!log_text.contains('\u{1b}'), "an escape in supervisor.log");
    for generation in 1..=reconnects + 1 {
        let line = format!("teardown server=a generation={generation} ");
        assert_eq!(
            log_text.matches(&line).count(),
            1,
            "{line:?} in supervisor.log*:\n{log_text}"
        );
    }
    fleet.assert_no_leftovers();
}

#[test]
fn keep_files_bounds_how_many_are_kept() {
    let fleet = TestFleet::raw(
        "rotation-keep",
        &format!(
            "version: 1\nsupervisor: {{max_file_size: 1KiB, keep_files: 2}}\nservers:\n{}",
            fixture_server("a", &[], "")
        ),
    );
    assert_code(&fleet.run(&["up"]), 0);
    for _ in 0..8 {
        assert_code(&fleet.run(&["reconnect", "a"]), 0);
    }
    let state = fleet.state_dir();
    let files = chain(&state, "events.ndjson");
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["events.ndjson.2", "events.ndjson.1", "events.ndjson"],
        "two rotated files are kept"
    );
    // What is left reads as one run of events ending at the last generation.
    let out = fleet.run(&["events"]);
    let events: Vec<Value> = lines_of(&out)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.windows(2).all(|p| p[0]["to"] == p[1]["from"]));
    assert_eq!(events.last().unwrap()["generation"], 9);
    assert!(
        events[0]["generation"].as_u64().unwrap() > 1,
        "the oldest were dropped"
    );
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

/// The open-files limit `(soft, hard)` of process `pid`; with `soft`, sets it
/// first (the hard limit kept) and returns the one it had.
fn nofile_limit(pid: i32, soft: Option<u64>) -> (u64, u64) {
    use nix::libc;
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads `new` and writes `old`, both valid for the call.
    let got = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(got, 0, "prlimit: {}", std::io::Error::last_os_error());
    if let Some(soft) = soft {
        let new = libc::rlimit {
            rlim_cur: soft,
            rlim_max: old.rlim_max,
        };
        // SAFETY: as above.
        let set = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) };
        assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
    }
    (old.rlim_cur, old.rlim_max)
}

/// The lowest descriptor number process `pid` does not use: with its limit
/// there, it can open nothing more.
fn lowest_free_fd(pid: i32) -> u64 {
    let used: std::collections::HashSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|n| !used.contains(n)).unwrap()
}

/// A supervisor with no descriptor left (its limit lowered to what it holds)
/// while its server writes to stderr without pause, each read of it a line of
/// the supervisor's trace log, and a connection waits that it cannot accept: it goes on
/// rotating `supervisor.log` (with its spare descriptor), no file grows past its
/// size, fd 2 stays on `supervisor.log` itself, and once descriptors are free
/// again rotation goes on. (What happens when even the spare is gone, lines
/// dropped and counted, is tested in `rotation.rs` with a failing open.)
#[test]
fn supervisor_log_keeps_its_size_without_a_free_descriptor() {
    let fleet = TestFleet::raw(
        "rotation-emfile",
        &format!(
            "version: 1\nsupervisor: {{max_file_size: 1KiB, keep_files: 2}}\nservers:\n{}",
            fixture_server("a", &["--stderr-every-ms", "5"], "")
        ),
    );
    let mut up = fleet.command(&["up"]);
    up.env("RUST_LOG", "mcpfleet=trace");
    assert_code(&run_bounded(up, Duration::from_secs(60)), 0);
    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    let pid = fleet.lock_pid().expect("a supervisor");
    let live = state.join("supervisor.log");
    // fd 2 is the live file, but for the instant between a rotation's renames
    // and its dup2.
    let fd2_is_live = || {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let fd2 = std::fs::read_link(format!("/proc/{pid}/fd/2")).unwrap();
            if fd2 == live {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "fd 2 is left on {}",
                fd2.display()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    fd2_is_live();
    // Read while the supervisor rotates: a file listed may be gone a moment later.
    let text = || {
        chain(&state, "supervisor.log")
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect::<String>()
    };
    let check_sizes = || {
        for f in chain(&state, "supervisor.log") {
            let len = std::fs::metadata(&f).map_or(0, |m| m.len());
            assert!(len <= 1024, "{}: {len} bytes", f.display());
        }
    };

    let (soft, _) = nofile_limit(pid, Some(lowest_free_fd(pid)));
    // Never accepted: every attempt fails (counted, and logged once).
    let pending = std::os::unix::net::UnixStream::connect(state.join("control.sock")).unwrap();
    let flood = Instant::now();
    let flood_start = humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string();
    while flood.elapsed() < Duration::from_secs(3) {
        check_sizes();
        fd2_is_live();
        std::thread::sleep(Duration::from_millis(10));
    }
    // Rotated during the flood: the line it could not open a file for found
    // the spare descriptor. A file begun and filled after the flood began, by
    // the times its lines begin with, shows it.
    let rotated_during = chain(&state, "supervisor.log")
        .iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let first = text.lines().next().unwrap_or_default();
            text.contains("stderr") && first.get(..27).is_some_and(|t| t >= flood_start.as_str())
        })
        .count();
    assert!(
        rotated_during >= 2,
        "{rotated_during} file(s) of the flood (after {flood_start}):\n{}",
        text()
    );
    nofile_limit(pid, Some(soft));
    drop(pending);
    // Descriptors are free again: rotation goes on, on the live file.
    for _ in 0..20 {
        assert_code(&fleet.run(&["reconnect", "a"]), 0);
    }
    assert!(text().contains("generation=20 "), "{}", text());
    check_sizes();
    fd2_is_live();
    assert!(!state.join("supervisor.log.next").exists());
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}
