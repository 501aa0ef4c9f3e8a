//! The supervisor's metrics (docs/design.md §17): what the lifecycle did,
//! counted from the same records as the event log, and what it is doing, read
//! from the authorities' published states at each scrape.
//!
//! ```text
//!  authority ──► EventSink (event, accepted, busy) ──► Metrics: counters, histograms
//!  gateway / call ──► Metrics::called
//!  scrape ──► View (published states, queues, sessions) + Metrics ──► text
//! ```
//!
//! Labels are bounded: a server's name (from the fleet file), an outcome, a cause
//! or a reason from a closed list; never a pid, a generation or an error message.

pub(crate) mod exposition;
pub(crate) mod http;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use exposition::{Format, Histogram, Kind, Writer};

use crate::lifecycle::error::ErrorKind;
use crate::lifecycle::events::{Cause, Event};
use crate::lifecycle::state::Phase;

/// How a call to a server's tool ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// A result that is not an error.
    Ok,
    /// A result with `isError`: the tool ran and said it failed.
    Error,
    /// No result: the server could not be reached or started, or answered a
    /// JSON-RPC error.
    Failed,
    /// The caller went away or cancelled the call.
    Cancelled,
}

const START_OUTCOMES: [&str; 2] = ["ok", "failed"];
const TEARDOWN_OUTCOMES: [&str; 3] = ["clean", "escalated", "failed"];
const RESTART_CAUSES: [&str; 5] = ["exit", "health", "reconnect", "idle", "reconcile"];
const REFUSAL_REASONS: [&str; 4] = ["busy", "fenced", "quarantined", "crash_loop"];
const CALL_OUTCOMES: [&str; 4] = ["ok", "error", "failed", "cancelled"];

/// What one server's lifecycle did since the supervisor started.
#[derive(Debug, Default, Clone)]
struct Counts {
    starts: [u64; START_OUTCOMES.len()],
    teardowns: [u64; TEARDOWN_OUTCOMES.len()],
    restarts: [u64; RESTART_CAUSES.len()],
    crash_loops: u64,
    refused: [u64; REFUSAL_REASONS.len()],
    calls: [u64; CALL_OUTCOMES.len()],
    wait: Histogram,
    connect: Histogram,
    teardown: Histogram,
    call: Histogram,
    /// The server's last stop was the idle stop: its next start is a restart
    /// caused by a use.
    idle_stopped: bool,
}

/// The counters and histograms of every server, by name.
#[derive(Default)]
pub(crate) struct Metrics {
    servers: Mutex<BTreeMap<String, Counts>>,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        Metrics::default()
    }

    fn with(&self, server: &str, f: impl FnOnce(&mut Counts)) {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        match servers.get_mut(server) {
            Some(counts) => f(counts),
            None => f(servers.entry(server.to_owned()).or_default()),
        }
    }

    /// Counts what a transition says (it has been recorded in the event log).
    pub(crate) fn observe(&self, e: &Event) {
        self.with(&e.server, |c| {
            if let Some(reason) = refusal(e) {
                c.refused[reason] += 1;
                return;
            }
            let seconds = e.duration_ms as f64 / 1000.0;
            if e.from == Phase::Starting && e.to != Phase::Starting {
                let ok = e.to == Phase::Running;
                c.starts[usize::from(!ok)] += 1;
                if ok {
                    c.connect.observe(seconds);
                }
            }
            if e.to == Phase::Starting {
                let cause = match e.cause {
                    Cause::Restart => Some(0),
                    Cause::Health => Some(1),
                    Cause::Reconnect => Some(2),
                    Cause::Start if c.idle_stopped => Some(3),
                    Cause::Reconcile => Some(4),
                    _ => None,
                };
                if let Some(i) = cause {
                    c.restarts[i] += 1;
                }
                c.idle_stopped = false;
            }
            if e.to == Phase::Stopping {
                c.idle_stopped = e.cause == Cause::Idle;
            }
            if let Some(outcome) = e.teardown {
                c.teardowns[outcome as usize] += 1;
                c.teardown.observe(seconds);
            }
            if e.to == Phase::CrashLoop && e.from != Phase::CrashLoop {
                c.crash_loops += 1;
            }
        });
    }

    /// A request taken by the authority after waiting `waited` in its queue.
    pub(crate) fn accepted(&self, server: &str, waited: Duration) {
        self.with(server, |c| c.wait.observe(waited.as_secs_f64()));
    }

    /// A request withdrawn because its wait for the authority ran out (L2).
    pub(crate) fn busy(&self, server: &str) {
        self.with(server, |c| c.refused[0] += 1);
    }

    /// A call to one of `server`'s tools, through `call` or the gateway.
    pub(crate) fn called(&self, server: &str, outcome: CallOutcome, took: Duration) {
        self.with(server, |c| {
            c.calls[outcome as usize] += 1;
            c.call.observe(took.as_secs_f64());
        });
    }
}

/// The reason of a refusal: a request the authority answered without acting
/// (from and to the same state, with the error that says why).
fn refusal(e: &Event) -> Option<usize> {
    let asked = matches!(
        e.cause,
        Cause::Start | Cause::Stop | Cause::Reconnect | Cause::Reset | Cause::Reconcile
    );
    if e.from != e.to || !asked {
        return None;
    }
    match e.error.as_ref()?.kind {
        ErrorKind::Busy => Some(0),
        ErrorKind::Fenced => Some(1),
        ErrorKind::Quarantined => Some(2),
        ErrorKind::CrashLoop => Some(3),
        _ => None,
    }
}

/// One server as a scrape sees it.
#[derive(Debug, Clone)]
pub(crate) struct ServerView {
    pub name: String,
    pub state: Phase,
    pub generation: Option<u64>,
    /// Since the running generation became ready.
    pub uptime: Option<Duration>,
    /// Requests waiting in the authority's queue (`None`: no authority runs).
    pub queued: Option<usize>,
    /// Processes that had left the group, found by the last teardown (L13).
    pub escaped: usize,
}

/// The supervisor's own resources.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessView {
    pub resident_bytes: u64,
    pub open_fds: u64,
    pub cpu_seconds: f64,
    pub start_time_seconds: f64,
}

/// What a scrape shows besides the counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    /// The servers, in fleet order (orphans after).
    pub servers: Vec<ServerView>,
    /// Open client sessions of the gateway (`None`: no supervisor).
    pub gateway_sessions: Option<usize>,
    /// Rotations of the supervisor's files, by file (`events`, `supervisor`).
    pub rotations: Vec<(&'static str, u64)>,
    pub process: Option<ProcessView>,
}

const PHASES: [Phase; 8] = [
    Phase::Stopped,
    Phase::Starting,
    Phase::Running,
    Phase::Stopping,
    Phase::Failed,
    Phase::Quarantined,
    Phase::Backoff,
    Phase::CrashLoop,
];

/// The metrics text: the view's gauges, and with `metrics` (a supervisor runs)
/// its counters and histograms. Every server of the view has every series, at
/// zero until something happens, so that `rate()` and `increase()` see the
/// first one.
pub(crate) fn render(metrics: Option<&Metrics>, view: View, format: Format) -> String {
    prepare(metrics, view, format).render()
}

/// A scrape taken and not yet written: the counts copied and the text's buffer
/// taken on the thread that asked ([`prepare`]), so that writing it
/// ([`Prepared::write`]) can run on another thread and allocate nothing there
/// (docs/design.md §17).
pub(crate) struct Prepared {
    /// The counts of each server; `None` when no supervisor runs.
    counted: Option<BTreeMap<String, Counts>>,
    view: View,
    /// Servers that were counted and have left the fleet (after the view's).
    departed: Vec<String>,
    w: Option<Writer>,
}

/// Copies what the metrics text shows now: the counts under their lock, and
/// the buffer the text will be written into.
pub(crate) fn prepare(metrics: Option<&Metrics>, view: View, format: Format) -> Prepared {
    // About 6 KB per server (its histograms' buckets are most of it).
    let w = Writer::new(format, 8 * 1024 + 6 * 1024 * view.servers.len());
    let counted = metrics.map(|m| m.servers.lock().unwrap_or_else(|p| p.into_inner()).clone());
    let departed = counted
        .iter()
        .flat_map(|c| c.keys())
        .filter(|name| !view.servers.iter().any(|s| &s.name == *name))
        .cloned()
        .collect();
    Prepared {
        counted,
        view,
        departed,
        w: Some(w),
    }
}

impl Prepared {
    /// Writes the text, once (then empty). The counts and the view stay, to be
    /// let go of where they were taken.
    pub(crate) fn write(&mut self) -> String {
        let Some(mut w) = self.w.take() else {
            return String::new();
        };
        write_text(&mut w, self.counted.as_ref(), &self.view, &self.departed);
        w.finish()
    }

    /// Writes the text.
    pub(crate) fn render(mut self) -> String {
        self.write()
    }
}

fn write_text(
    w: &mut Writer,
    counted: Option<&BTreeMap<String, Counts>>,
    view: &View,
    departed: &[String],
) {
    let supervised = counted.is_some();
    let zero = Counts::default();
    // The view's servers, then any that were counted and have left the fleet.
    let names = || {
        view.servers
            .iter()
            .map(|s| s.name.as_str())
            .chain(departed.iter().map(String::as_str))
    };
    let counts = |name: &str| -> &Counts { counted.and_then(|c| c.get(name)).unwrap_or(&zero) };

    w.family(
        "mcpfleet_supervisor_up",
        Kind::Gauge,
        "1 when a supervisor runs the fleet (these metrics are its own), 0 when they were read from state.json.",
    );
    w.sample(
        "mcpfleet_supervisor_up",
        &[],
        if supervised { 1.0 } else { 0.0 },
    );

    w.family(
        "mcpfleet_server_state",
        Kind::Gauge,
        "The state of each server: 1 for the state it is in, 0 for the others.",
    );
    for s in &view.servers {
        for phase in PHASES {
            let value = if s.state == phase { 1.0 } else { 0.0 };
            w.sample(
                "mcpfleet_server_state",
                &[("server", &s.name), ("state", phase.as_str())],
                value,
            );
        }
    }
    w.family(
        "mcpfleet_server_generation",
        Kind::Gauge,
        "The server's current (or last) generation; 0 before its first start.",
    );
    for s in &view.servers {
        w.sample(
            "mcpfleet_server_generation",
            &[("server", &s.name)],
            s.generation.unwrap_or(0) as f64,
        );
    }
    w.family(
        "mcpfleet_server_uptime_seconds",
        Kind::Gauge,
        "How long the running generation has been ready; 0 when the server is not running.",
    );
    for s in &view.servers {
        let up = s.uptime.map_or(0.0, |d| d.as_secs_f64());
        w.sample("mcpfleet_server_uptime_seconds", &[("server", &s.name)], up);
    }
    w.family(
        "mcpfleet_servers_stopping",
        Kind::Gauge,
        "Servers being torn down now.",
    );
    let count = |phase: Phase| view.servers.iter().filter(|s| s.state == phase).count() as f64;
    w.sample("mcpfleet_servers_stopping", &[], count(Phase::Stopping));
    w.family(
        "mcpfleet_servers_quarantined",
        Kind::Gauge,
        "Servers whose teardown failed: a failure retained until `reset` or `--force` (L7).",
    );
    w.sample(
        "mcpfleet_servers_quarantined",
        &[],
        count(Phase::Quarantined),
    );
    w.family(
        "mcpfleet_server_escaped_processes",
        Kind::Gauge,
        "Processes that had left the server's process group, found and ended by its last teardown.",
    );
    for s in &view.servers {
        w.sample(
            "mcpfleet_server_escaped_processes",
            &[("server", &s.name)],
            s.escaped as f64,
        );
    }

    if let Some(sessions) = view.gateway_sessions {
        w.family(
            "mcpfleet_gateway_sessions",
            Kind::Gauge,
            "Client sessions open on the gateway (`connect` and `serve`).",
        );
        w.sample("mcpfleet_gateway_sessions", &[], sessions as f64);
    }
    if !supervised {
        return;
    }

    w.family(
        "mcpfleet_authority_queue_depth",
        Kind::Gauge,
        "Requests waiting for the server's authority.",
    );
    for s in &view.servers {
        let queued = s.queued.unwrap_or(0) as f64;
        w.sample(
            "mcpfleet_authority_queue_depth",
            &[("server", &s.name)],
            queued,
        );
    }

    let labelled = |w: &mut Writer,
                    name: &str,
                    help: &str,
                    label: &str,
                    values: &[&str],
                    pick: &dyn Fn(&Counts) -> &[u64]| {
        w.family(name, Kind::Counter, help);
        for server in names() {
            let counts = pick(counts(server));
            for (value, n) in values.iter().zip(counts) {
                let labels = [("server", server), (label, *value)];
                w.sample_with(name, "_total", &labels, None, *n as f64);
            }
        }
    };
    labelled(
        w,
        "mcpfleet_server_starts",
        "Starts of a generation, by outcome (ok: it became ready).",
        "outcome",
        &START_OUTCOMES,
        &|c| &c.starts,
    );
    labelled(
        w,
        "mcpfleet_server_teardowns",
        "Teardowns of a generation, by outcome: clean, escalated (a signal was needed), failed (something was left: quarantined).",
        "outcome",
        &TEARDOWN_OUTCOMES,
        &|c| &c.teardowns,
    );
    labelled(
        w,
        "mcpfleet_server_restarts",
        "New generations started after an earlier one, by cause: exit (the restart policy), health, reconnect, idle (a use after the idle stop), reconcile (the fleet file changed).",
        "cause",
        &RESTART_CAUSES,
        &|c| &c.restarts,
    );
    labelled(
        w,
        "mcpfleet_requests_refused",
        "Requests refused, by reason: busy (the wait for the authority ran out), fenced (an older generation was named), quarantined, crash_loop.",
        "reason",
        &REFUSAL_REASONS,
        &|c| &c.refused,
    );
    labelled(
        w,
        "mcpfleet_calls",
        "Tool calls through `call` and the gateway, by outcome: ok, error (the tool's own error result), failed (no result), cancelled.",
        "outcome",
        &CALL_OUTCOMES,
        &|c| &c.calls,
    );
    w.family(
        "mcpfleet_server_crash_loops",
        Kind::Counter,
        "Times the server was restarted too often within its window and left down.",
    );
    for server in names() {
        let n = counts(server).crash_loops as f64;
        w.sample(
            "mcpfleet_server_crash_loops_total",
            &[("server", server)],
            n,
        );
    }

    type Pick = fn(&Counts) -> &Histogram;
    let histograms: [(&str, &str, Pick); 4] = [
        (
            "mcpfleet_authority_wait_seconds",
            "How long requests waited in the queue of the server's authority before it took them.",
            |c| &c.wait,
        ),
        (
            "mcpfleet_connect_duration_seconds",
            "From spawn (or the first HTTP request) to ready, of starts that succeeded.",
            |c| &c.connect,
        ),
        (
            "mcpfleet_teardown_duration_seconds",
            "How long teardowns took, to confirmed gone or to the deadline.",
            |c| &c.teardown,
        ),
        (
            "mcpfleet_call_duration_seconds",
            "How long tool calls took, as their callers saw them.",
            |c| &c.call,
        ),
    ];
    for (name, help, pick) in histograms {
        w.family(name, Kind::Histogram, help);
        for server in names() {
            w.histogram(name, &[("server", server)], pick(counts(server)));
        }
    }

    if !view.rotations.is_empty() {
        w.family(
            "mcpfleet_log_rotations",
            Kind::Counter,
            "Rotations of the supervisor's own files while it runs, by file.",
        );
        for (file, n) in &view.rotations {
            w.sample("mcpfleet_log_rotations_total", &[("file", file)], *n as f64);
        }
    }
    if let Some(p) = view.process {
        let process: [(&str, Kind, &str, f64); 4] = [
            (
                "process_resident_memory_bytes",
                Kind::Gauge,
                "The supervisor's resident memory.",
                p.resident_bytes as f64,
            ),
            (
                "process_open_fds",
                Kind::Gauge,
                "The supervisor's open file descriptors.",
                p.open_fds as f64,
            ),
            (
                "process_start_time_seconds",
                Kind::Gauge,
                "When the supervisor started, in seconds since the Unix epoch.",
                p.start_time_seconds,
            ),
            (
                "process_cpu_seconds",
                Kind::Counter,
                "CPU time the supervisor used, user and system.",
                p.cpu_seconds,
            ),
        ];
        for (name, kind, help, value) in process {
            w.family(name, kind, help);
            let total = match kind {
                Kind::Counter => "_total",
                _ => "",
            };
            w.sample_with(name, total, &[], None, value);
        }
    }
}

#[cfg(test)]
mod tests;
