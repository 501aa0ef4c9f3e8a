//! The YAML layer: text to a [`Node`] tree, and a node back to its line and column.
//!
//! [`parse`] reads the document into a tree of its own that keeps what
//! `serde_yaml::Value` would lose (duplicate keys, the text of numbers as
//! written). serde_yaml keeps positions private, so [`locate`] finds a node's
//! line and column the only way the library allows: by deserializing the
//! document again and failing on purpose at the node. This module knows YAML,
//! not the fleet format.
//!
//! This file holds the tree and how it is built. `guards.rs` holds what bounds
//! a hostile or mistaken file (node budget, flow nesting, libyaml panics);
//! `position.rs` turns a path of steps, a byte offset or a serde_yaml error into
//! a line and column, and says why it re-deserializes instead of keeping spans.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

mod guards;
mod position;

use guards::{BuildState, MAX_NODES, check_flow_depth, guarded};
pub(crate) use position::{line_column, locate};
use position::{place_of_node, syntax_error};

/// A YAML node as the fleet format cares about it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// `~`, `null` or nothing at all.
    Null,
    /// `raw` is the text as written (`True`), for use as a string.
    Bool {
        value: bool,
        raw: String,
    },
    /// Kept as written: `1.10` must not become `1.1` in an argument.
    Number {
        raw: String,
    },
    Str(String),
    Seq(Vec<Node>),
    /// In file order, duplicates included, so that they can be reported.
    Map(Vec<(Node, Node)>),
    /// A node with an application tag such as `!secret`; the format uses none.
    Tagged(String, Box<Node>),
}

impl Node {
    /// The text of a scalar that may stand for a string (`8080` in `args`).
    pub(crate) fn scalar_text(&self) -> Option<&str> {
        match self {
            Node::Bool { raw, .. } | Node::Number { raw } | Node::Str(raw) => Some(raw),
            _ => None,
        }
    }

    /// The node's type, worded for "expected X, found Y".
    pub(crate) fn kind(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool { .. } => "a boolean".into(),
            Node::Number { .. } => "a number".into(),
            Node::Str(_) => "a string".into(),
            Node::Seq(_) => "a sequence".into(),
            Node::Map(_) => "a mapping".into(),
            Node::Tagged(tag, _) => format!("a value tagged `!{tag}`"),
        }
    }
}

/// One step from a node to one of its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The value of the mapping's n-th entry.
    Value(usize),
    /// The key of the mapping's n-th entry; always the last step.
    Key(usize),
    /// The sequence's n-th item.
    Item(usize),
}

/// A document that could not be read as YAML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    check_flow_depth(text)?;
    let state = BuildState::new(MAX_NODES);
    let built =
        guarded(|| Build { state: &state }.deserialize(serde_yaml::Deserializer::from_str(text)));
    let mut node = match built {
        Some(Ok(node)) => node,
        Some(Err(err)) => {
            let mut error = syntax_error(text, &err);
            if error.line.is_none() && err.to_string() == "repetition limit exceeded" {
                // serde_yaml's own limit on alias repetition has no position.
                // Building again with our node limit just below the count reached
                // fails at the same node, through an error that gets one.
                let reached = MAX_NODES - state.remaining.get();
                if let Some((line, column)) = place_of_node(text, reached) {
                    error.line = Some(line);
                    error.column = Some(column);
                }
            }
            return Err(error);
        }
        None => {
            return Err(SyntaxError {
                message: "the YAML parser failed on this file".into(),
                line: None,
                column: None,
            });
        }
    };
    if state.has_typed_scalars.get() {
        // Both passes read the same events in the same order, so the tree's
        // shape guides the second one; if it still fails, the typed text stays.
        let _ = guarded(|| {
            Fill { node: &mut node }.deserialize(serde_yaml::Deserializer::from_str(text))
        });
    }
    Ok(node)
}

#[derive(Clone, Copy)]
struct Build<'s> {
    state: &'s BuildState,
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        self.state.charge()?;
        d.deserialize_any(self)
    }
}

impl Build<'_> {
    fn number<E>(self, raw: String) -> Result<Node, E> {
        self.state.has_typed_scalars.set(true);
        Ok(Node::Number { raw })
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Node, E> {
        self.state.has_typed_scalars.set(true);
        Ok(Node::Bool {
            value,
            raw: value.to_string(),
        })
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        self.number(v.to_string())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        self.number(v.to_string())
    }

    fn visit_i128<E>(self, v: i128) -> Result<Node, E> {
        self.number(v.to_string())
    }

    fn visit_u128<E>(self, v: u128) -> Result<Node, E> {
        self.number(v.to_string())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        self.number(v.to_string())
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key_seed(self)? {
            let value = map.next_value_seed(self)?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Node, A::Error> {
        use de::VariantAccess;
        let (tag, content): (String, _) = data.variant()?;
        let inner = content.newtype_variant_seed(self)?;
        Ok(Node::Tagged(tag, Box::new(inner)))
    }
}

/// Replaces the typed text of booleans and numbers with the text as written.
struct Fill<'n> {
    node: &'n mut Node,
}

impl<'de> DeserializeSeed<'de> for Fill<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.node {
            Node::Bool { raw, .. } | Node::Number { raw } => {
                *raw = d.deserialize_str(RawText)?;
                Ok(())
            }
            Node::Seq(items) => d.deserialize_seq(FillSeq(items)),
            Node::Map(entries) => d.deserialize_map(FillMap(entries)),
            Node::Null | Node::Str(_) | Node::Tagged(..) => {
                d.deserialize_ignored_any(IgnoredAny).map(|_| ())
            }
        }
    }
}

struct RawText;

impl Visitor<'_> for RawText {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar")
    }

    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
}

struct FillSeq<'n>(&'n mut [Node]);

impl<'de> Visitor<'de> for FillSeq<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for node in self.0.iter_mut() {
            if seq.next_element_seed(Fill { node })?.is_none() {
                break;
            }
        }
        Ok(())
    }
}

struct FillMap<'n>(&'n mut [(Node, Node)]);

impl<'de> Visitor<'de> for FillMap<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        for (key, value) in self.0.iter_mut() {
            if map.next_key_seed(Fill { node: key })?.is_none() {
                break;
            }
            map.next_value_seed(Fill { node: value })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Node {
        Node::Str(v.into())
    }

    fn num(v: &str) -> Node {
        Node::Number { raw: v.into() }
    }

    #[test]
    fn keeps_duplicates_order_and_raw_number_text() {
        let node = parse("b: 1.10\na: 0x1F\nb: [True, ~, '7', 1e3]\n").unwrap();
        assert_eq!(
            node,
            Node::Map(vec![
                (s("b"), num("1.10")),
                (s("a"), num("0x1F")),
                (
                    s("b"),
                    Node::Seq(vec![
                        Node::Bool {
                            value: true,
                            raw: "True".into()
                        },
                        Node::Null,
                        s("7"),
                        num("1e3"),
                    ])
                ),
            ])
        );
    }

    #[test]
    fn raw_text_survives_aliases_and_number_keys() {
        let node = parse("x: &v 3.0\ny: *v\n10: z\n").unwrap();
        assert_eq!(
            node,
            Node::Map(vec![
                (s("x"), num("3.0")),
                (s("y"), num("3.0")),
                (num("10"), s("z")),
            ])
        );
    }

    #[test]
    fn tags_are_kept() {
        let node = parse("a: !secret x\nb: !!str 12\n").unwrap();
        assert_eq!(
            node,
            Node::Map(vec![
                (s("a"), Node::Tagged("secret".into(), Box::new(s("x")))),
                (s("b"), s("12")),
            ])
        );
    }

    #[test]
    fn empty_documents_are_null() {
        assert_eq!(parse("").unwrap(), Node::Null);
        assert_eq!(parse("# only a comment\n\n").unwrap(), Node::Null);
        assert_eq!(parse("---\n").unwrap(), Node::Null);
    }
}
