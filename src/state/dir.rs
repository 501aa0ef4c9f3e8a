//! The state directory of one fleet (docs/design.md §3): the supervisor's lock, its control
//! socket, `state.json`, the event log and one stderr log per server.
//!
//! It is created with mode 0700 and refused when it is a symlink, belongs to another
//! user or is open to others: everything in it is trusted by the supervisor, so no
//! one else may be able to plant files there. Files in it are opened without
//! following symlinks.
//!
//! A state directory serves one fleet file, which it records (`record.rs`): the
//! file's path and a copy of its text, so that a second file cannot take it over
//! and a fleet whose file is gone can still be stopped.

use std::fs::{self};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::Fleet;
use crate::hash::fnv1a;
/// The control socket's path as `bind` and `connect` can take it, however long the
/// state directory's path is.
pub use crate::platform::SocketPath;

/// The recorded path of the fleet file, followed by a newline.
pub const PATH_FILE: &str = "fleet.path";
/// The recorded copy of the fleet file.
pub const COPY_FILE: &str = "fleet.yaml";
/// The supervisor's own log, in the state directory.
pub const SUPERVISOR_LOG: &str = "supervisor.log";

/// The environment variable that overrides where the state directory is.
pub const STATE_DIR_ENV: &str = "MCPFLEET_STATE_DIR";

#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    /// Where a fleet's state lives: `--state-dir`, then `$MCPFLEET_STATE_DIR`, then
    /// `$XDG_STATE_HOME/mcpfleet/<key>` (or `~/.local/state/...`), where the key is
    /// the fleet's `name`, or the file's name and a hash of its full path.
    pub fn locate(fleet: &Fleet, explicit: Option<&Path>) -> io::Result<PathBuf> {
        if let Some(p) = chosen(explicit) {
            return Ok(p);
        }
        Ok(state_root()?.join(fleet_key(fleet)))
    }

    /// Opens (creating if needed) the state directory, checking that it is safe.
    pub fn open(root: &Path) -> io::Result<StateDir> {
        match fs::symlink_metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(root)?;
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let meta = fs::symlink_metadata(root)?;
        let fail = |why: &str| {
            io::Error::other(format!("unsafe state directory {}: {why}", root.display()))
        };
        if meta.file_type().is_symlink() {
            return Err(fail("it is a symlink"));
        }
        if !meta.is_dir() {
            return Err(fail("it is not a directory"));
        }
        if meta.uid() != crate::platform::uid() {
            return Err(fail("it belongs to another user"));
        }
        if meta.permissions().mode() & 0o077 != 0 {
            // Our own directory with loose bits (e.g. made by hand): tighten it.
            fs::set_permissions(root, fs::Permissions::from_mode(0o700))?;
        }
        // One spelling per directory: the tag scope of its processes is derived from
        // it, and `/x/state` and `/x/state/` must find the same processes.
        let dir = StateDir {
            root: fs::canonicalize(root)?,
        };
        // Several commands may open a new state directory at the same instant: one
        // of them creates `logs/`, and for the others it already exists.
        match fs::DirBuilder::new().mode(0o700).create(dir.logs()) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let logs = fs::symlink_metadata(dir.logs())?;
        if !logs.is_dir() || logs.uid() != crate::platform::uid() {
            return Err(io::Error::other(format!(
                "unsafe state directory {}: logs/ is not a directory of this user",
                dir.root.display()
            )));
        }
        Ok(dir)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn lock(&self) -> PathBuf {
        self.root.join("supervisor.lock")
    }
    pub fn socket(&self) -> PathBuf {
        self.root.join("control.sock")
    }
    /// The control socket as `bind` and `connect` can take it, whatever the length
    /// of the state directory's path (see [`SocketPath`]).
    pub fn socket_path(&self) -> std::io::Result<SocketPath> {
        SocketPath::new(&self.socket())
    }
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }
    pub fn events(&self) -> PathBuf {
        self.root.join("events.ndjson")
    }
    /// The supervisor's stderr, rotated while it runs (`rotation.rs`).
    pub fn supervisor_log(&self) -> PathBuf {
        self.root.join(SUPERVISOR_LOG)
    }
    /// The gateway's log (beside the servers' logs, not among them: a server may
    /// be called `gateway`).
    pub fn gateway_log(&self) -> PathBuf {
        self.root.join("gateway.log")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn server_log(&self, server: &str) -> PathBuf {
        self.logs().join(format!("{server}.log"))
    }
}

/// The scope of this state directory's process tags, shared by every supervisor
/// that ever uses it, so that a successor recognises its predecessor's processes.
pub fn tag_scope(dir: &StateDir) -> String {
    format!(
        "sv-{:016x}",
        fnv1a(dir.root().as_os_str().as_encoded_bytes())
    )
}

/// The state directory chosen by the user: `--state-dir`, then
/// `$MCPFLEET_STATE_DIR`; `None` when it is the default one under [`state_root`].
pub fn chosen(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    std::env::var_os(STATE_DIR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// Where the default state directories are: `$XDG_STATE_HOME/mcpfleet`, else
/// `~/.local/state/mcpfleet`, `~` being `$HOME`, or without it the user's home
/// directory from the user database (a caller with an empty environment).
pub fn state_root() -> io::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .or_else(crate::platform::home_dir)
                .ok_or_else(|| {
                    io::Error::other(
                        "neither XDG_STATE_HOME nor HOME is set, and this user has no home directory; use --state-dir",
                    )
                })?;
            home.join(".local/state")
        }
    };
    Ok(base.join("mcpfleet"))
}

/// Whether `path` is a directory of this user, not reached through a symlink:
/// one that may be a state directory (it is not created or changed).
pub fn is_own_dir(path: &Path) -> bool {
    fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_dir() && m.uid() == crate::platform::uid())
}

/// The state directories under `root`, by name: directories of this user that
/// hold a fleet record, a `state.json` or a `supervisor.lock`. None when `root`
/// does not exist.
pub fn state_dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_own_dir(p))
        .filter(|p| {
            [PATH_FILE, "state.json", "supervisor.lock"]
                .iter()
                .any(|f| fs::symlink_metadata(p.join(f)).is_ok())
        })
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The name of a fleet's state directory.
fn fleet_key(fleet: &Fleet) -> String {
    if let Some(name) = &fleet.name {
        return name.clone();
    }
    let stem: String = fleet
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!(
        "{stem}-{:016x}",
        fnv1a(fleet.file.as_os_str().as_encoded_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{open_append, open_rw, read_nofollow, replace_atomically};

    #[test]
    fn state_files_are_never_read_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.json");
        fs::write(&outside, b"{\"planted\": true}").unwrap();
        let link = dir.path().join("state.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let err = read_nofollow(&link).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(crate::platform::Errno::ELOOP as i32),
            "{err}"
        );
        fs::remove_file(&link).unwrap();
        fs::write(&link, b"{}").unwrap();
        assert_eq!(read_nofollow(&link).unwrap(), b"{}");
    }

    #[test]
    fn a_new_directory_is_private_and_a_symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("state");
        let dir = StateDir::open(&root).unwrap();
        let mode = fs::metadata(dir.root()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(dir.logs().is_dir());

        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        let err = StateDir::open(&link).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
    }

    #[test]
    fn many_commands_can_open_a_new_directory_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("fresh");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let root = root.clone();
                std::thread::spawn(move || StateDir::open(&root).map(|_| ()))
            })
            .collect();
        for t in threads {
            t.join().unwrap().expect("every opener succeeds");
        }
    }

    #[test]
    fn files_are_never_opened_through_a_planted_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("victim");
        fs::write(&target, "keep").unwrap();
        let planted = tmp.path().join("events.ndjson");
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        assert!(open_append(&planted).is_err());
        assert!(open_rw(&planted).is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn replacement_is_atomic_and_private() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.json");
        replace_atomically(&path, b"one").unwrap();
        replace_atomically(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }
}
