//! What keeps a hostile or mistaken file from costing much: a budget of nodes
//! that aliases may expand to, a bound on flow nesting checked before libyaml
//! reads the text, and a panic in libyaml turned into an error (docs/design.md §10).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::de;

use super::node::{SyntaxError, line_column};

/// More values than any fleet file needs; a bound on what aliases may expand to,
/// because serde_yaml's own repetition limit scales with the document and lets a
/// large anchored list repeated many times through.
pub(super) const MAX_NODES: usize = 200_000;

/// libyaml's scanner walks every open flow level for every token, so the cost
/// of `[[[[…` grows with the square of its depth (1 MiB of it takes hours).
/// serde_yaml gives up at 128 levels anyway, but only after libyaml has read
/// the whole document, so deeper nesting is refused before libyaml sees it.
const MAX_FLOW_DEPTH: usize = 256;

/// libyaml is a port of C code; a panic in it must become an error, not a crash
/// of the CLI or the supervisor.
pub(super) fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(f)).ok()
}

/// Counts brackets without regard to quotes or comments: an upper bound on the
/// real depth for any file written by accident. A file crafted to slip past it
/// gains nothing, since whoever writes the fleet file chooses the commands it
/// runs; and no real fleet file comes near the limit.
pub(super) fn check_flow_depth(text: &str) -> Result<(), SyntaxError> {
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

pub(super) const TOO_BIG: &str = "the document expands to more than";

pub(super) struct BuildState {
    pub(super) remaining: Cell<usize>,
    /// Whether any scalar was typed as a boolean or number and so needs its raw text.
    pub(super) has_typed_scalars: Cell<bool>,
}

impl BuildState {
    /// A build that may make `budget` nodes.
    pub(super) fn new(budget: usize) -> BuildState {
        BuildState {
            remaining: Cell::new(budget),
            has_typed_scalars: Cell::new(false),
        }
    }

    pub(super) fn charge<E: de::Error>(&self) -> Result<(), E> {
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

#[cfg(test)]
mod tests {
    use super::super::build::parse;
    use super::*;

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
