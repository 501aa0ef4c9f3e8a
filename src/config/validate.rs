//! Validation of a parsed fleet file into a [`Fleet`], collecting every error.
//!
//! This module owns the rules of format version 1: which keys exist, their types,
//! names, durations, `${env:}` expansion and the working directory. It walks the
//! whole tree even after an error, so that the user fixes a file in one round,
//! and records for each error the path of steps that `yaml::locate` turns into a
//! line and column. It reads the environment only through the lookup it is given
//! and the file system only to check `cwd`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::duration::{self, DEFAULT_TIMEOUT, Timeout};
use super::expand::{Text, expand, is_env_name};
use super::yaml::{Node, Step};
use super::{Fleet, ServerSpec, StdioSpec, Transport};

/// An error before it has a position.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Issue {
    /// How to reach the node from the root; `None` for an error of the whole text.
    pub steps: Option<Vec<Step>>,
    pub path: String,
    pub message: String,
    /// Another node the message refers to (the first of duplicate keys); its
    /// line is added to the message once known.
    pub first: Option<Vec<Step>>,
}

const TOP_KEYS: &[&str] = &["version", "name", "defaults", "servers"];
const DEFAULTS_KEYS: &[&str] = &["connect_timeout", "cleanup_timeout"];
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "shell",
    "url",
    "headers",
    "connect_timeout",
    "cleanup_timeout",
    "enabled",
];
/// Keys of the design that this version recognises but does not implement yet;
/// refusing them beats silently running without the policy the user asked for.
const LATER_KEYS: &[&str] = &["restart", "health", "idle_timeout"];
/// Keys that users of docker compose and other runners reach for.
const SERVER_SYNONYMS: &[(&str, &str)] = &[
    ("cmd", "command"),
    ("arguments", "args"),
    ("argv", "args"),
    ("environment", "env"),
    ("working_dir", "cwd"),
    ("workdir", "cwd"),
    ("working_directory", "cwd"),
    ("dir", "cwd"),
    ("directory", "cwd"),
    ("endpoint", "url"),
    ("timeout", "connect_timeout"),
    ("disabled", "enabled"),
];

/// The mappings whose keys the format defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Top,
    Defaults,
    Server,
}

/// Where a node is: the steps to find it and the key path to show.
#[derive(Debug, Clone, Default)]
struct At {
    steps: Vec<Step>,
    path: String,
}

impl At {
    fn then(&self, step: Step, path: String) -> At {
        let mut steps = self.steps.clone();
        steps.push(step);
        At { steps, path }
    }

    fn key_path(&self, key: &str) -> String {
        let simple = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        match (simple, self.path.is_empty()) {
            (true, true) => key.to_string(),
            (true, false) => format!("{}.{key}", self.path),
            // Keys that would make the path ambiguous are quoted.
            (false, _) => format!("{}[{}]", self.path, serde_json::Value::from(key)),
        }
    }

    fn item(&self, index: usize) -> At {
        self.then(Step::Item(index), format!("{}[{index}]", self.path))
    }
}

/// A mapping entry whose key is a usable string.
struct Entry<'n> {
    key: String,
    value: &'n Node,
    /// The key itself, for errors about the key.
    key_at: At,
    /// The value; a null value has no text of its own, so its errors point at the key.
    value_at: At,
}

/// Timeouts of the `defaults:` block; unset ones fall back to [`DEFAULT_TIMEOUT`].
#[derive(Default)]
struct Defaults {
    connect_timeout: Option<Timeout>,
    cleanup_timeout: Option<Timeout>,
}

struct Validator<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    /// The fleet file's directory, against which a relative `cwd` is resolved.
    base_dir: &'a Path,
    issues: Vec<Issue>,
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
    fn error(&mut self, at: &At, message: impl Into<String>) {
        self.issues.push(Issue {
            steps: Some(at.steps.clone()),
            path: at.path.clone(),
            message: message.into(),
            first: None,
        });
    }

    fn expected(&mut self, at: &At, expected: &str, found: &Node) {
        self.error(at, format!("expected {expected}, found {}", found.kind()));
    }

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

    /// Checks that `node` is a mapping and returns its entries with string keys,
    /// reporting keys that are not strings and duplicate keys (the first wins).
    fn mapping<'n>(&mut self, node: &'n Node, at: &At, expected: &str) -> Option<Vec<Entry<'n>>> {
        let Node::Map(pairs) = node else {
            self.expected(at, expected, node);
            return None;
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut entries = Vec::with_capacity(pairs.len());
        for (index, (key, value)) in pairs.iter().enumerate() {
            let key_steps = at.then(Step::Key(index), String::new()).steps;
            let Some(text) = key.scalar_text() else {
                let key_at = At {
                    steps: key_steps,
                    path: at.path.clone(),
                };
                self.expected(&key_at, "a string key", key);
                continue;
            };
            let path = at.key_path(text);
            let key_at = At {
                steps: key_steps,
                path: path.clone(),
            };
            if let Some(&first) = seen.get(text) {
                let mut first_steps = at.steps.clone();
                first_steps.push(Step::Key(first));
                self.issues.push(Issue {
                    steps: Some(key_at.steps),
                    path,
                    message: format!("duplicate key `{text}`"),
                    first: Some(first_steps),
                });
                continue;
            }
            seen.insert(text, index);
            let value_at = if matches!(value, Node::Null) {
                key_at.clone()
            } else {
                at.then(Step::Value(index), path)
            };
            entries.push(Entry {
                key: text.to_string(),
                value,
                key_at,
                value_at,
            });
        }
        Some(entries)
    }

    /// Reports an unknown key; returns the key it suggests instead, if any.
    fn unknown_key(&mut self, entry: &Entry, level: Level) -> Option<&'static str> {
        let key = entry.key.as_str();
        let (known, synonyms) = match level {
            Level::Top => (TOP_KEYS, &[][..]),
            Level::Defaults => (DEFAULTS_KEYS, &[][..]),
            Level::Server => (SERVER_KEYS, SERVER_SYNONYMS),
        };
        if level != Level::Top && LATER_KEYS.contains(&key) {
            self.error(
                &entry.key_at,
                format!("`{key}` is not supported in this version"),
            );
            return None;
        }
        let mut message = format!("unknown key `{key}`");
        let suggested = suggestion(key, known, synonyms);
        if key == "<<" {
            message.push_str("; YAML merge keys are not supported, use `defaults:`");
        } else if let Some(known) = suggested {
            message.push_str(&format!("; did you mean `{known}`?"));
        }
        self.error(&entry.key_at, message);
        suggested
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
                "connect_timeout" => defaults.connect_timeout = self.timeout(e),
                "cleanup_timeout" => defaults.cleanup_timeout = self.timeout(e),
                _ => {
                    self.unknown_key(e, Level::Defaults);
                }
            }
        }
        defaults
    }

    fn timeout(&mut self, entry: &Entry) -> Option<Timeout> {
        let at = &entry.value_at;
        let text = match entry.value {
            Node::Number { raw } | Node::Str(raw) => raw,
            other => {
                self.expected(at, "a duration such as 10s, 500ms or none", other);
                return None;
            }
        };
        match duration::parse(text) {
            Ok(timeout) => Some(timeout),
            Err(e) => {
                self.error(at, e.to_string());
                None
            }
        }
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
        let mut command_key = None;
        let mut command = None;
        let mut args = Vec::new();
        let mut env = Vec::new();
        let mut cwd = None;
        let mut shell = false;
        let mut enabled = true;
        let mut connect_timeout = defaults.connect_timeout;
        let mut cleanup_timeout = defaults.cleanup_timeout;
        let mut url_key = None;
        let mut headers_key = None;
        // A misspelled `command` is reported once, as a misspelling.
        let mut misspelled_transport = false;
        for e in &entries {
            match e.key.as_str() {
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
                "url" => url_key = Some(e.key_at.clone()),
                "headers" => headers_key = Some(e.key_at.clone()),
                _ => {
                    let suggested = self.unknown_key(e, Level::Server);
                    misspelled_transport |= matches!(suggested, Some("command" | "url"));
                }
            }
        }
        match (&command_key, &url_key, &headers_key) {
            (Some(_), Some(url), _) => self.error(
                url,
                "a server has either `command` (stdio) or `url` (streamable HTTP), not both",
            ),
            (None, Some(url), _) => self.error(
                url,
                "remote servers (`url`) are not supported in this version",
            ),
            (None, None, _) if misspelled_transport => {}
            (None, None, _) => self.error(
                &entry.key_at,
                "a server needs `command` (stdio) or `url` (streamable HTTP)",
            ),
            (Some(_), None, Some(headers)) => {
                self.error(headers, "`headers` only applies to remote servers (`url`)")
            }
            (Some(_), None, None) => {}
        }
        if self.issues.len() > before {
            return None;
        }
        Some(ServerSpec {
            name: name?,
            enabled,
            connect_timeout: connect_timeout.unwrap_or(DEFAULT_TIMEOUT),
            cleanup_timeout: cleanup_timeout.unwrap_or(DEFAULT_TIMEOUT),
            transport: Transport::Stdio(StdioSpec {
                command: command?,
                args,
                env,
                cwd: cwd.unwrap_or_else(|| self.base_dir.to_path_buf()),
                shell,
            }),
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

/// The known key the user most likely meant, if any is close enough.
fn suggestion(
    key: &str,
    known: &[&'static str],
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
        .map(|k| (edit_distance(&lower, k), *k))
        .filter(|(distance, k)| *distance <= (k.len() / 3).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// Edit distance in characters where swapping two neighbours counts as one
/// edit (optimal string alignment): `ulr` is one typo away from `url`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * width + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut best = (d[(i - 1) * width + j] + 1)
                    .min(d[i * width + j - 1] + 1)
                    .min(d[(i - 1) * width + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(d[(i - 2) * width + j - 2] + 1);
                }
                best
            };
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
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
    fn suggestions() {
        assert_eq!(suggestion("comand", SERVER_KEYS, &[]), Some("command"));
        assert_eq!(suggestion("Command", SERVER_KEYS, &[]), Some("command"));
        assert_eq!(suggestion("arg", SERVER_KEYS, &[]), Some("args"));
        assert_eq!(
            suggestion("conect_timeout", SERVER_KEYS, &[]),
            Some("connect_timeout")
        );
        assert_eq!(
            suggestion("environment", SERVER_KEYS, SERVER_SYNONYMS),
            Some("env")
        );
        assert_eq!(suggestion("serveres", TOP_KEYS, &[]), Some("servers"));
        assert_eq!(suggestion("foo", SERVER_KEYS, &[]), None);
        assert_eq!(suggestion("image", SERVER_KEYS, SERVER_SYNONYMS), None);
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
