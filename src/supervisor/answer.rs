//! What the supervisor answers on the control socket (docs/design.md §9), and
//! the deadlines a request runs under unless it says otherwise.

use std::time::Duration;

use serde::Serialize;

use crate::config::Timeout;
use crate::lifecycle::authority::CallOptions;
use crate::output::calls::CallReport;
use crate::output::report::{EventReport, Report};
use crate::protocol::{self, Deadlines, MetricsText};

/// The report of a request, as the supervisor sends it.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum Answer {
    /// `up`, `down`, `status`, `reconnect`, `reset` and `ping`.
    Report(Report),
    /// `tools` and `call`.
    Call(CallReport),
    /// `metrics`.
    Metrics(MetricsText),
}

/// A line the supervisor sends on the control socket (docs/design.md §9).
pub(crate) type Response = protocol::Response<EventReport, Answer>;

/// The reply that carries `report`.
pub(crate) fn reply(report: Report) -> Response {
    Response::Reply {
        report: Answer::Report(report),
    }
}

/// How long a request waits for its authority unless the caller says otherwise:
/// long enough for any reasonable start or teardown ahead of it, but finite (L2).
pub(super) const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// The options of a request to the authorities, from the caller's deadlines.
pub(crate) fn call_options(d: Deadlines, force: bool) -> CallOptions {
    CallOptions {
        connect_timeout: d.connect_ms,
        cleanup_timeout: d.cleanup_ms,
        wait_timeout: d.wait_ms.unwrap_or(Timeout::After(DEFAULT_WAIT)),
        force,
    }
}
