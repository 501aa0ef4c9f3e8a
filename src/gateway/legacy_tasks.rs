//! Tasks of protocol 2025-11-25 through the gateway (docs/design.md §14,
//! "Tasks"), for a client of the legacy era: a `tools/call` with a `task`
//! param, `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list`, and the
//! servers' `notifications/tasks/status`. rmcp models none of these (its
//! `CallToolRequestParams` has no `task`, and its `tasks/get` is the tasks
//! extension's), so both doors take such requests off the client's stream
//! before rmcp reads them and answer them here, as JSON; the server is asked
//! beside rmcp too (a stdio server's link, a remote server's side requests:
//! [`Lane`]), and what it answers is passed on as written but for the task
//! ids. A task id the client sees names the server and the generation that
//! made the task, as the extension's do ([`Handle`]), so that a task request
//! goes back to that generation with the server's own id; forged ids and ids
//! of an ended generation are -32602. `tasks/list` is every task of the
//! session's servers that list theirs, paged by the gateway.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ErrorData, JsonObject};
use rmcp::service::ServiceError;
use serde_json::{Value, json};
use serde_json::value::RawValue;

use super::aggregate::Gateway;
use super::catalog::Lane;
use super::member::Scope;
use super::tasks::{Handle, ended, unknown};
use crate::metrics::CallOutcome;

/// The methods of 2025-11-25 tasks.
const METHODS: [&str; 4] = ["tasks/get", "tasks/result", "tasks/cancel", "tasks/list"];

/// The `_meta` key that names a result's task.
const RELATED: &str = "io.modelcontextprotocol/related-task";

/// The cursor of a page of `tasks/list` after the first.
const CURSOR: &str = "mcpfleet-tasks-";

/// At most this many pages of one server's `tasks/list` are read.
const SERVER_PAGES: usize = 100;

/// Whether a legacy client's request is one of these: a task method, or a
/// `tools/call` whose params hold a `task`. Reads no more than it must.
pub(crate) fn claims(method: &str, params: Option<&RawValue>) -> bool {
    if METHODS.contains(&method) {
        return true;
    }
    if method != "tools/call" {
        return false;
    }
    let Some(params) = params else {
        return false;
    };
    if memchr::memmem::find(params.get().as_bytes(), b"\"task\"").is_none() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        task: Option<&'a RawValue>,
    }
    serde_json::from_str::<Head>(params.get()).is_ok_and(|h| h.task.is_some())
}

/// The answer to a legacy client's task request (one [`claims`]) from
/// session `session`, which sees the servers of `scope`.
///
/// A task the answer hands out is [`Made`]: the door tells the gateway once
/// the answer is on its way ([`Made::tell`]), so that the task's status
/// notifications follow the answer.
pub(crate) async fn answer(
    gateway: &Arc<Gateway>,
    scope: &Scope,
    session: u64,
    method: &str,
    params: Option<&RawValue>,
) -> (Result<Value, ErrorData>, Option<Made>) {
    let params: JsonObject = match params {
        Some(params) => match serde_json::from_str(params.get()) {
            Ok(params) => params,
            Err(e) => {
                let error = ErrorData::invalid_params(format!("{method}: params must be an object: {e}"), None);
                return (Err(error), None);
            }
        },
        None => JsonObject::new(),
    };
    match method {
        "tools/call" => match call(gateway, scope, session, params).await {
            Ok((result, made)) => (Ok(result), made),
            Err(e) => (Err(e), None),
        },
        "tasks/list" => (list(gateway, scope, params).await, None),
        _ => (routed(gateway, scope, method, params).await, None),
    }
}

/// A task a server made for a session, under the handle the session was given.
pub(crate) struct Made {
    server: usize,
    task: String,
    handle: String,
    session: u64,
}

impl Made {
    /// Tells the gateway's task, which sends the task's status notifications
    /// to the session from now on (and those heard before).
    pub(crate) fn tell(self, gateway: &Gateway) {
        gateway.task_made(self.server, self.task, self.handle, self.session);
    }
}

/// A task's server and generation, its name, and its lane, if the client
/// could have been given `handle` and that generation still runs.
fn reach(gateway: &Gateway, scope: &Scope, handle: &str) -> Result<(Handle, String, Lane), ErrorData> {
    let of = Handle::decode(handle)?;
    let seen = scope.as_ref().is_none_or(|s| s.contains(&of.server));
    let Some(member) = gateway.member(of.server).filter(|_| seen) else {
        return Err(unknown(handle));
    };
    let server = member.handle.name().to_owned();
    match member.handle.reach() {
        // A server that declared no tasks made none.
        Some(reach)
            if reach.generation == of.generation && reach.session.tasks_capability().is_some() =>
        {
            match Lane::legacy(&reach.session) {
                Some(lane) => Ok((of, server, lane)),
                None => Err(unknown(handle)),
            }
        }
        Some(reach) if reach.generation == of.generation => Err(unknown(handle)),
        other => Err(ended(handle, &server, &of, other.map(|r| r.generation))),
    }
}

/// `tasks/get`, `tasks/result`, `tasks/cancel`: to the generation that made
/// the task, with the server's own id; its answer with the client's.
async fn routed(gateway: &Gateway, scope: &Scope, method: &str, mut params: JsonObject) -> Result<Value, ErrorData> {
    let Some(Value::String(handle)) = params.remove("taskId") else {
        return Err(ErrorData::invalid_params(format!("{method} needs a string taskId"), None));
    };
    let (of, server, lane) = reach(gateway, scope, &handle)?;
    params.insert("taskId".into(), of.task.clone().into());
    let mut result = lane
        .request(method, params)
        .await
        .map_err(|e| super::session::failed(&server, of.generation, e))?;
    rename(&mut result, &of, &handle);
    Ok(result)
}

/// Puts `handle` in place of the server's own task id in `result`: a task's
/// `taskId`, and the task a result's `_meta` names.
fn rename(result: &mut Value, of: &Handle, handle: &str) {
    if result.get("taskId").and_then(Value::as_str) == Some(of.task.as_str()) {
        result["taskId"] = handle.into();
    }
    if let Some(related) = result.pointer_mut(&format!("/_meta/{}", RELATED.replace('/', "~1")))
        && related.get("taskId").and_then(Value::as_str) == Some(of.task.as_str())
    {
        related["taskId"] = handle.into();
    }
}

/// A `tools/call` with a `task`: to the server that offers the tool, as the
/// client wrote it but for the tool's name; a task it makes is named for the
/// client, and its status notifications go to this session.
/// Counted as a call of the tool's server (`mcpfleet_gateway_calls_total`).
async fn call(
    gateway: &Arc<Gateway>,
    scope: &Scope,
    session: u64,
    mut params: JsonObject,
) -> Result<(Value, Option<Made>), ErrorData> {
    let Some(Value::String(name)) = params.get("name").cloned() else {
        return Err(ErrorData::invalid_params("tools/call needs a string name", None));
    };
    let catalog = gateway.tools(scope, false).await;
    let Some(route) = catalog.1.route(&name).cloned() else {
        return Err(ErrorData::invalid_params(format!("unknown tool `{name}`"), None));
    };
    let server = gateway
        .member(route.server)
        .map_or_else(String::new, |m| m.handle.name().to_owned());
    let (generation, _) = gateway
        .running(route.server)
        .await
        .map_err(|e| super::session::unavailable(&server, None, &e))?;
    let lane = gateway
        .member(route.server)
        .and_then(|m| m.handle.reach())
        .filter(|r| r.generation == generation)
        .and_then(|r| Lane::legacy(&r.session))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "tool `{name}`: server `{server}` is not spoken to in protocol 2025-11-25, whose tasks this call asks for"
                ),
                Some(json!({ "server": server })),
            )
        })?;
    params.insert("name".into(), route.name.clone().into());
    let started = std::time::Instant::now();
    let answered = lane.request("tools/call", params).await;
    let outcome = match &answered {
        Ok(result) if result.get("isError") == Some(&Value::Bool(true)) => CallOutcome::Error,
        Ok(_) => CallOutcome::Ok,
        Err(_) => CallOutcome::Failed,
    };
    gateway.metrics.called(&server, outcome, started.elapsed());
    let mut result = answered.map_err(|e| super::session::failed(&server, generation, e))?;
    let mut made = None;
    if let Some(Value::String(task)) = result.pointer("/task/taskId").cloned() {
        let of = Handle {
            server: route.server,
            generation,
            task,
        };
        let handle = of.encode();
        result["task"]["taskId"] = handle.clone().into();
        made = Some(Made {
            server: route.server,
            task: of.task,
            handle,
            session,
        });
    }
    Ok((result, made))
}

/// `tasks/list`: every task of the session's running servers of the legacy
/// era that list theirs (a stdio server that declared no tasks is not asked;
/// a server that answers with an error is left out),
/// named for the client, paged by the gateway's page size.
async fn list(gateway: &Gateway, scope: &Scope, params: JsonObject) -> Result<Value, ErrorData> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(cursor)) => cursor
            .strip_prefix(CURSOR)
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor `{cursor}`"), None))?,
        Some(_) => return Err(ErrorData::invalid_params("the cursor must be a string", None)),
    };
    let mut tasks = Vec::new();
    let members = gateway.members();
    for (index, member) in members.iter().enumerate() {
        let Some(member) = member else { continue };
        if scope.as_ref().is_some_and(|s| !s.contains(&index)) {
            continue;
        }
        let Some(reach) = member.handle.reach() else { continue };
        // A server that declared no tasks is not asked.
        if reach.session.tasks_capability().is_none() {
            continue;
        }
        let Some(lane) = Lane::legacy(&reach.session) else { continue };
        match server_tasks(&lane).await {
            Ok(listed) => tasks.extend(listed.into_iter().filter_map(|mut task| {
                let own = task.get("taskId")?.as_str()?.to_owned();
                let handle = Handle {
                    server: index,
                    generation: reach.generation,
                    task: own,
                }
                .encode();
                task["taskId"] = handle.into();
                Some(task)
            })),
            Err(e) => tracing::debug!(server = member.handle.name(), error = %e, "tasks/list not answered"),
        }
    }
    if start > tasks.len() {
        return Err(ErrorData::invalid_params(format!("invalid cursor `{CURSOR}{start}`"), None));
    }
    let end = start.saturating_add(gateway.page_size().max(1)).min(tasks.len());
    let mut result = json!({ "tasks": tasks[start..end] });
    if end < tasks.len() {
        result["nextCursor"] = format!("{CURSOR}{end}").into();
    }
    Ok(result)
}

/// Every task one server lists, page after page (at most [`SERVER_PAGES`]).
async fn server_tasks(lane: &Lane) -> Result<Vec<Value>, ServiceError> {
    let mut tasks = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..SERVER_PAGES {
        let mut params = JsonObject::new();
        if let Some(cursor) = cursor.take() {
            params.insert("cursor".into(), cursor.into());
        }
        let mut page = lane.request("tasks/list", params).await?;
        if let Some(Value::Array(listed)) = page.get_mut("tasks").map(Value::take) {
            tasks.extend(listed);
        }
        match page.get("nextCursor") {
            Some(Value::String(next)) if !next.is_empty() => cursor = Some(next.clone()),
            _ => break,
        }
    }
    Ok(tasks)
}

/// The `tasks` capability of protocol 2025-11-25 a legacy session that sees
/// the servers of `scope` is told: what the running ones declared, merged
/// (in their answers to `initialize`, over stdio or HTTP).
pub(crate) fn declared(gateway: &Gateway, scope: &Scope) -> Option<JsonObject> {
    let mut merged: Option<JsonObject> = None;
    for (index, member) in gateway.members().iter().enumerate() {
        let Some(member) = member else { continue };
        if scope.as_ref().is_some_and(|s| !s.contains(&index)) {
            continue;
        }
        let Some(reach) = member.handle.reach() else { continue };
        let Some(tasks) = reach.session.tasks_capability() else {
            continue;
        };
        merge(merged.get_or_insert_with(JsonObject::new), tasks);
    }
    merged
}

/// `from` merged into `into`: every key of either, objects merged in turn.
fn merge(into: &mut JsonObject, from: JsonObject) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(mine)), Value::Object(theirs)) => merge(mine, theirs),
            (Some(_), _) => {}
            (None, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// A legacy session's answer to `initialize` with the `tasks` capability its
/// servers declare ([`declared`]); `None` when they declare none, or when
/// `message` is not such an answer.
pub(crate) fn initialized(
    gateway: &Gateway,
    scope: &Scope,
    message: &rmcp::model::ServerJsonRpcMessage,
) -> Option<rmcp::model::ServerJsonRpcMessage> {
    use rmcp::model::{CustomResult, JsonRpcMessage, JsonRpcResponse, ServerResult};
    let JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id,
        result: ServerResult::InitializeResult(result),
    }) = message
    else {
        return None;
    };
    if !result.protocol_version.has_initialize() {
        return None;
    }
    let tasks = declared(gateway, scope)?;
    let mut written = serde_json::to_value(result).ok()?;
    written.get_mut("capabilities")?.as_object_mut()?.insert("tasks".into(), Value::Object(tasks));
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: *jsonrpc,
        id: id.clone(),
        result: ServerResult::CustomResult(CustomResult(written)),
    }))
}

/// A JSON-RPC message from a client, as far as [`message`] reads it.
#[derive(serde::Deserialize)]
struct Incoming<'a> {
    #[serde(default)]
    id: Option<rmcp::model::RequestId>,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// The answer to `body`, one JSON-RPC request of a legacy session
/// `session`, when it is a task request (one [`claims`]): the answer's bytes.
/// The HTTP door's way in; the stdio door's is its pass-through hook.
pub(crate) async fn message(gateway: &Arc<Gateway>, scope: &Scope, session: u64, body: &[u8]) -> Option<Vec<u8>> {
    if !may_claim(body) {
        return None;
    }
    let incoming = serde_json::from_slice::<Incoming>(body).ok()?;
    let id = incoming.id?;
    if !claims(&incoming.method, incoming.params) {
        return None;
    }
    let (answer, made) = answer(gateway, scope, session, &incoming.method, incoming.params).await;
    let reply = reply(&id, &answer);
    if let Some(made) = made {
        made.tell(gateway);
    }
    Some(reply)
}

/// Whether `body` may be a task request at all: one scan or two, nothing
/// parsed.
pub(crate) fn may_claim(body: &[u8]) -> bool {
    memchr::memmem::find(body, b"\"tasks/").is_some() || memchr::memmem::find(body, b"\"task\"").is_some()
}

/// The JSON-RPC answer to request `id`.
pub(crate) fn reply(id: &rmcp::model::RequestId, answer: &Result<Value, ErrorData>) -> Vec<u8> {
    let message = match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    serde_json::to_vec(&message).unwrap_or_default()
}

/// How long, and how many, status notifications are kept that came before
/// the gateway learned which session made their task (a server may send one
/// the moment it answers).
const EARLY_FOR: Duration = Duration::from_secs(5);
const EARLY_KEPT: usize = 256;
/// The most tasks whose status is routed at once; beyond it, the oldest go.
const ROUTED: usize = 4096;

/// Which session made each server's task, and under what handle: owned by
/// the gateway's task (`desk/task.rs`).
#[derive(Default)]
pub(crate) struct Statuses {
    /// By server and its own task id: the handle and the session.
    routes: HashMap<(usize, String), (String, u64)>,
    /// The order the routes were made, oldest first.
    order: VecDeque<(usize, String)>,
    /// Statuses heard before their route.
    early: VecDeque<(Instant, usize, JsonObject)>,
}

impl Statuses {
    /// Server `server`'s task `task` was made for `session` as `handle`: the
    /// statuses of it heard before, for that session, named for it.
    pub(crate) fn made(&mut self, server: usize, task: String, handle: String, session: u64) -> Vec<JsonObject> {
        let key = (server, task);
        if self.routes.len() >= ROUTED
            && let Some(oldest) = self.order.pop_front()
        {
            self.routes.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.routes.insert(key.clone(), (handle.clone(), session));
        let mut early = Vec::new();
        self.early.retain(|(_, from, params)| {
            let ours = *from == server && params.get("taskId").and_then(Value::as_str) == Some(key.1.as_str());
            if ours {
                let mut params = params.clone();
                params.insert("taskId".into(), handle.clone().into());
                early.push(params);
            }
            !ours
        });
        early
    }

    /// A status notification of server `server`: the session it goes to, and
    /// its params named for that session; kept a little when no route is
    /// known yet.
    pub(crate) fn heard(&mut self, server: usize, mut params: JsonObject) -> Option<(u64, JsonObject)> {
        let task = params.get("taskId").and_then(Value::as_str)?.to_owned();
        let Some((handle, session)) = self.routes.get(&(server, task)) else {
            let now = Instant::now();
            while self.early.len() >= EARLY_KEPT || self.early.front().is_some_and(|(at, _, _)| *at + EARLY_FOR < now) {
                self.early.pop_front();
            }
            self.early.push_back((now, server, params));
            return None;
        };
        let session = *session;
        params.insert("taskId".into(), handle.clone().into());
        Some((session, params))
    }

    /// Session `session` closed: its tasks' statuses go nowhere.
    pub(crate) fn forget(&mut self, session: u64) {
        self.routes.retain(|_, (_, s)| *s != session);
        let routes = &self.routes;
        self.order.retain(|key| routes.contains_key(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn task_methods_and_calls_with_a_task_are_claimed() {
        for method in METHODS {
            assert!(claims(method, None), "{method}");
        }
        assert!(claims("tools/call", Some(&raw(r#"{"name":"a","task":{"ttl":1}}"#))));
        assert!(!claims("tools/call", Some(&raw(r#"{"name":"a","arguments":{"task":1}}"#))));
        assert!(!claims("tools/call", Some(&raw(r#"{"name":"task"}"#))));
        assert!(!claims("tools/call", None));
        assert!(!claims("tasks/update", None));
    }

    #[test]
    fn capabilities_merge_key_by_key() {
        let mut into = json!({"list": {}, "requests": {"tools": {"call": {}}}}).as_object().unwrap().clone();
        let from = json!({"cancel": {}, "requests": {"sampling": {"createMessage": {}}}}).as_object().unwrap().clone();
        merge(&mut into, from);
        assert_eq!(
            Value::Object(into),
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}, "sampling": {"createMessage": {}}}})
        );
    }

    #[test]
    fn a_results_task_ids_are_the_clients() {
        let of = Handle {
            server: 2,
            generation: 5,
            task: "t-1".into(),
        };
        let mut result = json!({"taskId": "t-1", "_meta": {RELATED: {"taskId": "t-1"}, "other": 1}});
        rename(&mut result, &of, "2.5.t-1");
        assert_eq!(result, json!({"taskId": "2.5.t-1", "_meta": {RELATED: {"taskId": "2.5.t-1"}, "other": 1}}));
    }

    #[test]
    fn a_status_goes_to_the_session_that_made_the_task_even_when_heard_first() {
        let mut statuses = Statuses::default();
        let status = |id: &str| json!({"taskId": id, "status": "completed"}).as_object().unwrap().clone();
        // Heard before the route: kept, and handed over when it is made.
        assert_eq!(statuses.heard(1, status("t-1")), None);
        let early = statuses.made(1, "t-1".into(), "1.3.t-1".into(), 7);
        assert_eq!(early, vec![status("1.3.t-1")]);
        let (session, params) = statuses.heard(1, status("t-1")).unwrap();
        assert_eq!((session, params), (7, status("1.3.t-1")));
        // Another server's task of the same id is not this one.
        assert_eq!(statuses.heard(2, status("t-1")), None);
        statuses.forget(7);
        assert_eq!(statuses.heard(1, status("t-1")), None);
    }
}
