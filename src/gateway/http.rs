//! The gateway's HTTP door: streamable HTTP at `/mcp` (rmcp's server side),
//! closed by default (G6): loopback unless told otherwise, `Host` and `Origin`
//! checked against DNS rebinding, and a bearer token on every request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{ClientSession, Gateway};

/// The path of the MCP endpoint.
pub const PATH: &str = "/mcp";

/// Origins a browser page may call from: loopback on any port. Requests without
/// an `Origin` (every non-browser client) pass; others must match (G6).
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// Serves the gateway on `listener` until `shutdown`, and the metrics at
/// `/metrics` when `scrape` renders them; every request must carry
/// `Authorization: Bearer <token>`.
pub fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    token: Arc<str>,
    origins: Vec<String>,
    scrape: Option<crate::metrics::http::Render>,
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
    let journal = gateway.clone();
    let service = Arc::new(StreamableHttpService::new(
        move || Ok(ClientSession::new(gateway.clone(), "http")),
        Arc::new(LocalSessionManager::default()),
        config,
    ));
    accept_each(listener, shutdown, tracker, "gateway", move |peer| {
        let service = service.clone();
        let token = token.clone();
        let journal = journal.clone();
        let scrape = scrape.clone();
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            let journal = journal.clone();
            let scrape = scrape.clone();
            async move {
                let method = request.method().clone();
                let response = route(&service, &token, scrape.as_ref(), request).await;
                if let Some(why) = refusal(response.status()) {
                    journal.note(format_args!(
                        "refused {method} from {peer} ({}): {why}",
                        response.status().as_u16()
                    ));
                }
                Ok::<_, Infallible>(response)
            }
        })
    });
}

/// Accepts connections on `listener` until `shutdown` and serves each, as a task
/// of `tracker`, with the HTTP/1.1 service `service_of(peer)` makes; `door`
/// names the door in logs. A connection still open at `shutdown` is dropped.
pub(crate) fn accept_each<S>(
    listener: TcpListener,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
    door: &'static str,
    service_of: impl Fn(SocketAddr) -> S + Send + 'static,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let connections = tracker.clone();
    tracker.spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => break,
                a = listener.accept() => a,
            };
            let (stream, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "{door}: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            // An answer goes out in more than one write (headers and the
            // stream's first event, then the rest): with Nagle's algorithm the
            // second waits for the client's delayed ACK, 40 ms a request.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, error = %e, "{door}: cannot set TCP_NODELAY");
            }
            let service = service_of(peer);
            let shutdown = shutdown.clone();
            connections.spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    r = connection => if let Err(e) = r {
                        tracing::debug!(%peer, error = %e, "{door}: connection ended");
                    },
                    _ = shutdown.cancelled() => {}
                }
            });
        }
    });
}

async fn route(
    service: &StreamableHttpService<ClientSession, LocalSessionManager>,
    token: &str,
    scrape: Option<&crate::metrics::http::Render>,
    request: Request<Incoming>,
) -> Response<Body> {
    let path = request.uri().path();
    let metrics = path == crate::metrics::http::PATH && scrape.is_some();
    if path != PATH && !metrics {
        return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
    }
    if !authorized(&request, token) {
        return unauthorized();
    }
    match scrape {
        Some(render) if metrics => crate::metrics::http::answer(&request, render).await,
        _ => service.handle(request).await,
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
        StatusCode::NOT_FOUND => Some("no such path or session"),
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
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the gateway listens, as a URL.
pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}{PATH}")
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
