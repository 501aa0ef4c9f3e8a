//! The handle to the fleet task (`fleet.rs`): what control connections, gateway
//! sessions and `--foreground` hold. It is cheap to clone: a sender of
//! [`Command`]s, a receiver of the [`View`] the task publishes, and the parts
//! that never change ([`Fixed`]). What only reads (`status`, a request's
//! selection of servers, the metrics) reads the view, with no message and no
//! wait; what changes the roster or the doors is a message, answered once the
//! task has published the view that follows from it.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::answer::Response;
use super::fixed::Fixed;
use super::http_door::Listening;
use super::plan::{Planned, Up};
use super::roster::{self, Roster};
use crate::config::Fleet;
use crate::host::Unnamed;
use crate::lifecycle::authority::Handle;
use crate::output::report::SupervisorReport;
use crate::protocol::FleetSource;

/// What the fleet task publishes after every change: what readers need.
#[derive(Clone)]
pub(super) struct View {
    /// The fleet file as last taken up, and every server held.
    pub roster: Arc<Roster>,
    /// Where the gateway's HTTP door listens, once `serve` opened it.
    pub listening: Option<Listening>,
    /// Set by a `down` of the whole fleet that found nothing else needing the
    /// supervisor: it exits as soon as it is idle, without lingering.
    pub exit_when_idle: bool,
}

/// A message to the fleet task. Those with a `reply` are answered once the
/// view that follows from them is published.
pub(super) enum Command {
    /// Take up `file`, validated from `source` (a request's fleet file).
    TakeUp {
        file: Box<Fleet>,
        source: Box<FleetSource>,
        reply: oneshot::Sender<()>,
    },
    /// Plan an `up` and take up its file (`plan.rs`).
    PlanUp {
        up: Box<Up>,
        file: Option<Box<Fleet>>,
        reply: oneshot::Sender<Result<Planned, Box<Response>>>,
    },
    /// Forget the orphans among these names that are at rest.
    ForgetOrphans {
        names: Vec<String>,
        reply: oneshot::Sender<()>,
    },
    /// Open the gateway's HTTP door (`serve`).
    OpenHttp {
        listen: Option<String>,
        reply: oneshot::Sender<Result<Listening, String>>,
    },
    /// Close the gateway's HTTP door, if it is open: a host of a fleet that
    /// spans hosts whose fleet no longer wants anything running.
    #[cfg_attr(
        not(feature = "etcd"),
        expect(dead_code, reason = "sent only by a host of a fleet that spans hosts")
    )]
    CloseHttp { reply: oneshot::Sender<()> },
    /// A `down` of the whole fleet has stopped every server: close the HTTP
    /// door, and say what keeps the supervisor, if anything.
    AfterDown {
        reply: oneshot::Sender<SupervisorReport>,
    },
    /// A request that may start servers or open a door: no exit without
    /// lingering.
    KeepWhenIdle,
    /// A `connect` session opened (`true`) or closed.
    StdioSession(bool),
    /// The supervisor is leaving: close the metrics door.
    CloseMetrics { reply: oneshot::Sender<()> },
}

/// The handle to the fleet task.
#[derive(Clone)]
pub(super) struct FleetHandle {
    tx: mpsc::UnboundedSender<Command>,
    view: watch::Receiver<Arc<View>>,
    /// What never changes.
    pub fixed: Arc<Fixed>,
}

/// What a request gets once the fleet task is gone (the supervisor is leaving).
const GONE: &str = "the supervisor is shutting down";

impl FleetHandle {
    pub(crate) fn new(
        tx: mpsc::UnboundedSender<Command>,
        view: watch::Receiver<Arc<View>>,
        fixed: Arc<Fixed>,
    ) -> FleetHandle {
        FleetHandle { tx, view, fixed }
    }

    /// The view as last published.
    pub(super) fn view(&self) -> Arc<View> {
        self.view.borrow().clone()
    }

    /// Sends `command` made with a reply channel, and waits for the reply;
    /// `None` once the fleet task has ended.
    async fn ask<T>(&self, command: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(command(reply)).ok()?;
        answer.await.ok()
    }

    /// Every server's authority: the fleet file's, then the orphans'.
    pub(super) fn handles(&self) -> Vec<Handle> {
        let view = self.view();
        view.roster.servers.iter().map(|h| h.handle.clone()).collect()
    }

    /// See [`Roster::select`].
    pub(super) fn select(&self, names: &[String], unnamed: Unnamed) -> Result<Vec<Handle>, String> {
        self.view().roster.select(names, unnamed)
    }

    /// Where the gateway's HTTP door is open, if it is.
    pub(super) fn listening(&self) -> Option<Listening> {
        self.view().listening.clone()
    }

    /// The fleet file a request carries, validated: the roster's own when it is
    /// the file last taken up (validating it again would cost every request as
    /// much as the first).
    pub(super) fn read_file(&self, source: &FleetSource) -> Result<Fleet, String> {
        {
            let view = self.view();
            if view.roster.source.as_ref() == Some(source) {
                return Ok(view.roster.fleet.clone());
            }
        }
        roster::load(source)
    }

    /// Brings the roster to the fleet file a request carries (nothing without
    /// one, or when it is the file last taken up). Starts, restarts and stops
    /// nothing. The file is validated here, by the request, never by the fleet
    /// task.
    pub(super) async fn take_up(&self, source: Option<&FleetSource>) -> Result<(), String> {
        let Some(source) = source else {
            return Ok(());
        };
        if self.view().roster.source.as_ref() == Some(source) {
            return Ok(());
        }
        let file = roster::load(source)?;
        let (file, source) = (Box::new(file), Box::new(source.clone()));
        self.ask(|reply| Command::TakeUp {
            file,
            source,
            reply,
        })
        .await
        .ok_or_else(|| GONE.to_owned())
    }

    /// Plans `up` and takes up its file (`plan.rs`).
    pub(super) async fn plan_up(&self, up: Up, file: Option<Fleet>) -> Result<Planned, Box<Response>> {
        let (up, file) = (Box::new(up), file.map(Box::new));
        self.ask(|reply| Command::PlanUp { up, file, reply })
            .await
            .unwrap_or_else(|| {
                Err(Box::new(Response::Error {
                    message: GONE.to_owned(),
                }))
            })
    }

    /// Forgets the orphans among `names` that are at rest (stopped or failed):
    /// their authorities end once no request holds them. A quarantined orphan
    /// stays, so that its quarantine stays visible (L7).
    pub(super) async fn forget_orphans(&self, names: Vec<String>) {
        self.ask(|reply| Command::ForgetOrphans { names, reply })
            .await;
    }

    /// Opens the gateway's HTTP door, or says where it is open already.
    pub(super) async fn open_http(&self, listen: Option<String>) -> Result<Listening, String> {
        self.ask(|reply| Command::OpenHttp { listen, reply })
            .await
            .unwrap_or_else(|| Err(GONE.to_owned()))
    }

    /// Closes the gateway's HTTP door, if it is open.
    #[cfg(feature = "etcd")]
    pub(super) async fn close_http(&self) {
        self.ask(|reply| Command::CloseHttp { reply }).await;
    }

    /// After a `down` of the whole fleet: closes the HTTP door, and says what
    /// keeps this supervisor running, if anything; else it is told to exit as
    /// soon as it is idle (no lingering), so that the `down` waiting for it
    /// returns with nothing of the fleet left (docs/design.md §3).
    pub(super) async fn after_down(&self) -> SupervisorReport {
        self.ask(|reply| Command::AfterDown { reply })
            .await
            .unwrap_or_else(|| SupervisorReport {
                pid: std::process::id() as i32,
                guardian: super::guardian::guardian().map(|g| g.pid),
                stays: None,
                exited: false,
            })
    }

    /// Takes back the exit a `down` of the whole fleet arranged: idle again
    /// later, the supervisor lingers as usual (docs/design.md §3).
    /// Whether the fleet wants some server running on some host, which keeps
    /// this supervisor as a standby (docs/design.md §19); `None` on one host.
    pub(super) fn standing(&self) -> Option<watch::Receiver<bool>> {
        #[cfg(feature = "etcd")]
        if let Some(hosts) = &self.fixed.hosts {
            return Some(hosts.standing());
        }
        None
    }

    pub(super) fn keep_when_idle(&self) {
        let _ = self.tx.send(Command::KeepWhenIdle);
    }

    /// Counts a `connect` session for as long as the returned guard lives.
    pub(super) fn stdio_session(&self) -> StdioSession {
        let _ = self.tx.send(Command::StdioSession(true));
        StdioSession(self.tx.clone())
    }

    /// Closes the metrics door: the supervisor is leaving.
    pub(super) async fn close_metrics(&self) {
        self.ask(|reply| Command::CloseMetrics { reply }).await;
    }
}

/// A `connect` session, counted while it lives.
pub(super) struct StdioSession(mpsc::UnboundedSender<Command>);

impl Drop for StdioSession {
    fn drop(&mut self) {
        let _ = self.0.send(Command::StdioSession(false));
    }
}
