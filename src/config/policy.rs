//! `restart:`, `health:` and `idle_timeout:`: each block as written, and a
//! server's blocks merged over those of `defaults:` over the built-in defaults.
//!
//! A server's own block wins over `defaults:` key by key, inside `restart`,
//! `restart.backoff` and `health` too: `restart: {max_restarts: 1}` keeps the
//! policy that `defaults:` sets. The rules between two values (backoff
//! `initial` ≤ `max`, health `timeout` < `interval`, `health` needs an
//! `interval`) are checked on the merged values, and reported at a value
//! written in the block being checked; `defaults:` is checked on its own first,
//! so that a conflict inside it is reported once, there, and not at every
//! server that inherits it.

use std::time::Duration;

use super::duration::Timeout;
use super::keys::{Level, RESTART_POLICIES, suggestion};
use super::walk::{At, Entry, Validator};
use super::yaml::Node;
use super::{HealthCheck, RestartMode, RestartPolicy};

/// Policy names that users of other runners reach for.
const POLICY_SYNONYMS: &[(&str, &str)] = &[
    ("no", "never"),
    ("false", "never"),
    ("off", "never"),
    ("unless-stopped", "always"),
    ("on-error", "on-failure"),
    ("onfailure", "on-failure"),
];

/// A value and where it was written.
#[derive(Debug, Clone)]
pub(super) struct Written<T> {
    value: T,
    at: At,
}

fn written<T>(value: T, entry: &Entry) -> Written<T> {
    Written {
        value,
        at: entry.value_at.clone(),
    }
}

/// `restart`, `health` and `idle_timeout` of one block (a server or
/// `defaults:`), as written.
#[derive(Debug, Clone, Default)]
pub(super) struct Policies {
    pub restart: RestartLayer,
    pub health: HealthLayer,
    /// `Some(None)` is `idle_timeout: none`.
    pub idle_timeout: Option<Written<Option<Duration>>>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct RestartLayer {
    policy: Option<Written<RestartMode>>,
    initial: Option<Written<Duration>>,
    max: Option<Written<Duration>>,
    max_restarts: Option<Written<u32>>,
    window: Option<Written<Duration>>,
    /// Something in the block was refused. Rules between values are not checked
    /// then: an inherited value would stand in for the refused one.
    broken: bool,
}

#[derive(Debug, Clone, Default)]
pub(super) enum HealthLayer {
    /// No `health` key: inherit.
    #[default]
    Unset,
    /// `health: none`: no health check, whatever `defaults:` says.
    Off,
    On {
        /// The `health` key, where a missing `interval` is reported.
        key_at: At,
        fields: Box<HealthFields>,
    },
}

#[derive(Debug, Clone, Default)]
pub(super) struct HealthFields {
    interval: Option<Written<Duration>>,
    timeout: Option<Written<Duration>>,
    failures: Option<Written<u32>>,
    /// As in [`RestartLayer::broken`].
    broken: bool,
}

/// The policies of one server, every default filled in.
pub(super) struct Resolved {
    pub restart: RestartPolicy,
    pub health: Option<HealthCheck>,
    pub idle_timeout: Option<Duration>,
}

/// Where a merged value came from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The block being checked, at this place.
    Own(&'a At),
    /// `defaults:`, seen from a server.
    Inherited,
    /// Nobody wrote it.
    Builtin,
}

/// A merged value and where it came from.
struct Picked<'a, T> {
    value: T,
    source: Source<'a>,
}

impl<'a, T: Copy> Picked<'a, T> {
    fn builtin(value: T) -> Self {
        Picked {
            value,
            source: Source::Builtin,
        }
    }

    fn own_at(&self) -> Option<&'a At> {
        match self.source {
            Source::Own(at) => Some(at),
            Source::Inherited | Source::Builtin => None,
        }
    }
}

impl Picked<'_, Duration> {
    /// The value for a message, saying where it came from unless it was
    /// written in the block at hand.
    fn shown(&self) -> String {
        let text = Timeout::After(self.value).to_string();
        match self.source {
            Source::Own(_) => text,
            Source::Inherited => format!("{text}, from `defaults`"),
            Source::Builtin => format!("{text}, the default"),
        }
    }
}

/// The block's own value, else the inherited one.
fn pick<'a, T: Copy>(
    own: &'a Option<Written<T>>,
    inherited: &'a Option<Written<T>>,
) -> Option<Picked<'a, T>> {
    match (own, inherited) {
        (Some(w), _) => Some(Picked {
            value: w.value,
            source: Source::Own(&w.at),
        }),
        (None, Some(w)) => Some(Picked {
            value: w.value,
            source: Source::Inherited,
        }),
        (None, None) => None,
    }
}

impl Validator<'_> {
    /// `restart: {policy, backoff: {initial, max}, max_restarts, window}`.
    pub(super) fn restart_block(&mut self, entry: &Entry) -> RestartLayer {
        let before = self.issue_count();
        let mut layer = RestartLayer::default();
        // `restart: always` is what docker compose users write.
        let example = match entry.value.scalar_text().and_then(RestartMode::from_name) {
            Some(mode) => format!("`{{policy: {mode}}}`"),
            None => "`{policy: on-failure}`".to_string(),
        };
        for e in self.block(entry, &example).iter().flatten() {
            match e.key.as_str() {
                key if !Level::Restart.knows(key) => {
                    self.unknown_key(e, Level::Restart);
                }
                "policy" => layer.policy = self.restart_mode(e).map(|v| written(v, e)),
                "backoff" => self.backoff(e, &mut layer),
                "max_restarts" => layer.max_restarts = self.count(e, 0).map(|v| written(v, e)),
                "window" => layer.window = self.period(e),
                // A listed key without a rule; the tests make sure there is none.
                _ => {
                    self.unknown_key(e, Level::Restart);
                }
            }
        }
        layer.broken = self.issue_count() > before;
        layer
    }

    fn backoff(&mut self, entry: &Entry, layer: &mut RestartLayer) {
        for e in self
            .block(entry, "`{initial: 500ms, max: 30s}`")
            .iter()
            .flatten()
        {
            match e.key.as_str() {
                key if !Level::Backoff.knows(key) => {
                    self.unknown_key(e, Level::Backoff);
                }
                "initial" => layer.initial = self.period(e),
                "max" => layer.max = self.period(e),
                _ => {
                    self.unknown_key(e, Level::Backoff);
                }
            }
        }
    }

    /// `health: {interval, timeout, failures}` or `health: none`.
    pub(super) fn health_block(&mut self, entry: &Entry) -> HealthLayer {
        if matches!(entry.value, Node::Str(s) if s == "none") {
            return HealthLayer::Off;
        }
        let before = self.issue_count();
        let mut fields = HealthFields::default();
        let entries = match entry.value {
            Node::Null | Node::Map(_) => self.block(entry, ""),
            other => {
                self.expected(
                    &entry.value_at,
                    "a mapping such as `{interval: 30s}`, or none",
                    other,
                );
                None
            }
        };
        for e in entries.iter().flatten() {
            match e.key.as_str() {
                key if !Level::Health.knows(key) => {
                    self.unknown_key(e, Level::Health);
                }
                "interval" => fields.interval = self.period(e),
                "timeout" => fields.timeout = self.period(e),
                "failures" => fields.failures = self.count(e, 1).map(|v| written(v, e)),
                _ => {
                    self.unknown_key(e, Level::Health);
                }
            }
        }
        fields.broken = self.issue_count() > before;
        HealthLayer::On {
            key_at: entry.key_at.clone(),
            fields: Box::new(fields),
        }
    }

    /// `idle_timeout: 10m` or `none`.
    pub(super) fn idle_timeout(&mut self, entry: &Entry) -> Option<Written<Option<Duration>>> {
        self.duration(entry, true)
            .map(|t| written(t.as_duration(), entry))
    }

    /// The entries of a policy mapping; null is an empty one, as for `defaults:`.
    fn block<'n>(&mut self, entry: &Entry<'n>, example: &str) -> Option<Vec<Entry<'n>>> {
        match entry.value {
            Node::Null => Some(Vec::new()),
            Node::Map(_) => self.mapping(entry.value, &entry.value_at, "a mapping"),
            other => {
                self.expected(
                    &entry.value_at,
                    &format!("a mapping such as {example}"),
                    other,
                );
                None
            }
        }
    }

    fn restart_mode(&mut self, entry: &Entry) -> Option<RestartMode> {
        let text = match entry.value {
            // `no` and `off` may be read as booleans; they are still names here.
            Node::Str(text) | Node::Bool { raw: text, .. } => text,
            other => {
                self.expected(&entry.value_at, "never, on-failure or always", other);
                return None;
            }
        };
        if let Some(mode) = RestartMode::from_name(text) {
            return Some(mode);
        }
        let message = match suggestion(text, &[RESTART_POLICIES], POLICY_SYNONYMS) {
            Some(known) => format!(
                "unknown restart policy `{text}`; did you mean `{known}`? \
                 (the policies are never, on-failure and always)"
            ),
            None => format!("unknown restart policy `{text}`; use never, on-failure or always"),
        };
        self.error(&entry.value_at, message);
        None
    }

    /// A delay or period: a duration, never `none`.
    fn period(&mut self, entry: &Entry) -> Option<Written<Duration>> {
        self.duration(entry, false)
            .and_then(Timeout::as_duration)
            .map(|d| written(d, entry))
    }

    /// A whole number of at least `min`, written as a YAML number.
    fn count(&mut self, entry: &Entry, min: u32) -> Option<u32> {
        let key = &entry.key;
        let Node::Number { raw } = entry.value else {
            let expected = format!("a whole number ({min} or more)");
            self.expected(&entry.value_at, &expected, entry.value);
            return None;
        };
        let message = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
            match raw.parse::<u32>() {
                Ok(n) if n >= min => return Some(n),
                Ok(_) => format!("`{key}` must be at least {min}"),
                Err(_) => format!("`{raw}` is too large for `{key}` (at most {})", u32::MAX),
            }
        } else if raw.starts_with('-') {
            format!("`{raw}` is negative; `{key}` is a whole number, {min} or more")
        } else {
            format!("`{raw}` is not a whole number; `{key}` is a whole number, {min} or more")
        };
        self.error(&entry.value_at, message);
        None
    }

    /// Merges `own` over `inherited` over the built-in defaults, and reports the
    /// rules between values that a value of `own` takes part in.
    pub(super) fn resolve_policies(&mut self, own: &Policies, inherited: &Policies) -> Resolved {
        Resolved {
            restart: self.resolve_restart(&own.restart, &inherited.restart),
            health: self.resolve_health(&own.health, &inherited.health),
            idle_timeout: pick(&own.idle_timeout, &inherited.idle_timeout).and_then(|p| p.value),
        }
    }

    fn resolve_restart(&mut self, own: &RestartLayer, inherited: &RestartLayer) -> RestartPolicy {
        let d = RestartPolicy::DEFAULT;
        let initial =
            pick(&own.initial, &inherited.initial).unwrap_or(Picked::builtin(d.backoff_initial));
        let max = pick(&own.max, &inherited.max).unwrap_or(Picked::builtin(d.backoff_max));
        if initial.value > max.value
            && !own.broken
            && !inherited.broken
            && let Some(at) = initial.own_at().or(max.own_at())
        {
            self.error(
                at,
                format!(
                    "backoff `initial` ({}) is longer than `max` ({}); the delay starts at \
                     `initial` and grows up to `max`",
                    initial.shown(),
                    max.shown()
                ),
            );
        }
        RestartPolicy {
            policy: pick(&own.policy, &inherited.policy).map_or(d.policy, |p| p.value),
            backoff_initial: initial.value,
            backoff_max: max.value,
            max_restarts: pick(&own.max_restarts, &inherited.max_restarts)
                .map_or(d.max_restarts, |p| p.value),
            window: pick(&own.window, &inherited.window).map_or(d.window, |p| p.value),
        }
    }

    fn resolve_health(
        &mut self,
        own: &HealthLayer,
        inherited: &HealthLayer,
    ) -> Option<HealthCheck> {
        let nothing = HealthFields::default();
        let (own_key, own, inherited): (_, &HealthFields, &HealthFields) = match (own, inherited) {
            (HealthLayer::Off, _) => return None,
            (HealthLayer::Unset, HealthLayer::On { fields, .. }) => (None, &nothing, fields),
            (HealthLayer::Unset, HealthLayer::Unset | HealthLayer::Off) => return None,
            (HealthLayer::On { key_at, fields }, HealthLayer::On { fields: from, .. }) => {
                (Some(key_at), fields, from)
            }
            (HealthLayer::On { key_at, fields }, HealthLayer::Unset | HealthLayer::Off) => {
                (Some(key_at), fields, &nothing)
            }
        };
        let checked = !own.broken && !inherited.broken;
        let Some(interval) = pick(&own.interval, &inherited.interval) else {
            if let Some(at) = own_key.filter(|_| checked) {
                self.error(
                    at,
                    "`health` needs `interval`, how often to ping the server (such as 30s)",
                );
            }
            return None;
        };
        let timeout = pick(&own.timeout, &inherited.timeout)
            .unwrap_or(Picked::builtin(HealthCheck::DEFAULT_TIMEOUT));
        if timeout.value >= interval.value
            && checked
            && let Some(at) = timeout.own_at().or(interval.own_at())
        {
            self.error(
                at,
                format!(
                    "health `timeout` ({}) must be shorter than `interval` ({}), so that a \
                     ping ends before the next one starts",
                    timeout.shown(),
                    interval.shown()
                ),
            );
        }
        Some(HealthCheck {
            interval: interval.value,
            timeout: timeout.value,
            failures: pick(&own.failures, &inherited.failures)
                .map_or(HealthCheck::DEFAULT_FAILURES, |p| p.value),
        })
    }
}
