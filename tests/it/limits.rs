//! Resource limits of the supervisor against servers that misbehave on stdout: a
//! flood of lines that are not JSON, one message far larger than any real one, and
//! thousands of notifications per second. None of them may exhaust the
//! supervisor's memory (its peak resident set, `VmHWM`, is read from `/proc`), stall
//! the other servers of the fleet (a second server must answer `call` promptly,
//! again and again, while the flood runs) or keep `down` from tearing everything
//! down with nothing left.
//!
//! The floods run one at a time (a lock shared by the tests of this file): they are
//! measurements of latency and memory, and two floods on a two-core machine would
//! measure each other.

use std::path::Path;
use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// The supervisor's peak resident set may not pass this during a flood. An idle
/// supervisor of a debug build peaks around 15 MiB.
const MAX_SUPERVISOR_HWM_MIB: u64 = 150;
/// How long the other server may take to answer one `call` (the CLI's own start
/// included) while a flood runs.
const MAX_CALL_LATENCY: Duration = Duration::from_secs(2);
/// How long each flood is watched.
const FLOOD_FOR: Duration = Duration::from_secs(3);
/// The limit of a single message, as the error names it.
const LIMIT_TEXT: &str = "16 MiB";

/// One flood at a time (see the module comment).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn json(fleet: &TestFleet, args: &[&str]) -> (Output, Value) {
    json_env(fleet, args, &[])
}

/// `mcpfleet --output json ARGS` with more environment (a supervisor that this
/// command starts inherits it).
fn json_env(fleet: &TestFleet, args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let mut cmd = fleet.command(&all);
    cmd.envs(env.iter().copied());
    let out = run_bounded(cmd, Duration::from_secs(60));
    let doc = parse_doc(&out);
    (out, doc)
}

/// The supervisor's pid, as it wrote it into `state.json`.
fn supervisor_pid(fleet: &TestFleet) -> i32 {
    let text = std::fs::read_to_string(fleet.state_dir().join("state.json")).expect("state.json");
    let doc: Value = serde_json::from_str(&text).expect("state.json is JSON");
    let pid = doc["supervisor"]["pid"].as_i64().expect("supervisor pid") as i32;
    assert!(is_alive(pid), "the supervisor {pid} is not running");
    pid
}

/// A field of `/proc/PID/status` in KiB (`VmHWM`, `VmRSS`).
fn status_kib(pid: i32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Bytes the process has written so far (`wchar` of `/proc/PID/io`).
fn written(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("wchar:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) of a process, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rfind(')')
        .map(|i| stat[i + 1..].split_whitespace().collect())
        .unwrap_or_default();
    // After the command: state is field 3, utime 14, stime 15.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// The entry of `name` in a `status` report.
fn status_of(fleet: &TestFleet, name: &str) -> Value {
    let (_, doc) = json(fleet, &["status", name]);
    server(&doc, name).clone()
}

/// One `call other echo`, checked, and how long it took.
fn call_other(fleet: &TestFleet, i: usize) -> Duration {
    let args = format!(r#"{{"i":{i}}}"#);
    let started = Instant::now();
    let (out, doc) = json(
        fleet,
        &["call", "other", "echo", "--args", &args, "--timeout", "30s"],
    );
    let took = started.elapsed();
    assert_code(&out, 0);
    assert_eq!(
        doc["result"]["content"][0]["text"], args,
        "the other server's answer: {doc}"
    );
    took
}

/// What one flood did.
struct Measured {
    /// The supervisor's peak resident set, in MiB.
    hwm_mib: u64,
    /// The slowest and the median `call other` during the flood.
    slowest: Duration,
    median: Duration,
    calls: usize,
    /// Bytes the flooding server wrote during the measurement.
    flooded: u64,
    /// Share of one core the supervisor used during the measurement, in percent.
    supervisor_cpu: u64,
}

/// Calls the other server again and again for `FLOOD_FOR` while `flooder_pid`
/// floods (when it is still alive), then reads the supervisor's peak memory.
fn measure(fleet: &TestFleet, flooder_pid: Option<i32>) -> Measured {
    let sup = supervisor_pid(fleet);
    let written_before = flooder_pid.map_or(0, written);
    let cpu_before = cpu_ticks(sup);
    let started = Instant::now();
    let mut latencies = Vec::new();
    while started.elapsed() < FLOOD_FOR {
        latencies.push(call_other(fleet, latencies.len()));
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed();
    let cpu = cpu_ticks(sup).saturating_sub(cpu_before);
    let flooded = flooder_pid
        .map_or(0, written)
        .saturating_sub(written_before);
    latencies.sort();
    Measured {
        hwm_mib: status_kib(sup, "VmHWM") / 1024,
        slowest: *latencies.last().unwrap(),
        median: latencies[latencies.len() / 2],
        calls: latencies.len(),
        flooded,
        // 100 ticks per second is the Linux default (USER_HZ).
        supervisor_cpu: cpu * 1000 / elapsed.as_millis().max(1) as u64,
    }
}

fn report(label: &str, m: &Measured) {
    eprintln!(
        "{label}: supervisor VmHWM {} MiB, {} calls to the other server: median {:?}, \
         slowest {:?}; the flooder wrote {} MiB; the supervisor used {}% of a core",
        m.hwm_mib,
        m.calls,
        m.median,
        m.slowest,
        m.flooded / (1024 * 1024),
        m.supervisor_cpu
    );
}

#[track_caller]
fn report_and_assert_bounded(label: &str, m: &Measured) {
    report(label, m);
    assert_bounded(label, m);
}

#[track_caller]
fn assert_bounded(label: &str, m: &Measured) {
    assert!(
        m.hwm_mib < MAX_SUPERVISOR_HWM_MIB,
        "{label}: the supervisor's peak memory reached {} MiB",
        m.hwm_mib
    );
    assert!(
        m.slowest < MAX_CALL_LATENCY,
        "{label}: the other server took {:?} to answer during the flood",
        m.slowest
    );
}

/// `down` tears everything down, and nothing of the fleet is left.
fn down_and_nothing_left(fleet: &TestFleet) -> Value {
    let (out, doc) = json(fleet, &["down"]);
    assert_code(&out, 0);
    for s in doc["servers"].as_array().unwrap() {
        // A server that failed earlier stays `failed`; nothing may still run.
        assert!(s["state"] == "stopped" || s["state"] == "failed", "{s}");
        if !s["teardown"].is_null() {
            assert_ne!(s["teardown"]["outcome"], "failed", "{s}");
            assert_eq!(s["teardown"]["leftover_pids"], serde_json::json!([]), "{s}");
        }
    }
    fleet.assert_no_leftovers();
    doc
}

/// A fleet of a flooding server and a well-behaved `other`, both up and running,
/// under a supervisor started with `env`.
fn flood_fleet(label: &str, flooder_args: &[&str], env: &[(&str, &str)]) -> (TestFleet, i32) {
    let fleet = TestFleet::fixtures(label, &[("flooder", flooder_args, ""), ("other", &[], "")]);
    let (out, doc) = json_env(&fleet, &["up"], env);
    assert_code(&out, 0);
    let pid = server(&doc, "flooder")["pid"]
        .as_i64()
        .expect("flooder pid") as i32;
    (fleet, pid)
}

fn supervisor_log(fleet: &TestFleet) -> String {
    std::fs::read_to_string(fleet.state_dir().join("supervisor.log")).unwrap_or_default()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Waits until `name` is no longer running and returns its status entry.
fn until_not_running(fleet: &TestFleet, name: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let s = status_of(fleet, name);
        if s["state"] != "running" {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{name} still runs after {limit:?}: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The flooder's own session still works between the lines of its flood.
fn flooder_answers(fleet: &TestFleet) {
    let (out, doc) = json(fleet, &["call", "flooder", "echo", "--args", "{\"x\":1}"]);
    assert_code(&out, 0);
    assert_eq!(doc["result"]["content"][0]["text"], "{\"x\":1}");
}

/// The flood ran: the flooder wrote at least `at_least` bytes while it was measured.
#[track_caller]
fn assert_flooded(m: &Measured, at_least: u64) {
    assert!(
        m.flooded >= at_least,
        "the flood did not run: the flooder wrote {} bytes",
        m.flooded
    );
}

/// A notification line of the fixture is about 110 bytes: this many bytes in
/// `FLOOD_FOR` are more than a thousand notifications per second.
const THOUSAND_PER_SECOND: u64 = 110 * 1000 * FLOOD_FOR.as_secs();

/// Lines that are not JSON, endlessly, with debug logging on (`RUST_LOG` reaches the
/// supervisor): they are dropped before they are parsed, and what is logged about
/// them is a first line and a count, not an entry per line.
#[test]
fn a_flood_of_lines_that_are_not_json_is_dropped_and_logged_in_bounds() {
    let _one = serial();
    let (fleet, flooder) = flood_fleet(
        "limits-garbage",
        &["--flood", "garbage"],
        &[("RUST_LOG", "debug")],
    );
    let m = measure(&fleet, Some(flooder));
    report("garbage flood", &m);
    let log_len = file_len(&fleet.state_dir().join("supervisor.log"));
    eprintln!("supervisor.log: {log_len} bytes after the flood");
    assert!(
        log_len < 1024 * 1024,
        "supervisor.log grew to {log_len} bytes: the dropped lines are logged one by one"
    );
    assert_bounded("garbage flood", &m);
    // Dropped unparsed, the lines are cheap: the flood runs at full speed.
    assert_flooded(&m, 20 * 1024 * 1024);
    flooder_answers(&fleet);
    let log = supervisor_log(&fleet);
    assert!(
        log.contains("not JSON-RPC") && log.contains("fixture garbage line"),
        "the first dropped line is logged: {log}"
    );
    down_and_nothing_left(&fleet);
}

/// JSON objects that are not JSON-RPC messages, endlessly. rmcp answers each with
/// an error written to the server's stdin, and stops reading the server's stdout
/// until that write is done; the fixture answers each of those errors in turn on
/// stdout, and reads no stdin while its stdout is full. The two block each other
/// after about a thousand lines: that server's session is wedged (its own calls
/// wait for their timeout). What must hold still holds: the supervisor's memory
/// stays flat, the other server answers promptly, and `down` tears the wedged
/// server down with nothing left.
#[test]
fn a_flood_of_json_that_is_not_json_rpc_wedges_at_most_its_own_session() {
    let _one = serial();
    let (fleet, flooder) = flood_fleet("limits-json", &["--flood", "json"], &[]);
    let m = measure(&fleet, Some(flooder));
    report_and_assert_bounded("non-JSON-RPC JSON flood", &m);
    let wrote = written(flooder);
    eprintln!("the flooder wrote {wrote} bytes in all");
    assert!(wrote > 64 * 1024, "the flood did not run: {wrote} bytes");
    let doc = down_and_nothing_left(&fleet);
    eprintln!("down: {}", server(&doc, "flooder"));
}

#[test]
fn a_flood_of_log_notifications_costs_neither_memory_nor_latency() {
    let _one = serial();
    let (fleet, flooder) = flood_fleet("limits-notify", &["--flood", "log"], &[]);
    let m = measure(&fleet, Some(flooder));
    report_and_assert_bounded("log notification flood", &m);
    assert_flooded(&m, THOUSAND_PER_SECOND);
    flooder_answers(&fleet);
    down_and_nothing_left(&fleet);
}

#[test]
fn a_flood_of_progress_notifications_costs_neither_memory_nor_latency() {
    let _one = serial();
    let (fleet, flooder) = flood_fleet("limits-progress", &["--flood", "progress"], &[]);
    let m = measure(&fleet, Some(flooder));
    report_and_assert_bounded("progress notification flood", &m);
    assert_flooded(&m, THOUSAND_PER_SECOND);
    flooder_answers(&fleet);
    down_and_nothing_left(&fleet);
}

/// A running server writes one line of 200 MiB that never ends. The supervisor
/// reads no more than the limit of one message, ends the session with an error that
/// names the limit, and the server (which then finds its stdout gone) is torn down
/// as a server that failed while running.
#[test]
fn a_line_that_never_ends_ends_the_session_at_the_limit() {
    let _one = serial();
    let (fleet, flooder) = flood_fleet("limits-line", &["--huge-line-mb", "200"], &[]);
    let m = measure(&fleet, Some(flooder));
    report_and_assert_bounded("200 MiB line", &m);
    let s = until_not_running(&fleet, "flooder", Duration::from_secs(10));
    eprintln!("the flooder after its 200 MiB line: {s}");
    assert_eq!(s["state"], "failed", "{s}");
    assert_eq!(s["pid"], Value::Null, "{s}");
    // Reported as what happened: its session was cut off at the limit.
    assert_eq!(s["error"]["kind"], "protocol", "{s}");
    let message = s["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(LIMIT_TEXT), "{s}");
    assert!(!is_alive(flooder), "the flooder {flooder} still runs");
    let log = supervisor_log(&fleet);
    assert!(
        log.contains(LIMIT_TEXT) && log.contains("message too large"),
        "the supervisor's log names the limit: {log}"
    );
    down_and_nothing_left(&fleet);
}

/// The answer to the handshake's `tools/list` is one valid message of 200 MiB: the
/// start fails at once as a protocol error that names the limit (not as a connect
/// timeout), the server is torn down, and the other server starts normally.
#[test]
fn a_tools_list_answer_beyond_the_limit_is_a_protocol_error() {
    let _one = serial();
    let fleet = TestFleet::fixtures(
        "limits-tools-list",
        &[
            (
                "huge",
                &["--huge-tools-list-mb", "200"],
                "connect_timeout: 20s",
            ),
            ("other", &[], ""),
        ],
    );
    let started = Instant::now();
    let (out, doc) = json(&fleet, &["up"]);
    let took = started.elapsed();
    eprintln!("up with a 200 MiB tools/list answer took {took:?}: {doc}");
    assert_code(&out, 3);
    let huge = server(&doc, "huge");
    assert_eq!(huge["state"], "failed", "{huge}");
    assert_eq!(huge["error"]["kind"], "protocol", "{huge}");
    assert_eq!(huge["error"]["phase"], "list-tools", "{huge}");
    let message = huge["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(LIMIT_TEXT) && message.contains("tools/list"),
        "the error names the step and the limit: {message}"
    );
    assert_ne!(huge["teardown"]["outcome"], "failed", "{huge}");
    assert_eq!(huge["teardown"]["leftover_pids"], serde_json::json!([]));
    assert!(took < Duration::from_secs(15), "up took {took:?}");
    assert_eq!(server(&doc, "other")["state"], "running");
    let hwm = status_kib(supervisor_pid(&fleet), "VmHWM") / 1024;
    eprintln!("supervisor VmHWM {hwm} MiB");
    assert!(hwm < MAX_SUPERVISOR_HWM_MIB, "VmHWM {hwm} MiB");
    call_other(&fleet, 1);
    down_and_nothing_left(&fleet);
}

/// A tool answers a call with 200 MiB: the call fails at once (it does not wait for
/// its timeout), the server is torn down, and the other server is not disturbed.
#[test]
fn a_call_answer_beyond_the_limit_fails_the_call_at_once() {
    let _one = serial();
    let (fleet, flooder) = flood_fleet("limits-call", &["--huge-call-mb", "200"], &[]);
    let started = Instant::now();
    let (out, doc) = json(
        &fleet,
        &[
            "call",
            "flooder",
            "echo",
            "--args",
            "{}",
            "--timeout",
            "30s",
        ],
    );
    let took = started.elapsed();
    eprintln!("a call answered with 200 MiB took {took:?}: {doc}");
    assert_code(&out, 3);
    assert!(took < Duration::from_secs(10), "the call took {took:?}");
    assert_ne!(doc["error"]["kind"], "call_timeout", "{doc}");
    let hwm = status_kib(supervisor_pid(&fleet), "VmHWM") / 1024;
    eprintln!("supervisor VmHWM {hwm} MiB");
    assert!(hwm < MAX_SUPERVISOR_HWM_MIB, "VmHWM {hwm} MiB");
    call_other(&fleet, 1);
    let s = until_not_running(&fleet, "flooder", Duration::from_secs(10));
    assert_eq!(s["state"], "failed", "{s}");
    assert!(!is_alive(flooder), "the flooder {flooder} still runs");
    assert!(supervisor_log(&fleet).contains(LIMIT_TEXT));
    down_and_nothing_left(&fleet);
}
