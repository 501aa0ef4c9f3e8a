//! `state.json` as the supervisor keeps it: the ledger of its authorities. The
//! document is `state::Persisted`; here it is replaced atomically on every change,
//! so a supervisor killed at any instant leaves either the old or the new file,
//! and the next one knows which generations may still be alive.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::lifecycle::ledger::{Durable, Granted, Ledger, LiveRecord, QuarantineRecord, granted_when};
use crate::lifecycle::state::Generation;
use crate::process::lineage::ProcId;
use crate::state::{Persisted, STATE_VERSION, replace_atomically};

/// The supervisor's ledger. Every note is applied to the document at once and
/// made durable by a write of the whole file (atomic replace, then fsync). Notes
/// of many servers share writes (group commit): whoever waits for its note while
/// another write is under way queues for the next one, which carries every note
/// made until it began. Starting 200 servers costs a handful of writes, not 400.
pub(super) struct StateFile {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    book: Mutex<Book>,
    /// Held while writing the file: one writer at a time.
    file: Mutex<()>,
    /// The queue of async waiters for the next write, so that only one of them at
    /// a time occupies a blocking thread.
    turn: tokio::sync::Mutex<()>,
}

struct Book {
    doc: Persisted,
    /// Number of notes made so far.
    noted: u64,
    /// Every note up to this one is in the file.
    durable: u64,
    /// The last write covered notes up to this one; if it failed, `error` says why.
    attempted: u64,
    error: Option<String>,
    /// Writes of the file so far.
    writes: u64,
}

impl StateFile {
    pub(super) fn new(path: PathBuf, doc: Persisted) -> StateFile {
        StateFile {
            inner: Arc::new(Inner {
                path,
                book: Mutex::new(Book {
                    doc,
                    noted: 0,
                    durable: 0,
                    attempted: 0,
                    error: None,
                    writes: 0,
                }),
                file: Mutex::new(()),
                turn: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Applies `change` and writes the file before returning (for the supervisor's
    /// own start and its recovery, which happen before any authority runs).
    pub(super) fn update(&self, change: impl FnOnce(&mut Persisted)) -> io::Result<()> {
        let note = self.inner.note(change);
        self.inner.write(note)
    }

    pub(super) fn snapshot(&self) -> Persisted {
        self.inner.book().doc.clone()
    }

    /// Applies `change` now; the future resolves once it is in the file.
    fn note_durably(&self, change: impl FnOnce(&mut Persisted)) -> Durable {
        let note = self.inner.note(change);
        let inner = self.inner.clone();
        Box::pin(async move {
            if let Some(settled) = inner.settled(note) {
                return settled;
            }
            let _turn = inner.turn.lock().await;
            // The write that ended while this one queued may have carried the note.
            if let Some(settled) = inner.settled(note) {
                return settled;
            }
            let writer = inner.clone();
            match tokio::task::spawn_blocking(move || writer.write(note)).await {
                Ok(result) => result,
                Err(e) => Err(io::Error::other(e)),
            }
        })
    }
}

impl Inner {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, change: impl FnOnce(&mut Persisted)) -> u64 {
        let mut book = self.book();
        change(&mut book.doc);
        book.doc.version = STATE_VERSION;
        book.noted += 1;
        book.noted
    }

    /// Whether the write that covers `note` has happened, and how it went.
    fn settled(&self, note: u64) -> Option<io::Result<()>> {
        let book = self.book();
        if book.durable >= note {
            Some(Ok(()))
        } else if book.attempted >= note {
            let why = book.error.clone().unwrap_or_default();
            Some(Err(io::Error::other(why)))
        } else {
            None
        }
    }

    /// Writes everything noted so far, unless a write since `note` already did.
    fn write(&self, note: u64) -> io::Result<()> {
        let _file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(settled) = self.settled(note) {
            return settled;
        }
        let (upto, bytes) = {
            let book = self.book();
            let bytes = serde_json::to_vec_pretty(&book.doc).expect("state serializes");
            (book.noted, bytes)
        };
        let result = replace_atomically(&self.path, &bytes);
        let mut book = self.book();
        book.attempted = upto;
        book.writes += 1;
        match &result {
            Ok(()) => book.durable = upto,
            Err(e) => book.error = Some(e.to_string()),
        }
        result
    }
}

impl Ledger for StateFile {
    fn reserve(&self, server: &str, generation: Generation) -> Granted {
        let durable = self.note_durably(|doc| {
            let rec = doc.servers.entry(server.to_owned()).or_default();
            rec.last_generation = rec.last_generation.max(generation);
        });
        granted_when(durable, generation)
    }

    fn spawned(&self, server: &str, record: LiveRecord) -> Durable {
        self.note_durably(|doc| {
            doc.servers.entry(server.to_owned()).or_default().live = Some(record);
        })
    }

    fn lineage(&self, server: &str, generation: Generation, members: Vec<ProcId>) -> Durable {
        self.note_durably(move |doc| {
            let live = doc
                .servers
                .get_mut(server)
                .and_then(|rec| rec.live.as_mut())
                .filter(|live| live.generation == generation);
            if let Some(live) = live {
                live.lineage = members;
            }
        })
    }

    fn ended(
        &self,
        server: &str,
        _generation: Generation,
        quarantine: Option<QuarantineRecord>,
    ) -> Durable {
        self.note_durably(|doc| {
            let rec = doc.servers.entry(server.to_owned()).or_default();
            rec.live = None;
            rec.quarantine = quarantine;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn generations_survive_a_reload_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(Persisted::load(&path).unwrap().servers.len(), 0);
        let file = StateFile::new(path.clone(), Persisted::load(&path).unwrap());
        file.reserve("a", 1).await.unwrap();
        file.reserve("a", 2).await.unwrap();
        file.spawned(
            "a",
            LiveRecord {
                generation: 2,
                pid: 10,
                pgid: 10,
                start_time: Some(5),
                boot_id: None,
                tag: "t".into(),
                lineage: Vec::new(),
            },
        )
        .await
        .unwrap();
        let loaded = Persisted::load(&path).unwrap();
        assert_eq!(loaded.servers["a"].last_generation, 2);
        assert_eq!(loaded.servers["a"].live.as_ref().unwrap().pid, 10);
        file.ended("a", 2, None).await.unwrap();
        assert_eq!(Persisted::load(&path).unwrap().servers["a"].live, None);

        std::fs::write(&path, b"{ torn").unwrap();
        let err = Persisted::load(&path).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_notes_share_writes_and_each_is_durable_when_it_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let file = Arc::new(StateFile::new(path.clone(), Persisted::default()));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..200u64 {
            let file = file.clone();
            let path = path.clone();
            tasks.spawn(async move {
                let name = format!("s{i}");
                file.reserve(&name, i + 1).await.unwrap();
                // Resolved means in the file, not only in memory.
                let on_disk = Persisted::load(&path).unwrap();
                assert_eq!(on_disk.servers[&name].last_generation, i + 1);
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        let writes = file.inner.book().writes;
        assert!((1..100).contains(&writes), "{writes} writes for 200 notes");
    }

    #[tokio::test]
    async fn a_note_that_cannot_be_written_fails_its_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("state.json");
        let file = StateFile::new(path, Persisted::default());
        let err = file.reserve("a", 1).await.unwrap_err();
        assert!(err.to_string().contains("No such file"), "{err}");
    }
}
