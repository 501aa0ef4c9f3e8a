//! What the benchmarks share: the fixture server built in release mode, and times
//! in milliseconds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Builds the fixture server in release mode and returns its path.
pub fn release_fixture() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "-p", "mcpfleet-fixture"])
        .current_dir(root)
        .status()
        .expect("cargo build");
    assert!(status.success(), "building the fixture failed");
    root.join("target/release/mcpfleet-fixture")
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
