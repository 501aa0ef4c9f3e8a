//! `auth:` of a remote server: its forms, its options, secrets only from the
//! environment, and what a wrong one reports.

use super::*;


fn auth_of(text: &str) -> AuthSpec {
    let fleet = ok(text);
    *http(&fleet.servers[0]).auth.clone().expect("an auth")
}

#[test]
fn oauth_as_a_word_or_with_options() {
    let AuthSpec::OAuth(bare) = auth_of(&format!("{HEAD}  a:\n    url: http://h\n    auth: oauth\n"))
    else {
        panic!("oauth")
    };
    assert_eq!(
        bare,
        OAuthSpec {
            offline_access: true,
            ..OAuthSpec::default()
        }
    );
    let AuthSpec::OAuth(full) = auth_of(&format!(
        "{HEAD}  a:\n    url: http://h\n    auth:\n      oauth:\n        scopes: [repo, \"read:org\"]\n        client_id: my-app\n        client_secret: ${{env:TOKEN}}\n        issuer: https://github.com/login/oauth\n        redirect_port: 8976\n        refresh_token: ${{env:API_KEY}}\n        offline_access: false\n        store: keyring\n"
    )) else {
        panic!("oauth")
    };
    assert_eq!(full.scopes, ["repo", "read:org"]);
    assert_eq!(full.client_id.as_ref().unwrap().value, "my-app");
    assert_eq!(full.client_secret.as_ref().unwrap().value, SECRET);
    assert_eq!(full.client_secret.as_ref().unwrap().display(), "${env:TOKEN}");
    assert_eq!(full.issuer.as_deref(), Some("https://github.com/login/oauth"));
    assert_eq!(full.redirect_port, Some(8976));
    assert_eq!(full.refresh_token.as_ref().unwrap().value, SECRET);
    assert!(!full.offline_access);
    assert_eq!(full.store, TokenBackend::Keyring);
    // Scopes as OAuth writes them, one string.
    let AuthSpec::OAuth(spaced) = auth_of(&format!(
        "{HEAD}  a:\n    url: http://h\n    auth: {{oauth: {{scopes: \"a b  c\"}}}}\n"
    )) else {
        panic!("oauth")
    };
    assert_eq!(spaced.scopes, ["a", "b", "c"]);
}

#[test]
fn client_credentials_needs_its_client() {
    let AuthSpec::ClientCredentials(cc) = auth_of(&format!(
        "{HEAD}  a:\n    url: http://h\n    auth:\n      client_credentials: {{client_id: ci, client_secret: \"${{env:TOKEN}}\", scopes: [mcp]}}\n"
    )) else {
        panic!("client credentials")
    };
    assert_eq!(cc.client_id.value, "ci");
    assert_eq!(cc.client_secret.value, SECRET);
    assert_eq!(cc.scopes, ["mcp"]);
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    url: http://h\n    auth:\n      client_credentials: {{client_id: ci}}\n"
        )),
        ["6:7: servers.a.auth.client_credentials: `client_credentials` needs `client_secret`"]
    );
}

#[test]
fn a_wrong_auth_says_where_and_never_quotes_a_secret() {
    let text = format!(
        "{HEAD}  a:\n    url: http://h\n    auth:\n      oauth:\n        client_secret: {SECRET}\n        refresh_token: \"x ${{env:TOKEN}}\"\n        redirect_port: 70000\n        store: vault\n        scope: [a]\n        client_metadata_url: http://h/doc\n  b:\n    command: x\n    auth: oauth\n  c:\n    url: http://h\n    auth: oauht\n  d:\n    url: http://h\n    auth: {{oauth: null, client_credentials: null}}\n"
    );
    let found = errors(&text);
    assert_eq!(
        found,
        [
            "7:9: servers.a.auth.oauth.client_secret: `client_secret` belongs to a pre-registered client: add its `client_id`",
            "7:24: servers.a.auth.oauth.client_secret: `client_secret` is a secret and must come from the environment: write `client_secret: ${env:NAME}`",
            "8:24: servers.a.auth.oauth.refresh_token: `refresh_token` is a secret and must come from the environment: write `refresh_token: ${env:NAME}`",
            "9:24: servers.a.auth.oauth.redirect_port: `70000` is not a port; `redirect_port` is a number from 1 to 65535",
            "10:16: servers.a.auth.oauth.store: unknown token store `vault`; use file or keyring",
            "11:9: servers.a.auth.oauth.scope: unknown key `scope`; did you mean `scopes`?",
            "12:30: servers.a.auth.oauth.client_metadata_url: `client_metadata_url` must be an `https://` URL with a path, where the client's metadata document is served; `http://h/doc` is not",
            "15:5: servers.b.auth: `auth` only applies to remote servers (`url`)",
            "18:11: servers.c.auth: unknown authorization `oauht`; write `auth: oauth` or `auth: {client_credentials: {...}}`",
            "21:11: servers.d.auth: `auth:` has both `oauth` and `client_credentials`; a server is authorized one way",
            "21:25: servers.d.auth.client_credentials: expected a mapping with `client_id` and `client_secret`, found null",
        ]
    );
    assert!(!found.join("\n").contains(SECRET));
}

#[test]
fn the_recorded_copy_keeps_secrets_as_written() {
    let fleet = ok(&format!(
        "{HEAD}  a:\n    url: http://h\n    auth: {{oauth: {{client_id: app, client_secret: \"${{env:TOKEN}}\"}}}}\n"
    ));
    let shown = fleet.resolved_json().to_string() + &fleet.resolved_yaml();
    assert!(shown.contains("${env:TOKEN}"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
}
