//! Requests sent to a stdio server beside rmcp's session, as bytes: the gateway's
//! pass-through calls (docs/design.md §14, "Pass-through calls").
//!
//! A [`Link`] writes a request into the session's [`Outbox`] with an id of its
//! own (the string `"mcpfleet-N"`: rmcp's ids are numbers, so the two never meet),
//! and its [`Hook`] on the server's stdout takes the answers to those ids before
//! rmcp reads them and hands each to the request's [`Pending`], and so are the
//! progress notifications under the progress token it gave the request (the same
//! string), in the order the server wrote them, before the answer. When the
//! server's stdout ends, or the session is dropped, every request still waiting
//! is told ([`Answer::Ended`]): no pass-through call outlives its session (G4).
//!
//! With a listener ([`Answers::hearing`]), the hook also hands the server's own
//! progress to it with its `params` as the server wrote them (rmcp never reads
//! those lines), and keeps the `params` of the server's requests of its client
//! as written for the session's handler (docs/design.md §14, "Values as
//! written").

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::wire::{Hook, Outbox};
use crate::process::notice::{Listener, Notice, WrittenAsks};

/// What a pass-through request's answer was.
pub enum Answer<'a> {
    /// The server's `result`, as it wrote it.
    Result(&'a RawValue),
    /// The server's `error`, as it wrote it.
    Error(&'a RawValue),
    /// The session ended first.
    Ended,
    /// Nobody waits for it any more ([`Link::abandon`]); the server was told.
    Abandoned,
}

/// A request in flight, told of its progress and, once, of its answer. Called
/// where they were read, in the middle of a read of the server's stdout: it must
/// not wait for anything.
pub trait Pending: Send {
    /// A `notifications/progress` under the request's token: its `params`.
    fn progress(&mut self, params: &RawValue);
    fn answered(self: Box<Self>, answer: Answer<'_>);
}

pub(crate) type Waiter = Box<dyn Pending>;

/// Pass-through requests to one generation's session (see the module comment).
#[derive(Clone)]
pub struct Link {
    out: Arc<Outbox>,
    calls: Arc<Mutex<Calls>>,
}

#[derive(Default)]
struct Calls {
    next: u64,
    waiting: HashMap<u64, Waiter>,
    /// Set once the session's stdout ended: no request is taken any more.
    ended: bool,
    /// The server's answer to `initialize`, once read: the `tasks` of its
    /// capabilities (protocol 2025-11-25), which rmcp does not model.
    initialized: Option<Option<serde_json::Map<String, serde_json::Value>>>,
}

const ID_PREFIX: &str = "mcpfleet-";

impl Link {
    /// A link writing to `out`, and the hook that must read the same session's
    /// stdout for it.
    pub(super) fn new(out: Arc<Outbox>) -> (Link, Answers) {
        let calls = Arc::new(Mutex::new(Calls::default()));
        let answers = Answers {
            calls: calls.clone(),
            heard: None,
            initialized: false,
        };
        (Link { out, calls }, answers)
    }

    /// The `tasks` capability of protocol 2025-11-25 the server declared in
    /// its answer to `initialize`, as it wrote it.
    pub fn tasks_capability(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        lock(&self.calls).initialized.clone().flatten()
    }

    /// Sends the request `method`. `make` is given the request's id (and the
    /// progress token it may use: [`Link::token`]) before anything is sent, and
    /// returns what writes its `params` (a JSON object, appended to the line on
    /// its way to the server) and what is told of it. `None`, with `make` never
    /// called and nothing sent, when the session has ended. What `make` returns
    /// is always told, once: [`Answer::Ended`] when the session ends before the
    /// request went out.
    pub fn request<P: FnOnce(&mut Vec<u8>)>(
        &self,
        method: &str,
        make: impl FnOnce(u64) -> (P, Waiter),
    ) -> Option<u64> {
        let id = {
            let mut calls = lock(&self.calls);
            if calls.ended || self.out.is_closed() {
                return None;
            }
            calls.next += 1;
            calls.next
        };
        let (params, waiter) = make(id);
        {
            let mut calls = lock(&self.calls);
            if calls.ended {
                drop(calls);
                waiter.answered(Answer::Ended);
                return Some(id);
            }
            calls.waiting.insert(id, waiter);
        }
        let sent = self.out.send_with(|q| {
            q.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            push_token(q, id);
            q.extend_from_slice(b",\"method\":");
            push_json_string(q, method);
            q.extend_from_slice(b",\"params\":");
            params(q);
            q.extend_from_slice(b"}\n");
        });
        if !sent {
            let waiter = lock(&self.calls).waiting.remove(&id);
            if let Some(waiter) = waiter {
                waiter.answered(Answer::Ended);
            }
        }
        Some(id)
    }

    /// Request `id`'s id on the wire, and the progress token that routes the
    /// server's progress to it: the string `mcpfleet-N`.
    pub fn token(id: u64) -> String {
        format!("{ID_PREFIX}{id}")
    }

    /// Nobody waits for request `id` any more: its waiter is told so, and the
    /// server gets `notifications/cancelled` with `reason`. Nothing happens for a
    /// request already answered.
    pub fn abandon(&self, id: u64, reason: &str) {
        let Some(waiter) = lock(&self.calls).waiting.remove(&id) else {
            return;
        };
        self.out.send_with(|q| {
            q.extend_from_slice(
                b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":",
            );
            push_token(q, id);
            q.extend_from_slice(b",\"reason\":");
            push_json_string(q, reason);
            q.extend_from_slice(b"}}\n");
        });
        waiter.answered(Answer::Abandoned);
    }

    /// Nobody waits for request `id` any more, and the server is not told (the
    /// era probe, which gives up on a server that does not answer): an answer
    /// that comes later is taken and dropped.
    pub(super) fn forget(&self, id: u64) {
        lock(&self.calls).waiting.remove(&id);
    }

    /// Closes the outbox: the server's stdin, once what is queued is written.
    pub(super) fn close(&self) {
        self.out.close();
    }

    /// rmcp's writer into the same outbox, closing it only once the flag is set
    /// (see `wire.rs`).
    pub(super) fn writer_held(
        &self,
    ) -> (super::wire::OutboxWriter, Arc<std::sync::atomic::AtomicBool>) {
        self.out.writer_held()
    }


    /// Requests sent and not yet answered.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.calls).waiting.len()
    }
}

/// The hook on a server's stdout that takes the answers to a [`Link`]'s requests.
pub(super) struct Answers {
    calls: Arc<Mutex<Calls>>,
    /// Where the server's own progress goes, as written, and where the params
    /// of its requests of its client are kept, as written (docs/design.md §14,
    /// "Values as written"); `None` without a listener.
    heard: Option<(Arc<dyn Listener>, WrittenAsks)>,
    /// The server's answer to `initialize` was read.
    initialized: bool,
}

/// What the hook reads of a line that may answer one of ours.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// The number of an id of ours (`"mcpfleet-N"`, as JSON text).
fn our_id(id: &RawValue) -> Option<u64> {
    id.get()
        .strip_prefix('"')?
        .strip_suffix('"')?
        .strip_prefix(ID_PREFIX)?
        .parse()
        .ok()
}

#[derive(Deserialize)]
struct ProgressHead<'a> {
    #[serde(rename = "progressToken", borrow)]
    token: &'a RawValue,
}

impl Answers {
    /// The hook that also hands the server's own progress to `listener` as the
    /// server wrote it (rmcp never sees it), and keeps the params of the
    /// server's requests of its client in `asks`, as written.
    pub(super) fn hearing(mut self, listener: Arc<dyn Listener>, asks: WrittenAsks) -> Answers {
        self.heard = Some((listener, asks));
        self
    }

    /// What [`Answers::hearing`] takes of `line`: true when the line is taken.
    fn heard(&mut self, line: &[u8]) -> bool {
        let Some((listener, asks)) = &self.heard else {
            return false;
        };
        // Most lines are answers: only a message with a method is read.
        if memchr::memmem::find(line, b"\"method\"").is_none() {
            return false;
        }
        let Ok(reply) = serde_json::from_slice::<Reply>(line) else {
            return false;
        };
        let (Some(method), Some(params)) = (reply.method.as_deref(), reply.params) else {
            return false;
        };
        let written = || serde_json::from_str::<rmcp::model::JsonObject>(params.get()).ok();
        match (method, reply.id) {
            ("notifications/progress", None) => {
                let ours = serde_json::from_str::<ProgressHead>(params.get())
                    .is_ok_and(|head| our_id(head.token).is_some());
                if ours {
                    return false;
                }
                let Some(params) = written() else {
                    return false;
                };
                listener.notified(Notice::Progress(params));
                true
            }
            ("notifications/message", None) => {
                let Some(params) = written() else {
                    return false;
                };
                if crate::process::notice::of_a_subscription(&params) {
                    return false;
                }
                let Ok(param) = serde_json::from_value(serde_json::Value::Object(params)) else {
                    return false;
                };
                listener.notified(Notice::Log(param));
                true
            }
            ("sampling/createMessage" | "elicitation/create" | "roots/list", Some(id)) => {
                if let Some(params) = written() {
                    asks.keep(id.get(), params);
                }
                false
            }
            _ => false,
        }
    }

    /// A progress notification under one of our tokens goes to its request
    /// (true); one for a request no longer waiting is dropped (true).
    fn progress(&mut self, params: &RawValue) -> bool {
        let Ok(head) = serde_json::from_str::<ProgressHead>(params.get()) else {
            return false;
        };
        let Some(id) = our_id(head.token) else {
            return false;
        };
        if let Some(waiter) = lock(&self.calls).waiting.get_mut(&id) {
            waiter.progress(params);
        }
        true
    }
}

impl Answers {
    /// Keeps what rmcp does not model of the server's answer to `initialize`
    /// (the first line that answers with `capabilities`).
    fn initialized(&mut self, line: &[u8]) {
        if self.initialized || memchr::memmem::find(line, b"\"capabilities\"").is_none() {
            return;
        }
        #[derive(Deserialize)]
        struct Answer {
            result: Initialized,
        }
        #[derive(Deserialize)]
        struct Initialized {
            capabilities: serde_json::Map<String, serde_json::Value>,
        }
        if let Ok(Answer { result }) = serde_json::from_slice::<Answer>(line) {
            let tasks = match result.capabilities.get("tasks") {
                Some(serde_json::Value::Object(tasks)) => Some(tasks.clone()),
                _ => None,
            };
            lock(&self.calls).initialized = Some(tasks);
            self.initialized = true;
        }
    }
}

impl Hook for Answers {
    fn take(&mut self, line: &[u8]) -> bool {
        self.initialized(line);
        if self.heard(line) {
            return true;
        }
        // Most lines are rmcp's: one scan tells, before anything is parsed.
        if memchr::memmem::find(line, ID_PREFIX.as_bytes()).is_none() {
            return false;
        }
        let Ok(reply) = serde_json::from_slice::<Reply>(line) else {
            return false;
        };
        if let (Some(method), None, Some(params)) = (&reply.method, reply.id, reply.params) {
            return method == "notifications/progress" && self.progress(params);
        }
        let Some(id) = reply.id.and_then(our_id) else {
            return false;
        };
        if reply.method.is_some() {
            // A request of the server's that happens to use an id like ours.
            return false;
        }
        let Some(waiter) = lock(&self.calls).waiting.remove(&id) else {
            // The answer to a request already abandoned: rmcp never sent it.
            return true;
        };
        waiter.answered(match (reply.result, reply.error) {
            (Some(result), _) => Answer::Result(result),
            (None, Some(error)) => Answer::Error(error),
            (None, None) => Answer::Ended,
        });
        true
    }

    fn ended(&mut self) {
        let waiting = {
            let mut calls = lock(&self.calls);
            calls.ended = true;
            std::mem::take(&mut calls.waiting)
        };
        for (_, waiter) in waiting {
            waiter.answered(Answer::Ended);
        }
    }
}

/// Appends request `id`'s id on the wire, `"mcpfleet-N"`.
fn push_token(q: &mut Vec<u8>, id: u64) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = write!(q, "\"{ID_PREFIX}{id}\"");
}

/// Appends `text` as a JSON string.
pub(crate) fn push_json_string(q: &mut Vec<u8>, text: &str) {
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *q, text);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncBufReadExt;

    /// What requests were told, as text.
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Pending for Recorder {
        fn progress(&mut self, params: &RawValue) {
            lock(&self.0).push(format!("progress {}", params.get()));
        }

        fn answered(self: Box<Self>, answer: Answer<'_>) {
            let text = match answer {
                Answer::Result(r) => format!("result {}", r.get()),
                Answer::Error(e) => format!("error {}", e.get()),
                Answer::Ended => "ended".into(),
                Answer::Abandoned => "abandoned".into(),
            };
            lock(&self.0).push(text);
        }
    }

    fn recorder(log: &Arc<Mutex<Vec<String>>>) -> (impl FnOnce(&mut Vec<u8>), Waiter) {
        let params = |q: &mut Vec<u8>| q.extend_from_slice(br#"{"name":"echo"}"#);
        (params, Box::new(Recorder(log.clone())) as Waiter)
    }

    #[tokio::test]
    async fn answers_to_our_ids_go_to_their_waiters_and_the_rest_to_rmcp() {
        let (write, read) = tokio::net::UnixStream::pair().unwrap();
        let (link, mut answers) = Link::new(Outbox::spawn(write, &tokio_util::task::TaskTracker::new()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let first = link
            .request("tools/call", |_| recorder(&log))
            .expect("the link is open");
        let second = link
            .request("tools/call", |_| recorder(&log))
            .expect("the link is open");
        let mut lines = tokio::io::BufReader::new(read).lines();
        let sent = lines.next_line().await.unwrap().unwrap();
        assert_eq!(
            sent,
            format!(
                r#"{{"jsonrpc":"2.0","id":"mcpfleet-{first}","method":"tools/call","params":{{"name":"echo"}}}}"#
            )
        );
        let sent = lines.next_line().await.unwrap().unwrap();
        assert!(sent.contains(&format!(r#""id":"mcpfleet-{second}""#)), "{sent}");
        // rmcp's own answers, and a request of the server's, are not ours.
        assert!(!answers.take(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(!answers.take(
            format!(r#"{{"jsonrpc":"2.0","id":"mcpfleet-{first}","method":"roots/list"}}"#)
                .as_bytes()
        ));
        let progress = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"mcpfleet-{second}","progress":1}}}}"#
        );
        assert!(answers.take(progress.as_bytes()));
        // Progress under a token of rmcp's is rmcp's.
        assert!(!answers.take(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}}"#
        ));
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"mcpfleet-{second}","result":{{"x":1}}}}"#);
        assert!(answers.take(answer.as_bytes()));
        // Answered twice: taken, and told to nobody.
        assert!(answers.take(answer.as_bytes()));
        assert_eq!(link.waiting(), 1);
        link.abandon(first, "gone");
        let cancelled = lines.next_line().await.unwrap().unwrap();
        assert!(
            cancelled.contains(&format!(r#""requestId":"mcpfleet-{first}""#)),
            "{cancelled}"
        );
        let third = link
            .request("tools/call", |_| recorder(&log))
            .expect("the link is open");
        answers.ended();
        let made = std::cell::Cell::new(false);
        let late = link.request("tools/call", |_| {
            made.set(true);
            recorder(&log)
        });
        assert!(late.is_none() && !made.get(), "an ended session takes nothing");
        assert_eq!(
            *lock(&log),
            vec![
                format!(r#"progress {{"progressToken":"mcpfleet-{second}","progress":1}}"#),
                r#"result {"x":1}"#.to_owned(),
                "abandoned".to_owned(),
                "ended".to_owned()
            ],
            "request {third} was told that the session ended"
        );
    }
}
