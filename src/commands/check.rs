//! `mcpfleet check`: the CI job. In one process and with no daemon, it starts the
//! selected servers in parallel (at most `--jobs` starts at once, so that each start
//! gets the machine it needs to meet its own deadline), lists their tools, tears
//! them all down in parallel, and reports what happened to each, verified.
//!
//! A first Ctrl-C (or SIGTERM) interrupts the starts in progress; everything that
//! was acquired is still torn down, and the command exits 130. A second one sends
//! SIGKILL at once instead of waiting for the grace periods.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{CliError, Global, load_fleet};
use crate::cli::CheckArgs;
use crate::config::{Fleet, ServerSpec, Timeout};
use crate::lifecycle::authority::{
    self, CallOptions, Context, Handle, Reply, RequestError, ServerConfig,
};
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::events::EventSink;
use crate::lifecycle::state::{Intent, Phase};
use crate::output::exit::Code;
use crate::output::line::{RequestParts, unanswered};
use crate::output::progress::Progress;
use crate::output::report::{self, Format, NdjsonEvents, Report, ServerReport, TracingEvents};

pub async fn run(file: Option<&Path>, args: &CheckArgs, global: &Global) -> Result<Code, CliError> {
    let fleet = load_fleet(file)?;
    let specs = select(&fleet, &args.servers)?;
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

    progress.stage("starting", handles.len());
    let starts = start_all(&handles, jobs, options, &ctx.interrupt, &progress).await;
    progress.stage("stopping", handles.len());
    let stops = stop_all(&handles, options, &progress).await;
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

/// The servers to check: the named ones (which must exist), else every enabled one.
fn select<'a>(fleet: &'a Fleet, names: &[String]) -> Result<Vec<&'a ServerSpec>, CliError> {
    if names.is_empty() {
        return Ok(fleet.enabled().collect());
    }
    let mut picked: Vec<&ServerSpec> = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        match fleet.server(name) {
            Some(spec) if !picked.iter().any(|p| p.name == spec.name) => picked.push(spec),
            Some(_) => {}
            None => unknown.push(name.as_str()),
        }
    }
    if !unknown.is_empty() {
        let known: Vec<&str> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
        return Err(CliError::Usage(format!(
            "no server named {} in {} (servers: {})",
            unknown
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            fleet.file.display(),
            known.join(", ")
        )));
    }
    Ok(picked)
}

/// Starts every server, at most `jobs` at once. A server whose turn has not come
/// when the run is interrupted is not started at all.
async fn start_all(
    handles: &[Handle],
    jobs: usize,
    options: CallOptions,
    interrupt: &CancellationToken,
    progress: &Progress,
) -> Vec<Option<Result<Reply, RequestError>>> {
    let permits = Arc::new(Semaphore::new(jobs));
    let mut set = JoinSet::new();
    for (i, handle) in handles.iter().enumerate() {
        let (handle, permits, interrupt) = (handle.clone(), permits.clone(), interrupt.clone());
        set.spawn(async move {
            let permit = tokio::select! {
                biased;
                _ = interrupt.cancelled() => None,
                p = permits.acquire_owned() => p.ok(),
            };
            let reply = match permit {
                Some(_permit) => Some(handle.request(Intent::Start, options).await),
                None => None,
            };
            (i, reply)
        });
    }
    collect(set, handles.len(), progress).await
}

/// Tears every server down, all at once: teardowns wait mostly on grace periods.
async fn stop_all(
    handles: &[Handle],
    options: CallOptions,
    progress: &Progress,
) -> Vec<Option<Result<Reply, RequestError>>> {
    let mut set = JoinSet::new();
    for (i, handle) in handles.iter().enumerate() {
        let handle = handle.clone();
        set.spawn(async move { (i, Some(handle.request(Intent::Stop, options).await)) });
    }
    collect(set, handles.len(), progress).await
}

async fn collect(
    mut set: JoinSet<(usize, Option<Result<Reply, RequestError>>)>,
    n: usize,
    progress: &Progress,
) -> Vec<Option<Result<Reply, RequestError>>> {
    let mut out: Vec<Option<Result<Reply, RequestError>>> = (0..n).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, reply)) => {
                if let Some(Ok(r)) = &reply {
                    progress.done_one(&r.snapshot.name);
                } else {
                    progress.done_one("");
                }
                out[i] = reply;
            }
            Err(e) => tracing::error!(error = %e, "a check task failed"),
        }
    }
    out
}

/// Merges a server's start and stop replies into its line of the report: what the
/// start found (generation, tools, server, connect time) and where the stop left
/// the server. Nothing of it runs any more: no uptime, restarts or retry.
fn server_report(
    spec: &ServerSpec,
    start: Option<Result<Reply, RequestError>>,
    stop: Option<Result<Reply, RequestError>>,
    strict: bool,
) -> ServerReport {
    let (start, start_err) = match start {
        Some(Ok(r)) => (Some(r), None),
        Some(Err(e)) => (None, Some(unanswered(&e))),
        None => (
            None,
            Some(ServerError::new(
                ErrorKind::Cancelled,
                ErrorPhase::Request,
                "not started: the check was interrupted",
            )),
        ),
    };
    let (stop, stop_err) = match stop {
        Some(Ok(r)) => (Some(r), None),
        Some(Err(e)) => (None, Some(unanswered(&e))),
        None => (None, None),
    };
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
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!(
            "cannot install signal handlers; Ctrl-C will end the process without teardown"
        );
        return;
    };
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        if escalate.is_cancelled() {
            progress.note("mcpfleet: SIGKILL sent; confirming that every process is gone");
        } else if interrupt.is_cancelled() {
            progress.note("mcpfleet: second signal: SIGKILL to every server instead of waiting for its grace period");
            escalate.cancel();
        } else {
            progress.note("mcpfleet: interrupted; tearing down every server that was started");
            interrupt.cancel();
        }
    }
}
