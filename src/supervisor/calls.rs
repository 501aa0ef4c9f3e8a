//! `tools` and `call`: MCP requests made through a server's running session. The
//! authority only hands out the session's peer; the request itself runs outside it,
//! so a long tool call never holds up a `down`, and a teardown that closes the
//! session makes the call fail at once instead of hanging.

use std::time::Duration;

use serde_json::Value;

use super::answer::{Answer, Response};
use super::handle::FleetHandle;
use crate::errors::{Detail, chain};
use crate::host::{self, Unnamed};
use crate::lifecycle::authority::{CallOptions, Handle};
use crate::lifecycle::error::ErrorKind;
use crate::lifecycle::state::Intent;
use crate::metrics::CallOutcome;
use crate::output::calls::{CallBody, CallReport, ServerTools, ToolReport};
use crate::output::exit::Code;
use crate::output::report::{FailureKind, ServerReport};
use crate::process::session::{self, SessionError};

/// How long a tool call may take unless the caller says otherwise.
pub(super) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn reply(report: CallReport) -> Response {
    Response::Reply {
        report: Answer::Call(report),
    }
}

/// A request that failed on `server`'s session, with a server's error kind.
fn failed(command: &str, server: &str, kind: ErrorKind, message: String) -> Response {
    let kind = FailureKind::Server(kind);
    reply(CallReport::failed(command, server, kind, message))
}

/// Starts `handle` if it is not running and returns its peer ("start, then
/// call", `host::start_then_reach`), or the response that says why it could
/// not be reached.
async fn ensure_running(
    command: &str,
    handle: &Handle,
    options: CallOptions,
) -> Result<(u64, rmcp::service::Peer<rmcp::service::RoleClient>), Response> {
    let unreached = match host::start_then_reach(handle, options).await {
        Ok(reach) => return Ok((reach.generation, reach.session.into_peer())),
        Err(unreached) => unreached,
    };
    match unreached.start() {
        Ok(started) => {
            let line = ServerReport::of_reply(handle.name(), *started, Intent::Start, false);
            let code = Code::StartFailed.max(Code::from_i32(line.exit_code));
            let body = CallBody::NotStarted {
                servers: vec![line],
            };
            Err(reply(CallReport::new(command, code, body)))
        }
        Err(e) => Err(failed(command, handle.name(), e.kind, e.message)),
    }
}

/// The authority of the server named `name`, or the usage error that it is none.
fn named(fleet: &FleetHandle, name: &str) -> Result<Handle, String> {
    fleet
        .select(&[name.to_owned()], Unnamed::All)
        .map(|mut handles| handles.remove(0))
}

pub(super) async fn tools(fleet: &FleetHandle, server: Option<String>, options: CallOptions) -> Response {
    let handles: Vec<Handle> = match &server {
        Some(name) => match named(fleet, name) {
            Ok(h) => vec![h],
            Err(message) => return Response::Error { message },
        },
        None => fleet.handles(),
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
            handle
                .peer()
                .await
                .ok()
                .flatten()
                .map(|reach| (reach.generation, reach.session.into_peer()))
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
                Err(SessionError::Protocol(Detail::words(
                    "tools/list did not answer in time",
                )))
            })
        }
    });
    let lists = host::join_in_order(listings, |_| {}).await;
    let mut servers = Vec::new();
    for ((name, generation, _), listed) in peers.iter().zip(lists) {
        let listed =
            listed.unwrap_or_else(|| Err(SessionError::Protocol(Detail::words("tools/list was lost"))));
        match listed {
            Ok(tools) => servers.push(ServerTools {
                name: name.clone(),
                generation: *generation,
                tools: tools
                    .iter()
                    .map(|t| ToolReport {
                        name: t.name.to_string(),
                        description: t.description.as_ref().map(|d| d.to_string()),
                        input_schema: (*t.input_schema).clone(),
                    })
                    .collect(),
            }),
            Err(e) => {
                let kind = match e {
                    SessionError::Lost(_) => ErrorKind::SessionLost,
                    SessionError::Unauthorized(_) => ErrorKind::Unauthorized,
                    SessionError::AuthRequired(_) => ErrorKind::AuthRequired,
                    _ => ErrorKind::Protocol,
                };
                return failed("tools", name, kind, format!("tools/list failed: {}", chain(&e)));
            }
        }
    }
    reply(CallReport::new(
        "tools",
        Code::Ok,
        CallBody::Tools { servers },
    ))
}

pub(super) async fn call(
    fleet: &FleetHandle,
    server: &str,
    tool: &str,
    arguments: Option<serde_json::Map<String, Value>>,
    timeout_ms: Option<u64>,
    options: CallOptions,
) -> Response {
    let handle = match named(fleet, server) {
        Ok(h) => h,
        Err(message) => return Response::Error { message },
    };
    let started = std::time::Instant::now();
    let (response, outcome) = call_once(&handle, tool, arguments, timeout_ms, options).await;
    fleet
        .fixed
        .events
        .metrics
        .called(server, outcome, started.elapsed());
    response
}

/// One call to a server known to the supervisor, and how it ended for the metrics.
async fn call_once(
    handle: &Handle,
    tool: &str,
    arguments: Option<serde_json::Map<String, Value>>,
    timeout_ms: Option<u64>,
    options: CallOptions,
) -> (Response, CallOutcome) {
    let server = handle.name();
    let (generation, peer) = match ensure_running("call", handle, options).await {
        Ok(p) => p,
        Err(response) => return (response, CallOutcome::Failed),
    };
    let limit = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis);
    let response =
        match tokio::time::timeout(limit, session::call_tool(&peer, tool, arguments)).await {
            Err(_) => reply(CallReport::failed(
                "call",
                server,
                FailureKind::CallTimeout,
                format!(
                    "`{tool}` did not answer within {}ms (the request was cancelled)",
                    limit.as_millis()
                ),
            )),
            Ok(Err(SessionError::Closed(m))) => failed(
                "call",
                server,
                ErrorKind::ConnectFailed,
                format!(
                    "the session of generation {generation} closed during the call: {}",
                    m.text()
                ),
            ),
            Ok(Err(SessionError::Protocol(m))) => {
                failed("call", server, ErrorKind::Protocol, m.text())
            }
            Ok(Err(SessionError::Lost(m))) => failed(
                "call",
                server,
                ErrorKind::SessionLost,
                format!(
                    "{m}; the server may have restarted. Generation {generation} has ended; a new \
                 session starts with the next call, `mcpfleet reconnect {server}` or the \
                 server's restart policy (`restart: on-failure`)"
                ),
            ),
            Ok(Err(SessionError::Unauthorized(m))) => {
                failed("call", server, ErrorKind::Unauthorized, m)
            }
            Ok(Err(SessionError::AuthRequired(m))) => {
                failed("call", server, ErrorKind::AuthRequired, m)
            }
            Ok(Err(SessionError::Http(m))) => failed(
                "call",
                server,
                ErrorKind::ConnectFailed,
                format!("the call to generation {generation} failed: {m}"),
            ),
            Ok(Ok(result)) => {
                let is_error = result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let (code, outcome) = if is_error {
                    (Code::StartFailed, CallOutcome::Error)
                } else {
                    (Code::Ok, CallOutcome::Ok)
                };
                let body = CallBody::Result {
                    server: server.to_owned(),
                    generation,
                    tool: tool.to_owned(),
                    result,
                };
                return (reply(CallReport::new("call", code, body)), outcome);
            }
        };
    (response, CallOutcome::Failed)
}
