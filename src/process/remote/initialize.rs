//! The POST of `initialize` to a remote server, made here rather than by rmcp's
//! client, so that the answer is read as the server wrote it before it is typed:
//! rmcp's capabilities drop the `tasks` of protocol 2025-11-25, which the gateway
//! declares to its legacy clients (docs/design.md §14, "Tasks"). The answer is
//! kept in the session's [`Seen`] and handed to rmcp as its own client would
//! (one JSON body, or an event stream whose events are read as they pass); a
//! refusal becomes the error rmcp's client would make of it (a JSON-RPC error,
//! a demand for authorization, the status and the start of the body), which
//! [`ObservedClient`]'s judgement then words as for any other POST.

use std::sync::Arc;

use futures::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::StatusCode;
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use super::{Error, Headers, ObservedClient, Seen};

impl ObservedClient {
    /// Sends `initialize` (`message`) and reads its answer into `seen` (see the
    /// module comment).
    #[expect(clippy::too_many_arguments, reason = "the arguments of the POST rmcp asks for, passed on")]
    pub(super) async fn post_initialize(
        &self,
        seen: &Seen,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_vec(&message).map_err(|e| {
            StreamableHttpError::UnexpectedServerResponse(format!("initialize could not be written: {e}").into())
        })?;
        let mut request = self
            .inner
            .post(uri.as_ref())
            .header(ACCEPT, "text/event-stream, application/json")
            .header(CONTENT_TYPE, "application/json");
        if let Some(token) = &auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in &custom_headers {
            // The headers rmcp's client sets itself are refused, as it does.
            if ["accept", "mcp-session-id", "last-event-id"].contains(&name.as_str()) {
                return Err(StreamableHttpError::ReservedHeaderConflict(name.to_string()));
            }
            request = request.header(name, value);
        }
        if let Some(session) = &session_id {
            request = request.header("Mcp-Session-Id", session.as_ref());
        }
        let mut response = request.body(body).send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type");
        let session = header("mcp-session-id");
        let challenge = header("www-authenticate");
        let retry_after = header("retry-after");
        let media = content_type
            .as_deref()
            .map(|ct| ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
        let json = media.as_deref() == Some("application/json");
        match (status.as_u16(), challenge) {
            (401, Some(challenge)) => {
                return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge)));
            }
            (403, Some(challenge)) => {
                return Err(StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    challenge, None,
                )));
            }
            (202 | 204, _) => return Ok(StreamableHttpPostResponse::Accepted),
            _ => {}
        }
        let failed = (status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error())
            .then(|| HttpStatusError::new(status.as_u16(), retry_after));
        if let Some(failed) = &failed
            && (!json || status == StatusCode::TOO_MANY_REQUESTS)
        {
            return Err(StreamableHttpError::HttpStatus(HttpStatusError::new(
                failed.status,
                failed.retry_after.clone(),
            )));
        }
        if status.is_success() && media.as_deref() == Some("text/event-stream") {
            let seen = seen.clone();
            let mut event = EventBound::new(limits.max_sse_event_size);
            let bytes = response.bytes_stream().map(move |chunk| {
                let chunk = chunk.map_err(std::io::Error::other)?;
                event.pass(&chunk)?;
                Ok::<_, std::io::Error>(chunk)
            });
            let events = SseStream::from_bytes_stream(bytes)
                .inspect(move |event| {
                    if let Ok(Sse { data: Some(data), .. }) = event {
                        seen.answered(data.as_bytes());
                    }
                })
                .boxed();
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        if status.is_success() && !json {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        // A JSON body (the answer, or a refusal's JSON-RPC error), read whole
        // within rmcp's bound; any other refusal's, the start of it.
        let whole = json && !matches!(status.as_u16(), 401 | 403);
        let bound = match whole {
            true => limits.max_json_response_size,
            false => limits.max_error_response_size,
        };
        let mut read = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(StreamableHttpError::Client)? {
            read.extend_from_slice(&chunk);
            if read.len() > bound {
                if json && status.is_success() {
                    return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: bound });
                }
                read.truncate(bound);
                break;
            }
        }
        if status.is_success() {
            seen.answered(&read);
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&read) {
                Ok(answer) => Ok(StreamableHttpPostResponse::Json(answer, session)),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(
                    format!("the answer to initialize is not a JSON-RPC message: {e}").into(),
                )),
            };
        }
        if whole
            && let Ok(refused @ JsonRpcMessage::Error(_)) = serde_json::from_slice::<ServerJsonRpcMessage>(&read)
        {
            return Ok(StreamableHttpPostResponse::Json(refused, session));
        }
        if let Some(failed) = failed {
            return Err(StreamableHttpError::HttpStatus(failed));
        }
        let body = String::from_utf8_lossy(&read);
        Err(StreamableHttpError::UnexpectedServerResponse(
            format!("HTTP {status}: {body}").into(),
        ))
    }
}

/// The bound on one event of the answer's event stream, as rmcp's client has:
/// the bytes since the last blank line (an event's end) are counted, line
/// ends aside.
struct EventBound {
    max: usize,
    since: usize,
    line_start: bool,
    after_cr: bool,
}

impl EventBound {
    fn new(max: usize) -> EventBound {
        EventBound {
            max,
            since: 0,
            line_start: true,
            after_cr: false,
        }
    }

    /// Counts `chunk`; an error once an event outgrows the bound.
    fn pass(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        for &byte in chunk {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    if self.line_start {
                        self.since = 0;
                    }
                    self.line_start = true;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    self.line_start = false;
                    self.after_cr = false;
                    self.since += 1;
                    if self.since > self.max {
                        return Err(std::io::Error::other(format!(
                            "an event of the answer to initialize exceeds {} bytes",
                            self.max
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::EventBound;

    #[test]
    fn an_event_is_bounded_and_its_end_resets_the_count() {
        let mut bound = EventBound::new(8);
        assert!(bound.pass(b"data: ab\r\n\r\ndata: cd\n").is_ok());
        assert!(bound.pass(b"\ndata: ef\n\n").is_ok());
        assert!(bound.pass(b"data: abcdefgh").is_err());
    }
}
