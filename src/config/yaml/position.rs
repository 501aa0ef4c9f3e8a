//! Positions: the line and column of a node, of a byte offset, and of a syntax
//! error.
//!
//! serde_yaml keeps positions private. [`locate`] deserializes the document
//! again, following a path of entry and item indices with `deserialize_any`, and
//! fails on purpose at the target node: serde_yaml stamps a failing node's
//! position onto the error. It costs one parse per located node, which is why
//! the caller caps how many it locates.
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
//! tests/it/bad_input.rs, mutated fleet files and non-YAML files such as
//! /proc/self/status were left with errors without a place), so the approach
//! here would have to stay as a fallback anyway. The budget keeps this one's
//! cost bounded: at most 16 MiB of parsing per file.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::guards::{TOO_BIG, guarded};
use super::node::{Step, SyntaxError, line_column};

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

pub(super) fn syntax_error(text: &str, err: &serde_yaml::Error) -> SyntaxError {
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
    use super::super::build::parse;
    use super::*;

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
}
