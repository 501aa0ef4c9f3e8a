//! `up` converges on the fleet file, and `status` shows how far each server is
//! from it (docs/design.md §16, rules R1 to R5). The plan is computed from what the
//! authorities published (`crate::reconcile`); each server's authority then
//! decides again as it takes its request: a converge starts a server that does not
//! run and restarts (stop, confirm, start N+1) only a generation started from
//! another definition, so a plan made a moment too early never restarts twice.

use tokio::sync::mpsc;

use super::server::{reply, streaming};
use super::{Response, Shared, roster};
use crate::host::{self, Unnamed};
use crate::lifecycle::authority::{CallOptions, Handle, Snapshot};
use crate::lifecycle::state::{Intent, Phase};
use crate::output::exit::Code;
use crate::output::report::{OlderFile, Report, ServerReport};
use crate::protocol::FleetSource;
use crate::reconcile::{self, Known};

/// What an `up` request asks for.
pub struct Up {
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

/// What the authorities published of every held server, as the plan reads it.
fn known<'a>(roster: &'a roster::Roster, snapshots: &'a [Snapshot]) -> Vec<Known<'a>> {
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
fn unheld(name: &str, transport: &str) -> ServerReport {
    ServerReport::unpublished(name, transport, Phase::Stopped, None, Code::Ok)
}

pub async fn up(shared: &Shared, up: Up, tx: &mpsc::UnboundedSender<String>) -> Response {
    // An invalid file changes nothing (R5); the CLI has refused it already, with
    // positions, unless it changed in between.
    let file = match up.fleet.as_ref().map(|f| shared.read_file(f)).transpose() {
        Ok(file) => file,
        Err(message) => return Response::Error { message },
    };
    let (steps, starts, orphans, older_file) = {
        let mut roster = shared.roster();
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
                return Response::Error {
                    message: format!("usage: {e}"),
                };
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
            &known(&roster, &snapshots),
            up.options.force,
            up.remove_orphans,
        );
        if up.dry_run {
            // Nothing changes: no authority is asked, nothing is recorded (R4).
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
            return reply(report);
        }
        let names: Vec<String> = selected.iter().map(|s| s.name.clone()).collect();
        if older_file.is_none() {
            shared.sync(&mut roster, file, up.fleet.clone());
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
        (steps, starts, orphans, older_file)
    };
    // The metrics' door follows the file taken up, as after any request's
    // (`Shared::take_up`): opened, moved or closed (docs/design.md §17).
    shared.follow_metrics_listen();
    let remove = up.remove_orphans;
    let options = up.options;
    let mut watched = starts.clone();
    if remove {
        watched.extend(orphans.iter().cloned());
    }
    let (to_start, to_stop) = (starts.clone(), orphans.clone());
    let (started, stopped) = streaming(shared, &watched, tx, move |_| async move {
        let starting = host::request_all(&to_start, Intent::Converge, options, |_| {});
        let stopping = async {
            match remove {
                true => host::request_all(&to_stop, Intent::Stop, options, |_| {}).await,
                false => Vec::new(),
            }
        };
        tokio::join!(starting, stopping)
    })
    .await;
    let mut lines: Vec<ServerReport> = starts
        .iter()
        .zip(started)
        .map(|(h, r)| ServerReport::of_reply(h.name(), r, Intent::Converge, false))
        .collect();
    if remove {
        lines.extend(
            orphans
                .iter()
                .zip(stopped)
                .map(|(h, r)| ServerReport::of_reply(h.name(), r, Intent::Stop, false)),
        );
        let names: Vec<String> = orphans.iter().map(|h| h.name().to_owned()).collect();
        shared.forget_orphans(&names);
    } else {
        // Left as they are: shown, and not a failure of this `up`.
        lines.extend(orphans.iter().map(|h| {
            let mut line = ServerReport::of_state(&h.published());
            line.exit_code = 0;
            line
        }));
    }
    let mut report = Report::new("up", lines, false);
    report.plan = Some(steps);
    report.older_file = older_file;
    reply(report)
}

/// `status`: each server's state and, when the request carries the fleet file,
/// how it differs from it (R4). Changes nothing, whatever the file says.
pub fn status(
    shared: &Shared,
    names: &[String],
    fleet: Option<&FleetSource>,
) -> Result<Report, String> {
    let file = fleet.map(|f| shared.read_file(f)).transpose()?;
    let roster = shared.roster();
    let against = file.as_ref().unwrap_or(&roster.fleet);
    // The file's servers in its order (enabled ones, unless named), then those
    // held that it no longer has.
    let mut order: Vec<String> = Vec::new();
    if names.is_empty() {
        order.extend(
            against
                .servers
                .iter()
                .filter(|s| s.enabled)
                .map(|s| s.name.clone()),
        );
        order.extend(
            roster
                .servers
                .iter()
                .filter(|h| against.server(&h.spec.name).is_none())
                .map(|h| h.spec.name.clone()),
        );
    } else {
        let unknown: Vec<String> = names
            .iter()
            .filter(|n| roster.held(n).is_none() && against.server(n).is_none())
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(format!("usage: {}", host::UnknownServers(unknown)));
        }
        for name in names {
            if !order.contains(name) {
                order.push(name.clone());
            }
        }
    }
    let snapshots: Vec<Snapshot> = roster
        .servers
        .iter()
        .map(|h| h.handle.published())
        .collect();
    let held = known(&roster, &snapshots);
    let lines = order
        .iter()
        .map(|name| {
            let index = roster.servers.iter().position(|h| h.spec.name == *name);
            let in_file = against.server(name);
            let mut line = match index {
                Some(i) => ServerReport::of_state(&snapshots[i]),
                None => unheld(name, in_file.map_or("stdio", |s| s.transport.kind())),
            };
            if file.is_some() {
                line.drift = Some(reconcile::drift(in_file, index.map(|i| &held[i])));
            }
            line
        })
        .collect();
    Ok(Report::new("status", lines, false))
}
