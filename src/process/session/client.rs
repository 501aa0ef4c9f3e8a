//! mcpfleet's side of an MCP session: what it declares, and how it answers
//! and tells what the server sends (`FleetClient`).

#![expect(deprecated, reason = "roots and sampling are deprecated by the 2026 protocol but still spoken by servers")]

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequest,
    CreateMessageRequestMethod, CreateMessageRequestParams, CreateMessageResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationCapability, ElicitationCreateRequestMethod,
    ErrorData, Implementation, InitializeRequestParams, ListRootsResult, ProtocolVersion,
    ServerRequest,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, RequestContext, RoleClient,
};
use rmcp::ClientHandler;

use crate::process::notice::{Asked, Listener, Notice, WrittenAsks};

/// mcpfleet's side of an MCP session. List changes and progress go to the
/// listener, if any (the gateway's), and so do the server's requests: with a
/// listener the client declares sampling and elicitation too, and the listener
/// answers them (and `roots/list`). Without one, rmcp's default handlers answer
/// `ping` and `roots/list` (with no roots), and refuse sampling and elicitation.
#[derive(Clone, Default)]
pub(crate) struct FleetClient {
    pub(super) listener: Option<Arc<dyn Listener>>,
    /// The params of the server's requests as it wrote them (stdio).
    pub(super) asks: Option<WrittenAsks>,
    /// The server's progress and log messages reach the listener as they are
    /// read (the stdio hook, [`WrittenAsks::telling`]), not from rmcp.
    pub(super) told: bool,
}

impl FleetClient {
    fn tell(&self, notice: Notice) {
        if let Some(listener) = &self.listener {
            listener.notified(notice);
        }
    }

    /// The listener's answer to a request of the server's, if there is a
    /// listener.
    async fn ask(
        &self,
        request: ServerRequest,
        context: &RequestContext<RoleClient>,
    ) -> Option<Result<ClientResult, ErrorData>> {
        let listener = self.listener.as_ref()?;
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
            _ => None,
        };
        let written = self.asks.as_ref().and_then(|asks| asks.take(&context.id));
        let asked = Asked {
            request,
            written,
            origin,
            cancelled: context.ct.clone(),
        };
        Some(listener.asked(asked).await)
    }
}

/// The answer of the wrong kind to a relayed request.
fn mismatched(method: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the client's answer to `{method}` was of another kind"),
        None,
    )
}

impl ClientHandler for FleetClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tell(Notice::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tell(Notice::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tell(Notice::ResourcesChanged);
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if self.told {
            return;
        }
        // Over stdio the session's hook hands progress on as written before
        // rmcp reads it; over HTTP the params as written were kept as the
        // stream was read, else they are as rmcp writes them.
        let written = self.asks.as_ref().and_then(|asks| asks.progress(&params));
        let params = match written {
            Some(params) => Some(params),
            None => match serde_json::to_value(params) {
                Ok(serde_json::Value::Object(params)) => Some(params),
                _ => None,
            },
        };
        if let Some(params) = params {
            self.tell(Notice::Progress(params));
        }
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if self.told {
            return;
        }
        self.tell(Notice::Log(params));
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.tell(Notice::ResourceUpdated(params));
    }

    /// A task's status of protocol 2025-11-25 (rmcp knows only the tasks
    /// extension's `notifications/tasks`).
    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/tasks/status"
            && let Some(serde_json::Value::Object(params)) = notification.params
        {
            self.tell(Notice::TaskStatus(params));
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(Default::default());
        match self.ask(request, &context).await {
            None => Ok(ListRootsResult::default()),
            Some(Ok(ClientResult::ListRootsResult(result))) => Ok(result),
            Some(Ok(_)) => Err(mismatched("roots/list")),
            Some(Err(e)) => Err(e),
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.ask(request, &context).await {
            None => Err(ErrorData::method_not_found::<CreateMessageRequestMethod>()),
            Some(Ok(ClientResult::CreateMessageResult(result))) => Ok(*result),
            Some(Ok(_)) => Err(mismatched("sampling/createMessage")),
            Some(Err(e)) => Err(e),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.ask(request, &context).await {
            None => Err(ErrorData::method_not_found::<ElicitationCreateRequestMethod>()),
            Some(Ok(ClientResult::ElicitResult(result))) => Ok(result),
            Some(Ok(_)) => Err(mismatched("elicitation/create")),
            Some(Err(e)) => Err(e),
        }
    }

    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        if self.listener.is_some() {
            // The gateway relays these to its clients, and its clients'
            // `notifications/roots/list_changed` to the server (docs/design.md §14).
            let mut roots = rmcp::model::RootsCapabilities::default();
            roots.list_changed = Some(true);
            capabilities.roots = Some(roots);
            capabilities.sampling = Some(Default::default());
            capabilities.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(Default::default())
                    .with_url(Default::default()),
            );
        }
        InitializeRequestParams::new(
            capabilities,
            Implementation::new("mcpfleet", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
