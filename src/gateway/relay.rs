//! The requests a server makes of its client (`roots/list`,
//! `sampling/createMessage`, `elicitation/create`), relayed to the client whose
//! call caused them (docs/design.md §14, "Requests of servers").
//!
//! Over streamable HTTP a server's request arrives on the response stream of our
//! call to it, which names the call exactly. Over stdio nothing links the two:
//! the request goes to the client of the most recent call in flight to that
//! server. A request with no call in flight, or whose client did not declare the
//! capability, is answered here: `roots/list` with no roots (what the server is
//! told when nobody shares any), the others with an error that says why.
//!
//! The 2026 protocol deprecates roots and sampling (rmcp marks their types so);
//! every version the gateway and its servers speak still has them.
#![expect(deprecated, reason = "roots and sampling are deprecated by the 2026 protocol but spoken by every version we serve")]

use rmcp::model::{CancelledNotificationParam, GetExtensions, GetMeta};
use rmcp::model::{
    ClientResult, CustomRequest, ElicitRequestParams, ErrorCode, ErrorData, ListRootsResult,
    ServerRequest,
};
use rmcp::service::{OriginatingRequestId, PeerRequestOptions};
use serde_json::json;

use super::desk::Caller;
use super::journal::Journal;
use crate::process::notice::Asked;

/// The capability a client that declared `caps` lacks to answer `request`.
fn missing(
    caps: &rmcp::model::ClientCapabilities,
    request: &ServerRequest,
) -> Option<&'static str> {
    match request {
        ServerRequest::ListRootsRequest(_) => caps.roots.is_none().then_some("roots"),
        ServerRequest::CreateMessageRequest(_) => caps.sampling.is_none().then_some("sampling"),
        ServerRequest::ElicitRequest(r) => match &r.params {
            ElicitRequestParams::FormElicitationParams { .. } => {
                caps.elicitation.is_none().then_some("elicitation")
            }
            ElicitRequestParams::UrlElicitationParams { .. } => caps
                .elicitation
                .as_ref()
                .is_none_or(|e| e.url.is_none())
                .then_some("elicitation.url"),
            _ => Some("an elicitation mode the gateway does not know"),
        },
        ServerRequest::PingRequest(_) => None,
        _ => Some("a method the gateway does not relay"),
    }
}

/// A request of a server's that the gateway answers with an error, logged.
fn refused(journal: &Journal, server: &str, method: &str, why: String) -> ErrorData {
    journal.line(format_args!(
        "server {server} asked {method}: refused ({why})"
    ));
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("server `{server}` asked `{method}`, which no client can answer: {why}"),
        Some(json!({ "server": server, "method": method })),
    )
}

/// Answers server `server`'s request of its client: relayed to `caller`, the
/// client whose call caused it, or answered here when there is none.
pub(super) async fn relay(
    journal: &Journal,
    caller: Option<Caller>,
    server: &str,
    asked: Asked,
) -> Result<ClientResult, ErrorData> {
    let method = method_of(&asked.request);
    let roots = matches!(asked.request, ServerRequest::ListRootsRequest(_));
    let Some(Caller {
        client,
        theirs,
        session,
        inlet,
    }) = caller
    else {
        if roots {
            journal.line(format_args!(
                "server {server} asked {method}: answered with no roots (no client's call to it is in flight)"
            ));
            return Ok(ClientResult::ListRootsResult(ListRootsResult::default()));
        }
        return Err(refused(
            journal,
            server,
            method,
            "no client's call to it is in flight".into(),
        ));
    };
    // A 2026-07-28 client declares its capabilities in each request's `_meta`.
    let caps = match &inlet {
        Some(inlet) => inlet.caps.clone(),
        None => client
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default(),
    };
    if let Some(capability) = missing(&caps, &asked.request) {
        if roots {
            journal.line(format_args!(
                "server {server} asked {method}: answered with no roots (session {session} did not declare `roots`)"
            ));
            return Ok(ClientResult::ListRootsResult(ListRootsResult::default()));
        }
        return Err(refused(
            journal,
            server,
            method,
            format!("the client whose call it serves did not declare `{capability}`"),
        ));
    }
    // A 2026-07-28 client cannot be sent requests: its call is answered with
    // an input-required result that carries this one (docs/design.md §14,
    // "Continuations").
    if let Some(inlet) = inlet {
        journal.line(format_args!(
            "server {server} asked {method}: put to session {session}'s call as an input-required result"
        ));
        let params = match asked.written {
            Some(params) => Some(serde_json::Value::Object(params)),
            None => serde_json::to_value(&asked.request)
                .ok()
                .and_then(|mut r| r.get_mut("params").map(serde_json::Value::take)),
        };
        return inlet.ask(server, method, params, &asked.cancelled).await;
    }
    journal.line(format_args!(
        "server {server} asked {method}: relayed to session {session}"
    ));
    // As the server wrote it, where its bytes were seen (docs/design.md §14,
    // "Values as written"): rmcp's reading changes numbers.
    // rmcp gives the request a progress token of its own; the door takes it
    // out again when the server's request had none.
    let untokened = match &asked.written {
        Some(params) => params
            .get("_meta")
            .and_then(serde_json::Value::as_object)
            .is_none_or(|meta| !meta.contains_key("progressToken")),
        None => asked.request.get_meta().get_progress_token().is_none(),
    };
    let mut request = match asked.written {
        Some(params) => ServerRequest::CustomRequest(CustomRequest::new(
            method,
            Some(serde_json::Value::Object(params)),
        )),
        None => asked.request,
    };
    // Over HTTP, on the response stream of the client's call.
    request
        .extensions_mut()
        .insert(OriginatingRequestId(theirs));
    if untokened {
        request.extensions_mut().insert(Untokened);
    }
    // rmcp marks a request sent while one is being handled as caused by that
    // one (a task-local, which wins over the mark above); here that is the
    // server's request to us, which the client's session does not know, and
    // the request would leave the call's stream. A task of its own has no such
    // mark.
    let sender = client.clone();
    let sent = tokio::spawn(async move {
        sender
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
    })
    .await
    .map_err(|e| gone(server, method, &e.to_string()))?;
    let handle = sent.map_err(|e| gone(server, method, &e.to_string()))?;
    let id = handle.id.clone();
    tokio::select! {
        answer = handle.await_response() => answer.map_err(|e| match e {
            rmcp::service::ServiceError::McpError(e) => e,
            other => gone(server, method, &other.to_string()),
        }),
        _ = asked.cancelled.cancelled() => {
            let why = format!("server `{server}` cancelled its request");
            let _ = client
                .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(why.clone())))
                .await;
            Err(ErrorData::internal_error(why, None))
        }
    }
}

fn method_of(request: &ServerRequest) -> &'static str {
    match request {
        ServerRequest::PingRequest(_) => "ping",
        ServerRequest::CreateMessageRequest(_) => "sampling/createMessage",
        ServerRequest::ListRootsRequest(_) => "roots/list",
        ServerRequest::ElicitRequest(_) => "elicitation/create",
        _ => "a method the gateway does not relay",
    }
}

/// The client went away before it answered.
fn gone(server: &str, method: &str, why: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the client asked to answer `{method}` for server `{server}` did not answer: {why}"
        ),
        None,
    )
}

/// Marks a relayed request of a server's that carried no progress token: rmcp
/// gives every request it sends one (`_meta.progressToken`), which the door
/// takes out again so that the client gets the request as its server wrote it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Untokened;
