//! The keeper of one server's tokens: the one place that hands out the bearer
//! token sent to the server, refreshes it (one refresh at a time, under the
//! token file's lock), and says when a person must log in again.
//!
//! A refresh is rmcp's (`AuthorizationManager::refresh_token`, which sends
//! `resource` and keeps a refresh token the answer does not rotate) over an
//! in-memory credential store loaded from the grant; what it yields is written
//! back to the token file under the lock before the new access token is used,
//! so a rotated refresh token is never lost (L15).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, CredentialStore,
    InMemoryCredentialStore, OAuthClientConfig, StoredCredentials,
};

use crate::config::{AuthSpec, OAuthSpec};

use super::store::{Challenge, ClientRecord, ClientSource, Grant, ServerAuth, TokenStore};

/// The longest wait for another holder of the token file's lock.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// The deadline of one request to the authorization server.
pub const AS_TIMEOUT: Duration = Duration::from_secs(15);
/// The token endpoint's errors that no retry cures (RFC 6749 §5.2, RFC 8707).
const REFUSALS: &[&str] = &[
    "invalid_client",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "invalid_target",
];
/// A token that expires within this is renewed before it is sent.
const EXPIRY_MARGIN_SECS: u64 = 30;

/// Why no usable token can be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailureKind {
    /// No grant, or one the authorization server no longer honours: a person
    /// must run `mcpfleet login NAME`.
    NeedsLogin,
    /// The server demands a scope the grant lacks (a step-up): `mcpfleet
    /// login NAME` asks for it.
    InsufficientScope { scope: Option<String> },
    /// The authorization server could not be reached or answered oddly; the
    /// grant may still be good.
    Unavailable,
}

/// Why no usable token can be had, in words that name the command to run and
/// never a token.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct AuthFailure {
    pub kind: AuthFailureKind,
    pub message: String,
}

/// The keeper of one server's tokens, shared by its authority and its HTTP
/// client. Its `Debug` shows no token.
pub struct Keeper {
    store: TokenStore,
    url: String,
    spec: AuthSpec,
    /// One renewal at a time in this process; the file's lock orders them
    /// with other processes.
    renewing: tokio::sync::Mutex<()>,
    /// The tokens handed out and held, for redaction.
    held: Mutex<Vec<String>>,
    /// The token handed out last and until when it is fresh: the token file
    /// (or the keyring) is read again only when it is not, or after the server
    /// refused it.
    current: Mutex<Option<(String, u64)>>,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("server", &self.store.server())
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Seconds since the epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The access token of `grant` and, if it says, when it expires (seconds
/// since the epoch).
pub(crate) fn access_of(grant: &Grant) -> Option<(String, Option<u64>)> {
    let response = grant.credentials.token_response.as_ref()?;
    let expires = match (response.expires_in(), grant.credentials.token_received_at) {
        (Some(lifetime), Some(at)) => Some(at.saturating_add(lifetime.as_secs())),
        _ => None,
    };
    Some((response.access_token().secret().to_owned(), expires))
}

/// Whether `grant` holds a refresh token.
pub(crate) fn can_refresh(grant: &Grant) -> bool {
    grant
        .credentials
        .token_response
        .as_ref()
        .is_some_and(|r| r.refresh_token().is_some())
}

/// The access token of `grant` and until when (seconds since the epoch) it
/// is good for more than the margin; `u64::MAX` when it gives no expiry.
fn usable(grant: &Grant) -> Option<(String, u64)> {
    let (token, expires) = access_of(grant)?;
    let lifetime = grant
        .credentials
        .token_response
        .as_ref()
        .and_then(|r| r.expires_in())
        .map_or(0, |d| d.as_secs());
    let margin = EXPIRY_MARGIN_SECS.min(lifetime / 2).max(1);
    Some((token, expires.map_or(u64::MAX, |at| at.saturating_sub(margin))))
}

/// The access token of `grant` while it is good for more than the margin.
fn fresh(grant: &Grant, now: u64) -> Option<String> {
    usable(grant).filter(|(_, until)| now <= *until).map(|(t, _)| t)
}

fn store_failure(e: super::StoreError) -> AuthFailure {
    AuthFailure {
        kind: AuthFailureKind::Unavailable,
        message: e.to_string(),
    }
}

impl Keeper {
    pub fn new(store: TokenStore, url: String, spec: AuthSpec) -> Arc<Keeper> {
        Arc::new(Keeper {
            store,
            url,
            spec,
            renewing: tokio::sync::Mutex::new(()),
            held: Mutex::new(Vec::new()),
            current: Mutex::new(None),
        })
    }

    fn name(&self) -> &str {
        self.store.server()
    }

    /// The name of the server whose tokens these are.
    pub fn server_name(&self) -> &str {
        self.store.server()
    }

    fn needs_login(&self, why: &str) -> AuthFailure {
        let name = self.name();
        AuthFailure {
            kind: AuthFailureKind::NeedsLogin,
            message: format!("{why}: run `mcpfleet login {name}`"),
        }
    }

    fn hold(&self, token: &str) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if !held.iter().any(|t| t == token) {
            held.push(token.to_owned());
        }
    }

    /// Hands out the access token of `grant`, kept as the current one.
    fn hand_out(&self, grant: &Grant) -> Option<String> {
        let (token, until) = usable(grant)?;
        self.hold(&token);
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some((token.clone(), until));
        Some(token)
    }

    /// What is kept, read off the runtime's threads: the desktop keyring may
    /// take its time (up to its bound) to answer.
    async fn read(&self) -> Result<Option<ServerAuth>, super::StoreError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.read())
            .await
            .unwrap_or_else(|e| {
                Err(super::StoreError::Keyring {
                    server: self.store.server().to_owned(),
                    why: format!("could not be read: {e}"),
                })
            })
    }

    fn forget_current(&self) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The access token to send now, renewed first when it is about to
    /// expire.
    pub async fn bearer(&self) -> Result<String, AuthFailure> {
        let cached = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((token, until)) = cached
            && now_secs() <= until
        {
            return Ok(token);
        }
        let auth = self.read().await.map_err(store_failure)?;
        let grant = auth.as_ref().and_then(|a| a.grant_for(&self.url));
        if let Some((_, g)) = grant
            && fresh(g, now_secs()).is_some()
            && let Some(token) = self.hand_out(g)
        {
            return Ok(token);
        }
        // Nothing to renew and nothing to start from: a person must log in.
        if grant.is_none() && matches!(self.spec, AuthSpec::OAuth(_)) && self.seed().is_none() {
            return Err(self.needs_login(&format!(
                "no authorization is kept for {}",
                self.name()
            )));
        }
        self.renew(None).await
    }

    /// The server refused `sent` with `challenge` (its `WWW-Authenticate`):
    /// the token to retry with once (refreshed, or renewed by another holder
    /// meanwhile), or why there is none.
    pub async fn refused(&self, sent: &str, challenge: Option<&str>) -> Result<String, AuthFailure> {
        self.forget_current();
        let params = challenge.map(parse_challenge).unwrap_or_default();
        if params.error.as_deref() == Some("insufficient_scope") {
            // A login since the token was handed out may have granted the
            // scope: its token is tried once.
            if let Ok(Some(auth)) = self.read().await
                && let Some((_, g)) = auth.grant_for(&self.url)
                && fresh(g, now_secs()).is_some_and(|t| t != sent)
                && let Some(token) = self.hand_out(g)
            {
                return Ok(token);
            }
            self.remember(&params).await;
            let scope = params.scope.clone();
            let name = self.name();
            return Err(AuthFailure {
                message: format!(
                    "the server requires scope `{}`, which the grant lacks: run `mcpfleet \
                     login {name}` to ask for it",
                    scope.as_deref().unwrap_or("(unnamed)")
                ),
                kind: AuthFailureKind::InsufficientScope { scope },
            });
        }
        let renewed = self.renew(Some(sent)).await;
        if renewed.is_err() && params.scope.is_some() {
            // The scope the server named is what the next login asks for.
            self.remember(&params).await;
        }
        renewed
    }

    /// Keeps what the server was last refused with, for the next login.
    async fn remember(&self, params: &ChallengeParams) {
        let Ok(lock) = self.store.lock(LOCK_WAIT).await else {
            return;
        };
        let Ok(Some(mut auth)) = self.read().await else {
            return;
        };
        let url = self.url.clone();
        if let Some(grant) = auth.grants.values_mut().find(|g| g.url == url) {
            grant.last_challenge = Some(Challenge {
                error: params.error.clone(),
                scope: params.scope.clone(),
                at: now_secs(),
            });
            if let Err(e) = self.store.write(&lock, &auth) {
                tracing::warn!(server = self.name(), "cannot keep the challenge: {e}");
            }
        }
    }

    /// Renews the access token under the lock: takes one that another holder
    /// renewed meanwhile (one that is not `refused`), else refreshes, else
    /// obtains one by the client-credentials grant or the seed refresh token.
    async fn renew(&self, refused: Option<&str>) -> Result<String, AuthFailure> {
        let Ok(_one) = tokio::time::timeout(LOCK_WAIT, self.renewing.lock()).await else {
            return Err(AuthFailure {
                kind: AuthFailureKind::Unavailable,
                message: format!(
                    "another renewal of the token took longer than {}s",
                    LOCK_WAIT.as_secs()
                ),
            });
        };
        let lock = self.store.lock(LOCK_WAIT).await.map_err(store_failure)?;
        let mut auth = self.read().await.map_err(store_failure)?.unwrap_or_default();
        let seed = self.seed();
        let seed_hash = seed
            .as_deref()
            .map(|s| format!("{:016x}", crate::hash::fnv1a(s.as_bytes())));
        let reseeded = seed_hash.is_some() && auth.seed != seed_hash;
        let found = auth
            .grant_for(&self.url)
            .map(|(resource, g)| (resource.to_owned(), g.clone()));
        match found {
            Some((resource, grant)) if !reseeded => {
                if fresh(&grant, now_secs()).is_some_and(|t| Some(t.as_str()) != refused)
                    && let Some(token) = self.hand_out(&grant)
                {
                    return Ok(token);
                }
                let client_credentials = matches!(self.spec, AuthSpec::ClientCredentials(_));
                if client_credentials && !can_refresh(&grant) {
                    return self.client_credentials(&lock, auth, Some(grant.metadata)).await;
                }
                // A grant the authorization server refused stays refused: no
                // request asks again until a login replaces it.
                if !client_credentials
                    && grant
                        .last_challenge
                        .as_ref()
                        .is_some_and(|c| c.error.as_deref() == Some("invalid_grant"))
                {
                    return Err(self.needs_login(
                        "the authorization server refused to refresh the grant (invalid_grant)",
                    ));
                }
                if !can_refresh(&grant) {
                    return Err(self.needs_login("the access token expired and no refresh token was granted"));
                }
                let credentials = self.refresh(&auth, &grant, &resource).await;
                let credentials = match credentials {
                    Ok(c) => c,
                    // A machine's grant is obtained again, never logged into.
                    Err(_) if client_credentials => {
                        auth.grants.retain(|_, g| g.url != self.url);
                        return self.client_credentials(&lock, auth, Some(grant.metadata)).await;
                    }
                    Err(e) => {
                        if e.kind == AuthFailureKind::NeedsLogin {
                            let mut marked = grant.clone();
                            marked.last_challenge = Some(Challenge {
                                error: Some("invalid_grant".into()),
                                scope: None,
                                at: now_secs(),
                            });
                            auth.grants.insert(resource, marked);
                            let _ = self.store.write(&lock, &auth);
                        }
                        return Err(e);
                    }
                };
                let token = self.keep(&lock, auth, resource, grant, credentials)?;
                Ok(token)
            }
            _ => match (&self.spec, seed) {
                (AuthSpec::ClientCredentials(_), _) => self.client_credentials(&lock, auth, None).await,
                (AuthSpec::OAuth(_), Some(seed)) => {
                    auth.seed = seed_hash;
                    self.seeded(&lock, auth, &seed).await
                }
                (AuthSpec::OAuth(_), None) => Err(self.needs_login(&format!(
                    "no authorization is kept for {}",
                    self.name()
                ))),
            },
        }
    }

    /// Writes the grant with its new credentials under the lock, and hands out
    /// the new access token only once it is written.
    fn keep(
        &self,
        lock: &super::StoreLock,
        mut auth: ServerAuth,
        resource: String,
        mut grant: Grant,
        credentials: StoredCredentials,
    ) -> Result<String, AuthFailure> {
        grant.credentials = credentials;
        grant.last_challenge = None;
        // One grant per URL: another one kept for it under another resource goes.
        auth.grants.retain(|r, g| g.url != grant.url || *r == resource);
        auth.grants.insert(resource, grant.clone());
        self.store.write(lock, &auth).map_err(store_failure)?;
        self.hand_out(&grant)
            .ok_or_else(|| self.needs_login("the authorization server answered without an access token"))
    }

    /// `refresh_token: ${env:}` of `auth: oauth`, when set.
    fn seed(&self) -> Option<String> {
        match &self.spec {
            AuthSpec::OAuth(o) => o.refresh_token.as_ref().map(|t| t.value.clone()),
            AuthSpec::ClientCredentials(_) => None,
        }
    }

    /// A manager for the token endpoint of `metadata`, with `resource` as what
    /// its requests name.
    async fn manager(&self, resource: &str) -> Result<AuthorizationManager, AuthFailure> {
        AuthorizationManager::new_allowing_private_addresses(resource)
            .await
            .map_err(|e| self.unavailable(&e))
    }

    fn unavailable(&self, e: &AuthError) -> AuthFailure {
        let message = crate::process::redact::redact(
            &format!("the authorization server could not be asked: {e}"),
            &self.secrets(),
        );
        AuthFailure {
            kind: AuthFailureKind::Unavailable,
            message,
        }
    }

    /// The client's id and secret for a grant of `issuer`.
    fn client_of(&self, auth: &ServerAuth, grant_client: &str, issuer: Option<&str>) -> OAuthClientConfig {
        let registered = issuer
            .and_then(|i| auth.clients.get(i))
            .filter(|c| c.client_id == grant_client);
        let secret = match &self.spec {
            AuthSpec::OAuth(o) if o.client_id.as_ref().is_some_and(|c| c.value == grant_client) => {
                o.client_secret.as_ref().map(|s| s.value.clone())
            }
            AuthSpec::ClientCredentials(c) => Some(c.client_secret.value.clone()),
            _ => registered.and_then(|c| c.client_secret.clone()),
        };
        let redirect = registered
            .and_then(|c| c.redirect_uri.clone())
            .unwrap_or_else(|| "http://127.0.0.1/callback".into());
        let mut config = OAuthClientConfig::new(grant_client, redirect);
        if let Some(secret) = secret {
            config = config.with_client_secret(secret);
        }
        config
    }

    /// Exchanges the grant's refresh token; `auth` is the document read under
    /// the lock, which holds the client.
    async fn refresh(
        &self,
        auth: &ServerAuth,
        grant: &Grant,
        resource: &str,
    ) -> Result<StoredCredentials, AuthFailure> {
        let mut manager = self.manager(resource).await?;
        manager.set_metadata(grant.metadata.clone());
        let client = self.client_of(auth, &grant.credentials.client_id, grant.metadata.issuer.as_deref());
        manager.configure_client(client).map_err(|e| self.unavailable(&e))?;
        let memory = InMemoryCredentialStore::new();
        memory
            .save(grant.credentials.clone())
            .await
            .map_err(|e| self.unavailable(&e))?;
        manager.set_credential_store(memory.clone());
        let refreshed = tokio::time::timeout(AS_TIMEOUT, manager.refresh_token()).await;
        match refreshed {
            Err(_) => Err(AuthFailure {
                kind: AuthFailureKind::Unavailable,
                message: format!(
                    "the authorization server did not answer the refresh within {}s",
                    AS_TIMEOUT.as_secs()
                ),
            }),
            Ok(Ok(_)) => memory
                .load()
                .await
                .ok()
                .flatten()
                .ok_or_else(|| self.needs_login("the refresh left no token")),
            Ok(Err(AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired)) => Err(
                self.needs_login("the authorization server refused to refresh the grant (invalid_grant)"),
            ),
            // The authorization server refused the client or the request for
            // good (RFC 6749 §5.2): a new login, not a retry.
            Ok(Err(AuthError::TokenRefreshFailed(why)))
                if REFUSALS.iter().any(|code| why.contains(code)) =>
            {
                let code = REFUSALS.iter().find(|c| why.contains(**c)).copied().unwrap_or_default();
                Err(self.needs_login(&format!(
                    "the authorization server refused to refresh the grant ({code})"
                )))
            }
            Ok(Err(e)) => Err(self.unavailable(&e)),
        }
    }

    /// Discovers the authorization server of the server (RFC 9728, RFC 8414).
    async fn discover(&self) -> Result<(AuthorizationManager, rmcp::transport::auth::AuthorizationMetadata), AuthFailure> {
        let manager = self.manager(&self.url).await?;
        let found = tokio::time::timeout(AS_TIMEOUT, manager.resolve_metadata())
            .await
            .map_err(|_| AuthFailure {
                kind: AuthFailureKind::Unavailable,
                message: "the server's authorization metadata did not come in time".into(),
            })?
            .map_err(|e| self.unavailable(&e))?;
        // A client, and the seed issued to it, go only to the authorization
        // server they belong to (L17).
        if let AuthSpec::OAuth(OAuthSpec {
            issuer: Some(expected),
            ..
        }) = &self.spec
        {
            let found_issuer = found.metadata.issuer.as_deref().map(|i| i.trim_end_matches('/'));
            if found_issuer != Some(expected.trim_end_matches('/')) {
                return Err(self.needs_login(&format!(
                    "the server names the authorization server {}, not the `issuer: {expected}` \
                     its client belongs to; nothing was sent to it",
                    found.metadata.issuer.as_deref().unwrap_or("(none)")
                )));
            }
        }
        Ok((manager, found.metadata))
    }

    /// The client-credentials grant (the MCP extension for machines).
    async fn client_credentials(
        &self,
        lock: &super::StoreLock,
        auth: ServerAuth,
        metadata: Option<rmcp::transport::auth::AuthorizationMetadata>,
    ) -> Result<String, AuthFailure> {
        let AuthSpec::ClientCredentials(spec) = &self.spec else {
            return Err(self.needs_login("no authorization is kept"));
        };
        let (mut manager, metadata) = match metadata {
            Some(m) => (self.manager(&self.url).await?, m),
            None => self.discover().await?,
        };
        manager.set_metadata(metadata.clone());
        let config = ClientCredentialsConfig::ClientSecret {
            client_id: spec.client_id.value.clone(),
            client_secret: spec.client_secret.value.clone(),
            scopes: spec.scopes.clone(),
            resource: Some(self.url.clone()),
        };
        manager
            .configure_client_credentials(&config)
            .map_err(|e| self.unavailable(&e))?;
        let answer = tokio::time::timeout(AS_TIMEOUT, manager.exchange_client_credentials(&config))
            .await
            .map_err(|_| AuthFailure {
                kind: AuthFailureKind::Unavailable,
                message: "the authorization server did not answer in time".into(),
            })?;
        let response = match answer {
            Ok(r) => r,
            Err(AuthError::ClientCredentialsError(why) | AuthError::TokenExchangeFailed(why)) => {
                return Err(AuthFailure {
                    kind: AuthFailureKind::NeedsLogin,
                    message: crate::process::redact::redact(
                        &format!("the authorization server refused the client credentials: {why}"),
                        &self.secrets(),
                    ),
                });
            }
            Err(e) => return Err(self.unavailable(&e)),
        };
        let credentials = StoredCredentials::new(
            spec.client_id.value.clone(),
            Some(response),
            spec.scopes.clone(),
            Some(now_secs()),
        )
        .with_issuer(metadata.issuer.clone());
        let grant = Grant {
            url: self.url.clone(),
            metadata,
            credentials: credentials.clone(),
            requested_scopes: spec.scopes.clone(),
            last_challenge: None,
            upgrade_attempts: 0,
        };
        self.keep(lock, auth, self.url.clone(), grant, credentials)
    }

    /// The first grant from `refresh_token: ${env:}` (CI): discovered, then
    /// refreshed and kept like a login's; later refreshes rotate the kept one.
    async fn seeded(&self, lock: &super::StoreLock, mut auth: ServerAuth, seed: &str) -> Result<String, AuthFailure> {
        let AuthSpec::OAuth(spec) = &self.spec else {
            return Err(self.needs_login("no authorization is kept"));
        };
        let Some(client_id) = spec.client_id.as_ref().map(|c| c.value.clone()) else {
            return Err(self.needs_login(
                "`refresh_token:` needs the `client_id` it was issued to in the server's `auth: {oauth: ...}`",
            ));
        };
        let (_, metadata) = self.discover().await?;
        let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(serde_json::json!({
            "access_token": "",
            "token_type": "bearer",
            "expires_in": 0,
            "refresh_token": seed,
        }))
        .map_err(|e| self.needs_login(&format!("the seed refresh token cannot be used: {e}")))?;
        let credentials = StoredCredentials::new(client_id.clone(), Some(response), spec.scopes.clone(), Some(0))
            .with_issuer(metadata.issuer.clone());
        if let Some(issuer) = &metadata.issuer {
            auth.clients.entry(issuer.clone()).or_insert(ClientRecord {
                client_id,
                client_secret: None,
                source: ClientSource::Preregistered,
                redirect_uri: None,
                registered_at: now_secs(),
            });
        }
        let grant = Grant {
            url: self.url.clone(),
            metadata,
            credentials,
            requested_scopes: spec.scopes.clone(),
            last_challenge: None,
            upgrade_attempts: 0,
        };
        let refreshed = self.refresh(&auth, &grant, &self.url).await?;
        self.keep(lock, auth, self.url.clone(), grant, refreshed)
    }

    /// The values that must never be shown: the tokens held now.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = self.held.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(seed) = self.seed() {
            out.push(seed);
        }
        match &self.spec {
            AuthSpec::OAuth(o) => out.extend(o.client_secret.iter().map(|s| s.value.clone())),
            AuthSpec::ClientCredentials(c) => out.push(c.client_secret.value.clone()),
        }
        out
    }

}

/// The parts of a `WWW-Authenticate: Bearer ...` challenge that matter here.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChallengeParams {
    pub error: Option<String>,
    pub scope: Option<String>,
}

/// Reads `error` and `scope` of a bearer challenge (RFC 6750 §3), as rmcp
/// reads them.
pub(crate) fn parse_challenge(header: &str) -> ChallengeParams {
    // The base only resolves a relative `resource_metadata`, not read here.
    let base = url::Url::parse("http://localhost/").expect("a valid URL");
    let params = rmcp::transport::auth::WWWAuthenticateParams::parse(header, &base);
    ChallengeParams {
        error: params.error,
        scope: params.scope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_read_quoted_or_not() {
        assert_eq!(
            parse_challenge(
                r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://h/.well-known/oauth-protected-resource""#
            ),
            ChallengeParams {
                error: Some("insufficient_scope".into()),
                scope: Some("files:read files:write".into()),
            }
        );
        assert_eq!(
            parse_challenge("Bearer realm=x,error=invalid_token"),
            ChallengeParams {
                error: Some("invalid_token".into()),
                scope: None,
            }
        );
        assert_eq!(parse_challenge("Bearer"), ChallengeParams::default());
    }
}
