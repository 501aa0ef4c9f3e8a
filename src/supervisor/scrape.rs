//! The metrics as a scrape sees them (docs/design.md §17): the counters of the
//! event log, and gauges read from the fleet's published view.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::fixed::Fixed;
use super::handle::View;
use crate::metrics::exposition::Format;
use crate::metrics::http::Render;
use crate::metrics::{Prepared, ProcessView, ServerView};
use crate::state::rotation;

/// What a scrape shows, taken now (from `view`) and written later.
pub(super) fn prepare(view: &View, fixed: &Fixed, format: Format) -> Prepared {
    let servers = view
        .roster
        .servers
        .iter()
        .map(|held| {
            let h = &held.handle;
            let s = h.published();
            ServerView {
                name: s.name,
                state: s.state,
                generation: s.generation,
                uptime: s.uptime_ms.map(Duration::from_millis),
                queued: Some(h.queued()),
                escaped: s.last_teardown.map_or(0, |t| t.escaped_pids.len()),
            }
        })
        .collect();
    let view = crate::metrics::View {
        servers,
        gateway_sessions: Some(fixed.gateway.sessions()),
        rotations: vec![
            ("events", fixed.events.rotations()),
            ("supervisor", rotation::supervisor_log_rotations()),
        ],
        process: crate::platform::own_usage().map(|u| ProcessView {
            resident_bytes: u.resident_bytes,
            open_fds: u.open_fds,
            cpu_seconds: u.cpu_seconds,
            start_time_seconds: u.start_time_seconds,
        }),
    };
    crate::metrics::prepare(Some(&fixed.events.metrics), view, format)
}

/// What renders the metrics for an HTTP door, for as long as the fleet task
/// lives: nothing once it has ended.
pub(super) fn render(view: watch::Receiver<Arc<View>>, fixed: Weak<Fixed>) -> Render {
    Arc::new(move |format| {
        if view.has_changed().is_err() {
            return None;
        }
        let fixed = fixed.upgrade()?;
        let now = view.borrow().clone();
        Some(prepare(&now, &fixed, format))
    })
}
