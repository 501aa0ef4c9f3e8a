//! The keys of a remote server (`url`, `headers`): the URL as written and as the
//! HTTP client reads it, header names and values, and duplicate headers
//! (docs/design.md §7, §13). A message quotes what was written, never a secret
//! expanded into it.

use std::collections::HashMap;

use super::super::expand::Text;
use super::super::walk::{Entry, Issue, Validator};
use super::super::yaml::{Node, Step};

/// Names in `headers:`: an HTTP token (one or more RFC 7230 `tchar`).
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";
/// How a `url` may start as written: `http://`, `https://`, or a `${env:NAME}`
/// that expands to one. The validator checks more, on the expanded value: a
/// host, a port from 1 to 65535, no spaces or control characters.
pub const URL_PATTERN: &str = "^(https?://|\\$\\{env:[A-Za-z_][A-Za-z0-9_]*\\})";

impl Validator<'_> {
    /// The URL of a remote server, checked once expanded; a message quotes the
    /// URL as written, so that a secret expanded into it is never shown.
    pub(super) fn url(&mut self, entry: &Entry) -> Option<Text> {
        let text = self.text(entry.value, &entry.value_at)?;
        if self.unchecked(&text) {
            return Some(text);
        }
        let message = match (&text.template, check_url(&text.value)) {
            (_, Ok(())) => return Some(text),
            (None, Err(_)) if text.value.is_empty() => "`url` must not be empty".to_string(),
            (Some(t), Err(_)) if text.value.is_empty() => {
                format!("`url` is empty once `{t}` is expanded")
            }
            (None, Err(why)) => format!("`{}` is not a valid URL: {why}", text.value),
            (Some(t), Err(why)) => format!("`{t}` is not a valid URL once expanded: {why}"),
        };
        self.error(&entry.value_at, message);
        None
    }

    pub(super) fn headers(&mut self, entry: &Entry) -> Vec<(String, Text)> {
        let entries = match entry.value {
            Node::Null => return Vec::new(),
            Node::Seq(_) => {
                self.error(
                    &entry.value_at,
                    "expected a mapping of header names to values, found a sequence; \
                     write `headers: {Name: value}`",
                );
                return Vec::new();
            }
            node => self.mapping(node, &entry.value_at, "a mapping of header names to values"),
        };
        let mut headers = Vec::new();
        // Lowercased name -> where it was first written.
        let mut seen: HashMap<String, Vec<Step>> = HashMap::new();
        for e in entries.iter().flatten() {
            if !is_header_name(&e.key) {
                self.error(
                    &e.key_at,
                    format!(
                        "`{}` is not a valid HTTP header name \
                         (letters, digits and !#$%&'*+-.^_`|~)",
                        e.key
                    ),
                );
                continue;
            }
            let lower = e.key.to_ascii_lowercase();
            if let Some(first) = seen.get(&lower) {
                self.issues.push(Issue {
                    steps: Some(e.key_at.steps.clone()),
                    path: e.key_at.path.clone(),
                    message: format!(
                        "duplicate header `{}`; header names are case-insensitive",
                        e.key
                    ),
                    first: Some(first.clone()),
                });
                continue;
            }
            seen.insert(lower, e.key_at.steps.clone());
            let Some(text) = self.text(e.value, &e.value_at) else {
                continue;
            };
            if !is_header_value(&text.value) && !self.unchecked(&text) {
                let message = match &text.template {
                    None => format!(
                        "the value of header `{}` contains a line break or another control \
                         character, which HTTP does not allow",
                        e.key
                    ),
                    Some(t) => format!(
                        "the value of header `{}` contains a line break or another control \
                         character once `{t}` is expanded, which HTTP does not allow",
                        e.key
                    ),
                };
                self.error(&e.value_at, message);
                continue;
            }
            headers.push((e.key.clone(), text));
        }
        headers
    }
}

/// Whether `url` is an absolute `http://` or `https://` URL with a host (and, if
/// given, a port from 1 to 65535); the reason when it is not. The reason never
/// quotes the URL, which may hold a secret.
pub(crate) fn check_url(url: &str) -> Result<(), &'static str> {
    // The `url` crate has the last word: it is how the HTTP client reads the URL,
    // so what passes here is what the client connects to, and `remote` can find
    // the user info and query values to hide. It cannot be the only check: it
    // reads a URL as a browser does and repairs what it can, so that `HTTP://h`,
    // `http:/h`, ` http://h`, `https:///mcp` (host `mcp`), `http://a\b/` (host
    // `a`), `http://h:` and `http://h:0` pass, and tabs and line breaks vanish. A
    // fleet file connects to what it says, so the text as written is checked
    // first, which also gives the reasons their words.
    const PORT: &str = "the port must be a number from 1 to 65535";
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err("it must start with `http://` or `https://`");
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains a space or a control character");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Credentials (`user:password@`) are the client's business, not the host's.
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let port = if let Some(bracketed) = host_port.strip_prefix('[') {
        let Some((_, after)) = bracketed.split_once(']') else {
            return Err("the IPv6 address is not closed with `]`");
        };
        match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return Err("only a `:port` may follow the IPv6 address"),
            },
        }
    } else {
        let (host, port) = match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        };
        if host.is_empty() {
            return Err("it has no host");
        }
        let host_char =
            |c: char| !c.is_ascii() || c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=%".contains(c);
        if !host.chars().all(host_char) {
            return Err("the host contains a character that a host name cannot have");
        }
        port
    };
    if port == Some("") {
        return Err(PORT);
    }
    let parsed = url::Url::parse(url).map_err(|e| match e {
        url::ParseError::EmptyHost => "it has no host",
        url::ParseError::InvalidPort => PORT,
        url::ParseError::InvalidIpv6Address => "the host in `[...]` is not an IPv6 address",
        url::ParseError::InvalidIpv4Address => "the host is not a valid IPv4 address",
        _ => "the host is not a valid host name",
    })?;
    if parsed.port() == Some(0) {
        return Err(PORT);
    }
    Ok(())
}

/// An HTTP header name: one or more RFC 7230 `tchar`s.
pub(crate) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// An HTTP header value: no control character but tab (so no CR, LF or NUL,
/// which would end the header or the request early).
pub(crate) fn is_header_value(value: &str) -> bool {
    !value.chars().any(|c| (c < ' ' && c != '\t') || c == '\x7f')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        for ok in [
            "http://h",
            "https://example.org/mcp",
            "http://127.0.0.1:3001/mcp",
            "http://localhost:1",
            "https://h:65535/a?b=c#d",
            "http://user:pa%20ss@h/mcp",
            "http://[::1]:8080/mcp",
            "http://[2001:db8::1]",
            "http://[::ffff:127.0.0.1]/",
            "https://bücher.example/mcp",
            "http://h?x",
            "http://h#x",
            "http://my_host.local./x",
        ] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
        let scheme = Err("it must start with `http://` or `https://`");
        let host = Err("it has no host");
        let port = Err("the port must be a number from 1 to 65535");
        let space = Err("it contains a space or a control character");
        let host_char = Err("the host contains a character that a host name cannot have");
        for (bad, why) in [
            ("", scheme),
            ("h/mcp", scheme),
            ("localhost:3001/mcp", scheme),
            ("ftp://h", scheme),
            ("HTTP://h", scheme),
            ("http:/h", scheme),
            (" http://h", scheme),
            ("ws://h", scheme),
            ("http://", host),
            ("https:///mcp", host),
            ("http://?q", host),
            ("http://#f", host),
            ("http://:80/", host),
            ("http://user@/mcp", host),
            ("http://h:", port),
            ("http://h:0", port),
            ("http://h:65536", port),
            ("http://h:080000", port),
            ("http://h:x", port),
            ("http://h:80:90", port),
            ("http://h:-1", port),
            ("http://h /mcp", space),
            ("http://h/m cp", space),
            ("http://h/\r\nX: y", space),
            ("http://h\0", space),
            ("http://h/\t", space),
            ("http://h<x>/", host_char),
            ("http://a\"b/", host_char),
            ("http://a\\b/", host_char),
            ("http://a{b}/", host_char),
            (
                "http://[::1/",
                Err("the IPv6 address is not closed with `]`"),
            ),
            (
                "http://[]/",
                Err("the host in `[...]` is not an IPv6 address"),
            ),
            (
                "http://[h]/",
                Err("the host in `[...]` is not an IPv6 address"),
            ),
            ("http://[::1]:0/", port),
            (
                "http://[::1]x/",
                Err("only a `:port` may follow the IPv6 address"),
            ),
        ] {
            assert_eq!(check_url(bad), why, "{bad:?}");
        }
    }

    #[test]
    fn urls_the_http_client_would_refuse_are_refused() {
        for (bad, why) in [
            ("http://1.2.3.999/", "the host is not a valid IPv4 address"),
            (
                "http://[:::]/",
                "the host in `[...]` is not an IPv6 address",
            ),
            (
                "http://[1:2]/",
                "the host in `[...]` is not an IPv6 address",
            ),
            ("http://xn--a/mcp", "the host is not a valid host name"),
            ("http://a%3Cb/", "the host is not a valid host name"),
        ] {
            assert_eq!(check_url(bad), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn header_names_and_values() {
        for ok in [
            "Authorization",
            "x-api-key",
            "X_Custom.1",
            "!#$%&'*+-.^_`|~",
            "0",
        ] {
            assert!(is_header_name(ok), "{ok}");
        }
        for bad in [
            "", "X Y", "X:Y", "X\r\n", "(x)", "a,b", "a/b", "a@b", "é", "a\"", "{a}", "a;b", "a=b",
            "a?", "[a]", "a\\b", "\t", "\u{7f}",
        ] {
            assert!(!is_header_name(bad), "{bad:?}");
        }
        for ok in ["", "Bearer x", "a\tb", "ünïcode", "\u{80}", "\u{85}"] {
            assert!(is_header_value(ok), "{ok:?}");
        }
        for bad in [
            "a\rb", "a\nb", "a\0b", "\r\n", "a\u{1}", "a\u{1b}", "a\u{7f}",
        ] {
            assert!(!is_header_value(bad), "{bad:?}");
        }
    }
}
