//! Traces, opt-in: the supervisor's lifecycle operations and the gateway's tool
//! calls as OpenTelemetry spans, exported over OTLP/HTTP (docs/design.md §18).
//!
//! ```text
//!  EventLog::record ─► record(event) ─┐
//!  gateway tools/call ─► Call::end ───┴─► queue (bounded, try_send) ─► export task ─► collector
//! ```
//!
//! Nothing exists until the supervisor calls [`start`] and the environment names
//! an endpoint: no task, no queue, no client; [`record`] and [`Call`] then cost
//! one atomic load. The queue is reached through a process-wide cell rather than
//! handed to the event log and every gateway session, so that the hooks in the
//! lifecycle's and the gateway's code are one line each.
//!
//! Must never: block or slow a transition or a call (a full queue drops the span
//! and counts it), wait unboundedly (every export is bounded by the timeout, the
//! final flush too), or log a header's value (they may be credentials).

pub(crate) mod config;
mod export;
pub(crate) mod span;
pub(crate) mod wire;

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use rmcp::model::{CallToolResponse, ErrorData};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::lifecycle::Generation;
use crate::lifecycle::events::Event;
use config::Setup;
use export::{Counts, Exporter, Item};
use span::{Kind, Span};

/// The queue of the running exporter, once started. Set at most once a process:
/// one supervisor per process.
static QUEUE: OnceLock<Queue> = OnceLock::new();

struct Queue {
    tx: mpsc::Sender<Item>,
    counts: Arc<Counts>,
}

impl Queue {
    fn offer(&self, item: Item) {
        match self.tx.try_send(item) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The exporter has ended (the supervisor is exiting).
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// The running exporter, held by the supervisor until it exits.
pub(crate) struct Traces {
    stop: CancellationToken,
    /// The export task's; [`Traces::finish`] waits for it.
    tasks: TaskTracker,
    timeout: Duration,
}

/// Starts exporting when the environment names an endpoint
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`);
/// otherwise starts nothing. A setting that cannot be served is one warning.
/// `fleet` names the resource (`mcpfleet.fleet`: the fleet's name, else its file).
pub(crate) fn start(fleet: &crate::config::Fleet) -> Option<Traces> {
    let (mut config, warnings) = match config::from_env(|name| std::env::var(name).ok()) {
        Setup::Off => return None,
        Setup::Refused(why) => {
            tracing::warn!("traces are not exported: {why}");
            return None;
        }
        Setup::On(config, warnings) => (config, warnings),
    };
    for w in warnings {
        tracing::warn!("traces: {w}");
    }
    let fleet_name = fleet
        .name
        .clone()
        .unwrap_or_else(|| fleet.file.display().to_string());
    for (k, v) in [
        ("service.version", env!("CARGO_PKG_VERSION").to_owned()),
        ("process.pid", std::process::id().to_string()),
        ("mcpfleet.fleet", fleet_name),
    ] {
        if !config.resource.iter().any(|(key, _)| key == k) {
            config.resource.push((k.to_owned(), v));
        }
    }
    let counts = Arc::new(Counts::default());
    let exporter = match Exporter::new(config.clone(), counts.clone()) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("traces are not exported: cannot set up the HTTP client: {e}");
            return None;
        }
    };
    // Its receiver is the export task's; the task ends when stopped (or when
    // this sender, which lives as long as the process, is dropped).
    let (tx, rx) = mpsc::channel(export::QUEUE);
    if QUEUE.set(Queue { tx, counts }).is_err() {
        tracing::warn!("traces: an exporter already runs in this process");
        return None;
    }
    let stop = CancellationToken::new();
    let tasks = TaskTracker::new();
    tasks.spawn(exporter.run(rx, stop.clone()));
    tasks.close();
    tracing::info!(
        endpoint = %config.endpoint,
        protocol = config.protocol.name(),
        "traces: exporting spans over OTLP"
    );
    Some(Traces {
        stop,
        tasks,
        timeout: config.timeout,
    })
}

impl Traces {
    /// Sends what is queued and stops, within the export timeout (and a moment).
    pub(crate) async fn finish(self) {
        self.stop.cancel();
        let bound = self.timeout + Duration::from_millis(500);
        if tokio::time::timeout(bound, self.tasks.wait()).await.is_err() {
            tracing::warn!("traces: the last spans were not sent within {bound:?}");
        }
    }
}

/// Offers a transition to the exporter, if one runs. Never waits.
pub(crate) fn record(event: &Event) {
    if let Some(queue) = QUEUE.get() {
        queue.offer(Item::Event(Box::new(event.clone())));
    }
}

/// The span of one `tools/call` through the gateway; nothing when no exporter
/// runs.
pub(crate) struct Call(Option<Box<Pending>>);

struct Pending {
    tool: String,
    start: SystemTime,
    server: Option<String>,
    generation: Option<Generation>,
}

impl Call {
    /// A call of the gateway's tool `tool` begins.
    pub(crate) fn begin(tool: &str) -> Call {
        Call(QUEUE.get().map(|_| {
            Box::new(Pending {
                tool: tool.to_owned(),
                start: SystemTime::now(),
                server: None,
                generation: None,
            })
        }))
    }

    /// The call was routed to `server`.
    pub(crate) fn server(&mut self, server: &str) {
        if let Some(p) = &mut self.0 {
            p.server = Some(server.to_owned());
        }
    }

    /// The call went to the running `generation`.
    pub(crate) fn generation(&mut self, generation: Generation) {
        if let Some(p) = &mut self.0 {
            p.generation = Some(generation);
        }
    }

    /// The call was answered with what `answer` makes, which is made only when
    /// traces are exported.
    pub(crate) fn end_with(self, answer: impl FnOnce() -> Result<CallToolResponse, ErrorData>) {
        if self.0.is_some() {
            self.end(&answer());
        }
    }

    /// The call was answered with `answer`.
    pub(crate) fn end(self, answer: &Result<CallToolResponse, ErrorData>) {
        let (Some(p), Some(queue)) = (self.0, QUEUE.get()) else {
            return;
        };
        queue.offer(Item::Span(Box::new(call_span(*p, answer))));
    }
}

fn call_span(p: Pending, answer: &Result<CallToolResponse, ErrorData>) -> Span {
    let mut span = Span::new("tools/call", Kind::Server, p.start, SystemTime::now());
    span.str("mcp.method.name", "tools/call");
    span.str("mcpfleet.tool", p.tool);
    let data_generation = match answer {
        Err(e) => e.data.as_ref().and_then(|d| d["generation"].as_u64()),
        Ok(_) => None,
    };
    if let Some(server) = p.server {
        span.str("mcpfleet.server", server);
    }
    if let Some(generation) = p.generation.or(data_generation) {
        span.uint("mcpfleet.generation", generation);
    }
    let outcome = match answer {
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
            span.error = Some("the tool's result is an error (isError)".into());
            "tool_error".to_owned()
        }
        Ok(_) => "ok".to_owned(),
        Err(e) => {
            span.error = Some(e.message.to_string());
            span.int("rpc.jsonrpc.error_code", i64::from(e.code.0));
            // The gateway's own errors say why in `data.kind` (G4).
            e.data
                .as_ref()
                .and_then(|d| d["kind"].as_str())
                .unwrap_or("jsonrpc_error")
                .to_owned()
        }
    };
    if span.error.is_some() {
        span.str("error.type", outcome.clone());
    }
    span.str("mcpfleet.outcome", outcome);
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ErrorCode};
    use span::Value;

    fn pending() -> Pending {
        Pending {
            tool: "alpha__echo".into(),
            start: SystemTime::now() - Duration::from_millis(30),
            server: Some("alpha".into()),
            generation: Some(2),
        }
    }

    fn attr(span: &Span, key: &str) -> Option<Value> {
        span.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    }

    #[test]
    fn a_call_span_says_server_tool_generation_and_outcome() {
        let ok = Ok(CallToolResponse::Complete(CallToolResult::default()));
        let span = call_span(pending(), &ok);
        assert_eq!(span.name, "tools/call");
        assert_eq!(span.kind, Kind::Server);
        assert!(span.end - span.start >= 30_000_000);
        assert_eq!(
            attr(&span, "mcpfleet.tool"),
            Some(Value::Str("alpha__echo".into()))
        );
        assert_eq!(
            attr(&span, "mcpfleet.server"),
            Some(Value::Str("alpha".into()))
        );
        assert_eq!(attr(&span, "mcpfleet.generation"), Some(Value::Int(2)));
        assert_eq!(
            attr(&span, "mcpfleet.outcome"),
            Some(Value::Str("ok".into()))
        );
        assert_eq!(span.error, None);

        let mut result = CallToolResult::default();
        result.is_error = Some(true);
        let span = call_span(pending(), &Ok(CallToolResponse::Complete(result)));
        assert_eq!(
            attr(&span, "mcpfleet.outcome"),
            Some(Value::Str("tool_error".into()))
        );
        assert!(span.error.is_some());
    }

    #[test]
    fn a_refused_call_takes_the_kind_and_generation_from_the_error() {
        let mut p = pending();
        p.generation = None;
        let error = ErrorData::new(
            ErrorCode(-32001),
            "server `alpha`: it is quarantined",
            Some(serde_json::json!({"server": "alpha", "generation": 4, "kind": "quarantined"})),
        );
        let span = call_span(p, &Err(error));
        assert_eq!(
            attr(&span, "mcpfleet.outcome"),
            Some(Value::Str("quarantined".into()))
        );
        assert_eq!(attr(&span, "mcpfleet.generation"), Some(Value::Int(4)));
        assert_eq!(
            attr(&span, "rpc.jsonrpc.error_code"),
            Some(Value::Int(-32001))
        );
        assert_eq!(
            span.error.as_deref(),
            Some("server `alpha`: it is quarantined")
        );
        let unknown = ErrorData::invalid_params("unknown tool `x`", None);
        let span = call_span(pending(), &Err(unknown));
        assert_eq!(
            attr(&span, "mcpfleet.outcome"),
            Some(Value::Str("jsonrpc_error".into()))
        );
    }

    #[test]
    fn nothing_is_recorded_without_an_exporter() {
        // No exporter was started in the unit tests' process.
        assert!(QUEUE.get().is_none());
        let call = Call::begin("alpha__echo");
        assert!(call.0.is_none());
    }
}
