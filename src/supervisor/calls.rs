//! `tools` and `call`: MCP requests made through a server's running session. The
//! authority only hands out the session's peer; the request itself runs outside it,
//! so a long tool call never holds up a `down`, and a teardown that closes the
//! session makes the call fail at once instead of hanging.

use std::time::Duration;

use serde_json::{Value, json};

use super::Shared;
use crate::host::{self, Unnamed};
use crate::lifecycle::authority::{CallOptions, Handle};
use crate::lifecycle::state::Intent;
use crate::output::exit::Code;
use crate::output::report::{SCHEMA_VERSION, ServerReport};
use crate::process::session::{self, SessionError};
use crate::protocol::Response;

/// How long a tool call may take unless the caller says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn doc(command: &str, code: Code, body: Value) -> Response {
    let mut report = json!({
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "exit_code": code.as_i32(),
    });
    if let (Some(r), Some(b)) = (report.as_object_mut(), body.as_object()) {
        r.extend(b.clone());
    }
    Response::Reply { report }
}

fn failure(command: &str, code: Code, server: &str, kind: &str, message: String) -> Response {
    doc(
        command,
        code,
        json!({"server": server, "error": {"kind": kind, "message": message}}),
    )
}

/// Starts `handle` if it is not running and returns its peer, or the response that
/// says why it could not be started.
async fn ensure_running(
    command: &str,
    handle: &Handle,
    options: CallOptions,
) -> Result<(u64, rmcp::service::Peer<rmcp::service::RoleClient>), Response> {
    if let Ok(Some(p)) = handle.peer().await {
        return Ok(p);
    }
    let started = handle.request(Intent::Start, options).await;
    let line = ServerReport::of_reply(handle.name(), started, Intent::Start, false);
    if line.exit_code != 0 {
        return Err(doc(
            command,
            Code::StartFailed.max(Code::from_i32(line.exit_code)),
            json!({"servers": [line]}),
        ));
    }
    match handle.peer().await {
        Ok(Some(p)) => Ok(p),
        _ => Err(failure(
            command,
            Code::StartFailed,
            handle.name(),
            "connect_failed",
            "the server stopped right after it started".into(),
        )),
    }
}

/// The authority of the server named `name`, or the usage error that it is none.
fn handle(shared: &Shared, name: &str) -> Result<Handle, Response> {
    match shared.select(&[name.to_owned()], Unnamed::All) {
        Ok(mut handles) => Ok(handles.remove(0)),
        Err(message) => Err(Response::Error { message }),
    }
}

pub async fn tools(shared: &Shared, server: Option<String>, options: CallOptions) -> Response {
    let handles: Vec<Handle> = match &server {
        Some(name) => match handle(shared, name) {
            Ok(h) => vec![h],
            Err(response) => return response,
        },
        None => shared.handles.clone(),
    };
    // Peers are taken in fleet order; the lists are then asked for all at once.
    let mut peers = Vec::new();
    for handle in &handles {
        let peer = if server.is_some() {
            match ensure_running("tools", handle, options).await {
                Ok(p) => Some(p),
                Err(response) => return response,
            }
        } else {
            handle.peer().await.ok().flatten()
        };
        if let Some((generation, peer)) = peer {
            peers.push((handle.name().to_owned(), generation, peer));
        }
    }
    let listings = peers.iter().map(|(_, _, peer)| {
        let peer = peer.clone();
        async move {
            let listed =
                tokio::time::timeout(DEFAULT_CALL_TIMEOUT, session::list_tools(&peer)).await;
            listed.unwrap_or_else(|_| {
                Err(SessionError::Protocol(
                    "tools/list did not answer in time".into(),
                ))
            })
        }
    });
    let lists = host::join_in_order(listings, |_| {}).await;
    let mut servers = Vec::new();
    for ((name, generation, _), listed) in peers.iter().zip(lists) {
        let listed =
            listed.unwrap_or_else(|| Err(SessionError::Protocol("tools/list was lost".into())));
        match listed {
            Ok(tools) => servers.push(json!({
                "name": name,
                "generation": generation,
                "tools": tools.iter().map(|t| json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })).collect::<Vec<_>>(),
            })),
            Err(e) => {
                let kind = match e {
                    SessionError::Lost(_) => "session_lost",
                    SessionError::Unauthorized(_) => "unauthorized",
                    _ => "protocol",
                };
                return failure(
                    "tools",
                    Code::StartFailed,
                    name,
                    kind,
                    format!("tools/list failed: {e}"),
                );
            }
        }
    }
    doc("tools", Code::Ok, json!({"servers": servers}))
}

pub async fn call(
    shared: &Shared,
    server: &str,
    tool: &str,
    arguments: Option<serde_json::Map<String, Value>>,
    timeout_ms: Option<u64>,
    options: CallOptions,
) -> Response {
    let handle = match handle(shared, server) {
        Ok(h) => h,
        Err(response) => return response,
    };
    let (generation, peer) = match ensure_running("call", &handle, options).await {
        Ok(p) => p,
        Err(response) => return response,
    };
    let limit = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis);
    match tokio::time::timeout(limit, session::call_tool(&peer, tool, arguments)).await {
        Err(_) => failure(
            "call",
            Code::StartFailed,
            server,
            "call_timeout",
            format!(
                "`{tool}` did not answer within {}ms (the request was cancelled)",
                limit.as_millis()
            ),
        ),
        Ok(Err(SessionError::Closed(m))) => failure(
            "call",
            Code::StartFailed,
            server,
            "connect_failed",
            format!("the session of generation {generation} closed during the call: {m}"),
        ),
        Ok(Err(SessionError::Protocol(m))) => {
            failure("call", Code::StartFailed, server, "protocol", m)
        }
        Ok(Err(SessionError::Lost(m))) => failure(
            "call",
            Code::StartFailed,
            server,
            "session_lost",
            format!(
                "{m}; the server may have restarted. Generation {generation} has ended; a new \
                 session starts with the next call, `mcpfleet reconnect {server}` or the \
                 server's restart policy (`restart: on-failure`)"
            ),
        ),
        Ok(Err(SessionError::Unauthorized(m))) => {
            failure("call", Code::StartFailed, server, "unauthorized", m)
        }
        Ok(Err(SessionError::Http(m))) => failure(
            "call",
            Code::StartFailed,
            server,
            "connect_failed",
            format!("the call to generation {generation} failed: {m}"),
        ),
        Ok(Ok(result)) => {
            let is_error = result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let code = if is_error {
                Code::StartFailed
            } else {
                Code::Ok
            };
            doc(
                "call",
                code,
                json!({"server": server, "generation": generation, "tool": tool, "result": result}),
            )
        }
    }
}
