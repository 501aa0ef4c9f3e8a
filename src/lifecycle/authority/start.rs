//! Starting a generation: spawn or connect, the handshake and tools/list under
//! the connect deadline, and the teardown of a half start (L2, L3, L8).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::super::core::{Ended, Started};
use super::super::error::{ErrorKind, ErrorPhase, ServerError};
use super::super::ledger::{LiveRecord};
use super::super::state::Generation;
use crate::errors::Detail;
use crate::config::Timeout;
use crate::platform::ExitWatch;
use crate::process::lineage::{Lineage, ProcId};
use crate::process::remote::DeleteProbe;
use crate::process::session::{Session, SessionError};
use crate::process::spawn::{self, Tag};
use crate::process::teardown::ExitKind;

use super::actor::Actor;
use super::config::{Endpoint};
use super::live::{Live, LiveKind, LiveProcess};
use crate::process::session::ListedTool;

impl Actor {
    /// Takes `generation` in the ledger before anything is spawned, so that it is
    /// never given twice, whatever happens next (L3). Refused when the authority
    /// is interrupted or shutting down.
    pub(super) async fn reserve(
        &mut self,
        generation: Generation,
    ) -> Result<Generation, ServerError> {
        if self.ctx.interrupt.is_cancelled() || self.ctx.shutdown.is_cancelled() {
            return Err(ServerError::cancelled("the start"));
        }
        self.started_at = Instant::now();
        self.ledger.reserve(&self.config.name, generation).await
    }

    /// Spawns or connects `generation`, and runs the handshake and tools/list under
    /// the connect deadline. What a failed start acquired is torn down before it
    /// answers (L8).
    pub(super) async fn launch(&mut self, generation: Generation) -> Started {
        // What this generation runs, to tell later whether it is what the fleet
        // file says (docs/design.md §16).
        self.launched = Some(self.config.definition.clone());
        let started = self.started_at;
        let options = self.request.options;
        let failed = |error: ServerError, cleanup: Option<Ended>| Started {
            generation,
            result: Err(error),
            cleanup,
            took: started.elapsed(),
        };
        // Held until the handshake has ended, one way or the other.
        let slot = tokio::select! {
            biased;
            _ = self.ctx.interrupt.cancelled() => None,
            _ = self.ctx.shutdown.cancelled() => None,
            slot = self.ctx.start_slots.clone().acquire_owned() => slot.ok(),
        };
        let Some(_slot) = slot else {
            return failed(ServerError::cancelled("the start"), None);
        };
        let connect_timeout = options
            .connect_timeout
            .unwrap_or(self.config.connect_timeout);
        let deadline = connect_timeout.deadline();
        // The era probe's bound, within the connect deadline (docs/design.md §11).
        let era_bound = crate::process::session::probe_bound(connect_timeout.as_duration());
        type Init = std::pin::Pin<Box<dyn Future<Output = Result<Session, SessionError>> + Send>>;
        let (mut live, init): (Live, Init) = match &self.config.endpoint {
            Endpoint::Stdio(launch) => {
                let tag = Tag::new(&self.ctx.tag_scope, &self.config.name, generation);
                // Until its lineage is tracked, the new process must not be taken
                // for another generation's orphan.
                let spawning = crate::process::lineage::Spawning::begin();
                let lineage = Lineage::prepare(tag.value());
                let mut spawned = match spawn::spawn(
                    launch,
                    tag,
                    &self.config.name,
                    self.config.stderr_log.as_deref(),
                    &self.ctx.tracker,
                ) {
                    Ok(s) => s,
                    Err(e) => return failed(spawn_error(&self.config.command_shown, &e), None),
                };
                // Written while the handshake runs: until it is on disk, a new
                // supervisor still finds the process by its tag.
                let durable = self.ledger.spawned(
                    &self.config.name,
                    LiveRecord {
                        generation,
                        pid: spawned.pid,
                        pgid: spawned.pgid,
                        start_time: spawned.start_time,
                        boot_id: crate::platform::boot_id(),
                        tag: spawned.tag.value().to_owned(),
                        lineage: Vec::new(),
                    },
                );
                let server = self.config.name.clone();
                self.ctx.tracker.spawn(async move {
                    if let Err(e) = durable.await {
                        tracing::error!(server, error = %e, "cannot write state.json (spawned)");
                    }
                });
                let stdout_drain = CancellationToken::new();
                let init: Init = match (spawned.stdout.take(), spawned.stdin.take()) {
                    (Some(stdout), Some(stdin)) => Box::pin(Session::initialize(
                        stdout,
                        stdin,
                        stdout_drain.clone(),
                        self.listener.clone(),
                        self.ctx.tracker.clone(),
                        era_bound,
                    )),
                    _ => Box::pin(async {
                        Err(SessionError::Closed(Detail::words(
                            "the server's pipes were not set up",
                        )))
                    }),
                };
                let root = ProcId {
                    pid: spawned.pid,
                    start_time: spawned.start_time.unwrap_or(0),
                };
                lineage.started(root, spawned.pgid);
                let process = LiveProcess {
                    lineage,
                    stdout_drain,
                    exit: ExitWatch::new(spawned.pid),
                    child: spawned.child,
                    pid: spawned.pid,
                    pgid: spawned.pgid,
                    tag: spawned.tag,
                    stderr: spawned.stderr,
                    stderr_task: spawned.stderr_task,
                };
                drop(spawning);
                (
                    Live::new(generation, LiveKind::Process(Box::new(process))),
                    init,
                )
            }
            Endpoint::Http(remote) => {
                let probe = DeleteProbe::default();
                let remote = remote.clone();
                let init_probe = probe.clone();
                let listener = self.listener.clone();
                let init: Init = Box::pin(async move {
                    Session::initialize_http(&remote, init_probe, listener, era_bound).await
                });
                (Live::new(generation, LiveKind::Remote(probe)), init)
            }
        };
        // A start in progress ends early on an interrupt and on shutdown alike: with
        // `connect_timeout: none` it would otherwise hold the queue forever (L9).
        let interrupt = (&self.ctx.interrupt, &self.ctx.shutdown);
        let connected = async {
            let session = bounded(deadline, interrupt, ErrorPhase::Initialize, init).await?;
            let tools = bounded(
                deadline,
                interrupt,
                ErrorPhase::ListTools,
                session.list_tools(),
            )
            .await;
            match tools {
                Ok(tools) => Ok((session, tools)),
                Err(e) => {
                    session.close(Duration::from_millis(100)).await;
                    Err(e)
                }
            }
        };
        match connected.await {
            Ok((session, tools)) => {
                // What the server started while it got ready (a helper, a daemon)
                // is on disk before it is reported running: a supervisor killed
                // from here on still finds it (L10, L13).
                if let LiveKind::Process(p) = &live.kind
                    && self.ledger.keeps_lineage()
                    && crate::platform::has_children(p.pid)
                {
                    let _ = crate::process::table::fresh(Instant::now()).await;
                    let members = p.lineage.recorded();
                    if !members.is_empty()
                        && let Err(e) = self
                            .ledger
                            .lineage(&self.config.name, generation, members)
                            .await
                    {
                        tracing::error!(server = %self.config.name, error = %e, "cannot write state.json (lineage)");
                    }
                }
                live.server_info = session.server_info();
                live.protocol_version = Some(session.protocol_version());
                live.ready_at = Some(Instant::now());
                live.session = Some(session);
                live.tools = tools.len();
                self.request.listed = Some(tools.iter().map(ListedTool::from).collect());
                let pid = live.pid();
                self.live = Some(live);
                let connect = started.elapsed();
                self.request.connect = Some(connect);
                Started {
                    generation,
                    result: Ok(pid),
                    cleanup: None,
                    took: connect,
                }
            }
            Err(error) => {
                // L8: what the failed start acquired is torn down before answering.
                let cleanup = options
                    .cleanup_timeout
                    .unwrap_or(self.config.cleanup_timeout);
                let stderr = live.stderr_tail();
                let ended = self.tear_down(live, cleanup, Instant::now()).await;
                let stderr = stderr.map_or_else(Vec::new, |t| t.lines());
                let remote = matches!(self.config.endpoint, Endpoint::Http(_));
                let error = describe_start_error(error, ended.exit, connect_timeout, remote)
                    .with_stderr(stderr);
                failed(error, Some(ended))
            }
        }
    }
}

/// Runs one step of a start under the connect deadline and the interrupt.
async fn bounded<T>(
    deadline: Option<tokio::time::Instant>,
    interrupt: (&CancellationToken, &CancellationToken),
    phase: ErrorPhase,
    step: impl Future<Output = Result<T, SessionError>>,
) -> Result<T, ServerError> {
    let step = async {
        match deadline {
            Some(d) => tokio::time::timeout_at(d, step).await.ok(),
            None => Some(step.await),
        }
    };
    let outcome = tokio::select! {
        r = step => r,
        _ = interrupt.0.cancelled() => return Err(ServerError::cancelled("the start")),
        _ = interrupt.1.cancelled() => return Err(ServerError::cancelled("the start")),
    };
    match outcome {
        None => Err(ServerError::new(ErrorKind::ConnectTimeout, phase, "")),
        Some(Ok(v)) => Ok(v),
        Some(Err(SessionError::Closed(m))) => {
            Err(ServerError::new(ErrorKind::ConnectFailed, phase, m.text()))
        }
        Some(Err(SessionError::Http(m) | SessionError::Lost(m))) => {
            Err(ServerError::new(ErrorKind::ConnectFailed, phase, m))
        }
        Some(Err(SessionError::Unauthorized(m))) => {
            Err(ServerError::new(ErrorKind::Unauthorized, phase, m))
        }
        Some(Err(SessionError::AuthRequired(m))) => {
            Err(ServerError::new(ErrorKind::AuthRequired, phase, m))
        }
        Some(Err(SessionError::Protocol(m))) => {
            Err(ServerError::new(ErrorKind::Protocol, phase, m.text()))
        }
    }
}

/// Turns a start error into the message people read: what happened, in which phase.
fn describe_start_error(
    mut error: ServerError,
    exit: Option<ExitKind>,
    connect_timeout: Timeout,
    remote: bool,
) -> ServerError {
    let step = match error.phase {
        ErrorPhase::ListTools => "tools/list",
        _ => "initialize",
    };
    error.message = match error.kind {
        ErrorKind::ConnectTimeout => {
            format!("no answer to {step} within the connect timeout of {connect_timeout}")
        }
        // A remote server has no output to close: what went wrong over HTTP is
        // in the message already.
        ErrorKind::ConnectFailed if remote => format!("{step} failed: {}", error.message),
        ErrorKind::ConnectFailed => match exit {
            Some(exit) if exit != ExitKind::Code(-1) => {
                format!("the server exited during {step} ({exit})")
            }
            _ => format!("the server closed its output during {step}"),
        },
        ErrorKind::Protocol => format!("{step} failed: {}", error.message),
        ErrorKind::Unauthorized => format!("{step} was refused: {}", error.message),
        _ => return error,
    };
    error
}

fn spawn_error(program: &str, e: &std::io::Error) -> ServerError {
    if let Some(log) = e
        .get_ref()
        .and_then(|r| r.downcast_ref::<spawn::LogOpenError>())
    {
        return ServerError::new(ErrorKind::SpawnFailed, ErrorPhase::Spawn, log.to_string());
    }
    let message = match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("cannot run `{program}`: command not found (or `cwd` does not exist)")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("cannot run `{program}`: permission denied")
        }
        _ if crate::platform::too_many_open_files(e) => {
            let limit = crate::process::limits::raise_open_files();
            format!(
                "cannot run `{program}`: too many open files (limit {}, hard limit {}); \
                 each running server holds about {} descriptors: raise the hard limit \
                 (ulimit -Hn) or run fewer servers",
                limit.soft,
                limit.hard,
                crate::process::limits::PER_SERVER
            )
        }
        _ => format!("cannot run `{program}`: {e}"),
    };
    ServerError::new(ErrorKind::SpawnFailed, ErrorPhase::Spawn, message)
}
