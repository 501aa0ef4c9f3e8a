//! The handle: how everything outside the authority reaches it. Requests wait
//! for the authority under their own deadline; state and the MCP peer are read
//! from what the authority last published, never behind a start or teardown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};

use super::super::events::{EventSink, millis};
use super::super::state::{Generation, Intent};

use super::config::{CallOptions, ServerConfig};
use super::messages::{Message, NotRunning, Reply, RequestError};
use super::snapshot::{Reach, Snapshot};

/// A cheap, cloneable way to reach one server's authority.
#[derive(Clone)]
pub struct Handle {
    pub(super) name: Arc<str>,
    /// Closed by the authority task when it ends; a send error means it is gone.
    pub(super) tx: mpsc::Sender<Message>,
    /// The authority's state as it last published it; only the authority writes it.
    pub(super) published: watch::Receiver<Snapshot>,
    /// The running generation's MCP peer, published likewise.
    pub(super) published_peer: watch::Receiver<Option<Reach>>,
    /// The server's configuration for its next generation, which the authority
    /// reads when it wakes (docs/design.md §16); the handles share it.
    pub(super) config: Arc<watch::Sender<ServerConfig>>,
    /// Told of a request withdrawn because its wait ran out (for metrics).
    pub(super) events: Arc<dyn EventSink>,
    /// When the last use was sent to the authority.
    pub(super) touches: Arc<Touches>,
    /// Says whether this host may serve calls now (a host of a fleet that
    /// spans hosts whose lease is not confirmed may not, L22 and L24).
    pub(super) ledger: Arc<dyn crate::lifecycle::ledger::Ledger>,
    /// On a host of a fleet that spans hosts, the generation another host
    /// runs, reached through that host's gateway (docs/design.md §19, L24):
    /// set by this host's supervisor, never by the authority, and served only
    /// while no generation runs here.
    pub(super) relay: Arc<watch::Sender<Option<Reach>>>,
}

impl Handle {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Asks for a transition and waits for its outcome.
    pub async fn request(
        &self,
        intent: Intent,
        options: CallOptions,
    ) -> Result<Reply, RequestError> {
        let (accepted_tx, mut accepted_rx) = oneshot::channel();
        let (reply_tx, reply_rx) = oneshot::channel();
        let message = Message::Transition {
            intent,
            options,
            enqueued: Instant::now(),
            accepted: accepted_tx,
            reply: reply_tx,
        };
        let gone = || RequestError::Gone(self.name.to_string());
        let deadline = options.wait_timeout.deadline();
        let sent = match deadline {
            Some(d) => tokio::time::timeout_at(d, self.tx.send(message)).await,
            None => Ok(self.tx.send(message).await),
        };
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(gone()),
            Err(_) => return Err(self.busy(options)),
        }
        // Whether accepted or not, the reply follows: a request that was never
        // accepted is answered when the authority settles its queue on shutdown.
        if let Some(d) = deadline
            && tokio::time::timeout_at(d, &mut accepted_rx).await.is_err()
        {
            // Close first so that the authority cannot accept after this point;
            // then an acceptance that raced the deadline still counts.
            accepted_rx.close();
            if accepted_rx.try_recv().is_err() {
                return Err(self.busy(options));
            }
        }
        reply_rx.await.map_err(|_| gone())
    }

    fn busy(&self, options: CallOptions) -> RequestError {
        self.events.busy(&self.name);
        RequestError::Busy(self.name.to_string(), options.wait_timeout)
    }

    /// Requests waiting in the authority's queue (touches included), at once.
    pub fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// The running generation and how to reach its session (its MCP peer), for
    /// requests that run outside the authority (`tools`, `call`); `None` when the
    /// server is not running. Answered
    /// at once, never behind a start or teardown in progress; it also counts as a
    /// use of the server for its idle timer.
    pub async fn peer(&self) -> Result<Option<Reach>, RequestError> {
        Ok(self.reach())
    }

    /// The running generation, as [`Handle::peer`] gives it, with its link; at
    /// once, without an await. A use of the server, like `peer`.
    pub fn reach(&self) -> Option<Reach> {
        if self.ledger.serving().is_err() {
            return None;
        }
        let local = self.published_peer.borrow().clone();
        if local.is_none() {
            return self.relay.borrow().clone();
        }
        if self.touches.due() {
            // A full queue means the authority is busy anyway: the touch can be skipped.
            let _ = self.tx.try_send(Message::Touch);
        }
        local
    }

    /// The generation calls reach: the one running here, else the one another
    /// host runs that this host relays to ([`Handle::relay`]); at once.
    pub fn serving_generation(&self) -> Option<Generation> {
        self.running_generation()
            .or_else(|| self.relay.borrow().as_ref().map(|r| r.generation))
    }

    /// Relays calls to `reach`, a generation another host runs, while none
    /// runs here (`None`: no longer). Only a host of a fleet that spans hosts
    /// sets it.
    pub fn relay(&self, reach: Option<Reach>) {
        self.relay.send_replace(reach);
    }

    /// The generation relayed to, to be told of every change.
    pub fn relays(&self) -> watch::Receiver<Option<Reach>> {
        self.relay.subscribe()
    }

    /// The running generation, else `None`, from the published state, at once.
    pub fn running_generation(&self) -> Option<Generation> {
        self.published.borrow().running_generation()
    }

    /// The running generation and its session, starting the server first (a start request,
    /// L1 to L13 apply) when it is not running: how `call`, `tools SERVER` and the
    /// gateway reach a server.
    pub async fn running(
        &self,
        options: CallOptions,
    ) -> Result<Reach, NotRunning> {
        self.ledger.serving().map_err(NotRunning::Refused)?;
        if let Ok(Some(p)) = self.peer().await {
            return Ok(p);
        }
        let started = self.request(Intent::Start, options).await;
        if !matches!(&started, Ok(reply) if reply.result.is_ok()) {
            return Err(NotRunning::NotStarted(Box::new(started)));
        }
        match self.peer().await {
            Ok(Some(p)) => Ok(p),
            _ => Err(NotRunning::StoppedAgain),
        }
    }

    /// The current state, at once: the authority publishes it at every change, so a
    /// `status` never waits behind a start or a teardown in progress. After the
    /// authority has ended, this is the last state it published.
    pub async fn snapshot(&self) -> Result<Snapshot, RequestError> {
        Ok(self.published())
    }

    /// What [`Handle::snapshot`] answers, for callers that cannot wait.
    pub fn published(&self) -> Snapshot {
        let mut snapshot = self.published.borrow().clone();
        snapshot.uptime_ms = snapshot.ready_at.map(|t| millis(t.elapsed()));
        snapshot.retry_in_ms = snapshot
            .retry_at
            .map(|t| millis(t.saturating_duration_since(tokio::time::Instant::now())));
        snapshot
    }

    /// Gives the server a new configuration (the fleet file changed,
    /// docs/design.md §16). Its settings (deadlines, restart, health, idle stop)
    /// apply as soon as the authority wakes, before any request sent after this;
    /// its definition applies to the next generation: a running one is left as it
    /// is, and [`Intent::Converge`] restarts it if its definition differs.
    /// A configuration for another server is ignored.
    pub fn configure(&self, config: ServerConfig) {
        if config.name == *self.name {
            self.config.send_replace(config);
        }
    }

    /// The authority's published state, to be told of every change.
    pub fn changes(&self) -> watch::Receiver<Snapshot> {
        self.published.clone()
    }
}

/// How often the uses of a server reach its authority: at most one touch per
/// [`Touches::EVERY`], shared by every handle of the server. The idle timer then
/// counts from a use at most that much older than the last, and a busy server's
/// authority is not woken for every call.
pub(super) struct Touches {
    since: Instant,
    /// When the last touch was sent, in milliseconds after `since`, plus one
    /// (0: never).
    last: std::sync::atomic::AtomicU64,
}

impl Touches {
    const EVERY: Duration = Duration::from_millis(50);

    pub(super) fn new() -> Touches {
        Touches {
            since: Instant::now(),
            last: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether a touch is due now; if so, it counts as sent.
    fn due(&self) -> bool {
        use std::sync::atomic::Ordering;
        let now = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
        let last = self.last.load(Ordering::Relaxed);
        let every = Touches::EVERY.as_millis() as u64;
        (last == 0 || now.saturating_sub(last) >= every)
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::Touches;

    #[test]
    fn a_touch_is_due_at_first_then_once_per_period() {
        let t = Touches::new();
        assert!(t.due());
        assert!(!t.due());
        assert!(!t.due());
        std::thread::sleep(Touches::EVERY);
        assert!(t.due());
        assert!(!t.due());
    }
}
