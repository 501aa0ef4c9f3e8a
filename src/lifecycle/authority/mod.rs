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

mod actor;
mod handle;
mod live;
mod start;
mod stop;
mod supervision;

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

/// The result of one operation, before it becomes a `Reply`.
struct Done {
    result: Result<(), ServerError>,
    connect: Option<Duration>,
    teardown: Option<TeardownSummary>,
}
