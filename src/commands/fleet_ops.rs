//! `up`, `down`, `status`, `reconnect`, `reset` and the hidden `supervise`: thin
//! clients of the supervisor. Each sends one request and renders its report; the
//! exit code is the report's, computed by the supervisor from docs/design.md §5.

use std::time::Duration;

use super::client::{self, ClientError};
use super::target::Target;
use super::{CliError, Global};
use crate::cli::{DownArgs, ReconnectArgs, ResetArgs, ServeArgs, StatusArgs, UpArgs};
use crate::config::Fleet;
use crate::host::{self, Unnamed};
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::state::Phase;
use crate::output::exit::Code;
use crate::output::progress::Progress;
use crate::output::report::{self, FailureKind, FailureReport, Format, Report, ServerReport};
use crate::process::lineage::ProcId;
use crate::process::table::Table;
use crate::protocol::{Deadlines, Op};
use crate::state::Persisted;
use crate::state::StateDir;
use super::Supervisor;

pub async fn up(
    t: Target,
    args: &UpArgs,
    g: &Global,
    supervisor: Supervisor,
) -> Result<Code, CliError> {
    // The supervisor inherits this process's limits: say now if they are too low.
    let files = crate::process::limits::raise_open_files();
    let starting = if args.servers.is_empty() {
        t.fleet.enabled().count()
    } else {
        args.servers.len()
    };
    if let Some(warning) = files.shortfall(starting) {
        tracing::warn!("{warning}");
    }
    if args.foreground {
        return foreground(t, args, g, supervisor).await;
    }
    if args.dry_run {
        return dry_run(t, args, g).await;
    }
    if args.watch {
        return super::watch::up(t, args, g).await;
    }
    send(&t, up_op(&t, args, false), true, "up", g).await
}

/// The `up` request of `args`, carrying the fleet file as `t` read it.
pub(super) fn up_op(t: &Target, args: &UpArgs, dry_run: bool) -> Op {
    Op::Up {
        servers: args.servers.clone(),
        force: args.force,
        deadlines: Deadlines {
            wait_ms: args.wait.wait_timeout,
            connect_ms: args.connect_timeout,
            cleanup_ms: None,
        },
        fleet: t.source.clone(),
        dry_run,
        remove_orphans: args.remove_orphans,
    }
}

/// `up --dry-run`: the plan, from the supervisor if one runs (never started for
/// this), else from the file alone: everything would start. Nothing changes.
async fn dry_run(t: Target, args: &UpArgs, g: &Global) -> Result<Code, CliError> {
    if client::connect(&t.dir, &t.fleet.file, false).await.is_ok() {
        return send(&t, up_op(&t, args, true), false, "up", g).await;
    }
    let selected = host::select(&t.fleet, &args.servers, Unnamed::Enabled)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let mut steps = crate::reconcile::plan(&t.fleet, &selected, &[], args.force, false);
    for step in &mut steps {
        step.added = false;
        step.note = Some("no supervisor runs: `up` starts one".into());
    }
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut lines = offline_lines(&t, &persisted, &args.servers)?;
    for line in &mut lines {
        line.exit_code = 0;
    }
    let mut report = Report::new("up", lines, false);
    report.plan = Some(steps);
    report.dry_run = true;
    emit(report, g)
}

/// Opens the gateway's HTTP door in the supervisor (starting it and the servers
/// as `up` does) and reports where it listens.
pub async fn serve(t: Target, args: &ServeArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Serve {
        servers: args.servers.clone(),
        listen: args.listen.clone(),
        deadlines: Deadlines {
            wait_ms: args.wait.wait_timeout,
            connect_ms: args.connect_timeout,
            cleanup_ms: None,
        },
        fleet: t.source.clone(),
    };
    send(&t, op, true, "serve", g).await
}

pub async fn down(t: Target, args: &DownArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Down {
        servers: args.servers.clone(),
        deadlines: Deadlines {
            wait_ms: args.wait.wait_timeout,
            connect_ms: None,
            cleanup_ms: args.cleanup_timeout,
        },
        strict: args.strict,
        fleet: t.source.clone(),
    };
    // With no supervisor, there is only something to do when a crashed one left
    // generations running or quarantined: then a new supervisor recovers them.
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let leftovers = persisted
        .servers
        .values()
        .any(|r| r.live.is_some() || r.quarantine.is_some());
    let running = client::connect(&t.dir, &t.fleet.file, false).await.is_ok();
    if !running && !leftovers {
        let lines = offline_lines(&t, &persisted, &args.servers)?;
        return emit(Report::new("down", lines, false), g);
    }
    let result = match ask(&t, op, true, "down", g).await {
        Ok(mut report) => {
            await_supervisor(&t, &mut report).await;
            Ok(report)
        }
        // A supervisor of another build: the whole fleet is stopped by signal
        // (docs/design.md §9); a part of it cannot be.
        Err(ClientError::OtherBuild { pid, speaks, .. }) if args.servers.is_empty() => {
            return super::other_build::stop(&t, pid, &speaks, g).await;
        }
        e => e,
    };
    finish(result, "down", g)
}

/// How long `down` of the whole fleet waits for the supervisor and its guardian
/// to exit once it has its report (docs/design.md §3). Beyond the moments an
/// idle supervisor takes, it covers the last export of traces to a collector
/// that does not answer (10 s by default).
const SUPERVISOR_EXIT_WAIT: Duration = Duration::from_secs(15);

/// After a `down` of the whole fleet: waits until the supervisor and its
/// guardian have exited, so that nothing of the fleet is left when `down`
/// returns, and marks the report `exited`. When the supervisor stays (it says
/// why) or does not exit in time, says so on stderr and makes the report's
/// code 5: a process of the fleet is left.
async fn await_supervisor(t: &Target, report: &mut Report) {
    let Some(sv) = report.supervisor.as_mut() else {
        return;
    };
    let left = |report: &mut Report| {
        report.exit_code = Code::from_i32(report.exit_code)
            .max(Code::TeardownNotClean)
            .as_i32();
    };
    if let Some(why) = &sv.stays {
        eprintln!(
            "mcpfleet down: every server is down, but the supervisor (pid {}) stays: {why}",
            sv.pid
        );
        left(report);
        return;
    }
    let ids: Vec<ProcId> = [Some(sv.pid), sv.guardian]
        .into_iter()
        .flatten()
        .filter_map(crate::platform::stat)
        .filter(|s| s.is_alive())
        .map(|s| ProcId::of(&s))
        .collect();
    let deadline = tokio::time::Instant::now() + SUPERVISOR_EXIT_WAIT;
    let mut poll = Duration::from_millis(1);
    loop {
        let alive: Vec<i32> = ids.iter().filter(|p| p.is_alive()).map(|p| p.pid).collect();
        if alive.is_empty() {
            sv.exited = true;
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            let pids: Vec<String> = alive.iter().map(i32::to_string).collect();
            eprintln!(
                "mcpfleet down: every server is down, but the supervisor or its guardian (pid {}) did not exit within {}s; see {}",
                pids.join(", "),
                SUPERVISOR_EXIT_WAIT.as_secs(),
                t.dir.supervisor_log().display()
            );
            left(report);
            return;
        }
        tokio::time::sleep(poll).await;
        poll = (poll * 2).min(Duration::from_millis(10));
    }
}

pub async fn reconnect(t: Target, args: &ReconnectArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Reconnect {
        servers: args.servers.clone(),
        if_generation: args.if_generation,
        force: args.force,
        deadlines: Deadlines {
            wait_ms: args.wait.wait_timeout,
            ..Deadlines::default()
        },
        strict: args.strict,
        fleet: t.source.clone(),
    };
    send(&t, op, true, "reconnect", g).await
}

pub async fn reset(t: Target, args: &ResetArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Reset {
        server: args.server.clone(),
    };
    send(&t, op, true, "reset", g).await
}

/// `status` never starts anything: with no supervisor it reads `state.json` and
/// looks at the processes it names.
pub async fn status(t: Target, args: &StatusArgs, g: &Global) -> Result<Code, CliError> {
    match client::connect(&t.dir, &t.fleet.file, false).await {
        Ok(stream) => {
            let op = Op::Status {
                servers: args.servers.clone(),
                fleet: t.source.clone(),
            };
            match client::request(stream, op, |_| {}).await {
                // The supervisor was exiting idle: nothing runs, as state.json says.
                Err(ClientError::Unread(_)) => offline_status(&t, args, g),
                result => finish(result, "status", g),
            }
        }
        Err(_) => offline_status(&t, args, g),
    }
}

/// `status` from `state.json` and the process table, with no supervisor.
fn offline_status(t: &Target, args: &StatusArgs, g: &Global) -> Result<Code, CliError> {
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let lines = offline_lines(t, &persisted, &args.servers)?;
    emit(Report::new("status", lines, false), g)
}

/// What `state.json` and the process table say when no supervisor runs.
fn offline_lines(
    t: &Target,
    persisted: &Persisted,
    names: &[String],
) -> Result<Vec<ServerReport>, CliError> {
    let selected = host::select(&t.fleet, names, Unnamed::All)
        .map_err(|e| CliError::Usage(format!("no server named {:?} in this fleet", e.0)))?;
    let selected: Vec<&str> = selected.iter().map(|s| s.name.as_str()).collect();
    Ok(offline_report(&t.fleet, &t.dir, persisted, &selected))
}

/// The lines of the servers of `fleet` named in `selected`, from `state.json` and
/// the process table, with no supervisor: a server is running while the main process of its
/// recorded generation is, and anything else of it alive is a leftover.
pub(super) fn offline_report(
    fleet: &Fleet,
    dir: &StateDir,
    persisted: &Persisted,
    selected: &[&str],
) -> Vec<ServerReport> {
    let scope = crate::state::tag_scope(dir);
    let mut lines = Vec::new();
    let table = Table::scan();
    // In fleet order, whatever the order of the names.
    for spec in &fleet.servers {
        if !selected.contains(&spec.name.as_str()) {
            continue;
        }
        let rec = persisted
            .servers
            .get(&spec.name)
            .cloned()
            .unwrap_or_default();
        let mut state = Phase::Stopped;
        let mut pid = None;
        let mut code = Code::Ok;
        let mut error = None;
        // Every living process of any generation of this server, found by its tag:
        // also one whose generation's record never reached state.json (a
        // supervisor killed right after a spawn).
        let alive = table.tagged_with_prefix(&format!("{scope}:{}:", spec.name));
        if !alive.is_empty() {
            // Running only while the main process of its recorded generation is:
            // anything else (a grandchild, say) is a leftover.
            let leader = rec
                .live
                .as_ref()
                .filter(|live| alive.iter().any(|(p, _)| p.pid == live.pid))
                .map(|live| live.pid);
            state = if leader.is_some() {
                Phase::Running
            } else {
                Phase::Quarantined
            };
            pid = leader;
            let pids: Vec<String> = alive.iter().map(|(p, _)| p.pid.to_string()).collect();
            error = Some(ServerError::new(
                ErrorKind::Quarantined,
                ErrorPhase::Request,
                format!(
                    "left running by a supervisor that is gone (pids {}); the next `up` or `down` recovers it",
                    pids.join(", ")
                ),
            ));
            code = Code::TeardownNotClean;
        }
        if let Some(q) = &rec.quarantine {
            state = Phase::Quarantined;
            code = Code::TeardownNotClean;
            error = Some(ServerError::new(
                ErrorKind::Quarantined,
                ErrorPhase::Teardown,
                q.message.clone(),
            ));
        }
        let mut line =
            ServerReport::unpublished(&spec.name, spec.transport.kind(), state, error, code);
        line.generation = (rec.last_generation > 0).then_some(rec.last_generation);
        line.pid = pid;
        lines.push(line);
    }
    lines
}

pub(super) async fn send(
    t: &Target,
    op: Op,
    start: bool,
    command: &'static str,
    g: &Global,
) -> Result<Code, CliError> {
    finish(ask(t, op, start, command, g).await, command, g)
}

/// Sends `op` (starting a supervisor when `start`), showing its progress and
/// events as the output format asks, and returns its report.
async fn ask(
    t: &Target,
    op: Op,
    start: bool,
    command: &'static str,
    g: &Global,
) -> Result<Report, ClientError> {
    let ndjson = g.output == Format::Ndjson;
    let verbose = g.verbose > 0 && g.output == Format::Text;
    let progress = Progress::new(!g.quiet && g.output == Format::Text && g.verbose == 0);
    let total = match &op {
        Op::Up { servers, .. } | Op::Down { servers, .. } | Op::Reconnect { servers, .. }
            if !servers.is_empty() =>
        {
            servers.len()
        }
        _ => t.fleet.servers.len(),
    };
    progress.stage(command, total);
    let result = client::ask(&t.dir, &t.fleet.file, start, op, |event| {
        // A server is done when it reaches a state that ends the request for it.
        let settled =
            matches!(
                event.to,
                Phase::Running | Phase::Failed | Phase::Quarantined
            ) || (event.to == Phase::Stopped && event.from == Phase::Stopping && command == "down");
        if settled {
            progress.done_one(&event.server);
        }
        if ndjson {
            let _ = report::write_stdout(&report::event_line(&event));
        } else if verbose {
            let (from, to) = (event.from.as_str(), event.to.as_str());
            eprintln!("{:?} {from:?} -> {to:?}", event.server);
        }
    })
    .await;
    progress.finish();
    result
}

pub(super) fn finish(
    result: Result<Report, ClientError>,
    command: &'static str,
    g: &Global,
) -> Result<Code, CliError> {
    match result {
        Ok(report) => emit(report, g),
        Err(e) => {
            let interrupted = format!(
                "mcpfleet {command}: interrupted; the supervisor carries on with the request (see `mcpfleet status` and `mcpfleet events`)"
            );
            no_report(e, command, &interrupted, g)
        }
    }
}

/// What a request that got no report ends in: an interruption (130, after
/// `interrupted` on stderr), a usage error, an internal error, or an unreachable
/// supervisor.
pub(super) fn no_report(
    e: ClientError,
    command: &str,
    interrupted: &str,
    g: &Global,
) -> Result<Code, CliError> {
    match e {
        ClientError::Interrupted => {
            eprintln!("{interrupted}");
            Ok(Code::Interrupted)
        }
        ClientError::Refused(m) if m.starts_with("usage: ") => {
            Err(CliError::Usage(m["usage: ".len()..].to_owned()))
        }
        ClientError::Refused(m) | ClientError::Unreadable(m) => {
            Err(CliError::Internal(anyhow::anyhow!(m)))
        }
        e @ (ClientError::Unreachable(_) | ClientError::Unread(_)) => {
            Ok(unreachable(command, &e, g))
        }
        e @ ClientError::OtherBuild { .. } => Ok(super::other_build::refuse(command, &e, g)),
    }
}

/// Reports a supervisor that could not be reached (or was lost mid-request) on
/// stderr and, for scripts reading JSON, as a document on stdout. Returns 8.
pub(super) fn unreachable(command: &str, e: &ClientError, g: &Global) -> Code {
    eprintln!("mcpfleet {command}: {e}");
    if g.output != Format::Text {
        let error = FailureReport {
            kind: FailureKind::Unreachable,
            message: e.to_string(),
        };
        let doc = super::failed_command(command, Code::Unreachable, error, None);
        let _ = report::write_stdout(&report::json_line(&doc));
    }
    Code::Unreachable
}

pub(super) fn emit(report: Report, g: &Global) -> Result<Code, CliError> {
    report::write_stdout(&report::render(&report, g.output))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    Ok(Code::from_i32(report.exit_code))
}

/// `up --foreground`: the supervisor runs in this terminal until Ctrl-C, which
/// means `down` with all its guarantees (a second SIGKILLs, a third exits).
async fn foreground(
    t: Target,
    args: &UpArgs,
    g: &Global,
    supervisor: Supervisor,
) -> Result<Code, CliError> {
    if client::connect(&t.dir, &t.fleet.file, false).await.is_ok() {
        return Err(CliError::Usage(format!(
            "a supervisor already runs for this fleet ({}); stop it with `mcpfleet down` first",
            t.dir.root().display()
        )));
    }
    if let Err(e) = host::select(&t.fleet, &args.servers, Unnamed::Enabled) {
        let first = &e.0[0];
        return Err(CliError::Usage(format!(
            "no server named `{first}` in this fleet"
        )));
    }
    let output = g.output;
    let code = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let seen = code.clone();
    let on_started = Box::new(move |report: Report| {
        seen.store(report.exit_code, std::sync::atomic::Ordering::SeqCst);
        let _ = report::write_stdout(&report::render(&report, output));
        eprintln!("mcpfleet: running in the foreground; Ctrl-C tears everything down");
    });
    let fg = crate::host::Foreground {
        servers: args.servers.clone(),
        on_started,
    };
    // With --watch, the changes of the file are sent to this supervisor like any
    // client's; the watch ends with it.
    let watching = args.watch.then(|| {
        let watched = Target {
            fleet: t.fleet.clone(),
            dir: t.dir.clone(),
            source: t.source.clone(),
            path: t.path.clone(),
        };
        tokio::spawn(super::watch::alongside(watched, args.clone(), g.clone()))
    });
    let text = t.text();
    let version = t.source.as_ref().and_then(|s| s.version);
    let teardown = supervisor(t.fleet, t.dir, text, version, Some(fg)).await;
    if let Some(task) = watching {
        task.abort();
    }
    let teardown = teardown?;
    // The start's outcome and the final teardown's, ranked (a quarantine is a 5).
    Ok(Code::from_i32(code.load(std::sync::atomic::Ordering::SeqCst)).max(teardown))
}

/// `mcpfleet supervise`: the supervisor process itself.
pub async fn supervise(t: Target, supervisor: Supervisor) -> Result<Code, CliError> {
    let text = t.text();
    let version = t.source.as_ref().and_then(|s| s.version);
    supervisor(t.fleet, t.dir, text, version, None).await?;
    // Give a last log line a chance to reach supervisor.log.
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok(Code::Ok)
}
