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

mod describe;
mod initialize;
mod probe;
mod sideband;
#[cfg(test)]
mod tests;

pub(crate) use describe::{names_unknown_session, text_excerpt};
pub(crate) use probe::{Discovered, discover};
pub(crate) use sideband::{Seen, Sideband};
use describe::*;

/// Where a remote server is and what to send with every request.
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    /// Header name and value; values may hold secrets and are never shown.
    pub headers: Vec<(String, String)>,
    /// The keeper of the server's OAuth tokens (`auth:`), which hands out the
    /// bearer token of every request.
    pub keeper: Option<Arc<crate::auth::Keeper>>,
    /// A CA its certificate is checked against besides the system's roots:
    /// another host's gateway (`gateway.tls.ca`, docs/design.md §19).
    pub ca: Option<reqwest::Certificate>,
}

impl Remote {
    /// The HTTP client of every request to it: trusting [`Remote::ca`] too.
    pub(crate) fn client(&self) -> reqwest::Client {
        match &self.ca {
            None => reqwest::Client::new(),
            Some(ca) => reqwest::Client::builder()
                .add_root_certificate(ca.clone())
                .build()
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "cannot make an HTTP client that trusts the gateways' CA");
                    reqwest::Client::new()
                }),
        }
    }
}

/// How the DELETE that ended a session went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeleteOutcome {
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
pub(crate) struct DeleteProbe(Arc<Mutex<Option<DeleteOutcome>>>);

impl DeleteProbe {
    pub(crate) fn outcome(&self) -> Option<DeleteOutcome> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, outcome: DeleteOutcome) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }
}

/// Fires when the server no longer knows the session, and says how it showed it.
#[derive(Clone, Default)]
pub(crate) struct SessionLoss {
    how: Arc<Mutex<Option<String>>>,
    lost: CancellationToken,
}

impl SessionLoss {
    /// How the server showed that it no longer knows the session (`HTTP 404`, or
    /// what it answered), once it has.
    pub(crate) fn how(&self) -> Option<String> {
        self.how.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Resolves once the session is lost.
    pub(crate) async fn lost(&self) {
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
pub(crate) fn lost_session(how: &str) -> String {
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
pub(crate) enum FailureKind {
    /// The server no longer knows the session.
    SessionLost,
    /// 401 or 403: the server wants credentials, or other ones.
    Unauthorized,
    /// No usable token for a server with `auth:` (or a bearer challenge to a
    /// server without it): a person must log in.
    AuthRequired,
    /// The URL speaks the legacy HTTP+SSE transport, not streamable HTTP.
    LegacySse,
    /// Any other refused request, or no answer at all.
    Other,
}

/// An HTTP failure in words people read; carried through rmcp inside its
/// transport error, and found again with [`failure_in`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct HttpFailure {
    pub kind: FailureKind,
    pub message: String,
    /// For a lost session: fires the loss once this error is dropped.
    signal: Option<Arc<LossSignal>>,
}

/// The [`HttpFailure`] somewhere in the chain of `error`, if there is one.
pub(crate) fn failure_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a HttpFailure> {
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
pub(crate) struct ObservedClient {
    inner: reqwest::Client,
    probe: DeleteProbe,
    loss: SessionLoss,
    /// Values that must never be shown, even when a server echoes them.
    secrets: Arc<[String]>,
    /// Whether credentials are sent (an `Authorization` header).
    sends_credentials: bool,
    /// The keeper of the server's OAuth tokens, when it has `auth:`.
    keeper: Option<Arc<crate::auth::Keeper>>,
    /// Where what the server's messages carry is kept as written, for the
    /// session's handler (docs/design.md §14, "Values as written").
    heard: Option<crate::process::notice::WrittenAsks>,
    /// Where the session id and headers of each POST are kept, for the
    /// session's [`Sideband`], and what rmcp does not model of the answer to
    /// `initialize`, which is then read here (`initialize.rs`).
    seen: Option<Seen>,
}

impl ObservedClient {
    pub(crate) fn new(remote: &Remote, probe: DeleteProbe, loss: SessionLoss) -> ObservedClient {
        ObservedClient {
            inner: remote.client(),
            probe,
            loss,
            secrets: secrets_of(remote).into(),
            sends_credentials: remote.keeper.is_some()
                || remote
                    .headers
                    .iter()
                    .any(|(name, _)| name.eq_ignore_ascii_case("authorization")),
            keeper: remote.keeper.clone(),
            heard: None,
            seen: None,
        }
    }

    /// The client that keeps in `seen` the session id and headers of each POST.
    pub(crate) fn seeing(mut self, seen: Seen) -> Self {
        self.seen = Some(seen);
        self
    }

    /// The client that keeps in `heard` what the server's messages carry, as
    /// written, as rmcp reads them.
    pub(crate) fn hearing(mut self, heard: Option<crate::process::notice::WrittenAsks>) -> Self {
        self.heard = heard;
        self
    }

    /// `stream` as rmcp reads it, each event's data seen by `heard` first.
    fn heard(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        use futures::StreamExt;
        let Some(heard) = self.heard.clone() else {
            return stream;
        };
        stream
            .inspect(move |event| {
                if let Ok(Sse { data: Some(data), .. }) = event {
                    heard.observe(data);
                }
            })
            .boxed()
    }

    /// The values never to show: the fixed ones and the tokens held now.
    fn secrets(&self) -> std::borrow::Cow<'_, [String]> {
        match &self.keeper {
            None => std::borrow::Cow::Borrowed(&self.secrets[..]),
            Some(keeper) => {
                let mut all = self.secrets.to_vec();
                all.extend(crate::process::redact::secrets(
                    keeper.secrets().iter().map(String::as_str),
                ));
                std::borrow::Cow::Owned(all)
            }
        }
    }

    /// No token could be had: a login is due, or the authorization server
    /// could not be asked.
    fn auth_failure(&self, failure: crate::auth::AuthFailure) -> Error {
        let kind = match failure.kind {
            crate::auth::AuthFailureKind::Unavailable => FailureKind::Other,
            _ => FailureKind::AuthRequired,
        };
        self.failure(kind, failure.message)
    }

    /// The bearer token to send, from the keeper; `given` without one.
    async fn bearer(&self, given: Option<String>) -> Result<Option<String>, Error> {
        match &self.keeper {
            None => Ok(given),
            Some(keeper) => keeper.bearer().await.map(Some).map_err(|f| self.auth_failure(f)),
        }
    }

    fn failure(&self, kind: FailureKind, message: String) -> Error {
        let message = redact(&message, &self.secrets());
        StreamableHttpError::Io(std::io::Error::other(HttpFailure {
            kind,
            message,
            signal: None,
        }))
    }

    fn lost(&self, how: &str) -> Error {
        let how = redact(how, &self.secrets());
        let signal = self.loss.mark(&how);
        StreamableHttpError::Io(std::io::Error::other(HttpFailure {
            kind: FailureKind::SessionLost,
            message: lost_session(&how),
            signal: Some(signal),
        }))
    }

    /// One POST, the answer to `initialize` read here when it is kept.
    #[expect(clippy::too_many_arguments, reason = "rmcp's POST, one token apart")]
    async fn post_once(
        &self,
        sent: &Sent,
        uri: &Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: &Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        match &self.seen {
            Some(seen) if sent.initialize => {
                let headers = custom_headers.clone();
                self.post_initialize(seen, uri.clone(), message, session_id, auth_header, headers, limits)
                    .await
            }
            _ => {
                self.inner
                    .post_message_with_response_limits(
                        uri.clone(),
                        message,
                        session_id,
                        auth_header,
                        custom_headers.clone(),
                        limits,
                    )
                    .await
            }
        }
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
                // Whole tokens go before the message is cut short.
                let said = text_excerpt(&redact(&e.error.message, &self.secrets()));
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
            // A bearer challenge that points at protected-resource metadata is
            // MCP authorization (OAuth): headers will not do, a login will.
            let oauth = status == StatusCode::UNAUTHORIZED
                && !self.sends_credentials
                && challenge.is_some_and(|c| {
                    let c = c.to_ascii_lowercase();
                    c.trim_start().starts_with("bearer") && c.contains("resource_metadata")
                });
            if oauth {
                return (
                    FailureKind::AuthRequired,
                    format!(
                        "{}{what}: the server requires MCP authorization (OAuth): add \
                         `auth: oauth` to the server in the fleet file, then run \
                         `mcpfleet login` for it",
                        status_text(status)
                    ),
                    Some(status),
                );
            }
            if let Some(keeper) = &self.keeper {
                let name = keeper.server_name();
                return if status == StatusCode::UNAUTHORIZED {
                    (
                        FailureKind::AuthRequired,
                        format!(
                            "{}{what}: the server refused the OAuth token: run `mcpfleet login {name}`",
                            status_text(status)
                        ),
                        Some(status),
                    )
                } else {
                    (
                        FailureKind::Unauthorized,
                        format!(
                            "{}{what}: the OAuth grant lacks a permission the server requires \
                             (`mcpfleet login {name}` asks for the scopes it names)",
                            status_text(status)
                        ),
                        Some(status),
                    )
                };
            }
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
                    let body = body_excerpt(&redact(body, &self.secrets()));
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

/// How much of an error body is read ([`describe::EXCERPT_CHARS`] of it are shown).
const BODY_READ_BYTES: usize = 8 * 1024;

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
        if let Some(seen) = &self.seen {
            seen.post(&session_id, &custom_headers);
        }
        let token = match &self.keeper {
            Some(_) => self.bearer(None).await?,
            None => None,
        };
        let auth_header = token.clone().or(auth_header);
        // Kept to be sent once more with a renewed token after a 401.
        let again = token.as_ref().map(|_| (message.clone(), session_id.clone(), limits));
        let mut result = self
            .post_once(&sent, &uri, message, session_id, auth_header, &custom_headers, limits)
            .await;
        if let (Some(keeper), Some(token), Some((message, session_id, limits))) =
            (&self.keeper, &token, again)
        {
            let challenge = match &result {
                Err(StreamableHttpError::AuthRequired(e)) => Some(Some(e.www_authenticate_header.clone())),
                // A 403 is the keeper's only when it names a scope the grant
                // lacks; another refusal is not cured by a new token.
                Err(StreamableHttpError::InsufficientScope(e))
                    if e.www_authenticate_header.contains("insufficient_scope") =>
                {
                    Some(Some(e.www_authenticate_header.clone()))
                }
                Err(StreamableHttpError::UnexpectedServerResponse(text))
                    if split_status(text).is_some_and(|(s, _)| s == StatusCode::UNAUTHORIZED) =>
                {
                    Some(None)
                }
                _ => None,
            };
            if let Some(challenge) = challenge {
                let renewed = keeper
                    .refused(token, challenge.as_deref())
                    .await
                    .map_err(|f| self.auth_failure(f))?;
                result = self
                    .post_once(&sent, &uri, message, session_id, Some(renewed), &custom_headers, limits)
                    .await;
            }
        }
        let judged = self.judge_post(sent, scrub(result), &uri, &custom_headers).await;
        match judged {
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                Ok(StreamableHttpPostResponse::Sse(self.heard(stream), session))
            }
            other => other,
        }
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
        if let Some(token) = self.bearer(auth_header).await? {
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
                    let body = redact(&read_prefix(response).await, &self.secrets());
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

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let auth_header = self.bearer(auth_header).await?;
        let call = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers);
        scrub(call.await).map(|stream| self.heard(stream))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let auth_header = self.bearer(auth_header).await?;
        let call = self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        );
        scrub(call.await).map(|stream| self.heard(stream))
    }
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
    // Short values ("1", "Bearer") are not looked for; longer first, so that a
    // value is replaced whole before its parts.
    crate::process::redact::secrets(secrets.iter().map(String::as_str))
}
