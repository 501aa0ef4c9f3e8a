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
pub mod duration;
mod error;
mod expand;
pub mod import;
mod keys;
mod policy;
mod render;
mod validate;
mod walk;
mod yaml;

#[cfg(test)]
mod tests;

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use definition::{DEFINITION_KEYS, Definition, SETTING_KEYS, changed_settings};
pub use duration::{DEFAULT_TIMEOUT, DurationError, Timeout, parse_duration};
pub use error::{ConfigError, ConfigErrors};
pub use expand::{ExpandError, Text};
pub use keys::{
    BACKOFF_KEYS, DEFAULTS_KEYS, GATEWAY_KEYS, HEALTH_KEYS, METRICS_KEYS, RESTART_KEYS,
    RESTART_POLICIES, SERVER_KEYS, STDIO_ONLY_KEYS, SUPERVISOR_KEYS, TOOLS_KEYS, TOP_KEYS,
};
pub(crate) use validate::is_name;
pub use validate::{
    DURATION_PATTERN, ENV_NAME_PATTERN, HEADER_NAME_PATTERN, NAME_PATTERN, SIZE_PATTERN,
    TIMEOUT_PATTERN, URL_PATTERN, parse_size,
};

/// The name looked for, first, in the current directory and above it when no
/// file is named (then `mcpfleet.yml`).
pub const DEFAULT_FILE_NAME: &str = "mcpfleet.yaml";
/// The environment variable that names the fleet file.
pub const FILE_ENV_VAR: &str = "MCPFLEET_FILE";
/// Far beyond any real fleet file; it bounds the time and memory spent on a
/// wrong file (a log, a binary) passed by mistake.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

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
    /// What the user should be told about the file, one line each: for an MCP
    /// client's file read with `-f`, the servers renamed and the entries not
    /// carried over (docs/design.md §15). Empty for a fleet file.
    pub notices: Vec<String>,
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
}

/// How the fleet file was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// With `-f/--file`.
    Flag,
    /// With `$MCPFLEET_FILE`.
    Env,
    /// Not at all: looked for in the current directory and its parents.
    Default,
}

/// The fleet file that is meant, whether or not it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Absolute when `cwd` was.
    pub path: PathBuf,
    pub named: Named,
    /// What the search for it passed over, to be said on stderr: the
    /// `mcpfleet.yml` beside the `mcpfleet.yaml` it took, files of other users.
    pub notices: Vec<String>,
}

/// The names looked for when no file is named, in the order they are preferred.
pub const DEFAULT_FILE_NAMES: [&str; 2] = [DEFAULT_FILE_NAME, "mcpfleet.yml"];

/// Which fleet file is meant, whether or not it exists: explicit -f path, else
/// $MCPFLEET_FILE, else the nearest `mcpfleet.yaml` or `mcpfleet.yml` in `cwd` or
/// a directory above it, up to the file system's root, as docker compose looks
/// for its file (docs/design.md §7); when there is none, `cwd/mcpfleet.yaml`.
/// Relative paths are taken from `cwd`. An empty `MCPFLEET_FILE` counts as unset,
/// as shells make unsetting awkward.
pub fn candidate(explicit: Option<&Path>, env_file: Option<&OsStr>, cwd: &Path) -> Candidate {
    candidate_below(explicit, env_file, cwd, None)
}

/// [`candidate`], looking no higher than `ceiling` (tests keep to their own
/// temporary directory with it).
fn candidate_below(
    explicit: Option<&Path>,
    env_file: Option<&OsStr>,
    cwd: &Path,
    ceiling: Option<&Path>,
) -> Candidate {
    let (path, named) = match (explicit, env_file.filter(|f| !f.is_empty())) {
        (Some(path), _) => (cwd.join(path), Named::Flag),
        (None, Some(path)) => (cwd.join(path), Named::Env),
        (None, None) => return look_up(cwd, ceiling),
    };
    Candidate {
        path,
        named,
        notices: Vec::new(),
    }
}

/// The nearest default fleet file at or above `cwd`. Above `cwd`, a file that
/// belongs to another user (neither this one nor root) is passed over with a
/// notice: anyone may write `/tmp/mcpfleet.yaml`, and its commands would run as
/// this user.
fn look_up(cwd: &Path, ceiling: Option<&Path>) -> Candidate {
    use std::os::unix::fs::MetadataExt;
    let me = crate::platform::euid();
    let mut notices = Vec::new();
    for dir in cwd.ancestors() {
        let mut found = DEFAULT_FILE_NAMES
            .iter()
            .map(|name| dir.join(name))
            .filter_map(|path| std::fs::metadata(&path).ok().map(|meta| (path, meta)))
            .filter(|(path, meta)| {
                let owner = meta.uid();
                let foreign = dir != cwd && owner != me && owner != 0;
                if foreign {
                    notices.push(format!(
                        "passed over {}: it belongs to user {owner}, not to you (name it with -f/--file to use it)",
                        path.display()
                    ));
                }
                !foreign
            })
            .map(|(path, _)| path);
        if let Some(path) = found.next() {
            if found.next().is_some() {
                notices.push(format!(
                    "both {} and {} are in {}; using {}",
                    DEFAULT_FILE_NAMES[0],
                    DEFAULT_FILE_NAMES[1],
                    dir.display(),
                    path.display()
                ));
            }
            return Candidate {
                path,
                named: Named::Default,
                notices,
            };
        }
        if Some(dir) == ceiling {
            break;
        }
    }
    Candidate {
        path: cwd.join(DEFAULT_FILE_NAME),
        named: Named::Default,
        notices,
    }
}

/// Every file the search of [`candidate`] would take from `cwd`, nearest first:
/// where to look for the state directory's copy of a default fleet file that is
/// gone.
pub fn default_candidates(cwd: &Path) -> Vec<PathBuf> {
    cwd.ancestors()
        .flat_map(|dir| DEFAULT_FILE_NAMES.iter().map(move |name| dir.join(name)))
        .collect()
}

/// What to say when no file was named and none was found from `cwd`.
pub fn none_found(cwd: &Path) -> String {
    format!(
        "no {} or {} in {} or any directory above it; name a fleet file with -f/--file or {FILE_ENV_VAR}",
        DEFAULT_FILE_NAMES[0],
        DEFAULT_FILE_NAMES[1],
        cwd.display()
    )
}

/// Where the fleet file is ([`candidate`]); an error when it does not exist.
pub fn discover(
    explicit: Option<&Path>,
    env_file: Option<&OsStr>,
    cwd: &Path,
) -> Result<Candidate, ConfigErrors> {
    discover_below(explicit, env_file, cwd, None)
}

fn discover_below(
    explicit: Option<&Path>,
    env_file: Option<&OsStr>,
    cwd: &Path,
    ceiling: Option<&Path>,
) -> Result<Candidate, ConfigErrors> {
    let found = candidate_below(explicit, env_file, cwd, ceiling);
    let missing = match found.named {
        Named::Flag => "the fleet file given with -f/--file does not exist".to_string(),
        Named::Env => format!("the fleet file named by {FILE_ENV_VAR} does not exist"),
        Named::Default => none_found(cwd),
    };
    match std::fs::metadata(&found.path) {
        Ok(meta) if meta.is_dir() => Err(ConfigErrors::single(
            found.path,
            "this is a directory, not a fleet file",
        )),
        Ok(_) => Ok(found),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut message = missing;
            for notice in &found.notices {
                message.push_str("; ");
                message.push_str(notice);
            }
            Err(ConfigErrors::single(found.path, message))
        }
        Err(e) => Err(ConfigErrors::single(
            found.path,
            format!("cannot read the fleet file: {e}"),
        )),
    }
}

/// Reads and validates a fleet file; `env` looks up `${env:NAME}`. An MCP
/// client's configuration (`*.json`, or text that starts with `{` and has no
/// `version`) is read through [`import`], as `mcpfleet import` maps it.
pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Fleet, ConfigErrors> {
    load_text(&read(path)?, path, env)
}

/// Validates the text of a fleet file read from `path`: an MCP client's
/// configuration (see [`load`]) through [`import`], else as YAML.
pub fn load_text(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    if import::is_client_file(path, text) {
        return import::load_client_file(text, path, env);
    }
    load_str(text, path, env)
}

/// What a state directory keeps as the copy of the fleet file at `path` whose
/// text is `text`: the text itself, or for an MCP client's JSON file the fleet
/// file that `import` makes of it, whose secrets are `${env:NAME}` templates
/// (the client's file may hold them literally; docs/design.md §15).
pub fn recordable(path: &Path, text: &str) -> String {
    if import::is_client_file(path, text)
        && let Ok(imported) = import::parse(text, path)
    {
        return imported.fleet_file();
    }
    text.to_owned()
}

/// The text of a fleet file, as [`load`] reads it: at most [`MAX_FILE_BYTES`],
/// UTF-8 (an error says where it is not).
pub fn read(path: &Path) -> Result<String, ConfigErrors> {
    read_text(path, "fleet file")
}

/// The text of a file of at most [`MAX_FILE_BYTES`], valid UTF-8; `what` names
/// the file in the message when it cannot be read.
fn read_text(path: &Path, what: &str) -> Result<String, ConfigErrors> {
    let cannot_read =
        |e: std::io::Error| ConfigErrors::single(path, format!("cannot read the {what}: {e}"));
    let file = std::fs::File::open(path).map_err(cannot_read)?;
    let mut bytes = Vec::new();
    // One byte more than allowed tells "too large" apart from "exactly the limit".
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_large(path));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.as_bytes();
            let (line, column) =
                yaml::line_column(&String::from_utf8_lossy(&bytes[..valid]), valid);
            Err(ConfigErrors {
                file: path.to_path_buf(),
                errors: vec![ConfigError {
                    line: Some(line),
                    column: Some(column),
                    path: String::new(),
                    message: "the file is not valid UTF-8".into(),
                }],
            })
        }
    }
}

/// Validates the copy of a fleet file recorded in a state directory, which stands
/// in for the file `path` when it is gone (docs/design.md §3, "State directory").
/// Values from the environment and `cwd` are not checked: they serve to name the
/// servers that may still run, not to start them. Errors name `copy`, the file
/// the text was read from.
pub fn load_recorded(
    text: &str,
    path: &Path,
    copy: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    validate_text(text, path, copy, env, true)
}

/// Validates the text of a fleet file; `path` is where it came from (used for
/// messages, as the fleet's identity and as the base of relative `cwd`).
pub fn load_str(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    validate_text(text, path, path, env, false)
}

/// Validates `text`, the fleet file `path` (or its recorded copy, when
/// `recorded`); errors name `shown`.
fn validate_text(
    text: &str,
    path: &Path,
    shown: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    recorded: bool,
) -> Result<Fleet, ConfigErrors> {
    if text.len() > MAX_FILE_BYTES {
        return Err(too_large(shown));
    }
    // Editors do not count a byte order mark as a column, and libyaml misreads
    // a document that starts with one.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = yaml::parse(text).map_err(|e| ConfigErrors {
        file: shown.to_path_buf(),
        errors: vec![ConfigError {
            line: e.line,
            column: e.column,
            path: String::new(),
            message: one_line(&e.message),
        }],
    })?;
    let file = absolute(path);
    validate::validate(&root, is_blank(text), &file, env, recorded).map_err(|issues| ConfigErrors {
        file: shown.to_path_buf(),
        errors: locate_all(text, issues),
    })
}

fn too_large(path: &Path) -> ConfigErrors {
    ConfigErrors::single(
        path,
        format!(
            "the file is larger than {} KiB; a fleet file is a small YAML file",
            MAX_FILE_BYTES / 1024
        ),
    )
}

/// Nothing but whitespace, comments and document markers: the user has not
/// started writing the file, which deserves a friendlier word than "found null".
fn is_blank(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim_start_matches('\u{feff}').trim();
        line.is_empty() || line.starts_with('#') || line == "---" || line == "..."
    })
}

/// The fleet's identity must not depend on how the file was named.
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Messages quote keys and values from the file; a line break in one of them
/// must not break the one-line-per-error report (or forge a line of it).
fn one_line(message: &str) -> String {
    if !message.chars().any(char::is_control) {
        return message.to_string();
    }
    message
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// Bytes of YAML that locating may parse in total: it takes one parse per error,
/// which for a large file (a wrong file passed by mistake) adds up to minutes.
const LOCATE_BUDGET_BYTES: usize = 16 * 1024 * 1024;

/// How many errors of a text of `len` bytes get a position.
fn locate_budget(len: usize) -> usize {
    (LOCATE_BUDGET_BYTES / len.max(1)).clamp(10, error::MAX_SHOWN)
}

/// Gives issues their positions and sorts them. Only the first ones get a
/// position: at most [`error::MAX_SHOWN`], fewer in a large file; the others
/// follow in the order they were found.
fn locate_all(text: &str, issues: Vec<walk::Issue>) -> Vec<ConfigError> {
    let budget = locate_budget(text.len());
    let mut located: Vec<ConfigError> = Vec::with_capacity(issues.len());
    for (i, issue) in issues.into_iter().enumerate() {
        let in_budget = i < budget;
        let position = match &issue.steps {
            Some(steps) if in_budget => yaml::locate(text, steps),
            _ => None,
        };
        let mut message = issue.message;
        if let Some(first) = issue.first.filter(|_| in_budget)
            && let Some((line, _)) = yaml::locate(text, &first)
        {
            message.push_str(&format!(" (first defined on line {line})"));
        }
        located.push(ConfigError {
            line: position.map(|p| p.0),
            column: position.map(|p| p.1),
            path: issue.path,
            message: one_line(&message),
        });
    }
    let sorted = located.len().min(budget);
    located[..sorted].sort_by_key(|e| (e.line.unwrap_or(usize::MAX), e.column.unwrap_or(0)));
    located
}
