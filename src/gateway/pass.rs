//! Pass-through calls (docs/design.md §14): a client's `tools/call` taken off the
//! stdio door's stream before rmcp reads it, and sent to the running server's
//! [`Link`] as bytes, its answer written back to the client the same way. The
//! arguments and the result are never decoded into rmcp's types and no task is
//! spawned: the call costs a parse of its envelope each way.
//!
//! Only the plain case passes through: a session that is open (initialized, or
//! opened by a request of the 2026-07-28 era), a tool whose route is known from
//! a catalog that is still current, a stdio server that is running, and nothing
//! in the parameters but `name`, `arguments` and `_meta` (whose progress token
//! is replaced by one of the link's, and which must fit the session's era: see
//! [`era_fits`]). Everything
//! else goes to rmcp and the long way (`session.rs`), which starts servers,
//! builds catalogs and relays progress. Both ways keep the same rules: a call
//! never waits in the authority's queue (G2), is answered when its server's
//! session ends (G4), is counted and traced, and a client's
//! `notifications/cancelled` reaches the server.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rmcp::model::{
    CallToolResponse, CallToolResult, ErrorCode, ErrorData, RequestId, ResultType,
};
use rmcp::service::ServiceError;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::aggregate::Gateway;
use super::member::Scope;
use super::session::{Opened, failed};
use crate::lifecycle::Generation;
use crate::metrics::CallOutcome;
use crate::process::session::wire::{Hook, Outbox};
use crate::process::session::{Answer, Link, Pending, Waiter, push_json_string};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a server is told that a pass-through call was cancelled.
const GONE: &str = "the gateway's client no longer waits for the answer";

/// The stdio door's hook: takes the calls that can pass through (see the module
/// comment) and the cancellations of those calls.
pub(crate) struct PassThrough {
    gateway: Arc<Gateway>,
    scope: Scope,
    opened: Arc<OnceLock<Opened>>,
    /// The door's way back to its client.
    out: Arc<Outbox>,
    /// Calls in flight, by the client's request id: where a cancellation goes.
    calls: Arc<Mutex<HashMap<RequestId, (Link, u64)>>>,
}

/// A JSON-RPC message from the client, as far as the hook reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Incoming<'a> {
    #[serde(borrow)]
    pub(super) jsonrpc: Cow<'a, str>,
    #[serde(default)]
    pub(super) id: Option<RequestId>,
    #[serde(borrow)]
    pub(super) method: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) params: Option<&'a RawValue>,
}

/// The parameters of a call that passes through: a name, arguments and `_meta`,
/// nothing else (a task, ... takes the long way).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallParams<'a> {
    #[serde(borrow)]
    pub(super) name: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", default)]
    pub(super) meta: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId")]
    request_id: RequestId,
}

/// What the answer's result says of itself.
#[derive(Deserialize, Default)]
struct ResultHead<'a> {
    #[serde(rename = "isError", default)]
    pub(super) is_error: Option<bool>,
    #[serde(rename = "_meta", borrow, default)]
    pub(super) meta: Option<&'a RawValue>,
    #[serde(rename = "resultType", borrow, default)]
    pub(super) result_type: Option<&'a RawValue>,
}

impl PassThrough {
    pub(crate) fn new(
        gateway: Arc<Gateway>,
        scope: Scope,
        opened: Arc<OnceLock<Opened>>,
        out: Arc<Outbox>,
    ) -> PassThrough {
        PassThrough {
            gateway,
            scope,
            opened,
            out,
            calls: Arc::default(),
        }
    }

    fn call(&mut self, id: RequestId, params: &RawValue) -> bool {
        let Some(opened) = self.opened.get() else {
            return false;
        };
        let Ok(params) = serde_json::from_str::<CallParams>(params.get()) else {
            return false;
        };
        let Some(route) = self.gateway.route_now(&self.scope, &params.name) else {
            return false;
        };
        let Some((server, reach)) = self.gateway.reach_now(route.server) else {
            return false;
        };
        let Some(link) = reach.session.link().cloned() else {
            return false;
        };
        let generation = reach.generation;
        let mut span = crate::trace::Call::begin(&params.name);
        span.server(&server);
        span.generation(generation);
        let mut meta = params.meta;
        if !era_fits(opened.modern, meta.as_mut()) {
            return false;
        }
        // The client's progress token is replaced by one of ours, unique to the
        // server, under which its progress comes back to this call.
        let client_token = meta.as_mut().and_then(|m| m.remove("progressToken"));
        let mut call = Call {
            modern: opened.modern,
            out: self.out.clone(),
            calls: self.calls.clone(),
            call: Answering {
                gateway: self.gateway.clone(),
                client_id: id,
                client_token,
                server,
                generation,
                started: Instant::now(),
                span,
                asking: None,
            },
        };
        let gateway = &self.gateway;
        let calls = &self.calls;
        let client = opened.peer.clone();
        let session = opened.id;
        let made = link.request("tools/call", |ours| {
            let token = Link::token(ours);
            if let Some(meta) = meta.as_mut()
                && call.call.client_token.is_some()
            {
                meta.insert("progressToken".into(), token.clone().into());
            }
            lock(calls).insert(call.call.client_id.clone(), (link.clone(), ours));
            // The server's requests of its client during the call go to this client.
            call.call.asking = Some(gateway.asking(
                route.server,
                RequestId::String(token.into()),
                client,
                call.call.client_id.clone(),
                session,
                None,
            ));
            // Written straight into the line to the server: the arguments are
            // copied once, as they came.
            let write_params =
                move |q: &mut Vec<u8>| push_call_params(q, &route.name, params.arguments, meta.as_ref());
            (write_params, Box::new(call) as Waiter)
        });
        made.is_some()
    }

    fn cancel(&mut self, params: &RawValue) -> bool {
        let Ok(params) = serde_json::from_str::<CancelParams>(params.get()) else {
            return false;
        };
        let Some((link, ours)) = lock(&self.calls).remove(&params.request_id) else {
            return false;
        };
        link.abandon(ours, GONE);
        true
    }

    /// A task request of protocol 2025-11-25 from a legacy session
    /// (`legacy_tasks.rs`): answered by a task of the gateway's, on the
    /// client's stream.
    ///
    /// A request that comes right after `notifications/initialized` may come
    /// before rmcp has opened the session: one that names no version of the
    /// 2026-07-28 era is a legacy session's, and waits for the opening.
    fn legacy_task(&mut self, id: &RequestId, method: &str, params: Option<&RawValue>) -> bool {
        let modern = match self.opened.get() {
            Some(opened) => opened.modern,
            None => params.is_some_and(|p| {
                memchr::memmem::find(p.get().as_bytes(), b"io.modelcontextprotocol/protocolVersion").is_some()
            }),
        };
        if modern || !super::legacy_tasks::claims(method, params) {
            return false;
        }
        let gateway = self.gateway.clone();
        let scope = self.scope.clone();
        let out = self.out.clone();
        let opened = self.opened.clone();
        let id = id.clone();
        let method = method.to_owned();
        let params = params.map(|p| p.to_owned());
        self.gateway.tasks().spawn(async move {
            let deadline = tokio::time::Instant::now() + super::bounds::INITIALIZED_TIMEOUT;
            let session = loop {
                if let Some(opened) = opened.get() {
                    break Some(opened.id);
                }
                if tokio::time::Instant::now() >= deadline {
                    break None;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            };
            let (answer, made) = match session {
                Some(session) => {
                    super::legacy_tasks::answer(&gateway, &scope, session, &method, params.as_deref()).await
                }
                None => (
                    Err(ErrorData::invalid_request(
                        format!("{method} before the session was initialized"),
                        None,
                    )),
                    None,
                ),
            };
            let mut line = super::legacy_tasks::reply(&id, &answer);
            line.push(b'\n');
            out.send_with(|q| q.extend_from_slice(&line));
            // The task's status notifications come after its answer.
            if let Some(made) = made {
                made.tell(&gateway);
            }
        });
        true
    }

    /// The client went away: nobody waits for its calls.
    fn abandon_all(&mut self) {
        let calls = std::mem::take(&mut *lock(&self.calls));
        for (_, (link, ours)) in calls {
            link.abandon(ours, GONE);
        }
    }
}

impl Hook for PassThrough {
    fn take(&mut self, line: &[u8]) -> bool {
        let call = memchr::memmem::find(line, b"\"tools/call\"").is_some();
        let cancel = !call && memchr::memmem::find(line, b"\"notifications/cancelled\"").is_some();
        let task = !call && !cancel && memchr::memmem::find(line, b"\"tasks/").is_some();
        if !call && !cancel && !task {
            return false;
        }
        let Ok(message) = serde_json::from_slice::<Incoming>(line) else {
            return false;
        };
        if let Some(id) = &message.id
            && self.legacy_task(id, &message.method, message.params)
        {
            return true;
        }
        match (&*message.method, message.id, message.params) {
            ("tools/call", Some(id), Some(params)) => self.call(id, params),
            ("notifications/cancelled", None, Some(params)) => self.cancel(params),
            _ => false,
        }
    }

    fn ended(&mut self) {
        self.abandon_all();
    }
}

impl Drop for PassThrough {
    fn drop(&mut self) {
        self.abandon_all();
    }
}

/// One pass-through call in flight: what its progress and answer need.
struct Call {
    /// The client is of the 2026-07-28 era.
    modern: bool,
    out: Arc<Outbox>,
    calls: Arc<Mutex<HashMap<RequestId, (Link, u64)>>>,
    call: Answering,
}

/// What the answer to a call sent straight to a server's [`Link`] needs, at
/// either door (the stdio pass-through here, the HTTP fast lane in `fast.rs`).
pub(super) struct Answering {
    pub(super) gateway: Arc<Gateway>,
    pub(super) client_id: RequestId,
    /// The progress token the client gave, if it gave one.
    pub(super) client_token: Option<serde_json::Value>,
    pub(super) server: String,
    pub(super) generation: Generation,
    pub(super) started: Instant,
    pub(super) span: crate::trace::Call,
    /// Where the server's requests during the call go, until it is answered.
    pub(super) asking: Option<super::desk::Asking>,
}

impl Pending for Call {
    /// The server's progress, to the client under the client's own token, in
    /// the order the server wrote it and before the answer.
    fn progress(&mut self, params: &RawValue) {
        let Some(params) = self.call.progress(params) else {
            return;
        };
        self.out.send_with(|q| {
            push_progress(q, &params);
            q.push(b'\n');
        });
    }

    fn answered(mut self: Box<Self>, answer: Answer<'_>) {
        self.call.asking = None;
        lock(&self.calls).remove(&self.call.client_id);
        let (outcome, is_error) = match &answer {
            // The client cancelled it: JSON-RPC wants no answer then.
            Answer::Abandoned => (CallOutcome::Cancelled, false),
            _ => {
                let answer_into = |q: &mut Vec<u8>| self.call.push_answer(q, &answer, self.modern);
                let mut how = None;
                self.reply(|q| how = Some(answer_into(q)));
                // The client's stream is closed: the call is counted all the same.
                how.unwrap_or_else(|| answer_into(&mut Vec::new()))
            }
        };
        self.call.count(outcome);
        self.call.end(&answer, is_error);
    }
}

impl Call {
    /// Writes the answer to the client: its id, then what `rest` appends.
    fn reply(&self, rest: impl FnOnce(&mut Vec<u8>)) {
        self.out.send_with(|q| {
            q.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            let _ = serde_json::to_writer(&mut *q, &self.call.client_id);
            rest(q);
            q.extend_from_slice(b"}\n");
        });
    }
}

/// The `_meta` keys of the 2026-07-28 era that a request carries to say who
/// sends it and what it can take (`io.modelcontextprotocol/protocolVersion`,
/// `clientCapabilities`, `clientInfo`, `logLevel`).
const RESERVED: &str = "io.modelcontextprotocol/";

/// Whether a call's `_meta` fits its session's era, so that it may pass
/// through; if so, the era's own keys are taken out of it, as the long way
/// takes them (the server behind speaks the legacy era). A 2026-07-28 session
/// passes only calls that name a version the gateway speaks and carry the
/// client's capabilities, declaring none of [`INPUT`] (a server's requests of
/// such a client become input-required results the long way), and no
/// `logLevel` (its server's log messages go to it the long way); a legacy
/// session only calls that name no version.
/// Anything else goes to rmcp, which answers it as the era says.
/// What a 2026-07-28 client declares it can give a server that asks it: a
/// call of such a client goes the long way, where the server's requests become
/// input-required results (docs/design.md §14, "Continuations").
const INPUT: [&str; 3] = ["sampling", "elicitation", "roots"];

pub(super) fn era_fits(modern: bool, meta: Option<&mut serde_json::Map<String, serde_json::Value>>) -> bool {
    let Some(meta) = meta else {
        return !modern;
    };
    let version = meta.get("io.modelcontextprotocol/protocolVersion");
    let fits = match modern {
        true => {
            version.and_then(|v| v.as_str()) == Some(rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
                && meta
                    .get("io.modelcontextprotocol/clientCapabilities")
                    .and_then(serde_json::Value::as_object)
                    .is_some_and(|caps| !INPUT.iter().any(|kind| caps.contains_key(*kind)))
                && !meta.contains_key("io.modelcontextprotocol/logLevel")
        }
        false => version.is_none(),
    };
    if fits {
        meta.retain(|key, _| !key.starts_with(RESERVED));
    }
    fits
}

/// Makes the result just written (the object that ends `q`) say
/// `"resultType":"complete"`, as a 2026-07-28 client reads every result.
fn mark_complete(q: &mut Vec<u8>) {
    if q.last() == Some(&b'}') {
        q.pop();
        let empty = q.iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        if !empty {
            q.push(b',');
        }
        q.extend_from_slice(b"\"resultType\":\"complete\"}");
    }
}

/// The server's result with `_meta` naming the server and generation that
/// answered, as the long way adds them (`gateway.meta`).
fn with_meta(q: &mut Vec<u8>, result: &RawValue, has_meta: bool, server: &str, generation: Generation) {
    let text = result.get().trim_start();
    if !has_meta && let Some(rest) = text.strip_prefix('{') {
        q.extend_from_slice(b"{\"_meta\":{\"mcpfleet/server\":");
        push_json_string(q, server);
        q.extend_from_slice(b",\"mcpfleet/generation\":");
        q.extend_from_slice(generation.to_string().as_bytes());
        q.push(b'}');
        if !rest.trim_start().starts_with('}') {
            q.push(b',');
        }
        q.extend_from_slice(rest.as_bytes());
        return;
    }
    let mut value: serde_json::Map<String, serde_json::Value> =
        match serde_json::from_str(text) {
            Ok(v) => v,
            // Not an object: passed on as the server wrote it.
            Err(_) => {
                q.extend_from_slice(text.as_bytes());
                return;
            }
        };
    let meta = value
        .entry("_meta")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("mcpfleet/server".into(), server.into());
        meta.insert("mcpfleet/generation".into(), generation.into());
    }
    let _ = serde_json::to_writer(&mut *q, &value);
}


/// Writes a call's parameters for the server: its `name` there, the
/// client's `arguments` copied as they came, and `_meta`.
pub(super) fn push_call_params(
    q: &mut Vec<u8>,
    name: &str,
    arguments: Option<&RawValue>,
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) {
    q.extend_from_slice(b"{\"name\":");
    push_json_string(q, name);
    if let Some(arguments) = arguments {
        q.extend_from_slice(b",\"arguments\":");
        q.extend_from_slice(arguments.get().as_bytes());
    }
    if let Some(meta) = meta {
        q.extend_from_slice(b",\"_meta\":");
        let _ = serde_json::to_writer(&mut *q, meta);
    }
    q.push(b'}');
}

/// Writes a `notifications/progress` message with `params`.
pub(super) fn push_progress(q: &mut Vec<u8>, params: &serde_json::Map<String, serde_json::Value>) {
    q.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":");
    let _ = serde_json::to_writer(&mut *q, params);
    q.push(b'}');
}

impl Answering {
    /// The server's progress `params` under the client's own token; none when
    /// the client gave no token or the parameters are not an object.
    pub(super) fn progress(&self, params: &RawValue) -> Option<serde_json::Map<String, serde_json::Value>> {
        let token = self.client_token.as_ref()?;
        let mut params =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(params.get()).ok()?;
        params.insert("progressToken".into(), token.clone());
        Some(params)
    }

    /// Writes what follows the client's id in the answer to the call: the
    /// server's result (with `_meta` naming the server and generation when
    /// the gateway adds them, marked complete for a `modern` client) or its
    /// error, or the error of a session that ended first; nothing for an
    /// abandoned call. Says how the call went and whether the result is an
    /// error.
    pub(super) fn push_answer(&self, q: &mut Vec<u8>, answer: &Answer<'_>, modern: bool) -> (CallOutcome, bool) {
        let (server, generation) = (self.server.as_str(), self.generation);
        match answer {
            Answer::Result(result) => {
                let head: ResultHead = serde_json::from_str(result.get()).unwrap_or_default();
                let is_error = head.is_error == Some(true);
                q.extend_from_slice(b",\"result\":");
                if self.gateway.meta() {
                    with_meta(q, result, head.meta.is_some(), server, generation);
                } else {
                    q.extend_from_slice(result.get().as_bytes());
                }
                if modern && head.result_type.is_none() {
                    mark_complete(q);
                }
                let outcome = match is_error {
                    true => CallOutcome::Error,
                    false => CallOutcome::Ok,
                };
                (outcome, is_error)
            }
            Answer::Error(error) => {
                q.extend_from_slice(b",\"error\":");
                q.extend_from_slice(error.get().as_bytes());
                (CallOutcome::Failed, false)
            }
            Answer::Ended => {
                let error = failed(server, generation, ServiceError::TransportClosed);
                q.extend_from_slice(b",\"error\":");
                let _ = serde_json::to_writer(&mut *q, &error);
                (CallOutcome::Failed, false)
            }
            Answer::Abandoned => (CallOutcome::Cancelled, false),
        }
    }

    /// Counts the call in the gateway's metrics.
    pub(super) fn count(&self, outcome: CallOutcome) {
        self.gateway
            .metrics
            .called(&self.server, outcome, self.started.elapsed());
    }

    /// Ends the call's trace with what its answer says, as the long way ends it.
    pub(super) fn end(self, answer: &Answer<'_>, is_error: bool) {
        let (server, generation) = (self.server, self.generation);
        self.span.end_with(|| match answer {
            Answer::Result(_) => {
                let mut result = CallToolResult::default();
                result.is_error = Some(is_error);
                result.result_type = Some(ResultType::COMPLETE);
                Ok(CallToolResponse::Complete(result))
            }
            Answer::Error(error) => Err(serde_json::from_str(error.get()).unwrap_or_else(|_| {
                ErrorData::internal_error("the server's error could not be read", None)
            })),
            Answer::Ended => Err(failed(&server, generation, ServiceError::TransportClosed)),
            Answer::Abandoned => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "cancelled by the client",
                None,
            )),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_of(result: &str) -> serde_json::Value {
        let raw = RawValue::from_string(result.to_owned()).unwrap();
        let head: ResultHead = serde_json::from_str(raw.get()).unwrap();
        let mut q = Vec::new();
        with_meta(&mut q, &raw, head.meta.is_some(), "time", 7);
        serde_json::from_slice(&q).unwrap()
    }

    fn map(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_call_passes_through_only_with_the_meta_of_its_sessions_era_and_without_its_keys() {
        let modern = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "progressToken": 3,
        });
        let mut meta = map(modern.clone());
        assert!(era_fits(true, Some(&mut meta)));
        assert_eq!(serde_json::Value::Object(meta), serde_json::json!({"progressToken": 3}));
        // A call that asks for its server's log messages takes the long way.
        let mut logged = map(modern.clone());
        logged.insert("io.modelcontextprotocol/logLevel".into(), "info".into());
        assert!(!era_fits(true, Some(&mut logged)));
        // A legacy session's calls name no version; a modern one's must.
        assert!(!era_fits(false, Some(&mut map(modern.clone()))));
        assert!(era_fits(false, Some(&mut map(serde_json::json!({"progressToken": 1})))));
        assert!(era_fits(false, None));
        assert!(!era_fits(true, None));
        let mut other = map(modern.clone());
        other.insert("io.modelcontextprotocol/protocolVersion".into(), "2099-01-01".into());
        assert!(!era_fits(true, Some(&mut other)));
        let mut bare = map(modern);
        bare.remove("io.modelcontextprotocol/clientCapabilities");
        assert!(!era_fits(true, Some(&mut bare)));
    }

    #[test]
    fn a_result_is_marked_complete_for_a_modern_client() {
        for (result, expected) in [
            ("{}", serde_json::json!({"resultType": "complete"})),
            (r#"{"content":[]}"#, serde_json::json!({"content": [], "resultType": "complete"})),
        ] {
            let mut q = result.as_bytes().to_vec();
            mark_complete(&mut q);
            assert_eq!(serde_json::from_slice::<serde_json::Value>(&q).unwrap(), expected);
        }
    }

    #[test]
    fn the_result_gets_the_server_and_generation_in_its_meta_and_keeps_the_rest() {
        let meta = serde_json::json!({"mcpfleet/server": "time", "mcpfleet/generation": 7});
        assert_eq!(meta_of("{}"), serde_json::json!({"_meta": meta}));
        assert_eq!(
            meta_of(r#" { "content": [{"type":"text","text":"x"}], "isError": false }"#),
            serde_json::json!({"_meta": meta, "content": [{"type":"text","text":"x"}], "isError": false})
        );
        assert_eq!(
            meta_of(r#"{"content":[],"_meta":{"own":1}}"#),
            serde_json::json!({"content": [], "_meta": {"own": 1, "mcpfleet/server": "time", "mcpfleet/generation": 7}})
        );
    }
}
