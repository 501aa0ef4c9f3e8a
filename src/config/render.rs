//! The resolved fleet as data: JSON for scripts, YAML for people.
//!
//! This module owns what `mcpfleet validate` shows of a fleet: every default
//! filled in, every path absolute, and every string through [`Text::display`](super::Text::display),
//! so that a value expanded from the environment appears as its `${env:…}`
//! template and never as the secret. The YAML form is itself a valid fleet file.

use serde_json::{Map, Value, json};

use super::{Fleet, ServerSpec, Transport};

impl Fleet {
    /// `{"version": 1, "file", "name", "servers": [{"name", "enabled", "transport", …}]}`,
    /// servers in file order; secrets redacted.
    pub fn resolved_json(&self) -> Value {
        json!({
            "version": 1,
            "file": self.file.display().to_string(),
            "name": self.name,
            "servers": self.servers.iter().map(server_json).collect::<Vec<_>>(),
        })
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
    match &server.transport {
        Transport::Stdio(stdio) => {
            out.insert("transport".into(), "stdio".into());
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
            out.insert("cwd".into(), stdio.cwd.display().to_string().into());
            out.insert("shell".into(), stdio.shell.into());
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
    Value::Object(out)
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
            out.insert("cwd".into(), stdio.cwd.display().to_string().into());
            out.insert("shell".into(), stdio.shell.into());
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
    out.into()
}
