//! The lifecycle of a server: its states and what a request means in each
//! (`state`), the pure core that decides every transition (`core`), the authority
//! task that carries the core's effects out (`authority`), the errors it reports
//! (`error`) and the events it records (`events`).
//!
//! The lifecycle never prints and never decides exit codes; it answers requests with
//! structured replies that the output layer renders.

pub mod authority;
pub(crate) mod core;
pub mod error;
pub mod events;
pub(crate) mod ledger;
pub(crate) mod policy;
mod stamp;
pub mod state;
pub mod summary;

/// A generation id: one more than any before it for that server (L3).
pub type Generation = u64;
