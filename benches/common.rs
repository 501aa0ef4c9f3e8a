//! What the benchmarks share: the fixture server built in release mode, times
//! in milliseconds, and the processes a run tagged.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Builds the fixture server in release mode and returns its path.
pub(crate) fn release_fixture() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "-p", "mcpfleet-fixture"])
        .current_dir(root)
        .status()
        .expect("cargo build");
    assert!(status.success(), "building the fixture failed");
    root.join("target/release/mcpfleet-fixture")
}

/// The `mcpfleet` measured: `MCPFLEET_BENCH_BIN` when it is set (another build,
/// as `benches/compare` alternates them), otherwise this build's.
pub(crate) fn mcpfleet_binary() -> PathBuf {
    std::env::var_os("MCPFLEET_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_mcpfleet")))
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Living processes (not zombies) with the environment entry `entry` (or, when
/// it ends with `-`, one that starts with it).
pub(crate) fn tagged(entry: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_owned()))
                .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'));
            alive
                && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                    env.split(|b| *b == 0).any(|e| {
                        e == entry.as_bytes()
                            || (entry.ends_with('-') && e.starts_with(entry.as_bytes()))
                    })
                })
        })
        .collect()
}
