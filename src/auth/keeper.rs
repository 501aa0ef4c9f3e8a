//! The keeper of one server's tokens: the one place that hands out the bearer
//! token sent to the server, refreshes it (one refresh at a time, under the
//! token file's lock), and says when a person must log in again.

use std::sync::Arc;

use crate::config::AuthSpec;

use super::store::TokenStore;

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
/// client.
#[derive(Debug)]
pub struct Keeper {
    store: TokenStore,
    url: String,
    spec: AuthSpec,
}

impl Keeper {
    pub fn new(store: TokenStore, url: String, spec: AuthSpec) -> Arc<Keeper> {
        Arc::new(Keeper { store, url, spec })
    }

    /// The access token to send now, refreshed first when it is about to
    /// expire.
    pub async fn bearer(&self) -> Result<String, AuthFailure> {
        Err(AuthFailure {
            kind: AuthFailureKind::NeedsLogin,
            message: format!("run `mcpfleet login {}`", self.store.server()),
        })
    }

    /// The server refused `sent` with `challenge` (its `WWW-Authenticate`):
    /// the token to retry with once (refreshed, or renewed by another holder
    /// meanwhile), or why there is none.
    pub async fn refused(&self, sent: &str, challenge: Option<&str>) -> Result<String, AuthFailure> {
        let _ = (sent, challenge);
        self.bearer().await
    }

    /// The values that must never be shown: the tokens held now.
    pub fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    /// The URL the keeper's tokens are sent to, and how they are obtained.
    pub fn target(&self) -> (&str, &AuthSpec) {
        (&self.url, &self.spec)
    }
}
