//! `state.json` as data: what must survive the supervisor (L3, L7, L10). For each
//! server, the highest generation ever given, the process of its live generation,
//! and its quarantine. The supervisor writes it (`supervisor::persist`, replaced
//! atomically on every change); the CLI reads it when no supervisor runs (the
//! offline `status` and `down`, `ls`, `metrics`).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::lifecycle::ledger::{LiveRecord, QuarantineRecord};
use crate::lifecycle::state::Generation;
use crate::process::lineage::ProcId;

pub const STATE_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Persisted {
    pub version: u32,
    /// The supervisor that wrote the file last.
    #[serde(default)]
    pub supervisor: Option<SupervisorRecord>,
    #[serde(default)]
    pub servers: BTreeMap<String, ServerRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SupervisorRecord {
    pub pid: i32,
    pub start_time: Option<u64>,
    pub boot_id: Option<String>,
    /// The guardian above a detached supervisor (see `guardian`): after a crash,
    /// recovery waits for its list of what it adopted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardian: Option<ProcId>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerRecord {
    pub last_generation: Generation,
    /// Spawned and not yet confirmed gone.
    #[serde(default)]
    pub live: Option<LiveRecord>,
    #[serde(default)]
    pub quarantine: Option<QuarantineRecord>,
}

impl Persisted {
    /// Reads `state.json`; a missing file is an empty state. A file that cannot be
    /// read or parsed is an error: starting over would reuse generation ids.
    pub fn load(path: &Path) -> io::Result<Persisted> {
        // Never through a symlink planted in its place (ELOOP is an error here).
        match super::read_nofollow(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                io::Error::other(format!(
                    "{} is damaged ({e}); move it away to start over, knowing that generation ids may then repeat",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Persisted {
                version: STATE_VERSION,
                ..Persisted::default()
            }),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("cannot read {}: {e}", path.display()),
            )),
        }
    }
}

