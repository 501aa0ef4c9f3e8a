//! The supervisor's side of the gateway (docs/design.md §14): it creates the one
//! aggregation with the authorities, serves a `connect` client over its control
//! connection, and opens the HTTP door for `serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::task::TaskTracker;

use super::server::{call_options, dispatch};
use super::{EventLog, Response, Shared};
use crate::config::Fleet;
use crate::gateway::{ClientSession, Gateway, Journal, Member, PassThrough, SessionEvent, http};
use crate::host::Unnamed;
use crate::lifecycle::authority::Handle;
use crate::lifecycle::events::rfc3339;
use crate::process::session::MAX_MESSAGE_BYTES;
use crate::process::session::wire::{Intercepted, Outbox, OutboxWriter, Sink};
use crate::protocol::{self, Deadlines, Op};

/// Where `serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7077";

/// Items per page of the gateway's lists.
pub const PAGE_SIZE: usize = 500;

/// The HTTP door, once open.
#[derive(Debug, Clone)]
pub struct Listening {
    pub addr: SocketAddr,
    /// The file that holds the token (`None`: the token came from the fleet file).
    pub token_file: Option<PathBuf>,
    /// Closes the door; a child of the supervisor's shutdown.
    pub stop: tokio_util::sync::CancellationToken,
}

/// A gateway client session opening or closing, as a line of the event log.
#[derive(Debug, Serialize)]
pub struct SessionLine {
    pub time: String,
    /// `session-opened` or `session-closed`.
    pub gateway: &'static str,
    pub session: u64,
    pub door: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// The gateway of `fleet`, whose client sessions are recorded in `events`.
pub fn new(fleet: &Fleet, events: Arc<EventLog>, journal: Journal) -> Arc<Gateway> {
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
    gateway
}

/// Gives the gateway the authorities, in fleet order.
pub fn attach(gateway: &Arc<Gateway>, fleet: &Fleet, handles: &[Handle], tracker: &TaskTracker) {
    let members = fleet
        .servers
        .iter()
        .zip(handles)
        .map(|(spec, handle)| Member {
            handle: handle.clone(),
            exposure: super::roster::exposure(spec),
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
pub async fn stdio(
    shared: &Shared,
    reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
    servers: Vec<String>,
    deadlines: Deadlines,
    handover: bool,
) {
    let scope = match shared.select(&servers, Unnamed::Enabled) {
        Ok(handles) => {
            let roster = shared.roster();
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
    let response = dispatch(up, shared, &tx).await;
    if write
        .write_all(protocol::encode(&response).as_bytes())
        .await
        .is_err()
    {
        return;
    }
    // Without names the session sees the whole fleet, as it changes (docs/design.md
    // §15): servers added to the fleet file later too.
    let session = ClientSession::new(shared.gateway.clone(), "stdio");
    let session = match servers_named {
        true => session.scoped(scope),
        false => session,
    };
    let shutdown = shared.shutdown.clone();
    if !handover {
        let input = super::handover::Input(Box::new(reader));
        return serve(shutdown, session, input, Box::new(write), None).await;
    }
    let handed = super::handover::receive(reader, write).await;
    match handed {
        Ok(h) => serve(shutdown, session, h.input, h.output, Some(h.control)).await,
        Err(e) => {
            tracing::warn!(error = %e, "gateway: a client's stdin and stdout were not handed over");
            shared.gateway.note(format_args!(
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
) {
    // rmcp serves the session; the plain calls pass through beside it, on the
    // same bytes (docs/design.md §14, "Pass-through calls").
    let out = Outbox::spawn(output);
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
    let running = match rmcp::serve_server(session, (reader, writer)).await {
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

/// Opens the HTTP door at `listen` (or the fleet's `gateway.listen`, or
/// [`DEFAULT_LISTEN`]), or says where it is open already. Done under the door's
/// lock from the check to the record, with no await between, so that of two
/// `serve` requests one opens the door and the other finds it open.
pub fn open_http(shared: &Shared, listen: Option<String>) -> Result<Listening, String> {
    let config = &shared.fleet().gateway;
    let wanted: SocketAddr = match listen {
        Some(text) => text
            .parse()
            .map_err(|_| format!("usage: `{text}` is not an address:port to listen on"))?,
        None => config
            .listen
            .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("the default address parses")),
    };
    let mut door = shared.http.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(open) = door.clone() {
        if open.addr == wanted || wanted.port() == 0 {
            return Ok(open);
        }
        return Err(format!(
            "the gateway already listens at {}; `down` closes it",
            open.addr
        ));
    }
    let cannot = |e: std::io::Error| format!("cannot listen at {wanted}: {e}");
    let listener = std::net::TcpListener::bind(wanted).map_err(cannot)?;
    listener.set_nonblocking(true).map_err(cannot)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(cannot)?;
    let addr = listener.local_addr().map_err(cannot)?;
    let (token, token_file) = door_token(shared)?;
    let stop = shared.shutdown.child_token();
    let caps = shared.caps();
    http::serve(
        shared.gateway.clone(),
        listener,
        token.into(),
        config.origins.clone(),
        Some(shared.scrape()),
        caps.gateway,
        stop.clone(),
        &shared.tracker,
    );
    let open = Listening {
        addr,
        token_file,
        stop,
    };
    tracing::info!(url = http::url(addr), "gateway listening");
    shared
        .gateway
        .note(format_args!("HTTP door open at {}", http::url(addr)));
    *door = Some(open.clone());
    Ok(open)
}

/// The caps of both HTTP doors, fitted within the open-files limit.
#[derive(Debug, Clone, Copy)]
pub struct DoorCaps {
    pub gateway: http::Caps,
    /// Open connections of the metrics' own door.
    pub metrics: usize,
}

impl Shared {
    /// The caps the fleet file asks for (or the defaults), fitted so that both
    /// doors full at once leave the servers' descriptors and a reserve for the
    /// control socket below the open-files limit (docs/design.md §10). A cap cut
    /// to fit is said in the gateway's log.
    pub fn caps(&self) -> DoorCaps {
        use crate::gateway::bounds;
        let fleet = self.fleet();
        let wanted = [
            fleet
                .gateway
                .max_connections
                .unwrap_or(bounds::GATEWAY_CONNECTIONS),
            fleet
                .metrics
                .max_connections
                .unwrap_or(bounds::METRICS_CONNECTIONS),
        ];
        let room = self.files.for_doors(fleet.servers.len());
        let fitted = crate::process::limits::fit(&wanted, room);
        if fitted != wanted {
            self.gateway.note(format_args!(
                "the open-files limit ({}) leaves the HTTP doors room for {room} connections: \
                 at most {} on the gateway's, {} on the metrics' (asked: {}, {})",
                self.files.soft, fitted[0], fitted[1], wanted[0], wanted[1]
            ));
        }
        DoorCaps {
            gateway: http::Caps {
                connections: fitted[0],
                sessions: fleet.gateway.max_sessions.unwrap_or(bounds::SESSIONS),
            },
            metrics: fitted[1],
        }
    }
}

/// The bearer token of the HTTP doors (the gateway's, the metrics'): the fleet
/// file's (`${env:NAME}`) wins; else one is kept, 0600, in the state directory,
/// whose path comes with it.
pub fn door_token(shared: &Shared) -> Result<(String, Option<PathBuf>), String> {
    match &shared.fleet().gateway.token {
        Some(text) => Ok((text.value.clone(), None)),
        None => {
            let file = shared.dir.root().join("gateway.token");
            let token = token(&file).map_err(|e| {
                format!(
                    "cannot create the gateway's token in {}: {e}",
                    file.display()
                )
            })?;
            Ok((token, Some(file)))
        }
    }
}

/// The token in `path`, created (0600, 32 random bytes) when there is none.
fn token(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Write;
    match crate::state::read_nofollow(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).trim().to_owned();
            if !text.is_empty() {
                return Ok(text);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = http::new_token()?;
    let mut f = crate::state::open_rw(path)?;
    f.set_len(0)?;
    f.write_all(token.as_bytes())?;
    f.sync_data()?;
    Ok(token)
}
