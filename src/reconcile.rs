//! Converging on the fleet file (docs/design.md §16): from what the supervisor
//! holds (each server's last known spec, its state and the definition its last
//! generation was started from) and the file as the caller read it, the plan of
//! `up` and the drift of `status`. Pure: no I/O, no authority; the supervisor
//! carries the plan out through the authorities, which decide again when they
//! take each request (a server may have changed state since the plan).

use crate::config::{Definition, Fleet, ServerSpec, changed_settings};
use crate::lifecycle::state::Phase;
use crate::output::plan::{Action, Drift, DriftKind, PlanStep};

/// A server the supervisor holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Known<'a> {
    /// The spec its authority was last given.
    pub spec: &'a ServerSpec,
    pub phase: Phase,
    /// The definition its last generation was started from (the running one's,
    /// while it runs); `None` if it never started.
    pub launched: Option<&'a Definition>,
}

impl Known<'_> {
    /// The definition that runs, or, when nothing runs, the one the next start
    /// would use.
    fn current(&self) -> Definition {
        match (self.phase, self.launched) {
            (Phase::Running, Some(d)) => d.clone(),
            _ => Definition::of(self.spec),
        }
    }
}

fn strings(keys: Vec<&'static str>) -> Vec<String> {
    keys.into_iter().map(str::to_owned).collect()
}

/// What `up` does to converge: for each server of `file` in `selected` (in file
/// order; the caller checks the names), then for each held server that is no
/// longer in the file. `known` finds what the supervisor holds of a server;
/// `force` is `up --force`; orphans are stopped with `remove_orphans`.
pub(crate) fn plan(
    file: &Fleet,
    selected: &[&ServerSpec],
    held: &[Known],
    force: bool,
    remove_orphans: bool,
) -> Vec<PlanStep> {
    let known = |name: &str| held.iter().find(|k| k.spec.name == name);
    let mut steps = Vec::new();
    for spec in selected {
        let Some(k) = known(&spec.name) else {
            steps.push(PlanStep {
                name: spec.name.clone(),
                action: Action::Start,
                changed: Vec::new(),
                settings: Vec::new(),
                added: true,
                note: None,
            });
            continue;
        };
        let wanted = Definition::of(spec);
        let changed = match k.launched {
            Some(d) => d.changed(&wanted),
            None => Vec::new(),
        };
        let (action, note) = match k.phase {
            Phase::Running if changed.is_empty() => (Action::Keep, None),
            Phase::Running => (Action::Restart, None),
            Phase::Quarantined if !force => (
                Action::Start,
                Some("quarantined: refused without --force".to_owned()),
            ),
            Phase::Quarantined => (
                Action::Start,
                Some("quarantined: what is left is killed first (--force)".to_owned()),
            ),
            Phase::CrashLoop if changed.is_empty() => (
                Action::Start,
                Some("crash loop: refused until `reconnect` or a new definition".to_owned()),
            ),
            _ => (Action::Start, None),
        };
        steps.push(PlanStep {
            name: spec.name.clone(),
            action,
            changed: strings(changed),
            settings: strings(changed_settings(k.spec, spec)),
            added: false,
            note,
        });
    }
    for k in held.iter().filter(|k| file.server(&k.spec.name).is_none()) {
        let note = (k.phase == Phase::Quarantined)
            .then(|| "quarantined: stays until `reset` or `up --force`".to_owned());
        steps.push(PlanStep {
            name: k.spec.name.clone(),
            action: if remove_orphans {
                Action::Stop
            } else {
                Action::Orphaned
            },
            changed: Vec::new(),
            settings: Vec::new(),
            added: false,
            note,
        });
    }
    steps
}

/// How a server differs from the file: `in_file` is its spec there (`None`: no
/// longer in it), `known` what the supervisor holds of it (`None`: nothing yet).
pub(crate) fn drift(in_file: Option<&ServerSpec>, known: Option<&Known>) -> Drift {
    let (spec, k) = match (in_file, known) {
        (None, _) => {
            return Drift {
                kind: DriftKind::Orphaned,
                keys: Vec::new(),
                restart: false,
            };
        }
        (Some(_), None) => {
            return Drift {
                kind: DriftKind::Added,
                keys: Vec::new(),
                restart: false,
            };
        }
        (Some(spec), Some(k)) => (spec, k),
    };
    let definition = k.current().changed(&Definition::of(spec));
    let restart = k.phase == Phase::Running && !definition.is_empty();
    let mut keys = strings(definition);
    keys.extend(strings(changed_settings(k.spec, spec)));
    Drift {
        kind: if keys.is_empty() {
            DriftKind::None
        } else {
            DriftKind::Changed
        },
        keys,
        restart,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fleet(servers: &str) -> Fleet {
        let text = format!("version: 1\nservers:\n{servers}");
        crate::config::load_str(&text, Path::new("/tmp/fleet.yaml"), &|_| None).expect("valid")
    }

    const A: &str = "  a:\n    command: srv\n    args: [one]\n    cwd: /\n";
    const B: &str = "  b:\n    command: srv\n    args: [two]\n    cwd: /\n";
    const C: &str = "  c:\n    command: srv\n    args: [three]\n    cwd: /\n";

    /// The specs of `fleet`, and the definition of each.
    fn held(fleet: &Fleet) -> (Vec<&ServerSpec>, Vec<Definition>) {
        let specs: Vec<&ServerSpec> = fleet.servers.iter().collect();
        let defs = specs.iter().map(|s| Definition::of(s)).collect();
        (specs, defs)
    }

    fn known<'a>(specs: &[&'a ServerSpec], defs: &'a [Definition], phase: Phase) -> Vec<Known<'a>> {
        specs
            .iter()
            .zip(defs)
            .map(|(spec, d)| Known {
                spec,
                phase,
                launched: Some(d),
            })
            .collect()
    }

    fn actions(steps: &[PlanStep]) -> Vec<(&str, Action, Vec<&str>)> {
        steps
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.action,
                    s.changed.iter().map(String::as_str).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn an_unchanged_fleet_is_kept() {
        let old = fleet(&format!("{A}{B}"));
        let (specs, defs) = held(&old);
        let held = known(&specs, &defs, Phase::Running);
        let new = fleet(&format!("{A}{B}"));
        let all: Vec<&ServerSpec> = new.servers.iter().collect();
        let steps = plan(&new, &all, &held, false, false);
        assert_eq!(
            actions(&steps),
            vec![("a", Action::Keep, vec![]), ("b", Action::Keep, vec![])]
        );
        assert!(steps.iter().all(|s| s.text().is_none()));
    }

    #[test]
    fn added_changed_and_removed_servers() {
        let old = fleet(&format!("{A}{B}"));
        let (specs, defs) = held(&old);
        let held = known(&specs, &defs, Phase::Running);
        // b's args change, c is added, a is removed.
        let new = fleet(&format!("{}{C}", B.replace("[two]", "[two, more]")));
        let all: Vec<&ServerSpec> = new.servers.iter().collect();
        let steps = plan(&new, &all, &held, false, false);
        assert_eq!(
            actions(&steps),
            vec![
                ("b", Action::Restart, vec!["args"]),
                ("c", Action::Start, vec![]),
                ("a", Action::Orphaned, vec![]),
            ]
        );
        assert!(steps[1].added);
        let steps = plan(&new, &all, &held, false, true);
        assert_eq!(steps[2].action, Action::Stop);
    }

    #[test]
    fn settings_are_applied_without_a_restart() {
        let old = fleet(A);
        let (specs, defs) = held(&old);
        let held = known(&specs, &defs, Phase::Running);
        let new = fleet(&format!("{A}    idle_timeout: 5m\n    prefix: x\n"));
        let all: Vec<&ServerSpec> = new.servers.iter().collect();
        let steps = plan(&new, &all, &held, false, false);
        assert_eq!(steps[0].action, Action::Keep);
        assert_eq!(steps[0].settings, ["idle_timeout", "prefix"]);
    }

    #[test]
    fn servers_not_running_are_started_whatever_changed() {
        let old = fleet(&format!("{A}{B}{C}"));
        let specs: Vec<&ServerSpec> = old.servers.iter().collect();
        let defs: Vec<Definition> = specs.iter().map(|s| Definition::of(s)).collect();
        let held = vec![
            Known {
                spec: specs[0],
                phase: Phase::Stopped,
                launched: Some(&defs[0]),
            },
            Known {
                spec: specs[1],
                phase: Phase::Quarantined,
                launched: Some(&defs[1]),
            },
            Known {
                spec: specs[2],
                phase: Phase::CrashLoop,
                launched: Some(&defs[2]),
            },
        ];
        let new = fleet(&format!("{}{B}{C}", A.replace("srv", "other")));
        let all: Vec<&ServerSpec> = new.servers.iter().collect();
        let steps = plan(&new, &all, &held, false, false);
        assert_eq!(
            actions(&steps),
            vec![
                ("a", Action::Start, vec!["command"]),
                ("b", Action::Start, vec![]),
                ("c", Action::Start, vec![]),
            ]
        );
        assert!(steps[1].note.as_deref().unwrap().contains("--force"));
        assert!(steps[2].note.as_deref().unwrap().contains("crash loop"));
        // Only the selected servers of the file are planned; orphans always.
        let steps = plan(&new, &all[..1], &held, false, false);
        assert_eq!(steps.len(), 1);
    }

    #[test]
    fn drift_names_the_keys_that_differ() {
        let old = fleet(A);
        let (specs, defs) = held(&old);
        let running = known(&specs, &defs, Phase::Running);
        let same = fleet(A);
        assert_eq!(drift(same.server("a"), Some(&running[0])), Drift::none());
        let edited = fleet(&format!(
            "{}    connect_timeout: 3s\n",
            A.replace("[one]", "[1]")
        ));
        let d = drift(edited.server("a"), Some(&running[0]));
        assert_eq!(d.kind, DriftKind::Changed);
        assert_eq!(d.keys, ["args", "connect_timeout"]);
        assert!(d.restart);
        // A stopped server: what its next start would use.
        let stopped = known(&specs, &defs, Phase::Stopped);
        let d = drift(edited.server("a"), Some(&stopped[0]));
        assert_eq!(d.keys, ["args", "connect_timeout"]);
        assert!(!d.restart);
        assert_eq!(drift(None, Some(&running[0])).kind, DriftKind::Orphaned);
        assert_eq!(drift(edited.server("a"), None).kind, DriftKind::Added);
    }
}
