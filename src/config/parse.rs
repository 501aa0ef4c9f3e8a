//! Validating the text of a fleet file into a [`Fleet`], every error with its
//! line and column.

use std::path::{Path, PathBuf};

use super::error::{self, ConfigError, ConfigErrors};
use super::read::{MAX_FILE_BYTES, too_large};
use super::spec::Fleet;
use super::validate;
use super::walk;
use super::yaml;

/// Validates the copy of a fleet file recorded in a state directory, which stands
/// in for the file `path` when it is gone (docs/design.md §3, "State directory").
/// Values from the environment and `cwd` are not checked: they serve to name the
/// servers that may still run, not to start them. Errors name `copy`, the file
/// the text was read from.
pub fn load_recorded(
    text: &str,
    path: &Path,
    copy: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    validate_text(text, path, copy, env, true)
}

/// Validates the text of a fleet file; `path` is where it came from (used for
/// messages, as the fleet's identity and as the base of relative `cwd`).
pub fn load_str(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    validate_text(text, path, path, env, false)
}

/// Validates `text`, the fleet file `path` (or its recorded copy, when
/// `recorded`); errors name `shown`.
fn validate_text(
    text: &str,
    path: &Path,
    shown: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    recorded: bool,
) -> Result<Fleet, ConfigErrors> {
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(shown));
    }
    // Editors do not count a byte order mark as a column, and libyaml misreads
    // a document that starts with one.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = yaml::parse(text).map_err(|e| ConfigErrors {
        file: shown.to_path_buf(),
        errors: vec![ConfigError {
            line: e.line,
            column: e.column,
            path: String::new(),
            message: one_line(&e.message),
        }],
    })?;
    let file = absolute(path);
    validate::validate(&root, is_blank(text), &file, env, recorded).map_err(|issues| ConfigErrors {
        file: shown.to_path_buf(),
        errors: locate_all(text, issues),
    })
}

/// Nothing but whitespace, comments and document markers: the user has not
/// started writing the file, which deserves a friendlier word than "found null".
fn is_blank(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim_start_matches('\u{feff}').trim();
        line.is_empty() || line.starts_with('#') || line == "---" || line == "..."
    })
}

/// The fleet's identity must not depend on how the file was named.
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Messages quote keys and values from the file; a line break in one of them
/// must not break the one-line-per-error report (or forge a line of it).
fn one_line(message: &str) -> String {
    if !message.chars().any(char::is_control) {
        return message.to_string();
    }
    message
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// Bytes of YAML that locating may parse in total: it takes one parse per error,
/// which for a large file (a wrong file passed by mistake) adds up to minutes.
const LOCATE_BUDGET_BYTES: usize = 16 * 1024 * 1024;

/// How many errors of a text of `len` bytes get a position.
pub(super) fn locate_budget(len: usize) -> usize {
    (LOCATE_BUDGET_BYTES / len.max(1)).clamp(10, error::MAX_SHOWN)
}

/// Gives issues their positions and sorts them. Only the first ones get a
/// position: at most [`error::MAX_SHOWN`], fewer in a large file; the others
/// follow in the order they were found.
fn locate_all(text: &str, issues: Vec<walk::Issue>) -> Vec<ConfigError> {
    let budget = locate_budget(text.len());
    let mut located: Vec<ConfigError> = Vec::with_capacity(issues.len());
    for (i, issue) in issues.into_iter().enumerate() {
        let in_budget = i < budget;
        let position = match &issue.steps {
            Some(steps) if in_budget => yaml::locate(text, steps),
            _ => None,
        };
        let mut message = issue.message;
        if let Some(first) = issue.first.filter(|_| in_budget)
            && let Some((line, _)) = yaml::locate(text, &first)
        {
            message.push_str(&format!(" (first defined on line {line})"));
        }
        located.push(ConfigError {
            line: position.map(|p| p.0),
            column: position.map(|p| p.1),
            path: issue.path,
            message: one_line(&message),
        });
    }
    let sorted = located.len().min(budget);
    located[..sorted].sort_by_key(|e| (e.line.unwrap_or(usize::MAX), e.column.unwrap_or(0)));
    located
}
