//! What a fleet file says, validated and with every default filled in: the plain
//! values the rest of the crate runs on.

use std::path::PathBuf;
use std::time::Duration;

use super::duration::Timeout;
use super::expand::Text;

/// A validated fleet file.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// Absolute (symlinks resolved when the file exists): it keys the state directory.
    pub file: PathBuf,
    /// Names the state directory when set.
    pub name: Option<String>,
    /// In file order, disabled ones included, so that `status` can show them.
    pub servers: Vec<ServerSpec>,
    /// How the fleet is served as one MCP server (docs/design.md §14).
    pub gateway: GatewaySpec,
    /// Where the supervisor serves its metrics besides the gateway (docs/design.md §17).
    pub metrics: MetricsSpec,
    /// Settings of the supervisor process itself: `supervisor:`.
    pub supervisor: SupervisorSpec,
    /// The etcd cluster that keeps the fleet's authority when it spans hosts
    /// (docs/design.md §19); `None`: one host, as always.
    pub coordination: Option<CoordinationSpec>,
    /// What the user should be told about the file, one line each: for an MCP
    /// client's file read with `-f`, the servers renamed and the entries not
    /// carried over (docs/design.md §15). Empty for a fleet file.
    pub notices: Vec<String>,
}

impl Fleet {
    /// The fleet's etcd key prefix: `coordination.prefix`, else
    /// `/mcpfleet/<fleet name>` (the file's stem when the fleet has no name).
    pub fn coordination_prefix(&self) -> String {
        if let Some(prefix) = self.coordination.as_ref().and_then(|c| c.prefix.clone()) {
            return prefix;
        }
        let name = self.name.clone().unwrap_or_else(|| {
            self.file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "fleet".to_owned())
        });
        let name: String = name
            .chars()
            .map(|c| match c.is_ascii_alphanumeric() || "._-".contains(c) {
                true => c,
                false => '_',
            })
            .collect();
        format!("/mcpfleet/{name}")
    }
}

/// The highest cap the fleet file may set on what an HTTP door's peers hold at
/// once (`max_connections`, `max_sessions`).
pub const MAX_CAP: usize = 65_536;

/// The fleet file's `gateway:`.
#[derive(Debug, Clone, Default)]
pub struct GatewaySpec {
    /// Where `serve` listens unless `--listen` says otherwise.
    pub listen: Option<std::net::SocketAddr>,
    /// The bearer token (usually `${env:NAME}`); else one is kept in the state
    /// directory.
    pub token: Option<Text>,
    /// Browser origins allowed besides loopback ones (`https://app.example.com:443`).
    pub origins: Vec<String>,
    /// Items per page of the gateway's lists.
    pub page_size: Option<usize>,
    /// `meta: true`: each call's result names, in its `_meta`, the server and
    /// generation that answered. Off by default: results pass through as the
    /// server wrote them.
    pub meta: bool,
    /// Open connections of the HTTP door at most (default 512); one more is
    /// answered 503.
    pub max_connections: Option<usize>,
    /// Open HTTP sessions at most (default 256); one more `initialize` is
    /// answered 503.
    pub max_sessions: Option<usize>,
    /// HTTPS on the door, and the CA of the other hosts' gateways.
    pub tls: Option<GatewayTls>,
}

/// `gateway.tls:`: the door serves HTTPS with this certificate; relays to
/// the other hosts' gateways check theirs against `ca` (docs/design.md §19).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayTls {
    /// The door's certificate chain (PEM).
    pub cert: std::path::PathBuf,
    /// Its private key (PEM).
    pub key: std::path::PathBuf,
    /// The CA (PEM) the other hosts' gateway certificates are checked
    /// against, besides the system's roots.
    pub ca: Option<std::path::PathBuf>,
}

/// The fleet file's `metrics:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSpec {
    /// Where `GET /metrics` is served (with the gateway's token) while a
    /// supervisor runs; none by default.
    pub listen: Option<std::net::SocketAddr>,
    /// Open connections of that door at most (default 64); one more is
    /// answered 503.
    pub max_connections: Option<usize>,
}

/// The fleet file's `coordination:` (docs/design.md §19).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinationSpec {
    /// The etcd endpoints, `http://HOST:PORT`.
    pub etcd: Vec<String>,
    /// The key prefix of the fleet; default `/mcpfleet/<fleet name>`.
    pub prefix: Option<String>,
    /// Each host's lease.
    pub ttl: std::time::Duration,
    /// How long a standby waits once an owner's lease is gone (L23).
    pub lock_delay: std::time::Duration,
    /// TLS to etcd (`https://` endpoints), when set.
    pub tls: Option<EtcdTls>,
}

/// `coordination.tls:`: how a host talks TLS to etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA (PEM) that signed etcd's certificates.
    pub ca: std::path::PathBuf,
    /// A client certificate and its key (PEM), for an etcd that asks for one
    /// (`--client-cert-auth`).
    pub identity: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Default for CoordinationSpec {
    fn default() -> CoordinationSpec {
        CoordinationSpec {
            etcd: Vec::new(),
            prefix: None,
            ttl: std::time::Duration::from_secs(10),
            lock_delay: std::time::Duration::from_secs(5),
            tls: None,
        }
    }
}

/// The fleet file's `supervisor:`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SupervisorSpec {
    /// How the files the supervisor writes for as long as it runs
    /// (`events.ndjson`, `supervisor.log`) are kept to a size.
    pub rotation: Rotation,
}

/// When a file that grows for as long as the supervisor runs is rotated, and how
/// many rotated files are kept (docs/design.md §3, "Rotation"). Past `max_bytes`
/// the file becomes `NAME.1` (`NAME.1` becomes `NAME.2`, and so on; `NAME.keep`
/// is dropped) and a new file begins, so each file takes at most
/// `(keep + 1) × max_bytes` on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The largest a file grows before it is rotated; at least [`Rotation::MIN_BYTES`].
    pub max_bytes: u64,
    /// Rotated files kept, from 1 to [`Rotation::MAX_KEEP`].
    pub keep: u32,
}

impl Rotation {
    /// What a fleet file that says nothing gets: 16 MiB, two rotated files.
    pub const DEFAULT: Rotation = Rotation {
        max_bytes: 16 * 1024 * 1024,
        keep: 2,
    };
    /// The smallest `max_file_size`: smaller files would be rotated at every line.
    pub const MIN_BYTES: u64 = 1024;
    /// The most rotated files kept of one file.
    pub const MAX_KEEP: u32 = 20;
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation::DEFAULT
    }
}

/// How the gateway shows one server's tools and prompts: `prefix:` and `tools:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExposeSpec {
    /// Replaces the server's name in `SERVER__TOOL`; may be empty.
    pub prefix: Option<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Fleet {
    pub fn server(&self, name: &str) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.name == name)
    }

    pub fn enabled(&self) -> impl Iterator<Item = &ServerSpec> {
        self.servers.iter().filter(|s| s.enabled)
    }
}

/// One server of the fleet, with defaults applied.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Matches `^[a-z0-9][a-z0-9_-]{0,62}$`, so it is safe in file and socket names.
    pub name: String,
    pub enabled: bool,
    /// Deadline of spawn (stdio) or connect (http) + MCP initialize.
    pub connect_timeout: Timeout,
    /// Deadline of the whole teardown (for http, ending the session).
    pub cleanup_timeout: Timeout,
    pub transport: Transport,
    /// What to do when the server exits or fails its health check.
    pub restart: RestartPolicy,
    /// MCP `ping` at an interval; `None` when the fleet file asks for none.
    pub health: Option<HealthCheck>,
    /// Stop the server after this long without a call; `None` keeps it running.
    pub idle_timeout: Option<Duration>,
    /// What the gateway shows of the server.
    pub expose: ExposeSpec,
    /// Which hosts of a fleet that spans hosts may run it (docs/design.md §19).
    pub placement: Placement,
}

/// A server's `placement:`, in a fleet that spans hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The hosts that may run it; empty: any host.
    pub hosts: Vec<String>,
    /// How many hosts besides its owner stand by to take it over; `None`:
    /// every host it may run on.
    pub standbys: Option<u32>,
}

impl Placement {
    /// Whether `host` may run the server.
    pub fn allows(&self, host: &str) -> bool {
        self.hosts.is_empty() || self.hosts.iter().any(|h| h == host)
    }

    /// Whether `me` may take the server over now: the placement allows it,
    /// and with `standbys: N` it is among the first N (at least one) by name
    /// of the `live` hosts the placement allows.
    pub fn may_take(&self, me: &str, live: &[String]) -> bool {
        if !self.allows(me) {
            return false;
        }
        let Some(standbys) = self.standbys else {
            return true;
        };
        let mut eligible: Vec<&String> = live.iter().filter(|h| self.allows(h)).collect();
        eligible.sort();
        eligible.dedup();
        eligible
            .iter()
            .take(standbys.max(1) as usize)
            .any(|h| h.as_str() == me)
    }
}

/// When a server that stopped on its own is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RestartMode {
    /// `never`: the server stays stopped (`failed`).
    #[default]
    Never,
    /// `on-failure`: after an exit with a non-zero status or a signal, or after
    /// failed health checks; not after a clean exit (status 0).
    OnFailure,
    /// `always`: after any stop the user did not ask for, a clean exit included.
    Always,
}

impl RestartMode {
    /// Every mode, in the order of [`RESTART_POLICIES`].
    pub const ALL: [RestartMode; 3] = [
        RestartMode::Never,
        RestartMode::OnFailure,
        RestartMode::Always,
    ];

    /// The spelling in the fleet file: `never`, `on-failure` or `always`.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartMode::Never => "never",
            RestartMode::OnFailure => "on-failure",
            RestartMode::Always => "always",
        }
    }

    /// The mode spelled `text` in the fleet file.
    pub fn from_name(text: &str) -> Option<RestartMode> {
        RestartMode::ALL.into_iter().find(|m| m.as_str() == text)
    }
}

impl std::fmt::Display for RestartMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `restart:` of a server, every default filled in. The delay before the n-th
/// consecutive restart grows exponentially from `backoff_initial` up to
/// `backoff_max`; more than `max_restarts` restarts within `window` is a crash loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    pub policy: RestartMode,
    /// At most `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// 0 means that the first restart within `window` already is a crash loop.
    pub max_restarts: u32,
    pub window: Duration,
}

impl RestartPolicy {
    /// What a server gets when neither it nor `defaults:` says otherwise.
    pub const DEFAULT: RestartPolicy = RestartPolicy {
        policy: RestartMode::Never,
        backoff_initial: Duration::from_millis(500),
        backoff_max: Duration::from_secs(30),
        max_restarts: 5,
        window: Duration::from_secs(60),
    };
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy::DEFAULT
    }
}

/// `health:` of a server: an MCP `ping` every `interval`, answered within
/// `timeout`; `failures` misses in a row restart the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    pub interval: Duration,
    /// Shorter than `interval`.
    pub timeout: Duration,
    /// At least 1.
    pub failures: u32,
}

impl HealthCheck {
    /// `timeout` when neither the server nor `defaults:` sets one.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
    /// `failures` when neither the server nor `defaults:` sets one.
    pub const DEFAULT_FAILURES: u32 = 3;
}

/// How mcpfleet talks to a server: a `command` it spawns, or a `url` it connects to.
#[derive(Debug, Clone)]
pub enum Transport {
    Stdio(StdioSpec),
    Http(HttpSpec),
}

impl Transport {
    /// The name shown for the transport: `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
        }
    }
}

/// A server that mcpfleet spawns and talks to over its stdin and stdout.
#[derive(Debug, Clone)]
pub struct StdioSpec {
    pub command: Text,
    pub args: Vec<Text>,
    /// `env:` as written, in file order; it wins over `env_files`. What the
    /// server gets is [`StdioSpec::environment`].
    pub env: Vec<(String, Text)>,
    /// `env_file:` of `defaults:`, then the server's own, each read at load time.
    pub env_files: Vec<EnvFile>,
    /// Absolute and existing at load time.
    pub cwd: PathBuf,
    /// Run `command` through `sh -c` instead of directly; only when the user asks.
    pub shell: bool,
}

impl StdioSpec {
    /// The variables added to the inherited environment: those of each env
    /// file in order, then `env:`; of a name set twice, the later wins
    /// (docs/design.md §7).
    pub fn environment(&self) -> Vec<(&str, &Text)> {
        let mut out: Vec<(&str, &Text)> = Vec::new();
        let all = self
            .env_files
            .iter()
            .flat_map(|f| f.vars.iter())
            .chain(self.env.iter());
        for (name, value) in all {
            out.retain(|(n, _)| *n != name);
            out.push((name, value));
        }
        out
    }
}

/// One file of `env_file:`: dotenv lines (`KEY=VALUE`), read when the fleet
/// file is loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvFile {
    /// Absolute.
    pub path: PathBuf,
    /// The path as it may be shown: as written when `${env:}` was expanded into
    /// it, else absolute.
    pub shown: String,
    /// The file's variables; each value is a secret, shown only as
    /// `<NAME from FILE>` (docs/design.md §6).
    pub vars: Vec<(String, Text)>,
}

/// A remote server that mcpfleet reaches over streamable HTTP.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSpec {
    /// An absolute `http://` or `https://` URL with a host, once expanded.
    pub url: Text,
    /// Sent with every request, in file order. Names are HTTP tokens, unique
    /// regardless of case; values hold no control character but tab.
    pub headers: Vec<(String, Text)>,
    /// How mcpfleet obtains the bearer token it sends (`auth:`); `None` when the
    /// server needs none beyond `headers:` (docs/design.md, "Authorization").
    pub auth: Option<Box<AuthSpec>>,
}

/// A remote server's `auth:`: how mcpfleet is authorized by it. Secrets
/// (`client_secret`, `refresh_token`) come from `${env:}` only.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthSpec {
    /// `auth: oauth`: the authorization code flow with PKCE that `mcpfleet
    /// login` runs, with its tokens kept and refreshed by the server's authority.
    OAuth(OAuthSpec),
    /// `auth: {client_credentials: ...}`: the client-credentials grant (the MCP
    /// extension for machines), made by the authority itself; no browser.
    ClientCredentials(ClientCredentialsSpec),
}

impl AuthSpec {
    /// Where the tokens of this server are kept.
    pub fn store(&self) -> TokenBackend {
        match self {
            AuthSpec::OAuth(o) => o.store,
            AuthSpec::ClientCredentials(c) => c.store,
        }
    }
}

/// The options of `auth: oauth`; all optional.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthSpec {
    /// The scopes to ask for; empty: the server's challenge, else the
    /// resource's `scopes_supported`, else none.
    pub scopes: Vec<String>,
    /// A client registered beforehand at the authorization server.
    pub client_id: Option<Text>,
    /// Its secret, from `${env:}`.
    pub client_secret: Option<Text>,
    /// The issuer the pre-registered client belongs to; a server that names
    /// another authorization server is then an error, never a reuse.
    pub issuer: Option<String>,
    /// A client ID metadata document (an `https://` URL with a path) to use as
    /// the client id where the authorization server accepts one.
    pub client_metadata_url: Option<String>,
    /// The loopback port of the redirect (`http://127.0.0.1:PORT/callback`);
    /// `None`: any free port.
    pub redirect_port: Option<u16>,
    /// A refresh token to start from (CI), from `${env:}`; the tokens it is
    /// exchanged for are then kept and rotated like a login's.
    pub refresh_token: Option<Text>,
    /// Ask for `offline_access` where the authorization server offers it
    /// (default true).
    pub offline_access: bool,
    /// Where the tokens are kept (`store:`): the state directory (default) or
    /// the desktop keyring.
    pub store: TokenBackend,
}

/// Where a server's tokens are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenBackend {
    /// `auth/NAME.json` in the fleet's state directory (mode 0600).
    #[default]
    File,
    /// The desktop keyring (the Secret Service: GNOME Keyring, KWallet,
    /// KeePassXC), through libsecret's `secret-tool`.
    Keyring,
}

/// The options of `auth: {client_credentials: ...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCredentialsSpec {
    pub client_id: Text,
    /// From `${env:}`.
    pub client_secret: Text,
    pub scopes: Vec<String>,
    pub store: TokenBackend,
}
