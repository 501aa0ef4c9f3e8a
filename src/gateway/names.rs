//! The names under which the gateway shows each server's tools and prompts (G3 of
//! docs/design.md §14): `PREFIX__NAME`, where the prefix is the server's name
//! unless its `prefix:` says otherwise. Clients and model APIs accept names of
//! `[A-Za-z0-9_-]` and at most 64 characters: other characters become `_`, and a
//! name that is too long, or that two entries would share, is cut and given a
//! stable hash of what it stands for. Nothing is dropped.

use std::collections::HashMap;

/// The longest name clients and model APIs accept.
pub(crate) const MAX_NAME: usize = 64;

/// What one exposed name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The server's index in the fleet.
    pub server: usize,
    /// The name as the server knows it.
    pub name: String,
}

/// Exposed names, both ways.
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    exposed: Vec<String>,
    routes: HashMap<String, Entry>,
}

impl Names {
    /// Names for `entries`, each (server index, prefix, name as the server knows
    /// it). The same entries always get the same names, whatever their order.
    pub(crate) fn assign<'a>(entries: impl IntoIterator<Item = (usize, &'a str, &'a str)>) -> Names {
        let entries: Vec<(usize, &str, &str)> = entries.into_iter().collect();
        let mut exposed: Vec<String> = entries
            .iter()
            .map(|(_, prefix, name)| plain(prefix, name))
            .collect();
        // Names that are too long or shared get a hash of what they stand for;
        // a hashed name that still meets another (vanishingly rare) gets a longer
        // one, until every name is unique.
        let mut digits = 8;
        loop {
            let mut uses: HashMap<&str, usize> = HashMap::new();
            for name in &exposed {
                *uses.entry(name.as_str()).or_default() += 1;
            }
            let clash: Vec<usize> = (0..exposed.len())
                .filter(|&i| uses[exposed[i].as_str()] > 1 || exposed[i].len() > MAX_NAME)
                .collect();
            if clash.is_empty() {
                break;
            }
            for i in clash {
                let (_, prefix, name) = entries[i];
                exposed[i] = hashed(&plain(prefix, name), prefix, name, digits);
            }
            digits += 4;
            if digits > 16 {
                // 64 bits of hash could not tell them apart: the entries are
                // identical (a server listing one name twice). Number them.
                number_duplicates(&mut exposed);
                break;
            }
        }
        let routes = exposed
            .iter()
            .zip(&entries)
            .map(|(exposed, (server, _, name))| {
                (
                    exposed.clone(),
                    Entry {
                        server: *server,
                        name: (*name).to_owned(),
                    },
                )
            })
            .collect();
        Names { exposed, routes }
    }

    /// Each entry (server index, name) under its own name, as its server gave
    /// it: a server's endpoint, which shows that server alone (docs/design.md
    /// §19); the gateway that relays to it names them.
    pub(crate) fn as_given<'a>(entries: impl IntoIterator<Item = (usize, &'a str)>) -> Names {
        let mut names = Names::default();
        for (server, name) in entries {
            names.exposed.push(name.to_owned());
            names.routes.insert(
                name.to_owned(),
                Entry {
                    server,
                    name: name.to_owned(),
                },
            );
        }
        names
    }

    /// The exposed names, in the order of the entries.
    pub(crate) fn exposed(&self) -> &[String] {
        &self.exposed
    }

    /// What an exposed name stands for.
    pub(crate) fn route(&self, exposed: &str) -> Option<&Entry> {
        self.routes.get(exposed)
    }
}

/// `PREFIX__NAME` (or `NAME` with an empty prefix), with every character outside
/// `[A-Za-z0-9_-]` replaced by `_`.
fn plain(prefix: &str, name: &str) -> String {
    let joined = if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}__{name}")
    };
    joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `base` cut so that `_` and `digits` hex digits of the hash of (prefix, name)
/// fit in [`MAX_NAME`].
fn hashed(base: &str, prefix: &str, name: &str, digits: usize) -> String {
    // Prefix and name apart by a zero byte, which neither contains.
    let key = [prefix.as_bytes(), &[0], name.as_bytes()].concat();
    let hash = format!("{:016x}", crate::hash::fnv1a(&key));
    let keep = MAX_NAME - 1 - digits;
    let cut: String = base.chars().take(keep).collect();
    format!("{cut}_{}", &hash[..digits])
}

fn number_duplicates(exposed: &mut [String]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for name in exposed.iter_mut() {
        let n = seen.entry(name.clone()).or_default();
        *n += 1;
        if *n > 1 {
            let suffix = format!("_{n}");
            let cut: String = name.chars().take(MAX_NAME - suffix.len()).collect();
            *name = format!("{cut}{suffix}");
        }
    }
}

/// Whether a name passes a server's `allow` and `deny` globs: allowed when `allow`
/// is empty or one of its globs matches, and no glob of `deny` matches.
pub(crate) fn passes(name: &str, allow: &[String], deny: &[String]) -> bool {
    let matches = |globs: &[String]| {
        globs
            .iter()
            .any(|g| wildmatch::WildMatch::new(g).matches(name))
    };
    (allow.is_empty() || matches(allow)) && !matches(deny)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        name.len() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_prefix_double_underscore_name_and_route_back() {
        let names = Names::assign([(0, "time", "get_current_time"), (1, "fs", "read_file")]);
        assert_eq!(names.exposed(), ["time__get_current_time", "fs__read_file"]);
        assert_eq!(
            names.route("fs__read_file"),
            Some(&Entry {
                server: 1,
                name: "read_file".into()
            })
        );
        assert_eq!(names.route("read_file"), None);
        assert_eq!(Names::assign([(0, "", "echo")]).exposed(), ["echo"]);
    }

    #[test]
    fn characters_clients_refuse_become_underscores() {
        let names = Names::assign([(0, "my.server", "do thing/now")]);
        assert_eq!(names.exposed(), ["my_server__do_thing_now"]);
        assert_eq!(
            names.route("my_server__do_thing_now").unwrap().name,
            "do thing/now"
        );
    }

    #[test]
    fn long_and_colliding_names_get_a_stable_hash_and_nothing_is_dropped() {
        let long = "x".repeat(80);
        // `a.b` and `a_b` both become `s__a_b`.
        let entries = [(0, "s", "a.b"), (0, "s", "a_b"), (1, "t", long.as_str())];
        let names = Names::assign(entries);
        assert_eq!(names.exposed().len(), 3);
        assert!(names.exposed().iter().all(|n| valid(n)), "{names:?}");
        let unique: std::collections::HashSet<_> = names.exposed().iter().collect();
        assert_eq!(unique.len(), 3);
        assert!(names.exposed()[0].starts_with("s__a_b_"));
        assert_eq!(names.exposed()[2].len(), MAX_NAME);
        for (i, (server, _, name)) in entries.iter().enumerate() {
            let route = names.route(&names.exposed()[i]).unwrap();
            assert_eq!((route.server, route.name.as_str()), (*server, *name));
        }
        // Stable: the same entries in another order get the same names.
        let reversed = Names::assign(entries.iter().rev().copied());
        for (i, name) in names.exposed().iter().enumerate() {
            assert_eq!(&reversed.exposed()[2 - i], name);
        }
        // A name that fits and meets nobody keeps its plain form.
        assert_eq!(Names::assign([(0, "s", "a.b")]).exposed(), ["s__a_b"]);
    }

    #[test]
    fn a_name_listed_twice_by_one_server_is_numbered_not_dropped() {
        let names = Names::assign([(0, "s", "dup"), (0, "s", "dup")]);
        assert_eq!(names.exposed().len(), 2);
        assert_ne!(names.exposed()[0], names.exposed()[1]);
        assert!(names.exposed().iter().all(|n| valid(n)));
    }

    #[test]
    fn allow_and_deny_globs() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(passes("read_file", &[], &[]));
        assert!(passes("read_file", &s(&["read_*"]), &[]));
        assert!(!passes("write_file", &s(&["read_*"]), &[]));
        assert!(!passes("read_secret", &s(&["read_*"]), &s(&["*secret*"])));
        assert!(passes("get_time", &[], &s(&["delete_?"])));
        assert!(!passes("delete_x", &[], &s(&["delete_?"])));
    }
}
