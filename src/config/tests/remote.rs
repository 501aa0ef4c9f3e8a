//! Remote servers: `url`, `headers`, which keys apply to them, and secrets in
//! them.

use super::*;

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
                        expanded: vec![SECRET.into()],
                    }
                ),
                ("X-Api-Version".to_string(), Text::literal("2")),
                ("x-empty".to_string(), Text::literal("")),
                ("!#$%&'*+-.^_`|~".to_string(), Text::literal("tab\tinside")),
            ],
            auth: None,
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
