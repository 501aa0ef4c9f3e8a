//! The variables that MCP clients expand in their configuration, rewritten in the
//! fleet file's one form, `${env:NAME}` (docs/design.md §7).
//!
//! Claude Code expands `${VAR}` and `${VAR:-default}`; Cursor, Windsurf and VS
//! Code expand `${env:NAME}`, and Cursor and VS Code also `${workspaceFolder}`,
//! `${userHome}` and a few more. What has a meaning here is rewritten; what
//! needs the client itself (a VS Code `${input:...}` prompt, Windsurf's
//! `${file:...}`, VS Code's `${config:...}` and `${command:...}`) makes the entry
//! one that cannot be carried over, with the reason.

use std::path::Path;

use super::super::expand::is_env_name;

/// A string of a client's file, rewritten for the fleet file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Rewritten {
    /// In the fleet file's syntax.
    pub text: String,
    /// `${VAR:-default}`: the variable and its default, which the fleet file
    /// cannot say (a missing variable is an error there).
    pub defaults: Vec<(String, String)>,
    /// What was rewritten, worded for a note (`${workspaceFolder} is /home/ada/app`).
    pub notes: Vec<String>,
}

/// Where the client's predefined variables point.
pub(super) struct Places<'a> {
    /// The folder a project-level file belongs to (`${workspaceFolder}`).
    pub workspace: &'a Path,
}

/// Whether `text` holds any `${...}`: such a value is not a literal, and never
/// taken for a secret to move out of the file.
pub(super) fn has_reference(text: &str) -> bool {
    text.contains("${")
}

/// Rewrites every `${...}` of `text`; the error says why the entry cannot be
/// carried over.
pub(super) fn rewrite(text: &str, places: &Places) -> Result<Rewritten, String> {
    let mut out = Rewritten::default();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.text.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // Not a reference: kept as written, as the clients do.
            out.text.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        rest = &after[end + 1..];
        let replaced = reference(inner, places, &mut out)?;
        out.text.push_str(&replaced);
    }
    out.text.push_str(rest);
    Ok(out)
}

/// The fleet-file text for `${inner}`.
fn reference(inner: &str, places: &Places, out: &mut Rewritten) -> Result<String, String> {
    if let Some(name) = inner.strip_prefix("env:") {
        if is_env_name(name) {
            return Ok(format!("${{env:{name}}}"));
        }
        return Err(format!(
            "`${{{inner}}}` does not name a valid environment variable"
        ));
    }
    if let Some(id) = inner.strip_prefix("input:") {
        return Err(format!(
            "it uses `${{input:{id}}}`, a value VS Code prompts for; put the value in an \
             environment variable and write `${{env:NAME}}` instead"
        ));
    }
    if let Some((kind, _)) = inner.split_once(':')
        && let Some(what) = match kind {
            "file" => Some("the contents of a file"),
            "config" => Some("a VS Code setting"),
            "command" => Some("the result of a VS Code command"),
            _ => None,
        }
    {
        return Err(format!(
            "it uses `${{{inner}}}` ({what}), which only the client can expand"
        ));
    }
    let workspace = places.workspace.display().to_string();
    match inner {
        "workspaceFolder" | "workspaceRoot" => {
            out.notes
                .push(format!("`${{{inner}}}` is taken as {workspace}"));
            return Ok(workspace);
        }
        "workspaceFolderBasename" => {
            let base = places
                .workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.notes.push(format!("`${{{inner}}}` is taken as {base}"));
            return Ok(base);
        }
        "userHome" => return Ok("${env:HOME}".into()),
        "pathSeparator" | "/" => return Ok("/".into()),
        _ => {}
    }
    if let Some((name, default)) = inner.split_once(":-")
        && is_env_name(name)
    {
        out.defaults.push((name.to_string(), default.to_string()));
        return Ok(format!("${{env:{name}}}"));
    }
    if is_env_name(inner) {
        return Ok(format!("${{env:{inner}}}"));
    }
    Err(format!(
        "it uses `${{{inner}}}`, which has no equivalent in a fleet file"
    ))
}

/// `text` with the defaults of secrets (`${API_KEY:-sk-...}`) replaced by
/// `hidden`: a default may be the very secret the variable names.
pub(super) fn hide_secret_defaults(text: &str, hidden: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            break;
        };
        out.push_str(&rest[..start + 2]);
        let inner = &after[..end];
        match inner.split_once(":-") {
            Some((name, default))
                if super::secrets::is_secret_name(name) && !default.is_empty() =>
            {
                out.push_str(&format!("{name}:-{hidden}"));
            }
            _ => out.push_str(inner),
        }
        out.push('}');
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The names of environment variables a string refers to, in any of the
/// clients' forms: names chosen for secrets must not take one of them.
pub(super) fn referenced_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            break;
        };
        let inner = &after[..end];
        let name = inner.strip_prefix("env:").unwrap_or(inner);
        let name = name.split_once(":-").map_or(name, |(n, _)| n);
        if is_env_name(name) {
            names.push(name.to_string());
        }
        rest = &after[end + 1..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Places<'static> {
        Places {
            workspace: Path::new("/home/ada/app"),
        }
    }

    fn text(s: &str) -> String {
        rewrite(s, &places()).unwrap().text
    }

    #[test]
    fn every_clients_form_becomes_env() {
        assert_eq!(text("plain $HOME text"), "plain $HOME text");
        assert_eq!(text("Bearer ${TOKEN}"), "Bearer ${env:TOKEN}");
        assert_eq!(text("Bearer ${env:TOKEN}"), "Bearer ${env:TOKEN}");
        assert_eq!(text("${userHome}/.config"), "${env:HOME}/.config");
        assert_eq!(text("${workspaceFolder}${/}src"), "/home/ada/app/src");
        assert_eq!(text("${workspaceFolderBasename}"), "app");
        assert_eq!(text("a ${ not closed"), "a ${ not closed");
    }

    #[test]
    fn a_default_is_noted() {
        let r = rewrite("${API_URL:-https://api.example.com}/v1", &places()).unwrap();
        assert_eq!(r.text, "${env:API_URL}/v1");
        assert_eq!(
            r.defaults,
            [("API_URL".to_string(), "https://api.example.com".to_string())]
        );
    }

    #[test]
    fn what_only_the_client_knows_is_refused() {
        for (s, says) in [
            ("${input:api-key}", "VS Code prompts for"),
            ("${file:/run/secret}", "the contents of a file"),
            ("${config:editor.fontSize}", "a VS Code setting"),
            ("${command:pick}", "a VS Code command"),
            ("${env:A-B}", "does not name a valid environment variable"),
            ("${a b}", "no equivalent"),
        ] {
            let e = rewrite(s, &places()).unwrap_err();
            assert!(e.contains(says), "{s}: {e}");
        }
    }

    #[test]
    fn defaults_of_secrets_are_hidden() {
        assert_eq!(
            hide_secret_defaults("a ${API_KEY:-sk-1} ${URL:-http://h} ${TOKEN} ${", "X"),
            "a ${API_KEY:-X} ${URL:-http://h} ${TOKEN} ${"
        );
    }

    #[test]
    fn referenced_names_in_every_form() {
        assert_eq!(
            referenced_names("${A} ${env:B} ${C:-x} ${input:d} ${workspaceFolder} $E"),
            ["A", "B", "C", "workspaceFolder"]
        );
    }
}
