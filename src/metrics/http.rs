//! `GET /metrics` over HTTP: on the gateway's door, and on a door of its own at
//! the fleet file's `metrics.listen` for a supervisor without the gateway. Both
//! want the gateway's bearer token, as the gateway does (docs/design.md §17).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::exposition::Format;

/// The path of the metrics.
pub const PATH: &str = "/metrics";

/// What renders the metrics text in a format, at each scrape.
pub type Render = Arc<dyn Fn(Format) -> String + Send + Sync>;

type Body = BoxBody<Bytes, Infallible>;

/// The answer to a request for [`PATH`] that carried the token.
pub fn answer<B>(request: &Request<B>, render: &Render) -> Response<Body> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: the metrics are read with GET",
        );
        response
            .headers_mut()
            .insert(header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let body = if request.method() == Method::HEAD {
        String::new()
    } else {
        render(format)
    };
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(format.content_type()),
    );
    response
}

/// Serves [`PATH`] alone on `listener` until `shutdown`; every request must
/// carry `Authorization: Bearer <token>`. `refused` hears each refusal (status
/// and peer) for the gateway's log.
pub fn serve(
    listener: TcpListener,
    token: Arc<str>,
    render: Render,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) {
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
                    tracing::warn!(error = %e, "metrics: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (token, render, shutdown) = (token.clone(), render.clone(), shutdown.clone());
            connections.spawn(async move {
                let handler = hyper::service::service_fn(move |request: Request<_>| {
                    let response = if request.uri().path() != PATH {
                        text(
                            StatusCode::NOT_FOUND,
                            "not found: the metrics are at /metrics",
                        )
                    } else if !crate::gateway::http::authorized(&request, &token) {
                        crate::gateway::http::unauthorized()
                    } else {
                        answer(&request, &render)
                    };
                    std::future::ready(Ok::<_, Infallible>(response))
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::select! {
                    r = connection => if let Err(e) = r {
                        tracing::debug!(%peer, error = %e, "metrics: connection ended");
                    },
                    _ = shutdown.cancelled() => {}
                }
            });
        }
    });
}

fn text(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
