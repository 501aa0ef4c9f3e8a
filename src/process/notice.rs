//! What a server sends its client unasked, as the rest of mcpfleet hears it: list
//! changes, progress, log messages, resource updates, and the requests a server
//! makes of its client (`roots/list`, `sampling/createMessage`,
//! `elicitation/create`). The session hands each to a
//! [`Listener`] (the gateway's, docs/design.md §14); without one, notifications
//! are only logged and requests get rmcp's default answers.

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use futures::future::BoxFuture;
use rmcp::model::{
    ClientResult, ErrorData, LoggingMessageNotificationParam, ProgressNotificationParam, RequestId,
    ResourceUpdatedNotificationParam, ServerRequest,
};
use tokio_util::sync::CancellationToken;

/// A notification from a server.
#[derive(Debug, Clone)]
pub enum Notice {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    Progress(ProgressNotificationParam),
    /// `notifications/message`, as the server wrote it.
    Log(LoggingMessageNotificationParam),
    /// `notifications/resources/updated`, as the server wrote it.
    ResourceUpdated(ResourceUpdatedNotificationParam),
}

/// A request a server made of its client.
#[derive(Debug)]
pub struct Asked {
    pub request: ServerRequest,
    /// Our request to the server on whose HTTP response stream it came, when the
    /// transport says so (a remote server); over stdio nothing links a server's
    /// request to the call that caused it.
    pub origin: Option<RequestId>,
    /// Cancelled when the server gives up on its request.
    pub cancelled: CancellationToken,
}

/// Hears one server's notifications and requests. Called from the session's
/// task: it must not block.
pub trait Listener: Send + Sync + 'static {
    fn notified(&self, notice: Notice);

    /// Answers a request the server made of its client.
    fn asked(&self, asked: Asked) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;
}
