//! The authority: one task per server that alone owns its child process, MCP
//! session and state (docs/design.md §3). Everything else holds a cheap `Handle` and sends
//! requests; the task handles them one at a time, in arrival order (L1).
//!
//! ```text
//!  Handle::request ──► queue ──► accept (or withdrawn: the caller's wait deadline passed)
//!                                  │
//!                                  ├─ state::plan ──► Nothing / Refuse ──► reply
//!                                  ├─ Start   ──► spawn ─► initialize ─► tools/list ─► running
//!                                  │               └─ any error, deadline or interrupt: teardown (L8)
//!                                  ├─ Stop    ──► close session ─► teardown (L5) ─► stopped | quarantined
//!                                  └─ Restart ──► Stop, and only if confirmed, Start (L4)
//!  events ──► EventSink, before the reply (L12)
//! ```
//!
//! A caller that goes away does not stop an operation: the task runs it to its end
//! and records the outcome (L6). When every handle is dropped or the shutdown token
//! fires, the task answers whatever is queued (L9), tears down a live generation and
//! ends. The interrupt and shutdown tokens abort starts in progress (their
//! half-started process is still torn down) and refuse new ones, but never cut a
//! teardown short.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rmcp::service::{Peer, RoleClient};
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::error::{ErrorKind, ErrorPhase, ServerError};
use super::events::{Cause, Event, EventSink, millis, rfc3339};
use super::ledger::{Ledger, LiveRecord, NoLedger, QuarantineRecord};
use super::policy::{self, RestartHistory, Supervision};
use super::state::{self, Generation, Intent, Phase, Plan, State};
pub use super::summary::{Outcome, TeardownSummary};
use crate::config::Timeout;
use crate::process::exit_watch::ExitWatch;
use crate::process::lineage::{Lineage, ProcId};
use crate::process::remote::{DeleteOutcome, DeleteProbe, Remote, lost_session};
use crate::process::session::{self, Session, SessionError};
use crate::process::spawn::{self, Launch, Tag};
use crate::process::stderr::StderrTail;
use crate::process::teardown::{self, ExitKind, Grace, TeardownReport};

/// What an authority needs to know about its server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub endpoint: Endpoint,
    /// The command (or URL) as it may be shown: secrets from `${env:...}` stay
    /// templates.
    pub command_shown: String,
    pub connect_timeout: Timeout,
    pub cleanup_timeout: Timeout,
    /// Where the server's stderr is also appended (the supervisor's `logs/`).
    pub stderr_log: Option<std::path::PathBuf>,
    /// Restarts, health checks and idle stop: what the authority does unasked.
    pub supervision: Supervision,
}

/// How a server is reached.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A process of ours, spoken to over its stdin and stdout.
    Stdio(Launch),
    /// A remote server over streamable HTTP.
    Http(Remote),
}

impl Endpoint {
    /// The transport's name in output: `stdio` or `http`.
    pub fn name(&self) -> &'static str {
        match self {
            Endpoint::Stdio(_) => "stdio",
            Endpoint::Http(_) => "http",
        }
    }
}

impl ServerConfig {
    /// What the authority of `spec` needs, from the fleet file.
    pub fn from_spec(
        spec: &crate::config::ServerSpec,
        stderr_log: Option<std::path::PathBuf>,
    ) -> ServerConfig {
        let (endpoint, command_shown) = match &spec.transport {
            crate::config::Transport::Stdio(stdio) => {
                let args: Vec<String> = stdio.args.iter().map(|a| a.value.clone()).collect();
                let env = stdio
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value.clone()))
                    .collect();
                let launch = Launch::new(
                    &stdio.command.value,
                    &args,
                    stdio.shell,
                    env,
                    stdio.cwd.clone(),
                    &spec.name,
                );
                (Endpoint::Stdio(launch), stdio.command.display().to_owned())
            }
            crate::config::Transport::Http(http) => {
                let remote = Remote {
                    url: http.url.value.clone(),
                    headers: http
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.value.clone()))
                        .collect(),
                };
                (Endpoint::Http(remote), http.url.display().to_owned())
            }
        };
        ServerConfig {
            name: spec.name.clone(),
            endpoint,
            command_shown,
            connect_timeout: spec.connect_timeout,
            cleanup_timeout: spec.cleanup_timeout,
            stderr_log,
            supervision: Supervision {
                restart: spec.restart,
                health: spec.health,
                idle_timeout: spec.idle_timeout,
            },
        }
    }
}

/// Per-request overrides of the server's deadlines (L2: settable per call).
#[derive(Debug, Clone, Copy)]
pub struct CallOptions {
    /// `None`: the server's own deadline.
    pub connect_timeout: Option<Timeout>,
    pub cleanup_timeout: Option<Timeout>,
    /// How long the caller waits for the authority to take the request. A request
    /// not taken in time is withdrawn and never runs.
    pub wait_timeout: Timeout,
    /// Recover a quarantined server: SIGKILL what is left of it, confirm, go on (L7).
    pub force: bool,
}

impl Default for CallOptions {
    /// The server's own deadlines, and no limit on the wait for the authority
    /// (in-process callers; the supervisor always sets one).
    fn default() -> CallOptions {
        CallOptions {
            connect_timeout: None,
            cleanup_timeout: None,
            wait_timeout: Timeout::Never,
            force: false,
        }
    }
}

/// A server's state as seen from outside, at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    pub state: Phase,
    pub generation: Option<Generation>,
    pub pid: Option<i32>,
    /// Tools listed by the running generation.
    pub tools: Option<usize>,
    /// The server's name and version from its initialize answer.
    pub server_info: Option<String>,
    /// How long the running generation has been ready.
    pub uptime_ms: Option<u64>,
    /// When the running generation became ready, to compute `uptime_ms` when read.
    #[serde(skip)]
    pub ready_at: Option<Instant>,
    /// Restarts by the restart policy within the current window.
    pub restarts: u32,
    /// In `backoff`: how long until the next restart.
    pub retry_in_ms: Option<u64>,
    #[serde(skip)]
    pub retry_at: Option<tokio::time::Instant>,
    /// The error that put the server in `failed` or `quarantined`.
    pub error: Option<ServerError>,
    /// The last teardown of this server, kept until the next one.
    pub last_teardown: Option<TeardownSummary>,
}

/// The answer to a transition request.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The state after the request.
    pub snapshot: Snapshot,
    /// `Err` when the request did not get what it asked for.
    pub result: Result<(), ServerError>,
    /// Spawn to ready (handshake and tools/list), when this request started a generation.
    pub connect: Option<Duration>,
    /// The teardown this request performed (a stop, or the cleanup of a failed start).
    pub teardown: Option<TeardownSummary>,
}

/// Why a request got no reply from the authority.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("the authority of `{0}` did not accept the request within {1}; it was withdrawn")]
    Busy(String, Timeout),
    #[error("the authority of `{0}` has stopped")]
    Gone(String),
}

enum Message {
    Transition {
        intent: Intent,
        options: CallOptions,
        enqueued: Instant,
        /// Settled when the authority takes the request. If the caller has dropped
        /// the receiver by then, the request was withdrawn and is skipped.
        accepted: oneshot::Sender<()>,
        reply: oneshot::Sender<Reply>,
    },
    /// The server was just used (`tools`, `call`): its idle timer starts over.
    Touch,
}

/// A cheap, cloneable way to reach one server's authority.
#[derive(Clone)]
pub struct Handle {
    name: Arc<str>,
    /// Closed by the authority task when it ends; a send error means it is gone.
    tx: mpsc::Sender<Message>,
    /// The authority's state as it last published it; only the authority writes it.
    published: watch::Receiver<Snapshot>,
    /// The running generation's MCP peer, published likewise.
    published_peer: watch::Receiver<Option<(Generation, Peer<RoleClient>)>>,
}

impl Handle {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Asks for a transition and waits for its outcome.
    pub async fn request(
        &self,
        intent: Intent,
        options: CallOptions,
    ) -> Result<Reply, RequestError> {
        let (accepted_tx, mut accepted_rx) = oneshot::channel();
        let (reply_tx, reply_rx) = oneshot::channel();
        let message = Message::Transition {
            intent,
            options,
            enqueued: Instant::now(),
            accepted: accepted_tx,
            reply: reply_tx,
        };
        let gone = || RequestError::Gone(self.name.to_string());
        let deadline = options.wait_timeout.deadline();
        let sent = match deadline {
            Some(d) => tokio::time::timeout_at(d, self.tx.send(message)).await,
            None => Ok(self.tx.send(message).await),
        };
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(gone()),
            Err(_) => return Err(self.busy(options)),
        }
        // Whether accepted or not, the reply follows: a request that was never
        // accepted is answered when the authority settles its queue on shutdown.
        if let Some(d) = deadline
            && tokio::time::timeout_at(d, &mut accepted_rx).await.is_err()
        {
            // Close first so that the authority cannot accept after this point;
            // then an acceptance that raced the deadline still counts.
            accepted_rx.close();
            if accepted_rx.try_recv().is_err() {
                return Err(self.busy(options));
            }
        }
        reply_rx.await.map_err(|_| gone())
    }

    fn busy(&self, options: CallOptions) -> RequestError {
        RequestError::Busy(self.name.to_string(), options.wait_timeout)
    }

    /// The MCP peer of the running generation, for requests that run outside the
    /// authority (`tools`, `call`); `None` when the server is not running. Answered
    /// at once, never behind a start or teardown in progress; it also counts as a
    /// use of the server for its idle timer.
    pub async fn peer(&self) -> Result<Option<(Generation, Peer<RoleClient>)>, RequestError> {
        // A full queue means the authority is busy anyway: the touch can be skipped.
        let _ = self.tx.try_send(Message::Touch);
        Ok(self.published_peer.borrow().clone())
    }

    /// The current state, at once: the authority publishes it at every change, so a
    /// `status` never waits behind a start or a teardown in progress. After the
    /// authority has ended, this is the last state it published.
    pub async fn snapshot(&self) -> Result<Snapshot, RequestError> {
        let mut snapshot = self.published.borrow().clone();
        snapshot.uptime_ms = snapshot.ready_at.map(|t| millis(t.elapsed()));
        snapshot.retry_in_ms = snapshot
            .retry_at
            .map(|t| millis(t.saturating_duration_since(tokio::time::Instant::now())));
        Ok(snapshot)
    }
}

/// What a running generation holds.
struct Live {
    generation: Generation,
    session: Option<Session>,
    tools: usize,
    server_info: Option<String>,
    /// When the handshake and tools/list were done.
    ready_at: Option<Instant>,
    /// The server's processes (stdio), or how its session ends (remote).
    kind: LiveKind,
}

enum LiveKind {
    Process(Box<LiveProcess>),
    Remote(DeleteProbe),
}

/// The processes of a stdio generation.
struct LiveProcess {
    child: tokio::process::Child,
    pid: i32,
    pgid: i32,
    tag: Tag,
    stderr: StderrTail,
    stderr_task: tokio::task::JoinHandle<()>,
    /// Fires when the main process exits on its own.
    exit: ExitWatch,
    /// Every descendant of the main process (L13), kept current by the passes over
    /// the process table, and written to the ledger as it changes.
    lineage: Lineage,
    /// Ends the reading of the server's stdout that goes on after its session was
    /// closed (L5: a server that writes while it shuts down must not die of EPIPE).
    stdout_drain: CancellationToken,
}

impl Live {
    fn new(generation: Generation, kind: LiveKind) -> Live {
        Live {
            generation,
            session: None,
            tools: 0,
            server_info: None,
            ready_at: None,
            kind,
        }
    }

    fn process(&self) -> Option<&LiveProcess> {
        match &self.kind {
            LiveKind::Process(p) => Some(p),
            LiveKind::Remote(_) => None,
        }
    }

    fn pid(&self) -> Option<i32> {
        self.process().map(|p| p.pid)
    }

    /// The environment tag of the generation's processes (empty for a remote one).
    fn tag_value(&self) -> String {
        self.process()
            .map_or_else(String::new, |p| p.tag.value().to_owned())
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.process().map_or_else(Vec::new, |p| p.stderr.lines())
    }
}

/// Where the authority's environment comes from: events, cancellation, tracking.
#[derive(Clone)]
pub struct Context {
    pub events: Arc<dyn EventSink>,
    /// Aborts starts in progress and refuses new ones; never cuts a teardown short.
    pub interrupt: CancellationToken,
    /// Ends the authority: it answers its queue, tears down and exits.
    pub shutdown: CancellationToken,
    /// Cuts the grace periods of teardowns short: SIGKILL at once (a second Ctrl-C).
    pub escalate: CancellationToken,
    pub tracker: TaskTracker,
    /// Distinguishes this host's generations from any other's in process tags.
    pub tag_scope: String,
    /// Handshakes that may run at once, across all servers (see [`default_start_slots`]).
    pub start_slots: Arc<Semaphore>,
}

/// How long a process whose session ended is given to be seen exiting.
const EXIT_AFTER_EOF: Duration = Duration::from_millis(200);

/// Four handshakes per core may run at once: starting is mostly waiting on the
/// server, but 50 servers that all start at once on two cores share the CPU so
/// thinly that they all miss their connect deadlines together. A server waits for
/// a slot in state `starting`; its connect timeout counts from its spawn.
pub fn default_start_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 4
}

pub fn start_slots(n: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(n.max(1)))
}

/// Starts the authority task of one server that keeps no durable notes. `last_generation`
/// is the highest generation id this server ever had, so that ids never repeat (L3).
pub fn spawn(config: ServerConfig, last_generation: Generation, ctx: Context) -> Handle {
    spawn_with(
        config,
        Initial {
            last_generation,
            quarantine: None,
        },
        Arc::new(NoLedger),
        ctx,
    )
}

/// Where an authority starts from: what an earlier holder of the server left.
#[derive(Debug, Clone, Default)]
pub struct Initial {
    pub last_generation: Generation,
    /// A quarantine that must survive the restart of whatever holds the authority.
    pub quarantine: Option<QuarantineRecord>,
}

/// Starts the authority task of one server, with its durable notes in `ledger`.
pub fn spawn_with(
    config: ServerConfig,
    initial: Initial,
    ledger: Arc<dyn Ledger>,
    ctx: Context,
) -> Handle {
    // Bounded: a caller that floods the queue waits on `send`, under its own deadline.
    let (tx, rx) = mpsc::channel(64);
    let name: Arc<str> = config.name.as_str().into();
    let (state, quarantine_left) = match initial.quarantine {
        Some(q) => (
            State::Quarantined {
                generation: q.generation,
                error: ServerError::new(ErrorKind::TeardownFailed, ErrorPhase::Teardown, q.message),
                leftover_pids: q.leftover_pids,
            },
            Some((q.tag, q.leftover)),
        ),
        None => (State::Stopped, None),
    };
    let (publish, published) = watch::channel(Snapshot {
        name: config.name.clone(),
        transport: config.endpoint.name().to_owned(),
        state: Phase::Stopped,
        generation: None,
        pid: None,
        tools: None,
        server_info: None,
        uptime_ms: None,
        ready_at: None,
        restarts: 0,
        retry_in_ms: None,
        retry_at: None,
        error: None,
        last_teardown: None,
    });
    let (publish_peer, published_peer) = watch::channel(None);
    let actor = Actor {
        config,
        state,
        last_generation: initial.last_generation,
        live: None,
        last_teardown: None,
        quarantine_left,
        ledger,
        publish,
        publish_peer,
        history: RestartHistory::default(),
        retry_at: None,
        ping_at: None,
        missed_pings: 0,
        last_used: tokio::time::Instant::now(),
        ctx: ctx.clone(),
    };
    actor.publish();
    ctx.tracker.spawn(actor.run(rx));
    Handle {
        name,
        tx,
        published,
        published_peer,
    }
}

struct Actor {
    config: ServerConfig,
    state: State,
    last_generation: Generation,
    /// `Some` exactly while the state is `Running`.
    live: Option<Live>,
    last_teardown: Option<TeardownSummary>,
    /// The environment tag of the quarantined generation and the identities of
    /// what was left of it, to find those processes again.
    quarantine_left: Option<(String, Vec<ProcId>)>,
    ledger: Arc<dyn Ledger>,
    /// Where the state is published for `Handle::snapshot`.
    publish: watch::Sender<Snapshot>,
    /// Where the running generation's peer is published for `Handle::peer`.
    publish_peer: watch::Sender<Option<(Generation, Peer<RoleClient>)>>,
    /// Restarts within the current window, to back off and to detect a crash loop.
    history: RestartHistory,
    /// When the pending restart is due (only in `backoff`).
    retry_at: Option<tokio::time::Instant>,
    /// When the next health ping is due (only while running with `health`).
    ping_at: Option<tokio::time::Instant>,
    /// Consecutive missed pings.
    missed_pings: u32,
    /// The last time the server was used (a start or a `tools`/`call`).
    last_used: tokio::time::Instant,
    ctx: Context,
}

/// What woke the authority up.
enum Wake {
    Message(Message),
    Closed,
    Exited,
    Retry,
    Ping,
    Idle,
    /// The running generation's lineage changed: its members go to the ledger.
    Lineage,
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn exited(live: &Option<Live>) {
    match live {
        // The main process exited, or its session ended while it runs on (its
        // stdout closed, or cut off for exceeding a limit): either way the server
        // no longer serves, and must be torn down and reported.
        Some(Live {
            kind: LiveKind::Process(p),
            session,
            ..
        }) => {
            let session_ended = async {
                match session {
                    Some(s) => s.ended().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = p.exit.exited() => {}
                _ = session_ended => {}
            }
        }
        // A remote server has no process to watch: its session ends when the
        // server no longer knows it (it restarted, or ended the session).
        Some(Live {
            kind: LiveKind::Remote(_),
            session: Some(session),
            ..
        }) => session.ended().await,
        _ => std::future::pending().await,
    }
}

async fn lineage_changed(live: &Option<Live>) {
    match live {
        Some(Live {
            kind: LiveKind::Process(p),
            ..
        }) => p.lineage.changed().await,
        _ => std::future::pending().await,
    }
}

/// The result of one operation, before it becomes a `Reply`.
struct Done {
    result: Result<(), ServerError>,
    connect: Option<Duration>,
    teardown: Option<TeardownSummary>,
}

impl Done {
    fn ok() -> Done {
        Done {
            result: Ok(()),
            connect: None,
            teardown: None,
        }
    }

    fn err(e: ServerError) -> Done {
        Done {
            result: Err(e),
            connect: None,
            teardown: None,
        }
    }
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Message>) {
        loop {
            let idle_at = self.idle_at();
            let wake = tokio::select! {
                biased;
                _ = self.ctx.shutdown.cancelled() => break,
                m = rx.recv() => match m {
                    Some(m) => Wake::Message(m),
                    None => Wake::Closed,
                },
                _ = exited(&self.live) => Wake::Exited,
                _ = until(self.retry_at) => Wake::Retry,
                _ = until(self.ping_at) => Wake::Ping,
                _ = until(idle_at) => Wake::Idle,
                _ = lineage_changed(&self.live) => Wake::Lineage,
            };
            match wake {
                Wake::Closed => break,
                Wake::Message(m) => self.handle(m).await,
                Wake::Exited => self.on_exit().await,
                Wake::Retry => self.on_retry().await,
                Wake::Ping => self.on_ping().await,
                Wake::Idle => self.on_idle().await,
                Wake::Lineage => self.note_lineage(),
            }
            self.publish();
        }
        // No new requests from here on; answer everything already queued (L9).
        rx.close();
        while let Ok(message) = rx.try_recv() {
            match message {
                Message::Transition { reply, .. } => {
                    let _ = reply.send(self.reply(Done::err(ServerError::cancelled(
                        "the request (the authority is shutting down)",
                    ))));
                }
                Message::Touch => {}
            }
        }
        if let Some(live) = self.live.take() {
            let generation = live.generation;
            let options = CallOptions::default();
            self.stop_live(live, generation, options, Cause::Shutdown, Duration::ZERO)
                .await;
        }
    }

    async fn handle(&mut self, message: Message) {
        match message {
            Message::Touch => self.last_used = tokio::time::Instant::now(),
            Message::Transition {
                intent,
                options,
                enqueued,
                accepted,
                reply,
            } => {
                if accepted.send(()).is_err() {
                    tracing::debug!(server = %self.config.name, "request withdrawn before it was taken");
                    return;
                }
                let waited = enqueued.elapsed();
                let done = self.transition(intent, options, waited).await;
                // The caller may be gone (L6): the outcome is recorded all the same.
                let _ = reply.send(self.reply(done));
            }
        }
    }

    async fn transition(&mut self, intent: Intent, options: CallOptions, waited: Duration) -> Done {
        let cause = match intent {
            Intent::Start => Cause::Start,
            Intent::Stop => Cause::Stop,
            Intent::Reconnect { .. } => Cause::Reconnect,
            Intent::Reset => Cause::Reset,
        };
        match state::plan(&self.state, intent, self.last_generation, options.force) {
            Plan::Nothing => Done::ok(),
            Plan::Refuse(error) => {
                let phase = self.state.phase();
                let generation = self.state.generation();
                self.emit(
                    phase,
                    generation,
                    cause,
                    Duration::ZERO,
                    waited,
                    Some(error.clone()),
                );
                Done::err(error)
            }
            Plan::Start { next } => self.start(next, options, cause, waited).await,
            Plan::Stop { generation } => self.stop(generation, options, cause, waited).await,
            Plan::Restart { generation, next } => {
                let stopped = self.stop(generation, options, cause, waited).await;
                if stopped.result.is_err() || self.state != State::Stopped {
                    return stopped;
                }
                let mut started = self.start(next, options, cause, Duration::ZERO).await;
                started.teardown = started.teardown.or(stopped.teardown);
                started
            }
            Plan::Recover { generation, next } => {
                let recovered = self.clear_quarantine(generation, true, cause, waited).await;
                if recovered.result.is_err() {
                    return recovered;
                }
                self.start(next, options, cause, Duration::ZERO).await
            }
            Plan::Clear { generation } => {
                self.clear_quarantine(generation, false, cause, waited)
                    .await
            }
            Plan::Settle => {
                self.set(State::Stopped, cause, Duration::ZERO, waited, None);
                Done::ok()
            }
        }
    }

    /// Ends a quarantine: with `kill`, SIGKILLs every process still carrying the
    /// quarantined generation's tag first. Succeeds only once none is alive.
    async fn clear_quarantine(
        &mut self,
        generation: Generation,
        kill: bool,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        let started = Instant::now();
        let Some((tag, ids)) = self.quarantine_left.clone() else {
            return Done::ok();
        };
        let mut alive: Vec<i32> = teardown::leftovers_alive(&tag, &ids)
            .await
            .iter()
            .map(|p| p.pid)
            .collect();
        if kill && !alive.is_empty() {
            alive = teardown::kill_leftovers(&tag, &ids, Duration::from_secs(5)).await;
        }
        if !alive.is_empty() {
            let error = ServerError::new(
                ErrorKind::Quarantined,
                ErrorPhase::Request,
                format!(
                    "generation {generation} still has living processes ({}); use --force to SIGKILL them",
                    alive
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            self.emit(
                Phase::Quarantined,
                Some(generation),
                cause,
                started.elapsed(),
                waited,
                Some(error.clone()),
            );
            return Done::err(error);
        }
        self.quarantine_left = None;
        self.note_end(generation, None).await;
        self.set(State::Stopped, cause, started.elapsed(), waited, None);
        Done::ok()
    }

    async fn stop(
        &mut self,
        generation: Generation,
        options: CallOptions,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        match self.live.take() {
            Some(live) => {
                self.stop_live(live, generation, options, cause, waited)
                    .await
            }
            None => Done::ok(),
        }
    }

    async fn stop_live(
        &mut self,
        live: Live,
        generation: Generation,
        options: CallOptions,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        let started = Instant::now();
        self.set(
            State::Stopping { generation },
            cause,
            Duration::ZERO,
            waited,
            None,
        );
        let cleanup = options
            .cleanup_timeout
            .unwrap_or(self.config.cleanup_timeout);
        let tag = live.tag_value();
        let report = self.tear_down(live, cleanup, started).await;
        let summary = TeardownSummary::new(generation, &report);
        let failure = report
            .failure
            .clone()
            .map(|m| ServerError::new(ErrorKind::TeardownFailed, ErrorPhase::Teardown, m));
        let next = state::after_teardown(generation, report.leftover_pids.clone(), failure);
        let error = match &next {
            State::Quarantined { error, .. } => Some(error.clone()),
            _ => None,
        };
        self.record_end(generation, &next, tag, &report.leftover_ids)
            .await;
        self.set(
            next,
            cause,
            started.elapsed(),
            Duration::ZERO,
            error.clone(),
        );
        self.last_teardown = Some(summary.clone());
        Done {
            result: error.map_or(Ok(()), Err),
            connect: None,
            teardown: Some(summary),
        }
    }

    /// Closes the session (which closes the server's stdin) and runs the verified
    /// teardown. Never cancelled: cleanup belongs to the resource, not the caller.
    async fn tear_down(
        &mut self,
        mut live: Live,
        cleanup: Timeout,
        started: Instant,
    ) -> TeardownReport {
        let grace = Grace::from_cleanup(cleanup);
        let report = match &mut live.kind {
            LiveKind::Process(process) => {
                // The lineage as it is while the server still runs: once its stdin
                // closes it may exit, and its children become orphans whose
                // parentage is no longer there to read (L13). Without a child
                // there is nothing new to read (orphans are tracked already).
                if crate::process::procfs::has_children(process.pid) {
                    let _ = crate::process::procfs::fresh(started).await;
                }
                if let Some(session) = live.session.take() {
                    session.close(grace.eof).await;
                }
                let report = teardown::teardown(
                    teardown::Target {
                        child: &mut process.child,
                        pid: process.pid,
                        pgid: process.pgid,
                        tag: &process.tag,
                        lineage: &process.lineage,
                    },
                    grace,
                    started,
                    &self.ctx.escalate,
                )
                .await;
                // The server's processes are gone (or given up on): nothing more
                // worth reading will come from its stdout.
                process.stdout_drain.cancel();
                // Every holder of the stderr pipe is gone unless something escaped;
                // give the drain a moment to read the last lines, then stop it.
                let drain = &mut process.stderr_task;
                if tokio::time::timeout(Duration::from_millis(200), drain)
                    .await
                    .is_err()
                {
                    process.stderr_task.abort();
                }
                report
            }
            LiveKind::Remote(probe) => {
                // Ending the session is the whole teardown: the DELETE must have
                // succeeded (or not been needed) within the cleanup deadline.
                let limit = cleanup.as_duration().unwrap_or(Duration::from_secs(3600));
                // A session the server no longer knows has nothing left to end,
                // whatever becomes of the DELETE that closing it still sends.
                let lost = live.session.as_ref().and_then(Session::lost);
                let ended = match live.session.take() {
                    Some(session) => session.close(limit).await,
                    None => true,
                };
                let already_lost = lost.is_some();
                let outcome = match lost {
                    Some(how) => Some(DeleteOutcome::AlreadyGone(how)),
                    None => probe.outcome(),
                };
                let failure = match (ended || already_lost, &outcome) {
                    (false, _) => Some(format!(
                        "ending the session did not finish within {}",
                        Timeout::After(limit)
                    )),
                    (true, Some(DeleteOutcome::Failed(e))) => {
                        Some(format!("ending the session (DELETE) failed: {e}"))
                    }
                    (true, _) => None,
                };
                let mut report = TeardownReport::without_processes(started.elapsed(), failure);
                if let (None, Some(DeleteOutcome::AlreadyGone(how))) = (&report.failure, outcome) {
                    let note = format!("the server had already ended the session ({how})");
                    tracing::info!(server = %self.config.name, generation = live.generation, "{note}");
                    report.note = Some(note);
                }
                report
            }
        };
        tracing::debug!(
            server = %self.config.name,
            generation = live.generation,
            outcome = ?Outcome::of(&report),
            ms = millis(report.duration),
            "teardown"
        );
        report
    }

    async fn start(
        &mut self,
        generation: Generation,
        options: CallOptions,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        if self.ctx.interrupt.is_cancelled() || self.ctx.shutdown.is_cancelled() {
            let error = ServerError::cancelled("the start");
            return Done::err(error);
        }
        let started = Instant::now();
        // The generation is taken before anything is spawned, so that it is never
        // given twice, whatever happens next.
        if let Err(e) = self.ledger.reserve(&self.config.name, generation).await {
            return Done::err(ServerError::new(
                ErrorKind::SpawnFailed,
                ErrorPhase::Spawn,
                format!("cannot record generation {generation} before spawning: {e}"),
            ));
        }
        self.last_generation = generation;
        self.set(
            State::Starting { generation },
            cause,
            Duration::ZERO,
            waited,
            None,
        );

        // Held until the handshake has ended, one way or the other.
        let slot = tokio::select! {
            biased;
            _ = self.ctx.interrupt.cancelled() => None,
            _ = self.ctx.shutdown.cancelled() => None,
            slot = self.ctx.start_slots.clone().acquire_owned() => slot.ok(),
        };
        let Some(_slot) = slot else {
            let error = ServerError::cancelled("the start");
            return self.nothing_spawned(generation, error, cause, started, waited);
        };
        let connect_timeout = options
            .connect_timeout
            .unwrap_or(self.config.connect_timeout);
        let deadline = connect_timeout.deadline();
        type Init = std::pin::Pin<Box<dyn Future<Output = Result<Session, SessionError>> + Send>>;
        let (mut live, init): (Live, Init) = match &self.config.endpoint {
            Endpoint::Stdio(launch) => {
                let tag = Tag::new(&self.ctx.tag_scope, &self.config.name, generation);
                // Until its lineage is tracked, the new process must not be taken
                // for another generation's orphan.
                let spawning = crate::process::lineage::Spawning::begin();
                let lineage = Lineage::prepare(tag.value());
                let mut spawned = match spawn::spawn(
                    launch,
                    tag,
                    &self.config.name,
                    self.config.stderr_log.as_deref(),
                ) {
                    Ok(s) => s,
                    Err(e) => {
                        let error = spawn_error(&self.config.command_shown, &e);
                        return self.nothing_spawned(
                            generation,
                            error,
                            cause,
                            started,
                            Duration::ZERO,
                        );
                    }
                };
                // Written while the handshake runs: until it is on disk, a new
                // supervisor still finds the process by its tag.
                let durable = self.ledger.spawned(
                    &self.config.name,
                    LiveRecord {
                        generation,
                        pid: spawned.pid,
                        pgid: spawned.pgid,
                        start_time: spawned.start_time,
                        boot_id: crate::process::procfs::boot_id(),
                        tag: spawned.tag.value().to_owned(),
                        lineage: Vec::new(),
                    },
                );
                let server = self.config.name.clone();
                self.ctx.tracker.spawn(async move {
                    if let Err(e) = durable.await {
                        tracing::error!(server, error = %e, "cannot write state.json (spawned)");
                    }
                });
                let stdout_drain = CancellationToken::new();
                let init: Init = match (spawned.stdout.take(), spawned.stdin.take()) {
                    (Some(stdout), Some(stdin)) => {
                        Box::pin(Session::initialize(stdout, stdin, stdout_drain.clone()))
                    }
                    _ => Box::pin(async {
                        Err(SessionError::Closed(
                            "the server's pipes were not set up".into(),
                        ))
                    }),
                };
                let root = ProcId {
                    pid: spawned.pid,
                    start_time: spawned.start_time.unwrap_or(0),
                };
                lineage.started(root, spawned.pgid);
                let process = LiveProcess {
                    lineage,
                    stdout_drain,
                    exit: ExitWatch::new(spawned.pid),
                    child: spawned.child,
                    pid: spawned.pid,
                    pgid: spawned.pgid,
                    tag: spawned.tag,
                    stderr: spawned.stderr,
                    stderr_task: spawned.stderr_task,
                };
                drop(spawning);
                (
                    Live::new(generation, LiveKind::Process(Box::new(process))),
                    init,
                )
            }
            Endpoint::Http(remote) => {
                let probe = DeleteProbe::default();
                let remote = remote.clone();
                let init_probe = probe.clone();
                let init: Init =
                    Box::pin(async move { Session::initialize_http(&remote, init_probe).await });
                (Live::new(generation, LiveKind::Remote(probe)), init)
            }
        };
        // A start in progress ends early on an interrupt and on shutdown alike: with
        // `connect_timeout: none` it would otherwise hold the queue forever (L9).
        let interrupt = (&self.ctx.interrupt, &self.ctx.shutdown);
        let connected = async {
            let session = bounded(deadline, interrupt, ErrorPhase::Initialize, init).await?;
            let tools = bounded(
                deadline,
                interrupt,
                ErrorPhase::ListTools,
                session.list_tools(),
            )
            .await;
            match tools {
                Ok(tools) => Ok((session, tools.len())),
                Err(e) => {
                    session.close(Duration::from_millis(100)).await;
                    Err(e)
                }
            }
        };
        match connected.await {
            Ok((session, tools)) => {
                // What the server started while it got ready (a helper, a daemon)
                // is on disk before it is reported running: a supervisor killed
                // from here on still finds it (L10, L13).
                if let LiveKind::Process(p) = &live.kind
                    && self.ledger.keeps_lineage()
                    && crate::process::procfs::has_children(p.pid)
                {
                    let _ = crate::process::procfs::fresh(Instant::now()).await;
                    let members = p.lineage.recorded();
                    if !members.is_empty()
                        && let Err(e) = self
                            .ledger
                            .lineage(&self.config.name, generation, members)
                            .await
                    {
                        tracing::error!(server = %self.config.name, error = %e, "cannot write state.json (lineage)");
                    }
                }
                live.server_info = session.server_info();
                live.ready_at = Some(Instant::now());
                live.session = Some(session);
                live.tools = tools;
                let pid = live.pid();
                self.live = Some(live);
                let now = tokio::time::Instant::now();
                self.last_used = now;
                self.missed_pings = 0;
                self.ping_at = self.config.supervision.health.map(|h| now + h.interval);
                let connect = started.elapsed();
                self.set(
                    state::after_start(generation, Ok(pid), Vec::new()),
                    cause,
                    connect,
                    Duration::ZERO,
                    None,
                );
                Done {
                    result: Ok(()),
                    connect: Some(connect),
                    teardown: None,
                }
            }
            Err(error) => {
                // L8: what the failed start acquired is torn down before answering.
                let cleanup = options
                    .cleanup_timeout
                    .unwrap_or(self.config.cleanup_timeout);
                let stderr = live.stderr_lines();
                let tag = live.tag_value();
                let report = self.tear_down(live, cleanup, Instant::now()).await;
                let remote = matches!(self.config.endpoint, Endpoint::Http(_));
                let error = describe_start_error(error, report.exit, connect_timeout, remote)
                    .with_stderr(stderr);
                let summary = TeardownSummary::new(generation, &report);
                let next = state::after_start(
                    generation,
                    Err(error.clone()),
                    report.leftover_pids.clone(),
                );
                self.record_end(generation, &next, tag, &report.leftover_ids)
                    .await;
                let cause = if error.kind == ErrorKind::Cancelled {
                    Cause::Interrupt
                } else {
                    cause
                };
                self.set(
                    next,
                    cause,
                    started.elapsed(),
                    Duration::ZERO,
                    Some(error.clone()),
                );
                self.last_teardown = Some(summary.clone());
                Done {
                    result: Err(error),
                    connect: None,
                    teardown: Some(summary),
                }
            }
        }
    }

    /// Ends a start that failed before anything was spawned for its generation.
    fn nothing_spawned(
        &mut self,
        generation: Generation,
        error: ServerError,
        cause: Cause,
        started: Instant,
        waited: Duration,
    ) -> Done {
        let next = state::after_start(generation, Err(error.clone()), Vec::new());
        self.set(next, cause, started.elapsed(), waited, Some(error.clone()));
        Done::err(error)
    }

    /// Tells the ledger how a generation ended, and keeps the tag of a quarantined
    /// one so that its leftovers can be found again.
    async fn record_end(
        &mut self,
        generation: Generation,
        next: &State,
        tag: String,
        leftover: &[ProcId],
    ) {
        let quarantine = match next {
            State::Quarantined {
                error,
                leftover_pids,
                ..
            } => {
                self.quarantine_left = Some((tag.clone(), leftover.to_vec()));
                Some(QuarantineRecord {
                    generation,
                    message: error.message.clone(),
                    leftover_pids: leftover_pids.clone(),
                    tag,
                    leftover: leftover.to_vec(),
                })
            }
            _ => None,
        };
        self.note_end(generation, quarantine).await;
    }

    /// Writes the running generation's lineage to the ledger, so that a supervisor
    /// that starts after a crash finds its members by identity (L10, L13).
    fn note_lineage(&self) {
        let Some(live) = &self.live else { return };
        let Some(process) = live.process() else {
            return;
        };
        let members = process.lineage.recorded();
        let durable = self
            .ledger
            .lineage(&self.config.name, live.generation, members);
        let server = self.config.name.clone();
        self.ctx.tracker.spawn(async move {
            if let Err(e) = durable.await {
                tracing::error!(server, error = %e, "cannot write state.json (lineage)");
            }
        });
    }

    /// Notes that a generation ended and waits until the note is on disk, so that
    /// a quarantine is never reported before it is kept.
    async fn note_end(&self, generation: Generation, quarantine: Option<QuarantineRecord>) {
        let durable = self.ledger.ended(&self.config.name, generation, quarantine);
        if let Err(e) = durable.await {
            tracing::error!(server = %self.config.name, error = %e, "cannot write state.json (ended)");
        }
    }

    /// Changes state and records the transition.
    fn set(
        &mut self,
        next: State,
        cause: Cause,
        duration: Duration,
        waited: Duration,
        error: Option<ServerError>,
    ) {
        let from = self.state.phase();
        // A transition to `stopped` is still about the generation that stopped.
        let generation = next.generation().or(self.state.generation());
        // Timers belong to the states they serve: leaving them drops the timer, so a
        // user's request always cancels a pending restart.
        if !matches!(next, State::Backoff { .. }) {
            self.retry_at = None;
        }
        if !matches!(next, State::Running { .. }) {
            self.ping_at = None;
        }
        if matches!(cause, Cause::Start | Cause::Reconnect | Cause::Stop)
            && matches!(next, State::Starting { .. } | State::Stopped)
        {
            // A person asked for this: the restart count begins anew.
            self.history.clear();
        }
        self.state = next;
        self.emit(from, generation, cause, duration, waited, error);
        self.publish();
    }

    /// When an idle server is due to be stopped.
    fn idle_at(&self) -> Option<tokio::time::Instant> {
        let idle = self.config.supervision.idle_timeout?;
        self.live.as_ref()?;
        Some(self.last_used + idle)
    }

    /// The server's main process exited on its own: sweep what is left of its group,
    /// record why, and let the restart policy decide what comes next.
    async fn on_exit(&mut self) {
        let Some(live) = self.live.take() else { return };
        let generation = live.generation;
        let up_for = live.ready_at.map_or(Duration::ZERO, |t| t.elapsed());
        let stderr = live.stderr_lines();
        let tag = live.tag_value();
        // Looked at before teardown: whether the process was still running when
        // its session ended, and why the session was cut off.
        let violation = live.session.as_ref().and_then(Session::violation);
        let lost = live.session.as_ref().and_then(Session::lost);
        // A process that exits closes its stdout a moment before it is seen to
        // have exited: give the exit that moment before calling it a process
        // that runs on without its session.
        let process_exited = match &live.kind {
            LiveKind::Process(p) => tokio::time::timeout(EXIT_AFTER_EOF, p.exit.exited())
                .await
                .is_ok(),
            LiveKind::Remote(_) => true,
        };
        let started = Instant::now();
        let report = self
            .tear_down(live, self.config.cleanup_timeout, started)
            .await;
        let how = report
            .exit
            .map_or_else(|| "exit status unknown".to_owned(), |e| e.to_string());
        let error = match violation {
            Some(why) => ServerError::new(
                ErrorKind::Protocol,
                ErrorPhase::Running,
                format!("generation {generation}'s session was ended: {why}"),
            ),
            None if lost.is_some() => ServerError::new(
                ErrorKind::SessionLost,
                ErrorPhase::Running,
                format!(
                    "generation {generation}'s session ended: {}; the server may have restarted",
                    lost_session(lost.as_deref().unwrap_or_default())
                ),
            ),
            None if !process_exited => ServerError::new(
                ErrorKind::Protocol,
                ErrorPhase::Running,
                format!(
                    "generation {generation} closed its stdout while running; it was torn down ({how})"
                ),
            ),
            None => ServerError::new(
                ErrorKind::Exited,
                ErrorPhase::Running,
                format!("generation {generation} exited while running ({how})"),
            ),
        }
        .with_stderr(stderr);
        self.history
            .forget_if_stable(&self.config.supervision.restart, up_for);
        let next = if report.leftover_pids.is_empty() {
            self.after_failure(generation, error.clone(), report.exit)
        } else {
            state::after_teardown(generation, report.leftover_pids.clone(), None)
        };
        self.last_teardown = Some(TeardownSummary::new(generation, &report));
        self.record_end(generation, &next, tag, &report.leftover_ids)
            .await;
        self.set(
            next,
            Cause::Exited,
            started.elapsed(),
            Duration::ZERO,
            Some(error),
        );
    }

    /// After a generation failed (exited, or a restart did not come up): `failed`,
    /// `backoff` with the retry timer set, or `crash-loop`.
    fn after_failure(
        &mut self,
        generation: Generation,
        error: ServerError,
        exit: Option<ExitKind>,
    ) -> State {
        let restart = self.config.supervision.restart;
        if !policy::restarts_after(restart.policy, exit) {
            return State::Failed { generation, error };
        }
        if self.history.record(&restart, tokio::time::Instant::now()) {
            let mut error = error;
            error.kind = ErrorKind::CrashLoop;
            error.message = format!(
                "{}; it was restarted {} times within {}, so it stays down until `reconnect`",
                error.message,
                restart.max_restarts,
                Timeout::After(restart.window)
            );
            return State::CrashLoop { generation, error };
        }
        let delay = policy::backoff(&restart, self.history.count() - 1, policy::jitter());
        self.retry_at = Some(tokio::time::Instant::now() + delay);
        tracing::info!(server = %self.config.name, generation, delay_ms = millis(delay), "restart scheduled");
        State::Backoff { generation, error }
    }

    /// The backoff is over: start the next generation. A restart that fails counts
    /// as another failure for the policy.
    async fn on_retry(&mut self) {
        self.retry_at = None;
        if !matches!(self.state, State::Backoff { .. }) {
            return;
        }
        let next = self.last_generation + 1;
        let done = self
            .start(next, CallOptions::default(), Cause::Restart, Duration::ZERO)
            .await;
        if let (Err(error), State::Failed { generation, .. }) = (done.result, &self.state) {
            let generation = *generation;
            // The exit status of a failed start is not a clean exit: count it.
            let state = self.after_failure(generation, error, None);
            if !matches!(state, State::Failed { .. }) {
                self.set(state, Cause::Restart, Duration::ZERO, Duration::ZERO, None);
            }
        }
    }

    /// A health ping. After `failures` misses in a row, the server is restarted
    /// through the same path as `reconnect`: the old generation is confirmed gone
    /// before the new one starts (L4).
    async fn on_ping(&mut self) {
        let Some(health) = self.config.supervision.health else {
            self.ping_at = None;
            return;
        };
        let peer = self
            .live
            .as_ref()
            .and_then(|l| l.session.as_ref().map(|s| s.peer()));
        let Some(peer) = peer else {
            self.ping_at = None;
            return;
        };
        let answered = matches!(
            tokio::time::timeout(health.timeout, session::ping(&peer)).await,
            Ok(Ok(()))
        );
        self.ping_at = Some(tokio::time::Instant::now() + health.interval);
        if answered {
            self.missed_pings = 0;
            return;
        }
        self.missed_pings += 1;
        tracing::warn!(server = %self.config.name, missed = self.missed_pings, "health ping missed");
        if self.missed_pings < health.failures {
            return;
        }
        self.missed_pings = 0;
        if let State::Running { generation, .. } = self.state {
            let stopped = self
                .stop(
                    generation,
                    CallOptions::default(),
                    Cause::Health,
                    Duration::ZERO,
                )
                .await;
            if stopped.result.is_ok() && self.state == State::Stopped {
                let next = self.last_generation + 1;
                self.start(next, CallOptions::default(), Cause::Health, Duration::ZERO)
                    .await;
            }
        }
    }

    /// No call for `idle_timeout`: stop the server. The next `call` starts it again.
    async fn on_idle(&mut self) {
        if let State::Running { generation, .. } = self.state {
            self.stop(
                generation,
                CallOptions::default(),
                Cause::Idle,
                Duration::ZERO,
            )
            .await;
        }
    }

    fn publish(&self) {
        let peer = self.live.as_ref().and_then(|l| {
            l.session
                .as_ref()
                .map(|session| (l.generation, session.peer()))
        });
        self.publish_peer.send_replace(peer);
        self.publish.send_replace(self.snapshot());
    }

    fn emit(
        &self,
        from: Phase,
        generation: Option<Generation>,
        cause: Cause,
        duration: Duration,
        waited: Duration,
        error: Option<ServerError>,
    ) {
        let event = Event {
            time: rfc3339(SystemTime::now()),
            server: self.config.name.clone(),
            generation,
            from,
            to: self.state.phase(),
            cause,
            duration_ms: millis(duration),
            waited_ms: millis(waited),
            error,
        };
        self.ctx.events.record(&event);
    }

    fn snapshot(&self) -> Snapshot {
        let error = match &self.state {
            State::Failed { error, .. }
            | State::Quarantined { error, .. }
            | State::Backoff { error, .. }
            | State::CrashLoop { error, .. } => Some(error.clone()),
            _ => None,
        };
        Snapshot {
            name: self.config.name.clone(),
            transport: self.config.endpoint.name().to_owned(),
            state: self.state.phase(),
            // A stopped server shows the generation it last had.
            generation: self
                .state
                .generation()
                .or((self.last_generation > 0).then_some(self.last_generation)),
            pid: self.state.pid(),
            tools: self.live.as_ref().map(|l| l.tools),
            server_info: self.live.as_ref().and_then(|l| l.server_info.clone()),
            uptime_ms: self
                .live
                .as_ref()
                .and_then(|l| l.ready_at)
                .map(|t| millis(t.elapsed())),
            ready_at: self.live.as_ref().and_then(|l| l.ready_at),
            restarts: self.history.count(),
            retry_in_ms: self
                .retry_at
                .map(|t| millis(t.saturating_duration_since(tokio::time::Instant::now()))),
            retry_at: self.retry_at,
            error,
            last_teardown: self.last_teardown.clone(),
        }
    }

    fn reply(&self, done: Done) -> Reply {
        Reply {
            snapshot: self.snapshot(),
            result: done.result,
            connect: done.connect,
            teardown: done.teardown,
        }
    }
}

/// Runs one step of a start under the connect deadline and the interrupt.
async fn bounded<T>(
    deadline: Option<tokio::time::Instant>,
    interrupt: (&CancellationToken, &CancellationToken),
    phase: ErrorPhase,
    step: impl Future<Output = Result<T, SessionError>>,
) -> Result<T, ServerError> {
    let step = async {
        match deadline {
            Some(d) => tokio::time::timeout_at(d, step).await.ok(),
            None => Some(step.await),
        }
    };
    let outcome = tokio::select! {
        r = step => r,
        _ = interrupt.0.cancelled() => return Err(ServerError::cancelled("the start")),
        _ = interrupt.1.cancelled() => return Err(ServerError::cancelled("the start")),
    };
    match outcome {
        None => Err(ServerError::new(ErrorKind::ConnectTimeout, phase, "")),
        Some(Ok(v)) => Ok(v),
        Some(Err(SessionError::Closed(m) | SessionError::Http(m) | SessionError::Lost(m))) => {
            Err(ServerError::new(ErrorKind::ConnectFailed, phase, m))
        }
        Some(Err(SessionError::Unauthorized(m))) => {
            Err(ServerError::new(ErrorKind::Unauthorized, phase, m))
        }
        Some(Err(SessionError::Protocol(m))) => {
            Err(ServerError::new(ErrorKind::Protocol, phase, m))
        }
    }
}

/// Turns a start error into the message people read: what happened, in which phase.
fn describe_start_error(
    mut error: ServerError,
    exit: Option<ExitKind>,
    connect_timeout: Timeout,
    remote: bool,
) -> ServerError {
    let step = match error.phase {
        ErrorPhase::ListTools => "tools/list",
        _ => "initialize",
    };
    error.message = match error.kind {
        ErrorKind::ConnectTimeout => {
            format!("no answer to {step} within the connect timeout of {connect_timeout}")
        }
        // A remote server has no output to close: what went wrong over HTTP is
        // in the message already.
        ErrorKind::ConnectFailed if remote => format!("{step} failed: {}", error.message),
        ErrorKind::ConnectFailed => match exit {
            Some(exit) if exit != ExitKind::Code(-1) => {
                format!("the server exited during {step} ({exit})")
            }
            _ => format!("the server closed its output during {step}"),
        },
        ErrorKind::Protocol => format!("{step} failed: {}", error.message),
        ErrorKind::Unauthorized => format!("{step} was refused: {}", error.message),
        _ => return error,
    };
    error
}

fn spawn_error(program: &str, e: &std::io::Error) -> ServerError {
    if let Some(log) = e
        .get_ref()
        .and_then(|r| r.downcast_ref::<spawn::LogOpenError>())
    {
        return ServerError::new(ErrorKind::SpawnFailed, ErrorPhase::Spawn, log.to_string());
    }
    let message = match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("cannot run `{program}`: command not found (or `cwd` does not exist)")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("cannot run `{program}`: permission denied")
        }
        _ if matches!(
            e.raw_os_error(),
            Some(nix::libc::EMFILE | nix::libc::ENFILE)
        ) =>
        {
            let limit = crate::process::limits::raise_open_files();
            format!(
                "cannot run `{program}`: too many open files (limit {}, hard limit {}); \
                 each running server holds about {} descriptors: raise the hard limit \
                 (ulimit -Hn) or run fewer servers",
                limit.soft,
                limit.hard,
                crate::process::limits::PER_SERVER
            )
        }
        _ => format!("cannot run `{program}`: {e}"),
    };
    ServerError::new(ErrorKind::SpawnFailed, ErrorPhase::Spawn, message)
}
