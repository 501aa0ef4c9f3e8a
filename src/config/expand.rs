//! `${env:NAME}` expansion and [`Text`], the string that remembers its template.
//!
//! This module owns the rule that keeps secrets out of output: a string that
//! had anything expanded into it shows its template, never its value, through
//! `display()`, `Display` and `Debug`. Only the code that starts a process
//! reads `value`. Expansion never invents a value: a missing variable is an
//! error, not an empty string.

use std::fmt;

const OPEN: &str = "${env:";

/// A configuration string after `${env:}` expansion. `value` is what runs;
/// [`Text::display`] is what may be shown.
#[derive(Clone, PartialEq)]
pub struct Text {
    /// The string handed to the process.
    pub value: String,
    /// The string as written, kept only when something was expanded into it.
    pub template: Option<String>,
    /// What was expanded into `value`, each piece on its own (one per
    /// `${env:}`; the whole value for one from an env file): the secrets a
    /// server's own output must not show (`process::redact`).
    pub expanded: Vec<String>,
}

impl Text {
    /// What may be shown: the template when anything was expanded, so a secret
    /// that came from the environment never reaches output.
    pub fn display(&self) -> &str {
        self.template.as_deref().unwrap_or(&self.value)
    }

    /// A string that expanded nothing; showing it reveals nothing new.
    pub fn literal(s: impl Into<String>) -> Text {
        Text {
            value: s.into(),
            template: None,
            expanded: Vec::new(),
        }
    }

    /// A value that is a secret as a whole, shown only as `shown`.
    pub fn secret(value: String, shown: String) -> Text {
        Text {
            expanded: vec![value.clone()],
            value,
            template: Some(shown),
        }
    }

    pub fn is_expanded(&self) -> bool {
        self.template.is_some()
    }

    /// The values that must never be shown: the whole value when anything was
    /// expanded into it, and each piece that was. Nothing for a literal.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        let whole = self.is_expanded().then_some(self.value.as_str());
        whole
            .into_iter()
            .chain(self.expanded.iter().map(String::as_str))
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display())
    }
}

/// Debug output ends up in logs and panic messages, so it is redacted too.
impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.template {
            None => f
                .debug_struct("Text")
                .field("value", &self.value)
                .field("template", &None::<String>)
                .finish(),
            Some(template) => f
                .debug_struct("Text")
                .field("value", &"<redacted>")
                .field("template", template)
                .finish(),
        }
    }
}

/// Why a `${env:…}` reference could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("`${{env:` is not closed with `}}`")]
    Unclosed,
    #[error(
        "`${{env:{0}}}` does not name a valid environment variable (letters, digits and _, not starting with a digit)"
    )]
    InvalidName(String),
    #[error("environment variable `{0}` is not set")]
    Missing(String),
}

/// Expands every `${env:NAME}` in `template`. All problems of the string are
/// returned together, so that one pass over the file reports them all.
pub(crate) fn expand(
    template: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Text, Vec<ExpandError>> {
    if !template.contains(OPEN) {
        return Ok(Text::literal(template));
    }
    let mut value = String::with_capacity(template.len());
    let mut expanded = Vec::new();
    let mut errors = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find(OPEN) {
        value.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find('}') else {
            errors.push(ExpandError::Unclosed);
            rest = "";
            break;
        };
        let name = &after[..end];
        if !is_env_name(name) {
            errors.push(ExpandError::InvalidName(name.to_string()));
        } else if let Some(v) = env(name) {
            value.push_str(&v);
            expanded.push(v);
        } else if !errors.contains(&ExpandError::Missing(name.to_string())) {
            errors.push(ExpandError::Missing(name.to_string()));
        }
        rest = &after[end + 1..];
    }
    value.push_str(rest);
    if errors.is_empty() {
        Ok(Text {
            value,
            template: Some(template.to_string()),
            expanded,
        })
    } else {
        Err(errors)
    }
}

/// POSIX's portable environment variable name: what every shell can set.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cr3t".into()),
            "HOST" => Some("example.org".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn literal_strings_are_not_templates() {
        let t = expand("plain $HOME ${HOME} $$ ${env", &env).unwrap();
        assert_eq!(t, Text::literal("plain $HOME ${HOME} $$ ${env"));
        assert_eq!(t.display(), "plain $HOME ${HOME} $$ ${env");
        assert!(!t.is_expanded());
    }

    #[test]
    fn expands_anywhere_and_several_times() {
        let t = expand("Bearer ${env:TOKEN}@${env:HOST}:${env:TOKEN}!", &env).unwrap();
        assert_eq!(t.value, "Bearer s3cr3t@example.org:s3cr3t!");
        assert_eq!(t.display(), "Bearer ${env:TOKEN}@${env:HOST}:${env:TOKEN}!");
        assert_eq!(t.expanded, ["s3cr3t", "example.org", "s3cr3t"]);
        assert_eq!(
            t.secrets().collect::<Vec<_>>(),
            [t.value.as_str(), "s3cr3t", "example.org", "s3cr3t"]
        );
        assert_eq!(Text::literal("plain").secrets().count(), 0);
        assert_eq!(t.to_string(), t.display());
        let t = expand("${env:TOKEN}", &env).unwrap();
        assert_eq!(t.value, "s3cr3t");
        assert_eq!(t.template.as_deref(), Some("${env:TOKEN}"));
    }

    #[test]
    fn an_empty_variable_is_set() {
        let t = expand("a${env:EMPTY}b", &env).unwrap();
        assert_eq!(t.value, "ab");
        assert!(t.is_expanded());
    }

    #[test]
    fn dollar_dollar_is_not_an_escape() {
        let t = expand("$${env:HOST}", &env).unwrap();
        assert_eq!(t.value, "$example.org");
    }

    #[test]
    fn missing_and_malformed_references_are_errors() {
        assert_eq!(
            expand("x ${env:NOPE} ${env:NOPE} ${env:ALSO}", &env).unwrap_err(),
            vec![
                ExpandError::Missing("NOPE".into()),
                ExpandError::Missing("ALSO".into())
            ]
        );
        assert_eq!(
            expand("${env:TOKEN", &env).unwrap_err(),
            vec![ExpandError::Unclosed]
        );
        assert_eq!(
            expand("${env:}", &env).unwrap_err(),
            vec![ExpandError::InvalidName(String::new())]
        );
        assert_eq!(
            expand("${env:1ABC}-${env:A-B}-${env:NOPE}-${env:", &env).unwrap_err(),
            vec![
                ExpandError::InvalidName("1ABC".into()),
                ExpandError::InvalidName("A-B".into()),
                ExpandError::Missing("NOPE".into()),
                ExpandError::Unclosed,
            ]
        );
        assert_eq!(
            ExpandError::Missing("API_KEY".into()).to_string(),
            "environment variable `API_KEY` is not set"
        );
    }

    #[test]
    fn debug_never_shows_an_expanded_value() {
        let t = expand("Bearer ${env:TOKEN}", &env).unwrap();
        let debug = format!("{t:?}");
        assert!(!debug.contains("s3cr3t"), "{debug}");
        assert!(debug.contains("${env:TOKEN}"));
        assert_eq!(
            format!("{:?}", Text::literal("npx")),
            "Text { value: \"npx\", template: None }"
        );
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_", "PATH", "api_key2", "_X_1"] {
            assert!(is_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "É", "A=B"] {
            assert!(!is_env_name(bad), "{bad}");
        }
    }
}
