//! Tool contracts (docs/design.md §6): the snapshot file of each server's tools
//! (`check --update-tools` writes it, `check --expect-tools` compares with it), and
//! how the tools a run found differ from it, down to the JSON pointer (RFC 6901)
//! of each schema change.
//!
//! Pure: no I/O. The command reads and writes the file; this module parses and
//! renders its text, and compares. What counts is a tool's name, input schema and
//! output schema; descriptions, titles and annotations are words for people and
//! may change freely.
//!
//! The file is JSON, pretty, with servers, tools and every key of every schema in
//! sorted order, so that it diffs well under version control:
//!
//! ```json
//! {
//!   "version": 1,
//!   "servers": {
//!     "alpha": {
//!       "tools": {
//!         "echo": { "input_schema": { "type": "object" } }
//!       }
//!     }
//!   }
//! }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lifecycle::authority::ListedTool;
use crate::output::contract::{
    ChangeKind, ContractStatus, SchemaChange, SchemaKind, ToolsContract,
};

/// The version of the file's format this build reads and writes.
pub(crate) const VERSION: u32 = 1;

/// The snapshot file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolsFile {
    pub version: u32,
    /// One entry per server, by name.
    pub servers: BTreeMap<String, ServerTools>,
}

/// One server's tools, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerTools {
    pub tools: BTreeMap<String, ToolSchemas>,
}

/// What a tool takes and gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolSchemas {
    pub input_schema: Value,
    /// Only for a tool whose server declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// Why a snapshot file cannot be read, and where in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", .at.map_or_else(String::new, |(l, c)| format!("{l}:{c}: ")))]
pub(crate) struct ToolsFileError {
    /// Line and column, both from 1.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

impl ToolsFileError {
    /// The error as `FILE:LINE:COL: why` (or `FILE: why`).
    pub(crate) fn at_file(&self, file: &std::path::Path) -> String {
        match self.at {
            Some((line, column)) => format!("{}:{line}:{column}: {}", file.display(), self.message),
            None => format!("{}: {}", file.display(), self.message),
        }
    }
}

impl Default for ToolsFile {
    fn default() -> ToolsFile {
        ToolsFile {
            version: VERSION,
            servers: BTreeMap::new(),
        }
    }
}

impl ToolsFile {
    /// Reads the file's text.
    pub(crate) fn parse(text: &str) -> Result<ToolsFile, ToolsFileError> {
        let file: ToolsFile = serde_json::from_str(text).map_err(|e| {
            let message = e.to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            ToolsFileError {
                at: Some((e.line(), e.column())),
                message: message.to_owned(),
            }
        })?;
        if file.version != VERSION {
            return Err(ToolsFileError {
                at: None,
                message: format!(
                    "version {} is not one this mcpfleet reads (it reads and writes {VERSION})",
                    file.version
                ),
            });
        }
        Ok(file)
    }

    /// The file's text: pretty JSON, `version` first, then servers, tools and the
    /// keys of every schema in sorted order, and a final newline.
    pub(crate) fn render(&self) -> String {
        let mut file = self.clone();
        for tool in file.servers.values_mut().flat_map(|s| s.tools.values_mut()) {
            tool.input_schema = sorted(std::mem::take(&mut tool.input_schema));
            tool.output_schema = tool.output_schema.take().map(sorted);
        }
        let mut text = serde_json::to_string_pretty(&file).expect("a tools file serializes");
        text.push('\n');
        text
    }

    /// The file after a run: `previous` (if any) with the entry of every server in
    /// `found` that started replaced by what it listed. A server that did not start
    /// (`None`) keeps its entry, and so does one of `fleet` this run did not check;
    /// entries of servers no longer in `fleet` go.
    pub(crate) fn updated(
        previous: Option<&ToolsFile>,
        fleet: &[&str],
        found: &[(&str, Option<&[ListedTool]>)],
    ) -> ToolsFile {
        let mut file = ToolsFile::default();
        if let Some(previous) = previous {
            file.servers = previous
                .servers
                .iter()
                .filter(|(name, _)| fleet.contains(&name.as_str()))
                .map(|(name, tools)| (name.clone(), tools.clone()))
                .collect();
        }
        for (name, listed) in found {
            if let Some(listed) = listed {
                file.servers
                    .insert((*name).to_owned(), ServerTools::of(listed));
            }
        }
        file
    }

    /// Servers of the file that are not in `fleet`, in sorted order.
    pub(crate) fn missing(&self, fleet: &[&str]) -> Vec<String> {
        self.servers
            .keys()
            .filter(|name| !fleet.contains(&name.as_str()))
            .cloned()
            .collect()
    }

    /// How the tools `found` on server `name` compare with the file's entry for
    /// it; `None` when the server did not start.
    pub(crate) fn compare(&self, name: &str, found: Option<&[ListedTool]>) -> ToolsContract {
        let Some(found) = found else {
            return contract(ContractStatus::NotStarted, vec![], vec![], vec![]);
        };
        let found = ServerTools::of(found);
        let Some(expected) = self.servers.get(name) else {
            let added = found.tools.keys().cloned().collect();
            return contract(ContractStatus::NewServer, added, vec![], vec![]);
        };
        compare_tools(expected, &found)
    }
}

impl ServerTools {
    /// What a server listed, by name (a name listed twice: the last one).
    pub(crate) fn of(listed: &[ListedTool]) -> ServerTools {
        let tools = listed
            .iter()
            .map(|t| {
                let schemas = ToolSchemas {
                    input_schema: Value::Object((*t.input_schema).clone()),
                    output_schema: t
                        .output_schema
                        .as_ref()
                        .map(|s| Value::Object((**s).clone())),
                };
                (t.name.clone(), schemas)
            })
            .collect();
        ServerTools { tools }
    }
}

fn contract(
    status: ContractStatus,
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<SchemaChange>,
) -> ToolsContract {
    ToolsContract {
        status,
        added,
        removed,
        changed,
    }
}

/// Added and removed tools, then the schema changes of the tools in both, each in
/// tool-name order.
pub(crate) fn compare_tools(expected: &ServerTools, found: &ServerTools) -> ToolsContract {
    let added: Vec<String> = found
        .tools
        .keys()
        .filter(|n| !expected.tools.contains_key(*n))
        .cloned()
        .collect();
    let removed: Vec<String> = expected
        .tools
        .keys()
        .filter(|n| !found.tools.contains_key(*n))
        .cloned()
        .collect();
    let mut changed = Vec::new();
    for (name, before) in &expected.tools {
        let Some(now) = found.tools.get(name) else {
            continue;
        };
        let schemas = [
            (
                SchemaKind::InputSchema,
                Some(&before.input_schema),
                Some(&now.input_schema),
            ),
            (
                SchemaKind::OutputSchema,
                before.output_schema.as_ref(),
                now.output_schema.as_ref(),
            ),
        ];
        for (schema, before, now) in schemas {
            let changes = match (before, now) {
                (Some(b), Some(n)) => schema_changes(b, n),
                (Some(b), None) => vec![Change::removed(String::new(), b)],
                (None, Some(n)) => vec![Change::added(String::new(), n)],
                (None, None) => vec![],
            };
            changed.extend(changes.into_iter().map(|c| SchemaChange {
                tool: name.clone(),
                schema,
                pointer: c.pointer,
                change: c.kind,
                expected: c.expected,
                found: c.found,
            }));
        }
    }
    let status = match added.is_empty() && removed.is_empty() && changed.is_empty() {
        true => ContractStatus::Matches,
        false => ContractStatus::Differs,
    };
    contract(status, added, removed, changed)
}

/// One difference between two JSON values, at an RFC 6901 pointer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub pointer: String,
    pub kind: ChangeKind,
    pub expected: Option<Value>,
    pub found: Option<Value>,
}

impl Change {
    fn added(pointer: String, found: &Value) -> Change {
        Change {
            pointer,
            kind: ChangeKind::Added,
            expected: None,
            found: Some(found.clone()),
        }
    }

    fn removed(pointer: String, expected: &Value) -> Change {
        Change {
            pointer,
            kind: ChangeKind::Removed,
            expected: Some(expected.clone()),
            found: None,
        }
    }
}

/// Every difference between schema `expected` and schema `found`, deepest first
/// reached, in key order: a key present on one side only is `added` or `removed`
/// at its own pointer; values of different kinds, or different scalars, are
/// `changed`. Arrays are compared item by item (pointers end in the index),
/// except the lists that JSON Schema reads as sets (`required`, `enum`, and a
/// list of `type`s), where order means nothing: an item is added or removed at
/// its index on its own side.
pub(crate) fn schema_changes(expected: &Value, found: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(&mut String::new(), None, expected, found, &mut out);
    out
}

fn walk(
    pointer: &mut String,
    key: Option<&str>,
    expected: &Value,
    found: &Value,
    out: &mut Vec<Change>,
) {
    match (expected, found) {
        (Value::Object(e), Value::Object(f)) => {
            let mut keys: Vec<&String> = e.keys().chain(f.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let len = pointer.len();
                push_token(pointer, k);
                match (e.get(k), f.get(k)) {
                    (Some(a), Some(b)) => walk(pointer, Some(k), a, b, out),
                    (Some(a), None) => out.push(Change::removed(pointer.clone(), a)),
                    (None, Some(b)) => out.push(Change::added(pointer.clone(), b)),
                    (None, None) => {}
                }
                pointer.truncate(len);
            }
        }
        (Value::Array(e), Value::Array(f)) if is_set(key, e) && is_set(key, f) => {
            for (i, item) in e.iter().enumerate() {
                if !f.contains(item) {
                    out.push(Change::removed(format!("{pointer}/{i}"), item));
                }
            }
            for (i, item) in f.iter().enumerate() {
                if !e.contains(item) {
                    out.push(Change::added(format!("{pointer}/{i}"), item));
                }
            }
        }
        (Value::Array(e), Value::Array(f)) => {
            for i in 0..e.len().max(f.len()) {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                match (e.get(i), f.get(i)) {
                    (Some(a), Some(b)) => walk(pointer, None, a, b, out),
                    (Some(a), None) => out.push(Change::removed(pointer.clone(), a)),
                    (None, Some(b)) => out.push(Change::added(pointer.clone(), b)),
                    (None, None) => {}
                }
                pointer.truncate(len);
            }
        }
        (e, f) if e != f => out.push(Change {
            pointer: pointer.clone(),
            kind: ChangeKind::Changed,
            expected: Some(e.clone()),
            found: Some(f.clone()),
        }),
        _ => {}
    }
}

/// A list JSON Schema reads as a set: `required`, `enum` or `type`, of scalars.
fn is_set(key: Option<&str>, items: &[Value]) -> bool {
    matches!(key, Some("required" | "enum" | "type"))
        && items.iter().all(|v| !v.is_object() && !v.is_array())
}

/// Appends `/token`, escaped as RFC 6901 says: `~` as `~0`, `/` as `~1`.
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    pointer.push_str(&token.replace('~', "~0").replace('/', "~1"));
}

/// `value` with the keys of every object in sorted order, whatever order the JSON
/// map type keeps.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn pointers(expected: Value, found: Value) -> Vec<(String, ChangeKind)> {
        schema_changes(&expected, &found)
            .into_iter()
            .map(|c| (c.pointer, c.kind))
            .collect()
    }

    fn at(p: &str, kind: ChangeKind) -> (String, ChangeKind) {
        (p.to_owned(), kind)
    }

    fn tool(name: &str, input: Value, output: Option<Value>) -> ListedTool {
        let object = |v: Value| Arc::new(v.as_object().expect("an object").clone());
        ListedTool {
            name: name.to_owned(),
            input_schema: object(input),
            output_schema: output.map(object),
        }
    }

    #[test]
    fn equal_schemas_have_no_change_whatever_their_key_order() {
        let a: Value =
            serde_json::from_str(r#"{"type":"object","properties":{"a":{"type":"string"}}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"properties":{"a":{"type":"string"}},"type":"object"}"#)
                .unwrap();
        assert_eq!(pointers(a, b), vec![]);
    }

    #[test]
    fn added_and_removed_properties_are_named_by_their_own_pointer() {
        let before = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}});
        let after = json!({"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "boolean"}}});
        let changes = schema_changes(&before, &after);
        assert_eq!(
            changes,
            vec![
                Change {
                    pointer: "/properties/b".into(),
                    kind: ChangeKind::Removed,
                    expected: Some(json!({"type": "integer"})),
                    found: None,
                },
                Change {
                    pointer: "/properties/c".into(),
                    kind: ChangeKind::Added,
                    expected: None,
                    found: Some(json!({"type": "boolean"})),
                },
            ]
        );
    }

    #[test]
    fn a_nested_change_is_named_at_its_depth() {
        let before = json!({"properties": {"opts": {"properties": {"depth": {"type": "integer", "minimum": 0}}}}});
        let after = json!({"properties": {"opts": {"properties": {"depth": {"type": "number", "minimum": 0}}}}});
        let changes = schema_changes(&before, &after);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].pointer, "/properties/opts/properties/depth/type");
        assert_eq!(changes[0].kind, ChangeKind::Changed);
        assert_eq!(changes[0].expected, Some(json!("integer")));
        assert_eq!(changes[0].found, Some(json!("number")));
    }

    #[test]
    fn a_value_of_another_kind_is_changed_where_it_stands() {
        assert_eq!(
            pointers(
                json!({"items": {"type": "string"}}),
                json!({"items": [{"type": "string"}]})
            ),
            vec![at("/items", ChangeKind::Changed)]
        );
        assert_eq!(
            pointers(json!({"type": "object"}), json!({"type": "array"})),
            vec![at("/type", ChangeKind::Changed)]
        );
        assert_eq!(
            pointers(json!(1), json!(2)),
            vec![at("", ChangeKind::Changed)]
        );
    }

    #[test]
    fn arrays_are_compared_item_by_item() {
        let before = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
        let after = json!({"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}, {"type": "integer"}]});
        assert_eq!(
            pointers(before.clone(), after.clone()),
            vec![
                at("/anyOf/0/maxLength", ChangeKind::Added),
                at("/anyOf/2", ChangeKind::Added)
            ]
        );
        assert_eq!(
            pointers(after, before),
            vec![
                at("/anyOf/0/maxLength", ChangeKind::Removed),
                at("/anyOf/2", ChangeKind::Removed)
            ]
        );
        // A tuple's items keep their places.
        assert_eq!(
            pointers(
                json!({"prefixItems": [1, 2]}),
                json!({"prefixItems": [2, 1]})
            ),
            vec![
                at("/prefixItems/0", ChangeKind::Changed),
                at("/prefixItems/1", ChangeKind::Changed)
            ]
        );
    }

    #[test]
    fn required_enum_and_type_lists_are_sets() {
        // Reordered: the same schema.
        assert_eq!(
            pointers(
                json!({"required": ["a", "b"], "type": ["string", "null"]}),
                json!({"required": ["b", "a"], "type": ["null", "string"]})
            ),
            vec![]
        );
        // An item gone and one new, each at its index on its own side.
        let changes = schema_changes(
            &json!({"properties": {"mode": {"enum": ["fast", "slow", "safe"]}}, "required": ["a", "b"]}),
            &json!({"properties": {"mode": {"enum": ["safe", "fast"]}}, "required": ["b", "c"]}),
        );
        let got: Vec<(&str, ChangeKind, Option<&Value>, Option<&Value>)> = changes
            .iter()
            .map(|c| {
                (
                    c.pointer.as_str(),
                    c.kind,
                    c.expected.as_ref(),
                    c.found.as_ref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "/properties/mode/enum/1",
                    ChangeKind::Removed,
                    Some(&json!("slow")),
                    None
                ),
                ("/required/0", ChangeKind::Removed, Some(&json!("a")), None),
                ("/required/1", ChangeKind::Added, None, Some(&json!("c"))),
            ]
        );
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(
            pointers(
                json!({"properties": {"a/b": {"type": "string"}, "m~n": {}}}),
                json!({"properties": {"a/b": {"type": "integer"}}})
            ),
            vec![
                at("/properties/a~1b/type", ChangeKind::Changed),
                at("/properties/m~0n", ChangeKind::Removed)
            ]
        );
    }

    #[test]
    fn tools_added_removed_and_changed_are_reported_per_tool() {
        let expected = ToolsFile::updated(
            None,
            &["s"],
            &[(
                "s",
                Some(
                    &[
                        tool(
                            "echo",
                            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
                            None,
                        ),
                        tool("gone", json!({"type": "object"}), None),
                        tool(
                            "shape",
                            json!({"type": "object"}),
                            Some(json!({"type": "object"})),
                        ),
                    ][..],
                ),
            )],
        );
        let found = [
            tool(
                "echo",
                json!({"type": "object", "properties": {"text": {"type": "integer"}}}),
                None,
            ),
            tool("new", json!({"type": "object"}), None),
            tool("shape", json!({"type": "object"}), None),
        ];
        let c = expected.compare("s", Some(&found));
        assert_eq!(c.status, ContractStatus::Differs);
        assert_eq!(c.added, vec!["new"]);
        assert_eq!(c.removed, vec!["gone"]);
        let changed: Vec<(&str, SchemaKind, &str, ChangeKind)> = c
            .changed
            .iter()
            .map(|c| (c.tool.as_str(), c.schema, c.pointer.as_str(), c.change))
            .collect();
        assert_eq!(
            changed,
            vec![
                (
                    "echo",
                    SchemaKind::InputSchema,
                    "/properties/text/type",
                    ChangeKind::Changed
                ),
                ("shape", SchemaKind::OutputSchema, "", ChangeKind::Removed),
            ]
        );
        // The same tools, listed in another order: a match.
        let same = [
            tool(
                "shape",
                json!({"type": "object"}),
                Some(json!({"type": "object"})),
            ),
            tool("gone", json!({"type": "object"}), None),
            tool(
                "echo",
                json!({"properties": {"text": {"type": "string"}}, "type": "object"}),
                None,
            ),
        ];
        assert_eq!(
            expected.compare("s", Some(&same)).status,
            ContractStatus::Matches
        );
    }

    #[test]
    fn a_server_not_in_the_file_is_new_and_one_that_did_not_start_is_not_compared() {
        let file = ToolsFile::default();
        let found = [tool("b", json!({}), None), tool("a", json!({}), None)];
        let c = file.compare("x", Some(&found));
        assert_eq!(c.status, ContractStatus::NewServer);
        assert_eq!(c.added, vec!["a", "b"]);
        let c = file.compare("x", None);
        assert_eq!(c.status, ContractStatus::NotStarted);
        assert!(c.added.is_empty() && c.removed.is_empty() && c.changed.is_empty());
    }

    #[test]
    fn an_update_keeps_servers_that_did_not_start_and_drops_those_gone_from_the_fleet() {
        let one = [tool("t", json!({"type": "object"}), None)];
        let previous = ToolsFile::updated(
            None,
            &["a", "b", "c"],
            &[
                ("a", Some(&one[..])),
                ("b", Some(&one[..])),
                ("c", Some(&one[..])),
            ],
        );
        let two = [tool("u", json!({}), None)];
        // `a` restarted with other tools, `b` failed, `c` left the fleet, `d` is new.
        let next = ToolsFile::updated(
            Some(&previous),
            &["a", "b", "d"],
            &[("a", Some(&two[..])), ("b", None), ("d", Some(&two[..]))],
        );
        let names: Vec<&str> = next.servers.keys().map(String::as_str).collect();
        assert_eq!(names, vec!["a", "b", "d"]);
        assert!(next.servers["a"].tools.contains_key("u"));
        assert!(next.servers["b"].tools.contains_key("t"));
        assert_eq!(previous.missing(&["a", "b"]), vec!["c"]);
    }

    #[test]
    fn the_file_is_pretty_sorted_and_reads_back() {
        let listed = [
            tool(
                "zeta",
                json!({"type": "object", "properties": {"b": {}, "a": {}}}),
                None,
            ),
            tool(
                "alpha",
                json!({"type": "object"}),
                Some(json!({"type": "object"})),
            ),
        ];
        let file = ToolsFile::updated(None, &["s"], &[("s", Some(&listed[..]))]);
        let text = file.render();
        assert!(text.ends_with("}\n"));
        assert!(text.contains("\n  \"servers\": {"), "{text}");
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        };
        assert!(at("\"alpha\"") < at("\"zeta\""));
        assert!(at("\"a\": {}") < at("\"b\": {}"));
        assert!(at("\"version\"") < at("\"servers\""));
        assert!(!text.contains("\"output_schema\": null"), "{text}");
        assert_eq!(ToolsFile::parse(&text).unwrap(), file);
        assert_eq!(ToolsFile::parse(&text).unwrap().render(), text);
    }

    #[test]
    fn a_bad_file_is_refused_with_its_line_and_column() {
        let file = std::path::Path::new("tools.json");
        let err =
            ToolsFile::parse("{\n  \"version\": 1,\n  \"servers\": {\"a\": {\"tool\": {}}}\n}")
                .unwrap_err();
        assert_eq!(err.at.map(|(line, _)| line), Some(3), "{err}");
        let text = err.at_file(file);
        assert!(text.starts_with("tools.json:3:"), "{text}");
        assert!(text.contains("unknown field `tool`"), "{text}");
        let err = ToolsFile::parse("{\"version\": 2, \"servers\": {}}").unwrap_err();
        assert_eq!(
            err.at_file(file),
            "tools.json: version 2 is not one this mcpfleet reads (it reads and writes 1)"
        );
        let err = ToolsFile::parse("not json").unwrap_err();
        assert!(err.at_file(file).starts_with("tools.json:1:"), "{err}");
    }
}
