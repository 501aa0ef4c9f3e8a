//! The control socket: accepts connections, checks the peer's uid, reads one
//! bounded request line, and answers it through the authorities, streaming the
//! request's events before the final reply. A bad request gets an error line and
//! never disturbs other connections.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::task::TaskTracker;

use crate::state::StateDir;
use super::{Answer, Response, Shared};
use crate::config::Timeout;
use crate::host::{self, Signals, Unnamed};
use crate::lifecycle::authority::{CallOptions, Handle};
use crate::lifecycle::events::Event;
use crate::lifecycle::state::{Intent, Phase};
use crate::output::exit::Code;
use crate::output::report::{EventReport, GatewayReport, Report, ServerReport};
use crate::protocol::{self, Deadlines, Line, MAX_LINE_BYTES, Op};

/// How long a connected peer may take to send its request.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection that has not sent its request yet counts as open for
/// the idle exit.
const REQUEST_GRACE: Duration = Duration::from_secs(1);

/// Serves the socket until the supervisor is idle (every server at rest, no
/// connection) for `linger`, or a signal asks it to stop. `transitions` is the
/// event log, subscribed to before any authority existed: what it says, and the
/// connections opening and closing, are what wakes the idle watch.
pub async fn serve(
    dir: &StateDir,
    shared: Arc<Shared>,
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
        let (open, shared) = (Open::count(&open), shared.clone());
        let leaving = leaving.clone();
        connections.spawn(async move {
            handle_connection(stream, &shared, open, leaving).await;
        });
    };
    let mut busy = Busy::new(transitions);
    let mut idle_since: Option<Instant> = None;
    let mut accept_errors = crate::gateway::bounds::AcceptErrors::default();
    let stop_sweeping = tokio_util::sync::CancellationToken::new();
    let _sweeping = stop_sweeping.clone().drop_guard();
    tokio::spawn(crate::process::lineage::keep_current(stop_sweeping));
    loop {
        // An open HTTP door keeps the supervisor, as a server does (docs/design.md §14).
        let door_open = shared.listening().is_some();
        let idle =
            *opened_or_closed.borrow_and_update() == 0 && busy.servers.is_empty() && !door_open;
        idle_since = idle.then(|| idle_since.unwrap_or_else(Instant::now));
        // After a `down` of the whole fleet, whose client waits for this process
        // to be gone, there is no lingering (docs/design.md §3).
        let linger = match shared.exit_when_idle.load(Ordering::SeqCst) {
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
            received = busy.transitions.recv(), if busy.listening => busy.note(received, &shared).await,
            _ = signals.next() => {
                tracing::info!("signal: tearing everything down");
                shared.shutdown.cancel();
                // Starts in progress end now; what they spawned is torn down (L8).
                shared.interrupt.cancel();
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

/// Counts one in `counter` for as long as it lives.
struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Counted<'a> {
    fn new(counter: &'a std::sync::atomic::AtomicUsize) -> Counted<'a> {
        counter.fetch_add(1, Ordering::SeqCst);
        Counted(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The servers that keep the supervisor: those starting, running, stopping or in
/// backoff (docs/design.md §3). Kept from the transitions as they are recorded: every
/// change of state is one (L12), and says where it led.
struct Busy {
    servers: HashSet<String>,
    transitions: broadcast::Receiver<Event>,
    /// False once the event log is gone (it lives as long as `Shared`).
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

    async fn note(&mut self, received: Result<Event, RecvError>, shared: &Shared) {
        match received {
            Ok(event) => self.set(&event.server, event.to),
            // Transitions were missed: each authority's published state stands for
            // them. One recorded but not yet published is still in the stream, after
            // the gap, and is read next.
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "idle watch lagged behind the event log");
                for handle in shared.handles() {
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

/// Tears down every running server (supervisor shutdown) and returns the code of
/// the outcome, as `down` would rank it.
pub async fn stop_all(shared: Arc<Shared>) -> Code {
    let handles = &shared.handles();
    let replies = host::request_all(handles, Intent::Stop, CallOptions::default(), |_| {}).await;
    handles
        .iter()
        .zip(replies)
        .map(|(h, r)| ServerReport::of_reply(h.name(), r, Intent::Stop, false).exit_code)
        .map(Code::from_i32)
        .fold(Code::Ok, Code::max)
}

async fn handle_connection(
    stream: UnixStream,
    shared: &Shared,
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
    if shared.shutdown.is_cancelled() {
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
        shared.exit_when_idle.store(false, Ordering::SeqCst);
    }
    if let Op::Gateway {
        servers,
        deadlines,
        fleet,
        handover,
    } = request.op
    {
        if let Err(message) = shared.take_up(fleet.as_ref()) {
            let _ = write
                .write_all(protocol::encode(&Response::Error { message }).as_bytes())
                .await;
            return;
        }
        let _session = Counted::new(&shared.stdio_sessions);
        return super::gateway_door::stdio(shared, reader, write, servers, deadlines, handover)
            .await;
    }
    // Lines to the client go through one writer task; a client that went away only
    // stops the writing, never the request (L6).
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if write.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    let response = dispatch(request.op, shared, &tx).await;
    let _ = tx.send(protocol::encode(&response));
    drop(tx);
    let _ = writer.await;
}

pub(super) async fn dispatch(
    op: Op,
    shared: &Shared,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    let (command, names, intent, options, strict) = match op {
        Op::Ping => return reply(Report::new("ping", Vec::new(), false)),
        Op::Metrics { openmetrics } => {
            let format = if openmetrics {
                crate::metrics::exposition::Format::OpenMetrics
            } else {
                crate::metrics::exposition::Format::Prometheus
            };
            return Response::Reply {
                report: Answer::Metrics(crate::protocol::MetricsText {
                    metrics: shared.metrics(format),
                }),
            };
        }
        // Answered in `handle_connection`, which owns the connection it turns into
        // an MCP session.
        Op::Gateway { .. } => {
            return Response::Error {
                message: "a gateway request needs a connection of its own".into(),
            };
        }
        Op::Serve {
            servers,
            listen,
            deadlines,
            fleet,
        } => {
            if let Err(message) = shared.take_up(fleet.as_ref()) {
                return Response::Error { message };
            }
            if let Err(message) = super::gateway_door::open_http(shared, listen) {
                return Response::Error { message };
            }
            let up = Op::Up {
                servers,
                force: false,
                deadlines,
                fleet: None,
                dry_run: false,
                remove_orphans: false,
            };
            return match Box::pin(dispatch(up, shared, tx)).await {
                Response::Reply {
                    report: Answer::Report(mut report),
                } => {
                    report.command = "serve".into();
                    report.gateway = Some(gateway_report(shared));
                    reply(report)
                }
                other => other,
            };
        }
        Op::Tools {
            server,
            deadlines,
            fleet,
        } => {
            if let Err(message) = shared.take_up(fleet.as_ref()) {
                return Response::Error { message };
            }
            return super::calls::tools(shared, server, call_options(deadlines, false)).await;
        }
        Op::Call {
            server,
            tool,
            arguments,
            timeout_ms,
            deadlines,
            fleet,
        } => {
            if let Err(message) = shared.take_up(fleet.as_ref()) {
                return Response::Error { message };
            }
            let options = call_options(deadlines, false);
            return super::calls::call(shared, &server, &tool, arguments, timeout_ms, options)
                .await;
        }
        Op::Status { servers, fleet } => {
            let mut report = match super::converge::status(shared, &servers, fleet.as_ref()) {
                Ok(r) => r,
                Err(message) => return Response::Error { message },
            };
            report.gateway =
                Some(gateway_report(shared)).filter(|g| g.url.is_some() || g.sessions > 0);
            return reply(report);
        }
        Op::Up {
            servers,
            force,
            deadlines,
            fleet,
            dry_run,
            remove_orphans,
        } => {
            let up = super::converge::Up {
                servers,
                fleet,
                options: call_options(deadlines, force),
                dry_run,
                remove_orphans,
            };
            return super::converge::up(shared, up, tx).await;
        }
        Op::Down {
            servers,
            deadlines,
            strict,
            fleet,
        } => {
            if let Err(message) = shared.take_up(fleet.as_ref()) {
                return Response::Error { message };
            }
            (
                "down",
                servers,
                Intent::Stop,
                call_options(deadlines, false),
                strict,
            )
        }
        Op::Reconnect {
            servers,
            if_generation,
            force,
            deadlines,
            strict,
            fleet,
        } => {
            if let Err(message) = shared.take_up(fleet.as_ref()) {
                return Response::Error { message };
            }
            (
                "reconnect",
                servers,
                Intent::Reconnect { if_generation },
                call_options(deadlines, force),
                strict,
            )
        }
        Op::Reset { server } => (
            "reset",
            vec![server],
            Intent::Reset,
            CallOptions::default(),
            false,
        ),
    };
    let must_name = matches!(intent, Intent::Reconnect { .. } | Intent::Reset);
    let unnamed = match intent {
        Intent::Stop => Unnamed::All,
        _ => Unnamed::Enabled,
    };
    let handles = match shared.select(&names, unnamed) {
        Ok(_) if must_name && names.is_empty() => {
            return Response::Error {
                message: format!("{command} needs at least one server name"),
            };
        }
        Ok(h) => h,
        Err(message) => return Response::Error { message },
    };
    // `down` of the whole fleet closes the HTTP door too: once the servers are
    // down, so that the calls in flight get their answer (G4); meanwhile calls
    // through the gateway do not start servers again.
    let whole_fleet_down = intent == Intent::Stop && names.is_empty();
    if whole_fleet_down {
        shared.gateway.hold_starts(true);
    }
    let replies = streaming(shared, &handles, tx, |handles| async move {
        host::request_all(&handles, intent, options, |_| {}).await
    })
    .await;
    let supervisor = whole_fleet_down.then(|| {
        shared.close_http();
        let leaving = shared.leave_after_down();
        shared.gateway.hold_starts(false);
        leaving
    });
    if intent == Intent::Stop {
        // An orphan that `down` stopped is forgotten (docs/design.md §16).
        let stopped: Vec<String> = handles.iter().map(|h| h.name().to_owned()).collect();
        shared.forget_orphans(&stopped);
    }
    let lines = handles
        .iter()
        .zip(replies)
        .map(|(h, r)| ServerReport::of_reply(h.name(), r, intent, strict))
        .collect();
    let mut report = Report::new(command, lines, false);
    report.supervisor = supervisor;
    reply(report)
}

/// Runs `work` on `handles` while streaming their events to the client: every
/// event of a request is recorded before its reply (L12), so what is queued when
/// `work` ends is all of it.
pub(super) async fn streaming<F, Fut, T>(
    shared: &Shared,
    handles: &[Handle],
    tx: &mpsc::UnboundedSender<String>,
    work: F,
) -> T
where
    F: FnOnce(Vec<Handle>) -> Fut,
    Fut: Future<Output = T>,
{
    let mut events = shared.events.subscribe();
    let watched: Vec<String> = handles.iter().map(|h| h.name().to_owned()).collect();
    let forward_tx = tx.clone();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    let forward = tokio::spawn(async move {
        let send = |event: Event| {
            if watched.contains(&event.server) {
                let event = EventReport::from(&event);
                let _ = forward_tx.send(protocol::encode(&Response::Event { event }));
            }
        };
        loop {
            tokio::select! {
                biased;
                received = events.recv() => match received {
                    Ok(event) => send(event),
                    // Too slow a reader loses events, not the rest of the stream.
                    Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "event stream lagged"),
                    Err(RecvError::Closed) => break,
                },
                _ = &mut done_rx => {
                    while let Ok(event) = events.try_recv() {
                        send(event);
                    }
                    break;
                }
            }
        }
    });
    let result = work(handles.to_vec()).await;
    let _ = done_tx.send(());
    let _ = forward.await;
    result
}

/// The gateway as `serve` and `status` show it.
fn gateway_report(shared: &Shared) -> GatewayReport {
    let open = shared.listening();
    GatewayReport {
        url: open.as_ref().map(|o| crate::gateway::http::url(o.addr)),
        token_file: open
            .and_then(|o| o.token_file)
            .map(|f| f.display().to_string()),
        sessions: shared.gateway.sessions(),
    }
}

pub(super) fn reply(report: Report) -> Response {
    Response::Reply {
        report: Answer::Report(report),
    }
}

/// How long a request waits for its authority unless the caller says otherwise:
/// long enough for any reasonable start or teardown ahead of it, but finite (L2).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);

pub(super) fn call_options(d: Deadlines, force: bool) -> CallOptions {
    CallOptions {
        connect_timeout: d.connect_ms,
        cleanup_timeout: d.cleanup_ms,
        wait_timeout: d.wait_ms.unwrap_or(Timeout::After(DEFAULT_WAIT)),
        force,
    }
}
