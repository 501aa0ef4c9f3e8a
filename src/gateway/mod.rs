//! The gateway: the fleet served to MCP clients as one MCP server
//! (docs/design.md §14). It lives in the supervisor, once; `mcpfleet connect`
//! (stdio, over the control socket) and `mcpfleet serve` (streamable HTTP) are
//! doors to it (G1).
//!
//! ```text
//!  client ─► door ─► ClientSession (one per client session, `session.rs`)
//!                      │ tools/list, prompts/list, resources/list: the catalog,
//!                      │   refreshed per server when its generation changes or it
//!                      │   announces a change
//!                      └ tools/call: the server's published peer (G2); a server
//!                          that is not running gets a start request first
//!  server ─► Listener (its session's notifications) ─► catalog, every client (G5)
//!  authority snapshots ─► watcher ─► list_changed to every client (G5)
//! ```
//!
//! The gateway never holds a server's session of its own and never waits in an
//! authority's queue for a call: calls go through the peer the authority
//! publishes, in parallel (G2).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use rmcp::service::{Peer, RoleClient, RoleServer};

use crate::lifecycle::Generation;
use crate::lifecycle::authority::{CallOptions, Handle, NotRunning};
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::process::notice::{Asked, Listener, Notice};

pub mod bounds;
pub mod http;
mod journal;
pub mod names;
mod pass;
mod relay;
mod session;

pub use journal::Journal;
pub use pass::{Opened, PassThrough};
pub use session::{ClientSession, Scope};

/// How long a server may take to list what it offers.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// How a server's tools and prompts are shown: the fleet file's `prefix:` and
/// `tools: {allow, deny}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposure {
    pub prefix: String,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// One server of the fleet, as the gateway reaches it.
#[derive(Clone)]
pub struct Member {
    pub handle: Handle,
    pub exposure: Exposure,
    /// A disabled server is started only when a client calls it.
    pub enabled: bool,
}

/// What the gateway last learned of one server's lists, per generation.
struct Known<T> {
    generation: Option<Generation>,
    /// False once the server said its list changed.
    fresh: bool,
    items: Arc<Vec<T>>,
}

impl<T> Default for Known<T> {
    fn default() -> Known<T> {
        Known {
            generation: None,
            fresh: false,
            items: Arc::new(Vec::new()),
        }
    }
}

#[derive(Default)]
struct Lists {
    tools: Known<Tool>,
    prompts: Known<Prompt>,
    resources: Known<Resource>,
    templates: Known<ResourceTemplate>,
}

/// A list a server offers.
trait Listing: Clone + Send + Sync + 'static {
    /// Whether a server with these capabilities offers the list at all.
    fn offered(caps: &rmcp::model::ServerCapabilities) -> bool;
    fn slot(lists: &mut Lists) -> &mut Known<Self>;
    fn fetch(
        peer: &Peer<RoleClient>,
    ) -> impl Future<Output = Result<Vec<Self>, rmcp::service::ServiceError>> + Send;
}

macro_rules! listing {
    ($t:ty, $field:ident, $cap:ident, $fetch:ident) => {
        impl Listing for $t {
            fn offered(caps: &rmcp::model::ServerCapabilities) -> bool {
                caps.$cap.is_some()
            }
            fn slot(lists: &mut Lists) -> &mut Known<Self> {
                &mut lists.$field
            }
            fn fetch(
                peer: &Peer<RoleClient>,
            ) -> impl Future<Output = Result<Vec<Self>, rmcp::service::ServiceError>> + Send {
                peer.$fetch()
            }
        }
    };
}

listing!(Tool, tools, tools, list_all_tools);
listing!(Prompt, prompts, prompts, list_all_prompts);
listing!(Resource, resources, resources, list_all_resources);
listing!(
    ResourceTemplate,
    templates,
    resources,
    list_all_resource_templates
);

/// An item the gateway shows under a name of its own.
trait Named {
    fn name(&self) -> &str;
    fn renamed(&self, name: String) -> Self;
}

impl Named for Tool {
    fn name(&self) -> &str {
        &self.name
    }
    fn renamed(&self, name: String) -> Tool {
        let mut tool = self.clone();
        tool.name = name.into();
        tool
    }
}

impl Named for Prompt {
    fn name(&self) -> &str {
        &self.name
    }
    fn renamed(&self, name: String) -> Prompt {
        let mut prompt = self.clone();
        prompt.name = name;
        prompt
    }
}

/// Where a server's progress for a call goes back to: the client that made
/// the call, under its own token.
struct ProgressRoute {
    client: Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
}

/// The fleet's aggregation, shared by every client session and both doors.
pub struct Gateway {
    /// By index, which never changes for a server: `None` for a slot whose server
    /// is not offered (not yet attached, or gone from the fleet file). Replaced
    /// whole when the fleet changes (docs/design.md §16), so readers take a
    /// snapshot and never hold the lock.
    members: RwLock<Arc<Vec<Option<Member>>>>,
    /// The slots whose authority's published state is watched (one watcher each,
    /// for as long as the authority lives).
    watched: Mutex<Vec<bool>>,
    /// Set while the whole fleet goes down: calls do not start servers.
    holding: std::sync::atomic::AtomicBool,
    lists: Mutex<Vec<Lists>>,
    clients: Mutex<HashMap<u64, Peer<RoleServer>>>,
    /// The next client session's id.
    next_id: AtomicU64,
    /// The next call in flight's key (apart, so that session ids run 1, 2, 3).
    next_call: AtomicU64,
    /// By server and the token of the call to it.
    progress: Mutex<HashMap<(usize, String), ProgressRoute>>,
    /// Clients' calls in flight, oldest first: where servers' requests go.
    in_flight: Mutex<Vec<relay::InFlight>>,
    /// Deadlines of the start requests a call makes.
    pub(crate) start_options: CallOptions,
    /// Items per page of an aggregated list.
    page_size: AtomicUsize,
    /// Whether call results name the server and generation in `_meta`
    /// (`gateway.meta`).
    meta: AtomicBool,
    /// Told when a client session opens or closes (G7).
    sessions: Box<dyn Fn(SessionEvent) + Send + Sync>,
    /// The gateway's log.
    journal: Journal,
    /// The exposed tools and prompts as last built, with what they were built
    /// from: built again only when a server's list or exposure changed.
    tool_catalog: Mutex<Option<Catalog<Tool>>>,
    prompt_catalog: Mutex<Option<Catalog<Prompt>>>,
    /// Where calls are counted.
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
}

/// Exposed items (renamed, filtered) and how their names route back, as built
/// from `from`: per server its index, the list it had (the same `Arc` means the
/// same list) and its exposure.
struct Catalog<T> {
    from: Vec<(usize, Arc<Vec<T>>, Exposure)>,
    built: Arc<(Vec<T>, names::Names)>,
}

impl<T> Catalog<T> {
    fn built_from(&self, from: &[(usize, Arc<Vec<T>>, Exposure)]) -> bool {
        self.from.len() == from.len()
            && self
                .from
                .iter()
                .zip(from)
                .all(|(a, b)| a.0 == b.0 && Arc::ptr_eq(&a.1, &b.1) && a.2 == b.2)
    }
}

/// A client session opened or closed.
#[derive(Debug, Clone)]
pub struct SessionEvent {
    pub id: u64,
    pub door: &'static str,
    pub opened: bool,
    /// The client's name and version, once known.
    pub client: Option<String>,
}

impl Gateway {
    /// A gateway for `servers` servers; their members are attached once their
    /// authorities exist (the listeners are needed to create them).
    pub fn new(
        servers: usize,
        start_options: CallOptions,
        page_size: usize,
        sessions: Box<dyn Fn(SessionEvent) + Send + Sync>,
        journal: Journal,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<Gateway> {
        Arc::new(Gateway {
            members: RwLock::new(Arc::new(vec![None; servers])),
            watched: Mutex::new(vec![false; servers]),
            holding: std::sync::atomic::AtomicBool::new(false),
            lists: Mutex::new((0..servers).map(|_| Lists::default()).collect()),
            clients: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            next_call: AtomicU64::new(1),
            progress: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(Vec::new()),
            start_options,
            page_size: AtomicUsize::new(page_size.max(1)),
            meta: AtomicBool::new(false),
            sessions,
            journal,
            tool_catalog: Mutex::new(None),
            prompt_catalog: Mutex::new(None),
            metrics,
        })
    }

    /// What hears server `index`'s notifications.
    pub fn listener(self: &Arc<Gateway>, index: usize) -> Arc<dyn Listener> {
        Arc::new(MemberListener {
            gateway: Arc::downgrade(self),
            index,
        })
    }

    /// Attaches the servers, and watches each authority's published state so that
    /// a start, restart or stop is announced to every client (G5).
    pub fn attach(
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
    pub fn slot(&self) -> usize {
        let mut lists = lock(&self.lists);
        lists.push(Lists::default());
        let mut watched = lock(&self.watched);
        watched.push(false);
        let mut members = write(&self.members);
        let mut next = members.as_ref().clone();
        next.push(None);
        *members = Arc::new(next);
        next_index(&lists)
    }

    /// Offers `member` at `index` to every client, which is told that the lists
    /// changed (G5), and watches its authority's published state.
    pub fn join(
        self: &Arc<Gateway>,
        index: usize,
        member: Member,
        tracker: &tokio_util::task::TaskTracker,
    ) {
        let watch = {
            let mut watched = lock(&self.watched);
            match watched.get_mut(index) {
                Some(w) => !std::mem::replace(w, true),
                None => return,
            }
        };
        if watch {
            self.watch(index, member.handle.changes(), tracker);
        }
        self.set(index, Some(member));
        self.announce(index, tracker);
    }

    /// Stops offering the server at `index` (gone from the fleet file); clients
    /// are told that the lists changed.
    pub fn leave(self: &Arc<Gateway>, index: usize, tracker: &tokio_util::task::TaskTracker) {
        if self.member(index).is_none() {
            return;
        }
        self.set(index, None);
        if let Some(lists) = lock(&self.lists).get_mut(index) {
            *lists = Lists::default();
        }
        self.announce(index, tracker);
    }

    /// Shows the server at `index` as `exposure` says, from now on (its `prefix:`
    /// or `tools:` changed in the fleet file); clients are told if anything changed.
    pub fn expose(
        self: &Arc<Gateway>,
        index: usize,
        exposure: Exposure,
        enabled: bool,
        tracker: &tokio_util::task::TaskTracker,
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
            self.announce(index, tracker);
        }
    }

    /// Items per page of the aggregated lists, from now on.
    pub fn set_page_size(&self, page_size: usize) {
        self.page_size.store(page_size.max(1), Ordering::Relaxed);
    }

    pub(crate) fn page_size(&self) -> usize {
        self.page_size.load(Ordering::Relaxed)
    }

    /// Whether call results carry the server and generation in `_meta`, from
    /// now on.
    pub fn set_meta(&self, meta: bool) {
        self.meta.store(meta, Ordering::Relaxed);
    }

    pub(crate) fn meta(&self) -> bool {
        self.meta.load(Ordering::Relaxed)
    }

    fn set(&self, index: usize, member: Option<Member>) {
        let mut members = write(&self.members);
        let mut next = members.as_ref().clone();
        if let Some(slot) = next.get_mut(index) {
            *slot = member;
        }
        *members = Arc::new(next);
    }

    /// Tells every client that server `index`'s lists changed.
    fn announce(self: &Arc<Gateway>, index: usize, tracker: &tokio_util::task::TaskTracker) {
        let gateway = Arc::downgrade(self);
        tracker.spawn(async move {
            if let Some(gateway) = gateway.upgrade() {
                gateway.changed(index, Notice::ToolsChanged).await;
                gateway.changed(index, Notice::PromptsChanged).await;
                gateway.changed(index, Notice::ResourcesChanged).await;
            }
        });
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
                gateway.changed(index, Notice::ToolsChanged).await;
                gateway.changed(index, Notice::PromptsChanged).await;
                gateway.changed(index, Notice::ResourcesChanged).await;
                if now.is_some() {
                    gateway.prefetch(index).await;
                }
            }
        });
    }

    /// The servers, by index (a snapshot).
    fn members(&self) -> Arc<Vec<Option<Member>>> {
        read(&self.members).clone()
    }

    /// The server offered at `index`.
    fn member(&self, index: usize) -> Option<Member> {
        read(&self.members).get(index).cloned().flatten()
    }

    /// Registers a client session's peer for announcements.
    fn open(&self, door: &'static str, peer: Peer<RoleServer>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let client = peer
            .peer_info()
            .map(|i| {
                format!(
                    "{} {}",
                    bounds::client_words(&i.client_info.name),
                    bounds::client_words(&i.client_info.version)
                )
            });
        lock(&self.clients).insert(id, peer);
        self.note(format_args!(
            "session {id} opened ({door}, {})",
            client.as_deref().unwrap_or("a client with no name")
        ));
        (self.sessions)(SessionEvent {
            id,
            door,
            opened: true,
            client,
        });
        id
    }

    fn close(&self, id: u64, door: &'static str) {
        if lock(&self.clients).remove(&id).is_some() {
            self.note(format_args!("session {id} closed ({door})"));
            (self.sessions)(SessionEvent {
                id,
                door,
                opened: false,
                client: None,
            });
        }
    }

    /// Writes a line to the gateway's log.
    pub fn note(&self, text: impl std::fmt::Display) {
        self.journal.line(text);
    }

    /// Open client sessions.
    pub fn sessions(&self) -> usize {
        lock(&self.clients).len()
    }

    /// A server's list changed: forget it and tell every client.
    async fn changed(&self, index: usize, notice: Notice) {
        {
            let mut lists = lock(&self.lists);
            let Some(lists) = lists.get_mut(index) else {
                return;
            };
            match notice {
                Notice::ToolsChanged => lists.tools.fresh = false,
                Notice::PromptsChanged => lists.prompts.fresh = false,
                Notice::ResourcesChanged => {
                    lists.resources.fresh = false;
                    lists.templates.fresh = false;
                }
                Notice::Progress(_) => return,
            }
        }
        let clients: Vec<Peer<RoleServer>> = lock(&self.clients).values().cloned().collect();
        for client in clients {
            let sent = match notice {
                Notice::ToolsChanged => client.notify_tool_list_changed().await,
                Notice::PromptsChanged => client.notify_prompt_list_changed().await,
                _ => client.notify_resource_list_changed().await,
            };
            if let Err(e) = sent {
                tracing::debug!(error = %e, "a client session did not take a list_changed");
            }
        }
    }

    /// Relays server `index`'s progress notification to the client whose call it
    /// is for.
    async fn progress(&self, index: usize, mut param: rmcp::model::ProgressNotificationParam) {
        let key = (index, token_key(&param.progress_token));
        let route = lock(&self.progress)
            .get(&key)
            .map(|r| (r.client.clone(), r.token.clone()));
        if let Some((client, token)) = route {
            param.progress_token = token;
            let _ = client.notify_progress(param).await;
        }
    }

    /// Sends server `index`'s progress under `ours` (the token its session gave
    /// the call) to `client` under `token` (the one the client gave it), until
    /// the returned guard drops. Tokens are only unique per session: the server
    /// is part of the key.
    fn route_progress(
        self: &Arc<Gateway>,
        index: usize,
        ours: &rmcp::model::ProgressToken,
        client: Peer<RoleServer>,
        token: rmcp::model::ProgressToken,
    ) -> ProgressGuard {
        let key = (index, token_key(ours));
        lock(&self.progress).insert(key.clone(), ProgressRoute { client, token });
        ProgressGuard {
            gateway: Arc::downgrade(self),
            key,
        }
    }

    /// Every server's items of one list (each server's as [`Gateway::list_of`]
    /// gives it), for the servers of `scope`.
    async fn gather<T: Listing>(&self, scope: &Scope) -> Vec<(usize, Arc<Vec<T>>)> {
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
    async fn list_of<T: Listing>(&self, index: usize) -> Option<(usize, Arc<Vec<T>>)> {
        let member = self.member(index)?;
        let snapshot = member.handle.snapshot().await.ok()?;
        let live = snapshot.running_generation();
        let (ever, current, items) = {
            let mut lists = lock(&self.lists);
            let known = T::slot(lists.get_mut(index)?);
            let current = known.fresh && known.generation == live;
            (known.generation.is_some(), current, known.items.clone())
        };
        if current && live.is_some() {
            return Some((index, items));
        }
        if live.is_none() {
            let unknown = !ever && member.enabled && !self.holding.load(Ordering::Relaxed);
            if !unknown || self.running(index).await.is_err() {
                return Some((index, items));
            }
        }
        let Some((generation, peer)) = member.handle.peer().await.ok().flatten() else {
            return Some((index, items));
        };
        let offered = peer
            .peer_info()
            .is_some_and(|info| T::offered(&info.capabilities));
        let fetched = if offered {
            tokio::time::timeout(LIST_TIMEOUT, T::fetch(&peer))
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
        let mut lists = lock(&self.lists);
        *T::slot(lists.get_mut(index)?) = Known {
            generation: Some(generation),
            fresh: true,
            items: fetched.clone(),
        };
        Some((index, fetched))
    }

    /// Learns a server's lists as soon as a generation runs, so that they are
    /// known when it is stopped again (idle) before any client asked.
    async fn prefetch(&self, index: usize) {
        self.list_of::<Tool>(index).await;
        self.list_of::<Prompt>(index).await;
        self.list_of::<Resource>(index).await;
        self.list_of::<ResourceTemplate>(index).await;
    }

    /// While the whole fleet goes down, calls do not start servers.
    pub fn hold_starts(&self, hold: bool) {
        self.holding.store(hold, Ordering::Relaxed);
    }

    /// The exposed tools (renamed, filtered by each server's `tools:`) and how
    /// their names route back.
    async fn tools(&self, scope: &Scope) -> Arc<(Vec<Tool>, names::Names)> {
        self.named(scope, &self.tool_catalog, |exposure, tool: &Tool| {
            names::passes(&tool.name, &exposure.allow, &exposure.deny)
        })
        .await
    }

    /// The exposed prompts and how their names route back.
    async fn prompts(&self, scope: &Scope) -> Arc<(Vec<Prompt>, names::Names)> {
        self.named(scope, &self.prompt_catalog, |_, _: &Prompt| true)
            .await
    }

    /// Every server's items that `keep` keeps, renamed `PREFIX__NAME` (G3).
    /// Building the names costs in proportion to every item of the fleet, and a
    /// call needs them to route one name: the last catalog built is kept and
    /// used again while every server's list and exposure are the same.
    async fn named<T: Listing + Named>(
        &self,
        scope: &Scope,
        memo: &Mutex<Option<Catalog<T>>>,
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
        if let Some(catalog) = lock(memo).as_ref().filter(|c| c.built_from(&from)) {
            return catalog.built.clone();
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
        *lock(memo) = Some(Catalog {
            from,
            built: built.clone(),
        });
        built
    }

    /// The route of tool `name` in the catalog as last built, if that catalog is
    /// still what [`Gateway::tools`] would give `scope`, with no await: every
    /// server of the scope runs the generation whose list it was built from, that
    /// list is fresh, and its exposure the same. `None` otherwise: the caller
    /// takes the long way, which builds the catalog again.
    pub(super) fn route_now(&self, scope: &Scope, name: &str) -> Option<names::Entry> {
        let members = self.members();
        let lists = lock(&self.lists);
        let memo = lock(&self.tool_catalog);
        let catalog = memo.as_ref()?;
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

    /// Server `index`'s name and running generation, with no await (a use of the
    /// server for its idle timer); `None` when it is not running.
    pub(super) fn reach_now(
        &self,
        index: usize,
    ) -> Option<(String, crate::lifecycle::authority::Reach)> {
        let members = read(&self.members);
        let member = members.get(index)?.as_ref()?;
        let reach = member.handle.reach()?;
        Some((member.handle.name().to_owned(), reach))
    }

    /// The server that lists resource `uri`, or whose template's fixed start it
    /// begins with.
    async fn resource_owner(&self, scope: &Scope, uri: &str) -> Option<usize> {
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

    /// The running generation's peer of server `index`, starting it first if it
    /// is not running (a start request to its authority, G2). A server that cannot
    /// be started answers with its error (quarantined, crash loop, ...).
    async fn running(&self, index: usize) -> Result<(Generation, Peer<RoleClient>), ServerError> {
        let member = self.member(index).ok_or_else(|| {
            ServerError::new(ErrorKind::Protocol, ErrorPhase::Request, "no such server")
        })?;
        let stopped_again = || {
            ServerError::new(
                ErrorKind::ConnectFailed,
                ErrorPhase::Running,
                "the server stopped right after it started",
            )
        };
        if self.holding.load(Ordering::Relaxed) {
            return match member.handle.peer().await {
                Ok(Some(p)) => Ok(p),
                _ => Err(ServerError::new(
                    ErrorKind::Cancelled,
                    ErrorPhase::Request,
                    "the fleet is going down (`down`)",
                )),
            };
        }
        member
            .handle
            .running(self.start_options)
            .await
            .map_err(|e| match e {
                NotRunning::NotStarted(started) => match *started {
                    Ok(reply) => reply.result.err().unwrap_or_else(stopped_again),
                    Err(e) => ServerError::new(ErrorKind::Busy, ErrorPhase::Request, e.to_string()),
                },
                NotRunning::StoppedAgain => stopped_again(),
            })
    }
}

fn token_key(token: &rmcp::model::ProgressToken) -> String {
    serde_json::to_string(&token.0).unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

/// The index of the slot just pushed onto `lists`.
fn next_index(lists: &[Lists]) -> usize {
    lists.len() - 1
}

/// Forgets a relayed progress token when the call ends.
struct ProgressGuard {
    gateway: Weak<Gateway>,
    key: (usize, String),
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        if let Some(g) = self.gateway.upgrade() {
            lock(&g.progress).remove(&self.key);
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
        let index = self.index;
        tokio::spawn(async move {
            match notice {
                Notice::Progress(param) => gateway.progress(index, param).await,
                other => gateway.changed(index, other).await,
            }
        });
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
