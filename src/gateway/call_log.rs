//! The log messages of a 2026-07-28 client's request (docs/design.md §14, "Both
//! eras at both doors"): a `tools/call`, `prompts/get` or `resources/read` whose
//! `_meta` carries `io.modelcontextprotocol/logLevel` gets, on its own response
//! stream, the `notifications/message` its server sends while the request is in
//! flight, at that level and above, named by server, and every one the server
//! sent before its answer comes before the answer; a request without one gets
//! none. A server of that era is sent the level in the request's `_meta`.

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use std::future::Future;

use rmcp::model::LoggingMessageNotificationParam;
use rmcp::service::{Peer, RequestContext, RoleServer};
use tokio::sync::mpsc;

use super::aggregate::Gateway;
use super::desk::CallLogging;

/// A call's log messages on their way to its client, while it is in flight.
pub(super) struct CallLog {
    route: CallLogging,
    heard: mpsc::UnboundedReceiver<LoggingMessageNotificationParam>,
    client: Peer<RoleServer>,
}

impl CallLog {
    /// The call of `context` to server `index`: `None` unless the request is
    /// of the 2026-07-28 era and carries a `logLevel`.
    pub(super) fn open(gateway: &Gateway, index: usize, context: &RequestContext<RoleServer>) -> Option<CallLog> {
        let modern = context.meta.protocol_version().is_some_and(|v| !v.has_initialize());
        let level = context.meta.log_level().filter(|_| modern)?;
        let (queue, heard) = mpsc::unbounded_channel();
        Some(CallLog {
            route: gateway.call_log(index, level, queue),
            heard,
            client: context.peer.clone(),
        })
    }

    /// Runs `call`, sending the client each message heard meanwhile; then
    /// those the server sent before its answer and not yet sent.
    pub(super) async fn during<F: Future>(log: &mut Option<CallLog>, call: F) -> F::Output {
        let Some(log) = log.as_mut() else {
            return call.await;
        };
        let mut call = std::pin::pin!(call);
        let output = loop {
            tokio::select! {
                output = &mut call => break output,
                Some(message) = log.heard.recv() => {
                    let _ = log.client.notify_logging_message(message).await;
                }
            }
        };
        // The server's log messages reach the gateway's task as they are read
        // off its stream (stdio or HTTP), before rmcp reads the answer that
        // follows them (`notice::WrittenAsks`, the stdio hook): once the task
        // has handled what it was sent until now, every message the server
        // sent before its answer is on this call's queue.
        log.route.flushed().await;
        while let Ok(message) = log.heard.try_recv() {
            let _ = log.client.notify_logging_message(message).await;
        }
        output
    }
}

