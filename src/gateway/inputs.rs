//! A legacy server's requests of its client (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`) made during the call of a client of the
//! 2026-07-28 era, which cannot be sent requests: the client's call is answered
//! with an input-required result that carries the server's requests, while the
//! server's call stays in flight here, parked under a `requestState` the
//! gateway hands out; the client's retry with that state and its answers
//! answers the server's requests and takes the call up again (docs/design.md
//! §14, "Continuations").
//!
//! [`Inlet`] is what `relay.rs` hands such a request to: the call's own
//! channel, which the call (`session/call.rs`) reads. [`Inputs`] is the table
//! of parked calls: at most [`Bounds::max`], each for at most [`Bounds::ttl`];
//! one that expires has the server's requests answered with an error and its
//! call dropped, which tells the server it is cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use rmcp::model::{ClientCapabilities, ClientResult, ErrorData, InputRequest, InputRequests};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::journal::Journal;
use super::member::Scope;

/// How many parked calls and for how long (docs/design.md §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// How long a parked call waits for the client's retry.
    pub ttl: Duration,
    /// How many calls may be parked at once; the call that would be one more
    /// is answered with an error and cancelled at its server.
    pub max: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            ttl: Duration::from_secs(60),
            max: 256,
        }
    }
}

impl Bounds {
    /// The environment's bounds (`MCPFLEET_INPUT_TTL`, a duration such as
    /// `30s`, and `MCPFLEET_INPUT_MAX`, a count), each from 1 up; the
    /// defaults for what is not set, and an error naming a value that is
    /// not one.
    pub(crate) fn from_env() -> Result<Bounds, String> {
        Bounds::read(std::env::var(TTL_VAR).ok(), std::env::var(MAX_VAR).ok())
    }

    /// The bounds `ttl` and `max` say (the values of [`TTL_VAR`] and
    /// [`MAX_VAR`]).
    fn read(ttl: Option<String>, max: Option<String>) -> Result<Bounds, String> {
        let mut bounds = Bounds::default();
        if let Some(text) = ttl {
            bounds.ttl = humantime::parse_duration(text.trim())
                .ok()
                .filter(|d| *d >= Duration::from_millis(1) && *d <= Duration::from_secs(3600))
                .ok_or_else(|| {
                    format!("{TTL_VAR}: `{text}` is not a duration from 1ms to 1h (such as `60s`)")
                })?;
        }
        if let Some(text) = max {
            bounds.max = text
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=65_536).contains(n))
                .ok_or_else(|| format!("{MAX_VAR}: `{text}` is not a whole number from 1 to 65536"))?;
        }
        Ok(bounds)
    }
}

/// The variable that sets [`Bounds::ttl`].
pub(crate) const TTL_VAR: &str = "MCPFLEET_INPUT_TTL";
/// The variable that sets [`Bounds::max`].
pub(crate) const MAX_VAR: &str = "MCPFLEET_INPUT_MAX";

/// What every `requestState` the gateway hands out starts with.
const PREFIX: &str = "mcpfleet1.";

/// A server's request of its client, waiting for the client of a 2026-07-28
/// call to answer it.
pub(super) struct Question {
    /// `{"method", "params"}`, the params as the server wrote them where the
    /// gateway saw its bytes.
    pub(super) request: Value,
    answer: oneshot::Sender<Result<ClientResult, ErrorData>>,
}

impl Question {
    /// Answers the server's request.
    pub(super) fn answer(self, answer: Result<ClientResult, ErrorData>) {
        let _ = self.answer.send(answer);
    }

    /// Answers the server's request with what the client answered under its
    /// key (`None`: nothing), read as the result of the request's method.
    pub(super) fn answer_with(self, key: &str, answer: Option<&Value>) {
        let method = self.request.get("method").and_then(Value::as_str).unwrap_or_default();
        let Some(answer) = answer else {
            let why = format!("the client sent no answer to `{method}` under `{key}` of its inputResponses");
            return self.answer(Err(ErrorData::invalid_params(why, None)));
        };
        let read = match method {
            "roots/list" => serde_json::from_value(answer.clone()).map(ClientResult::ListRootsResult),
            "sampling/createMessage" => serde_json::from_value(answer.clone())
                .map(|r| ClientResult::CreateMessageResult(Box::new(r))),
            "elicitation/create" => serde_json::from_value(answer.clone()).map(ClientResult::ElicitResult),
            _ => Ok(ClientResult::CustomResult(rmcp::model::CustomResult(answer.clone()))),
        };
        let answer = read.map_err(|e| {
            ErrorData::invalid_params(format!("the client's answer to `{method}` under `{key}` is not one: {e}"), None)
        });
        self.answer(answer);
    }
}

/// Where a legacy server's requests during a 2026-07-28 client's call go: to
/// that call, which parks itself until the client answers them.
#[derive(Clone)]
pub(super) struct Inlet {
    /// What the client declared in its request's `_meta`.
    pub(super) caps: ClientCapabilities,
    tx: mpsc::Sender<Question>,
}

impl Inlet {
    /// The inlet of a call whose client declared `caps`, and what the call reads.
    pub(super) fn new(caps: ClientCapabilities) -> (Inlet, mpsc::Receiver<Question>) {
        let (tx, rx) = mpsc::channel(QUEUED);
        (Inlet { caps, tx }, rx)
    }

    /// Puts server `server`'s request (`method`, its params `params`) to the
    /// call, and waits for the client's answer, or for the server to cancel
    /// its request.
    pub(super) async fn ask(
        &self,
        server: &str,
        method: &str,
        params: Option<Value>,
        cancelled: &CancellationToken,
    ) -> Result<ClientResult, ErrorData> {
        let mut request = json!({ "method": method });
        if let Some(params) = params {
            request["params"] = params;
        }
        let (answer, answered) = oneshot::channel();
        let ended = || {
            ErrorData::internal_error(
                format!("server `{server}` asked `{method}` for a call that has ended"),
                None,
            )
        };
        let put = tokio::select! {
            put = self.tx.send(Question { request, answer }) => put,
            () = cancelled.cancelled() => return Err(ErrorData::internal_error(format!("server `{server}` cancelled its request"), None)),
        };
        put.map_err(|_| ended())?;
        tokio::select! {
            answer = answered => answer.unwrap_or_else(|_| Err(ended())),
            () = cancelled.cancelled() => Err(ErrorData::internal_error(format!("server `{server}` cancelled its request"), None)),
        }
    }
}

/// How many of a server's requests wait for its call to read them.
const QUEUED: usize = 16;

/// Who may take a parked call up again: the door, the client session (over
/// stdio, where one process is one client; 0 over HTTP, where every request
/// with the door's token is the same principal), the servers it sees, and
/// the request it made (method and tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Binding {
    pub(super) door: &'static str,
    pub(super) session: u64,
    pub(super) scope: Scope,
    pub(super) method: &'static str,
    pub(super) name: String,
}

/// A parked call: the server's requests the client is to answer, under the
/// keys of the input-required result, and the call itself.
pub(super) struct Parked {
    pub(super) binding: Binding,
    /// The server's name, for the gateway's log.
    pub(super) server: String,
    pub(super) questions: Vec<(String, Question)>,
    /// The call in flight (`session/call.rs`'s); dropped, it cancels the call
    /// at the server.
    pub(super) flight: Box<dyn std::any::Any + Send>,
    deadline: Instant,
}

impl Parked {
    pub(super) fn new(
        binding: Binding,
        server: String,
        questions: Vec<(String, Question)>,
        flight: Box<dyn std::any::Any + Send>,
    ) -> Parked {
        Parked {
            binding,
            server,
            questions,
            flight,
            deadline: Instant::now(),
        }
    }

    /// The input-required result's `inputRequests`: each question as its
    /// server asked it. One that is not a request a client can be asked is
    /// answered with an error at once.
    pub(super) fn input_requests(&mut self) -> InputRequests {
        let mut requests = InputRequests::new();
        let mut kept = Vec::new();
        for (key, question) in self.questions.drain(..) {
            match serde_json::from_value::<InputRequest>(question.request.clone()) {
                Ok(request) => {
                    requests.insert(key.clone(), request);
                    kept.push((key, question));
                }
                Err(e) => {
                    let why = format!("server `{}` asked a request a client cannot be asked for input: {e}", self.server);
                    question.answer(Err(ErrorData::invalid_params(why, None)));
                }
            }
        }
        self.questions = kept;
        requests
    }
}

/// What a `requestState` names.
pub(super) enum Taken {
    /// A parked call, taken out of the table.
    Parked(Box<Parked>),
    /// A parked call that another client, or another request, parked: left
    /// where it is.
    Foreign,
    /// Not one the gateway holds: never handed out, or expired.
    Unknown,
}

/// The parked calls of one gateway.
pub(crate) struct Inputs {
    state: Mutex<State>,
    journal: Arc<Journal>,
    tasks: TaskTracker,
}

struct State {
    bounds: Bounds,
    parked: HashMap<String, Parked>,
    /// Whether the task that expires parked calls runs.
    reaping: bool,
}

impl Inputs {
    pub(super) fn new(journal: Arc<Journal>, tasks: TaskTracker) -> Arc<Inputs> {
        Arc::new(Inputs {
            state: Mutex::new(State {
                bounds: Bounds::default(),
                parked: HashMap::new(),
                reaping: false,
            }),
            journal,
            tasks,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the bounds of the calls parked from now on.
    pub(crate) fn set_bounds(&self, bounds: Bounds) {
        self.state().bounds = bounds;
    }

    /// Whether `state` is of the form the gateway hands out.
    pub(super) fn ours(state: &str) -> bool {
        state.strip_prefix(PREFIX).is_some_and(|id| {
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
        })
    }

    /// Parks `parked` for [`Bounds::ttl`]: the `requestState` that takes it up
    /// again, or `parked` back with the reason when it cannot be parked
    /// ([`Bounds::max`] calls are parked).
    pub(super) fn park(self: &Arc<Self>, mut parked: Parked) -> Result<String, (Box<Parked>, String)> {
        let Some(id) = random_hex() else {
            return Err((Box::new(parked), "the system's randomness cannot be read".into()));
        };
        let id = format!("{PREFIX}{id}");
        let mut state = self.state();
        if state.parked.len() >= state.bounds.max {
            let why = format!(
                "{} calls wait for their clients' input, as many as the gateway holds ({MAX_VAR})",
                state.bounds.max
            );
            return Err((Box::new(parked), why));
        }
        parked.deadline = Instant::now() + state.bounds.ttl;
        state.parked.insert(id.clone(), parked);
        if !state.reaping {
            state.reaping = true;
            let inputs = Arc::downgrade(self);
            self.tasks.spawn(reap(inputs));
        }
        Ok(id)
    }

    /// `result` (an input-required result the gateway made) with each of its
    /// requests as its server wrote it: rmcp's types would write a request's
    /// numbers as they read them (`temperature` 0.7 as a 32-bit float).
    pub(super) fn written(&self, result: &rmcp::model::InputRequiredResult) -> Option<Value> {
        let mut written = serde_json::to_value(result).ok()?;
        self.rewrite(&mut written).then_some(written)
    }

    /// Puts back into `result` (an input-required result, as JSON) each of
    /// its requests as its server wrote it, when the gateway parked the call
    /// it names: whether it did.
    pub(super) fn rewrite(&self, result: &mut Value) -> bool {
        let Some(state) = result
            .get("requestState")
            .and_then(Value::as_str)
            .filter(|s| Inputs::ours(s))
        else {
            return false;
        };
        let table = self.state();
        let Some(parked) = table.parked.get(state) else {
            return false;
        };
        let Some(requests) = result.get_mut("inputRequests").and_then(Value::as_object_mut) else {
            return false;
        };
        for (key, question) in &parked.questions {
            if let Some(request) = requests.get_mut(key) {
                *request = question.request.clone();
            }
        }
        true
    }

    /// Takes the call parked under `state` for `binding`.
    pub(super) fn take(&self, state: &str, binding: &Binding) -> Taken {
        let mut table = self.state();
        match table.parked.get(state) {
            None => Taken::Unknown,
            Some(parked) if parked.binding != *binding => Taken::Foreign,
            Some(_) => table
                .parked
                .remove(state)
                .map_or(Taken::Unknown, |p| Taken::Parked(Box::new(p))),
        }
    }

    /// Takes out the calls parked past their deadline, and when the next one is
    /// due (`None`: none is parked, and the reaper ends).
    fn expired(&self) -> (Vec<Parked>, Option<Instant>) {
        let now = Instant::now();
        let mut state = self.state();
        let due: Vec<String> = state
            .parked
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let expired = due.iter().filter_map(|id| state.parked.remove(id)).collect();
        let next = state.parked.values().map(|p| p.deadline).min();
        if next.is_none() {
            state.reaping = false;
        }
        (expired, next)
    }

    /// How many calls are parked.
    #[cfg(test)]
    fn parked(&self) -> usize {
        self.state().parked.len()
    }
}

/// Ends the parked calls of `inputs` as they expire, while any is parked.
async fn reap(inputs: std::sync::Weak<Inputs>) {
    loop {
        let Some(table) = inputs.upgrade() else {
            return;
        };
        let (expired, next) = table.expired();
        let ttl = table.state().bounds.ttl;
        for parked in expired {
            let server = parked.server.clone();
            let asked: Vec<String> = parked
                .questions
                .iter()
                .filter_map(|(_, q)| q.request.get("method").and_then(Value::as_str).map(str::to_owned))
                .collect();
            table.journal.line(format_args!(
                "server {server} asked {} of a 2026-07-28 client, which did not answer within {}: its request was answered with an error and its call cancelled",
                asked.join(", "),
                humantime::format_duration(ttl)
            ));
            let Parked {
                questions, flight, ..
            } = parked;
            for (_, question) in questions {
                question.answer(Err(ErrorData::internal_error(
                    format!(
                        "the client did not answer within {}; the call is cancelled",
                        humantime::format_duration(ttl)
                    ),
                    None,
                )));
            }
            drop(flight);
        }
        let Some(next) = next else {
            return;
        };
        drop(table);
        tokio::time::sleep_until(next).await;
    }
}

/// 16 bytes from the OS, hex: an id nobody can guess.
fn random_hex() -> Option<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(session: u64, name: &str) -> Binding {
        Binding {
            door: "stdio",
            session,
            scope: None,
            method: "tools/call",
            name: name.into(),
        }
    }

    /// A parked call whose server asked one sampling; the receiver of the
    /// server's answer, and a token dropped with the call.
    fn parked(
        session: u64,
    ) -> (Parked, oneshot::Receiver<Result<ClientResult, ErrorData>>, std::sync::Arc<()>) {
        let (answer, answered) = oneshot::channel();
        let request = json!({"method": "sampling/createMessage",
            "params": {"messages": [], "maxTokens": 1, "temperature": 0.7}});
        let flight = std::sync::Arc::new(());
        let parked = Parked::new(
            binding(session, "a__echo"),
            "a".into(),
            vec![("mcpfleet-1".into(), Question { request, answer })],
            Box::new(flight.clone()),
        );
        (parked, answered, flight)
    }

    fn inputs(bounds: Bounds) -> Arc<Inputs> {
        let inputs = Inputs::new(Arc::new(Journal::default()), TaskTracker::new());
        inputs.set_bounds(bounds);
        inputs
    }

    #[test]
    fn bounds_are_read_from_the_environment_or_refused_naming_the_variable() {
        assert_eq!(Bounds::read(None, None), Ok(Bounds::default()));
        assert_eq!(
            Bounds::read(Some("2s".into()), Some("3".into())),
            Ok(Bounds {
                ttl: Duration::from_secs(2),
                max: 3
            })
        );
        for ttl in ["0s", "soon", "2h"] {
            let error = Bounds::read(Some(ttl.into()), None).unwrap_err();
            assert!(error.starts_with("MCPFLEET_INPUT_TTL: "), "{error}");
        }
        for max in ["0", "-1", "many", "70000"] {
            let error = Bounds::read(None, Some(max.into())).unwrap_err();
            assert!(error.starts_with("MCPFLEET_INPUT_MAX: "), "{error}");
        }
    }

    #[tokio::test]
    async fn a_parked_call_is_taken_once_by_its_own_request_and_no_more_are_parked_than_the_bound() {
        let inputs = inputs(Bounds {
            ttl: Duration::from_secs(60),
            max: 1,
        });
        let (mut first, _answered, _flight) = parked(1);
        let requests = first.input_requests();
        assert_eq!(requests.len(), 1);
        let state = inputs.park(first).unwrap_or_else(|_| panic!("parked"));
        assert!(Inputs::ours(&state), "{state}");
        assert!(!Inputs::ours("mcpfleet1.xyz") && !Inputs::ours("another's"));

        let (second, mut refused, _) = parked(1);
        let (back, why) = inputs.park(second).expect_err("at the bound");
        assert!(why.contains("MCPFLEET_INPUT_MAX"), "{why}");
        drop(back);
        assert!(refused.try_recv().is_err(), "dropped unanswered");

        assert!(matches!(inputs.take(&state, &binding(2, "a__echo")), Taken::Foreign));
        assert!(matches!(inputs.take(&state, &binding(1, "a__tool_2")), Taken::Foreign));
        let other = format!("mcpfleet1.{}", "0".repeat(32));
        assert!(matches!(inputs.take(&other, &binding(1, "a__echo")), Taken::Unknown));
        let Taken::Parked(taken) = inputs.take(&state, &binding(1, "a__echo")) else {
            panic!("not taken");
        };
        assert_eq!(taken.questions.len(), 1);
        assert!(matches!(inputs.take(&state, &binding(1, "a__echo")), Taken::Unknown));
        assert_eq!(inputs.parked(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_call_nobody_takes_up_is_answered_with_an_error_and_dropped_once_its_time_is_up() {
        let tasks = TaskTracker::new();
        let inputs = Inputs::new(Arc::new(Journal::default()), tasks.clone());
        inputs.set_bounds(Bounds {
            ttl: Duration::from_secs(5),
            max: 8,
        });
        let (parked, answered, flight) = parked(1);
        let state = inputs.park(parked).unwrap_or_else(|_| panic!("parked"));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(inputs.parked(), 1, "not before its time");
        let answer = answered.await.expect("answered");
        let error = answer.expect_err("an error");
        assert!(error.message.contains("did not answer within 5s"), "{error:?}");
        assert_eq!(std::sync::Arc::strong_count(&flight), 1, "the call was dropped");
        assert!(matches!(inputs.take(&state, &binding(1, "a__echo")), Taken::Unknown));
        // The reaper ends once nothing is parked.
        tasks.close();
        tokio::time::timeout(Duration::from_secs(1), tasks.wait())
            .await
            .expect("the reaper ended");
    }

    #[test]
    fn an_answer_is_read_as_the_result_of_its_request() {
        let question = |method: &str| {
            let (answer, answered) = oneshot::channel();
            (Question { request: json!({"method": method}), answer }, answered)
        };
        let (q, mut a) = question("roots/list");
        q.answer_with("k", Some(&json!({"roots": [{"uri": "file:///tmp"}]})));
        assert!(matches!(a.try_recv(), Ok(Ok(ClientResult::ListRootsResult(_)))));
        let (q, mut a) = question("elicitation/create");
        q.answer_with("k", Some(&json!({"action": "decline"})));
        assert!(matches!(a.try_recv(), Ok(Ok(ClientResult::ElicitResult(_)))));
        let (q, mut a) = question("sampling/createMessage");
        q.answer_with("k", Some(&json!({"nothing": "of a sampling"})));
        let error = a.try_recv().expect("answered").expect_err("not a sampling");
        assert!(error.message.contains("under `k` is not one"), "{error:?}");
        let (q, mut a) = question("roots/list");
        q.answer_with("k", None);
        let error = a.try_recv().expect("answered").expect_err("no answer");
        assert!(error.message.contains("no answer to `roots/list` under `k`"), "{error:?}");
    }
}
