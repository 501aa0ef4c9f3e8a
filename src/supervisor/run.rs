//! The supervisor's life, step by step (docs/design.md §3):
//!
//! ```text
//!  lock (held for life) ─► state.json ─► recovery (L10) ─► authorities ─► fleet task ─► socket ─► serve
//!                                                                                          │
//!           exit when every server is down and no request is pending ◄────────────────────┘
//! ```
//!
//! Exactly one supervisor per state directory holds the lock; a second one waits a
//! moment for it (a predecessor may be exiting) and otherwise leaves. The socket is
//! created only by the lock holder, after removing a stale one, so a dead
//! supervisor's socket never blocks the next. Nothing is started before recovery has
//! dealt with what the previous supervisor left running.

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::answer::{Answer, Response};
use super::dispatch::dispatch;
use super::events::EventLog;
use super::fixed::Fixed;
use super::handle::FleetHandle;
use super::persist::StateFile;
use super::roster::{Held, Roster};
use super::{fleet, gateway_door, guardian, recovery, server};
use crate::config::Fleet;
use crate::host::{self, Foreground, Press, Signals};
use crate::lifecycle::authority::{CallOptions, Context};
use crate::lifecycle::events::{Cause, Event, EventSink, millis, rfc3339};
use crate::lifecycle::state::{Intent, Phase};
use crate::output::exit::Code;
use crate::output::report::{Report, ServerReport};
use crate::platform;
use crate::process::limits::OpenFiles;
use crate::protocol::{self, Op};
use crate::state::rotation::{self, RotatingFile};
use crate::state::{Persisted, StateDir, SupervisorRecord, lock_before, open_rw, tag_scope};

/// How long a new supervisor waits for the lock of one that is exiting.
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// How long an idle supervisor (nothing running, no request) stays before it
/// exits; none after a `down` of the whole fleet (the fleet task's
/// `leave_after_down`).
const IDLE_LINGER: Duration = Duration::from_secs(2);

/// How long recovery waits for a dead predecessor's guardian to list what it
/// adopted (it does so within milliseconds of the death).
const ADOPTED_WAIT: Duration = Duration::from_secs(2);

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
) -> anyhow::Result<Code> {
    let Some(mut lock) = take_lock(&dir).await? else {
        tracing::info!("another supervisor holds {}", dir.lock().display());
        return Ok(Code::Ok);
    };
    // Spans, when the environment asks for them (docs/design.md §17).
    let traces = crate::trace::start(&fleet);
    let files = claim(&mut lock, &dir, &fleet, source.as_deref())?;
    let (state, events) = recover(&dir, &fleet).await?;
    let kept = Kept {
        hosts: join(&fleet, &state, &dir).await?,
        state,
        events: events.clone(),
    };
    // From here on, every transition of every authority reaches the idle watch.
    let transitions = events.subscribe();
    let tracker = TaskTracker::new();
    let ctx = Context {
        events: events.clone(),
        interrupt: CancellationToken::new(),
        shutdown: CancellationToken::new(),
        escalate: CancellationToken::new(),
        tracker: tracker.clone(),
        tag_scope: tag_scope(&dir),
        start_slots: crate::lifecycle::authority::start_slots(
            crate::lifecycle::authority::default_start_slots(),
        ),
    };
    let handle = assemble(fleet, version, &dir, kept, files, &ctx);
    #[cfg(feature = "etcd")]
    if let Some(hosts) = handle.fixed.hosts.clone() {
        ctx.tracker
            .spawn(super::follow::fence_watch(hosts.clone(), handle.clone()));
        ctx.tracker
            .spawn(super::follow::follow(hosts, handle.clone()));
    }
    let mut signals = Signals::new()?;
    if let Some(fg) = foreground {
        start_foreground(&handle, fg);
    }
    let result = server::serve(&dir, handle.clone(), transitions, IDLE_LINGER, &mut signals).await;
    let _ = std::fs::remove_file(dir.socket());
    handle.close_metrics().await;
    // No takeover once the supervisor leaves: what it stops is given up, and
    // the other hosts take it over (docs/design.md §19).
    #[cfg(feature = "etcd")]
    let hosts = handle.fixed.hosts.clone();
    #[cfg(feature = "etcd")]
    if let Some(hosts) = &hosts {
        hosts.stop.cancel();
    }
    let teardown = tear_down(handle, result.as_ref().ok().cloned(), &ctx, &mut signals).await;
    #[cfg(feature = "etcd")]
    if let Some(hosts) = hosts {
        hosts.leave().await;
    }
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

/// What the lock holder does first: rotates `supervisor.log`, writes its pid in
/// the lock, records the fleet file it runs, becomes the subreaper of its
/// servers' trees, and raises its open-files limit, which it returns.
fn claim(
    lock: &mut File,
    dir: &StateDir,
    fleet: &Fleet,
    source: Option<&str>,
) -> anyhow::Result<OpenFiles> {
    // Only the lock holder rotates the log it shares with any supervisor that
    // lost the race.
    rotation::keep_supervisor_log(&dir.supervisor_log(), fleet.supervisor.rotation);
    let me = std::process::id() as i32;
    let _ = lock.set_len(0);
    let _ = writeln!(lock, "{me}");
    // The copy of the fleet file is what this supervisor runs: `down`, `status`,
    // `logs` and `events` use it if the file goes away (docs/design.md §3).
    if let Some(source) = source {
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
    Ok(files)
}

/// Records this supervisor in `state.json`, opens the event log, and deals with
/// what a previous supervisor left running (L10, L13), each recovery recorded as
/// an event.
async fn recover(dir: &StateDir, fleet: &Fleet) -> anyhow::Result<(Arc<StateFile>, Arc<EventLog>)> {
    let me = std::process::id() as i32;
    let doc = Persisted::load(&dir.state())?;
    let previous = doc.supervisor.clone();
    let state = Arc::new(StateFile::new(dir.state(), doc));
    state.update(|d| {
        d.supervisor = Some(SupervisorRecord {
            pid: me,
            start_time: platform::stat(me).map(|s| s.start_time),
            boot_id: platform::boot_id(),
            guardian: guardian::guardian(),
        });
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
    let scope = tag_scope(dir);
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
    Ok((state, events))
}

/// The membership of this host in a fleet that spans hosts: joined in etcd
/// when the fleet file has `coordination:` (docs/design.md §19).
#[cfg(feature = "etcd")]
type Membership = Option<Arc<super::hosts::Hosts>>;
#[cfg(not(feature = "etcd"))]
type Membership = Option<std::convert::Infallible>;

/// What the supervisor keeps of the fleet: `state.json`, the event log, and
/// its membership of a fleet that spans hosts.
struct Kept {
    state: Arc<StateFile>,
    events: Arc<EventLog>,
    hosts: Membership,
}

#[cfg(feature = "etcd")]
async fn join(fleet: &Fleet, state: &Arc<StateFile>, dir: &StateDir) -> anyhow::Result<Membership> {
    match fleet.coordination {
        None => Ok(None),
        Some(_) => {
            let hosts = super::hosts::Hosts::join(fleet, state.clone(), dir).await?;
            // The fleet's token, kept where a token of one host is, for
            // `serve` to show and every door to take (docs/design.md §19).
            if fleet.gateway.token.is_none() {
                let file = dir.root().join(super::doors::TOKEN_FILE);
                super::doors::keep_token(&file, &hosts.token).map_err(|e| {
                    anyhow::anyhow!("cannot keep the fleet's token in {}: {e}", file.display())
                })?;
            }
            Ok(Some(hosts))
        }
    }
}

#[cfg(not(feature = "etcd"))]
async fn join(fleet: &Fleet, _state: &Arc<StateFile>, _dir: &StateDir) -> anyhow::Result<Membership> {
    match fleet.coordination {
        None => Ok(None),
        Some(_) => Err(anyhow::anyhow!("{}", crate::config::NO_ETCD)),
    }
}

/// Creates the gateway and one authority per server of `fleet` (each going on
/// from what `state.json` recorded of it), attaches them to the gateway, and
/// starts the fleet task that owns them.
fn assemble(
    fleet: Fleet,
    version: Option<protocol::FileVersion>,
    dir: &StateDir,
    kept: Kept,
    files: OpenFiles,
    ctx: &Context,
) -> FleetHandle {
    let Kept {
        state,
        events,
        hosts,
    } = kept;
    let persisted = state.snapshot();
    #[cfg(feature = "etcd")]
    let ledger: Arc<dyn crate::lifecycle::ledger::Ledger> = match &hosts {
        Some(h) => Arc::new(super::hosts::HostLedger(h.clone())),
        None => state.clone(),
    };
    #[cfg(not(feature = "etcd"))]
    let ledger: Arc<dyn crate::lifecycle::ledger::Ledger> = {
        let _ = hosts;
        state.clone()
    };
    let journal = crate::gateway::Journal::open(&dir.gateway_log());
    let gateway = gateway_door::new(&fleet, events.clone(), journal);
    let held: Vec<Held> = fleet
        .servers
        .iter()
        .enumerate()
        .map(|(slot, spec)| {
            let rec = persisted
                .servers
                .get(&spec.name)
                .cloned()
                .unwrap_or_default();
            Held::new(spec.clone(), slot, rec, dir, &gateway, &ledger, ctx)
        })
        .collect();
    let handles: Vec<_> = held.iter().map(|h| h.handle.clone()).collect();
    gateway_door::attach(&gateway, &fleet, &handles, &ctx.tracker);
    let fixed = Arc::new(Fixed {
        events,
        state,
        ledger,
        #[cfg(feature = "etcd")]
        hosts,
        shutdown: CancellationToken::new(),
        interrupt: ctx.interrupt.clone(),
        gateway,
        dir: dir.clone(),
        tracker: ctx.tracker.clone(),
        authorities: ctx.clone(),
        files,
    });
    let roster = Roster {
        fleet,
        source: None,
        version,
        servers: held,
    };
    fleet::spawn(fixed, roster)
}

/// `up --foreground`: the servers it names are started as `up` starts them, and
/// its caller told of the report.
fn start_foreground(handle: &FleetHandle, fg: Foreground<Report>) {
    let handle = handle.clone();
    handle.fixed.tracker.clone().spawn(async move {
        let op = Op::Up {
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
        } = dispatch(op, &handle, &tx).await
        {
            (fg.on_started)(report);
        }
    });
}

/// Whatever still runs is torn down before the supervisor goes (L6, L9); the
/// requests still being answered (`connections`) finish too. A second signal
/// meanwhile SIGKILLs what is left of every live generation; a third exits at
/// once.
async fn tear_down(
    handle: FleetHandle,
    connections: Option<TaskTracker>,
    ctx: &Context,
    signals: &mut Signals,
) -> Code {
    let stopping = async move {
        let code = stop_all(&handle).await;
        drop(handle);
        if let Some(c) = connections {
            c.wait().await;
        }
        code
    };
    tokio::pin!(stopping);
    loop {
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
    }
}

/// Tears down every running server (supervisor shutdown) and returns the code of
/// the outcome, as `down` would rank it.
async fn stop_all(fleet: &FleetHandle) -> Code {
    let handles = &fleet.handles();
    let replies = host::request_all(handles, Intent::Stop, CallOptions::default(), |_| {}).await;
    handles
        .iter()
        .zip(replies)
        .map(|(h, r)| ServerReport::of_reply(h.name(), r, Intent::Stop, false).exit_code)
        .map(Code::from_i32)
        .fold(Code::Ok, Code::max)
}
