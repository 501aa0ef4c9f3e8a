//! Validation of a parsed fleet file into a [`Fleet`], collecting every error.
//!
//! This module owns the rules of format version 1: the values of each key (the
//! keys themselves are listed in `keys`, and `restart:`, `health:` and
//! `idle_timeout:` are checked in `policy`), names, `${env:}` expansion, the
//! working directory, and the URL and headers of a remote server. It walks the
//! whole tree even after an error, so that the user fixes a file in one round,
//! and records for each error the path of steps that `yaml::locate` turns into
//! a line and column (the walk itself is in `walk`). It reads the environment
//! only through the lookup it is given, and the file system only to check `cwd`
//! and to read the files of `env_file:`.
//!
//! This file holds the top level, `defaults:`, each server's assembly and names;
//! the values of a stdio server's keys are checked in `stdio.rs` (`env_file:`,
//! which reads files, in `env_file.rs`), those of a remote server's in
//! `remote.rs`.

use crate::config::spec::Placement;
use std::path::Path;

use super::duration::{DEFAULT_TIMEOUT, Timeout};
use super::expand::{ExpandError, Text, expand};
use super::keys::{Level, REMOTE_ONLY_KEYS, STDIO_ONLY_KEYS};
use super::policy::Policies;
use super::walk::{At, Entry, Issue, Validator};
use super::yaml::Node;
use super::{
    EnvFile, ExposeSpec, Fleet, GatewaySpec, HttpSpec, MetricsSpec, ServerSpec, StdioSpec,
    SupervisorSpec, Transport,
};

mod auth;
mod env_file;
mod gateway;
mod remote;
mod stdio;
mod supervisor;
mod coordination;
pub use coordination::ETCD_ENV;

pub use remote::{HEADER_NAME_PATTERN, URL_PATTERN};
pub(crate) use remote::{check_url, is_header_name, is_header_value};
pub use supervisor::{SIZE_PATTERN, parse_size};

/// Fleet and server names, as a regular expression (what [`is_name`] checks).
pub const NAME_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,62}$";
/// A duration where `none` makes no sense (backoff, window, health): a positive
/// whole number and a unit. Values too large for the parser also match it.
pub const DURATION_PATTERN: &str = "^0*[1-9][0-9]*(ms|s|m|h)$";
/// A deadline: a duration as [`DURATION_PATTERN`], or `none` for no deadline.
pub const TIMEOUT_PATTERN: &str = "^(0*[1-9][0-9]*(ms|s|m|h)|none)$";
/// Names of variables in `env:` and `${env:NAME}`.
pub const ENV_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";

/// The `defaults:` block; unset timeouts fall back to [`DEFAULT_TIMEOUT`].
#[derive(Default)]
struct Defaults {
    /// Read once here; each stdio server gets them before its own.
    env_files: Vec<EnvFile>,
    connect_timeout: Option<Timeout>,
    cleanup_timeout: Option<Timeout>,
    policies: Policies,
}

/// Validates the document `root` of the fleet file `file` (absolute).
/// `blank` says whether the text holds nothing but comments and whitespace;
/// `recorded`, that it is the copy recorded in a state directory (see
/// [`Validator::recorded`]).
pub(crate) fn validate(
    root: &Node,
    blank: bool,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    recorded: bool,
) -> Result<Fleet, Vec<Issue>> {
    let base_dir = file.parent().unwrap_or(Path::new("/"));
    let mut v = Validator {
        env,
        base_dir,
        issues: Vec::new(),
        recorded,
    };
    let fleet = v.fleet(root, blank, file);
    match fleet {
        Some(fleet) if v.issues.is_empty() => Ok(fleet),
        _ => Err(v.issues),
    }
}

impl Validator<'_> {
    fn fleet(&mut self, root: &Node, blank: bool, file: &Path) -> Option<Fleet> {
        let at = At::default();
        if blank {
            self.issues.push(Issue {
                steps: None,
                path: String::new(),
                message: "the file is empty; a fleet file needs `version: 1` and `servers`".into(),
                first: None,
            });
            return None;
        }
        let entries = self.mapping(root, &at, "a mapping at the top level")?;
        let mut has_version = false;
        let mut name = None;
        let mut defaults = Defaults::default();
        let mut servers = None;
        let mut gateway = GatewaySpec::default();
        let mut metrics = MetricsSpec::default();
        let mut supervisor = SupervisorSpec::default();
        let mut coordination = None;
        for entry in &entries {
            match entry.key.as_str() {
                "version" => {
                    has_version = true;
                    self.version(entry);
                }
                "name" => name = self.name(entry.value, &entry.value_at, "fleet name"),
                "defaults" => defaults = self.defaults(entry),
                "gateway" => gateway = self.gateway(entry),
                "metrics" => metrics = self.metrics(entry),
"supervisor" => supervisor = self.supervisor(entry),
                "coordination" => coordination = self.coordination(entry),
                "servers" => servers = Some(entry),
                // Unknown, or listed without a rule (the tests make sure there is none).
                _ => {
                    self.unknown_key(entry, Level::Top);
                }
            }
        }
        if !has_version {
            self.error(&at, "missing `version: 1`");
        }
        let Some(servers) = servers else {
            self.error(
                &at,
                "missing `servers`: a fleet file needs at least one server",
            );
            return None;
        };
        let servers = self.servers(servers, &defaults)?;
        Some(Fleet {
            file: file.to_path_buf(),
            name,
            servers,
            gateway,
            metrics,
            supervisor,
            coordination,
            notices: Vec::new(),
        })
    }

    fn version(&mut self, entry: &Entry) {
        match entry.value {
            Node::Number { raw } | Node::Str(raw) if raw == "1" => {}
            Node::Number { raw } | Node::Str(raw) => self.error(
                &entry.value_at,
                format!("unsupported version `{raw}`; this mcpfleet reads version 1"),
            ),
            other => self.expected(&entry.value_at, "the version number 1", other),
        }
    }

    fn name(&mut self, node: &Node, at: &At, what: &str) -> Option<String> {
        let Some(name) = node.scalar_text() else {
            self.expected(at, "a string", node);
            return None;
        };
        self.checked_name(name, at, what)
    }

    /// Fleet and server names become part of file and socket names.
    fn checked_name(&mut self, name: &str, at: &At, what: &str) -> Option<String> {
        if is_name(name) {
            return Some(name.to_string());
        }
        self.error(
            at,
            format!(
                "invalid {what} `{name}`: use 1 to 63 lowercase letters, digits, `-` and `_`, \
                 starting with a letter or digit (names become file and socket names)"
            ),
        );
        None
    }

    fn defaults(&mut self, entry: &Entry) -> Defaults {
        let mut defaults = Defaults::default();
        if matches!(entry.value, Node::Null) {
            return defaults;
        }
        let Some(entries) = self.mapping(entry.value, &entry.value_at, "a mapping") else {
            return defaults;
        };
        for e in &entries {
            match e.key.as_str() {
                key if !Level::Defaults.knows(key) => {
                    self.unknown_key(e, Level::Defaults);
                }
                "env_file" => defaults.env_files = self.env_file(e),
                "connect_timeout" => defaults.connect_timeout = self.timeout(e),
                "cleanup_timeout" => defaults.cleanup_timeout = self.timeout(e),
                "restart" => defaults.policies.restart = self.restart_block(e),
                "health" => defaults.policies.health = self.health_block(e),
                "idle_timeout" => defaults.policies.idle_timeout = self.idle_timeout(e),
                // A listed key without a rule; the tests make sure there is none.
                _ => {
                    self.unknown_key(e, Level::Defaults);
                }
            }
        }
        // Checked on their own, so that a conflict inside `defaults:` is reported
        // there once, not at every server that inherits it.
        self.resolve_policies(&defaults.policies, &Policies::default());
        defaults
    }

    /// A deadline: a duration or `none`.
    fn timeout(&mut self, entry: &Entry) -> Option<Timeout> {
        self.duration(entry, true)
    }

    fn servers(&mut self, entry: &Entry, defaults: &Defaults) -> Option<Vec<ServerSpec>> {
        let entries = self.mapping(
            entry.value,
            &entry.value_at,
            "a mapping of server names to servers",
        )?;
        if matches!(entry.value, Node::Map(pairs) if pairs.is_empty()) {
            self.error(&entry.value_at, "at least one server is required");
            return None;
        }
        let mut servers = Vec::with_capacity(entries.len());
        for e in &entries {
            let name = self.checked_name(&e.key, &e.key_at, "server name");
            if let Some(server) = self.server(e, name, defaults) {
                servers.push(server);
            }
        }
        Some(servers)
    }

    fn server(
        &mut self,
        entry: &Entry,
        name: Option<String>,
        defaults: &Defaults,
    ) -> Option<ServerSpec> {
        let entries = self.mapping(entry.value, &entry.value_at, "a mapping")?;
        let before = self.issues.len();
        let has = |key: &str| entries.iter().any(|e| e.key == key);
        // The keys of the other transport are refused, and their values left
        // unchecked, only when the server's transport is clear; with both or
        // neither, that is the one error.
        let remote_only = has("url") && !has("command");
        let stdio_only = has("command") && !has("url");
        let mut command_key = None;
        let mut command = None;
        let mut args = Vec::new();
        let mut env = Vec::new();
        let mut env_files = Vec::new();
        let mut cwd = None;
        let mut shell = false;
        let mut url_key = None;
        let mut url = None;
        let mut headers = Vec::new();
        let mut auth = None;
        let mut enabled = true;
        let mut connect_timeout = defaults.connect_timeout;
        let mut cleanup_timeout = defaults.cleanup_timeout;
        let mut policies = Policies::default();
        let mut placement = Placement::default();
        let mut expose = ExposeSpec::default();
        // A misspelled `command` is reported once, as a misspelling.
        let mut misspelled_transport = false;
        for e in &entries {
            match e.key.as_str() {
                key if !Level::Server.knows(key) => {
                    let suggested = self.unknown_key(e, Level::Server);
                    misspelled_transport |= matches!(suggested, Some("command" | "url"));
                }
                key if remote_only && STDIO_ONLY_KEYS.contains(&key) => self.error(
                    &e.key_at,
                    format!("`{key}` only applies to stdio servers (`command`)"),
                ),
                key if stdio_only && REMOTE_ONLY_KEYS.contains(&key) => self.error(
                    &e.key_at,
                    format!("`{key}` only applies to remote servers (`url`)"),
                ),
                "command" => {
                    command_key = Some(e.key_at.clone());
                    command = self.command(e);
                }
                "args" => args = self.args(e),
                "env" => env = self.env(e),
                "env_file" => env_files = self.env_file(e),
                "cwd" => cwd = self.cwd(e),
                "shell" => shell = self.boolean(e).unwrap_or(shell),
                "enabled" => enabled = self.boolean(e).unwrap_or(enabled),
                "connect_timeout" => connect_timeout = self.timeout(e),
                "cleanup_timeout" => cleanup_timeout = self.timeout(e),
                "restart" => policies.restart = self.restart_block(e),
                "health" => policies.health = self.health_block(e),
                "idle_timeout" => policies.idle_timeout = self.idle_timeout(e),
                "url" => {
                    url_key = Some(e.key_at.clone());
                    url = self.url(e);
                }
                "headers" => headers = self.headers(e),
                "auth" => auth = self.auth(e),
                "prefix" => self.prefix(e, &mut expose),
                "tools" => self.tools(e, &mut expose),
                "placement" => placement = self.placement(e),
                // A listed key without a rule; the tests make sure there is none.
                _ => {
                    self.unknown_key(e, Level::Server);
                }
            }
        }
        let resolved = self.resolve_policies(&policies, &defaults.policies);
        match (&command_key, &url_key) {
            (Some(_), Some(url)) => self.error(
                url,
                "a server has either `command` (stdio) or `url` (streamable HTTP), not both",
            ),
            (None, None) if misspelled_transport => {}
            (None, None) => self.error(
                &entry.key_at,
                "a server needs `command` (stdio) or `url` (streamable HTTP)",
            ),
            (Some(_), None) | (None, Some(_)) => {}
        }
        if self.issues.len() > before {
            return None;
        }
        let transport = match (command, url) {
            (Some(command), None) => Transport::Stdio(StdioSpec {
                command,
                args,
                env,
                env_files: defaults
                    .env_files
                    .iter()
                    .cloned()
                    .chain(env_files)
                    .collect(),
                cwd: cwd.unwrap_or_else(|| self.base_dir.to_path_buf()),
                shell,
            }),
            (None, Some(url)) => Transport::Http(HttpSpec {
                url,
                headers,
                auth,
            }),
            // Each of these was reported above.
            _ => return None,
        };
        Some(ServerSpec {
            name: name?,
            enabled,
            connect_timeout: connect_timeout.unwrap_or(DEFAULT_TIMEOUT),
            cleanup_timeout: cleanup_timeout.unwrap_or(DEFAULT_TIMEOUT),
            transport,
            restart: resolved.restart,
            health: resolved.health,
            idle_timeout: resolved.idle_timeout,
            expose,
            placement,
        })
    }

    fn boolean(&mut self, entry: &Entry) -> Option<bool> {
        match entry.value {
            Node::Bool { value, .. } => Some(*value),
            other => {
                self.expected(&entry.value_at, "a boolean (true or false)", other);
                None
            }
        }
    }

    /// A scalar as a string, with `${env:}` expanded.
    fn text(&mut self, node: &Node, at: &At) -> Option<Text> {
        let Some(template) = node.scalar_text() else {
            self.expected(at, "a string", node);
            return None;
        };
        match expand(template, self.env) {
            Ok(text) => Some(text),
            Err(errors)
                if self.recorded && errors.iter().all(|e| matches!(e, ExpandError::Missing(_))) =>
            {
                expand(template, &|name| Some((self.env)(name).unwrap_or_default())).ok()
            }
            Err(errors) => {
                for e in errors {
                    self.error(at, e.to_string());
                }
                None
            }
        }
    }
}

/// `^[a-z0-9][a-z0-9_-]{0,62}$`: safe in file names, socket paths and shells.
pub(crate) fn is_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::super::keys::RESTART_POLICIES;
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "0", "everything", "my-server_2", &"a".repeat(63)] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "A",
            "a.b",
            "a/b",
            "a b",
            "é",
            &"a".repeat(64),
            "..",
        ] {
            assert!(!is_name(bad), "{bad}");
        }
    }

    #[test]
    fn patterns_describe_the_rules() {
        // The patterns are checked against the parser in tests/it/schema.rs; here,
        // that they are the ones the messages and docs speak of.
        assert_eq!(NAME_PATTERN, "^[a-z0-9][a-z0-9_-]{0,62}$");
        assert!(TIMEOUT_PATTERN.contains(&DURATION_PATTERN[1..DURATION_PATTERN.len() - 1]));
        assert_eq!(RESTART_POLICIES.len(), super::super::RestartMode::ALL.len());
        for (name, mode) in RESTART_POLICIES.iter().zip(super::super::RestartMode::ALL) {
            assert_eq!(*name, mode.as_str());
        }
    }
}
