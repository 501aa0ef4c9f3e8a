//! mcpfleet as the client in the official MCP conformance suite's client mode
//! (npm `@modelcontextprotocol/conformance`, the versions `.ci/install-servers`
//! pins). For each scenario the suite starts its scenario server and runs
//! `tests/conformance/client.py` with the server's URL: a fleet of that one
//! remote server, `up`, the scenario's requests through the gateway (an official
//! Python SDK client on `connect`), and `down`. The suite then judges what the
//! scenario server saw of mcpfleet as its client.
//!
//! Every scenario of a wire that needs no OAuth is run (OAuth is `auth/*`). Each
//! either passes, or is listed in [`GAPS`] with what is missing; a gap that passes
//! fails the test as stale, so the list can only shrink.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    TEST_ID_VAR, kill_all, mcpfleet_bin, processes_with, published_servers, run_bounded,
};

/// A run of one scenario at one spec version (the wire it is spoken on).
struct Scenario {
    suite: &'static str,
    spec: &'static str,
    name: &'static str,
}

const fn at(suite: &'static str, spec: &'static str, name: &'static str) -> Scenario {
    Scenario { suite, spec, name }
}

const OLD: &str = "0.1.16";
const NEW: &str = "0.2.0-alpha.12";

/// The client scenarios without OAuth, of both suites and both wires.
const SCENARIOS: &[Scenario] = &[
    at(OLD, "2025-11-25", "initialize"),
    at(OLD, "2025-11-25", "tools_call"),
    at(OLD, "2025-11-25", "elicitation-sep1034-client-defaults"),
    at(OLD, "2025-11-25", "sse-retry"),
    at(NEW, "2025-11-25", "initialize"),
    at(NEW, "2025-11-25", "tools_call"),
    at(NEW, "2025-11-25", "elicitation-sep1034-client-defaults"),
    at(NEW, "2025-11-25", "sse-retry"),
    at(NEW, "2025-11-25", "json-schema-2020-12-preservation"),
    at(NEW, "2026-07-28", "tools_call"),
    at(NEW, "2026-07-28", "request-metadata"),
    at(NEW, "2026-07-28", "sep-2322-client-request-state"),
    at(NEW, "2026-07-28", "http-standard-headers"),
    at(NEW, "2026-07-28", "http-custom-headers"),
    at(NEW, "2026-07-28", "http-invalid-tool-headers"),
    at(NEW, "2026-07-28", "json-schema-ref-no-deref"),
    at(NEW, "2026-07-28", "json-schema-2020-12-preservation"),
];

/// Scenarios mcpfleet does not pass yet, by suite, spec version and name, with
/// what is missing.
const GAPS: &[(&str, &str, &str, &str)] = &[];

fn gap(s: &Scenario) -> Option<&'static str> {
    GAPS.iter()
        .find(|(suite, spec, name, _)| *suite == s.suite && *spec == s.spec && *name == s.name)
        .map(|(.., why)| *why)
}

/// The suite's command line: the node 22 that `.ci/install-servers` installs
/// (both suites need it) and the suite's entry point.
fn suite_command(suite: &str) -> Command {
    let cache = published_servers();
    let node = cache.join("inspector/node_modules/node/bin/node");
    let entry = cache.join(format!(
        "conformance-{suite}/node_modules/@modelcontextprotocol/conformance/dist/index.js"
    ));
    assert!(
        entry.exists(),
        "the conformance suite {suite} is not installed at {}",
        entry.display()
    );
    let mut cmd = Command::new(node);
    cmd.arg(entry);
    cmd
}

/// The scenario's checks that failed, from the suite's `checks.json`.
fn failed_checks(out: &Path) -> Result<Vec<String>, String> {
    let dir = std::fs::read_dir(out)
        .map_err(|e| format!("no results in {}: {e}", out.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("checks.json").exists())
        .ok_or_else(|| format!("no checks.json under {}", out.display()))?;
    let text = std::fs::read_to_string(dir.join("checks.json")).map_err(|e| e.to_string())?;
    let checks: Vec<Value> = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if checks.is_empty() {
        return Err("the suite recorded no check".into());
    }
    Ok(checks
        .iter()
        .filter(|c| c["status"] == "FAILURE")
        .map(|c| {
            format!(
                "{}: {} {}",
                c["id"].as_str().unwrap_or("?"),
                c["description"].as_str().unwrap_or(""),
                c.get("details").map(Value::to_string).unwrap_or_default()
            )
        })
        .collect())
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/client.py")
}

#[test]
fn mcpfleet_as_a_client_passes_the_suites_client_scenarios_but_its_listed_gaps() {
    let cache = published_servers();
    let python = cache.join("venv/bin/python");
    let scratch = tempfile::tempdir().unwrap();
    // The suite appends the URL to the command; the command is split on spaces.
    let wrapper = scratch.path().join("client.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} {} \"$@\"\n",
            python.display(),
            client_script().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let test_id = format!("conformance-client-{}", std::process::id());
    let mut problems = Vec::new();
    for (i, s) in SCENARIOS.iter().enumerate() {
        let out = scratch.path().join(format!("out-{i}"));
        let mut cmd = suite_command(s.suite);
        cmd.args(["client", "--command"])
            .arg(&wrapper)
            .args(["--scenario", s.name, "--spec-version", s.spec, "-o"])
            .arg(&out)
            .env("MCPFLEET_BIN", mcpfleet_bin())
            .env(TEST_ID_VAR, &test_id);
        let run = run_bounded(cmd, Duration::from_secs(120));
        let failed = match failed_checks(&out) {
            Ok(f) => f,
            Err(e) => vec![format!(
                "{e} (suite exit {:?}: {})",
                run.status.code(),
                String::from_utf8_lossy(&run.stdout)
            )],
        };
        match (failed.is_empty(), gap(s)) {
            (true, None) | (false, Some(_)) => {}
            (true, Some(why)) => problems.push(format!(
                "{} {} @{}: passes now; remove it from GAPS (\"{why}\")",
                s.suite, s.name, s.spec
            )),
            (false, None) => problems.push(format!(
                "{} {} @{}: failed:\n    {}",
                s.suite,
                s.name,
                s.spec,
                failed.join("\n    ")
            )),
        }
    }
    // Each scenario ended with `down`; a supervisor may take a moment to exit.
    let tagged = format!("{TEST_ID_VAR}={test_id}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !processes_with(&tagged).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = processes_with(&tagged);
    kill_all(&left);
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
