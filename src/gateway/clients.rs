//! What the gateway sends a client session of its own accord: that a list
//! changed, and the progress of its calls. Each session has one queue, drained
//! by one task, so that what it is sent arrives in the order it was queued
//! (docs/design.md §14, G5).

use rmcp::model::ProgressNotificationParam;
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

/// A notification to a client.
#[derive(Clone)]
pub(super) enum Note {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    Progress(ProgressNotificationParam),
}

/// A client session's queue of notifications. Its task ends once every copy of
/// the queue is gone (the session closed, its calls answered).
#[derive(Clone)]
pub(super) struct ClientQueue(mpsc::UnboundedSender<Note>);

impl ClientQueue {
    /// The queue of the client at `peer`, drained by a task of `tasks`.
    pub(super) fn spawn(peer: Peer<RoleServer>, tasks: &TaskTracker) -> ClientQueue {
        let (tx, mut rx) = mpsc::unbounded_channel::<Note>();
        tasks.spawn(async move {
            while let Some(note) = rx.recv().await {
                let sent = match note {
                    Note::ToolsChanged => peer.notify_tool_list_changed().await,
                    Note::PromptsChanged => peer.notify_prompt_list_changed().await,
                    Note::ResourcesChanged => peer.notify_resource_list_changed().await,
                    Note::Progress(param) => {
                        let _ = peer.notify_progress(param).await;
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
        let _ = self.0.send(note);
    }
}
