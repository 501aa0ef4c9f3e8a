//! Tasks through the gateway (docs/design.md §14, "Tasks"): the tasks extension
//! of 2026-07-28 (SEP-2663, `io.modelcontextprotocol/tasks`). A server that
//! answers a client's `tools/call` with a task names it by its own `taskId`; the
//! client sees it as a handle that also names the server and the generation that
//! created it, `"<server index>.<generation>.<server's taskId>"`, so that
//! `tasks/get`, `tasks/update` and `tasks/cancel` go back to that server with
//! the server's own id, and only while that generation runs.

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, ErrorData, GetTaskParams, GetTaskRequest,
    GetTaskResult, RequestMetaObject, ServerResult, TASKS_EXTENSION_ID, UpdateTaskParams,
    UpdateTaskRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer, ServiceError};
use serde_json::json;

use crate::lifecycle::Generation;

/// A client's handle of a server's task, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Handle {
    /// The server's index in the fleet.
    pub(super) server: usize,
    /// The generation that created the task.
    pub(super) generation: Generation,
    /// The server's own `taskId`.
    pub(super) task: String,
}

impl Handle {
    /// The `taskId` the client sees.
    pub(super) fn encode(&self) -> String {
        format!("{}.{}.{}", self.server, self.generation, self.task)
    }

    /// The handle a client sent, or `-32602` naming it when the gateway never
    /// handed it out in that form.
    pub(super) fn decode(handle: &str) -> Result<Handle, ErrorData> {
        let mut parts = handle.splitn(3, '.');
        let server = parts.next().and_then(|s| s.parse::<usize>().ok());
        let generation = parts.next().and_then(|g| g.parse::<Generation>().ok());
        match (server, generation, parts.next()) {
            (Some(server), Some(generation), Some(task)) if !task.is_empty() => Ok(Handle {
                server,
                generation,
                task: task.to_owned(),
            }),
            _ => Err(unknown(handle)),
        }
    }
}

/// The error of a task handle the gateway does not know.
pub(super) fn unknown(handle: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown task `{handle}`: the gateway hands out no such task id"),
        Some(json!({ "taskId": handle })),
    )
}

/// The error of a task whose generation has ended (its server ended it, or
/// was restarted): the task ended with it.
pub(super) fn ended(handle: &str, server: &str, of: &Handle, running: Option<Generation>) -> ErrorData {
    let now = match running {
        Some(g) => format!("generation {g} runs now"),
        None => "the server is not running".to_owned(),
    };
    ErrorData::invalid_params(
        format!(
            "task `{handle}` belongs to generation {} of server `{server}`, which has ended ({now}); the task ended with it",
            of.generation
        ),
        Some(json!({
            "taskId": handle,
            "server": server,
            "generation": of.generation,
            "running": running,
        })),
    )
}

/// Whether the client of `context` declared the tasks extension in its
/// request's capabilities (2026-07-28).
pub(super) fn client_declares(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// The options of a request to a server on behalf of the client of `context`:
/// to a server of the 2026-07-28 era, the request carries the client's own
/// capabilities (those of this request from a client of that era, those it
/// declared at `initialize` from a legacy one), so that the server asks only
/// for what the client can give, and may answer with a task when the client
/// declares the tasks extension; and the request's `logLevel`, if it has one.
/// A legacy server gets no such `_meta`.
pub(super) fn options(context: &RequestContext<RoleServer>, peer: &Peer<RoleClient>) -> PeerRequestOptions {
    let modern_server = peer
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize());
    if !modern_server {
        return PeerRequestOptions::no_options();
    }
    let declared = context
        .meta
        .client_capabilities()
        .or_else(|| context.peer.peer_info().map(|info| info.capabilities.clone()));
    let mut meta = RequestMetaObject::default();
    if let Some(capabilities) = declared {
        meta.set_client_capabilities(capabilities);
    }
    // A 2026-07-28 client's `logLevel` for this request, passed on.
    if let Some(level) = context.meta.log_level() {
        meta.set_log_level(level);
    }
    PeerRequestOptions::no_options().with_meta(meta)
}

/// The id of the extension, as capabilities name it.
pub(super) const EXTENSION: &str = TASKS_EXTENSION_ID;

/// One of `tasks/get`, `tasks/update`, `tasks/cancel`, with the server's own id.
pub(super) enum Method {
    Get(GetTaskParams),
    Update(UpdateTaskParams),
    Cancel(CancelTaskParams),
}

/// Sends `method` (its `taskId` already the server's) to the server of
/// `handle`'s generation; the task of `tasks/get`, its `taskId` mapped back to
/// `handle` (`None`: the acknowledgement of the others).
pub(super) async fn send(
    peer: &Peer<RoleClient>,
    options: PeerRequestOptions,
    handle: &str,
    method: Method,
) -> Result<Option<GetTaskResult>, ServiceError> {
    let (request, get) = match method {
        Method::Get(p) => (ClientRequest::GetTaskRequest(GetTaskRequest::new(p)), true),
        Method::Update(p) => (ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(p)), false),
        Method::Cancel(p) => (ClientRequest::CancelTaskRequest(CancelTaskRequest::new(p)), false),
    };
    let answer = peer
        .send_request_with_option(request, options)
        .await?
        .await_response()
        .await?;
    match (get, answer) {
        (true, ServerResult::GetTaskResult(mut result)) => {
            result.task.task.task_id = handle.to_owned();
            Ok(Some(result))
        }
        (false, _) => Ok(None),
        (true, _) => Err(ServiceError::UnexpectedResponse),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_names_server_generation_and_the_servers_own_id() {
        let handle = Handle {
            server: 3,
            generation: 7,
            task: "abc.def-1".into(),
        };
        assert_eq!(handle.encode(), "3.7.abc.def-1");
        assert_eq!(Handle::decode("3.7.abc.def-1").unwrap(), handle);
    }

    #[test]
    fn a_handle_the_gateway_never_gave_is_invalid_params_naming_it() {
        for forged in ["", "abc", "1", "1.2", "1.2.", "x.2.t", "1.y.t", "-1.2.t"] {
            let e = Handle::decode(forged).unwrap_err();
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{forged}");
            assert!(e.message.contains(&format!("`{forged}`")), "{}", e.message);
        }
    }
}
