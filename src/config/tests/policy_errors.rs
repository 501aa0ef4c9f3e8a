//! What the policy blocks refuse: rules between values (`backoff`, `health`),
//! `none` where it has no meaning, bad durations and counts, unknown keys.

use super::*;

#[test]
fn backoff_initial_longer_than_max_is_refused_where_it_is_written() {
    assert_eq!(
        errors(
            "version: 1
servers:
  both:
    command: x
    restart: {backoff: {initial: 1m, max: 30s}}
  initial-only:
    command: x
    restart:
      backoff:
        initial: 45s
  max-only:
    command: x
    restart: {backoff: {max: 100ms}}
"
        ),
        [
            "5:34: servers.both.restart.backoff.initial: backoff `initial` (1m) is longer than `max` (30s); the delay starts at `initial` and grows up to `max`",
            "10:18: servers.initial-only.restart.backoff.initial: backoff `initial` (45s) is longer than `max` (30s, the default); the delay starts at `initial` and grows up to `max`",
            "13:30: servers.max-only.restart.backoff.max: backoff `initial` (500ms, the default) is longer than `max` (100ms); the delay starts at `initial` and grows up to `max`",
        ]
    );
    // Against a value of `defaults:`, the message says so.
    assert_eq!(
        one_error(
            "version: 1
defaults: {restart: {backoff: {initial: 10s}}}
servers:
  a: {command: x, restart: {backoff: {max: 5s}}}
"
        ),
        "4:44: servers.a.restart.backoff.max: backoff `initial` (10s, from `defaults`) is longer than `max` (5s); the delay starts at `initial` and grows up to `max`"
    );
    // A conflict inside `defaults:` is reported once, there, not per server.
    assert_eq!(
        one_error(
            "version: 1
defaults:
  restart: {backoff: {initial: 2m}}
servers:
  a: {command: x}
  b: {command: x}
"
        ),
        "3:32: defaults.restart.backoff.initial: backoff `initial` (2m) is longer than `max` (30s, the default); the delay starts at `initial` and grows up to `max`"
    );
    // A server that resolves the conflict of `defaults:` does not repeat it.
    assert_eq!(
        errors(
            "version: 1
defaults:
  restart: {backoff: {initial: 2m}}
servers:
  a: {command: x, restart: {backoff: {max: 5m}}}
"
        )
        .len(),
        1
    );
    // Equal is fine: a constant delay.
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    restart: {{backoff: {{initial: 2s, max: 2000ms}}}}\n"
    ));
    assert_eq!(fleet.servers[0].restart.backoff_initial, secs(2));
    assert_eq!(fleet.servers[0].restart.backoff_max, secs(2));
}

#[test]
fn health_timeout_must_be_shorter_than_interval() {
    assert_eq!(
        errors(
            "version: 1
servers:
  equal:
    command: x
    health: {interval: 10s, timeout: 10s}
  longer:
    command: x
    health:
      interval: 10s
      timeout: 1m
  default-timeout:
    command: x
    health: {interval: 3s}
"
        ),
        [
            "5:38: servers.equal.health.timeout: health `timeout` (10s) must be shorter than `interval` (10s), so that a ping ends before the next one starts",
            "10:16: servers.longer.health.timeout: health `timeout` (1m) must be shorter than `interval` (10s), so that a ping ends before the next one starts",
            "13:24: servers.default-timeout.health.interval: health `timeout` (5s, the default) must be shorter than `interval` (3s), so that a ping ends before the next one starts",
        ]
    );
    assert_eq!(
        one_error(
            "version: 1
defaults:
  health: {interval: 1m, timeout: 20s}
servers:
  a: {command: x, health: {interval: 10s}}
  b: {command: x}
"
        ),
        "5:38: servers.a.health.interval: health `timeout` (20s, from `defaults`) must be shorter than `interval` (10s), so that a ping ends before the next one starts"
    );
    assert_eq!(
        one_error(
            "version: 1
defaults:
  health: {interval: 2s}
servers:
  a: {command: x}
  b: {command: x}
"
        ),
        "3:22: defaults.health.interval: health `timeout` (5s, the default) must be shorter than `interval` (2s), so that a ping ends before the next one starts"
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    health: {{interval: 2s, timeout: 1999ms}}\n"
    ));
    assert_eq!(fleet.servers[0].health.unwrap().timeout, ms(1999));
}

#[test]
fn health_needs_an_interval() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    health: {timeout: 1s}
  b:
    command: x
    health:
  c:
    command: x
    health: {}
"
        ),
        [
            "5:5: servers.a.health: `health` needs `interval`, how often to ping the server (such as 30s)",
            "8:5: servers.b.health: `health` needs `interval`, how often to ping the server (such as 30s)",
            "11:5: servers.c.health: `health` needs `interval`, how often to ping the server (such as 30s)",
        ]
    );
    // `defaults.health` applies to every server, so it needs one too; once.
    assert_eq!(
        one_error(
            "version: 1
defaults:
  health: {failures: 5}
servers:
  a: {command: x}
  b: {command: x, health: {interval: 1m}}
"
        ),
        "3:3: defaults.health: `health` needs `interval`, how often to ping the server (such as 30s)"
    );
    // A server inherits the interval of `defaults:`.
    let fleet = ok(
        "version: 1\ndefaults: {health: {interval: 1m}}\nservers:\n  a: {command: x, health: {failures: 9}}\n  b: {command: x, health: }\n",
    );
    for server in &fleet.servers {
        assert_eq!(server.health.unwrap().interval, secs(60));
    }
    assert_eq!(fleet.servers[0].health.unwrap().failures, 9);
    assert_eq!(fleet.servers[1].health.unwrap().failures, 3);
}

#[test]
fn none_only_where_no_deadline_makes_sense() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart:
      backoff: {initial: none, max: none}
      window: none
    health: {interval: none, timeout: none}
"
        ),
        [
            "6:26: servers.a.restart.backoff.initial: `initial` cannot be none; write a duration such as 10s or 500ms",
            "6:37: servers.a.restart.backoff.max: `max` cannot be none; write a duration such as 10s or 500ms",
            "7:15: servers.a.restart.window: `window` cannot be none; write a duration such as 10s or 500ms",
            "8:24: servers.a.health.interval: `interval` cannot be none; write a duration such as 10s or 500ms",
            "8:39: servers.a.health.timeout: `timeout` cannot be none; write a duration such as 10s or 500ms",
        ]
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    idle_timeout: none\n    connect_timeout: none\n"
    ));
    assert_eq!(fleet.servers[0].idle_timeout, None);
    assert_eq!(fleet.servers[0].connect_timeout, Timeout::Never);
}

#[test]
fn bad_durations_in_policies() {
    assert_eq!(
        errors(
            "version: 1
defaults:
  idle_timeout: 0s
servers:
  a:
    command: x
    restart: {backoff: {initial: 0ms, max: 10}, window: 1.5m}
    health: {interval: forever, timeout: [1s]}
    idle_timeout: 10 m
"
        ),
        [
            "3:17: defaults.idle_timeout: `0s` is zero, a deadline that can never be met; use a positive duration, or none for no deadline",
            "7:34: servers.a.restart.backoff.initial: `0ms` is zero; `initial` needs a positive duration",
            "7:44: servers.a.restart.backoff.max: `10` has no unit; add a unit: 10s",
            "7:57: servers.a.restart.window: `1.5m` is not a whole number of a unit; write e.g. 1500ms instead of 1.5s",
            "8:24: servers.a.health.interval: `forever` is not a duration; write e.g. 10s, 500ms, 2m or 1h",
            "8:42: servers.a.health.timeout: expected a duration such as 10s or 500ms, found a sequence",
            "9:19: servers.a.idle_timeout: `10 m` has an unknown unit ` m`; use ms, s, m or h",
        ]
    );
}

#[test]
fn counts_are_whole_numbers_in_range() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: {max_restarts: -1}
    health: {interval: 1m, failures: 0}
  b:
    command: x
    restart: {max_restarts: 1.5}
    health: {interval: 1m, failures: \"3\"}
  c:
    command: x
    restart: {max_restarts: 4294967296}
    health: {interval: 1m, failures: 0x10}
"
        ),
        [
            "5:29: servers.a.restart.max_restarts: `-1` is negative; `max_restarts` is a whole number, 0 or more",
            "6:38: servers.a.health.failures: `failures` must be at least 1",
            "9:29: servers.b.restart.max_restarts: `1.5` is not a whole number; `max_restarts` is a whole number, 0 or more",
            "10:38: servers.b.health.failures: expected a whole number (1 or more), found a string",
            "13:29: servers.c.restart.max_restarts: `4294967296` is too large for `max_restarts` (at most 4294967295)",
            "14:38: servers.c.health.failures: `0x10` is not a whole number; `failures` is a whole number, 1 or more",
        ]
    );
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: x\n    restart: {{max_restarts: 4294967295}}\n"
    ));
    assert_eq!(fleet.servers[0].restart.max_restarts, u32::MAX);
}

#[test]
fn unknown_and_mistyped_policy_keys() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart:
      polcy: always
      max_retries: 3
      backoff: {initial: 1s, maximum: 10s, jitter: 0.1}
    health: {intervall: 1m, interval: 2m, retries: 2}
    idle_timout: 5m
"
        ),
        [
            "6:7: servers.a.restart.polcy: unknown key `polcy`; did you mean `policy`?",
            "7:7: servers.a.restart.max_retries: unknown key `max_retries`; did you mean `max_restarts`?",
            "8:30: servers.a.restart.backoff.maximum: unknown key `maximum`; did you mean `max`?",
            "8:44: servers.a.restart.backoff.jitter: unknown key `jitter`",
            "9:14: servers.a.health.intervall: unknown key `intervall`; did you mean `interval`?",
            "9:43: servers.a.health.retries: unknown key `retries`; did you mean `failures`?",
            "10:5: servers.a.idle_timout: unknown key `idle_timout`; did you mean `idle_timeout`?",
        ]
    );
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: always
  b:
    command: x
    restart: [on-failure]
    health: 30s
  c:
    command: x
    restart: {backoff: 1s}
    health: true
    idle_timeout: {after: 1m}
"
        ),
        [
            "5:14: servers.a.restart: expected a mapping such as `{policy: always}`, found a string",
            "8:14: servers.b.restart: expected a mapping such as `{policy: on-failure}`, found a sequence",
            "9:13: servers.b.health: expected a mapping such as `{interval: 30s}`, or none, found a string",
            "12:24: servers.c.restart.backoff: expected a mapping such as `{initial: 500ms, max: 30s}`, found a string",
            "13:13: servers.c.health: expected a mapping such as `{interval: 30s}`, or none, found a boolean",
            "14:19: servers.c.idle_timeout: expected a duration such as 10s, 500ms or none, found a mapping",
        ]
    );
    assert_eq!(
        one_error(
            "version: 1\nservers:\n  a:\n    command: x\n    restart: {policy: always, policy: never}\n"
        ),
        "5:31: servers.a.restart.policy: duplicate key `policy` (first defined on line 5)"
    );
}

#[test]
fn a_refused_value_causes_no_second_error_between_values() {
    // `initial: 0s` is refused; falling back to 500ms must not then be
    // reported as longer than `max: 100ms`, nor a bad interval as a missing one.
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: {backoff: {initial: 0s, max: 100ms}}
    health: {interval: 0s, timeout: 1h}
"
        ),
        [
            "5:34: servers.a.restart.backoff.initial: `0s` is zero; `initial` needs a positive duration",
            "6:24: servers.a.health.interval: `0s` is zero; `interval` needs a positive duration",
        ]
    );
}
