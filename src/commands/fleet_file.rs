//! Finding, reading and writing the fleet file as the commands do: where it is
//! and how it was found, its text read at a version the supervisor can compare.

use std::path::Path;


use crate::config::{self, ConfigErrors, Fleet};
use crate::protocol::{FileVersion, FleetSource};

use super::cli_error::CliError;

/// Replaces the file at `path` with `bytes` all at once: written beside it under a
/// temporary name, synced, then renamed over it, so that a reader (or a CI step
/// after a killed run) sees the old file or the new one, never half of one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path names no file"))?;
    let tmp = path.with_file_name(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_data()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Finds and loads the fleet file (`-f`, then `$MCPFLEET_FILE`, then the nearest
/// mcpfleet.yaml or mcpfleet.yml).
pub fn load_fleet(explicit: Option<&Path>) -> Result<Fleet, CliError> {
    Ok(read_fleet(&find_fleet(explicit)?)?.0)
}

/// Where the fleet file is (`-f`, then `$MCPFLEET_FILE`, then the nearest
/// mcpfleet.yaml or mcpfleet.yml in the current directory or above it).
pub fn find_fleet(explicit: Option<&Path>) -> Result<std::path::PathBuf, CliError> {
    let cwd = current_dir()?;
    let env_file = std::env::var_os(config::FILE_ENV_VAR);
    let found = config::discover(explicit, env_file.as_deref(), &cwd)?;
    warn_passed_over(&found);
    let how = how_found(&found.path, found.named, &cwd);
    tracing::info!("fleet file {} ({how})", found.path.display());
    Ok(found.path)
}

pub(crate) fn current_dir() -> Result<std::path::PathBuf, CliError> {
    std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}").into())
}

/// What the search for the fleet file passed over, as warnings.
pub(crate) fn warn_passed_over(found: &config::Candidate) {
    for notice in &found.notices {
        tracing::warn!("{notice}");
    }
}

/// How the fleet file at `path` was found, for the `-v` line that names it.
pub(crate) fn how_found(path: &Path, named: config::Named, cwd: &Path) -> String {
    match named {
        config::Named::Flag => "given with -f/--file".to_string(),
        config::Named::Env => format!("named by ${}", config::FILE_ENV_VAR),
        config::Named::Default if path.parent() == Some(cwd) => {
            "found in the current directory".to_string()
        }
        config::Named::Default => format!("found above the current directory {}", cwd.display()),
    }
}

/// Reads and validates the fleet file at `path`, and says how it was read: its
/// text and the value of each `${env:NAME}` it looked up, for the supervisor to
/// validate the same (docs/design.md §16). No source when the path is not UTF-8
/// (the supervisor then keeps the file it has).
pub fn read_fleet(path: &Path) -> Result<(Fleet, Option<FleetSource>), ConfigErrors> {
    let (text, version) = read_versioned(path)?;
    let (fleet, seen) = config::load_text_from_env(&text, path)?;
    // An MCP client's file read directly: what did not carry over is said
    // once per command (docs/design.md §15).
    for notice in &fleet.notices {
        tracing::warn!("{}: {notice}", path.display());
    }
    let source = path.to_str().map(|p| FleetSource {
        path: p.to_owned(),
        text,
        env: seen,
        version,
    });
    Ok((fleet, source))
}

/// The fleet file's text and the version it is (docs/design.md §16, R6): the
/// file is looked at before and after it is read, and read again while the two
/// differ (it was being written). A file that never holds still for a read, or
/// that cannot be looked at, has no version: the supervisor then takes it
/// without comparing.
fn read_versioned(path: &Path) -> Result<(String, Option<FileVersion>), ConfigErrors> {
    let mut tries = 0;
    loop {
        let before = file_version(path);
        let text = config::read(path)?;
        let after = file_version(path);
        tries += 1;
        if before == after || tries == 3 {
            return Ok((text, after.filter(|_| before == after)));
        }
    }
}

/// The version of the file at `path` now, if it can be looked at.
pub fn file_version(path: &Path) -> Option<FileVersion> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let ns = |secs: i64, nanos: i64| secs.saturating_mul(1_000_000_000).saturating_add(nanos);
    Some(FileVersion {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
        changed_ns: ns(meta.ctime(), meta.ctime_nsec()),
    })
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_file_is_sent_with_the_version_it_was_read_at() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcpfleet.yaml");
        let text = "version: 1\nservers:\n  a:\n    command: x\n";
        std::fs::write(&path, text).unwrap();
        let (_, source) = read_fleet(&path).unwrap();
        let version = source.unwrap().version.expect("a version");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(version.ino, meta.ino());
        assert_eq!(version.dev, meta.dev());
        assert_eq!(version.size, text.len() as u64);
        assert_eq!(
            version.changed_ns,
            meta.ctime() * 1_000_000_000 + meta.ctime_nsec()
        );
        // Replaced by another file: another identity, and not an older version.
        let tmp = dir.path().join("new.yaml");
        std::fs::write(&tmp, format!("{text}# edited\n")).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let (_, source) = read_fleet(&path).unwrap();
        let newer = source.unwrap().version.unwrap();
        assert_ne!(newer.ino, version.ino);
        assert!(!newer.is_older_than(&version));
    }
}
