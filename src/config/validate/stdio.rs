//! The keys of a stdio server (`command`, `args`, `env`, `cwd`): what each value
//! must be once `${env:}` is expanded (docs/design.md §7). `shell` is a plain
//! boolean, checked with the others in `mod.rs`.

use std::path::PathBuf;

use super::super::expand::{Text, is_env_name};
use super::super::walk::{Entry, Validator};
use super::super::yaml::Node;

impl Validator<'_> {
    pub(super) fn command(&mut self, entry: &Entry) -> Option<Text> {
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() && !self.unchecked(&text) {
            let message = match &text.template {
                None => "`command` must not be empty".to_string(),
                Some(t) => format!("`command` is empty once `{t}` is expanded"),
            };
            self.error(&entry.value_at, message);
            return None;
        }
        Some(text)
    }

    pub(super) fn args(&mut self, entry: &Entry) -> Vec<Text> {
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

    pub(super) fn env(&mut self, entry: &Entry) -> Vec<(String, Text)> {
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

    pub(super) fn cwd(&mut self, entry: &Entry) -> Option<PathBuf> {
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() {
            self.error(
                &entry.value_at,
                "`cwd` must not be empty; leave it out for the fleet file's directory",
            );
            return None;
        }
        let joined = self.base_dir.join(&text.value);
        if self.recorded {
            return Some(std::fs::canonicalize(&joined).unwrap_or(joined));
        }
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
