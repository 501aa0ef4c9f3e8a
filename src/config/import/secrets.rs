//! Secrets written as literal values in a client's file: which values count as
//! secrets, and the environment variable each one moves to.
//!
//! A fleet file holds no secret of its own: it names an environment variable
//! (`${env:NAME}`), and the value stays out of every output (docs/design.md §6).
//! So an import never copies a secret: it writes the variable, and tells the
//! user which one to set. Read with `-f`, the client's file itself still holds
//! the value, which is then given to that variable (and shown as it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::super::expand::is_env_name;

/// Words that make a name (of a variable, header, query parameter or flag) a
/// secret's, compared without case.
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
];

/// Whether a value under this name is taken for a secret.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|word| upper.contains(word))
}

/// One secret moved out of the file.
#[derive(Clone)]
pub(crate) struct Secret {
    /// The variable that holds it now.
    pub var: String,
    /// Where it was, worded for the user: `env GITHUB_TOKEN of server github`.
    pub origin: String,
    /// The value; never shown.
    pub value: String,
}

/// Never the value, even in a log or a panic message.
impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("var", &self.var)
            .field("origin", &self.origin)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// The variables chosen so far, so that one value keeps one name and two
/// values never share one.
#[derive(Debug, Default)]
pub(super) struct Vault {
    /// Names the file itself refers to (`${GITHUB_TOKEN}`): they mean the
    /// user's environment, so a secret never takes one of them.
    reserved: BTreeSet<String>,
    by_var: BTreeMap<String, usize>,
    pub secrets: Vec<Secret>,
}

impl Vault {
    pub(super) fn new(reserved: impl IntoIterator<Item = String>) -> Vault {
        Vault {
            reserved: reserved.into_iter().collect(),
            ..Vault::default()
        }
    }

    /// Where the list stands, for [`Vault::rollback`].
    pub(super) fn checkpoint(&self) -> usize {
        self.secrets.len()
    }

    /// Forgets what was kept since `checkpoint`.
    pub(super) fn rollback(&mut self, checkpoint: usize) {
        self.secrets.truncate(checkpoint);
        self.by_var.retain(|_, i| *i < checkpoint);
    }

    /// The variable that holds `value` from now on: `preferred` when it is
    /// free or already holds the same value, else `scoped`, else `scoped`
    /// numbered (both made valid names).
    pub(super) fn keep(
        &mut self,
        preferred: &str,
        scoped: &str,
        origin: String,
        value: &str,
    ) -> String {
        let preferred = env_name_from(preferred);
        let scoped = env_name_from(scoped);
        let mut candidates = vec![preferred, scoped.clone()];
        candidates.extend((2..).map(|n| format!("{scoped}_{n}")).take(1000));
        for var in candidates {
            if self.reserved.contains(&var) {
                continue;
            }
            match self.by_var.get(&var) {
                Some(&i) if self.secrets[i].value == value => return var,
                Some(_) => continue,
                None => {
                    self.by_var.insert(var.clone(), self.secrets.len());
                    self.secrets.push(Secret {
                        var: var.clone(),
                        origin,
                        value: value.to_string(),
                    });
                    return var;
                }
            }
        }
        unreachable!("a thousand numbered names cannot all be taken by one file")
    }
}

/// An environment variable name made of `text`: upper case, every other
/// character `_`, never starting with a digit.
pub(super) fn env_name_from(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    let trimmed = name.trim_matches('_');
    name = if trimmed.is_empty() {
        "SECRET".to_string()
    } else {
        trimmed.to_string()
    };
    if !is_env_name(&name) {
        name.insert(0, '_');
    }
    name
}

/// `Bearer abc` as its scheme (`Bearer `) and credentials (`abc`), so that only
/// the credentials move to a variable; `None` when the value has no scheme.
pub(super) fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let (scheme, credentials) = value.split_once(' ')?;
    let known = ["bearer", "basic", "token", "bot", "apikey", "digest"];
    (known.contains(&scheme.to_ascii_lowercase().as_str())
        && !credentials.trim().is_empty()
        && !credentials.contains(' '))
    .then(|| value.split_at(scheme.len() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for yes in [
            "API_KEY",
            "api_key",
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "Authorization",
            "X-Api-Key",
            "client_secret",
            "DB_PASSWORD",
            "x-auth",
            "apiKey",
            "Cookie",
        ] {
            assert!(is_secret_name(yes), "{yes}");
        }
        for no in ["PATH", "LOG_LEVEL", "Accept", "MEMORY_FILE_PATH", "url"] {
            assert!(!is_secret_name(no), "{no}");
        }
    }

    #[test]
    fn one_value_one_name_two_values_two_names() {
        let mut vault = Vault::new(["TAKEN".to_string()]);
        assert_eq!(
            vault.keep("API_KEY", "a_API_KEY", "x".into(), "v1"),
            "API_KEY"
        );
        assert_eq!(
            vault.keep("API_KEY", "b_API_KEY", "x".into(), "v1"),
            "API_KEY"
        );
        assert_eq!(
            vault.keep("API_KEY", "b_API_KEY", "x".into(), "v2"),
            "B_API_KEY"
        );
        assert_eq!(
            vault.keep("API_KEY", "b_API_KEY", "x".into(), "v3"),
            "B_API_KEY_2"
        );
        assert_eq!(
            vault.keep("TAKEN", "my-srv-TAKEN", "x".into(), "v4"),
            "MY_SRV_TAKEN"
        );
        assert_eq!(vault.keep("S_H", "S_H", "x".into(), "v5"), "S_H");
        assert_eq!(vault.keep("S_H", "S_H", "x".into(), "v6"), "S_H_2");
        assert_eq!(vault.secrets.len(), 6);
        let debug = format!("{:?}", vault.secrets);
        assert!(!debug.contains("v1") && !debug.contains("v4"), "{debug}");
    }

    #[test]
    fn names_made_of_anything() {
        assert_eq!(env_name_from("X-Api-Key"), "X_API_KEY");
        assert_eq!(env_name_from("linear"), "LINEAR");
        assert_eq!(env_name_from("9lives"), "_9LIVES");
        assert_eq!(env_name_from("--"), "SECRET");
        assert_eq!(env_name_from("--api-key"), "API_KEY");
    }

    #[test]
    fn schemes_are_kept_out_of_the_secret() {
        assert_eq!(split_scheme("Bearer abc.def"), Some(("Bearer ", "abc.def")));
        assert_eq!(split_scheme("token ghp_1"), Some(("token ", "ghp_1")));
        assert_eq!(split_scheme("abc"), None);
        assert_eq!(split_scheme("Bearer "), None);
        assert_eq!(split_scheme("Something else here"), None);
    }
}
