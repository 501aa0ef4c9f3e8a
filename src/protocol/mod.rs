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
//!
//! Versions (docs/design.md §9): a client sends the version it speaks,
//! [`PROTOCOL_VERSION`]; the supervisor takes every version in
//! [`SUPPORTED_VERSIONS`] (a request of an older one is a request of the newest
//! without the fields added since, all optional) and refuses any other with a
//! [`Refusal`] that lists the versions it speaks. [`Refusal::other_protocol`]
//! recognises that refusal, and what supervisors that predate the list say
//! instead, so that a CLI facing a supervisor of another build knows it.

use crate::config::Timeout;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The version of the protocol this build speaks. 2: `fleet` carries the
/// file's `version`.
pub const PROTOCOL_VERSION: u32 = 2;

/// Every version a supervisor of this build takes, oldest first. A version adds
/// only optional fields, so a request of an older one decodes as it is.
pub const SUPPORTED_VERSIONS: [u32; 2] = [1, 2];

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

/// Per-request deadlines, as the fleet file's and the CLI's `Timeout`. On the
/// wire each is a number of milliseconds, 0 meaning `none` (see
/// `config::duration::millis`); an absent one means the server's own setting
/// (for `wait_ms`: the supervisor's default wait, `DEFAULT_WAIT`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Deadlines {
    #[serde(
        default,
        with = "crate::config::duration::millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub wait_ms: Option<Timeout>,
    #[serde(
        default,
        with = "crate::config::duration::millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub connect_ms: Option<Timeout>,
    #[serde(
        default,
        with = "crate::config::duration::millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub cleanup_ms: Option<Timeout>,
}

/// The fleet file as the CLI read it (docs/design.md §16): its path, its exact
/// text, and the value of every `${env:NAME}` it looked up. The supervisor
/// validates the same text with the same values, so that it acts on the file the
/// caller sees, with the environment the caller has. The values may be secrets:
/// they travel only on the owner-only socket and are never logged or shown
/// (`Debug` names the variables only).
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FleetSource {
    pub path: String,
    pub text: String,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Which version of the file the text is, when the CLI could tell
    /// (docs/design.md §16, R6): the supervisor never replaces the file it
    /// runs with an older one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<FileVersion>,
}

/// A version of the fleet file, as the CLI saw it when it read the text: the
/// file's identity (device, inode), its size, and its modification and status
/// change times in nanoseconds since the epoch. Versions are ordered by the
/// status change time, which only the kernel sets (a write, a rename over the
/// file, `touch`): a copy put back with `cp -p` or `mv` keeps an old
/// modification time, yet its change is new, and it is the newer version.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FileVersion {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub modified_ns: i64,
    pub changed_ns: i64,
}

impl FileVersion {
    /// Whether this version changed before `other`: then it is the older file.
    /// Two versions changed at the same moment are not ordered.
    pub fn is_older_than(&self, other: &FileVersion) -> bool {
        self.changed_ns < other.changed_ns
    }

    /// When the file last changed, as RFC 3339 with nanoseconds (UTC).
    pub fn changed(&self) -> String {
        let t = u64::try_from(self.changed_ns).unwrap_or(0);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(t);
        humantime::format_rfc3339_nanos(t).to_string()
    }
}

impl std::fmt::Debug for FleetSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetSource")
            .field("path", &self.path)
            .field("text_bytes", &self.text.len())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("version", &self.version)
            .finish()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Op {
    /// Converge on the fleet file (`fleet`; the supervisor's own when absent):
    /// start (or leave running) the servers, restart those whose definition
    /// changed; empty means every enabled server.
    Up {
        #[serde(default)]
        servers: Vec<String>,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        deadlines: Deadlines,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
        /// Only say what would be done.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dry_run: bool,
        /// Stop the servers that are no longer in the fleet file.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        remove_orphans: bool,
    },
    Down {
        #[serde(default)]
        servers: Vec<String>,
        #[serde(default)]
        deadlines: Deadlines,
        /// Count an escalated teardown as not clean.
        #[serde(default)]
        strict: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
        /// In a fleet across hosts: stop only what this host runs, and let the
        /// other hosts take it over (docs/design.md §19).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
    },
    /// The servers' states, and how each differs from `fleet` when given.
    Status {
        #[serde(default)]
        servers: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
    },
    Ping,
    /// The supervisor's metrics as text (docs/design.md §17): OpenMetrics when
    /// `openmetrics`, else Prometheus' text format.
    Metrics {
        #[serde(default)]
        openmetrics: bool,
    },
    /// Start the servers as `up` would, answer with the report, then speak MCP on
    /// this connection: the gateway, scoped to these servers (`connect`). With
    /// `handover`, the client's own stdin and stdout come next instead, as
    /// descriptors with one byte ([`HANDOVER`]), and the session is spoken on
    /// them; the connection stays open for as long as the session lasts, and
    /// either side closing it ends the session.
    Gateway {
        #[serde(default)]
        servers: Vec<String>,
        #[serde(default)]
        deadlines: Deadlines,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        handover: bool,
    },
    /// Start the servers as `up` would and open the gateway's HTTP door (`serve`).
    Serve {
        #[serde(default)]
        servers: Vec<String>,
        /// `ADDRESS:PORT`; the fleet file's, else the default, when absent.
        #[serde(default)]
        listen: Option<String>,
        #[serde(default)]
        deadlines: Deadlines,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fleet: Option<FleetSource>,
    },
}

/// The byte that carries a `connect` client's stdin and stdout to the
/// supervisor, after the report of an [`Op::Gateway`] with `handover`.
pub const HANDOVER: u8 = b'H';

/// The byte the supervisor sends on a handed-over `connect`'s connection when
/// it ends the session itself (the client's input ended, or the supervisor is
/// stopping), just before it closes the connection. A connection that closes
/// without it was lost with the supervisor: `connect` then exits 8.
pub const SESSION_ENDED: u8 = b'E';

/// One line from the supervisor: `E` is an event, `R` the report of the request.
/// Both sides name the same types (the output model's `EventReport`, and the
/// report of the op), so the messages are typed both ways while this module
/// stays data only and knows nothing of the lifecycle or of output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Response<E, R> {
    /// A transition, as it happens.
    Event { event: E },
    /// The final answer: the report of the request.
    Reply { report: R },
    /// The request could not be handled at all. A request refused for its
    /// protocol version gets a [`Refusal`], the same line with `speaks` added.
    Error { message: String },
}

/// The answer to `metrics`: the text, as a scrape would get it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricsText {
    pub metrics: String,
}

/// The error line of a request the supervisor could not decode: the message,
/// and when the reason is the request's protocol version, the versions the
/// supervisor speaks (`speaks`; absent otherwise). It reads as a
/// [`Response::Error`] to a client that does not know `speaks`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename = "error")]
pub struct Refusal {
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speaks: Vec<u32>,
}

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal {
            message,
            speaks: Vec::new(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a refusal says of the supervisor's protocol when it refused a request
/// for being of another protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherProtocol {
    /// The versions it speaks, when it said (empty: it did not).
    pub speaks: Vec<u32>,
}

impl Refusal {
    /// Reads an error line: the refusal with `speaks` when the line has it.
    /// `None` when the line is not an error line.
    pub fn read(line: &str) -> Option<Refusal> {
        serde_json::from_str(line).ok()
    }

    /// Whether the supervisor refused the request because it speaks another
    /// version of this protocol than the client: it says so with `speaks`; a
    /// supervisor that predates `speaks` said `protocol version N is not
    /// supported (this supervisor speaks M)`, or, for a request of its own
    /// version with a field or op it does not know (which this client only
    /// sends when it speaks a newer version), serde's `unknown field` or
    /// `unknown variant`.
    pub fn other_protocol(&self) -> Option<OtherProtocol> {
        if !self.speaks.is_empty() {
            return Some(OtherProtocol {
                speaks: self.speaks.clone(),
            });
        }
        let message = self.message.as_str();
        if message.starts_with("protocol version ") && message.contains(" is not supported") {
            let speaks = message
                .split_once("this supervisor speaks ")
                .map(|(_, rest)| {
                    let said = rest.split(')').next().unwrap_or_default();
                    said.split(|c: char| !c.is_ascii_digit())
                        .filter_map(|w| w.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            return Some(OtherProtocol { speaks });
        }
        let unknown = message.starts_with("invalid request: ")
            && (message.contains("unknown field `") || message.contains("unknown variant `"));
        unknown.then_some(OtherProtocol { speaks: Vec::new() })
    }
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

/// The most JSON values a request may hold, counted as the `[`, `{`, `,` and `:`
/// outside strings. A request names a few servers; without a bound, decoding an
/// 8 MiB line of `[0,0,0,…` builds trees of 30 bytes or more per byte of it
/// (about 300 MB) before any field is checked.
pub const MAX_REQUEST_VALUES: usize = 100_000;

/// Parses a request line; the error says what is wrong with it, and where, for
/// the error reply.
pub fn parse_request(line: &str) -> Result<Request, String> {
    decode_request(line).map_err(|refusal| refusal.message)
}

/// Parses a request line as [`parse_request`] does; a refusal for the request's
/// protocol version lists the versions this supervisor speaks.
pub fn decode_request(line: &str) -> Result<Request, Refusal> {
    // serde quotes unknown keys and ops as decoded: an escaped line break in one
    // would break the message (and the supervisor's log line) in two.
    decode(line).map_err(|mut refusal| {
        if refusal.message.contains(char::is_control) {
            refusal.message = refusal
                .message
                .chars()
                .map(|c| match c.is_control() {
                    true => c.escape_default().to_string(),
                    false => c.to_string(),
                })
                .collect();
        }
        refusal
    })
}

/// The versions of [`SUPPORTED_VERSIONS`] in words: `1 and 2` (with `and`), `1 or 2`.
fn spoken(conjunction: &str) -> String {
    let all: Vec<String> = SUPPORTED_VERSIONS.iter().map(u32::to_string).collect();
    match all.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} {conjunction} {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn decode(line: &str) -> Result<Request, Refusal> {
    check_value_count(line)?;
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err(format!(
            "invalid request: expected a JSON object, found {}",
            json_kind(&value)
        )
        .into());
    };
    match object.get("v") {
        Some(v) if v.as_u64().is_some_and(|v| SUPPORTED_VERSIONS.iter().any(|s| u64::from(*s) == v)) => {}
        Some(v) if v.is_u64() => {
            return Err(Refusal {
                message: format!(
                    "protocol version {v} is not supported (this supervisor speaks {})",
                    spoken("and")
                ),
                speaks: SUPPORTED_VERSIONS.to_vec(),
            });
        }
        Some(v) => {
            let found = match v {
                serde_json::Value::Number(n) => format!("`{n}`"),
                other => json_kind(other).to_owned(),
            };
            return Err(format!(
                "invalid protocol version `v`: expected the number {}, found {found}",
                spoken("or")
            )
            .into());
        }
        None => return Err("missing protocol version `v`".to_owned().into()),
    }
    // serde would take a number as the index of a variant: `"op": 0` would be `up`.
    if let Some(op) = object.get("op").filter(|op| !op.is_string()) {
        return Err(format!(
            "invalid request: `op` must be a string, found {}",
            json_kind(op)
        )
        .into());
    }
    // ... and a sequence as a struct's fields in order: `[1, 2, 3]` would be
    // three deadlines.
    if let Some(deadlines) = object.get("deadlines").filter(|d| d.is_array()) {
        return Err(format!(
            "invalid request: `deadlines` must be an object, found {}",
            json_kind(deadlines)
        )
        .into());
    }
    // `deny_unknown_fields` does not reach a variant without fields.
    if object.get("op").is_some_and(|op| op == "ping")
        && let Some(extra) = object.keys().find(|k| *k != "v" && *k != "op")
    {
        return Err(format!(
            "invalid request: unknown field `{extra}`; `ping` has no fields"
        )
        .into());
    }
    Request::deserialize(&value).map_err(|e| {
        let e = e.to_string();
        match culprit(object, &e) {
            Some(field) => format!("invalid request: `{field}`: {e}"),
            None => format!("invalid request: {e}"),
        }
        .into()
    })
}

/// Refuses a line with more than [`MAX_REQUEST_VALUES`] values, naming the column
/// where the count passed the limit.
fn check_value_count(line: &str) -> Result<(), String> {
    let (mut count, mut in_string, mut escaped) = (0usize, false, false);
    for (i, byte) in line.bytes().enumerate() {
        match (in_string, byte) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (_, b'"') => in_string = !in_string,
            (false, b'[' | b'{' | b',' | b':') => {
                count += 1;
                if count > MAX_REQUEST_VALUES {
                    let column = line[..i].chars().count() + 1;
                    return Err(format!(
                        "invalid request: more than {MAX_REQUEST_VALUES} JSON values \
                         at line 1 column {column}; a request is small"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// serde says what it expected but not of which field; a request has a handful
/// of fields, so for a wrong type or value the field is found by decoding each
/// one alone (errors about a field's presence name it already).
fn culprit<'o>(
    object: &'o serde_json::Map<String, serde_json::Value>,
    error: &str,
) -> Option<&'o str> {
    if !error.starts_with("invalid type")
        && !error.starts_with("invalid value")
        && !error.starts_with("invalid length")
    {
        return None;
    }
    let op = object.get("op")?;
    object
        .iter()
        .filter(|(key, _)| *key != "v" && *key != "op")
        .find(|(key, field)| {
            let alone = serde_json::json!({"v": PROTOCOL_VERSION, "op": op, *key: field});
            // Only the missing fields that `alone` leaves out may be wrong with it.
            Request::deserialize(&alone).is_err_and(|e| !e.to_string().starts_with("missing field"))
        })
        .map(|(key, _)| key.as_str())
}

/// The type of a JSON value, worded for "found X".
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
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
                    wait_ms: Some(Timeout::After(std::time::Duration::from_millis(500))),
                    ..Deadlines::default()
                },
                strict: true,
                fleet: None,
            },
        };
        let line = encode(&req);
        assert!(line.ends_with('\n'));
        assert_eq!(parse_request(line.trim_end()).unwrap(), req);
        assert_eq!(
            parse_request(r#"{"v":1,"op":"status"}"#).unwrap().op,
            Op::Status {
                servers: vec![],
                fleet: None
            }
        );
        // The fleet file travels with its text and the values it looked up,
        // which `Debug` (what a log would show) leaves out.
        let fleet = FleetSource {
            path: "/srv/fleet.yaml".into(),
            text: "version: 1\n".into(),
            env: [("TOKEN".to_owned(), "s3cr3t".to_owned())].into(),
            version: Some(FileVersion {
                dev: 2049,
                ino: 77,
                size: 11,
                modified_ns: 1_795_941_714_123_456_789,
                changed_ns: 1_795_941_714_123_456_789,
            }),
        };
        let req = Request {
            v: PROTOCOL_VERSION,
            op: Op::Up {
                servers: vec![],
                force: false,
                deadlines: Deadlines::default(),
                fleet: Some(fleet.clone()),
                dry_run: true,
                remove_orphans: false,
            },
        };
        assert_eq!(parse_request(encode(&req).trim_end()).unwrap(), req);
        let shown = format!("{req:?}");
        assert!(
            shown.contains("TOKEN") && !shown.contains("s3cr3t"),
            "{shown}"
        );
        let err = parse_request(r#"{"v":1,"op":"up","fleet":{"path":"p","text":"t","bogus":1}}"#)
            .unwrap_err();
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn file_versions_are_ordered_by_their_change() {
        let at = |changed_ns: i64, modified_ns: i64| FileVersion {
            dev: 1,
            ino: 2,
            size: 3,
            modified_ns,
            changed_ns,
        };
        // A copy put back with its old modification time is still the newer file.
        assert!(at(10, 50).is_older_than(&at(20, 5)));
        assert!(!at(20, 5).is_older_than(&at(10, 50)));
        // Changed at the same moment: neither is older.
        assert!(!at(10, 1).is_older_than(&at(10, 2)));
        assert_eq!(
            at(1_795_941_714_123_456_789, 0).changed(),
            "2026-11-29T08:41:54.123456789Z"
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
        assert!(
            parse_request(r#"{"v":1,"op":"ping","bogus":1}"#)
                .unwrap_err()
                .contains("unknown field `bogus`"),
            "by ops without fields too"
        );
        // Not an object, or a version that is not a whole number.
        let err = parse_request("[1]").unwrap_err();
        assert!(err.contains("expected a JSON object"), "{err}");
        let err = parse_request(r#"{"v":"1","op":"status"}"#).unwrap_err();
        assert!(
            err.contains("invalid protocol version") && err.contains("string"),
            "{err}"
        );
        let err = parse_request(r#"{"v":1.5,"op":"status"}"#).unwrap_err();
        assert!(err.contains("`1.5`"), "{err}");
        // A number is not an op, though serde would take it for a variant's index.
        for op in ["0", "3", "5", "true", "null", "[\"up\"]"] {
            let err = parse_request(&format!(r#"{{"v":1,"op":{op}}}"#)).unwrap_err();
            assert!(err.contains("`op` must be a string"), "{op}: {err}");
        }
        // What the message quotes stays on one line.
        let err = parse_request(r#"{"v":1,"op":"dé\nwn"}"#).unwrap_err();
        assert!(err.contains("unknown variant `dé\\nwn`"), "{err}");
        // Nor is a sequence a struct.
        let err = parse_request(r#"{"v":1,"op":"up","deadlines":[1,2,3]}"#).unwrap_err();
        assert!(err.contains("`deadlines` must be an object"), "{err}");
        // A wrong type names its field.
        let err = parse_request(r#"{"v":1,"op":"up","servers":["a"],"force":"yes"}"#).unwrap_err();
        assert!(err.contains("`force`: invalid type"), "{err}");
        let err = parse_request(r#"{"v":1,"op":"reset","server":7}"#).unwrap_err();
        assert!(err.contains("`server`: invalid type"), "{err}");
        let err = parse_request(r#"{"v":1,"op":"up","deadlines":{"wait_ms":-1}}"#).unwrap_err();
        assert!(err.contains("`deadlines`: invalid value"), "{err}");
    }

    /// A supervisor takes requests of every version it knows: a request of
    /// version 1 is one of version 2 without the file's `version`.
    #[test]
    fn every_known_version_is_taken_and_another_refused_with_the_versions_spoken() {
        for v in SUPPORTED_VERSIONS {
            let line = format!(r#"{{"v":{v},"op":"down","fleet":{{"path":"p","text":"t"}}}}"#);
            let request = decode_request(&line).unwrap();
            assert_eq!(request.v, v);
            assert!(matches!(request.op, Op::Down { fleet: Some(_), .. }));
        }
        assert_eq!(SUPPORTED_VERSIONS.last(), Some(&PROTOCOL_VERSION));
        // What this build sends is what it takes.
        let ours = encode(&Request {
            v: PROTOCOL_VERSION,
            op: Op::Ping,
        });
        assert_eq!(decode_request(ours.trim_end()).unwrap().v, 2);
        for v in [0, 3, 99] {
            let refusal = decode_request(&format!(r#"{{"v":{v},"op":"status"}}"#)).unwrap_err();
            assert_eq!(
                refusal.message,
                format!("protocol version {v} is not supported (this supervisor speaks 1 and 2)")
            );
            assert_eq!(refusal.speaks, vec![1, 2]);
            // On the wire: an error line with the versions, which a client that
            // does not know `speaks` reads as the error it always was.
            let line = encode(&refusal);
            assert!(line.contains(r#""speaks":[1,2]"#), "{line}");
            let read: Response<serde::de::IgnoredAny, serde::de::IgnoredAny> =
                serde_json::from_str(&line).unwrap();
            assert!(
                matches!(&read, Response::Error { message } if *message == refusal.message),
                "{read:?}"
            );
            assert_eq!(Refusal::read(&line), Some(refusal));
        }
        // Any other refusal says nothing of versions.
        let refusal = decode_request(r#"{"v":2,"op":"explode"}"#).unwrap_err();
        assert!(refusal.speaks.is_empty());
        assert!(!encode(&refusal).contains("speaks"));
        let err = decode_request(r#"{"v":"2","op":"status"}"#).unwrap_err();
        assert!(
            err.message
                .contains("expected the number 1 or 2, found a string"),
            "{err}"
        );
    }

    /// The CLI knows a supervisor of another build by its refusal: the versions
    /// it lists, or what supervisors that list none say.
    #[test]
    fn a_refusal_for_another_protocol_is_recognised_in_every_form() {
        let other = |line: &str| {
            let refusal = Refusal::read(line).expect("an error line");
            refusal.other_protocol().map(|o| o.speaks)
        };
        // This build's form.
        let line = encode(&decode_request(r#"{"v":3,"op":"ping"}"#).unwrap_err());
        assert_eq!(other(&line), Some(vec![1, 2]));
        // What a supervisor of protocol 1 says to a request of protocol 2.
        let old = r#"{"type":"error","message":"protocol version 2 is not supported (this supervisor speaks 1)"}"#;
        assert_eq!(other(old), Some(vec![1]));
        // ... and, of protocol 1 itself, to a field or an op it does not know
        // (serde's words, as this decoder still gives them).
        for request in [
            r#"{"v":1,"op":"up","fleet":{"path":"p","text":"t","added":{}}}"#,
            r#"{"v":1,"op":"status","added":1}"#,
            r#"{"v":1,"op":"ping","added":1}"#,
            r#"{"v":1,"op":"added"}"#,
        ] {
            let line = encode(&decode_request(request).unwrap_err());
            assert_eq!(other(&line), Some(vec![]), "{line}");
        }
        let unknown_field = r#"{"type":"error","message":"invalid request: unknown field `version`, expected one of `path`, `text`, `env`"}"#;
        assert_eq!(other(unknown_field), Some(vec![]));
        // Other refusals are not about the protocol.
        for message in [
            "usage: no server named `x` in this fleet",
            "the supervisor is shutting down",
            "not JSON: expected value at line 1 column 1",
            "invalid request: `force`: invalid type: string \"yes\", expected a boolean",
            "reconnect needs at least one server name",
            "the fleet file names the server `unknown field `x``",
        ] {
            let line = serde_json::json!({"type": "error", "message": message}).to_string();
            assert_eq!(other(&line), None, "{message}");
        }
        // Lines that are not errors are not refusals.
        assert_eq!(Refusal::read(r#"{"type":"reply","report":{}}"#), None);
        assert_eq!(Refusal::read("garbage"), None);
    }

    #[test]
    fn requests_with_too_many_values_are_refused_before_decoding() {
        let many = vec!["0"; MAX_REQUEST_VALUES].join(",");
        let err =
            parse_request(&format!(r#"{{"v":1,"op":"status","servers":[{many}]}}"#)).unwrap_err();
        assert!(err.contains("more than 100000 JSON values"), "{err}");
        assert!(err.contains("line 1 column"), "{err}");
        // Structure inside strings does not count.
        let text = "[,{:".repeat(MAX_REQUEST_VALUES);
        let line = format!(r#"{{"v":1,"op":"reset","server":"{text}\"{text}"}}"#);
        assert!(parse_request(&line).is_ok());
        // Just under the limit is decoded as usual.
        let names = vec!["\"a\""; MAX_REQUEST_VALUES - 10].join(",");
        let line = format!(r#"{{"v":1,"op":"status","servers":[{names}]}}"#);
        assert!(parse_request(&line).is_ok());
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
