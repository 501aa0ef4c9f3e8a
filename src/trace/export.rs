//! The export task: takes what the queue holds, batches it, and posts each batch
//! to the collector, every export bounded by the timeout.
//!
//! ```text
//!  queue (bounded; full: dropped and counted) ─► batch ─► POST every second,
//!                                                          or at 512 spans
//!  stop ─► what is queued, posted within one timeout ─► task ends
//! ```
//!
//! A failed export drops its batch (no retry: a span is worth less than a
//! bounded memory and a supervisor that exits on time) and is logged at once;
//! further failures within a minute are counted and told together.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::config::{Config, Protocol};
use super::span::{Span, Spans};
use super::wire::{self, Resource};
use crate::lifecycle::events::Event;

/// Spans a batch is sent at, without waiting for the tick.
pub(super) const BATCH: usize = 512;
/// How often a batch that is not full is sent.
pub(super) const EVERY: Duration = Duration::from_secs(1);
/// Items the queue holds while an export is under way.
pub(super) const QUEUE: usize = 2048;
/// How often a failing collector is written about.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the queue carries.
pub(super) enum Item {
    /// A transition, turned into a span by the task (`Spans` keeps per-server
    /// state, so it lives there, not with the caller).
    Event(Box<Event>),
    Span(Box<Span>),
}

/// Counters shared by the callers and the task.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Items refused because the queue was full.
    pub dropped: AtomicU64,
}

/// The task's side.
pub(super) struct Exporter {
    config: Config,
    client: reqwest::Client,
    counts: Arc<Counts>,
    spans: Spans,
    batch: Vec<Span>,
    failures: Failures,
}

/// Failed exports since the last warning, for the rate limit.
#[derive(Default)]
struct Failures {
    last_warned: Option<Instant>,
    failed: u64,
    lost: u64,
    /// Whether the last export failed (a success after failures is told).
    failing: bool,
}

impl Exporter {
    pub(super) fn new(config: Config, counts: Arc<Counts>) -> Result<Exporter, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .user_agent(concat!("mcpfleet/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Exporter {
            config,
            client,
            counts,
            spans: Spans::default(),
            batch: Vec::new(),
            failures: Failures::default(),
        })
    }

    /// Runs until `stop`, then sends what is queued (within one timeout) and ends.
    /// Closing the queue's last sender also ends it.
    pub(super) async fn run(mut self, mut queue: mpsc::Receiver<Item>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                item = queue.recv() => match item {
                    Some(item) => {
                        self.take(item);
                        if self.batch.len() >= BATCH {
                            self.send().await;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    if !self.batch.is_empty() {
                        self.send().await;
                    }
                }
            }
        }
        // The final flush: everything queued, in batches, all within one timeout.
        queue.close();
        let deadline = Instant::now() + self.config.timeout;
        while let Ok(item) = queue.try_recv() {
            self.take(item);
        }
        while !self.batch.is_empty() {
            let rest = self.batch.split_off(self.batch.len().min(BATCH));
            let sending = self.batch.len() as u64;
            if tokio::time::timeout_at(deadline, self.send())
                .await
                .is_err()
            {
                self.failures.failed += 1;
                self.failures.lost += sending + rest.len() as u64;
                break;
            }
            self.batch = rest;
        }
        let dropped = self.counts.dropped.load(Ordering::Relaxed);
        if self.failures.failed > 0 || dropped > 0 {
            tracing::warn!(
                "traces: {} export(s) to {} failed since the last report ({} spans lost); {} spans dropped because the queue was full",
                self.failures.failed,
                self.config.endpoint,
                self.failures.lost,
                dropped
            );
        }
    }

    fn take(&mut self, item: Item) {
        let span = match item {
            Item::Event(event) => self.spans.of(&event),
            Item::Span(span) => Some(*span),
        };
        self.batch.extend(span);
    }

    /// Posts the batch (emptied whatever the outcome).
    async fn send(&mut self) {
        let spans = std::mem::take(&mut self.batch);
        let resource = Resource {
            attributes: &self.config.resource,
        };
        let body = match self.config.protocol {
            Protocol::Protobuf => wire::protobuf(&resource, &spans),
            Protocol::Json => wire::json(&resource, &spans),
        };
        let mut request = self
            .client
            .post(self.config.endpoint.clone())
            .header(
                http::header::CONTENT_TYPE,
                self.config.protocol.content_type(),
            )
            .body(body);
        for (k, v) in &self.config.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        // reqwest's own timeout bounds the request; this one bounds everything.
        let result = match tokio::time::timeout(self.config.timeout, request.send()).await {
            Err(_) => Err(format!(
                "no answer within {} ms",
                self.config.timeout.as_millis()
            )),
            Ok(Err(e)) => Err(describe(&e)),
            Ok(Ok(response)) if response.status().is_success() => {
                // Read to its end, so that the connection is kept for the next.
                let _ = response.bytes().await;
                Ok(())
            }
            Ok(Ok(response)) => Err(format!("the collector answered {}", response.status())),
        };
        match result {
            Ok(()) => {
                if self.failures.failing {
                    tracing::warn!(endpoint = %self.config.endpoint, "traces: exporting again");
                }
                self.failures.failing = false;
            }
            Err(why) => self.failed(&why, spans.len() as u64),
        }
    }

    /// Logs a failed export: the first at once, then one line a minute at most.
    fn failed(&mut self, why: &str, lost: u64) {
        self.failures.failing = true;
        self.failures.failed += 1;
        self.failures.lost += lost;
        let due = self
            .failures
            .last_warned
            .is_none_or(|t| t.elapsed() >= WARN_EVERY);
        if due {
            tracing::warn!(
                "traces: export to {} failed: {why}; {} export(s) failed ({} spans lost) since the last report, {} spans dropped so far because the queue was full; next report within {} s",
                self.config.endpoint,
                self.failures.failed,
                self.failures.lost,
                self.counts.dropped.load(Ordering::Relaxed),
                WARN_EVERY.as_secs()
            );
            self.failures.last_warned = Some(Instant::now());
            self.failures.failed = 0;
            self.failures.lost = 0;
        }
    }
}

/// A reqwest error with its causes, which say what actually happened
/// ("connection refused").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
