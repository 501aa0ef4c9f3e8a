//! `GET /metrics` over HTTP: the answer, in the format the scraper asks for. The
//! doors that serve it (the gateway's, and the supervisor's own at
//! `metrics.listen`) check the bearer token first (docs/design.md §17).
//!
//! The text is rendered on a thread of its own that runs only when the machine
//! has a core to spare (`SCHED_IDLE`), never on the runtime's workers: a scrape
//! waits for the lifecycle's requests, not they for it.

use std::convert::Infallible;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};

use super::Prepared;
use super::exposition::Format;

/// The path of the metrics.
pub(crate) const PATH: &str = "/metrics";

/// What takes the metrics in a format at each scrape, to be written on the
/// renderer's thread; `None` once the supervisor is gone.
pub(crate) type Render = Arc<dyn Fn(Format) -> Option<Prepared> + Send + Sync>;

type Body = BoxBody<Bytes, Infallible>;

/// The answer to a request for [`PATH`] that carried the token.
pub(crate) async fn answer<B>(request: &Request<B>, render: &Render) -> Response<Body> {
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
        rendered(render, format).await
    };
    let body = Bytes::from_owner(Recycled(body));
    let mut response = Response::new(Full::new(body).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(format.content_type()),
    );
    response
}

/// A job for the renderer's thread: what to write, and where the text goes
/// back with what was written from (let go of here, not there).
type Job = (Prepared, Answer);
type Answer = tokio::sync::oneshot::Sender<(String, Prepared)>;

/// Scrapes waiting for the renderer at most; one more is written where it came.
const QUEUE: usize = 16;

/// The renderer's thread, started at the first scrape and kept for the life of
/// the process (scrapes come again); `None` when it could not be started.
///
/// The thread takes nothing from the allocator: the job's buffer was taken and
/// its copies made on the runtime's thread, they go back there to be let go of,
/// and the queue is a fixed array. (It lets go of the reply channel's state
/// when the runtime's side did first, and of a whole job whose scraper left.)
/// A thread that allocates gets an arena of its own, which would keep a
/// scrape's garbage resident.
fn renderer() -> Option<&'static SyncSender<Job>> {
    static RENDERER: OnceLock<Option<SyncSender<Job>>> = OnceLock::new();
    RENDERER
        .get_or_init(|| {
            let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(QUEUE);
            std::thread::Builder::new()
                .name("metrics-render".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    if let Err(e) = crate::platform::run_thread_when_idle() {
                        tracing::debug!("the metrics renderer keeps its CPU priority: {e}");
                    }
                    for (mut prepared, answer) in queue {
                        let text = prepared.write();
                        let _ = answer.send((text, prepared));
                    }
                })
                .ok()
                .map(|_| jobs)
        })
        .as_ref()
}

/// The metrics text: taken here, on the runtime's thread (a copy of the counts
/// and the published views, and the text's buffer), and written on the
/// renderer's thread, or here when that thread is not there or is behind.
/// Either is bounded work that never waits for an authority.
async fn rendered(render: &Render, format: Format) -> String {
    let Some(prepared) = render(format) else {
        return String::new();
    };
    let Some(jobs) = renderer() else {
        return prepared.render();
    };
    let (answer, text) = tokio::sync::oneshot::channel();
    if let Err(TrySendError::Full((prepared, _)) | TrySendError::Disconnected((prepared, _))) =
        jobs.try_send((prepared, answer))
    {
        return prepared.render();
    }
    match text.await {
        Ok((text, _written_from)) => text,
        // The renderer's thread ended with the job: take it again, here.
        Err(_) => render(format).map(Prepared::render).unwrap_or_default(),
    }
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
pub(crate) fn not_found() -> Response<Body> {
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
