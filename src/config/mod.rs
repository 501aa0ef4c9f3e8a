//! The fleet file: finding it, reading it, validating it into a [`Fleet`].
//!
//! This module owns format version 1 of `mcpfleet.yaml` (docs/design.md §7) and turns it
//! into plain validated values that the rest of the crate runs on; nothing
//! downstream sees YAML. It reports every error of a file at once, each with
//! line, column and key path, and it is where `${env:NAME}` is expanded, into a
//! [`Text`] that shows its template instead of the secret (docs/design.md §6). It never
//! starts processes and never prints; reading the file, the environment through
//! the lookup it is given, and checking `cwd` directories are its only effects.
//!
//! An MCP client's configuration (`.mcp.json` and the like) is read through
//! [`import`], which maps it to the same fleet (docs/design.md §15).
//!
//! The keys and patterns the validator accepts are public ([`SERVER_KEYS`],
//! [`DURATION_PATTERN`], …) so that the JSON Schema in `config/` can be tested
//! against the very lists the validator uses.
//!
//! ```text
//! text ──yaml::parse──▶ Node tree ──validate──▶ Fleet
//!   │                                  │ issues (key paths + steps)
//!   └────────────yaml::locate──────────┴──▶ ConfigErrors (line:column, sorted)
//! ```

mod definition;
mod dotenv;
mod find;
mod load;
mod parse;
mod read;
mod spec;
pub(crate) mod duration;
mod error;
mod expand;
pub(crate) mod import;
mod keys;
mod policy;
mod render;
mod validate;
mod walk;
mod yaml;

#[cfg(test)]
mod tests;
#[cfg(test)]
use find::{candidate_below, discover_below};
#[cfg(test)]
use parse::locate_budget;

pub use definition::{DEFINITION_KEYS, Definition, SETTING_KEYS, changed_settings};
pub use duration::{DEFAULT_TIMEOUT, DurationError, Timeout, parse_duration};
pub use error::{ConfigError, ConfigErrors};
pub use expand::{ExpandError, Text};
pub use keys::{
    AUTH_KEYS, BACKOFF_KEYS, CLIENT_CREDENTIALS_KEYS, COORDINATION_KEYS, ETCD_TLS_KEYS, GATEWAY_TLS_KEYS, PLACEMENT_KEYS, DEFAULTS_KEYS, GATEWAY_KEYS, HEALTH_KEYS,
    METRICS_KEYS, OAUTH_KEYS, REMOTE_ONLY_KEYS, RESTART_KEYS, RESTART_POLICIES, SERVER_KEYS,
    STDIO_ONLY_KEYS, SUPERVISOR_KEYS, TOKEN_STORES, TOOLS_KEYS, TOP_KEYS,
};
pub(crate) use validate::is_name;

/// What a build without the `etcd` feature says of a fleet file with
/// `coordination:`.
pub const NO_ETCD: &str = "this fleet file has `coordination:` (a fleet that spans hosts), but this mcpfleet was built without etcd support; install it with `cargo install mcpfleet --features etcd` (it needs protoc)";
pub use validate::{
    ETCD_ENV,
    DURATION_PATTERN, ENV_NAME_PATTERN, HEADER_NAME_PATTERN, NAME_PATTERN, SIZE_PATTERN,
    TIMEOUT_PATTERN, URL_PATTERN, parse_size,
};
pub use find::{
    Candidate, DEFAULT_FILE_NAME, DEFAULT_FILE_NAMES, FILE_ENV_VAR, Named, candidate,
    default_candidates, discover, none_found,
};
pub use load::{load, load_text, load_text_from_env, recordable};
pub use parse::{load_recorded, load_str};
pub use read::{MAX_FILE_BYTES, read};
pub use spec::{
    AuthSpec, ClientCredentialsSpec, EnvFile, ExposeSpec, Fleet, GatewaySpec, HealthCheck, HttpSpec, MAX_CAP, MetricsSpec,
    OAuthSpec, CoordinationSpec, EtcdTls, GatewayTls, Placement, RestartMode, RestartPolicy, Rotation, ServerSpec, StdioSpec, SupervisorSpec, TokenBackend, Transport,
};
