//! A reader of the JSON that MCP clients write, with the position of every value.
//!
//! Clients' configuration files are JSON, and VS Code's are JSON with comments
//! (`//` and `/* */`) and trailing commas, which its own examples use. This
//! reader accepts both, keeps the members of an object in file order (their
//! order is the order of the servers), keeps duplicate keys so that they can
//! be reported, and gives every value its line and column: errors in an
//! imported file point at the JSON the user wrote. It knows JSON, not clients.

use std::fmt;

/// Deeper than any configuration file; it bounds the recursion on a hostile one.
const MAX_DEPTH: usize = 128;

/// Where a value starts: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

/// A JSON value and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Json {
    pub pos: Pos,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    /// As written: `1.10` stays `1.10` in an argument.
    Number(String),
    Str(String),
    Array(Vec<Json>),
    /// In file order, duplicates included.
    Object(Vec<Member>),
}

/// One `"key": value` of an object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    pub key: String,
    pub key_pos: Pos,
    pub value: Json,
}

impl Json {
    /// The value of the last member named `key`, as a JSON client would read it.
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match &self.value {
            Value::Object(members) => members
                .iter()
                .rev()
                .find(|m| m.key == key)
                .map(|m| &m.value),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value's type, worded for "expected X, found Y".
    pub(crate) fn kind(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::Str(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }

    /// Compact JSON text of the value, for comments; keys in file order.
    pub(crate) fn to_compact(&self) -> String {
        match &self.value {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(raw) => raw.clone(),
            Value::Str(s) => quote(s),
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(Json::to_compact).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Object(members) => {
                let members: Vec<String> = members
                    .iter()
                    .map(|m| format!("{}: {}", quote(&m.key), m.value.to_compact()))
                    .collect();
                format!("{{{}}}", members.join(", "))
            }
        }
    }
}

/// A JSON string literal, which is also a YAML double-quoted scalar.
pub(crate) fn quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Why a text is not JSON, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.pos.line, self.pos.column, self.message)
    }
}

/// Reads one JSON document (comments and trailing commas allowed).
pub(crate) fn parse(text: &str) -> Result<Json, SyntaxError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = Reader {
        chars: text.chars().collect(),
        at: 0,
        pos: Pos { line: 1, column: 1 },
    };
    reader.skip_blank()?;
    let value = reader.value(0)?;
    reader.skip_blank()?;
    if reader.peek().is_some() {
        return Err(reader.error("unexpected text after the end of the document"));
    }
    Ok(value)
}

struct Reader {
    chars: Vec<char>,
    at: usize,
    pos: Pos,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        if c == '\n' {
            self.pos.line += 1;
            self.pos.column = 1;
        } else {
            self.pos.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            pos: self.pos,
            message: message.into(),
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the file".into(),
            Some(c) if c.is_control() => format!("`{}`", c.escape_default()),
            Some(c) => format!("`{c}`"),
        }
    }

    /// Whitespace and comments.
    fn skip_blank(&mut self) -> Result<(), SyntaxError> {
        loop {
            match (self.peek(), self.chars.get(self.at + 1)) {
                (Some(' ' | '\t' | '\n' | '\r'), _) => {
                    self.bump();
                }
                (Some('/'), Some('/')) => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos;
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => {
                                return Err(SyntaxError {
                                    pos: start,
                                    message: "this comment is not closed with `*/`".into(),
                                });
                            }
                            Some('*') if self.peek() == Some('/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nested more than {MAX_DEPTH} levels deep")));
        }
        let pos = self.pos;
        let value = match self.peek() {
            Some('{') => self.object(depth)?,
            Some('[') => self.array(depth)?,
            Some('"') => Value::Str(self.string()?),
            Some('-' | '0'..='9') => Value::Number(self.number()?),
            Some(c) if c.is_ascii_alphabetic() => self.word()?,
            _ => return Err(self.error(format!("expected a value, found {}", self.found()))),
        };
        Ok(Json { pos, value })
    }

    fn word(&mut self) -> Result<Value, SyntaxError> {
        let pos = self.pos;
        let mut word = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            word.push(c);
            self.bump();
        }
        match word.as_str() {
            "null" => Ok(Value::Null),
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(SyntaxError {
                pos,
                message: format!(
                    "expected a value, found `{word}`; strings are written in double quotes"
                ),
            }),
        }
    }

    fn number(&mut self) -> Result<String, SyntaxError> {
        let pos = self.pos;
        let mut raw = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
        {
            raw.push(c);
            self.bump();
        }
        if serde_json::from_str::<serde_json::Number>(&raw).is_err() {
            return Err(SyntaxError {
                pos,
                message: format!("`{raw}` is not a valid number"),
            });
        }
        Ok(raw)
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        self.bump();
        let mut s = String::new();
        loop {
            let here = self.pos;
            match self.bump() {
                None => {
                    return Err(SyntaxError {
                        pos: start,
                        message: "this string is not closed with `\"`".into(),
                    });
                }
                Some('"') => return Ok(s),
                Some('\\') => s.push(self.escape(here)?),
                Some(c) if (c as u32) < 0x20 => {
                    return Err(SyntaxError {
                        pos: here,
                        message: format!(
                            "a control character (`{}`) in a string; write it as an escape such as `\\n`",
                            c.escape_default()
                        ),
                    });
                }
                Some(c) => s.push(c),
            }
        }
    }

    fn escape(&mut self, at: Pos) -> Result<char, SyntaxError> {
        let bad = |message: &str| SyntaxError {
            pos: at,
            message: message.into(),
        };
        match self.bump() {
            Some('"') => Ok('"'),
            Some('\\') => Ok('\\'),
            Some('/') => Ok('/'),
            Some('b') => Ok('\u{8}'),
            Some('f') => Ok('\u{c}'),
            Some('n') => Ok('\n'),
            Some('r') => Ok('\r'),
            Some('t') => Ok('\t'),
            Some('u') => {
                let first = self
                    .hex4()
                    .ok_or_else(|| bad("`\\u` needs four hex digits"))?;
                if (0xD800..0xDC00).contains(&first) {
                    // A high surrogate must be followed by its low half.
                    if self.peek() == Some('\\') && self.chars.get(self.at + 1) == Some(&'u') {
                        self.bump();
                        self.bump();
                        let second = self
                            .hex4()
                            .ok_or_else(|| bad("`\\u` needs four hex digits"))?;
                        if (0xDC00..0xE000).contains(&second) {
                            let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                            return char::from_u32(code).ok_or_else(|| bad("invalid `\\u` escape"));
                        }
                    }
                    return Err(bad("an unpaired surrogate in a `\\u` escape"));
                }
                char::from_u32(first).ok_or_else(|| bad("an unpaired surrogate in a `\\u` escape"))
            }
            _ => Err(bad(
                "unknown escape; JSON knows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
            )),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut code = 0;
        for _ in 0..4 {
            let digit = self.peek()?.to_digit(16)?;
            self.bump();
            code = code * 16 + digit;
        }
        Some(code)
    }

    fn array(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        self.bump();
        let mut items = Vec::new();
        loop {
            self.skip_blank()?;
            if self.peek() == Some(']') {
                self.bump();
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_blank()?;
            match self.peek() {
                Some(',') => {
                    self.bump();
                }
                Some(']') => {}
                _ => {
                    return Err(self.error(format!(
                        "expected `,` or `]` after an item of the array, found {}",
                        self.found()
                    )));
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        self.bump();
        let mut members = Vec::new();
        loop {
            self.skip_blank()?;
            match self.peek() {
                Some('}') => {
                    self.bump();
                    return Ok(Value::Object(members));
                }
                Some('"') => {}
                _ => {
                    return Err(self.error(format!(
                        "expected a key in double quotes or `}}`, found {}",
                        self.found()
                    )));
                }
            }
            let key_pos = self.pos;
            let key = self.string()?;
            self.skip_blank()?;
            if self.peek() != Some(':') {
                return Err(self.error(format!(
                    "expected `:` after the key \"{key}\", found {}",
                    self.found()
                )));
            }
            self.bump();
            self.skip_blank()?;
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_pos,
                value,
            });
            self.skip_blank()?;
            match self.peek() {
                Some(',') => {
                    self.bump();
                }
                Some('}') => {}
                _ => {
                    return Err(self.error(format!(
                        "expected `,` or `}}` after a member of the object, found {}",
                        self.found()
                    )));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, column: usize) -> Pos {
        Pos { line, column }
    }

    #[test]
    fn reads_values_with_their_positions() {
        let doc =
            parse("{\n  \"a\": [1, \"x\", true, null],\n  \"b\": {\"c\": -1.50e3}\n}").unwrap();
        let a = doc.get("a").unwrap();
        assert_eq!(a.pos, at(2, 8));
        let Value::Array(items) = &a.value else {
            panic!("{a:?}")
        };
        assert_eq!(
            items[1],
            Json {
                pos: at(2, 12),
                value: Value::Str("x".into())
            }
        );
        assert_eq!(items[2].value, Value::Bool(true));
        assert_eq!(items[3].value, Value::Null);
        let c = doc.get("b").unwrap().get("c").unwrap();
        assert_eq!(c.value, Value::Number("-1.50e3".into()));
        assert_eq!(c.pos, at(3, 14));
    }

    #[test]
    fn comments_and_trailing_commas_are_allowed() {
        let text =
            "// servers\n{\n  /* one */ \"a\": \"//not a comment\", // x\n  \"b\": [1, 2,],\n}\n";
        let doc = parse(text).unwrap();
        assert_eq!(doc.get("a").unwrap().as_str(), Some("//not a comment"));
        assert_eq!(doc.get("a").unwrap().pos, at(3, 18));
        assert_eq!(doc.get("b").unwrap().to_compact(), "[1, 2]");
    }

    #[test]
    fn escapes_are_decoded() {
        let doc = parse(r#"["a\"b\\c\/d\n\t\u00e9\ud83d\ude00"]"#).unwrap();
        let Value::Array(items) = doc.value else {
            panic!()
        };
        assert_eq!(items[0].as_str(), Some("a\"b\\c/d\n\té😀"));
    }

    #[test]
    fn members_keep_their_order_and_duplicates() {
        let doc = parse(r#"{"z": 1, "a": 2, "z": 3}"#).unwrap();
        let Value::Object(members) = &doc.value else {
            panic!()
        };
        let keys: Vec<&str> = members.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["z", "a", "z"]);
        assert_eq!(doc.get("z").unwrap().value, Value::Number("3".into()));
        assert_eq!(doc.to_compact(), r#"{"z": 1, "a": 2, "z": 3}"#);
    }

    #[test]
    fn syntax_errors_say_where() {
        let cases = [
            (
                "{\n  \"a\": 1\n  \"b\": 2\n}",
                "3:3: expected `,` or `}` after a member of the object, found `\"`",
            ),
            ("{\"a\": }", "1:7: expected a value, found `}`"),
            (
                "{\"a\": tru}",
                "1:7: expected a value, found `tru`; strings are written in double quotes",
            ),
            (
                "{a: 1}",
                "1:2: expected a key in double quotes or `}`, found `a`",
            ),
            (
                "{\"a\" 1}",
                "1:6: expected `:` after the key \"a\", found `1`",
            ),
            ("[\"abc", "1:2: this string is not closed with `\"`"),
            (
                "{\"a\": \"x\ny\"}",
                "1:9: a control character (`\\n`) in a string; write it as an escape such as `\\n`",
            ),
            (
                "[\"\\q\"]",
                "1:3: unknown escape; JSON knows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
            ),
            (
                "[1] [2]",
                "1:5: unexpected text after the end of the document",
            ),
            ("[01.]", "1:2: `01.` is not a valid number"),
            ("/* open", "1:1: this comment is not closed with `*/`"),
            ("", "1:1: expected a value, found the end of the file"),
            (
                "[\"\\ud800\"]",
                "1:3: an unpaired surrogate in a `\\u` escape",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err().to_string(), want, "{text:?}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let text = "[".repeat(100_000);
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("nested more than"), "{err}");
    }

    #[test]
    fn a_byte_order_mark_is_not_a_column() {
        let doc = parse("\u{feff}{\"a\": 1}").unwrap();
        assert_eq!(doc.get("a").unwrap().pos, at(1, 7));
    }
}
