//! What a server sends its client unasked, as the rest of mcpfleet hears it: list
//! changes and progress. The session hands each to a [`Listener`] (the gateway's,
//! docs/design.md §14); without one they are only logged.

use rmcp::model::ProgressNotificationParam;

/// A notification from a server.
#[derive(Debug, Clone)]
pub enum Notice {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    Progress(ProgressNotificationParam),
}

/// Hears one server's notifications. Called from the session's task: it must
/// not block.
pub trait Listener: Send + Sync + 'static {
    fn notified(&self, notice: Notice);
}
