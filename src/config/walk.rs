//! The walk over a parsed fleet file, shared by the validator and the policy
//! blocks: where a node is ([`At`]), the entries of a mapping, and the
//! [`Validator`] that collects every issue with the steps to its node, with the
//! checks that both use (mappings, unknown keys, durations). It lives apart
//! from either so that neither imports the other: `validate` walks the fleet
//! and calls `policy` for `restart:`, `health:` and `idle_timeout:`.

use std::collections::HashMap;
use std::path::Path;

use super::duration::{self, DurationError, Timeout};
use super::keys::{DEFAULTS_KEYS, Level, SERVER_KEYS, suggestion};
use super::yaml::{Node, Step};

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

/// Where a node is: the steps to find it and the key path to show.
#[derive(Debug, Clone, Default)]
pub(super) struct At {
    pub(super) steps: Vec<Step>,
    pub(super) path: String,
}

impl At {
    pub(super) fn then(&self, step: Step, path: String) -> At {
        let mut steps = self.steps.clone();
        steps.push(step);
        At { steps, path }
    }

    fn key_path(&self, key: &str) -> String {
        key_path(&self.path, key)
    }

    pub(super) fn item(&self, index: usize) -> At {
        self.then(Step::Item(index), format!("{}[{index}]", self.path))
    }
}

/// The key path of `key` in the mapping at `parent`: `servers.a.env.KEY`.
pub(super) fn key_path(parent: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (simple, parent.is_empty()) {
        (true, true) => key.to_string(),
        (true, false) => format!("{parent}.{key}"),
        // Keys that would make the path ambiguous are quoted.
        (false, _) => format!("{parent}[{}]", serde_json::Value::from(key)),
    }
}

/// A mapping entry whose key is a usable string.
pub(super) struct Entry<'n> {
    pub key: String,
    pub value: &'n Node,
    /// The key itself, for errors about the key.
    pub key_at: At,
    /// The value; a null value has no text of its own, so its errors point at the key.
    pub value_at: At,
}

/// Walks a fleet file and collects its issues; the rules of each part are
/// methods of it in `validate` and `policy`.
pub(super) struct Validator<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    /// The fleet file's directory, against which a relative `cwd` is resolved.
    pub(super) base_dir: &'a Path,
    pub(super) issues: Vec<Issue>,
    /// Reading the copy of a fleet file recorded in a state directory, not the
    /// file itself (docs/design.md §3, "State directory"): the copy stands in for
    /// a file that is gone, to name the servers that may still run. The values the
    /// environment and the file system give now may differ from those the fleet
    /// ran with, so they are not checked: a missing `${env:}` variable expands to
    /// nothing, and `cwd` need not exist.
    pub(super) recorded: bool,
}

impl Validator<'_> {
    /// Whether the value of `text` goes unchecked: expanded from the environment,
    /// in a recorded copy.
    pub(super) fn unchecked(&self, text: &super::expand::Text) -> bool {
        self.recorded && text.is_expanded()
    }

    pub(super) fn error(&mut self, at: &At, message: impl Into<String>) {
        self.issues.push(Issue {
            steps: Some(at.steps.clone()),
            path: at.path.clone(),
            message: message.into(),
            first: None,
        });
    }

    pub(super) fn issue_count(&self) -> usize {
        self.issues.len()
    }

    pub(super) fn expected(&mut self, at: &At, expected: &str, found: &Node) {
        self.error(at, format!("expected {expected}, found {}", found.kind()));
    }

    /// Checks that `node` is a mapping and returns its entries with string keys,
    /// reporting keys that are not strings and duplicate keys (the first wins).
    pub(super) fn mapping<'n>(
        &mut self,
        node: &'n Node,
        at: &At,
        expected: &str,
    ) -> Option<Vec<Entry<'n>>> {
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
    pub(super) fn unknown_key(&mut self, entry: &Entry, level: Level) -> Option<&'static str> {
        let key = entry.key.as_str();
        let (known, synonyms) = level.keys();
        let mut message = format!("unknown key `{key}`");
        // A key of another level is a misplaced key, not a misspelled one.
        let misplaced = match level {
            Level::Top if DEFAULTS_KEYS.contains(&key) => {
                Some("it belongs under a server in `servers:`, or in `defaults:`")
            }
            Level::Top if SERVER_KEYS.contains(&key) => {
                Some("it belongs under a server in `servers:`")
            }
            Level::Defaults if SERVER_KEYS.contains(&key) => {
                Some("it cannot be a default; set it on each server")
            }
            _ => None,
        };
        let suggested = match misplaced {
            Some(_) => None,
            None => suggestion(key, &[known], synonyms),
        };
        if let Some(hint) = misplaced {
            message.push_str(&format!("; {hint}"));
        } else if key == "<<" {
            message.push_str("; YAML merge keys are not supported, use `defaults:`");
        } else if let Some(known) = suggested {
            message.push_str(&format!("; did you mean `{known}`?"));
        }
        self.error(&entry.key_at, message);
        suggested
    }

    /// A duration; `none` only where `allow_none` (a deadline that may be
    /// switched off), never for a period or a delay.
    pub(super) fn duration(&mut self, entry: &Entry, allow_none: bool) -> Option<Timeout> {
        let at = &entry.value_at;
        let text = match entry.value {
            Node::Number { raw } | Node::Str(raw) => raw,
            other => {
                let expected = match allow_none {
                    true => "a duration such as 10s, 500ms or none",
                    false => "a duration such as 10s or 500ms",
                };
                self.expected(at, expected, other);
                return None;
            }
        };
        let message = match duration::parse(text) {
            Ok(Timeout::Never) if !allow_none => format!(
                "`{}` cannot be none; write a duration such as 10s or 500ms",
                entry.key
            ),
            Ok(timeout) => return Some(timeout),
            Err(e) if allow_none => e.to_string(),
            // The parser's own words suggest `none`, which is not allowed here.
            Err(DurationError::Zero(text)) => {
                format!(
                    "`{text}` is zero; `{}` needs a positive duration",
                    entry.key
                )
            }
            Err(DurationError::Empty) => {
                "empty duration; write e.g. 10s, 500ms, 2m or 1h".to_string()
            }
            Err(DurationError::Malformed(text)) => {
                format!("`{text}` is not a duration; write e.g. 10s, 500ms, 2m or 1h")
            }
            Err(e) => e.to_string(),
        };
        self.error(at, message);
        None
    }
}
