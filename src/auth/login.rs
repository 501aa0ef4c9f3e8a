//! `mcpfleet login`: the authorization code flow with PKCE (RFC 7636) and a
//! loopback redirect (RFC 8252) for one remote server, made by rmcp's `auth`
//! module (discovery, registration, the authorization URL, the code exchange
//! with its state and issuer checks); here are the loopback listener, the
//! browser, the deadline, and the token file.

use std::time::{Duration, Instant};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    CredentialStore, InMemoryCredentialStore,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::config::OAuthSpec;

use super::keeper::{AS_TIMEOUT, now_secs};
use super::store::{ClientRecord, ClientSource, Grant, TokenStore};

/// The longest request head read from the browser.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How long one connection to the loopback listener may take to send its head.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The client name registered with an authorization server.
const CLIENT_NAME: &str = "mcpfleet";

/// How a login went wrong, each with what to do.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(
        "cannot listen for the redirect on 127.0.0.1:{port}: {why}; free the port or set \
         another `redirect_port`"
    )]
    PortTaken { port: u16, why: String },
    #[error("the authorization was denied ({error}{}); run `mcpfleet login {server}` again to retry", .description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Denied {
        server: String,
        error: String,
        description: Option<String>,
    },
    #[error(
        "the redirect carried a `state` that this login did not send; it was refused (another \
         login, an old tab, or a forged request): run `mcpfleet login {server}` again"
    )]
    WrongState { server: String },
    #[error("no redirect came within {}s; run `mcpfleet login {server}` again (`--timeout` waits longer)", .waited.as_secs())]
    Timeout { server: String, waited: Duration },
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Store(#[from] super::StoreError),
}

impl LoginError {
    /// The `kind` of the failure in JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            LoginError::PortTaken { .. } => "port_taken",
            LoginError::Denied { .. } => "auth_denied",
            LoginError::WrongState { .. } => "auth_wrong_state",
            LoginError::Timeout { .. } => "timeout",
            LoginError::Unavailable(_) => "auth_unavailable",
            LoginError::Store(_) => "internal",
        }
    }
}

/// What a login obtained, without a token.
#[derive(Debug, Clone)]
pub struct LoginOutcome {
    pub issuer: Option<String>,
    pub resource: String,
    pub scopes: Vec<String>,
    /// Seconds since the epoch.
    pub expires_at: Option<u64>,
    pub refresh: bool,
}

/// How to reach the person who authorizes.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// Print the URL only; never start a browser.
    pub no_browser: bool,
    /// The longest wait for the redirect.
    pub timeout: Duration,
}

fn unavailable(e: &AuthError, secrets: &[String]) -> LoginError {
    LoginError::Unavailable(crate::process::redact::redact(&e.to_string(), secrets))
}

/// Authorizes mcpfleet for `url` as `spec` says, and keeps the grant in
/// `store`.
pub async fn login(
    store: &TokenStore,
    url: &str,
    spec: &OAuthSpec,
    options: &LoginOptions,
) -> Result<LoginOutcome, LoginError> {
    let server = store.server().to_owned();
    let secrets: Vec<String> = spec.client_secret.iter().map(|s| s.value.clone()).collect();
    let port = spec.redirect_port.unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| LoginError::PortTaken {
            port,
            why: e.to_string(),
        })?;
    let port = listener.local_addr().map_err(|e| LoginError::PortTaken {
        port,
        why: e.to_string(),
    })?;
    let redirect_uri = format!("http://127.0.0.1:{}/callback", port.port());

    // The server's own challenge names its metadata and the scope it wants.
    let challenge = challenge_of(url).await;
    let kept = store.read()?;
    let mut scopes = spec.scopes.clone();
    // A step-up asks for what was granted and what the server wants on top
    // (the union: a narrower grant would lose what worked).
    let grant = kept.as_ref().and_then(|a| a.grant_for(url)).map(|(_, g)| g);
    if let Some((granted, step_up)) = grant.and_then(|g| {
        g.last_challenge
            .as_ref()
            .filter(|c| c.error.as_deref() != Some("invalid_grant"))
            .and_then(|c| c.scope.clone())
            .map(|s| (g.credentials.granted_scopes.clone(), s))
    }) {
        let wanted = granted.iter().map(String::as_str).chain(step_up.split_whitespace());
        for scope in wanted.collect::<Vec<_>>() {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_owned());
            }
        }
    }

    let mut manager = AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(|e| unavailable(&e, &secrets))?;
    let memory = InMemoryCredentialStore::new();
    manager.set_credential_store(memory.clone());
    let resolution = tokio::time::timeout(
        AS_TIMEOUT,
        manager.resolve_metadata_from_challenge(challenge.as_deref()),
    )
    .await
    .map_err(|_| LoginError::Unavailable("the server's authorization metadata did not come in time".into()))?
    .map_err(|e| unavailable(&e, &secrets))?;
    let metadata = resolution.metadata;
    if let (Some(expected), found) = (&spec.issuer, &metadata.issuer)
        && found.as_deref().map(|f| f.trim_end_matches('/')) != Some(expected.trim_end_matches('/'))
    {
        return Err(LoginError::Unavailable(format!(
            "the server names the authorization server {}, not the `issuer: {expected}` its \
             client is registered with; a client is never presented to another one",
            found.as_deref().unwrap_or("(none)")
        )));
    }
    let mut offered = metadata.clone();
    if !spec.offline_access
        && let Some(scopes) = offered.scopes_supported.as_mut()
    {
        // `offline_access: false`: not asked for, as if it were not offered.
        scopes.retain(|s| s != "offline_access");
    }
    manager.set_metadata(offered);

    let mut request = AuthorizationRequest::new(redirect_uri.clone()).with_client_name(CLIENT_NAME);
    if scopes.is_empty() {
        request = request.with_initial_scope_selection();
    } else {
        request = request.with_scopes(scopes.clone());
    }
    if let Some(challenge) = &challenge {
        request = request.with_challenge(challenge.clone());
    }
    let mut source = ClientSource::Registered;
    let mut registered_secret = None;
    let metadata_documents = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    if let Some(id) = &spec.client_id {
        request = request.with_preregistered_client(id.value.clone());
        source = ClientSource::Preregistered;
        if let Some(secret) = &spec.client_secret {
            request = request.with_client_secret(secret.value.clone());
        }
    } else if let (Some(document), true) = (&spec.client_metadata_url, metadata_documents) {
        request = request.with_client_metadata_url(document.clone());
    } else {
        // Dynamic registration (RFC 7591), made here so that a secret it
        // gives is kept for the refreshes to come.
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let registered = tokio::time::timeout(
            AS_TIMEOUT,
            manager.register_client(CLIENT_NAME, &redirect_uri, &scope_refs),
        )
        .await
        .map_err(|_| LoginError::Unavailable("the registration endpoint did not answer in time".into()))?
        .map_err(|e| {
            LoginError::Unavailable(format!(
                "{}; where the authorization server registers no clients, add the `client_id` \
                 of an application registered with it (and its `client_secret: ${{env:NAME}}`) \
                 to the server's `auth: {{oauth: ...}}`",
                crate::process::redact::redact(&e.to_string(), &secrets)
            ))
        })?;
        request = request.with_preregistered_client(registered.client_id.clone());
        if let Some(secret) = registered.client_secret {
            request = request.with_client_secret(secret.clone());
            registered_secret = Some(secret);
        }
    }
    let session = tokio::time::timeout(AS_TIMEOUT, AuthorizationSession::new(manager, request))
        .await
        .map_err(|_| LoginError::Unavailable("the authorization server did not answer in time".into()))?
        .map_err(|(_, e)| unavailable(&e, &secrets))?;
    let auth_url = session.get_authorization_url().to_owned();
    let query = |key: &str| {
        url::Url::parse(&auth_url).ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.into_owned())
        })
    };
    let state = query("state").unwrap_or_default();
    let resource = query("resource").unwrap_or_else(|| url.to_owned());
    let requested: Vec<String> = query("scope")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();

    eprintln!("open this URL to authorize {server}: {auth_url}");
    if !options.no_browser {
        open_browser(&auth_url);
    }
    let callback = wait_for_redirect(&listener, &state, &server, options.timeout).await?;
    let exchanged = tokio::time::timeout(
        AS_TIMEOUT,
        session.handle_callback_with_issuer(&callback.code, &state, callback.issuer.as_deref()),
    )
    .await
    .map_err(|_| LoginError::Unavailable("the token endpoint did not answer in time".into()))?;
    exchanged.map_err(|e| {
        let mut all = secrets.clone();
        all.push(callback.code.clone());
        unavailable(&e, &all)
    })?;
    let credentials = memory
        .load()
        .await
        .ok()
        .flatten()
        .ok_or_else(|| LoginError::Unavailable("the code exchange left no token".into()))?;
    if credentials.client_id == spec.client_metadata_url.clone().unwrap_or_default() {
        source = ClientSource::MetadataDocument;
    }

    let lock = store.lock(Duration::from_secs(30)).await?;
    let mut auth = store.read()?.unwrap_or_default();
    if let Some(issuer) = &metadata.issuer {
        auth.clients.insert(
            issuer.clone(),
            ClientRecord {
                client_id: credentials.client_id.clone(),
                client_secret: registered_secret,
                source,
                redirect_uri: Some(redirect_uri),
                registered_at: now_secs(),
            },
        );
    }
    // A grant is kept for one URL: one obtained before for this URL under
    // another resource name goes.
    auth.grants.retain(|_, g| g.url != url);
    let grant = Grant {
        url: url.to_owned(),
        metadata: metadata.clone(),
        credentials,
        requested_scopes: requested,
        last_challenge: None,
        upgrade_attempts: 0,
    };
    let (_, expires_at) = super::keeper::access_of(&grant).unwrap_or_default();
    let outcome = LoginOutcome {
        issuer: metadata.issuer.clone(),
        resource: resource.clone(),
        scopes: grant.credentials.granted_scopes.clone(),
        expires_at,
        refresh: super::keeper::can_refresh(&grant),
    };
    auth.grants.insert(resource, grant);
    store.write(&lock, &auth)?;
    Ok(outcome)
}

/// The `WWW-Authenticate` of the server's answer to an unauthorized request,
/// if it asks for a bearer token: `server/discover` first (a server may let
/// `initialize` through without a token and challenge everything after it),
/// then `initialize`.
async fn challenge_of(url: &str) -> Option<String> {
    let client = reqwest::Client::builder().timeout(AS_TIMEOUT).build().ok()?;
    let client_info = serde_json::json!({"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")});
    let probes = [
        (
            "2026-07-28",
            serde_json::json!({
                "jsonrpc": "2.0",
                "id": 0,
                "method": "server/discover",
                "params": {"_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": client_info,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }},
            }),
        ),
        (
            "2025-11-25",
            serde_json::json!({
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": client_info,
                },
            }),
        ),
    ];
    for (version, body) in probes {
        let Ok(response) = client
            .post(url)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header("MCP-Protocol-Version", version)
            .json(&body)
            .send()
            .await
        else {
            continue;
        };
        if response.status() != http::StatusCode::UNAUTHORIZED {
            continue;
        }
        if let Some(challenge) = response
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
        {
            return Some(challenge.to_owned());
        }
    }
    None
}

/// Starts the user's browser on `url` (`$BROWSER`, else `xdg-open`), without
/// waiting for it; the URL is printed either way.
fn open_browser(url: &str) {
    let program = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "xdg-open".into());
    let child = tokio::process::Command::new(&program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match child {
        // The browser is the user's: it is reaped when it exits, never ended.
        Ok(mut child) => {
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
        }
        Err(e) => tracing::debug!("no browser started ({program}: {e}); open the URL by hand"),
    }
}

/// What the redirect brought.
#[derive(Debug)]
struct Callback {
    code: String,
    issuer: Option<String>,
}

/// Answers connections to the loopback listener until one brings the
/// redirect of this login, or the deadline passes.
async fn wait_for_redirect(
    listener: &TcpListener,
    state: &str,
    server: &str,
    timeout: Duration,
) -> Result<Callback, LoginError> {
    let deadline = Instant::now() + timeout;
    loop {
        let accepted = tokio::time::timeout_at(deadline.into(), listener.accept()).await;
        let Ok(Ok((mut stream, _))) = accepted else {
            if accepted.is_err() {
                return Err(LoginError::Timeout {
                    server: server.to_owned(),
                    waited: timeout,
                });
            }
            continue;
        };
        let Ok(Some(head)) = tokio::time::timeout(REQUEST_HEAD_TIMEOUT, read_head(&mut stream)).await else {
            continue;
        };
        let Some(target) = head
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
        else {
            respond(&mut stream, 400, "mcpfleet expected the redirect of a login here.").await;
            continue;
        };
        let Ok(parsed) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
            respond(&mut stream, 400, "mcpfleet could not read this redirect.").await;
            continue;
        };
        if parsed.path() != "/callback" {
            respond(&mut stream, 404, "Not found.").await;
            continue;
        }
        let get = |key: &str| {
            parsed
                .query_pairs()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.into_owned())
        };
        if get("state").as_deref() != Some(state) {
            respond(&mut stream, 400, "This redirect does not belong to the login under way.").await;
            return Err(LoginError::WrongState {
                server: server.to_owned(),
            });
        }
        if let Some(error) = get("error") {
            respond(&mut stream, 200, &format!("The authorization of {server} was not given ({error}). You can close this tab.")).await;
            return Err(LoginError::Denied {
                server: server.to_owned(),
                error: crate::process::remote::text_excerpt(&error),
                description: get("error_description").map(|d| crate::process::remote::text_excerpt(&d)),
            });
        }
        let Some(code) = get("code") else {
            respond(&mut stream, 400, "The redirect carried no code.").await;
            return Err(LoginError::Unavailable("the redirect carried neither a code nor an error".into()));
        };
        respond(&mut stream, 200, &format!("mcpfleet is authorized for {server}. You can close this tab.")).await;
        return Ok(Callback {
            code,
            issuer: get("iss"),
        });
    }
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST_HEAD {
            return None;
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn respond(stream: &mut TcpStream, status: u16, text: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>mcpfleet</title><p>{}</p>\n",
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    );
    let answer = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REQUEST_HEAD_TIMEOUT, stream.write_all(answer.as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// Forgets the server's grants, first revoking them where the authorization
/// server offers revocation (RFC 7009). Returns whether anything was kept,
/// and what revocation could not do.
pub async fn logout(
    store: &TokenStore,
    client_secret: Option<&str>,
) -> Result<(bool, Vec<String>), LoginError> {
    let lock = store.lock(Duration::from_secs(30)).await?;
    let auth = match store.read() {
        Ok(Some(auth)) => auth,
        Ok(None) => return Ok((false, Vec::new())),
        // What cannot be read cannot be revoked, but it goes all the same.
        Err(e) => {
            store.remove(&lock)?;
            return Ok((
                true,
                vec![format!("{e}; it was removed without revoking its tokens")],
            ));
        }
    };
    let mut problems = Vec::new();
    let client = reqwest::Client::builder()
        .timeout(AS_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| LoginError::Unavailable(e.to_string()))?;
    for grant in auth.grants.values() {
        let Some(endpoint) = grant
            .metadata
            .additional_fields
            .get("revocation_endpoint")
            .and_then(|v| v.as_str())
        else {
            continue;
        };
        let Some(response) = grant.credentials.token_response.as_ref() else {
            continue;
        };
        use oauth2::TokenResponse;
        let mut tokens = vec![(response.access_token().secret().clone(), "access_token")];
        if let Some(refresh) = response.refresh_token() {
            // Revoking the refresh token first ends the grant as a whole.
            tokens.insert(0, (refresh.secret().clone(), "refresh_token"));
        }
        for (token, hint) in tokens {
            let body = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("token", &token)
                .append_pair("token_type_hint", hint)
                .append_pair("client_id", &grant.credentials.client_id)
                .finish();
            // A confidential client authenticates (RFC 7009 §2.1): the
            // fleet file's secret, else the one its registration gave.
            let secret = client_secret.map(str::to_owned).or_else(|| {
                grant
                    .metadata
                    .issuer
                    .as_ref()
                    .and_then(|i| auth.clients.get(i))
                    .filter(|c| c.client_id == grant.credentials.client_id)
                    .and_then(|c| c.client_secret.clone())
            });
            let mut request = client
                .post(endpoint)
                .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            if let Some(secret) = &secret {
                request = request.basic_auth(&grant.credentials.client_id, Some(secret));
            }
            let sent = request.body(body).send().await;
            match sent {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => problems.push(format!(
                    "revoking the {hint} answered HTTP {}; it may still be valid until it \
                     expires: revoke it where the server's account settings list it",
                    r.status().as_u16()
                )),
                Err(e) => problems.push(format!(
                    "revoking the {hint} failed: {}",
                    crate::process::redact::redact(&e.without_url().to_string(), &[token])
                )),
            }
        }
    }
    store.remove(&lock)?;
    Ok((true, problems))
}
