//! The resolved fleet as data: JSON for scripts, YAML for people.
//!
//! This module owns what `mcpfleet validate` shows of a fleet: every default
//! filled in, every path absolute, and every string through [`Text::display`](super::Text::display),
//! so that a value expanded from the environment appears as its `${env:…}`
//! template and never as the secret. `env_file:` is shown as its paths, never
//! what the files hold. The YAML form is itself a valid fleet file.

use serde_json::{Map, Value, json};

use std::time::Duration;

use super::{Fleet, HealthCheck, RestartPolicy, ServerSpec, Timeout, Transport};

impl Fleet {
    /// `{"version": 1, "file", "name", "servers": [{"name", "enabled", "transport", …}]}`,
    /// servers in file order; secrets redacted.
    pub fn resolved_json(&self) -> Value {
        let mut doc = json!({
            "version": 1,
            "file": self.file.display().to_string(),
            "name": self.name,
            "servers": self.servers.iter().map(server_json).collect::<Vec<_>>(),
        });
        if let Some(c) = &self.coordination {
            doc["coordination"] = json!({
                "etcd": c.etcd,
                "prefix": self.coordination_prefix(),
                "ttl": duration(c.ttl),
                "lock_delay": duration(c.lock_delay),
            });
            if let Some(tls) = &c.tls {
                doc["coordination"]["tls"] = json!({
                    "ca": tls.ca.display().to_string(),
                    "cert": tls.identity.as_ref().map(|(c, _)| c.display().to_string()),
                    "key": tls.identity.as_ref().map(|(_, k)| k.display().to_string()),
                });
            }
        }
        doc
    }

    /// The resolved fleet as a fleet file, secrets redacted.
    pub fn resolved_yaml(&self) -> String {
        let mut top = serde_yaml::Mapping::new();
        top.insert("version".into(), 1.into());
        if let Some(name) = &self.name {
            top.insert("name".into(), name.as_str().into());
        }
        let mut servers = serde_yaml::Mapping::new();
        for server in &self.servers {
            servers.insert(server.name.as_str().into(), server_yaml(server));
        }
        if let Some(c) = &self.coordination {
            let mut m = serde_yaml::Mapping::new();
            let etcd: Vec<serde_yaml::Value> = c.etcd.iter().map(|e| e.as_str().into()).collect();
            m.insert("etcd".into(), etcd.into());
            m.insert("prefix".into(), self.coordination_prefix().into());
            m.insert("ttl".into(), duration(c.ttl).into());
            m.insert("lock_delay".into(), match c.lock_delay.is_zero() {
                true => 0.into(),
                false => duration(c.lock_delay).into(),
            });
            if let Some(tls) = &c.tls {
                let mut t = serde_yaml::Mapping::new();
                t.insert("ca".into(), tls.ca.display().to_string().into());
                if let Some((cert, key)) = &tls.identity {
                    t.insert("cert".into(), cert.display().to_string().into());
                    t.insert("key".into(), key.display().to_string().into());
                }
                m.insert("tls".into(), t.into());
            }
            top.insert("coordination".into(), m.into());
        }
        top.insert("servers".into(), servers.into());
        // A line break in the path would end the comment and corrupt the document.
        let file = self.file.display().to_string().replace(['\n', '\r'], " ");
        let comment = format!("# resolved from {file}\n");
        match serde_yaml::to_string(&top) {
            Ok(body) => comment + &body,
            // Serializing plain strings, numbers and maps cannot fail; JSON is
            // valid YAML should it ever happen.
            Err(_) => comment + &self.resolved_json().to_string(),
        }
    }
}

fn server_json(server: &ServerSpec) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), server.name.clone().into());
    out.insert("enabled".into(), server.enabled.into());
    out.insert("transport".into(), server.transport.kind().into());
    match &server.transport {
        Transport::Stdio(stdio) => {
            out.insert("command".into(), stdio.command.display().into());
            out.insert(
                "args".into(),
                stdio
                    .args
                    .iter()
                    .map(|a| Value::from(a.display()))
                    .collect(),
            );
            out.insert(
                "env".into(),
                stdio
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.display())))
                    .collect::<Map<_, _>>()
                    .into(),
            );
            out.insert(
                "env_file".into(),
                stdio
                    .env_files
                    .iter()
                    .map(|f| Value::from(f.shown.as_str()))
                    .collect(),
            );
            out.insert("cwd".into(), stdio.cwd.display().to_string().into());
            out.insert("shell".into(), stdio.shell.into());
        }
        Transport::Http(http) => {
            out.insert("url".into(), http.url.display().into());
            out.insert(
                "headers".into(),
                http.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.display())))
                    .collect::<Map<_, _>>()
                    .into(),
            );
            if let Some(auth) = &http.auth {
                out.insert("auth".into(), auth_json(auth));
            }
        }
    }
    out.insert(
        "connect_timeout".into(),
        server.connect_timeout.to_string().into(),
    );
    out.insert(
        "cleanup_timeout".into(),
        server.cleanup_timeout.to_string().into(),
    );
    out.insert("restart".into(), restart_json(&server.restart));
    out.insert(
        "health".into(),
        server.health.as_ref().map_or(Value::Null, health_json),
    );
    out.insert(
        "idle_timeout".into(),
        optional_duration(server.idle_timeout).into(),
    );
    Value::Object(out)
}

/// As the fleet file spells it: `500ms`, `1m`.
fn duration(d: Duration) -> String {
    Timeout::After(d).to_string()
}

/// `none` for no duration, as in the fleet file.
fn optional_duration(d: Option<Duration>) -> String {
    d.map_or(Timeout::Never, Timeout::After).to_string()
}

fn restart_json(restart: &RestartPolicy) -> Value {
    json!({
        "policy": restart.policy.as_str(),
        "backoff": {
            "initial": duration(restart.backoff_initial),
            "max": duration(restart.backoff_max),
        },
        "max_restarts": restart.max_restarts,
        "window": duration(restart.window),
    })
}

fn health_json(health: &HealthCheck) -> Value {
    json!({
        "interval": duration(health.interval),
        "timeout": duration(health.timeout),
        "failures": health.failures,
    })
}

fn restart_yaml(restart: &RestartPolicy) -> serde_yaml::Value {
    let mut backoff = serde_yaml::Mapping::new();
    backoff.insert("initial".into(), duration(restart.backoff_initial).into());
    backoff.insert("max".into(), duration(restart.backoff_max).into());
    let mut out = serde_yaml::Mapping::new();
    out.insert("policy".into(), restart.policy.as_str().into());
    out.insert("backoff".into(), backoff.into());
    out.insert("max_restarts".into(), restart.max_restarts.into());
    out.insert("window".into(), duration(restart.window).into());
    out.into()
}

fn health_yaml(health: Option<&HealthCheck>) -> serde_yaml::Value {
    let Some(health) = health else {
        // Explicit, so that the output still means the same under any `defaults:`.
        return "none".into();
    };
    let mut out = serde_yaml::Mapping::new();
    out.insert("interval".into(), duration(health.interval).into());
    out.insert("timeout".into(), duration(health.timeout).into());
    out.insert("failures".into(), health.failures.into());
    out.into()
}

fn server_yaml(server: &ServerSpec) -> serde_yaml::Value {
    let mut out = serde_yaml::Mapping::new();
    match &server.transport {
        Transport::Stdio(stdio) => {
            out.insert("command".into(), stdio.command.display().into());
            let args: Vec<serde_yaml::Value> =
                stdio.args.iter().map(|a| a.display().into()).collect();
            out.insert("args".into(), args.into());
            let mut env = serde_yaml::Mapping::new();
            for (k, v) in &stdio.env {
                env.insert(k.as_str().into(), v.display().into());
            }
            out.insert("env".into(), env.into());
            if !stdio.env_files.is_empty() {
                // Paths only: what the files hold are secrets (docs/design.md §6).
                let files: Vec<serde_yaml::Value> = stdio
                    .env_files
                    .iter()
                    .map(|f| f.shown.as_str().into())
                    .collect();
                out.insert("env_file".into(), files.into());
            }
            out.insert("cwd".into(), stdio.cwd.display().to_string().into());
            out.insert("shell".into(), stdio.shell.into());
        }
        Transport::Http(http) => {
            out.insert("url".into(), http.url.display().into());
            let mut headers = serde_yaml::Mapping::new();
            for (k, v) in &http.headers {
                headers.insert(k.as_str().into(), v.display().into());
            }
            out.insert("headers".into(), headers.into());
            if let Some(auth) = &http.auth {
                let yaml = serde_yaml::to_value(auth_json(auth)).unwrap_or_default();
                out.insert("auth".into(), yaml);
            }
        }
    }
    out.insert("enabled".into(), server.enabled.into());
    out.insert(
        "connect_timeout".into(),
        server.connect_timeout.to_string().into(),
    );
    out.insert(
        "cleanup_timeout".into(),
        server.cleanup_timeout.to_string().into(),
    );
    out.insert("restart".into(), restart_yaml(&server.restart));
    out.insert("health".into(), health_yaml(server.health.as_ref()));
    out.insert(
        "idle_timeout".into(),
        optional_duration(server.idle_timeout).into(),
    );
    out.into()
}

/// A server's `auth:` as it may be shown and recorded: secrets as their
/// `${env:}`, never their values.
fn auth_json(auth: &crate::config::AuthSpec) -> Value {
    use crate::config::{AuthSpec, TokenBackend};
    let store = |b: TokenBackend| match b {
        TokenBackend::File => "file",
        TokenBackend::Keyring => "keyring",
    };
    let mut m = Map::new();
    match auth {
        AuthSpec::OAuth(o) => {
            let mut inner = Map::new();
            inner.insert("scopes".into(), o.scopes.clone().into());
            if let Some(id) = &o.client_id {
                inner.insert("client_id".into(), id.display().into());
            }
            if let Some(secret) = &o.client_secret {
                inner.insert("client_secret".into(), secret.display().into());
            }
            for (key, value) in [("issuer", &o.issuer), ("client_metadata_url", &o.client_metadata_url)] {
                if let Some(v) = value {
                    inner.insert(key.into(), v.as_str().into());
                }
            }
            if let Some(port) = o.redirect_port {
                inner.insert("redirect_port".into(), port.into());
            }
            if let Some(token) = &o.refresh_token {
                inner.insert("refresh_token".into(), token.display().into());
            }
            inner.insert("offline_access".into(), o.offline_access.into());
            inner.insert("store".into(), store(o.store).into());
            m.insert("oauth".into(), inner.into());
        }
        AuthSpec::ClientCredentials(c) => {
            let mut inner = Map::new();
            inner.insert("client_id".into(), c.client_id.display().into());
            inner.insert("client_secret".into(), c.client_secret.display().into());
            inner.insert("scopes".into(), c.scopes.clone().into());
            inner.insert("store".into(), store(c.store).into());
            m.insert("client_credentials".into(), inner.into());
        }
    }
    m.into()
}
