//! Remote servers over streamable HTTP (through rmcp's client). There is no process
//! to signal: the session is the resource. The HTTP client here wraps reqwest's and
//! watches what rmcp does not report in terms a person or the authority can use:
//!
//! - **The session's end.** Teardown ends the session with a DELETE carrying its id.
//!   rmcp sends it but only logs its result, so the DELETE is made here and its
//!   outcome recorded ([`DeleteProbe`]): a failed DELETE makes a failed teardown
//!   like any other. A server answers 404 for a session it no longer knows (and
//!   some answer 400 saying so): then there was nothing left to end.
//! - **A session lost while running.** A server that restarted, or ended the
//!   session itself, answers requests that carry the old session id with 404 (or
//!   400 "no valid session"). rmcp would either open a new session behind the
//!   authority's back or, for the 400 kind, leave the request waiting for an answer
//!   that never comes. Here the request fails at once and [`SessionLoss`] fires, so
//!   that the authority ends the generation and its restart policy decides.
//! - **HTTP errors by name.** A refused request is reported with its status and the
//!   start of its body (control characters escaped, secrets redacted), 401/403 as
//!   a demand for authorization with the challenge's realm and scope, and a URL
//!   that speaks the legacy HTTP+SSE transport is named as such.
//!
//! These reach the session layer as an [`HttpFailure`] inside the transport error
//! (see [`failure_in`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_core::stream::BoxStream;
use http::{HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use tokio_util::sync::CancellationToken;

/// Where a remote server is and what to send with every request.
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    /// Header name and value; values may hold secrets and are never shown.
    pub headers: Vec<(String, String)>,
}

/// How the DELETE that ended a session went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The server ended the session, or does not end sessions on request (405).
    Ended,
    /// The server had already ended the session: it no longer knows its id. Says
    /// how the server put it, e.g. `HTTP 404`.
    AlreadyGone(String),
    /// The session could not be ended: why.
    Failed(String),
}

/// How the DELETE that ends a session went: `None` while none was sent.
#[derive(Clone, Default)]
pub struct DeleteProbe(Arc<Mutex<Option<DeleteOutcome>>>);

impl DeleteProbe {
    pub fn outcome(&self) -> Option<DeleteOutcome> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, outcome: DeleteOutcome) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }
}

/// Fires when the server no longer knows the session, and says how it showed it.
#[derive(Clone, Default)]
pub struct SessionLoss {
    how: Arc<Mutex<Option<String>>>,
    lost: CancellationToken,
}

impl SessionLoss {
    /// How the server showed that it no longer knows the session (`HTTP 404`, or
    /// what it answered), once it has.
    pub fn how(&self) -> Option<String> {
        self.how.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Resolves once the session is lost.
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// Records how the session was lost. The loss fires when the returned signal
    /// is dropped: it travels with the error of the request that found the loss,
    /// so that this request has its answer before the session is torn down (a
    /// teardown fails whatever is still in flight with "transport closed").
    fn mark(&self, how: &str) -> Arc<LossSignal> {
        let mut slot = self.how.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            tracing::warn!("{}", lost_session(how));
            *slot = Some(how.to_owned());
        }
        Arc::new(LossSignal(self.lost.clone()))
    }
}

/// The words for a lost session.
pub fn lost_session(how: &str) -> String {
    format!("the server no longer knows this session ({how})")
}

/// Fires the loss of a session when dropped.
#[derive(Debug)]
struct LossSignal(CancellationToken);

impl Drop for LossSignal {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// What kind of HTTP failure an [`HttpFailure`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The server no longer knows the session.
    SessionLost,
    /// 401 or 403: the server wants credentials, or other ones.
    Unauthorized,
    /// The URL speaks the legacy HTTP+SSE transport, not streamable HTTP.
    LegacySse,
    /// Any other refused request, or no answer at all.
    Other,
}

/// An HTTP failure in words people read; carried through rmcp inside its
/// transport error, and found again with [`failure_in`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct HttpFailure {
    pub kind: FailureKind,
    pub message: String,
    /// For a lost session: fires the loss once this error is dropped.
    signal: Option<Arc<LossSignal>>,
}

/// The [`HttpFailure`] somewhere in the chain of `error`, if there is one.
pub fn failure_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a HttpFailure> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(f) = e.downcast_ref::<HttpFailure>() {
            return Some(f);
        }
        // An I/O error hides what it wraps from `source()`; ask it directly.
        if let Some(f) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<HttpFailure>())
        {
            return Some(f);
        }
        current = e.source();
    }
    None
}

/// reqwest's client, with the DELETE of the session made here and the answers
/// rmcp would not name made into [`HttpFailure`]s.
#[derive(Clone)]
pub struct ObservedClient {
    inner: reqwest::Client,
    probe: DeleteProbe,
    loss: SessionLoss,
    /// Values that must never be shown, even when a server echoes them.
    secrets: Arc<[String]>,
    /// Whether credentials are sent (an `Authorization` header).
    sends_credentials: bool,
}

impl ObservedClient {
    pub fn new(remote: &Remote, probe: DeleteProbe, loss: SessionLoss) -> ObservedClient {
        ObservedClient {
            inner: reqwest::Client::new(),
            probe,
            loss,
            secrets: secrets_of(remote).into(),
            sends_credentials: remote
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("authorization")),
        }
    }

    fn failure(&self, kind: FailureKind, message: String) -> Error {
        let message = redact(&message, &self.secrets);
        StreamableHttpError::Io(std::io::Error::other(HttpFailure {
            kind,
            message,
            signal: None,
        }))
    }

    fn lost(&self, how: &str) -> Error {
        let how = redact(how, &self.secrets);
        let signal = self.loss.mark(&how);
        StreamableHttpError::Io(std::io::Error::other(HttpFailure {
            kind: FailureKind::SessionLost,
            message: lost_session(&how),
            signal: Some(signal),
        }))
    }

    /// Judges the answer to a POST: what rmcp passes on as it is, and what becomes
    /// a named failure.
    async fn judge_post(
        &self,
        sent: Sent,
        result: Result<StreamableHttpPostResponse, Error>,
        uri: &str,
        headers: &Headers,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let error = match result {
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(e), session)) => {
                let said = text_excerpt(&e.error.message);
                // An error that answers the request itself is the request's own
                // (a tool may well have sessions of its own to not find).
                let answers_request = match (&sent.request, &e.id) {
                    (Some(sent), Some(got)) => sent.to_string() == got.to_string(),
                    _ => false,
                };
                if sent.session && !answers_request && names_unknown_session(&e.error.message) {
                    return Err(self.lost(&format!("it answered \"{said}\"")));
                }
                if sent.initialize && !answers_request && self.speaks_legacy_sse(uri, headers).await
                {
                    return Err(self.legacy_sse(&format!("the error \"{said}\"")));
                }
                if sent.request.is_some() && !answers_request {
                    // No request can be matched to it: the caller would wait for
                    // its deadline.
                    return Err(self.failure(
                        FailureKind::Other,
                        format!(
                            "the server answered with an error for no request: {said} (code {})",
                            e.error.code.0
                        ),
                    ));
                }
                return Ok(StreamableHttpPostResponse::Json(
                    JsonRpcMessage::Error(e),
                    session,
                ));
            }
            Ok(other) => return Ok(other),
            Err(e) => e,
        };
        if sent.session && matches!(error, StreamableHttpError::SessionExpired) {
            return Err(self.lost("HTTP 404"));
        }
        let (kind, message, status) = self.describe(&error);
        if sent.initialize
            && kind == FailureKind::Other
            && status.is_some_and(|s| s.is_client_error())
            && self.speaks_legacy_sse(uri, headers).await
        {
            return Err(self.legacy_sse(&message));
        }
        let message = match (kind, status) {
            (FailureKind::Other, Some(s)) if sent.initialize && matches!(s.as_u16(), 404 | 405) => {
                format!(
                    "{message}; is `url:` the server's streamable HTTP endpoint? It is often /mcp"
                )
            }
            _ => message,
        };
        Err(self.failure(kind, message))
    }

    /// The URL speaks the legacy HTTP+SSE transport; the POST of initialize `got`
    /// this answer.
    fn legacy_sse(&self, got: &str) -> Error {
        self.failure(
            FailureKind::LegacySse,
            format!(
                "the server at `url:` speaks the legacy HTTP+SSE transport of protocol \
                 2024-11-05 (a GET opens an event stream that announces an `endpoint`; the \
                 POST of initialize got {got}), which mcpfleet does not speak: point `url:` \
                 at the server's streamable HTTP endpoint (often /mcp), or run the server \
                 with its streamable HTTP transport"
            ),
        )
    }

    /// What an error of rmcp's client means, in words, with the HTTP status when
    /// there was one.
    fn describe(&self, error: &Error) -> (FailureKind, String, Option<StatusCode>) {
        let unauthorized = |status: StatusCode, challenge: Option<&str>| {
            let what = challenge
                .map(describe_challenge)
                .filter(|c| !c.is_empty())
                .map_or_else(String::new, |c| format!(" ({c})"));
            let advice = match (status, self.sends_credentials) {
                (StatusCode::FORBIDDEN, _) => {
                    "the credentials sent in `headers:` lack a permission the server requires"
                }
                (_, true) => "the credentials sent in `headers:` were not accepted",
                (_, false) => {
                    "give credentials in the server's `headers:`, e.g. \
                     Authorization: \"Bearer ${env:TOKEN}\""
                }
            };
            (
                FailureKind::Unauthorized,
                format!("{}{what}: {advice}", status_text(status)),
                Some(status),
            )
        };
        match error {
            StreamableHttpError::AuthRequired(e) => {
                unauthorized(StatusCode::UNAUTHORIZED, Some(&e.www_authenticate_header))
            }
            StreamableHttpError::InsufficientScope(e) => {
                unauthorized(StatusCode::FORBIDDEN, Some(&e.www_authenticate_header))
            }
            StreamableHttpError::UnexpectedServerResponse(text) => match split_status(text) {
                Some((status, _)) if matches!(status.as_u16(), 401 | 403) => {
                    unauthorized(status, None)
                }
                Some((status, body)) => {
                    let body = body_excerpt(&redact(body, &self.secrets));
                    let repeats_reason = status
                        .canonical_reason()
                        .is_some_and(|r| r.eq_ignore_ascii_case(&body));
                    let message = if body.is_empty() || repeats_reason {
                        status_text(status)
                    } else {
                        format!("{}: {body}", status_text(status))
                    };
                    (FailureKind::Other, message, Some(status))
                }
                None => (
                    FailureKind::Other,
                    format!("unexpected answer: {}", text_excerpt(text)),
                    None,
                ),
            },
            StreamableHttpError::HttpStatus(e) => {
                let status = StatusCode::from_u16(e.status).ok();
                let mut message = status.map_or_else(|| format!("HTTP {}", e.status), status_text);
                if let Some(after) = &e.retry_after {
                    message.push_str(&format!(" (retry after {})", text_excerpt(after)));
                }
                (FailureKind::Other, message, status)
            }
            StreamableHttpError::UnexpectedContentType(ct) => (
                FailureKind::Other,
                format!(
                    "the server answered with content type {}, neither JSON nor an event \
                     stream: is `url:` the server's MCP endpoint?",
                    ct.as_deref().map_or("(none)".into(), text_excerpt)
                ),
                None,
            ),
            StreamableHttpError::Client(e) => match e.status() {
                Some(status) => (FailureKind::Other, status_text(status), Some(status)),
                None => (
                    FailureKind::Other,
                    format!("the HTTP request failed: {}", chain(e)),
                    None,
                ),
            },
            other => (FailureKind::Other, chain(other), None),
        }
    }

    /// Whether `uri` answers a GET with an event stream whose first event is
    /// `endpoint`: the legacy HTTP+SSE transport. Bounded, and it reads no more
    /// than the first event.
    async fn speaks_legacy_sse(&self, uri: &str, headers: &Headers) -> bool {
        let mut request = self
            .inner
            .get(uri)
            .header(http::header::ACCEPT, "text/event-stream");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let probe = async {
            let mut response = request.send().await.ok()?;
            let is_stream = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
            if !response.status().is_success() || !is_stream {
                return Some(false);
            }
            let mut seen = Vec::new();
            while seen.len() < LEGACY_PROBE_BYTES {
                let chunk = response.chunk().await.ok()??;
                seen.extend_from_slice(&chunk);
                let text = String::from_utf8_lossy(&seen).replace("\r\n", "\n");
                if let Some((event, _)) = text.split_once("\n\n") {
                    return Some(event.lines().any(|line| {
                        line.strip_prefix("event:")
                            .is_some_and(|name| name.trim() == "endpoint")
                    }));
                }
            }
            Some(false)
        };
        matches!(
            tokio::time::timeout(LEGACY_PROBE_LIMIT, probe).await,
            Ok(Some(true))
        )
    }
}

/// How long the look for the legacy transport may take, and how much of its
/// stream it reads.
const LEGACY_PROBE_LIMIT: Duration = Duration::from_secs(3);
const LEGACY_PROBE_BYTES: usize = 8 * 1024;

/// How much of an error body is read, and how much of it is shown.
const BODY_READ_BYTES: usize = 8 * 1024;
const EXCERPT_CHARS: usize = 200;

type Headers = HashMap<HeaderName, HeaderValue>;
type Error = StreamableHttpError<reqwest::Error>;

/// What a POST carried, as far as judging its answer goes.
#[derive(Debug, Clone)]
struct Sent {
    /// It carried a session id.
    session: bool,
    /// It was a request (it awaits an answer): its id.
    request: Option<RequestId>,
    /// It was the `initialize` request.
    initialize: bool,
}

impl Sent {
    fn of(message: &ClientJsonRpcMessage, session_id: &Option<Arc<str>>) -> Sent {
        let (request, initialize) = match message {
            JsonRpcMessage::Request(r) => (
                Some(r.id.clone()),
                matches!(r.request, ClientRequest::InitializeRequest(_)),
            ),
            _ => (None, false),
        };
        Sent {
            session: session_id.is_some(),
            request,
            initialize,
        }
    }
}

/// Takes the URL out of an HTTP client error: a `url:` may carry a secret from
/// `${env:}` in its query, and rmcp logs these errors as they are.
fn scrub<T>(result: Result<T, Error>) -> Result<T, Error> {
    result.map_err(|e| match e {
        StreamableHttpError::Client(e) => StreamableHttpError::Client(e.without_url()),
        other => other,
    })
}

impl StreamableHttpClient for ObservedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let sent = Sent::of(&message, &session_id);
        let result = self
            .inner
            .post_message_with_response_limits(
                uri.clone(),
                message,
                session_id,
                auth_header,
                custom_headers.clone(),
                limits,
            )
            .await;
        self.judge_post(sent, scrub(result), &uri, &custom_headers)
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), Error> {
        let mut request = self
            .inner
            .delete(uri.as_ref())
            .header("Mcp-Session-Id", session_id.as_ref());
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        // rmcp gives up on the DELETE after a deadline of its own by dropping this
        // future: what stays recorded then is that no answer came.
        self.probe
            .record(DeleteOutcome::Failed("no answer came in time".into()));
        let outcome = match request.send().await {
            Err(e) => DeleteOutcome::Failed(format!(
                "the HTTP request failed: {}",
                chain(&e.without_url())
            )),
            Ok(response) => {
                let status = response.status();
                if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
                    DeleteOutcome::Ended
                } else if status == StatusCode::NOT_FOUND {
                    DeleteOutcome::AlreadyGone("HTTP 404".into())
                } else {
                    let body = redact(&read_prefix(response).await, &self.secrets);
                    let said = error_message_of(&body);
                    if status == StatusCode::BAD_REQUEST && names_unknown_session(&said) {
                        DeleteOutcome::AlreadyGone(format!("HTTP 400: {}", body_excerpt(&said)))
                    } else if said.trim().is_empty() {
                        DeleteOutcome::Failed(status_text(status))
                    } else {
                        DeleteOutcome::Failed(format!(
                            "{}: {}",
                            status_text(status),
                            body_excerpt(&said)
                        ))
                    }
                }
            }
        };
        self.probe.record(outcome.clone());
        match outcome {
            DeleteOutcome::Ended => Ok(()),
            DeleteOutcome::AlreadyGone(how) => {
                tracing::debug!("DELETE: the server no longer knows the session ({how})");
                Ok(())
            }
            DeleteOutcome::Failed(why) => Err(self.failure(FailureKind::Other, why)),
        }
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Sse, SseError>>, Error>> + Send + '_
    {
        let call =
            self.inner
                .get_stream(uri, session_id, last_event_id, auth_header, custom_headers);
        async move { scrub(call.await) }
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Sse, SseError>>, Error>> + Send + '_
    {
        let call = self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        );
        async move { scrub(call.await) }
    }
}

/// Whether a server's error text says that it does not know the session: the
/// wording of the common SDKs ("Session not found", "No valid session ID
/// provided", "Invalid or expired session ID").
pub fn names_unknown_session(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("session")
        && [
            "not found",
            "no valid",
            "unknown",
            "invalid",
            "expired",
            "does not exist",
            "terminated",
        ]
        .iter()
        .any(|w| text.contains(w))
}

/// `HTTP 404 Not Found`.
fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    }
}

/// rmcp words a refused request `HTTP <status>: <body>`: the status and the body.
fn split_status(text: &str) -> Option<(StatusCode, &str)> {
    let rest = text.strip_prefix("HTTP ")?;
    let status = StatusCode::from_bytes(rest.get(..3)?.as_bytes()).ok()?;
    let body = rest.split_once(": ").map_or("", |(_, body)| body);
    Some((status, body))
}

/// The message of a JSON-RPC error body, or the body itself.
fn error_message_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.to_owned())
}

/// The start of an error body as one line people can read: the text of an HTML
/// page without its markup, or of a JSON-RPC error its message.
fn body_excerpt(body: &str) -> String {
    let body = error_message_of(body);
    let lower = body.to_ascii_lowercase();
    if !lower.contains('<') {
        return text_excerpt(&body);
    }
    // An HTML page: what its body says, without tags.
    let start = lower
        .find("<body")
        .and_then(|i| lower[i..].find('>').map(|j| i + j + 1))
        .unwrap_or(0);
    let end = lower[start..]
        .find("</body")
        .map_or(lower.len(), |i| start + i);
    let mut text = String::new();
    let mut in_tag = false;
    for c in body[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text_excerpt(&text)
}

/// Text from a server as one bounded line: runs of whitespace become one space,
/// control characters are escaped, and it is cut at [`EXCERPT_CHARS`].
fn text_excerpt(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= EXCERPT_CHARS {
                out.push('…');
                return out;
            }
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
            chars += 1;
        }
    }
    out
}

/// An error and its causes on one line.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text_excerpt(&text)
}

/// `realm "mcp", scope "tools"` from a `WWW-Authenticate` challenge: only the
/// parameters that say what the server wants, never anything else it echoes.
fn describe_challenge(header: &str) -> String {
    let header = header.trim();
    let (scheme, params) = match header.split_once(' ') {
        Some((scheme, params)) if !scheme.contains('=') => (Some(scheme), params),
        None if !header.contains('=') => (Some(header), ""),
        _ => (None, header),
    };
    let shown: Vec<String> = challenge_params(params)
        .into_iter()
        .filter(|(name, _)| matches!(name.as_str(), "realm" | "scope" | "error"))
        .map(|(name, value)| format!("{name} \"{}\"", text_excerpt(&value)))
        .collect();
    match scheme.filter(|s| !s.is_empty()).map(text_excerpt) {
        Some(scheme) if shown.is_empty() => scheme,
        Some(scheme) => format!("{scheme} {}", shown.join(", ")),
        None => shown.join(", "),
    }
}

/// The `name=value` parameters of a challenge; values may be quoted.
fn challenge_params(text: &str) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().to_ascii_lowercase();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut escaped = false;
            let mut end = quoted.len();
            for (i, c) in quoted.char_indices() {
                match c {
                    _ if escaped => {
                        v.push(c);
                        escaped = false;
                    }
                    '\\' => escaped = true,
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    _ => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_owned();
            rest = &rest[end..];
        }
        params.push((name, value));
    }
    params
}

/// The values a server must never get to show back: every header value (and its
/// longer words: a token without its `Bearer `), and the secrets a URL may carry
/// (its user info and query values).
fn secrets_of(remote: &Remote) -> Vec<String> {
    let mut secrets = Vec::new();
    for (_, value) in &remote.headers {
        secrets.push(value.clone());
        secrets.extend(value.split_whitespace().map(str::to_owned));
    }
    if let Ok(url) = reqwest::Url::parse(&remote.url) {
        secrets.extend(url.password().map(str::to_owned));
        if !url.username().is_empty() {
            secrets.push(url.username().to_owned());
        }
        if let Some(query) = url.query() {
            secrets.push(query.to_owned());
            secrets.extend(
                query
                    .split('&')
                    .filter_map(|p| Some(p.split_once('=')?.1.to_owned())),
            );
        }
    }
    // Short values ("1", "Bearer") are not secrets and would blot out words.
    secrets.retain(|s| s.len() >= 8);
    // Longer first, so that a value is replaced whole before its parts.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

fn redact(text: &str, secrets: &[String]) -> String {
    let mut text: Cow<'_, str> = Cow::Borrowed(text);
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = Cow::Owned(text.replace(secret.as_str(), "[redacted]"));
        }
    }
    text.into_owned()
}

/// Up to [`BODY_READ_BYTES`] of a response's body, as text.
async fn read_prefix(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() < BODY_READ_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(BODY_READ_BYTES);
    String::from_utf8_lossy(&body).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_session_is_recognized_in_the_words_of_the_common_sdks() {
        for said in [
            "Bad Request: No valid session ID provided",
            "Session not found",
            "Not Found: Invalid or expired session ID",
            "unknown session id",
        ] {
            assert!(names_unknown_session(said), "{said}");
        }
        for said in [
            "Bad Request: Unsupported protocol version",
            "Internal server error",
            "invalid params",
        ] {
            assert!(!names_unknown_session(said), "{said}");
        }
    }

    #[test]
    fn bodies_become_one_bounded_line_without_markup_or_control_characters() {
        let page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
                    <title>Error</title>\n</head>\n<body>\n<pre>Cannot POST /sse</pre>\n\
                    </body>\n</html>\n";
        assert_eq!(body_excerpt(page), "Cannot POST /sse");
        assert_eq!(
            body_excerpt(
                r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#
            ),
            "Bad Request: No valid session ID provided"
        );
        assert_eq!(
            body_excerpt("store down\r\n\u{1b}[31mretry\u{7}"),
            "store down \\u{1b}[31mretry\\u{7}"
        );
        let long = "x".repeat(1000);
        let cut = body_excerpt(&long);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_challenge_shows_its_scheme_realm_and_scope_only() {
        assert_eq!(
            describe_challenge(r#"Bearer realm="mcp", scope="tools""#),
            r#"Bearer realm "mcp", scope "tools""#
        );
        assert_eq!(
            describe_challenge(
                r#"Bearer error="invalid_token", error_description="token abc expired", resource_metadata="https://x/y""#
            ),
            r#"Bearer error "invalid_token""#
        );
        assert_eq!(
            describe_challenge(r#"Basic realm="a \"b\" c""#),
            r#"Basic realm "a "b" c""#
        );
        assert_eq!(describe_challenge("Bearer"), "Bearer");
    }

    #[test]
    fn a_status_and_body_are_split_from_rmcps_wording() {
        let (status, body) = split_status("HTTP 404 Not Found: Cannot POST /sse").unwrap();
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, "Cannot POST /sse");
        assert!(split_status("something else").is_none());
    }

    #[test]
    fn secrets_of_headers_and_url_are_redacted() {
        let remote = Remote {
            url: "http://user:hunter2-pass@h/mcp?key=url-secret-1&x=1".into(),
            headers: vec![
                ("Authorization".into(), "Bearer s3cret-token".into()),
                ("X-Trace".into(), "1".into()),
            ],
        };
        let secrets = secrets_of(&remote);
        let text = "bad token s3cret-token (Bearer s3cret-token) at /mcp?key=url-secret-1 \
                    by hunter2-pass; Bearer realm 1";
        let shown = redact(text, &secrets);
        for secret in ["s3cret-token", "url-secret-1", "hunter2-pass"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("Bearer realm 1"), "{shown}");
    }

    #[test]
    fn a_failure_is_found_inside_rmcps_errors() {
        let failure = HttpFailure {
            kind: FailureKind::Unauthorized,
            message: "no".into(),
            signal: None,
        };
        let error: Error = StreamableHttpError::Io(std::io::Error::other(failure));
        let found = failure_in(&error).unwrap();
        assert_eq!(found.kind, FailureKind::Unauthorized);
        assert_eq!(found.message, "no");
        let other: Error = StreamableHttpError::UnexpectedEndOfStream;
        assert!(failure_in(&other).is_none());
    }

    fn error_answer(id: Option<RequestId>, message: &'static str) -> StreamableHttpPostResponse {
        let error = rmcp::model::ErrorData::new(rmcp::model::ErrorCode(-32000), message, None);
        StreamableHttpPostResponse::Json(rmcp::model::ServerJsonRpcMessage::error(error, id), None)
    }

    #[tokio::test]
    async fn answers_that_say_the_session_is_unknown_are_a_lost_session() {
        let remote = Remote {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: Vec::new(),
        };
        let judge = |sent: Sent, answer: Result<StreamableHttpPostResponse, Error>| {
            let loss = SessionLoss::default();
            let client = ObservedClient::new(&remote, DeleteProbe::default(), loss.clone());
            async move {
                let judged = client
                    .judge_post(sent, answer, "http://127.0.0.1:9/mcp", &Headers::new())
                    .await;
                let failure = judged
                    .as_ref()
                    .err()
                    .and_then(|e| failure_in(e))
                    .map(|f| (f.kind, f.message.clone()));
                (failure, loss.how())
            }
        };
        let request = |id: i64, session: bool| Sent {
            session,
            request: Some(RequestId::Number(id)),
            initialize: false,
        };
        let unknown = "Bad Request: No valid session ID provided";

        // server-everything: 400 with an error that has no id.
        let (failure, how) = judge(request(7, true), Ok(error_answer(None, unknown))).await;
        assert_eq!(failure.unwrap().0, FailureKind::SessionLost);
        assert_eq!(how.unwrap(), format!("it answered \"{unknown}\""));
        // An id that is not the request's ("server-error").
        let other = Some(RequestId::String("server-error".into()));
        let (failure, _) = judge(request(7, true), Ok(error_answer(other, unknown))).await;
        assert_eq!(failure.unwrap().0, FailureKind::SessionLost);
        // A 404 to a request with a session.
        let (failure, how) =
            judge(request(7, true), Err(StreamableHttpError::SessionExpired)).await;
        assert_eq!(failure.unwrap().0, FailureKind::SessionLost);
        assert_eq!(how.as_deref(), Some("HTTP 404"));
        // The request's own error is its answer, whatever it says.
        let own = Some(RequestId::Number(7));
        let (failure, how) =
            judge(request(7, true), Ok(error_answer(own, "Session not found"))).await;
        assert!(failure.is_none() && how.is_none());
        // Without a session there is none to lose; an error for no request still
        // fails the request at once.
        let (failure, how) = judge(request(7, false), Ok(error_answer(None, unknown))).await;
        assert_eq!(failure.unwrap().0, FailureKind::Other);
        assert!(how.is_none());
    }

    #[tokio::test]
    async fn a_loss_fires_once_the_error_that_found_it_is_dropped() {
        let remote = Remote {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: Vec::new(),
        };
        let loss = SessionLoss::default();
        let client = ObservedClient::new(&remote, DeleteProbe::default(), loss.clone());
        let error = client.lost("HTTP 404");
        assert_eq!(loss.how().as_deref(), Some("HTTP 404"));
        assert!(
            !loss.lost.is_cancelled(),
            "not before the error is delivered"
        );
        let found = failure_in(&error).unwrap();
        assert_eq!(found.kind, FailureKind::SessionLost);
        assert_eq!(
            found.message,
            "the server no longer knows this session (HTTP 404)"
        );
        drop(error);
        tokio::time::timeout(Duration::from_secs(1), loss.lost())
            .await
            .expect("the loss fired");
    }
}
