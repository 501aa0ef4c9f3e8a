//! `state.json`: what must survive the supervisor (L3, L7, L10). For each server,
//! the highest generation ever given, the process of its live generation, and its
//! quarantine. Replaced atomically on every change, so a supervisor killed at any
//! instant leaves either the old or the new file, and the next one knows which
//! generations may still be alive.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::state_dir::replace_atomically;
use crate::lifecycle::ledger::{Ledger, LiveRecord, QuarantineRecord};
use crate::lifecycle::state::Generation;

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
        match std::fs::read(path) {
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
            Err(e) => Err(e),
        }
    }
}

/// The supervisor's ledger: every change is written through to `state.json`.
pub struct StateFile {
    path: PathBuf,
    /// The document as last written. The lock only serialises writers of this one
    /// file; each server's lifecycle state stays with its authority.
    doc: Mutex<Persisted>,
}

impl StateFile {
    pub fn new(path: PathBuf, doc: Persisted) -> StateFile {
        StateFile {
            path,
            doc: Mutex::new(doc),
        }
    }

    /// Applies `change` and writes the file.
    pub fn update(&self, change: impl FnOnce(&mut Persisted)) -> io::Result<()> {
        let mut doc = self.doc.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut doc);
        doc.version = STATE_VERSION;
        let bytes = serde_json::to_vec_pretty(&*doc).expect("state serializes");
        replace_atomically(&self.path, &bytes)
    }

    pub fn snapshot(&self) -> Persisted {
        self.doc.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update_logged(&self, what: &str, change: impl FnOnce(&mut Persisted)) {
        if let Err(e) = self.update(change) {
            tracing::error!(error = %e, "cannot write state.json ({what})");
        }
    }
}

impl Ledger for StateFile {
    fn reserve(&self, server: &str, generation: Generation) -> io::Result<()> {
        self.update(|doc| {
            let rec = doc.servers.entry(server.to_owned()).or_default();
            rec.last_generation = rec.last_generation.max(generation);
        })
    }

    fn spawned(&self, server: &str, record: LiveRecord) {
        self.update_logged("spawned", |doc| {
            doc.servers.entry(server.to_owned()).or_default().live = Some(record);
        });
    }

    fn ended(&self, server: &str, _generation: Generation, quarantine: Option<QuarantineRecord>) {
        self.update_logged("ended", |doc| {
            let rec = doc.servers.entry(server.to_owned()).or_default();
            rec.live = None;
            rec.quarantine = quarantine;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_survive_a_reload_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(Persisted::load(&path).unwrap().servers.len(), 0);
        let file = StateFile::new(path.clone(), Persisted::load(&path).unwrap());
        file.reserve("a", 1).unwrap();
        file.reserve("a", 2).unwrap();
        file.spawned(
            "a",
            LiveRecord {
                generation: 2,
                pid: 10,
                pgid: 10,
                start_time: Some(5),
                boot_id: None,
                tag: "t".into(),
            },
        );
        let loaded = Persisted::load(&path).unwrap();
        assert_eq!(loaded.servers["a"].last_generation, 2);
        assert_eq!(loaded.servers["a"].live.as_ref().unwrap().pid, 10);
        file.ended("a", 2, None);
        assert_eq!(Persisted::load(&path).unwrap().servers["a"].live, None);

        std::fs::write(&path, b"{ torn").unwrap();
        let err = Persisted::load(&path).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
    }
}
