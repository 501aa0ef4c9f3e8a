//! The YAML layer: text to a [`Node`] tree, and a node back to its line and column.
//!
//! serde_yaml keeps positions private, so this module gets them the only way the
//! library allows. [`parse`] reads the document into a tree of its own that keeps
//! what `serde_yaml::Value` would lose (duplicate keys, the text of numbers as
//! written). [`locate`] deserializes the document again, following a path of
//! entry and item indices with `deserialize_any`, and fails on purpose at the
//! target node: serde_yaml stamps a failing node's position onto the error. It
//! costs one parse per located node, which is why the caller caps how many it
//! locates. This module knows YAML, not the fleet format.
//!
//! A span-aware parser was tried instead (saphyr-parser's events, each with its
//! span, built into a tree of positions once per file). It is much faster: on a
//! 319 KB file with 10,000 errors (release build), one pass takes 16 ms and
//! places all of them, where this module takes 12 ms per error, 630 ms for the
//! 52 that the caller's budget lets it place (the first parse takes 41 ms
//! either way); on a 4.5 KB file with 150 errors, 0.3 ms against 22 ms. It was
//! not kept, because it is a second YAML parser that does not read every file
//! as libyaml does: it places a block scalar (`|`, `>`) at its first line of
//! text instead of its indicator, a block sequence at its first item instead of
//! its `-`, and an empty value one column earlier, so reported positions would
//! change; and it refuses some documents that libyaml reads (in
//! tests/bad_input.rs, mutated fleet files and non-YAML files such as
//! /proc/self/status were left with errors without a place), so the approach
//! here would have to stay as a fallback anyway. The budget keeps this one's
//! cost bounded: at most 16 MiB of parsing per file.

use std::cell::Cell;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// More values than any fleet file needs; a bound on what aliases may expand to,
/// because serde_yaml's own repetition limit scales with the document and lets a
/// large anchored list repeated many times through.
const MAX_NODES: usize = 200_000;

/// libyaml's scanner walks every open flow level for every token, so the cost
/// of `[[[[…` grows with the square of its depth (1 MiB of it takes hours).
/// serde_yaml gives up at 128 levels anyway, but only after libyaml has read
/// the whole document, so deeper nesting is refused before libyaml sees it.
const MAX_FLOW_DEPTH: usize = 256;

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
    let state = BuildState {
        remaining: Cell::new(MAX_NODES),
        has_typed_scalars: Cell::new(false),
    };
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

/// Where the `count`-th node built (counting from 1) is, as its parent's position.
fn place_of_node(text: &str, count: usize) -> Option<(usize, usize)> {
    let state = BuildState {
        remaining: Cell::new(count.checked_sub(1)?),
        has_typed_scalars: Cell::new(false),
    };
    let built =
        guarded(|| Build { state: &state }.deserialize(serde_yaml::Deserializer::from_str(text)))?;
    let location = built.err()?.location()?;
    Some((location.line(), location.column()))
}

/// Line and column (1-based) of the node at `steps`, or `None` when the document
/// does not lead there (which would be a bug in the caller's path).
pub(crate) fn locate(text: &str, steps: &[Step]) -> Option<(usize, usize)> {
    let result = guarded(|| Seek { steps }.deserialize(serde_yaml::Deserializer::from_str(text)))?;
    match result {
        Err(err) if err.to_string().contains(HERE) => {
            err.location().map(|l| (l.line(), l.column()))
        }
        _ => None,
    }
}

/// libyaml is a port of C code; a panic in it must become an error, not a crash
/// of the CLI or the supervisor.
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(f)).ok()
}

fn syntax_error(text: &str, err: &serde_yaml::Error) -> SyntaxError {
    let mut message = err.to_string();
    let mut position = err.location().map(|l| (l.line(), l.column()));
    if let Some((line, column)) = position {
        message = message.replacen(&format!(" at line {line} column {column}"), "", 1);
    }
    // libyaml's reader reports a byte offset instead of a mark ("position 17").
    if let Some(at) = message.find(" at position ") {
        let offset = message[at + " at position ".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(offset) = offset {
            position = Some(line_column(text, offset));
            message = message.replacen(&format!(" at position {offset}"), "", 1);
        }
    }
    let message = match message.as_str() {
        "recursion limit exceeded" => "the document is nested too deeply".to_string(),
        "repetition limit exceeded" => {
            "aliases expand the document too much (is this a YAML bomb?)".to_string()
        }
        "unknown anchor" => "alias to an anchor that is not defined above it".to_string(),
        m if m.starts_with("deserializing from YAML containing more than one document") => {
            // serde_yaml gives this error no position; without one the user has
            // to hunt for the stray `---` in the file.
            position = position.or_else(|| second_document(text));
            "the file holds more than one YAML document; a fleet file is one document".to_string()
        }
        m if m.contains(TOO_BIG) => m[m.find(TOO_BIG).unwrap_or(0)..].to_string(),
        m => format!("YAML syntax error: {m}"),
    };
    SyntaxError {
        message,
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
    }
}

/// Where the second document of `text` starts: the position of its first node,
/// which a visit that fails on purpose (as in [`locate`]) gets stamped with.
fn second_document(text: &str) -> Option<(usize, usize)> {
    let second = guarded(|| serde_yaml::Deserializer::from_str(text).nth(1))??;
    let err = guarded(|| Seek { steps: &[] }.deserialize(second))?.err()?;
    err.location().map(|l| (l.line(), l.column()))
}

/// Counts brackets without regard to quotes or comments: an upper bound on the
/// real depth for any file written by accident. A file crafted to slip past it
/// gains nothing, since whoever writes the fleet file chooses the commands it
/// runs; and no real fleet file comes near the limit.
fn check_flow_depth(text: &str) -> Result<(), SyntaxError> {
    let mut depth = 0usize;
    for (offset, byte) in text.bytes().enumerate() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    let (line, column) = line_column(text, offset);
                    return Err(SyntaxError {
                        message: format!(
                            "the document is nested too deeply (more than {MAX_FLOW_DEPTH} levels of `[` and `{{`)"
                        ),
                        line: Some(line),
                        column: Some(column),
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

const TOO_BIG: &str = "the document expands to more than";

struct BuildState {
    remaining: Cell<usize>,
    /// Whether any scalar was typed as a boolean or number and so needs its raw text.
    has_typed_scalars: Cell<bool>,
}

impl BuildState {
    fn charge<E: de::Error>(&self) -> Result<(), E> {
        match self.remaining.get().checked_sub(1) {
            Some(left) => {
                self.remaining.set(left);
                Ok(())
            }
            None => Err(E::custom(format!(
                "{TOO_BIG} {MAX_NODES} values (are aliases repeating a large node?)"
            ))),
        }
    }
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

/// The message of the deliberate failure at the target node; any other error
/// means the path did not lead anywhere.
const HERE: &str = "\u{1}mcpfleet-locate-here\u{1}";
const LOST: &str = "\u{1}mcpfleet-locate-lost\u{1}";

#[derive(Clone, Copy)]
struct Seek<'p> {
    steps: &'p [Step],
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        // deserialize_any, never a typed method: only it follows aliases the way
        // `parse` did and stamps the node's own mark onto a visitor's error.
        d.deserialize_any(self)
    }
}

impl Seek<'_> {
    fn arrive<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(if self.steps.is_empty() { HERE } else { LOST }))
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.arrive()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.arrive()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.arrive()
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.arrive()
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.arrive()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.arrive()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.arrive()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.arrive()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.arrive()
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.arrive()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((&Step::Item(index), rest)) = self.steps.split_first() else {
            return self.arrive();
        };
        for _ in 0..index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(de::Error::custom(LOST));
            }
        }
        seq.next_element_seed(Seek { steps: rest })?;
        Err(de::Error::custom(LOST))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (index, rest, at_key) = match self.steps.split_first() {
            Some((&Step::Value(index), rest)) => (index, rest, false),
            Some((&Step::Key(index), rest)) => (index, rest, true),
            _ => return self.arrive(),
        };
        for _ in 0..index {
            if map.next_entry::<IgnoredAny, IgnoredAny>()?.is_none() {
                return Err(de::Error::custom(LOST));
            }
        }
        if at_key {
            map.next_key_seed(Seek { steps: rest })?;
        } else if map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Seek { steps: rest })?;
        }
        Err(de::Error::custom(LOST))
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

    #[test]
    fn syntax_errors_have_positions_and_no_duplicate_position_text() {
        let err = parse("a: 1\nb: c: d\n").unwrap_err();
        assert_eq!((err.line, err.column), (Some(2), Some(5)));
        assert_eq!(
            err.message,
            "YAML syntax error: mapping values are not allowed in this context"
        );
        let err = parse("a: [1, 2\n").unwrap_err();
        assert_eq!((err.line, err.column), (Some(2), Some(1)));
        let err = parse("a: 1\nb: x\0y\n").unwrap_err();
        assert_eq!((err.line, err.column), (Some(2), Some(5)), "{err:?}");
        assert!(err.message.contains("control characters"), "{err:?}");
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(err.message.contains("more than one YAML document"));
        assert_eq!((err.line, err.column), (Some(3), Some(1)), "{err:?}");
        let err = parse("a: 1\n--- [x]\n").unwrap_err();
        assert_eq!((err.line, err.column), (Some(2), Some(5)), "{err:?}");
        let err = parse("a: *nope\n").unwrap_err();
        assert_eq!((err.line, err.column), (Some(1), Some(4)));
    }

    #[test]
    fn locates_keys_values_items_through_flow_and_block_styles() {
        let text = "top: 1\nservers:\n  one:\n    args: [a, \"b\", 3]\n    env: {K: v}\n  two:\n    - x\n    -   y\n";
        assert_eq!(locate(text, &[]), Some((1, 1)));
        assert_eq!(locate(text, &[Step::Key(0)]), Some((1, 1)));
        assert_eq!(locate(text, &[Step::Value(0)]), Some((1, 6)));
        assert_eq!(locate(text, &[Step::Key(1)]), Some((2, 1)));
        assert_eq!(locate(text, &[Step::Value(1)]), Some((3, 3)));
        let args = [Step::Value(1), Step::Value(0), Step::Value(0)];
        assert_eq!(locate(text, &args), Some((4, 11)));
        for (i, column) in [(0, 12), (1, 15), (2, 20)] {
            let mut path = args.to_vec();
            path.push(Step::Item(i));
            assert_eq!(locate(text, &path), Some((4, column)), "item {i}");
        }
        let env_key = [Step::Value(1), Step::Value(0), Step::Value(1), Step::Key(0)];
        assert_eq!(locate(text, &env_key), Some((5, 11)));
        let item = [Step::Value(1), Step::Value(1), Step::Item(1)];
        assert_eq!(locate(text, &item), Some((8, 9)));
        // A path that leads nowhere is not guessed at.
        assert_eq!(locate(text, &[Step::Value(9)]), None);
        assert_eq!(locate(text, &[Step::Value(0), Step::Item(0)]), None);
    }

    #[test]
    fn locates_nodes_reached_through_aliases_and_tags() {
        let text = "a: &x\n  k: v\nb: *x\nc: !t 1\n";
        assert_eq!(
            locate(text, &[Step::Value(1), Step::Value(0)]),
            Some((2, 6))
        );
        assert_eq!(locate(text, &[Step::Value(2)]), Some((4, 4)));
    }

    #[test]
    fn locates_in_multibyte_text_by_character() {
        let text = "é: ü\nk: [ä, x]\n";
        assert_eq!(locate(text, &[Step::Value(0)]), Some((1, 4)));
        assert_eq!(locate(text, &[Step::Value(1), Step::Item(1)]), Some((2, 8)));
    }

    #[test]
    fn line_column_of_offsets() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é\nx", 1), (1, 1));
        assert_eq!(line_column("é\nx", 99), (2, 2));
    }

    #[test]
    fn billion_laughs_is_refused_quickly() {
        let mut text = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for level in b'b'..=b'i' {
            let prev = (level - 1) as char;
            let level = level as char;
            let refs = vec![format!("*{prev}"); 9].join(",");
            text.push_str(&format!("{level}: &{level} [{refs}]\n"));
        }
        let started = std::time::Instant::now();
        let err = parse(&text).unwrap_err();
        assert!(started.elapsed().as_secs() < 10);
        assert!(
            err.message.contains("aliases") || err.message.contains(TOO_BIG),
            "{err:?}"
        );
        // serde_yaml's repetition limit has no position of its own.
        assert!(err.line.is_some(), "{err:?}");
    }

    #[test]
    fn a_large_node_repeated_by_aliases_is_bounded() {
        let items = vec!["x"; 5_000].join(",");
        let mut text = format!("a: &a [{items}]\nb: [");
        text.push_str(&vec!["*a"; 5_000].join(","));
        text.push_str("]\n");
        let started = std::time::Instant::now();
        let err = parse(&text).unwrap_err();
        assert!(started.elapsed().as_secs() < 10);
        assert!(err.message.contains(TOO_BIG), "{err:?}");
        assert!(err.line.is_some());
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let text = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let started = std::time::Instant::now();
        let err = parse(&text).unwrap_err();
        assert!(started.elapsed().as_secs() < 2);
        assert!(err.message.contains("nested too deeply"), "{err:?}");
        assert_eq!((err.line, err.column), (Some(1), Some(257)));
        // Below the pre-check, serde_yaml's own limit still answers.
        let text = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("nested too deeply"), "{err:?}");
        assert_eq!(err.line, Some(1));
        // Brackets that close are no depth at all.
        assert!(parse(&"[1] ".repeat(1000)).is_err_and(|e| !e.message.contains("deeply")));
    }
}
