//! Building the [`Node`] tree from the text: one bounded pass that keeps
//! duplicate keys and the text of scalars as written, and a second to fill in
//! typed scalars.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::guards::{BuildState, MAX_NODES, check_flow_depth, guarded};
use super::node::{Node, SyntaxError};
use super::position::syntax_error;

/// Reads `text` into a [`Node`] tree, within the bounds of [`guards`](super::guards).
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

/// Where the `count`-th node built (counting from 1) is, as its parent's position.
fn place_of_node(text: &str, count: usize) -> Option<(usize, usize)> {
    let state = BuildState::new(count.checked_sub(1)?);
    let built =
        guarded(|| Build { state: &state }.deserialize(serde_yaml::Deserializer::from_str(text)))?;
    let location = built.err()?.location()?;
    Some((location.line(), location.column()))
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
