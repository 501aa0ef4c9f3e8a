//! The authority: one task per server that alone owns its child process, MCP
//! session and state (docs/design.md §3). Everything else holds a cheap `Handle` and
//! sends requests; the task handles them one at a time, in arrival order (L1).
//!
//! The task decides nothing itself: every transition is the pure core's
//! (`lifecycle::core`). The task wakes on a request, an exit or a timer, feeds it to
//! the core with the time (`drive.rs`, the loop that gives the core tokio's clock
//! and its answers), and carries out the effects the core returns: spawn and
//! connect (`start.rs`), teardown, sweep and quarantine (`stop.rs`), ledger notes,
//! events and publishing (`actor.rs`).
//!
//! ```text
//!  Handle::request ──► queue ──► accept (or withdrawn: the caller's wait deadline passed)
//!                                  │
//!  exit, retry, ping, idle ────────┴──► drive ──► core ──► effects ──► reply
//!  events ──► EventSink, before the reply (L12)
//! ```
//!
//! A caller that goes away does not stop an operation: the task runs it to its end
//! and records the outcome (L6). When every handle is dropped or the shutdown token
//! fires, the task answers whatever is queued (L9), tears down a live generation and
//! ends. The interrupt and shutdown tokens abort starts in progress (their
//! half-started process is still torn down) and refuse new ones, but never cut a
//! teardown short.

mod actor;
mod config;
mod context;
mod drive;
mod handle;
mod live;
mod messages;
mod snapshot;
mod start;
mod stop;

pub use crate::process::session::ListedTool;
pub use messages::{NotRunning, Reply, RequestError};

pub use super::summary::{Outcome, TeardownSummary};
pub use actor::{spawn, spawn_with};
pub use config::{CallOptions, Endpoint, ServerConfig};
pub use context::{Context, Initial, default_start_slots, start_slots};
pub use handle::Handle;
pub use snapshot::{Reach, Snapshot};
