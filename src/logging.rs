//! Logs go to stderr through tracing. `-v` raises the level; `RUST_LOG` overrides.
//! Colour (`--color`, `$NO_COLOR`) is decided here, once, for stderr: never an
//! ANSI escape in a file or a pipe unless asked for with `--color always`, so a
//! detached supervisor's `supervisor.log` holds none (docs/design.md §6). Every
//! line goes through [`StderrWriter`], where a detached supervisor rotates its
//! `supervisor.log` (`state::rotation`).

use std::ffi::OsStr;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::ColorChoice;

/// rmcp logs every message it receives at info and debug, text included: a server
/// that sends thousands of notifications would fill the log (and a message may
/// hold what a secret gave it). Its own lines stay at `warn` unless `-vvv` or
/// `RUST_LOG` names it; its OAuth lines never go below `info`.
pub fn init(verbose: u8, quiet: bool, color: ColorChoice) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "mcpfleet=info,rmcp=warn,warn",
        (false, 2) => "mcpfleet=debug,rmcp=warn,info",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // rmcp's OAuth lines below info print what must stay secret (an
    // authorization code among them): never shown, whatever the level (L18).
    let filter = match "rmcp::transport::auth=info".parse() {
        Ok(cap) => filter.add_directive(cap),
        Err(_) => filter,
    };
    let ansi = colored(
        color,
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| StderrWriter)
        .with_ansi(ansi)
        .with_target(false)
        .try_init();
}

/// Stderr, for tracing's lines: before each one, a detached supervisor rotates
/// `supervisor.log` (its stderr) when the line would take it past its size, and
/// drops the line when the log is at its size and cannot be rotated.
struct StderrWriter;

impl std::io::Write for StderrWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !crate::state::rotation::before_stderr_write(buf.len()) {
            return Ok(buf.len());
        }
        std::io::stderr().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Whether a stream gets colour: `always` and `never` say so; `auto` colours a
/// terminal, unless `$NO_COLOR` is set to something (by that variable's
/// convention, an empty value counts as unset).
pub fn colored(choice: ColorChoice, terminal: bool, no_color: Option<&OsStr>) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && no_color.is_none_or(OsStr::is_empty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_unless_asked() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(colored(ColorChoice::Auto, true, None));
        assert!(colored(ColorChoice::Auto, true, empty));
        assert!(!colored(ColorChoice::Auto, true, set));
        assert!(!colored(ColorChoice::Auto, false, None));
        assert!(colored(ColorChoice::Always, false, set));
        assert!(!colored(ColorChoice::Never, true, None));
    }
}
