//! The MCP session with a server, over its stdin and stdout, through rmcp.
//!
//! The handshake is pinned to the newest protocol version that still has
//! `initialize` (rmcp's default announces one without it). The client declares the
//! `roots` capability and answers `roots/list` with an empty list, so that servers
//! which ask for roots right after the handshake (with request id 0) get a proper
//! answer. This module holds no deadlines of its own: the authority bounds every
//! call.
//!
//! The server's stdout is read through a guard (`StdoutGuard`), which keeps what a
//! server can cost the supervisor bounded whatever it writes: one message (one line)
//! may be at most [`MAX_MESSAGE_BYTES`], and a longer one ends the session with a
//! protocol error that names the limit, instead of being buffered; lines that cannot
//! be JSON-RPC at all (a banner, debug output, binary noise) are dropped before they
//! are parsed, and what is logged about them is bounded (the first one, then a count
//! at most every [`DROPPED_REPORT_EVERY`]), however many there are.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams,
    ProtocolVersion, Tool,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

/// mcpfleet's side of an MCP session. rmcp's default handlers answer `ping` and
/// `roots/list` (with no roots), and refuse sampling and elicitation.
#[derive(Debug, Clone, Default)]
pub struct FleetClient;

impl ClientHandler for FleetClient {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        InitializeRequestParams::new(
            capabilities,
            Implementation::new("mcpfleet", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Why a session could not be set up or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The server closed its output before or during the handshake.
    #[error("the server closed the connection during the handshake: {0}")]
    Closed(String),
    /// The server answered, but not as MCP requires.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A remote server no longer knows the session (it restarted, or ended it).
    #[error("{0}")]
    Lost(String),
    /// A remote server wants credentials, or other ones (HTTP 401 or 403).
    #[error("{0}")]
    Unauthorized(String),
    /// A remote server refused a request or could not be reached; the message
    /// names the HTTP status and the start of the answer's body.
    #[error("{0}")]
    Http(String),
}

impl SessionError {
    /// A remote server's failure as found in rmcp's error, if it is one.
    fn of_http(error: &(dyn std::error::Error + 'static)) -> Option<SessionError> {
        use crate::process::remote::{FailureKind, failure_in};
        let failure = failure_in(error)?;
        let message = failure.message.clone();
        Some(match failure.kind {
            FailureKind::SessionLost => SessionError::Lost(message),
            FailureKind::Unauthorized => SessionError::Unauthorized(message),
            FailureKind::LegacySse => SessionError::Protocol(message),
            FailureKind::Other => SessionError::Http(message),
        })
    }
}

/// An initialized MCP session.
pub struct Session {
    service: RunningService<RoleClient, FleetClient>,
    /// Why the server's stdout was cut off, once a limit has been exceeded.
    violation: Violation,
    /// Cancelled when rmcp lets go of the server's stdout: its service loop has
    /// ended (stdio sessions only).
    ended: CancellationToken,
    /// Fires when a remote server no longer knows the session (HTTP only).
    loss: Option<crate::process::remote::SessionLoss>,
}

impl Session {
    /// Runs the initialize handshake over `output` (the server's stdout) and `input`
    /// (its stdin). Unbounded by itself: the caller wraps it in the connect deadline,
    /// and dropping the future closes stdin. Once the session is over, stdout is
    /// still read (and discarded) until `drain_until` fires or the server closes it.
    pub async fn initialize<R, W>(
        output: R,
        input: W,
        drain_until: CancellationToken,
    ) -> Result<Session, SessionError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        use rmcp::service::ClientInitializeError as E;
        let violation = Violation::default();
        let ended = CancellationToken::new();
        let output = EndSignal {
            inner: Some(output),
            ended: ended.clone(),
            drain_until,
        };
        let output = StdoutGuard::new(output, MAX_MESSAGE_BYTES, violation.clone());
        // rmcp's own line limit sits above ours, so that an oversized line always
        // ends the session here rather than being dropped silently by rmcp.
        let transport = AsyncRwTransport::new_client(output, input)
            .with_max_line_length(MAX_MESSAGE_BYTES.saturating_mul(2));
        let result = FleetClient.serve(transport).await;
        if let Some(why) = violation.get() {
            return Err(SessionError::Protocol(why));
        }
        match result {
            Ok(service) => Ok(Session {
                service,
                violation,
                ended,
                loss: None,
            }),
            Err(e @ (E::ConnectionClosed(_) | E::TransportError { .. })) => {
                Err(SessionError::Closed(e.to_string()))
            }
            Err(e) => Err(SessionError::Protocol(e.to_string())),
        }
    }

    /// Runs the initialize handshake with a remote server over streamable HTTP.
    /// `probe` learns how the DELETE that ends the session goes.
    pub async fn initialize_http(
        remote: &crate::process::remote::Remote,
        probe: crate::process::remote::DeleteProbe,
    ) -> Result<Session, SessionError> {
        use crate::process::remote::{ObservedClient, SessionLoss};
        use rmcp::service::ClientInitializeError as E;
        use rmcp::transport::streamable_http_client::{
            StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
        };
        let mut headers = std::collections::HashMap::new();
        for (name, value) in &remote.headers {
            // Values may be secrets: errors name the header, never its value.
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SessionError::Protocol(format!("invalid header name `{name}`")))?;
            let value = http::HeaderValue::from_str(value).map_err(|_| {
                SessionError::Protocol(format!("invalid value for header `{name}`"))
            })?;
            headers.insert(name, value);
        }
        // A session the server no longer knows ends this generation; the authority
        // and its restart policy decide what comes next, so rmcp must not open a
        // new session behind them.
        let config = StreamableHttpClientTransportConfig::with_uri(remote.url.as_str())
            .custom_headers(headers)
            .reinit_on_expired_session(false);
        let loss = SessionLoss::default();
        let transport = StreamableHttpClientTransport::with_client(
            ObservedClient::new(remote, probe, loss.clone()),
            config,
        );
        let result = FleetClient.serve(transport).await;
        if let Err(E::TransportError { error, .. }) = &result
            && let Some(http) = SessionError::of_http(error.error.as_ref())
        {
            return Err(http);
        }
        match result {
            Ok(service) => Ok(Session {
                service,
                violation: Violation::default(),
                // Over HTTP there is no stream to lose: the session ends when the
                // server no longer knows it (`loss`).
                ended: CancellationToken::new(),
                loss: Some(loss),
            }),
            Err(e @ (E::ConnectionClosed(_) | E::TransportError { .. })) => {
                Err(SessionError::Closed(e.to_string()))
            }
            Err(e) => Err(SessionError::Protocol(e.to_string())),
        }
    }

    /// The server's name and version as it announced them.
    pub fn server_info(&self) -> Option<String> {
        let info = self.service.peer().peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// All tools, following pagination.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        let listed = self.service.peer().list_all_tools().await;
        listed.map_err(|e| match self.violation.get() {
            Some(why) => SessionError::Protocol(why),
            None => request_error(e),
        })
    }

    /// Resolves once the session has ended on its own. Over stdio: the server
    /// closed its stdout, or it was cut off for exceeding a limit (rmcp's service
    /// loop drops the transport when it ends, and with it the reader that signals
    /// this). Over HTTP: the server no longer knows the session.
    pub async fn ended(&self) {
        match &self.loss {
            Some(loss) => loss.lost().await,
            None => self.ended.cancelled().await,
        }
    }

    /// How a remote server showed that it no longer knows the session (`HTTP 404`,
    /// or what it answered), once it has.
    pub fn lost(&self) -> Option<String> {
        self.loss.as_ref().and_then(|l| l.how())
    }

    /// Why the session was cut off by a limit on what the server writes, if it was.
    pub fn violation(&self) -> Option<String> {
        self.violation.get()
    }

    /// Ends the session: stops the service loop, which drops the transport and so
    /// closes the server's stdin (or, over HTTP, sends the DELETE that ends the
    /// session). Bounded by `limit`; past it the session is dropped, which cancels
    /// it all the same. True when it ended within the limit.
    pub async fn close(mut self, limit: Duration) -> bool {
        matches!(self.service.close_with_timeout(limit).await, Ok(Some(_)))
    }

    /// A handle for requests made outside the authority (`tools`, `call`): they
    /// fail at once when the session is closed, so a torn-down server never leaves
    /// a caller hanging.
    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }
}

/// An MCP `ping`; unbounded by itself (the caller adds the health timeout).
pub async fn ping(peer: &Peer<RoleClient>) -> Result<(), SessionError> {
    use rmcp::model::{ClientRequest, PingRequest, ServerResult};
    match peer
        .send_request(ClientRequest::PingRequest(PingRequest::default()))
        .await
    {
        Ok(ServerResult::EmptyResult(_)) => Ok(()),
        Ok(_) => Ok(()),
        Err(e) => Err(request_error(e)),
    }
}

/// All tools of the server behind `peer`.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, SessionError> {
    peer.list_all_tools().await.map_err(request_error)
}

/// Calls `tool` with `arguments` (a JSON object) and returns the result as JSON.
pub async fn call_tool(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<serde_json::Value, SessionError> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(args) = arguments {
        params = params.with_arguments(args);
    }
    let result = peer.call_tool(params).await.map_err(request_error)?;
    serde_json::to_value(result).map_err(|e| SessionError::Protocol(e.to_string()))
}

fn request_error(e: ServiceError) -> SessionError {
    if let ServiceError::TransportSend(sent) = &e
        && let Some(http) = SessionError::of_http(sent.error.as_ref())
    {
        return http;
    }
    match e {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            SessionError::Closed(e.to_string())
        }
        other => SessionError::Protocol(other.to_string()),
    }
}

/// The largest message (one line of the server's stdout, its newline included) the
/// supervisor accepts: the same as rmcp's default for stdio and its limit of one
/// event over streamable HTTP, so that what is accepted over one transport is
/// accepted over the other. A longer line ends the session.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How often, at most, the count of dropped non-JSON lines is logged.
pub const DROPPED_REPORT_EVERY: Duration = Duration::from_secs(10);

/// How much of a dropped line is shown in the log.
const PREVIEW_BYTES: usize = 120;

/// The reason a server's stdout was cut off, shared between the reader that found
/// it and the session that reports it.
#[derive(Clone, Default)]
struct Violation(Arc<Mutex<Option<String>>>);

impl Violation {
    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, why: &str) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| why.to_owned());
    }
}

/// Where the reader is within the current line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
    /// Nothing but whitespace yet: the first other byte decides.
    Start,
    /// A line that may be JSON-RPC: passed on.
    Pass,
    /// A line that cannot be JSON-RPC: dropped.
    Drop,
}

/// The server's stdout as rmcp reads it, with the limits of the module comment
/// applied. Bytes are filtered in place in the caller's buffer, so the guard holds
/// no buffer of its own: its memory is a few counters and one short preview.
struct StdoutGuard<R> {
    inner: R,
    max_line: usize,
    violation: Violation,
    /// Set once the limit was exceeded: every later read fails the same way.
    failed: Option<String>,
    state: LineState,
    /// Bytes of the current line so far, leading whitespace included.
    line_len: usize,
    dropped: DroppedLines,
}

/// Non-JSON lines seen on a server's stdout, and when they were last reported.
#[derive(Default)]
struct DroppedLines {
    /// The beginning of the line being dropped, for the log.
    preview: Vec<u8>,
    /// Lines and bytes dropped since the last report.
    lines: u64,
    bytes: u64,
    total_lines: u64,
    last_report: Option<Instant>,
}

impl DroppedLines {
    fn start_line(&mut self) {
        self.preview.clear();
    }

    fn add(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        let room = PREVIEW_BYTES.saturating_sub(self.preview.len());
        self.preview
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// A dropped line has ended: log the first one of a session, and after that a
    /// count at most every `DROPPED_REPORT_EVERY`.
    fn end_line(&mut self) {
        self.lines += 1;
        self.total_lines += 1;
        let now = Instant::now();
        match self.last_report {
            None => {
                // Escaped: the server's bytes must not reach a terminal as they are.
                let preview = String::from_utf8_lossy(&self.preview);
                tracing::warn!(
                    line = %preview.trim_end().escape_debug(),
                    "a server wrote a line that is not JSON-RPC to stdout; it was dropped \
                     (stdout is for MCP messages only; further ones are counted)"
                );
                self.lines = 0;
                self.bytes = 0;
                self.last_report = Some(now);
            }
            Some(at) if now.duration_since(at) >= DROPPED_REPORT_EVERY => self.report(now),
            Some(_) => {}
        }
    }

    fn report(&mut self, now: Instant) {
        if self.lines > 0 {
            tracing::warn!(
                lines = self.lines,
                bytes = self.bytes,
                total_lines = self.total_lines,
                "a server keeps writing lines that are not JSON-RPC to stdout; they were dropped"
            );
        }
        self.lines = 0;
        self.bytes = 0;
        self.last_report = Some(now);
    }
}

/// The server's stdout as handed to rmcp: says when rmcp drops it, which it does
/// when its service loop ends for whatever reason, and then keeps reading it.
///
/// The session ends before the server does: closing the session closes the
/// server's stdin, and a server that writes while it shuts down (a last log line,
/// an answer in flight) must not die of a broken pipe. So what rmcp lets go of is
/// read on and discarded until the server's side is closed or `drain_until` fires
/// (the authority fires it once teardown has ended the server's processes).
struct EndSignal<R: AsyncRead + Send + Unpin + 'static> {
    inner: Option<R>,
    ended: CancellationToken,
    drain_until: CancellationToken,
}

impl<R: AsyncRead + Send + Unpin + 'static> Drop for EndSignal<R> {
    fn drop(&mut self) {
        self.ended.cancel();
        if let (Some(inner), Ok(runtime)) =
            (self.inner.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(drain_rest(inner, self.drain_until.clone()));
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> AsyncRead for EndSignal<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut().inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

/// Reads and discards the rest of a server's stdout (see [`EndSignal`]).
async fn drain_rest<R: AsyncRead + Unpin>(mut stdout: R, until: CancellationToken) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 8192];
    let mut discarded = 0u64;
    loop {
        tokio::select! {
            _ = until.cancelled() => break,
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n as u64,
            },
        }
    }
    if discarded > 0 {
        tracing::info!(
            bytes = discarded,
            "discarded what a server wrote to stdout after its session was closed"
        );
    }
}

impl<R> Drop for StdoutGuard<R> {
    fn drop(&mut self) {
        // What was counted since the last report is not lost with the session.
        self.dropped.report(Instant::now());
    }
}

impl<R> StdoutGuard<R> {
    fn new(inner: R, max_line: usize, violation: Violation) -> StdoutGuard<R> {
        StdoutGuard {
            inner,
            max_line,
            violation,
            failed: None,
            state: LineState::Start,
            line_len: 0,
            dropped: DroppedLines::default(),
        }
    }

    fn too_long(&mut self) -> io::Error {
        let why = format!(
            "message too large: the server wrote more than {} MiB ({} bytes) to stdout \
             without ending the line, beyond the limit of one MCP message; the session was ended",
            self.max_line / (1024 * 1024),
            self.max_line
        );
        tracing::warn!("{why}");
        self.violation.set(&why);
        self.failed = Some(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }

    /// Filters `bytes` in place: the bytes to pass on are moved to the front, and
    /// their count is returned. Fails when a line grows beyond the limit.
    fn filter(&mut self, bytes: &mut [u8]) -> io::Result<usize> {
        let mut kept = 0;
        let mut i = 0;
        while i < bytes.len() {
            if self.state == LineState::Start {
                let b = bytes[i];
                i += 1;
                self.line_len += 1;
                match b {
                    b'\n' => self.line_len = 0,
                    b' ' | b'\t' | b'\r' => {}
                    // An object or a batch, or the byte order mark that rmcp skips.
                    b'{' | b'[' | 0xEF => {
                        self.state = LineState::Pass;
                        bytes[kept] = b;
                        kept += 1;
                    }
                    _ => {
                        self.state = LineState::Drop;
                        self.dropped.start_line();
                        self.dropped.add(&[b]);
                    }
                }
                if self.line_len > self.max_line {
                    return Err(self.too_long());
                }
                continue;
            }
            // The rest of the line, up to and including its newline, in one step.
            let rest = &bytes[i..];
            let (take, ends) = match rest.iter().position(|b| *b == b'\n') {
                Some(nl) => (nl + 1, true),
                None => (rest.len(), false),
            };
            self.line_len += take;
            if self.line_len > self.max_line {
                return Err(self.too_long());
            }
            match self.state {
                LineState::Pass => {
                    if kept != i {
                        bytes.copy_within(i..i + take, kept);
                    }
                    kept += take;
                }
                _ => {
                    let (start, end) = (i, i + take - usize::from(ends));
                    self.dropped.add(&bytes[start..end]);
                }
            }
            i += take;
            if ends {
                if self.state == LineState::Drop {
                    self.dropped.end_line();
                }
                self.state = LineState::Start;
                self.line_len = 0;
            }
        }
        Ok(kept)
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for StdoutGuard<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(why) = &this.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())));
        }
        loop {
            let start = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let end = buf.filled().len();
            if end == start {
                // The end of the stream.
                return Poll::Ready(Ok(()));
            }
            let kept = match this.filter(&mut buf.filled_mut()[start..end]) {
                Ok(kept) => kept,
                Err(e) => {
                    // A read that fails hands over nothing.
                    buf.set_filled(start);
                    return Poll::Ready(Err(e));
                }
            };
            buf.set_filled(start + kept);
            if kept > 0 {
                return Poll::Ready(Ok(()));
            }
            // Everything read was dropped: read again rather than report an empty
            // read, which would mean the end of the stream. The inner reader spends
            // tokio's cooperative budget, so a flood still yields to other tasks.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Runs `chunks` through a guard as successive reads; what passes, or the error.
    fn feed(max: usize, chunks: &[&[u8]]) -> (Result<Vec<u8>, String>, StdoutGuard<&'static [u8]>) {
        let mut guard = StdoutGuard::new(&b""[..], max, Violation::default());
        let mut out = Vec::new();
        for chunk in chunks {
            let mut bytes = chunk.to_vec();
            match guard.filter(&mut bytes) {
                Ok(kept) => out.extend_from_slice(&bytes[..kept]),
                Err(e) => return (Err(e.to_string()), guard),
            }
        }
        (Ok(out), guard)
    }

    #[test]
    fn json_lines_pass_unchanged_and_other_lines_are_dropped() {
        let (out, guard) = feed(
            1024,
            &[
                b"Server started on stdio\n{\"a\":1}\n",
                b"  \n\r\n[1,2]\r\nnot json {\"b\"",
                b":2}\n  {\"c\":",
                b"3}\n\xef\xbb\xbf{\"d\":4}\n",
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&out.unwrap()),
            "{\"a\":1}\n[1,2]\r\n{\"c\":3}\n\u{feff}{\"d\":4}\n"
        );
        assert_eq!(guard.dropped.total_lines, 2);
        assert!(guard.violation.get().is_none());
    }

    #[test]
    fn a_line_beyond_the_limit_ends_the_stream_with_an_error_naming_it() {
        let max = 2 * 1024 * 1024;
        let line = vec![b'x'; max];
        // Exactly at the limit, its newline included: accepted.
        let mut ok = b"{".to_vec();
        ok.extend_from_slice(&line[..max - 2]);
        ok.push(b'\n');
        let (out, _) = feed(max, &[&ok]);
        assert_eq!(out.unwrap().len(), max);
        // One byte more, in pieces and without a newline: refused, as is a
        // non-JSON line of that size.
        let mut big = b"{".to_vec();
        big.extend_from_slice(&line);
        let mut noise = line.clone();
        noise.push(b'x');
        for body in [big, noise] {
            let (first, second) = body.split_at(max / 2);
            let (out, guard) = feed(max, &[first, second]);
            let e = out.unwrap_err();
            assert!(
                e.contains("2 MiB") && e.contains("message too large"),
                "{e}"
            );
            assert_eq!(guard.violation.get().as_deref(), Some(e.as_str()));
        }
    }

    #[tokio::test]
    async fn reads_skip_dropped_lines_and_stop_for_good_at_the_limit() {
        // Two reads: the first passes a line, the second brings one beyond the limit.
        let first: &'static [u8] = b"noise\nnoise\n{\"ok\":true}\n";
        let data = first.chain(&b"{\"too\":\"long line\"}\n"[..]);
        let violation = Violation::default();
        let mut guard = StdoutGuard::new(data, 16, violation.clone());
        let mut out = Vec::new();
        let e = guard.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(out, b"{\"ok\":true}\n");
        assert!(violation.get().is_some());
        let mut buf = [0u8; 8];
        assert!(guard.read(&mut buf).await.is_err(), "it stays failed");

        let mut guard = StdoutGuard::new(&b"only noise\n\n"[..], 16, Violation::default());
        let mut out = Vec::new();
        assert_eq!(guard.read_to_end(&mut out).await.unwrap(), 0);
        assert_eq!(guard.dropped.total_lines, 1);
    }
}
