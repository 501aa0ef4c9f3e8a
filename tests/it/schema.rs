//! Keeps `config/mcpfleet.schema.json` in step with the fleet-file parser.
//!
//! The schema is what editors check a fleet file against; the parser is what
//! mcpfleet runs. These tests compare the schema with the key lists and
//! patterns the validator itself uses (`mcpfleet::config::SERVER_KEYS`, …),
//! run the schema's patterns (with the regex crate) against the parser on
//! tables of samples, and validate whole fleet files with both (the schema
//! through the jsonschema crate), so that a key or rule added to one and not
//! the other fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mcpfleet::config::{
    AUTH_KEYS, BACKOFF_KEYS, CLIENT_CREDENTIALS_KEYS, COORDINATION_KEYS, DEFAULTS_KEYS,
    DURATION_PATTERN, ENV_NAME_PATTERN, ETCD_TLS_KEYS, GATEWAY_KEYS, GATEWAY_TLS_KEYS,
    HEADER_NAME_PATTERN, HEALTH_KEYS, METRICS_KEYS, NAME_PATTERN, OAUTH_KEYS, PLACEMENT_KEYS,
    REMOTE_ONLY_KEYS, RESTART_KEYS, RESTART_POLICIES, SERVER_KEYS, SIZE_PATTERN, STDIO_ONLY_KEYS,
    SUPERVISOR_KEYS, TIMEOUT_PATTERN, TOKEN_STORES, TOOLS_KEYS, TOP_KEYS, URL_PATTERN, load,
    load_str,
};
use serde_json::Value;

fn root_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn schema() -> Schema {
    let path = root_dir().join("config/mcpfleet.schema.json");
    let text = std::fs::read_to_string(&path).expect("read config/mcpfleet.schema.json");
    Schema {
        root: serde_json::from_str(&text).expect("the schema is valid JSON"),
    }
}

/// Every `${env:NAME}` is set, so that only the format decides.
fn any_env(_: &str) -> Option<String> {
    Some("value".to_string())
}

/// A fleet file path in a directory that exists, so that `cwd: .` is valid.
fn scratch_path() -> PathBuf {
    std::env::temp_dir().join("mcpfleet-schema-test.yaml")
}

fn parser_accepts(text: &str) -> bool {
    load_str(text, &scratch_path(), &any_env).is_ok()
}

fn set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

// --- the schema, navigated -------------------------------------------------

struct Schema {
    root: Value,
}

impl Schema {
    /// `node`, or what its `$ref` points to.
    fn resolve<'a>(&'a self, node: &'a Value) -> &'a Value {
        match node.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let pointer = reference
                    .strip_prefix('#')
                    .unwrap_or_else(|| panic!("only local references: {reference}"));
                let target = self
                    .root
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling reference {reference}"));
                self.resolve(target)
            }
            None => node,
        }
    }

    /// The schemas that together describe the values of `node`: itself and,
    /// through `$ref`, `anyOf`, `allOf` and `oneOf`, the ones it combines.
    fn parts<'a>(&'a self, node: &'a Value) -> Vec<&'a Value> {
        let node = self.resolve(node);
        let mut parts = vec![node];
        for combinator in ["anyOf", "allOf", "oneOf"] {
            for sub in node
                .get(combinator)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                parts.extend(self.parts(sub));
            }
        }
        parts
    }

    /// Every key that `properties` allows in a mapping described by `node`.
    fn keys(&self, node: &Value) -> BTreeSet<String> {
        self.parts(node)
            .into_iter()
            .filter_map(|part| part.get("properties").and_then(Value::as_object))
            .flat_map(|props| props.keys().cloned())
            .collect()
    }

    /// The schema of `key` in a mapping described by `node`.
    fn property<'a>(&'a self, node: &'a Value, key: &str) -> &'a Value {
        self.parts(node)
            .into_iter()
            .find_map(|part| part.get("properties").and_then(|p| p.get(key)))
            .unwrap_or_else(|| panic!("the schema has no property `{key}` here"))
    }

    /// Walks a path of property names from the root.
    fn at(&self, path: &[&str]) -> &Value {
        path.iter()
            .fold(&self.root, |node, key| self.property(node, key))
    }

    /// The schema of one server, `$ref` resolved.
    fn server_def(&self) -> &Value {
        self.resolve(self.server())
    }

    /// The schema of one server.
    fn server(&self) -> &Value {
        let servers = self.at(&["servers"]);
        let patterns = servers["patternProperties"]
            .as_object()
            .expect("servers has patternProperties");
        assert_eq!(patterns.len(), 1, "one pattern for server names");
        patterns.values().next().unwrap()
    }

    /// The `pattern` of a string schema, through references.
    fn pattern(&self, node: &Value) -> String {
        self.parts(node)
            .into_iter()
            .find_map(|part| part.get("pattern").and_then(Value::as_str))
            .unwrap_or_else(|| panic!("no pattern in {node}"))
            .to_string()
    }
}

// --- (a) keys ---------------------------------------------------------------

#[test]
fn the_schema_allows_exactly_the_keys_the_parser_accepts() {
    let s = schema();
    let server = s.server();
    let defaults = s.at(&["defaults"]);
    let cases: Vec<(&str, &Value, &[&str])> = vec![
        ("top level", &s.root, TOP_KEYS),
        ("defaults", defaults, DEFAULTS_KEYS),
        ("a server", server, SERVER_KEYS),
        ("restart", s.property(server, "restart"), RESTART_KEYS),
        (
            "restart.backoff",
            s.property(s.property(server, "restart"), "backoff"),
            BACKOFF_KEYS,
        ),
        ("health", s.property(server, "health"), HEALTH_KEYS),
        ("gateway", s.at(&["gateway"]), GATEWAY_KEYS),
        (
            "gateway.tls",
            s.property(s.at(&["gateway"]), "tls"),
            GATEWAY_TLS_KEYS,
        ),
        ("metrics", s.at(&["metrics"]), METRICS_KEYS),
        ("supervisor", s.at(&["supervisor"]), SUPERVISOR_KEYS),
        ("coordination", s.at(&["coordination"]), COORDINATION_KEYS),
        (
            "coordination.tls",
            s.property(s.at(&["coordination"]), "tls"),
            ETCD_TLS_KEYS,
        ),
        ("tools", s.property(server, "tools"), TOOLS_KEYS),
        ("placement", s.property(server, "placement"), PLACEMENT_KEYS),
        ("auth", s.property(server, "auth"), AUTH_KEYS),
        (
            "auth.oauth",
            s.property(s.property(server, "auth"), "oauth"),
            OAUTH_KEYS,
        ),
        (
            "auth.client_credentials",
            s.property(s.property(server, "auth"), "client_credentials"),
            CLIENT_CREDENTIALS_KEYS,
        ),
        (
            "defaults.restart",
            s.property(defaults, "restart"),
            RESTART_KEYS,
        ),
        (
            "defaults.restart.backoff",
            s.property(s.property(defaults, "restart"), "backoff"),
            BACKOFF_KEYS,
        ),
        (
            "defaults.health",
            s.property(defaults, "health"),
            HEALTH_KEYS,
        ),
    ];
    for (what, node, parser_keys) in cases {
        assert_eq!(
            s.keys(node),
            set(parser_keys),
            "keys of {what}: schema (left) and parser (right) differ"
        );
    }
    assert_eq!(
        s.property(s.property(server, "restart"), "policy")["enum"],
        serde_json::json!(RESTART_POLICIES),
    );
    assert_eq!(
        s.resolve(s.property(s.property(s.property(server, "auth"), "oauth"), "store"))["enum"],
        serde_json::json!(TOKEN_STORES),
    );
}

/// The keys that the `not` of a `oneOf` branch of a server forbids, by the key
/// that branch requires.
fn transports(s: &Schema) -> BTreeMap<String, BTreeSet<String>> {
    let branches = s.server_def()["oneOf"]
        .as_array()
        .expect("a server is one of the transports");
    branches
        .iter()
        .map(|branch| {
            let required = branch["required"].as_array().expect("a required key");
            assert_eq!(required.len(), 1, "{branch}");
            let forbidden = branch["not"]["anyOf"]
                .as_array()
                .expect("the keys of the other transport")
                .iter()
                .map(|sub| {
                    let keys = sub["required"].as_array().unwrap();
                    assert_eq!(keys.len(), 1, "{sub}");
                    keys[0].as_str().unwrap().to_string()
                })
                .collect();
            (required[0].as_str().unwrap().to_string(), forbidden)
        })
        .collect()
}

#[test]
fn the_schema_says_which_keys_go_with_which_transport() {
    let s = schema();
    let transports = transports(&s);
    let mut stdio_only = set(STDIO_ONLY_KEYS);
    stdio_only.insert("command".into());
    let mut remote_only = set(REMOTE_ONLY_KEYS);
    remote_only.insert("url".into());
    assert_eq!(
        transports,
        BTreeMap::from([
            ("command".to_string(), remote_only),
            ("url".to_string(), stdio_only),
        ])
    );
    // Every key the branches name is a server key.
    for keys in transports.values() {
        assert!(keys.is_subset(&set(SERVER_KEYS)), "{keys:?}");
    }
    // And the parser agrees, key by key.
    let value_for = |key: &str| match key {
        "args" => "[]",
        "env" | "headers" => "{}",
        "cwd" => ".",
        "shell" => "false",
        "command" => "x",
        "auth" => "oauth",
        _ => "http://h",
    };
    for (required, forbidden) in &transports {
        let base = format!("{required}: {}", value_for(required));
        let alone = format!("version: 1\nservers: {{a: {{{base}}}}}\n");
        assert!(parser_accepts(&alone), "{alone}");
        assert_eq!(s.validate_yaml(&alone), Ok(()), "{alone}");
        for key in forbidden {
            let text = format!(
                "version: 1\nservers: {{a: {{{base}, {key}: {}}}}}\n",
                value_for(key)
            );
            assert!(!parser_accepts(&text), "the parser accepts:\n{text}");
            assert!(
                s.validate_yaml(&text).is_err(),
                "the schema accepts:\n{text}"
            );
        }
    }
}

#[test]
fn every_mapping_is_closed_and_every_key_documented() {
    fn walk(node: &Value, path: &str, problems: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(props) = map.get("properties").and_then(Value::as_object) {
                    if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                        problems.push(format!("{path}: additionalProperties is not false"));
                    }
                    for (key, prop) in props {
                        if prop.get("description").and_then(Value::as_str).is_none() {
                            problems.push(format!("{path}.properties.{key}: no description"));
                        }
                    }
                }
                for (key, child) in map {
                    walk(child, &format!("{path}/{key}"), problems);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}/{i}"), problems);
                }
            }
            _ => {}
        }
    }
    let s = schema();
    assert_eq!(
        s.root["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let mut problems = Vec::new();
    walk(&s.root, "#", &mut problems);
    assert!(problems.is_empty(), "{problems:#?}");
    for (name, def) in s.root["$defs"].as_object().unwrap() {
        assert!(
            def.get("description").is_some(),
            "$defs/{name}: no description"
        );
    }
}

// --- (c) patterns -------------------------------------------------------------

#[test]
fn the_schema_uses_the_parsers_patterns() {
    let s = schema();
    let server = s.server();
    assert_eq!(s.pattern(s.at(&["name"])), NAME_PATTERN);
    let servers = s.at(&["servers"]);
    assert!(servers["patternProperties"].get(NAME_PATTERN).is_some());
    assert_eq!(
        s.pattern(&s.property(server, "env")["propertyNames"]),
        ENV_NAME_PATTERN
    );
    assert_eq!(
        s.pattern(&s.property(server, "headers")["propertyNames"]),
        HEADER_NAME_PATTERN
    );
    assert_eq!(s.pattern(s.property(server, "url")), URL_PATTERN);
    for key in ["connect_timeout", "cleanup_timeout", "idle_timeout"] {
        assert_eq!(s.pattern(s.property(server, key)), TIMEOUT_PATTERN, "{key}");
        let defaults = s.at(&["defaults"]);
        assert_eq!(
            s.pattern(s.property(defaults, key)),
            TIMEOUT_PATTERN,
            "{key}"
        );
    }
    assert_eq!(
        s.pattern(s.property(s.at(&["supervisor"]), "max_file_size")),
        SIZE_PATTERN
    );
    let restart = s.property(server, "restart");
    let backoff = s.property(restart, "backoff");
    let health = s.property(server, "health");
    for (key, node) in [
        ("window", s.property(restart, "window")),
        ("initial", s.property(backoff, "initial")),
        ("max", s.property(backoff, "max")),
        ("interval", s.property(health, "interval")),
        ("timeout", s.property(health, "timeout")),
    ] {
        assert_eq!(s.pattern(node), DURATION_PATTERN, "{key}");
    }
}

/// A YAML double-quoted scalar: JSON string syntax is valid YAML.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

#[test]
fn name_pattern_agrees_with_the_parser() {
    let a63 = "a".repeat(63);
    let a64 = "a".repeat(64);
    let samples = [
        "a",
        "0",
        "007",
        "everything",
        "my-server_2",
        "a-",
        "a_",
        "0-0",
        &a63, // valid
        "",
        "-a",
        "_a",
        "A",
        "aB",
        "a.b",
        "a/b",
        "a b",
        "é",
        "a\u{e9}",
        "..",
        &a64,
        " a",
        "a\n",
    ];
    for sample in samples {
        let text = format!(
            "version: 1\nservers:\n  {}: {{command: x}}\n",
            quoted(sample)
        );
        let parser = parser_accepts(&text);
        assert_eq!(
            regex_search(NAME_PATTERN, sample),
            parser,
            "server name {sample:?}"
        );
        let text = format!(
            "version: 1\nname: {}\nservers: {{a: {{command: x}}}}\n",
            quoted(sample)
        );
        assert_eq!(parser_accepts(&text), parser, "fleet name {sample:?}");
    }
}

#[test]
fn duration_patterns_agree_with_the_parser() {
    let samples = [
        "1ms",
        "500ms",
        "10s",
        "2m",
        "1h",
        "007s",
        "90s",
        "3600000ms",
        "none", // some valid
        "",
        "0s",
        "00ms",
        "0",
        "10",
        "1.5s",
        "-1s",
        "+1s",
        "10S",
        "10 s",
        " 10s",
        "s",
        "ms",
        "None",
        "NONE",
        "1d",
        "10sec",
        "1hh",
        "1m1s",
        "0x10s",
        "1_000ms",
        "١s",
    ];
    // Beyond what a pattern can count: the parser refuses values too large for
    // its clock, the pattern lets them through.
    let too_large = ["99999999999999999999h", "18446744073709551616ms"];
    for sample in samples.iter().chain(&too_large) {
        let as_timeout = parser_accepts(&format!(
            "version: 1\nservers:\n  a: {{command: x, connect_timeout: {}}}\n",
            quoted(sample)
        ));
        let as_idle = parser_accepts(&format!(
            "version: 1\nservers:\n  a: {{command: x, idle_timeout: {}}}\n",
            quoted(sample)
        ));
        let as_period = parser_accepts(&format!(
            "version: 1\nservers:\n  a: {{command: x, restart: {{window: {}}}}}\n",
            quoted(sample)
        ));
        assert_eq!(as_timeout, as_idle, "{sample:?}");
        let (timeout_expected, period_expected) = match too_large.contains(sample) {
            true => (false, false),
            false => (
                regex_search(TIMEOUT_PATTERN, sample),
                regex_search(DURATION_PATTERN, sample),
            ),
        };
        assert_eq!(as_timeout, timeout_expected, "timeout {sample:?}");
        assert_eq!(as_period, period_expected, "duration {sample:?}");
        if too_large.contains(sample) {
            assert!(regex_search(DURATION_PATTERN, sample), "{sample:?}");
        }
    }
}

#[test]
fn size_pattern_agrees_with_the_parser() {
    let samples = [
        "1KiB", "16MiB", "1GiB", "4096B", "0016MiB", "20000B", // valid
        "", "16", "0KiB", "00B", "16M", "16mb", "16MB", "16 MiB", "1.5MiB", "-1KiB", "+1KiB",
        "16kib", "KiB", "1TiB", "1KiB ", "١KiB",
    ];
    // Beyond what a pattern can count: the parser refuses a size too large for
    // 64 bits and one under 1 KiB; the pattern lets them through.
    let refused = ["99999999999GiB", "18446744073709551616B", "512B", "1B"];
    for sample in samples.iter().chain(&refused) {
        let accepted = parser_accepts(&format!(
            "version: 1\nservers: {{a: {{command: x}}}}\nsupervisor: {{max_file_size: {}}}\n",
            quoted(sample)
        ));
        let expected = !refused.contains(sample) && regex_search(SIZE_PATTERN, sample);
        assert_eq!(accepted, expected, "{sample:?}");
        if refused.contains(sample) {
            assert!(regex_search(SIZE_PATTERN, sample), "{sample:?}");
        }
    }
}

#[test]
fn env_name_pattern_agrees_with_the_parser() {
    for sample in [
        "A", "_", "_1", "a1", "PATH", "API_KEY", // valid
        "", "1A", "A-B", "A.B", "A B", "É", "A=B",
    ] {
        let text = format!(
            "version: 1\nservers:\n  a: {{command: x, env: {{{}: v}}}}\n",
            quoted(sample)
        );
        assert_eq!(
            regex_search(ENV_NAME_PATTERN, sample),
            parser_accepts(&text),
            "{sample:?}"
        );
    }
}

#[test]
fn header_name_pattern_agrees_with_the_parser() {
    for sample in [
        "Authorization",
        "x-api-key",
        "X_Y.Z",
        "0",
        "!#$%&'*+-.^_`|~", // valid
        "",
        "X Y",
        "X:Y",
        " X",
        "X\t",
        "(x)",
        "a,b",
        "a/b",
        "a@b",
        "a;b",
        "a=b",
        "[a]",
        "{a}",
        "a\"b",
        "a\\b",
        "é",
        "X\u{7f}",
    ] {
        let text = format!(
            "version: 1\nservers:\n  a: {{url: http://h, headers: {{{}: v}}}}\n",
            quoted(sample)
        );
        assert_eq!(
            regex_search(HEADER_NAME_PATTERN, sample),
            parser_accepts(&text),
            "{sample:?}"
        );
    }
}

#[test]
fn url_pattern_agrees_with_the_parser() {
    let env = |name: &str| match name {
        "URL" => Some("https://mcp.example.org".to_string()),
        "PORT" => Some("8080".to_string()),
        _ => Some("value".to_string()),
    };
    let accepts = |url: &str| {
        let text = format!("version: 1\nservers:\n  a: {{url: {}}}\n", quoted(url));
        load_str(&text, &scratch_path(), &env).is_ok()
    };
    // The pattern and the parser agree.
    for sample in [
        "http://h",
        "https://h",
        "http://127.0.0.1:3001/mcp",
        "https://[::1]:8443/mcp?a=b#c",
        "http://user:pw@h/",
        "${env:URL}",
        "${env:URL}/mcp",
        "http://h:${env:PORT}/mcp", // valid
        "",
        "h",
        "localhost:3001/mcp",
        "ftp://h",
        "ws://h",
        "HTTP://h",
        "http:/h",
        "http:h",
        " http://h",
        "${URL}",
        "$URL",
        "${env:1X}/mcp",
    ] {
        assert_eq!(
            regex_search(URL_PATTERN, sample),
            accepts(sample),
            "{sample:?}"
        );
    }
    // Only the parser checks the rest, on the expanded value.
    for sample in [
        "http://",
        "https:///mcp",
        "http://:80",
        "http://h:0",
        "http://h:65536",
        "http://h:x",
        "http://h/a b",
        "http://h\n",
        "http://a<b>/",
        "http://[::1/",
        "http://[h]/",
        "${env:X}",
        "${env:URL}:0",
    ] {
        assert!(regex_search(URL_PATTERN, sample), "{sample:?}");
        assert!(!accepts(sample), "{sample:?}");
    }
}

// --- (b) example files and whole documents ------------------------------------

#[test]
fn every_example_fleet_file_loads_and_matches_the_schema() {
    let s = schema();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root_dir().join("config"))
        .expect("read config/")
        .map(|e| e.expect("read config/").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    examples.sort();
    assert!(!examples.is_empty(), "no example fleet files in config/");
    for path in examples {
        if let Err(e) = load(&path, &any_env) {
            panic!("{} does not load:\n{e}", path.display());
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = s.validate_yaml(&text) {
            panic!("{} does not match the schema: {e}", path.display());
        }
    }
}

/// Documents on which the schema and the parser must agree. The parser also
/// checks what a schema cannot (see [`only_the_parser_refuses`]).
const BOTH_ACCEPT: &[&str] = &[
    "version: 1\nservers: {a: {command: x}}\n",
    "version: '1'\nname: demo\ndefaults:\nservers:\n  a:\n    command: x\n    args:\n    env:\n",
    "version: 1
name: demo
defaults:
  connect_timeout: 30s
  cleanup_timeout: none
  restart:
    policy: on-failure
    backoff: {initial: 1s, max: 1m}
    max_restarts: 0
    window: 10m
  health: {interval: 30s, timeout: 2s, failures: 1}
  idle_timeout: 1h
servers:
  a:
    command: npx
    args: [-y, pkg, 8080, 1.10, true]
    env: {A: b, N: 3, _X: \"${env:HOME}\"}
    cwd: .
    shell: false
    enabled: true
    connect_timeout: 1m
    cleanup_timeout: 500ms
    restart: {policy: always, backoff: {max: 2m}}
    health: {failures: 4294967295}
    idle_timeout: none
  b-2_x:
    command: y
    restart:
    health: none
  remote:
    url: http://127.0.0.1:3001/mcp
    headers: {Authorization: \"Bearer ${env:TOKEN}\", X-N: 1, x-b: true}
    enabled: false
    connect_timeout: 1m
    cleanup_timeout: none
    restart: {policy: on-failure}
    health: {interval: 30s}
    idle_timeout: 10m
",
    "version: 1\nservers: {a: {url: 'http://h/mcp'}}\n",
    "version: 1\nsupervisor: {max_file_size: 64KiB, keep_files: 20}\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor:\nservers: {a: {command: x}}\n",
    "version: 1\nservers: {a: {url: 'https://[::1]:8443', headers: }}\n",
    "version: 1\nservers: {a: {url: 'https://${env:HOST}/mcp', headers: {}}}\n",
    // Beside the scratch path, written by the test.
    "version: 1\ndefaults: {env_file: mcpfleet-schema-test.env}\nservers: {a: {command: x, env_file: [mcpfleet-schema-test.env, ./mcpfleet-schema-test.env]}, b: {command: x, env_file: []}}\n",
];

const BOTH_REFUSE: &[&str] = &[
    "servers: {a: {command: x}}\n",
    "version: 1\n",
    "version: 2\nservers: {a: {command: x}}\n",
    "version: 1\nservers: {}\n",
    "version: 1\nname: Demo\nservers: {a: {command: x}}\n",
    "version: 1\nservers: {A: {command: x}}\n",
    "version: 1\nservers: {a: {command: x}}\nextra: 1\n",
    "version: 1\nservers: {a: {command: x}}\nrestart: {policy: always}\n",
    "version: 1\nservers: {a: {args: [x]}}\n",
    "version: 1\nservers: {a: {command: ''}}\n",
    "version: 1\nservers: {a: {command: x, comand: y}}\n",
    "version: 1\nservers: {a: {command: x, headers: {}}}\n",
    "version: 1\nservers: {a: {command: x, url: 'http://h'}}\n",
    "version: 1\nservers: {a: {headers: {A: b}}}\n",
    "version: 1\nservers: {a: {enabled: true}}\n",
    "version: 1\nservers: {a: {url: 'http://h', args: []}}\n",
    "version: 1\nservers: {a: {url: 'http://h', env: {}}}\n",
    "version: 1\nservers: {a: {url: 'http://h', env_file: x.env}}\n",
    "version: 1\nservers: {a: {command: x, env_file: ''}}\n",
    "version: 1\nservers: {a: {command: x, env_file: {a: b}}}\n",
    "version: 1\nservers: {a: {command: x, env_file: [[a]]}}\n",
    "version: 1\ndefaults: {env_file: ''}\nservers: {a: {command: x}}\n",
    "version: 1\nservers: {a: {url: 'http://h', cwd: .}}\n",
    "version: 1\nservers: {a: {url: 'http://h', shell: false}}\n",
    "version: 1\nservers: {a: {url: 'ftp://h'}}\n",
    "version: 1\nservers: {a: {url: 'h:80/mcp'}}\n",
    "version: 1\nservers: {a: {url: ''}}\n",
    "version: 1\nservers: {a: {url: 8080}}\n",
    "version: 1\nservers: {a: {url: [http://h]}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: [A: b]}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: 'A: b'}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: {X Y: b}}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: {A: [b]}}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: {A: }}}\n",
    "version: 1\nservers: {a: {command: x, args: x}}\n",
    "version: 1\nservers: {a: {command: x, args: [[x]]}}\n",
    "version: 1\nservers: {a: {command: x, env: [A=1]}}\n",
    "version: 1\nservers: {a: {command: x, env: {1A: x}}}\n",
    "version: 1\nservers: {a: {command: x, env: {A: [x]}}}\n",
    "version: 1\nservers: {a: {command: x, cwd: ''}}\n",
    "version: 1\nservers: {a: {command: x, shell: 1}}\n",
    "version: 1\nservers: {a: {command: x, enabled: 'yes'}}\n",
    "version: 1\nservers: {a: {command: x, connect_timeout: 10}}\n",
    "version: 1\nservers: {a: {command: x, cleanup_timeout: 0s}}\n",
    "version: 1\nservers: {a: {command: x, idle_timeout: 5 m}}\n",
    "version: 1\nservers: {a: {command: x, restart: always}}\n",
    "version: 1\nservers: {a: {command: x, restart: {policy: sometimes}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {policy: always, jitter: 1}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {max_restarts: -1}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {max_restarts: 1.5}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {max_restarts: '3'}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {max_restarts: 4294967296}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {window: none}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {backoff: 1s}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {backoff: {initial: 0s}}}}\n",
    "version: 1\nservers: {a: {command: x, restart: {backoff: {min: 1s}}}}\n",
    "version: 1\nservers: {a: {command: x, health: 30s}}\n",
    "version: 1\nservers: {a: {command: x, health: {interval: none}}}\n",
    "version: 1\nservers: {a: {command: x, health: {interval: 1m, failures: 0}}}\n",
    "version: 1\nservers: {a: {command: x, health: {interval: 1m, retries: 2}}}\n",
    "version: 1\ndefaults: {command: x}\nservers: {a: {command: x}}\n",
    "version: 1\ndefaults: {enabled: false}\nservers: {a: {command: x}}\n",
    "version: 1\ndefaults: {health: {failures: 2}}\nservers: {a: {command: x}}\n",
    "version: 1\ndefaults: []\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor: {keep_files: 0}\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor: {keep_files: 21}\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor: {keep_files: 1.5}\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor: {max_file_size: 16}\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor: {max_size: 1MiB}\nservers: {a: {command: x}}\n",
    "version: 1\nsupervisor: 16MiB\nservers: {a: {command: x}}\n",
];

/// Rules between values, and facts of the machine: the schema's descriptions
/// state them, but only the parser checks them.
const ONLY_THE_PARSER_REFUSES: &[&str] = &[
    "version: 1\nservers: {a: {command: x, restart: {backoff: {initial: 1m, max: 1s}}}}\n",
    "version: 1\nservers: {a: {command: x, health: {interval: 5s, timeout: 5s}}}\n",
    "version: 1\nservers: {a: {command: x, health: {failures: 2}}}\n",
    "version: 1\nservers: {a: {command: x, cwd: /nonexistent/mcpfleet/dir}}\n",
    "version: 1\nservers: {a: {command: x, env_file: /nonexistent/mcpfleet/.env}}\n",
    "version: 1\ndefaults: {env_file: [/nonexistent/mcpfleet/.env]}\nservers: {a: {command: x}}\n",
    "version: 1\nservers: {a: {command: x, connect_timeout: 99999999999999999999h}}\n",
    "version: 1\nservers: {a: {command: x}, a: {command: y}}\n",
    "version: 1\nsupervisor: {max_file_size: 512B}\nservers: {a: {command: x}}\n",
    "version: 1\nservers: {a: {url: 'http://'}}\n",
    "version: 1\nservers: {a: {url: 'http://h:0/mcp'}}\n",
    "version: 1\nservers: {a: {url: 'http://h/a b'}}\n",
    "version: 1\nservers: {a: {url: '${env:NOT_A_URL}'}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: {A: b, a: c}}}\n",
    "version: 1\nservers: {a: {url: 'http://h', headers: {A: \"b\\r\\nC: d\"}}}\n",
];

#[test]
fn the_schema_and_the_parser_agree_on_whole_documents() {
    let s = schema();
    std::fs::write(
        scratch_path().with_file_name("mcpfleet-schema-test.env"),
        "A=1\n",
    )
    .unwrap();
    for text in BOTH_ACCEPT {
        if let Err(e) = load_str(text, &scratch_path(), &any_env) {
            panic!("the parser refuses:\n{text}\n{e}");
        }
        if let Err(e) = s.validate_yaml(text) {
            panic!("the schema refuses:\n{text}\n{e}");
        }
    }
    for text in BOTH_REFUSE {
        assert!(!parser_accepts(text), "the parser accepts:\n{text}");
        assert!(
            s.validate_yaml(text).is_err(),
            "the schema accepts:\n{text}"
        );
    }
}

#[test]
fn only_the_parser_refuses() {
    let s = schema();
    for text in ONLY_THE_PARSER_REFUSES {
        assert!(!parser_accepts(text), "the parser accepts:\n{text}");
        // Duplicate keys never reach the schema: a YAML library keeps one.
        if let Ok(value) = serde_yaml::from_str::<Value>(text) {
            assert_eq!(s.validate(&value), Ok(()), "{text}");
        }
    }
}

// --- the schema's validation, by the jsonschema crate ----------------------------

impl Schema {
    fn validate_yaml(&self, text: &str) -> Result<(), String> {
        let value: Value = serde_yaml::from_str(text).map_err(|e| format!("YAML: {e}"))?;
        self.validate(&value)
    }

    /// As an editor validates a fleet file: the draft the schema names, with
    /// `$ref`s inside the schema only.
    fn validate(&self, value: &Value) -> Result<(), String> {
        let validator = jsonschema::draft202012::new(&self.root)
            .unwrap_or_else(|e| panic!("the schema is not a valid JSON Schema: {e}"));
        validator.validate(value).map_err(|e| {
            let path = e.instance_path().as_str();
            let at = if path.is_empty() { "(top level)" } else { path };
            format!("{at}: {e}")
        })
    }
}

#[test]
fn the_test_validator_itself() {
    let s = Schema {
        root: serde_json::json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1}},
            "patternProperties": {"^x": {"enum": ["a", "b"]}},
            "additionalProperties": false,
            "required": ["n"],
        }),
    };
    assert_eq!(s.validate(&serde_json::json!({"n": 1, "xy": "a"})), Ok(()));
    for bad in [
        serde_json::json!({"n": 0}),
        serde_json::json!({"n": 1.5}),
        serde_json::json!({"n": 1, "xy": "c"}),
        serde_json::json!({"n": 1, "y": 1}),
        serde_json::json!({"xy": "a"}),
        serde_json::json!([]),
    ] {
        assert!(s.validate(&bad).is_err(), "{bad}");
    }
    let one_of = Schema {
        root: serde_json::json!({
            "oneOf": [
                {"required": ["a"], "not": {"required": ["b"]}},
                {"required": ["b"]},
            ],
        }),
    };
    assert_eq!(one_of.validate(&serde_json::json!({"a": 1})), Ok(()));
    assert_eq!(one_of.validate(&serde_json::json!({"b": 1})), Ok(()));
    for bad in [serde_json::json!({}), serde_json::json!({"c": 1})] {
        assert!(one_of.validate(&bad).is_err(), "{bad}");
    }
    // Both branches match: `oneOf` wants exactly one.
    let both = Schema {
        root: serde_json::json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
    };
    assert!(both.validate(&serde_json::json!({"a": 1, "b": 2})).is_err());
    assert_eq!(both.validate(&serde_json::json!({"a": 1})), Ok(()));
}

/// Whether `pattern` matches anywhere in `text`, as JSON Schema's `pattern` does.
/// The schema's patterns use only what ECMA-262 and the regex crate read alike.
fn regex_search(pattern: &str, text: &str) -> bool {
    regex::Regex::new(pattern)
        .unwrap_or_else(|e| panic!("pattern {pattern:?}: {e}"))
        .is_match(text)
}

#[test]
fn the_test_matcher_itself() {
    assert!(regex_search("^a(b|cd)*e$", "abcdbe"));
    assert!(!regex_search("^a(b|cd)*e$", "abce"));
    assert!(regex_search("b", "abc"), "unanchored patterns search");
    assert!(!regex_search("^b", "abc"));
    assert!(regex_search("^[a-c_-]{2,3}$", "a-_"));
    assert!(!regex_search("^[a-c_-]{2,3}$", "a"));
    assert!(!regex_search("^[a-c_-]{2,3}$", "abca"));
    assert!(regex_search("^x{2}$", "xx") && !regex_search("^x{2}$", "xxx"));
    assert!(regex_search("^x{2,}$", "xxxx") && !regex_search("^x{2,}$", "x"));
    assert!(regex_search("^[^0-9]+$", "ab") && !regex_search("^[^0-9]+$", "a1"));
    assert!(regex_search("^\\d?\\.$", "1.") && regex_search("^\\d?\\.$", "."));
    assert!(regex_search("^(ms|s|m|h)$", "ms") && !regex_search("^(ms|s|m|h)$", "hs"));
    assert!(regex_search("^a.c$", "abc") && !regex_search("^a.c$", "ac"));
    assert!(regex_search("^$", "") && !regex_search("^$", "a"));
}
