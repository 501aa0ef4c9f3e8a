//! The MCP configurations people already have, read as fleets.
//!
//! Claude Desktop (`claude_desktop_config.json`), Claude Code (`.mcp.json`),
//! Cursor (`.cursor/mcp.json`) and Windsurf (`mcp_config.json`) list servers
//! under `mcpServers`; VS Code (`.vscode/mcp.json`) under `servers`, with
//! `inputs`. This module reads such a file ([`read`], `json.rs`), maps each
//! entry to a fleet server or to the reason it cannot be one (`map.rs`, with
//! the clients' variables in `vars.rs` and literal secrets moved to variables
//! in `secrets.rs`), and writes the result as a fleet file with comments
//! (`emit.rs`). `mcpfleet import` prints that file; `-f` loads a client's file
//! directly through the same mapping ([`load_client_file`]), the secrets it
//! holds given to the variables they moved to. Like the rest of `config`, it
//! prints nothing and starts nothing (docs/design.md §15).

mod emit;
pub(crate) mod json;
mod map;
mod secrets;
mod vars;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::Fleet;
use super::error::{ConfigError, ConfigErrors};
use super::validate::is_name;
use super::walk::key_path;
use json::{Json, Pos, Value};
pub(crate) use secrets::Secret;
use secrets::Vault;
use vars::Places;

/// The client whose file it is, as far as the file tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Windsurf,
    VsCode,
    /// `mcpServers` in a file none of the others names.
    Other,
}

impl Client {
    /// The client's name: `Claude Desktop`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Windsurf => "Windsurf",
            Client::VsCode => "VS Code",
            Client::Other => "an MCP client",
        }
    }

    /// How the client and its file are called, for the fleet file's header.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop (claude_desktop_config.json)",
            Client::ClaudeCode => "Claude Code (.mcp.json)",
            Client::Cursor => "Cursor (.cursor/mcp.json)",
            Client::Windsurf => "Windsurf (mcp_config.json)",
            Client::VsCode => "VS Code (mcp.json)",
            Client::Other => "an MCP client (mcpServers)",
        }
    }
}

/// A client's file, mapped.
#[derive(Debug)]
pub(crate) struct Imported {
    /// The file as the user named it.
    pub source: PathBuf,
    pub client: Client,
    /// In file order.
    pub servers: Vec<Server>,
    /// Entries that could not be carried over, in file order.
    pub skipped: Vec<Skipped>,
    /// Literal secrets, each moved to an environment variable.
    pub secrets: Vec<Secret>,
    /// `${VAR:-default}`: a default the fleet file cannot say, by variable.
    pub defaults: Vec<(String, String)>,
}

/// One entry carried over.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// A valid fleet server name.
    pub name: String,
    /// The entry's name in the client's file.
    pub original: String,
    pub transport: Transport,
    pub enabled: bool,
    /// Tools the client hides (`disabledTools`), for `tools: {deny}`.
    pub deny_tools: Vec<String>,
    /// A longer `connect_timeout` than the default, for a server started by a
    /// package runner (`npx`, `uvx`, ...).
    pub connect_timeout: Option<&'static str>,
    /// What the user should know about the mapping of this entry.
    pub notes: Vec<String>,
    /// Where each key written for the server came from.
    pub(crate) places: Vec<Place>,
}

/// The keys of a carried entry, in the fleet file's syntax (`${env:NAME}`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        /// `envFile` (VS Code, Cursor), for `env_file:`.
        env_files: Vec<String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// `auth: oauth`: the entry ran `mcp-remote`, the OAuth bridge of
        /// clients without OAuth.
        oauth: bool,
    },
}

/// Where a key of the fleet file came from in the client's file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Place {
    /// The key path relative to the server (`env.API_KEY`; empty for the server).
    pub fleet: String,
    /// The key path in the client's file (`mcpServers.github.env.API_KEY`).
    pub json: String,
    pub pos: Pos,
}

/// An entry that could not be carried over.
#[derive(Debug, Clone)]
pub(crate) struct Skipped {
    /// The entry's name in the client's file.
    pub name: String,
    /// The line of its name.
    pub line: usize,
    pub reason: String,
    /// The entry as compact JSON, with the secrets it holds hidden.
    pub entry: String,
}

/// Whether the file at `path`, whose text is `text`, is to be read as a
/// client's JSON rather than as a fleet file: named `*.json` or starting with
/// `{`, and not a fleet file written as JSON (one with `version`, which the
/// YAML reader takes as it is).
pub(crate) fn is_client_file(path: &Path, text: &str) -> bool {
    let named_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if !named_json && !trimmed.starts_with('{') {
        return false;
    }
    match json::parse(text) {
        Ok(doc) => doc.get("version").is_none(),
        // A syntax error in a `.json` file is reported as JSON; a YAML flow
        // mapping that is not JSON is the YAML reader's.
        Err(_) => named_json,
    }
}

/// Reads and maps a client's file.
pub(crate) fn read(path: &Path) -> Result<Imported, ConfigErrors> {
    let text = super::read::read_text(path, "file")?;
    parse(&text, path)
}

/// Maps the text of a client's file that came from `path`.
pub(crate) fn parse(text: &str, path: &Path) -> Result<Imported, ConfigErrors> {
    let doc = json::parse(text).map_err(|e| ConfigErrors {
        file: path.to_path_buf(),
        errors: vec![ConfigError {
            line: Some(e.pos.line),
            column: Some(e.pos.column),
            path: String::new(),
            message: format!("not valid JSON: {}", e.message),
        }],
    })?;
    let fail = |pos: Pos, key: &str, message: String| ConfigErrors {
        file: path.to_path_buf(),
        errors: vec![ConfigError {
            line: Some(pos.line),
            column: Some(pos.column),
            path: key.to_string(),
            message,
        }],
    };
    if !matches!(doc.value, Value::Object(_)) {
        return Err(fail(
            doc.pos,
            "",
            format!(
                "expected an object with `mcpServers` or `servers`, found {}",
                doc.kind()
            ),
        ));
    }
    let (servers_key, list) = if let Some(s) = doc.get("mcpServers") {
        ("mcpServers", s)
    } else if let Some(s) = doc.get("servers") {
        ("servers", s)
    } else if let Some(s) = doc.get("mcp").and_then(|m| m.get("servers")) {
        ("mcp.servers", s)
    } else {
        return Err(fail(
            doc.pos,
            "",
            "no `mcpServers` (Claude Desktop, Claude Code, Cursor, Windsurf) or `servers` \
             (VS Code) here; is this an MCP client's configuration?"
                .into(),
        ));
    };
    let Value::Object(entries) = &list.value else {
        return Err(fail(
            list.pos,
            servers_key,
            format!("expected an object of servers, found {}", list.kind()),
        ));
    };
    let client = detect(path, servers_key, entries);
    let workspace = workspace_of(path);
    let mut vault = Vault::new(referenced_names(&doc));
    let mut defaults = Vec::new();
    let mut mapper = map::Mapper {
        places: Places {
            workspace: &workspace,
        },
        vault: &mut vault,
        defaults: &mut defaults,
    };
    let mut servers = Vec::new();
    let mut skipped = Vec::new();
    let mut taken = HashSet::new();
    for (i, member) in entries.iter().enumerate() {
        let json_path = key_path(servers_key, &member.key);
        // A client reads the last entry of a name; the earlier ones are dead text.
        if let Some(later) = entries[i + 1..].iter().find(|m| m.key == member.key) {
            skipped.push(Skipped {
                name: member.key.clone(),
                line: member.key_pos.line,
                reason: format!(
                    "the name is used again on line {}, and the client reads the last one",
                    later.key_pos.line
                ),
                entry: map::redacted(&member.value).to_compact(),
            });
            continue;
        }
        let name = fleet_name(&member.key, &taken);
        match mapper.server(member, &name, &json_path) {
            Ok(mut server) => {
                taken.insert(name);
                server.original = member.key.clone();
                servers.push(server);
            }
            Err(reason) => skipped.push(Skipped {
                name: member.key.clone(),
                line: member.key_pos.line,
                reason,
                entry: map::redacted(&member.value).to_compact(),
            }),
        }
    }
    if servers.is_empty() {
        let why = match skipped.is_empty() {
            true => format!("`{servers_key}` lists no server"),
            false => {
                let reasons: Vec<String> = skipped
                    .iter()
                    .map(|s| format!("`{}` (line {}): {}", s.name, s.line, s.reason))
                    .collect();
                format!("no server can be carried over: {}", reasons.join("; "))
            }
        };
        return Err(fail(list.pos, servers_key, why));
    }
    Ok(Imported {
        source: path.to_path_buf(),
        client,
        servers,
        skipped,
        secrets: vault.secrets,
        defaults,
    })
}

/// Which client wrote the file: by its name, else by what it says.
fn detect(path: &Path, servers_key: &str, entries: &[json::Member]) -> Client {
    if servers_key != "mcpServers" {
        return Client::VsCode;
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    match (name, parent) {
        ("claude_desktop_config.json", _) => Client::ClaudeDesktop,
        ("mcp_config.json", _) => Client::Windsurf,
        ("mcp.json", ".cursor") => Client::Cursor,
        (".mcp.json", _) => Client::ClaudeCode,
        _ if entries.iter().any(|m| m.value.get("serverUrl").is_some()) => Client::Windsurf,
        _ => Client::Other,
    }
}

/// The folder a client's file belongs to: the project of `.vscode/mcp.json`
/// and `.cursor/mcp.json`, else the file's own folder.
fn workspace_of(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = absolute.parent().unwrap_or(Path::new("/"));
    match dir.file_name().and_then(|n| n.to_str()) {
        Some(".vscode" | ".cursor") => dir.parent().unwrap_or(dir).to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// Every environment variable name the document refers to, in any client's form.
fn referenced_names(doc: &Json) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![doc];
    while let Some(node) = stack.pop() {
        match &node.value {
            Value::Str(s) => names.extend(vars::referenced_names(s)),
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.iter().map(|m| &m.value)),
            _ => {}
        }
    }
    names
}

/// A valid fleet server name for `original`, not yet `taken`: lowercase, other
/// characters `-`, at most 63, numbered when two entries would share one.
fn fleet_name(original: &str, taken: &HashSet<String>) -> String {
    if is_name(original) && !taken.contains(original) {
        return original.to_string();
    }
    let mut base = as_name(original);
    if base.is_empty() {
        base = "server".into();
    }
    if !taken.contains(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|name| !taken.contains(name))
        .expect("an unused numbered name")
}

/// The fleet's `name:` for an imported file that will live in `dir`, as docker
/// compose names a project after its directory: the directory's name made a
/// valid name, else `fleet`.
pub(crate) fn name_for_dir(dir: &Path) -> String {
    let base = dir
        .file_name()
        .map(|n| as_name(&n.to_string_lossy()))
        .unwrap_or_default();
    match base.is_empty() {
        true => "fleet".into(),
        false => base,
    }
}

/// `original` made a valid name: lowercase, other characters `-`, at most 60;
/// empty when nothing of it is left.
fn as_name(original: &str) -> String {
    let mut base = String::new();
    for c in original.chars() {
        let c = c.to_ascii_lowercase();
        let c = match c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            true => c,
            false => '-',
        };
        // One separator for a run of odd characters (`My  Server` is `my-server`).
        if c == '-' && base.ends_with('-') {
            continue;
        }
        base.push(c);
    }
    let base = base.trim_matches(|c| c == '-' || c == '_');
    base.chars().take(60).collect()
}

impl Imported {
    /// What the user is told on stderr besides the fleet file: servers
    /// renamed, entries not carried over, and each server's notes.
    pub(crate) fn notices(&self) -> Vec<String> {
        let mut out = Vec::new();
        for server in &self.servers {
            if server.name != server.original {
                out.push(format!(
                    "server {} is named `{}` (fleet server names are lowercase letters, \
                     digits, - and _)",
                    json::quote(&server.original),
                    server.name
                ));
            }
            for note in &server.notes {
                out.push(format!("server `{}`: {note}", server.name));
            }
        }
        for skipped in &self.skipped {
            out.push(format!(
                "server {} (line {}) is not carried over: {}",
                json::quote(&skipped.name),
                skipped.line,
                skipped.reason
            ));
        }
        out
    }

    /// The value of `${env:NAME}` as a fleet read from the client's file sees
    /// it: a secret the file holds, else the environment, else the default the
    /// file gave (`${NAME:-default}`).
    fn lookup(&self, name: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        if let Some(secret) = self.secrets.iter().find(|s| s.var == name) {
            return Some(secret.value.clone());
        }
        env(name).or_else(|| {
            self.defaults
                .iter()
                .find(|(var, _)| var == name)
                .map(|(_, default)| default.clone())
        })
    }

    /// Errors of the fleet made from this file, placed in the client's file.
    fn placed(&self, errors: ConfigErrors) -> ConfigErrors {
        let errors = errors
            .errors
            .into_iter()
            .map(|e| {
                let place = self.servers.iter().find_map(|server| {
                    let base = key_path("servers", &server.name);
                    server
                        .places
                        .iter()
                        .filter(|p| {
                            let full = match p.fleet.is_empty() {
                                true => base.clone(),
                                false => format!("{base}.{}", p.fleet),
                            };
                            e.path == full
                                || e.path.starts_with(&format!("{full}."))
                                || e.path.starts_with(&format!("{full}["))
                        })
                        .max_by_key(|p| p.fleet.len())
                });
                match place {
                    Some(place) => ConfigError {
                        line: Some(place.pos.line),
                        column: Some(place.pos.column),
                        path: place.json.clone(),
                        message: e.message,
                    },
                    None => ConfigError {
                        line: None,
                        column: None,
                        ..e
                    },
                }
            })
            .collect();
        ConfigErrors {
            file: self.source.clone(),
            errors,
        }
    }
}

/// Loads a client's file as a fleet (`-f .mcp.json`): the same mapping as
/// `mcpfleet import`, validated as a fleet file, with errors placed in the
/// client's file and the notices of [`Imported::notices`] on the fleet.
pub(crate) fn load_client_file(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    let imported = parse(text, path)?;
    let yaml = imported.fleet_file();
    let lookup = |name: &str| imported.lookup(name, env);
    match super::parse::load_str(&yaml, path, &lookup) {
        Ok(mut fleet) => {
            fleet.notices = imported.notices();
            Ok(fleet)
        }
        Err(errors) => Err(imported.placed(errors)),
    }
}
