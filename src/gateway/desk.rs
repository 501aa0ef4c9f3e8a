//! The gateway's task and its handle ([`Desk`]): one task owns what every
//! client session and every server's notifications change, and publishes what
//! readers need through a `watch` ([`Board`]: each server's lists, the catalogs
//! as last built, the number of open sessions, whether starts are held). It
//! alone holds the client sessions' queues, the routes of servers' progress
//! and the clients' calls in flight, so that what a server sends reaches the
//! client whose call caused it, in the order the messages came.
//!
//! Messages are sent with no wait: one sent before a call goes out (a progress
//! route, a call in flight) is handled before anything the server sends about
//! that call. What readers must see at once (a list learned, a catalog built,
//! starts held) is answered once the board shows it.

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{JsonObject, ProgressToken, RequestId};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::task::TaskTracker;

use super::catalog::{Built, Catalogs, Learnt, Lists};
use super::clients::{ClientQueue, Note};
use super::journal::Journal;
use super::logging::Levels;
use super::member::Scope;
use super::subscriptions::Subscriptions;
use crate::process::notice::Notice;

/// A client session opened or closed.
#[derive(Debug, Clone)]
pub(crate) struct SessionEvent {
    pub id: u64,
    pub door: &'static str,
    pub opened: bool,
    /// The client's name and version, once known.
    pub client: Option<String>,
}

/// What the gateway's task publishes after every change.
#[derive(Default)]
pub(super) struct Board {
    /// What each server offers, by index, as last learned.
    pub(super) lists: Vec<Lists>,
    /// The exposed tools and prompts as last built, with what they were built
    /// from.
    pub(super) catalogs: Catalogs,
    /// Open client sessions.
    pub(super) sessions: usize,
    /// Set while the whole fleet goes down: calls do not start servers.
    pub(super) holding: bool,
    /// Open `subscriptions/listen` streams.
    pub(super) listening: usize,
}

/// A `subscriptions/listen` stream of a 2026-07-28 client: what it asked to
/// hear, and where that goes (`listen.rs`).
pub(super) struct Listen {
    pub(super) scope: Scope,
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
    /// The resources it listens to, by their server.
    pub(super) uris: Vec<(usize, String)>,
    pub(super) queue: mpsc::UnboundedSender<Note>,
}

/// The client whose call a server's request of its client serves.
#[derive(Clone)]
pub(super) struct Caller {
    pub(super) client: Peer<RoleServer>,
    /// The client's request to the gateway.
    pub(super) theirs: RequestId,
    /// The client's session, for the gateway's log.
    pub(super) session: u64,
}

/// What the gateway is to do at a server when a client session ends: ask for
/// another level of log messages, or unsubscribe a URI nobody else follows.
#[derive(Debug, PartialEq)]
pub(super) enum Upkeep {
    Level(usize, rmcp::model::LoggingLevel),
    Unsubscribe(usize, String),
}

/// A message to the gateway's task.
enum Message {
    /// A client session opened: its queue is made, and its id answered.
    Open {
        door: &'static str,
        peer: Peer<RoleServer>,
        client: Option<String>,
        /// Of the 2026-07-28 era: sent no `list_changed` of the gateway's accord.
        modern: bool,
        reply: oneshot::Sender<u64>,
    },
    /// A client session closed.
    Close { id: u64, door: &'static str },
    /// A new slot, for a server added to the fleet.
    Slot,
    /// The server at `index` left the fleet: what it offered is forgotten.
    Forget { index: usize },
    /// Server `index` sent a notification (or the gateway announces one).
    Heard { index: usize, notice: Notice },
    /// Server `index`'s progress under `key` goes to a client under `token`.
    Route {
        key: (usize, String),
        session: u64,
        /// The client, and whether it came through the stdio door.
        peer: (Peer<RoleServer>, bool),
        token: ProgressToken,
    },
    /// The call whose progress came under `key` ended.
    Unroute { key: (usize, String) },
    /// Answered once what was heard before under `key` is written to its
    /// client (at once when there is no such route).
    Flush {
        key: (usize, String),
        done: oneshot::Sender<()>,
    },
    /// A client's call to server `server` is being sent: until [`Message::Sent`],
    /// that server's progress and requests that no known call claims wait for it.
    Sending { server: usize },
    /// That call was sent (its `Ask` and `Route` came first), or not sent at all.
    Sent { server: usize },
    /// A client's call to server `server` is in flight (`ours` is our
    /// request to it).
    Ask {
        server: usize,
        ours: RequestId,
        caller: Caller,
    },
    /// That call was answered or abandoned.
    Unask {
        server: usize,
        ours: RequestId,
        theirs: RequestId,
        session: u64,
    },
    /// Whose call server `server`'s request serves.
    Caller {
        server: usize,
        origin: Option<RequestId>,
        reply: oneshot::Sender<Option<Caller>>,
    },
    /// One list of server `index` was learned.
    Learned {
        index: usize,
        learnt: Learnt,
        reply: oneshot::Sender<()>,
    },
    /// A catalog was built.
    Built {
        built: Built,
        reply: oneshot::Sender<()>,
    },
    /// Calls start servers (`false`) or not (`true`).
    Hold {
        hold: bool,
        reply: oneshot::Sender<()>,
    },
    /// A session asked for log messages at `level` and above: the servers
    /// whose level is to change are answered.
    SetLevel {
        session: u64,
        level: rmcp::model::LoggingLevel,
        scope: Scope,
        reply: oneshot::Sender<Vec<(usize, rmcp::model::LoggingLevel)>>,
    },
    /// A session subscribed to `uri` at `server`: whether it is the first.
    Subscribe {
        session: u64,
        server: usize,
        uri: String,
        reply: oneshot::Sender<bool>,
    },
    /// A session unsubscribed from `uri`: the servers it was the last
    /// subscriber at.
    Unsubscribe {
        session: u64,
        uri: String,
        reply: oneshot::Sender<Vec<usize>>,
    },
    /// A listen stream opened: its id and the resources it is the first
    /// subscriber of; `None` at the cap.
    Listen {
        listen: Listen,
        reply: oneshot::Sender<Option<Heard>>,
    },
    /// A listen stream ended.
    Unlisten { id: u64 },
    /// A 2026-07-28 client's call to `server`, made with a `logLevel`, is in
    /// flight: that server's log messages at `level` and above go to `queue`.
    CallLog {
        server: usize,
        key: u64,
        level: rmcp::model::LoggingLevel,
        queue: mpsc::UnboundedSender<rmcp::model::LoggingMessageNotificationParam>,
    },
    /// That call ended.
    EndCallLog { key: u64 },
    /// Answered once every message sent before it is handled.
    Barrier { reply: oneshot::Sender<()> },
    /// What a new generation of `server` is to be asked: the level, and the
    /// URIs to subscribe to.
    Wanted {
        server: usize,
        reply: oneshot::Sender<Wanted>,
    },
}

/// What a server is to be asked for on behalf of the client sessions.
pub(super) struct Wanted {
    pub(super) level: Option<rmcp::model::LoggingLevel>,
    pub(super) uris: Vec<String>,
}

/// A listen stream's id, and the resources it is the first subscriber of.
type Heard = (u64, Vec<(usize, String)>);

/// The handle to the gateway's task.
pub(super) struct Desk {
    tx: mpsc::UnboundedSender<Message>,
    board: watch::Receiver<Board>,
}

impl Desk {
    /// Spawns the task on `tasks`, for `servers` servers; it ends once every
    /// handle and guard is gone.
    pub(super) fn spawn(
        servers: usize,
        sessions: Box<dyn Fn(SessionEvent) + Send + Sync>,
        journal: Arc<Journal>,
        upkeep: mpsc::UnboundedSender<Upkeep>,
        tasks: &TaskTracker,
    ) -> Desk {
        let board = Board {
            lists: (0..servers).map(|_| Lists::default()).collect(),
            ..Board::default()
        };
        let (board, reader) = watch::channel(board);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = DeskTask {
            board,
            clients: HashMap::new(),
            modern: Default::default(),
            listens: HashMap::new(),
            call_logs: Vec::new(),
            next_id: 1,
            progress: HashMap::new(),
            early: std::collections::VecDeque::new(),
            calls: Vec::new(),
            sending: HashMap::new(),
            held: Vec::new(),
            sessions,
            journal,
            levels: Levels::default(),
            subscriptions: Subscriptions::default(),
            upkeep,
            tasks: tasks.clone(),
        };
        tasks.spawn(task.run(rx));
        Desk { tx, board: reader }
    }

    /// What the task last published.
    pub(super) fn board(&self) -> watch::Ref<'_, Board> {
        self.board.borrow()
    }

    fn send(&self, message: Message) {
        let _ = self.tx.send(message);
    }

    /// Sends a message that is answered, and waits for its answer.
    async fn ask<T>(&self, message: impl FnOnce(oneshot::Sender<T>) -> Message) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.send(message(reply));
        answer.await.ok()
    }

    pub(super) async fn open(
        &self,
        door: &'static str,
        peer: Peer<RoleServer>,
        client: Option<String>,
        modern: bool,
    ) -> u64 {
        self.ask(|reply| Message::Open {
            door,
            peer,
            client,
            modern,
            reply,
        })
        .await
        .unwrap_or_default()
    }

    pub(super) fn close(&self, id: u64, door: &'static str) {
        self.send(Message::Close { id, door });
    }

    pub(super) fn slot(&self) {
        self.send(Message::Slot);
    }

    pub(super) fn forget(&self, index: usize) {
        self.send(Message::Forget { index });
    }

    pub(super) fn heard(&self, index: usize, notice: Notice) {
        self.send(Message::Heard { index, notice });
    }

    /// Routes server `index`'s progress under `ours` to `session`'s client
    /// (or to `peer`, for a session not yet initialized) under `token`, until
    /// the returned guard drops.
    pub(super) fn route(
        &self,
        key: (usize, String),
        session: u64,
        peer: (Peer<RoleServer>, bool),
        token: ProgressToken,
    ) -> ProgressGuard {
        self.send(Message::Route {
            key: key.clone(),
            session,
            peer,
            token,
        });
        ProgressGuard {
            tx: self.tx.clone(),
            key: Some(key),
        }
    }

    /// Notes a client's call to server `server` until the returned guard drops.
    pub(super) fn asking(&self, server: usize, ours: RequestId, caller: Caller) -> Asking {
        let guard = Asking {
            tx: self.tx.clone(),
            server,
            ours: ours.clone(),
            theirs: caller.theirs.clone(),
            session: caller.session,
        };
        self.send(Message::Ask {
            server,
            ours,
            caller,
        });
        guard
    }

    /// Notes that a client's call to server `server` is being sent, until the
    /// returned guard drops: drop it once the call's [`Desk::asking`] and
    /// [`Desk::route`] are made, so that a server that answers at once (its
    /// progress, its requests of its client) finds the call.
    pub(super) fn sending(&self, server: usize) -> Sending {
        self.send(Message::Sending { server });
        Sending {
            tx: self.tx.clone(),
            server,
        }
    }

    /// The client whose call server `server`'s request serves: the call named
    /// by `origin`, or else the most recent call to that server in flight.
    pub(super) async fn caller(&self, server: usize, origin: Option<RequestId>) -> Option<Caller> {
        self.ask(|reply| Message::Caller {
            server,
            origin,
            reply,
        })
        .await
        .flatten()
    }

    pub(super) async fn learned(&self, index: usize, learnt: Learnt) {
        self.ask(|reply| Message::Learned {
            index,
            learnt,
            reply,
        })
        .await;
    }

    pub(super) async fn built(&self, built: Built) {
        self.ask(|reply| Message::Built { built, reply }).await;
    }

    pub(super) async fn hold(&self, hold: bool) {
        self.ask(|reply| Message::Hold { hold, reply }).await;
    }

    /// Session `session` (seeing `scope`) asked for log messages at `level`
    /// and above: the servers whose level is to change, with the new one.
        pub(super) async fn set_level(
        &self,
        session: u64,
        level: rmcp::model::LoggingLevel,
        scope: Scope,
    ) -> Vec<(usize, rmcp::model::LoggingLevel)> {
        self.ask(|reply| Message::SetLevel {
            session,
            level,
            scope,
            reply,
        })
        .await
        .unwrap_or_default()
    }

    /// Session `session` subscribes to `uri` at `server`: whether it is the
    /// first subscriber.
    pub(super) async fn subscribe(&self, session: u64, server: usize, uri: String) -> bool {
        self.ask(|reply| Message::Subscribe {
            session,
            server,
            uri,
            reply,
        })
        .await
        .unwrap_or_default()
    }

    /// Session `session` unsubscribes from `uri`: the servers it was the last
    /// subscriber at.
    pub(super) async fn unsubscribe(&self, session: u64, uri: String) -> Vec<usize> {
        self.ask(|reply| Message::Unsubscribe {
            session,
            uri,
            reply,
        })
        .await
        .unwrap_or_default()
    }

    /// Opens a listen stream, unless [`super::bounds::LISTENS`] are open: the
    /// guard that ends it, and the resources it is the first subscriber of
    /// (to be subscribed at their servers).
    pub(super) async fn listen(&self, listen: Listen) -> Option<(Listening, Vec<(usize, String)>)> {
        let (id, first) = self
            .ask(|reply| Message::Listen { listen, reply })
            .await
            .flatten()?;
        let guard = Listening {
            tx: self.tx.clone(),
            id,
        };
        Some((guard, first))
    }

    /// Sends server `server`'s log messages at `level` and above to `queue`
    /// until the returned guard drops (a 2026-07-28 client's call in flight).
    pub(super) fn call_log(
        &self,
        server: usize,
        level: rmcp::model::LoggingLevel,
        queue: mpsc::UnboundedSender<rmcp::model::LoggingMessageNotificationParam>,
    ) -> CallLogging {
        static KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let key = KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send(Message::CallLog {
            server,
            key,
            level,
            queue,
        });
        CallLogging {
            tx: self.tx.clone(),
            key,
        }
    }

    /// What a new generation of `server` is to be asked for.
    pub(super) async fn wanted(&self, server: usize) -> Option<Wanted> {
        self.ask(|reply| Message::Wanted { server, reply }).await
    }
}

/// Forgets a relayed progress token when the call ends.
pub(super) struct ProgressGuard {
    tx: mpsc::UnboundedSender<Message>,
    key: Option<(usize, String)>,
}

impl ProgressGuard {
    /// Returns once the progress heard so far for this call is written to its
    /// client: what its server sent before its answer, sent before the answer
    /// (docs/design.md §14, "Order").
    pub(super) async fn flushed(&self) {
        let Some(key) = self.key.clone() else {
            return;
        };
        let (done, written) = oneshot::channel();
        if self.tx.send(Message::Flush { key, done }).is_ok() {
            let _ = written.await;
        }
    }
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let _ = self.tx.send(Message::Unroute { key });
        }
    }
}

/// Ends a listen stream when dropped: what it alone subscribed to is
/// unsubscribed at the servers.
pub(super) struct Listening {
    tx: mpsc::UnboundedSender<Message>,
    id: u64,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Unlisten { id: self.id });
    }
}

/// Ends a call's log messages when dropped (see [`Desk::call_log`]).
pub(super) struct CallLogging {
    tx: mpsc::UnboundedSender<Message>,
    key: u64,
}

impl CallLogging {
    /// Returns once the gateway's task has handled what it was sent before:
    /// the server's messages it heard until now are on the call's queue.
    pub(super) async fn settled(&self) {
        let (reply, answer) = oneshot::channel();
        let _ = self.tx.send(Message::Barrier { reply });
        let _ = answer.await;
    }
}

impl Drop for CallLogging {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::EndCallLog { key: self.key });
    }
}

/// A 2026-07-28 client's call in flight that asked for log messages.
struct CallLog {
    server: usize,
    key: u64,
    level: rmcp::model::LoggingLevel,
    queue: mpsc::UnboundedSender<rmcp::model::LoggingMessageNotificationParam>,
}

/// Ends the sending of a call (see [`Desk::sending`]).
pub(super) struct Sending {
    tx: mpsc::UnboundedSender<Message>,
    server: usize,
}

impl Drop for Sending {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Sent {
            server: self.server,
        });
    }
}

/// What waits for a call being sent to its server: the question whose call a
/// request of the server's serves. (Progress that comes before its route waits
/// apart, in `early`.)
enum Held {
    Caller {
        server: usize,
        origin: Option<RequestId>,
        reply: oneshot::Sender<Option<Caller>>,
    },
}

/// At most this many questions wait for calls being sent; more are answered as
/// if no call were being sent.
const HELD: usize = 1024;

/// Forgets a call in flight once it is answered or abandoned.
pub(super) struct Asking {
    tx: mpsc::UnboundedSender<Message>,
    server: usize,
    ours: RequestId,
    theirs: RequestId,
    session: u64,
}

impl Drop for Asking {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Unask {
            server: self.server,
            ours: self.ours.clone(),
            theirs: self.theirs.clone(),
            session: self.session,
        });
    }
}

/// Where a server's progress for a call goes back to: the client that made
/// the call, under its own token.
struct ProgressRoute {
    client: ClientQueue,
    token: ProgressToken,
}

impl ProgressRoute {
    /// Sends progress `params` on, under the client's token: nothing else
    /// changes (docs/design.md §14, "Values as written").
    fn send(&self, mut params: JsonObject) {
        let token = serde_json::to_value(&self.token).unwrap_or_default();
        params.insert("progressToken".into(), token);
        self.client.send(Note::Progress(params));
    }
}

/// How many progress notifications heard before their route are kept.
const EARLY_KEPT: usize = 256;

/// How long progress heard before its route is kept.
const EARLY_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// A client's call in flight to a server: where that server's requests go.
struct InFlight {
    server: usize,
    /// Our request to the server.
    ours: RequestId,
    caller: Caller,
}

/// What the gateway's task owns.
struct DeskTask {
    /// Written here alone.
    board: watch::Sender<Board>,
    /// Each client session's queue of notifications.
    clients: HashMap<u64, ClientQueue>,
    /// The sessions of those that are of the 2026-07-28 era.
    modern: std::collections::HashSet<u64>,
    /// The open listen streams, by id (from the sessions' ids).
    listens: HashMap<u64, Listen>,
    /// The 2026-07-28 clients' calls in flight that asked for log messages.
    call_logs: Vec<CallLog>,
    /// The next client session's id.
    next_id: u64,
    /// By server and the token of the call to it.
    progress: HashMap<(usize, String), ProgressRoute>,
    /// Progress heard before its route: a call's route is made once the call
    /// has gone out, and a quick server may report progress first. Kept a
    /// little ([`EARLY_KEPT`], [`EARLY_FOR`]), oldest first.
    early: std::collections::VecDeque<(std::time::Instant, (usize, String), JsonObject)>,
    /// Clients' calls in flight, oldest first.
    calls: Vec<InFlight>,
    /// By server, how many calls are being sent to it.
    sending: HashMap<usize, usize>,
    /// What waits for those calls, oldest first.
    held: Vec<Held>,
    /// Told when a client session opens or closes (G7).
    sessions: Box<dyn Fn(SessionEvent) + Send + Sync>,
    journal: Arc<Journal>,
    /// The level of log messages each session asked for.
    levels: Levels,
    /// The sessions subscribed to each server's resources.
    subscriptions: Subscriptions,
    /// What the gateway is to do at servers once a session ends.
    upkeep: mpsc::UnboundedSender<Upkeep>,
    /// Where the clients' queues run.
    tasks: TaskTracker,
}

impl Held {
    fn server(&self) -> usize {
        let Held::Caller { server, .. } = self;
        *server
    }
}

impl DeskTask {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        while let Some(message) = rx.recv().await {
            self.handle(message);
        }
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Open {
                door,
                peer,
                client,
                modern,
                reply,
            } => {
                let id = self.next_id;
                self.next_id += 1;
                let queue = ClientQueue::spawn(peer, door == "stdio", &self.tasks);
                self.clients.insert(id, queue);
                if modern {
                    self.modern.insert(id);
                }
                self.journal.line(format_args!(
                    "session {id} opened ({door}, {})",
                    client.as_deref().unwrap_or("a client with no name")
                ));
                (self.sessions)(SessionEvent {
                    id,
                    door,
                    opened: true,
                    client,
                });
                self.count();
                let _ = reply.send(id);
            }
            Message::Close { id, door } => {
                self.modern.remove(&id);
                let servers = self.board.borrow().lists.len();
                for (server, level) in self.levels.forget(id, servers) {
                    let _ = self.upkeep.send(Upkeep::Level(server, level));
                }
                for (server, uri) in self.subscriptions.forget(id) {
                    let _ = self.upkeep.send(Upkeep::Unsubscribe(server, uri));
                }
                if self.clients.remove(&id).is_some() {
                    self.journal
                        .line(format_args!("session {id} closed ({door})"));
                    (self.sessions)(SessionEvent {
                        id,
                        door,
                        opened: false,
                        client: None,
                    });
                    self.count();
                }
            }
            Message::Slot => {
                self.board
                    .send_modify(|board| board.lists.push(Lists::default()));
            }
            Message::Forget { index } => {
                self.board.send_modify(|board| {
                    if let Some(lists) = board.lists.get_mut(index) {
                        *lists = Lists::default();
                    }
                });
            }
            Message::Heard { index, notice } => self.heard(index, notice),
            Message::Route {
                key,
                session,
                peer,
                token,
            } => {
                // The session's own queue, so that what it is sent keeps its
                // order; a queue of the call's own for a session not yet
                // initialized.
                let registered = self.clients.get(&session).cloned();
                let client = registered
                    .unwrap_or_else(|| ClientQueue::spawn(peer.0, peer.1, &self.tasks));
                let route = ProgressRoute { client, token };
                // What the server reported before the route was made goes first.
                let fresh = std::time::Instant::now() - EARLY_FOR;
                let early = std::mem::take(&mut self.early);
                for (at, k, params) in early {
                    if k != key {
                        self.early.push_back((at, k, params));
                    } else if at >= fresh {
                        route.send(params);
                    }
                }
                self.progress.insert(key, route);
            }
            Message::Unroute { key } => {
                self.progress.remove(&key);
            }
            Message::Flush { key, done } => match self.progress.get(&key) {
                Some(route) => route.client.flush(done),
                None => {
                    let _ = done.send(());
                }
            },
            Message::Ask {
                server,
                ours,
                caller,
            } => self.calls.push(InFlight {
                server,
                ours,
                caller,
            }),
            Message::Unask {
                server,
                ours,
                theirs,
                session,
            } => {
                let found = self.calls.iter().rposition(|c| {
                    c.server == server
                        && c.ours == ours
                        && c.caller.theirs == theirs
                        && c.caller.session == session
                });
                if let Some(at) = found {
                    self.calls.remove(at);
                }
            }
            Message::Sending { server } => *self.sending.entry(server).or_default() += 1,
            Message::Sent { server } => {
                if let Some(n) = self.sending.get_mut(&server) {
                    *n -= 1;
                    if *n == 0 {
                        self.sending.remove(&server);
                    }
                }
                // What waited for a call to this server looks again.
                let (theirs, others) = std::mem::take(&mut self.held)
                    .into_iter()
                    .partition(|h| h.server() == server);
                self.held = others;
                for held in theirs {
                    let Held::Caller {
                        server,
                        origin,
                        reply,
                    } = held;
                    self.caller(server, origin, reply);
                }
            }
            Message::Caller {
                server,
                origin,
                reply,
            } => self.caller(server, origin, reply),
            Message::Learned {
                index,
                learnt,
                reply,
            } => {
                self.board.send_modify(|board| {
                    if let Some(lists) = board.lists.get_mut(index) {
                        learnt.keep(lists);
                    }
                });
                let _ = reply.send(());
            }
            Message::Built { built, reply } => {
                self.board
                    .send_modify(|board| built.keep(&mut board.catalogs));
                let _ = reply.send(());
            }
            Message::Hold { hold, reply } => {
                self.board.send_if_modified(|board| {
                    std::mem::replace(&mut board.holding, hold) != hold
                });
                let _ = reply.send(());
            }
            Message::SetLevel {
                session,
                level,
                scope,
                reply,
            } => {
                let servers = self.board.borrow().lists.len();
                let _ = reply.send(self.levels.set(session, level, scope, servers));
            }
            Message::Subscribe {
                session,
                server,
                uri,
                reply,
            } => {
                let _ = reply.send(self.subscriptions.subscribe(session, server, &uri));
            }
            Message::Unsubscribe {
                session,
                uri,
                reply,
            } => {
                let _ = reply.send(self.subscriptions.unsubscribe(session, &uri));
            }
            Message::Listen { listen, reply } => {
                if self.listens.len() >= super::bounds::LISTENS {
                    let _ = reply.send(None);
                    return;
                }
                let id = self.next_id;
                self.next_id += 1;
                let first = listen
                    .uris
                    .iter()
                    .filter(|(server, uri)| self.subscriptions.subscribe(id, *server, uri))
                    .cloned()
                    .collect();
                self.listens.insert(id, listen);
                self.count_listens();
                let _ = reply.send(Some((id, first)));
            }
            Message::Unlisten { id } => {
                if self.listens.remove(&id).is_some() {
                    for (server, uri) in self.subscriptions.forget(id) {
                        let _ = self.upkeep.send(Upkeep::Unsubscribe(server, uri));
                    }
                    self.count_listens();
                }
            }
            Message::CallLog {
                server,
                key,
                level,
                queue,
            } => self.call_logs.push(CallLog {
                server,
                key,
                level,
                queue,
            }),
            Message::EndCallLog { key } => self.call_logs.retain(|c| c.key != key),
            Message::Barrier { reply } => {
                let _ = reply.send(());
            }
            Message::Wanted { server, reply } => {
                let _ = reply.send(Wanted {
                    level: self.levels.wanted(server),
                    uris: self.subscriptions.uris(server),
                });
            }
        }
    }

    fn count_listens(&self) {
        let open = self.listens.len();
        self.board
            .send_if_modified(|board| std::mem::replace(&mut board.listening, open) != open);
    }

    fn count(&self) {
        let open = self.clients.len();
        self.board
            .send_if_modified(|board| std::mem::replace(&mut board.sessions, open) != open);
    }

    /// A server's list changed: forget it and tell every client, on each
    /// client's queue; its progress goes to the client whose call it is for.
    /// Answers whose call server `server`'s request serves: the call named by
    /// `origin`, or else the most recent call to that server in flight; held
    /// while a call to that server is being sent and none is found.
    fn caller(&mut self, server: usize, origin: Option<RequestId>, reply: oneshot::Sender<Option<Caller>>) {
        let mut calls = self.calls.iter().filter(|c| c.server == server);
        let call = match &origin {
            Some(origin) => calls.find(|c| &c.ours == origin),
            None => calls.next_back(),
        };
        match call {
            None if self.waits_for_a_call(server) => self.held.push(Held::Caller {
                server,
                origin,
                reply,
            }),
            call => {
                let _ = reply.send(call.map(|c| c.caller.clone()));
            }
        }
    }

    /// Whether a call to server `server` is being sent and there is room to
    /// hold what waits for it.
    fn waits_for_a_call(&self, server: usize) -> bool {
        self.sending.contains_key(&server) && self.held.len() < HELD
    }

    fn heard(&mut self, index: usize, notice: Notice) {
        let note = match notice {
            Notice::Progress(params) => {
                let token = params
                    .get("progressToken")
                    .and_then(|t| serde_json::from_value::<ProgressToken>(t.clone()).ok());
                let Some(token) = token else {
                    return;
                };
                let key = (index, token_key(&token));
                match self.progress.get(&key) {
                    Some(route) => route.send(params),
                    None => {
                        let now = std::time::Instant::now();
                        while self.early.len() >= EARLY_KEPT
                            || self.early.front().is_some_and(|(at, _, _)| *at + EARLY_FOR < now)
                        {
                            self.early.pop_front();
                        }
                        self.early.push_back((now, key, params));
                    }
                }
                return;
            }
            Notice::Log(param) => {
                // To every session at or below its level, on the session's
                // queue (rmcp puts only progress on a call's own stream).
                for session in self.levels.audience(index, param.level) {
                    if let Some(client) = self.clients.get(&session) {
                        client.send(Note::Log(param.clone()));
                    }
                }
                // And to each 2026-07-28 client's call to it in flight that
                // asked for this level or a lower one.
                let rank = super::logging::rank;
                for call in &self.call_logs {
                    if call.server == index && rank(call.level) <= rank(param.level) {
                        let _ = call.queue.send(param.clone());
                    }
                }
                return;
            }
            Notice::ResourceUpdated(param) => {
                for session in self.subscriptions.audience(index, &param.uri) {
                    if let Some(client) = self.clients.get(&session) {
                        client.send(Note::ResourceUpdated(param.clone()));
                    } else if let Some(listen) = self.listens.get(&session) {
                        let _ = listen.queue.send(Note::ResourceUpdated(param.clone()));
                    }
                }
                return;
            }
            Notice::ToolsChanged => Note::ToolsChanged,
            Notice::PromptsChanged => Note::PromptsChanged,
            Notice::ResourcesChanged => Note::ResourcesChanged,
        };
        let mut known = false;
        self.board.send_if_modified(|board| {
            let Some(lists) = board.lists.get_mut(index) else {
                return false;
            };
            known = true;
            match note {
                Note::ToolsChanged => lists.tools.fresh = false,
                Note::PromptsChanged => lists.prompts.fresh = false,
                _ => {
                    lists.resources.fresh = false;
                    lists.templates.fresh = false;
                }
            }
            true
        });
        if !known {
            return;
        }
        for (id, client) in &self.clients {
            if !self.modern.contains(id) {
                client.send(note.clone());
            }
        }
        // A 2026-07-28 client hears of changes on the listen streams that
        // ask for them, of the servers it sees.
        for listen in self.listens.values() {
            let wants = match note {
                Note::ToolsChanged => listen.tools,
                Note::PromptsChanged => listen.prompts,
                _ => listen.resources,
            };
            if wants && listen.scope.as_ref().is_none_or(|s| s.contains(&index)) {
                let _ = listen.queue.send(note.clone());
            }
        }
    }
}

/// A progress token as a key.
pub(super) fn token_key(token: &ProgressToken) -> String {
    serde_json::to_string(&token.0).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio_util::task::TaskTracker;

    use super::Desk;
    use crate::gateway::catalog::{Known, Learnt, MemberTool};
    use crate::gateway::journal::Journal;
    use crate::process::notice::Notice;

    fn desk(servers: usize) -> Desk {
        let tasks = TaskTracker::new();
        let (upkeep, _) = tokio::sync::mpsc::unbounded_channel();
        Desk::spawn(servers, Box::new(|_| {}), Arc::new(Journal::default()), upkeep, &tasks)
    }

    fn tools(generation: u64) -> Learnt {
        Learnt::Tools(Known {
            generation: Some(generation),
            fresh: true,
            items: Arc::new(Vec::<MemberTool>::new()),
        })
    }

    #[tokio::test]
    async fn what_is_learned_is_on_the_board_once_answered_and_a_notice_sent_before_makes_it_stale() {
        let desk = desk(1);
        desk.learned(0, tools(3)).await;
        assert!(desk.board().lists[0].tools.fresh);
        assert_eq!(desk.board().lists[0].tools.generation, Some(3));
        // Sent with no wait; handled before the message that follows it.
        desk.heard(0, Notice::ToolsChanged);
        desk.hold(true).await;
        let board = desk.board();
        assert!(!board.lists[0].tools.fresh);
        assert!(board.holding);
    }

    #[tokio::test]
    async fn a_slot_is_made_before_what_is_learned_of_it_and_a_server_that_left_is_forgotten() {
        let desk = desk(0);
        desk.slot();
        desk.learned(0, tools(1)).await;
        assert_eq!(desk.board().lists.len(), 1);
        assert!(desk.board().lists[0].tools.fresh);
        desk.forget(0);
        desk.hold(false).await;
        let board = desk.board();
        assert!(!board.lists[0].tools.fresh);
        assert_eq!(board.lists[0].tools.generation, None);
    }
}
