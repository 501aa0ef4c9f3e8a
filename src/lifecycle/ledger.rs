//! What an authority must write down so that it survives the process holding it
//! (L3, L7, L10): the generations it has given out, the identity of the process of
//! each live generation, and quarantines. `check` keeps nothing (`NoLedger`); the
//! supervisor keeps `state.json`.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use super::Generation;
use super::error::{ErrorKind, ErrorPhase, ServerError};
use crate::process::lineage::ProcId;

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
    /// The other members of its lineage (L13) when last written: descendants that
    /// may have left its group, session and environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<ProcId>,
}

/// A generation whose teardown could not be confirmed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineRecord {
    pub generation: Generation,
    pub message: String,
    pub leftover_pids: Vec<i32>,
    pub tag: String,
    /// The leftovers by identity: one that cleared its environment carries no tag.
    #[serde(default)]
    pub leftover: Vec<ProcId>,
}

/// Resolves once a note is durable, or with the error that kept it from being so.
pub(crate) type Durable = Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;

/// Resolves with the generation a reservation gave once it is durable, or with
/// why none was given.
pub(crate) type Granted = Pin<Box<dyn Future<Output = Result<Generation, ServerError>> + Send>>;

/// Durable notes of an authority. Called from the authority task, in order: each
/// note takes effect in the ledger's order when the method is called, and the
/// returned future says when it has reached the disk.
pub trait Ledger: Send + Sync {
    /// Takes `generation`, or a greater one, and resolves with the one taken
    /// once it is durable; awaited before anything is spawned for it. A ledger
    /// shared across hosts gives its own (an etcd revision, L20) and refuses
    /// a server another host owns. An error refuses the start: a generation
    /// must never be given twice.
    fn reserve(&self, server: &str, generation: Generation) -> Granted;
    /// Records the process of a generation right after it was spawned.
    fn spawned(&self, server: &str, record: LiveRecord) -> Durable;
    /// Whether calls may be served now: refused on a host of a fleet that
    /// spans hosts whose lease is not confirmed (L22, L24). Read on every
    /// call, so it never waits on anything.
    fn serving(&self) -> Result<(), ServerError> {
        Ok(())
    }
    /// Whether lineages are worth writing down (a ledger that outlives the
    /// process; `check`'s keeps nothing).
    fn keeps_lineage(&self) -> bool {
        true
    }
    /// Records the members of a running generation's lineage, replacing those
    /// recorded before. Ignored once the generation has ended.
    fn lineage(&self, server: &str, generation: Generation, members: Vec<ProcId>) -> Durable;
    /// Records that a generation ended: confirmed gone (`None`), or quarantined.
    fn ended(
        &self,
        server: &str,
        generation: Generation,
        quarantine: Option<QuarantineRecord>,
    ) -> Durable;
}

/// A reservation of `generation` that is durable once `durable` resolves: what
/// a ledger kept in one host's files gives.
pub(crate) fn granted_when(durable: Durable, generation: Generation) -> Granted {
    Box::pin(async move {
        durable.await.map(|()| generation).map_err(|e| {
            ServerError::new(
                ErrorKind::SpawnFailed,
                ErrorPhase::Spawn,
                format!("cannot record generation {generation} before spawning: {e}"),
            )
        })
    })
}

/// Keeps nothing: for `check`, whose authorities live and die with one process.
pub(crate) struct NoLedger;

fn nothing_to_keep() -> Durable {
    Box::pin(std::future::ready(Ok(())))
}

impl Ledger for NoLedger {
    fn keeps_lineage(&self) -> bool {
        false
    }
    fn reserve(&self, _server: &str, generation: Generation) -> Granted {
        Box::pin(std::future::ready(Ok(generation)))
    }
    fn spawned(&self, _server: &str, _record: LiveRecord) -> Durable {
        nothing_to_keep()
    }
    fn lineage(&self, _server: &str, _generation: Generation, _members: Vec<ProcId>) -> Durable {
        nothing_to_keep()
    }
    fn ended(
        &self,
        _server: &str,
        _generation: Generation,
        _quarantine: Option<QuarantineRecord>,
    ) -> Durable {
        nothing_to_keep()
    }
}
