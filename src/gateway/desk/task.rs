//! The gateway's task itself: what it owns (client queues, progress routes,
//! calls in flight, listen streams, log levels and subscriptions) and how it
//! handles each message the [`Desk`] sends it.

use super::*;

/// A 2026-07-28 client's call in flight that asked for log messages.
struct CallLog {
    server: usize,
    key: u64,
    level: rmcp::model::LoggingLevel,
    queue: mpsc::UnboundedSender<rmcp::model::LoggingMessageNotificationParam>,
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
pub(super) struct DeskTask {
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
    /// Which session made each server's task of protocol 2025-11-25.
    task_statuses: crate::gateway::legacy_tasks::Statuses,
}

impl Held {
    fn server(&self) -> usize {
        let Held::Caller { server, .. } = self;
        *server
    }
}

impl DeskTask {
    /// The task's state for a fleet whose board is `board`.
    pub(super) fn new(
        board: watch::Sender<Board>,
        sessions: Box<dyn Fn(SessionEvent) + Send + Sync>,
        journal: Arc<Journal>,
        upkeep: mpsc::UnboundedSender<Upkeep>,
        tasks: &TaskTracker,
    ) -> DeskTask {
            DeskTask {
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
                task_statuses: Default::default(),
            }
    }

    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
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
                self.task_statuses.forget(id);
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
                if self.listens.len() >= crate::gateway::bounds::LISTENS {
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
            Message::TaskMade {
                server,
                task,
                handle,
                session,
            } => {
                for params in self.task_statuses.made(server, task, handle, session) {
                    if let Some(client) = self.clients.get(&session) {
                        client.send(Note::TaskStatus(params));
                    }
                }
            }
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
                let rank = crate::gateway::logging::rank;
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
            Notice::TaskStatus(params) => {
                if let Some((session, params)) = self.task_statuses.heard(index, params)
                    && let Some(client) = self.clients.get(&session)
                {
                    client.send(Note::TaskStatus(params));
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
