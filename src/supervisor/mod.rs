//! The supervisor: one process per fleet that holds the authority of every server
//! and serves the CLI over a Unix control socket (docs/design.md §3). `run.rs`
//! is its life; the fleet task (`fleet.rs`) owns the roster and the doors, and
//! everything else holds a handle to it (`handle.rs`).

pub mod answer;
pub mod calls;
pub mod converge;
pub mod dispatch;
pub mod doors;
pub mod events;
pub mod fixed;
pub mod fleet;
pub mod gateway_door;
pub mod guardian;
pub mod handle;
pub mod handover;
pub mod http_door;
pub mod metrics_door;
pub mod persist;
pub mod plan;
pub mod recovery;
pub mod roster;
pub mod run;
pub mod scrape;
pub mod server;
pub mod streaming;

/// The state directory under the path it has in the supervisor, for the tests
/// that reach it there; it is the module `state`, which the CLI uses as well.
pub use crate::state as state_dir;
pub use crate::state::tag_scope;

pub use answer::{Answer, Response};
pub use events::EventLog;
pub use run::run;
