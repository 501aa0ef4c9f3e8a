//! The era probe over streamable HTTP (docs/design.md §11, "Eras"): one POST of
//! `server/discover` with the modern headers (`MCP-Protocol-Version`,
//! `Mcp-Method`), bounded in time and in what it reads. What the server answered,
//! if it answered with JSON-RPC at all, goes back to the session layer, which
//! tells the era from it; anything else (no answer, a refusal without a JSON-RPC
//! body, a body that is not JSON) is no answer, and the session opens with
//! `initialize`, whose own errors then say what is wrong.

use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{Value, json};

use super::sideband::in_events;

/// What a server answered to the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Discovered {
    /// A `result`, as JSON text.
    Result(String),
    /// An `error` object, as JSON text (with any HTTP status).
    Error(String),
}

/// The probe's request id.
const PROBE_ID: &str = "mcpfleet-probe";

/// How much of the answer the probe reads at most.
const PROBE_READ_BYTES: usize = 1024 * 1024;

/// Sends `server/discover` with `params` (its modern `_meta`) to `url` with
/// `headers` (a remote server's), and returns its answer if one came within
/// `bound`.
pub(crate) async fn discover(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    params: &Value,
    bound: Duration,
) -> Option<Discovered> {
    let version = params["_meta"]["io.modelcontextprotocol/protocolVersion"]
        .as_str()?
        .to_owned();
    let body = json!({"jsonrpc": "2.0", "id": PROBE_ID, "method": "server/discover", "params": params});
    let mut request = client
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header("MCP-Protocol-Version", version)
        .header("Mcp-Method", "server/discover")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let exchange = async {
        let mut response = request.send().await.ok()?;
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        let mut seen = Vec::new();
        while seen.len() <= PROBE_READ_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => seen.extend_from_slice(&chunk),
                _ => break,
            }
            if is_stream && let Some(found) = answer_in_events(&seen) {
                return Some(found);
            }
        }
        if is_stream {
            answer_in_events(&seen)
        } else {
            answer_of(&seen)
        }
    };
    tokio::time::timeout(bound, exchange).await.ok().flatten()
}

/// The answer in one JSON-RPC message, if it is one: a `result` only when it
/// answers the probe; an `error` whatever its id (a refusal in front of the
/// server may not know it).
fn answer_of(body: &[u8]) -> Option<Discovered> {
    let message: Value = serde_json::from_slice(body).ok()?;
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return None;
    }
    if let Some(error) = message.get("error") {
        return Some(Discovered::Error(error.to_string()));
    }
    let result = message.get("result")?;
    (message.get("id").and_then(Value::as_str) == Some(PROBE_ID))
        .then(|| Discovered::Result(result.to_string()))
}

/// The answer to the probe among the events of an event stream read so far.
fn answer_in_events(seen: &[u8]) -> Option<Discovered> {
    in_events(seen, PROBE_ID, |data, _| answer_of(data.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_answer_is_read_as_result_or_error() {
        assert_eq!(
            answer_of(br#"{"jsonrpc":"2.0","id":"mcpfleet-probe","result":{"a":1}}"#),
            Some(Discovered::Result(r#"{"a":1}"#.into()))
        );
        assert_eq!(
            answer_of(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32022}}"#),
            Some(Discovered::Error(r#"{"code":-32022}"#.into()))
        );
        // A result for another request, and what is not JSON-RPC, are no answer.
        assert_eq!(answer_of(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#), None);
        assert_eq!(answer_of(b"Bad Request"), None);
        assert_eq!(answer_of(b""), None);
    }

    #[test]
    fn an_event_stream_is_read_up_to_the_probe_s_answer() {
        let stream = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"mcpfleet-probe\",\r\ndata: \"result\":{\"b\":2}}\r\n\r\n";
        assert_eq!(
            answer_in_events(stream.as_bytes()),
            Some(Discovered::Result(r#"{"b":2}"#.into()))
        );
        // An event not yet ended is not read.
        assert_eq!(
            answer_in_events(b"data: {\"jsonrpc\":\"2.0\",\"id\":\"mcpfleet-probe\",\"result\":{}}\n"),
            None
        );
    }
}
