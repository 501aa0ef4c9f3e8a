//! The HTTP door's fast lane (docs/design.md §14, "The fast lane"): a plain
//! `tools/call` of the 2026-07-28 era taken off its POST before rmcp reads it,
//! sent to the running server's [`Link`] as bytes, and answered with one JSON
//! body written from the server's answer as it came (or, when the server sends
//! progress first, an event stream of the progress under the client's token
//! and then the answer). No rmcp service,
//! transport or task is made for it, and neither the arguments nor the result
//! are decoded into rmcp's types.
//!
//! It takes only what it can tell is valid and plain:
//! - the request: `Content-Type: application/json`, an `Accept` that names
//!   `application/json` and `text/event-stream` plainly, no `Origin` (a
//!   browser's requests take the long way), a `Host` rmcp allows,
//!   `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method: tools/call` and
//!   `Mcp-Name` equal to the tool's name (given once each, plain), and no
//!   `Mcp-Param-*` header;
//! - the body: a JSON-RPC request whose only members are `jsonrpc`, `id`,
//!   `method` and `params`; parameters with only `name`, object `arguments`
//!   and `_meta`; that `_meta` naming 2026-07-28 with the client's
//!   capabilities, none of sampling, elicitation and roots among them, and no
//!   `logLevel`;
//! - the tool: its route known from a catalog that is still current, no
//!   `x-mcp-header` in its schema, on a stdio server that runs in the legacy
//!   era (it has a [`Link`]).
//!
//! Anything else goes to rmcp and the long way (`session.rs`), unchanged: it
//! refuses what is invalid, starts servers, relays progress and log messages.
//! A legacy session's calls always take the long way: their answers come on
//! the session's resumable event streams. Both ways keep the same rules: the
//! token is checked first (`http.rs`), the call never waits in the
//! authority's queue (G2), is answered when its server's session ends (G4), is
//! counted and traced, a server's request during it is answered as for a
//! client that declared nothing, and a client that goes away cancels it at
//! its server. The answer is the one rmcp gives a request of that era: the
//! result with `resultType`, an error with the era's HTTP status.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use rmcp::model::{ClientCapabilities, ErrorCode, ProtocolVersion, RequestId};
use rmcp::service::{Peer, RoleServer};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::aggregate::Gateway;
use super::pass::{Answering, CallParams, Incoming, era_fits, push_call_params, push_progress};
use crate::process::session::{Answer, Link, Pending};

/// An answer's body, as the door's (`http.rs`) are.
type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// Why a server is told that a fast-lane call was cancelled.
const GONE: &str = "the gateway's client no longer waits for the answer";

/// A POST the fast lane may take: its headers and body passed the checks that
/// need nothing but them (see the module comment).
pub(super) struct Call<'a> {
    id: RequestId,
    params: CallParams<'a>,
    /// The progress token the client gave, if it gave one.
    token: Option<serde_json::Value>,
}

impl<'a> Call<'a> {
    /// The call in a POST's `headers` and `body`, if the fast lane may take it
    /// as far as they tell; `allowed_hosts` is rmcp's list (empty: any).
    pub(super) fn read(headers: &'a HeaderMap, body: &'a [u8], allowed_hosts: &[String]) -> Option<Call<'a>> {
        memchr::memmem::find(body, b"\"tools/call\"")?;
        if !plain_json(headers) || headers.contains_key(header::ORIGIN) || !host_allowed(headers, allowed_hosts) {
            return None;
        }
        let message: Incoming = serde_json::from_slice(body).ok()?;
        if message.jsonrpc != "2.0" || message.method != "tools/call" {
            return None;
        }
        let id = message.id?;
        let params: CallParams = serde_json::from_str(message.params?.get()).ok()?;
        if params.arguments.is_some_and(|a| !a.get().starts_with('{')) {
            return None;
        }
        let meta = params.meta.as_ref();
        if one(headers, "mcp-protocol-version") != Some(ProtocolVersion::V_2026_07_28.as_str())
            || !standard_headers(headers, &params.name)
            || !can_not_be_asked(&meta_capabilities(meta)?)
        {
            return None;
        }
        let mut call = Call {
            id,
            params,
            token: None,
        };
        if !era_fits(true, call.params.meta.as_mut()) {
            return None;
        }
        // The client's progress token is replaced by one of ours, unique to the
        // server, under which its progress comes back to this call.
        call.token = call.params.meta.as_mut().and_then(|m| m.remove("progressToken"));
        Some(call)
    }

    /// Sends the call to its server and waits for the answer: `None`, with
    /// nothing sent, when the call cannot take the fast lane after all (see
    /// the module comment). `nobody` is the client its server's requests
    /// meanwhile are answered for ([`nobody`]).
    pub(super) async fn answer(
        self,
        gateway: &Arc<Gateway>,
        nobody: &Peer<RoleServer>,
        shutdown: &CancellationToken,
    ) -> Option<Response<Body>> {
        let scope = None;
        let route = gateway.route_now(&scope, &self.params.name)?;
        if gateway.tool_now(&scope, &self.params.name).is_none_or(|t| names_headers(&t)) {
            return None;
        }
        let (server, reach) = gateway.reach_now(route.server)?;
        let link = reach.session.link()?.clone();
        let generation = reach.generation;
        let mut span = crate::trace::Call::begin(&self.params.name);
        span.server(&server);
        span.generation(generation);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut waiter = Waiter {
            call: Answering {
                gateway: gateway.clone(),
                client_id: self.id,
                client_token: self.token,
                server,
                generation,
                started: Instant::now(),
                span,
                asking: None,
            },
            tx,
        };
        let mut params = self.params;
        let made = link.request("tools/call", |ours| {
            let token = Link::token(ours);
            if let Some(meta) = params.meta.as_mut()
                && waiter.call.client_token.is_some()
            {
                meta.insert("progressToken".into(), token.clone().into());
            }
            // The server's requests of its client during the call are answered
            // as for this client.
            waiter.call.asking = Some(gateway.asking(
                route.server,
                RequestId::String(token.into()),
                nobody.clone(),
                waiter.call.client_id.clone(),
                0,
                None,
            ));
            // Written straight into the line to the server: the arguments are
            // copied once, as they came.
            let write_params = move |q: &mut Vec<u8>| {
                push_call_params(q, &route.name, params.arguments, params.meta.as_ref());
            };
            (write_params, Box::new(waiter) as crate::process::session::Waiter)
        })?;
        // Dropped before the answer (the client went away): the server is told.
        let mut pending = Abandon {
            link,
            id: Some(made),
        };
        let first = tokio::select! {
            first = rx.recv() => first,
            () = shutdown.cancelled() => None,
        };
        let response = match first {
            Some(Out::Answer(reply)) => {
                pending.id = None;
                let mut response = Response::new(Full::new(Bytes::from(reply.body)).boxed());
                *response.status_mut() = reply.status;
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                response
            }
            // The server's progress came first: an event stream of it, the
            // answer last, as rmcp answers.
            Some(Out::Progress(line)) => {
                let events = Events {
                    first: Some(line),
                    rx,
                    pending,
                };
                let mut response = Response::new(BodyExt::boxed(events));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    http::HeaderValue::from_static("text/event-stream"),
                );
                response.headers_mut().insert(
                    header::CACHE_CONTROL,
                    http::HeaderValue::from_static("no-cache"),
                );
                // As rmcp's streams say: a proxy must not hold events back.
                response.headers_mut().insert(
                    "x-accel-buffering",
                    http::HeaderValue::from_static("no"),
                );
                response
            }
            None => {
                drop(pending);
                cancelled()
            }
        };
        Some(response)
    }
}

/// What the server sends for a fast-lane call, written for the client.
enum Out {
    /// A `notifications/progress` under the client's token.
    Progress(Vec<u8>),
    /// The answer.
    Answer(Reply),
}

/// The event stream of a call whose server sent progress before its answer:
/// each message as one event, the answer last. Dropped before the answer (the
/// client went away), the call is abandoned at its server.
struct Events {
    first: Option<Vec<u8>>,
    rx: mpsc::UnboundedReceiver<Out>,
    pending: Abandon,
}

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        let event = |message: Vec<u8>| {
            let mut data = Vec::with_capacity(message.len() + 8);
            data.extend_from_slice(b"data: ");
            data.extend_from_slice(&message);
            data.extend_from_slice(b"\n\n");
            Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from(data)))))
        };
        if let Some(line) = self.first.take() {
            return event(line);
        }
        if self.pending.id.is_none() {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Out::Progress(line))) => event(line),
            Poll::Ready(Some(Out::Answer(reply))) => {
                self.pending.id = None;
                event(reply.body)
            }
            Poll::Ready(None) => {
                self.pending.id = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The client a 2026-07-28 call's server's requests are answered for: one
/// that declared nothing, so the gateway answers them itself, as it does for
/// such a client on the long way. Made once per door.
pub(super) fn nobody() -> Peer<RoleServer> {
    struct Nobody;
    impl rmcp::ServerHandler for Nobody {}
    let (ours, theirs) = tokio::io::duplex(64);
    drop(theirs);
    let service = rmcp::service::serve_directly::<RoleServer, _, _, _, _>(Nobody, ours, None);
    service.peer().clone()
}

/// The answer to a call whose gateway stops before its server answered.
fn cancelled() -> Response<Body> {
    let body = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"cancelled: the gateway stops"}}"#;
    let mut response = Response::new(Full::new(Bytes::from_static(body)).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// A fast-lane call in flight at its server, until its answer: dropped
/// unanswered, the server is told that nobody waits for it.
struct Abandon {
    link: Link,
    id: Option<u64>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.link.abandon(id, GONE);
        }
    }
}

/// The answer, written for the client.
struct Reply {
    status: StatusCode,
    body: Vec<u8>,
}

/// What the server's answer to a fast-lane call needs.
struct Waiter {
    call: Answering,
    tx: mpsc::UnboundedSender<Out>,
}

impl Pending for Waiter {
    /// The server's progress, to the client under the client's own token, in
    /// the order the server wrote it and before the answer.
    fn progress(&mut self, params: &RawValue) {
        let Some(params) = self.call.progress(params) else {
            return;
        };
        let mut line = Vec::with_capacity(128);
        push_progress(&mut line, &params);
        let _ = self.tx.send(Out::Progress(line));
    }

    fn answered(mut self: Box<Self>, answer: Answer<'_>) {
        self.call.asking = None;
        let status = match &answer {
            Answer::Error(error) => modern_status(error),
            _ => StatusCode::OK,
        };
        let mut body = Vec::with_capacity(128);
        body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        let _ = serde_json::to_writer(&mut body, &self.call.client_id);
        let (outcome, is_error) = self.call.push_answer(&mut body, &answer, true);
        body.push(b'}');
        self.call.count(outcome);
        if !matches!(answer, Answer::Abandoned) {
            let _ = self.tx.send(Out::Answer(Reply { status, body }));
        }
        self.call.end(&answer, is_error);
    }
}

/// The HTTP status rmcp gives a 2026-07-28 request's error: 400 for a
/// version, capability or header the request lacks, 404 for an unknown
/// method, else 200.
fn modern_status(error: &RawValue) -> StatusCode {
    #[derive(Deserialize)]
    struct Code {
        code: i32,
    }
    match serde_json::from_str::<Code>(error.get()).map(|c| ErrorCode(c.code)) {
        Ok(
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH,
        ) => StatusCode::BAD_REQUEST,
        Ok(ErrorCode::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The client's capabilities in a 2026-07-28 request's `_meta`.
fn meta_capabilities(
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<ClientCapabilities> {
    let declared = meta?.get("io.modelcontextprotocol/clientCapabilities")?;
    ClientCapabilities::deserialize(declared).ok()
}

/// Whether a client that declared `declared` cannot be asked anything by a
/// server: no sampling, elicitation or roots.
fn can_not_be_asked(declared: &ClientCapabilities) -> bool {
    declared.sampling.is_none() && declared.elicitation.is_none() && declared.roots.is_none()
}

/// The one value of header `name`, if it is given once, as text.
fn one<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// A body of JSON, to a client that takes both JSON and event streams, as
/// rmcp requires, said plainly (no parameters, no quotes).
fn plain_json(headers: &HeaderMap) -> bool {
    let content = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !content {
        return false;
    }
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains('"') {
            return false;
        }
        for entry in value.split(',').map(str::trim) {
            json |= entry.eq_ignore_ascii_case("application/json");
            sse |= entry.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// Whether the request's `Host` is one rmcp allows (`allowed`: host names,
/// with or without a port; empty: any).
fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    if allowed.is_empty() {
        return true;
    }
    let Some(host) = one(headers, "host").and_then(|h| http::uri::Authority::try_from(h).ok()) else {
        return false;
    };
    let name = |h: &str| h.trim_matches(['[', ']']).to_ascii_lowercase();
    let given = name(host.host());
    allowed.iter().any(|entry| match http::uri::Authority::try_from(entry.trim()) {
        Ok(a) => name(a.host()) == given && a.port_u16().is_none_or(|p| host.port_u16() == Some(p)),
        Err(_) => name(entry.trim()) == given,
    })
}

/// Whether a 2026-07-28 call's standard headers are the plain ones rmcp
/// accepts for it: `Mcp-Method: tools/call` and `Mcp-Name: <name>`, once
/// each, and no `Mcp-Param-*`.
fn standard_headers(headers: &HeaderMap, name: &str) -> bool {
    one(headers, "mcp-method") == Some("tools/call")
        && one(headers, "mcp-name") == Some(name)
        && !name.starts_with("=?")
        && !headers
            .keys()
            .any(|k| k.as_str().starts_with("mcp-param-"))
}

/// Whether `tool`'s input schema asks for `Mcp-Param-*` headers anywhere.
fn names_headers(tool: &rmcp::model::Tool) -> bool {
    fn any(value: &serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(map) => map.contains_key("x-mcp-header") || map.values().any(any),
            serde_json::Value::Array(items) => items.iter().any(any),
            _ => false,
        }
    }
    tool.input_schema.contains_key("x-mcp-header") || tool.input_schema.values().any(any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    const BASE: [(&str, &str); 6] = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("host", "127.0.0.1:4000"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "echo"),
    ];

    fn hosts() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
    }

    const CALL: &str = r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"own":1}}}"#;

    /// The plain headers, each of `but` in place of the one of its name (an
    /// empty value: without it), and then `and`.
    fn with(but: &[(&str, &str)], and: &[(&str, &str)]) -> HeaderMap {
        let mut all: Vec<(&str, &str)> = BASE
            .iter()
            .map(|(k, v)| but.iter().find(|(n, _)| n == k).copied().unwrap_or((k, v)))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        all.extend_from_slice(and);
        headers(&all)
    }

    #[test]
    fn a_plain_call_is_taken_without_its_eras_keys() {
        let h = with(&[], &[]);
        let call = Call::read(&h, CALL.as_bytes(), &hosts()).expect("taken");
        assert_eq!(call.params.name, "echo");
        assert_eq!(call.params.arguments.unwrap().get(), r#"{"a":1}"#);
        // The era's own keys are not sent on to the legacy server.
        assert_eq!(serde_json::Value::Object(call.params.meta.unwrap()), serde_json::json!({"own": 1}));
        assert_eq!(call.token, None);
        // A progress token is the client's, kept for its progress.
        let tokened = CALL.replace(r#""own":1"#, r#""progressToken":"p""#);
        let call = Call::read(&h, tokened.as_bytes(), &hosts()).expect("taken");
        assert_eq!(call.token, Some(serde_json::json!("p")));
        assert!(call.params.meta.unwrap().is_empty());
        // Any host when rmcp checks none; a port on an allowed name.
        let h = with(&[("host", "example.com")], &[]);
        assert!(Call::read(&h, CALL.as_bytes(), &[]).is_some());
        let h = with(&[("host", "[::1]:80")], &[]);
        assert!(Call::read(&h, CALL.as_bytes(), &hosts()).is_some());
    }

    #[test]
    fn anything_not_plain_takes_the_long_way() {
        let hosts = hosts();
        let no = |h: HeaderMap, body: &str| {
            assert!(Call::read(&h, body.as_bytes(), &hosts).is_none(), "{h:?} {body}");
        };
        // Headers rmcp checks.
        no(with(&[], &[("origin", "http://localhost:3000")]), CALL);
        no(with(&[("host", "evil.example")], &[]), CALL);
        no(with(&[("host", "")], &[]), CALL);
        no(with(&[("accept", "application/json")], &[]), CALL);
        no(with(&[("accept", "application/json;q=0, text/event-stream")], &[]), CALL);
        no(with(&[("content-type", "text/plain")], &[]), CALL);
        no(with(&[("mcp-protocol-version", "")], &[]), CALL);
        no(with(&[("mcp-protocol-version", "2025-11-25")], &[]), CALL);
        no(with(&[("mcp-method", "")], &[]), CALL);
        no(with(&[("mcp-method", "tools/list")], &[]), CALL);
        no(with(&[], &[("mcp-method", "tools/call")]), CALL);
        no(with(&[("mcp-name", "other")], &[]), CALL);
        no(with(&[("mcp-name", "=?base64?ZWNobw==?=")], &[]), CALL);
        no(with(&[], &[("mcp-param-a", "1")]), CALL);
        // The body: not a plain call.
        no(with(&[], &[]), &CALL.replace("tools/call", "tools/list"));
        no(with(&[], &[]), &CALL.replace(r#""arguments":{"a":1}"#, r#""arguments":[1]"#));
        no(with(&[], &[]), &CALL.replace(r#""arguments""#, r#""task":{},"arguments""#));
        no(with(&[], &[]), &CALL.replace(r#""id":"x","#, ""));
        no(with(&[], &[]), &CALL.replace(r#""own":1"#, r#""io.modelcontextprotocol/logLevel":"info""#));
        no(with(&[], &[]), &CALL.replace(r#"clientCapabilities":{}"#, r#"clientCapabilities":{"sampling":{}}"#));
        no(with(&[], &[]), &CALL.replace(r#"clientCapabilities":{}"#, r#"clientCapabilities":5"#));
        no(with(&[], &[]), &CALL.replace(r#"protocolVersion":"2026-07-28""#, r#"protocolVersion":"2025-11-25""#));
        no(with(&[], &[]), r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#);
    }

    #[test]
    fn an_error_has_its_eras_status() {
        let status = |e: &str| modern_status(&RawValue::from_string(e.into()).unwrap());
        assert_eq!(status(r#"{"code":-32601,"message":"no"}"#), StatusCode::NOT_FOUND);
        assert_eq!(status(r#"{"code":-32020,"message":"no"}"#), StatusCode::BAD_REQUEST);
        assert_eq!(status(r#"{"code":-32602,"message":"no"}"#), StatusCode::OK);
        assert_eq!(status(r#"{"code":-32000,"message":"no"}"#), StatusCode::OK);
    }
}
