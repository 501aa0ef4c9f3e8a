//! The MCP session with a server, over its stdin and stdout, through rmcp.
//!
//! Before the session, a probe finds the server's era (`era.rs`): a modern server
//! gets rmcp's `server/discover` lifecycle at the version it named, a legacy one
//! the `initialize` handshake, pinned to the newest protocol version that still has
//! `initialize` (rmcp's default announces one without it). rmcp's response cache
//! is off: a list asked for reaches the server. The client declares the
//! `roots` capability (with `listChanged` for the gateway, which relays its
//! clients' `notifications/roots/list_changed`) and answers `roots/list` with an
//! empty list when nobody else does, so that servers
//! which ask for roots right after the handshake (with request id 0) get a proper
//! answer. This module holds no deadlines of its own: the authority bounds every
//! call.
//!
//! Roots and sampling are deprecated by the 2026 protocol (rmcp marks their types
//! so); the versions spoken here (docs/design.md §11) still have them.
//!
//! The server's stdout is read through a guard that bounds what a server can cost
//! the supervisor, and is read on after the session ends (`stdout.rs`).
//!
//! Its parts: what the client declares and how it answers and tells the
//! server's requests and notices (`client.rs`), why a session fails
//! (`error.rs`), and the probe over a stdio server's pipes before rmcp reads
//! them (`probe.rs`).


use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ProtocolVersion, Tool,
};
use rmcp::service::{
    Peer, RoleClient, RunningService,
};
use rmcp::service::{ClientCacheConfig, ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::ClientHandler;

use crate::errors::Detail;
use crate::process::notice::{Listener, WrittenAsks};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

mod client;
mod era;
mod error;
mod link;
mod probe;
mod stdout;
pub(crate) mod wire;

pub(crate) use client::FleetClient;
pub(crate) use error::SessionError;
use error::request_error;
use probe::{CloseOnDrop, Lent, probe_stdio};

pub(crate) use era::Era;
pub(crate) use era::probe_bound;
pub(crate) use link::{Answer, Link, Pending, Waiter, push_json_string};
pub(crate) use stdout::MAX_MESSAGE_BYTES;
use stdout::{EndSignal, StdoutGuard, Violation};


/// An initialized MCP session.
pub(crate) struct Session {
    service: RunningService<RoleClient, FleetClient>,
    /// Why the server's stdout was cut off, once a limit has been exceeded.
    violation: Violation,
    /// Cancelled when rmcp lets go of the server's stdout: its service loop has
    /// ended (stdio sessions only).
    ended: CancellationToken,
    /// Fires when a remote server no longer knows the session (HTTP only).
    loss: Option<crate::process::remote::SessionLoss>,
    /// Requests beside rmcp's, as bytes (stdio only).
    link: Option<Link>,
    /// Requests beside rmcp's, each a POST of its own (HTTP only).
    sideband: Option<crate::process::remote::Sideband>,
    /// Over stdio in the modern era: the `_meta` each request carries.
    meta: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    /// The era the probe found.
    era: Era,
}

impl Session {
    /// Probes the server's era (waiting at most `probe` for its answer), then sets
    /// the session up in that era over `output` (the server's stdout) and `input`
    /// (its stdin). Unbounded by itself: the caller wraps it in the connect deadline,
    /// and dropping the future closes stdin. Once the session is over, stdout is
    /// still read (and discarded) until `drain_until` fires or the server closes it.
    pub(crate) async fn initialize<R>(
        output: R,
        input: tokio::process::ChildStdin,
        drain_until: CancellationToken,
        listener: Option<Arc<dyn Listener>>,
        tracker: tokio_util::task::TaskTracker,
        probe: Duration,
    ) -> Result<Session, SessionError>
    where
        R: AsyncRead + Send + Unpin + 'static,
    {
        use rmcp::service::ClientInitializeError as E;
        let violation = Violation::default();
        let ended = CancellationToken::new();
        let output = EndSignal::new(output, ended.clone(), drain_until);
        let output = StdoutGuard::new(output, MAX_MESSAGE_BYTES, violation.clone());
        // The outbox writes without waiting: the pipe as tokio's `pipe::Sender`,
        // which writes now or says it would block.
        let input = input
            .into_owned_fd()
            .and_then(tokio::net::unix::pipe::Sender::from_owned_fd)
            .map_err(|e| SessionError::Closed(Detail::because("the server's stdin", e)))?;
        // rmcp writes into the same outbox as the link, and reads what the link's
        // hook leaves of the server's stdout (`wire.rs`).
        let (link, answers) = Link::new(wire::Outbox::spawn(input, &tracker));
        // Until the session is set up, giving up (this future dropped, or a
        // failed start) closes the server's stdin.
        let mut given_up = CloseOnDrop(Some(link.clone()));
        // The server's requests and progress as it wrote them go to the
        // listener from the hook, beside rmcp.
        let asks = WrittenAsks::default();
        let answers = match &listener {
            Some(listener) => answers.hearing(listener.clone(), asks.clone()),
            None => answers,
        };
        let mut output = wire::Intercepted::new(output, MAX_MESSAGE_BYTES, Box::new(answers));
        let client = FleetClient {
            told: listener.is_some(),
            listener,
            asks: Some(asks),
        };
        let info = client.get_info();
        let probe = probe_stdio(&link, &mut output, &info, probe, &violation).await?;
        let mut era = probe.era.clone();
        // What the server wrote before the probe's answer goes to rmcp first. The
        // stream is lent to rmcp, so that an `initialize` refused by a server
        // that answered the probe late can be followed by a modern start.
        let output = Lent::new(std::io::Cursor::new(probe.before).chain(output));
        // rmcp's own line limit sits above ours, so that an oversized line always
        // ends the session here rather than being dropped silently by rmcp.
        let transport = |writer| {
            AsyncRwTransport::new_client(output.clone(), writer)
                .with_max_line_length(MAX_MESSAGE_BYTES.saturating_mul(2))
        };
        let (writer, closes) = link.writer_held();
        let mut result = client
            .clone()
            .serve_with_lifecycle(transport(writer), lifecycle(&era))
            .await;
        if let (Err(E::JsonRpcError(refused)), Some(late)) = (&result, probe.late) {
            // A silent probe, then a refused `initialize`: a server slower to start
            // than the probe's bound may have answered the probe since, or named
            // its modern versions in the refusal. Then it is modern after all.
            let late = match late.arrived() {
                Some(reply) => era::classify(&reply),
                None => Era::Legacy,
            };
            let refusal = serde_json::to_string(refused)
                .map(|e| era::classify(&era::Reply::Error(e)))
                .unwrap_or(Era::Legacy);
            if let Some(modern) = [late, refusal].into_iter().find(|e| *e != Era::Legacy) {
                tracing::debug!(era = %modern.label(), "initialize refused after a late probe answer: starting in the modern era");
                era = modern;
                let (writer, again) = link.writer_held();
                closes.store(true, std::sync::atomic::Ordering::Release);
                result = client
                    .clone()
                    .serve_with_lifecycle(transport(writer), lifecycle(&era))
                    .await;
                again.store(true, std::sync::atomic::Ordering::Release);
            }
        }
        link.forget(probe.id);
        // From here on, rmcp closing its session closes the server's stdin; a
        // failed start closes it now.
        closes.store(true, std::sync::atomic::Ordering::Release);
        if result.is_ok() {
            given_up.0 = None;
        }
        drop(given_up);
        drop(output);
        if let Some(why) = violation.get() {
            return Err(SessionError::Protocol(Detail::words(why)));
        }
        match result {
            Ok(service) => {
                // The link's requests to a modern server carry what rmcp's would.
                let meta = match &era {
                    Era::Modern(version) => Some(Arc::new(era::request_meta(&info, version))),
                    Era::Legacy => None,
                };
                let mut session = Session::new(service, violation, ended, None, Some(link), era).await;
                session.meta = meta;
                Ok(session)
            }
            Err(e @ (E::ConnectionClosed(_) | E::TransportError { .. })) => {
                Err(SessionError::Closed(Detail::cause(e)))
            }
            Err(e) => Err(SessionError::Protocol(Detail::cause(e))),
        }
    }

    /// Probes a remote server's era over streamable HTTP (one POST, waiting at most
    /// `bound` for its answer), then sets the session up in that era. `probe`
    /// learns how the DELETE that ends a legacy session goes.
    pub(crate) async fn initialize_http(
        remote: &crate::process::remote::Remote,
        probe: crate::process::remote::DeleteProbe,
        listener: Option<Arc<dyn Listener>>,
        bound: Duration,
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
                .map_err(|_| SessionError::Protocol(Detail::words(format!("invalid header name `{name}`"))))?;
            let value = http::HeaderValue::from_str(value).map_err(|_| {
                SessionError::Protocol(Detail::words(format!("invalid value for header `{name}`")))
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
        let asks = listener.clone().map(WrittenAsks::telling);
        let seen = crate::process::remote::Seen::default();
        let transport = || {
            StreamableHttpClientTransport::with_client(
                ObservedClient::new(remote, probe.clone(), loss.clone())
                    .hearing(asks.clone())
                    .seeing(seen.clone()),
                config.clone(),
            )
        };
        let client = FleetClient {
            told: listener.is_some(),
            listener,
            asks: asks.clone(),
        };
        let info = client.get_info();
        let params = era::discover_params(&info);
        // The probe carries the bearer token too, when the keeper has one; a
        // keeper that has none is the session's to report (the probe then
        // goes without, and the handshake says why).
        let mut headers = remote.headers.clone();
        if let Some(keeper) = &remote.keeper
            && let Ok(token) = keeper.bearer().await
        {
            headers.push(("Authorization".into(), format!("Bearer {token}")));
        }
        let reply = match crate::process::remote::discover(&remote.client(), &remote.url, &headers, &params, bound).await {
            Some(crate::process::remote::Discovered::Result(r)) => era::Reply::Result(r),
            Some(crate::process::remote::Discovered::Error(e)) => era::Reply::Error(e),
            None => era::Reply::Nothing,
        };
        let mut era = era::classify(&reply);
        // What a server answered may echo the bearer token the probe sent.
        let said = match &remote.keeper {
            Some(keeper) => crate::process::redact::redact(&format!("{reply:?}"), &keeper.secrets()),
            None => format!("{reply:?}"),
        };
        tracing::debug!(era = %era.label(), reply = %said, "era probe over HTTP");
        let mut result = client
            .clone()
            .serve_with_lifecycle(transport(), lifecycle(&era))
            .await;
        // A server that refuses `initialize` naming a modern version (one slower
        // than the probe's bound, say) is modern after all: each POST stands on
        // its own, so the modern start is made afresh.
        if let (Era::Legacy, Err(E::JsonRpcError(refused))) = (&era, &result)
            && let Ok(refusal) = serde_json::to_string(refused)
            && let modern @ Era::Modern(_) = era::classify(&era::Reply::Error(refusal))
        {
            tracing::debug!(era = %modern.label(), "initialize refused naming a modern version: starting in the modern era");
            era = modern;
            result = client
                .serve_with_lifecycle(transport(), lifecycle(&era))
                .await;
        }
        if let Err(E::TransportError { error, .. }) = &result
            && let Some(http) = SessionError::of_http(error.error.as_ref())
        {
            return Err(http);
        }
        match result {
            // Over HTTP there is no stream to lose: the session ends when the
            // server no longer knows it (`loss`).
            Ok(service) => {
                // Requests beside rmcp's carry what rmcp's would: to a modern
                // server, the `_meta` of the probe, naming the era's version.
                let modern = match &era {
                    Era::Modern(version) => Some(era::request_meta(&info, version)),
                    Era::Legacy => None,
                };
                let mut session = Session::new(
                    service,
                    Violation::default(),
                    CancellationToken::new(),
                    Some(loss),
                    None,
                    era,
                )
                .await;
                let side = crate::process::remote::Sideband::new(remote.client(), &remote.url, seen, modern)
                    .with_keeper(remote.keeper.clone());
                // A session the server no longer knows ends its side requests.
                if let Some(loss) = session.loss.clone() {
                    let side = side.clone();
                    tokio::spawn(async move {
                        tokio::select! {
                            () = loss.lost() => side.end(),
                            () = side.ended() => {}
                        }
                    });
                }
                session.sideband = Some(side);
                Ok(session)
            }
            Err(e @ (E::ConnectionClosed(_) | E::TransportError { .. })) => {
                Err(SessionError::Closed(Detail::cause(e)))
            }
            Err(e) => Err(SessionError::Protocol(Detail::cause(e))),
        }
    }

    /// A session set up: rmcp's response cache is turned off before anything is
    /// asked, so that every list reaches the server (a `list_changed`, or a new
    /// generation, is followed by a `tools/list` that the server answers).
    async fn new(
        service: RunningService<RoleClient, FleetClient>,
        violation: Violation,
        ended: CancellationToken,
        loss: Option<crate::process::remote::SessionLoss>,
        link: Option<Link>,
        era: Era,
    ) -> Session {
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        Session {
            service,
            violation,
            ended,
            loss,
            link,
            sideband: None,
            meta: None,
            era,
        }
    }

    /// The era the session speaks.
    pub(crate) fn era(&self) -> &Era {
        &self.era
    }

    /// The protocol version the session speaks: the one `initialize` agreed on,
    /// or the one `server/discover` named.
    pub(crate) fn protocol_version(&self) -> String {
        match (&self.era, self.service.peer().peer_info()) {
            (_, Some(info)) => info.protocol_version.as_str().to_owned(),
            (Era::Modern(version), None) => version.as_str().to_owned(),
            (Era::Legacy, None) => ProtocolVersion::LATEST_WITH_INITIALIZE.as_str().to_owned(),
        }
    }

    /// The server's name and version as it announced them.
    pub(crate) fn server_info(&self) -> Option<String> {
        let info = self.service.peer().peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// All tools, following pagination.
    pub(crate) async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        let listed = self.service.peer().list_all_tools().await;
        listed.map_err(|e| match self.violation.get() {
            Some(why) => SessionError::Protocol(Detail::words(why)),
            None => request_error(e),
        })
    }

    /// Resolves once the session has ended on its own. Over stdio: the server
    /// closed its stdout, or it was cut off for exceeding a limit (rmcp's service
    /// loop drops the transport when it ends, and with it the reader that signals
    /// this). Over HTTP: the server no longer knows the session.
    pub(crate) async fn ended(&self) {
        match &self.loss {
            Some(loss) => loss.lost().await,
            None => self.ended.cancelled().await,
        }
    }

    /// How a remote server showed that it no longer knows the session (`HTTP 404`,
    /// or what it answered), once it has.
    pub(crate) fn lost(&self) -> Option<String> {
        self.loss.as_ref().and_then(|l| l.how())
    }

    /// Why the session was cut off by a limit on what the server writes, if it was.
    pub(crate) fn violation(&self) -> Option<String> {
        self.violation.get()
    }

    /// Ends the session: stops the service loop, which drops the transport and so
    /// closes the server's stdin (or, over HTTP, sends the DELETE that ends the
    /// session). Bounded by `limit`; past it the session is dropped, which cancels
    /// it all the same. True when it ended within the limit.
    pub(crate) async fn close(mut self, limit: Duration) -> bool {
        matches!(self.service.close_with_timeout(limit).await, Ok(Some(_)))
    }

    /// A handle for requests made outside the authority (`tools`, `call`): they
    /// fail at once when the session is closed, so a torn-down server never leaves
    /// a caller hanging.
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// How requests made outside the authority reach this session: its peer and,
    /// over stdio in the legacy era, its link. The link's requests are lines as
    /// the gateway's client wrote them, without the per-request `_meta` a modern
    /// server requires: to a modern session the link is given apart, with that
    /// `_meta` ([`Reachable::modern_link`]), for the requests that add it.
    pub(crate) fn reachable(&self) -> Reachable {
        Reachable {
            peer: self.peer(),
            link: match self.era {
                Era::Legacy => self.link.clone(),
                Era::Modern(_) => None,
            },
            sideband: self.sideband.clone(),
            modern: match self.era {
                Era::Modern(_) => self.link.clone().zip(self.meta.clone()),
                Era::Legacy => None,
            },
        }
    }
}

impl Drop for Session {
    /// Side requests end with the session (closed, or dropped).
    fn drop(&mut self) {
        if let Some(side) = &self.sideband {
            side.end();
        }
    }
}

/// How requests made outside the authority reach one session: the MCP peer
/// (`tools`, `call`, the gateway), and, over stdio, the [`Link`] for requests
/// beside rmcp's, as bytes (the gateway's pass-through calls). Requests through
/// it fail at once once the session is closed.
#[derive(Clone)]
pub struct Reachable {
    peer: Peer<RoleClient>,
    link: Option<Link>,
    sideband: Option<crate::process::remote::Sideband>,
    modern: Option<(Link, Arc<serde_json::Map<String, serde_json::Value>>)>,
}

impl Reachable {
    /// The session's MCP peer.
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// The session's MCP peer, taken out.
    pub fn into_peer(self) -> Peer<RoleClient> {
        self.peer
    }

    /// Where requests beside rmcp's go, as bytes: stdio sessions only.
    pub fn link(&self) -> Option<&Link> {
        self.link.as_ref()
    }

    /// Where requests beside rmcp's go, each a POST of its own: remote
    /// sessions only.
    pub(crate) fn sideband(&self) -> Option<&crate::process::remote::Sideband> {
        self.sideband.as_ref()
    }

    /// Over stdio in the 2026-07-28 era: the link, and the `_meta` each of its
    /// requests must carry (rmcp adds it to its own).
    pub(crate) fn modern_link(
        &self,
    ) -> Option<(&Link, &Arc<serde_json::Map<String, serde_json::Value>>)> {
        self.modern.as_ref().map(|(link, meta)| (link, meta))
    }

    /// The `tasks` capability of protocol 2025-11-25 the server declared in
    /// its answer to `initialize`, as it wrote it (over stdio or HTTP).
    pub fn tasks_capability(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        match (&self.link, &self.sideband) {
            (Some(link), _) => link.tasks_capability(),
            (None, Some(side)) => side.tasks_capability(),
            (None, None) => None,
        }
    }
}

/// A tool as its server listed it: its name and the schemas of what it takes and
/// gives, without the words meant for people (description, title, annotations).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub input_schema: Arc<serde_json::Map<String, serde_json::Value>>,
    /// Only when the server declares one.
    pub output_schema: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

impl From<&Tool> for ListedTool {
    fn from(tool: &Tool) -> ListedTool {
        ListedTool {
            name: tool.name.to_string(),
            input_schema: tool.input_schema.clone(),
            output_schema: tool.output_schema.clone(),
        }
    }
}

/// A health check in the session's era: a legacy `ping`, or, as the modern era
/// has no `ping`, a `server/discover` sent as a request of its own (rmcp's
/// `Peer::discover` may answer from its cache). Unbounded by itself (the caller
/// adds the health timeout).
pub(crate) async fn check(peer: &Peer<RoleClient>, era: &Era) -> Result<(), SessionError> {
    use rmcp::model::{ClientRequest, DiscoverRequest, DiscoverRequestParams, PingRequest};
    let request = match era {
        Era::Legacy => ClientRequest::PingRequest(PingRequest::default()),
        Era::Modern(_) => {
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {}))
        }
    };
    match peer.send_request(request).await {
        Ok(_) => Ok(()),
        Err(e) => Err(request_error(e)),
    }
}

/// rmcp's lifecycle for a session of `era`.
fn lifecycle(era: &Era) -> ClientLifecycleMode {
    match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern(version) => ClientLifecycleMode::Discover {
            preferred_versions: vec![version.clone()],
        },
    }
}

/// All tools of the server behind `peer`.
pub(crate) async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, SessionError> {
    peer.list_all_tools().await.map_err(request_error)
}

/// Calls `tool` with `arguments` (a JSON object) and returns the result as JSON.
pub(crate) async fn call_tool(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<serde_json::Value, SessionError> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(args) = arguments {
        params = params.with_arguments(args);
    }
    let result = peer.call_tool(params).await.map_err(request_error)?;
    serde_json::to_value(result).map_err(|e| SessionError::Protocol(Detail::cause(e)))
}

