//! One client session of the gateway: the MCP server side that a client talks
//! to, through either door. Lists come from the gateway's catalog; calls go to the
//! owning server's running generation (G2) and are always answered (G4).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientRequest, GetPromptRequest, ReadResourceRequest, CompleteRequestParams, CompleteResult, ErrorCode, ErrorData, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    InputRequest, InputRequests, InputResponses, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, Reference, RequestId, ServerRequest,
    ResultType,
    ServerCapabilities, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, RoleClient, RoleServer,
    ServiceError,
};
use serde_json::json;


mod call;
use super::aggregate::Gateway;
use super::catalog::Listing;
use super::member::Scope;
use crate::lifecycle::Generation;
use crate::lifecycle::error::ServerError;
use crate::metrics::CallOutcome;

/// The JSON-RPC error code of a server that cannot serve a request (the range
/// -32000 to -32099 is the implementation's own); `data.kind` says why.
pub(super) const SERVER_UNAVAILABLE: i32 = -32001;

/// A client session once initialized: its id, and its peer (where servers'
/// requests during its calls go).
pub(crate) struct Opened {
    pub id: u64,
    pub peer: Peer<RoleServer>,
    /// Opened by a request of the 2026-07-28 era (no `initialize`): each of its
    /// requests carries the client's `_meta`.
    pub modern: bool,
}

/// One client's session with the gateway.
pub(crate) struct ClientSession {
    gateway: Arc<Gateway>,
    door: &'static str,
    /// Set once the client is initialized; shared with the door's
    /// [`PassThrough`](super::PassThrough), which passes calls through only then.
    opened: Arc<OnceLock<Opened>>,
    /// The servers this session sees (`connect SERVER...`); all when `None`.
    scope: Scope,
    /// Names as the servers give them (filtered by `tools:` still): a session at one
    /// server's endpoint, which another host's gateway relays to
    /// (docs/design.md §19); that gateway names them.
    raw: bool,
    /// Cancelled when the door ends the session (an HTTP DELETE): its calls in
    /// flight are answered cancelled at once.
    ended: tokio_util::sync::CancellationToken,
    /// Held while a 2026-07-28 client's session is being opened.
    opening: tokio::sync::Mutex<()>,
    /// Told once `notifications/initialized` has opened a legacy session.
    initialized: tokio::sync::Notify,
}

impl ClientSession {
    pub(crate) fn new(gateway: Arc<Gateway>, door: &'static str) -> ClientSession {
        ClientSession {
            gateway,
            door,
            opened: Arc::default(),
            scope: None,
            raw: false,
            ended: tokio_util::sync::CancellationToken::new(),
            opening: tokio::sync::Mutex::new(()),
            initialized: tokio::sync::Notify::new(),
        }
    }

    /// What ends the session's calls in flight when cancelled.
    pub(crate) fn ended(&self) -> tokio_util::sync::CancellationToken {
        self.ended.clone()
    }

    /// The session once initialized, as the door's pass-through sees it.
    pub(crate) fn opened(&self) -> Arc<OnceLock<Opened>> {
        self.opened.clone()
    }

    /// The gateway this session belongs to.
    pub(crate) fn gateway(&self) -> Arc<Gateway> {
        self.gateway.clone()
    }

    /// The servers this session sees.
    pub(crate) fn scope(&self) -> Scope {
        self.scope.clone()
    }

    /// The session's id, once initialized.
    fn id(&self) -> Option<u64> {
        self.opened.get().map(|o| o.id)
    }

    /// The session's id for a request of a legacy client, which may come right
    /// after its `notifications/initialized`: rmcp hands the two to the session
    /// at once, so the request waits (at most 5 s) for that notification to
    /// have opened the session. `None` for a client that sent no `initialize`.
    async fn initialized_id(&self, context: &RequestContext<RoleServer>) -> Option<u64> {
        if context.peer.peer_info().is_none() {
            return self.id();
        }
        let initialized = self.initialized.notified();
        tokio::pin!(initialized);
        initialized.as_mut().enable();
        if let Some(id) = self.id() {
            return Some(id);
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), initialized).await;
        self.id()
    }

    /// The same session, seeing only the servers at `indices`.
    pub(crate) fn scoped(mut self, indices: Vec<usize>) -> ClientSession {
        self.scope = Some(indices.into());
        self
    }

    /// The same session, seeing server `index` alone, under the names it
    /// gives (what its `tools:` hides still hidden): that server's endpoint.
    pub(crate) fn alone(self, index: usize) -> ClientSession {
        let mut session = self.scoped(vec![index]);
        session.raw = true;
        session
    }

    /// The `instructions` of `initialize` and `server/discover`: how tools and
    /// prompts are named, true for each server's `prefix:`.
    fn instructions(&self) -> String {
        let members = self.gateway.members();
        let seen = members.iter().enumerate().filter_map(|(index, member)| {
            let member = member.as_ref()?;
            let inside = self.scope.as_ref().is_none_or(|scope| scope.contains(&index));
            inside.then(|| (member.handle.name(), member.exposure.prefix.as_str()))
        });
        instructions(seen)
    }

    /// Opens the session of a client of the 2026-07-28 era on its first request
    /// over stdio, where one process is one client (an `initialize` opens a
    /// legacy one in [`ServerHandler::on_initialized`]). Over HTTP such requests
    /// have no session: nothing is opened, nothing outlives the request.
    async fn opening(&self, context: &RequestContext<RoleServer>) {
        if self.door != STDIO || self.opened.get().is_some() || context.peer.peer_info().is_some() {
            return;
        }
        let Some(version) = context.meta.protocol_version() else {
            return;
        };
        if !VERSIONS.contains(&version) || version.has_initialize() {
            return;
        }
        let _one = self.opening.lock().await;
        if self.opened.get().is_some() {
            return;
        }
        let client = context.meta.client_info();
        let id = self
            .gateway
            .open(self.door, context.peer.clone(), client, true)
            .await;
        let _ = self.opened.set(Opened {
            id,
            peer: context.peer.clone(),
            modern: true,
        });
    }

    fn server_name(&self, index: usize) -> String {
        self.gateway
            .member(index)
            .map_or_else(String::new, |m| m.handle.name().to_owned())
    }

    /// The running generation's peer of server `index` (started first if need
    /// be), or the error for the client: a server that cannot serve is named with
    /// its current generation, the quarantined or crash-looping one (G4).
    async fn running(&self, index: usize) -> Result<(Generation, Peer<RoleClient>), ErrorData> {
        match self.gateway.running(index).await {
            Ok(running) => Ok(running),
            Err(e) => {
                let generation = match self.gateway.member(index) {
                    Some(m) => m.handle.snapshot().await.ok().and_then(|s| s.generation),
                    None => None,
                };
                let server = self.server_name(index);
                self.gateway.note(format_args!(
                    "session {}: server {server} cannot serve ({}): {}",
                    self.id().unwrap_or_default(),
                    json!(e.kind).as_str().unwrap_or_default(),
                    e.message
                ));
                Err(unavailable(&server, generation, &e))
            }
        }
    }
}

impl ClientSession {
    /// One page of every server's items of a list that keeps its servers' names
    /// (resources and their templates keep their URIs).
    async fn listed<T: Listing>(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<(Vec<T>, Option<String>), ErrorData> {
        let all: Vec<T> = self
            .gateway
            .gather::<T>(&self.scope)
            .await
            .iter()
            .flat_map(|(_, list)| list.iter().cloned())
            .collect();
        page(&all, request, self.gateway.page_size())
    }
}

impl ClientSession {
    /// The server and generation of a task handle (`tasks::Handle`), if the
    /// gateway could have handed it to this session and that generation still
    /// runs.
    fn task_route(
        &self,
        handle: &str,
    ) -> Result<(super::tasks::Handle, String, Peer<RoleClient>), ErrorData> {
        let of = super::tasks::Handle::decode(handle)?;
        let seen = self.scope.as_ref().is_none_or(|s| s.contains(&of.server));
        let Some(member) = self.gateway.member(of.server).filter(|_| seen) else {
            return Err(super::tasks::unknown(handle));
        };
        let server = member.handle.name().to_owned();
        let reach = member.handle.reach();
        match reach {
            Some(reach) if reach.generation == of.generation => {
                let peer = reach.session.peer().clone();
                Ok((of, server, peer))
            }
            other => Err(super::tasks::ended(
                handle,
                &server,
                &of,
                other.map(|r| r.generation),
            )),
        }
    }

    /// `tasks/get`, `tasks/update`, `tasks/cancel`: to the generation that
    /// created the task, with the server's own id.
    async fn route_task(
        &self,
        handle: String,
        context: &RequestContext<RoleServer>,
        method: impl FnOnce(String) -> super::tasks::Method,
    ) -> Result<Option<rmcp::model::GetTaskResult>, ErrorData> {
        let (of, server, peer) = self.task_route(&handle)?;
        let options = super::tasks::options(context, &peer);
        let generation = of.generation;
        super::tasks::send(&peer, options, &handle, method(of.task))
            .await
            .map_err(|e| failed(&server, generation, e))
    }
}


impl Drop for ClientSession {
    fn drop(&mut self) {
        if let Some(id) = self.id() {
            self.gateway.close(id, self.door);
        }
    }
}


/// Whether `context`'s request is of the 2026-07-28 era or later (its version
/// in its own `_meta`).
fn modern_request(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}

/// The door whose one process is one client.
pub(super) const STDIO: &str = "stdio";

/// How tools and prompts are named, for the servers a session sees (each by its
/// name and `prefix:`).
fn instructions<'a>(servers: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut text = String::from(
        "The servers of an mcpfleet fleet. Tools and prompts are named SERVER__NAME after \
         the server that offers them",
    );
    let mut others = Vec::new();
    for (name, prefix) in servers {
        match prefix {
            p if p == name => {}
            "" => others.push(format!("those of `{name}` keep their own names")),
            p => others.push(format!("those of `{name}` are named {p}__NAME")),
        }
    }
    if !others.is_empty() {
        text.push_str(", except that ");
        text.push_str(&others.join("; "));
    }
    text.push('.');
    text
}

/// The page of `items` that `cursor` (an offset we handed out) starts.
fn page<T: Clone>(
    items: &[T],
    request: Option<PaginatedRequestParams>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown cursor `{c}`"), None))?,
    };
    let end = (start + size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// A server's error as a JSON-RPC error that names the server, its generation and
/// the error kind (G4).
pub(super) fn unavailable(server: &str, generation: Option<Generation>, error: &ServerError) -> ErrorData {
    ErrorData::new(
        ErrorCode(SERVER_UNAVAILABLE),
        format!("server `{server}`: {}", error.message),
        Some(json!({
            "server": server,
            "generation": generation,
            "kind": error.kind,
        })),
    )
}

/// What a failed request to a server's session means for the client.
pub(super) fn failed(server: &str, generation: Generation, error: ServiceError) -> ErrorData {
    match error {
        // The server's own JSON-RPC error goes to the client as it is.
        ServiceError::McpError(e) => e,
        other => ErrorData::new(
            ErrorCode(SERVER_UNAVAILABLE),
            format!(
                "server `{server}`: the session of generation {generation} ended during the request ({other})"
            ),
            Some(json!({
                "server": server,
                "generation": generation,
                "kind": "cancelled",
            })),
        ),
    }
}

/// The protocol versions the gateway speaks (docs/design.md §14, "Both eras at
/// both doors"): 2026-07-28, whose requests carry their client in `_meta` and
/// need no session, and the legacy versions with the `initialize` handshake. A
/// client that asks `initialize` for 2026-07-28 is answered with the newest
/// legacy one.
const VERSIONS: [ProtocolVersion; 5] = [
    ProtocolVersion::V_2026_07_28,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

impl ServerHandler for ClientSession {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&VERSIONS)
    }

    fn get_info(&self) -> InitializeResult {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .build();
        // Declared only as the servers behind the gateway declare it.
        let offered = self.gateway.offered(&self.scope);
        if offered.completions {
            capabilities.completions = Some(rmcp::model::JsonObject::new());
        }
        if offered.logging {
            capabilities.logging = Some(rmcp::model::JsonObject::new());
        }
        if offered.subscribe
            && let Some(resources) = capabilities.resources.as_mut()
        {
            resources.subscribe = Some(true);
        }
        if offered.tasks {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(super::tasks::EXTENSION.into(), rmcp::model::JsonObject::new());
        }
        InitializeResult::new(capabilities)
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("mcpfleet", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions())
    }

    /// A tool as listed, for rmcp's HTTP door to check a 2026-07-28 call's
    /// `Mcp-Param-*` headers against its arguments (the tool's `x-mcp-header`
    /// annotations). Known only while the catalog is current; otherwise `None`,
    /// and the headers are not checked.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        match self.raw {
            true => None,
            false => self.gateway.tool_now(&self.scope, name),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let id = self
            .gateway
            .open(self.door, context.peer.clone(), None, false)
            .await;
        let _ = self.opened.set(Opened {
            id,
            peer: context.peer,
            modern: false,
        });
        self.initialized.notify_waiters();
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.opening(&context).await;
        let catalog = self.gateway.tools(&self.scope, self.raw).await;
        let (tools, next) = page(&catalog.0, request, self.gateway.page_size())?;
        let mut result = ListToolsResult::with_all_items(tools.into_iter().map(|t| t.tool).collect());
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.opening(&context).await;
        let mut span = crate::trace::Call::begin(&request.name);
        // The session ended under the call: dropped, the call tells its server
        // that nobody waits for the answer, and is counted cancelled.
        let answer = tokio::select! {
            a = self.route_call(request, context, &mut span) => a,
            () = self.ended.cancelled() => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "cancelled: the client ended its session",
                None,
            )),
        };
        span.end(&answer);
        answer
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.opening(&context).await;
        let catalog = self.gateway.prompts(&self.scope, self.raw).await;
        let (prompts, next) = page(&catalog.0, request, self.gateway.page_size())?;
        let mut result = ListPromptsResult::with_all_items(prompts);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.opening(&context).await;
        let catalog = self.gateway.prompts(&self.scope, self.raw).await;
        let Some(route) = catalog.1.route(&request.name).cloned() else {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        };
        let server = self.server_name(route.server);
        // A legacy server's requests of a 2026-07-28 client meanwhile park the
        // call (docs/design.md §14, "Continuations").
        let theirs = request.name.clone();
        let mut ours = request.clone();
        ours.name = route.name.clone();
        let state = request.request_state.as_deref();
        let answers = request.input_responses.clone();
        let parked = self
            .input_request("prompts/get", &theirs, state, answers, route.server, &context, || {
                ClientRequest::GetPromptRequest(GetPromptRequest::new(ours))
            })
            .await;
        if let Some(landed) = parked {
            let (result, generation) = match landed? {
                call::Landed::Parked(asked) => return Ok(GetPromptResponse::InputRequired(asked)),
                call::Landed::Answered(result, generation) => (*result, generation),
            };
            let ServerResult::GetPromptResult(mut result) = result else {
                return Err(failed(&server, generation, ServiceError::UnexpectedResponse));
            };
            result.result_type = Some(ResultType::COMPLETE);
            return Ok(GetPromptResponse::Complete(result));
        }
        let (generation, peer) = self.running(route.server).await?;
        request.name = route.name;
        // Sent again, with a legacy client's answers, when the server asks for input.
        let retry = request.clone();
        // A 2026-07-28 client's `logLevel`: the server's messages meanwhile.
        let mut log = super::call_log::CallLog::open(&self.gateway, route.server, &context);
        let answer = async {
            peer.send_request_with_option(
                ClientRequest::GetPromptRequest(GetPromptRequest::new(request)),
                super::tasks::options(&context, &peer),
            )
            .await?
            .await_response()
            .await
        };
        let answer = super::call_log::CallLog::during(&mut log, answer).await;
        let mut answer = answer.map_err(|e| failed(&server, generation, e))?;
        // A server of the 2026-07-28 era asks for input in its result: a
        // legacy client is asked by the gateway, as for `tools/call`.
        if !modern_request(&context) {
            let again = |answers, state| {
                let mut again = retry.clone();
                again.input_responses = Some(answers);
                again.request_state = state;
                ClientRequest::GetPromptRequest(GetPromptRequest::new(again))
            };
            answer = call::drive_input(&context, &server, generation, &peer, answer, again, None).await?;
        }
        let mut result = match answer {
            ServerResult::GetPromptResult(result) => result,
            // A server of the 2026-07-28 era asks a client of that era for
            // input as it is; the client sends `prompts/get` again itself.
            ServerResult::InputRequiredResult(asked) if modern_request(&context) => {
                return Ok(GetPromptResponse::InputRequired(asked));
            }
            _ => return Err(failed(&server, generation, ServiceError::UnexpectedResponse)),
        };
        // Said to a 2026-07-28 client (rmcp takes it out for a legacy one).
        result.result_type = Some(ResultType::COMPLETE);
        Ok(GetPromptResponse::Complete(result))
    }

    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        // To the server that owns the prompt (named as the server names it) or
        // the resource template.
        let index = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let catalog = self.gateway.prompts(&self.scope, self.raw).await;
                let Some(route) = catalog.1.route(&prompt.name).cloned() else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown prompt `{}`", prompt.name),
                        None,
                    ));
                };
                prompt.name = route.name;
                route.server
            }
            Reference::Resource(template) => {
                let owner = self.gateway.template_owner(&self.scope, &template.uri).await;
                let Some(index) = owner else {
                    return Err(ErrorData::invalid_params(
                        format!("no server of the fleet offers `{}`", template.uri),
                        None,
                    ));
                };
                index
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "a completion names a prompt (`ref/prompt`) or a resource template (`ref/resource`)",
                    None,
                ));
            }
        };
        let server = self.server_name(index);
        let (generation, peer) = self.running(index).await?;
        let mut result = peer
            .complete(request)
            .await
            .map_err(|e| failed(&server, generation, e))?;
        // Said to a 2026-07-28 client (rmcp takes it out for a legacy one).
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.opening(&context).await;
        let (resources, next) = self.listed(request).await?;
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.opening(&context).await;
        let (templates, next) = self.listed(request).await?;
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.opening(&context).await;
        let Some(index) = self.gateway.resource_owner(&self.scope, &request.uri).await else {
            return Err(ErrorData::resource_not_found(
                format!("no server of the fleet offers `{}`", request.uri),
                Some(json!({ "uri": request.uri })),
            ));
        };
        let server = self.server_name(index);
        // A legacy server's requests of a 2026-07-28 client meanwhile park the
        // call (docs/design.md §14, "Continuations").
        let uri = request.uri.clone();
        let state = request.request_state.as_deref();
        let answers = request.input_responses.clone();
        let ours = request.clone();
        let parked = self
            .input_request("resources/read", &uri, state, answers, index, &context, || {
                ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(ours))
            })
            .await;
        if let Some(landed) = parked {
            let (result, generation) = match landed? {
                call::Landed::Parked(asked) => return Ok(ReadResourceResponse::InputRequired(asked)),
                call::Landed::Answered(result, generation) => (*result, generation),
            };
            let ServerResult::ReadResourceResult(mut result) = result else {
                return Err(failed(&server, generation, ServiceError::UnexpectedResponse));
            };
            result.result_type = Some(ResultType::COMPLETE);
            return Ok(ReadResourceResponse::Complete(result));
        }
        let (generation, peer) = self.running(index).await?;
        // Sent again, with a legacy client's answers, when the server asks for input.
        let retry = request.clone();
        // A 2026-07-28 client's `logLevel`: the server's messages meanwhile.
        let mut log = super::call_log::CallLog::open(&self.gateway, index, &context);
        let answer = async {
            peer.send_request_with_option(
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request)),
                super::tasks::options(&context, &peer),
            )
            .await?
            .await_response()
            .await
        };
        let answer = super::call_log::CallLog::during(&mut log, answer).await;
        let mut answer = answer.map_err(|e| failed(&server, generation, e))?;
        // A server of the 2026-07-28 era asks for input in its result: a
        // legacy client is asked by the gateway, as for `tools/call`; a client
        // of that era gets the result as it is and reads again itself.
        if modern_request(&context) {
            if let ServerResult::InputRequiredResult(asked) = answer {
                return Ok(ReadResourceResponse::InputRequired(asked));
            }
        } else {
            let again = |answers, state| {
                let mut again = retry.clone();
                again.input_responses = Some(answers);
                again.request_state = state;
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(again))
            };
            answer = call::drive_input(&context, &server, generation, &peer, answer, again, None).await?;
        }
        let ServerResult::ReadResourceResult(mut result) = answer else {
            return Err(failed(&server, generation, ServiceError::UnexpectedResponse));
        };
        result.result_type = Some(ResultType::COMPLETE);
        // The client is told what the gateway promises of the read, not what
        // the server does (docs/design.md §14): rmcp then says `ttlMs: 0`,
        // `cacheScope: "private"` to a 2026-07-28 client, and nothing to a
        // legacy one.
        result.ttl_ms = None;
        result.cache_scope = None;
        Ok(ReadResourceResponse::Complete(result))
    }

    /// To the server whose task it is (docs/design.md §14, "Tasks").
    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let answer = self
            .route_task(request.task_id.clone(), &context, |task| {
                let mut request = request;
                request.task_id = task;
                super::tasks::Method::Get(request)
            })
            .await?;
        answer.ok_or_else(|| ErrorData::internal_error("tasks/get was not answered with a task", None))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.route_task(request.task_id.clone(), &context, |task| {
            let mut request = request;
            request.task_id = task;
            super::tasks::Method::Update(request)
        })
        .await
        .map(drop)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.route_task(request.task_id.clone(), &context, |task| {
            let mut request = request;
            request.task_id = task;
            super::tasks::Method::Cancel(request)
        })
        .await
        .map(drop)
    }

    /// Remembered for this session: the servers it sees send it their log
    /// messages at `level` and above, named by server (docs/design.md §14).
    #[expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(id) = self.initialized_id(&context).await else {
            return Err(ErrorData::invalid_request(
                "logging/setLevel before the session is initialized",
                None,
            ));
        };
        self.gateway
            .set_level(id, self.scope.clone(), request.level)
            .await;
        Ok(())
    }

    /// Relayed to the running legacy-era servers this session sees
    /// (docs/design.md §14, "Roots").
    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        let session = self.id().unwrap_or_default();
        super::roots::relay_changed(&self.gateway, &self.scope, session).await;
    }

    /// A 2026-07-28 client's listen stream: the fleet's list changes it asks
    /// for, and the updates of resources whose server takes subscriptions
    /// (docs/design.md §14, "Listen streams").
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(super::listen::honoured(&self.gateway, &self.scope, requested))
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        self.opening(context.request_context()).await;
        let listened = super::listen::listen(&self.gateway, &self.scope, context).await;
        listened.map_err(|super::listen::Busy| {
            let cap = super::bounds::LISTENS;
            ErrorData::new(
                ErrorCode(SERVER_UNAVAILABLE),
                format!("the gateway has {cap} subscriptions/listen streams open, as many as it takes; close one and listen again"),
                Some(json!({ "kind": "busy", "cap": cap })),
            )
        })
    }

    /// Routed to the server that owns the URI; the server is subscribed by the
    /// first session that subscribes (docs/design.md §14).
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(id) = self.initialized_id(&context).await else {
            return Err(ErrorData::invalid_request(
                "resources/subscribe before the session is initialized",
                None,
            ));
        };
        let uri = request.uri;
        let Some(index) = self.gateway.resource_owner(&self.scope, &uri).await else {
            return Err(ErrorData::invalid_params(
                format!("no server of the fleet offers `{uri}`"),
                Some(json!({ "uri": uri })),
            ));
        };
        let server = self.server_name(index);
        let (generation, peer) = self.running(index).await?;
        if !super::subscriptions::declares(&peer) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("server `{server}`, which offers `{uri}`, takes no resource subscriptions"),
                Some(json!({ "server": server, "uri": uri })),
            ));
        }
        if self.gateway.subscribed(id, index, &uri).await
            && let Err(e) = self.gateway.subscribe_server(index, &peer, &uri).await
        {
            self.gateway.unsubscribe(id, &uri).await;
            return Err(failed(&server, generation, e));
        }
        Ok(())
    }

    /// The server is unsubscribed once its last subscriber leaves.
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(id) = self.initialized_id(&context).await {
            self.gateway.unsubscribe(id, &request.uri).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instructions_name_tools_as_each_servers_prefix_makes_them() {
        let plain = instructions([("a", "a"), ("time", "time")].into_iter());
        assert_eq!(
            plain,
            "The servers of an mcpfleet fleet. Tools and prompts are named SERVER__NAME \
             after the server that offers them."
        );
        let mixed = instructions([("a", "a"), ("fs", ""), ("time", "t")].into_iter());
        assert!(mixed.contains("those of `fs` keep their own names"), "{mixed}");
        assert!(mixed.contains("those of `time` are named t__NAME"), "{mixed}");
        assert!(!mixed.contains("`a`"), "{mixed}");
    }
}
