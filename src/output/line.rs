//! How a server's line of a report is built: from what its authority published (a
//! `Snapshot`), with what the request the line answers added to it (a `Reply`'s
//! connect time, teardown and error), and the line's own exit code (docs/design.md
//! §5, §6). Every command's lines come from here.

use std::time::Duration;

use super::exit::Code;
use super::report::{ErrorReport, ServerReport};
use crate::lifecycle::authority::{Reply, RequestError, Snapshot};
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::events::millis;
use crate::lifecycle::state::{Intent, Phase};
use crate::lifecycle::summary::TeardownSummary;

/// What one request adds to a server's published state in its line.
#[derive(Debug, Clone, Default)]
pub struct RequestParts {
    /// Spawn to ready, when the request started a generation.
    pub connect: Option<Duration>,
    /// The teardown the request performed.
    pub teardown: Option<TeardownSummary>,
    /// Why the request did not get what it asked for.
    pub error: Option<ServerError>,
}

impl RequestParts {
    /// The parts of a reply, and the state it left the server in.
    pub fn of(reply: Reply) -> (Snapshot, RequestParts) {
        let Reply {
            snapshot,
            result,
            connect,
            teardown,
            listed: _,
        } = reply;
        let parts = RequestParts {
            connect,
            teardown,
            error: result.err(),
        };
        (snapshot, parts)
    }

    /// The code of the request's error and of its teardown; with `strict`, an
    /// escalated teardown is not clean.
    pub fn code(&self, strict: bool) -> Code {
        let mut code = self
            .error
            .as_ref()
            .map_or(Code::Ok, |e| Code::of_error(e.kind));
        if let Some(t) = &self.teardown {
            code = code.max(Code::of_teardown(t.outcome, strict));
        }
        code
    }
}

/// The error of a request that its authority did not answer: busy (its wait
/// deadline passed, L2) or gone (L9).
pub(crate) fn unanswered(e: &RequestError) -> ServerError {
    let kind = match e {
        RequestError::Busy(..) => ErrorKind::Busy,
        RequestError::Gone(_) => ErrorKind::Cancelled,
    };
    ServerError::new(kind, ErrorPhase::Request, e.to_string())
}

impl ServerReport {
    /// The one conversion from what an authority published: the server's state,
    /// with what `parts` adds, and the line's exit code.
    pub fn new(snapshot: &Snapshot, parts: RequestParts, code: Code) -> ServerReport {
        // Every field is named, so that a new one is a decision here, not a
        // field left out of every report.
        let Snapshot {
            name,
            transport,
            state,
            generation,
            pid,
            tools,
            server_info,
            protocol_version,
            uptime_ms,
            ready_at: _,
            restarts,
            retry_in_ms,
            retry_at: _,
            error: _,
            last_teardown: _,
            definition: _,
        } = snapshot;
        ServerReport {
            name: name.clone(),
            transport: transport.clone(),
            state: *state,
            generation: *generation,
            pid: *pid,
            connect_ms: parts.connect.map(millis),
            tools: *tools,
            server_info: server_info.clone(),
            protocol_version: protocol_version.clone(),
            uptime_ms: *uptime_ms,
            restarts: *restarts,
            retry_in_ms: *retry_in_ms,
            error: parts.error.as_ref().map(ErrorReport::from),
            teardown: parts.teardown,
            exit_code: code.as_i32(),
            drift: None,
            tools_contract: None,
            auth: None,
            host: None,
        }
    }

    /// A server as its authority last published it (`status`): the error that
    /// put it in its state and its last teardown, and the line's code
    /// (docs/design.md §5): a quarantine is not clean (5, L7); a server that
    /// failed (`failed`, `crash-loop`) is not ok, with the code of the error that
    /// put it there (3 when none is known, e.g. 4 for a connect deadline). Every
    /// other state is ok: `stopped` was asked for, and `starting`, `stopping`
    /// and `backoff` are on their way.
    pub fn of_state(snapshot: &Snapshot) -> ServerReport {
        let code = match snapshot.state {
            Phase::Quarantined => Code::TeardownNotClean,
            Phase::Failed | Phase::CrashLoop => {
                match snapshot.error.as_ref().map(|e| Code::of_error(e.kind)) {
                    Some(Code::ConnectTimeout) => Code::ConnectTimeout,
                    _ => Code::StartFailed,
                }
            }
            _ => Code::Ok,
        };
        let parts = RequestParts {
            connect: None,
            teardown: snapshot.last_teardown.clone(),
            error: snapshot.error.clone(),
        };
        ServerReport::new(snapshot, parts, code)
    }

    /// A server's line in the report of a request for `intent`: the state the
    /// request left it in, with what the request did. A `down` that leaves the
    /// server quarantined did not leave it clean: 5, where a start refused by the
    /// quarantine is 6 (L7).
    pub fn of_reply(
        name: &str,
        reply: Result<Reply, RequestError>,
        intent: Intent,
        strict: bool,
    ) -> ServerReport {
        let reply = match reply {
            Ok(r) => r,
            // Only the authority's answer names the transport; a line without
            // one says `stdio`.
            Err(e) => return ServerReport::unanswered(name, "stdio", &e),
        };
        let (snapshot, parts) = RequestParts::of(reply);
        let mut code = parts.code(strict);
        if intent == Intent::Stop && snapshot.state == Phase::Quarantined {
            code = code.max(Code::TeardownNotClean);
        }
        ServerReport::new(&snapshot, parts, code)
    }

    /// A server whose authority did not answer the request.
    pub fn unanswered(name: &str, transport: &str, e: &RequestError) -> ServerReport {
        let error = unanswered(e);
        let code = Code::of_error(error.kind);
        ServerReport::unpublished(name, transport, Phase::Stopped, Some(error), code)
    }

    /// A server that no authority told about: its name, transport and `state` as
    /// seen elsewhere (`state.json`, the process table), nothing of a generation.
    pub fn unpublished(
        name: &str,
        transport: &str,
        state: Phase,
        error: Option<ServerError>,
        code: Code,
    ) -> ServerReport {
        ServerReport {
            name: name.to_owned(),
            transport: transport.to_owned(),
            state,
            generation: None,
            pid: None,
            connect_ms: None,
            tools: None,
            server_info: None,
            protocol_version: None,
            uptime_ms: None,
            restarts: 0,
            retry_in_ms: None,
            error: error.as_ref().map(ErrorReport::from),
            teardown: None,
            exit_code: code.as_i32(),
            drift: None,
            tools_contract: None,
            auth: None,
            host: None,
        }
    }
}
