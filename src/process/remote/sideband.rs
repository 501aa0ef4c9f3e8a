//! Requests beside rmcp's to a remote server (docs/design.md §14, "Values as
//! written"): one POST each, with the session id and the headers rmcp's last
//! POST of the session carried (the configured headers, `MCP-Protocol-Version`),
//! and, to a server of the 2026-07-28 era, the per-request `_meta` and
//! `Mcp-Method`/`Mcp-Name` headers rmcp would have sent. The answer is the
//! server's `result` as it wrote it, every field kept, numbers as written,
//! which rmcp's typed results would drop or change. What else the server sends
//! on the request's own stream before its answer is not read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue};
use rmcp::model::ErrorData;
use rmcp::service::ServiceError;
use rmcp::transport::DynamicTransportError;
use serde_json::{Map, Value, json};

/// The most of one answer a side request reads.
const READ_BYTES: usize = 16 * 1024 * 1024;

/// The headers rmcp sets per message, which a side request sets itself.
fn per_message(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
}

/// What rmcp's POSTs of one session carried: written by the session's
/// [`super::ObservedClient`] on every POST, read by its [`Sideband`].
#[derive(Clone, Default)]
pub(crate) struct Seen(Arc<Mutex<SeenPost>>);

#[derive(Default)]
struct SeenPost {
    session: Option<Arc<str>>,
    headers: HashMap<HeaderName, HeaderValue>,
    /// The server's answer to `initialize`, once read: the `tasks` of its
    /// capabilities (protocol 2025-11-25), which rmcp does not model.
    initialized: Option<Option<Map<String, Value>>>,
}

impl Seen {
    /// Keeps the session id and the headers of a POST rmcp makes.
    pub(super) fn post(&self, session: &Option<Arc<str>>, headers: &HashMap<HeaderName, HeaderValue>) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if session.is_some() {
            seen.session = session.clone();
        }
        seen.headers = headers
            .iter()
            .filter(|(name, _)| !per_message(name))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
    }

    /// Keeps what rmcp does not model of the server's answer to `initialize`
    /// (`text`, a JSON-RPC message as written): the first that answers with
    /// `capabilities`.
    pub(super) fn answered(&self, text: &[u8]) {
        if memchr::memmem::find(text, b"\"capabilities\"").is_none() {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Answer {
            result: Initialized,
        }
        #[derive(serde::Deserialize)]
        struct Initialized {
            capabilities: Map<String, Value>,
        }
        let Ok(Answer { result }) = serde_json::from_slice::<Answer>(text) else {
            return;
        };
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if seen.initialized.is_none() {
            seen.initialized = Some(match result.capabilities.get("tasks") {
                Some(Value::Object(tasks)) => Some(tasks.clone()),
                _ => None,
            });
        }
    }

    fn now(&self) -> (Option<Arc<str>>, HashMap<HeaderName, HeaderValue>) {
        let seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        (seen.session.clone(), seen.headers.clone())
    }
}

/// Requests beside rmcp's to one remote session (see the module comment).
#[derive(Clone)]
pub(crate) struct Sideband {
    client: reqwest::Client,
    url: Arc<str>,
    seen: Seen,
    /// To a server of the 2026-07-28 era: the `_meta` every request carries
    /// (version, the gateway's capabilities and name).
    modern: Option<Arc<Map<String, Value>>>,
    next: Arc<AtomicU64>,
    /// Cancelled when the session ends (closed, or lost): what is in flight
    /// fails at once, as rmcp's requests do.
    ended: tokio_util::sync::CancellationToken,
    /// The keeper of the server's OAuth tokens: a side request carries the
    /// bearer token as rmcp's do.
    keeper: Option<Arc<crate::auth::Keeper>>,
}

impl Sideband {
    /// The side requests to the session at `url` whose POSTs `seen` watches;
    /// `modern`: the `_meta` of a 2026-07-28 session's requests.
    pub(crate) fn new(client: reqwest::Client, url: &str, seen: Seen, modern: Option<Map<String, Value>>) -> Sideband {
        Sideband {
            client,
            url: url.into(),
            seen,
            modern: modern.map(Arc::new),
            next: Arc::default(),
            ended: tokio_util::sync::CancellationToken::new(),
            keeper: None,
        }
    }

    /// Side requests that carry the bearer token `keeper` hands out.
    pub(crate) fn with_keeper(mut self, keeper: Option<Arc<crate::auth::Keeper>>) -> Sideband {
        self.keeper = keeper;
        self
    }

    /// The session ended: side requests in flight fail, and later ones at once.
    pub(crate) fn end(&self) {
        self.ended.cancel();
    }

    /// Resolves once the session ended.
    pub(crate) async fn ended(&self) {
        self.ended.cancelled().await;
    }

    /// The `tasks` capability of protocol 2025-11-25 the server declared in
    /// its answer to `initialize`, as it wrote it.
    pub(crate) fn tasks_capability(&self) -> Option<Map<String, Value>> {
        let seen = self.seen.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.initialized.clone().flatten()
    }

    /// Whether the session speaks the 2026-07-28 era.
    pub(crate) fn modern(&self) -> bool {
        self.modern.is_some()
    }

    /// Sends `method` with `params`; the server's `result` as written, or its
    /// error. Unbounded in time: callers bound it.
    pub(crate) async fn request(&self, method: &str, params: Map<String, Value>) -> Result<Value, ServiceError> {
        tokio::select! {
            answer = self.exchange(method, params) => answer,
            () = self.ended.cancelled() => Err(ServiceError::TransportClosed),
        }
    }

    async fn exchange(&self, method: &str, mut params: Map<String, Value>) -> Result<Value, ServiceError> {
        let id = format!("mcpfleet-side-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (session, headers) = self.seen.now();
        let mut request = self
            .client
            .post(self.url.as_ref())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(session) = session {
            request = request.header("Mcp-Session-Id", session.as_ref());
        }
        if let Some(keeper) = &self.keeper {
            let token = keeper
                .bearer()
                .await
                .map_err(|f| unexpected(f.message))?;
            request = request.bearer_auth(token);
        }
        if let Some(meta) = &self.modern {
            let mut own = meta.as_ref().clone();
            if let Some(Value::Object(given)) = params.remove("_meta") {
                own.extend(given);
            }
            params.insert("_meta".into(), Value::Object(own));
            request = request.header("Mcp-Method", method);
            if let Some(Value::String(name)) = params.get("name") {
                request = request.header("Mcp-Name", name.as_str());
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut response = request.body(body.to_string()).send().await.map_err(failed)?;
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        let status = response.status();
        let mut seen = Vec::new();
        loop {
            if seen.len() > READ_BYTES {
                return Err(unexpected(format!("the answer to {method} exceeds {READ_BYTES} bytes")));
            }
            match response.chunk().await.map_err(failed)? {
                Some(chunk) => seen.extend_from_slice(&chunk),
                None => break,
            }
            if is_stream && let Some(answer) = answer_in_events(&seen, &id) {
                return answer;
            }
        }
        let answer = match is_stream {
            true => answer_in_events(&seen, &id),
            false => serde_json::from_slice::<Value>(&seen).ok().and_then(|m| answer_of(m, &id)),
        };
        answer.unwrap_or_else(|| {
            Err(unexpected(format!(
                "the server answered {method} with HTTP {status} and no JSON-RPC answer"
            )))
        })
    }
}

fn failed(error: reqwest::Error) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "streamable-http-side-request",
        std::any::TypeId::of::<Sideband>(),
        Box::new(error.without_url()),
    ))
}

fn unexpected(words: String) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "streamable-http-side-request",
        std::any::TypeId::of::<Sideband>(),
        words.into(),
    ))
}

/// The answer `message` gives to the request `id`, if it is one.
fn answer_of(mut message: Value, id: &str) -> Option<Result<Value, ServiceError>> {
    if let Some(error) = message.get_mut("error") {
        let error = serde_json::from_value::<ErrorData>(error.take())
            .unwrap_or_else(|e| ErrorData::internal_error(format!("the server's error could not be read: {e}"), None));
        return Some(Err(ServiceError::McpError(error)));
    }
    if message.get("id").and_then(Value::as_str) != Some(id) {
        return None;
    }
    message.get_mut("result").map(|r| Ok(r.take()))
}

/// The answer to `id` among the events of an event stream read so far.
fn answer_in_events(seen: &[u8], id: &str) -> Option<Result<Value, ServiceError>> {
    in_events(seen, id, |_, message| answer_of(message, id))
}

/// The first of the complete events of an event stream read so far (`seen`)
/// whose data is a message with the id `id` and that `take` takes, given the
/// data and the message. Notifications and other requests on the stream are
/// not read.
pub(super) fn in_events<T>(seen: &[u8], id: &str, mut take: impl FnMut(&str, Value) -> Option<T>) -> Option<T> {
    let text = String::from_utf8_lossy(seen).replace("\r\n", "\n");
    let mut events: Vec<&str> = text.split("\n\n").collect();
    // The last piece may be an event still being written.
    events.pop();
    events.into_iter().find_map(|event| {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let data = data.join("\n");
        let message: Value = serde_json::from_str(&data).ok()?;
        if message.get("id").and_then(Value::as_str) != Some(id) {
            return None;
        }
        take(&data, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_result_as_written_or_the_servers_error() {
        let got = answer_of(json!({"jsonrpc": "2.0", "id": "s-1", "result": {"t": 0.7, "x-v": 1}}), "s-1");
        assert_eq!(got.unwrap().unwrap(), json!({"t": 0.7, "x-v": 1}));
        let got = answer_of(json!({"jsonrpc": "2.0", "id": "s-1", "error": {"code": -32602, "message": "no"}}), "s-1");
        match got.unwrap().unwrap_err() {
            ServiceError::McpError(e) => assert_eq!(e.code.0, -32602),
            other => panic!("{other:?}"),
        }
        assert!(answer_of(json!({"jsonrpc": "2.0", "id": "other", "result": {}}), "s-1").is_none());
    }

    #[test]
    fn on_a_stream_only_the_requests_own_answer_is_read() {
        let stream = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                      data: {\"jsonrpc\":\"2.0\",\"id\":\"s-2\",\"result\":{\"tools\":[]}}\n\n";
        assert_eq!(answer_in_events(stream.as_bytes(), "s-2").unwrap().unwrap(), json!({"tools": []}));
        assert!(answer_in_events(b"data: {\"jsonrpc\":\"2.0\",\"id\":\"s-2\",\"result\":{}}\n", "s-2").is_none());
    }

    #[test]
    fn the_headers_rmcp_sets_per_message_are_not_kept() {
        let seen = Seen::default();
        let mut headers = HashMap::new();
        headers.insert(HeaderName::from_static("mcp-protocol-version"), HeaderValue::from_static("2025-11-25"));
        headers.insert(HeaderName::from_static("mcp-method"), HeaderValue::from_static("tools/call"));
        headers.insert(HeaderName::from_static("mcp-param-city"), HeaderValue::from_static("x"));
        seen.post(&Some("abc".into()), &headers);
        seen.post(&None, &headers);
        let (session, kept) = seen.now();
        assert_eq!(session.as_deref(), Some("abc"));
        assert_eq!(kept.len(), 1);
        assert!(kept.contains_key(&HeaderName::from_static("mcp-protocol-version")));
    }
}
