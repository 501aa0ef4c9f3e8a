//! The documents of `tools` and `call` (docs/design.md §6): MCP requests made on a
//! server's running session. The supervisor sends one as the report of the
//! request; the CLI prints it, as one line of JSON or as text.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::exit::Code;
use super::report::{FailureKind, FailureReport, SCHEMA_VERSION, ServerReport};
use crate::lifecycle::state::Generation;

/// The answer to `tools` or `call`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CallReport {
    pub schema_version: u32,
    pub command: String,
    pub exit_code: i32,
    #[serde(flatten)]
    pub body: CallBody,
}

/// What a `tools` or `call` found. On the wire and in output the fields stand
/// beside `command` and `exit_code`, without a tag: each variant has fields of
/// its own, tried in this order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum CallBody {
    /// `tools`: the tools of each server asked.
    Tools { servers: Vec<ServerTools> },
    /// `call`: the tool's result, as the server gave it.
    Result {
        server: String,
        generation: Generation,
        tool: String,
        result: Value,
    },
    /// The request failed on the server's session.
    Failed {
        server: String,
        error: FailureReport,
    },
    /// The server was not running and could not be started: the line of the
    /// start.
    NotStarted { servers: Vec<ServerReport> },
}

/// One server's tools.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ServerTools {
    pub name: String,
    pub generation: Generation,
    pub tools: Vec<ToolReport>,
}

/// One tool, as its server lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ToolReport {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Map<String, Value>,
}

impl CallReport {
    pub(crate) fn new(command: &str, code: Code, body: CallBody) -> CallReport {
        CallReport {
            schema_version: SCHEMA_VERSION,
            command: command.to_owned(),
            exit_code: code.as_i32(),
            body,
        }
    }

    /// A request that failed on `server`'s session: exit 3.
    pub(crate) fn failed(command: &str, server: &str, kind: FailureKind, message: String) -> CallReport {
        let error = FailureReport { kind, message };
        let server = server.to_owned();
        CallReport::new(
            command,
            Code::StartFailed,
            CallBody::Failed { server, error },
        )
    }

    /// The error of a failed request, if it failed on a session.
    #[cfg(test)]
    fn error(&self) -> Option<&FailureReport> {
        match &self.body {
            CallBody::Failed { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::error::ErrorKind;
    use crate::lifecycle::state::Phase;

    /// Each body reads back as itself, though nothing on the wire names it.
    fn round_trip(report: &CallReport) -> CallReport {
        let line = serde_json::to_string(report).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn every_body_reads_back_as_itself() {
        let tools = CallReport::new(
            "tools",
            Code::Ok,
            CallBody::Tools {
                servers: vec![ServerTools {
                    name: "a".into(),
                    generation: 2,
                    tools: vec![ToolReport {
                        name: "echo".into(),
                        description: None,
                        input_schema: Map::new(),
                    }],
                }],
            },
        );
        assert!(
            matches!(round_trip(&tools).body, CallBody::Tools { servers } if servers.len() == 1)
        );
        let none = CallReport::new("tools", Code::Ok, CallBody::Tools { servers: vec![] });
        assert!(
            matches!(round_trip(&none).body, CallBody::Tools { servers } if servers.is_empty())
        );

        let result = CallReport::new(
            "call",
            Code::Ok,
            CallBody::Result {
                server: "a".into(),
                generation: 2,
                tool: "echo".into(),
                result: serde_json::json!({"content": []}),
            },
        );
        assert!(matches!(
            round_trip(&result).body,
            CallBody::Result { generation: 2, .. }
        ));

        let failed = CallReport::failed("call", "a", FailureKind::CallTimeout, "late".into());
        let back = round_trip(&failed);
        assert_eq!(back.exit_code, 3);
        assert_eq!(back.error().unwrap().kind, FailureKind::CallTimeout);
        let failed = CallReport::failed(
            "call",
            "a",
            FailureKind::Server(ErrorKind::Unauthorized),
            "who".into(),
        );
        assert_eq!(
            round_trip(&failed).error().unwrap().kind,
            FailureKind::Server(ErrorKind::Unauthorized)
        );

        let line = ServerReport::unpublished("a", "stdio", Phase::Failed, None, Code::StartFailed);
        let not_started = CallReport::new(
            "call",
            Code::StartFailed,
            CallBody::NotStarted {
                servers: vec![line],
            },
        );
        assert!(
            matches!(round_trip(&not_started).body, CallBody::NotStarted { servers } if servers.len() == 1)
        );
    }

    #[test]
    fn the_body_stands_beside_the_command() {
        let failed = CallReport::failed(
            "tools",
            "a",
            FailureKind::Server(ErrorKind::Protocol),
            "bad".into(),
        );
        let value = serde_json::to_value(&failed).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "schema_version": SCHEMA_VERSION,
                "command": "tools",
                "exit_code": 3,
                "server": "a",
                "error": {"kind": "protocol", "message": "bad"},
            })
        );
    }
}
