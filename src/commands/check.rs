//! `mcpfleet check`: the CI job. In one process and with no daemon, it starts the
//! selected servers in parallel (at most `--jobs` handshakes at once: the start
//! slots of docs/design.md §4.5, so that each start gets the machine it needs to
//! meet its own deadline), lists their tools, tears them all down in parallel, and
//! reports what happened to each, verified.
//!
//! A first Ctrl-C (or SIGTERM) interrupts the starts in progress, also those still
//! waiting for a slot; everything that was acquired is still torn down, and the
//! command exits 130. A second one sends SIGKILL at once instead of waiting for the
//! grace periods.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{CliError, Global, load_fleet};
use crate::cli::CheckArgs;
use crate::config::{ServerSpec, Timeout};
use crate::host::{self, Press, Signals, Unnamed};
use crate::lifecycle::authority::{
    self, CallOptions, Context, Handle, Reply, RequestError, ServerConfig,
};
use crate::lifecycle::events::EventSink;
use crate::lifecycle::state::{Intent, Phase};
use crate::output::exit::Code;
use crate::output::line::{RequestParts, unanswered};
use crate::output::progress::Progress;
use crate::output::report::{self, Format, NdjsonEvents, Report, ServerReport, TracingEvents};

pub async fn run(file: Option<&Path>, args: &CheckArgs, global: &Global) -> Result<Code, CliError> {
    let fleet = load_fleet(file)?;
    let specs = host::select(&fleet, &args.servers, Unnamed::Enabled).map_err(|e| {
        let known: Vec<&str> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
        CliError::Usage(format!(
            "no server named {} in {} (servers: {})",
            e.quoted(),
            fleet.file.display(),
            known.join(", ")
        ))
    })?;
    let files = crate::process::limits::raise_open_files();
    if let Some(warning) = files.shortfall(specs.len()) {
        tracing::warn!("{warning}");
    }
    // Orphans of the servers come back to this process, which keeps every
    // server's lineage current while they run (L13).
    crate::process::lineage::become_subreaper();
    let sweeping = CancellationToken::new();
    tokio::spawn(crate::process::lineage::keep_current(sweeping.clone()));
    let options = CallOptions {
        connect_timeout: args.connect_timeout,
        cleanup_timeout: args.cleanup_timeout,
        wait_timeout: Timeout::Never,
        force: false,
    };
    let events: Arc<dyn EventSink> = match global.output {
        Format::Ndjson => Arc::new(NdjsonEvents::new()),
        _ => Arc::new(TracingEvents),
    };
    let jobs = args
        .jobs
        .map_or_else(crate::lifecycle::authority::default_start_slots, |j| {
            j as usize
        });
    let ctx = Context {
        events,
        interrupt: CancellationToken::new(),
        shutdown: CancellationToken::new(),
        escalate: CancellationToken::new(),
        tracker: TaskTracker::new(),
        tag_scope: tag_scope(),
        start_slots: crate::lifecycle::authority::start_slots(jobs),
    };
    let progress =
        Progress::new(!global.quiet && global.output == Format::Text && global.verbose == 0);
    let signals = tokio::spawn(watch_signals(
        ctx.interrupt.clone(),
        ctx.escalate.clone(),
        progress.clone(),
    ));

    let handles: Vec<Handle> = specs
        .iter()
        .map(|spec| authority::spawn(ServerConfig::from_spec(spec, None), 0, ctx.clone()))
        .collect();
    tracing::info!(servers = handles.len(), jobs, "check: starting");

    // Every start is asked for at once; the start slots let `jobs` of them run.
    let done = |r: &Result<Reply, RequestError>| {
        progress.done_one(r.as_ref().map_or("", |r| &r.snapshot.name));
    };
    progress.stage("starting", handles.len());
    let starts = host::request_all(&handles, Intent::Start, options, done).await;
    // Teardowns wait mostly on grace periods: all at once.
    progress.stage("stopping", handles.len());
    let stops = host::request_all(&handles, Intent::Stop, options, done).await;
    progress.finish();

    // Every authority ends once its handles are gone; wait for all of them, so that
    // nothing of a server can outlive the report.
    drop(handles);
    ctx.tracker.close();
    ctx.tracker.wait().await;
    signals.abort();
    sweeping.cancel();
    // The last dead orphans are collected before the report.
    crate::process::lineage::sweep().await;

    let interrupted = ctx.interrupt.is_cancelled();
    let servers: Vec<ServerReport> = specs
        .iter()
        .zip(starts)
        .zip(stops)
        .map(|((spec, start), stop)| server_report(spec, start, stop, args.strict))
        .collect();
    let report = Report::new("check", servers, interrupted);
    report::write_stdout(&report::render(&report, global.output))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    if interrupted {
        eprintln!("mcpfleet check: interrupted; every server that was started has been torn down");
    }
    Ok(Code::from_i32(report.exit_code))
}

/// Merges a server's start and stop replies into its line of the report: what the
/// start found (generation, tools, server, connect time) and where the stop left
/// the server. Nothing of it runs any more: no uptime, restarts or retry.
fn server_report(
    spec: &ServerSpec,
    start: Result<Reply, RequestError>,
    stop: Result<Reply, RequestError>,
    strict: bool,
) -> ServerReport {
    let split = |reply: Result<Reply, RequestError>| match reply {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(unanswered(&e))),
    };
    let (start, start_err) = split(start);
    let (stop, stop_err) = split(stop);
    let error = start
        .as_ref()
        .and_then(|r| r.result.clone().err())
        .or(start_err)
        .or_else(|| stop.as_ref().and_then(|r| r.result.clone().err()))
        .or(stop_err)
        // A server that exited on its own between its start and its stop.
        .or_else(|| stop.as_ref().and_then(|r| r.snapshot.error.clone()));
    let teardown = stop
        .as_ref()
        .and_then(|r| r.teardown.clone())
        .or_else(|| start.as_ref().and_then(|r| r.teardown.clone()));
    let parts = RequestParts {
        connect: start.as_ref().and_then(|r| r.connect),
        teardown,
        error,
    };
    let code = parts.code(strict);
    let Some(last) = stop.as_ref().or(start.as_ref()) else {
        let (name, transport) = (&spec.name, spec.transport.kind());
        return ServerReport::unpublished(name, transport, Phase::Stopped, parts.error, code);
    };
    let mut line = ServerReport::new(&last.snapshot, parts, code);
    let started = start.as_ref().map(|r| &r.snapshot);
    line.generation = started.and_then(|s| s.generation);
    line.tools = started.and_then(|s| s.tools);
    line.server_info = started.and_then(|s| s.server_info.clone());
    (line.uptime_ms, line.restarts, line.retry_in_ms) = (None, 0, None);
    line
}

/// A scope for process tags that no other run shares.
fn tag_scope() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("check-{}-{nanos}", std::process::id())
}

/// The first SIGINT or SIGTERM interrupts the starts; teardown always runs to its
/// end, bounded by each server's cleanup timeout. A second one skips the graceful
/// steps (SIGKILL at once); whether everything is gone is still confirmed.
async fn watch_signals(
    interrupt: CancellationToken,
    escalate: CancellationToken,
    progress: Progress,
) {
    let Ok(mut signals) = Signals::new() else {
        tracing::warn!(
            "cannot install signal handlers; Ctrl-C will end the process without teardown"
        );
        return;
    };
    loop {
        match signals.next().await {
            Press::Interrupt => {
                progress.note("mcpfleet: interrupted; tearing down every server that was started");
                interrupt.cancel();
            }
            Press::Escalate => {
                progress.note("mcpfleet: second signal: SIGKILL to every server instead of waiting for its grace period");
                escalate.cancel();
            }
            Press::Exit => {
                progress.note("mcpfleet: SIGKILL sent; confirming that every process is gone")
            }
        }
    }
}
