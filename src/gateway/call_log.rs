//! The log messages of a 2026-07-28 client's call (docs/design.md §14, "Both
//! eras at both doors"): a request whose `_meta` carries
//! `io.modelcontextprotocol/logLevel` gets, on its own response stream, the
//! `notifications/message` its server sends while the call is in flight, at
//! that level and above, named by server; a request without one gets none. A
//! server of that era is sent the level in the request's `_meta`.

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use std::future::Future;

use rmcp::model::LoggingMessageNotificationParam;
use rmcp::service::{Peer, RequestContext, RoleServer};
use tokio::sync::mpsc;

use super::aggregate::Gateway;
use super::desk::CallLogging;

/// How many turns of the runtime, each ended by a round trip through the
/// gateway's task, the answer waits for messages the server sent before it.
const SETTLING_TURNS: usize = 3;

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
    /// those heard and not yet sent, before the answer.
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
        // rmcp hands the server's notifications to mcpfleet on tasks of their
        // own, and the answer straight to the call: those sent before the
        // answer are let through to the gateway's task, then taken.
        // Those tasks were spawned before the answer came; a few turns of the
        // runtime let them run (a bound, not a proof: see docs/design.md §14).
        for _ in 0..SETTLING_TURNS {
            tokio::task::yield_now().await;
            log.route.settled().await;
            while let Ok(message) = log.heard.try_recv() {
                let _ = log.client.notify_logging_message(message).await;
            }
        }
        output
    }
}

