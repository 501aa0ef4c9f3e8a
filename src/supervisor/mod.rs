//! The supervisor: one process per fleet that holds the authority of every server
//! and serves the CLI over a Unix control socket (docs/design.md §3). `run.rs`
//! is its life; the fleet task (`fleet.rs`) owns the roster and the doors, and
//! everything else holds a handle to it (`handle.rs`).

mod answer;
mod calls;
mod converge;
mod dispatch;
mod doors;
mod events;
mod fixed;
#[cfg(feature = "etcd")]
mod follow;
mod fleet;
mod gateway_door;
pub mod guardian;
mod handle;
mod handover;
#[cfg(feature = "etcd")]
pub mod hosts;
mod http_door;
mod metrics_door;
mod persist;
mod plan;
mod recovery;
#[cfg(feature = "etcd")]
pub mod relay;
mod roster;
mod run;
mod scrape;
mod server;
mod streaming;

pub use run::run;
