//! `ls`: the fleets under the state root (or the one state directory named with
//! `--state-dir` or `$MCPFLEET_STATE_DIR`), from what each state directory
//! records: the fleet file and its copy, whether a supervisor holds the lock, and
//! how many servers run (asked of the supervisor when one runs, else read from
//! `state.json` and the process table as the offline `status` does). Reads only; starts
//! nothing. A state directory that cannot be read fully is still listed, with a
//! warning on stderr.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::answer::offline_report;
use super::{CliError, Global, client};
use crate::config::{self, Fleet};
use crate::lifecycle::state::Phase;
use crate::output::exit::Code;
use crate::output::fleets::{self, FleetLine};
use crate::output::report::{Report, write_stdout};
use crate::platform;
use crate::protocol::Op;
use crate::state::Persisted;
use crate::state::{self, RecordedFleet, StateDir};

/// How long `ls` waits for a running supervisor's `status` before it reads the
/// state directory instead.
const STATUS_WAIT: Duration = Duration::from_secs(5);

pub(crate) async fn run(state_dir: Option<&Path>, g: &Global) -> Result<Code, CliError> {
    let dirs = match state::chosen(state_dir) {
        Some(dir) => [dir]
            .into_iter()
            .filter(|d| state::is_own_dir(d))
            .collect(),
        None => {
            let root = state::state_root().map_err(|e| CliError::Usage(e.to_string()))?;
            state::state_dirs(&root)
                .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", root.display()))?
        }
    };
    let mut lines = Vec::with_capacity(dirs.len());
    for dir in dirs {
        lines.push(describe(&dir).await);
    }
    write_stdout(&fleets::render(&lines, g.output))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    Ok(Code::Ok)
}

fn warn(message: impl std::fmt::Display) {
    eprintln!("mcpfleet ls: {message}");
}

/// One fleet's line.
async fn describe(root: &Path) -> FleetLine {
    let recorded = state::recorded_fleet(root).unwrap_or_else(|e| {
        warn(&e);
        None
    });
    let fleet = recorded.as_ref().and_then(|r| {
        let env = |name: &str| std::env::var(name).ok();
        config::load_recorded(&r.source, &r.path, &r.copy, &env)
            .map_err(|e| {
                warn(format!(
                    "the copy of the fleet file in {}: {e}",
                    root.display()
                ));
            })
            .ok()
    });
    let name = fleet
        .as_ref()
        .and_then(|f| f.name.clone())
        .unwrap_or_else(|| dir_name(root));
    let persisted = Persisted::load(&root.join("state.json")).unwrap_or_else(|e| {
        warn(&e);
        Persisted::default()
    });
    let supervisor_pid = match state::supervisor_runs(root) {
        Ok(true) => supervisor_pid(root, &persisted),
        Ok(false) => None,
        Err(e) => {
            warn(format!("cannot read the lock of {}: {e}", root.display()));
            None
        }
    };
    let (servers_running, servers_total) =
        servers(root, fleet.as_ref(), &persisted, supervisor_pid.is_some()).await;
    FleetLine {
        name,
        file: recorded
            .as_ref()
            .map(|r| r.path.to_string_lossy().into_owned()),
        file_exists: recorded.as_ref().is_some_and(file_exists),
        state_dir: std::fs::canonicalize(root)
            .unwrap_or_else(|_| root.to_path_buf())
            .to_string_lossy()
            .into_owned(),
        supervisor_pid,
        servers_running,
        servers_total,
    }
}

fn dir_name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.to_string_lossy().into_owned())
}

fn file_exists(r: &RecordedFleet) -> bool {
    std::fs::metadata(&r.path).is_ok()
}

/// The pid of the supervisor that holds the lock: the one it wrote in the lock
/// file, or the one `state.json` records, whichever is a living process.
pub(super) fn supervisor_pid(root: &Path, persisted: &Persisted) -> Option<i32> {
    let alive = |pid: i32| platform::stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X'));
    let written = std::fs::read_to_string(root.join("supervisor.lock"))
        .ok()
        .and_then(|t| t.lines().next()?.trim().parse::<i32>().ok());
    let recorded = persisted.supervisor.as_ref().filter(|s| {
        s.start_time.is_none() || platform::stat(s.pid).map(|st| st.start_time) == s.start_time
    });
    written
        .filter(|p| alive(*p))
        .or(recorded.map(|s| s.pid).filter(|p| alive(*p)))
}

/// (running, total): from the supervisor when one runs and answers, else from
/// `state.json` and the process table.
async fn servers(
    root: &Path,
    fleet: Option<&Fleet>,
    persisted: &Persisted,
    supervised: bool,
) -> (usize, usize) {
    let dir = match StateDir::open(root) {
        Ok(dir) => dir,
        Err(e) => {
            warn(e);
            return (
                0,
                fleet.map_or(persisted.servers.len(), |f| f.servers.len()),
            );
        }
    };
    if supervised && let Some(report) = ask_status(&dir, fleet).await {
        let running = report
            .servers
            .iter()
            .filter(|s| s.state == Phase::Running)
            .count();
        return (running, report.servers.len());
    }
    let Some(fleet) = fleet else {
        return (0, persisted.servers.len());
    };
    let names: Vec<&str> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
    let lines = offline_report(fleet, &dir, persisted, &names);
    let running = lines.iter().filter(|s| s.state == Phase::Running).count();
    (running, fleet.servers.len())
}

/// The running supervisor's `status` of every server, if it answers in time.
async fn ask_status(dir: &StateDir, fleet: Option<&Fleet>) -> Option<Report> {
    let file = fleet.map_or_else(PathBuf::new, |f| f.file.clone());
    let ask = async {
        let stream = client::connect(dir, &file, false).await.ok()?;
        client::request::<Report>(
            stream,
            Op::Status {
                servers: Vec::new(),
                fleet: None,
            },
            |_| {},
        )
        .await
        .ok()
    };
    tokio::time::timeout(STATUS_WAIT, ask).await.ok().flatten()
}
