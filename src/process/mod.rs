//! The operating-system side of a server: spawning it in its own process group,
//! draining its stderr, the MCP session over its pipes, and verified teardown.
//!
//! ```text
//!  spawn (own group, tagged env) ──► Session::initialize ──► list_tools ──► ... ──► teardown
//!        └─ stderr drained to a bounded tail from the first byte to the last
//! ```
//!
//! Nothing here keeps lifecycle state or decides policy: the authority calls these
//! functions and owns what they return. What it asks of the operating system goes
//! through `platform`.

pub mod limits;
pub(crate) mod lineage;
pub(crate) mod notice;
pub(crate) mod redact;
pub(crate) mod remote;
pub(crate) mod session;
pub mod spawn;
pub(crate) mod stderr;
pub(crate) mod table;
pub(crate) mod tag;
pub(crate) mod teardown;
