//! A supervisor of another mcpfleet build (docs/design.md §9, "Versions"): one
//! started before this binary was installed, which refuses this CLI's requests
//! because it speaks another version of the control protocol. Stopping never
//! needs what starting needed: `down` of the whole fleet stops it by SIGTERM,
//! whose handling in every build tears every server down (verified, recorded in
//! the event log), waits for it and its guardian to be gone, and checks on
//! `state.json` and the process table that nothing of the fleet is left. Every
//! other command says what the supervisor is and how to get past it (exit 8).

use std::time::Duration;

use super::client::{ClientError, describe_other_build};
use super::answer::{emit, offline_report};
use super::target::Target;
use super::{CliError, Global};
use crate::config::DEFAULT_TIMEOUT;
use crate::output::exit::Code;
use crate::output::report::{self, FailureKind, FailureReport, Format, Report, SupervisorReport};
use crate::platform::{self, Signal};
use crate::process::lineage::ProcId;
use crate::state::Persisted;
use crate::state;

/// Beyond the fleet's longest cleanup timeout, how long `down` waits for a
/// supervisor it stopped by signal to be gone: as long as it waits for one that
/// leaves after its own `down` (the last export of traces, the guardian's pass).
const MARGIN: Duration = Duration::from_secs(15);

/// Says on stderr (and in a JSON document) that `command` could not be served
/// by the supervisor of another build, and how to get past it; returns 8.
pub(super) fn refuse(command: &str, e: &ClientError, g: &Global) -> Code {
    let ClientError::OtherBuild {
        pid,
        speaks,
        message,
    } = e
    else {
        return super::answer::unreachable(command, e, g);
    };
    let fix = if command == "down" {
        "`mcpfleet down` with no server named stops the whole fleet (by signal; the supervisor \
         tears its servers down), or run `down SERVER...` with the mcpfleet build that started it"
            .to_owned()
    } else {
        format!("stop it with `mcpfleet down` (by signal; it tears its servers down), then run `mcpfleet {command}` again")
    };
    let message = format!(
        "{} (it answered: {message}); {fix}",
        describe_other_build(*pid, speaks)
    );
    eprintln!("mcpfleet {command}: {message}");
    if g.output != Format::Text {
        let error = FailureReport {
            kind: FailureKind::Unreachable,
            message,
        };
        let doc = super::cli_error::failed_command(command, Code::Unreachable, error, None);
        let _ = report::write_stdout(&report::json_line(&doc));
    }
    Code::Unreachable
}

/// `down` of the whole fleet when its supervisor is of another build: SIGTERM
/// to the holder of `supervisor.lock` (`pid`, the socket's peer, when the lock
/// names none), a bounded wait until the lock is free and the supervisor and its
/// guardian are gone, then the fleet as `state.json` and the process table show
/// it: 0 when nothing is left, 5 when something is or the supervisor stays.
pub(super) async fn stop(
    t: &Target,
    pid: Option<i32>,
    speaks: &[u32],
    g: &Global,
) -> Result<Code, CliError> {
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let root = t.dir.root();
    let holder = match state::supervisor_runs(root) {
        Ok(true) => super::ls::supervisor_pid(root, &persisted),
        _ => None,
    };
    let supervisor = holder
        .or(pid)
        .and_then(platform::stat)
        .filter(|s| s.is_alive());
    let guardian = supervisor.and_then(|s| guardian_of(s, &persisted));
    let supervisor = supervisor.map(|s| ProcId::of(&s));
    let who = describe_other_build(supervisor.map(|s| s.pid), speaks);
    if let Some(sv) = supervisor {
        platform::signal_pinned(sv.pid, Signal::SIGTERM, || sv.is_alive());
    }
    let bound = exit_bound(t);
    let deadline = tokio::time::Instant::now() + bound;
    let mut poll = Duration::from_millis(5);
    let left = loop {
        let locked = state::supervisor_runs(root).unwrap_or(false);
        let alive: Vec<i32> = [supervisor, guardian]
            .into_iter()
            .flatten()
            .filter(ProcId::is_alive)
            .map(|p| p.pid)
            .collect();
        if !locked && alive.is_empty() {
            break None;
        }
        if tokio::time::Instant::now() >= deadline {
            break Some((locked, alive));
        }
        tokio::time::sleep(poll).await;
        poll = (poll * 2).min(Duration::from_millis(50));
    };
    let mut report = Report::new("down", Vec::new(), false);
    report.supervisor = supervisor.map(|sv| SupervisorReport {
        pid: sv.pid,
        guardian: guardian.map(|g| g.pid),
        stays: None,
        exited: left.is_none(),
    });
    if let Some((locked, alive)) = left {
        let pids: Vec<String> = alive.iter().map(i32::to_string).collect();
        let what = match pids.is_empty() {
            false => format!("pid {} still running", pids.join(", ")),
            true if locked => "a process still holds its lock".to_owned(),
            true => "still running".to_owned(),
        };
        let why = format!(
            "not gone {}s after SIGTERM ({what}): its teardowns may still be running; see `mcpfleet events` and {}",
            bound.as_secs(),
            t.dir.supervisor_log().display()
        );
        eprintln!("mcpfleet down: {who}; {why}");
        if let Some(sv) = report.supervisor.as_mut() {
            sv.stays = Some(why);
        }
        report.exit_code = Code::TeardownNotClean.as_i32();
        if g.output == Format::Text {
            return Ok(Code::TeardownNotClean);
        }
        return emit(report, g);
    }
    eprintln!(
        "mcpfleet down: {who}; stopped it with SIGTERM, and it tore its servers down itself: \
         the result of each is in its event log (`mcpfleet events`)"
    );
    // What is left of the fleet, as `status` sees it without a supervisor.
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let names: Vec<&str> = t.fleet.servers.iter().map(|s| s.name.as_str()).collect();
    let lines = offline_report(&t.fleet, &t.dir, &persisted, &names);
    let left: Vec<String> = lines
        .iter()
        .filter(|l| l.exit_code != 0)
        .map(|l| {
            let why = l.error.as_ref().map(|e| e.message.as_str()).unwrap_or("");
            format!("`{}` ({why})", l.name)
        })
        .collect();
    if !left.is_empty() {
        eprintln!(
            "mcpfleet down: left after the supervisor stopped: {}",
            left.join("; ")
        );
    }
    let supervisor = report.supervisor.take();
    let mut report = Report::new("down", lines, false);
    report.supervisor = supervisor;
    emit(report, g)
}

/// The guardian of the supervisor `sv`: the one `state.json` records for it,
/// else its parent when that is an `mcpfleet __guard`.
fn guardian_of(sv: platform::ProcStat, persisted: &Persisted) -> Option<ProcId> {
    let recorded = persisted
        .supervisor
        .as_ref()
        .filter(|r| r.pid == sv.pid)
        .and_then(|r| r.guardian);
    let parent = || {
        let args = platform::own_cmdline(sv.ppid)?;
        let stat = platform::stat(sv.ppid)?;
        args.iter()
            .any(|a| a == "__guard")
            .then(|| ProcId::of(&stat))
    };
    recorded.filter(ProcId::is_alive).or_else(parent)
}

/// How long a supervisor stopped by signal may take to be gone: its servers are
/// torn down in parallel, each within its cleanup timeout (a `none` counted as
/// the default), then it leaves as after a `down`.
fn exit_bound(t: &Target) -> Duration {
    let cleanup = t
        .fleet
        .servers
        .iter()
        .map(|s| {
            s.cleanup_timeout
                .as_duration()
                .or(DEFAULT_TIMEOUT.as_duration())
                .unwrap_or_default()
        })
        .max()
        .unwrap_or_default();
    cleanup + MARGIN
}
