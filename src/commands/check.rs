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
//!
//! For CI, the run can also be a JUnit XML report (`--junit`), and each server's
//! tools can be held to a snapshot file (`--expect-tools`, written by
//! `--update-tools`): docs/design.md §6. Those files are read before anything
//! starts, so that a bad one costs no run, and written atomically at the end.

use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{CliError, Global, load_fleet, write_atomically};
use crate::cli::CheckArgs;
use crate::config::{Fleet, ServerSpec, Timeout};
use crate::contract::ToolsFile;
use crate::host::{self, Press, Signals, Unnamed};
use crate::lifecycle::authority::{
    self, CallOptions, Context, Handle, ListedTool, Reply, RequestError, ServerConfig,
};
use crate::lifecycle::events::EventSink;
use crate::lifecycle::state::{Intent, Phase};
use crate::output::contract::ContractSummary;
use crate::output::exit::Code;
use crate::output::junit;
use crate::output::line::{RequestParts, unanswered};
use crate::output::progress::Progress;
use crate::output::report::{self, Format, NdjsonEvents, Report, ServerReport, TracingEvents};

pub(crate) async fn run(
    file: Option<&Path>,
    state_dir: Option<&Path>,
    args: &CheckArgs,
    global: &Global,
) -> Result<Code, CliError> {
    let fleet = load_fleet(file)?;
    // Where the tokens of remote servers with `auth:` are kept: the state
    // directory `up` would use (nothing is written there unless a token is
    // obtained or renewed).
    let auth_root = crate::state::StateDir::locate(&fleet, state_dir).ok();
    let specs = host::select(&fleet, &args.servers, Unnamed::Enabled)
        .map_err(|e| CliError::unknown_servers(&fleet, &e))?;
    let expected = match &args.expect_tools {
        Some(path) => Some(read_tools(path)?),
        None => None,
    };
    // The entries an update keeps come from the file as it is now.
    let previous = match &args.update_tools {
        Some(path) if path.exists() => Some(read_tools(path)?),
        _ => None,
    };
    for path in [&args.junit, &args.update_tools].into_iter().flatten() {
        writable(path)?;
    }
    let began = (SystemTime::now(), Instant::now());
    let files = crate::process::limits::raise_open_files();
    if let Some(warning) = files.shortfall(specs.len()) {
        tracing::warn!("{warning}");
    }
    // Orphans of the servers come back to this process, which keeps every
    // server's lineage current while they run (L13).
    crate::process::lineage::become_subreaper();
    let sweeping = CancellationToken::new();
    // `check`'s own tasks beside the authorities (the sweeper, the signal
    // watcher): stopped and waited for before the last sweep and the report.
    let helpers = TaskTracker::new();
    helpers.spawn(crate::process::lineage::keep_current(sweeping.clone()));
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
    let signals = helpers.spawn(watch_signals(
        ctx.interrupt.clone(),
        ctx.escalate.clone(),
        progress.clone(),
    ));

    let handles: Vec<Handle> = specs
        .iter()
        .map(|spec| {
            let config = ServerConfig::from_spec(spec, None, auth_root.as_deref());
            authority::spawn(config, 0, ctx.clone())
        })
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
    helpers.close();
    helpers.wait().await;
    // The last dead orphans are collected before the report.
    crate::process::lineage::sweep().await;

    let interrupted = ctx.interrupt.is_cancelled();
    // What each server listed, when it started.
    let listed: Vec<Option<Arc<[ListedTool]>>> = starts
        .iter()
        .map(|r| match r {
            Ok(Reply {
                result: Ok(()),
                listed,
                ..
            }) => listed.clone(),
            _ => None,
        })
        .collect();
    let servers: Vec<ServerReport> = specs
        .iter()
        .zip(starts)
        .zip(stops)
        .zip(&listed)
        .map(|(((spec, start), stop), listed)| {
            let mut line = server_report(spec, start, stop, args.strict);
            if let Some(expected) = &expected {
                let contract = expected.compare(&spec.name, listed.as_deref());
                if contract.differs() {
                    line.exit_code = Code::from_i32(line.exit_code)
                        .max(Code::ToolsDiffer)
                        .as_i32();
                }
                line.tools_contract = Some(contract);
            }
            line
        })
        .collect();
    let mut report = Report::new("check", servers, interrupted);
    // A file that cannot be written is an I/O error of mcpfleet itself (1), ranked
    // below whatever the servers did (docs/design.md §5).
    let mut code = Code::from_i32(report.exit_code);
    if expected.is_some() || args.update_tools.is_some() {
        let names: Vec<&str> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
        let missing = expected
            .as_ref()
            .map_or_else(Vec::new, |e| e.missing(&names));
        if !missing.is_empty() {
            code = code.max(Code::ToolsDiffer);
        }
        let mut updated_file = None;
        if let Some(path) = &args.update_tools {
            let found: Vec<(&str, Option<&[ListedTool]>)> = specs
                .iter()
                .zip(&listed)
                .map(|(spec, l)| (spec.name.as_str(), l.as_deref()))
                .collect();
            let file = ToolsFile::updated(previous.as_ref(), &names, &found);
            match update_tools(path, &file, &found, interrupted) {
                Ok(true) => updated_file = Some(path.display().to_string()),
                Ok(false) => {}
                Err(e) => {
                    eprintln!("mcpfleet check: cannot write {}: {e}", path.display());
                    code = code.max(Code::Internal);
                }
            }
        }
        report.tools_contract = Some(ContractSummary {
            expected_file: args.expect_tools.as_ref().map(|p| p.display().to_string()),
            missing_servers: missing,
            updated_file,
        });
    }
    report.exit_code = code.as_i32();
    if let Some(path) = &args.junit {
        let suite = suite(&fleet, &specs, args, began);
        if let Err(e) = write_atomically(path, junit::render(&report, &suite).as_bytes()) {
            eprintln!("mcpfleet check: cannot write {}: {e}", path.display());
            report.exit_code = code.max(Code::Internal).as_i32();
        }
    }
    report::write_stdout(&report::render(&report, global.output))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    if interrupted {
        eprintln!("mcpfleet check: interrupted; every server that was started has been torn down");
    }
    Ok(Code::from_i32(report.exit_code))
}

/// Writes the snapshot `--update-tools` asked for, unless the run was interrupted
/// (it did not see every server to the end); says which servers keep their old
/// entry. True when it was written.
fn update_tools(
    path: &Path,
    file: &ToolsFile,
    found: &[(&str, Option<&[ListedTool]>)],
    interrupted: bool,
) -> std::io::Result<bool> {
    if interrupted {
        eprintln!(
            "mcpfleet check: interrupted; {} was not updated",
            path.display()
        );
        return Ok(false);
    }
    for (name, _) in found.iter().filter(|(_, listed)| listed.is_none()) {
        eprintln!(
            "mcpfleet check: the tools of `{name}` were not updated in {}: it did not start",
            path.display()
        );
    }
    write_atomically(path, file.render().as_bytes())?;
    Ok(true)
}

/// Reads a snapshot of tools; a file that is missing or not one is a usage
/// error, found before anything starts.
fn read_tools(path: &Path) -> Result<ToolsFile, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::Usage(format!(
            "cannot read the tools snapshot {}: {e}",
            path.display()
        ))
    })?;
    ToolsFile::parse(&text).map_err(|e| {
        CliError::Usage(format!(
            "invalid tools snapshot {} (remove it to write a new one with --update-tools)",
            e.at_file(path)
        ))
    })
}

/// A file to write at the end must have a directory to go in, found now rather
/// than after the run.
fn writable(path: &Path) -> Result<(), CliError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(CliError::Usage(format!(
            "{} is a directory, not a file to write",
            path.display()
        )));
    }
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "cannot write {}: no directory {}",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The JUnit report's account of the run: the fleet as its suite, and the
/// servers of the fleet this run left out.
fn suite(
    fleet: &Fleet,
    specs: &[&ServerSpec],
    args: &CheckArgs,
    (began, clock): (SystemTime, Instant),
) -> junit::Suite {
    let file = fleet.file.display().to_string();
    let class = match &fleet.name {
        Some(name) => name.clone(),
        None => fleet.file.file_stem().map_or_else(
            || "fleet".to_owned(),
            |s| s.to_string_lossy().replace('.', "_"),
        ),
    };
    let skipped = fleet
        .servers
        .iter()
        .filter(|s| !specs.iter().any(|p| p.name == s.name))
        .map(|s| {
            let why = match s.enabled {
                false => "disabled in the fleet file (enabled: false)",
                true => "not selected: the command line named other servers",
            };
            (s.name.clone(), why.to_owned())
        })
        .collect();
    let hostname = crate::platform::hostname().unwrap_or_else(|| "localhost".to_owned());
    junit::Suite {
        name: fleet.name.clone().unwrap_or_else(|| file.clone()),
        class,
        file,
        timestamp: humantime::format_rfc3339_seconds(began).to_string(),
        hostname,
        time: clock.elapsed(),
        skipped,
        tools_file: args.expect_tools.as_ref().map(|p| p.display().to_string()),
    }
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
    line.protocol_version = started.and_then(|s| s.protocol_version.clone());
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
                progress.note("mcpfleet: SIGKILL sent; confirming that every process is gone");
            }
        }
    }
}
