//! The completion scripts checked into `completions/` must match what the binary
//! generates. `MCPFLEET_UPDATE_COMPLETIONS=1 cargo test --test completions`
//! rewrites them.

mod common;

use std::path::Path;
use std::process::Command;

const SCRIPTS: [(&str, &str); 5] = [
    ("bash", "mcpfleet.bash"),
    ("zsh", "_mcpfleet"),
    ("fish", "mcpfleet.fish"),
    ("elvish", "mcpfleet.elv"),
    ("powershell", "_mcpfleet.ps1"),
];

#[test]
fn checked_in_completions_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let update = std::env::var_os("MCPFLEET_UPDATE_COMPLETIONS").is_some();
    let mut stale = Vec::new();
    for (shell, file) in SCRIPTS {
        let out = Command::new(common::mcpfleet_bin())
            .args(["completions", shell])
            .output()
            .expect("run mcpfleet completions");
        assert!(out.status.success(), "completions {shell} failed");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("check"),
            "{shell}: the script knows the subcommands"
        );
        let path = dir.join(file);
        if update {
            std::fs::write(&path, &out.stdout).expect("write completion script");
        } else if std::fs::read(&path).ok().as_deref() != Some(&out.stdout[..]) {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "stale completion scripts {stale:?}: run MCPFLEET_UPDATE_COMPLETIONS=1 cargo test --test completions"
    );
}
