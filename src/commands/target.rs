//! The fleet and its state directory, as the commands that talk to a supervisor or
//! read its files need them (docs/design.md §3, "State directory").
//!
//! With the fleet file at hand: read it, locate and open its state directory, and
//! claim it, since a state directory serves one fleet file (a second file that
//! maps to it is refused, exit 2). Without it (moved, deleted, a switched
//! branch), `down`, `status`, `logs` and `events` find the state directory that
//! recorded the file (`--state-dir`, `$MCPFLEET_STATE_DIR`, else the one under the
//! state root whose record names the path) and run on the copy recorded there,
//! saying so on stderr. The same commands go on when the file is there but a
//! `${env:}` variable it names is not set: stopping must not need what starting
//! needed (docs/design.md §3, "Stopping without the environment"). Every other
//! command needs the file, fully expanded.

use std::path::{Path, PathBuf};

use super::CliError;
use crate::config::{self, ConfigErrors, Fleet, Named};
use crate::lifecycle::events::rfc3339;
use crate::protocol::FleetSource;
use crate::state::{
    self, Claim, ClaimError, RecordedFleet, StateDir, find_recording, recorded_fleet,
};

/// The fleet and its state directory, as every command here needs them.
pub struct Target {
    pub fleet: Fleet,
    pub dir: StateDir,
    /// The fleet file as read now (its text and the `${env:}` values it looked
    /// up), sent with the requests that act on it so that the supervisor acts on
    /// the file the caller sees (docs/design.md §16); `None` when the fleet comes
    /// from the copy recorded in the state directory, the file being gone.
    pub source: Option<FleetSource>,
    /// Where the fleet file is, or was (for `up --watch`).
    pub path: PathBuf,
}

impl Target {
    /// The fleet file's text, to be recorded by a supervisor started with it.
    pub fn text(&self) -> Option<String> {
        self.source
            .as_ref()
            .map(|s| config::recordable(Path::new(&s.path), &s.text))
    }
}

/// Whether a command can do with the recorded copy of a fleet file that is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileNeed {
    /// The command needs the fleet file itself.
    File,
    /// The copy recorded in the state directory will do.
    CopyWillDo,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Target {
    /// The fleet named by `-f` (or `$MCPFLEET_FILE`, or `./mcpfleet.yaml`) and its
    /// state directory (`--state-dir`, or `$MCPFLEET_STATE_DIR`, or the default).
    pub fn load(
        file: Option<&Path>,
        state_dir: Option<&Path>,
        need: FileNeed,
    ) -> Result<Target, CliError> {
        let cwd = super::current_dir()?;
        let env_file = std::env::var_os(config::FILE_ENV_VAR);
        let found = config::candidate(file, env_file.as_deref(), &cwd);
        super::warn_passed_over(&found);
        let (mut path, named) = (found.path, found.named);
        let chosen = state::chosen(state_dir);
        let gone = |p: &Path| {
            std::fs::metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        };
        // With a state directory named and no fleet file, the directory says which
        // file is meant: the one it records, while that exists.
        let mut file = file.map(Path::to_path_buf);
        let mut how = None;
        if named == Named::Default
            && gone(&path)
            && let Some(dir) = chosen.as_deref().filter(|d| state::is_own_dir(d))
            && let Ok(Some(recorded)) = recorded_fleet(dir)
            && !gone(&recorded.path)
        {
            path = recorded.path.clone();
            file = Some(recorded.path);
            how = Some(format!("recorded by the state directory {}", dir.display()));
        }
        if gone(&path) && need == FileNeed::CopyWillDo {
            return from_copy(&path, named, chosen.as_deref());
        }
        let path = config::discover(file.as_deref(), env_file.as_deref(), &cwd)
            .map_err(|e| hint_at_copy(e, &path, named, chosen.as_deref()))?
            .path;
        let how = how.unwrap_or_else(|| super::how_found(&path, named, &cwd));
        tracing::info!("fleet file {} ({how})", path.display());
        let (mut fleet, source, unset) = match super::read_fleet(&path) {
            Ok((fleet, source)) => (fleet, source, Vec::new()),
            Err(e) if need == FileNeed::CopyWillDo => {
                let (fleet, unset) = without_environment(&path, e)?;
                (fleet, None, unset)
            }
            Err(e) => return Err(e.into()),
        };
        let text = match &source {
            Some(s) => s.text.clone(),
            None => config::read(&path)?,
        };
        let text = config::recordable(&path, &text);
        let root = match StateDir::locate(&fleet, state_dir) {
            Ok(root) if chosen.is_none() => elsewhere(&fleet, root),
            Ok(root) => root,
            // No state root in this environment: a supervisor of this file
            // that runs will still do.
            Err(e) => state::live_supervisor_of(&fleet.file)
                .ok_or_else(|| CliError::Usage(e.to_string()))?,
        };
        let dir = StateDir::open(&root).map_err(|e| anyhow::anyhow!("{e}"))?;
        claim(&fleet, &dir, &text, chosen.is_some())?;
        if !unset.is_empty() {
            fleet = recorded_definition(fleet, &dir, &unset);
        }
        Ok(Target {
            fleet,
            dir,
            source,
            path,
        })
    }
}

/// The default state directory `root` of `fleet`, unless no supervisor runs
/// there and one runs for this fleet file in another state directory (under
/// the state root of another environment: a client such as an MCP inspector
/// launches `connect` with few variables): then that one, so that one fleet file
/// never gets two supervisors (docs/design.md §3).
fn elsewhere(fleet: &Fleet, root: PathBuf) -> PathBuf {
    if state::supervisor_runs(&root).unwrap_or(false) {
        return root;
    }
    match state::live_supervisor_of(&fleet.file) {
        Some(dir) if std::fs::canonicalize(&root).ok().as_ref() != Some(&dir) => {
            tracing::info!(
                "the supervisor of {} runs in {}, not under this environment's state root ({}): using it",
                fleet.file.display(),
                dir.display(),
                root.display()
            );
            dir
        }
        _ => root,
    }
}

/// The fleet file at `path`, which `errors` say cannot be loaded, for a command
/// that only looks at or stops what runs (docs/design.md §3, "Stopping without
/// the environment"): when every `${env:}` it names that is not set is all
/// that is wrong, the file as `config::load_recorded` reads a recorded copy
/// (a variable that is not set expands to nothing), and the names of those
/// variables. Anything else wrong with the file is `errors`, as before.
fn without_environment(path: &Path, errors: ConfigErrors) -> Result<(Fleet, Vec<String>), CliError> {
    let Ok(text) = config::read(path) else {
        return Err(errors.into());
    };
    let text = config::recordable(path, &text);
    let unset = std::cell::RefCell::new(Vec::<String>::new());
    let lookup = |name: &str| {
        let value = env(name);
        let mut unset = unset.borrow_mut();
        if value.is_none() && !unset.iter().any(|n| n == name) {
            unset.push(name.to_owned());
        }
        value
    };
    match config::load_recorded(&text, path, path, &lookup) {
        Ok(fleet) if !unset.borrow().is_empty() => Ok((fleet, unset.into_inner())),
        _ => Err(errors.into()),
    }
}

/// What a command that cannot expand the fleet file goes on with: the copy that
/// `dir` recorded of this file (the definition its supervisor runs), else the
/// file as `fleet` read it without the variables `unset`. Says so on stderr,
/// naming the variables.
fn recorded_definition(fleet: Fleet, dir: &StateDir, unset: &[String]) -> Fleet {
    let names: Vec<String> = unset.iter().map(|n| format!("`${{env:{n}}}`")).collect();
    let what = format!(
        "the fleet file {} cannot be fully expanded ({} not set)",
        fleet.file.display(),
        names.join(", ")
    );
    let recorded = recorded_fleet(dir.root())
        .ok()
        .flatten()
        .filter(|r| r.path == fleet.file)
        .and_then(|r| {
            let copy = config::load_recorded(&r.source, &r.path, &r.copy, &env).ok()?;
            Some((copy, r.recorded_at))
        });
    match recorded {
        Some((copy, at)) => {
            eprintln!(
                "mcpfleet: warning: {what}; using the definition recorded in {} at {}",
                dir.root().display(),
                rfc3339(at)
            );
            copy
        }
        None => {
            eprintln!("mcpfleet: warning: {what}; using it with those left empty");
            fleet
        }
    }
}

/// Lets `fleet` use `dir`, or says why it may not. `chosen`: the directory was
/// named by the user rather than derived from the fleet.
fn claim(fleet: &Fleet, dir: &StateDir, source: &str, chosen: bool) -> Result<(), CliError> {
    // A default state directory is named by the fleet's `name:` (or its path):
    // another file uses it as long as it still maps to it. One named by the user
    // is used by whatever file it was named with: the other file keeps it.
    let still_uses = |other: &RecordedFleet| {
        if chosen {
            return true;
        }
        let Ok(text) = config::read(&other.path) else {
            return true;
        };
        match config::load_recorded(&text, &other.path, &other.path, &env) {
            Ok(other) => StateDir::locate(&other, None).ok() == StateDir::locate(fleet, None).ok(),
            Err(_) => true,
        }
    };
    let file = &fleet.file;
    let root = dir.root();
    match state::claim(root, file, source, still_uses) {
        Ok(Claim::Recorded | Claim::Adopted) => Ok(()),
        Ok(Claim::TookOver { previous }) => {
            let why = if std::fs::metadata(&previous).is_ok() {
                "which now uses another state directory"
            } else {
                "which is gone"
            };
            eprintln!(
                "mcpfleet: the state directory {} served the fleet file {}, {why}; it now serves {}",
                root.display(),
                previous.display(),
                file.display()
            );
            Ok(())
        }
        Err(ClaimError::Taken { recorded, .. }) => {
            let how = if chosen {
                "choose another state directory for this one with --state-dir DIR or $MCPFLEET_STATE_DIR".to_string()
            } else {
                let name = fleet.name.as_deref().unwrap_or_default();
                format!(
                    "both say `name: {name}`: give one of them another `name:`, or choose another state directory for this one with --state-dir DIR or $MCPFLEET_STATE_DIR"
                )
            };
            Err(CliError::StateDirTaken(format!(
                "the state directory {} serves the fleet file {}; {} cannot share it ({how})",
                root.display(),
                recorded.path.display(),
                file.display()
            )))
        }
        Err(ClaimError::Running { recorded, .. }) => Err(CliError::StateDirTaken(format!(
            "the state directory {} serves the fleet file {}, which is gone, and its supervisor still runs; stop it with `mcpfleet --state-dir {} down` (which works from the copy recorded there), then use {}",
            root.display(),
            recorded.path.display(),
            root.display(),
            file.display()
        ))),
        Err(e @ (ClaimError::Record(_) | ClaimError::Io { .. })) => {
            Err(CliError::Internal(anyhow::anyhow!("{e}")))
        }
    }
}

/// The path of a file that does not exist, as it would have been recorded: its
/// directory with symlinks resolved, when that directory still exists.
fn recorded_form(path: &Path) -> PathBuf {
    let resolved = path
        .parent()
        .and_then(|dir| std::fs::canonicalize(dir).ok())
        .zip(path.file_name())
        .map(|(dir, name)| dir.join(name));
    resolved
        .or_else(|| std::path::absolute(path).ok())
        .unwrap_or_else(|| path.to_path_buf())
}

/// The state directory that recorded the missing file `path`: the one named by
/// the user, else the one under the state root whose record names it. With no
/// file named (`path` is then `mcpfleet.yaml` in the current directory), the
/// nearest of the files the search would have found, at or above the current
/// directory, that a state directory records.
fn recording_dir(
    path: &Path,
    named: Named,
    chosen: Option<&Path>,
) -> Result<Option<PathBuf>, String> {
    if let Some(dir) = chosen {
        return Ok(state::is_own_dir(dir).then(|| dir.to_path_buf()));
    }
    let Ok(root) = state::state_root() else {
        return Ok(None);
    };
    let wanted = match (named, path.parent()) {
        (Named::Default, Some(cwd)) => config::default_candidates(cwd),
        _ => vec![path.to_path_buf()],
    };
    for file in wanted {
        let mut found = find_recording(&root, &recorded_form(&file));
        match found.len() {
            0 => continue,
            1 => return Ok(found.pop()),
            _ => {
                return Err(format!(
                    "several state directories record {}: {}; choose one with --state-dir",
                    file.display(),
                    found
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    Ok(None)
}

/// The fleet as recorded in its state directory, its file `path` being gone.
fn from_copy(path: &Path, named: Named, chosen: Option<&Path>) -> Result<Target, CliError> {
    let missing = |extra: &str| -> CliError {
        let cwd = std::env::current_dir().unwrap_or_default();
        let what = match named {
            Named::Flag => "the fleet file given with -f/--file does not exist".to_string(),
            Named::Env => format!(
                "the fleet file named by {} does not exist",
                config::FILE_ENV_VAR
            ),
            Named::Default => config::none_found(&cwd),
        };
        ConfigErrors::single(path, format!("{what}{extra}")).into()
    };
    let Some(root) = recording_dir(path, named, chosen).map_err(CliError::Usage)? else {
        return Err(match chosen {
            Some(dir) => missing(&format!(
                ", and there is no state directory {} to find a copy of it in",
                dir.display()
            )),
            None if named == Named::Default => missing(""),
            None => missing(", and no state directory records a copy of it"),
        });
    };
    let dir = StateDir::open(&root).map_err(|e| anyhow::anyhow!("{e}"))?;
    let recorded = recorded_fleet(dir.root())
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .ok_or_else(|| {
            missing(&format!(
                ", and the state directory {} records no copy of a fleet file",
                dir.root().display()
            ))
        })?;
    // With a state directory named and no file named, the directory says which
    // fleet is meant; a file named is the one the directory must serve.
    if named != Named::Default && recorded.path != recorded_form(path) {
        return Err(missing(&format!(
            ", and the state directory {} serves another one, {}",
            dir.root().display(),
            recorded.path.display()
        )));
    }
    let fleet = config::load_recorded(&recorded.source, &recorded.path, &recorded.copy, &env)?;
    eprintln!(
        "mcpfleet: the fleet file {} is gone; using the copy recorded in {} at {}",
        recorded.path.display(),
        dir.root().display(),
        rfc3339(recorded.recorded_at)
    );
    Ok(Target {
        fleet,
        dir,
        source: None,
        path: path.to_path_buf(),
    })
}

/// A fleet file that is missing, for a command that needs it: says where a copy
/// is, for the commands that can use one (as `from_copy` would find it).
fn hint_at_copy(
    mut e: ConfigErrors,
    path: &Path,
    named: Named,
    chosen: Option<&Path>,
) -> ConfigErrors {
    let gone = std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
    if !gone {
        return e;
    }
    let Ok(Some(root)) = recording_dir(path, named, chosen) else {
        return e;
    };
    let Ok(Some(recorded)) = recorded_fleet(&root) else {
        return e;
    };
    if named != Named::Default && recorded.path != recorded_form(path) {
        return e;
    }
    if let Some(first) = e.errors.first_mut() {
        first.message.push_str(&format!(
            "; the state directory {} holds a copy of {}, with which `down`, `status`, `logs` and `events` still work",
            root.display(),
            recorded.path.display()
        ));
    }
    e
}
