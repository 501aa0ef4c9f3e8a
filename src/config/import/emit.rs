//! An imported file written as a fleet file: YAML that `mcpfleet validate`
//! accepts, with comments for what a person should read (where it came from,
//! the variables to set, what was renamed, what was not carried over and why).
//!
//! The text is written by hand, not by serde_yaml, for the comments. Scalars
//! are plain only when nothing in YAML could read them otherwise; every other
//! one is a JSON string literal, which YAML reads as a double-quoted scalar.

use super::json::quote;
use super::{Imported, Server, Transport};

impl Imported {
    /// The fleet file, comments included.
    pub(crate) fn fleet_file(&self) -> String {
        self.fleet_file_named(None)
    }

    /// The fleet file with the fleet's `name:` when given, comments included.
    pub(crate) fn fleet_file_named(&self, name: Option<&str>) -> String {
        let mut out = String::new();
        self.header(&mut out);
        out.push_str("version: 1\n");
        if let Some(name) = name {
            out.push_str(&format!("name: {}\n", scalar(name)));
        }
        out.push_str("servers:\n");
        // Servers and the entries left out, in the order of the client's file.
        let mut skipped = self.skipped.iter().peekable();
        for server in &self.servers {
            let line = server
                .places
                .first()
                .map_or(usize::MAX, |place| place.pos.line);
            while let Some(s) = skipped.next_if(|s| s.line < line) {
                skipped_entry(&mut out, s);
            }
            server_entry(&mut out, server);
        }
        for s in skipped {
            skipped_entry(&mut out, s);
        }
        out
    }

    fn header(&self, out: &mut String) {
        comment(
            out,
            "",
            &format!(
                "Fleet file imported by `mcpfleet import` from {}:",
                self.client.describe()
            ),
        );
        comment(out, "", &format!("  {}", self.source.display()));
        if !self.secrets.is_empty() {
            comment(
                out,
                "",
                "Secrets written in that file are not copied here: set these",
            );
            comment(
                out,
                "",
                "environment variables to them before starting the fleet:",
            );
            let width = self.secrets.iter().map(|s| s.var.len()).max().unwrap_or(0);
            for secret in &self.secrets {
                comment(
                    out,
                    "",
                    &format!("  {:width$}  {}", secret.var, secret.origin),
                );
            }
        }
        for (var, default) in &self.defaults {
            comment(
                out,
                "",
                &format!("Set {var} (the client's file gave it the default {default:?})"),
            );
        }
        if !self.skipped.is_empty() {
            comment(
                out,
                "",
                &format!(
                    "{} server(s) could not be carried over: each is kept below as a",
                    self.skipped.len()
                ),
            );
            comment(out, "", "comment, with the reason.");
        }
        comment(out, "", "Check this file with `mcpfleet -f FILE validate`.");
    }
}

fn server_entry(out: &mut String, server: &Server) {
    if server.name != server.original {
        comment(
            out,
            "  ",
            &format!("{} in the client's file", quote(&server.original)),
        );
    }
    for note in &server.notes {
        comment(out, "  ", note);
    }
    out.push_str(&format!("  {}:\n", scalar(&server.name)));
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            env_files,
            cwd,
        } => {
            out.push_str(&format!("    command: {}\n", scalar(command)));
            if !args.is_empty() {
                let items: Vec<String> = args.iter().map(|a| scalar(a)).collect();
                out.push_str(&format!("    args: [{}]\n", items.join(", ")));
            }
            mapping(out, "env", env);
            if !env_files.is_empty() {
                let items: Vec<String> = env_files.iter().map(|f| scalar(f)).collect();
                out.push_str(&format!("    env_file: [{}]\n", items.join(", ")));
            }
            if let Some(cwd) = cwd {
                out.push_str(&format!("    cwd: {}\n", scalar(cwd)));
            }
        }
        Transport::Http {
            url,
            headers,
            oauth,
        } => {
            out.push_str(&format!("    url: {}\n", scalar(url)));
            mapping(out, "headers", headers);
            if *oauth {
                out.push_str("    auth: oauth\n");
            }
        }
    }
    if let Some(timeout) = server.connect_timeout {
        out.push_str(&format!("    connect_timeout: {timeout}\n"));
    }
    if !server.enabled {
        out.push_str("    enabled: false\n");
    }
    if !server.deny_tools.is_empty() {
        let items: Vec<String> = server.deny_tools.iter().map(|t| scalar(t)).collect();
        out.push_str(&format!("    tools: {{deny: [{}]}}\n", items.join(", ")));
    }
}

fn mapping(out: &mut String, key: &str, pairs: &[(String, String)]) {
    if pairs.is_empty() {
        return;
    }
    out.push_str(&format!("    {key}:\n"));
    for (k, v) in pairs {
        out.push_str(&format!("      {}: {}\n", scalar(k), scalar(v)));
    }
}

fn skipped_entry(out: &mut String, skipped: &super::Skipped) {
    comment(
        out,
        "  ",
        &format!(
            "NOT CARRIED OVER: {} (line {}): {}",
            quote(&skipped.name),
            skipped.line,
            skipped.reason
        ),
    );
    comment(out, "  ", &format!("  {}", skipped.entry));
}

/// One comment line per line of `text`, control characters escaped so that
/// nothing in it can end the comment.
fn comment(out: &mut String, indent: &str, text: &str) {
    let text: String = text
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect();
    out.push_str(indent);
    out.push('#');
    if !text.is_empty() {
        out.push(' ');
        out.push_str(&text);
    }
    out.push('\n');
}

/// `s` as a YAML scalar that reads back as the string `s`: plain when that is
/// certain, else double-quoted.
pub(super) fn scalar(s: &str) -> String {
    let mut chars = s.chars();
    let plain = match chars.next() {
        Some(first) => {
            (first.is_ascii_alphabetic() || first == '/' || first == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || "_./@+=-".contains(c))
        }
        None => false,
    };
    // Words YAML 1.1 or 1.2 may read as a boolean or null.
    let word = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf",
    ]
    .contains(&s.to_ascii_lowercase().as_str());
    match plain && !word {
        true => s.to_string(),
        false => quote(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_read_back_as_strings() {
        for s in [
            "npx",
            "-y",
            "@modelcontextprotocol/server-github",
            "${env:TOKEN}",
            "true",
            "No",
            "null",
            "~",
            "1.10",
            "0x10",
            "2024-01-01",
            "a: b",
            "a #b",
            "[x]",
            "{x}",
            "*ref",
            "&a",
            "!tag",
            "%x",
            "'q'",
            "\"q\"",
            "",
            " lead",
            "trail ",
            "line\nbreak",
            "tab\there",
            "é",
            ".inf",
            "/usr/bin/node",
            "a,b",
            "|",
            ">",
            "-",
            "?",
        ] {
            let yaml = format!("k: {}\nl: [{}]\n", scalar(s), scalar(s));
            let value: serde_yaml::Value =
                serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{s:?} as {yaml:?}: {e}"));
            assert_eq!(value["k"].as_str(), Some(s), "{s:?} as {yaml:?}");
            assert_eq!(value["l"][0].as_str(), Some(s), "{s:?} as {yaml:?}");
        }
        assert_eq!(scalar("npx"), "npx");
        assert_eq!(scalar("/usr/bin/node"), "/usr/bin/node");
        assert_eq!(scalar("-y"), "\"-y\"");
    }

    #[test]
    fn comments_cannot_be_broken_out_of() {
        let mut out = String::new();
        comment(&mut out, "  ", "a\nservers: {evil: {command: x}}");
        assert_eq!(out, "  # a\\nservers: {evil: {command: x}}\n");
    }
}
