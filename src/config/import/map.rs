//! One client's server entry to one fleet server, or the reason it cannot be one.
//!
//! Every client writes `command`, `args` and `env` for a stdio server; a remote
//! one is `url` (Windsurf: `serverUrl`) and `headers`, with a `type` that says
//! `http` or `streamable-http` (Claude Code, VS Code, Cursor), or none; VS Code
//! and Cursor add `envFile`, which becomes `env_file:`. What an
//! entry says that mcpfleet cannot do (the legacy `sse` type, an unknown type,
//! a VS Code input prompt, a value of the wrong kind) makes the whole entry one
//! that is not carried over: a server that half works is worse than one the
//! user sees listed as not imported. Literal secrets move to environment
//! variables (`secrets`); references in the clients' forms are rewritten
//! (`vars`).

use std::collections::HashSet;
use std::path::Path;

use super::super::expand::is_env_name;
use super::super::validate::{check_url, is_header_name, is_header_value};
use super::json::{Json, Member, Pos, Value};
use super::secrets::{Vault, env_name_from, is_secret_name, split_scheme};
use super::vars::{Places, Rewritten, has_reference, hide_secret_defaults, rewrite};
use super::{Place, Server, Transport};

/// Keys of an entry that are read; the others are named in a note.
const READ_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "envFile",
    "url",
    "serverUrl",
    "headers",
    "disabled",
    "disabledTools",
];

/// What one entry becomes.
pub(super) struct Mapper<'a> {
    pub places: Places<'a>,
    pub vault: &'a mut Vault,
    /// `${VAR:-default}` seen so far.
    pub defaults: &'a mut Vec<(String, String)>,
}

impl Mapper<'_> {
    /// The server for entry `member`, named `name` in the fleet; its places are
    /// recorded relative to `json_path`, the entry's own path in the file.
    pub(super) fn server(
        &mut self,
        member: &Member,
        name: &str,
        json_path: &str,
    ) -> Result<Server, String> {
        let checkpoint = self.vault.checkpoint();
        let defaults = self.defaults.len();
        let result = Entry {
            mapper: self,
            name,
            json_path,
            notes: Vec::new(),
            places: vec![Place {
                fleet: String::new(),
                json: json_path.to_string(),
                pos: member.key_pos,
            }],
        }
        .map(&member.value);
        if result.is_err() {
            // What a refused entry would have added belongs to no server.
            self.vault.rollback(checkpoint);
            self.defaults.truncate(defaults);
        }
        result
    }
}

struct Entry<'m, 'a> {
    mapper: &'m mut Mapper<'a>,
    name: &'m str,
    json_path: &'m str,
    notes: Vec<String>,
    places: Vec<Place>,
}

/// The `connect_timeout` of a server started by a package runner: its first
/// start downloads and installs the package (`npx` of a published server takes
/// about 9 s on a fast network), which the default 10 s does not leave room for.
pub(super) const PACKAGE_RUNNER_CONNECT_TIMEOUT: &str = "60s";

/// The package runner `command` is (`npx`, `uvx`, ...), by its file name, if it is one.
pub(super) fn package_runner(command: &str) -> Option<&'static str> {
    let file = command.rsplit('/').next().unwrap_or(command);
    let file = file.strip_suffix(".cmd").unwrap_or(file);
    ["npx", "pnpx", "bunx", "uvx", "pipx"]
        .into_iter()
        .find(|runner| *runner == file)
}

/// How an entry reaches its server.
enum Kind {
    Stdio,
    Http,
}

impl Entry<'_, '_> {
    fn map(mut self, entry: &Json) -> Result<Server, String> {
        let Value::Object(members) = &entry.value else {
            return Err(format!("expected an object, found {}", entry.kind()));
        };
        let mut ignored: Vec<&str> = Vec::new();
        for m in members {
            if !READ_KEYS.contains(&m.key.as_str()) && !ignored.contains(&m.key.as_str()) {
                ignored.push(&m.key);
            }
        }
        let url_key = match (entry.get("serverUrl"), entry.get("url")) {
            (Some(_), Some(_)) => {
                self.notes
                    .push("both `serverUrl` and `url`: `serverUrl` is used".into());
                "serverUrl"
            }
            (Some(_), None) => "serverUrl",
            _ => "url",
        };
        let kind = self.kind(entry, url_key)?;
        let mut enabled = true;
        if let Some(disabled) = entry.get("disabled") {
            match disabled.value {
                Value::Bool(d) => {
                    enabled = !d;
                    self.place("enabled", "disabled", disabled.pos);
                }
                _ => return Err(expected("disabled", "a boolean", disabled)),
            }
        }
        let mut deny_tools = Vec::new();
        if let Some(tools) = entry.get("disabledTools") {
            deny_tools = self.strings("disabledTools", tools)?;
            self.place("tools", "disabledTools", tools.pos);
        }
        let transport = match kind {
            Kind::Stdio => {
                for key in ["url", "serverUrl", "headers"] {
                    if entry.get(key).is_some() {
                        return Err(format!("a stdio server (`command`) with `{key}`"));
                    }
                }
                let stdio = self.stdio(entry)?;
                self.bridged(stdio)
            }
            Kind::Http => {
                for key in ["command", "args", "env", "cwd", "envFile"] {
                    if entry.get(key).is_some() {
                        return Err(format!("a remote server (`{url_key}`) with `{key}`"));
                    }
                }
                self.http(entry, url_key)?
            }
        };
        if !ignored.is_empty() {
            let keys: Vec<String> = ignored.iter().map(|k| format!("`{k}`")).collect();
            self.notes.push(format!(
                "not carried over (no equivalent here): {}",
                keys.join(", ")
            ));
        }
        let connect_timeout = match &transport {
            Transport::Stdio { command, .. } => package_runner(command),
            Transport::Http { .. } => None,
        }
        .map(|runner| {
            self.notes.push(format!(
                "started by `{runner}`, whose first start may download the package: \
                 connect_timeout {PACKAGE_RUNNER_CONNECT_TIMEOUT} (the default is 10s)"
            ));
            PACKAGE_RUNNER_CONNECT_TIMEOUT
        });
        Ok(Server {
            name: self.name.to_string(),
            original: String::new(),
            transport,
            enabled,
            deny_tools,
            connect_timeout,
            notes: self.notes,
            places: self.places,
        })
    }

    fn kind(&self, entry: &Json, url_key: &str) -> Result<Kind, String> {
        let has_command = entry.get("command").is_some();
        let has_url = entry.get(url_key).is_some();
        let Some(ty) = entry.get("type") else {
            return match (has_command, has_url) {
                (true, false) => Ok(Kind::Stdio),
                (false, true) => Ok(Kind::Http),
                (true, true) => Err(format!(
                    "it has both `command` and `{url_key}`, and no `type` to choose"
                )),
                (false, false) => Err("it has neither `command` nor `url`".into()),
            };
        };
        let Some(ty) = ty.as_str() else {
            return Err(expected("type", "a string", ty));
        };
        match ty.to_ascii_lowercase().as_str() {
            "stdio" if has_command => Ok(Kind::Stdio),
            "stdio" => Err("`type` is stdio, but there is no `command`".into()),
            "http" | "streamable-http" | "streamable_http" | "streamablehttp" if has_url => {
                Ok(Kind::Http)
            }
            "http" | "streamable-http" | "streamable_http" | "streamablehttp" => {
                Err(format!("`type` is {ty}, but there is no `{url_key}`"))
            }
            "sse" => Err(
                "it uses the legacy HTTP+SSE transport (`type: sse`), which mcpfleet does not \
                 speak; if the server also serves streamable HTTP (often at /mcp), add it \
                 with `url:`"
                    .into(),
            ),
            _ => Err(format!(
                "unknown `type` {}; mcpfleet runs `stdio` and streamable `http` servers",
                super::json::quote(ty)
            )),
        }
    }

    /// Records where the fleet key `fleet` (relative to the server) came from.
    fn place(&mut self, fleet: &str, json: &str, pos: Pos) {
        self.places.push(Place {
            fleet: fleet.to_string(),
            json: join(self.json_path, json),
            pos,
        });
    }

    /// A string value of the entry, its references rewritten.
    fn text(&mut self, key: &str, value: &Json) -> Result<Rewritten, String> {
        let Some(text) = scalar(value) else {
            return Err(expected(key, "a string", value));
        };
        let rewritten = rewrite(&text, &self.mapper.places)?;
        self.absorb(&rewritten);
        Ok(rewritten)
    }

    fn absorb(&mut self, rewritten: &Rewritten) {
        for (var, default) in &rewritten.defaults {
            let default = match is_secret_name(var) {
                true => "...".to_string(),
                false => default.clone(),
            };
            self.notes.push(format!(
                "`${{{var}:-{default}}}`: the default is not carried over; set {var}"
            ));
            if let Some((_, default)) = rewritten.defaults.iter().find(|(v, _)| v == var) {
                self.mapper.defaults.push((var.clone(), default.clone()));
            }
        }
        for note in &rewritten.notes {
            if !self.notes.contains(note) {
                self.notes.push(note.clone());
            }
        }
    }

    fn strings(&mut self, key: &str, value: &Json) -> Result<Vec<String>, String> {
        let Value::Array(items) = &value.value else {
            return Err(expected(key, "an array of strings", value));
        };
        items
            .iter()
            .map(|item| scalar(item).ok_or_else(|| expected(key, "an array of strings", item)))
            .collect()
    }

    /// A secret's new reference: `${env:VAR}`, the value kept under `VAR`,
    /// named `name` (an env variable keeps its name), else after the server
    /// and `name`.
    fn secret(&mut self, name: &str, origin: String, value: &str) -> String {
        let scoped = format!("{}_{}", self.name, env_name_from(name));
        let var = self.mapper.vault.keep(name, &scoped, origin, value);
        format!("${{env:{var}}}")
    }

    /// As [`Entry::secret`], always named after the server and `name`: a
    /// header or a flag says little without its server (`LINEAR_AUTHORIZATION`).
    fn scoped_secret(&mut self, name: &str, origin: String, value: &str) -> String {
        let scoped = format!("{}_{}", self.name, env_name_from(name));
        let var = self.mapper.vault.keep(&scoped, &scoped, origin, value);
        format!("${{env:{var}}}")
    }

    fn stdio(&mut self, entry: &Json) -> Result<Transport, String> {
        let command_json = entry.get("command").expect("a stdio entry has `command`");
        let command = self.text("command", command_json)?.text;
        if command.is_empty() {
            return Err("`command` is empty".into());
        }
        self.place("command", "command", command_json.pos);
        let mut args = Vec::new();
        if let Some(list) = entry.get("args") {
            match &list.value {
                Value::Null => {}
                Value::Array(items) => {
                    let raw: Vec<String> = items
                        .iter()
                        .map(|i| {
                            scalar(i).ok_or_else(|| expected("args", "an array of strings", i))
                        })
                        .collect::<Result<_, _>>()?;
                    args = self.args(&raw)?;
                    for (i, item) in items.iter().enumerate() {
                        self.place(&format!("args[{i}]"), &format!("args[{i}]"), item.pos);
                    }
                }
                _ => return Err(expected("args", "an array of strings", list)),
            }
        }
        let mut env = Vec::new();
        if let Some(map) = entry.get("env") {
            env = self.env(map)?;
        }
        let mut cwd = None;
        if let Some(dir) = entry.get("cwd") {
            let text = self.text("cwd", dir)?.text;
            cwd = Some(self.in_workspace(text));
            self.place("cwd", "cwd", dir.pos);
        }
        let mut env_files = Vec::new();
        if let Some(file) = entry.get("envFile") {
            let text = self.text("envFile", file)?.text;
            if text.is_empty() {
                return Err("`envFile` is empty".into());
            }
            env_files.push(self.in_workspace(text));
            self.place("env_file", "envFile", file.pos);
        }
        Ok(Transport::Stdio {
            command,
            args,
            env,
            env_files,
            cwd,
        })
    }

    /// `npx mcp-remote URL`: the bridge that gives OAuth to clients without
    /// it, imported as the remote server it bridges to with `auth: oauth`. A
    /// bridge given headers, options mcpfleet has no equivalent of, or a URL
    /// of the legacy SSE transport stays as it is.
    fn bridged(&mut self, transport: Transport) -> Transport {
        let Transport::Stdio { command, args, env, .. } = &transport else {
            return transport;
        };
        if !matches!(package_runner(command), Some("npx" | "pnpx" | "bunx")) || !env.is_empty() {
            return transport;
        }
        let Some(at) = args
            .iter()
            .position(|a| a == "mcp-remote" || a.starts_with("mcp-remote@"))
        else {
            return transport;
        };
        if !args[..at].iter().all(|a| matches!(a.as_str(), "-y" | "--yes")) {
            return transport;
        }
        let Some(url) = args.get(at + 1).filter(|u| check_url(u).is_ok()) else {
            return transport;
        };
        let path = url.split(['?', '#']).next().unwrap_or_default();
        if path.trim_end_matches('/').ends_with("/sse") {
            return transport;
        }
        let mut rest = args[at + 2..].iter();
        let mut port = None;
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--allow-http" | "--debug" => {}
                "--transport" => {
                    if rest.next().is_none() {
                        return transport;
                    }
                }
                digits if port.is_none() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                    port = Some(digits.to_owned());
                }
                _ => return transport,
            }
        }
        let url = url.clone();
        self.notes.push(format!(
            "ran `mcp-remote`, the OAuth bridge: imported as the remote server it bridges \
             to, with `auth: oauth`; run `mcpfleet login {}` once{}",
            self.name,
            port.map(|p| format!(" (its callback port {p} is not needed: set `redirect_port` if the authorization server wants a fixed one)"))
                .unwrap_or_default()
        ));
        Transport::Http {
            url,
            headers: Vec::new(),
            oauth: true,
        }
    }

    /// A path as the fleet file needs it: a relative one is taken from the
    /// project the client's file belongs to, not from wherever the fleet file
    /// is written.
    fn in_workspace(&self, text: String) -> String {
        let path = Path::new(&text);
        match has_reference(&text) || path.is_absolute() || text.is_empty() {
            true => text,
            false => self
                .mapper
                .places
                .workspace
                .join(path)
                .display()
                .to_string(),
        }
    }

    /// Arguments, with the values of secret flags (`--api-key VALUE`,
    /// `--token=VALUE`, `Authorization: Bearer VALUE`) moved to variables.
    fn args(&mut self, raw: &[String]) -> Result<Vec<String>, String> {
        let mut out = Vec::with_capacity(raw.len());
        let mut secret_flag: Option<String> = None;
        for (i, arg) in raw.iter().enumerate() {
            if let Some(flag) = secret_flag.take()
                && !arg.starts_with('-')
                && !arg.is_empty()
                && !has_reference(arg)
            {
                let origin = format!("args[{i}] (after `{flag}`) of server {}", self.name);
                out.push(self.scoped_secret(&flag, origin, arg));
                continue;
            }
            if let Some(rewritten) = self.secret_arg(i, arg) {
                out.push(rewritten);
                continue;
            }
            if is_secret_flag(arg) && !arg.contains('=') {
                secret_flag = Some(arg.clone());
            }
            let rewritten = rewrite(arg, &self.mapper.places)?;
            self.absorb(&rewritten);
            out.push(rewritten.text);
        }
        Ok(out)
    }

    /// `--token=VALUE`, `Name: VALUE` with a secret's name, or a URL with a
    /// password (`postgresql://user:PASSWORD@host/db`), with a literal value.
    fn secret_arg(&mut self, i: usize, arg: &str) -> Option<String> {
        if has_reference(arg) {
            return None;
        }
        if let Some((before, password, after)) = url_password(arg) {
            let origin = format!("the password in args[{i}] of server {}", self.name);
            return Some(format!(
                "{before}{}{after}",
                self.scoped_secret("PASSWORD", origin, password)
            ));
        }
        if let Some((flag, value)) = arg.split_once('=')
            && is_secret_flag(flag)
            && !value.is_empty()
        {
            let origin = format!("args[{i}] (`{flag}=`) of server {}", self.name);
            return Some(format!(
                "{flag}={}",
                self.scoped_secret(flag, origin, value)
            ));
        }
        let (name, value) = arg.split_once(':')?;
        let value = value.trim_start();
        if !is_header_name(name) || !is_secret_name(name) || value.is_empty() {
            return None;
        }
        let origin = format!("args[{i}] (`{name}:`) of server {}", self.name);
        let (scheme, credentials) = split_scheme(value).unwrap_or(("", value));
        Some(format!(
            "{name}: {scheme}{}",
            self.scoped_secret(name, origin, credentials)
        ))
    }

    fn env(&mut self, map: &Json) -> Result<Vec<(String, String)>, String> {
        let members = match &map.value {
            Value::Null => return Ok(Vec::new()),
            Value::Object(members) => members,
            _ => return Err(expected("env", "an object", map)),
        };
        let mut env: Vec<(String, String)> = Vec::new();
        for m in members {
            if !is_env_name(&m.key) {
                return Err(format!(
                    "`env` sets {}, which is not a valid environment variable name here \
                     (letters, digits and _, not starting with a digit)",
                    super::json::quote(&m.key)
                ));
            }
            let value = match &m.value.value {
                Value::Null => {
                    self.notes.push(format!(
                        "`env` {}: null (remove the variable) is not carried over; a fleet \
                         file only sets variables",
                        m.key
                    ));
                    continue;
                }
                _ => scalar(&m.value).ok_or_else(|| expected("env", "string values", &m.value))?,
            };
            let text = if !has_reference(&value) && is_secret_name(&m.key) && !value.is_empty() {
                let origin = format!("env {} of server {}", m.key, self.name);
                self.secret(&m.key, origin, &value)
            } else if let Some((before, password, after)) =
                url_password(&value).filter(|_| !has_reference(&value))
            {
                let origin = format!("the password in env {} of server {}", m.key, self.name);
                let preferred = format!("{}_PASSWORD", m.key);
                let password = password.to_string();
                let (before, after) = (before.to_string(), after.to_string());
                format!(
                    "{before}{}{after}",
                    self.secret(&preferred, origin, &password)
                )
            } else {
                let rewritten = rewrite(&value, &self.mapper.places)?;
                self.absorb(&rewritten);
                rewritten.text
            };
            // As in JSON, the last of a repeated name wins.
            env.retain(|(k, _)| *k != m.key);
            env.push((m.key.clone(), text));
            let path = format!("env.{}", m.key);
            self.place(&path, &path, m.value.pos);
        }
        Ok(env)
    }

    fn http(&mut self, entry: &Json, url_key: &str) -> Result<Transport, String> {
        let url_json = entry.get(url_key).expect("a remote entry has a URL");
        let written = scalar(url_json).ok_or_else(|| expected(url_key, "a string", url_json))?;
        let url = match has_reference(&written) {
            true => {
                let rewritten = rewrite(&written, &self.mapper.places)?;
                self.absorb(&rewritten);
                let text = rewritten.text;
                if !(text.starts_with("http://")
                    || text.starts_with("https://")
                    || text.starts_with("${env:"))
                {
                    return Err(format!(
                        "`{url_key}` does not start with http:// or https://"
                    ));
                }
                text
            }
            false => {
                check_url(&written)
                    .map_err(|why| format!("`{url_key}` is not a valid URL: {why}"))?;
                let url = self.url_secrets(&written);
                match url_password(&url) {
                    Some((before, password, after)) => {
                        let origin = format!("the password in the URL of server {}", self.name);
                        let password = password.to_string();
                        let (before, after) = (before.to_string(), after.to_string());
                        format!(
                            "{before}{}{after}",
                            self.scoped_secret("PASSWORD", origin, &password)
                        )
                    }
                    None => url,
                }
            }
        };
        if url.trim_end_matches('/').ends_with("/sse") && entry.get("type").is_none() {
            self.notes.push(
                "the URL ends in /sse: if the server speaks only the legacy HTTP+SSE \
                 transport, mcpfleet cannot use it (its error says so)"
                    .into(),
            );
        }
        self.place("url", url_key, url_json.pos);
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(map) = entry.get("headers") {
            let members = match &map.value {
                Value::Null => &Vec::new(),
                Value::Object(members) => members,
                _ => return Err(expected("headers", "an object", map)),
            };
            let mut seen = HashSet::new();
            for m in members {
                if !is_header_name(&m.key) {
                    return Err(format!(
                        "{} is not a valid HTTP header name",
                        super::json::quote(&m.key)
                    ));
                }
                if !seen.insert(m.key.to_ascii_lowercase()) {
                    return Err(format!(
                        "header {} is given twice (names are case-insensitive)",
                        super::json::quote(&m.key)
                    ));
                }
                let value = scalar(&m.value)
                    .ok_or_else(|| expected("headers", "string values", &m.value))?;
                if !is_header_value(&value) {
                    return Err(format!(
                        "the value of header `{}` holds a line break or another control character",
                        m.key
                    ));
                }
                let text = if !has_reference(&value) && is_secret_name(&m.key) && !value.is_empty()
                {
                    let origin = format!("header {} of server {}", m.key, self.name);
                    match split_scheme(&value) {
                        Some((scheme, credentials)) => {
                            format!(
                                "{scheme}{}",
                                self.scoped_secret(&m.key, origin, credentials)
                            )
                        }
                        None => self.scoped_secret(&m.key, origin, &value),
                    }
                } else {
                    let rewritten = rewrite(&value, &self.mapper.places)?;
                    self.absorb(&rewritten);
                    rewritten.text
                };
                headers.push((m.key.clone(), text));
                let fleet = super::super::walk::key_path("headers", &m.key);
                let json = super::super::walk::key_path("headers", &m.key);
                self.place(&fleet, &json, m.value.pos);
            }
        }
        Ok(Transport::Http {
            url,
            headers,
            oauth: false,
        })
    }

    /// A literal URL with the values of its secret query parameters
    /// (`?api_key=...`) moved to variables.
    fn url_secrets(&mut self, url: &str) -> String {
        let Some((base, rest)) = url.split_once('?') else {
            return url.to_string();
        };
        let (query, fragment) = match rest.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (rest, None),
        };
        let mut pairs = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some((k, v)) if is_secret_name(k) && !v.is_empty() => {
                    let origin = format!("query parameter {k} of the URL of server {}", self.name);
                    pairs.push(format!("{k}={}", self.scoped_secret(k, origin, v)));
                }
                _ => pairs.push(pair.to_string()),
            }
        }
        let mut out = format!("{base}?{}", pairs.join("&"));
        if let Some(fragment) = fragment {
            out.push('#');
            out.push_str(fragment);
        }
        out
    }
}

/// `scheme://user:PASSWORD@host...` as what comes before the password, the
/// password, and the rest; `None` when there is no literal password.
fn url_password(text: &str) -> Option<(&str, &str, &str)> {
    let scheme_end = text.find("://")?;
    let authority_start = scheme_end + 3;
    let authority_end = text[authority_start..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |i| authority_start + i);
    let at = text[authority_start..authority_end].rfind('@')? + authority_start;
    let colon = text[authority_start..at].find(':')? + authority_start;
    let password = &text[colon + 1..at];
    (!password.is_empty() && !has_reference(password))
        .then(|| (&text[..colon + 1], password, &text[at..]))
}

/// A flag whose value is a secret: `--api-key`, `--token`, not `--key-file`.
fn is_secret_flag(arg: &str) -> bool {
    let Some(name) = arg.strip_prefix('-') else {
        return false;
    };
    let upper = name.trim_start_matches('-').to_ascii_uppercase();
    !upper.is_empty()
        && is_secret_name(&upper)
        && !["FILE", "PATH", "DIR", "NAME", "ID", "URL", "ENV"]
            .iter()
            .any(|suffix| upper.ends_with(suffix))
}

/// A scalar as the string a client passes on: numbers and booleans as written.
fn scalar(json: &Json) -> Option<String> {
    match &json.value {
        Value::Str(s) => Some(s.clone()),
        Value::Number(raw) => Some(raw.clone()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn expected(key: &str, what: &str, found: &Json) -> String {
    format!(
        "`{key}` (line {}) must be {what}, found {}",
        found.pos.line,
        found.kind()
    )
}

/// `parent.key` as a key path, `key` being a path relative to `parent`.
fn join(parent: &str, key: &str) -> String {
    if key.is_empty() {
        parent.to_string()
    } else if key.starts_with('[') {
        format!("{parent}{key}")
    } else {
        format!("{parent}.{key}")
    }
}

/// An entry with the secrets it holds as literals replaced, for the comment
/// that keeps an entry that is not carried over: the same rules as for the
/// entries that are, so that nothing a carried entry would hide shows there.
pub(super) fn redacted(entry: &Json) -> Json {
    const HIDDEN: &str = "[secret not copied]";
    let value = match &entry.value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|m| {
                    let value = match &m.value.value {
                        Value::Str(s)
                            if is_secret_name(&m.key) && !has_reference(s) && !s.is_empty() =>
                        {
                            Json {
                                pos: m.value.pos,
                                value: Value::Str(HIDDEN.into()),
                            }
                        }
                        Value::Str(s) => Json {
                            pos: m.value.pos,
                            value: Value::Str(redact_url(s, HIDDEN)),
                        },
                        _ => redacted(&m.value),
                    };
                    Member {
                        key: m.key.clone(),
                        key_pos: m.key_pos,
                        value,
                    }
                })
                .collect(),
        ),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            let mut after_flag = false;
            for item in items {
                let value = match &item.value {
                    Value::Str(s) if has_reference(s) || url_password(s).is_some() => {
                        Value::Str(redact_url(s, HIDDEN))
                    }
                    Value::Str(s) if after_flag && !s.starts_with('-') => Value::Str(HIDDEN.into()),
                    Value::Str(s) => match s.find(['=', ':']) {
                        Some(at)
                            if !s[at + 1..].trim().is_empty()
                                && (is_secret_flag(&s[..at])
                                    || (is_header_name(&s[..at]) && is_secret_name(&s[..at]))) =>
                        {
                            Value::Str(format!("{}{HIDDEN}", &s[..=at]))
                        }
                        _ => item.value.clone(),
                    },
                    _ => redacted(item).value,
                };
                after_flag =
                    matches!(&item.value, Value::Str(s) if is_secret_flag(s) && !s.contains('='));
                out.push(Json {
                    pos: item.pos,
                    value,
                });
            }
            Value::Array(out)
        }
        other => other.clone(),
    };
    Json {
        pos: entry.pos,
        value,
    }
}

/// A string with what may be a secret in it hidden: the password and the
/// secret query values of a URL, and the defaults of secret variables.
fn redact_url(url: &str, hidden: &str) -> String {
    let mut url = hide_secret_defaults(url, hidden);
    if let Some((before, _, after)) = url_password(&url) {
        url = format!("{before}{hidden}{after}");
    }
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if is_secret_name(k) && !v.is_empty() && !has_reference(v) => {
                format!("{k}={hidden}")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}", pairs.join("&"))
}
