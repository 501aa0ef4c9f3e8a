//! How `up` converges on the fleet file, as reported: the plan (what `up` does to
//! each server, or would do with `--dry-run`) and the drift `status` shows
//! (docs/design.md §16). Data and its text; computed in `crate::reconcile`.

use serde::{Deserialize, Serialize};

/// What `up` does to one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Not running (or new in the file): started with the file's definition.
    Start,
    /// Running from another definition: stopped, confirmed gone, started again
    /// (a new generation) with the file's.
    Restart,
    /// Running as the file says: left alone (same generation, same pid).
    Keep,
    /// No longer in the file: left as it is until `up --remove-orphans` or `down`.
    Orphaned,
    /// No longer in the file, and `--remove-orphans` was given: stopped.
    Stop,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Restart => "restart",
            Action::Keep => "keep",
            Action::Orphaned => "orphaned",
            Action::Stop => "stop",
        }
    }
}

/// One server's step of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub name: String,
    pub action: Action,
    /// The keys of the process or session definition that differ: from the
    /// running generation (`restart`), or from the last one (`start`).
    pub changed: Vec<String>,
    /// Settings that differ and apply without a restart.
    pub settings: Vec<String>,
    /// New in the fleet file.
    pub added: bool,
    /// What may keep the step from happening (a quarantine, a crash loop).
    pub note: Option<String>,
}

/// How a server differs from the fleet file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    /// As the file says.
    None,
    /// Some keys differ (`keys`).
    Changed,
    /// In the file, and not yet taken up by the supervisor: `up` starts it.
    Added,
    /// No longer in the file.
    Orphaned,
}

/// A server against the fleet file (`status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub kind: DriftKind,
    /// The keys that differ: of the definition (against the running generation,
    /// or the one the next start would use) and of the settings.
    pub keys: Vec<String>,
    /// `up` would restart the running generation.
    pub restart: bool,
}

impl Drift {
    pub fn none() -> Drift {
        Drift {
            kind: DriftKind::None,
            keys: Vec::new(),
            restart: false,
        }
    }

    /// The line under a server's row in `status`, if it drifted.
    pub fn text(&self) -> Option<String> {
        let keys = self.keys.join(", ");
        match self.kind {
            DriftKind::None => None,
            DriftKind::Changed if self.restart => Some(format!(
                "drift: {keys} (the fleet file differs from the running generation; `up` restarts it)"
            )),
            DriftKind::Changed => Some(format!(
                "drift: {keys} (the fleet file differs; `up` applies it without a restart)"
            )),
            DriftKind::Added => {
                Some("drift: added to the fleet file, not started yet (`up` starts it)".into())
            }
            DriftKind::Orphaned => Some(
                "drift: orphaned, no longer in the fleet file (`up --remove-orphans` or `down` stops it)"
                    .into(),
            ),
        }
    }
}

impl PlanStep {
    /// The line under a server's row in the report of `up`, if the step did more
    /// than keep the server as it was.
    pub fn text(&self) -> Option<String> {
        let changed = self.changed.join(", ");
        let mut text = match self.action {
            Action::Start if self.added => "plan: start (added to the fleet file)".to_owned(),
            Action::Start if !self.changed.is_empty() => format!("plan: start ({changed} changed)"),
            Action::Start if self.settings.is_empty() && self.note.is_none() => return None,
            Action::Start => "plan: start".to_owned(),
            Action::Restart => format!("plan: restart ({changed} changed)"),
            Action::Keep if self.settings.is_empty() => return None,
            Action::Keep => "plan: keep".to_owned(),
            Action::Orphaned => "plan: orphaned, no longer in the fleet file; left as it is \
                                 (`up --remove-orphans` or `down` stops it)"
                .to_owned(),
            Action::Stop => "plan: stop (no longer in the fleet file)".to_owned(),
        };
        if !self.settings.is_empty() {
            text.push_str(&format!(
                "; applied without a restart: {}",
                self.settings.join(", ")
            ));
        }
        if let Some(note) = &self.note {
            text.push_str(&format!("; {note}"));
        }
        Some(text)
    }
}

/// The plan as a table, for `up --dry-run`.
pub(crate) fn plan_table(steps: &[PlanStep]) -> String {
    let dash = |v: &[String]| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(",")
        }
    };
    let mut rows = vec![[
        "SERVER".to_owned(),
        "ACTION".to_owned(),
        "CHANGED".to_owned(),
        "SETTINGS".to_owned(),
        "NOTE".to_owned(),
    ]];
    for s in steps {
        let mut note = s.note.clone().unwrap_or_default();
        if s.added {
            note = join_note("added to the fleet file", &note);
        }
        if s.action == Action::Orphaned {
            note = join_note("no longer in the fleet file; left as it is", &note);
        }
        rows.push([
            s.name.clone(),
            s.action.as_str().to_owned(),
            dash(&s.changed),
            dash(&s.settings),
            if note.is_empty() { "-".into() } else { note },
        ]);
    }
    super::table::render(&rows)
}

fn join_note(first: &str, rest: &str) -> String {
    if rest.is_empty() {
        first.to_owned()
    } else {
        format!("{first}; {rest}")
    }
}

/// "1 to start, 2 to restart, ..." for the last line of `up --dry-run`.
pub(crate) fn plan_counts(steps: &[PlanStep]) -> String {
    let count = |a: Action| steps.iter().filter(|s| s.action == a).count();
    let parts: Vec<String> = [
        (Action::Start, "to start"),
        (Action::Restart, "to restart"),
        (Action::Keep, "to keep"),
        (Action::Orphaned, "orphaned"),
        (Action::Stop, "to stop"),
    ]
    .iter()
    .filter(|(a, _)| count(*a) > 0)
    .map(|(a, words)| format!("{} {words}", count(*a)))
    .collect();
    if parts.is_empty() {
        "nothing to do".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, action: Action) -> PlanStep {
        PlanStep {
            name: name.into(),
            action,
            changed: Vec::new(),
            settings: Vec::new(),
            added: false,
            note: None,
        }
    }

    #[test]
    fn steps_read_as_what_up_does() {
        assert_eq!(step("a", Action::Keep).text(), None);
        let restart = PlanStep {
            changed: vec!["args".into(), "env".into()],
            ..step("a", Action::Restart)
        };
        assert_eq!(restart.text().unwrap(), "plan: restart (args, env changed)");
        let added = PlanStep {
            added: true,
            ..step("b", Action::Start)
        };
        assert_eq!(
            added.text().unwrap(),
            "plan: start (added to the fleet file)"
        );
        let tuned = PlanStep {
            settings: vec!["idle_timeout".into()],
            ..step("c", Action::Keep)
        };
        assert_eq!(
            tuned.text().unwrap(),
            "plan: keep; applied without a restart: idle_timeout"
        );
        let json = serde_json::to_value(&restart).unwrap();
        assert_eq!(json["action"], "restart");
        assert_eq!(json["changed"][1], "env");
    }

    #[test]
    fn the_dry_run_table_and_counts() {
        let steps = vec![
            PlanStep {
                added: true,
                ..step("b", Action::Start)
            },
            PlanStep {
                changed: vec!["args".into()],
                ..step("a", Action::Restart)
            },
            step("c", Action::Keep),
            step("d", Action::Orphaned),
        ];
        let table = plan_table(&steps);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "SERVER  ACTION    CHANGED  SETTINGS  NOTE");
        assert_eq!(lines[2], "a       restart   args     -         -");
        assert!(lines[4].contains("orphaned") && lines[4].contains("no longer in the fleet file"));
        assert_eq!(
            plan_counts(&steps),
            "1 to start, 1 to restart, 1 to keep, 1 orphaned"
        );
        assert_eq!(plan_counts(&[]), "nothing to do");
    }

    #[test]
    fn drift_reads_as_what_up_would_do() {
        assert_eq!(Drift::none().text(), None);
        let d = Drift {
            kind: DriftKind::Changed,
            keys: vec!["args".into()],
            restart: true,
        };
        assert!(
            d.text()
                .unwrap()
                .starts_with("drift: args (the fleet file differs")
        );
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "changed", "keys": ["args"], "restart": true})
        );
    }
}
