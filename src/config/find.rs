//! Which fleet file is meant: `-f`, `$MCPFLEET_FILE`, or the nearest default
//! file in the current directory or above it (docs/design.md §7).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::error::ConfigErrors;

/// The name looked for, first, in the current directory and above it when no
/// file is named (then `mcpfleet.yml`).
pub const DEFAULT_FILE_NAME: &str = "mcpfleet.yaml";
/// The environment variable that names the fleet file.
pub const FILE_ENV_VAR: &str = "MCPFLEET_FILE";

/// How the fleet file was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// With `-f/--file`.
    Flag,
    /// With `$MCPFLEET_FILE`.
    Env,
    /// Not at all: looked for in the current directory and its parents.
    Default,
}

/// The fleet file that is meant, whether or not it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Absolute when `cwd` was.
    pub path: PathBuf,
    pub named: Named,
    /// What the search for it passed over, to be said on stderr: the
    /// `mcpfleet.yml` beside the `mcpfleet.yaml` it took, files of other users.
    pub notices: Vec<String>,
}

/// The names looked for when no file is named, in the order they are preferred.
pub const DEFAULT_FILE_NAMES: [&str; 2] = [DEFAULT_FILE_NAME, "mcpfleet.yml"];

/// Which fleet file is meant, whether or not it exists: explicit -f path, else
/// $MCPFLEET_FILE, else the nearest `mcpfleet.yaml` or `mcpfleet.yml` in `cwd` or
/// a directory above it, up to the file system's root, as docker compose looks
/// for its file (docs/design.md §7); when there is none, `cwd/mcpfleet.yaml`.
/// Relative paths are taken from `cwd`. An empty `MCPFLEET_FILE` counts as unset,
/// as shells make unsetting awkward.
pub fn candidate(explicit: Option<&Path>, env_file: Option<&OsStr>, cwd: &Path) -> Candidate {
    candidate_below(explicit, env_file, cwd, None)
}

/// [`candidate`], looking no higher than `ceiling` (tests keep to their own
/// temporary directory with it).
pub(super) fn candidate_below(
    explicit: Option<&Path>,
    env_file: Option<&OsStr>,
    cwd: &Path,
    ceiling: Option<&Path>,
) -> Candidate {
    let (path, named) = match (explicit, env_file.filter(|f| !f.is_empty())) {
        (Some(path), _) => (cwd.join(path), Named::Flag),
        (None, Some(path)) => (cwd.join(path), Named::Env),
        (None, None) => return look_up(cwd, ceiling),
    };
    Candidate {
        path,
        named,
        notices: Vec::new(),
    }
}

/// The nearest default fleet file at or above `cwd`. Above `cwd`, a file that
/// belongs to another user (neither this one nor root) is passed over with a
/// notice: anyone may write `/tmp/mcpfleet.yaml`, and its commands would run as
/// this user.
fn look_up(cwd: &Path, ceiling: Option<&Path>) -> Candidate {
    use std::os::unix::fs::MetadataExt;
    let me = crate::platform::euid();
    let mut notices = Vec::new();
    for dir in cwd.ancestors() {
        let mut found = DEFAULT_FILE_NAMES
            .iter()
            .map(|name| dir.join(name))
            .filter_map(|path| std::fs::metadata(&path).ok().map(|meta| (path, meta)))
            .filter(|(path, meta)| {
                let owner = meta.uid();
                let foreign = dir != cwd && owner != me && owner != 0;
                if foreign {
                    notices.push(format!(
                        "passed over {}: it belongs to user {owner}, not to you (name it with -f/--file to use it)",
                        path.display()
                    ));
                }
                !foreign
            })
            .map(|(path, _)| path);
        if let Some(path) = found.next() {
            if found.next().is_some() {
                notices.push(format!(
                    "both {} and {} are in {}; using {}",
                    DEFAULT_FILE_NAMES[0],
                    DEFAULT_FILE_NAMES[1],
                    dir.display(),
                    path.display()
                ));
            }
            return Candidate {
                path,
                named: Named::Default,
                notices,
            };
        }
        if Some(dir) == ceiling {
            break;
        }
    }
    Candidate {
        path: cwd.join(DEFAULT_FILE_NAME),
        named: Named::Default,
        notices,
    }
}

/// Every file the search of [`candidate`] would take from `cwd`, nearest first:
/// where to look for the state directory's copy of a default fleet file that is
/// gone.
pub fn default_candidates(cwd: &Path) -> Vec<PathBuf> {
    cwd.ancestors()
        .flat_map(|dir| DEFAULT_FILE_NAMES.iter().map(move |name| dir.join(name)))
        .collect()
}

/// What to say when no file was named and none was found from `cwd`.
pub fn none_found(cwd: &Path) -> String {
    format!(
        "no {} or {} in {} or any directory above it; name a fleet file with -f/--file or {FILE_ENV_VAR}",
        DEFAULT_FILE_NAMES[0],
        DEFAULT_FILE_NAMES[1],
        cwd.display()
    )
}

/// Where the fleet file is ([`candidate`]); an error when it does not exist.
pub fn discover(
    explicit: Option<&Path>,
    env_file: Option<&OsStr>,
    cwd: &Path,
) -> Result<Candidate, ConfigErrors> {
    discover_below(explicit, env_file, cwd, None)
}

pub(super) fn discover_below(
    explicit: Option<&Path>,
    env_file: Option<&OsStr>,
    cwd: &Path,
    ceiling: Option<&Path>,
) -> Result<Candidate, ConfigErrors> {
    let found = candidate_below(explicit, env_file, cwd, ceiling);
    let missing = match found.named {
        Named::Flag => "the fleet file given with -f/--file does not exist".to_string(),
        Named::Env => format!("the fleet file named by {FILE_ENV_VAR} does not exist"),
        Named::Default => none_found(cwd),
    };
    match std::fs::metadata(&found.path) {
        Ok(meta) if meta.is_dir() => Err(ConfigErrors::single(
            found.path,
            "this is a directory, not a fleet file",
        )),
        Ok(_) => Ok(found),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut message = missing;
            for notice in &found.notices {
                message.push_str("; ");
                message.push_str(notice);
            }
            Err(ConfigErrors::single(found.path, message))
        }
        Err(e) => Err(ConfigErrors::single(
            found.path,
            format!("cannot read the fleet file: {e}"),
        )),
    }
}

