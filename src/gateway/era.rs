//! Which era of the protocol an HTTP request of the gateway's door belongs to,
//! read before rmcp reads it (docs/design.md §14, "Both eras at both doors"):
//! a request of the 2026-07-28 era names it in `MCP-Protocol-Version` and has
//! no session; a request of the legacy era without a session may open one only
//! if it is an `initialize`. Methods that 2026-07-28 removed are answered here.

use std::borrow::Cow;
use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::model::{ErrorCode, ProtocolVersion};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The header that names a request's protocol version.
const PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// The methods of the legacy era that 2026-07-28 removed.
const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// What the door reads of a message: its method and id, nothing else.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

fn head(body: &[u8]) -> Option<Head<'_>> {
    serde_json::from_slice(body).ok()
}

/// Whether a request says it is of the 2026-07-28 era or later: its
/// `MCP-Protocol-Version` (which must equal the version in its `_meta`; rmcp
/// checks that) is a date no earlier. Versions are `YYYY-MM-DD`, whose order is
/// their text's.
pub(super) fn modern_header(headers: &HeaderMap) -> bool {
    headers
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether a request without a session may open one: unless it is a message
/// whose method is known and is not `initialize`.
pub(super) fn may_open(body: &[u8]) -> bool {
    head(body).is_none_or(|h| h.method.is_none_or(|m| m == "initialize"))
}

/// The answer to a request of the 2026-07-28 era whose method that era
/// removed: 404 with JSON-RPC -32601 and the request's id; `None` for any
/// other message.
pub(super) fn removed(body: &[u8]) -> Option<Response<BoxBody<Bytes, Infallible>>> {
    let head = head(body)?;
    let method = head.method?;
    let id = head.id?;
    if !REMOVED.contains(&&*method) {
        return None;
    }
    let message = format!(
        "Method not found: `{method}` is not a method of protocol version {}",
        ProtocolVersion::V_2026_07_28
    );
    let mut text = Vec::with_capacity(128 + message.len());
    text.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    text.extend_from_slice(id.get().as_bytes());
    text.extend_from_slice(b",\"error\":{\"code\":");
    text.extend_from_slice(ErrorCode::METHOD_NOT_FOUND.0.to_string().as_bytes());
    text.extend_from_slice(b",\"message\":");
    serde_json::to_writer(&mut text, &message).ok()?;
    text.extend_from_slice(b"}}");
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_version(version: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(PROTOCOL_VERSION, version.parse().unwrap());
        headers
    }

    #[test]
    fn the_era_is_the_headers_version() {
        assert!(modern_header(&with_version("2026-07-28")));
        assert!(modern_header(&with_version("2027-01-01")));
        assert!(!modern_header(&with_version("2025-11-25")));
        assert!(!modern_header(&with_version("2024-11-05")));
        assert!(!modern_header(&HeaderMap::new()));
    }

    #[test]
    fn only_an_initialize_or_what_cannot_be_read_may_open_a_session() {
        assert!(may_open(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#));
        assert!(may_open(b"[1,2]"));
        assert!(may_open(b"not json"));
        assert!(!may_open(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#));
        assert!(!may_open(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#));
    }

    #[tokio::test]
    async fn a_removed_method_is_404_with_its_id_echoed() {
        for (method, id) in [("initialize", "\"a\""), ("ping", "7"), ("logging/setLevel", "1"),
            ("resources/subscribe", "2"), ("resources/unsubscribe", "3")]
        {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{}}}}"#);
            let answer = removed(body.as_bytes()).unwrap_or_else(|| panic!("{method}"));
            assert_eq!(answer.status(), StatusCode::NOT_FOUND);
            let bytes = answer.into_body().collect().await.unwrap().to_bytes();
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(value["error"]["code"], -32601, "{value}");
            assert_eq!(value["id"].to_string(), id, "{value}");
        }
        assert!(removed(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_none());
        assert!(removed(br#"{"jsonrpc":"2.0","method":"ping"}"#).is_none());
    }
}
