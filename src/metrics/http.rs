//! `GET /metrics` over HTTP: the answer, in the format the scraper asks for. The
//! doors that serve it (the gateway's, and the supervisor's own at
//! `metrics.listen`) check the bearer token first (docs/design.md §17).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};

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
    let body = Bytes::from_owner(Recycled(body));
    let mut response = Response::new(Full::new(body).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(format.content_type()),
    );
    response
}

/// A scrape's text while it is sent; its buffer serves the next one once sent.
struct Recycled(String);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        super::exposition::recycle(std::mem::take(&mut self.0));
    }
}

/// The answer to any other path.
pub fn not_found() -> Response<Body> {
    text(
        StatusCode::NOT_FOUND,
        "not found: the metrics are at /metrics",
    )
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
