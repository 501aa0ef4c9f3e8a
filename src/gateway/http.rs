//! The gateway's HTTP door: streamable HTTP at `/mcp` (rmcp's server side),
//! closed by default (G6): loopback unless told otherwise, `Host` and `Origin`
//! checked against DNS rebinding, and a bearer token on every request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bounds::{self, Tally};
use super::era;
use super::{ClientSession, Gateway};

/// The path of the MCP endpoint.
pub(crate) const PATH: &str = "/mcp";

/// Where one server of the fleet is served alone, under its name: the
/// endpoint another host's gateway relays that server's calls to
/// (docs/design.md §19).
pub(crate) const SERVERS: &str = "/mcp/servers/";

/// The header that names the generation a relayed request is for; the
/// server's endpoint refuses a request for any other (L24).
pub(crate) const GENERATION: &str = "mcpfleet-generation";

/// Origins a browser page may call from: loopback on any port. Requests without
/// an `Origin` (every non-browser client) pass; others must match (G6).
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// What one door lets its peers hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Open connections; one more is answered 503 and closed.
    pub connections: usize,
    /// Open HTTP sessions (the gateway's door only); one more `initialize` is
    /// answered 503.
    pub sessions: usize,
}

/// Serves the gateway on `listener` until `shutdown`, and the metrics at
/// `/metrics` when `scrape` renders them; every request must carry
/// `Authorization: Bearer <token>`. At most `caps` connections and sessions
/// are open at once.
#[expect(clippy::too_many_arguments, reason = "one door, each argument a separate limit or channel of it")]
pub(crate) fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    token: Arc<str>,
    origins: Vec<String>,
    scrape: Option<crate::metrics::http::Render>,
    caps: Caps,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) {
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(
            LOOPBACK_ORIGINS
                .iter()
                .map(|s| s.to_string())
                .chain(origins),
        )
        .enforce_origin_validation();
    config.cancellation_token = shutdown.child_token();
    if !loopback {
        // Any name may reach a listener beyond loopback; the token guards it.
        config = config.disable_allowed_hosts();
    }
    let mut manager = super::resume::Resuming::new(&gateway);
    // The `initialize` comes with the request that creates the session.
    manager.session_config.init_timeout = Some(bounds::INITIALIZED_TIMEOUT);
    let manager = Arc::new(manager);
    let factory = gateway.clone();
    let service = StreamableHttpService::new(
        move || {
            let session = ClientSession::new(factory.clone(), "http");
            // A request at one server's endpoint sees that server alone.
            let session = match SCOPED.try_with(|index| *index) {
                Ok(index) => session.alone(index),
                Err(_) => session,
            };
            // The request that creates the session learns how to tell whether
            // the client finished its handshake.
            let _ = CREATED.try_with(|slot| {
                slot.replace(Some(Created {
                    opened: session.opened(),
                    ended: session.ended(),
                }))
            });
            Ok(session)
        },
        manager.clone(),
        config,
    );
    let sessions = Arc::new(Sessions {
        service,
        manager,
        cap: caps.sessions,
        refused: Mutex::new(Tally::default()),
        ends: Mutex::default(),
        opened: Mutex::default(),
        nobody: super::fast::nobody(),
        gateway: gateway.clone(),
        tracker: tracker.clone(),
        shutdown: shutdown.clone(),
    });
    let journal = gateway.clone();
    accept_each(
        listener,
        shutdown,
        tracker,
        Door {
            name: "gateway",
            key: "gateway.max_connections",
            cap: caps.connections,
            journal: gateway,
            tls,
        },
        move |peer| {
            let sessions = sessions.clone();
            let token = token.clone();
            let journal = journal.clone();
            let scrape = scrape.clone();
            hyper::service::service_fn(move |request: Request<Incoming>| {
                let sessions = sessions.clone();
                let token = token.clone();
                let journal = journal.clone();
                let scrape = scrape.clone();
                async move {
                    let method = request.method().clone();
                    let response = route(&sessions, &token, scrape.as_ref(), request).await;
                    if let Some(why) = refusal(response.status()) {
                        journal.note(format_args!(
                            "refused {method} from {peer} ({}): {why}",
                            response.status().as_u16()
                        ));
                    }
                    Ok::<_, Infallible>(response)
                }
            })
        },
    );
}

tokio::task_local! {
    /// The server whose endpoint a request came to (`/mcp/servers/NAME`):
    /// the session the factory makes for it sees that server alone.
    static SCOPED: usize;
}

tokio::task_local! {
    /// Where the session factory leaves the handshake state of the session it
    /// made, for the request that made it.
    static CREATED: std::cell::RefCell<Option<Created>>;
}

/// What the request that made a session keeps of it.
struct Created {
    /// Set once the client finished its handshake.
    opened: Arc<std::sync::OnceLock<super::Opened>>,
    /// Ends the session's calls in flight.
    ended: CancellationToken,
}

/// A request's body, at most `limit` bytes, read within
/// [`bounds::BODY_TIMEOUT`]; else the answer that says why not.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, Response<Body>> {
    let read = tokio::time::timeout(
        bounds::BODY_TIMEOUT,
        http_body_util::Limited::new(body, limit).collect(),
    );
    match read.await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(plain(StatusCode::BAD_REQUEST, "bad request: the body ended early")),
        Err(_) => Err(plain(
            StatusCode::REQUEST_TIMEOUT,
            "request timeout: the request's body did not arrive in time",
        )),
    }
}

/// The answer to a body larger than the door takes.
fn too_large() -> Response<Body> {
    plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload too large: the request's body is larger than this door takes",
    )
}

/// The gateway's HTTP sessions: rmcp's service and session manager, and the
/// cap on how many are open.
struct Sessions {
    service: StreamableHttpService<ClientSession, super::resume::Resuming>,
    manager: Arc<super::resume::Resuming>,
    cap: usize,
    /// `initialize`s refused at the cap, for one line per burst.
    refused: Mutex<Tally>,
    /// What ends the calls in flight of each session, by id.
    ends: Mutex<std::collections::HashMap<SessionId, CancellationToken>>,
    /// Each session once its client finished its handshake, by id: where its
    /// task requests of protocol 2025-11-25 are answered (`legacy_tasks.rs`).
    opened: Mutex<std::collections::HashMap<SessionId, Arc<std::sync::OnceLock<super::Opened>>>>,
    /// The client of a call on the fast lane, as its server's requests see it.
    nobody: rmcp::service::Peer<rmcp::service::RoleServer>,
    gateway: Arc<Gateway>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl Sessions {
    /// A POST, its body read within [`bounds::BODY_TIMEOUT`]. A request of the
    /// 2026-07-28 era (its `MCP-Protocol-Version`) has no session: it is served
    /// on its own, a method that era removed is answered 404 here, and a plain
    /// `tools/call` takes the fast lane (`fast.rs`) when it can. Any
    /// other request without a session is held to [`bounds::NEW_SESSION_BODY`];
    /// if it is an `initialize`, to the cap on sessions too, and its session is
    /// closed if the client does not finish the handshake within
    /// [`bounds::INITIALIZED_TIMEOUT`].
    async fn post(self: &Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let modern = era::modern_header(request.headers());
        let new = !modern && !request.headers().contains_key(SESSION_ID);
        let limit = match new {
            true => bounds::NEW_SESSION_BODY,
            false => self.service.config.max_request_body_bytes,
        };
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > limit as u64) {
            // Said before a byte of it is read: the client learns at once, and
            // nothing of the body is taken.
            return too_large();
        }
        let (parts, body) = request.into_parts();
        let body = match read_body(body, limit).await {
            Ok(body) => body,
            Err(answer) => return answer,
        };
        if modern && let Some(answer) = era::removed(&body) {
            return answer;
        }
        // A plain call of that era, answered at once from its server's answer;
        // not at one server's endpoint, where names are that server's alone.
        if modern
            && SCOPED.try_with(|_| ()).is_err()
            && let Some(call) =
                super::fast::Call::read(&parts.headers, &body, &self.service.config.allowed_hosts)
            && let Some(answer) = call.answer(&self.gateway, &self.nobody, &self.shutdown).await
        {
            return answer;
        }
        if new && era::may_open(&body) && self.open().await >= self.cap {
            return self.at_cap();
        }
        if !new && !modern && let Some(answer) = self.legacy_task(&parts, &body).await {
            return answer;
        }
        let request = Request::from_parts(parts, Full::new(body));
        if modern {
            let response = self.service.handle(request).await;
            return super::written::http_as_written(&self.gateway, response);
        }
        if !new {
            return self.service.handle(request).await;
        }
        let created = std::cell::RefCell::new(None);
        let (response, created) = CREATED
            .scope(created, async {
                let response = self.service.handle(request).await;
                (response, CREATED.with(|slot| slot.take()))
            })
            .await;
        let id = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(|id| SessionId::from(id.to_owned()));
        if let (Some(id), Some(created)) = (id, created) {
            // Forget the sessions that ended on their own (idle, or gone).
            let open: Vec<SessionId> = self.manager.sessions.read().await.keys().cloned().collect();
            let mut ends = lock(&self.ends);
            ends.retain(|id, _| open.contains(id));
            ends.insert(id.clone(), created.ended);
            drop(ends);
            let mut opened = lock(&self.opened);
            opened.retain(|id, _| open.contains(id));
            opened.insert(id.clone(), created.opened.clone());
            drop(opened);
            self.expect_initialized(id, created.opened);
        }
        response
    }

    /// A request at one server's endpoint (`/mcp/servers/NAME`), from another
    /// host's gateway: each for the generation its `Mcpfleet-Generation`
    /// names, which must be the one running here (L24); served as at `/mcp`,
    /// by a session that sees that server alone, under the names it gives
    /// (the relaying gateway names them), and never on the fast lane (which
    /// routes the whole fleet's names).
    async fn one_server(self: &Arc<Self>, name: &str, request: Request<Incoming>) -> Response<Body> {
        let members = self.gateway.members();
        let Some(index) = members
            .iter()
            .position(|m| m.as_ref().is_some_and(|m| m.handle.name() == name))
        else {
            return plain(StatusCode::NOT_FOUND, "not found: no such server in this fleet");
        };
        let asked = request
            .headers()
            .get(GENERATION)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        let Some(asked) = asked else {
            return plain(
                StatusCode::BAD_REQUEST,
                "bad request: a server's endpoint needs the Mcpfleet-Generation the request is for",
            );
        };
        let running = members[index]
            .as_ref()
            .and_then(|m| m.handle.running_generation());
        if running != Some(asked) {
            let mut response = Response::new(
                Full::new(Bytes::from(format!(
                    "conflict: generation {asked} of `{name}` does not run on this host ({})",
                    running.map_or_else(|| "none does".to_owned(), |g| format!("generation {g} does")),
                )))
                .boxed(),
            );
            *response.status_mut() = StatusCode::CONFLICT;
            return response;
        }
        SCOPED
            .scope(index, async {
                match *request.method() {
                    Method::POST => self.post(request).await,
                    Method::DELETE => self.delete(request).await,
                    _ => self.service.handle(request).await,
                }
            })
            .await
    }

    /// The answer to a task request of protocol 2025-11-25 from an open
    /// legacy session (`legacy_tasks.rs`), as one JSON body; `None` for any
    /// other request, which rmcp answers.
    async fn legacy_task(&self, parts: &http::request::Parts, body: &Bytes) -> Option<Response<Body>> {
        if !super::legacy_tasks::may_claim(body) {
            return None;
        }
        let id = parts.headers.get(SESSION_ID)?.to_str().ok()?;
        let opened = lock(&self.opened).get(&SessionId::from(id.to_owned()))?.clone();
        let (session, modern) = opened.get().map(|o| (o.id, o.modern))?;
        if modern {
            return None;
        }
        let scope = SCOPED.try_with(|index| Arc::from(vec![*index])).ok();
        let answer = super::legacy_tasks::message(&self.gateway, &scope, session, body).await?;
        let mut response = Response::new(Full::new(Bytes::from(answer)).boxed());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Some(response)
    }

    /// Ends session `id` and, first, its calls in flight.
    async fn end(&self, id: &SessionId) -> Result<(), String> {
        if let Some(ended) = lock(&self.ends).remove(id) {
            ended.cancel();
        }
        lock(&self.opened).remove(id);
        self.manager
            .close_session(id)
            .await
            .map_err(|e| e.to_string())
    }

    /// Closes session `id` unless its client sends `notifications/initialized`
    /// within [`bounds::INITIALIZED_TIMEOUT`].
    fn expect_initialized(
        self: &Arc<Self>,
        id: SessionId,
        opened: Arc<std::sync::OnceLock<super::Opened>>,
    ) {
        let sessions = self.clone();
        let shutdown = self.shutdown.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(bounds::INITIALIZED_TIMEOUT) => {}
                () = shutdown.cancelled() => return,
            }
            if opened.get().is_none() && sessions.manager.has_session(&id).await.unwrap_or(false) {
                let _ = sessions.end(&id).await;
                sessions.gateway.note(format_args!(
                    "an HTTP session was closed: its client sent no `notifications/initialized` within {} s",
                    bounds::INITIALIZED_TIMEOUT.as_secs()
                ));
            }
        });
    }

    /// HTTP sessions open now.
    async fn open(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    /// The answer to an `initialize` at the cap on sessions, with a line in the
    /// gateway's log once per burst.
    fn at_cap(&self) -> Response<Body> {
        let due = lock(&self.refused).add(Instant::now());
        if let Some(count) = due {
            self.gateway.note(format_args!(
                "refused {count} new HTTP session(s) (503): {} are open, the cap (gateway.max_sessions)",
                self.cap
            ));
        }
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy: the gateway has as many sessions open as it allows; retry later",
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        response
    }

    /// A DELETE: ends the session it names at once, its calls in flight with
    /// it; 200, or 404 for a session the gateway does not know.
    async fn delete(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(id) = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(|id| SessionId::from(id.to_owned()))
        else {
            if era::modern_header(request.headers()) {
                // That era has no sessions to end (as rmcp answers its GET).
                let mut response = plain(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method not allowed: protocol version 2026-07-28 has no sessions to end",
                );
                response
                    .headers_mut()
                    .insert(header::ALLOW, http::HeaderValue::from_static("POST"));
                return response;
            }
            return plain(
                StatusCode::BAD_REQUEST,
                "bad request: DELETE needs the Mcp-Session-Id of the session to end",
            );
        };
        if !self.manager.has_session(&id).await.unwrap_or(false) {
            return plain(StatusCode::NOT_FOUND, "not found: no such session");
        }
        match self.end(&id).await {
            Ok(()) => {
                let mut response = Response::new(Full::new(Bytes::new()).boxed());
                *response.status_mut() = StatusCode::OK;
                response
            }
            Err(e) => {
                tracing::warn!(error = %e, "gateway: an HTTP session did not close");
                plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error: the session did not close",
                )
            }
        }
    }
}

/// The header that names an HTTP session.
const SESSION_ID: &str = "mcp-session-id";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One HTTP door, as its accept loop knows it.
pub(crate) struct Door {
    /// Its name in logs (`gateway`, `metrics`).
    pub name: &'static str,
    /// The fleet file's key of its cap on connections.
    pub key: &'static str,
    /// Open connections at most.
    pub cap: usize,
    /// Where refusals are told.
    pub journal: Arc<Gateway>,
    /// HTTPS only, with this certificate (`gateway.tls`).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Accepts connections on `listener` until `shutdown` and serves each, as a task
/// of `tracker`, with the HTTP/1.1 service `service_of(peer)` makes. At most
/// `door.cap` connections are open at once: one more is answered `503` and
/// closed, and the refusals are counted into one line of the gateway's log per
/// burst. A request's headers must arrive within [`bounds::HEADER_TIMEOUT`],
/// which also closes a connection left idle between requests as long. Failed
/// `accept`s are paced and counted (`AcceptErrors`). A connection still open at
/// `shutdown` is dropped.
pub(crate) fn accept_each<S>(
    listener: TcpListener,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
    door: Door,
    service_of: impl Fn(SocketAddr) -> S + Send + 'static,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let connections = tracker.clone();
    let open = Arc::new(Semaphore::new(door.cap));
    let lingering = Arc::new(Semaphore::new(bounds::LINGERING));
    tracker.spawn(async move {
        let name = door.name;
        let mut errors = bounds::AcceptErrors::default();
        let mut refused = Tally::default();
        loop {
            let report = async {
                match refused.next() {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => break,
                () = report => {
                    if let Some(count) = refused.due(Instant::now()) {
                        door.refused(count);
                    }
                    continue;
                }
                a = listener.accept() => a,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    let pause = errors.failed(name, &e);
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        () = tokio::time::sleep(pause) => continue,
                    }
                }
            };
            errors.succeeded();
            let Ok(permit) = open.clone().try_acquire_owned() else {
                refuse(stream, &lingering, &connections);
                if let Some(count) = refused.add(Instant::now()) {
                    door.refused(count);
                }
                continue;
            };
            // An answer goes out in more than one write (headers and the
            // stream's first event, then the rest): with Nagle's algorithm the
            // second waits for the client's delayed ACK, 40 ms a request.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, error = %e, "{name}: cannot set TCP_NODELAY");
            }
            let service = service_of(peer);
            let shutdown = shutdown.clone();
            let tls = door.tls.clone();
            connections.spawn(async move {
                match tls {
                    None => serve_connection(stream, service, peer, name, &shutdown).await,
                    // The handshake is bounded as a request's headers are: a
                    // peer that opens a connection and says nothing holds it
                    // no longer.
                    Some(tls) => match tokio::time::timeout(bounds::HEADER_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(stream, service, peer, name, &shutdown).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "{name}: TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "{name}: no TLS handshake in time"),
                    },
                }
                drop(permit);
            });
        }
    });
}

/// Serves HTTP/1.1 on `stream` with `service` until it ends or `shutdown`.
async fn serve_connection<I, S>(stream: I, service: S, peer: SocketAddr, name: &str, shutdown: &CancellationToken)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(bounds::HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        r = connection => if let Err(e) = r {
            tracing::debug!(%peer, error = %e, "{name}: connection ended");
        },
        _ = shutdown.cancelled() => {}
    }
}

impl Door {
    /// Says in the gateway's log that `count` connections were refused.
    fn refused(&self, count: u64) {
        tracing::info!(door = self.name, count, "connections refused at the cap");
        self.journal.note(format_args!(
            "{} door: refused {count} connection(s) (503): {} are open, the cap ({})",
            self.name, self.cap, self.key
        ));
    }
}

/// Answers a connection beyond the cap with [`bounds::BUSY`], without reading
/// its request, and closes it: after a moment for the peer to read the answer
/// while fewer than [`bounds::LINGERING`] do so, else at once.
fn refuse(stream: TcpStream, lingering: &Arc<Semaphore>, tracker: &TaskTracker) {
    // The answer is far smaller than a new socket's send buffer.
    let _ = stream.try_write(bounds::BUSY);
    let Ok(permit) = lingering.clone().try_acquire_owned() else {
        return;
    };
    tracker.spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = stream;
        let _ = stream.shutdown().await;
        // What the peer sent is read and dropped, so that closing does not reset
        // the connection before the peer has read the answer.
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(bounds::LINGER, async {
            while let Ok(n) = stream.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
        drop(permit);
    });
}

async fn route(
    sessions: &Arc<Sessions>,
    token: &str,
    scrape: Option<&crate::metrics::http::Render>,
    request: Request<Incoming>,
) -> Response<Body> {
    let path = request.uri().path();
    let metrics = path == crate::metrics::http::PATH && scrape.is_some();
    let server = path.strip_prefix(SERVERS).map(str::to_owned);
    if path != PATH && !metrics && server.is_none() {
        return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
    }
    if !authorized(&request, token) {
        return unauthorized();
    }
    if let Some(name) = server {
        return sessions.one_server(&name, request).await;
    }
    match scrape {
        Some(render) if metrics => crate::metrics::http::answer(&request, render).await,
        _ => match *request.method() {
            Method::POST => sessions.post(request).await,
            Method::DELETE => sessions.delete(request).await,
            _ => sessions.service.handle(request).await,
        },
    }
}

/// The answer to a request without the token (or with another).
pub(crate) fn unauthorized() -> Response<Body> {
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "unauthorized: send the gateway's token as `Authorization: Bearer <token>`",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer"),
    );
    response
}

/// What a refused request's status says, for the gateway's log; `None` for one
/// that was served. Never the token or the request's headers.
fn refusal(status: StatusCode) -> Option<&'static str> {
    match status {
        StatusCode::UNAUTHORIZED => Some("no token, or not the gateway's"),
        StatusCode::FORBIDDEN => Some("its Origin or Host is not allowed"),
        StatusCode::NOT_FOUND => Some("no such path, session or method"),
        s if s.is_client_error() => Some("the request was not valid"),
        _ => None,
    }
}

/// Whether `request` carries the token, compared in constant time.
pub(crate) fn authorized<B>(request: &Request<B>, token: &str) -> bool {
    let Some(given) = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A new random token: 32 bytes from the OS, hex.
pub(crate) fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the gateway listens, as a URL (`https://` with `tls`).
pub(crate) fn url(addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{addr}{PATH}")
}

/// What serves HTTPS with the certificate chain and key of `tls`, or why
/// it cannot.
pub(crate) fn acceptor(tls: &crate::config::GatewayTls) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(&tls.cert)
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the certificate {}: {e}", tls.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .map_err(|e| format!("cannot read the key {}: {e}", tls.key.display()))?;
    // The provider is named: with the `etcd` feature, a second one is linked.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("{} and {} do not make a certificate to serve: {e}", tls.cert.display(), tls.key.display()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(auth: Option<&str>) -> Request<()> {
        let mut r = Request::builder().uri("/mcp");
        if let Some(a) = auth {
            r = r.header(header::AUTHORIZATION, a);
        }
        r.body(()).unwrap()
    }

    #[test]
    fn only_the_exact_bearer_token_passes() {
        assert!(authorized(&request(Some("Bearer s3cret")), "s3cret"));
        assert!(!authorized(&request(Some("Bearer s3cre")), "s3cret"));
        assert!(!authorized(&request(Some("Bearer s3crett")), "s3cret"));
        assert!(!authorized(&request(Some("Basic s3cret")), "s3cret"));
        assert!(!authorized(&request(None), "s3cret"));
    }

    #[test]
    fn tokens_are_long_and_differ() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
