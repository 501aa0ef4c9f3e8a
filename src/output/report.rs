//! One report model for every command, rendered as text, JSON or NDJSON
//! (docs/design.md §6). Data goes to stdout; chatter goes to stderr elsewhere. The JSON
//! shape is versioned by `SCHEMA_VERSION`: fields may be added, never change meaning.

use std::io::Write;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::contract::{ContractSummary, ToolsContract};
use super::exit::Code;
use super::plan::{Drift, PlanStep, plan_counts, plan_table};
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::events::{Event, EventSink};
use crate::lifecycle::state::{Generation, Phase};
use crate::lifecycle::summary::TeardownSummary;

pub(crate) const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Ndjson,
}

/// The error object of the JSON output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorReport {
    pub kind: ErrorKind,
    pub phase: ErrorPhase,
    pub message: String,
    pub stderr_tail: Vec<String>,
}

impl From<&ServerError> for ErrorReport {
    fn from(e: &ServerError) -> Self {
        let ServerError {
            kind,
            phase,
            message,
            stderr_tail,
        } = e;
        ErrorReport {
            kind: *kind,
            phase: *phase,
            message: message.clone(),
            stderr_tail: stderr_tail.clone(),
        }
    }
}

/// The `error.kind` of a document without a server's line for the error
/// (docs/design.md §6): a command that could not run at all, or a `tools` or
/// `call` request that failed on a server's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FailureKind {
    InvalidFleetFile,
    Usage,
    /// The state directory serves another fleet file (exit 2).
    StateDirTaken,
    Internal,
    /// No supervisor could be reached, or it was lost during the request.
    Unreachable,
    /// A tool call did not answer within its timeout.
    CallTimeout,
    /// A server's own error kind.
    #[serde(untagged)]
    Server(ErrorKind),
}

/// An error of a document without a server's line for it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct FailureReport {
    pub kind: FailureKind,
    pub message: String,
}

/// A transition as reported: `lifecycle::events::Event` in the shape of the event
/// log and of NDJSON output, and readable back, since this is how a supervisor's
/// events reach the CLI (docs/design.md §9).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct EventReport {
    pub time: String,
    pub server: String,
    pub generation: Option<Generation>,
    pub from: Phase,
    pub to: Phase,
    /// The `Cause`, by its name in output.
    pub cause: String,
    pub duration_ms: u64,
    pub waited_ms: u64,
    pub error: Option<ErrorReport>,
    /// How the teardown this transition concludes went (`clean`, `escalated`,
    /// `failed`); absent on other transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<crate::lifecycle::summary::Outcome>,
}

impl From<&Event> for EventReport {
    fn from(event: &Event) -> Self {
        // Every field is named, so that a new one cannot be left out of what the
        // CLI sees of a supervisor's events.
        let Event {
            time,
            server,
            generation,
            from,
            to,
            cause,
            duration_ms,
            waited_ms,
            error,
            teardown,
        } = event;
        EventReport {
            time: time.clone(),
            server: server.clone(),
            generation: *generation,
            from: *from,
            to: *to,
            cause: serde_plain(cause),
            duration_ms: *duration_ms,
            waited_ms: *waited_ms,
            error: error.as_ref().map(ErrorReport::from),
            teardown: *teardown,
        }
    }
}

/// One server's line in a report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerReport {
    pub name: String,
    pub transport: String,
    pub state: Phase,
    pub generation: Option<Generation>,
    pub pid: Option<i32>,
    pub connect_ms: Option<u64>,
    pub tools: Option<usize>,
    pub server_info: Option<String>,
    /// The protocol version the running generation's session speaks: the one
    /// `initialize` agreed on (legacy era), or the one `server/discover` named
    /// (modern era, 2026-07-28 on). Only while a generation runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// How long the running generation has been ready (`status`, `up`).
    #[serde(default)]
    pub uptime_ms: Option<u64>,
    /// Restarts by the restart policy within its window.
    #[serde(default)]
    pub restarts: u32,
    /// In `backoff`: how long until the next restart.
    #[serde(default)]
    pub retry_in_ms: Option<u64>,
    pub error: Option<ErrorReport>,
    pub teardown: Option<TeardownSummary>,
    /// This server's own exit code, before ranking across servers.
    pub exit_code: i32,
    /// How the server differs from the fleet file (`status` through the
    /// supervisor, docs/design.md §16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// How the server's tools compare with the expected ones (`check
    /// --expect-tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_contract: Option<ToolsContract>,
    /// The server's OAuth authorization, for a remote server with `auth:`
    /// (`status`; never a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthStatus>,
    /// The host that runs the server, in a fleet that spans hosts
    /// (docs/design.md §19); absent on one host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Where a server's OAuth authorization stands (docs/design.md,
/// "Authorization").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthStatus {
    /// `valid` (a token good until `expires_at`), `expired` (renewed at the
    /// next request: `refresh` is true), `needs_login` (`mcpfleet login NAME`),
    /// or `none` (none yet: the authority obtains one by itself, from
    /// `client_credentials` or a `refresh_token:` seed).
    pub state: String,
    /// RFC 3339, when the access token expires.
    pub expires_at: Option<String>,
    /// Whether a refresh token is held.
    pub refresh: bool,
    pub scopes: Vec<String>,
    /// Why a login is needed, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ServerReport {
    /// The server as another host of a fleet across hosts runs it: `running`
    /// there, in `generation`, nothing of this host's process or error.
    pub fn runs_elsewhere(&mut self, host: String, generation: Option<Generation>) {
        self.state = Phase::Running;
        self.generation = generation;
        self.pid = None;
        self.uptime_ms = None;
        self.error = None;
        self.exit_code = 0;
        self.host = Some(host);
    }
}

impl AuthStatus {
    /// The line under a server's row in `status`.
    pub fn text(&self, name: &str) -> String {
        let scopes = if self.scopes.is_empty() {
            String::new()
        } else {
            format!("; scopes {}", self.scopes.join(" "))
        };
        let refresh = if self.refresh { "; refresh possible" } else { "" };
        match self.state.as_str() {
            "valid" => format!(
                "auth: valid until {}{refresh}{scopes}",
                self.expires_at.as_deref().unwrap_or("(no expiry given)")
            ),
            "expired" => format!("auth: expired, renewed at the next request{refresh}{scopes}"),
            "needs_login" => format!(
                "auth: needs login ({}): run `mcpfleet login {name}`",
                self.reason.as_deref().unwrap_or("no authorization is kept")
            ),
            _ => "auth: none yet; obtained when the server starts".into(),
        }
    }
}

/// The whole result of a command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub command: String,
    pub exit_code: i32,
    /// True when the command was interrupted and did not see everything to the end.
    pub interrupted: bool,
    pub servers: Vec<ServerReport>,
    /// The gateway's HTTP door and client sessions (`serve`, `status`), when open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayReport>,
    /// What `up` did, or would do, to converge on the fleet file (docs/design.md §16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<PlanStep>>,
    /// `up --dry-run`: the plan was only computed; nothing was changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The snapshot of tools compared with or written (`check --expect-tools`,
    /// `--update-tools`), and the servers it has that the fleet file has not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_contract: Option<ContractSummary>,
    /// `down` of the whole fleet: the supervisor, and whether it and its
    /// guardian were gone when `down` returned (docs/design.md §3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<SupervisorReport>,
    /// `up` read an older version of the fleet file than the one the supervisor
    /// runs: the supervisor kept the newer one and converged on it
    /// (docs/design.md §16, R6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_file: Option<OlderFile>,
}

/// The supervisor after a `down` of the whole fleet: it exits as soon as it has
/// answered, unless something still needs it (`stays`), and `down` returns once
/// it and its guardian are gone (docs/design.md §3).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SupervisorReport {
    pub pid: i32,
    /// Its guardian's pid, when it has one (not `up --foreground`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardian: Option<i32>,
    /// What keeps it running, when something does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stays: Option<String>,
    /// Whether the supervisor and its guardian had both exited when `down`
    /// returned (set by the CLI, which waits for them).
    #[serde(default)]
    pub exited: bool,
}

/// The two versions of the fleet file when a request carried the older one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OlderFile {
    /// When the file the command read last changed (RFC 3339, UTC, nanoseconds).
    pub read_changed: String,
    /// When the file the supervisor kept, and runs, last changed.
    pub kept_changed: String,
}

impl OlderFile {
    /// The line of the text output.
    pub fn text(&self) -> String {
        format!(
            "fleet file: this command read a version changed at {}, older than the one the supervisor runs (changed at {}); the supervisor kept the newer one",
            self.read_changed, self.kept_changed
        )
    }
}

/// Where the gateway serves and who is connected (docs/design.md §14).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GatewayReport {
    /// The streamable-HTTP endpoint, when the HTTP door is open.
    pub url: Option<String>,
    /// The file that holds the bearer token.
    pub token_file: Option<String>,
    /// Open client sessions, through either door.
    pub sessions: usize,
}

impl Report {
    /// Ranks the servers' codes (and the interruption) into the command's code.
    pub fn new(command: &str, servers: Vec<ServerReport>, interrupted: bool) -> Report {
        let mut report = Report {
            schema_version: SCHEMA_VERSION,
            command: command.to_owned(),
            exit_code: 0,
            interrupted,
            servers,
            gateway: None,
            plan: None,
            dry_run: false,
            tools_contract: None,
            supervisor: None,
            older_file: None,
        };
        report.rank();
        report
    }

    /// Ranks the servers' codes (and the interruption) into the command's
    /// code again, after lines were changed.
    pub fn rank(&mut self) {
        let mut code = self
            .servers
            .iter()
            .map(|s| Code::from_i32(s.exit_code))
            .fold(Code::Ok, Code::max);
        if self.interrupted {
            code = code.max(Code::Interrupted);
        }
        self.exit_code = code.as_i32();
    }

    /// The plan step of server `name`, if the report has a plan.
    pub fn step(&self, name: &str) -> Option<&PlanStep> {
        self.plan.as_ref()?.iter().find(|s| s.name == name)
    }
}

/// Writes to stdout, treating a closed pipe (`| head`) as the reader's choice, not
/// as an error.
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Renders the final report in `format`.
pub(crate) fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report).expect("reports serialize");
            s.push('\n');
            s
        }
        Format::Ndjson => typed_line("summary", report),
        Format::Text => render_text(report),
    }
}

/// A document as one line of JSON, its keys in sorted order: how the documents
/// other than a `Report` (`tools`, `call`, a command that could not run) print.
pub(crate) fn json_line<T: Serialize>(doc: &T) -> String {
    let value = serde_json::to_value(doc).expect("documents serialize");
    format!("{value}\n")
}

/// An NDJSON line: `doc` with its `type` (`event`, `summary`), keys sorted.
fn typed_line<T: Serialize>(kind: &str, doc: &T) -> String {
    let mut value = serde_json::to_value(doc).expect("documents serialize");
    if let Some(map) = value.as_object_mut() {
        map.insert("type".into(), kind.into());
    }
    format!("{value}\n")
}

/// An event's NDJSON line.
pub(crate) fn event_line(event: &EventReport) -> String {
    typed_line("event", event)
}

fn dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn render_text(report: &Report) -> String {
    if report.dry_run {
        let steps = report.plan.as_deref().unwrap_or_default();
        return format!(
            "{}{} --dry-run: {}; nothing was changed; exit {}\n",
            plan_table(steps),
            report.command,
            plan_counts(steps),
            report.exit_code
        );
    }
    let mut rows = vec![[
        "SERVER".to_owned(),
        "HOST".to_owned(),
        "STATE".to_owned(),
        "GEN".to_owned(),
        "PID".to_owned(),
        "UPTIME".to_owned(),
        "CONNECT".to_owned(),
        "TOOLS".to_owned(),
        "TEARDOWN".to_owned(),
    ]];
    for s in &report.servers {
        let teardown = s.teardown.as_ref().map(|t| {
            let mut text = format!("{} {}ms", outcome_name(t), t.duration_ms);
            if let Some(sig) = &t.signal {
                text.push_str(&format!(" ({sig})"));
            }
            text
        });
        rows.push([
            s.name.clone(),
            dash(s.host.as_deref()),
            s.state.as_str().to_owned(),
            dash(s.generation),
            dash(s.pid),
            dash(s.uptime_ms.map(uptime)),
            dash(s.connect_ms.map(|ms| format!("{ms}ms"))),
            dash(s.tools),
            dash(teardown),
        ]);
    }
    // The HOST column only in a fleet that spans hosts (docs/design.md §19).
    let spans_hosts = report.servers.iter().any(|s| s.host.is_some());
    let lines: Vec<String> = match spans_hosts {
        true => {
            let widths = super::table::widths(&rows);
            rows.iter().map(|r| super::table::line(r, widths)).collect()
        }
        false => {
            let rows: Vec<[String; 8]> = rows
                .into_iter()
                .map(|[name, _, rest @ ..]| {
                    let [a, b, c, d, e, f, g] = rest;
                    [name, a, b, c, d, e, f, g]
                })
                .collect();
            let widths = super::table::widths(&rows);
            rows.iter().map(|r| super::table::line(r, widths)).collect()
        }
    };
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        out.push_str(line);
        if i == 0 {
            continue;
        }
        let s = &report.servers[i - 1];
        if let Some(text) = report.step(&s.name).and_then(|step| step.text()) {
            out.push_str(&format!("  {text}\n"));
        }
        if let Some(text) = s.drift.as_ref().and_then(Drift::text) {
            out.push_str(&format!("  {text}\n"));
        }
        if let Some(auth) = &s.auth {
            out.push_str(&format!("  {}\n", auth.text(&s.name)));
        }
        if let Some(contract) = &s.tools_contract {
            let file = report
                .tools_contract
                .as_ref()
                .and_then(|c| c.expected_file.as_deref())
                .unwrap_or("the snapshot");
            for line in contract.text(file) {
                out.push_str(&format!("  {line}\n"));
            }
        }
        if let Some(e) = &s.error {
            out.push_str(&format!(
                "  error [{}] {}: {}\n",
                serde_plain(&e.kind),
                serde_plain(&e.phase),
                e.message
            ));
            for line in &e.stderr_tail {
                out.push_str(&format!("  | {line}\n"));
            }
        }
        if let Some(ms) = s.retry_in_ms {
            out.push_str(&format!(
                "  restart {} of this window in {ms}ms\n",
                s.restarts
            ));
        } else if s.restarts > 0 {
            out.push_str(&format!(
                "  restarted {} time(s) in this window\n",
                s.restarts
            ));
        }
        if let Some(t) = &s.teardown
            && !t.leftover_pids.is_empty()
        {
            let pids: Vec<String> = t.leftover_pids.iter().map(|p| p.to_string()).collect();
            out.push_str(&format!("  left alive: {}\n", pids.join(", ")));
        }
        if let Some(t) = &s.teardown
            && !t.escaped_pids.is_empty()
        {
            let pids: Vec<String> = t.escaped_pids.iter().map(|p| p.to_string()).collect();
            out.push_str(&format!(
                "  had left the process group and were ended one by one: {}\n",
                pids.join(", ")
            ));
        }
    }
    if let Some(g) = &report.gateway {
        match &g.url {
            Some(url) => out.push_str(&format!(
                "gateway: {url} (bearer token in {}), {} client session(s)\n",
                g.token_file.as_deref().unwrap_or("the fleet file"),
                g.sessions
            )),
            None => out.push_str(&format!("gateway: {} client session(s)\n", g.sessions)),
        }
    }
    if let Some(summary) = &report.tools_contract {
        let file = summary.expected_file.as_deref().unwrap_or("the snapshot");
        for name in &summary.missing_servers {
            out.push_str(&format!(
                "tools: {file} has server `{name}`, which is not in the fleet file\n"
            ));
        }
        if let Some(updated) = &summary.updated_file {
            out.push_str(&format!("tools: written to {updated}\n"));
        }
    }
    if let Some(older) = &report.older_file {
        out.push_str(&older.text());
        out.push('\n');
    }
    let failed = report.servers.iter().filter(|s| s.exit_code != 0).count();
    out.push_str(&format!(
        "{}: {} server(s), {} ok, {} not ok{}; exit {}\n",
        report.command,
        report.servers.len(),
        report.servers.len() - failed,
        failed,
        if report.interrupted {
            ", interrupted"
        } else {
            ""
        },
        report.exit_code
    ));
    out
}

/// An uptime as people read it: 42s, 5m12s, 3h04m.
fn uptime(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

fn outcome_name(t: &TeardownSummary) -> String {
    serde_plain(&t.outcome)
}

/// The serde name of a unit enum value, e.g. `connect_timeout`.
pub(crate) fn serde_plain<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Prints each event as an NDJSON line the moment it is recorded.
pub(crate) struct NdjsonEvents {
    lock: Mutex<()>,
}

impl NdjsonEvents {
    pub(crate) fn new() -> NdjsonEvents {
        NdjsonEvents {
            lock: Mutex::new(()),
        }
    }
}

impl Default for NdjsonEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl EventSink for NdjsonEvents {
    fn record(&self, event: &Event) {
        let line = event_line(&EventReport::from(event));
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = write_stdout(&line);
    }
}

/// Logs each event through tracing, for `-v`.
pub(crate) struct TracingEvents;

impl EventSink for TracingEvents {
    fn record(&self, e: &Event) {
        tracing::info!(
            server = %e.server,
            generation = ?e.generation,
            from = e.from.as_str(),
            to = e.to.as_str(),
            cause = ?e.cause,
            ms = e.duration_ms,
            "transition"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::events::Cause;

    fn event(error: Option<ServerError>) -> Event {
        Event {
            time: "2026-01-02T03:04:05.678Z".into(),
            server: "a".into(),
            generation: Some(3),
            from: Phase::Starting,
            to: Phase::Failed,
            cause: Cause::Reconnect,
            duration_ms: 12,
            waited_ms: 4,
            error,
            teardown: None,
        }
    }

    #[test]
    fn an_event_report_reads_like_the_event() {
        let error = ServerError::new(ErrorKind::ConnectTimeout, ErrorPhase::Initialize, "slow")
            .with_stderr(vec!["last line".into()]);
        for e in [event(None), event(Some(error))] {
            let report = EventReport::from(&e);
            assert_eq!(
                serde_json::to_value(&report).unwrap(),
                serde_json::to_value(&e).unwrap()
            );
            let line = event_line(&report);
            let back: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(back["type"], "event");
            assert_eq!(back["cause"], "reconnect");
            let read: EventReport = serde_json::from_str(&line).unwrap();
            assert_eq!(read, report);
        }
    }

    #[test]
    fn an_older_file_is_said_before_the_summary() {
        let mut report = Report::new("up", Vec::new(), false);
        report.older_file = Some(OlderFile {
            read_changed: "2026-05-04T10:21:07.000000001Z".into(),
            kept_changed: "2026-05-04T10:21:07.000000002Z".into(),
        });
        let text = render_text(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[lines.len() - 2],
            "fleet file: this command read a version changed at 2026-05-04T10:21:07.000000001Z, older than the one the supervisor runs (changed at 2026-05-04T10:21:07.000000002Z); the supervisor kept the newer one"
        );
        assert_eq!(lines[lines.len() - 1], "up: 0 server(s), 0 ok, 0 not ok; exit 0");
        let json: serde_json::Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
        assert_eq!(
            json["older_file"]["kept_changed"],
            "2026-05-04T10:21:07.000000002Z"
        );
        let plain = Report::new("up", Vec::new(), false);
        let json: serde_json::Value = serde_json::from_str(&render(&plain, Format::Json)).unwrap();
        assert!(json.get("older_file").is_none());
    }

    #[test]
    fn failure_kinds_are_named_like_error_kinds() {
        let name = |k: FailureKind| serde_json::to_value(k).unwrap();
        assert_eq!(name(FailureKind::CallTimeout), "call_timeout");
        assert_eq!(name(FailureKind::InvalidFleetFile), "invalid_fleet_file");
        assert_eq!(name(FailureKind::Unreachable), "unreachable");
        assert_eq!(
            name(FailureKind::Server(ErrorKind::SessionLost)),
            "session_lost"
        );
        for kind in [
            FailureKind::Usage,
            FailureKind::CallTimeout,
            FailureKind::Server(ErrorKind::ConnectFailed),
        ] {
            let back: FailureKind = serde_json::from_value(name(kind)).unwrap();
            assert_eq!(back, kind);
        }
    }
}
