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
    /// notifications, the notices of abandoned calls.
    tasks: TaskTracker,
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
        let gateway = Arc::new(Gateway {
            shown: watch::Sender::new(shown),
            desk,
            start_options,
            journal,
            metrics,
            tasks,
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
            self.watch(index, member.handle.changes(), tracker);
        }
        self.set(index, Some(member));
        self.announce(index);
    }

    /// Stops offering the server at `index` (gone from the fleet file); clients
    /// are told that the lists changed.
    pub(crate) fn leave(self: &Arc<Gateway>, index: usize) {
        if self.member(index).is_none() {
            return;
        }
        self.set(index, None);
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
    /// while its server is offered, and learns what a new generation offers.
    fn watch(
        self: &Arc<Gateway>,
        index: usize,
        mut changes: tokio::sync::watch::Receiver<crate::lifecycle::authority::Snapshot>,
        tracker: &tokio_util::task::TaskTracker,
    ) {
        let gateway = Arc::downgrade(self);
        tracker.spawn(async move {
            let mut seen = changes.borrow().running_generation();
            while changes.changed().await.is_ok() {
                let now = changes.borrow_and_update().running_generation();
                if now == seen {
                    continue;
                }
                seen = now;
                let Some(gateway) = gateway.upgrade() else {
                    break;
                };
                if gateway.member(index).is_none() {
                    continue;
                }
                gateway.announce(index);
                if now.is_some() {
                    gateway.renew(index).await;
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
    ) -> Asking {
        let caller = Caller {
            client,
            theirs,
            session,
        };
        self.desk.asking(index, ours, caller)
    }

    /// Notes that a client's call to server `index` is being sent, until the
    /// guard drops (see [`Desk::sending`]).
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

    /// Every server's items of one list (each server's as [`Gateway::list_of`]
    /// gives it), for the servers of `scope`.
    pub(super) async fn gather<T: Listing>(&self, scope: &Scope) -> Vec<(usize, Arc<Vec<T>>)> {
        let seen = |i: &usize| scope.as_ref().is_none_or(|s| s.contains(i));
        let fetches = (0..self.members().len())
            .filter(|i| self.member(*i).is_some())
            .filter(seen)
            .map(|index| self.list_of::<T>(index));
        futures::future::join_all(fetches)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// One server's items of one list, as last learned: fetched again (every
    /// page) from a running server whose generation changed or that announced a
    /// change; kept from its last generation for a server that is not running (a
    /// call starts it). An enabled server never seen running is started to learn
    /// what it offers, through its authority (G2).
    pub(super) async fn list_of<T: Listing>(&self, index: usize) -> Option<(usize, Arc<Vec<T>>)> {
        let member = self.member(index)?;
        let snapshot = member.handle.snapshot().await.ok()?;
        let live = snapshot.running_generation();
        let (ever, current, items, holding) = {
            let board = self.desk.board();
            // A slot the task has not yet made is a server never seen.
            match board.lists.get(index).map(T::known) {
                Some(known) => {
                    let current = known.fresh && known.generation == live;
                    let ever = known.generation.is_some();
                    (ever, current, known.items.clone(), board.holding)
                }
                None => (false, false, Arc::default(), board.holding),
            }
        };
        if current && live.is_some() {
            return Some((index, items));
        }
        if live.is_none() {
            let unknown = !ever && member.enabled && !holding;
            if !unknown || self.running(index).await.is_err() {
                return Some((index, items));
            }
        }
        let Some(reach) = member.handle.peer().await.ok().flatten() else {
            return Some((index, items));
        };
        let (generation, session) = (reach.generation, reach.session);
        let offered = session
            .peer()
            .peer_info()
            .is_some_and(|info| T::offered(&info.capabilities));
        let fetched = if offered {
            tokio::time::timeout(LIST_TIMEOUT, T::fetch(&session))
                .await
                .map_err(|_| "timed out".to_owned())
                .and_then(|r| r.map_err(|e| e.to_string()))
        } else {
            Ok(Vec::new())
        };
        let fetched = match fetched {
            Ok(items) => Arc::new(items),
            Err(error) => {
                tracing::warn!(server = member.handle.name(), %error, "listing failed");
                return Some((index, items));
            }
        };
        let known = Known {
            generation: Some(generation),
            fresh: true,
            items: fetched.clone(),
        };
        self.desk.learned(index, T::learnt(known)).await;
        Some((index, fetched))
    }

    /// Learns a server's lists as soon as a generation runs, so that they are
    /// known when it is stopped again (idle) before any client asked.
    pub(super) async fn prefetch(&self, index: usize) {
        self.list_of::<MemberTool>(index).await;
        self.list_of::<Prompt>(index).await;
        self.list_of::<Resource>(index).await;
        self.list_of::<ResourceTemplate>(index).await;
    }

    /// While the whole fleet goes down, calls do not start servers.
    pub(crate) async fn hold_starts(&self, hold: bool) {
        self.desk.hold(hold).await;
    }

    /// The exposed tools (renamed, filtered by each server's `tools:`) and how
    /// their names route back.
    pub(super) async fn tools(&self, scope: &Scope) -> Arc<(Vec<MemberTool>, names::Names)> {
        self.named(scope, |exposure, tool: &MemberTool| {
            names::passes(&tool.tool.name, &exposure.allow, &exposure.deny)
        })
        .await
    }

    /// The exposed prompts and how their names route back.
    pub(super) async fn prompts(&self, scope: &Scope) -> Arc<(Vec<Prompt>, names::Names)> {
        self.named(scope, |_, _: &Prompt| true)
            .await
    }

    /// Every server's items that `keep` keeps, renamed `PREFIX__NAME` (G3).
    /// Building the names costs in proportion to every item of the fleet, and a
    /// call needs them to route one name: the last catalog built is kept and
    /// used again while every server's list and exposure are the same.
    async fn named<T: Listing + Named>(
        &self,
        scope: &Scope,
        keep: impl Fn(&Exposure, &T) -> bool,
    ) -> Arc<(Vec<T>, names::Names)> {
        let gathered = self.gather::<T>(scope).await;
        let members = self.members();
        // A server that left since its list was gathered is not shown.
        let from: Vec<(usize, Arc<Vec<T>>, Exposure)> = gathered
            .into_iter()
            .filter_map(|(i, list)| {
                let exposure = members.get(i).and_then(Option::as_ref)?.exposure.clone();
                Some((i, list, exposure))
            })
            .collect();
        let kept = T::kept(&self.desk.board().catalogs)
            .filter(|c| c.built_from(&from))
            .map(|c| c.built.clone());
        if let Some(built) = kept {
            return built;
        }
        let kept: Vec<(usize, &T, &Exposure)> = from
            .iter()
            .flat_map(|(i, list, e)| list.iter().map(move |item| (*i, item, e)))
            .filter(|(_, item, e)| keep(e, item))
            .collect();
        let names = names::Names::assign(
            kept.iter()
                .map(|(i, item, e)| (*i, e.prefix.as_str(), item.name())),
        );
        let items = kept
            .iter()
            .zip(names.exposed())
            .map(|((_, item, _), exposed)| item.renamed(exposed.clone()))
            .collect();
        let built = Arc::new((items, names));
        let catalog = Catalog {
            from,
            built: built.clone(),
        };
        self.desk.built(T::built(catalog)).await;
        built
    }

    /// The route of tool `name` in the catalog as last built, if that catalog is
    /// still what [`Gateway::tools`] would give `scope`, with no await: every
    /// server of the scope runs the generation whose list it was built from, that
    /// list is fresh, and its exposure the same. `None` otherwise: the caller
    /// takes the long way, which builds the catalog again.
    pub(super) fn route_now(&self, scope: &Scope, name: &str) -> Option<names::Entry> {
        let members = self.members();
        let board = self.desk.board();
        let lists = &board.lists;
        let catalog = board.catalogs.tools.as_ref()?;
        let mut from = catalog.from.iter();
        let seen = |i: usize| scope.as_ref().is_none_or(|s| s.contains(&i));
        for (index, member) in members.iter().enumerate() {
            let Some(member) = member.as_ref().filter(|_| seen(index)) else {
                continue;
            };
            let (built_index, list, exposure) = from.next()?;
            let known = &lists.get(index)?.tools;
            let live = member.handle.running_generation();
            let current = *built_index == index
                && *exposure == member.exposure
                && known.fresh
                && live.is_some()
                && known.generation == live
                && Arc::ptr_eq(&known.items, list);
            if !current {
                return None;
            }
        }
        if from.next().is_some() {
            return None;
        }
        catalog.built.1.route(name).cloned()
    }

    /// Tool `name` as the catalog last built shows it, on the terms of
    /// [`Gateway::route_now`] (a catalog that is still current, with no await);
    /// `None` otherwise.
    pub(super) fn tool_now(&self, scope: &Scope, name: &str) -> Option<rmcp::model::Tool> {
        self.route_now(scope, name)?;
        let board = self.desk.board();
        let (tools, _) = &*board.catalogs.tools.as_ref()?.built;
        tools
            .iter()
            .find(|listed| listed.tool.name == name)
            .map(|listed| listed.tool.clone())
    }

    /// `tool` (as the gateway's `tools/list` gives it) as its server wrote it,
    /// under its exposed name, from the catalog as last built, with no await:
    /// `None` when that catalog has no such tool, or one that differs from it.
    pub(super) fn tool_as_written(
        &self,
        tool: &rmcp::model::Tool,
    ) -> Option<Arc<rmcp::model::JsonObject>> {
        let board = self.desk.board();
        let catalog = board.catalogs.tools.as_ref()?;
        let listed = catalog.built.0.iter().find(|t| t.tool.name == tool.name)?;
        (listed.tool == *tool).then(|| listed.raw.clone())
    }

    /// Server `index`'s name and running generation, with no await (a use of the
    /// server for its idle timer); `None` when it is not running.
    pub(super) fn reach_now(
        &self,
        index: usize,
    ) -> Option<(String, crate::lifecycle::authority::Reach)> {
        let shown = self.shown.borrow();
        let member = shown.members.get(index)?.as_ref()?;
        let reach = member.handle.reach()?;
        Some((member.handle.name().to_owned(), reach))
    }

    /// The server that lists resource `uri`, or whose template's fixed start it
    /// begins with.
    pub(super) async fn resource_owner(&self, scope: &Scope, uri: &str) -> Option<usize> {
        for (index, resources) in self.gather::<Resource>(scope).await {
            if resources.iter().any(|r| r.uri == uri) {
                return Some(index);
            }
        }
        for (index, templates) in self.gather::<ResourceTemplate>(scope).await {
            let fits = templates.iter().any(|t| {
                let fixed = t.uri_template.split('{').next().unwrap_or_default();
                !fixed.is_empty() && uri.starts_with(fixed)
            });
            if fits {
                return Some(index);
            }
        }
        None
    }

    /// The server in `scope` whose resource template is `template` exactly (a
    /// completion's `ref/resource` names the template, not a resource); else
    /// the owner of a resource or template that `template` falls under.
    pub(super) async fn template_owner(&self, scope: &Scope, template: &str) -> Option<usize> {
        for (index, templates) in self.gather::<ResourceTemplate>(scope).await {
            if templates.iter().any(|t| t.uri_template == template) {
                return Some(index);
            }
        }
        self.resource_owner(scope, template).await
    }

    /// What the running servers in `scope` declare beyond their lists. A server
    /// that is not running declares nothing until it runs.
    pub(super) fn offered(&self, scope: &Scope) -> Offered {
        let members = self.members();
        let seen = |i: &usize| scope.as_ref().is_none_or(|s| s.contains(i));
        let mut offered = Offered::default();
        for member in (0..members.len()).filter(seen).filter_map(|i| members[i].as_ref()) {
            let Some(reach) = member.handle.reach() else {
                continue;
            };
            let Some(info) = reach.session.peer().peer_info() else {
                continue;
            };
            offered.completions |= info.capabilities.completions.is_some();
            offered.logging |= info.capabilities.logging.is_some();
            offered.subscribe |= info
                .capabilities
                .resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true));
            offered.tasks |= info.capabilities.supports_tasks();
        }
        offered
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

/// Log levels and resource subscriptions, kept at the servers for the client
/// sessions (docs/design.md §14, "Logging", "Subscriptions").
#[expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]
impl Gateway {
    /// Session `session` (seeing `scope`) asks for log messages at `level`
    /// and above; each running server whose lowest wanted level changed is
    /// asked for it before this returns.
    pub(super) async fn set_level(&self, session: u64, scope: Scope, level: rmcp::model::LoggingLevel) {
        for (index, level) in self.desk.set_level(session, level, scope).await {
            self.level_at(index, level).await;
        }
    }

    /// Asks server `index`, if it runs and declares `logging`, for messages at
    /// `level` and above. A server that does not run is asked when it starts.
    async fn level_at(&self, index: usize, level: rmcp::model::LoggingLevel) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if let Err(e) = super::logging::set_at(&peer, level).await {
            self.note(format_args!("server {server}: logging/setLevel failed: {e}"));
        }
    }

    /// Notes session `session`'s subscription to `uri` at server `index`:
    /// whether it is the first (the server is to be subscribed).
    pub(super) async fn subscribed(&self, session: u64, index: usize, uri: &str) -> bool {
        self.desk.subscribe(session, index, uri.to_owned()).await
    }

    /// Session `session` unsubscribes from `uri`; the servers it was the last
    /// subscriber at are unsubscribed before this returns.
    pub(super) async fn unsubscribe(&self, session: u64, uri: &str) {
        for index in self.desk.unsubscribe(session, uri.to_owned()).await {
            self.unsubscribe_at(index, uri).await;
        }
    }

    /// Unsubscribes server `index`, if it runs, from `uri`.
    async fn unsubscribe_at(&self, index: usize, uri: &str) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if !super::subscriptions::declares(&peer) {
            return;
        }
        if let Err(e) = super::subscriptions::unsubscribe_at(&peer, uri).await {
            self.note(format_args!("server {server}: resources/unsubscribe of {uri} failed: {e}"));
        }
    }

    /// Sends server `index`'s log messages at `level` and above to `queue`
    /// until the guard drops (see [`Desk::call_log`]).
    pub(super) fn call_log(
        &self,
        index: usize,
        level: rmcp::model::LoggingLevel,
        queue: tokio::sync::mpsc::UnboundedSender<rmcp::model::LoggingMessageNotificationParam>,
    ) -> super::desk::CallLogging {
        self.desk.call_log(index, level, queue)
    }

    /// Open `subscriptions/listen` streams.
    pub(super) fn listening(&self) -> usize {
        self.desk.board().listening
    }

    /// Opens a listen stream (see [`Desk::listen`]); `None` at the cap.
    pub(super) async fn listen(&self, listen: Listen) -> Option<(Listening, Vec<(usize, String)>)> {
        self.desk.listen(listen).await
    }

    /// The server of `scope` that offers resource `uri` by the lists the
    /// gateway holds (a resource it lists, or a template whose fixed start
    /// `uri` begins with), if its running generation takes resource
    /// subscriptions; with no await, for the answer to a listen request.
    pub(super) fn subscribable_now(&self, scope: &Scope, uri: &str) -> Option<usize> {
        let seen = |i: usize| scope.as_ref().is_none_or(|s| s.contains(&i));
        let owner = {
            let board = self.desk.board();
            let lists = board.lists.iter().enumerate().filter(|(i, _)| seen(*i));
            let listed = lists
                .clone()
                .find(|(_, l)| l.resources.items.iter().any(|r| r.uri == uri));
            let templated = || {
                lists.clone().find(|(_, l)| {
                    l.templates.items.iter().any(|t| {
                        let fixed = t.uri_template.split('{').next().unwrap_or_default();
                        !fixed.is_empty() && uri.starts_with(fixed)
                    })
                })
            };
            listed.or_else(templated).map(|(i, _)| i)?
        };
        self.member(owner)?;
        let (_, reach) = self.reach_now(owner)?;
        super::subscriptions::declares(&reach.session.into_peer()).then_some(owner)
    }

    /// Subscribes server `index` to `uri` for a listen stream, which is its
    /// first subscriber there; a failure is written to the gateway's log.
    pub(super) async fn subscribe_for_listen(&self, index: usize, uri: &str) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if let Err(e) = super::subscriptions::subscribe_at(&peer, uri).await {
            self.note(format_args!("server {server}: resources/subscribe of {uri} failed: {e}"));
        }
    }

    /// A new generation of server `index` runs: it is asked for the level the
    /// sessions that see it want, and subscribed to the URIs that still have
    /// subscribers.
    async fn renew(&self, index: usize) {
        let Some(wanted) = self.desk.wanted(index).await else {
            return;
        };
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if let Some(level) = wanted.level
            && let Err(e) = super::logging::set_at(&peer, level).await
        {
            self.note(format_args!("server {server}: logging/setLevel failed: {e}"));
        }
        if !super::subscriptions::declares(&peer) {
            return;
        }
        for uri in wanted.uris {
            if let Err(e) = super::subscriptions::subscribe_at(&peer, &uri).await {
                self.note(format_args!("server {server}: resources/subscribe of {uri} failed: {e}"));
            }
        }
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
