//! The commands, one file each, and what they share: finding and loading the fleet
//! file, and the error type at the edge that maps to exit codes.

pub mod chain;
pub mod check;
pub mod client;
pub mod connect;
pub mod fleet_ops;
pub mod import;
pub mod ls;
pub mod metrics;
pub mod observe;
mod other_build;
pub mod target;
pub mod validate;
pub mod watch;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use serde::Serialize;

use crate::cli::{Cli, Command};
use crate::config::{self, ConfigError, ConfigErrors, Fleet};
use crate::output::exit::Code;
use crate::host::Foreground;
use crate::output::report::{
    FailureKind, FailureReport, Format, Report, SCHEMA_VERSION, ServerReport, json_line,
    write_stdout,
};
use crate::protocol::{FileVersion, FleetSource};
use crate::state::StateDir;
use target::{FileNeed, Target};

/// Options every command gets.
#[derive(Clone)]
pub struct Global {
    pub output: Format,
    pub quiet: bool,
    pub verbose: u8,
}

/// A command that could not do its job at all (as opposed to servers that failed,
/// which a report carries).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigErrors),
    /// A file given to `import` that cannot be read as an MCP client's.
    #[error("{}", .0.report("cannot import"))]
    Import(ConfigErrors),
    #[error("{0}")]
    Usage(String),
    /// The state directory serves another fleet file (docs/design.md §3).
    #[error("{0}")]
    StateDirTaken(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl CliError {
    pub fn code(&self) -> Code {
        match self {
            CliError::Config(_)
            | CliError::Import(_)
            | CliError::Usage(_)
            | CliError::StateDirTaken(_) => Code::Usage,
            CliError::Internal(_) => Code::Internal,
        }
    }

    /// The error as the JSON document a script reads on stdout.
    fn to_json(&self, command: &str) -> String {
        let (kind, message) = match self {
            CliError::Config(e) => (
                FailureKind::InvalidFleetFile,
                format!("invalid fleet file {}", e.file.display()),
            ),
            CliError::Import(e) => (
                FailureKind::InvalidFleetFile,
                format!("cannot import {}", e.file.display()),
            ),
            CliError::Usage(m) => (FailureKind::Usage, m.clone()),
            CliError::StateDirTaken(m) => (FailureKind::StateDirTaken, m.clone()),
            CliError::Internal(e) => (FailureKind::Internal, format!("{e:#}")),
        };
        let fleet_file = match self {
            CliError::Config(e) | CliError::Import(e) => Some(FleetFile {
                file: &e.file,
                errors: e.errors.iter().map(FleetFileError::from).collect(),
            }),
            _ => None,
        };
        let error = FailureReport { kind, message };
        json_line(&failed_command(command, self.code(), error, fleet_file))
    }
}

/// The document of a command that could not run at all, when the format is not
/// text (docs/design.md §6): no server lines, and the error.
#[derive(Serialize)]
struct FailedCommand<'a> {
    schema_version: u32,
    command: &'a str,
    exit_code: i32,
    servers: [ServerReport; 0],
    error: Failure<'a>,
}

#[derive(Serialize)]
struct Failure<'a> {
    #[serde(flatten)]
    error: FailureReport,
    #[serde(flatten)]
    fleet_file: Option<FleetFile<'a>>,
}

/// Which fleet file is invalid, and every error in it.
#[derive(Serialize)]
struct FleetFile<'a> {
    file: &'a Path,
    errors: Vec<FleetFileError<'a>>,
}

#[derive(Serialize)]
struct FleetFileError<'a> {
    line: Option<usize>,
    column: Option<usize>,
    path: &'a str,
    message: &'a str,
}

impl<'a> From<&'a ConfigError> for FleetFileError<'a> {
    fn from(e: &'a ConfigError) -> Self {
        FleetFileError {
            line: e.line,
            column: e.column,
            path: &e.path,
            message: &e.message,
        }
    }
}

fn failed_command<'a>(
    command: &'a str,
    code: Code,
    error: FailureReport,
    fleet_file: Option<FleetFile<'a>>,
) -> FailedCommand<'a> {
    FailedCommand {
        schema_version: SCHEMA_VERSION,
        command,
        exit_code: code.as_i32(),
        servers: [],
        error: Failure { error, fleet_file },
    }
}

/// The supervisor, as `up --foreground` and `supervise` run it in this process:
/// the binary passes `supervisor::run`, so that the commands, which only send it
/// requests otherwise, do not depend on it (docs/architecture.md,
/// "Dependencies"). The arguments are `supervisor::run`'s: the fleet, its state
/// directory, the fleet file's text as read and its version, and what `up
/// --foreground` asks.
pub type Supervisor = fn(
    Fleet,
    StateDir,
    Option<String>,
    Option<FileVersion>,
    Option<Foreground<Report>>,
) -> Pin<Box<dyn Future<Output = anyhow::Result<Code>>>>;

/// Runs the parsed command line and returns its exit code. Prints the result and
/// any error; never exits the process itself.
pub async fn run(cli: Cli, supervisor: Supervisor) -> Code {
    let global = Global {
        output: cli.output,
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    let (name, result) = match &cli.command {
        Command::Check(args) => (
            "check",
            check::run(cli.file.as_deref(), args, &global).await,
        ),
        Command::Validate => ("validate", validate::run(cli.file.as_deref(), &global)),
        Command::Ls => ("ls", ls::run(cli.state_dir.as_deref(), &global).await),
        Command::Import(args) => ("import", import::run(args, &global)),
        Command::Up(args) => (
            "up",
            with_target(&cli, FileNeed::File, |t| {
                fleet_ops::up(t, args, &global, supervisor)
            })
            .await,
        ),
        Command::Down(args) => (
            "down",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                fleet_ops::down(t, args, &global)
            })
            .await,
        ),
        Command::Status(args) => (
            "status",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                fleet_ops::status(t, args, &global)
            })
            .await,
        ),
        Command::Reconnect(args) => (
            "reconnect",
            with_target(&cli, FileNeed::File, |t| {
                fleet_ops::reconnect(t, args, &global)
            })
            .await,
        ),
        Command::Reset(args) => (
            "reset",
            with_target(&cli, FileNeed::File, |t| fleet_ops::reset(t, args, &global)).await,
        ),
        Command::Tools(args) => (
            "tools",
            with_target(&cli, FileNeed::File, |t| observe::tools(t, args, &global)).await,
        ),
        Command::Call(args) => (
            "call",
            with_target(&cli, FileNeed::File, |t| observe::call(t, args, &global)).await,
        ),
        Command::Connect(args) => (
            "connect",
            with_target(&cli, FileNeed::File, |t| connect::connect(t, args, &global)).await,
        ),
        Command::Serve(args) => (
            "serve",
            with_target(&cli, FileNeed::File, |t| fleet_ops::serve(t, args, &global)).await,
        ),
        Command::Logs(args) => (
            "logs",
            with_target(&cli, FileNeed::CopyWillDo, |t| observe::logs(t, args)).await,
        ),
        Command::Events(args) => (
            "events",
            with_target(&cli, FileNeed::CopyWillDo, |t| observe::events(t, args)).await,
        ),
        Command::Metrics(args) => (
            "metrics",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                metrics::run(t, args, &global)
            })
            .await,
        ),
        Command::Supervise => (
            "supervise",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                fleet_ops::supervise(t, supervisor)
            })
            .await,
        ),
        Command::Completions { shell } => {
            let script = crate::cli::completion_script(*shell);
            let text = String::from_utf8_lossy(&script);
            let written = write_stdout(&text)
                .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into());
            ("completions", written.map(|()| Code::Ok))
        }
        Command::Man { dir } => ("man", man(dir.as_deref())),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mcpfleet {name}: {e:#}");
            if global.output != Format::Text {
                let _ = write_stdout(&e.to_json(name));
            }
            e.code()
        }
    }
}

/// `mcpfleet man`: the main page on stdout, or every page written into `dir`.
fn man(dir: Option<&Path>) -> Result<Code, CliError> {
    let pages = crate::cli::man_pages();
    let Some(dir) = dir else {
        let (_, main) = &pages[0];
        write_stdout(&String::from_utf8_lossy(main))
            .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
        return Ok(Code::Ok);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    for (name, page) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, page)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(Code::Ok)
}

async fn with_target<F, Fut>(cli: &Cli, need: FileNeed, f: F) -> Result<Code, CliError>
where
    F: FnOnce(Target) -> Fut,
    Fut: Future<Output = Result<Code, CliError>>,
{
    let target = Target::load(cli.file.as_deref(), cli.state_dir.as_deref(), need)?;
    f(target).await
}

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
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::new());
    let lookup = |name: &str| {
        let value = std::env::var(name).ok();
        if let Some(v) = &value {
            seen.borrow_mut().insert(name.to_owned(), v.clone());
        }
        value
    };
    let fleet = config::load_text(&text, path, &lookup)?;
    // An MCP client's file read directly: what did not carry over is said
    // once per command (docs/design.md §15).
    for notice in &fleet.notices {
        tracing::warn!("{}: {notice}", path.display());
    }
    let source = path.to_str().map(|p| FleetSource {
        path: p.to_owned(),
        text,
        env: seen.into_inner(),
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
