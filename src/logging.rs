//! Logs go to stderr through tracing. `-v` raises the level; `RUST_LOG` overrides.

use tracing_subscriber::EnvFilter;

pub fn init(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "mcpfleet=info,warn",
        (false, 2) => "mcpfleet=debug,info",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
