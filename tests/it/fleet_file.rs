//! Invalid fleet files through the real binary: exit 2, and every message names the
//! file, line, column and key path. `validate` prints the resolved fleet with
//! secrets redacted.

use crate::common::*;
use serde_json::Value;

/// Runs `check` on `body` and returns stderr, asserting exit 2 and that no server
/// was started.
fn invalid(label: &str, body: &str) -> String {
    let fleet = TestFleet::raw(label, body);
    let out = fleet.run(&["check"]);
    assert_code(&out, 2);
    assert!(
        stdout(&out).is_empty(),
        "nothing on stdout: {}",
        stdout(&out)
    );
    fleet.assert_no_leftovers();
    let err = stderr(&out);
    assert!(
        err.contains(fleet.path.to_str().unwrap()),
        "the message names the file: {err}"
    );
    err
}

#[test]
fn a_yaml_syntax_error_has_line_and_column() {
    let err = invalid(
        "syntax",
        "version: 1\nservers:\n  a:\n    command: [unclosed\n    args: []\n",
    );
    assert!(err.contains(".yaml:5:"), "{err}");
}

#[test]
fn an_unknown_key_is_an_error_with_its_position_and_a_suggestion() {
    let err = invalid(
        "unknown-key",
        "version: 1\nservers:\n  a:\n    command: x\n    argz: [1]\n",
    );
    assert!(err.contains(".yaml:5:5: servers.a.argz"), "{err}");
    assert!(err.contains("unknown key"), "{err}");
    assert!(err.contains("args"), "suggests the right key: {err}");
}

#[test]
fn a_wrong_type_names_what_was_expected() {
    let err = invalid(
        "wrong-type",
        "version: 1\nservers:\n  a:\n    command: x\n    args: \"not a list\"\n",
    );
    assert!(err.contains(".yaml:5:11: servers.a.args"), "{err}");
    assert!(err.contains("sequence") || err.contains("list"), "{err}");
}

#[test]
fn a_missing_env_variable_is_an_error_not_an_empty_string() {
    let err = invalid(
        "missing-env",
        "version: 1\nservers:\n  a:\n    command: x\n    env:\n      TOKEN: \"${env:MCPFLEET_SURELY_UNSET_VAR}\"\n",
    );
    assert!(err.contains(".yaml:6:14: servers.a.env.TOKEN"), "{err}");
    assert!(err.contains("MCPFLEET_SURELY_UNSET_VAR"), "{err}");
}

#[test]
fn a_bad_server_name_is_refused() {
    let err = invalid(
        "bad-name",
        "version: 1\nservers:\n  ../escape:\n    command: x\n",
    );
    assert!(err.contains(".yaml:3:3: servers"), "{err}");
    assert!(err.contains("../escape"), "{err}");
}

#[test]
fn command_and_url_together_are_refused() {
    let err = invalid(
        "both",
        "version: 1\nservers:\n  a:\n    command: x\n    url: http://127.0.0.1:1/mcp\n",
    );
    assert!(err.contains(".yaml:5:5: servers.a.url"), "{err}");
    assert!(err.contains("not both"), "{err}");
}

#[test]
fn every_error_of_a_file_is_reported_at_once() {
    let err = invalid(
        "many",
        "version: 2\nservers:\n  a:\n    command: x\n    bogus: 1\n  b:\n    args: []\n    connect_timeout: 10\n",
    );
    for needle in [
        ".yaml:1:10: version",
        ".yaml:5:5: servers.a.bogus",
        "servers.b",
        ".yaml:8:22: servers.b.connect_timeout",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
}

#[test]
fn errors_are_json_too_when_asked() {
    let fleet = TestFleet::raw(
        "json-error",
        "version: 1\nservers:\n  a:\n    command: x\n    argz: []\n",
    );
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 2);
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["error"]["kind"], "invalid_fleet_file");
    let first = &doc["error"]["errors"][0];
    assert_eq!(first["line"], 5);
    assert_eq!(first["column"], 5);
    assert_eq!(first["path"], "servers.a.argz");
}

#[test]
fn a_missing_fleet_file_and_an_unknown_server_are_usage_errors() {
    let fleet = TestFleet::raw("missing", "");
    std::fs::remove_file(&fleet.path).unwrap();
    let out = fleet.run(&["check"]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains("mcpfleet.yaml"), "{}", stderr(&out));

    let fleet = TestFleet::raw(
        "unknown-server",
        "version: 1\nservers:\n  a:\n    command: x\n",
    );
    let out = fleet.run(&["check", "nosuch"]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains("nosuch"), "{}", stderr(&out));

    let out = fleet.run(&["check", "--jobs", "0"]);
    assert_code(&out, 2);
}

#[test]
fn validate_prints_the_resolved_fleet_without_secrets() {
    let fleet = TestFleet::raw(
        "validate",
        "version: 1\nname: demo\ndefaults:\n  connect_timeout: 30s\nservers:\n  a:\n    command: x\n    args: [\"--token\", \"${env:MCPFLEET_TEST_SECRET}\"]\n    env:\n      API_KEY: \"${env:MCPFLEET_TEST_SECRET}\"\n      LEVEL: info\n    cleanup_timeout: 500ms\n  b:\n    command: y\n    enabled: false\n",
    );
    let secret = "s3cr3t-value-that-must-not-show";
    let mut cmd = fleet.command(&["--output", "json", "validate"]);
    cmd.env("MCPFLEET_TEST_SECRET", secret);
    let out = run_bounded(cmd, std::time::Duration::from_secs(30));
    assert_code(&out, 0);
    assert!(!stdout(&out).contains(secret));
    assert!(!stderr(&out).contains(secret));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["command"], "validate");
    let text = doc["fleet"].to_string();
    assert!(text.contains("${env:MCPFLEET_TEST_SECRET}"), "{text}");
    assert!(text.contains("30s") && text.contains("500ms"), "{text}");

    let mut cmd = fleet.command(&["validate"]);
    cmd.env("MCPFLEET_TEST_SECRET", secret);
    let out = run_bounded(cmd, std::time::Duration::from_secs(30));
    assert_code(&out, 0);
    assert!(!stdout(&out).contains(secret));
    assert!(stdout(&out).contains("API_KEY"), "{}", stdout(&out));
}
