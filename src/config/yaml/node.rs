//! The tree a YAML document is read into, and where in the text a thing is: a
//! syntax error's line and column, a byte offset's.

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
