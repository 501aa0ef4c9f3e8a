//! Tests of the fleet file as the rest of the crate sees it: `load_str`, `load`,
//! `discover`, and what a broken file reports, position by position.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

const SECRET: &str = "s3cr3t-t0k3n";

fn env(name: &str) -> Option<String> {
    match name {
        "API_KEY" => Some(SECRET.to_string()),
        "TOKEN" => Some(SECRET.to_string()),
        "USER_NAME" => Some("ada".to_string()),
        "SUBDIR" => Some("sub".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

/// A fleet file path in a directory that exists, so that the default `cwd` is valid.
fn fleet_path() -> PathBuf {
    std::env::temp_dir().join("mcpfleet-config-test.yaml")
}

fn ok(text: &str) -> Fleet {
    match load_str(text, &fleet_path(), &env) {
        Ok(fleet) => fleet,
        Err(e) => panic!("expected a valid fleet, got:\n{e}"),
    }
}

/// Each error as `LINE:COL: PATH: MESSAGE`.
fn errors(text: &str) -> Vec<String> {
    match load_str(text, Path::new("fleet.yaml"), &env) {
        Ok(fleet) => panic!("expected errors, got {fleet:#?}"),
        Err(e) => {
            assert_eq!(e.file, Path::new("fleet.yaml"));
            e.errors.iter().map(ToString::to_string).collect()
        }
    }
}

fn one_error(text: &str) -> String {
    let errors = errors(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap_or_default()
}

fn stdio(server: &ServerSpec) -> &StdioSpec {
    match &server.transport {
        Transport::Stdio(stdio) => stdio,
    }
}

const HEAD: &str = "version: 1\nservers:\n";

#[test]
fn a_complete_fleet_file() {
    let fleet = ok(r#"
version: 1
name: demo
defaults:
  connect_timeout: 30s
  cleanup_timeout: 2m
servers:
  everything:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything", 8080, 1.10, true]
    env: { LOG_LEVEL: info, API_KEY: "${env:API_KEY}", PY: 3.10 }
    connect_timeout: 60s
  time:
    command: mcp-server-time
    cleanup_timeout: none
    enabled: false
    shell: true
  bare:
    command: cat
"#);
    assert_eq!(fleet.name.as_deref(), Some("demo"));
    assert!(fleet.file.is_absolute());
    let names: Vec<_> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["everything", "time", "bare"]);
    let enabled: Vec<_> = fleet.enabled().map(|s| s.name.as_str()).collect();
    assert_eq!(enabled, ["everything", "bare"]);

    let everything = fleet.server("everything").unwrap();
    assert!(everything.enabled);
    assert_eq!(
        everything.connect_timeout,
        Timeout::After(Duration::from_secs(60))
    );
    assert_eq!(
        everything.cleanup_timeout,
        Timeout::After(Duration::from_secs(120))
    );
    let spec = stdio(everything);
    assert_eq!(spec.command, Text::literal("npx"));
    let args: Vec<_> = spec.args.iter().map(|a| a.value.as_str()).collect();
    // Numbers and booleans are kept as written, not as YAML would retype them.
    assert_eq!(
        args,
        [
            "-y",
            "@modelcontextprotocol/server-everything",
            "8080",
            "1.10",
            "true"
        ]
    );
    assert_eq!(
        spec.env,
        vec![
            ("LOG_LEVEL".to_string(), Text::literal("info")),
            (
                "API_KEY".to_string(),
                Text {
                    value: SECRET.into(),
                    template: Some("${env:API_KEY}".into())
                }
            ),
            ("PY".to_string(), Text::literal("3.10")),
        ]
    );
    assert_eq!(spec.cwd, fleet.file.parent().unwrap());
    assert!(!spec.shell);

    let time = fleet.server("time").unwrap();
    assert!(!time.enabled);
    assert_eq!(
        time.connect_timeout,
        Timeout::After(Duration::from_secs(30))
    );
    assert_eq!(time.cleanup_timeout, Timeout::Never);
    assert!(stdio(time).shell);

    let bare = fleet.server("bare").unwrap();
    assert!(stdio(bare).args.is_empty() && stdio(bare).env.is_empty());
    assert!(fleet.server("nope").is_none());
}

#[test]
fn defaults_are_ten_seconds() {
    let fleet = ok("version: 1\nservers:\n  a:\n    command: x\n");
    let a = fleet.server("a").unwrap();
    assert_eq!(a.connect_timeout, Timeout::After(Duration::from_secs(10)));
    assert_eq!(a.cleanup_timeout, Timeout::After(Duration::from_secs(10)));
    assert_eq!(fleet.name, None);
}

#[test]
fn defaults_apply_even_when_written_after_servers() {
    let fleet = ok("version: 1\nservers:\n  a: {command: x}\ndefaults: {connect_timeout: 500ms}\n");
    assert_eq!(
        fleet.servers[0].connect_timeout,
        Timeout::After(Duration::from_millis(500))
    );
}

#[test]
fn empty_collections_may_be_left_empty() {
    let fleet = ok("version: 1\ndefaults:\nservers:\n  a:\n    command: x\n    args:\n    env:\n");
    assert!(stdio(&fleet.servers[0]).args.is_empty());
    assert_eq!(
        ok("version: '1'\nservers: {a: {command: x}}\n")
            .servers
            .len(),
        1
    );
}

#[test]
fn unknown_keys_at_every_level_with_suggestions() {
    assert_eq!(
        errors(
            "version: 1\nsevers: {}\nservers:\n  a:\n    comand: x\n    environment: {}\n    foo: 1\n\
             defaults:\n  connect_timout: 1s\n"
        ),
        [
            "2:1: severs: unknown key `severs`; did you mean `servers`?",
            "5:5: servers.a.comand: unknown key `comand`; did you mean `command`?",
            "6:5: servers.a.environment: unknown key `environment`; did you mean `env`?",
            "7:5: servers.a.foo: unknown key `foo`",
            "9:3: defaults.connect_timout: unknown key `connect_timout`; did you mean `connect_timeout`?",
        ]
    );
}

#[test]
fn a_misspelled_command_is_not_also_a_missing_one() {
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    cmd: x\n")),
        "4:5: servers.a.cmd: unknown key `cmd`; did you mean `command`?"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    ulr: http://x\n")),
        "4:5: servers.a.ulr: unknown key `ulr`; did you mean `url`?"
    );
}

#[test]
fn later_keys_are_recognised_and_refused() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: x\n    restart: always\n    health: {{interval: 5s}}\n    idle_timeout: 5m\n"
        )),
        [
            "5:5: servers.a.restart: `restart` is not supported in this version",
            "6:5: servers.a.health: `health` is not supported in this version",
            "7:5: servers.a.idle_timeout: `idle_timeout` is not supported in this version",
        ]
    );
}

#[test]
fn command_and_url() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    command: x\n    url: http://h/mcp\n"
        )),
        "5:5: servers.a.url: a server has either `command` (stdio) or `url` (streamable HTTP), not both"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  remote:\n    url: http://127.0.0.1:3001/mcp\n    headers: {{Authorization: \"Bearer ${{env:TOKEN}}\"}}\n"
        )),
        "4:5: servers.remote.url: remote servers (`url`) are not supported in this version"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    args: [x]\n")),
        "3:3: servers.a: a server needs `command` (stdio) or `url` (streamable HTTP)"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    command: x\n    headers: {{}}\n")),
        "5:5: servers.a.headers: `headers` only applies to remote servers (`url`)"
    );
}

#[test]
fn wrong_types_name_what_was_expected() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: [npx]\n    args: [x, [y], {{k: v}}, ~]\n    enabled: \"yes\"\n    shell: 1\n    env: {{A: [1]}}\n"
        )),
        [
            "4:14: servers.a.command: expected a string, found a sequence",
            "5:15: servers.a.args[1]: expected a string, found a sequence",
            "5:20: servers.a.args[2]: expected a string, found a mapping",
            "5:28: servers.a.args[3]: expected a string, found null",
            "6:14: servers.a.enabled: expected a boolean (true or false), found a string",
            "7:12: servers.a.shell: expected a boolean (true or false), found a number",
            "8:14: servers.a.env.A: expected a string, found a sequence",
        ]
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    command: npx\n    args: -y pkg\n")),
        "5:11: servers.a.args: expected a sequence of strings, found a string; write one item per argument, like [\"-y\", \"some-package\"]"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    command: x\n    env:\n      - A=1\n"
        )),
        "6:7: servers.a.env: expected a mapping of variable names to values, found a sequence; write `env: {NAME: value}`"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    command: x\n    args: !secret [a]\n"
        )),
        "5:11: servers.a.args: expected a sequence of strings, found a value tagged `!secret`"
    );
}

#[test]
fn a_null_value_is_reported_at_its_key() {
    assert_eq!(
        errors(&format!("{HEAD}  a:\n  b:\n    command:\n")),
        [
            "3:3: servers.a: expected a mapping, found null",
            "5:5: servers.b.command: expected a string, found null",
        ]
    );
}

#[test]
fn top_level_shape() {
    assert_eq!(
        one_error(""),
        "(top level): the file is empty; a fleet file needs `version: 1` and `servers`"
    );
    assert_eq!(
        one_error("# nothing yet\n\n---\n"),
        "(top level): the file is empty; a fleet file needs `version: 1` and `servers`"
    );
    assert_eq!(
        one_error("- a\n- b\n"),
        "1:1: (top level): expected a mapping at the top level, found a sequence"
    );
    assert_eq!(
        one_error("just text\n"),
        "1:1: (top level): expected a mapping at the top level, found a string"
    );
    assert_eq!(
        errors("name: x\n"),
        [
            "1:1: (top level): missing `version: 1`",
            "1:1: (top level): missing `servers`: a fleet file needs at least one server",
        ]
    );
    assert_eq!(
        one_error("version: 1\nservers: {}\n"),
        "2:10: servers: at least one server is required"
    );
    assert_eq!(
        one_error("version: 1\nservers:\n"),
        "2:1: servers: expected a mapping of server names to servers, found null"
    );
    assert_eq!(
        one_error("version: 2\nservers: {a: {command: x}}\n"),
        "1:10: version: unsupported version `2`; this mcpfleet reads version 1"
    );
    assert_eq!(
        one_error("version: [1]\nservers: {a: {command: x}}\n"),
        "1:10: version: expected the version number 1, found a sequence"
    );
}

#[test]
fn names_are_restricted() {
    assert_eq!(
        errors(
            "version: 1\nname: My Fleet\nservers:\n  Bad.Name:\n    command: x\n  \"a b\":\n    command: x\n  ok-1_x:\n    command: x\n"
        ),
        [
            "2:7: name: invalid fleet name `My Fleet`: use 1 to 63 lowercase letters, digits, `-` and `_`, starting with a letter or digit (names become file and socket names)",
            "4:3: servers[\"Bad.Name\"]: invalid server name `Bad.Name`: use 1 to 63 lowercase letters, digits, `-` and `_`, starting with a letter or digit (names become file and socket names)",
            "6:3: servers[\"a b\"]: invalid server name `a b`: use 1 to 63 lowercase letters, digits, `-` and `_`, starting with a letter or digit (names become file and socket names)",
        ]
    );
    // A number is a fine name once read as written.
    assert_eq!(
        ok("version: 1\nservers:\n  007: {command: x}\n").servers[0].name,
        "007"
    );
}

#[test]
fn durations_in_the_file() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: x\n    connect_timeout: 10\n    cleanup_timeout: 0s\n  b:\n    command: x\n    connect_timeout: 1.5s\n    cleanup_timeout: true\n"
        )),
        [
            "5:22: servers.a.connect_timeout: `10` has no unit; add a unit: 10s",
            "6:22: servers.a.cleanup_timeout: `0s` is zero, a deadline that can never be met; use a positive duration, or none for no deadline",
            "9:22: servers.b.connect_timeout: `1.5s` is not a whole number of a unit; write e.g. 1500ms instead of 1.5s",
            "10:22: servers.b.cleanup_timeout: expected a duration such as 10s, 500ms or none, found a boolean",
        ]
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    connect_timeout: \"500ms\"\n    cleanup_timeout: none\n"
    ));
    assert_eq!(
        fleet.servers[0].connect_timeout,
        Timeout::After(Duration::from_millis(500))
    );
    assert_eq!(fleet.servers[0].cleanup_timeout, Timeout::Never);
}

#[test]
fn env_names_and_duplicates() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: x\n    env:\n      GOOD: 1\n      1BAD: x\n      GOOD: 2\n  a:\n    command: y\n"
        )),
        [
            "7:7: servers.a.env.1BAD: `1BAD` is not a valid environment variable name (letters, digits and _, not starting with a digit)",
            "8:7: servers.a.env.GOOD: duplicate key `GOOD` (first defined on line 6)",
            "9:3: servers.a: duplicate key `a` (first defined on line 3)",
        ]
    );
}

#[test]
fn expansion_in_command_args_env_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let file = dir.path().join("mcpfleet.yaml");
    let text = format!(
        "{HEAD}  a:\n    command: ${{env:USER_NAME}}-bin\n    args: [\"--token=${{env:TOKEN}}\", \"${{env:USER_NAME}}:${{env:USER_NAME}}\", plain]\n    env: {{AUTH: \"Bearer ${{env:API_KEY}}\"}}\n    cwd: ./${{env:SUBDIR}}\n"
    );
    let fleet = load_str(&text, &file, &env).unwrap();
    let spec = stdio(&fleet.servers[0]);
    assert_eq!(spec.command.value, "ada-bin");
    assert_eq!(spec.command.display(), "${env:USER_NAME}-bin");
    assert_eq!(spec.args[0].value, format!("--token={SECRET}"));
    assert_eq!(spec.args[0].display(), "--token=${env:TOKEN}");
    assert_eq!(spec.args[1].value, "ada:ada");
    assert_eq!(spec.args[2], Text::literal("plain"));
    assert_eq!(spec.env[0].1.value, format!("Bearer {SECRET}"));
    assert_eq!(spec.env[0].1.display(), "Bearer ${env:API_KEY}");
    assert_eq!(spec.cwd, dir.path().join("sub").canonicalize().unwrap());
}

#[test]
fn expansion_errors_are_reported_at_the_string() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: \"${{env:NOPE}}\"\n    args: [\"${{env:A-B}}\", \"${{env:OPEN\", \"${{env:X1}}${{env:X2}}\"]\n    env: {{K: \"${{env:MISSING}}\"}}\n  b:\n    command: \"${{env:EMPTY}}\"\n"
        )),
        [
            "4:14: servers.a.command: environment variable `NOPE` is not set",
            "5:12: servers.a.args[0]: `${env:A-B}` does not name a valid environment variable (letters, digits and _, not starting with a digit)",
            "5:26: servers.a.args[1]: `${env:` is not closed with `}`",
            "5:40: servers.a.args[2]: environment variable `X1` is not set",
            "5:40: servers.a.args[2]: environment variable `X2` is not set",
            "6:14: servers.a.env.K: environment variable `MISSING` is not set",
            "8:14: servers.b.command: `command` is empty once `${env:EMPTY}` is expanded",
        ]
    );
}

#[test]
fn secrets_never_reach_resolved_output() {
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: \"${{env:TOKEN}}\"\n    args: [\"--key=${{env:API_KEY}}\"]\n    env: {{API_KEY: \"${{env:API_KEY}}\", AUTH: \"Bearer ${{env:TOKEN}}\"}}\n"
    ));
    let json = fleet.resolved_json().to_string();
    let yaml = fleet.resolved_yaml();
    let debug = format!("{fleet:?}");
    for shown in [&json, &yaml, &debug] {
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains("${env:API_KEY}"), "{shown}");
        assert!(shown.contains("Bearer ${env:TOKEN}"), "{shown}");
    }
    // The value is still there for the code that starts the process.
    assert_eq!(stdio(&fleet.servers[0]).command.value, SECRET);
}

#[test]
fn resolved_json_shape() {
    let fleet = ok(
        "version: 1\nname: demo\nservers:\n  a:\n    command: npx\n    args: [x]\n    env: {B: b, A: a}\n    enabled: false\n    cleanup_timeout: none\n",
    );
    let json = fleet.resolved_json();
    let cwd = fleet.file.parent().unwrap().display().to_string();
    assert_eq!(
        json,
        serde_json::json!({
            "version": 1,
            "file": fleet.file.display().to_string(),
            "name": "demo",
            "servers": [{
                "name": "a", "enabled": false, "transport": "stdio",
                "command": "npx", "args": ["x"], "env": {"A": "a", "B": "b"},
                "cwd": cwd, "shell": false,
                "connect_timeout": "10s", "cleanup_timeout": "none",
            }],
        })
    );
}

#[test]
fn resolved_yaml_is_a_fleet_file_that_loads_to_the_same_fleet() {
    let fleet = ok(
        "version: 1\nname: demo\ndefaults: {connect_timeout: 90s}\nservers:\n  a:\n    command: npx\n    args: [\"1.10\", \"yes\", \"true\", \"\", \"#x\", \"a: b\", 8080]\n    env: {Z: \"null\", A: \"~\"}\n  b:\n    command: y\n    enabled: false\n    shell: true\n",
    );
    let yaml = fleet.resolved_yaml();
    assert!(yaml.starts_with("# resolved from "), "{yaml}");
    let again = load_str(&yaml, &fleet_path(), &env).unwrap();
    assert_eq!(
        format!("{:?}", again.servers),
        format!("{:?}", fleet.servers),
        "{yaml}"
    );
    assert_eq!(again.name, fleet.name);
}

#[test]
fn relative_cwd_is_resolved_against_the_fleet_file_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data/x")).unwrap();
    std::fs::write(dir.path().join("afile"), "").unwrap();
    let file = dir.path().join("fleet.yaml");
    std::fs::write(
        &file,
        "version: 1\nservers:\n  a: {command: x, cwd: data/x}\n  b: {command: x, cwd: ..}\n  c: {command: x}\n",
    )
    .unwrap();
    let fleet = load(&file, &env).unwrap();
    let base = dir.path().canonicalize().unwrap();
    assert_eq!(fleet.file, base.join("fleet.yaml"));
    assert_eq!(stdio(&fleet.servers[0]).cwd, base.join("data/x"));
    assert_eq!(stdio(&fleet.servers[1]).cwd, base.parent().unwrap());
    assert_eq!(stdio(&fleet.servers[2]).cwd, base);

    let text = "version: 1\nservers:\n  a: {command: x, cwd: nope}\n  b: {command: x, cwd: afile}\n  c: {command: x, cwd: ''}\n";
    let err = load_str(text, &file, &env).unwrap_err();
    let messages: Vec<_> = err.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            format!("3:24: servers.a.cwd: directory `{}` does not exist", base.join("nope").display()),
            format!("4:24: servers.b.cwd: `{}` is not a directory", base.join("afile").display()),
            "5:24: servers.c.cwd: `cwd` must not be empty; leave it out for the fleet file's directory".to_string(),
        ]
    );
}

#[test]
fn a_templated_cwd_is_shown_as_its_template() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.yaml");
    let err = load_str(
        "version: 1\nservers:\n  a: {command: x, cwd: \"/x/${env:TOKEN}\"}\n",
        &file,
        &env,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("directory `/x/${env:TOKEN}` does not exist"),
        "{text}"
    );
    assert!(!text.contains(SECRET));
}

#[test]
fn many_errors_are_all_reported_sorted_by_position() {
    let text = "servers:\n  b:\n    command: x\n    shell: maybe\n  A:\n    command: 1\n    args: x\nversion: 3\nextra: 1\n";
    assert_eq!(
        errors(text),
        [
            "4:12: servers.b.shell: expected a boolean (true or false), found a string",
            "5:3: servers.A: invalid server name `A`: use 1 to 63 lowercase letters, digits, `-` and `_`, starting with a letter or digit (names become file and socket names)",
            "7:11: servers.A.args: expected a sequence of strings, found a string; write one item per argument, like [\"-y\", \"some-package\"]",
            "8:10: version: unsupported version `3`; this mcpfleet reads version 1",
            "9:1: extra: unknown key `extra`",
        ]
    );
}

#[test]
fn errors_beyond_a_hundred_are_counted_not_located() {
    let mut text = String::from(HEAD);
    for i in 0..150 {
        text.push_str(&format!("  s{i}: {{command: x, bogus: 1}}\n"));
    }
    let err = load_str(&text, Path::new("f.yaml"), &env).unwrap_err();
    assert_eq!(err.errors.len(), 150);
    assert!(err.errors[..100].iter().all(|e| e.line.is_some()));
    assert!(err.errors[100..].iter().all(|e| e.line.is_none()));
    assert_eq!(err.errors[99].line, Some(102));
    let shown = err.to_string();
    assert!(shown.starts_with("invalid fleet file f.yaml: 150 errors\n"));
    assert!(shown.ends_with("\n... and 50 more errors"), "{shown}");
}

#[test]
fn messages_stay_on_one_line() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    \"evil\\nfleet.yaml:1:1: forged\": 1
    connect_timeout: \"1\\ts\"\n"
        ),
        [
            "5:5: servers.a[\"evil\\nfleet.yaml:1:1: forged\"]: unknown key `evil\\nfleet.yaml:1:1: forged`",
            "6:22: servers.a.connect_timeout: `1\\ts` has an unknown unit `\\ts`; use ms, s, m or h",
        ]
    );
}

#[test]
fn large_files_locate_fewer_errors() {
    assert_eq!(locate_budget(0), 100);
    assert_eq!(locate_budget(20 * 1024), 100);
    assert_eq!(locate_budget(512 * 1024), 32);
    assert_eq!(locate_budget(MAX_FILE_BYTES), 16);
    assert_eq!(locate_budget(usize::MAX), 10);
}

#[test]
fn later_keys_elsewhere_are_just_unknown() {
    assert_eq!(
        errors(
            "version: 1
restart: always
defaults:
  health: {}
servers: {a: {command: x}}
"
        ),
        [
            "2:1: restart: unknown key `restart`",
            "4:3: defaults.health: `health` is not supported in this version",
        ]
    );
}

#[test]
fn display_of_the_whole_report() {
    let err = load_str(
        "version: 1\nservers:\n  a: {command: x, foo: 1}\n",
        Path::new("dir/f.yaml"),
        &env,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid fleet file dir/f.yaml: 1 error\ndir/f.yaml:3:19: servers.a.foo: unknown key `foo`"
    );
}

#[test]
fn yaml_syntax_errors_have_positions() {
    assert_eq!(
        one_error("version: 1\nservers:\n  a:\n    command: [x\n    args: y\n"),
        "5:9: (top level): YAML syntax error: did not find expected ',' or ']', while parsing a flow sequence at line 4 column 14"
    );
    assert_eq!(
        one_error("version: 1\nservers: a: b\n"),
        "2:11: (top level): YAML syntax error: mapping values are not allowed in this context"
    );
    assert_eq!(
        one_error("version: 1\n\tservers: {}\n"),
        "2:1: (top level): YAML syntax error: found a tab character that violates indentation, while scanning a plain scalar at line 1 column 10"
    );
}

#[test]
fn load_reports_unreadable_oversized_and_non_utf8_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let err = load(&missing, &env).unwrap_err();
    assert_eq!(err.file, missing);
    assert!(
        err.errors[0]
            .message
            .starts_with("cannot read the fleet file"),
        "{err}"
    );

    let big = dir.path().join("big.yaml");
    let mut text = String::from(HEAD);
    while text.len() < 10 * 1024 * 1024 {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&big, &text).unwrap();
    let started = std::time::Instant::now();
    let err = load(&big, &env).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.errors.len(), 1);
    assert!(
        err.errors[0].message.contains("larger than 1024 KiB"),
        "{err}"
    );
    assert!(load_str(&text, &big, &env).is_err());

    let latin1 = dir.path().join("latin1.yaml");
    std::fs::write(&latin1, b"version: 1\nname: caf\xe9\n").unwrap();
    let err = load(&latin1, &env).unwrap_err();
    assert_eq!(
        err.errors[0].to_string(),
        "2:10: (top level): the file is not valid UTF-8"
    );

    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "\u{feff}version: 1\nservers: {a: {command: x}}\n").unwrap();
    assert_eq!(load(&good, &env).unwrap().servers.len(), 1);
}

#[test]
fn hostile_yaml_gives_clean_errors() {
    let mut bomb = String::from(
        "version: 1\nservers: {}\nlol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let refs = vec![format!("*l{}", i - 1); 9].join(", ");
        bomb.push_str(&format!("lol{i}: &l{i} [{refs}]\n"));
    }
    let started = std::time::Instant::now();
    let err = load_str(&bomb, Path::new("bomb.yaml"), &env).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.errors.len(), 1, "{err}");

    let deep = format!(
        "version: 1\nservers: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let err = load_str(&deep, Path::new("deep.yaml"), &env).unwrap_err();
    assert!(err.errors[0].message.contains("nested too deeply"), "{err}");

    let two = load_str("version: 1\n---\nversion: 1\n", Path::new("two.yaml"), &env).unwrap_err();
    assert!(
        two.errors[0]
            .message
            .contains("more than one YAML document"),
        "{two}"
    );
}

#[test]
fn no_input_panics() {
    let valid = "version: 1\nname: demo\ndefaults: {connect_timeout: 5s}\nservers:\n  a:\n    command: \"${env:TOKEN}\"\n    args: [\"-y\", 1, &x [a]]\n    env: {K: *x, L: '${env:'}\n    cwd: .\n";
    let chars: Vec<char> = valid.chars().collect();
    for cut in 0..=chars.len() {
        let prefix: String = chars[..cut].iter().collect();
        let _ = load_str(&prefix, &fleet_path(), &env);
        for inject in [
            "\"", "[", "{", ":", "&", "*", "!", "\t", "\u{0}", "- ", "\n  ", "? ", "|",
        ] {
            let mut mutated = prefix.clone();
            mutated.push_str(inject);
            mutated.extend(&chars[cut..]);
            let _ = load_str(&mutated, &fleet_path(), &env);
        }
    }
}

#[test]
fn discover_order() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let explicit = cwd.join("explicit.yaml");
    let from_env = cwd.join("env.yaml");
    let default = cwd.join("mcpfleet.yaml");
    for f in [&explicit, &from_env, &default] {
        std::fs::write(f, HEAD).unwrap();
    }
    let env_value = OsStr::new("env.yaml");
    assert_eq!(
        discover(Some(Path::new("explicit.yaml")), Some(env_value), cwd).unwrap(),
        explicit
    );
    assert_eq!(discover(None, Some(env_value), cwd).unwrap(), from_env);
    assert_eq!(
        discover(None, Some(from_env.as_os_str()), Path::new("/")).unwrap(),
        from_env
    );
    assert_eq!(discover(None, None, cwd).unwrap(), default);
    assert_eq!(discover(None, Some(OsStr::new("")), cwd).unwrap(), default);

    // A named file that is missing is an error, never a silent fallback.
    let err = discover(Some(Path::new("nope.yaml")), Some(env_value), cwd).unwrap_err();
    assert_eq!(err.file, cwd.join("nope.yaml"));
    assert!(
        err.to_string().contains("-f/--file does not exist"),
        "{err}"
    );
    let err = discover(None, Some(OsStr::new("nope.yaml")), cwd).unwrap_err();
    assert!(
        err.to_string().contains("MCPFLEET_FILE does not exist"),
        "{err}"
    );
    std::fs::remove_file(&default).unwrap();
    let err = discover(None, None, cwd).unwrap_err();
    assert!(err.to_string().contains("no mcpfleet.yaml in"), "{err}");
    let err = discover(Some(cwd), None, cwd).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
}
