//! The authority task's loop, and the executor of the core's effects: what wakes
//! the task, how each effect is carried out, and how every transition is recorded
//! (L1, L9, L12) and published.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, oneshot, watch};

use super::super::core::{self as machine, Core, Effect, Input};
use super::super::error::{ErrorKind, ErrorPhase, ServerError};
use super::super::events::{Event, millis, rfc3339};
use super::super::ledger::{Ledger, NoLedger};
use super::super::state::{Generation, Phase, State};
use super::super::summary::{Outcome, TeardownSummary};
use crate::process::lineage::ProcId;
use crate::process::notice::Listener;
use crate::process::session::{self};

use super::config::{CallOptions, ServerConfig};
use super::context::{Context, Initial};
use super::handle::{Handle, Touches};
use super::live::{Live, LiveKind};
use super::messages::{Message, Reply};
use crate::process::session::ListedTool;
use super::snapshot::{Reach, Snapshot};
use super::drive;

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
        protocol_version: None,
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
        ledger: ledger.clone(),
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
        touches: Arc::new(Touches::new()),
        ledger,
        relay: Arc::new(watch::channel(None).0),
    }
}

/// The executor of one server's core: what the server holds and where its
/// transitions go.
pub(super) struct Actor {
    /// The configuration as last read from `configs`: its settings apply at once,
    /// its definition from the next generation on.
    pub(super) config: ServerConfig,
    /// Where a new configuration comes from ([`Handle::configure`]); closed with
    /// the last handle.
    pub(super) configs: watch::Receiver<ServerConfig>,
    /// The definition the last generation was started from.
    pub(super) launched: Option<crate::config::Definition>,
    /// `Some` exactly while the state is `Running`.
    pub(super) live: Option<Live>,
    pub(super) last_teardown: Option<TeardownSummary>,
    /// The outcome of the teardown just done, for the event of the transition
    /// that concludes it.
    pub(super) torn_down: Option<Outcome>,
    /// The environment tag of the quarantined generation and the identities of
    /// what was left of it, to find those processes again.
    pub(super) quarantine_left: Option<(String, Vec<ProcId>)>,
    /// The tag and leftovers of the generation last torn down or swept, for the
    /// ledger note of its end.
    pub(super) ended: Option<(String, Vec<ProcId>)>,
    pub(super) ledger: Arc<dyn Ledger>,
    /// Where the state is published for `Handle::snapshot`.
    pub(super) publish: watch::Sender<Snapshot>,
    /// Where the running generation's peer is published for `Handle::peer`.
    pub(super) publish_peer: watch::Sender<Option<Reach>>,
    /// The request being carried out (default options when none: a restart, a
    /// health restart, an idle stop, shutdown).
    pub(super) request: Request,
    /// When the current start began (its reservation), for its connect duration.
    pub(super) started_at: Instant,
    pub(super) listener: Option<Arc<dyn Listener>>,
    pub(super) ctx: Context,
}

/// The request being carried out: its options, and what its reply will carry.
#[derive(Default)]
pub(super) struct Request {
    pub(super) options: CallOptions,
    pub(super) reply: Option<oneshot::Sender<Reply>>,
    /// Spawn to ready, when the request started a generation.
    pub(super) connect: Option<Duration>,
    /// The last teardown the request performed (a stop, or a failed start's).
    pub(super) teardown: Option<TeardownSummary>,
    /// What the generation the request started listed.
    pub(super) listed: Option<Arc<[ListedTool]>>,
}

/// Sleeps until `at` (one of the core's timers), or forever when there is nothing
/// to wait for.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(drive::tokio_instant(at)).await,
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

/// Returns when a new configuration was given; never once every handle is gone.
async fn config_changed(configs: &mut watch::Receiver<ServerConfig>) {
    if configs.changed().await.is_err() {
        std::future::pending::<()>().await;
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

impl Actor {
    pub(super) async fn run(mut self, mut core: Core, mut rx: mpsc::Receiver<Message>) {
        loop {
            let input = tokio::select! {
                biased;
                _ = self.ctx.shutdown.cancelled() => break,
                // Before the queue: a request sent after `Handle::configure` is
                // taken with the new configuration.
                () = config_changed(&mut self.configs) => {
                    self.reconfigure(&mut core).await;
                    continue;
                }
                m = rx.recv() => match m {
                    None => break,
                    Some(Message::Touch) => Input::Used,
                    Some(Message::Transition { intent, options, enqueued, accepted, reply }) => {
                        if accepted.send(()).is_err() {
                            tracing::debug!(server = %self.config.name, "request withdrawn before it was taken");
                            continue;
                        }
                        // The caller may be gone by the end (L6): the outcome is
                        // recorded all the same.
                        self.ctx.events.accepted(&self.config.name, enqueued.elapsed());
                        self.request = Request { options, reply: Some(reply), ..Request::default() };
                        let stale = self.launched.as_ref().is_some_and(|d| *d != self.config.definition);
                        Input::Request { intent, force: options.force, stale, waited: enqueued.elapsed() }
                    }
                },
                _ = exited(&self.live) => Input::ExitSeen,
                _ = until(core.retry_at()) => Input::Retry,
                _ = until(core.ping_at()) => Input::Ping,
                _ = until(core.idle_at()) => Input::Idle,
                _ = lineage_changed(&self.live) => {
                    self.note_lineage();
                    continue;
                }
            };
            // A use changes only the idle timer, which nothing outside reads:
            // publishing after each one would wake every watcher per call.
            let used = matches!(input, Input::Used);
            drive::drive(&mut core, &mut self, input).await;
            self.request = Request::default();
            if !used {
                self.publish(&core);
            }
        }
        // No new requests from here on; answer everything already queued (L9).
        rx.close();
        while let Ok(message) = rx.try_recv() {
            if let Message::Transition { reply, .. } = message {
                let error = ServerError::cancelled("the request (the authority is shutting down)");
                let _ = reply.send(self.reply(&core, Err(error)));
            }
        }
        drive::drive(&mut core, &mut self, Input::Shutdown).await;
    }

    /// Takes the newest configuration: the settings go to the core at once; the
    /// definition waits for the next launch.
    async fn reconfigure(&mut self, core: &mut Core) {
        let config = self.configs.borrow_and_update().clone();
        let supervision = config.supervision;
        self.config = config;
        drive::drive(core, self, Input::Configure(supervision)).await;
        self.publish(core);
    }

    pub(super) fn publish(&self, core: &Core) {
        let peer = self.live.as_ref().and_then(|l| {
            l.session.as_ref().map(|session| Reach {
                generation: l.generation,
                session: session.reachable(),
            })
        });
        self.publish_peer.send_replace(peer);
        self.publish.send_replace(self.snapshot(core));
    }

    /// Records a transition (L12) and publishes the state it led to.
    fn record(&mut self, core: &Core, t: machine::Transition) {
        if t.to == Phase::Backoff
            && let Some(at) = core.retry_at()
        {
            let delay = at.saturating_duration_since(drive::now());
            tracing::info!(server = %self.config.name, generation = t.generation, delay_ms = millis(delay), "restart scheduled");
        }
        let event = Event {
            time: rfc3339(SystemTime::now()),
            server: self.config.name.clone(),
            generation: t.generation,
            from: t.from,
            to: t.to,
            cause: t.cause,
            duration_ms: millis(t.duration),
            waited_ms: millis(t.waited),
            error: t.error,
            teardown: if t.to == Phase::Stopping {
                None
            } else {
                self.torn_down.take()
            },
        };
        self.ctx.events.record(&event);
        self.publish(core);
    }

    pub(super) fn snapshot(&self, core: &Core) -> Snapshot {
        let state = core.state();
        let error = match state {
            State::Failed { error, .. }
            | State::Quarantined { error, .. }
            | State::Backoff { error, .. }
            | State::CrashLoop { error, .. } => Some(error.clone()),
            _ => None,
        };
        let last = core.last_generation();
        // A running generation keeps its transport until it is replaced.
        let transport = match self.live.as_ref().map(|l| &l.kind) {
            Some(LiveKind::Process(_)) => "stdio",
            Some(LiveKind::Remote(_)) => "http",
            None => self.config.endpoint.name(),
        };
        Snapshot {
            name: self.config.name.clone(),
            transport: transport.to_owned(),
            state: state.phase(),
            // A stopped server shows the generation it last had.
            generation: state.generation().or((last > 0).then_some(last)),
            pid: state.pid(),
            tools: self.live.as_ref().map(|l| l.tools),
            server_info: self.live.as_ref().and_then(|l| l.server_info.clone()),
            protocol_version: self.live.as_ref().and_then(|l| l.protocol_version.clone()),
            uptime_ms: self
                .live
                .as_ref()
                .and_then(|l| l.ready_at)
                .map(|t| millis(t.elapsed())),
            ready_at: self.live.as_ref().and_then(|l| l.ready_at),
            restarts: core.restarts(),
            retry_in_ms: core
                .retry_at()
                .map(|t| millis(t.saturating_duration_since(drive::now()))),
            retry_at: core.retry_at().map(drive::tokio_instant),
            error,
            last_teardown: self.last_teardown.clone(),
            definition: self.launched.clone(),
        }
    }

    fn reply(&mut self, core: &Core, result: Result<(), ServerError>) -> Reply {
        Reply {
            snapshot: self.snapshot(core),
            result,
            connect: self.request.connect.take(),
            teardown: self.request.teardown.take(),
            listed: self.request.listed.take(),
        }
    }

    /// Pings the running generation within `timeout`.
    async fn ping(&self, core: &Core, timeout: Duration) -> bool {
        let reach = self
            .live
            .as_ref()
            .and_then(|l| l.session.as_ref().map(|s| (s.peer(), s.era().clone())));
        let Some((peer, era)) = reach else { return false };
        // Per era: a legacy `ping`, a modern uncached `server/discover`.
        let answered = matches!(
            tokio::time::timeout(timeout, session::check(&peer, &era)).await,
            Ok(Ok(()))
        );
        if !answered {
            tracing::warn!(server = %self.config.name, missed = core.missed_pings() + 1, "health ping missed");
        }
        answered
    }
}

impl drive::Executor for Actor {
    async fn execute(&mut self, effect: Effect, core: &Core) -> Option<Input> {
        match effect {
            Effect::Reserve(generation) => Some(Input::Reserved(self.reserve(generation).await)),
            Effect::Launch(generation) => Some(Input::Started(self.launch(generation).await)),
            Effect::TearDown(_) => Some(Input::TornDown(self.stop().await)),
            Effect::Sweep(_) => Some(self.sweep().await),
            Effect::Clear { generation, kill } => Some(self.clear(generation, kill).await),
            Effect::Ping { timeout } => Some(Input::Pinged {
                answered: self.ping(core, timeout).await,
            }),
            Effect::NoteEnd {
                generation,
                quarantine,
            } => {
                self.note_end(generation, quarantine).await;
                None
            }
            Effect::Record(transition) => {
                self.record(core, transition);
                None
            }
            Effect::Answer(result) => {
                if let Some(reply) = self.request.reply.take() {
                    let _ = reply.send(self.reply(core, result));
                }
                None
            }
        }
    }
}
