//! A request's events, streamed to its client before the final reply.

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::answer::Response;
use super::events::EventLog;
use crate::lifecycle::authority::Handle;
use crate::lifecycle::events::Event;
use crate::output::report::EventReport;
use crate::protocol;

/// Runs `work` on `handles` while streaming their events to the client: every
/// event of a request is recorded before its reply (L12), so what is queued when
/// `work` ends is all of it. The forwarding is a task of `tracker`.
pub(super) async fn streaming<F, Fut, T>(
    events: &EventLog,
    tracker: &TaskTracker,
    handles: &[Handle],
    tx: &mpsc::UnboundedSender<String>,
    work: F,
) -> T
where
    F: FnOnce(Vec<Handle>) -> Fut,
    Fut: Future<Output = T>,
{
    let mut events = events.subscribe();
    let watched: Vec<String> = handles.iter().map(|h| h.name().to_owned()).collect();
    let forward_tx = tx.clone();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    let forward = tracker.spawn(async move {
        let send = |event: Event| {
            if watched.contains(&event.server) {
                let event = EventReport::from(&event);
                let _ = forward_tx.send(protocol::encode(&Response::Event { event }));
            }
        };
        loop {
            tokio::select! {
                biased;
                received = events.recv() => match received {
                    Ok(event) => send(event),
                    // Too slow a reader loses events, not the rest of the stream.
                    Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "event stream lagged"),
                    Err(RecvError::Closed) => break,
                },
                _ = &mut done_rx => {
                    while let Ok(event) = events.try_recv() {
                        send(event);
                    }
                    break;
                }
            }
        }
    });
    let result = work(handles.to_vec()).await;
    let _ = done_tx.send(());
    let _ = forward.await;
    result
}
