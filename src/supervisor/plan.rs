//! The part of `up` that reads and changes the roster, done by the fleet task
//! in one go (docs/design.md §16, rules R1 to R6): the older-file check, the
//! plan from what the authorities published (`crate::reconcile`), the dry run,
//! and the file taken up. What it plans is then carried out by the request
//! (`converge.rs`), outside the fleet task.

use super::answer::{Response, reply};
use super::roster::{self, Roster};
use crate::config::Fleet;
use crate::host::{self, Unnamed};
use crate::lifecycle::authority::{CallOptions, Handle, Snapshot};
use crate::lifecycle::state::Phase;
use crate::output::exit::Code;
use crate::output::report::{OlderFile, Report, ServerReport};
use crate::protocol::FleetSource;
use crate::output::plan::PlanStep;
use crate::reconcile::{self, Known};

/// What an `up` request asks for.
pub(super) struct Up {
    /// The servers to converge; empty: every enabled one of the file.
    pub servers: Vec<String>,
    /// The fleet file as the caller read it; the supervisor's own when absent.
    pub fleet: Option<FleetSource>,
    pub options: CallOptions,
    /// Only say what would be done (R4).
    pub dry_run: bool,
    /// Stop the orphans (R3).
    pub remove_orphans: bool,
}

/// What `up` is to do once the roster has taken up its file.
pub(super) struct Planned {
    pub steps: Vec<PlanStep>,
    /// The selected servers' authorities, in the file's order.
    pub starts: Vec<Handle>,
    /// The orphans' authorities.
    pub orphans: Vec<Handle>,
    /// Set when the request's file was older than the one kept (R6).
    pub older_file: Option<OlderFile>,
}

/// What the authorities published of every held server, as the plan reads it.
pub(super) fn known<'a>(roster: &'a Roster, snapshots: &'a [Snapshot]) -> Vec<Known<'a>> {
    roster
        .servers
        .iter()
        .zip(snapshots)
        .map(|(h, s)| Known {
            spec: &h.spec,
            phase: s.state,
            launched: s.definition.as_ref(),
        })
        .collect()
}

/// A server no authority holds yet, as a line: stopped, nothing of a generation.
pub(super) fn unheld(name: &str, transport: &str) -> ServerReport {
    ServerReport::unpublished(name, transport, Phase::Stopped, None, Code::Ok)
}

/// Plans `up` on `roster` and, unless it is a dry run or the request's file is
/// older than the roster's, takes that file up (`sync`). `file` is the
/// request's file, validated. `Err` is the whole answer: a usage error, or the
/// report of a dry run.
pub(super) fn plan(
    roster: &mut Roster,
    fixed: &super::fixed::Fixed,
    up: &Up,
    file: Option<Fleet>,
) -> Result<Planned, Box<Response>> {
    // A file older than the one the supervisor runs does not replace it: the
    // newer one stays, and `up` converges on it (R6).
    let kept = up.fleet.as_ref().and_then(|f| roster.newer_than(f));
    let older_file = kept.map(|kept| {
        let read = up.fleet.as_ref().and_then(|f| f.version);
        if let Some(f) = &up.fleet {
            roster::kept_newer(f, &kept);
        }
        OlderFile {
            read_changed: read.map(|v| v.changed()).unwrap_or_default(),
            kept_changed: kept.changed(),
        }
    });
    let file = match (file, &older_file) {
        (Some(file), None) => file,
        _ => roster.fleet.clone(),
    };
    let selected = match host::select(&file, &up.servers, Unnamed::Enabled) {
        Ok(s) => s,
        Err(e) => {
            return Err(Box::new(Response::Error {
                message: format!("usage: {e}"),
            }));
        }
    };
    let snapshots: Vec<Snapshot> = roster
        .servers
        .iter()
        .map(|h| h.handle.published())
        .collect();
    let steps = reconcile::plan(
        &file,
        &selected,
        &known(roster, &snapshots),
        up.options.force,
        up.remove_orphans,
    );
    if up.dry_run {
        return Err(Box::new(dry_run(roster, &file, steps, older_file)));
    }
    let names: Vec<String> = selected.iter().map(|s| s.name.clone()).collect();
    if older_file.is_none() {
        roster.sync(fixed, file, up.fleet.clone());
    }
    let starts: Vec<Handle> = names
        .iter()
        .filter_map(|n| roster.held(n).map(|h| h.handle.clone()))
        .collect();
    let orphans: Vec<Handle> = roster
        .servers
        .iter()
        .filter(|h| h.orphaned)
        .map(|h| h.handle.clone())
        .collect();
    Ok(Planned {
        steps,
        starts,
        orphans,
        older_file,
    })
}

/// The report of a dry run: nothing changes, no authority is asked, nothing is
/// recorded (R4).
fn dry_run(
    roster: &Roster,
    file: &Fleet,
    steps: Vec<PlanStep>,
    older_file: Option<OlderFile>,
) -> Response {
    let lines = steps
        .iter()
        .map(|step| match roster.held(&step.name) {
            Some(h) => {
                let mut line = ServerReport::of_state(&h.handle.published());
                line.exit_code = 0;
                line
            }
            None => {
                let transport = file
                    .server(&step.name)
                    .map_or("stdio", |s| s.transport.kind());
                unheld(&step.name, transport)
            }
        })
        .collect();
    let mut report = Report::new("up", lines, false);
    report.plan = Some(steps);
    report.dry_run = true;
    report.older_file = older_file;
    reply(report)
}
