//! mcpfleet: run a fleet of MCP servers with one serialized lifecycle authority per
//! server, bounded waits, verified teardown and exit codes a script can trust.
//!
//! Layout: `config` reads fleet files; `lifecycle` holds the authority of each
//! server; `process` spawns, talks to and tears down server processes; `platform`
//! is the one place that talks to the operating system beyond std and tokio;
//! `state` is the state directory, the contract of the CLI and the supervisor;
//! `protocol` is the control socket's; `supervisor` hosts the fleet's authorities
//! in a daemon and `gateway` serves the fleet as one MCP server; `host` is what
//! `check` and the supervisor, which both hold authorities, share; `reconcile`
//! plans `up` against the fleet file; `output` renders reports and owns the
//! exit-code table; `contract` holds servers' tools to a snapshot (`check
//! --expect-tools`); `errors` is the cause-chain plumbing every error enum
//! shares; `metrics` counts the lifecycle; `trace` exports the
//! supervisor's spans when asked to; `hash` is the one stable hash; `logging` sets
//! up stderr; `commands` and `cli` are the edge.
//!
//! The public surface is what the binary, the integration tests (`tests/it/`) and
//! the benchmarks use; everything else is `pub(crate)`, and the `unreachable_pub`
//! lint keeps it so (docs/architecture.md, "Visibility and lints").

// Only Linux has an implementation of `platform` today. Elsewhere this error is
// all the crate compiles: every module below is left out there, so a build fails
// with this one message instead of one error per call into a system it lacks.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "mcpfleet builds on Linux only: it reads the process table from /proc, watches exits \
     with pidfds, ends process groups, and is a child subreaper (PR_SET_CHILD_SUBREAPER). \
     A port implements the module src/platform/ for this system (src/platform/linux/ is \
     the model) and adds it to the cfg in src/lib.rs; see \"Porting to another system\" in \
     docs/src/platforms/other-systems.md"
);

/// Declares the crate's modules on the systems `platform` implements.
macro_rules! on_implemented_platforms {
    ($($module:item)*) => { $(#[cfg(target_os = "linux")] $module)* };
}

on_implemented_platforms! {
    pub mod auth;
    pub mod cli;
    pub mod commands;
    pub mod config;
    pub(crate) mod contract;
    /// A fleet that spans hosts, through etcd (docs/design.md §19).
    #[cfg(feature = "etcd")]
    pub mod coordination;
    pub(crate) mod errors;
    pub(crate) mod gateway;
    pub(crate) mod hash;
    pub(crate) mod host;
    pub mod lifecycle;
    pub mod logging;
    pub(crate) mod metrics;
    pub(crate) mod output;
    pub mod platform;
    pub mod process;
    pub mod protocol;
    pub(crate) mod reconcile;
    pub mod state;
    pub mod supervisor;
    pub(crate) mod trace;
}
