//! `restart:`, `health:` and `idle_timeout:` as they are resolved: their defaults,
//! every key, and a server's block merged over `defaults:` key by key.

use super::*;

#[test]
fn policies_default_to_never_no_health_and_no_idle_timeout() {
    let fleet = ok("version: 1\nservers:\n  a:\n    command: x\n");
    let a = fleet.server("a").unwrap();
    assert_eq!(
        a.restart,
        RestartPolicy {
            policy: RestartMode::Never,
            backoff_initial: ms(500),
            backoff_max: secs(30),
            max_restarts: 5,
            window: secs(60),
        }
    );
    assert_eq!(a.restart, RestartPolicy::default());
    assert_eq!(a.health, None);
    assert_eq!(a.idle_timeout, None);
    // Empty blocks are all defaults, as `defaults:` is.
    let fleet = ok(
        "version: 1\nservers:\n  a:\n    command: x\n    restart:\n  b:\n    command: x\n    restart: {backoff: {}}\n",
    );
    assert!(
        fleet
            .servers
            .iter()
            .all(|s| s.restart == RestartPolicy::DEFAULT)
    );
}

#[test]
fn a_server_with_every_policy_key() {
    let fleet = ok("version: 1
servers:
  a:
    command: x
    restart:
      policy: on-failure
      backoff: {initial: 250ms, max: 2m}
      max_restarts: 0
      window: 1h
    health:
      interval: 30s
      timeout: 2s
      failures: 1
    idle_timeout: 10m
");
    let a = &fleet.servers[0];
    assert_eq!(
        a.restart,
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: ms(250),
            backoff_max: secs(120),
            max_restarts: 0,
            window: secs(3600),
        }
    );
    assert_eq!(
        a.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: secs(2),
            failures: 1,
        })
    );
    assert_eq!(a.idle_timeout, Some(secs(600)));
}

#[test]
fn every_restart_policy_value() {
    for (text, mode) in [
        ("never", RestartMode::Never),
        ("on-failure", RestartMode::OnFailure),
        ("always", RestartMode::Always),
        ("\"always\"", RestartMode::Always),
    ] {
        let fleet = ok(&format!(
            "{HEAD}  a:\n    command: x\n    restart: {{policy: {text}}}\n"
        ));
        assert_eq!(fleet.servers[0].restart.policy, mode, "{text}");
        assert_eq!(mode.to_string(), text.trim_matches('"'));
        assert_eq!(RestartMode::from_name(mode.as_str()), Some(mode));
    }
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    restart: {policy: on_failure}
  b:
    command: x
    restart: {policy: unless-stopped}
  c:
    command: x
    restart: {policy: sometimes}
  d:
    command: x
    restart:
      policy: Always
  e:
    command: x
    restart: {policy: 1}
  f:
    command: x
    restart: {policy: }
"
        ),
        [
            "5:23: servers.a.restart.policy: unknown restart policy `on_failure`; did you mean `on-failure`? (the policies are never, on-failure and always)",
            "8:23: servers.b.restart.policy: unknown restart policy `unless-stopped`; did you mean `always`? (the policies are never, on-failure and always)",
            "11:23: servers.c.restart.policy: unknown restart policy `sometimes`; use never, on-failure or always",
            "15:15: servers.d.restart.policy: unknown restart policy `Always`; did you mean `always`? (the policies are never, on-failure and always)",
            "18:23: servers.e.restart.policy: expected never, on-failure or always, found a number",
            "21:15: servers.f.restart.policy: expected never, on-failure or always, found null",
        ]
    );
}

#[test]
fn a_server_block_wins_over_defaults_key_by_key() {
    let fleet = ok("version: 1
defaults:
  restart:
    policy: on-failure
    backoff: {initial: 1s, max: 1m}
    max_restarts: 3
  health: {interval: 30s, failures: 2}
  idle_timeout: 10m
servers:
  inherits:
    command: x
  overrides:
    command: x
    restart:
      backoff: {max: 2m}
      window: 5m
    health: {timeout: 1s}
    idle_timeout: none
  opts-out:
    command: x
    restart: {policy: always, max_restarts: 0}
    health: none
    idle_timeout: 1h
");
    let inherits = fleet.server("inherits").unwrap();
    assert_eq!(
        inherits.restart,
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: secs(1),
            backoff_max: secs(60),
            max_restarts: 3,
            window: secs(60),
        }
    );
    assert_eq!(
        inherits.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: secs(5),
            failures: 2,
        })
    );
    assert_eq!(inherits.idle_timeout, Some(secs(600)));

    let overrides = fleet.server("overrides").unwrap();
    assert_eq!(
        overrides.restart,
        RestartPolicy {
            policy: RestartMode::OnFailure,
            backoff_initial: secs(1),
            backoff_max: secs(120),
            max_restarts: 3,
            window: secs(300),
        }
    );
    assert_eq!(
        overrides.health,
        Some(HealthCheck {
            interval: secs(30),
            timeout: secs(1),
            failures: 2,
        })
    );
    assert_eq!(overrides.idle_timeout, None);

    let opts_out = fleet.server("opts-out").unwrap();
    assert_eq!(opts_out.restart.policy, RestartMode::Always);
    assert_eq!(opts_out.restart.max_restarts, 0);
    assert_eq!(opts_out.restart.backoff_initial, secs(1));
    assert_eq!(opts_out.health, None);
    assert_eq!(opts_out.idle_timeout, Some(secs(3600)));
}

#[test]
fn defaults_written_after_servers_still_apply_to_policies() {
    let fleet = ok(
        "version: 1\nservers:\n  a: {command: x}\ndefaults: {restart: {policy: always}, idle_timeout: 5m}\n",
    );
    assert_eq!(fleet.servers[0].restart.policy, RestartMode::Always);
    assert_eq!(fleet.servers[0].idle_timeout, Some(secs(300)));
}

#[test]
fn resolved_output_shows_policies_and_loads_back_the_same() {
    let fleet = ok("version: 1
defaults:
  restart: {policy: on-failure, backoff: {initial: 1s}}
  health: {interval: 30s}
  idle_timeout: 10m
servers:
  a: {command: x}
  b:
    command: y
    restart: {policy: always, max_restarts: 1, window: 90s}
    health: none
    idle_timeout: none
");
    let json = fleet.resolved_json();
    assert_eq!(
        json["servers"][0]["restart"],
        serde_json::json!({
            "policy": "on-failure",
            "backoff": {"initial": "1s", "max": "30s"},
            "max_restarts": 5,
            "window": "1m",
        })
    );
    assert_eq!(
        json["servers"][0]["health"],
        serde_json::json!({"interval": "30s", "timeout": "5s", "failures": 3})
    );
    assert_eq!(json["servers"][0]["idle_timeout"], "10m");
    assert_eq!(json["servers"][1]["restart"]["policy"], "always");
    assert_eq!(json["servers"][1]["restart"]["window"], "90s");
    assert_eq!(json["servers"][1]["health"], serde_json::Value::Null);
    assert_eq!(json["servers"][1]["idle_timeout"], "none");

    let yaml = fleet.resolved_yaml();
    assert!(yaml.contains("policy: on-failure"), "{yaml}");
    assert!(yaml.contains("health: none"), "{yaml}");
    let again = load_str(&yaml, &fleet_path(), &env).unwrap();
    for (a, b) in again.servers.iter().zip(&fleet.servers) {
        assert_eq!(a.restart, b.restart, "{yaml}");
        assert_eq!(a.health, b.health, "{yaml}");
        assert_eq!(a.idle_timeout, b.idle_timeout, "{yaml}");
    }
}
