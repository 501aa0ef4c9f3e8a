//! mcpfleet: run a fleet of MCP servers with one serialized lifecycle authority per
//! server, bounded waits, verified teardown and exit codes a script can trust.
//!
//! Layout: `config` reads fleet files; `lifecycle` holds the authority of each
//! server; `process` spawns, talks to and tears down server processes; `output`
//! renders reports and owns the exit-code table; `contract` holds servers' tools to
//! a snapshot (`check --expect-tools`); `host` is what `check` and the
//! supervisor, which both hold authorities, share; `trace` exports the supervisor's
//! spans when asked to; `commands` and `cli` are the edge.

pub mod cli;
pub mod commands;
pub mod config;
pub mod contract;
pub mod gateway;
pub mod hash;
pub mod host;
pub mod lifecycle;
pub mod logging;
pub mod metrics;
pub mod output;
pub mod process;
pub mod protocol;
pub mod reconcile;
pub mod supervisor;
pub mod trace;
