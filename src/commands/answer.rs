//! What a command prints when a request got its answer, or none: the report, an
//! unreachable supervisor (on stderr, and as a document for scripts), or what
//! `state.json` and the process table say when no supervisor runs.


use super::client::ClientError;
use super::{CliError, Global};
use crate::config::Fleet;
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::state::Phase;
use crate::output::exit::Code;
use crate::output::report::{self, FailureKind, FailureReport, Format, Report, ServerReport};
use crate::process::table::Table;
use crate::state::Persisted;
use crate::state::StateDir;


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

/// Reports a supervisor that could not be reached (or was lost mid-request) on
/// stderr and, for scripts reading JSON, as a document on stdout. Returns 8.
pub(super) fn unreachable(command: &str, e: &ClientError, g: &Global) -> Code {
    let message = crate::errors::chain(e);
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

pub(super) fn emit(report: Report, g: &Global) -> Result<Code, CliError> {
    report::write_stdout(&report::render(&report, g.output))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    Ok(Code::from_i32(report.exit_code))
}
