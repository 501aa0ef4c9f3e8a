//! Why a session could not be set up or used.


use rmcp::service::ServiceError;

use crate::errors::Detail;

/// Why a session could not be set up or used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// The server closed its output before or during the handshake.
    #[error("the server closed the connection during the handshake")]
    Closed(#[source] Detail),
    /// The server answered, but not as MCP requires.
    #[error("protocol error")]
    Protocol(#[source] Detail),
    /// A remote server no longer knows the session (it restarted, or ended it).
    #[error("{0}")]
    Lost(String),
    /// A remote server wants credentials, or other ones (HTTP 401 or 403).
    #[error("{0}")]
    Unauthorized(String),
    /// No usable token for a server with `auth:`; the message names the command
    /// to run.
    #[error("{0}")]
    AuthRequired(String),
    /// A remote server refused a request or could not be reached; the message
    /// names the HTTP status and the start of the answer's body.
    #[error("{0}")]
    Http(String),
}

impl SessionError {
    /// A remote server's failure as found in rmcp's error, if it is one.
    pub(super) fn of_http(error: &(dyn std::error::Error + 'static)) -> Option<SessionError> {
        use crate::process::remote::{FailureKind, failure_in};
        let failure = failure_in(error)?;
        let message = failure.message.clone();
        Some(match failure.kind {
            FailureKind::SessionLost => SessionError::Lost(message),
            FailureKind::Unauthorized => SessionError::Unauthorized(message),
            FailureKind::AuthRequired => SessionError::AuthRequired(message),
            FailureKind::LegacySse => SessionError::Protocol(Detail::words(message)),
            FailureKind::Other => SessionError::Http(message),
        })
    }
}


/// A failed request to the server, as a session error.
pub(crate) fn request_error(e: ServiceError) -> SessionError {
    if let ServiceError::TransportSend(sent) = &e
        && let Some(http) = SessionError::of_http(sent.error.as_ref())
    {
        return http;
    }
    match e {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            SessionError::Closed(Detail::cause(e))
        }
        other => SessionError::Protocol(Detail::cause(other)),
    }
}
