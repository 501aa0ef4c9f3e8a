//! A client's `tools/call` through the gateway: routed to the server that
//! offers the tool, sent to its running generation, the input a server of the
//! 2026-07-28 era asks for, and the metrics and cancellation of the call.

use super::*;
use crate::gateway::inputs::{Binding, Inlet, Inputs, Parked, Question, Taken};
use rmcp::model::InputRequiredResult;

impl ClientSession {
    /// A `tools/call`: routed to the server that offers the tool, sent to its
    /// running generation (started first if need be), and answered (G2, G4).
    pub(super) async fn route_call(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        span: &mut crate::trace::Call,
    ) -> Result<CallToolResponse, ErrorData> {
        let catalog = self.gateway.tools(&self.scope, self.raw).await;
        let Some(route) = catalog.1.route(&request.name).cloned() else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        };
        let server = self.server_name(route.server);
        span.server(&server);
        // A 2026-07-28 client's retry of a call the gateway parked while it
        // asked the client for a legacy server's input (docs/design.md §14,
        // "Continuations").
        let binding = self.binding("tools/call", &request.name);
        // Counted when it ends, however it ends (dropped: cancelled).
        let mut meter = CallMeter {
            gateway: &self.gateway,
            server: &server,
            started: std::time::Instant::now(),
            outcome: CallOutcome::Cancelled,
        };
        let state = request.request_state.as_deref();
        let answers = request.input_responses.clone();
        let taken = self
            .take_up(state, answers, &context, binding.clone(), &mut meter.outcome)
            .await;
        if let Some(landed) = taken {
            if let Ok(Landed::Answered(_, generation)) = &landed {
                span.generation(*generation);
            }
            return self.call_landed(landed?, &mut meter);
        }
        let (generation, peer) = self.running(route.server).await.inspect_err(|_| {
            meter.outcome = CallOutcome::Failed;
        })?;
        span.generation(generation);
        // A legacy server asks a 2026-07-28 client for input through the
        // gateway alone: a `requestState` the gateway does not hold (never
        // handed out, or expired) means nothing to it.
        let continued = Self::continues(&context, &peer);
        if continued && let Some(state) = request.request_state.as_deref() {
            meter.outcome = CallOutcome::Failed;
            return Err(unknown_state(state, &server));
        }
        let (inlet, asks) = match continued {
            true => {
                let caps = context.meta.client_capabilities().unwrap_or_default();
                let (inlet, asks) = Inlet::new(caps);
                (Some(inlet), Some(asks))
            }
            false => (None, None),
        };
        request.name = route.name.into();
        // rmcp gives every request a progress token of its own, in place of any
        // the request carries: the server's progress comes back under that one,
        // and goes to this client under the client's.
        // Until the call is noted below, what the server sends for it at once
        // (its progress, its requests of its client) waits at the desk.
        let sending = self.gateway.sending(route.server);
        // Sent again, with the client's answers, when the server asks for input.
        let retry = request.clone();
        // A 2026-07-28 client's `logLevel`: the server's messages meanwhile. A
        // server of that era gets the client's capabilities and `logLevel`: it
        // asks only for what the client can give, and may answer with a task
        // when the client declares the tasks extension.
        let mut log = crate::gateway::call_log::CallLog::open(&self.gateway, route.server, &context);
        let call = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(request)),
                crate::gateway::tasks::options(&context, &peer),
            )
            .await
            .map_err(|e| {
                meter.outcome = CallOutcome::Failed;
                failed(&server, generation, e)
            })?;
        // The server's requests of its client (sampling, ...) go to this client.
        let _asking = self.gateway.asking(
            route.server,
            call.id.clone(),
            context.peer.clone(),
            context.id.clone(),
            self.id().unwrap_or_default(),
            inlet,
        );
        let progress_route = context.meta.get_progress_token().map(|token| {
            let client = (context.peer.clone(), self.door == STDIO);
            let session = self.id().unwrap_or_default();
            self.gateway
                .route_progress(route.server, &call.progress_token, session, client, token)
        });
        drop(sending);
        // Dropping the call before its answer (the client cancelled it, or its
        // session ended) sends the server `notifications/cancelled`.
        let mut abandoned = Abandoned {
            peer,
            id: Some(call.id.clone()),
            tasks: self.gateway.tasks().clone(),
        };
        // A legacy server's call for a 2026-07-28 client: what the server asks
        // of the client meanwhile parks it.
        if let Some(asks) = asks {
            let flight = Flight {
                server: route.server,
                name: server.clone(),
                generation,
                progress: call.progress_token.clone(),
                response: Box::pin(call.await_response()),
                asks,
                abandoned,
                _asking,
                asked: 0,
            };
            let landed = self
                .fly(flight, &context, log, progress_route, &mut meter.outcome, binding)
                .await?;
            return self.call_landed(landed, &mut meter);
        }
        let response = tokio::select! {
            r = crate::gateway::call_log::CallLog::during(&mut log, call.await_response()) => r,
            _ = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None));
            }
        };
        abandoned.id = None;
        // What the server sent before its answer reaches the client first.
        if let Some(progress) = &progress_route {
            progress.flushed().await;
        }
        meter.outcome = CallOutcome::Failed;
        let mut response = response.map_err(|e| failed(&server, generation, e))?;
        // A server of the 2026-07-28 era asks for input (sampling, elicitation,
        // roots) in its result: a client of that era gets the result as it is and
        // sends the call again itself; for a legacy client the gateway asks it,
        // as the server's requests, and sends the call again with the answers.
        let modern_client = modern_request(&context);
        if !modern_client {
            let again = |answers, state| {
                let mut again = retry.clone();
                again.input_responses = Some(answers);
                again.request_state = state;
                ClientRequest::CallToolRequest(CallToolRequest::new(again))
            };
            let peer = &abandoned.peer;
            let flushed = progress_route.as_ref();
            response = drive_input(&context, &server, generation, peer, response, again, flushed).await?;
        }
        let result = match response {
            ServerResult::CallToolResult(result) => result,
            ServerResult::EmptyResult(_) => CallToolResult::default(),
            ServerResult::InputRequiredResult(asked) if modern_client => {
                meter.outcome = CallOutcome::Ok;
                return Ok(CallToolResponse::InputRequired(asked));
            }
            // A task, to a client that declared the extension: its id becomes
            // the gateway's handle of it.
            ServerResult::CreateTaskResult(mut task) if crate::gateway::tasks::client_declares(&context) => {
                meter.outcome = CallOutcome::Ok;
                let handle = crate::gateway::tasks::Handle {
                    server: route.server,
                    generation,
                    task: std::mem::take(&mut task.task.task_id),
                };
                task.task.task_id = handle.encode();
                return Ok(CallToolResponse::Task(task));
            }
            _ => {
                return Err(failed(
                    &server,
                    generation,
                    ServiceError::UnexpectedResponse,
                ));
            }
        };
        Ok(self.complete(result, &mut meter, generation))
    }

    /// A server's result of a call, as the client gets it.
    fn complete(
        &self,
        mut result: CallToolResult,
        meter: &mut CallMeter<'_>,
        generation: Generation,
    ) -> CallToolResponse {
        meter.outcome = if result.is_error == Some(true) {
            CallOutcome::Error
        } else {
            CallOutcome::Ok
        };
        result.result_type = Some(ResultType::COMPLETE);
        if self.gateway.meta() {
            let meta = result.meta.get_or_insert_with(Default::default);
            meta.insert("mcpfleet/server".into(), json!(meter.server));
            meta.insert("mcpfleet/generation".into(), json!(generation));
        }
        CallToolResponse::Complete(result)
    }

    /// Who may take up a call of this session's parked for its client's input:
    /// a request of `method` for `name` (as the client named it), through the
    /// same door, seeing the same servers, and over stdio from the same
    /// session.
    fn binding(&self, method: &'static str, name: &str) -> Binding {
        Binding {
            door: self.door,
            session: match self.door {
                STDIO => self.id().unwrap_or_default(),
                _ => 0,
            },
            scope: self.scope.clone(),
            method,
            name: name.to_owned(),
        }
    }

    /// Waits for a legacy server's answer to a 2026-07-28 client's request, or
    /// its next request of the client: the answer is the request's; a request
    /// parks the call, and the client gets an input-required result that
    /// carries it (with any others the server asked meanwhile) and the
    /// `requestState` that takes the call up again. `outcome` is the call's
    /// for the metrics, as far as this can tell.
    async fn fly(
        &self,
        mut flight: Flight,
        context: &RequestContext<RoleServer>,
        mut log: Option<crate::gateway::call_log::CallLog>,
        progress: Option<crate::gateway::desk::ProgressGuard>,
        outcome: &mut CallOutcome,
        binding: Binding,
    ) -> Result<Landed, ErrorData> {
        let server = flight.name.clone();
        let server = server.as_str();
        let next = tokio::select! {
            next = crate::gateway::call_log::CallLog::during(&mut log, flight.next()) => next,
            _ = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None));
            }
        };
        let generation = flight.generation;
        let first = match next {
            Next::Answered(response) => {
                flight.abandoned.id = None;
                if let Some(progress) = &progress {
                    progress.flushed().await;
                }
                *outcome = CallOutcome::Failed;
                let response = (*response).map_err(|e| failed(server, generation, e))?;
                return Ok(Landed::Answered(Box::new(response), generation));
            }
            Next::Asked(first) => first,
        };
        // What the server's progress said so far reaches the client before
        // the input-required result.
        if let Some(progress) = &progress {
            progress.flushed().await;
        }
        drop(progress);
        let mut questions = vec![first];
        while let Ok(question) = flight.asks.try_recv() {
            questions.push(question);
        }
        let keyed = questions
            .into_iter()
            .map(|question| {
                flight.asked += 1;
                (format!("mcpfleet-{}", flight.asked), question)
            })
            .collect();
        let mut parked = Parked::new(binding, server.to_owned(), keyed, Box::new(flight));
        let requests = parked.input_requests();
        match self.gateway.inputs().park(parked) {
            Ok(state) => {
                *outcome = CallOutcome::Ok;
                Ok(Landed::Parked(InputRequiredResult::new(Some(requests), Some(state))))
            }
            Err((parked, why)) => {
                // Dropped: the server's requests are answered with an error,
                // and its call is cancelled.
                drop(parked);
                *outcome = CallOutcome::Failed;
                self.gateway.note(format_args!(
                    "server {server} asked a 2026-07-28 client for input during a call, which the gateway did not park: {why}; the call is cancelled"
                ));
                Err(ErrorData::new(
                    ErrorCode(SERVER_UNAVAILABLE),
                    format!("server `{server}` asked for the client's input, which the gateway cannot hold now: {why}"),
                    Some(json!({ "server": server, "generation": generation, "kind": "busy" })),
                ))
            }
        }
    }

    /// A `tools/call` that landed, as its client gets it.
    fn call_landed(&self, landed: Landed, meter: &mut CallMeter<'_>) -> Result<CallToolResponse, ErrorData> {
        let (result, generation) = match landed {
            Landed::Parked(asked) => return Ok(CallToolResponse::InputRequired(asked)),
            Landed::Answered(result, generation) => (*result, generation),
        };
        match result {
            ServerResult::CallToolResult(result) => Ok(self.complete(result, meter, generation)),
            ServerResult::EmptyResult(_) => Ok(self.complete(CallToolResult::default(), meter, generation)),
            _ => Err(failed(meter.server, generation, ServiceError::UnexpectedResponse)),
        }
    }

    /// The call parked under `state` that this 2026-07-28 request (`binding`)
    /// takes up with `answers`, if `state` is one of the gateway's and it
    /// holds it: what the call came to, or the refusal of a state handed out
    /// for another client or request. `None`: not a state the gateway holds.
    async fn take_up(
        &self,
        state: Option<&str>,
        answers: Option<InputResponses>,
        context: &RequestContext<RoleServer>,
        binding: Binding,
        outcome: &mut CallOutcome,
    ) -> Option<Result<Landed, ErrorData>> {
        let state = state.filter(|s| Inputs::ours(s) && modern_request(context))?;
        match self.gateway.inputs().take(state, &binding) {
            Taken::Parked(parked) => Some(self.resume(*parked, answers, context, binding, outcome).await),
            Taken::Foreign => Some(Err(foreign_state(state))),
            Taken::Unknown => None,
        }
    }

    /// A 2026-07-28 client's retry of a call parked for its input: the
    /// client's answers answer the server's requests, and the call goes on.
    async fn resume(
        &self,
        parked: Parked,
        answers: Option<InputResponses>,
        context: &RequestContext<RoleServer>,
        binding: Binding,
        outcome: &mut CallOutcome,
    ) -> Result<Landed, ErrorData> {
        let Parked {
            questions, flight, ..
        } = parked;
        let Ok(flight) = flight.downcast::<Flight>() else {
            return Err(ErrorData::internal_error("a parked call of another kind", None));
        };
        let flight = *flight;
        // Each answer as the client wrote it.
        let answers = answers.unwrap_or_default();
        for (key, question) in questions {
            question.answer_with(&key, answers.get(&key));
        }
        let progress = context.meta.get_progress_token().map(|token| {
            let client = (context.peer.clone(), self.door == STDIO);
            let session = self.id().unwrap_or_default();
            self.gateway
                .route_progress(flight.server, &flight.progress, session, client, token)
        });
        let log = crate::gateway::call_log::CallLog::open(&self.gateway, flight.server, context);
        self.fly(flight, context, log, progress, outcome, binding).await
    }

    /// A 2026-07-28 client's `request` (`prompts/get` or `resources/read`,
    /// as `binding` names it) to server `index`, a legacy server: what the
    /// server asks of the client meanwhile parks the call.
    #[expect(clippy::too_many_arguments, reason = "one request to one server, each argument a part of it")]
    async fn continued(
        &self,
        index: usize,
        server: &str,
        generation: Generation,
        peer: Peer<RoleClient>,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        binding: Binding,
    ) -> Result<Landed, ErrorData> {
        let caps = context.meta.client_capabilities().unwrap_or_default();
        let (inlet, asks) = Inlet::new(caps);
        // The client's `logLevel`: the server's messages meanwhile.
        let log = crate::gateway::call_log::CallLog::open(&self.gateway, index, context);
        let sending = self.gateway.sending(index);
        let call = peer
            .send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options())
            .await
            .map_err(|e| failed(server, generation, e))?;
        let _asking = self.gateway.asking(
            index,
            call.id.clone(),
            context.peer.clone(),
            context.id.clone(),
            self.id().unwrap_or_default(),
            Some(inlet),
        );
        drop(sending);
        let flight = Flight {
            server: index,
            name: server.to_owned(),
            generation,
            progress: call.progress_token.clone(),
            abandoned: Abandoned {
                peer,
                id: Some(call.id.clone()),
                tasks: self.gateway.tasks().clone(),
            },
            response: Box::pin(call.await_response()),
            asks,
            _asking,
            asked: 0,
        };
        let mut outcome = CallOutcome::Ok;
        self.fly(flight, context, log, None, &mut outcome, binding).await
    }

    /// A 2026-07-28 client's `method` (`prompts/get` or `resources/read`) of
    /// `name` (a prompt as the client names it, or a URI) to server `index`,
    /// with `state` and `answers` from its params: the call it takes up
    /// again, or `request` sent to a legacy server, where what the server asks
    /// of the client parks the call; `None` when it goes the usual way.
    #[expect(clippy::too_many_arguments, reason = "one request to one server, each argument a part of it")]
    pub(super) async fn input_request(
        &self,
        method: &'static str,
        name: &str,
        state: Option<&str>,
        answers: Option<InputResponses>,
        index: usize,
        context: &RequestContext<RoleServer>,
        request: impl FnOnce() -> ClientRequest,
    ) -> Option<Result<Landed, ErrorData>> {
        let binding = self.binding(method, name);
        let mut outcome = CallOutcome::Ok;
        if let Some(landed) = self
            .take_up(state, answers, context, binding.clone(), &mut outcome)
            .await
        {
            return Some(landed);
        }
        if !modern_request(context) {
            return None;
        }
        let server = self.server_name(index);
        let (generation, peer) = match self.running(index).await {
            Ok(running) => running,
            Err(e) => return Some(Err(e)),
        };
        if !Self::continues(context, &peer) {
            return None;
        }
        if let Some(state) = state {
            return Some(Err(unknown_state(state, &server)));
        }
        Some(
            self.continued(index, &server, generation, peer, request(), context, binding)
                .await,
        )
    }

    /// Whether the server of `peer` asks a client of `context`'s request for
    /// input through the gateway alone: a legacy server, for a 2026-07-28
    /// client.
    fn continues(context: &RequestContext<RoleServer>, peer: &Peer<RoleClient>) -> bool {
        modern_request(context)
            && peer
                .peer_info()
                .is_none_or(|info| info.protocol_version.has_initialize())
    }
}

/// What a request continued through the gateway came to: the server's answer
/// (from the generation that gave it), or the call parked for the client's
/// input.
pub(super) enum Landed {
    Answered(Box<ServerResult>, Generation),
    Parked(InputRequiredResult),
}

/// A legacy server's call for a 2026-07-28 client, in flight or parked while
/// the client answers the server's requests (`inputs.rs`).
pub(super) struct Flight {
    server: usize,
    /// The server's name, for what the client and the gateway's log are told.
    name: String,
    generation: Generation,
    /// The progress token of our request to the server.
    progress: rmcp::model::ProgressToken,
    response: futures::future::BoxFuture<'static, Result<ServerResult, ServiceError>>,
    /// The server's requests of the client.
    asks: tokio::sync::mpsc::Receiver<Question>,
    /// Dropped before the answer, it cancels the call at the server.
    abandoned: Abandoned,
    /// The call in flight, as the desk knows it: the server's requests find it.
    _asking: crate::gateway::desk::Asking,
    /// How many of the server's requests the client was asked.
    asked: u64,
}

/// What a call waits for next.
enum Next {
    Answered(Box<Result<ServerResult, ServiceError>>),
    Asked(Question),
}

impl Flight {
    async fn next(&mut self) -> Next {
        tokio::select! {
            answer = &mut self.response => Next::Answered(Box::new(answer)),
            Some(question) = self.asks.recv() => Next::Asked(question),
        }
    }
}

/// The error of a `requestState` the gateway handed out to another client, or
/// for another request.
fn foreign_state(state: &str) -> ErrorData {
    ErrorData::invalid_params(
        "requestState: this gateway handed it out for another client's request; send the request it was handed out for, from that client",
        Some(json!({ "requestState": state })),
    )
}

/// The error of a `requestState` for a legacy server's tool that the gateway
/// does not hold.
fn unknown_state(state: &str, server: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "requestState: the gateway holds no call it names (it expired, or was never handed out), and server `{server}` asks for input only through the gateway; call the tool again without it"
        ),
        Some(json!({ "requestState": state, "server": server })),
    )
}

/// How many times a call is sent again with a legacy client's answers before
/// the gateway gives up on a server that keeps asking for input.
const INPUT_ROUNDS: usize = 10;

/// A 2026-07-28 server's `response` to a legacy client's request (`tools/call`,
/// `prompts/get` or `resources/read`): while it is an input-required result,
/// the client is asked for the input ([`ask_for_input`]) and the request is
/// sent again to `peer` as `again` makes it from the answers and the server's
/// exact `requestState`, for at most [`INPUT_ROUNDS`] rounds, each round's
/// progress (`flushed`) reaching the client before the next; the first answer
/// that asks for nothing more.
pub(super) async fn drive_input(
    context: &RequestContext<RoleServer>,
    server: &str,
    generation: Generation,
    peer: &Peer<RoleClient>,
    mut response: ServerResult,
    again: impl Fn(InputResponses, Option<String>) -> ClientRequest,
    flushed: Option<&crate::gateway::desk::ProgressGuard>,
) -> Result<ServerResult, ErrorData> {
    for _ in 0..INPUT_ROUNDS {
        let ServerResult::InputRequiredResult(asked) = response else {
            return Ok(response);
        };
        let requests = asked.input_requests.unwrap_or_default();
        let answers = ask_for_input(context, server, requests).await?;
        let request = again(answers, asked.request_state);
        let sent = async {
            peer.send_request_with_option(request, crate::gateway::tasks::options(context, peer))
                .await?
                .await_response()
                .await
        };
        response = tokio::select! {
            r = sent => r.map_err(|e| failed(server, generation, e))?,
            _ = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None));
            }
        };
        if let Some(progress) = flushed {
            progress.flushed().await;
        }
    }
    match response {
        ServerResult::InputRequiredResult(_) => Err(ErrorData::internal_error(
            format!("server `{server}` still asked for input after {INPUT_ROUNDS} rounds of answers"),
            None,
        )),
        response => Ok(response),
    }
}

/// Asks the client of `context`, as server requests on its call's stream, for
/// what a server of the 2026-07-28 era asked in an input-required result, if
/// the client declared that it can answer each; the answers under the server's
/// keys.
async fn ask_for_input(
    context: &RequestContext<RoleServer>,
    server: &str,
    requests: InputRequests,
) -> Result<InputResponses, ErrorData> {
    let declared = context.peer.peer_info().map(|i| i.capabilities.clone());
    let mut answers = InputResponses::new();
    for (key, request) in requests {
        let (request, capability) = match request {
            InputRequest::CreateMessage(r) => (
                ServerRequest::CreateMessageRequest(r),
                declared.as_ref().is_some_and(|c| c.sampling.is_some()).then_some(()).ok_or("sampling"),
            ),
            InputRequest::Elicitation(r) => (
                ServerRequest::ElicitRequest(r),
                declared.as_ref().is_some_and(|c| c.elicitation.is_some()).then_some(()).ok_or("elicitation"),
            ),
            InputRequest::ListRoots(r) => (
                ServerRequest::ListRootsRequest(r),
                declared.as_ref().is_some_and(|c| c.roots.is_some()).then_some(()).ok_or("roots"),
            ),
            _ => {
                return Err(ErrorData::internal_error(
                    format!("server `{server}` asked for input of a kind the gateway does not know"),
                    None,
                ));
            }
        };
        if let Err(missing) = capability {
            return Err(ErrorData::new(
                ErrorCode(MISSING_CAPABILITY),
                format!("server `{server}` asked for input that needs `{missing}`, which this client did not declare"),
                Some(json!({ "requiredCapabilities": { missing: {} } })),
            ));
        }
        let answer = context.peer.send_request(request).await.map_err(|e| match e {
            ServiceError::McpError(e) => e,
            other => ErrorData::internal_error(
                format!("server `{server}` asked the client for input, which it did not give: {other}"),
                None,
            ),
        })?;
        let answer = serde_json::to_value(answer)
            .map_err(|e| ErrorData::internal_error(format!("the client's answer: {e}"), None))?;
        answers.insert(key, answer);
    }
    Ok(answers)
}

/// The JSON-RPC error code of a request that needs a capability the client did
/// not declare (2026-07-28).
const MISSING_CAPABILITY: i32 = -32021;

/// A call through the gateway, counted in the metrics when it ends: with the
/// outcome set last, or as cancelled when dropped before (docs/design.md §17).
struct CallMeter<'a> {
    gateway: &'a Gateway,
    server: &'a str,
    started: std::time::Instant,
    outcome: CallOutcome,
}

impl Drop for CallMeter<'_> {
    fn drop(&mut self) {
        self.gateway
            .metrics
            .called(self.server, self.outcome, self.started.elapsed());
    }
}

/// A call to a server, until it is answered: dropped unanswered, it tells the
/// server that nobody waits for the answer any more.
struct Abandoned {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    /// Where the notice is sent from.
    tasks: tokio_util::task::TaskTracker,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let cancelled = CancelledNotificationParam::new(
            Some(id),
            Some("the gateway's client no longer waits for the answer".into()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let notify = async move {
                let _ = peer.notify_cancelled(cancelled).await;
            };
            self.tasks.spawn_on(notify, &runtime);
        }
    }
}
