//! The authority: one task per server that alone owns its child process, MCP
//! session and state (docs/design.md §3). Everything else holds a cheap `Handle` and
//! sends requests; the task handles them one at a time, in arrival order (L1).
//!
//! The task decides nothing itself: every transition is the pure core's
//! (`lifecycle::core`). The task wakes on a request, an exit or a timer, feeds it to
//! the core with the time (`drive.rs`, the loop that gives the core tokio's clock
//! and its answers), and carries out the effects the core returns: spawn and
//! connect (`start.rs`), teardown, sweep and quarantine (`stop.rs`), ledger notes,
//! events and publishing (`actor.rs`).
//!
//! ```text
//!  Handle::request ──► queue ──► accept (or withdrawn: the caller's wait deadline passed)
//!                                  │
//!  exit, retry, ping, idle ────────┴──► drive ──► core ──► effects ──► reply
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

use super::core::{self as machine, Core, Effect, Ended, Input, Started};
use super::error::{ErrorKind, ErrorPhase, ServerError};
use super::events::{Event, EventSink, millis, rfc3339};
use super::ledger::{Ledger, LiveRecord, NoLedger, QuarantineRecord};
use super::policy::Supervision;
use super::state::{Generation, Intent, Phase, State};
pub use super::summary::{Outcome, TeardownSummary};
use crate::config::Timeout;
use crate::platform::ExitWatch;
use crate::process::lineage::{Lineage, ProcId};
use crate::process::notice::Listener;
use crate::process::remote::{DeleteOutcome, DeleteProbe, Remote, lost_session};
use crate::process::session::{self, Session, SessionError};
use crate::process::spawn::{self, Launch, Tag};
use crate::process::stderr::StderrTail;
use crate::process::teardown::{self, ExitKind, Grace, TeardownReport};

mod actor;
mod drive;
mod handle;
mod live;
use live::{Live, LiveKind, LiveProcess};
mod messages;
mod start;
mod stop;

use messages::Message;
pub use messages::{ListedTool, NotRunning, Reply, RequestError};

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
    /// What defines the server's process or session, to tell whether a
    /// generation runs what the fleet file says (docs/design.md §16).
    pub definition: crate::config::Definition,
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
                // `env_file:` values, then `env:` (docs/design.md §7).
                let env = stdio
                    .environment()
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.value.clone()))
                    .collect();
                // Whatever `${env:}` or an env file put into the launch line.
                let secrets = std::iter::once(&stdio.command)
                    .chain(&stdio.args)
                    .chain(stdio.env.iter().map(|(_, v)| v))
                    .chain(stdio.env_files.iter().flat_map(|f| f.vars.iter().map(|(_, v)| v)))
                    .flat_map(|t| t.secrets());
                let launch = Launch::new(
                    &stdio.command.value,
                    &args,
                    stdio.shell,
                    env,
                    stdio.cwd.clone(),
                    &spec.name,
                )
                .with_secrets(secrets);
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
            definition: crate::config::Definition::of(spec),
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
    /// The definition the last generation was started from (the running one's,
    /// while it runs); `None` before any start.
    #[serde(skip)]
    pub definition: Option<crate::config::Definition>,
}

impl Snapshot {
    /// The generation of a running server, else `None`.
    pub fn running_generation(&self) -> Option<Generation> {
        (self.state == Phase::Running)
            .then_some(self.generation)
            .flatten()
    }
}

/// How callers outside the authority reach its running generation (G2).
#[derive(Clone)]
pub struct Reach {
    pub generation: Generation,
    pub peer: Peer<RoleClient>,
    /// Requests beside rmcp's, as bytes (stdio servers only): the gateway's
    /// pass-through calls.
    pub link: Option<session::Link>,
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
    published_peer: watch::Receiver<Option<Reach>>,
    /// The server's configuration for its next generation, which the authority
    /// reads when it wakes (docs/design.md §16); the handles share it.
    config: Arc<watch::Sender<ServerConfig>>,
    /// Told of a request withdrawn because its wait ran out (for metrics).
    events: Arc<dyn EventSink>,
    /// When the last use was sent to the authority.
    touches: Arc<handle::Touches>,
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
            ..Initial::default()
        },
        Arc::new(NoLedger),
        ctx,
    )
}

/// Where an authority starts from: what an earlier holder of the server left.
#[derive(Clone, Default)]
pub struct Initial {
    pub last_generation: Generation,
    /// A quarantine that must survive the restart of whatever holds the authority.
    pub quarantine: Option<QuarantineRecord>,
    /// Hears what the server's sessions send unasked (the gateway, §14).
    pub listener: Option<Arc<dyn Listener>>,
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
        definition: None,
    });
    let (publish_peer, published_peer) = watch::channel(None);
    let (config_tx, configs) = watch::channel(config.clone());
    // The restart jitter of each server is drawn from a seed of its own, so that
    // servers that fell together do not come back together (docs/design.md §8).
    let core = Core::new(
        state,
        initial.last_generation,
        config.supervision,
        drive::now(),
        fastrand::u64(..),
    );
    let actor = Actor {
        config,
        configs,
        launched: None,
        live: None,
        last_teardown: None,
        torn_down: None,
        quarantine_left,
        ended: None,
        ledger,
        publish,
        publish_peer,
        request: Request::default(),
        started_at: Instant::now(),
        listener: initial.listener,
        ctx: ctx.clone(),
    };
    actor.publish(&core);
    ctx.tracker.spawn(actor.run(core, rx));
    Handle {
        name,
        tx,
        published,
        published_peer,
        config: Arc::new(config_tx),
        events: ctx.events.clone(),
        touches: Arc::new(handle::Touches::new()),
    }
}

/// The executor of one server's core: what the server holds and where its
/// transitions go.
struct Actor {
    /// The configuration as last read from `configs`: its settings apply at once,
    /// its definition from the next generation on.
    config: ServerConfig,
    /// Where a new configuration comes from ([`Handle::configure`]); closed with
    /// the last handle.
    configs: watch::Receiver<ServerConfig>,
    /// The definition the last generation was started from.
    launched: Option<crate::config::Definition>,
    /// `Some` exactly while the state is `Running`.
    live: Option<Live>,
    last_teardown: Option<TeardownSummary>,
    /// The outcome of the teardown just done, for the event of the transition
    /// that concludes it.
    torn_down: Option<Outcome>,
    /// The environment tag of the quarantined generation and the identities of
    /// what was left of it, to find those processes again.
    quarantine_left: Option<(String, Vec<ProcId>)>,
    /// The tag and leftovers of the generation last torn down or swept, for the
    /// ledger note of its end.
    ended: Option<(String, Vec<ProcId>)>,
    ledger: Arc<dyn Ledger>,
    /// Where the state is published for `Handle::snapshot`.
    publish: watch::Sender<Snapshot>,
    /// Where the running generation's peer is published for `Handle::peer`.
    publish_peer: watch::Sender<Option<Reach>>,
    /// The request being carried out (default options when none: a restart, a
    /// health restart, an idle stop, shutdown).
    request: Request,
    /// When the current start began (its reservation), for its connect duration.
    started_at: Instant,
    listener: Option<Arc<dyn Listener>>,
    ctx: Context,
}

/// The request being carried out: its options, and what its reply will carry.
#[derive(Default)]
struct Request {
    options: CallOptions,
    reply: Option<oneshot::Sender<Reply>>,
    /// Spawn to ready, when the request started a generation.
    connect: Option<Duration>,
    /// The last teardown the request performed (a stop, or a failed start's).
    teardown: Option<TeardownSummary>,
    /// What the generation the request started listed.
    listed: Option<Arc<[ListedTool]>>,
}
