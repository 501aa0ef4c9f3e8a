//! The gateway's own `subscriptions/listen` at its servers of the 2026-07-28 era
//! (docs/design.md §14, "Listen streams at servers"). Such a server tells of
//! its list changes and resource updates only on listen streams, so the
//! gateway holds one at each running generation that declares `listChanged`
//! for a list or `resources.subscribe`: it asks for every list change the
//! server declares and for the updates of the URIs the clients subscribed to
//! at that server (legacy sessions' `resources/subscribe` and 2026-07-28
//! clients' listen streams, counted in `subscriptions.rs`). The stream is
//! opened again, the new one before the old one is cancelled, whenever that set
//! of URIs changes; it is cancelled when its generation ends. What it hears
//! goes to the gateway's task as the server's notices, as a legacy server's do.
//!
//! Each stream is one task of the gateway's tracker, and at most one runs per
//! server: one for a new generation ends the one before.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{GetMeta, ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, ServiceError, Subscription};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::lifecycle::Generation;
use crate::process::notice::Notice;

/// How long a server may take to acknowledge a listen stream.
const OPEN_BOUND: Duration = Duration::from_secs(10);

/// The pause before a stream that failed, or that the server ended, is opened
/// again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// A stream that lived this long before the server ended it is not a failure.
const LIVED: Duration = Duration::from_secs(60);

/// Failures in a row after which the stream waits for the URIs wanted to
/// change before it is tried again.
const TRIES: u32 = 5;

/// The subscription id a server's notification on a listen stream carries.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What a server of the 2026-07-28 era declares that a listen stream can carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tells {
    tools: bool,
    prompts: bool,
    resources: bool,
    updates: bool,
}

impl Tells {
    /// What the server at `peer` tells on listen streams: `None` for a server
    /// of the legacy era (it tells its client unasked) or one that declares
    /// nothing a stream carries.
    pub(super) fn of(peer: &Peer<RoleClient>) -> Option<Tells> {
        let info = peer.peer_info()?;
        if info.protocol_version.has_initialize() {
            return None;
        }
        let capabilities = &info.capabilities;
        let changes = |c: Option<bool>| c == Some(true);
        let resources = capabilities.resources.as_ref();
        let tells = Tells {
            tools: changes(capabilities.tools.as_ref().and_then(|t| t.list_changed)),
            prompts: changes(capabilities.prompts.as_ref().and_then(|p| p.list_changed)),
            resources: changes(resources.and_then(|r| r.list_changed)),
            updates: changes(resources.and_then(|r| r.subscribe)),
        };
        (tells != Tells::default()).then_some(tells)
    }

    /// The filter that asks for every list change declared, and for the
    /// updates of `uris` when the server takes subscriptions; `None` when it
    /// would ask for nothing.
    fn filter(&self, uris: &[String]) -> Option<SubscriptionFilter> {
        let flag = |on: bool| on.then_some(true);
        let mut filter = SubscriptionFilter::default();
        filter.tools_list_changed = flag(self.tools);
        filter.prompts_list_changed = flag(self.prompts);
        filter.resources_list_changed = flag(self.resources);
        filter.resource_subscriptions = (self.updates && !uris.is_empty()).then(|| uris.to_vec());
        (filter != SubscriptionFilter::default()).then_some(filter)
    }
}

/// What a stream needs of the gateway: where the server's notices go, the
/// URIs the clients subscribed to at the server (sorted), and the gateway's log.
pub(super) struct Ends {
    pub(super) heard: Box<dyn Fn(Notice) + Send + Sync>,
    pub(super) wanted: Box<dyn Fn() -> BoxFuture<'static, Vec<String>> + Send + Sync>,
    pub(super) note: Box<dyn Fn(String) + Send + Sync>,
}

/// The stream held at one server.
struct Held {
    generation: Generation,
    /// Asks the stream to look at the URIs wanted again; answered once it has.
    again: mpsc::UnboundedSender<oneshot::Sender<()>>,
    stop: CancellationToken,
}

/// The listen streams the gateway holds at its servers, by server.
#[derive(Default)]
pub(super) struct AtServers {
    by: Mutex<HashMap<usize, Held>>,
}

impl AtServers {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Held>> {
        self.by.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds a stream at generation `generation` of server `index`, reached at
    /// `peer`, on a task of `tasks`; the stream of an earlier generation ends.
    pub(super) fn open(
        &self,
        index: usize,
        generation: Generation,
        peer: Peer<RoleClient>,
        tells: Tells,
        ends: Ends,
        tasks: &TaskTracker,
    ) {
        let mut held = self.held();
        if held.get(&index).is_some_and(|h| h.generation == generation) {
            return;
        }
        let (again, asked) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let stream = Stream {
            peer,
            tells,
            ends,
            asked,
            stop: stop.clone(),
        };
        tasks.spawn(stream.run());
        let before = held.insert(
            index,
            Held {
                generation,
                again,
                stop,
            },
        );
        if let Some(before) = before {
            before.stop.cancel();
        }
    }

    /// Ends the stream at server `index` unless it is of generation `running`.
    pub(super) fn end(&self, index: usize, running: Option<Generation>) {
        let mut held = self.held();
        if held.get(&index).is_some_and(|h| Some(h.generation) != running)
            && let Some(ended) = held.remove(&index)
        {
            ended.stop.cancel();
        }
    }

    /// The stream at server `index` looks at the URIs wanted again; returns
    /// once a stream for them is acknowledged (or has failed, or the stream
    /// ended), at once when none is held, and after [`OPEN_BOUND`] at most.
    pub(super) async fn renewed(&self, index: usize) {
        let (done, answered) = oneshot::channel();
        let asked = self
            .held()
            .get(&index)
            .is_some_and(|h| h.again.send(done).is_ok());
        if asked {
            let _ = tokio::time::timeout(OPEN_BOUND, answered).await;
        }
    }
}

/// One stream's task.
struct Stream {
    peer: Peer<RoleClient>,
    tells: Tells,
    ends: Ends,
    asked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    stop: CancellationToken,
}

impl Stream {
    async fn run(mut self) {
        // The stream as acknowledged, with the URIs it was opened for.
        let mut open: Option<(Subscription, Vec<String>)> = None;
        let mut opened_at = std::time::Instant::now();
        let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
        // Failed opens and ended streams in a row.
        let mut failures = 0u32;
        let mut look = true;
        loop {
            if look && !self.stop.is_cancelled() {
                let uris = (self.ends.wanted)().await;
                let current = open.as_ref().map(|(_, u)| u);
                if current != Some(&uris) && (failures < TRIES || !waiting.is_empty()) {
                    match self.tells.filter(&uris) {
                        // The new stream first: nothing the server sends in
                        // between is lost (it may come twice).
                        Some(filter) => match self.listen(filter).await {
                            Ok(stream) => {
                                open = Some((stream, uris));
                                opened_at = std::time::Instant::now();
                            }
                            Err(e) => {
                                failures += 1;
                                (self.ends.note)(format!("subscriptions/listen failed: {e}"));
                            }
                        },
                        None => open = None,
                    }
                }
                for done in waiting.drain(..) {
                    let _ = done.send(());
                }
            }
            look = false;
            let again = async {
                if failures > 0 && failures < TRIES {
                    tokio::time::sleep(AGAIN_AFTER).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = self.stop.cancelled() => break,
                asked = self.asked.recv() => match asked {
                    Some(done) => {
                        waiting.push(done);
                        while let Ok(done) = self.asked.try_recv() {
                            waiting.push(done);
                        }
                        look = true;
                    }
                    None => break,
                },
                () = again => look = true,
                heard = next(&mut open) => match heard {
                    Ok(Some(notification)) => {
                        failures = 0;
                        if let Some(notice) = notice(notification) {
                            (self.ends.heard)(notice);
                        }
                    }
                    // The stream ended: with the session, or by the server.
                    Ok(None) | Err(_) => {
                        open = None;
                        if self.peer.is_transport_closed() {
                            break;
                        }
                        // Opened again after a pause; a stream that lived a
                        // while is not counted against the tries.
                        if opened_at.elapsed() > LIVED {
                            failures = 0;
                        }
                        failures += 1;
                    }
                },
            }
        }
        // Dropping the stream cancels it at the server (over HTTP its response
        // stream is closed).
        drop(open);
        for done in waiting {
            let _ = done.send(());
        }
    }

    async fn listen(&self, filter: SubscriptionFilter) -> Result<Subscription, String> {
        tokio::select! {
            () = self.stop.cancelled() => Err("the generation ended".to_owned()),
            opened = tokio::time::timeout(OPEN_BOUND, self.peer.listen(filter)) => match opened {
                Ok(Ok(stream)) => Ok(stream),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no acknowledgment within {} s", OPEN_BOUND.as_secs())),
            },
        }
    }
}

/// The next notification of the stream, if one is open.
async fn next(open: &mut Option<(Subscription, Vec<String>)>) -> Result<Option<ServerNotification>, ServiceError> {
    match open {
        Some((stream, _)) => stream.next().await,
        None => std::future::pending().await,
    }
}

/// What a notification on a server's listen stream is to the gateway: its
/// subscription id, which names our stream, taken out.
fn notice(notification: ServerNotification) -> Option<Notice> {
    // rmcp keeps the `_meta` it read beside the params.
    let mut meta = notification.get_meta().clone();
    match notification {
        ServerNotification::ToolListChangedNotification(_) => Some(Notice::ToolsChanged),
        ServerNotification::PromptListChangedNotification(_) => Some(Notice::PromptsChanged),
        ServerNotification::ResourceListChangedNotification(_) => Some(Notice::ResourcesChanged),
        ServerNotification::ResourceUpdatedNotification(updated) => {
            meta.0.0.remove(SUBSCRIPTION_ID);
            let mut params = updated.params;
            if let Some(written) = params.meta.take() {
                meta.extend(written);
                meta.0.0.remove(SUBSCRIPTION_ID);
            }
            params.meta = (!meta.0.0.is_empty()).then_some(meta);
            Some(Notice::ResourceUpdated(params))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::ServerHandler;
    use rmcp::model::{InitializeResult, ProtocolVersion, ServerCapabilities};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt, SubscriptionContext, SubscriptionSink};

    use super::*;

    /// A server of the 2026-07-28 era that keeps what its listen streams asked
    /// for, and the sink of the newest, until each is cancelled.
    #[derive(Clone, Default)]
    struct Watched {
        asked: Arc<Mutex<Vec<SubscriptionFilter>>>,
        open: Arc<Mutex<Vec<SubscriptionSink>>>,
    }

    impl ServerHandler for Watched {
        fn get_info(&self) -> InitializeResult {
            let capabilities = ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .build();
            InitializeResult::new(capabilities)
        }

        fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
            Some(requested.clone())
        }

        async fn listen(&self, context: SubscriptionContext) -> Result<(), rmcp::ErrorData> {
            self.asked.lock().unwrap().push(context.accepted().clone());
            self.open.lock().unwrap().push(context.sink().clone());
            context.cancelled().await;
            let id = context.sink().id().clone();
            self.open.lock().unwrap().retain(|s| *s.id() != id);
            Ok(())
        }
    }

    /// Polls `done` for 5 s at most.
    async fn until(why: &str, done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "{why}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A stream held at a modern server asks for its list changes and the
    /// URIs wanted, hands on what it hears, is opened again (new before old)
    /// when the URIs change, and once ended leaves no stream at the server and
    /// no task behind.
    #[tokio::test]
    async fn a_stream_at_a_server_follows_the_uris_wanted_and_ends_leaving_nothing() {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let watched = Watched::default();
        let server = tokio::spawn(rmcp::serve_server(watched.clone(), server_io));
        let mode = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let bound = Duration::from_secs(5);
        let client = tokio::time::timeout(bound, ().serve_with_lifecycle(client_io, mode))
            .await
            .expect("the client starts")
            .unwrap();
        let peer = client.peer().clone();
        let tells = Tells::of(&peer).expect("a modern server that tells");

        let wanted = Arc::new(Mutex::new(Vec::<String>::new()));
        let (heard_tx, mut heard) = mpsc::unbounded_channel();
        let ends = Ends {
            heard: Box::new(move |notice| {
                let _ = heard_tx.send(notice);
            }),
            wanted: {
                let wanted = wanted.clone();
                Box::new(move || -> BoxFuture<'static, Vec<String>> {
                    let now = wanted.lock().unwrap().clone();
                    Box::pin(async move { now })
                })
            },
            note: Box::new(|_| {}),
        };
        let tasks = TaskTracker::new();
        let at = AtServers::default();
        at.open(0, 1, peer, tells, ends, &tasks);
        until("a stream is opened", || watched.open.lock().unwrap().len() == 1).await;
        assert_eq!(
            watched.asked.lock().unwrap()[0],
            SubscriptionFilter::builder().tools_list_changed().build()
        );
        let sink = watched.open.lock().unwrap()[0].clone();
        sink.notify_tool_list_changed().await.unwrap();
        let notice = tokio::time::timeout(Duration::from_secs(5), heard.recv()).await.unwrap();
        assert!(matches!(notice, Some(Notice::ToolsChanged)), "{notice:?}");

        *wanted.lock().unwrap() = vec!["a://x".to_owned()];
        tokio::time::timeout(bound, at.renewed(0)).await.unwrap();
        assert_eq!(watched.asked.lock().unwrap().len(), 2, "opened again once acknowledged");
        assert_eq!(
            watched.asked.lock().unwrap()[1].resource_subscriptions,
            Some(vec!["a://x".to_owned()])
        );
        until("the stream before is cancelled", || watched.open.lock().unwrap().len() == 1).await;
        at.renewed(0).await;
        assert_eq!(watched.asked.lock().unwrap().len(), 2, "the same URIs: the same stream");

        // Ended with its generation: nothing left at the server, no task.
        at.end(0, Some(1));
        assert_eq!(watched.open.lock().unwrap().len(), 1, "the running generation's stays");
        at.end(0, None);
        until("the stream is cancelled", || watched.open.lock().unwrap().is_empty()).await;
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the stream's task ends");
        drop(client);
        server.abort();
    }

    #[test]
    fn a_filter_asks_for_what_the_server_declares_and_the_uris_only_where_it_takes_subscriptions() {
        let all = Tells {
            tools: true,
            prompts: false,
            resources: true,
            updates: true,
        };
        let uris = vec!["a://x".to_owned()];
        let filter = all.filter(&uris).unwrap();
        assert_eq!(filter.tools_list_changed, Some(true));
        assert_eq!(filter.prompts_list_changed, None);
        assert_eq!(filter.resources_list_changed, Some(true));
        assert_eq!(filter.resource_subscriptions, Some(uris.clone()));
        let changes = Tells {
            updates: false,
            ..all
        };
        assert_eq!(changes.filter(&uris).unwrap().resource_subscriptions, None);
        let updates = Tells {
            updates: true,
            ..Tells::default()
        };
        assert_eq!(updates.filter(&[]), None, "nothing to ask for");
        assert!(updates.filter(&uris).is_some());
    }

    #[test]
    fn an_update_heard_on_our_stream_loses_our_subscription_id_and_keeps_the_rest() {
        let written = serde_json::json!({
            "method": "notifications/resources/updated",
            "params": {"uri": "a://x", "_meta": {SUBSCRIPTION_ID: 4, "vendor": 1}},
        });
        let read: ServerNotification = serde_json::from_value(written).unwrap();
        let Some(Notice::ResourceUpdated(params)) = notice(read) else {
            panic!("an update");
        };
        assert_eq!(
            serde_json::to_value(&params).unwrap(),
            serde_json::json!({"uri": "a://x", "_meta": {"vendor": 1}})
        );
    }
}
