//! The supervisor: one process per fleet that holds the authority of every server
//! and serves the CLI over a Unix control socket (docs/design.md §3).
//!
//! ```text
//!  lock (held for life) ─► state.json ─► recovery (L10) ─► authorities ─► socket ─► serve
//!                                                                            │
//!           exit when every server is down and no request is pending ◄──────┘
//! ```
//!
//! Exactly one supervisor per state directory holds the lock; a second one waits a
//! moment for it (a predecessor may be exiting) and otherwise leaves. The socket is
//! created only by the lock holder, after removing a stale one, so a dead
//! supervisor's socket never blocks the next. Nothing is started before recovery has
//! dealt with what the previous supervisor left running.

pub mod calls;
pub mod converge;
pub mod gateway_door;
pub mod guardian;
pub mod handover;
pub mod metrics_door;
pub mod persist;
pub mod recovery;
pub mod roster;
pub mod server;

/// The state directory under the path it has in the supervisor, for the tests
/// that reach it there; it is the module `state`, which the CLI uses as well.
pub use crate::state as state_dir;
pub use crate::state::tag_scope;

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Fleet, Rotation};
use crate::host::{Foreground, Press, Signals, Unnamed};
use crate::lifecycle::authority::{Context, Handle};
use crate::lifecycle::events::{Cause, Event, EventSink, millis, rfc3339};
use crate::lifecycle::state::Phase;
use crate::metrics::Metrics;
use crate::output::calls::CallReport;
use crate::output::report::{EventReport, Report, SupervisorReport};
use crate::platform;
use crate::protocol::{self, MetricsText};
use crate::state::{Persisted, SupervisorRecord};
use persist::StateFile;
use crate::state::rotation::{self, RotatingFile};
use crate::state::{StateDir, lock_before, open_rw};

/// How long a new supervisor waits for the lock of one that is exiting.
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// How long an idle supervisor (nothing running, no request) stays before it
/// exits; none after a `down` of the whole fleet (`Shared::leave_after_down`).
const IDLE_LINGER: Duration = Duration::from_secs(2);

/// How long recovery waits for a dead predecessor's guardian to list what it
/// adopted (it does so within milliseconds of the death).
const ADOPTED_WAIT: Duration = Duration::from_secs(2);

/// The event log: every transition is appended to `events.ndjson` before the
/// request that caused it is answered (L12), and offered to the requests in flight.
/// The file is rotated at the fleet file's `supervisor.max_file_size`
/// (`state/rotation.rs`).
pub struct EventLog {
    file: Mutex<Option<RotatingFile>>,
    live: broadcast::Sender<Event>,
    /// What the events count up to (docs/design.md §17).
    pub metrics: Arc<Metrics>,
    /// Rotations of `events.ndjson` done by this supervisor, for metrics.
    rotations: AtomicU64,
}

impl EventLog {
    fn new(file: Option<RotatingFile>) -> EventLog {
        let (live, _) = broadcast::channel(1024);
        EventLog {
            file: Mutex::new(file),
            live,
            metrics: Arc::new(Metrics::new()),
            rotations: AtomicU64::new(0),
        }
    }

    /// How many times this supervisor rotated `events.ndjson`.
    pub fn rotations(&self) -> u64 {
        self.rotations.load(Ordering::Relaxed)
    }

    /// Rotates by `rotation` from the next event on.
    pub fn set_rotation(&self, rotation: Rotation) {
        if let Some(f) = self.lock().as_mut() {
            f.set_rotation(rotation);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RotatingFile>> {
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.live.subscribe()
    }

    /// Appends one line to the log, whatever it records.
    fn append<T: Serialize>(&self, entry: &T) {
        let mut line = serde_json::to_string(entry).expect("events serialize");
        line.push('\n');
        let mut file = self.lock();
        match file.as_mut().map(|f| f.append(line.as_bytes())) {
            Some(Ok(true)) => {
                self.rotations.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => tracing::error!(error = %e, "cannot append to the event log"),
            Some(Ok(false)) | None => {}
        }
    }

    /// Records a gateway client session opening or closing (G7).
    pub fn gateway_session(&self, event: &gateway_door::SessionLine) {
        self.append(event);
    }
}

impl EventSink for EventLog {
    fn record(&self, event: &Event) {
        self.append(event);
        self.metrics.observe(event);
        crate::trace::record(event);
        let _ = self.live.send(event.clone());
    }

    fn accepted(&self, server: &str, waited: Duration) {
        self.metrics.accepted(server, waited);
    }

    fn busy(&self, server: &str) {
        self.metrics.busy(server);
    }
}

/// The report of a request, as the supervisor sends it.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// `up`, `down`, `status`, `reconnect`, `reset` and `ping`.
    Report(Report),
    /// `tools` and `call`.
    Call(CallReport),
    /// `metrics`.
    Metrics(MetricsText),
}

/// A line the supervisor sends on the control socket (docs/design.md §9).
pub type Response = protocol::Response<EventReport, Answer>;

/// What the request handlers share.
pub struct Shared {
    /// The fleet file as last given and the authority of each server it named
    /// (docs/design.md §16). Locked only for moments, never across an await.
    pub roster: Mutex<roster::Roster>,
    pub events: Arc<EventLog>,
    pub state: Arc<StateFile>,
    /// Set when the supervisor is shutting down; new requests are refused.
    pub shutdown: CancellationToken,
    /// The authorities' interrupt: cancelled on a signal, it ends starts in progress.
    pub interrupt: CancellationToken,
    /// The fleet as one MCP server, for `connect` and `serve` (docs/design.md §14).
    pub gateway: Arc<crate::gateway::Gateway>,
    /// Where the gateway's HTTP door listens, once `serve` opened it.
    pub http: Mutex<Option<gateway_door::Listening>>,
    pub dir: StateDir,
    /// Work that lives as long as the supervisor (the HTTP door).
    pub tracker: TaskTracker,
    /// What the authority of a server added to the fleet file is created with.
    pub authorities: Context,
    /// The metrics' own door (`metrics.listen`), while open.
    pub metrics_door: Mutex<Option<metrics_door::MetricsDoor>>,
    /// Set by a `down` of the whole fleet that found nothing else needing the
    /// supervisor: it exits as soon as it is idle, without lingering.
    pub exit_when_idle: AtomicBool,
    /// Gateway sessions of `connect` (each on a control connection of its own).
    pub stdio_sessions: AtomicUsize,
    /// The open-files limit, which the HTTP doors' caps are fitted within.
    pub files: crate::process::limits::OpenFiles,
    /// This, for what outlives a request (the metrics a door renders).
    me: std::sync::Weak<Shared>,
}

impl Shared {
    /// Where the gateway's HTTP door is open, if it is.
    pub fn listening(&self) -> Option<gateway_door::Listening> {
        self.http.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Closes the gateway's HTTP door, if open.
    pub fn close_http(&self) {
        let open = self.http.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(open) = open {
            tracing::info!(addr = %open.addr, "gateway: HTTP door closed");
            self.gateway
                .note(format_args!("HTTP door at {} closed", open.addr));
            open.stop.cancel();
        }
    }

    /// The metrics as a scrape sees them now (docs/design.md §17).
    pub fn metrics(&self, format: crate::metrics::exposition::Format) -> String {
        self.prepare_metrics(format).render()
    }

    /// What [`metrics`](Self::metrics) shows, taken now and written later.
    fn prepare_metrics(
        &self,
        format: crate::metrics::exposition::Format,
    ) -> crate::metrics::Prepared {
        use crate::metrics::{ProcessView, ServerView, View};
        let servers = self
            .handles()
            .iter()
            .map(|h| {
                let s = h.published();
                ServerView {
                    name: s.name,
                    state: s.state,
                    generation: s.generation,
                    uptime: s.uptime_ms.map(Duration::from_millis),
                    queued: Some(h.queued()),
                    escaped: s.last_teardown.map_or(0, |t| t.escaped_pids.len()),
                }
            })
            .collect();
        let view = View {
            servers,
            gateway_sessions: Some(self.gateway.sessions()),
            rotations: vec![
                ("events", self.events.rotations()),
                ("supervisor", rotation::supervisor_log_rotations()),
            ],
            process: crate::platform::own_usage().map(|u| ProcessView {
                resident_bytes: u.resident_bytes,
                open_fds: u.open_fds,
                cpu_seconds: u.cpu_seconds,
                start_time_seconds: u.start_time_seconds,
            }),
        };
        crate::metrics::prepare(Some(&self.events.metrics), view, format)
    }

    /// What renders the metrics for an HTTP door, for as long as this lives.
    pub fn scrape(&self) -> crate::metrics::http::Render {
        let me = self.me.clone();
        Arc::new(move |format| {
            me.upgrade().map(|shared| shared.prepare_metrics(format))
        })
    }

    pub(crate) fn roster(&self) -> std::sync::MutexGuard<'_, roster::Roster> {
        self.roster.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fleet file as the supervisor last took it up.
    pub fn fleet(&self) -> Fleet {
        self.roster().fleet.clone()
    }

    /// Every server's authority: the fleet file's, then the orphans'.
    pub fn handles(&self) -> Vec<Handle> {
        self.roster()
            .servers
            .iter()
            .map(|h| h.handle.clone())
            .collect()
    }

    pub fn handle(&self, name: &str) -> Option<Handle> {
        self.roster().held(name).map(|h| h.handle.clone())
    }

    /// The authorities of the servers a request is about: the named ones (each
    /// must be held: in the fleet file, or an orphan), or with no names the
    /// file's enabled ones (`Unnamed::Enabled`) or every one held, orphans
    /// included (`Unnamed::All`). An unknown name is a usage error.
    pub fn select(&self, names: &[String], unnamed: Unnamed) -> Result<Vec<Handle>, String> {
        self.roster().select(names, unnamed)
    }

    /// After a `down` of the whole fleet: what keeps this supervisor running, if
    /// anything; else it is told to exit as soon as it is idle (no lingering), so
    /// that the `down` waiting for it returns with nothing of the fleet left
    /// (docs/design.md §3).
    pub fn leave_after_down(&self) -> SupervisorReport {
        let running: Vec<String> = self
            .handles()
            .iter()
            .filter(|h| {
                matches!(
                    h.published().state,
                    Phase::Running | Phase::Starting | Phase::Stopping | Phase::Backoff
                )
            })
            .map(|h| h.name().to_owned())
            .collect();
        let sessions = self.stdio_sessions.load(Ordering::SeqCst);
        let stays = if !running.is_empty() {
            Some(format!(
                "servers were started again since the `down` began: {}",
                running.join(", ")
            ))
        } else if sessions > 0 {
            Some(format!(
                "{sessions} gateway client session(s) of `mcpfleet connect` are open; it exits once they close"
            ))
        } else if self.listening().is_some() {
            Some("the gateway's HTTP door was opened again since the `down` began".to_owned())
        } else {
            None
        };
        if stays.is_none() {
            self.exit_when_idle.store(true, Ordering::SeqCst);
        }
        SupervisorReport {
            pid: std::process::id() as i32,
            guardian: guardian::guardian().map(|g| g.pid),
            stays,
            exited: false,
        }
    }
}

/// Takes the supervisor lock, waiting a moment for a predecessor that is exiting.
/// `None`: another supervisor is running.
async fn take_lock(dir: &StateDir) -> anyhow::Result<Option<File>> {
    let lock = open_rw(&dir.lock())?;
    // Another supervisor that is serving is not exiting: nothing for this one to do.
    let serving = async || match dir.socket_path() {
        Ok(socket) => tokio::net::UnixStream::connect(socket.as_path())
            .await
            .is_ok(),
        Err(_) => false,
    };
    let taken = lock_before(&lock, Instant::now() + LOCK_WAIT, serving).await?;
    Ok(taken.then_some(lock))
}

/// Runs the supervisor of `fleet` until it is idle or told to stop, and returns the
/// code of its final teardown (5 when something was left). `source` is the fleet
/// file's text as read, recorded in the state directory once the lock is held
/// (`None`: the fleet comes from that record, its file being gone); `version`
/// is the version of the file that text is, when known (docs/design.md §16,
/// R6). A first SIGINT
/// or SIGTERM tears every server down; a second SIGKILLs what is left of every live
/// generation; a third exits at once.
pub async fn run(
    fleet: Fleet,
    dir: StateDir,
    source: Option<String>,
    version: Option<protocol::FileVersion>,
    foreground: Option<Foreground<Report>>,
) -> anyhow::Result<crate::output::exit::Code> {
    let Some(mut lock) = take_lock(&dir).await? else {
        tracing::info!("another supervisor holds {}", dir.lock().display());
        return Ok(crate::output::exit::Code::Ok);
    };
    // Spans, when the environment asks for them (docs/design.md §17).
    let traces = crate::trace::start(&fleet);
    // Only the lock holder rotates the log it shares with any supervisor that
    // lost the race.
    rotation::keep_supervisor_log(&dir.supervisor_log(), fleet.supervisor.rotation);
    let me = std::process::id() as i32;
    let _ = lock.set_len(0);
    let _ = writeln!(lock, "{me}");
    // The copy of the fleet file is what this supervisor runs: `down`, `status`,
    // `logs` and `events` use it if the file goes away (docs/design.md §3).
    if let Some(source) = &source {
        crate::state::record_fleet(dir.root(), &fleet.file, source).map_err(|e| {
            anyhow::anyhow!(
                "cannot record the fleet file in {}: {e}",
                dir.root().display()
            )
        })?;
    }
    // Orphans of our servers are re-parented to us rather than to init, so the tree
    // of every server stays below the supervisor.
    crate::process::lineage::become_subreaper();
    let files = crate::process::limits::raise_open_files();
    if let Some(warning) = files.shortfall(fleet.servers.len()) {
        tracing::warn!("{warning}");
    }

    let doc = Persisted::load(&dir.state())?;
    let previous = doc.supervisor.clone();
    let state = Arc::new(StateFile::new(dir.state(), doc));
    state.update(|d| {
        d.supervisor = Some(SupervisorRecord {
            pid: me,
            start_time: platform::stat(me).map(|s| s.start_time),
            boot_id: platform::boot_id(),
            guardian: guardian::guardian(),
        })
    })?;
    // What the predecessor's guardian adopted when it died: processes of the
    // fleet's tree, some of which nothing else identifies (L10, L13).
    let adopted = match &previous {
        Some(p) if p.pid != me => {
            let (root, pid, guardian) = (dir.root().to_owned(), p.pid, p.guardian);
            tokio::task::spawn_blocking(move || {
                guardian::adopted_from(&root, pid, guardian, ADOPTED_WAIT)
            })
            .await
            .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    // Without its event log the supervisor cannot keep L12: it does not start.
    let rotation = fleet.supervisor.rotation;
    let log = RotatingFile::open(&dir.events(), rotation)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", dir.events().display()))?;
    let events = Arc::new(EventLog::new(Some(log)));
    let scope = tag_scope(&dir);

    // A server no longer in the fleet file gets the default cleanup deadline.
    let cleanup_of = |name: &str| {
        fleet
            .server(name)
            .map_or(crate::config::duration::DEFAULT_TIMEOUT, |s| {
                s.cleanup_timeout
            })
    };
    for r in recovery::recover(&scope, &state, &adopted, &cleanup_of).await {
        tracing::warn!(server = %r.server, generation = r.generation, pids = ?r.pids, outcome = ?r.outcome, signal = ?r.signal, "recovered a generation left by a previous supervisor");
        events.record(&Event {
            time: rfc3339(SystemTime::now()),
            server: r.server.clone(),
            generation: Some(r.generation),
            from: Phase::Running,
            to: if r.leftover_pids.is_empty() {
                Phase::Stopped
            } else {
                Phase::Quarantined
            },
            cause: Cause::Recovery,
            duration_ms: millis(r.duration),
            waited_ms: 0,
            error: None,
            teardown: Some(r.outcome),
        });
    }

    // From here on, every transition of every authority reaches the idle watch.
    let transitions = events.subscribe();
    let tracker = TaskTracker::new();
    let ctx = Context {
        events: events.clone(),
        interrupt: CancellationToken::new(),
        shutdown: CancellationToken::new(),
        escalate: CancellationToken::new(),
        tracker: tracker.clone(),
        tag_scope: scope,
        start_slots: crate::lifecycle::authority::start_slots(
            crate::lifecycle::authority::default_start_slots(),
        ),
    };
    let persisted = state.snapshot();
    let journal = crate::gateway::Journal::open(&dir.gateway_log());
    let gateway = gateway_door::new(&fleet, events.clone(), journal);
    let held: Vec<roster::Held> = fleet
        .servers
        .iter()
        .enumerate()
        .map(|(slot, spec)| {
            let rec = persisted
                .servers
                .get(&spec.name)
                .cloned()
                .unwrap_or_default();
            roster::Held::new(spec.clone(), slot, rec, &dir, &gateway, &state, &ctx)
        })
        .collect();
    let handles: Vec<Handle> = held.iter().map(|h| h.handle.clone()).collect();
    gateway_door::attach(&gateway, &fleet, &handles, &tracker);
    let shared = Arc::new_cyclic(|me| Shared {
        me: me.clone(),
        files,
        metrics_door: Mutex::new(None),
        exit_when_idle: AtomicBool::new(false),
        stdio_sessions: AtomicUsize::new(0),
        roster: Mutex::new(roster::Roster {
            fleet: fleet.clone(),
            source: None,
            version,
            servers: held,
        }),
        events,
        state,
        shutdown: CancellationToken::new(),
        interrupt: ctx.interrupt.clone(),
        gateway,
        http: Mutex::new(None),
        dir: dir.clone(),
        tracker: tracker.clone(),
        authorities: ctx.clone(),
    });

    shared.follow_metrics_listen();
    let mut signals = Signals::new()?;
    if let Some(fg) = foreground {
        let shared = shared.clone();
        tokio::spawn(async move {
            let op = crate::protocol::Op::Up {
                servers: fg.servers,
                force: false,
                deadlines: Default::default(),
                fleet: None,
                dry_run: false,
                remove_orphans: false,
            };
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            if let Response::Reply {
                report: Answer::Report(report),
            } = server::dispatch(op, &shared, &tx).await
            {
                (fg.on_started)(report);
            }
        });
    }
    let result = server::serve(&dir, shared.clone(), transitions, IDLE_LINGER, &mut signals).await;
    let _ = std::fs::remove_file(dir.socket());
    shared.close_metrics();

    // Whatever still runs is torn down before the supervisor goes (L6, L9); the
    // requests still being answered finish too.
    let stopping = {
        let shared = shared.clone();
        let connections = result.as_ref().ok().cloned();
        async move {
            let code = server::stop_all(shared).await;
            if let Some(c) = connections {
                c.wait().await;
            }
            code
        }
    };
    tokio::pin!(stopping);
    let teardown = loop {
        tokio::select! {
            code = &mut stopping => break code,
            // The first signal ended `serve`; after an idle exit, the first one
            // here already escalates.
            press = signals.next() => {
                if press == Press::Exit {
                    eprintln!("mcpfleet: third signal: exiting now, without waiting for teardown");
                    std::process::exit(130);
                }
                eprintln!("mcpfleet: second signal: SIGKILL to every live generation");
                ctx.escalate.cancel();
            }
        }
    };
    drop(shared);
    ctx.shutdown.cancel();
    tracker.close();
    tracker.wait().await;
    drop(lock);
    // After the lock: a collector that does not answer delays this process's
    // exit by the export timeout, never the next supervisor.
    if let Some(traces) = traces {
        traces.finish().await;
    }
    result.map(|_| teardown)
}
