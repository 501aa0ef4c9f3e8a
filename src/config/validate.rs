//! Validation of a parsed fleet file into a [`Fleet`], collecting every error.
//!
//! This module owns the rules of format version 1: the values of each key (the
//! keys themselves are listed in `keys`, and `restart:`, `health:` and
//! `idle_timeout:` are checked in `policy`), names, `${env:}` expansion, the
//! working directory, and the URL and headers of a remote server. It walks the
//! whole tree even after an error, so that the user fixes a file in one round,
//! and records for each error the path of steps that `yaml::locate` turns into
//! a line and column (the walk itself is in `walk`). It reads the environment
//! only through the lookup it is given and the file system only to check `cwd`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::duration::{DEFAULT_TIMEOUT, Timeout};
use super::expand::{Text, expand, is_env_name};
use super::keys::{Level, STDIO_ONLY_KEYS};
use super::policy::Policies;
use super::walk::{At, Entry, Issue, Validator};
use super::yaml::{Node, Step};
use super::{Fleet, HttpSpec, ServerSpec, StdioSpec, Transport};

/// Fleet and server names, as a regular expression (what [`is_name`] checks).
pub const NAME_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,62}$";
/// A duration where `none` makes no sense (backoff, window, health): a positive
/// whole number and a unit. Values too large for the parser also match it.
pub const DURATION_PATTERN: &str = "^0*[1-9][0-9]*(ms|s|m|h)$";
/// A deadline: a duration as [`DURATION_PATTERN`], or `none` for no deadline.
pub const TIMEOUT_PATTERN: &str = "^(0*[1-9][0-9]*(ms|s|m|h)|none)$";
/// Names of variables in `env:` and `${env:NAME}`.
pub const ENV_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";
/// Names in `headers:`: an HTTP token (one or more RFC 7230 `tchar`).
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
/// How a `url` may start as written: `http://`, `https://`, or a `${env:NAME}`
/// that expands to one. The validator checks more, on the expanded value: a
/// host, a port from 1 to 65535, no spaces or control characters.
pub const URL_PATTERN: &str = "^(https?://|\\$\\{env:[A-Za-z_][A-Za-z0-9_]*\\})";

/// The `defaults:` block; unset timeouts fall back to [`DEFAULT_TIMEOUT`].
#[derive(Default)]
struct Defaults {
    connect_timeout: Option<Timeout>,
    cleanup_timeout: Option<Timeout>,
    policies: Policies,
}

/// Validates the document `root` of the fleet file `file` (absolute).
/// `blank` says whether the text holds nothing but comments and whitespace.
pub(crate) fn validate(
    root: &Node,
    blank: bool,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, Vec<Issue>> {
    let base_dir = file.parent().unwrap_or(Path::new("/"));
    let mut v = Validator {
        env,
        base_dir,
        issues: Vec::new(),
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
        for entry in &entries {
            match entry.key.as_str() {
                "version" => {
                    has_version = true;
                    self.version(entry);
                }
                "name" => name = self.name(entry.value, &entry.value_at, "fleet name"),
                "defaults" => defaults = self.defaults(entry),
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
        let mut cwd = None;
        let mut shell = false;
        let mut url_key = None;
        let mut url = None;
        let mut headers = Vec::new();
        let mut enabled = true;
        let mut connect_timeout = defaults.connect_timeout;
        let mut cleanup_timeout = defaults.cleanup_timeout;
        let mut policies = Policies::default();
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
                "headers" if stdio_only => self.error(
                    &e.key_at,
                    "`headers` only applies to remote servers (`url`)",
                ),
                "command" => {
                    command_key = Some(e.key_at.clone());
                    command = self.command(e);
                }
                "args" => args = self.args(e),
                "env" => env = self.env(e),
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
                cwd: cwd.unwrap_or_else(|| self.base_dir.to_path_buf()),
                shell,
            }),
            (None, Some(url)) => Transport::Http(HttpSpec { url, headers }),
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
            Err(errors) => {
                for e in errors {
                    self.error(at, e.to_string());
                }
                None
            }
        }
    }

    fn command(&mut self, entry: &Entry) -> Option<Text> {
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() {
            let message = match &text.template {
                None => "`command` must not be empty".to_string(),
                Some(t) => format!("`command` is empty once `{t}` is expanded"),
            };
            self.error(&entry.value_at, message);
            return None;
        }
        Some(text)
    }

    fn args(&mut self, entry: &Entry) -> Vec<Text> {
        let items = match entry.value {
            Node::Null => return Vec::new(),
            Node::Seq(items) => items,
            Node::Str(_) => {
                self.error(
                    &entry.value_at,
                    "expected a sequence of strings, found a string; write one item per argument, \
                     like [\"-y\", \"some-package\"]",
                );
                return Vec::new();
            }
            other => {
                self.expected(&entry.value_at, "a sequence of strings", other);
                return Vec::new();
            }
        };
        let mut args = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if let Some(text) = self.text(item, &entry.value_at.item(i)) {
                args.push(text);
            }
        }
        args
    }

    fn env(&mut self, entry: &Entry) -> Vec<(String, Text)> {
        let entries = match entry.value {
            Node::Null => return Vec::new(),
            Node::Seq(_) => {
                self.error(
                    &entry.value_at,
                    "expected a mapping of variable names to values, found a sequence; \
                     write `env: {NAME: value}`",
                );
                return Vec::new();
            }
            node => self.mapping(
                node,
                &entry.value_at,
                "a mapping of variable names to values",
            ),
        };
        let mut env = Vec::new();
        for e in entries.iter().flatten() {
            if !is_env_name(&e.key) {
                self.error(
                    &e.key_at,
                    format!(
                        "`{}` is not a valid environment variable name \
                         (letters, digits and _, not starting with a digit)",
                        e.key
                    ),
                );
                continue;
            }
            if let Some(text) = self.text(e.value, &e.value_at) {
                env.push((e.key.clone(), text));
            }
        }
        env
    }

    fn cwd(&mut self, entry: &Entry) -> Option<PathBuf> {
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() {
            self.error(
                &entry.value_at,
                "`cwd` must not be empty; leave it out for the fleet file's directory",
            );
            return None;
        }
        let joined = self.base_dir.join(&text.value);
        // A path built from the environment is shown as its template.
        let shown = match &text.template {
            Some(template) => template.clone(),
            None => joined.display().to_string(),
        };
        match std::fs::canonicalize(&joined) {
            Ok(path) if path.is_dir() => Some(path),
            Ok(_) => {
                self.error(&entry.value_at, format!("`{shown}` is not a directory"));
                None
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.error(
                    &entry.value_at,
                    format!("directory `{shown}` does not exist"),
                );
                None
            }
            Err(e) => {
                self.error(
                    &entry.value_at,
                    format!("cannot use directory `{shown}`: {e}"),
                );
                None
            }
        }
    }

    /// The URL of a remote server, checked once expanded; a message quotes the
    /// URL as written, so that a secret expanded into it is never shown.
    fn url(&mut self, entry: &Entry) -> Option<Text> {
        let text = self.text(entry.value, &entry.value_at)?;
        let message = match (&text.template, check_url(&text.value)) {
            (_, Ok(())) => return Some(text),
            (None, Err(_)) if text.value.is_empty() => "`url` must not be empty".to_string(),
            (Some(t), Err(_)) if text.value.is_empty() => {
                format!("`url` is empty once `{t}` is expanded")
            }
            (None, Err(why)) => format!("`{}` is not a valid URL: {why}", text.value),
            (Some(t), Err(why)) => format!("`{t}` is not a valid URL once expanded: {why}"),
        };
        self.error(&entry.value_at, message);
        None
    }

    fn headers(&mut self, entry: &Entry) -> Vec<(String, Text)> {
        let entries = match entry.value {
            Node::Null => return Vec::new(),
            Node::Seq(_) => {
                self.error(
                    &entry.value_at,
                    "expected a mapping of header names to values, found a sequence; \
                     write `headers: {Name: value}`",
                );
                return Vec::new();
            }
            node => self.mapping(node, &entry.value_at, "a mapping of header names to values"),
        };
        let mut headers = Vec::new();
        // Lowercased name -> where it was first written.
        let mut seen: HashMap<String, Vec<Step>> = HashMap::new();
        for e in entries.iter().flatten() {
            if !is_header_name(&e.key) {
                self.error(
                    &e.key_at,
                    format!(
                        "`{}` is not a valid HTTP header name \
                         (letters, digits and !#$%&'*+-.^_`|~)",
                        e.key
                    ),
                );
                continue;
            }
            let lower = e.key.to_ascii_lowercase();
            if let Some(first) = seen.get(&lower) {
                self.issues.push(Issue {
                    steps: Some(e.key_at.steps.clone()),
                    path: e.key_at.path.clone(),
                    message: format!(
                        "duplicate header `{}`; header names are case-insensitive",
                        e.key
                    ),
                    first: Some(first.clone()),
                });
                continue;
            }
            seen.insert(lower, e.key_at.steps.clone());
            let Some(text) = self.text(e.value, &e.value_at) else {
                continue;
            };
            if !is_header_value(&text.value) {
                let message = match &text.template {
                    None => format!(
                        "the value of header `{}` contains a line break or another control \
                         character, which HTTP does not allow",
                        e.key
                    ),
                    Some(t) => format!(
                        "the value of header `{}` contains a line break or another control \
                         character once `{t}` is expanded, which HTTP does not allow",
                        e.key
                    ),
                };
                self.error(&e.value_at, message);
                continue;
            }
            headers.push((e.key.clone(), text));
        }
        headers
    }
}

/// Whether `url` is an absolute `http://` or `https://` URL with a host (and, if
/// given, a port from 1 to 65535); the reason when it is not. The reason never
/// quotes the URL, which may hold a secret.
pub(crate) fn check_url(url: &str) -> Result<(), &'static str> {
    // The `url` crate has the last word: it is how the HTTP client reads the URL,
    // so what passes here is what the client connects to, and `remote` can find
    // the user info and query values to hide. It cannot be the only check: it
    // reads a URL as a browser does and repairs what it can, so that `HTTP://h`,
    // `http:/h`, ` http://h`, `https:///mcp` (host `mcp`), `http://a\b/` (host
    // `a`), `http://h:` and `http://h:0` pass, and tabs and line breaks vanish. A
    // fleet file connects to what it says, so the text as written is checked
    // first, which also gives the reasons their words.
    const PORT: &str = "the port must be a number from 1 to 65535";
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err("it must start with `http://` or `https://`");
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains a space or a control character");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Credentials (`user:password@`) are the client's business, not the host's.
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let port = if let Some(bracketed) = host_port.strip_prefix('[') {
        let Some((_, after)) = bracketed.split_once(']') else {
            return Err("the IPv6 address is not closed with `]`");
        };
        match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return Err("only a `:port` may follow the IPv6 address"),
            },
        }
    } else {
        let (host, port) = match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        };
        if host.is_empty() {
            return Err("it has no host");
        }
        let host_char =
            |c: char| !c.is_ascii() || c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=%".contains(c);
        if !host.chars().all(host_char) {
            return Err("the host contains a character that a host name cannot have");
        }
        port
    };
    if port == Some("") {
        return Err(PORT);
    }
    let parsed = url::Url::parse(url).map_err(|e| match e {
        url::ParseError::EmptyHost => "it has no host",
        url::ParseError::InvalidPort => PORT,
        url::ParseError::InvalidIpv6Address => "the host in `[...]` is not an IPv6 address",
        url::ParseError::InvalidIpv4Address => "the host is not a valid IPv4 address",
        _ => "the host is not a valid host name",
    })?;
    if parsed.port() == Some(0) {
        return Err(PORT);
    }
    Ok(())
}

/// An HTTP header name: one or more RFC 7230 `tchar`s.
pub(crate) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// An HTTP header value: no control character but tab (so no CR, LF or NUL,
/// which would end the header or the request early).
fn is_header_value(value: &str) -> bool {
    !value.chars().any(|c| (c < ' ' && c != '\t') || c == '\x7f')
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
        // The patterns are checked against the parser in tests/schema.rs; here,
        // that they are the ones the messages and docs speak of.
        assert_eq!(NAME_PATTERN, "^[a-z0-9][a-z0-9_-]{0,62}$");
        assert!(TIMEOUT_PATTERN.contains(&DURATION_PATTERN[1..DURATION_PATTERN.len() - 1]));
        assert_eq!(RESTART_POLICIES.len(), super::super::RestartMode::ALL.len());
        for (name, mode) in RESTART_POLICIES.iter().zip(super::super::RestartMode::ALL) {
            assert_eq!(*name, mode.as_str());
        }
    }

    #[test]
    fn urls() {
        for ok in [
            "http://h",
            "https://example.org/mcp",
            "http://127.0.0.1:3001/mcp",
            "http://localhost:1",
            "https://h:65535/a?b=c#d",
            "http://user:pa%20ss@h/mcp",
            "http://[::1]:8080/mcp",
            "http://[2001:db8::1]",
            "http://[::ffff:127.0.0.1]/",
            "https://bücher.example/mcp",
            "http://h?x",
            "http://h#x",
            "http://my_host.local./x",
        ] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
        let scheme = Err("it must start with `http://` or `https://`");
        let host = Err("it has no host");
        let port = Err("the port must be a number from 1 to 65535");
        let space = Err("it contains a space or a control character");
        let host_char = Err("the host contains a character that a host name cannot have");
        for (bad, why) in [
            ("", scheme),
            ("h/mcp", scheme),
            ("localhost:3001/mcp", scheme),
            ("ftp://h", scheme),
            ("HTTP://h", scheme),
            ("http:/h", scheme),
            (" http://h", scheme),
            ("ws://h", scheme),
            ("http://", host),
            ("https:///mcp", host),
            ("http://?q", host),
            ("http://#f", host),
            ("http://:80/", host),
            ("http://user@/mcp", host),
            ("http://h:", port),
            ("http://h:0", port),
            ("http://h:65536", port),
            ("http://h:080000", port),
            ("http://h:x", port),
            ("http://h:80:90", port),
            ("http://h:-1", port),
            ("http://h /mcp", space),
            ("http://h/m cp", space),
            ("http://h/\r\nX: y", space),
            ("http://h\0", space),
            ("http://h/\t", space),
            ("http://h<x>/", host_char),
            ("http://a\"b/", host_char),
            ("http://a\\b/", host_char),
            ("http://a{b}/", host_char),
            (
                "http://[::1/",
                Err("the IPv6 address is not closed with `]`"),
            ),
            (
                "http://[]/",
                Err("the host in `[...]` is not an IPv6 address"),
            ),
            (
                "http://[h]/",
                Err("the host in `[...]` is not an IPv6 address"),
            ),
            ("http://[::1]:0/", port),
            (
                "http://[::1]x/",
                Err("only a `:port` may follow the IPv6 address"),
            ),
        ] {
            assert_eq!(check_url(bad), why, "{bad:?}");
        }
    }

    #[test]
    fn urls_the_http_client_would_refuse_are_refused() {
        for (bad, why) in [
            ("http://1.2.3.999/", "the host is not a valid IPv4 address"),
            (
                "http://[:::]/",
                "the host in `[...]` is not an IPv6 address",
            ),
            (
                "http://[1:2]/",
                "the host in `[...]` is not an IPv6 address",
            ),
            ("http://xn--a/mcp", "the host is not a valid host name"),
            ("http://a%3Cb/", "the host is not a valid host name"),
        ] {
            assert_eq!(check_url(bad), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn header_names_and_values() {
        for ok in [
            "Authorization",
            "x-api-key",
            "X_Custom.1",
            "!#$%&'*+-.^_`|~",
            "0",
        ] {
            assert!(is_header_name(ok), "{ok}");
        }
        for bad in [
            "", "X Y", "X:Y", "X\r\n", "(x)", "a,b", "a/b", "a@b", "é", "a\"", "{a}", "a;b", "a=b",
            "a?", "[a]", "a\\b", "\t", "\u{7f}",
        ] {
            assert!(!is_header_name(bad), "{bad:?}");
        }
        for ok in ["", "Bearer x", "a\tb", "ünïcode", "\u{80}", "\u{85}"] {
            assert!(is_header_value(ok), "{ok:?}");
        }
        for bad in [
            "a\rb", "a\nb", "a\0b", "\r\n", "a\u{1}", "a\u{1b}", "a\u{7f}",
        ] {
            assert!(!is_header_value(bad), "{bad:?}");
        }
    }
}
