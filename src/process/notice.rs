//! What a server sends its client unasked, as the rest of mcpfleet hears it: list
//! changes, progress, log messages, resource updates, and the requests a server
//! makes of its client (`roots/list`, `sampling/createMessage`,
//! `elicitation/create`). The session hands each to a
//! [`Listener`] (the gateway's, docs/design.md §14); without one, notifications
//! are only logged and requests get rmcp's default answers.
//!
//! Progress and the requests' parameters are kept as the server wrote them
//! where the session sees the server's bytes (stdio): rmcp's types would change
//! numbers (docs/design.md §14, "Values as written").

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::model::{
    ClientResult, ErrorData, JsonObject, LoggingMessageNotificationParam, RequestId,
    ResourceUpdatedNotificationParam, ServerRequest,
};
use tokio_util::sync::CancellationToken;

/// A notification from a server.
#[derive(Debug, Clone)]
pub enum Notice {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    /// A `notifications/progress`: its `params`, as the server wrote them
    /// where the session sees its bytes, else as rmcp writes them.
    Progress(JsonObject),
    /// `notifications/message`, as the server wrote it.
    Log(LoggingMessageNotificationParam),
    /// `notifications/resources/updated`, as the server wrote it.
    ResourceUpdated(ResourceUpdatedNotificationParam),
    /// `notifications/tasks/status` of protocol 2025-11-25: its `params`.
    TaskStatus(JsonObject),
}

/// A request a server made of its client.
#[derive(Debug)]
pub struct Asked {
    pub request: ServerRequest,
    /// The request's `params` as the server wrote them, where the session sees
    /// its bytes (stdio).
    pub written: Option<JsonObject>,
    /// Our request to the server on whose HTTP response stream it came, when the
    /// transport says so (a remote server); over stdio nothing links a server's
    /// request to the call that caused it.
    pub origin: Option<RequestId>,
    /// Cancelled when the server gives up on its request.
    pub cancelled: CancellationToken,
}

/// Hears one server's notifications and requests. Called from the session's
/// task: it must not block.
pub trait Listener: Send + Sync + 'static {
    fn notified(&self, notice: Notice);

    /// Answers a request the server made of its client.
    fn asked(&self, asked: Asked) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;
}

/// The `params` of a server's requests of its client as it wrote them, by the
/// request's id as written, from the line read until rmcp hands the request to
/// the session's handler; and, over HTTP, those of its progress notifications
/// until rmcp hands them on. Bounded: what rmcp never hands on is forgotten
/// once [`WrittenAsks::KEPT`] newer ones came.
///
/// Made [`WrittenAsks::telling`] a listener, it hands that listener the
/// server's progress and log messages as they are read, in the order of the
/// stream and before rmcp reads the answer that follows them (rmcp hands a
/// notification to its handler on a task of its own, which an answer read
/// after it can overtake).
#[derive(Clone, Default)]
pub(crate) struct WrittenAsks(
    Arc<Mutex<VecDeque<(String, JsonObject)>>>,
    Arc<Mutex<VecDeque<JsonObject>>>,
    Option<Arc<dyn Listener>>,
);

impl WrittenAsks {
    const KEPT: usize = 64;

    /// Hands `listener` the server's progress and log messages as read.
    pub(crate) fn telling(listener: Arc<dyn Listener>) -> WrittenAsks {
        WrittenAsks(Default::default(), Default::default(), Some(listener))
    }

    /// Keeps what a message of the server's, as written (`text`), carries:
    /// a request's params by its id, a progress notification's params.
    pub(crate) fn observe(&self, text: &str) {
        if !text.contains("\"method\"") {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Message<'a> {
            #[serde(borrow, default)]
            id: Option<&'a serde_json::value::RawValue>,
            #[serde(default)]
            method: Option<String>,
            #[serde(default)]
            params: Option<JsonObject>,
        }
        let Ok(message) = serde_json::from_str::<Message>(text) else {
            return;
        };
        let (Some(method), Some(params)) = (message.method, message.params) else {
            return;
        };
        match (method.as_str(), message.id) {
            ("notifications/progress", None) => {
                if let Some(listener) = &self.2 {
                    listener.notified(Notice::Progress(params));
                    return;
                }
                let mut kept = self.1.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if kept.len() >= Self::KEPT {
                    kept.pop_front();
                }
                kept.push_back(params);
            }
            ("notifications/message", None) if !of_a_subscription(&params) => {
                let read = serde_json::from_value(serde_json::Value::Object(params));
                if let (Some(listener), Ok(param)) = (&self.2, read) {
                    listener.notified(Notice::Log(param));
                }
            }
            ("sampling/createMessage" | "elicitation/create" | "roots/list", Some(id)) => {
                self.keep(id.get(), params);
            }
            _ => {}
        }
    }

    /// The params of progress `read` (rmcp's reading of it) as written, once:
    /// the oldest kept with the same token and the same numbers.
    pub(crate) fn progress(
        &self,
        read: &rmcp::model::ProgressNotificationParam,
    ) -> Option<JsonObject> {
        let token = serde_json::to_value(&read.progress_token).ok()?;
        let mut kept = self.1.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = |params: &JsonObject| {
            params.get("progressToken") == Some(&token)
                && params.get("progress").and_then(serde_json::Value::as_f64) == Some(read.progress)
                && params.get("total").and_then(serde_json::Value::as_f64) == read.total
        };
        let at = kept.iter().position(same)?;
        kept.remove(at)
    }

    /// Keeps the `params` of the request whose id is written `id`.
    pub(crate) fn keep(&self, id: &str, params: JsonObject) {
        let mut asks = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if asks.len() >= Self::KEPT {
            asks.pop_front();
        }
        asks.push_back((id.to_owned(), params));
    }

    /// The `params` of request `id` as written, once.
    pub(crate) fn take(&self, id: &RequestId) -> Option<JsonObject> {
        let id = serde_json::to_string(id).ok()?;
        let mut asks = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = asks.iter().position(|(written, _)| *written == id)?;
        asks.remove(at).map(|(_, params)| params)
    }
}

/// Whether a notification's `params` name a subscription (`subscriptions/listen`
/// of the 2026-07-28 era), which rmcp hands to that subscription.
pub(crate) fn of_a_subscription(params: &JsonObject) -> bool {
    params
        .get("_meta")
        .and_then(serde_json::Value::as_object)
        .is_some_and(|meta| meta.contains_key("io.modelcontextprotocol/subscriptionId"))
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;
    use serde_json::json;

    use super::WrittenAsks;

    #[test]
    fn a_requests_params_are_taken_once_by_its_id_and_the_oldest_are_forgotten() {
        let asks = WrittenAsks::default();
        let params = |n: u64| json!({"n": n}).as_object().unwrap().clone();
        asks.keep("\"s-1\"", params(1));
        asks.keep("7", params(7));
        let string = NumberOrString::String("s-1".into());
        assert_eq!(asks.take(&string), Some(params(1)));
        assert_eq!(asks.take(&string), None);
        assert_eq!(asks.take(&NumberOrString::Number(7)), Some(params(7)));
        for n in 0..=WrittenAsks::KEPT as u64 {
            asks.keep(&n.to_string(), params(n));
        }
        assert_eq!(asks.take(&NumberOrString::Number(0)), None);
        assert!(asks.take(&NumberOrString::Number(1)).is_some());
    }

    #[test]
    fn what_a_stream_carries_is_kept_as_written_and_progress_is_matched_by_token_and_numbers() {
        let asks = WrittenAsks::default();
        asks.observe(r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"temperature":0.7}}"#);
        asks.observe(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2,"total":5}}"#);
        asks.observe(r#"{"jsonrpc":"2.0","id":4,"result":{"method":"no"}}"#);
        let params = asks.take(&NumberOrString::Number(3)).unwrap();
        assert_eq!(serde_json::Value::Object(params).to_string(), r#"{"temperature":0.7}"#);
        let token = rmcp::model::ProgressToken(NumberOrString::Number(1));
        let mut read = rmcp::model::ProgressNotificationParam::new(token, 2.0);
        assert_eq!(asks.progress(&read), None, "another total");
        read.total = Some(5.0);
        let params = asks.progress(&read).unwrap();
        assert_eq!(
            serde_json::Value::Object(params).to_string(),
            r#"{"progress":2,"progressToken":1,"total":5}"#
        );
        assert_eq!(asks.progress(&read), None, "once");
    }

    /// What a telling `WrittenAsks` hands its listener, in the order read.
    struct Heard(std::sync::Mutex<Vec<String>>);

    impl super::Listener for Heard {
        fn notified(&self, notice: super::Notice) {
            let said = match notice {
                super::Notice::Progress(params) => format!("progress {}", params["progress"]),
                super::Notice::Log(param) => format!("log {}", param.data),
                _ => "other".into(),
            };
            self.0.lock().unwrap().push(said);
        }

        fn asked(
            &self,
            _asked: super::Asked,
        ) -> futures::future::BoxFuture<'static, Result<rmcp::model::ClientResult, rmcp::ErrorData>>
        {
            Box::pin(async { Err(rmcp::ErrorData::internal_error("not asked here", None)) })
        }
    }

    #[test]
    fn a_telling_copy_hands_progress_and_log_messages_on_as_read_but_not_a_subscriptions() {
        let heard = std::sync::Arc::new(Heard(Default::default()));
        let asks = WrittenAsks::telling(heard.clone());
        asks.observe(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#);
        asks.observe(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"a"}}"#);
        asks.observe(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"s","_meta":{"io.modelcontextprotocol/subscriptionId":1}}}"#);
        asks.observe(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":2}}"#);
        asks.observe(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        assert_eq!(
            *heard.0.lock().unwrap(),
            ["progress 1", "log \"a\"", "progress 2"]
        );
    }
}
