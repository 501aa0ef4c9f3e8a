//! Keeping the files a supervisor writes for as long as it runs to a size
//! (docs/design.md §3, "Rotation"): `events.ndjson` through [`RotatingFile`], and
//! `supervisor.log`, which is the supervisor's stderr (fd 2), through
//! [`keep_supervisor_log`] and the tracing writer (`logging`).
//!
//! ```text
//!  NAME about to grow past max_bytes:
//!    NAME.keep is replaced by NAME.keep-1, …, NAME.2 by NAME.1, NAME.1 by NAME,
//!    and a new NAME begins (for supervisor.log: opened and put on fd 2)
//! ```
//!
//! Every step is one `rename`, so at any instant the files present, taken from the
//! highest number down to `NAME` itself, hold the lines in the order they were
//! written, each line once: a reader never needs a lock (`commands/chain.rs`).
//! Rotation never drops a line being written: a file that cannot be rotated is
//! written on, and rotation is tried again once it has grown by another
//! `max_bytes`.
//!
//! The counts of rotations done ([`EventLog::rotations`](super::EventLog::rotations),
//! [`supervisor_log_rotations`]) are there for metrics.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::state_dir::open_append;
use crate::config::Rotation;

/// `NAME.n`: the `n`-th most recent rotated file of `path`.
pub fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Moves `path` to `NAME.1`, each older `NAME.n` to `NAME.n+1` and drops what
/// would go past `NAME.keep` (files left beyond it by a larger `keep` too).
/// The caller begins a new `path`.
pub fn rotate(path: &Path, keep: u32) -> io::Result<()> {
    let keep = keep.clamp(1, Rotation::MAX_KEEP);
    for n in keep + 1..=Rotation::MAX_KEEP + 1 {
        remove_if_present(&rotated(path, n))?;
    }
    for n in (1..keep).rev() {
        match std::fs::rename(rotated(path, n), rotated(path, n + 1)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    std::fs::rename(path, rotated(path, 1))
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// A file appended to in whole records (lines), rotated before a record would
/// take it past its size: a record is never split between two files, and a file
/// is larger than `max_bytes` only when it holds a single record that is.
pub struct RotatingFile {
    path: PathBuf,
    file: File,
    /// Bytes in the file (as found when opened, then as appended).
    written: u64,
    rotation: Rotation,
}

impl RotatingFile {
    /// Opens `path` for appending (0600, never through a symlink).
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<RotatingFile> {
        let file = open_append(path)?;
        let written = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_owned(),
            file,
            written,
            rotation,
        })
    }

    /// From the next record on, rotates by `rotation` (the fleet file changed).
    pub fn set_rotation(&mut self, rotation: Rotation) {
        self.rotation = rotation;
    }

    /// Appends `record`, rotating the file first when the record would take it
    /// past its size. `Ok(true)` when it rotated. A rotation that fails is logged
    /// and the record goes to the file as it is.
    pub fn append(&mut self, record: &[u8]) -> io::Result<bool> {
        let due = self.written > 0 && self.written + record.len() as u64 > self.rotation.max_bytes;
        let mut rotated = false;
        if due {
            match self.rotate() {
                Ok(()) => rotated = true,
                Err(error) => {
                    tracing::error!(path = %self.path.display(), %error, "cannot rotate; writing on");
                    // Tried again once the file has grown by another max_bytes.
                    self.written = 0;
                }
            }
        }
        self.file.write_all(record)?;
        self.written += record.len() as u64;
        Ok(rotated)
    }

    fn rotate(&mut self) -> io::Result<()> {
        rotate(&self.path, self.rotation.keep)?;
        self.file = open_append(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

/// `supervisor.log` as this process's stderr, once [`keep_supervisor_log`] found
/// it there. Locked only with `try_lock`: a writer that finds it taken leaves
/// the check to the next line, and a line written while rotating cannot wait
/// on itself.
static SUPERVISOR_LOG: Mutex<Option<StderrLog>> = Mutex::new(None);

/// How many times this process rotated `supervisor.log`, for metrics.
static SUPERVISOR_LOG_ROTATIONS: AtomicU64 = AtomicU64::new(0);

struct StderrLog {
    path: PathBuf,
    rotation: Rotation,
    /// After a rotation that failed: the size from which to try again.
    retry_at: u64,
}

/// How many times this process rotated `supervisor.log`.
pub fn supervisor_log_rotations() -> u64 {
    SUPERVISOR_LOG_ROTATIONS.load(Ordering::Relaxed)
}

/// Keeps `path` (`supervisor.log`) to `rotation` from now on, if it is this
/// process's stderr (a detached supervisor's; a supervisor in the foreground
/// writes to a terminal or whatever its caller gave it, which is not ours to
/// rotate), and rotates it at once if it is past its size already. Called by the
/// holder of the supervisor lock only: a supervisor that lost the race must not
/// rotate the winner's log. Returns whether the log is kept.
pub fn keep_supervisor_log(path: &Path, rotation: Rotation) -> bool {
    if !stderr_is(path) {
        return false;
    }
    *lock_log() = Some(StderrLog {
        path: path.to_owned(),
        rotation,
        retry_at: 0,
    });
    before_stderr_write(0);
    true
}

/// From the next line on, rotates `supervisor.log` by `rotation`.
pub fn set_supervisor_log_rotation(rotation: Rotation) {
    if let Some(log) = lock_log().as_mut() {
        log.rotation = rotation;
    }
}

fn lock_log() -> std::sync::MutexGuard<'static, Option<StderrLog>> {
    SUPERVISOR_LOG.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether this process's stderr is the file at `path` (same device and inode).
pub fn stderr_is(path: &Path) -> bool {
    let Ok(fd2) = io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| File::from(fd).metadata())
    else {
        return false;
    };
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_file() && m.dev() == fd2.dev() && m.ino() == fd2.ino())
}

/// Called before `len` bytes are written to stderr (by the tracing writer):
/// rotates `supervisor.log` when they would take it past its size. Writes
/// that do not come through here (a panic's message, `eprintln!`) count in the
/// size all the same, since it is read from fd 2 itself.
pub fn before_stderr_write(len: usize) {
    let Ok(mut guard) = SUPERVISOR_LOG.try_lock() else {
        return;
    };
    let Some(log) = guard.as_mut() else {
        return;
    };
    let Some(size) = crate::platform::stderr_size() else {
        return;
    };
    if size == 0 || size + len as u64 <= log.rotation.max_bytes || size < log.retry_at {
        return;
    }
    match rotate_stderr(log) {
        Ok(()) => {
            log.retry_at = 0;
            SUPERVISOR_LOG_ROTATIONS.fetch_add(1, Ordering::Relaxed);
        }
        Err(error) => {
            log.retry_at = size + log.rotation.max_bytes;
            // Straight to fd 2: tracing would come back here.
            eprintln!(
                "mcpfleet: cannot rotate {}: {error}; writing on",
                log.path.display()
            );
        }
    }
}

/// Renames the log away and puts a new file on fd 2. What other threads write in
/// between goes to the renamed file, after the lines before it.
fn rotate_stderr(log: &StderrLog) -> io::Result<()> {
    rotate(&log.path, log.rotation.keep)?;
    let file = open_append(&log.path)?;
    crate::platform::redirect_stderr(&file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn records_are_never_split_and_old_files_shift_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let rotation = Rotation {
            max_bytes: 20,
            keep: 2,
        };
        let mut file = RotatingFile::open(&path, rotation).unwrap();
        let mut rotations = 0;
        for i in 0..10 {
            // 10 bytes each: two records per file.
            if file.append(format!("record {i:02}\n").as_bytes()).unwrap() {
                rotations += 1;
            }
        }
        assert_eq!(rotations, 4);
        assert_eq!(read(&path), "record 08\nrecord 09\n");
        assert_eq!(read(&rotated(&path, 1)), "record 06\nrecord 07\n");
        assert_eq!(read(&rotated(&path, 2)), "record 04\nrecord 05\n");
        assert!(!rotated(&path, 3).exists(), "only two are kept");

        // A record larger than the size gets a file of its own.
        let big = "x".repeat(30) + "\n";
        assert!(file.append(big.as_bytes()).unwrap());
        assert!(file.append(b"after\n").unwrap());
        assert_eq!(read(&rotated(&path, 1)), big);
        assert_eq!(read(&path), "after\n");

        // Fewer kept from now on: the files beyond are dropped at the next rotation.
        let mut file = RotatingFile::open(
            &path,
            Rotation {
                max_bytes: 20,
                keep: 5,
            },
        )
        .unwrap();
        for _ in 0..8 {
            file.append(b"0123456789\n").unwrap();
        }
        assert!(rotated(&path, 4).exists());
        file.set_rotation(Rotation {
            max_bytes: 20,
            keep: 1,
        });
        file.append(b"0123456789\n").unwrap();
        file.append(b"0123456789\n").unwrap();
        assert!(rotated(&path, 1).exists());
        assert!(!rotated(&path, 2).exists() && !rotated(&path, 4).exists());
    }

    #[test]
    fn a_file_found_past_its_size_is_rotated_at_the_first_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        std::fs::write(&path, "x".repeat(100) + "\n").unwrap();
        let rotation = Rotation {
            max_bytes: 50,
            keep: 1,
        };
        let mut file = RotatingFile::open(&path, rotation).unwrap();
        assert!(file.append(b"new\n").unwrap());
        assert_eq!(read(&path), "new\n");
        assert_eq!(read(&rotated(&path, 1)).len(), 101);
    }

    #[test]
    fn a_rotation_that_fails_loses_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let rotation = Rotation {
            max_bytes: 20,
            keep: 1,
        };
        let mut file = RotatingFile::open(&path, rotation).unwrap();
        file.append(b"one 56789\n").unwrap();
        file.append(b"two 56789\n").unwrap();
        // The rename cannot happen: NAME.1 is a directory that is not empty.
        std::fs::create_dir(rotated(&path, 1)).unwrap();
        std::fs::write(rotated(&path, 1).join("x"), "").unwrap();
        assert!(!file.append(b"three\n").unwrap());
        assert_eq!(read(&path), "one 56789\ntwo 56789\nthree\n");
        std::fs::remove_dir_all(rotated(&path, 1)).unwrap();
        assert!(!file.append(b"four 6789\n").unwrap(), "not tried at once");
        assert!(file.append(b"five 6789\n").unwrap(), "tried again later");
        assert_eq!(read(&path), "five 6789\n");
        assert_eq!(
            read(&rotated(&path, 1)),
            "one 56789\ntwo 56789\nthree\nfour 6789\n"
        );
    }

    #[test]
    fn stderr_is_only_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("supervisor.log");
        std::fs::write(&path, "").unwrap();
        assert!(!stderr_is(&path));
        assert!(!stderr_is(&dir.path().join("missing")));
    }
}
