//! `up`, `down`, `status`, `reconnect`, `reset` and the hidden `supervise`: thin
//! clients of the supervisor. Each sends one request and renders its report; the
//! exit code is the report's, computed by the supervisor from docs/design.md §5.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use super::client::{self, ClientError};
use super::target::Target;
use super::{CliError, Global};
use crate::cli::{DownArgs, ReconnectArgs, ResetArgs, ServeArgs, StatusArgs, UpArgs};
use crate::host::{self, Foreground, Unnamed};
use crate::output::exit::Code;
use crate::output::report::{self, Report, ServerReport};
use crate::process::lineage::ProcId;
use crate::protocol::{Deadlines, FileVersion, Op};
use crate::config::Fleet;
use crate::state::{Persisted, StateDir};
use super::answer::{emit, offline_report};
use super::request::{ask, finish, send, up_op};

/// The supervisor, as `up --foreground` and `supervise` run it in this process:
/// the binary passes `supervisor::run`, so that the commands, which only send it
/// requests otherwise, do not depend on it (docs/architecture.md,
/// "Dependencies"). The arguments are `supervisor::run`'s: the fleet, its state
/// directory, the fleet file's text as read and its version, and what `up
/// --foreground` asks.
pub type Supervisor = fn(
    Fleet,
    StateDir,
    Option<String>,
    Option<FileVersion>,
    Option<Foreground<Report>>,
) -> Pin<Box<dyn Future<Output = anyhow::Result<Code>>>>;

pub(crate) async fn up(
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
pub(crate) async fn serve(t: Target, args: &ServeArgs, g: &Global) -> Result<Code, CliError> {
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

pub(crate) async fn down(t: Target, args: &DownArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Down {
        servers: args.servers.clone(),
        deadlines: Deadlines {
            wait_ms: args.wait.wait_timeout,
            connect_ms: None,
            cleanup_ms: args.cleanup_timeout,
        },
        strict: args.strict,
        fleet: t.source.clone(),
        host: args.host.clone(),
    };
    if args.host.is_some() && t.fleet.coordination.is_none() {
        return Err(CliError::Usage(
            "--host drains one host of a fleet across hosts; this fleet file has no `coordination:`".into(),
        ));
    }
    // With no supervisor, there is only something to do when a crashed one left
    // generations running or quarantined: then a new supervisor recovers them.
    // `state.json` may not know a generation whose record a killed supervisor
    // never wrote; its processes carry the fleet's tag, and recovery finds them
    // by it, so they count too.
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let recorded = persisted
        .servers
        .values()
        .any(|r| r.live.is_some() || r.quarantine.is_some());
    let running = client::connect(&t.dir, &t.fleet.file, false).await.is_ok();
    let leftovers = recorded || (!running && tagged_alive(&t.dir));
    // A fleet across hosts is stopped through a supervisor even when none runs
    // here: the servers may run on other hosts (docs/design.md §19).
    let spans_hosts = t.fleet.coordination.is_some();
    if !running && !leftovers && !spans_hosts {
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

/// Whether a living process carries the tag of this state directory's fleet.
fn tagged_alive(dir: &StateDir) -> bool {
    let prefix = format!("{}:", crate::state::tag_scope(dir));
    !crate::process::table::Table::scan()
        .tagged_with_prefix(&prefix)
        .is_empty()
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

pub(crate) async fn reconnect(t: Target, args: &ReconnectArgs, g: &Global) -> Result<Code, CliError> {
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

pub(crate) async fn reset(t: Target, args: &ResetArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Reset {
        server: args.server.clone(),
    };
    send(&t, op, true, "reset", g).await
}

/// `status` never starts anything: with no supervisor it reads `state.json` and
/// looks at the processes it names.
pub(crate) async fn status(t: Target, args: &StatusArgs, g: &Global) -> Result<Code, CliError> {
    match client::connect(&t.dir, &t.fleet.file, false).await {
        Ok(stream) => {
            let op = Op::Status {
                servers: args.servers.clone(),
                fleet: t.source.clone(),
            };
            match client::request(stream, op, |_| {}).await {
                // The supervisor was exiting idle: nothing runs, as state.json says.
                Err(ClientError::Unread(_)) => offline_status(&t, args, g).await,
                result => finish(
                    result.map(|r| super::auth::with_auth_statuses(r, &t)),
                    "status",
                    g,
                ),
            }
        }
        Err(_) => offline_status(&t, args, g).await,
    }
}

/// `status` from `state.json` and the process table, with no supervisor; in a
/// fleet across hosts, with where etcd says each server runs.
async fn offline_status(t: &Target, args: &StatusArgs, g: &Global) -> Result<Code, CliError> {
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let lines = offline_lines(t, &persisted, &args.servers)?;
    let report = super::auth::with_auth_statuses(Report::new("status", lines, false), t);
    #[cfg(feature = "etcd")]
    let report = placed_elsewhere(t, report).await;
    emit(report, g)
}

/// Shows, on a host whose supervisor is not running, the servers of a fleet
/// across hosts that other hosts run, as etcd says (one read, no lease).
#[cfg(feature = "etcd")]
async fn placed_elsewhere(t: &Target, mut report: Report) -> Report {
    let Some(spec) = &t.fleet.coordination else {
        return report;
    };
    let endpoints = match spec.endpoints_here() {
        Ok(endpoints) => endpoints,
        Err(e) => {
            eprintln!("mcpfleet status: {e}; showing this host's state only");
            return report;
        }
    };
    let all = match crate::coordination::read(&endpoints, spec.tls.as_ref(), &t.fleet.coordination_prefix()).await {
        Ok(all) => all,
        Err(e) => {
            eprintln!("mcpfleet status: cannot read the fleet from etcd ({e}); showing this host's state only");
            return report;
        }
    };
    for line in &mut report.servers {
        let Some(rec) = all.get(&line.name) else {
            continue;
        };
        let Some(host) = rec.owner.clone() else {
            continue;
        };
        match line.state == crate::lifecycle::state::Phase::Stopped {
            true => line.runs_elsewhere(host, crate::coordination::generation_of(rec)),
            false => line.host = Some(host),
        }
    }
    report.rank();
    report
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
    // client's; the watch ends with it, and is waited for.
    let tasks = TaskTracker::new();
    let watching = args.watch.then(|| {
        let watched = Target {
            fleet: t.fleet.clone(),
            dir: t.dir.clone(),
            source: t.source.clone(),
            path: t.path.clone(),
        };
        tasks.spawn(super::watch::alongside(watched, args.clone(), g.clone()))
    });
    let text = t.text();
    let version = t.source.as_ref().and_then(|s| s.version);
    let teardown = supervisor(t.fleet, t.dir, text, version, Some(fg)).await;
    if let Some(task) = watching {
        task.abort();
    }
    tasks.close();
    tasks.wait().await;
    let teardown = teardown?;
    // The start's outcome and the final teardown's, ranked (a quarantine is a 5).
    Ok(Code::from_i32(code.load(std::sync::atomic::Ordering::SeqCst)).max(teardown))
}

/// `mcpfleet supervise`: the supervisor process itself.
pub(crate) async fn supervise(t: Target, supervisor: Supervisor) -> Result<Code, CliError> {
    let text = t.text();
    let version = t.source.as_ref().and_then(|s| s.version);
    supervisor(t.fleet, t.dir, text, version, None).await?;
    // Give a last log line a chance to reach supervisor.log.
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok(Code::Ok)
}
