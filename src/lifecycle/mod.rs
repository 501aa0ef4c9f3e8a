//! The lifecycle of a server: its pure state machine (`state`), the authority task
//! that alone drives it (`authority`), the errors it reports (`error`) and the
//! events it records (`events`).
//!
//! The lifecycle never prints and never decides exit codes; it answers requests with
//! structured replies that the output layer renders.

pub mod authority;
pub mod error;
pub mod events;
pub mod ledger;
pub mod policy;
pub mod state;
pub mod summary;
