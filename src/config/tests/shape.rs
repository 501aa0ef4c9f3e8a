//! The shape of a fleet file: the keys of each level and their types, the two
//! transports, names, durations, defaults, and keys written in the wrong place.

use super::*;

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
                    template: Some("${env:API_KEY}".into()),
                    expanded: vec![SECRET.into()],
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

/// Every key of the public lists reaches a rule of its own: a listed key that
/// fell through to the catch-all would be reported as unknown.
#[test]
fn every_listed_key_is_handled() {
    // Beside the test fleet file, for `env_file`.
    let env_file = fleet_path().with_file_name("mcpfleet-config-test.env");
    std::fs::write(&env_file, "A=1\n").unwrap();
    let value_for = |key: &str| match key {
        "env_file" => "mcpfleet-config-test.env",
        "version" => "1",
        "name" => "demo",
        "defaults" | "env" | "restart" | "backoff" | "gateway" | "tools" | "supervisor"
        | "placement" => "{}",
        "max_file_size" => "1MiB",
        "keep_files" => "3",
        "prefix" => "pre",
        "servers" => "{a: {command: x}}",
        "command" => "x",
        "url" => "http://h",
        "headers" => "{X-A: b}",
        "auth" => "oauth",
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
    for key in SUPERVISOR_KEYS {
        ok(&format!(
            "{HEAD}  a: {{command: x}}\nsupervisor: {{{key}: {}}}\n",
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
            "headers" | "auth" => "url: http://h, ",
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
    for key in REMOTE_ONLY_KEYS {
        assert_eq!(
            one_error(&format!(
                "{HEAD}  a: {{command: x, {key}: {}}}\n",
                value_for(key)
            )),
            format!("3:19: servers.a.{key}: `{key}` only applies to remote servers (`url`)")
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
