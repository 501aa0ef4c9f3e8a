//! What defines a server's process or session, and what only tunes how it is run:
//! the two halves `up` compares to converge on the fleet file (docs/design.md §16).
//!
//! A [`Definition`] holds one digest per key that shapes the process (stdio:
//! `command`, `args`, `env`, `cwd`, `shell`) or the session (http: `url`,
//! `headers`): a generation whose definition differs from the file's is
//! restarted. Digests of the values, not the values: the definition travels in
//! snapshots and lives as long as a generation, and a value from `${env:}` is a
//! secret. They are compared, never shown; only the key names reach output.
//!
//! Settings ([`SETTING_KEYS`]: deadlines, restart, health, idle stop, the
//! gateway's `prefix` and `tools`, `enabled`) change without a restart.

use std::hash::{Hash, Hasher};

use super::{ServerSpec, Text, Transport};

/// The keys whose change restarts a server, in the order they are reported.
pub const DEFINITION_KEYS: &[&str] = &["command", "args", "env", "cwd", "shell", "url", "headers"];

/// The keys whose change applies without a restart, in the order they are reported.
pub const SETTING_KEYS: &[&str] = &[
    "enabled",
    "connect_timeout",
    "cleanup_timeout",
    "restart",
    "health",
    "idle_timeout",
    "prefix",
    "tools",
    "placement",
];

/// One digest per key of a server's process or session definition (the default
/// has none: a server built without a fleet file).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Definition {
    /// In the order of [`DEFINITION_KEYS`]; a key the transport does not have
    /// is absent.
    digests: Vec<(&'static str, u64)>,
}

/// Only the key names: a digest of a secret has no business in a log.
impl std::fmt::Debug for Definition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.digests.iter().map(|(k, _)| k))
            .finish()
    }
}

fn digest(value: impl Hash) -> u64 {
    // SipHash with fixed keys: the same value gives the same digest for as long
    // as this binary runs, which is all a comparison in one supervisor needs.
    let mut h = std::hash::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// A list of names and values, order aside: `env` and `headers` mean the same
/// whatever order the file writes them in.
fn sorted_pairs(pairs: &[(String, Text)]) -> Vec<(&str, &str)> {
    let mut v: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, t)| (k.as_str(), t.value.as_str()))
        .collect();
    v.sort_unstable();
    v
}

impl Definition {
    /// The definition of `spec`, from the values that run (after `${env:}`).
    pub fn of(spec: &ServerSpec) -> Definition {
        let digests = match &spec.transport {
            Transport::Stdio(s) => vec![
                ("command", digest(&s.command.value)),
                (
                    "args",
                    digest(s.args.iter().map(|a| a.value.as_str()).collect::<Vec<_>>()),
                ),
                ("env", digest(sorted_pairs(&s.env))),
                ("cwd", digest(&s.cwd)),
                ("shell", digest(s.shell)),
            ],
            Transport::Http(h) => vec![
                ("url", digest(&h.url.value)),
                (
                    "headers",
                    digest(
                        h.headers
                            .iter()
                            .map(|(k, v)| (k.to_ascii_lowercase(), v.value.as_str()))
                            .collect::<std::collections::BTreeMap<_, _>>(),
                    ),
                ),
            ],
        };
        Definition { digests }
    }

    /// The keys on which `self` and `other` differ, in the order of
    /// [`DEFINITION_KEYS`] (a key only one of them has differs).
    pub fn changed(&self, other: &Definition) -> Vec<&'static str> {
        let get =
            |d: &Definition, key: &str| d.digests.iter().find(|(k, _)| *k == key).map(|p| p.1);
        DEFINITION_KEYS
            .iter()
            .copied()
            .filter(|key| get(self, key) != get(other, key))
            .collect()
    }
}

/// The settings on which `old` and `new` differ, in the order of [`SETTING_KEYS`].
pub fn changed_settings(old: &ServerSpec, new: &ServerSpec) -> Vec<&'static str> {
    let differs = |key: &str| match key {
        "enabled" => old.enabled != new.enabled,
        "connect_timeout" => old.connect_timeout != new.connect_timeout,
        "cleanup_timeout" => old.cleanup_timeout != new.cleanup_timeout,
        "restart" => old.restart != new.restart,
        "health" => old.health != new.health,
        "idle_timeout" => old.idle_timeout != new.idle_timeout,
        "prefix" => old.expose.prefix != new.expose.prefix,
        "tools" => old.expose.allow != new.expose.allow || old.expose.deny != new.expose.deny,
        "placement" => old.placement != new.placement,
        _ => false,
    };
    SETTING_KEYS
        .iter()
        .copied()
        .filter(|k| differs(k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fleet(text: &str) -> super::super::Fleet {
        let env = |name: &str| match name {
            "TOKEN" => Some("one".to_owned()),
            "OTHER" => Some("two".to_owned()),
            _ => None,
        };
        super::super::load_str(text, Path::new("/tmp/fleet.yaml"), &env).expect("valid")
    }

    fn spec(text: &str) -> ServerSpec {
        fleet(text).servers.remove(0)
    }

    const BASE: &str = "version: 1\nservers:\n  a:\n    command: srv\n    args: [x]\n    env: {A: '1', B: '2'}\n    cwd: /\n";

    #[test]
    fn the_same_text_has_the_same_definition() {
        assert_eq!(Definition::of(&spec(BASE)), Definition::of(&spec(BASE)));
        assert!(
            Definition::of(&spec(BASE))
                .changed(&Definition::of(&spec(BASE)))
                .is_empty()
        );
    }

    #[test]
    fn each_key_of_the_process_is_named_when_it_changes() {
        let base = Definition::of(&spec(BASE));
        let cases = [
            (
                BASE.replace("command: srv", "command: other"),
                vec!["command"],
            ),
            (BASE.replace("[x]", "[x, y]"), vec!["args"]),
            (BASE.replace("B: '2'", "B: '3'"), vec!["env"]),
            (BASE.replace("cwd: /", "cwd: /tmp"), vec!["cwd"]),
            (format!("{BASE}    shell: true\n"), vec!["shell"]),
            (
                BASE.replace("args: [x]", "args: [y]")
                    .replace("command: srv", "command: s2"),
                vec!["command", "args"],
            ),
        ];
        for (text, keys) in cases {
            assert_eq!(base.changed(&Definition::of(&spec(&text))), keys, "{text}");
        }
    }

    #[test]
    fn order_of_env_and_headers_does_not_matter() {
        let swapped = BASE.replace("{A: '1', B: '2'}", "{B: '2', A: '1'}");
        assert!(
            Definition::of(&spec(BASE))
                .changed(&Definition::of(&spec(&swapped)))
                .is_empty()
        );
        let h1 =
            "version: 1\nservers:\n  r:\n    url: http://h/mcp\n    headers: {X-A: a, X-B: b}\n";
        let h2 =
            "version: 1\nservers:\n  r:\n    url: http://h/mcp\n    headers: {x-b: b, X-A: a}\n";
        assert!(
            Definition::of(&spec(h1))
                .changed(&Definition::of(&spec(h2)))
                .is_empty()
        );
        let h3 = h1.replace("X-B: b", "X-B: c");
        assert_eq!(
            Definition::of(&spec(h1)).changed(&Definition::of(&spec(&h3))),
            ["headers"]
        );
    }

    #[test]
    fn a_value_from_the_environment_counts_by_its_value() {
        let a = BASE.replace("B: '2'", "B: '${env:TOKEN}'");
        let b = BASE.replace("B: '2'", "B: '${env:OTHER}'");
        assert_eq!(
            Definition::of(&spec(&a)).changed(&Definition::of(&spec(&b))),
            ["env"]
        );
        // Debug shows the keys, never a digest of a value.
        let shown = format!("{:?}", Definition::of(&spec(&a)));
        assert_eq!(shown, r#"["command", "args", "env", "cwd", "shell"]"#);
    }

    #[test]
    fn another_transport_differs_in_every_key_of_both() {
        let remote = "version: 1\nservers:\n  a:\n    url: http://h/mcp\n";
        assert_eq!(
            Definition::of(&spec(BASE)).changed(&Definition::of(&spec(remote))),
            DEFINITION_KEYS
        );
    }

    #[test]
    fn settings_are_told_apart_from_the_definition() {
        let tuned = format!(
            "{BASE}    connect_timeout: 3s\n    idle_timeout: 5m\n    prefix: p\n    tools: {{deny: [x]}}\n    restart: {{policy: always}}\n    health: {{interval: 30s}}\n    enabled: false\n    cleanup_timeout: 2s\n    placement: {{hosts: [a]}}\n"
        );
        let (old, new) = (spec(BASE), spec(&tuned));
        assert!(
            Definition::of(&old)
                .changed(&Definition::of(&new))
                .is_empty()
        );
        assert_eq!(changed_settings(&old, &new), SETTING_KEYS);
        assert!(changed_settings(&old, &old).is_empty());
    }
}
