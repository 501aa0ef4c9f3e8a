//! The keys of format version 1, mapping by mapping; the words that users of
//! other runners reach for instead; and, for a key that is none of them, the
//! known key it most likely misspells. The validator and the policy blocks both
//! check keys against these lists, and the JSON Schema in `config/` is tested
//! against them.

/// Keys of the top level.
pub const TOP_KEYS: &[&str] = &[
    "version",
    "name",
    "defaults",
    "gateway",
    "metrics",
    "supervisor",
    "coordination",
    "servers",
];
/// Keys of `coordination:` (docs/design.md §19).
pub const COORDINATION_KEYS: &[&str] = &["etcd", "prefix", "ttl", "lock_delay", "tls"];
/// Keys of `coordination.tls:`.
pub const ETCD_TLS_KEYS: &[&str] = &["ca", "cert", "key"];
/// Keys of `defaults:`; each applies to every server that does not set it
/// (`env_file` to every stdio server, before the server's own).
pub const DEFAULTS_KEYS: &[&str] = &[
    "env_file",
    "connect_timeout",
    "cleanup_timeout",
    "restart",
    "health",
    "idle_timeout",
];
/// Keys of a server. A server has `command` (stdio) or `url` (streamable HTTP);
/// [`STDIO_ONLY_KEYS`] go with `command` only, [`REMOTE_ONLY_KEYS`] with `url` only, and
/// the others with either.
pub const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "env_file",
    "cwd",
    "shell",
    "url",
    "headers",
    "auth",
    "enabled",
    "connect_timeout",
    "cleanup_timeout",
    "restart",
    "health",
    "idle_timeout",
    "prefix",
    "tools",
    "placement",
];
/// Keys of a server's `placement:` (docs/design.md §19).
pub const PLACEMENT_KEYS: &[&str] = &["hosts", "standbys"];
/// Keys of a server that apply only to a stdio server (`command`): with `url`
/// they are errors.
pub const STDIO_ONLY_KEYS: &[&str] = &["args", "env", "env_file", "cwd", "shell"];
/// Keys of a server that apply only to a remote server (`url`): with
/// `command` they are errors.
pub const REMOTE_ONLY_KEYS: &[&str] = &["headers", "auth"];
/// Keys of `auth:` (docs/design.md, "Authorization"): one of them.
pub const AUTH_KEYS: &[&str] = &["oauth", "client_credentials"];
/// Keys of `auth: {oauth: ...}`.
pub const OAUTH_KEYS: &[&str] = &[
    "scopes",
    "client_id",
    "client_secret",
    "issuer",
    "client_metadata_url",
    "redirect_port",
    "refresh_token",
    "offline_access",
    "store",
];
/// Keys of `auth: {client_credentials: ...}`.
pub const CLIENT_CREDENTIALS_KEYS: &[&str] = &["client_id", "client_secret", "scopes", "store"];
/// The values of `store:` in `auth:`.
pub const TOKEN_STORES: &[&str] = &["file", "keyring"];
/// Keys of `restart:`.
pub const RESTART_KEYS: &[&str] = &["policy", "backoff", "max_restarts", "window"];
/// Keys of `restart.backoff:`.
pub const BACKOFF_KEYS: &[&str] = &["initial", "max"];
/// Keys of `health:`.
pub const HEALTH_KEYS: &[&str] = &["interval", "timeout", "failures"];
/// Keys of `gateway:` (docs/design.md §14).
pub const GATEWAY_KEYS: &[&str] = &[
    "listen",
    "token",
    "origins",
    "page_size",
    "meta",
    "max_connections",
    "max_sessions",
    "tls",
];
/// Keys of `gateway.tls:`: the door's certificate, and the CA of the other
/// hosts' gateways.
pub const GATEWAY_TLS_KEYS: &[&str] = &["cert", "key", "ca"];
/// Keys of `metrics:`: where the supervisor serves its metrics without the gateway.
pub const METRICS_KEYS: &[&str] = &["listen", "max_connections"];
/// Keys of `supervisor:`: how its own files are rotated (docs/design.md §3).
pub const SUPERVISOR_KEYS: &[&str] = &["max_file_size", "keep_files"];
/// Keys of a server's `tools:`: which of its tools the gateway shows.
pub const TOOLS_KEYS: &[&str] = &["allow", "deny"];
/// The values of `restart.policy`, as [`RestartMode::as_str`](super::RestartMode::as_str) spells them.
pub const RESTART_POLICIES: &[&str] = &["never", "on-failure", "always"];

/// Keys that users of docker compose and other runners reach for.
const SERVER_SYNONYMS: &[(&str, &str)] = &[
    ("cmd", "command"),
    ("arguments", "args"),
    ("argv", "args"),
    ("environment", "env"),
    ("envfile", "env_file"),
    ("env_files", "env_file"),
    ("dotenv", "env_file"),
    ("working_dir", "cwd"),
    ("workdir", "cwd"),
    ("working_directory", "cwd"),
    ("dir", "cwd"),
    ("directory", "cwd"),
    ("endpoint", "url"),
    ("timeout", "connect_timeout"),
    ("disabled", "enabled"),
    ("restart_policy", "restart"),
    ("healthcheck", "health"),
    ("health_check", "health"),
    ("idle", "idle_timeout"),
];
const RESTART_SYNONYMS: &[(&str, &str)] = &[
    ("mode", "policy"),
    ("retries", "max_restarts"),
    ("max_retries", "max_restarts"),
    ("max_attempts", "max_restarts"),
    ("delay", "backoff"),
    ("period", "window"),
];
const BACKOFF_SYNONYMS: &[(&str, &str)] = &[
    ("min", "initial"),
    ("start", "initial"),
    ("first", "initial"),
    ("maximum", "max"),
    ("cap", "max"),
];
const HEALTH_SYNONYMS: &[(&str, &str)] = &[
    ("every", "interval"),
    ("period", "interval"),
    ("retries", "failures"),
    ("threshold", "failures"),
    ("max_failures", "failures"),
];

const GATEWAY_SYNONYMS: &[(&str, &str)] = &[
    ("address", "listen"),
    ("addr", "listen"),
    ("bind", "listen"),
    ("port", "listen"),
    ("bearer", "token"),
    ("bearer_token", "token"),
    ("allowed_origins", "origins"),
];
const SUPERVISOR_SYNONYMS: &[(&str, &str)] = &[
    ("max_size", "max_file_size"),
    ("max-size", "max_file_size"),
    ("size", "max_file_size"),
    ("max_log_size", "max_file_size"),
    ("rotate_size", "max_file_size"),
    ("keep", "keep_files"),
    ("max_files", "keep_files"),
    ("max-file", "keep_files"),
    ("max_file", "keep_files"),
    ("rotate", "keep_files"),
    ("backups", "keep_files"),
];
const COORDINATION_SYNONYMS: &[(&str, &str)] = &[
    ("endpoints", "etcd"),
    ("etcd_endpoints", "etcd"),
    ("lease", "ttl"),
    ("lease_ttl", "ttl"),
    ("lock-delay", "lock_delay"),
    ("key_prefix", "prefix"),
];
const ETCD_TLS_SYNONYMS: &[(&str, &str)] = &[
    ("cacert", "ca"),
    ("ca_file", "ca"),
    ("trusted_ca_file", "ca"),
    ("cert_file", "cert"),
    ("certificate", "cert"),
    ("key_file", "key"),
];
const PLACEMENT_SYNONYMS: &[(&str, &str)] = &[
    ("nodes", "hosts"),
    ("on", "hosts"),
    ("replicas", "standbys"),
    ("standby", "standbys"),
];
const AUTH_SYNONYMS: &[(&str, &str)] = &[
    ("oauth2", "oauth"),
    ("oidc", "oauth"),
    ("client-credentials", "client_credentials"),
    ("m2m", "client_credentials"),
];
const OAUTH_SYNONYMS: &[(&str, &str)] = &[
    ("scope", "scopes"),
    ("client", "client_id"),
    ("secret", "client_secret"),
    ("authorization_server", "issuer"),
    ("port", "redirect_port"),
    ("callback_port", "redirect_port"),
    ("storage", "store"),
];
const TOOLS_SYNONYMS: &[(&str, &str)] = &[
    ("include", "allow"),
    ("only", "allow"),
    ("exclude", "deny"),
    ("block", "deny"),
];

/// The mappings whose keys the format defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Top,
    Defaults,
    Server,
    Restart,
    Backoff,
    Health,
    Gateway,
    Metrics,
    Supervisor,
    Coordination,
    EtcdTls,
    GatewayTls,
    Placement,
    Tools,
    Auth,
    OAuth,
    ClientCredentials,
}

impl Level {
    /// The keys accepted here, and synonyms users reach for.
    pub(super) fn keys(
        self,
    ) -> (
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
    ) {
        match self {
            Level::Top => (TOP_KEYS, &[]),
            Level::Defaults => (DEFAULTS_KEYS, &[]),
            Level::Server => (SERVER_KEYS, SERVER_SYNONYMS),
            Level::Restart => (RESTART_KEYS, RESTART_SYNONYMS),
            Level::Backoff => (BACKOFF_KEYS, BACKOFF_SYNONYMS),
            Level::Health => (HEALTH_KEYS, HEALTH_SYNONYMS),
            Level::Gateway => (GATEWAY_KEYS, GATEWAY_SYNONYMS),
            Level::Metrics => (METRICS_KEYS, GATEWAY_SYNONYMS),
            Level::Supervisor => (SUPERVISOR_KEYS, SUPERVISOR_SYNONYMS),
            Level::Coordination => (COORDINATION_KEYS, COORDINATION_SYNONYMS),
            Level::EtcdTls => (ETCD_TLS_KEYS, ETCD_TLS_SYNONYMS),
            Level::GatewayTls => (GATEWAY_TLS_KEYS, ETCD_TLS_SYNONYMS),
            Level::Placement => (PLACEMENT_KEYS, PLACEMENT_SYNONYMS),
            Level::Tools => (TOOLS_KEYS, TOOLS_SYNONYMS),
            Level::Auth => (AUTH_KEYS, AUTH_SYNONYMS),
            Level::OAuth => (OAUTH_KEYS, OAUTH_SYNONYMS),
            Level::ClientCredentials => (CLIENT_CREDENTIALS_KEYS, OAUTH_SYNONYMS),
        }
    }

    /// Whether `key` is one the validator handles at this level; every other
    /// key is reported by [`Validator::unknown_key`](super::walk::Validator::unknown_key).
    pub(super) fn knows(self, key: &str) -> bool {
        self.keys().0.contains(&key)
    }
}

/// The known key the user most likely meant, if any is close enough.
pub(super) fn suggestion(
    key: &str,
    known: &[&[&'static str]],
    synonyms: &[(&str, &'static str)],
) -> Option<&'static str> {
    if key.len() > 64 {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    if let Some((_, known)) = synonyms.iter().find(|(alias, _)| *alias == lower) {
        return Some(known);
    }
    known
        .iter()
        .flat_map(|list| list.iter())
        .map(|k| (edit_distance(&lower, k), *k))
        .filter(|(distance, k)| *distance <= (k.len() / 3).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// Edit distance in characters where swapping two neighbours counts as one
/// edit (optimal string alignment): `ulr` is one typo away from `url`.
fn edit_distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let server = &[SERVER_KEYS][..];
        assert_eq!(suggestion("comand", server, &[]), Some("command"));
        assert_eq!(suggestion("Command", server, &[]), Some("command"));
        assert_eq!(suggestion("arg", server, &[]), Some("args"));
        assert_eq!(suggestion("ulr", server, &[]), Some("url"));
        assert_eq!(
            suggestion("conect_timeout", server, &[]),
            Some("connect_timeout")
        );
        assert_eq!(
            suggestion("environment", server, SERVER_SYNONYMS),
            Some("env")
        );
        assert_eq!(suggestion("serveres", &[TOP_KEYS], &[]), Some("servers"));
        assert_eq!(suggestion("foo", server, &[]), None);
        assert_eq!(suggestion("image", server, SERVER_SYNONYMS), None);
        assert_eq!(suggestion("restarts", server, &[]), Some("restart"));
        assert_eq!(suggestion("idle_timout", server, &[]), Some("idle_timeout"));
        assert_eq!(
            suggestion("max_retries", &[RESTART_KEYS], RESTART_SYNONYMS),
            Some("max_restarts")
        );
        assert_eq!(
            suggestion("intervall", &[HEALTH_KEYS], &[]),
            Some("interval")
        );
        assert_eq!(
            suggestion("on_failure", &[RESTART_POLICIES], &[]),
            Some("on-failure")
        );
    }

    #[test]
    fn stdio_only_keys_are_server_keys() {
        for key in STDIO_ONLY_KEYS {
            assert!(SERVER_KEYS.contains(key), "{key}");
        }
        assert!(!STDIO_ONLY_KEYS.contains(&"command"));
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("args", "args"), 0);
        assert_eq!(edit_distance("ulr", "url"), 1);
        assert_eq!(edit_distance("cwd", ""), 3);
    }
}
