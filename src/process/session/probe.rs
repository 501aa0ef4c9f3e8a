//! The era probe over a stdio server's pipes, before rmcp reads them.

use std::sync::Arc;
use std::time::Duration;


use crate::errors::Detail;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::era::{self, Era};
use super::error::SessionError;
use super::link::{Answer, Link, Pending, Waiter};
use super::stdout::Violation;

/// At most this much of what a server writes before it answers the probe is
/// kept for rmcp; past it the probe ends, unanswered.
const PROBE_KEEPS: usize = 1024 * 1024;

/// The server's stdout lent to rmcp: each attempt at a session reads it in turn,
/// and it is dropped (which ends the session's reading, `stdout.rs`) with the
/// last holder.
pub(super) struct Lent<R>(Arc<std::sync::Mutex<R>>);

impl<R> Lent<R> {
    pub(super) fn new(inner: R) -> Lent<R> {
        Lent(Arc::new(std::sync::Mutex::new(inner)))
    }
}

impl<R> Clone for Lent<R> {
    fn clone(&self) -> Lent<R> {
        Lent(self.0.clone())
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Lent<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let mut inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        std::pin::Pin::new(&mut *inner).poll_read(cx, buf)
    }
}

/// Closes the server's stdin when dropped while it holds the link.
pub(super) struct CloseOnDrop(pub(super) Option<Link>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(link) = self.0.take() {
            link.close();
        }
    }
}

/// What the stdio probe found.
pub(super) struct Probed {
    pub(super) era: Era,
    /// What the server wrote meanwhile that was not the answer.
    pub(super) before: Vec<u8>,
    /// The probe's request id on the link.
    pub(super) id: u64,
    /// When the probe got no answer within its bound: where a late one arrives.
    pub(super) late: Option<Late>,
}

/// Where a late answer to the probe arrives.
pub(super) struct Late(tokio::sync::oneshot::Receiver<era::Reply>);

impl Late {
    /// The answer, if it has arrived by now.
    pub(super) fn arrived(mut self) -> Option<era::Reply> {
        self.0.try_recv().ok()
    }
}

/// Tells the probe its answer.
struct ProbeWaiter(tokio::sync::oneshot::Sender<era::Reply>);

impl Pending for ProbeWaiter {
    fn progress(&mut self, _params: &serde_json::value::RawValue) {}

    fn answered(self: Box<Self>, answer: Answer<'_>) {
        let reply = match answer {
            Answer::Result(r) => era::Reply::Result(r.get().to_owned()),
            Answer::Error(e) => era::Reply::Error(e.get().to_owned()),
            Answer::Ended | Answer::Abandoned => era::Reply::Nothing,
        };
        let _ = self.0.send(reply);
    }
}

/// The era probe over stdio: `server/discover` through the link, its answer read
/// off `output` for at most `bound`. Returns the era, what the server wrote
/// meanwhile that was not the answer (rmcp reads it first), and, when no answer
/// came in time, where a late one arrives. A server that closes its output is
/// left for rmcp to find.
pub(super) async fn probe_stdio<R: AsyncRead + Unpin>(
    link: &Link,
    output: &mut R,
    info: &rmcp::model::InitializeRequestParams,
    bound: Duration,
    violation: &Violation,
) -> Result<Probed, SessionError> {
    let params = serde_json::to_vec(&era::discover_params(info)).unwrap_or_else(|_| b"{}".to_vec());
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let sent = link.request("server/discover", |_| {
        let params = move |q: &mut Vec<u8>| q.extend_from_slice(&params);
        (params, Box::new(ProbeWaiter(tx)) as Waiter)
    });
    let Some(id) = sent else {
        return Ok(Probed {
            era: Era::Legacy,
            before: Vec::new(),
            id: 0,
            late: None,
        });
    };
    let started = tokio::time::Instant::now();
    let deadline = tokio::time::sleep(bound);
    tokio::pin!(deadline);
    let mut before = Vec::new();
    let mut chunk = vec![0u8; 8 * 1024];
    let mut silent = false;
    let reply = loop {
        tokio::select! {
            biased;
            reply = &mut rx => break reply.unwrap_or(era::Reply::Nothing),
            _ = &mut deadline => {
                silent = true;
                break era::Reply::Nothing;
            }
            read = output.read(&mut chunk) => match read {
                Ok(0) => break era::Reply::Nothing,
                Ok(n) => {
                    before.extend_from_slice(&chunk[..n]);
                    if before.len() > PROBE_KEEPS {
                        break era::Reply::Nothing;
                    }
                }
                Err(e) => {
                    return Err(match violation.get() {
                        Some(why) => SessionError::Protocol(Detail::words(why)),
                        None => SessionError::Closed(Detail::because("the server's stdout", e)),
                    });
                }
            },
        }
    };
    let era = era::classify(&reply);
    tracing::debug!(era = %era.label(), reply = ?reply, silent, ms = started.elapsed().as_millis() as u64, "era probe over stdio");
    Ok(Probed {
        era,
        before,
        id,
        late: silent.then_some(Late(rx)),
    })
}

