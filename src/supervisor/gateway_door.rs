//! The supervisor's side of the gateway (docs/design.md §14): it creates the one
//! aggregation with the authorities, and serves a `connect` client over its
//! control connection. The HTTP door for `serve` is the fleet task's
//! (`http_door.rs`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::task::TaskTracker;

use super::answer::{Response, call_options};
use super::dispatch::dispatch;
use super::events::{EventLog, SessionLine};
use super::handle::FleetHandle;
use super::roster::{PAGE_SIZE, exposure};
use crate::config::Fleet;
use crate::gateway::{ClientSession, Gateway, Journal, Member, PassThrough, SessionEvent};
use crate::host::Unnamed;
use crate::lifecycle::authority::Handle;
use crate::lifecycle::events::rfc3339;
use crate::process::session::MAX_MESSAGE_BYTES;
use crate::process::session::wire::{Intercepted, Outbox, OutboxWriter, Sink};
use crate::protocol::{self, Deadlines, Op};

/// The gateway of `fleet`, whose client sessions are recorded in `events`.
pub(super) fn new(fleet: &Fleet, events: Arc<EventLog>, journal: Journal) -> Arc<Gateway> {
    let metrics = events.metrics.clone();
    let sessions = Box::new(move |e: SessionEvent| {
        tracing::info!(session = e.id, door = e.door, opened = e.opened, client = ?e.client, "gateway client session");
        events.gateway_session(&SessionLine {
            time: rfc3339(SystemTime::now()),
            gateway: if e.opened {
                "session-opened"
            } else {
                "session-closed"
            },
            session: e.id,
            door: e.door,
            client: e.client,
        });
    });
    let gateway = Gateway::new(
        fleet.servers.len(),
        call_options(Deadlines::default(), false),
        fleet.gateway.page_size.unwrap_or(PAGE_SIZE),
        sessions,
        journal,
        metrics,
    );
    gateway.set_meta(fleet.gateway.meta);
    match crate::gateway::inputs::Bounds::from_env() {
        Ok(bounds) => gateway.inputs().set_bounds(bounds),
        Err(why) => {
            tracing::warn!("{why}; the default is kept");
            gateway.note(format_args!("{why}; the default is kept"));
        }
    }
    gateway
}

/// Gives the gateway the authorities, in fleet order.
pub(super) fn attach(gateway: &Arc<Gateway>, fleet: &Fleet, handles: &[Handle], tracker: &TaskTracker) {
    let members = fleet
        .servers
        .iter()
        .zip(handles)
        .map(|(spec, handle)| Member {
            handle: handle.clone(),
            exposure: exposure(spec),
            enabled: spec.enabled,
        })
        .collect();
    gateway.attach(members, tracker);
}

/// Serves a `connect` client: starts the selected servers as `up` would, answers
/// with the report, then speaks MCP, scoped to those servers, until either side
/// ends the session or the supervisor stops: on the client's own stdin and
/// stdout when `connect` hands them over (`handover.rs`), else on the same
/// connection.
pub(super) async fn stdio(
    fleet: &FleetHandle,
    reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
    servers: Vec<String>,
    deadlines: Deadlines,
    handover: bool,
) {
    let scope = match fleet.select(&servers, Unnamed::Enabled) {
        Ok(handles) => {
            let view = fleet.view();
            let roster = &view.roster;
            handles
                .iter()
                .filter_map(|h| roster.held(h.name()).map(|held| held.slot))
                .collect::<Vec<usize>>()
        }
        Err(message) => {
            let _ = write
                .write_all(protocol::encode(&Response::Error { message }).as_bytes())
                .await;
            return;
        }
    };
    // The start's events are not relayed: the connection is the client's MCP channel.
    let (tx, _) = tokio::sync::mpsc::unbounded_channel();
    let servers_named = !servers.is_empty();
    let up = Op::Up {
        servers,
        force: false,
        deadlines,
        fleet: None,
        dry_run: false,
        remove_orphans: false,
    };
    let response = dispatch(up, fleet, &tx).await;
    if write
        .write_all(protocol::encode(&response).as_bytes())
        .await
        .is_err()
    {
        return;
    }
    // Without names the session sees the whole fleet, as it changes (docs/design.md
    // §15): servers added to the fleet file later too.
    let session = ClientSession::new(fleet.fixed.gateway.clone(), "stdio");
    let session = match servers_named {
        true => session.scoped(scope),
        false => session,
    };
    let shutdown = fleet.fixed.shutdown.clone();
    if !handover {
        let input = super::handover::Input(Box::new(reader));
        return serve(shutdown, session, input, Box::new(write), None, &fleet.fixed.tracker).await;
    }
    let handed = super::handover::receive(reader, write).await;
    match handed {
        Ok(h) => {
            serve(shutdown, session, h.input, h.output, Some(h.control), &fleet.fixed.tracker).await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "gateway: a client's stdin and stdout were not handed over");
            fleet.fixed.gateway.note(format_args!(
                "a `connect` did not hand over its stdin and stdout: {e}"
            ));
        }
    }
}

/// Speaks MCP with one client on `input` and `output` until either side ends the
/// session, the supervisor stops, or `control` (the connection of a `connect`
/// that handed its stdio over) closes. The control connection is let go of only
/// once what the client was sent is written, so that `connect` exits after its
/// stdout has closed.
async fn serve(
    shutdown: tokio_util::sync::CancellationToken,
    session: ClientSession,
    input: super::handover::Input,
    output: Box<dyn Sink>,
    control: Option<tokio::net::UnixStream>,
    tracker: &TaskTracker,
) {
    // rmcp serves the session; the plain calls pass through beside it, on the
    // same bytes (docs/design.md §14, "Pass-through calls").
    let out = Outbox::spawn(output, tracker);
    let pass = PassThrough::new(
        session.gateway(),
        session.scope(),
        session.opened(),
        out.clone(),
    );
    let reader = Intercepted::new(input, MAX_MESSAGE_BYTES, Box::new(pass));
    let session = run(shutdown, session, reader, out.writer());
    let gone = async {
        match &control {
            Some(control) => super::handover::gone(control).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = session => {}
        () = gone => tracing::info!("gateway: a `connect` went away; its session ends"),
    }
    out.close();
    let _ = tokio::time::timeout(Duration::from_secs(10), out.finished()).await;
    if let Some(control) = &control {
        super::handover::ended(control);
    }
    drop(control);
}

/// rmcp's side of a client session, until it ends or the supervisor stops.
async fn run(
    shutdown: tokio_util::sync::CancellationToken,
    session: ClientSession,
    reader: Intercepted<super::handover::Input>,
    writer: OutboxWriter,
) {
    let of = Some((session.gateway(), session.scope()));
    let running = match rmcp::serve_server(
        crate::gateway::AsWritten(session),
        crate::gateway::UntokenedTransport(
            rmcp::transport::async_rw::AsyncRwTransport::new_server(reader, writer),
            of,
        ),
    ).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(error = %e, "gateway: a client left before its session began");
            return;
        }
    };
    let cancel = running.cancellation_token();
    tokio::select! {
        _ = running.waiting() => {}
        _ = shutdown.cancelled() => cancel.cancel(),
    }
}
