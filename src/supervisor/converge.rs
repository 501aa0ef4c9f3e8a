//! `up` converges on the fleet file, and `status` shows how far each server is
//! from it (docs/design.md §16, rules R1 to R5). The plan is computed from what the
//! authorities published (`crate::reconcile`); each server's authority then
//! decides again as it takes its request: a converge starts a server that does not
//! run and restarts (stop, confirm, start N+1) only a generation started from
//! another definition, so a plan made a moment too early never restarts twice.
//! `status` reads the fleet's published view and asks nothing.

use tokio::sync::mpsc;

use super::answer::{Response, reply};
use super::handle::FleetHandle;
use super::plan::{Planned, Up, known, unheld};
use super::streaming::streaming;
use crate::host;
use crate::lifecycle::authority::Snapshot;
use crate::lifecycle::state::Intent;
use crate::output::report::{Report, ServerReport};
use crate::protocol::FleetSource;
use crate::reconcile;

/// `up`: the fleet task plans and takes up the file (`plan.rs`); the request
/// then asks the authorities, streaming their events.
pub(super) async fn up(fleet: &FleetHandle, up: Up, tx: &mpsc::UnboundedSender<String>) -> Response {
    // An invalid file changes nothing (R5); the CLI has refused it already, with
    // positions, unless it changed in between.
    let file = match up.fleet.as_ref().map(|f| fleet.read_file(f)).transpose() {
        Ok(file) => file,
        Err(message) => return Response::Error { message },
    };
    let (remove, options) = (up.remove_orphans, up.options);
    let Planned {
        steps,
        starts,
        orphans,
        older_file,
    } = match fleet.plan_up(up, file).await {
        Ok(planned) => planned,
        Err(response) => return *response,
    };
    let mut watched = starts.clone();
    if remove {
        watched.extend(orphans.iter().cloned());
    }
    let (to_start, to_stop) = (starts.clone(), orphans.clone());
    let (started, stopped) = streaming(&fleet.fixed.events, &fleet.fixed.tracker, &watched, tx, move |_| async move {
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
        fleet.forget_orphans(names).await;
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
pub(super) fn status(
    fleet: &FleetHandle,
    names: &[String],
    source: Option<&FleetSource>,
) -> Result<Report, String> {
    let file = source.map(|f| fleet.read_file(f)).transpose()?;
    let view = fleet.view();
    let roster = &view.roster;
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
    let held = known(roster, &snapshots);
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
