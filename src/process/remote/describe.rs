//! How an HTTP answer is told to people: its status and the start of its body
//! (markup stripped, control characters escaped, what we sent redacted), the
//! realm and scope of a challenge, and whether a server says it does not know a
//! session. Pure text: nothing here does I/O.

use http::StatusCode;

/// How much of an error body is shown.
pub(super) const EXCERPT_CHARS: usize = 200;


/// Whether a server's error text says that it does not know the session: the
/// wording of the common SDKs ("Session not found", "No valid session ID
/// provided", "Invalid or expired session ID").
pub(crate) fn names_unknown_session(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("session")
        && [
            "not found",
            "no valid",
            "unknown",
            "invalid",
            "expired",
            "does not exist",
            "terminated",
        ]
        .iter()
        .any(|w| text.contains(w))
}

/// `HTTP 404 Not Found`.
pub(super) fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    }
}

/// rmcp words a refused request `HTTP <status>: <body>`: the status and the body.
pub(super) fn split_status(text: &str) -> Option<(StatusCode, &str)> {
    let rest = text.strip_prefix("HTTP ")?;
    let status = StatusCode::from_bytes(rest.get(..3)?.as_bytes()).ok()?;
    let body = rest.split_once(": ").map_or("", |(_, body)| body);
    Some((status, body))
}

/// The message of a JSON-RPC error body, or the body itself.
pub(super) fn error_message_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.to_owned())
}

/// The start of an error body as one line people can read: the text of an HTML
/// page without its markup, or of a JSON-RPC error its message.
pub(super) fn body_excerpt(body: &str) -> String {
    let body = error_message_of(body);
    let lower = body.to_ascii_lowercase();
    if !lower.contains('<') {
        return text_excerpt(&body);
    }
    // An HTML page: what its body says, without tags.
    let start = lower
        .find("<body")
        .and_then(|i| lower[i..].find('>').map(|j| i + j + 1))
        .unwrap_or(0);
    let end = lower[start..]
        .find("</body")
        .map_or(lower.len(), |i| start + i);
    let mut text = String::new();
    let mut in_tag = false;
    for c in body[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text_excerpt(&text)
}

/// Text from a server as one bounded line: runs of whitespace become one space,
/// control characters are escaped, and it is cut at [`EXCERPT_CHARS`].
pub(crate) fn text_excerpt(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= EXCERPT_CHARS {
                out.push('…');
                return out;
            }
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
            chars += 1;
        }
    }
    out
}

/// An error and its causes on one line, cut to an excerpt.
pub(super) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    text_excerpt(&crate::errors::chain(error))
}

/// `realm "mcp", scope "tools"` from a `WWW-Authenticate` challenge: only the
/// parameters that say what the server wants, never anything else it echoes.
pub(super) fn describe_challenge(header: &str) -> String {
    let header = header.trim();
    let (scheme, params) = match header.split_once(' ') {
        Some((scheme, params)) if !scheme.contains('=') => (Some(scheme), params),
        None if !header.contains('=') => (Some(header), ""),
        _ => (None, header),
    };
    let shown: Vec<String> = challenge_params(params)
        .into_iter()
        .filter(|(name, _)| matches!(name.as_str(), "realm" | "scope" | "error"))
        .map(|(name, value)| format!("{name} \"{}\"", text_excerpt(&value)))
        .collect();
    match scheme.filter(|s| !s.is_empty()).map(text_excerpt) {
        Some(scheme) if shown.is_empty() => scheme,
        Some(scheme) => format!("{scheme} {}", shown.join(", ")),
        None => shown.join(", "),
    }
}

/// The `name=value` parameters of a challenge; values may be quoted.
pub(super) fn challenge_params(text: &str) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().to_ascii_lowercase();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut escaped = false;
            let mut end = quoted.len();
            for (i, c) in quoted.char_indices() {
                match c {
                    _ if escaped => {
                        v.push(c);
                        escaped = false;
                    }
                    '\\' => escaped = true,
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    _ => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_owned();
            rest = &rest[end..];
        }
        params.push((name, value));
    }
    params
}

pub(super) fn redact(text: &str, secrets: &[String]) -> String {
    crate::process::redact::redact(text, secrets)
}
