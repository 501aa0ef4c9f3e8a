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

mod task;
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
    /// Of a 2026-07-28 client's call to a legacy server, which the server's
    /// requests are put to (`inputs.rs`) rather than sent to the client.
    pub(super) inlet: Option<super::inputs::Inlet>,
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
    /// Server `server` made task `task` (2025-11-25) for `session`, which
    /// knows it as `handle`: its status notifications go there.
    TaskMade {
        server: usize,
        task: String,
        handle: String,
        session: u64,
    },
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
        let task = task::DeskTask::new(board, sessions, journal, upkeep, tasks);
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

    /// Server `server`'s task `task` (2025-11-25) was made for `session`,
    /// which knows it as `handle`.
    pub(super) fn task_made(&self, server: usize, task: String, handle: String, session: u64) {
        self.send(Message::TaskMade {
            server,
            task,
            handle,
            session,
        });
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
    /// the server's messages it heard until now are on the call's queue (the
    /// counterpart of [`ProgressGuard::flushed`]).
    pub(super) async fn flushed(&self) {
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
