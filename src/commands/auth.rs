//! `login` and `logout`: the OAuth grants of remote servers with `auth:`,
//! obtained by a person and forgotten on request (docs/design.md,
//! "Authorization"). Neither needs the supervisor: the token file is shared,
//! and a running server's keeper reads it again before its next request.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};

use super::cli_error::CliError;
use super::global::Global;
use super::target::Target;
use crate::auth::{LoginOptions, TokenStore};
use crate::cli::{LoginArgs, LogoutArgs};
use crate::config::{AuthSpec, ServerSpec, Timeout, Transport};
use crate::host::{self, Unnamed};
use crate::output::exit::Code;
use crate::output::report::{AuthStatus, Format, Report, SCHEMA_VERSION, json_line, write_stdout};

/// The default wait for a person to authorize.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

fn auth_of(spec: &ServerSpec) -> Option<(&str, &AuthSpec)> {
    match &spec.transport {
        Transport::Http(http) => http.auth.as_deref().map(|a| (http.url.value.as_str(), a)),
        Transport::Stdio(_) => None,
    }
}

fn selected<'f>(t: &'f Target, names: &[String]) -> Result<Vec<&'f ServerSpec>, CliError> {
    host::select(&t.fleet, names, Unnamed::All).map_err(|e| CliError::unknown_servers(&t.fleet, &e))
}

/// A time as RFC 3339; one past 9999-12-31 (an authorization server's "never")
/// is shown as that day's end.
fn rfc3339(secs: u64) -> String {
    const LAST: u64 = 253_402_300_799;
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs.min(LAST))).to_string()
}

fn print(g: &Global, command: &str, code: Code, servers: Vec<Value>, text: &[String]) -> Result<Code, CliError> {
    let out = match g.output {
        Format::Text => text.iter().map(|l| format!("{l}\n")).collect::<String>(),
        _ => json_line(&json!({
            "schema_version": SCHEMA_VERSION,
            "command": command,
            "ok": code == Code::Ok,
            "exit_code": code.as_i32(),
            "servers": servers,
        })),
    };
    write_stdout(&out).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    Ok(code)
}

/// `mcpfleet login [SERVER...]`: each named server (or every one with
/// `auth: oauth`) in turn, each with its own deadline.
pub(crate) async fn login(t: Target, args: &LoginArgs, g: &Global) -> Result<Code, CliError> {
    let specs = selected(&t, &args.servers)?;
    let mut chosen = Vec::new();
    for spec in specs {
        match auth_of(spec) {
            Some((url, AuthSpec::OAuth(oauth))) => chosen.push((spec, url, oauth)),
            Some((_, AuthSpec::ClientCredentials(_))) if !args.servers.is_empty() => {
                return Err(CliError::Usage(format!(
                    "{} uses `client_credentials`, which needs no login: its authority \
                     obtains the token itself",
                    spec.name
                )));
            }
            None if !args.servers.is_empty() => {
                return Err(CliError::Usage(format!(
                    "{} has no `auth: oauth` in {}: add it to the server to log in",
                    spec.name,
                    t.fleet.file.display()
                )));
            }
            _ => {}
        }
    }
    if chosen.is_empty() {
        return Err(CliError::Usage(format!(
            "no server in {} has `auth: oauth`",
            t.fleet.file.display()
        )));
    }
    let timeout = match args.timeout {
        Some(Timeout::After(d)) => d,
        Some(Timeout::Never) => Duration::from_secs(24 * 3600),
        None => LOGIN_TIMEOUT,
    };
    let options = LoginOptions {
        no_browser: args.no_browser,
        timeout,
    };
    let mut code = Code::Ok;
    let mut docs = Vec::new();
    let mut lines = Vec::new();
    for (spec, url, oauth) in chosen {
        let store = TokenStore::for_spec(t.dir.root(), &spec.name, &AuthSpec::OAuth(oauth.clone()));
        match crate::auth::login(&store, url, oauth, &options).await {
            Ok(done) => {
                let until = done.expires_at.map(rfc3339);
                lines.push(format!(
                    "{}: authorized{}{}; refresh {}",
                    spec.name,
                    if done.scopes.is_empty() {
                        String::new()
                    } else {
                        format!(" for {}", done.scopes.join(" "))
                    },
                    until.as_deref().map(|u| format!(", valid until {u}")).unwrap_or_default(),
                    if done.refresh { "possible" } else { "not possible" },
                ));
                docs.push(json!({
                    "name": spec.name,
                    "ok": true,
                    "issuer": done.issuer,
                    "resource": done.resource,
                    "scopes": done.scopes,
                    "expires_at": until,
                    "refresh": done.refresh,
                }));
            }
            Err(e) => {
                let this = match &e {
                    crate::auth::LoginError::PortTaken { .. } => Code::Usage,
                    crate::auth::LoginError::Timeout { .. } => Code::ConnectTimeout,
                    crate::auth::LoginError::Store(_) => Code::Internal,
                    _ => Code::StartFailed,
                };
                if code == Code::Ok {
                    code = this;
                }
                eprintln!("mcpfleet login: {}: {e}", spec.name);
                docs.push(json!({
                    "name": spec.name,
                    "ok": false,
                    "kind": e.kind(),
                    "message": e.to_string(),
                }));
            }
        }
    }
    print(g, "login", code, docs, &lines)
}

/// `mcpfleet logout SERVER...`: forgets each server's grants, revoking them
/// first where the authorization server offers revocation.
pub(crate) async fn logout(t: Target, args: &LogoutArgs, g: &Global) -> Result<Code, CliError> {
    let specs = selected(&t, &args.servers)?;
    let mut docs = Vec::new();
    let mut lines = Vec::new();
    let mut code = Code::Ok;
    for spec in specs {
        let (store, secret) = match auth_of(spec) {
            Some((_, auth)) => (
                TokenStore::for_spec(t.dir.root(), &spec.name, auth),
                match auth {
                    AuthSpec::OAuth(o) => o.client_secret.as_ref().map(|s| s.value.as_str()),
                    AuthSpec::ClientCredentials(c) => Some(c.client_secret.value.as_str()),
                },
            ),
            None => (TokenStore::new(t.dir.root(), &spec.name), None),
        };
        match crate::auth::logout(&store, secret).await {
            Ok((kept, problems)) => {
                for p in &problems {
                    eprintln!("mcpfleet logout: {}: {p}", spec.name);
                }
                lines.push(format!(
                    "{}: {}",
                    spec.name,
                    if kept { "tokens forgotten" } else { "no tokens were kept" }
                ));
                docs.push(json!({
                    "name": spec.name,
                    "ok": true,
                    "forgotten": kept,
                    "revocation_problems": problems,
                }));
            }
            Err(e) => {
                code = Code::Internal;
                eprintln!("mcpfleet logout: {}: {e}", spec.name);
                docs.push(json!({"name": spec.name, "ok": false, "message": e.to_string()}));
            }
        }
    }
    print(g, "logout", code, docs, &lines)
}

/// Where the authorization of `spec`, a server with `auth:`, stands: read
/// from its token file, never showing a token.
fn auth_status(t: &Target, spec: &ServerSpec) -> Option<AuthStatus> {
    use crate::auth::keeper::{access_of, can_refresh, now_secs};
    let (url, auth) = auth_of(spec)?;
    let needs = |reason: &str| AuthStatus {
        state: "needs_login".into(),
        expires_at: None,
        refresh: false,
        scopes: Vec::new(),
        reason: Some(reason.into()),
    };
    let store = TokenStore::for_spec(t.dir.root(), &spec.name, auth);
    let kept = match store.read() {
        Ok(kept) => kept,
        Err(e) => return Some(needs(&e.to_string())),
    };
    let seeded = matches!(auth, AuthSpec::OAuth(o) if o.refresh_token.is_some());
    let Some((_, grant)) = kept.as_ref().and_then(|k| k.grant_for(url)) else {
        return Some(match auth {
            AuthSpec::OAuth(_) if !seeded => needs("no authorization is kept"),
            _ => AuthStatus {
                state: "none".into(),
                expires_at: None,
                refresh: false,
                scopes: Vec::new(),
                reason: None,
            },
        });
    };
    let refresh = can_refresh(grant);
    let scopes = grant.credentials.granted_scopes.clone();
    if let Some(c) = &grant.last_challenge {
        match c.error.as_deref() {
            Some("invalid_grant") => {
                return Some(needs("the authorization server refused to refresh the grant"));
            }
            Some("insufficient_scope") => {
                return Some(needs(&format!(
                    "the server requires scope `{}`",
                    c.scope.as_deref().unwrap_or("(unnamed)")
                )));
            }
            _ => {}
        }
    }
    let (_, expires) = access_of(grant)?;
    let expired = expires.is_some_and(|at| at <= now_secs());
    Some(match (expired, refresh || matches!(auth, AuthSpec::ClientCredentials(_))) {
        (false, _) => AuthStatus {
            state: "valid".into(),
            expires_at: expires.map(rfc3339),
            refresh,
            scopes,
            reason: None,
        },
        (true, true) => AuthStatus {
            state: "expired".into(),
            expires_at: expires.map(rfc3339),
            refresh,
            scopes,
            reason: None,
        },
        (true, false) => needs("the access token expired and no refresh token was granted"),
    })
}

/// Adds to `status`'s report where each server's authorization stands. An
/// enabled server that needs a login makes the exit code 3, as a failed one
/// does: a script learns it before a call fails.
pub(crate) fn with_auth_statuses(mut report: Report, t: &Target) -> Report {
    for server in &mut report.servers {
        let Some(spec) = t.fleet.server(&server.name) else {
            continue;
        };
        server.auth = auth_status(t, spec);
        if spec.enabled && server.auth.as_ref().is_some_and(|a| a.state == "needs_login") {
            let code = Code::from_i32(server.exit_code).max(Code::StartFailed);
            server.exit_code = code.as_i32();
            report.exit_code = Code::from_i32(report.exit_code).max(code).as_i32();
        }
    }
    report
}
