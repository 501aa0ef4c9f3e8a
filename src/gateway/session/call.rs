//! A client's `tools/call` through the gateway: routed to the server that
//! offers the tool, sent to its running generation, the input a server of the
//! 2026-07-28 era asks for, and the metrics and cancellation of the call.

use super::*;

impl ClientSession {
    /// A `tools/call`: routed to the server that offers the tool, sent to its
    /// running generation (started first if need be), and answered (G2, G4).
    pub(super) async fn route_call(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        span: &mut crate::trace::Call,
    ) -> Result<CallToolResponse, ErrorData> {
        let catalog = self.gateway.tools(&self.scope).await;
        let Some(route) = catalog.1.route(&request.name).cloned() else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        };
        let server = self.server_name(route.server);
        span.server(&server);
        // Counted when it ends, however it ends (dropped: cancelled).
        let mut meter = CallMeter {
            gateway: &self.gateway,
            server: &server,
            started: std::time::Instant::now(),
            outcome: CallOutcome::Cancelled,
        };
        let (generation, peer) = self.running(route.server).await.inspect_err(|_| {
            meter.outcome = CallOutcome::Failed;
        })?;
        span.generation(generation);
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
        let mut rounds = 0;
        let mut result = loop {
            match response {
                ServerResult::CallToolResult(result) => break result,
                ServerResult::EmptyResult(_) => break CallToolResult::default(),
                ServerResult::InputRequiredResult(asked) if modern_client => {
                    meter.outcome = CallOutcome::Ok;
                    return Ok(CallToolResponse::InputRequired(asked));
                }
                ServerResult::InputRequiredResult(asked) if rounds < INPUT_ROUNDS => {
                    rounds += 1;
                    let requests = asked.input_requests.unwrap_or_default();
                    let answers = ask_for_input(&context, &server, requests).await?;
                    let mut again = retry.clone();
                    again.input_responses = Some(answers);
                    again.request_state = asked.request_state;
                    let sent = async {
                        abandoned
                            .peer
                            .send_request_with_option(
                                ClientRequest::CallToolRequest(CallToolRequest::new(again)),
                                crate::gateway::tasks::options(&context, &abandoned.peer),
                            )
                            .await?
                            .await_response()
                            .await
                    };
                    response = tokio::select! {
                        r = sent => r.map_err(|e| failed(&server, generation, e))?,
                        _ = context.ct.cancelled() => {
                            return Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None));
                        }
                    };
                    if let Some(progress) = &progress_route {
                        progress.flushed().await;
                    }
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
                ServerResult::InputRequiredResult(_) => {
                    return Err(ErrorData::internal_error(
                        format!(
                            "server `{server}` still asked for input after {INPUT_ROUNDS} rounds of answers"
                        ),
                        None,
                    ));
                }
                _ => {
                    return Err(failed(
                        &server,
                        generation,
                        ServiceError::UnexpectedResponse,
                    ));
                }
            }
        };
        meter.outcome = if result.is_error == Some(true) {
            CallOutcome::Error
        } else {
            CallOutcome::Ok
        };
        result.result_type = Some(ResultType::COMPLETE);
        if self.gateway.meta() {
            let meta = result.meta.get_or_insert_with(Default::default);
            meta.insert("mcpfleet/server".into(), json!(server));
            meta.insert("mcpfleet/generation".into(), json!(generation));
        }
        Ok(CallToolResponse::Complete(result))
    }
}

/// How many times a call is sent again with a legacy client's answers before
/// the gateway gives up on a server that keeps asking for input.
const INPUT_ROUNDS: usize = 10;

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
