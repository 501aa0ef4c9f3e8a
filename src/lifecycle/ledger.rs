//! What an authority must write down so that it survives the process holding it
//! (L3, L7, L10): the generations it has given out, the identity of the process of
//! each live generation, and quarantines. `check` keeps nothing (`NoLedger`); the
//! supervisor keeps `state.json`.

use serde::{Deserialize, Serialize};

use super::state::Generation;

/// A spawned generation, as needed to find it again after a crash: never by pid
/// alone, but with its start time, the boot it belongs to and its environment tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveRecord {
    pub generation: Generation,
    pub pid: i32,
    pub pgid: i32,
    pub start_time: Option<u64>,
    pub boot_id: Option<String>,
    /// The `MCPFLEET_TAG` value every process of the generation carries.
    pub tag: String,
}

/// A generation whose teardown could not be confirmed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineRecord {
    pub generation: Generation,
    pub message: String,
    pub leftover_pids: Vec<i32>,
    pub tag: String,
}

/// Durable notes of an authority. Called from the authority task, in order.
pub trait Ledger: Send + Sync {
    /// Records that `generation` is taken, before anything is spawned for it. An
    /// error refuses the start: a generation must never be given twice.
    fn reserve(&self, server: &str, generation: Generation) -> std::io::Result<()>;
    /// Records the process of a generation right after it was spawned.
    fn spawned(&self, server: &str, record: LiveRecord);
    /// Records that a generation ended: confirmed gone (`None`), or quarantined.
    fn ended(&self, server: &str, generation: Generation, quarantine: Option<QuarantineRecord>);
}

/// Keeps nothing: for `check`, whose authorities live and die with one process.
pub struct NoLedger;

impl Ledger for NoLedger {
    fn reserve(&self, _server: &str, _generation: Generation) -> std::io::Result<()> {
        Ok(())
    }
    fn spawned(&self, _server: &str, _record: LiveRecord) {}
    fn ended(&self, _server: &str, _generation: Generation, _quarantine: Option<QuarantineRecord>) {
    }
}
