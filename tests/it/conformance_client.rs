//! mcpfleet as the client in the official MCP conformance suite's client mode
//! (npm `@modelcontextprotocol/conformance`, the versions `.ci/install-servers`
//! pins). For each scenario the suite starts its scenario server and runs
//! `tests/conformance/client.py` with the server's URL: a fleet of that one
//! remote server, `up`, the scenario's requests through the gateway (an official
//! Python SDK client on `connect`), and `down`. The suite then judges what the
//! scenario server saw of mcpfleet as its client.
//!
//! Every scenario of a wire is run, OAuth's (`auth/*`) too: the script then gives
//! the server an `auth:` and completes `mcpfleet login --no-browser` as a browser
//! would. Each either passes, or is listed in [`GAPS`] with what is missing; a gap
//! that passes fails the test as stale, so the list can only shrink. An OAuth
//! scenario passes only when the client also ended well (but where the scenario
//! is one mcpfleet must refuse: [`REFUSALS`]).

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

/// The OAuth scenarios (`auth/*`) of both suites; an empty spec version runs
/// an extension's scenario on the suite's default wire (a spec version would
/// skip it).
const AUTH_SCENARIOS: &[Scenario] = &[
    at(OLD, "2025-11-25", "auth/metadata-default"),
    at(OLD, "2025-11-25", "auth/metadata-var1"),
    at(OLD, "2025-11-25", "auth/metadata-var2"),
    at(OLD, "2025-11-25", "auth/metadata-var3"),
    at(OLD, "2025-11-25", "auth/basic-cimd"),
    at(OLD, "2025-11-25", "auth/scope-from-www-authenticate"),
    at(OLD, "2025-11-25", "auth/scope-from-scopes-supported"),
    at(OLD, "2025-11-25", "auth/scope-omitted-when-undefined"),
    at(OLD, "2025-11-25", "auth/scope-step-up"),
    at(OLD, "2025-11-25", "auth/scope-retry-limit"),
    at(OLD, "2025-11-25", "auth/token-endpoint-auth-basic"),
    at(OLD, "2025-11-25", "auth/token-endpoint-auth-post"),
    at(OLD, "2025-11-25", "auth/token-endpoint-auth-none"),
    at(OLD, "2025-11-25", "auth/pre-registration"),
    at(
        OLD,
        "2025-11-25",
        "auth/2025-03-26-oauth-metadata-backcompat",
    ),
    at(OLD, "2025-11-25", "auth/2025-03-26-oauth-endpoint-fallback"),
    at(OLD, "2025-11-25", "auth/resource-mismatch"),
    at(OLD, "2025-11-25", "auth/offline-access-scope"),
    at(OLD, "2025-11-25", "auth/offline-access-not-supported"),
    at(OLD, "", "auth/client-credentials-basic"),
    at(OLD, "", "auth/client-credentials-jwt"),
    at(OLD, "", "auth/cross-app-access-complete-flow"),
    at(NEW, "2025-11-25", "auth/metadata-default"),
    at(NEW, "2025-11-25", "auth/metadata-var1"),
    at(NEW, "2025-11-25", "auth/metadata-var2"),
    at(NEW, "2025-11-25", "auth/metadata-var3"),
    at(NEW, "2025-11-25", "auth/basic-cimd"),
    at(NEW, "2025-11-25", "auth/scope-from-www-authenticate"),
    at(NEW, "2025-11-25", "auth/scope-from-scopes-supported"),
    at(NEW, "2025-11-25", "auth/scope-omitted-when-undefined"),
    at(NEW, "2025-11-25", "auth/scope-step-up"),
    at(NEW, "2025-11-25", "auth/scope-retry-limit"),
    at(NEW, "2025-11-25", "auth/token-endpoint-auth-basic"),
    at(NEW, "2025-11-25", "auth/token-endpoint-auth-post"),
    at(NEW, "2025-11-25", "auth/token-endpoint-auth-none"),
    at(NEW, "2025-11-25", "auth/pre-registration"),
    at(
        NEW,
        "2025-03-26",
        "auth/2025-03-26-oauth-metadata-backcompat",
    ),
    at(NEW, "2025-03-26", "auth/2025-03-26-oauth-endpoint-fallback"),
    at(NEW, "2026-07-28", "auth/metadata-default"),
    at(NEW, "2026-07-28", "auth/metadata-var1"),
    at(NEW, "2026-07-28", "auth/metadata-var2"),
    at(NEW, "2026-07-28", "auth/metadata-var3"),
    at(NEW, "2026-07-28", "auth/basic-cimd"),
    at(NEW, "2026-07-28", "auth/scope-from-www-authenticate"),
    at(NEW, "2026-07-28", "auth/scope-from-scopes-supported"),
    at(NEW, "2026-07-28", "auth/scope-omitted-when-undefined"),
    at(NEW, "2026-07-28", "auth/scope-step-up"),
    at(NEW, "2026-07-28", "auth/scope-retry-limit"),
    at(NEW, "2026-07-28", "auth/token-endpoint-auth-basic"),
    at(NEW, "2026-07-28", "auth/token-endpoint-auth-post"),
    at(NEW, "2026-07-28", "auth/token-endpoint-auth-none"),
    at(NEW, "2026-07-28", "auth/pre-registration"),
    at(NEW, "2026-07-28", "auth/resource-mismatch"),
    at(NEW, "2026-07-28", "auth/offline-access-scope"),
    at(NEW, "2026-07-28", "auth/offline-access-not-supported"),
    at(NEW, "2026-07-28", "auth/authorization-server-migration"),
    at(NEW, "2026-07-28", "auth/iss-supported"),
    at(NEW, "2026-07-28", "auth/iss-not-advertised"),
    at(NEW, "2026-07-28", "auth/iss-supported-missing"),
    at(NEW, "2026-07-28", "auth/iss-wrong-issuer"),
    at(NEW, "2026-07-28", "auth/iss-unexpected"),
    at(NEW, "2026-07-28", "auth/iss-normalized"),
    at(NEW, "2026-07-28", "auth/metadata-issuer-mismatch"),
    at(NEW, "", "auth/client-credentials-basic"),
    at(NEW, "", "auth/client-credentials-jwt"),
    at(NEW, "", "auth/enterprise-managed-authorization"),
    at(NEW, "", "auth/dpop"),
    at(NEW, "", "auth/dpop-nonce"),
    at(NEW, "", "auth/wif-jwt-bearer"),
];

/// OAuth scenarios whose server is one mcpfleet must refuse (a resource, an
/// issuer or a scope that is not what it should be): the client ends in an
/// error there, and the suite judges what it did before.
///
/// Like a user, the script logs in again (at most twice) when a step fails with
/// `auth_required`: a step-up to a scope the grant lacks, or a server that moved
/// to another authorization server.
const REFUSALS: &[&str] = &[
    "auth/resource-mismatch",
    "auth/scope-retry-limit",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// Why an extension scenario is not passed: mcpfleet does not implement it.
const NOT_IMPLEMENTED: &str = "an OAuth extension mcpfleet does not implement";
/// Scenarios mcpfleet does not pass yet, by suite, spec version and name, with
/// what is missing.
const GAPS: &[(&str, &str, &str, &str)] = &[
    (
        OLD,
        "2025-11-25",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "this suite's authorization server names an issuer (`/oauth`) other than the one \
         its metadata is found by, which RFC 8414 (and rmcp) refuse",
    ),
    (OLD, "", "auth/client-credentials-jwt", NOT_IMPLEMENTED),
    (
        OLD,
        "",
        "auth/cross-app-access-complete-flow",
        NOT_IMPLEMENTED,
    ),
    (NEW, "", "auth/client-credentials-jwt", NOT_IMPLEMENTED),
    (
        NEW,
        "",
        "auth/enterprise-managed-authorization",
        NOT_IMPLEMENTED,
    ),
    (NEW, "", "auth/dpop", NOT_IMPLEMENTED),
    (NEW, "", "auth/dpop-nonce", NOT_IMPLEMENTED),
    (NEW, "", "auth/wif-jwt-bearer", NOT_IMPLEMENTED),
];

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
    // The suite writes OUT/NAME-TIME/checks.json, where an OAuth scenario's
    // NAME (`auth/...`) is a folder of its own.
    let children = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect()
    };
    let dir = children(out)
        .into_iter()
        .flat_map(|d| {
            let nested = children(&d);
            std::iter::once(d).chain(nested)
        })
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
    judge(SCENARIOS, "conformance-client");
}

#[test]
fn mcpfleet_as_an_oauth_client_passes_the_suites_auth_scenarios_but_its_listed_gaps() {
    judge(AUTH_SCENARIOS, "conformance-auth");
}

/// Runs each of `scenarios` and fails on one that fails but is not a gap, or
/// passes but is one.
fn judge(scenarios: &[Scenario], label: &str) {
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
    let test_id = format!("{label}-{}", std::process::id());
    let mut problems = Vec::new();
    for (i, s) in scenarios.iter().enumerate() {
        let out = scratch.path().join(format!("out-{i}"));
        let exit_file = scratch.path().join(format!("exit-{i}"));
        let mut cmd = suite_command(s.suite);
        cmd.args(["client", "--command"])
            .arg(&wrapper)
            .args(["--scenario", s.name]);
        if !s.spec.is_empty() {
            cmd.args(["--spec-version", s.spec]);
        }
        cmd.arg("-o")
            .arg(&out)
            .env("MCPFLEET_BIN", mcpfleet_bin())
            .env("MCPFLEET_EXIT_FILE", &exit_file)
            .env(TEST_ID_VAR, &test_id);
        let run = run_bounded(cmd, Duration::from_secs(120));
        let mut failed = match failed_checks(&out) {
            Ok(f) => f,
            Err(e) => vec![format!(
                "{e} (suite exit {:?}: {})",
                run.status.code(),
                String::from_utf8_lossy(&run.stdout)
            )],
        };
        // The suite does not judge what came after the authorization: the
        // client's own calls must have been answered.
        let client_exit = std::fs::read_to_string(&exit_file).unwrap_or_default();
        if s.name.starts_with("auth/") && !REFUSALS.contains(&s.name) && client_exit.trim() != "0" {
            failed.push(format!(
                "the client ended with {:?}: {}",
                client_exit.trim(),
                String::from_utf8_lossy(&run.stdout)
            ));
        }
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
