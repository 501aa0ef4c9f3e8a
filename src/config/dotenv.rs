//! The dotenv format of `env_file:` (docs/design.md §7): `KEY=VALUE` lines.
//!
//! What it reads: blank lines and `#` comments; an optional `export ` before a
//! name; names as in `env:` (letters, digits and `_`, not starting with a
//! digit), with spaces around `=` allowed; values unquoted (to the end of the
//! line, trailing spaces and a ` #` comment removed), in single quotes (taken
//! as written, line breaks included), or in double quotes (with the escapes
//! `\n`, `\r`, `\t`, `\\`, `\"`, `\'` and `\$`; any other backslash is kept).
//! Nothing is expanded: `${HOME}` in a value is those seven characters. A name
//! given twice takes its last value, as `env:` takes the file's.
//!
//! A line it cannot read is an error with its line and column. Messages never
//! quote the file's text: a malformed line may be a secret without its name.

use std::fmt;

use super::expand::is_env_name;

/// Why an env file cannot be read, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DotenvError {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for DotenvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// The variables of an env file, in the order of their last definition.
pub(crate) fn parse(text: &str) -> Result<Vec<(String, String)>, DotenvError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = Reader {
        chars: text.chars().collect(),
        at: 0,
        line: 1,
        column: 1,
    };
    let mut vars: Vec<(String, String)> = Vec::new();
    while let Some((name, value)) = reader.next_entry()? {
        vars.retain(|(n, _)| *n != name);
        vars.push((name, value));
    }
    Ok(vars)
}

struct Reader {
    chars: Vec<char>,
    at: usize,
    line: usize,
    column: usize,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> DotenvError {
        DotenvError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }

    /// Spaces and tabs (and the `\r` of a CRLF line end), not line breaks.
    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.bump();
        }
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.bump() {
            if c == '\n' {
                break;
            }
        }
    }

    /// The rest of a line after a value: nothing, spaces, or a comment.
    fn end_of_line(&mut self) -> Result<(), DotenvError> {
        self.skip_spaces();
        match self.peek() {
            None | Some('\n') | Some('#') => {
                self.skip_line();
                Ok(())
            }
            Some(_) => Err(self.error(
                "unexpected text after the closing quote; only a `#` comment may follow it",
            )),
        }
    }

    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| !c.is_whitespace() && *c != '=' && *c != '#')
        {
            word.push(c);
            self.bump();
        }
        word
    }

    fn next_entry(&mut self) -> Result<Option<(String, String)>, DotenvError> {
        loop {
            self.skip_spaces();
            match self.peek() {
                None => return Ok(None),
                Some('\n') => {
                    self.bump();
                }
                Some('#') => self.skip_line(),
                Some(_) => break,
            }
        }
        let (line, column) = (self.line, self.column);
        let mut name = self.word();
        if name == "export" && matches!(self.peek(), Some(' ' | '\t')) {
            self.skip_spaces();
            name = self.word();
        }
        let name_at = |message: String| DotenvError {
            line,
            column,
            message,
        };
        if name.is_empty() {
            return Err(self.error("expected a variable name, as in NAME=value"));
        }
        if !is_env_name(&name) {
            return Err(name_at(
                "not a valid variable name (letters, digits and _, not starting with a digit); \
                 lines are NAME=value"
                    .into(),
            ));
        }
        self.skip_spaces();
        if self.peek() != Some('=') {
            // Not quoted: a token pasted alone on a line looks like a name.
            return Err(name_at(
                "a name without `=`; lines are NAME=value (NAME= for an empty value)".into(),
            ));
        }
        self.bump();
        self.skip_spaces();
        let value = match self.peek() {
            Some('\'') => {
                let value = self.quoted('\'')?;
                self.end_of_line()?;
                value
            }
            Some('"') => {
                let value = self.quoted('"')?;
                self.end_of_line()?;
                value
            }
            _ => self.unquoted(),
        };
        if value.contains('\0') {
            return Err(name_at(format!(
                "the value of `{name}` holds a NUL character, which no environment variable can"
            )));
        }
        Ok(Some((name, value)))
    }

    fn unquoted(&mut self) -> String {
        let mut value = String::new();
        while let Some(c) = self.peek().filter(|c| *c != '\n') {
            // ` #` starts a comment; `a#b` is a value.
            if c == '#' && value.ends_with([' ', '\t']) {
                break;
            }
            value.push(c);
            self.bump();
        }
        self.skip_line();
        value.trim_end().to_string()
    }

    fn quoted(&mut self, quote: char) -> Result<String, DotenvError> {
        let (line, column) = (self.line, self.column);
        self.bump();
        let mut value = String::new();
        loop {
            match self.bump() {
                None => {
                    return Err(DotenvError {
                        line,
                        column,
                        message: format!("the quote {quote} opened here is not closed"),
                    });
                }
                Some(c) if c == quote => return Ok(value),
                Some('\\') if quote == '"' => match self.peek() {
                    Some(escaped @ ('n' | 'r' | 't' | '\\' | '"' | '\'' | '$')) => {
                        self.bump();
                        value.push(match escaped {
                            'n' => '\n',
                            'r' => '\r',
                            't' => '\t',
                            other => other,
                        });
                    }
                    _ => value.push('\\'),
                },
                Some(c) => value.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_values_comments_and_blank_lines() {
        let text =
            "# a comment\n\nA=1\n  B = two words  \nexport C=3\n\tD=\nE=x#y\nF=x # comment\n";
        assert_eq!(
            vars(text),
            pairs(&[
                ("A", "1"),
                ("B", "two words"),
                ("C", "3"),
                ("D", ""),
                ("E", "x#y"),
                ("F", "x")
            ])
        );
        assert_eq!(vars(""), pairs(&[]));
        assert_eq!(
            vars("\u{feff}A=1\r\nB=2\r\n"),
            pairs(&[("A", "1"), ("B", "2")])
        );
        // `export` is also a name.
        assert_eq!(
            vars("export=1\nexport  X=2"),
            pairs(&[("export", "1"), ("X", "2")])
        );
    }

    #[test]
    fn single_quotes_take_everything_as_written() {
        assert_eq!(
            vars("A='a \\n \"b\" # not a comment ${HOME}' # comment\nB='two\nlines'\nC=''"),
            pairs(&[
                ("A", "a \\n \"b\" # not a comment ${HOME}"),
                ("B", "two\nlines"),
                ("C", "")
            ])
        );
    }

    #[test]
    fn double_quotes_know_escapes() {
        assert_eq!(
            vars(r#"A="line\nnext\ttab \"q\" \\ \' \$HOME \x""#),
            pairs(&[("A", "line\nnext\ttab \"q\" \\ ' $HOME \\x")])
        );
        assert_eq!(vars("A=\"a\nb\"  "), pairs(&[("A", "a\nb")]));
        assert_eq!(vars("A=\"# x\" # y"), pairs(&[("A", "# x")]));
    }

    #[test]
    fn the_last_value_of_a_name_wins() {
        assert_eq!(vars("A=1\nB=2\nA=3\n"), pairs(&[("B", "2"), ("A", "3")]));
    }

    #[test]
    fn malformed_lines_are_errors_with_their_place_and_no_text_of_theirs() {
        let cases = [
            (
                "A=1\nsk-live-123abc\n",
                "2:1: not a valid variable name (letters, digits and _, not starting with a digit); lines are NAME=value",
            ),
            (
                "A=1\n  ghp_abc123\n",
                "2:3: a name without `=`; lines are NAME=value (NAME= for an empty value)",
            ),
            (
                "1A=x",
                "1:1: not a valid variable name (letters, digits and _, not starting with a digit); lines are NAME=value",
            ),
            (
                "A-B=x",
                "1:1: not a valid variable name (letters, digits and _, not starting with a digit); lines are NAME=value",
            ),
            ("=x", "1:1: expected a variable name, as in NAME=value"),
            (
                "A='open\nB=2\n",
                "1:3: the quote ' opened here is not closed",
            ),
            ("A=\"open", "1:3: the quote \" opened here is not closed"),
            (
                "A=\"x\" y",
                "1:7: unexpected text after the closing quote; only a `#` comment may follow it",
            ),
            (
                "export A B=1",
                "1:1: a name without `=`; lines are NAME=value (NAME= for an empty value)",
            ),
            (
                "A=\"a\\0\"\nB=\"\u{0}\"",
                "2:1: the value of `B` holds a NUL character, which no environment variable can",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.to_string(), want, "{text:?}");
            assert!(
                !err.message.contains("sk-live") && !err.message.contains("ghp_"),
                "{err}"
            );
        }
    }
}
