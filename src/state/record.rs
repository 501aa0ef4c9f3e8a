//! Which fleet file a state directory serves (docs/design.md §3, "State
//! directory"): `fleet.path` holds the file's canonical absolute path, and
//! `fleet.yaml` the file's exact text as it was last read when a supervisor
//! started (or when the directory was first used).
//!
//! The record lets a command refuse a second fleet file that maps to the same
//! directory (two projects whose files both say `name: demo`), and lets `down`,
//! `status`, `logs` and `events` work from the copy once the file is gone. A
//! record is read as data from an untrusted disk: anything odd in it is a
//! [`RecordError`] naming the file, never a panic. The copy is written before
//! the path, so a record whose path exists always has its copy.

use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::dir::{COPY_FILE, PATH_FILE, is_own_dir, state_dirs};
use super::files::{read_bounded_nofollow, replace_atomically};

/// Far beyond any path the kernel takes (4096 bytes).
const PATH_MAX_BYTES: usize = 64 * 1024;

/// What a state directory records of its fleet file.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedFleet {
    /// The fleet file's canonical absolute path, when it was recorded.
    pub path: PathBuf,
    /// The fleet file's text as last read.
    pub source: String,
    /// When the copy was last written.
    pub recorded_at: SystemTime,
    /// Where the copy is, for messages.
    pub copy: PathBuf,
}

/// A record that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "{} is damaged ({why}); remove {} and {} (the next fleet file used with this state directory is then recorded)",
        file.display(), PATH_FILE, COPY_FILE
    )]
    Damaged { file: PathBuf, why: String },
    #[error("cannot read {}: {source}", file.display())]
    Unreadable {
        file: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The fleet file that `dir` records; `Ok(None)` when it records none (a state
/// directory made before records existed, or never used).
pub fn recorded_fleet(dir: &Path) -> Result<Option<RecordedFleet>, RecordError> {
    let path_file = dir.join(PATH_FILE);
    let damaged = |file: &Path, why: &str| RecordError::Damaged {
        file: file.to_path_buf(),
        why: why.to_owned(),
    };
    let unreadable = |file: &Path, source: io::Error| RecordError::Unreadable {
        file: file.to_path_buf(),
        source,
    };
    let bytes = match read_bounded_nofollow(&path_file, PATH_MAX_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(damaged(&path_file, "it is far too long for a path")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(&path_file, e)),
    };
    let path = parse_path(&bytes).map_err(|why| damaged(&path_file, why))?;
    let copy = dir.join(COPY_FILE);
    let text = match read_bounded_nofollow(&copy, crate::config::MAX_FILE_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(damaged(&copy, "it is larger than a fleet file may be")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(damaged(
                &path_file,
                &format!("it names a fleet file, but its copy {COPY_FILE} is missing"),
            ));
        }
        Err(e) => return Err(unreadable(&copy, e)),
    };
    let source = String::from_utf8(text).map_err(|_| damaged(&copy, "it is not UTF-8"))?;
    let recorded_at = std::fs::symlink_metadata(&copy)
        .and_then(|m| m.modified())
        .map_err(|e| unreadable(&copy, e))?;
    Ok(Some(RecordedFleet {
        path,
        source,
        recorded_at,
        copy,
    }))
}

/// The path in `fleet.path`: absolute, one line, no NUL.
fn parse_path(bytes: &[u8]) -> Result<PathBuf, &'static str> {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if line.is_empty() {
        return Err("it is empty");
    }
    if line.contains(&b'\n') || line.contains(&0) {
        return Err("it holds more than one path");
    }
    if line[0] != b'/' {
        return Err("the path in it is not absolute");
    }
    Ok(PathBuf::from(std::ffi::OsString::from_vec(line.to_vec())))
}

/// Records `path` (absolute) and `source`, its text, as the fleet file that `dir`
/// serves: the copy first, then the path, each replaced atomically.
pub fn record_fleet(dir: &Path, path: &Path, source: &str) -> io::Result<()> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot record {}: not an absolute path", path.display()),
        ));
    }
    replace_atomically(&dir.join(COPY_FILE), source.as_bytes())?;
    let mut line = path.as_os_str().as_bytes().to_vec();
    line.push(b'\n');
    replace_atomically(&dir.join(PATH_FILE), &line)
}

/// Whether a supervisor runs in `dir`: whether a process holds its
/// `supervisor.lock` (the kernel releases it when the holder dies, whatever
/// pid is written in it).
pub fn supervisor_runs(dir: &Path) -> io::Result<bool> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(dir.join("supervisor.lock"))
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(std::fs::TryLockError::WouldBlock) => Ok(true),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// How a fleet file stands with the state directory it maps to.
#[derive(Debug, PartialEq)]
pub enum Claim {
    /// The directory records this file.
    Recorded,
    /// The directory recorded no file; now it records this one.
    Adopted,
    /// The directory recorded another file that is gone, or that no longer uses
    /// this directory, and no supervisor runs in it: now it records this one.
    TookOver { previous: PathBuf },
}

/// Why a fleet file may not use a state directory.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another fleet file, which exists, uses the directory.
    #[error("the state directory {} serves the fleet file {}", dir.display(), recorded.path.display())]
    Taken {
        dir: PathBuf,
        recorded: RecordedFleet,
    },
    /// The recorded file is gone, but its supervisor still runs.
    #[error(
        "the state directory {} serves the fleet file {}, which is gone, and its supervisor still runs",
        dir.display(), recorded.path.display()
    )]
    Running {
        dir: PathBuf,
        recorded: RecordedFleet,
    },
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("cannot record the fleet file in {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Lets the fleet file `file` (canonical, absolute) with text `source` use the
/// state directory `dir`, recording it when the directory records no file, or one
/// that is gone (and no supervisor runs for it), or one that `still_uses` says
/// no longer uses this directory. Commands that arrive together are serialized
/// by a lock on the directory, so of two files that claim a new directory at the
/// same instant exactly one gets it.
pub fn claim(
    dir: &Path,
    file: &Path,
    source: &str,
    still_uses: impl FnOnce(&RecordedFleet) -> bool,
) -> Result<Claim, ClaimError> {
    let io_error = |source: io::Error| ClaimError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    let handle = File::open(dir).map_err(io_error)?;
    handle.lock().map_err(io_error)?;
    let Some(recorded) = recorded_fleet(dir)? else {
        record_fleet(dir, file, source).map_err(io_error)?;
        return Ok(Claim::Adopted);
    };
    if recorded.path == file {
        return Ok(Claim::Recorded);
    }
    // A dangling symlink is a file that is gone.
    let exists = std::fs::metadata(&recorded.path).is_ok();
    if exists && still_uses(&recorded) {
        return Err(ClaimError::Taken {
            dir: dir.to_path_buf(),
            recorded,
        });
    }
    if supervisor_runs(dir).map_err(io_error)? {
        return Err(ClaimError::Running {
            dir: dir.to_path_buf(),
            recorded,
        });
    }
    record_fleet(dir, file, source).map_err(io_error)?;
    Ok(Claim::TookOver {
        previous: recorded.path,
    })
}

/// The state directories under `root` that record `file`.
pub fn find_recording(root: &Path, file: &Path) -> Vec<PathBuf> {
    state_dirs(root)
        .unwrap_or_default()
        .into_iter()
        .filter(|dir| matches!(recorded_fleet(dir), Ok(Some(r)) if r.path == file))
        .collect()
}

/// The state directory, wherever it is, of a detached supervisor that runs now
/// for the fleet file `file` (canonical): the same fleet file leads to the same
/// supervisor whatever environment a caller has (docs/design.md §3, "One
/// supervisor per fleet file"). Found by the command lines of this user's
/// processes (`mcpfleet ... --state-dir DIR supervise`), each directory then
/// held to what it says itself: a directory of this user, whose record names
/// `file` and whose lock a process holds.
pub fn live_supervisor_of(file: &Path) -> Option<PathBuf> {
    let mut seen: Vec<PathBuf> = Vec::new();
    for pid in crate::platform::pids() {
        let Some(args) = crate::platform::own_cmdline(pid) else {
            continue;
        };
        if args.last().is_none_or(|a| a != "supervise") {
            continue;
        }
        let Some(dir) = args
            .windows(2)
            .find(|w| w[0] == "--state-dir")
            .map(|w| PathBuf::from(&w[1]))
        else {
            continue;
        };
        if !dir.is_absolute() || seen.contains(&dir) {
            continue;
        }
        seen.push(dir.clone());
        let serves = is_own_dir(&dir)
            && matches!(recorded_fleet(&dir), Ok(Some(r)) if r.path == file)
            && supervisor_runs(&dir).unwrap_or(false);
        if serves {
            return Some(dir);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn state() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let dir = state();
        assert_eq!(recorded_fleet(dir.path()).unwrap(), None, "nothing yet");
        let file = Path::new("/projects/a/mcpfleet.yaml");
        record_fleet(dir.path(), file, "version: 1\n").unwrap();
        let r = recorded_fleet(dir.path()).unwrap().expect("a record");
        assert_eq!(r.path, file);
        assert_eq!(r.source, "version: 1\n");
        assert_eq!(r.copy, dir.path().join(COPY_FILE));
        assert_eq!(
            std::fs::read(dir.path().join(PATH_FILE)).unwrap(),
            b"/projects/a/mcpfleet.yaml\n"
        );
        for name in [PATH_FILE, COPY_FILE] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
        // A later copy replaces the first.
        record_fleet(dir.path(), file, "version: 1\nname: b\n").unwrap();
        let r = recorded_fleet(dir.path()).unwrap().unwrap();
        assert_eq!(r.source, "version: 1\nname: b\n");
    }

    #[test]
    fn paths_that_are_not_utf8_are_kept_as_they_are() {
        let dir = state();
        let file = PathBuf::from(std::ffi::OsString::from_vec(b"/p/\xff\xfe.yaml".to_vec()));
        record_fleet(dir.path(), &file, "x").unwrap();
        assert_eq!(recorded_fleet(dir.path()).unwrap().unwrap().path, file);
        assert!(record_fleet(dir.path(), Path::new("relative.yaml"), "x").is_err());
    }

    /// A damaged record: what is wrong, `fleet.path`, `fleet.yaml` (if any), and
    /// which of the two the error must name.
    type Damage = (
        &'static str,
        &'static [u8],
        Option<&'static [u8]>,
        &'static str,
    );

    /// Every damaged record is an error that names the damaged file.
    #[test]
    fn a_damaged_record_is_an_error_naming_its_file() {
        let cases: &[Damage] = &[
            ("empty", b"", Some(b"x"), PATH_FILE),
            ("a lone newline", b"\n", Some(b"x"), PATH_FILE),
            ("relative", b"fleet.yaml\n", Some(b"x"), PATH_FILE),
            ("two lines", b"/a.yaml\n/b.yaml\n", Some(b"x"), PATH_FILE),
            ("a NUL", b"/a\0b.yaml\n", Some(b"x"), PATH_FILE),
            ("no copy", b"/a.yaml\n", None, PATH_FILE),
            (
                "a copy not UTF-8",
                b"/a.yaml\n",
                Some(b"name: \xff\n"),
                COPY_FILE,
            ),
        ];
        for (what, path, copy, named) in cases {
            let dir = state();
            std::fs::write(dir.path().join(PATH_FILE), path).unwrap();
            if let Some(copy) = copy {
                std::fs::write(dir.path().join(COPY_FILE), copy).unwrap();
            }
            let err = recorded_fleet(dir.path()).expect_err(what);
            assert!(matches!(err, RecordError::Damaged { .. }), "{what}: {err}");
            let message = err.to_string();
            let file = dir.path().join(named);
            assert!(
                message.contains(&file.display().to_string()),
                "{what}: {message}"
            );
        }
    }

    #[test]
    fn oversized_record_files_are_damaged_not_read_whole() {
        let dir = state();
        let long = vec![b'/'; PATH_MAX_BYTES + 1];
        std::fs::write(dir.path().join(PATH_FILE), &long).unwrap();
        std::fs::write(dir.path().join(COPY_FILE), b"x").unwrap();
        let err = recorded_fleet(dir.path()).unwrap_err().to_string();
        assert!(err.contains("too long"), "{err}");

        std::fs::write(dir.path().join(PATH_FILE), b"/a.yaml\n").unwrap();
        let copy = File::create(dir.path().join(COPY_FILE)).unwrap();
        copy.set_len(crate::config::MAX_FILE_BYTES as u64 + 1)
            .unwrap();
        let err = recorded_fleet(dir.path()).unwrap_err().to_string();
        assert!(err.contains(COPY_FILE) && err.contains("larger"), "{err}");
    }

    #[test]
    fn a_record_is_never_read_through_a_symlink() {
        let dir = state();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"/etc/passwd\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join(PATH_FILE)).unwrap();
        let err = recorded_fleet(dir.path()).unwrap_err();
        assert!(matches!(err, RecordError::Unreadable { .. }), "{err}");
        assert!(err.to_string().contains(PATH_FILE), "{err}");
        // Nor written through one.
        assert!(record_fleet(dir.path(), Path::new("/a.yaml"), "x").is_ok());
        assert_eq!(std::fs::read(&outside).unwrap(), b"/etc/passwd\n");
    }

    #[test]
    fn the_first_file_is_adopted_and_a_second_one_refused() {
        let projects = state();
        let a = projects.path().join("a.yaml");
        let b = projects.path().join("b.yaml");
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        let dir = state();
        assert_eq!(
            claim(dir.path(), &a, "a", |_| true).unwrap(),
            Claim::Adopted
        );
        assert_eq!(
            claim(dir.path(), &a, "a", |_| true).unwrap(),
            Claim::Recorded
        );
        let err = claim(dir.path(), &b, "b", |_| true).unwrap_err();
        assert!(
            matches!(&err, ClaimError::Taken { recorded, .. } if recorded.path == a),
            "{err}"
        );
        // The record is unchanged by the refusal.
        let r = recorded_fleet(dir.path()).unwrap().unwrap();
        assert_eq!((r.path.as_path(), r.source.as_str()), (a.as_path(), "a"));
        // A recorded file that no longer uses the directory gives it up.
        assert_eq!(
            claim(dir.path(), &b, "b", |_| false).unwrap(),
            Claim::TookOver { previous: a }
        );
    }

    #[test]
    fn a_gone_file_is_taken_over_unless_its_supervisor_runs() {
        let projects = state();
        let gone = projects.path().join("gone.yaml");
        let new = projects.path().join("new.yaml");
        std::fs::write(&new, "new").unwrap();
        let dir = state();
        record_fleet(dir.path(), &gone, "old").unwrap();
        // A supervisor holds its lock.
        let lock = File::create(dir.path().join("supervisor.lock")).unwrap();
        lock.lock().unwrap();
        assert!(supervisor_runs(dir.path()).unwrap());
        let err = claim(dir.path(), &new, "new", |_| true).unwrap_err();
        assert!(matches!(err, ClaimError::Running { .. }), "{err}");
        drop(lock);
        assert!(!supervisor_runs(dir.path()).unwrap());
        assert_eq!(
            claim(dir.path(), &new, "new", |_| true).unwrap(),
            Claim::TookOver { previous: gone }
        );
        assert_eq!(recorded_fleet(dir.path()).unwrap().unwrap().source, "new");
    }

    #[test]
    fn of_files_claiming_a_new_directory_at_once_exactly_one_gets_it() {
        let projects = state();
        let dir = state();
        let files: Vec<PathBuf> = (0..8)
            .map(|i| {
                let f = projects.path().join(format!("{i}.yaml"));
                std::fs::write(&f, "x").unwrap();
                f
            })
            .collect();
        let threads: Vec<_> = files
            .iter()
            .map(|f| {
                let (dir, f) = (dir.path().to_path_buf(), f.clone());
                std::thread::spawn(move || claim(&dir, &f, "x", |_| true).is_ok())
            })
            .collect();
        let won = threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|ok| *ok)
            .count();
        assert_eq!(won, 1);
    }

    #[test]
    fn recordings_are_found_under_the_state_root() {
        let root = state();
        let file = Path::new("/p/mcpfleet.yaml");
        for (name, recorded) in [("a", "/p/other.yaml"), ("b", "/p/mcpfleet.yaml")] {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            record_fleet(&dir, Path::new(recorded), "x").unwrap();
        }
        // A damaged record elsewhere does not hide the others.
        std::fs::create_dir(root.path().join("c")).unwrap();
        std::fs::write(root.path().join("c").join(PATH_FILE), b"").unwrap();
        assert_eq!(
            find_recording(root.path(), file),
            vec![root.path().join("b")]
        );
        assert!(find_recording(&root.path().join("missing"), file).is_empty());
    }
}
