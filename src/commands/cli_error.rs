//! The error of a command that could not do its job at all, which maps to an
//! exit code, and the JSON document it is for scripts.

use std::path::Path;

use serde::Serialize;

use crate::config::{ConfigError, ConfigErrors};
use crate::output::exit::Code;
use crate::output::report::{
    FailureKind, FailureReport, SCHEMA_VERSION, ServerReport, json_line,
};


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
    /// Servers named on the command line that `fleet` does not have, with the
    /// names it has.
    pub(super) fn unknown_servers(fleet: &crate::config::Fleet, e: &crate::host::UnknownServers) -> CliError {
        let known: Vec<&str> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
        CliError::Usage(format!(
            "no server named {} in {} (servers: {})",
            e.quoted(),
            fleet.file.display(),
            known.join(", ")
        ))
    }

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
    pub(super) fn to_json(&self, command: &str) -> String {
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
pub(super) struct FailedCommand<'a> {
    schema_version: u32,
    command: &'a str,
    exit_code: i32,
    servers: [ServerReport; 0],
    error: Failure<'a>,
}

#[derive(Serialize)]
pub(super) struct Failure<'a> {
    #[serde(flatten)]
    error: FailureReport,
    #[serde(flatten)]
    fleet_file: Option<FleetFile<'a>>,
}

/// Which fleet file is invalid, and every error in it.
#[derive(Serialize)]
pub(super) struct FleetFile<'a> {
    file: &'a Path,
    errors: Vec<FleetFileError<'a>>,
}

#[derive(Serialize)]
pub(super) struct FleetFileError<'a> {
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

pub(super) fn failed_command<'a>(
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
