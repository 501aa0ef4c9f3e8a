//! The event log: every transition is appended to `events.ndjson` before the
//! request that caused it is answered (L12), and offered to the requests in
//! flight. The file is rotated at the fleet file's `supervisor.max_file_size`
//! (`state/rotation.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast;

use crate::config::Rotation;
use crate::lifecycle::events::{Event, EventSink};
use crate::metrics::Metrics;
use crate::state::rotation::RotatingFile;

/// The event log of one supervisor.
pub(crate) struct EventLog {
    file: Mutex<Option<RotatingFile>>,
    live: broadcast::Sender<Event>,
    /// What the events count up to (docs/design.md §17).
    pub metrics: Arc<Metrics>,
    /// Rotations of `events.ndjson` done by this supervisor, for metrics.
    rotations: AtomicU64,
}

/// A gateway client session opening or closing, as a line of the event log.
#[derive(Debug, Serialize)]
pub(crate) struct SessionLine {
    pub time: String,
    /// `session-opened` or `session-closed`.
    pub gateway: &'static str,
    pub session: u64,
    pub door: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

impl EventLog {
    pub(crate) fn new(file: Option<RotatingFile>) -> EventLog {
        let (live, _) = broadcast::channel(1024);
        EventLog {
            file: Mutex::new(file),
            live,
            metrics: Arc::new(Metrics::new()),
            rotations: AtomicU64::new(0),
        }
    }

    /// How many times this supervisor rotated `events.ndjson`.
    pub(crate) fn rotations(&self) -> u64 {
        self.rotations.load(Ordering::Relaxed)
    }

    /// Rotates by `rotation` from the next event on.
    pub(crate) fn set_rotation(&self, rotation: Rotation) {
        if let Some(f) = self.lock().as_mut() {
            f.set_rotation(rotation);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RotatingFile>> {
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.live.subscribe()
    }

    /// Appends one line to the log, whatever it records.
    fn append<T: Serialize>(&self, entry: &T) {
        let mut line = serde_json::to_string(entry).expect("events serialize");
        line.push('\n');
        let mut file = self.lock();
        match file.as_mut().map(|f| f.append(line.as_bytes())) {
            Some(Ok(true)) => {
                self.rotations.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => tracing::error!(error = %e, "cannot append to the event log"),
            Some(Ok(false)) | None => {}
        }
    }

    /// Records a gateway client session opening or closing (G7).
    pub(crate) fn gateway_session(&self, event: &SessionLine) {
        self.append(event);
    }
}

impl EventSink for EventLog {
    fn record(&self, event: &Event) {
        self.append(event);
        self.metrics.observe(event);
        crate::trace::record(event);
        let _ = self.live.send(event.clone());
    }

    fn accepted(&self, server: &str, waited: Duration) {
        self.metrics.accepted(server, waited);
    }

    fn busy(&self, server: &str) {
        self.metrics.busy(server);
    }
}
