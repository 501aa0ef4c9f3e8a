//! The control socket: accepts connections, checks the peer's uid, reads one
//! bounded request line, and routes it: the `gateway` request to a session of
//! its own (`gateway_door.rs`), every other to `dispatch.rs`, whose events and
//! reply go out through one writer per connection. A bad request gets an error
//! line and never disturbs other connections. Each connection holds a handle to
//! the fleet task.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::task::TaskTracker;

use super::answer::Response;
use super::dispatch::dispatch;
use super::handle::FleetHandle;
use crate::host::Signals;
use crate::lifecycle::events::Event;
use crate::lifecycle::state::Phase;
use crate::protocol::{self, Line, MAX_LINE_BYTES, Op};
use crate::state::StateDir;

/// How long a connected peer may take to send its request.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection that has not sent its request yet counts as open for
/// the idle exit.
const REQUEST_GRACE: Duration = Duration::from_secs(1);

/// Serves the socket until the supervisor is idle (every server at rest, no
/// connection) for `linger`, or a signal asks it to stop. `transitions` is the
/// event log, subscribed to before any authority existed: what it says, and the
/// connections opening and closing, are what wakes the idle watch.
pub(super) async fn serve(
    dir: &StateDir,
    fleet: FleetHandle,
    transitions: broadcast::Receiver<Event>,
    linger: Duration,
    signals: &mut Signals,
) -> anyhow::Result<TaskTracker> {
    let path = dir.socket();
    match std::fs::remove_file(&path) {
        Ok(()) => tracing::info!("removed a stale control socket"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let mut listener = bind(&path)?;
    tracing::info!(socket = %path.display(), "supervisor serving");

    let (open, mut opened_or_closed) = watch::channel(0usize);
    let connections = TaskTracker::new();
    // Cancelled as the socket closes: a peer that has sent no request by then is
    // let go of, never waited for.
    let leaving = tokio_util::sync::CancellationToken::new();
    let serve_one = |stream: UnixStream| {
        let (open, fleet) = (Open::count(&open), fleet.clone());
        let leaving = leaving.clone();
        connections.spawn(async move {
            handle_connection(stream, &fleet, open, leaving).await;
        });
    };
    let mut busy = Busy::new(transitions);
    let mut idle_since: Option<Instant> = None;
    // A host of a fleet that spans hosts stays while the fleet wants a server
    // running anywhere: it is a standby (docs/design.md §19).
    let mut standing = fleet.standing();
    let mut accept_errors = crate::gateway::bounds::AcceptErrors::default();
    let stop_sweeping = tokio_util::sync::CancellationToken::new();
    let _sweeping = stop_sweeping.clone().drop_guard();
    fleet
        .fixed
        .tracker
        .spawn(crate::process::lineage::keep_current(stop_sweeping));
    loop {
        let view = fleet.view();
        // An open HTTP door keeps the supervisor, as a server does (docs/design.md §14).
        let door_open = view.listening.is_some();
        let stands = standing.as_mut().is_some_and(|s| *s.borrow_and_update());
        let idle = *opened_or_closed.borrow_and_update() == 0
            && busy.servers.is_empty()
            && !door_open
            && !stands;
        idle_since = idle.then(|| idle_since.unwrap_or_else(Instant::now));
        // After a `down` of the whole fleet, whose client waits for this process
        // to be gone, there is no lingering (docs/design.md §3).
        let linger = match view.exit_when_idle {
            true => Duration::ZERO,
            false => linger,
        };
        let lingered = async {
            match idle_since {
                Some(since) => tokio::time::sleep_until((since + linger).into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    accept_errors.succeeded();
                    if let Some(stream) = same_user(stream) {
                        serve_one(stream);
                    }
                }
                // Out of descriptors, say: paced and counted, never a hot loop.
                Err(e) => tokio::time::sleep(accept_errors.failed("control socket", &e)).await,
            },
            _ = opened_or_closed.changed() => {}
            () = async {
                let changed = match standing.as_mut() {
                    Some(s) => s.changed().await.is_ok(),
                    None => false,
                };
                if !changed {
                    std::future::pending::<()>().await;
                }
            } => {}
            received = busy.transitions.recv(), if busy.listening => busy.note(received, &fleet),
            _ = signals.next() => {
                tracing::info!("signal: tearing everything down");
                fleet.fixed.shutdown.cancel();
                // Starts in progress end now; what they spawned is torn down (L8).
                fleet.fixed.interrupt.cancel();
                break;
            }
            () = lingered => {
                // Idle long enough. First make sure no new client can find this
                // supervisor, then serve whoever connected before that: a client
                // already in the queue must get its answer, never a reset connection.
                let _ = std::fs::remove_file(&path);
                let mut drained = false;
                while let Ok(Ok((stream, _))) =
                    tokio::time::timeout(Duration::from_millis(10), listener.accept()).await
                {
                    drained = true;
                    if let Some(stream) = same_user(stream) {
                        serve_one(stream);
                    }
                }
                if !drained {
                    tracing::info!("every server is down and no request is pending: exiting");
                    break;
                }
                // Requests came in at the last moment: serve them, and be findable again.
                listener = bind(&path)?;
                idle_since = None;
            }
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&path);
    leaving.cancel();
    // The caller waits for the connections, still listening for signals.
    connections.close();
    Ok(connections)
}

/// Counts a connection as open for as long as it lives.
struct Open(watch::Sender<usize>);

impl Open {
    fn count(open: &watch::Sender<usize>) -> Open {
        open.send_modify(|n| *n += 1);
        Open(open.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The servers that keep the supervisor: those starting, running, stopping or in
/// backoff (docs/design.md §3). Kept from the transitions as they are recorded: every
/// change of state is one (L12), and says where it led.
struct Busy {
    servers: HashSet<String>,
    transitions: broadcast::Receiver<Event>,
    /// False once the event log is gone (it lives as long as the supervisor).
    listening: bool,
}

impl Busy {
    /// Subscribed before any authority existed, so every server starts at rest
    /// (`stopped`, or `quarantined` from `state.json`).
    fn new(transitions: broadcast::Receiver<Event>) -> Busy {
        Busy {
            servers: HashSet::new(),
            transitions,
            listening: true,
        }
    }

    fn note(&mut self, received: Result<Event, RecvError>, fleet: &FleetHandle) {
        match received {
            Ok(event) => self.set(&event.server, event.to),
            // Transitions were missed: each authority's published state stands for
            // them. One recorded but not yet published is still in the stream, after
            // the gap, and is read next.
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "idle watch lagged behind the event log");
                for handle in fleet.handles() {
                    self.set(handle.name(), handle.published().state);
                }
            }
            Err(RecvError::Closed) => self.listening = false,
        }
    }

    fn set(&mut self, server: &str, phase: Phase) {
        match phase {
            Phase::Running | Phase::Starting | Phase::Stopping | Phase::Backoff => {
                self.servers.insert(server.to_owned());
            }
            Phase::Stopped | Phase::Failed | Phase::Quarantined | Phase::CrashLoop => {
                self.servers.remove(server);
            }
        }
    }
}

/// Binds the control socket, private to this user.
fn bind(path: &std::path::Path) -> std::io::Result<UnixListener> {
    let short = crate::state::SocketPath::new(path)?;
    let listener = UnixListener::bind(short.as_path())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The stream, if its peer runs as this user; peers of other users are refused.
fn same_user(stream: UnixStream) -> Option<UnixStream> {
    let me = crate::platform::uid();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == me => Some(stream),
        other => {
            tracing::warn!(peer = ?other.map(|c| c.uid()), "refused a connection from another user");
            None
        }
    }
}

async fn handle_connection(
    stream: UnixStream,
    fleet: &FleetHandle,
    open: Open,
    leaving: tokio_util::sync::CancellationToken,
) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    // A peer that says nothing for REQUEST_GRACE no longer keeps the supervisor
    // from exiting idle (a client writes its request as it connects); should its
    // request come later, it counts again while it is served.
    let (line, _open) = {
        let read = protocol::read_line(&mut reader, MAX_LINE_BYTES);
        tokio::pin!(read);
        tokio::select! {
            line = &mut read => (Ok(line), open),
            () = leaving.cancelled() => return,
            () = tokio::time::sleep(REQUEST_GRACE) => {
                let sender = open.0.clone();
                drop(open);
                let line = tokio::select! {
                    line = tokio::time::timeout(REQUEST_READ_TIMEOUT - REQUEST_GRACE, read) => line,
                    () = leaving.cancelled() => return,
                };
                (line, Open::count(&sender))
            }
        }
    };
    let request = match line {
        Err(_) => Err("no request within 30s".to_owned().into()),
        Ok(Err(e)) => Err(format!("cannot read the request: {e}").into()),
        Ok(Ok(Line::Closed)) => return,
        Ok(Ok(Line::TooLong)) => Err(format!("request longer than {MAX_LINE_BYTES} bytes").into()),
        Ok(Ok(Line::NotUtf8)) => Err("request is not UTF-8".to_owned().into()),
        Ok(Ok(Line::Text(text))) => protocol::decode_request(&text),
    };
    let request = match request {
        Ok(r) => r,
        // An error line; one refused for its protocol version says which
        // versions this supervisor speaks (docs/design.md §9).
        Err(refusal) => {
            tracing::warn!(message = %refusal.message, "bad request");
            let _ = write
                .write_all(protocol::encode(&refusal).as_bytes())
                .await;
            return;
        }
    };
    if fleet.fixed.shutdown.is_cancelled() {
        let message = "the supervisor is shutting down".to_owned();
        let _ = write
            .write_all(protocol::encode(&Response::Error { message }).as_bytes())
            .await;
        return;
    }
    // A request that may start servers or open a door takes back the exit a
    // `down` of the whole fleet arranged: idle again later, the supervisor
    // lingers as usual (docs/design.md §3).
    if matches!(
        request.op,
        Op::Up { .. }
            | Op::Reconnect { .. }
            | Op::Reset { .. }
            | Op::Tools { .. }
            | Op::Call { .. }
            | Op::Gateway { .. }
            | Op::Serve { .. }
    ) {
        fleet.keep_when_idle();
    }
    if let Op::Gateway {
        servers,
        deadlines,
        fleet: source,
        handover,
    } = request.op
    {
        if let Err(message) = fleet.take_up(source.as_ref()).await {
            let _ = write
                .write_all(protocol::encode(&Response::Error { message }).as_bytes())
                .await;
            return;
        }
        let _session = fleet.stdio_session();
        return super::gateway_door::stdio(fleet, reader, write, servers, deadlines, handover)
            .await;
    }
    // Lines to the client go through one writer task; a client that went away only
    // stops the writing, never the request (L6).
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = fleet.fixed.tracker.spawn(async move {
        while let Some(line) = rx.recv().await {
            if write.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    let response = dispatch(request.op, fleet, &tx).await;
    let _ = tx.send(protocol::encode(&response));
    drop(tx);
    let _ = writer.await;
}
