//! The fleet's aggregation, shared by every client session and both doors:
//! the members (written by the supervisor's fleet task, as it takes up the
//! fleet file, and published to readers through a `watch`), and what the
//! gateway's task (`desk.rs`) owns: what each server offers, the catalogs, the
//! client sessions (each with one queue of notifications, sent in order), and
//! the routes of progress and of servers' requests back to the client whose
//! call caused them.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use rmcp::service::{Peer, RoleClient, RoleServer};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

mod lists;
mod subscribing;
use super::bounds;
use super::catalog::{Catalog, Known, Listing, MemberTool, Named};
use super::desk::{Asking, Caller, Desk, Listen, Listening, ProgressGuard, SessionEvent, Upkeep, token_key};
use super::journal::Journal;
use super::member::{Exposure, Member, Scope};
use super::names;
use crate::lifecycle::Generation;
use crate::lifecycle::authority::CallOptions;
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::process::notice::{Asked, Listener, Notice};

/// How long a server may take to list what it offers.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the supervisor's fleet task sets, as it takes up the fleet file, and
/// every session reads: the members by index, and how lists and results are
/// shown.
struct Shown {
    /// By index, which never changes for a server: `None` for a slot whose
    /// server is not offered (not yet attached, or gone from the fleet file).
    /// Replaced whole when the fleet changes (docs/design.md §16), so readers
    /// take a snapshot.
    members: Arc<Vec<Option<Member>>>,
    /// The slots whose authority's published state is watched (one watcher
    /// each, for as long as the authority lives).
    watched: Vec<bool>,
    /// Items per page of an aggregated list.
    page_size: usize,
    /// Whether call results name the server and generation in `_meta`
    /// (`gateway.meta`).
    meta: bool,
}

/// What the servers of a scope declare that the gateway passes on: each is
/// declared to a client only when a server behind it has it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Offered {
    /// Some server answers `completion/complete`.
    pub(super) completions: bool,
    /// Some server sends log messages (`logging`).
    pub(super) logging: bool,
    /// Some server takes resource subscriptions (`resources.subscribe`).
    pub(super) subscribe: bool,
    /// Some server has the tasks extension of 2026-07-28
    /// (`extensions["io.modelcontextprotocol/tasks"]`).
    pub(super) tasks: bool,
}

/// The fleet's aggregation, shared by every client session and both doors.
pub(crate) struct Gateway {
    /// Written by the fleet task alone; read by the sessions, with no wait.
    shown: watch::Sender<Shown>,
    /// The gateway's task: what each server offers, the catalogs, the client
    /// sessions' queues, the routes of progress, the calls in flight, and
    /// whether starts are held.
    desk: Desk,
    /// Deadlines of the start requests a call makes.
    pub(crate) start_options: CallOptions,
    /// The gateway's log.
    journal: Arc<Journal>,
    /// Where calls are counted.
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// The gateway's own tasks: its task, the client sessions' queues of
    /// notifications, the notices of abandoned calls, the listen streams at
    /// servers.
    tasks: TaskTracker,
    /// The 2026-07-28 clients' calls to legacy servers parked while the
    /// clients answer those servers' requests (`inputs.rs`).
    inputs: Arc<super::inputs::Inputs>,
    /// The listen streams held at servers of the 2026-07-28 era.
    at_servers: super::listen_at::AtServers,
}

impl Gateway {
    /// A gateway for `servers` servers; their members are attached once their
    /// authorities exist (the listeners are needed to create them).
    pub(crate) fn new(
        servers: usize,
        start_options: CallOptions,
        page_size: usize,
        sessions: Box<dyn Fn(SessionEvent) + Send + Sync>,
        journal: Journal,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<Gateway> {
        let shown = Shown {
            members: Arc::new(vec![None; servers]),
            watched: vec![false; servers],
            page_size: page_size.max(1),
            meta: false,
        };
        let journal = Arc::new(journal);
        let tasks = TaskTracker::new();
        let (upkeep, mut upkept) = tokio::sync::mpsc::unbounded_channel();
        let desk = Desk::spawn(servers, sessions, journal.clone(), upkeep, &tasks);
        let inputs = super::inputs::Inputs::new(journal.clone(), tasks.clone());
        let gateway = Arc::new(Gateway {
            shown: watch::Sender::new(shown),
            desk,
            start_options,
            journal,
            metrics,
            tasks,
            inputs,
            at_servers: Default::default(),
        });
        // What ended sessions leave to do at servers, in the order it came.
        let weak = Arc::downgrade(&gateway);
        gateway.tasks.spawn(async move {
            while let Some(upkeep) = upkept.recv().await {
                let Some(gateway) = weak.upgrade() else {
                    break;
                };
                match upkeep {
                    Upkeep::Level(index, level) => gateway.level_at(index, level).await,
                    Upkeep::Unsubscribe(index, uri) => gateway.unsubscribe_at(index, &uri).await,
                }
            }
        });
        gateway
    }

    /// What hears server `index`'s notifications.
    pub(crate) fn listener(self: &Arc<Gateway>, index: usize) -> Arc<dyn Listener> {
        Arc::new(MemberListener {
            gateway: Arc::downgrade(self),
            index,
        })
    }

    /// Attaches the servers, and watches each authority's published state so that
    /// a start, restart or stop is announced to every client (G5).
    pub(crate) fn attach(
        self: &Arc<Gateway>,
        members: Vec<Member>,
        tracker: &tokio_util::task::TaskTracker,
    ) {
        for (index, member) in members.into_iter().enumerate() {
            self.join(index, member, tracker);
        }
    }

    /// A new slot, for a server added to the fleet (docs/design.md §16): its
    /// listener is made from the index before its authority exists, and the
    /// server is offered once it [`join`](Gateway::join)s.
    pub(crate) fn slot(&self) -> usize {
        self.desk.slot();
        let mut index = 0;
        self.shown.send_modify(|shown| {
            shown.watched.push(false);
            let mut next = shown.members.as_ref().clone();
            next.push(None);
            index = next.len() - 1;
            shown.members = Arc::new(next);
        });
        index
    }

    /// Offers `member` at `index` to every client, which is told that the lists
    /// changed (G5), and watches its authority's published state.
    pub(crate) fn join(
        self: &Arc<Gateway>,
        index: usize,
        member: Member,
        tracker: &tokio_util::task::TaskTracker,
    ) {
        let mut first = None;
        self.shown.send_if_modified(|shown| {
            first = shown
                .watched
                .get_mut(index)
                .map(|w| !std::mem::replace(w, true));
            first == Some(true)
        });
        let Some(watch) = first else {
            return;
        };
        if watch {
            self.watch(index, member.handle.changes(), member.handle.relays(), tracker);
        }
        self.set(index, Some(member));
        self.announce(index);
        self.listen_at(index);
    }

    /// Stops offering the server at `index` (gone from the fleet file); clients
    /// are told that the lists changed.
    pub(crate) fn leave(self: &Arc<Gateway>, index: usize) {
        if self.member(index).is_none() {
            return;
        }
        self.set(index, None);
        self.at_servers.end(index, None);
        self.desk.forget(index);
        self.announce(index);
    }

    /// Shows the server at `index` as `exposure` says, from now on (its `prefix:`
    /// or `tools:` changed in the fleet file); clients are told if anything changed.
    pub(crate) fn expose(
        self: &Arc<Gateway>,
        index: usize,
        exposure: Exposure,
        enabled: bool,
    ) {
        let Some(mut member) = self.member(index) else {
            return;
        };
        if member.exposure == exposure && member.enabled == enabled {
            return;
        }
        let shown_differently = member.exposure != exposure;
        member.exposure = exposure;
        member.enabled = enabled;
        self.set(index, Some(member));
        if shown_differently {
            self.announce(index);
        }
    }

    /// Items per page of the aggregated lists, from now on.
    pub(crate) fn set_page_size(&self, page_size: usize) {
        let page_size = page_size.max(1);
        self.shown.send_if_modified(|shown| {
            std::mem::replace(&mut shown.page_size, page_size) != page_size
        });
    }

    pub(crate) fn page_size(&self) -> usize {
        self.shown.borrow().page_size
    }

    /// Whether call results carry the server and generation in `_meta`, from
    /// now on.
    pub(crate) fn set_meta(&self, meta: bool) {
        self.shown
            .send_if_modified(|shown| std::mem::replace(&mut shown.meta, meta) != meta);
    }

    pub(crate) fn meta(&self) -> bool {
        self.shown.borrow().meta
    }

    fn set(&self, index: usize, member: Option<Member>) {
        self.shown.send_modify(|shown| {
            let mut next = shown.members.as_ref().clone();
            if let Some(slot) = next.get_mut(index) {
                *slot = member;
            }
            shown.members = Arc::new(next);
        });
    }

    /// Tells every client that server `index`'s lists changed.
    fn announce(&self, index: usize) {
        self.desk.heard(index, Notice::ToolsChanged);
        self.desk.heard(index, Notice::PromptsChanged);
        self.desk.heard(index, Notice::ResourcesChanged);
    }

    /// Announces each start, restart and stop of the authority behind `changes`
    /// while its server is offered, and learns what a new generation offers;
    /// likewise for the generation another host runs that `relays` names
    /// (docs/design.md §19), served while none runs here.
    fn watch(
        self: &Arc<Gateway>,
        index: usize,
        mut changes: tokio::sync::watch::Receiver<crate::lifecycle::authority::Snapshot>,
        mut relays: tokio::sync::watch::Receiver<Option<crate::lifecycle::authority::Reach>>,
        tracker: &tokio_util::task::TaskTracker,
    ) {
        let gateway = Arc::downgrade(self);
        tracker.spawn(async move {
            let serving = |changes: &mut tokio::sync::watch::Receiver<crate::lifecycle::authority::Snapshot>,
                           relays: &mut tokio::sync::watch::Receiver<Option<crate::lifecycle::authority::Reach>>| {
                changes
                    .borrow_and_update()
                    .running_generation()
                    .or_else(|| relays.borrow_and_update().as_ref().map(|r| r.generation))
            };
            let mut seen = serving(&mut changes, &mut relays);
            loop {
                let changed = tokio::select! {
                    c = changes.changed() => c.is_ok(),
                    r = relays.changed() => r.is_ok(),
                };
                if !changed {
                    break;
                }
                let now = serving(&mut changes, &mut relays);
                if now == seen {
                    continue;
                }
                seen = now;
                let Some(gateway) = gateway.upgrade() else {
                    break;
                };
                // The listen stream of a generation that ended ends with it.
                gateway.at_servers.end(index, now);
                if gateway.member(index).is_none() {
                    continue;
                }
                gateway.announce(index);
                if now.is_some() {
                    gateway.renew(index).await;
                    gateway.listen_at(index);
                    gateway.prefetch(index).await;
                }
            }
        });
    }

    /// The servers, by index (a snapshot).
    pub(super) fn members(&self) -> Arc<Vec<Option<Member>>> {
        self.shown.borrow().members.clone()
    }

    /// The server offered at `index`.
    pub(super) fn member(&self, index: usize) -> Option<Member> {
        self.shown.borrow().members.get(index).cloned().flatten()
    }

    /// Registers a client session's peer for announcements. A legacy session's
    /// client is known from its `initialize`; a 2026-07-28 one (`modern`) names
    /// itself in its first request's `_meta` (`client`), and is sent no
    /// `list_changed` of the gateway's accord (that era hears of changes only
    /// on streams it asks for).
    pub(super) async fn open(
        &self,
        door: &'static str,
        peer: Peer<RoleServer>,
        client: Option<rmcp::model::Implementation>,
        modern: bool,
    ) -> u64 {
        let client = client
            .or_else(|| peer.peer_info().map(|i| i.client_info.clone()))
            .map(|i| {
                format!(
                    "{} {}",
                    bounds::client_words(&i.name),
                    bounds::client_words(&i.version)
                )
            });
        self.desk.open(door, peer, client, modern).await
    }

    pub(super) fn close(&self, id: u64, door: &'static str) {
        self.desk.close(id, door);
    }

    /// Notes a client's call to server `index` (`ours` is our request to it,
    /// `theirs` the client's to us) until the returned guard drops: the
    /// server's requests meanwhile go to that client.
    pub(super) fn asking(
        &self,
        index: usize,
        ours: rmcp::model::RequestId,
        client: Peer<RoleServer>,
        theirs: rmcp::model::RequestId,
        session: u64,
        inlet: Option<super::inputs::Inlet>,
    ) -> Asking {
        let caller = Caller {
            client,
            theirs,
            session,
            inlet,
        };
        self.desk.asking(index, ours, caller)
    }

    /// Notes that a client's call to server `index` is being sent, until the
    /// guard drops (see [`Desk::sending`]).
    /// Server `index`'s task `task` (2025-11-25) was made for `session`,
    /// which knows it as `handle`: its status notifications go there.
    pub(super) fn task_made(&self, index: usize, task: String, handle: String, session: u64) {
        self.desk.task_made(index, task, handle, session);
    }

    pub(super) fn sending(&self, index: usize) -> super::desk::Sending {
        self.desk.sending(index)
    }

    /// Answers server `index`'s request of its client: relayed to the client
    /// whose call caused it, or answered here.
    async fn relay(
        &self,
        index: usize,
        asked: Asked,
    ) -> Result<rmcp::model::ClientResult, rmcp::ErrorData> {
        let server = self
            .member(index)
            .map_or_else(String::new, |m| m.handle.name().to_owned());
        // A call is noted once it has gone out (its id is rmcp's, known only
        // then), so a server quick to ask may ask before: while a call to it is
        // being sent, the desk holds the question until that call is noted.
        let caller = self.desk.caller(index, asked.origin.clone()).await;
        super::relay::relay(&self.journal, caller, &server, asked).await
    }

    /// The calls parked while their 2026-07-28 clients answer their servers'
    /// requests.
    pub(crate) fn inputs(&self) -> &Arc<super::inputs::Inputs> {
        &self.inputs
    }

    /// The gateway's own tasks (the clients' queues, the notices of abandoned
    /// calls).
    pub(super) fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// Writes a line to the gateway's log.
    pub(crate) fn note(&self, text: impl std::fmt::Display) {
        self.journal.line(text);
    }

    /// Open client sessions.
    pub(crate) fn sessions(&self) -> usize {
        self.desk.board().sessions
    }

    /// Sends server `index`'s progress under `ours` (the token its session gave
    /// the call) to `client` under `token` (the one the client gave it), until
    /// the returned guard drops. Tokens are only unique per session: the server
    /// is part of the key.
    pub(super) fn route_progress(
        &self,
        index: usize,
        ours: &rmcp::model::ProgressToken,
        session: u64,
        peer: (Peer<RoleServer>, bool),
        token: rmcp::model::ProgressToken,
    ) -> ProgressGuard {
        self.desk
            .route((index, token_key(ours)), session, peer, token)
    }

    /// The running generation's peer of server `index`, starting it first if it
    /// is not running (a start request to its authority, G2). A server that cannot
    /// be started answers with its error (quarantined, crash loop, ...).
    pub(super) async fn running(&self, index: usize) -> Result<(Generation, Peer<RoleClient>), ServerError> {
        let member = self.member(index).ok_or_else(|| {
            ServerError::new(ErrorKind::Protocol, ErrorPhase::Request, "no such server")
        })?;
        let holding = self.desk.board().holding;
        if holding {
            return match member.handle.peer().await {
                Ok(Some(reach)) => Ok((reach.generation, reach.session.into_peer())),
                _ => Err(ServerError::new(
                    ErrorKind::Cancelled,
                    ErrorPhase::Request,
                    "the fleet is going down (`down`)",
                )),
            };
        }
        crate::host::start_then_reach(&member.handle, self.start_options)
            .await
            .map(|reach| (reach.generation, reach.session.into_peer()))
            .map_err(crate::host::Unreached::into_error)
    }
}

/// Hears one server's notifications for the gateway.
struct MemberListener {
    gateway: Weak<Gateway>,
    index: usize,
}

impl Listener for MemberListener {
    fn notified(&self, notice: Notice) {
        let Some(gateway) = self.gateway.upgrade() else {
            return;
        };
        // A log message is named by its server (docs/design.md §14).
        let notice = match notice {
            Notice::Log(param) => {
                let server = gateway
                    .member(self.index)
                    .map_or_else(String::new, |m| m.handle.name().to_owned());
                Notice::Log(super::logging::named(&server, param))
            }
            other => other,
        };
        // To the gateway's task, which puts them on the clients' queues in
        // the order the server sent them.
        gateway.desk.heard(self.index, notice);
    }

    fn asked(
        &self,
        asked: Asked,
    ) -> futures::future::BoxFuture<'static, Result<rmcp::model::ClientResult, rmcp::ErrorData>>
    {
        let gateway = self.gateway.upgrade();
        let index = self.index;
        Box::pin(async move {
            match gateway {
                Some(gateway) => gateway.relay(index, asked).await,
                None => Err(rmcp::ErrorData::internal_error(
                    "the gateway has ended",
                    None,
                )),
            }
        })
    }
}
