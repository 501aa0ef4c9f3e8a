//! The errors of a fleet file, all of them at once, each with its place.
//!
//! This module owns how a broken fleet file is reported: one header line, then
//! one `FILE:LINE:COL: KEY.PATH: message` line per error, the shape compilers
//! use so that editors and terminals can jump to the spot.

use std::fmt;
use std::path::PathBuf;

/// How many errors are shown (and located, which costs a parse each).
pub(crate) const MAX_SHOWN: usize = 100;

/// Every error found in one fleet file.
#[derive(Debug)]
pub struct ConfigErrors {
    /// The file as the user named it, so that messages match what they typed.
    pub file: PathBuf,
    /// Sorted by position. Locating costs a parse each, so in a long list only
    /// the first ones (at most 100, fewer in a large file) carry a position.
    pub errors: Vec<ConfigError>,
}

/// One error in a fleet file.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// 1-based; `None` when the error has no place in the text (an unreadable file).
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
    /// Key path such as `servers.everything.args[2]`; empty for the whole file.
    pub path: String,
    pub message: String,
}

impl ConfigErrors {
    pub(crate) fn single(file: impl Into<PathBuf>, message: impl Into<String>) -> ConfigErrors {
        ConfigErrors {
            file: file.into(),
            errors: vec![ConfigError {
                line: None,
                column: None,
                path: String::new(),
                message: message.into(),
            }],
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "{line}:")?;
            if let Some(column) = self.column {
                write!(f, "{column}:")?;
            }
            f.write_str(" ")?;
        }
        let path = if self.path.is_empty() {
            "(top level)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

impl ConfigErrors {
    /// The report under another header than "invalid fleet file" (`cannot
    /// import`), for a file that is read but not as a fleet file.
    pub fn report(&self, header: &str) -> String {
        Report(self, header).to_string()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Report(self, "invalid fleet file").fmt(f)
    }
}

struct Report<'a>(&'a ConfigErrors, &'a str);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Report(errors, header) = self;
        let file = errors.file.display();
        let count = errors.errors.len();
        let plural = if count == 1 { "" } else { "s" };
        write!(f, "{header} {file}: {count} error{plural}")?;
        for error in errors.errors.iter().take(MAX_SHOWN) {
            let sep = if error.line.is_some() { ":" } else { ": " };
            write!(f, "\n{file}{sep}{error}")?;
        }
        if count > MAX_SHOWN {
            write!(f, "\n... and {} more errors", count - MAX_SHOWN)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: Option<usize>, column: Option<usize>, path: &str, message: &str) -> ConfigError {
        ConfigError {
            line,
            column,
            path: path.into(),
            message: message.into(),
        }
    }

    #[test]
    fn displays_header_then_one_line_per_error() {
        let errors = ConfigErrors {
            file: "fleet.yaml".into(),
            errors: vec![
                error(
                    Some(3),
                    Some(7),
                    "servers.a.args[2]",
                    "expected a string, found a sequence",
                ),
                error(Some(4), None, "servers.b", "x"),
                error(None, None, "", "cannot read the file"),
            ],
        };
        assert_eq!(
            errors.to_string(),
            "invalid fleet file fleet.yaml: 3 errors\n\
             fleet.yaml:3:7: servers.a.args[2]: expected a string, found a sequence\n\
             fleet.yaml:4: servers.b: x\n\
             fleet.yaml: (top level): cannot read the file"
        );
        let one = ConfigErrors::single("f.yaml", "m");
        assert_eq!(
            one.to_string(),
            "invalid fleet file f.yaml: 1 error\nf.yaml: (top level): m"
        );
    }

    #[test]
    fn shows_at_most_a_hundred() {
        let errors = ConfigErrors {
            file: "f".into(),
            errors: (0..130)
                .map(|i| error(Some(i + 1), Some(1), "k", "m"))
                .collect(),
        };
        let text = errors.to_string();
        assert_eq!(text.lines().count(), 1 + MAX_SHOWN + 1);
        assert!(text.starts_with("invalid fleet file f: 130 errors\n"));
        assert!(text.ends_with("\n... and 30 more errors"));
    }
}
