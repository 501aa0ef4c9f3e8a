//! The gateway's keys: `gateway:` at the top level, a server's `prefix:` and
//! `tools:`.

use super::*;

#[test]
fn a_gateway_block_and_what_servers_expose() {
    let fleet = ok(r#"
version: 1
gateway:
  listen: 127.0.0.1:7100
  token: "${env:TOKEN}-long-enough"
  origins: [https://app.example.com:443]
  page_size: 50
  meta: true
  max_connections: 100
  max_sessions: 10
metrics:
  listen: 127.0.0.1:9477
  max_connections: 8
servers:
  time:
    command: x
    prefix: clock
    tools: { allow: ["get_*"], deny: ["*_secret"] }
  plain:
    command: x
    prefix:
  default:
    command: x
"#);
    let g = &fleet.gateway;
    assert_eq!(g.listen, Some("127.0.0.1:7100".parse().unwrap()));
    assert_eq!(
        g.token.as_ref().map(|t| t.value.as_str()),
        Some(format!("{SECRET}-long-enough").as_str())
    );
    // Shown as written: the token never appears in `validate` output.
    assert_eq!(
        g.token.as_ref().map(|t| t.display()),
        Some("${env:TOKEN}-long-enough")
    );
    assert_eq!(g.origins, ["https://app.example.com:443"]);
    assert_eq!(g.page_size, Some(50));
    assert!(g.meta);
    assert_eq!((g.max_connections, g.max_sessions), (Some(100), Some(10)));
    assert_eq!(fleet.metrics.max_connections, Some(8));
    let time = &fleet.servers[0].expose;
    assert_eq!(time.prefix.as_deref(), Some("clock"));
    assert_eq!(time.allow, ["get_*"]);
    assert_eq!(time.deny, ["*_secret"]);
    assert_eq!(fleet.servers[1].expose.prefix.as_deref(), Some(""));
    assert_eq!(fleet.servers[2].expose, ExposeSpec::default());
    let plain = ok(&format!("{HEAD}  a:\n    command: x\n")).gateway;
    assert!(plain.listen.is_none());
    assert!(!plain.meta, "results pass through unchanged unless asked");
    assert_eq!((plain.max_connections, plain.max_sessions), (None, None));
}

#[test]
fn bad_gateway_values_are_reported_where_they_are() {
    assert_eq!(
        one_error("version: 1\ngateway:\n  listen: localhost\nservers:\n  a:\n    command: x\n"),
        "3:11: gateway.listen: `localhost` is not an address and port to listen on, like 127.0.0.1:7077 or [::1]:7077"
    );
    assert_eq!(
        one_error("version: 1\ngateway:\n  page_size: 0\nservers:\n  a:\n    command: x\n"),
        "3:14: gateway.page_size: `page_size` must be a whole number from 1 to 10000, not `0`"
    );
    assert_eq!(
        one_error("version: 1\ngateway:\n  max_connections: 0\nservers:\n  a:\n    command: x\n"),
        "3:20: gateway.max_connections: `max_connections` must be a whole number from 1 to 65536, not `0`"
    );
    assert_eq!(
        one_error("version: 1\nmetrics:\n  max_connections: many\nservers:\n  a:\n    command: x\n"),
        "3:20: metrics.max_connections: expected a whole number from 1 to 65536, found a string"
    );
    assert!(
        one_error("version: 1\ngateway:\n  max_sessions: 100000\nservers:\n  a:\n    command: x\n")
            .starts_with("3:17: gateway.max_sessions: `max_sessions` must be")
    );
    let meta = one_error("version: 1\ngateway:\n  meta: yes please\nservers:\n  a:\n    command: x\n");
    assert!(meta.starts_with("3:9: gateway.meta:"), "{meta}");
    assert!(meta.contains("boolean"), "{meta}");
    assert!(
        one_error("version: 1\ngateway:\n  token: short\nservers:\n  a:\n    command: x\n")
            .contains("at least 16 characters")
    );
    let misspelled =
        one_error("version: 1\ngateway:\n  bind: 1.2.3.4:5\nservers:\n  a:\n    command: x\n");
    assert!(misspelled.starts_with("3:3: gateway.bind:"), "{misspelled}");
    assert!(misspelled.contains("`listen`"), "{misspelled}");
}

#[test]
fn bad_prefixes_and_tool_filters_are_reported() {
    let e = one_error(&format!("{HEAD}  a:\n    command: x\n    prefix: a.b\n"));
    assert!(
        e.starts_with("5:13: servers.a.prefix: invalid prefix `a.b`"),
        "{e}"
    );
    let e = one_error(&format!(
        "{HEAD}  a:\n    command: x\n    tools: {{ allow: get_* }}\n"
    ));
    assert!(e.contains("servers.a.tools.allow"), "{e}");
    let e = one_error(&format!(
        "{HEAD}  a:\n    command: x\n    tools: {{ exclude: [x] }}\n"
    ));
    assert!(e.contains("`deny`"), "{e}");
}

#[test]
fn gateway_tls_needs_a_certificate_and_its_key_that_can_be_read() {
    let tls = |rest: &str| errors(&format!("{HEAD}  a: {{command: x}}\ngateway:\n  tls: {rest}\n"));
    assert_eq!(
        tls("{cert: /nonexistent/g.pem}"),
        [
            "5:8: gateway.tls: `tls` needs `cert` and `key`: the certificate the gateway serves HTTPS with, and its key",
            "5:15: gateway.tls.cert: cannot read `/nonexistent/g.pem`: No such file or directory (os error 2)",
        ]
    );
    // Named as found: relative to the fleet file's folder.
    let not_pem = tls("{cert: Cargo.toml, key: Cargo.toml}");
    assert_eq!(not_pem.len(), 2, "{not_pem:#?}");
    for (error, at) in not_pem.iter().zip(["5:15: gateway.tls.cert: `", "5:32: gateway.tls.key: `"]) {
        assert!(error.starts_with(at), "{error}");
        assert!(error.ends_with("/Cargo.toml` is not a PEM file (no `-----BEGIN`)"), "{error}");
    }
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("g.pem");
    std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").unwrap();
    let text = format!(
        "{HEAD}  a: {{command: x}}\ngateway:\n  tls: {{cert: {p}, key: {p}, ca: {p}}}\n",
        p = pem.display()
    );
    let fleet = ok(&text);
    let tls = fleet.gateway.tls.expect("tls");
    assert_eq!((tls.cert.as_path(), tls.key.as_path()), (pem.as_path(), pem.as_path()));
    assert_eq!(tls.ca.as_deref(), Some(pem.as_path()));
}
