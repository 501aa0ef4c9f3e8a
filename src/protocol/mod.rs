//! The control-socket protocol between the CLI and the supervisor: versioned,
//! newline-delimited JSON, one request per connection, answered by zero or more
//! `event` lines and exactly one final `reply` or `error` line.
//!
//! ```text
//!  client                                   supervisor
//!    {"v":1,"op":"up","servers":[...]}  ──►
//!                                      ◄──  {"type":"event",...}      (0..n, as they happen)
//!                                      ◄──  {"type":"reply",...}      (exactly one)
//! ```
//!
//! Every line is bounded by `MAX_LINE_BYTES`. A line that is too long, not JSON, or
//! of another protocol version gets an `error` line; it never takes the supervisor
//! down, and what was read of it is discarded.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub const PROTOCOL_VERSION: u32 = 1;

/// The longest line either side accepts: a request is small; a reply for hundreds
/// of servers with stderr tails fits well within this.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// A request from the CLI.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Request {
    /// The protocol version the client speaks.
    pub v: u32,
    #[serde(flatten)]
    pub op: Op,
}

/// Per-request deadlines, in milliseconds; `None` means the server's own setting
/// (for `wait_ms`: wait as long as it takes).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Deadlines {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Op {
    /// Start (or leave running) the servers; empty means every enabled server.
    Up {
        #[serde(default)]
        servers: Vec<String>,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        deadlines: Deadlines,
    },
    Down {
        #[serde(default)]
        servers: Vec<String>,
        #[serde(default)]
        deadlines: Deadlines,
        /// Count an escalated teardown as not clean.
        #[serde(default)]
        strict: bool,
    },
    Reconnect {
        servers: Vec<String>,
        #[serde(default)]
        if_generation: Option<u64>,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        deadlines: Deadlines,
        #[serde(default)]
        strict: bool,
    },
    Status {
        #[serde(default)]
        servers: Vec<String>,
    },
    Reset {
        server: String,
    },
    /// List the tools of running servers, or of one server (started if needed).
    Tools {
        #[serde(default)]
        server: Option<String>,
        #[serde(default)]
        deadlines: Deadlines,
    },
    /// Call a tool of a server (started if needed), bounded by `timeout_ms`.
    Call {
        server: String,
        tool: String,
        #[serde(default)]
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        #[serde(default)]
        timeout_ms: Option<u64>,
        #[serde(default)]
        deadlines: Deadlines,
    },
    Ping,
}

/// One line from the supervisor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Response {
    /// A transition, as it happens.
    Event { event: serde_json::Value },
    /// The final answer: the report of the request.
    Reply { report: serde_json::Value },
    /// The request could not be handled at all.
    Error { message: String },
}

/// What reading one line gave.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A complete line, without its newline.
    Text(String),
    /// A line longer than the limit; it was read to its end and discarded.
    TooLong,
    /// Not valid UTF-8.
    NotUtf8,
    /// The peer closed the connection (a final unterminated fragment is dropped).
    Closed,
}

/// Reads one newline-terminated line of at most `limit` bytes, in bounded memory
/// whatever the peer sends.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::Closed);
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_long {
            if line.len() + chunk.len() > limit {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(available.len());
        reader.consume(used);
        if done.is_some() {
            if too_long {
                return Ok(Line::TooLong);
            }
            return Ok(match String::from_utf8(line) {
                Ok(s) => Line::Text(s),
                Err(_) => Line::NotUtf8,
            });
        }
    }
}

/// Parses a request line; the error says what is wrong with it, for the error reply.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    match value.get("v").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "protocol version {v} is not supported (this supervisor speaks {PROTOCOL_VERSION})"
            ));
        }
        None => return Err("missing protocol version `v`".to_owned()),
    }
    serde_json::from_value(value).map_err(|e| format!("invalid request: {e}"))
}

/// Encodes a message as one line, newline included.
pub fn encode<T: Serialize>(message: &T) -> String {
    let mut s = serde_json::to_string(message).expect("protocol messages serialize");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let req = Request {
            v: PROTOCOL_VERSION,
            op: Op::Reconnect {
                servers: vec!["a".into()],
                if_generation: Some(3),
                force: false,
                deadlines: Deadlines {
                    wait_ms: Some(500),
                    ..Deadlines::default()
                },
                strict: true,
            },
        };
        let line = encode(&req);
        assert!(line.ends_with('\n'));
        assert_eq!(parse_request(line.trim_end()).unwrap(), req);
        assert_eq!(
            parse_request(r#"{"v":1,"op":"status"}"#).unwrap().op,
            Op::Status { servers: vec![] }
        );
    }

    #[test]
    fn bad_requests_are_explained() {
        assert!(parse_request("garbage").unwrap_err().contains("not JSON"));
        assert!(
            parse_request(r#"{"op":"status"}"#)
                .unwrap_err()
                .contains("version")
        );
        assert!(
            parse_request(r#"{"v":9,"op":"status"}"#)
                .unwrap_err()
                .contains("9")
        );
        assert!(
            parse_request(r#"{"v":1,"op":"explode"}"#)
                .unwrap_err()
                .contains("invalid")
        );
        assert!(
            parse_request(r#"{"v":1,"op":"status","bogus":1}"#).is_err(),
            "unknown fields are refused"
        );
    }

    #[tokio::test]
    async fn lines_are_bounded_and_overlong_ones_discarded() {
        let mut input = Vec::new();
        input.extend_from_slice(b"short\n");
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend_from_slice(b"\nnext\n\xff\xfe\npartial");
        let mut reader = tokio::io::BufReader::with_capacity(64, &input[..]);
        assert_eq!(
            read_line(&mut reader, 100).await.unwrap(),
            Line::Text("short".into())
        );
        assert_eq!(read_line(&mut reader, 100).await.unwrap(), Line::TooLong);
        assert_eq!(
            read_line(&mut reader, 100).await.unwrap(),
            Line::Text("next".into())
        );
        assert_eq!(read_line(&mut reader, 100).await.unwrap(), Line::NotUtf8);
        assert_eq!(read_line(&mut reader, 100).await.unwrap(), Line::Closed);
    }
}
