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
        "URL" => Some("https://mcp.example.org/mcp".to_string()),
        "MULTILINE" => Some(format!("{SECRET}\r\nInjected: 1")),
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
        Transport::Http(_) => panic!("`{}` is a remote server", server.name),
    }
}

fn http(server: &ServerSpec) -> &HttpSpec {
    match &server.transport {
        Transport::Http(http) => http,
        Transport::Stdio(_) => panic!("`{}` is a stdio server", server.name),
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
fn command_and_url() {
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    command: x\n    url: http://h/mcp\n"
        )),
        "5:5: servers.a.url: a server has either `command` (stdio) or `url` (streamable HTTP), not both"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    args: [x]\n")),
        "3:3: servers.a: a server needs `command` (stdio) or `url` (streamable HTTP)"
    );
    // `headers` alone does not make a remote server.
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    headers: {{A: b}}\n")),
        "3:3: servers.a: a server needs `command` (stdio) or `url` (streamable HTTP)"
    );
    // With both, that is the one error: the keys of either kind are checked as usual.
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    url: http://h\n    command: x\n    args: [y]\n    cwd: .\n    headers: {{A: b}}\n"
        )),
        "4:5: servers.a.url: a server has either `command` (stdio) or `url` (streamable HTTP), not both"
    );
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: x\n    url: ftp://h\n    headers: {{A: [b]}}\n"
        )),
        [
            "5:5: servers.a.url: a server has either `command` (stdio) or `url` (streamable HTTP), not both",
            "5:10: servers.a.url: `ftp://h` is not a valid URL: it must start with `http://` or `https://`",
            "6:18: servers.a.headers.A: expected a string, found a sequence",
        ]
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    command: x\n    headers: {{}}\n")),
        "5:5: servers.a.headers: `headers` only applies to remote servers (`url`)"
    );
    // Refused as a key: its value is not checked as well.
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    headers: {{Bad Name: \"${{env:NOPE}}\"}}\n    command: x\n"
        )),
        "4:5: servers.a.headers: `headers` only applies to remote servers (`url`)"
    );
}

#[test]
fn a_remote_server() {
    let fleet = ok(r#"
version: 1
defaults:
  connect_timeout: 30s
servers:
  remote:
    url: http://127.0.0.1:3001/mcp
    headers:
      Authorization: "Bearer ${env:TOKEN}"
      X-Api-Version: 2
      x-empty: ""
      "!#$%&'*+-.^_`|~": tab	inside
    cleanup_timeout: 5s
    enabled: false
  templated:
    url: "${env:URL}"
    headers:
  bare:
    url: https://[::1]:8443
    headers: {}
  local:
    command: x
"#);
    let remote = fleet.server("remote").unwrap();
    assert_eq!(remote.transport.kind(), "http");
    assert!(!remote.enabled);
    assert_eq!(remote.connect_timeout, Timeout::After(secs(30)));
    assert_eq!(remote.cleanup_timeout, Timeout::After(secs(5)));
    assert_eq!(
        http(remote),
        &HttpSpec {
            url: Text::literal("http://127.0.0.1:3001/mcp"),
            headers: vec![
                (
                    "Authorization".to_string(),
                    Text {
                        value: format!("Bearer {SECRET}"),
                        template: Some("Bearer ${env:TOKEN}".into()),
                    }
                ),
                ("X-Api-Version".to_string(), Text::literal("2")),
                ("x-empty".to_string(), Text::literal("")),
                ("!#$%&'*+-.^_`|~".to_string(), Text::literal("tab\tinside")),
            ],
        }
    );
    let templated = http(fleet.server("templated").unwrap());
    assert_eq!(templated.url.value, "https://mcp.example.org/mcp");
    assert_eq!(templated.url.display(), "${env:URL}");
    assert!(templated.headers.is_empty());
    let bare = http(fleet.server("bare").unwrap());
    assert_eq!(bare.url, Text::literal("https://[::1]:8443"));
    assert!(bare.headers.is_empty());
    assert_eq!(fleet.server("local").unwrap().transport.kind(), "stdio");
    assert_eq!(
        fleet.enabled().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["templated", "bare", "local"]
    );
}

#[test]
fn a_url_is_an_absolute_http_or_https_url_with_a_host() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    url: ftp://h/mcp\n  b:\n    url: localhost:3001/mcp\n  c:\n    url: http:///mcp\n  d:\n    url: http://h:99999/mcp\n  e:\n    url: \"http://h/m cp\"\n  f:\n    url: ''\n  g:\n    url: [http://h]\n  h:\n    url:\n  i:\n    url: \"http://[::1/mcp\"\n  j:\n    url: http://a<b>/\n  k:\n    url: 8080\n"
        )),
        [
            "4:10: servers.a.url: `ftp://h/mcp` is not a valid URL: it must start with `http://` or `https://`",
            "6:10: servers.b.url: `localhost:3001/mcp` is not a valid URL: it must start with `http://` or `https://`",
            "8:10: servers.c.url: `http:///mcp` is not a valid URL: it has no host",
            "10:10: servers.d.url: `http://h:99999/mcp` is not a valid URL: the port must be a number from 1 to 65535",
            "12:10: servers.e.url: `http://h/m cp` is not a valid URL: it contains a space or a control character",
            "14:10: servers.f.url: `url` must not be empty",
            "16:10: servers.g.url: expected a string, found a sequence",
            "18:5: servers.h.url: expected a string, found null",
            "20:10: servers.i.url: `http://[::1/mcp` is not a valid URL: the IPv6 address is not closed with `]`",
            "22:10: servers.j.url: `http://a<b>/` is not a valid URL: the host contains a character that a host name cannot have",
            "24:10: servers.k.url: `8080` is not a valid URL: it must start with `http://` or `https://`",
        ]
    );
    // A control character is shown escaped, on the one line of its error.
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    url: \"http://h/\\r\\nX: y\"\n")),
        "4:10: servers.a.url: `http://h/\\r\\nX: y` is not a valid URL: it contains a space or a control character"
    );
}

#[test]
fn a_templated_url_is_checked_once_expanded_and_shown_as_written() {
    let text = format!(
        "{HEAD}  a:\n    url: \"${{env:TOKEN}}\"\n  b:\n    url: \"https://${{env:EMPTY}}/mcp\"\n  c:\n    url: \"${{env:EMPTY}}\"\n  d:\n    url: \"${{env:NOPE}}/mcp\"\n  e:\n    url: \"http://h:${{env:TOKEN}}/\"\n  f:\n    url: \"http://${{env:MULTILINE}}/\"\n"
    );
    let errors = errors(&text);
    assert_eq!(
        errors,
        [
            "4:10: servers.a.url: `${env:TOKEN}` is not a valid URL once expanded: it must start with `http://` or `https://`",
            "6:10: servers.b.url: `https://${env:EMPTY}/mcp` is not a valid URL once expanded: it has no host",
            "8:10: servers.c.url: `url` is empty once `${env:EMPTY}` is expanded",
            "10:10: servers.d.url: environment variable `NOPE` is not set",
            "12:10: servers.e.url: `http://h:${env:TOKEN}/` is not a valid URL once expanded: the port must be a number from 1 to 65535",
            "14:10: servers.f.url: `http://${env:MULTILINE}/` is not a valid URL once expanded: it contains a space or a control character",
        ]
    );
    let report = load_str(&text, Path::new("fleet.yaml"), &env)
        .unwrap_err()
        .to_string();
    assert!(!report.contains(SECRET), "{report}");
}

#[test]
fn header_names_and_values() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    url: http://h\n    headers:\n      Authorization: x\n      X Bad: 1\n      \"X:Y\": 2\n      authorization: y\n      Authorization: z\n      X-Null:\n      X-List: [a]\n      X-Crlf: \"a\\r\\nInjected: 1\"\n      X-Nul: \"a\\0\"\n      X-Env: \"Bearer ${{env:MULTILINE}}\"\n      X-Missing: \"${{env:NOPE}}\"\n      \"\": empty\n"
        )),
        [
            "7:7: servers.a.headers[\"X Bad\"]: `X Bad` is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
            "8:7: servers.a.headers[\"X:Y\"]: `X:Y` is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
            "9:7: servers.a.headers.authorization: duplicate header `authorization`; header names are case-insensitive (first defined on line 6)",
            "10:7: servers.a.headers.Authorization: duplicate key `Authorization` (first defined on line 6)",
            "11:7: servers.a.headers.X-Null: expected a string, found null",
            "12:15: servers.a.headers.X-List: expected a string, found a sequence",
            "13:15: servers.a.headers.X-Crlf: the value of header `X-Crlf` contains a line break or another control character, which HTTP does not allow",
            "14:14: servers.a.headers.X-Nul: the value of header `X-Nul` contains a line break or another control character, which HTTP does not allow",
            "15:14: servers.a.headers.X-Env: the value of header `X-Env` contains a line break or another control character once `Bearer ${env:MULTILINE}` is expanded, which HTTP does not allow",
            "16:18: servers.a.headers.X-Missing: environment variable `NOPE` is not set",
            "17:7: servers.a.headers[\"\"]: `` is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
        ]
    );
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    url: http://h\n    headers: [Authorization: x]\n  b:\n    url: http://h\n    headers: Bearer x\n"
        )),
        [
            "5:14: servers.a.headers: expected a mapping of header names to values, found a sequence; write `headers: {Name: value}`",
            "8:14: servers.b.headers: expected a mapping of header names to values, found a string",
        ]
    );
}

#[test]
fn stdio_keys_do_not_apply_to_remote_servers() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  remote:\n    url: http://h/mcp\n    args: [x]\n    env: {{1A: \"${{env:NOPE}}\"}}\n    cwd: /nonexistent/mcpfleet/dir\n    shell: maybe\n    connect_timeout: 5s\n"
        )),
        [
            "5:5: servers.remote.args: `args` only applies to stdio servers (`command`)",
            "6:5: servers.remote.env: `env` only applies to stdio servers (`command`)",
            "7:5: servers.remote.cwd: `cwd` only applies to stdio servers (`command`)",
            "8:5: servers.remote.shell: `shell` only applies to stdio servers (`command`)",
        ]
    );
    // Even empty, and written before `url`.
    assert_eq!(
        one_error(&format!(
            "{HEAD}  remote:\n    args: []\n    url: http://h\n"
        )),
        "4:5: servers.remote.args: `args` only applies to stdio servers (`command`)"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  remote: {{shell: false, url: http://h}}\n"
        )),
        "3:12: servers.remote.shell: `shell` only applies to stdio servers (`command`)"
    );
}

#[test]
fn timeouts_and_policies_apply_to_remote_servers() {
    let fleet = ok(
        "version: 1\ndefaults:\n  restart: {policy: on-failure}\n  idle_timeout: 10m\n  cleanup_timeout: 1m\nservers:\n  remote:\n    url: http://127.0.0.1:3001/mcp\n    connect_timeout: 2s\n    restart: {max_restarts: 1}\n    health: {interval: 30s}\n    enabled: false\n  other:\n    url: http://127.0.0.1:3002/mcp\n    cleanup_timeout: none\n    idle_timeout: none\n",
    );
    let remote = fleet.server("remote").unwrap();
    assert!(!remote.enabled);
    assert_eq!(remote.connect_timeout, Timeout::After(secs(2)));
    assert_eq!(remote.cleanup_timeout, Timeout::After(secs(60)));
    assert_eq!(remote.restart.policy, RestartMode::OnFailure);
    assert_eq!(remote.restart.max_restarts, 1);
    assert_eq!(
        remote.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: HealthCheck::DEFAULT_TIMEOUT,
            failures: HealthCheck::DEFAULT_FAILURES,
        })
    );
    assert_eq!(remote.idle_timeout, Some(secs(600)));
    let other = fleet.server("other").unwrap();
    assert_eq!(other.cleanup_timeout, Timeout::Never);
    assert_eq!(other.idle_timeout, None);
    assert_eq!(other.health, None);
    // Errors in them are reported as for any server.
    assert_eq!(
        one_error(&format!(
            "{HEAD}  remote:\n    url: http://h\n    health: {{interval: 1s, timeout: 2s}}\n"
        )),
        "5:37: servers.remote.health.timeout: health `timeout` (2s) must be shorter than `interval` (1s), so that a ping ends before the next one starts"
    );
}

#[test]
fn secrets_of_remote_servers_never_reach_output() {
    let fleet = ok(&format!(
        "{HEAD}  remote:\n    url: \"https://h/mcp?key=${{env:API_KEY}}\"\n    headers: {{Authorization: \"Bearer ${{env:TOKEN}}\", X-Trace: on}}\n    cleanup_timeout: 3s\n"
    ));
    let json = fleet.resolved_json();
    assert_eq!(
        json["servers"][0],
        serde_json::json!({
            "name": "remote", "enabled": true, "transport": "http",
            "url": "https://h/mcp?key=${env:API_KEY}",
            "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Trace": "on"},
            "connect_timeout": "10s", "cleanup_timeout": "3s",
            "restart": {
                "policy": "never",
                "backoff": {"initial": "500ms", "max": "30s"},
                "max_restarts": 5,
                "window": "1m",
            },
            "health": null,
            "idle_timeout": "none",
        })
    );
    let json = json.to_string();
    let yaml = fleet.resolved_yaml();
    let debug = format!("{fleet:?}");
    for shown in [&json, &yaml, &debug] {
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(
            shown.contains("https://h/mcp?key=${env:API_KEY}"),
            "{shown}"
        );
        assert!(shown.contains("Bearer ${env:TOKEN}"), "{shown}");
    }
    // The values are still there for the code that connects.
    let spec = http(&fleet.servers[0]);
    assert_eq!(spec.url.value, format!("https://h/mcp?key={SECRET}"));
    assert_eq!(spec.headers[0].1.value, format!("Bearer {SECRET}"));
    // The YAML is a fleet file that loads back to the same servers.
    let again = load_str(&yaml, &fleet_path(), &env).unwrap();
    assert_eq!(http(&again.servers[0]), spec, "{yaml}");
    assert_eq!(
        format!("{:?}", again.servers),
        format!("{:?}", fleet.servers),
        "{yaml}"
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
                "restart": {
                    "policy": "never",
                    "backoff": {"initial": "500ms", "max": "30s"},
                    "max_restarts": 5,
                    "window": "1m",
                },
                "health": null,
                "idle_timeout": "none",
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
fn misplaced_keys_say_where_they_belong() {
    assert_eq!(
        errors(
            "version: 1
restart: {policy: always}
command: x
defaults:
  command: x
  url: http://h
  enabled: false
servers: {a: {command: x}}
"
        ),
        [
            "2:1: restart: unknown key `restart`; it belongs under a server in `servers:`, or in `defaults:`",
            "3:1: command: unknown key `command`; it belongs under a server in `servers:`",
            "5:3: defaults.command: unknown key `command`; it cannot be a default; set it on each server",
            "6:3: defaults.url: unknown key `url`; it cannot be a default; set it on each server",
            "7:3: defaults.enabled: unknown key `enabled`; it cannot be a default; set it on each server",
        ]
    );
}

#[test]
fn headers_and_url_belong_under_a_server() {
    assert_eq!(
        errors(
            "version: 1\nheaders: {A: b}\ndefaults:\n  headers: {A: b}\n  url: http://h\nservers: {a: {url: http://h}}\n"
        ),
        [
            "2:1: headers: unknown key `headers`; it belongs under a server in `servers:`",
            "4:3: defaults.headers: unknown key `headers`; it cannot be a default; set it on each server",
            "5:3: defaults.url: unknown key `url`; it cannot be a default; set it on each server",
        ]
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a:\n    endpoint: http://h\n")),
        "4:5: servers.a.endpoint: unknown key `endpoint`; did you mean `url`?"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a:\n    url: http://h\n    header: {{A: b}}\n"
        )),
        "5:5: servers.a.header: unknown key `header`; did you mean `headers`?"
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
    let valid = "version: 1\nname: demo\ndefaults: {connect_timeout: 5s, health: {interval: 1m}}\nservers:\n  a:\n    command: \"${env:TOKEN}\"\n    args: [\"-y\", 1, &x [a]]\n    env: {K: *x, L: '${env:'}\n    cwd: .\n    restart: {policy: on-failure, backoff: {max: 1s}, max_restarts: 2}\n    health: {timeout: 1s}\n";
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

// --- restart, health and idle_timeout ---------------------------------------

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn policies_default_to_never_no_health_and_no_idle_timeout() {
    let fleet = ok("version: 1\nservers:\n  a:\n    command: x\n");
    let a = fleet.server("a").unwrap();
    assert_eq!(
        a.restart,
        RestartPolicy {
            policy: RestartMode::Never,
            backoff_initial: ms(500),
            backoff_max: secs(30),
            max_restarts: 5,
            window: secs(60),
        }
    );
    assert_eq!(a.restart, RestartPolicy::default());
    assert_eq!(a.health, None);
    assert_eq!(a.idle_timeout, None);
    // Empty blocks are all defaults, as `defaults:` is.
    let fleet = ok(
        "version: 1\nservers:\n  a:\n    command: x\n    restart:\n  b:\n    command: x\n    restart: {backoff: {}}\n",
    );
    assert!(
        fleet
            .servers
            .iter()
            .all(|s| s.restart == RestartPolicy::DEFAULT)
    );
}

#[test]
fn a_server_with_every_policy_key() {
    let fleet = ok("version: 1
servers:
  a:
    command: x
    restart:
      policy: on-failure
      backoff: {initial: 250ms, max: 2m}
      max_restarts: 0
      window: 1h
    health:
      interval: 30s
      timeout: 2s
      failures: 1
    idle_timeout: 10m
");
    let a = &fleet.servers[0];
    assert_eq!(
        a.restart,
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: ms(250),
            backoff_max: secs(120),
            max_restarts: 0,
            window: secs(3600),
        }
    );
    assert_eq!(
        a.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: secs(2),
            failures: 1,
        })
    );
    assert_eq!(a.idle_timeout, Some(secs(600)));
}

#[test]
fn every_restart_policy_value() {
    for (text, mode) in [
        ("never", RestartMode::Never),
        ("on-failure", RestartMode::OnFailure),
        ("always", RestartMode::Always),
        ("\"always\"", RestartMode::Always),
    ] {
        let fleet = ok(&format!(
            "{HEAD}  a:\n    command: x\n    restart: {{policy: {text}}}\n"
        ));
        assert_eq!(fleet.servers[0].restart.policy, mode, "{text}");
        assert_eq!(mode.to_string(), text.trim_matches('"'));
        assert_eq!(RestartMode::from_name(mode.as_str()), Some(mode));
    }
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: {policy: on_failure}
  b:
    command: x
    restart: {policy: unless-stopped}
  c:
    command: x
    restart: {policy: sometimes}
  d:
    command: x
    restart:
      policy: Always
  e:
    command: x
    restart: {policy: 1}
  f:
    command: x
    restart: {policy: }
"
        ),
        [
            "5:23: servers.a.restart.policy: unknown restart policy `on_failure`; did you mean `on-failure`? (the policies are never, on-failure and always)",
            "8:23: servers.b.restart.policy: unknown restart policy `unless-stopped`; did you mean `always`? (the policies are never, on-failure and always)",
            "11:23: servers.c.restart.policy: unknown restart policy `sometimes`; use never, on-failure or always",
            "15:15: servers.d.restart.policy: unknown restart policy `Always`; did you mean `always`? (the policies are never, on-failure and always)",
            "18:23: servers.e.restart.policy: expected never, on-failure or always, found a number",
            "21:15: servers.f.restart.policy: expected never, on-failure or always, found null",
        ]
    );
}

#[test]
fn a_server_block_wins_over_defaults_key_by_key() {
    let fleet = ok("version: 1
defaults:
  restart:
    policy: on-failure
    backoff: {initial: 1s, max: 1m}
    max_restarts: 3
  health: {interval: 30s, failures: 2}
  idle_timeout: 10m
servers:
  inherits:
    command: x
  overrides:
    command: x
    restart:
      backoff: {max: 2m}
      window: 5m
    health: {timeout: 1s}
    idle_timeout: none
  opts-out:
    command: x
    restart: {policy: always, max_restarts: 0}
    health: none
    idle_timeout: 1h
");
    let inherits = fleet.server("inherits").unwrap();
    assert_eq!(
        inherits.restart,
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: secs(1),
            backoff_max: secs(60),
            max_restarts: 3,
            window: secs(60),
        }
    );
    assert_eq!(
        inherits.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: secs(5),
            failures: 2,
        })
    );
    assert_eq!(inherits.idle_timeout, Some(secs(600)));

    let overrides = fleet.server("overrides").unwrap();
    assert_eq!(
        overrides.restart,
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: secs(1),
            backoff_max: secs(120),
            max_restarts: 3,
            window: secs(300),
        }
    );
    assert_eq!(
        overrides.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: secs(1),
            failures: 2,
        })
    );
    assert_eq!(overrides.idle_timeout, None);

    let opts_out = fleet.server("opts-out").unwrap();
    assert_eq!(opts_out.restart.policy, RestartMode::Always);
    assert_eq!(opts_out.restart.max_restarts, 0);
    assert_eq!(opts_out.restart.backoff_initial, secs(1));
    assert_eq!(opts_out.health, None);
    assert_eq!(opts_out.idle_timeout, Some(secs(3600)));
}

#[test]
fn defaults_written_after_servers_still_apply_to_policies() {
    let fleet = ok(
        "version: 1\nservers:\n  a: {command: x}\ndefaults: {restart: {policy: always}, idle_timeout: 5m}\n",
    );
    assert_eq!(fleet.servers[0].restart.policy, RestartMode::Always);
    assert_eq!(fleet.servers[0].idle_timeout, Some(secs(300)));
}

#[test]
fn backoff_initial_longer_than_max_is_refused_where_it_is_written() {
    assert_eq!(
        errors(
            "version: 1
servers:
  both:
    command: x
    restart: {backoff: {initial: 1m, max: 30s}}
  initial-only:
    command: x
    restart:
      backoff:
        initial: 45s
  max-only:
    command: x
    restart: {backoff: {max: 100ms}}
"
        ),
        [
            "5:34: servers.both.restart.backoff.initial: backoff `initial` (1m) is longer than `max` (30s); the delay starts at `initial` and grows up to `max`",
            "10:18: servers.initial-only.restart.backoff.initial: backoff `initial` (45s) is longer than `max` (30s, the default); the delay starts at `initial` and grows up to `max`",
            "13:30: servers.max-only.restart.backoff.max: backoff `initial` (500ms, the default) is longer than `max` (100ms); the delay starts at `initial` and grows up to `max`",
        ]
    );
    // Against a value of `defaults:`, the message says so.
    assert_eq!(
        one_error(
            "version: 1
defaults: {restart: {backoff: {initial: 10s}}}
servers:
  a: {command: x, restart: {backoff: {max: 5s}}}
"
        ),
        "4:44: servers.a.restart.backoff.max: backoff `initial` (10s, from `defaults`) is longer than `max` (5s); the delay starts at `initial` and grows up to `max`"
    );
    // A conflict inside `defaults:` is reported once, there, not per server.
    assert_eq!(
        one_error(
            "version: 1
defaults:
  restart: {backoff: {initial: 2m}}
servers:
  a: {command: x}
  b: {command: x}
"
        ),
        "3:32: defaults.restart.backoff.initial: backoff `initial` (2m) is longer than `max` (30s, the default); the delay starts at `initial` and grows up to `max`"
    );
    // A server that resolves the conflict of `defaults:` does not repeat it.
    assert_eq!(
        errors(
            "version: 1
defaults:
  restart: {backoff: {initial: 2m}}
servers:
  a: {command: x, restart: {backoff: {max: 5m}}}
"
        )
        .len(),
        1
    );
    // Equal is fine: a constant delay.
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    restart: {{backoff: {{initial: 2s, max: 2000ms}}}}\n"
    ));
    assert_eq!(fleet.servers[0].restart.backoff_initial, secs(2));
    assert_eq!(fleet.servers[0].restart.backoff_max, secs(2));
}

#[test]
fn health_timeout_must_be_shorter_than_interval() {
    assert_eq!(
        errors(
            "version: 1
servers:
  equal:
    command: x
    health: {interval: 10s, timeout: 10s}
  longer:
    command: x
    health:
      interval: 10s
      timeout: 1m
  default-timeout:
    command: x
    health: {interval: 3s}
"
        ),
        [
            "5:38: servers.equal.health.timeout: health `timeout` (10s) must be shorter than `interval` (10s), so that a ping ends before the next one starts",
            "10:16: servers.longer.health.timeout: health `timeout` (1m) must be shorter than `interval` (10s), so that a ping ends before the next one starts",
            "13:24: servers.default-timeout.health.interval: health `timeout` (5s, the default) must be shorter than `interval` (3s), so that a ping ends before the next one starts",
        ]
    );
    assert_eq!(
        one_error(
            "version: 1
defaults:
  health: {interval: 1m, timeout: 20s}
servers:
  a: {command: x, health: {interval: 10s}}
  b: {command: x}
"
        ),
        "5:38: servers.a.health.interval: health `timeout` (20s, from `defaults`) must be shorter than `interval` (10s), so that a ping ends before the next one starts"
    );
    assert_eq!(
        one_error(
            "version: 1
defaults:
  health: {interval: 2s}
servers:
  a: {command: x}
  b: {command: x}
"
        ),
        "3:22: defaults.health.interval: health `timeout` (5s, the default) must be shorter than `interval` (2s), so that a ping ends before the next one starts"
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    health: {{interval: 2s, timeout: 1999ms}}\n"
    ));
    assert_eq!(fleet.servers[0].health.unwrap().timeout, ms(1999));
}

#[test]
fn health_needs_an_interval() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    health: {timeout: 1s}
  b:
    command: x
    health:
  c:
    command: x
    health: {}
"
        ),
        [
            "5:5: servers.a.health: `health` needs `interval`, how often to ping the server (such as 30s)",
            "8:5: servers.b.health: `health` needs `interval`, how often to ping the server (such as 30s)",
            "11:5: servers.c.health: `health` needs `interval`, how often to ping the server (such as 30s)",
        ]
    );
    // `defaults.health` applies to every server, so it needs one too; once.
    assert_eq!(
        one_error(
            "version: 1
defaults:
  health: {failures: 5}
servers:
  a: {command: x}
  b: {command: x, health: {interval: 1m}}
"
        ),
        "3:3: defaults.health: `health` needs `interval`, how often to ping the server (such as 30s)"
    );
    // A server inherits the interval of `defaults:`.
    let fleet = ok(
        "version: 1\ndefaults: {health: {interval: 1m}}\nservers:\n  a: {command: x, health: {failures: 9}}\n  b: {command: x, health: }\n",
    );
    for server in &fleet.servers {
        assert_eq!(server.health.unwrap().interval, secs(60));
    }
    assert_eq!(fleet.servers[0].health.unwrap().failures, 9);
    assert_eq!(fleet.servers[1].health.unwrap().failures, 3);
}

#[test]
fn none_only_where_no_deadline_makes_sense() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart:
      backoff: {initial: none, max: none}
      window: none
    health: {interval: none, timeout: none}
"
        ),
        [
            "6:26: servers.a.restart.backoff.initial: `initial` cannot be none; write a duration such as 10s or 500ms",
            "6:37: servers.a.restart.backoff.max: `max` cannot be none; write a duration such as 10s or 500ms",
            "7:15: servers.a.restart.window: `window` cannot be none; write a duration such as 10s or 500ms",
            "8:24: servers.a.health.interval: `interval` cannot be none; write a duration such as 10s or 500ms",
            "8:39: servers.a.health.timeout: `timeout` cannot be none; write a duration such as 10s or 500ms",
        ]
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    idle_timeout: none\n    connect_timeout: none\n"
    ));
    assert_eq!(fleet.servers[0].idle_timeout, None);
    assert_eq!(fleet.servers[0].connect_timeout, Timeout::Never);
}

#[test]
fn bad_durations_in_policies() {
    assert_eq!(
        errors(
            "version: 1
defaults:
  idle_timeout: 0s
servers:
  a:
    command: x
    restart: {backoff: {initial: 0ms, max: 10}, window: 1.5m}
    health: {interval: forever, timeout: [1s]}
    idle_timeout: 10 m
"
        ),
        [
            "3:17: defaults.idle_timeout: `0s` is zero, a deadline that can never be met; use a positive duration, or none for no deadline",
            "7:34: servers.a.restart.backoff.initial: `0ms` is zero; `initial` needs a positive duration",
            "7:44: servers.a.restart.backoff.max: `10` has no unit; add a unit: 10s",
            "7:57: servers.a.restart.window: `1.5m` is not a whole number of a unit; write e.g. 1500ms instead of 1.5s",
            "8:24: servers.a.health.interval: `forever` is not a duration; write e.g. 10s, 500ms, 2m or 1h",
            "8:42: servers.a.health.timeout: expected a duration such as 10s or 500ms, found a sequence",
            "9:19: servers.a.idle_timeout: `10 m` has an unknown unit ` m`; use ms, s, m or h",
        ]
    );
}

#[test]
fn counts_are_whole_numbers_in_range() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: {max_restarts: -1}
    health: {interval: 1m, failures: 0}
  b:
    command: x
    restart: {max_restarts: 1.5}
    health: {interval: 1m, failures: \"3\"}
  c:
    command: x
    restart: {max_restarts: 4294967296}
    health: {interval: 1m, failures: 0x10}
"
        ),
        [
            "5:29: servers.a.restart.max_restarts: `-1` is negative; `max_restarts` is a whole number, 0 or more",
            "6:38: servers.a.health.failures: `failures` must be at least 1",
            "9:29: servers.b.restart.max_restarts: `1.5` is not a whole number; `max_restarts` is a whole number, 0 or more",
            "10:38: servers.b.health.failures: expected a whole number (1 or more), found a string",
            "13:29: servers.c.restart.max_restarts: `4294967296` is too large for `max_restarts` (at most 4294967295)",
            "14:38: servers.c.health.failures: `0x10` is not a whole number; `failures` is a whole number, 1 or more",
        ]
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    restart: {{max_restarts: 4294967295}}\n"
    ));
    assert_eq!(fleet.servers[0].restart.max_restarts, u32::MAX);
}

#[test]
fn unknown_and_mistyped_policy_keys() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart:
      polcy: always
      max_retries: 3
      backoff: {initial: 1s, maximum: 10s, jitter: 0.1}
    health: {intervall: 1m, interval: 2m, retries: 2}
    idle_timout: 5m
"
        ),
        [
            "6:7: servers.a.restart.polcy: unknown key `polcy`; did you mean `policy`?",
            "7:7: servers.a.restart.max_retries: unknown key `max_retries`; did you mean `max_restarts`?",
            "8:30: servers.a.restart.backoff.maximum: unknown key `maximum`; did you mean `max`?",
            "8:44: servers.a.restart.backoff.jitter: unknown key `jitter`",
            "9:14: servers.a.health.intervall: unknown key `intervall`; did you mean `interval`?",
            "9:43: servers.a.health.retries: unknown key `retries`; did you mean `failures`?",
            "10:5: servers.a.idle_timout: unknown key `idle_timout`; did you mean `idle_timeout`?",
        ]
    );
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: always
  b:
    command: x
    restart: [on-failure]
    health: 30s
  c:
    command: x
    restart: {backoff: 1s}
    health: true
    idle_timeout: {after: 1m}
"
        ),
        [
            "5:14: servers.a.restart: expected a mapping such as `{policy: always}`, found a string",
            "8:14: servers.b.restart: expected a mapping such as `{policy: on-failure}`, found a sequence",
            "9:13: servers.b.health: expected a mapping such as `{interval: 30s}`, or none, found a string",
            "12:24: servers.c.restart.backoff: expected a mapping such as `{initial: 500ms, max: 30s}`, found a string",
            "13:13: servers.c.health: expected a mapping such as `{interval: 30s}`, or none, found a boolean",
            "14:19: servers.c.idle_timeout: expected a duration such as 10s, 500ms or none, found a mapping",
        ]
    );
    assert_eq!(
        one_error(
            "version: 1\nservers:\n  a:\n    command: x\n    restart: {policy: always, policy: never}\n"
        ),
        "5:31: servers.a.restart.policy: duplicate key `policy` (first defined on line 5)"
    );
}

#[test]
fn a_refused_value_causes_no_second_error_between_values() {
    // `initial: 0s` is refused; falling back to 500ms must not then be
    // reported as longer than `max: 100ms`, nor a bad interval as a missing one.
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: {backoff: {initial: 0s, max: 100ms}}
    health: {interval: 0s, timeout: 1h}
"
        ),
        [
            "5:34: servers.a.restart.backoff.initial: `0s` is zero; `initial` needs a positive duration",
            "6:24: servers.a.health.interval: `0s` is zero; `interval` needs a positive duration",
        ]
    );
}

/// Every key of the public lists reaches a rule of its own: a listed key that
/// fell through to the catch-all would be reported as unknown.
#[test]
fn every_listed_key_is_handled() {
    let value_for = |key: &str| match key {
        "version" => "1",
        "name" => "demo",
        "defaults" | "env" | "restart" | "backoff" => "{}",
        "servers" => "{a: {command: x}}",
        "command" => "x",
        "url" => "http://h",
        "headers" => "{X-A: b}",
        "args" => "[]",
        "cwd" => ".",
        "shell" | "enabled" => "true",
        "policy" => "always",
        "max_restarts" | "failures" => "2",
        "interval" => "1m",
        "timeout" => "1s",
        "health" => "{interval: 1m}",
        _ => "5s",
    };
    let no_unknown = |text: &str| {
        if let Err(e) = load_str(text, &fleet_path(), &env) {
            assert!(!e.to_string().contains("unknown key"), "{text}\n{e}");
        }
    };
    for key in TOP_KEYS {
        no_unknown(&format!(
            "version: 1\nservers: {{a: {{command: x}}}}\n{key}: {}\n",
            value_for(key)
        ));
    }
    for key in DEFAULTS_KEYS {
        ok(&format!(
            "{HEAD}  a: {{command: x}}\ndefaults: {{{key}: {}}}\n",
            value_for(key)
        ));
    }
    for key in SERVER_KEYS {
        let transport = match *key {
            "command" | "url" => "",
            "headers" => "url: http://h, ",
            _ => "command: x, ",
        };
        ok(&format!(
            "{HEAD}  a: {{{transport}{key}: {}}}\n",
            value_for(key)
        ));
    }
    for key in STDIO_ONLY_KEYS {
        assert_eq!(
            one_error(&format!(
                "{HEAD}  a: {{url: http://h, {key}: {}}}\n",
                value_for(key)
            )),
            format!("3:22: servers.a.{key}: `{key}` only applies to stdio servers (`command`)")
        );
    }
    for key in RESTART_KEYS {
        ok(&format!(
            "{HEAD}  a: {{command: x, restart: {{{key}: {}}}}}\n",
            value_for(key)
        ));
    }
    for key in BACKOFF_KEYS {
        ok(&format!(
            "{HEAD}  a: {{command: x, restart: {{backoff: {{{key}: {}}}}}}}\n",
            value_for(key)
        ));
    }
    for key in HEALTH_KEYS {
        let interval = if *key == "interval" {
            ""
        } else {
            "interval: 1m, "
        };
        ok(&format!(
            "{HEAD}  a: {{command: x, health: {{{interval}{key}: {}}}}}\n",
            value_for(key)
        ));
    }
}

#[test]
fn resolved_output_shows_policies_and_loads_back_the_same() {
    let fleet = ok("version: 1
defaults:
  restart: {policy: on-failure, backoff: {initial: 1s}}
  health: {interval: 30s}
  idle_timeout: 10m
servers:
  a: {command: x}
  b:
    command: y
    restart: {policy: always, max_restarts: 1, window: 90s}
    health: none
    idle_timeout: none
");
    let json = fleet.resolved_json();
    assert_eq!(
        json["servers"][0]["restart"],
        serde_json::json!({
            "policy": "on-failure",
            "backoff": {"initial": "1s", "max": "30s"},
            "max_restarts": 5,
            "window": "1m",
        })
    );
    assert_eq!(
        json["servers"][0]["health"],
        serde_json::json!({"interval": "30s", "timeout": "5s", "failures": 3})
    );
    assert_eq!(json["servers"][0]["idle_timeout"], "10m");
    assert_eq!(json["servers"][1]["restart"]["policy"], "always");
    assert_eq!(json["servers"][1]["restart"]["window"], "90s");
    assert_eq!(json["servers"][1]["health"], serde_json::Value::Null);
    assert_eq!(json["servers"][1]["idle_timeout"], "none");

    let yaml = fleet.resolved_yaml();
    assert!(yaml.contains("policy: on-failure"), "{yaml}");
    assert!(yaml.contains("health: none"), "{yaml}");
    let again = load_str(&yaml, &fleet_path(), &env).unwrap();
    for (a, b) in again.servers.iter().zip(&fleet.servers) {
        assert_eq!(a.restart, b.restart, "{yaml}");
        assert_eq!(a.health, b.health, "{yaml}");
        assert_eq!(a.idle_timeout, b.idle_timeout, "{yaml}");
    }
}
