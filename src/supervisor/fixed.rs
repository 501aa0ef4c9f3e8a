//! What the fleet task and every handle to it share, set once when the
//! supervisor starts and never changed: the event log, `state.json`, the
//! gateway, the tokens that end it all.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::events::EventLog;
use super::persist::StateFile;
use crate::gateway::Gateway;
use crate::lifecycle::authority::Context;
use crate::lifecycle::ledger::Ledger;
use crate::process::limits::OpenFiles;
use crate::state::StateDir;

/// The parts of the supervisor that never change while it runs.
pub(super) struct Fixed {
    pub events: Arc<EventLog>,
    pub state: Arc<StateFile>,
    /// What every authority notes its generations in: `state` on one host;
    /// etcd, then `state`, on a host of a fleet that spans hosts.
    pub ledger: Arc<dyn Ledger>,
    /// This host's membership of a fleet that spans hosts (docs/design.md §19).
    #[cfg(feature = "etcd")]
    pub hosts: Option<Arc<super::hosts::Hosts>>,
    /// Set when the supervisor is shutting down; new requests are refused.
    pub shutdown: CancellationToken,
    /// The authorities' interrupt: cancelled on a signal, it ends starts in progress.
    pub interrupt: CancellationToken,
    /// The fleet as one MCP server, for `connect` and `serve` (docs/design.md §14).
    pub gateway: Arc<Gateway>,
    pub dir: StateDir,
    /// Work that lives as long as the supervisor (the fleet task, the doors).
    pub tracker: TaskTracker,
    /// What the authority of a server added to the fleet file is created with.
    pub authorities: Context,
    /// The open-files limit, which the HTTP doors' caps are fitted within.
    pub files: OpenFiles,
}
