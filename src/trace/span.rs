//! Spans, and how the lifecycle's events become spans.
//!
//! An event (rule L12) records the end of an operation: its time, how long the
//! operation took, and what it led to. The span of that operation ends at the
//! event's time and began `duration_ms` before. The event that opens an operation
//! (entering `starting` or `stopping`, which takes no time) becomes no span of its
//! own: the time its request waited for the authority goes to the next span of
//! that server, the one that measures the operation.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::lifecycle::events::{Cause, Event};
use crate::lifecycle::state::Phase;

/// One finished span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub name: &'static str,
    pub kind: Kind,
    /// Nanoseconds since the Unix epoch.
    pub start: u64,
    pub end: u64,
    pub attributes: Vec<(&'static str, Value)>,
    /// The error's message when the operation failed (status ERROR).
    pub error: Option<String>,
}

/// OTLP's span kinds that occur here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An operation of the supervisor's own.
    Internal = 1,
    /// A request a client made of the gateway.
    Server = 2,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
}

impl Span {
    /// A span with fresh random ids, the root of a trace of its own.
    pub(crate) fn new(name: &'static str, kind: Kind, start: SystemTime, end: SystemTime) -> Span {
        Span {
            trace_id: fastrand::u128(1..).to_be_bytes(),
            span_id: fastrand::u64(1..).to_be_bytes(),
            name,
            kind,
            start: nanos(start),
            end: nanos(end).max(nanos(start)),
            attributes: Vec::new(),
            error: None,
        }
    }

    pub(crate) fn str(&mut self, key: &'static str, value: impl Into<String>) {
        self.attributes.push((key, Value::Str(value.into())));
    }

    pub(crate) fn int(&mut self, key: &'static str, value: i64) {
        self.attributes.push((key, Value::Int(value)));
    }

    pub(crate) fn uint(&mut self, key: &'static str, value: u64) {
        self.int(key, i64::try_from(value).unwrap_or(i64::MAX));
    }
}

pub(crate) fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Turns events into spans; remembers, per server, the wait of the operation
/// that an opening event began.
#[derive(Debug, Default)]
pub(crate) struct Spans {
    waited: HashMap<String, u64>,
}

impl Spans {
    /// The span `event` ends, if it ends one.
    pub(crate) fn of(&mut self, event: &Event) -> Option<Span> {
        let opens = event.from != event.to
            && matches!(event.to, Phase::Starting | Phase::Stopping)
            && event.duration_ms == 0
            && event.error.is_none();
        if opens {
            self.waited.insert(event.server.clone(), event.waited_ms);
            return None;
        }
        let waited = self
            .waited
            .remove(&event.server)
            .unwrap_or(0)
            .max(event.waited_ms);
        let end = humantime::parse_rfc3339(&event.time).unwrap_or_else(|_| SystemTime::now());
        let start = end
            .checked_sub(Duration::from_millis(event.duration_ms))
            .unwrap_or(end);
        let mut span = Span::new(name(event), Kind::Internal, start, end);
        span.str("mcpfleet.server", &event.server);
        if let Some(generation) = event.generation {
            span.uint("mcpfleet.generation", generation);
        }
        span.str("mcpfleet.cause", cause(event.cause));
        let outcome = match &event.error {
            None => "ok".to_owned(),
            Some(e) => kind(e),
        };
        span.str("mcpfleet.outcome", outcome);
        span.str("mcpfleet.from", event.from.as_str());
        span.str("mcpfleet.to", event.to.as_str());
        span.uint("mcpfleet.waited_ms", waited);
        if let Some(teardown) = event.teardown {
            span.str("mcpfleet.teardown", teardown.as_str());
        }
        if let Some(e) = &event.error {
            span.str("error.type", kind(e));
            span.error = Some(e.message.clone());
        }
        Some(span)
    }
}

/// What the span measured, by where the operation began.
fn name(event: &Event) -> &'static str {
    if event.cause == Cause::Recovery {
        return "recovery";
    }
    if event.from == event.to {
        return "refused";
    }
    match event.from {
        // Spawn (or connect), the MCP handshake and the tool list (L2).
        Phase::Starting => "connect",
        Phase::Stopping => "teardown",
        // The generation ended by itself; what was left of it was swept.
        Phase::Running => "exit",
        // `reset`, or `--force`: the quarantine's leftovers found gone (L7).
        Phase::Quarantined => "clear",
        _ => "transition",
    }
}

fn cause(cause: Cause) -> String {
    serde_json::to_value(cause)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn kind(error: &crate::lifecycle::error::ServerError) -> String {
    serde_json::to_value(error.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};

    fn event(from: Phase, to: Phase, cause: Cause, duration_ms: u64, waited_ms: u64) -> Event {
        Event {
            time: "2026-11-29T08:41:54.123Z".into(),
            server: "alpha".into(),
            generation: Some(3),
            from,
            to,
            cause,
            duration_ms,
            waited_ms,
            error: None,
            teardown: None,
        }
    }

    fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
        span.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    fn s(v: &str) -> Option<Value> {
        Some(Value::Str(v.into()))
    }

    #[test]
    fn a_start_is_one_connect_span_ending_at_the_event_carrying_the_wait() {
        let mut spans = Spans::default();
        assert_eq!(
            spans.of(&event(Phase::Stopped, Phase::Starting, Cause::Start, 0, 40)),
            None
        );
        let span = spans
            .of(&event(
                Phase::Starting,
                Phase::Running,
                Cause::Start,
                250,
                0,
            ))
            .expect("a span");
        assert_eq!(span.name, "connect");
        assert_eq!(span.kind, Kind::Internal);
        let end = 1_795_941_714_123_000_000u64;
        assert_eq!(span.end, end);
        assert_eq!(span.start, end - 250_000_000);
        assert_eq!(attr(&span, "mcpfleet.server").cloned(), s("alpha"));
        assert_eq!(attr(&span, "mcpfleet.generation"), Some(&Value::Int(3)));
        assert_eq!(attr(&span, "mcpfleet.cause").cloned(), s("start"));
        assert_eq!(attr(&span, "mcpfleet.outcome").cloned(), s("ok"));
        assert_eq!(attr(&span, "mcpfleet.to").cloned(), s("running"));
        assert_eq!(attr(&span, "mcpfleet.waited_ms"), Some(&Value::Int(40)));
        assert_eq!(span.error, None);
        // The wait was the start's: the next span of the server has none.
        let next = spans
            .of(&event(Phase::Stopping, Phase::Stopped, Cause::Stop, 5, 0))
            .unwrap();
        assert_eq!(next.name, "teardown");
        assert_eq!(attr(&next, "mcpfleet.waited_ms"), Some(&Value::Int(0)));
        assert_eq!(attr(&next, "mcpfleet.teardown"), None);
        let mut escalated = event(Phase::Stopping, Phase::Stopped, Cause::Stop, 3000, 0);
        escalated.teardown = Some(crate::lifecycle::summary::Outcome::Escalated);
        let span = spans.of(&escalated).unwrap();
        assert_eq!(attr(&span, "mcpfleet.teardown").cloned(), s("escalated"));
    }

    #[test]
    fn failures_carry_their_kind_and_message() {
        let mut spans = Spans::default();
        let mut failed = event(Phase::Starting, Phase::Failed, Cause::Restart, 90, 0);
        failed.error = Some(ServerError::new(
            ErrorKind::SpawnFailed,
            ErrorPhase::Spawn,
            "no such file",
        ));
        let span = spans.of(&failed).unwrap();
        assert_eq!(span.name, "connect");
        assert_eq!(attr(&span, "mcpfleet.outcome").cloned(), s("spawn_failed"));
        assert_eq!(attr(&span, "error.type").cloned(), s("spawn_failed"));
        assert_eq!(attr(&span, "mcpfleet.cause").cloned(), s("restart"));
        assert_eq!(span.error.as_deref(), Some("no such file"));
    }

    #[test]
    fn names_by_where_the_operation_began() {
        let mut spans = Spans::default();
        let mut name = |from, to, cause| spans.of(&event(from, to, cause, 1, 0)).unwrap().name;
        assert_eq!(name(Phase::Running, Phase::Backoff, Cause::Exited), "exit");
        assert_eq!(
            name(Phase::Quarantined, Phase::Stopped, Cause::Reset),
            "clear"
        );
        assert_eq!(
            name(Phase::Running, Phase::Stopped, Cause::Recovery),
            "recovery"
        );
        assert_eq!(
            name(Phase::Running, Phase::Running, Cause::Reconnect),
            "refused"
        );
        assert_eq!(
            name(Phase::Failed, Phase::Stopped, Cause::Reset),
            "transition"
        );
    }

    #[test]
    fn ids_are_random_and_never_zero() {
        let t = SystemTime::now();
        let a = Span::new("a", Kind::Internal, t, t);
        let b = Span::new("b", Kind::Internal, t, t);
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.span_id, b.span_id);
        assert_ne!(a.trace_id, [0; 16]);
        assert_ne!(a.span_id, [0; 8]);
        // An end before the start (a clock stepped back) is clamped.
        let before = Span::new("c", Kind::Internal, t, t - Duration::from_secs(1));
        assert_eq!(before.start, before.end);
    }
}
