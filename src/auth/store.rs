//! Where a server's OAuth tokens are kept: one file per server in the fleet's
//! state directory, `auth/NAME.json` (mode 0600, replaced atomically, the
//! directory synced after the rename), and beside it `auth/NAME.lock`, whose
//! exclusive lock is held by whoever changes the file: a login, a logout, or the
//! authority's refresh. A reader needs no lock: it sees the old file or the new
//! one, never a torn one.
//!
//! Inside, clients are kept per authorization server (by `issuer`: a client is
//! never presented to another one), and grants per resource (the protected
//! resource's `resource`, exactly as it publishes it), each with the server URL
//! it was obtained for: a token is only ever sent to that URL.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmcp::transport::auth::{AuthorizationMetadata, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The largest token file read; anything larger is not ours.
const MAX_FILE_BYTES: usize = 1 << 20;

/// The folder of the state directory that holds the token files.
pub const AUTH_DIR: &str = "auth";

/// The format of the file, written as `version`.
const VERSION: u32 = 1;

/// What is kept for one server.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerAuth {
    pub version: u32,
    /// Clients by the `issuer` of the authorization server that knows them.
    #[serde(default)]
    pub clients: BTreeMap<String, ClientRecord>,
    /// Grants by resource.
    #[serde(default)]
    pub grants: BTreeMap<String, Grant>,
    /// A hash (`crate::hash`) of the `refresh_token: ${env:}` seed the grants
    /// started from: while the seed is unchanged, the kept (perhaps rotated)
    /// token wins; a new seed replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
}

/// How a client came to be known to an authorization server.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClientSource {
    /// `client_id` in the fleet file.
    Preregistered,
    /// A client ID metadata document (`client_metadata_url`).
    MetadataDocument,
    /// Dynamic client registration (RFC 7591).
    Registered,
}

/// A client of one authorization server.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientRecord {
    pub client_id: String,
    /// Only for a registered client that was given one; a pre-registered
    /// client's secret stays in the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub source: ClientSource,
    /// The redirect URI registered with the client, if one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// Seconds since the epoch.
    pub registered_at: u64,
}

impl std::fmt::Debug for ClientRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRecord")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "[redacted]"))
            .field("source", &self.source)
            .field("redirect_uri", &self.redirect_uri)
            .field("registered_at", &self.registered_at)
            .finish()
    }
}

/// What the server was last refused with, kept for the next login to ask for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Challenge {
    /// The `error` of the `WWW-Authenticate` challenge, e.g. `insufficient_scope`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its `scope`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Seconds since the epoch.
    pub at: u64,
}

/// The tokens granted for one resource.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Grant {
    /// The server URL the grant was obtained for; it is sent nowhere else.
    pub url: String,
    /// The authorization server's metadata, as discovered: its endpoints for
    /// refresh and revocation.
    pub metadata: AuthorizationMetadata,
    /// The client, the token response (access and refresh token, expiry),
    /// the granted scopes and when they were received. Its `Debug` hides the
    /// tokens.
    pub credentials: StoredCredentials,
    /// The scopes asked for, for the union a step-up asks for.
    #[serde(default)]
    pub requested_scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_challenge: Option<Challenge>,
    /// Logins made for the same challenge without the server accepting the
    /// token: bounded, so that a server that never does is not asked forever.
    #[serde(default)]
    pub upgrade_attempts: u32,
}

impl PartialEq for Grant {
    fn eq(&self, other: &Self) -> bool {
        // The credentials hold no `PartialEq`: compare them as written.
        self.url == other.url
            && self.requested_scopes == other.requested_scopes
            && self.last_challenge == other.last_challenge
            && self.upgrade_attempts == other.upgrade_attempts
            && serde_json::to_value(&self.metadata).ok() == serde_json::to_value(&other.metadata).ok()
            && serde_json::to_value(&self.credentials).ok()
                == serde_json::to_value(&other.credentials).ok()
    }
}

impl ServerAuth {
    /// The grant obtained for `url`, if there is one.
    pub fn grant_for(&self, url: &str) -> Option<(&str, &Grant)> {
        self.grants
            .iter()
            .find(|(_, g)| g.url == url)
            .map(|(resource, g)| (resource.as_str(), g))
    }
}

/// Why the token file could not be used. The messages name the file, never
/// what it holds.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not a token file of this version of mcpfleet: {why}; remove it and run `mcpfleet login {server}`")]
    Corrupt {
        path: PathBuf,
        server: String,
        why: String,
    },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot lock {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
    #[error("{path} stayed locked for {waited:?} (a login or a refresh of this server is under way)")]
    Busy { path: PathBuf, waited: Duration },
}

/// The token file of one server of one fleet.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
    server: String,
}

/// The exclusive lock of a server's token file: whoever holds it may change
/// the file. Released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: std::fs::File,
}

impl TokenStore {
    /// The token file of `server` in the state directory `state_root`.
    pub fn new(state_root: &Path, server: &str) -> TokenStore {
        TokenStore {
            dir: state_root.join(AUTH_DIR),
            server: server.to_owned(),
        }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// The file itself.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.server))
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join(format!("{}.lock", self.server))
    }

    /// What is kept, if anything; `None` when the file does not exist.
    pub fn read(&self) -> Result<Option<ServerAuth>, StoreError> {
        let path = self.path();
        let bytes = match crate::state::read_bounded_nofollow(&path, MAX_FILE_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(self.corrupt(format!("it is larger than {MAX_FILE_BYTES} bytes")));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        let auth: ServerAuth = serde_json::from_slice(&bytes).map_err(|e| {
            // serde's message may quote what it read: say only where.
            self.corrupt(format!("invalid JSON at line {} column {}", e.line(), e.column()))
        })?;
        if auth.version != VERSION {
            return Err(self.corrupt(format!("it has version {}", auth.version)));
        }
        Ok(Some(auth))
    }

    fn corrupt(&self, why: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path(),
            server: self.server.clone(),
            why,
        }
    }

    /// Takes the exclusive lock, waiting at most `wait` for another holder.
    pub async fn lock(&self, wait: Duration) -> Result<StoreLock, StoreError> {
        self.ensure_dir()?;
        let path = self.lock_path();
        let file = crate::state::open_rw(&path).map_err(|source| StoreError::Lock {
            path: path.clone(),
            source,
        })?;
        let deadline = Instant::now() + wait;
        match crate::state::lock_before(&file, deadline, async || false).await {
            Ok(true) => Ok(StoreLock { _file: file }),
            Ok(false) => Err(StoreError::Busy { path, waited: wait }),
            Err(source) => Err(StoreError::Lock { path, source }),
        }
    }

    /// Replaces the file with `auth`, under the lock.
    pub fn write(&self, _lock: &StoreLock, auth: &ServerAuth) -> Result<(), StoreError> {
        let path = self.path();
        let mut auth = auth.clone();
        auth.version = VERSION;
        let bytes = serde_json::to_vec_pretty(&auth).map_err(|e| StoreError::Write {
            path: path.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        let written = crate::state::replace_atomically(&path, &bytes)
            .and_then(|()| sync_dir(&self.dir));
        written.map_err(|source| StoreError::Write { path, source })
    }

    /// Forgets everything kept for the server, under the lock.
    pub fn remove(&self, _lock: &StoreLock) -> Result<(), StoreError> {
        let path = self.path();
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir).map_err(|source| StoreError::Write { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Write { path, source }),
        }
    }

    fn ensure_dir(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(source) => Err(StoreError::Write {
                path: self.dir.clone(),
                source,
            }),
        }
    }
}

/// Flushes a directory's entries, so that a rename in it survives a crash.
fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Seconds since the epoch, now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(url: &str) -> Grant {
        Grant {
            url: url.into(),
            metadata: AuthorizationMetadata::default(),
            credentials: StoredCredentials::new("client".into(), None, vec!["a".into()], Some(1)),
            requested_scopes: vec!["a".into()],
            last_challenge: None,
            upgrade_attempts: 0,
        }
    }

    #[tokio::test]
    async fn a_written_file_reads_back_private_and_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path(), "github");
        assert!(store.read().unwrap().is_none());
        let mut auth = ServerAuth::default();
        auth.grants.insert("https://mcp.example/mcp".into(), grant("https://mcp.example/mcp"));
        let lock = store.lock(Duration::from_secs(1)).await.unwrap();
        store.write(&lock, &auth).unwrap();
        let back = store.read().unwrap().unwrap();
        assert_eq!(back.version, VERSION);
        assert_eq!(back.grants, auth.grants);
        assert!(back.grant_for("https://mcp.example/mcp").is_some());
        assert!(back.grant_for("https://other.example/mcp").is_none());
        let mode = std::fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        store.remove(&lock).unwrap();
        assert!(store.read().unwrap().is_none());
    }

    #[tokio::test]
    async fn a_second_holder_waits_and_is_told_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path(), "s");
        let held = store.lock(Duration::from_secs(1)).await.unwrap();
        let err = store.lock(Duration::from_millis(60)).await.unwrap_err();
        assert!(matches!(err, StoreError::Busy { .. }), "{err}");
        drop(held);
        store.lock(Duration::from_millis(60)).await.unwrap();
    }

    #[test]
    fn a_corrupt_file_is_named_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path(), "s");
        std::fs::create_dir_all(dir.path().join(AUTH_DIR)).unwrap();
        std::fs::write(store.path(), b"{\"version\": 1, \"grants\": secret-token-123").unwrap();
        let err = store.read().unwrap_err().to_string();
        assert!(err.contains("s.json"), "{err}");
        assert!(err.contains("mcpfleet login s"), "{err}");
        assert!(!err.contains("secret-token-123"), "{err}");
    }
}
