//! Logs go to stderr through tracing. `-v` raises the level; `RUST_LOG` overrides.

use tracing_subscriber::EnvFilter;

/// rmcp logs every message it receives at info and debug, text included: a server
/// that sends thousands of notifications would fill the log (and a message may
/// hold what a secret gave it). Its own lines stay at `warn` unless `-vvv` or
/// `RUST_LOG` names it.
pub fn init(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "mcpfleet=info,rmcp=warn,warn",
        (false, 2) => "mcpfleet=debug,rmcp=warn,info",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
