//! Tool contracts as reported (`check --expect-tools`, docs/design.md §6): how each
//! server's tools compare with the expected ones, with the JSON pointer (RFC 6901)
//! of every schema change, in JSON and as text. `crate::contract` computes them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How one server's tools compare with the snapshot file (a server line's
/// `tools_contract`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolsContract {
    pub status: ContractStatus,
    /// Tools the server lists and the snapshot does not, by name. For a
    /// `new_server`, every tool it lists.
    pub added: Vec<String>,
    /// Tools of the snapshot that the server no longer lists.
    pub removed: Vec<String>,
    /// Every difference in the schemas of the tools found in both.
    pub changed: Vec<SchemaChange>,
}

/// The verdict on one server's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractStatus {
    /// The same tools with the same schemas.
    Matches,
    /// Tools added or removed, or a schema changed.
    Differs,
    /// The snapshot has no entry for this server.
    NewServer,
    /// The server did not start, so its tools were not seen: its own error says
    /// why, and nothing is compared.
    NotStarted,
}

/// Which schema of a tool a change is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaKind {
    InputSchema,
    OutputSchema,
}

/// What happened at a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Present now, absent from the snapshot.
    Added,
    /// In the snapshot, absent now.
    Removed,
    /// Present in both with another value.
    Changed,
}

/// One difference in one schema of one tool.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SchemaChange {
    pub tool: String,
    pub schema: SchemaKind,
    /// Where in that schema, as an RFC 6901 JSON pointer; `""` is the whole schema.
    pub pointer: String,
    pub change: ChangeKind,
    /// The value in the snapshot (null when added).
    pub expected: Option<Value>,
    /// The value the server lists now (null when removed).
    pub found: Option<Value>,
}

/// The run's side of the tools contract (the report's `tools_contract`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ContractSummary {
    /// The snapshot compared with (`--expect-tools`), as given.
    pub expected_file: Option<String>,
    /// Servers the snapshot has that the fleet file no longer does.
    pub missing_servers: Vec<String>,
    /// The snapshot written (`--update-tools`), as given; null when none was.
    pub updated_file: Option<String>,
}

impl ToolsContract {
    /// True when the server's tools are not what the snapshot says.
    pub fn differs(&self) -> bool {
        matches!(
            self.status,
            ContractStatus::Differs | ContractStatus::NewServer
        )
    }

    /// The lines under a server's row in text output (none when it matches or did
    /// not start: its error says why).
    pub fn text(&self, file: &str) -> Vec<String> {
        match self.status {
            ContractStatus::Matches | ContractStatus::NotStarted => Vec::new(),
            ContractStatus::NewServer => vec![format!(
                "tools: not in {file}: a new server, with {} tool(s){}",
                self.added.len(),
                names(&self.added)
            )],
            ContractStatus::Differs => {
                let mut lines = vec![format!(
                    "tools differ from {file}: {} added, {} removed, {} schema change(s)",
                    self.added.len(),
                    self.removed.len(),
                    self.changed.len()
                )];
                for name in &self.added {
                    lines.push(format!("  + tool `{name}` (added)"));
                }
                for name in &self.removed {
                    lines.push(format!("  - tool `{name}` (removed)"));
                }
                for c in &self.changed {
                    lines.push(format!("  ~ {}", c.text()));
                }
                lines
            }
        }
    }
}

impl SchemaChange {
    /// `echo input_schema /properties/n/type: "string" -> "integer"`.
    pub fn text(&self) -> String {
        let schema = match self.schema {
            SchemaKind::InputSchema => "input_schema",
            SchemaKind::OutputSchema => "output_schema",
        };
        let pointer = match self.pointer.as_str() {
            "" => "(the whole schema)",
            p => p,
        };
        let what = match self.change {
            ChangeKind::Added => format!("added {}", shown(self.found.as_ref())),
            ChangeKind::Removed => format!("removed (was {})", shown(self.expected.as_ref())),
            ChangeKind::Changed => format!(
                "{} -> {}",
                shown(self.expected.as_ref()),
                shown(self.found.as_ref())
            ),
        };
        format!("`{}` {schema} {pointer}: {what}", self.tool)
    }
}

fn names(list: &[String]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = list.iter().map(|n| format!("`{n}`")).collect();
    format!(": {}", quoted.join(", "))
}

/// A value as compact JSON, cut at 80 characters.
fn shown(value: Option<&Value>) -> String {
    const MAX: usize = 80;
    let text = value.map_or_else(|| "null".to_owned(), Value::to_string);
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(
        pointer: &str,
        change: ChangeKind,
        e: Option<Value>,
        f: Option<Value>,
    ) -> SchemaChange {
        SchemaChange {
            tool: "echo".into(),
            schema: SchemaKind::InputSchema,
            pointer: pointer.into(),
            change,
            expected: e,
            found: f,
        }
    }

    #[test]
    fn a_difference_reads_as_lines_naming_each_pointer() {
        let contract = ToolsContract {
            status: ContractStatus::Differs,
            added: vec!["tool_4".into()],
            removed: vec!["tool_3".into()],
            changed: vec![
                change(
                    "/properties/n/type",
                    ChangeKind::Changed,
                    Some(json!("string")),
                    Some(json!("integer")),
                ),
                change(
                    "",
                    ChangeKind::Removed,
                    Some(json!({"type": "object"})),
                    None,
                ),
            ],
        };
        assert_eq!(
            contract.text("tools.json"),
            vec![
                "tools differ from tools.json: 1 added, 1 removed, 2 schema change(s)",
                "  + tool `tool_4` (added)",
                "  - tool `tool_3` (removed)",
                "  ~ `echo` input_schema /properties/n/type: \"string\" -> \"integer\"",
                "  ~ `echo` input_schema (the whole schema): removed (was {\"type\":\"object\"})",
            ]
        );
        assert!(contract.differs());
    }

    #[test]
    fn long_values_are_cut_and_a_match_says_nothing() {
        let long = json!("x".repeat(200));
        let c = change("/default", ChangeKind::Added, None, Some(long));
        assert!(c.text().ends_with('…'), "{}", c.text());
        assert!(c.text().chars().count() < 140, "{}", c.text());
        let same = ToolsContract {
            status: ContractStatus::Matches,
            added: vec![],
            removed: vec![],
            changed: vec![],
        };
        assert!(same.text("t.json").is_empty());
        assert!(!same.differs());
    }

    #[test]
    fn statuses_and_kinds_have_snake_case_names() {
        fn name<T: Serialize>(v: T) -> Value {
            serde_json::to_value(v).unwrap()
        }
        assert_eq!(name(ContractStatus::NewServer), "new_server");
        assert_eq!(name(ContractStatus::NotStarted), "not_started");
        assert_eq!(name(SchemaKind::OutputSchema), "output_schema");
        assert_eq!(name(ChangeKind::Removed), "removed");
    }
}
