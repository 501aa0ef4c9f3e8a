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
//!
//! The new file is opened (as `NAME.next`) before anything is renamed: a process
//! out of descriptors (EMFILE) cannot open it, and then nothing moves and the
//! writer stays on `NAME`. When the open fails even with the one spare descriptor
//! kept for it ([`Spare`]), a file at its size takes no more lines: they are
//! dropped and counted, rotation is tried again at the next line, and the new
//! file, once there is one, begins with a line saying how many were dropped and
//! why. So a file never grows past its size (by more than one line that is larger
//! than the size by itself), whatever fails, and `supervisor.log` on fd 2 is
//! always `NAME`, never a rotated file.
//!
//! The counts of rotations done (the supervisor's `EventLog::rotations`,
//! [`supervisor_log_rotations`]) are there for metrics.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::open_append;
use crate::config::Rotation;

/// How a rotation opens the file that becomes `NAME`: [`open_append`], but for
/// tests, which make it fail as a process out of descriptors would.
pub type Open = fn(&Path) -> io::Result<File>;

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

/// `NAME.next`: the new file, until it is renamed `NAME`. Readers take only
/// `NAME` and `NAME.n` (a number), never this.
fn next_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".next");
    PathBuf::from(name)
}

/// Rotates `path` and returns the new, empty file now at `path`. The new file is
/// opened first (through `open`, with the spare descriptor if there is no other):
/// when it cannot be, nothing was renamed and `path` is the file it was. A rename
/// refused after it is undone as far as it can be, so `path` stays the file
/// written to.
pub fn rotate_to_new(path: &Path, keep: u32, open: Open) -> io::Result<File> {
    let next = next_of(path);
    remove_if_present(&next)?;
    let file = Spare::open_with(|| open(&next))?;
    if let Err(e) = rotate(path, keep) {
        let _ = std::fs::remove_file(&next);
        // `path` itself is moved last: if that rename was refused, it is in place.
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&next, path) {
        let _ = std::fs::rename(rotated(path, 1), path);
        let _ = std::fs::remove_file(&next);
        return Err(e);
    }
    Ok(file)
}

/// One descriptor kept open (on `/dev/null`) for a rotation to use when the
/// process has no other: it is closed just before the new file is opened again,
/// and taken back as soon as a descriptor is free.
pub struct Spare;

static SPARE: Mutex<Option<File>> = Mutex::new(None);

impl Spare {
    /// Takes the spare descriptor if it is not held; called when the
    /// supervisor starts and after each rotation.
    pub fn keep() {
        let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
        if spare.is_none() {
            *spare = File::open("/dev/null").ok();
        }
    }

    /// `open()`, and when it fails for want of a descriptor, again with the
    /// spare's given up for it.
    fn open_with(open: impl Fn() -> io::Result<File>) -> io::Result<File> {
        match open() {
            Err(e) if crate::platform::too_many_open_files(&e) => {
                let spare = SPARE.lock().unwrap_or_else(|p| p.into_inner()).take();
                if spare.is_none() {
                    return Err(e);
                }
                drop(spare);
                open()
            }
            other => other,
        }
    }
}

/// Lines dropped because their file was at its size and could not be rotated,
/// and why it could not, for the first line of the next file.
#[derive(Debug, Default)]
struct Dropped {
    lines: u64,
    bytes: u64,
    why: Option<String>,
}

impl Dropped {
    fn count(&mut self, len: usize, why: &io::Error) {
        self.lines += 1;
        self.bytes += len as u64;
        if self.why.is_none() {
            self.why = Some(why.to_string());
        }
    }

    /// The line that begins the next file, if anything was dropped.
    fn note(&mut self, path: &Path) -> Option<String> {
        let dropped = std::mem::take(self);
        (dropped.lines > 0).then(|| {
            format!(
                "mcpfleet: {} line(s) ({} bytes) dropped: {} was at its size and could not be rotated: {}\n",
                dropped.lines,
                dropped.bytes,
                path.display(),
                dropped.why.unwrap_or_default()
            )
        })
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
    open: Open,
    dropped: Dropped,
    /// Records dropped in all.
    dropped_total: u64,
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
            open: open_append,
            dropped: Dropped::default(),
            dropped_total: 0,
        })
    }

    /// Opens the new file of each rotation with `open` (tests make it fail).
    pub fn with_open(mut self, open: Open) -> RotatingFile {
        self.open = open;
        self
    }

    /// How many records were dropped because the file was at its size and could
    /// not be rotated.
    pub fn dropped(&self) -> u64 {
        self.dropped_total
    }

    /// From the next record on, rotates by `rotation` (the fleet file changed).
    pub fn set_rotation(&mut self, rotation: Rotation) {
        self.rotation = rotation;
    }

    /// Appends `record`, rotating the file first when the record would take it
    /// past its size. `Ok(true)` when it rotated. When the file cannot be
    /// rotated, the record is dropped and counted (the file stays within its
    /// size), and rotation is tried again at the next record.
    pub fn append(&mut self, record: &[u8]) -> io::Result<bool> {
        let due = self.written > 0 && self.written + record.len() as u64 > self.rotation.max_bytes;
        let mut rotated = false;
        if due {
            match rotate_to_new(&self.path, self.rotation.keep, self.open) {
                Ok(file) => {
                    self.file = file;
                    self.written = 0;
                    rotated = true;
                    Spare::keep();
                    if let Some(note) = self.dropped.note(&self.path) {
                        tracing::error!("{}", note.trim_end());
                    }
                }
                Err(error) => {
                    if self.dropped.lines == 0 {
                        tracing::error!(path = %self.path.display(), %error, "cannot rotate; dropping records until it can");
                    }
                    self.dropped.count(record.len(), &error);
                    self.dropped_total += 1;
                    Spare::keep();
                    return Ok(false);
                }
            }
        }
        self.file.write_all(record)?;
        self.written += record.len() as u64;
        Ok(rotated)
    }
}

/// `supervisor.log` as this process's stderr, once [`keep_supervisor_log`] found
/// it there. Locked only with `try_lock`: a writer that finds it taken leaves
/// the check to the next line (or, while the log is full, drops its line), and a
/// line written while rotating cannot wait on itself.
static SUPERVISOR_LOG: Mutex<Option<StderrLog>> = Mutex::new(None);

/// How many times this process rotated `supervisor.log`, for metrics.
static SUPERVISOR_LOG_ROTATIONS: AtomicU64 = AtomicU64::new(0);

/// Set while `supervisor.log` is at its size and cannot be rotated: a line that
/// finds the lock taken is dropped rather than written past the size.
static SUPERVISOR_LOG_FULL: AtomicBool = AtomicBool::new(false);

/// Lines dropped while the lock was taken and the log full, for the next note.
static SUPERVISOR_LOG_DROPPED_UNLOCKED: AtomicU64 = AtomicU64::new(0);

struct StderrLog {
    path: PathBuf,
    rotation: Rotation,
    dropped: Dropped,
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
    Spare::keep();
    *lock_log() = Some(StderrLog {
        path: path.to_owned(),
        rotation,
        dropped: Dropped::default(),
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

/// What to do with a line of `len` bytes for a log of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// It fits.
    Write,
    /// Rotate first.
    Rotate,
}

fn due(size: u64, len: usize, max_bytes: u64) -> Due {
    if size == 0 || size + len as u64 <= max_bytes {
        Due::Write
    } else {
        Due::Rotate
    }
}

/// Called before `len` bytes are written to stderr (by the tracing writer):
/// rotates `supervisor.log` when they would take it past its size. Returns
/// whether to write them: `false` when the log is at its size and cannot be
/// rotated (the line is counted as dropped). Writes that do not come through
/// here (a panic's message, `eprintln!`) count in the size all the same, since
/// it is read from fd 2 itself, but are never dropped.
pub fn before_stderr_write(len: usize) -> bool {
    let Ok(mut guard) = SUPERVISOR_LOG.try_lock() else {
        if SUPERVISOR_LOG_FULL.load(Ordering::Relaxed) {
            SUPERVISOR_LOG_DROPPED_UNLOCKED.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        return true;
    };
    let Some(log) = guard.as_mut() else {
        return true;
    };
    let Some(size) = crate::platform::stderr_size() else {
        return true;
    };
    if due(size, len, log.rotation.max_bytes) == Due::Write {
        return true;
    }
    match rotate_to_new(&log.path, log.rotation.keep, open_append)
        .and_then(|file| crate::platform::redirect_stderr(&file))
    {
        Ok(()) => {
            SUPERVISOR_LOG_FULL.store(false, Ordering::Relaxed);
            SUPERVISOR_LOG_ROTATIONS.fetch_add(1, Ordering::Relaxed);
            Spare::keep();
            let unlocked = SUPERVISOR_LOG_DROPPED_UNLOCKED.swap(0, Ordering::Relaxed);
            log.dropped.lines += unlocked;
            if let Some(note) = log.dropped.note(&log.path) {
                // Straight to fd 2: tracing would come back here.
                let _ = io::stderr().write_all(note.as_bytes());
            }
            true
        }
        Err(error) => {
            SUPERVISOR_LOG_FULL.store(true, Ordering::Relaxed);
            log.dropped.count(len, &error);
            Spare::keep();
            false
        }
    }
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
    fn a_rotation_refused_keeps_the_file_to_its_size_and_is_tried_at_the_next_record() {
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
        assert!(!file.append(b"four\n").unwrap());
        assert_eq!(read(&path), "one 56789\ntwo 56789\n", "dropped, not written past the size");
        assert_eq!(file.dropped(), 2);
        assert!(!next_of(&path).exists(), "the new file is not left behind");
        std::fs::remove_dir_all(rotated(&path, 1)).unwrap();
        assert!(file.append(b"five 6789\n").unwrap(), "tried again at once");
        assert_eq!(read(&path), "five 6789\n");
        assert_eq!(read(&rotated(&path, 1)), "one 56789\ntwo 56789\n");
        assert_eq!(file.dropped(), 2);
    }

    static OUT_OF_DESCRIPTORS: AtomicBool = AtomicBool::new(false);

    /// Opens like a rotation does, unless told to fail as a process out of
    /// descriptors does.
    fn flaky_open(path: &Path) -> io::Result<File> {
        if OUT_OF_DESCRIPTORS.load(Ordering::SeqCst) {
            return Err(crate::platform::out_of_descriptors());
        }
        open_append(path)
    }

    #[test]
    fn without_a_descriptor_nothing_is_renamed_and_the_size_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let rotation = Rotation {
            max_bytes: 100,
            keep: 2,
        };
        let mut file = RotatingFile::open(&path, rotation)
            .unwrap()
            .with_open(flaky_open);
        for i in 0..15 {
            file.append(format!("before {i:02}\n").as_bytes()).unwrap();
        }
        assert_eq!(read(&path).len(), 50);
        let rotated_before: Vec<bool> = (1..=3).map(|n| rotated(&path, n).exists()).collect();
        let one_before = read(&rotated(&path, 1));
        let current_before = read(&path);
        OUT_OF_DESCRIPTORS.store(true, Ordering::SeqCst);
        for i in 0..1000 {
            assert!(!file.append(format!("during {i:03}\n").as_bytes()).unwrap());
            assert!(std::fs::metadata(&path).unwrap().len() <= 100);
        }
        // Nothing moved: the file written to is still NAME, and NAME.1 as it was.
        assert_eq!(
            (1..=3).map(|n| rotated(&path, n).exists()).collect::<Vec<_>>(),
            rotated_before
        );
        assert_eq!(read(&rotated(&path, 1)), one_before);
        assert!(read(&path).starts_with(&current_before));
        assert!(!next_of(&path).exists());
        assert_eq!(read(&rotated(&path, 1)).len(), 100);
        assert_eq!(file.dropped(), 1000 - (100 - current_before.len() as u64) / 11);
        OUT_OF_DESCRIPTORS.store(false, Ordering::SeqCst);
        assert!(file.append(b"after 0001\n").unwrap());
        file.append(b"after 0002\n").unwrap();
        assert_eq!(read(&path), "after 0001\nafter 0002\n");
        assert!(read(&rotated(&path, 1)).starts_with(&current_before));
        assert_eq!(read(&rotated(&path, 2)), one_before);
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= 300, "{total}");
    }

    #[test]
    fn the_note_of_dropped_lines_says_how_many_and_why() {
        let mut dropped = Dropped::default();
        assert!(dropped.note(Path::new("s.log")).is_none());
        let emfile = crate::platform::out_of_descriptors();
        dropped.count(10, &emfile);
        dropped.count(5, &io::Error::other("later"));
        let note = dropped.note(Path::new("s.log")).unwrap();
        assert!(
            note.starts_with("mcpfleet: 2 line(s) (15 bytes) dropped: s.log was at its size"),
            "{note}"
        );
        assert!(note.contains(&emfile.to_string()) && note.ends_with('\n'), "{note}");
        assert!(dropped.note(Path::new("s.log")).is_none(), "said once");
        assert_eq!(due(0, 500, 100), Due::Write, "a line larger than the size");
        assert_eq!(due(60, 40, 100), Due::Write);
        assert_eq!(due(60, 41, 100), Due::Rotate);
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
