//! What the gateway sends a client session of its own accord: that a list
//! changed, the progress of its calls, the servers' log messages at its level
//! and the updates of the resources it subscribed to. Each session has one queue, drained
//! by one task, so that what it is sent arrives in the order it was queued
//! (docs/design.md §14, G5). Progress is sent as its server wrote it, only its
//! token changed ("Values as written").

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use rmcp::model::{
    CustomNotification, JsonObject, LoggingMessageNotificationParam, ProgressNotification,
    ProgressNotificationParam, ResourceUpdatedNotificationParam, ServerNotification,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;

/// A notification to a client.
#[derive(Clone)]
pub(super) enum Note {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    /// A `notifications/progress`'s params, as written.
    Progress(JsonObject),
    /// A server's log message, named by server.
    Log(LoggingMessageNotificationParam),
    /// A resource the client subscribed to changed.
    ResourceUpdated(ResourceUpdatedNotificationParam),
    /// A task's status (2025-11-25), its id the client's.
    TaskStatus(JsonObject),
}

/// A progress notification's params as its server wrote them, beside rmcp's
/// reading of them, for the HTTP door's session manager to write in its place
/// (`written.rs`).
#[derive(Clone, Debug)]
pub(super) struct WrittenParams(pub(super) JsonObject);

/// The progress notification whose params are `params`, as written. Over
/// stdio (`stdio`) it is sent as it is; over HTTP rmcp routes progress to its
/// call's stream by its type, so it is sent as rmcp's, with `params` beside it.
fn progress(params: JsonObject, stdio: bool) -> ServerNotification {
    let custom = |params: JsonObject| {
        ServerNotification::CustomNotification(CustomNotification::new(
            "notifications/progress",
            Some(Value::Object(params)),
        ))
    };
    if stdio {
        return custom(params);
    }
    match serde_json::from_value::<ProgressNotificationParam>(Value::Object(params.clone())) {
        Ok(typed) => {
            let mut notification = ProgressNotification::new(typed);
            notification.extensions.insert(WrittenParams(params));
            ServerNotification::ProgressNotification(notification)
        }
        Err(_) => custom(params),
    }
}

/// What a client's queue carries: a notification, or a barrier answered once
/// everything queued before it is written.
enum Queued {
    Note(Note),
    Flush(oneshot::Sender<()>),
}

/// A client session's queue of notifications. Its task ends once every copy of
/// the queue is gone (the session closed, its calls answered).
#[derive(Clone)]
pub(super) struct ClientQueue(mpsc::UnboundedSender<Queued>);

impl ClientQueue {
    /// The queue of the client at `peer` (through the stdio door when `stdio`),
    /// drained by a task of `tasks`.
    pub(super) fn spawn(peer: Peer<RoleServer>, stdio: bool, tasks: &TaskTracker) -> ClientQueue {
        let (tx, mut rx) = mpsc::unbounded_channel::<Queued>();
        tasks.spawn(async move {
            while let Some(queued) = rx.recv().await {
                let note = match queued {
                    Queued::Note(note) => note,
                    // Each note before it was awaited until rmcp wrote it.
                    Queued::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let sent = match note {
                    Note::ToolsChanged => peer.notify_tool_list_changed().await,
                    Note::PromptsChanged => peer.notify_prompt_list_changed().await,
                    Note::ResourcesChanged => peer.notify_resource_list_changed().await,
                    Note::Progress(params) => {
                        let _ = peer.send_notification(progress(params, stdio)).await;
                        continue;
                    }
                    Note::Log(param) => {
                        let _ = peer.notify_logging_message(param).await;
                        continue;
                    }
                    Note::ResourceUpdated(param) => {
                        let _ = peer.notify_resource_updated(param).await;
                        continue;
                    }
                    Note::TaskStatus(params) => {
                        let status = CustomNotification::new("notifications/tasks/status", Some(Value::Object(params)));
                        let _ = peer.send_notification(ServerNotification::CustomNotification(status)).await;
                        continue;
                    }
                };
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "a client session did not take a list_changed");
                }
            }
        });
        ClientQueue(tx)
    }

    /// Queues `note`; nothing when the client's task has ended.
    pub(super) fn send(&self, note: Note) {
        let _ = self.0.send(Queued::Note(note));
    }

    /// Answers `done` once everything queued before is written to the client;
    /// dropped unanswered when the client's task has ended.
    pub(super) fn flush(&self, done: oneshot::Sender<()>) {
        let _ = self.0.send(Queued::Flush(done));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::ServerHandler;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    struct Quiet;
    impl ServerHandler for Quiet {}

    /// What is queued for one client is written to it in the order it was
    /// queued, however many worker threads run the queue: read off the wire.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_clients_notifications_are_written_in_the_order_they_were_queued() {
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        let (read, mut write) = tokio::io::split(client_io);
        let mut lines = BufReader::new(read).lines();
        let client = async {
            let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;
            write.write_all(format!("{initialize}\n").as_bytes()).await.unwrap();
            let answer = lines.next_line().await.unwrap().unwrap();
            assert!(answer.contains("\"result\""), "{answer}");
            let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            write.write_all(format!("{initialized}\n").as_bytes()).await.unwrap();
        };
        let (server, ()) = tokio::join!(rmcp::serve_server(Quiet, server_io), client);
        let server = server.unwrap();
        let tasks = TaskTracker::new();
        let queue = ClientQueue::spawn(server.peer().clone(), true, &tasks);
        const N: u64 = 500;
        for n in 0..N {
            let params = serde_json::json!({"progressToken": "t", "progress": n});
            queue.send(Note::Progress(params.as_object().unwrap().clone()));
            if n % 50 == 0 {
                queue.send(Note::ToolsChanged);
            }
        }
        let mut heard = Vec::new();
        let read_all = async {
            while heard.len() < N as usize {
                let line = lines.next_line().await.unwrap().expect("the server's stream");
                let message: serde_json::Value = serde_json::from_str(&line).unwrap();
                if message["method"] == "notifications/progress" {
                    heard.push(message["params"]["progress"].as_u64().unwrap());
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read_all)
            .await
            .expect("every notification within 20s");
        assert_eq!(heard, (0..N).collect::<Vec<u64>>());
    }
}
