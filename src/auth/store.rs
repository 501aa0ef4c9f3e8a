//! Where a server's OAuth tokens are kept: one file per server in the fleet's
//! state directory, `auth/NAME.json` (mode 0600, replaced atomically, the
//! directory synced after the rename), and beside it `auth/NAME.lock`, whose
//! exclusive lock is held by whoever changes the file: a login, a logout, or the
//! authority's refresh. A reader needs no lock: it sees the old file or the new
//! one, never a torn one.
//!
//! Where the user chooses it (`store: keyring`), the same document is kept in the
//! desktop keyring instead, as one item of the Secret Service (GNOME Keyring,
//! KWallet, KeePassXC) reached through libsecret's `secret-tool`, with the
//! attributes `service=mcpfleet`, `fleet=STATE_DIR` and `server=NAME`; the lock
//! file stays in the state directory.
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
    #[error("the desktop keyring, which keeps {server}'s tokens (`store: keyring`), {why}")]
    Keyring { server: String, why: String },
}

/// The most `secret-tool store` takes from its stdin.
const KEYRING_MAX_BYTES: usize = 8192;

/// The longest wait for the desktop keyring (it may ask the user to unlock it).
const KEYRING_WAIT: Duration = Duration::from_secs(30);

/// Where the document is kept.
#[derive(Debug, Clone)]
enum Backend {
    File,
    /// The Secret Service; `bus` overrides the session bus (tests).
    Keyring { bus: Option<String> },
}

/// The token file of one server of one fleet.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
    server: String,
    backend: Backend,
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
            backend: Backend::File,
        }
    }

    /// The tokens of `server`, kept where its `auth:` says.
    pub fn for_spec(state_root: &Path, server: &str, spec: &crate::config::AuthSpec) -> TokenStore {
        match spec.store() {
            crate::config::TokenBackend::File => TokenStore::new(state_root, server),
            crate::config::TokenBackend::Keyring => TokenStore::in_keyring(state_root, server),
        }
    }

    /// The tokens of `server`, kept in the desktop keyring.
    pub fn in_keyring(state_root: &Path, server: &str) -> TokenStore {
        TokenStore {
            backend: Backend::Keyring { bus: None },
            ..TokenStore::new(state_root, server)
        }
    }

    /// Where the tokens are kept, in words (never what they are).
    pub fn place(&self) -> String {
        match self.backend {
            Backend::File => self.path().display().to_string(),
            Backend::Keyring { .. } => format!(
                "the desktop keyring (service=mcpfleet server={})",
                self.server
            ),
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
        if let Backend::Keyring { .. } = self.backend {
            return match self.keyring(&["lookup"], None)? {
                Some(bytes) => self.parse(&bytes).map(Some),
                None => Ok(None),
            };
        }
        let path = self.path();
        let bytes = match crate::state::read_bounded_nofollow(&path, MAX_FILE_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(self.corrupt(format!("it is larger than {MAX_FILE_BYTES} bytes")));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        self.parse(&bytes).map(Some)
    }

    fn parse(&self, bytes: &[u8]) -> Result<ServerAuth, StoreError> {
        let auth: ServerAuth = serde_json::from_slice(bytes).map_err(|e| {
            // serde's message may quote what it read: say only where.
            self.corrupt(format!("invalid JSON at line {} column {}", e.line(), e.column()))
        })?;
        if auth.version != VERSION {
            return Err(self.corrupt(format!("it has version {}", auth.version)));
        }
        Ok(auth)
    }

    fn corrupt(&self, why: String) -> StoreError {
        if let Backend::Keyring { .. } = self.backend {
            return StoreError::Keyring {
                server: self.server.clone(),
                why: format!(
                    "holds an item that is not a token document of this version of mcpfleet \
                     ({why}): run `mcpfleet logout {0}`, then `mcpfleet login {0}`",
                    self.server
                ),
            };
        }
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
        if let Backend::Keyring { .. } = self.backend {
            // `secret-tool store` keeps at most 8 KiB of what it reads, and
            // says nothing of the rest: a longer document is refused here.
            let bytes = serde_json::to_vec(&auth).map_err(|e| StoreError::Write {
                path: path.clone(),
                source: io::Error::other(e.to_string()),
            })?;
            if bytes.len() > KEYRING_MAX_BYTES {
                return Err(StoreError::Keyring {
                    server: self.server.clone(),
                    why: format!(
                        "keeps at most {KEYRING_MAX_BYTES} bytes per item through `secret-tool`, and \
                         these tokens take {}: use `store: file`",
                        bytes.len()
                    ),
                });
            }
            let label = format!("mcpfleet: the OAuth tokens of {}", self.server);
            return self
                .keyring(&["store", "--label", &label], Some(&bytes))
                .map(|_| ());
        }
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
        if let Backend::Keyring { .. } = self.backend {
            return self.keyring(&["clear"], None).map(|_| ());
        }
        let path = self.path();
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir).map_err(|source| StoreError::Write { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Write { path, source }),
        }
    }

    fn ensure_dir(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::DirBuilderExt;
        // The state directory itself may not exist yet (`check` makes none).
        match std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(source) => Err(StoreError::Write {
                path: self.dir.clone(),
                source,
            }),
        }
    }
}

impl TokenStore {
    /// Runs `secret-tool ACTION... ATTRIBUTES` with `input` on its stdin, within
    /// [`KEYRING_WAIT`]: its stdout when it succeeded, `None` when a lookup
    /// found nothing.
    fn keyring(&self, action: &[&str], input: Option<&[u8]>) -> Result<Option<Vec<u8>>, StoreError> {
        use std::io::{Read, Write};
        use std::process::{Command, Stdio};
        let fail = |why: String| StoreError::Keyring {
            server: self.server.clone(),
            why,
        };
        let fleet = self.dir.parent().unwrap_or(&self.dir).display().to_string();
        let mut command = Command::new("secret-tool");
        command
            .args(action)
            .args(["service", "mcpfleet", "fleet", &fleet, "server", &self.server])
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Backend::Keyring { bus: Some(bus) } = &self.backend {
            command.env("DBUS_SESSION_BUS_ADDRESS", bus);
        }
        let mut child = command.spawn().map_err(|e| {
            fail(if e.kind() == io::ErrorKind::NotFound {
                "is reached through `secret-tool` (libsecret; on Debian and Ubuntu the package \
                 libsecret-tools), which is not installed"
                    .to_owned()
            } else {
                format!("could not be reached: cannot run `secret-tool`: {e}")
            })
        })?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            // Small enough for the pipe; a refused write shows in the exit status.
            let _ = stdin.write_all(input);
        }
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let out = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes);
            }
            bytes
        });
        let err = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(4096).read_to_end(&mut bytes);
            }
            bytes
        });
        let deadline = Instant::now() + KEYRING_WAIT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(fail(format!(
                        "did not answer within {}s (is it locked, waiting for its password?)",
                        KEYRING_WAIT.as_secs()
                    )));
                }
                Err(e) => return Err(fail(format!("could not be reached: {e}"))),
            }
        };
        let out = out.join().unwrap_or_default();
        let err = err.join().unwrap_or_default();
        let said = one_line(&String::from_utf8_lossy(&err));
        if status.success() {
            return Ok(Some(out));
        }
        if action == ["lookup"] && said.is_empty() {
            return Ok(None);
        }
        let said = if said.is_empty() {
            format!("`secret-tool {}` failed ({status})", action[0])
        } else {
            format!("`secret-tool {}` failed: {said}", action[0])
        };
        Err(fail(format!("could not be used: {said}")))
    }
}

/// What a tool said on stderr, as one bounded line.
fn one_line(said: &str) -> String {
    let line = said.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
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

    /// A private session bus with a Secret Service (GNOME Keyring), its
    /// keyring in a temporary home; ended when dropped (the keyring daemon
    /// leaves with its bus).
    struct SecretService {
        bus: String,
        pid: i32,
        _home: tempfile::TempDir,
    }

    impl SecretService {
        fn start() -> SecretService {
            use std::io::Write;
            use std::process::{Command, Stdio};
            let home = tempfile::tempdir().unwrap();
            let out = Command::new("dbus-daemon")
                .args(["--session", "--fork", "--print-address=1", "--print-pid=1"])
                .env("HOME", home.path())
                .output()
                .expect("dbus-daemon (package dbus-daemon) runs");
            let out = String::from_utf8(out.stdout).unwrap();
            let mut lines = out.lines();
            let bus = lines.next().unwrap().to_owned();
            let pid = lines.next().unwrap().trim().parse().unwrap();
            let service = SecretService { bus, pid, _home: home };
            let mut keyring = Command::new("gnome-keyring-daemon")
                .args(["--unlock", "--components=secrets"])
                .env("HOME", service._home.path())
                .env("XDG_DATA_HOME", service._home.path())
                .env("DBUS_SESSION_BUS_ADDRESS", &service.bus)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("gnome-keyring-daemon (package gnome-keyring) runs");
            keyring.stdin.take().unwrap().write_all(b"test").unwrap();
            assert!(keyring.wait().unwrap().success());
            service
        }
    }

    impl Drop for SecretService {
        fn drop(&mut self) {
            crate::platform::signal_pinned(self.pid, crate::platform::Signal::SIGTERM, || true);
        }
    }

    #[tokio::test]
    async fn the_desktop_keyring_keeps_the_document_and_the_state_directory_holds_no_token() {
        let service = SecretService::start();
        let dir = tempfile::tempdir().unwrap();
        let mut store = TokenStore::in_keyring(dir.path(), "github");
        store.backend = Backend::Keyring {
            bus: Some(service.bus.clone()),
        };
        // Another fleet's server of the same name is another item.
        let mut other = TokenStore::in_keyring(&dir.path().join("other"), "github");
        other.backend = store.backend.clone();
        assert!(store.read().unwrap().is_none());
        let mut auth = ServerAuth::default();
        let mut g = grant("https://mcp.example/mcp");
        g.requested_scopes = vec!["repo".into()];
        auth.grants.insert("https://mcp.example/mcp".into(), g);
        let lock = store.lock(Duration::from_secs(1)).await.unwrap();
        store.write(&lock, &auth).unwrap();
        assert_eq!(store.read().unwrap().unwrap().grants, auth.grants);
        assert!(other.read().unwrap().is_none());
        assert!(!store.path().exists(), "the token file is not written");
        assert!(store.place().contains("desktop keyring"), "{}", store.place());
        store.remove(&lock).unwrap();
        assert!(store.read().unwrap().is_none());
        // More than `secret-tool` keeps is refused, not cut short.
        let mut big = auth.clone();
        let mut g = grant("https://mcp.example/mcp");
        g.requested_scopes = vec!["s".repeat(9000)];
        big.grants.insert("https://mcp.example/mcp".into(), g);
        let err = store.write(&lock, &big).unwrap_err().to_string();
        assert!(err.contains("use `store: file`"), "{err}");
        assert!(store.read().unwrap().is_none());
    }

    #[test]
    fn a_keyring_that_cannot_be_reached_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = TokenStore::in_keyring(dir.path(), "s");
        store.backend = Backend::Keyring {
            bus: Some("unix:path=/nonexistent/bus".into()),
        };
        let err = store.read().unwrap_err().to_string();
        assert!(err.contains("desktop keyring"), "{err}");
        assert!(err.contains("`secret-tool lookup` failed"), "{err}");
    }
}
