//! What every host of authorities shares: `check`, which runs them in the CLI
//! process, and the supervisor (docs/design.md §3). Which servers a command is
//! about, one intent sent to many authorities with the replies kept in fleet
//! order, "start, then call" (how `call`, `tools SERVER` and the gateway reach
//! a server), and the ladder of Ctrl-C: the first interrupts, the second
//! escalates, the third exits.

use std::future::Future;

use tokio::task::JoinSet;

use crate::config::{Fleet, ServerSpec};

use crate::lifecycle::authority::{CallOptions, Handle, NotRunning, Reach, Reply, RequestError};
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::state::Intent;

/// "Start, then call" (G2): the running generation of `handle`'s server and
/// its session, the server being started first (a start request to its
/// authority, L1 to L13 apply) when it is not running.
pub(crate) async fn start_then_reach(
    handle: &Handle,
    options: CallOptions,
) -> Result<Reach, Unreached> {
    handle.running(options).await.map_err(Unreached)
}

/// Why [`start_then_reach`] could not reach a server.
pub(crate) struct Unreached(NotRunning);

impl Unreached {
    /// The outcome of the start request, when the start is what failed (a
    /// report shows it as the server's line); else, the server having started
    /// and stopped again, that as an error of the server.
    pub(crate) fn start(self) -> Result<Box<Result<Reply, RequestError>>, ServerError> {
        match self.0 {
            NotRunning::NotStarted(started) => Ok(started),
            NotRunning::StoppedAgain => Err(stopped_again()),
            NotRunning::Refused(e) => Err(e),
        }
    }

    /// Why, as one error of the server (what the gateway answers its client).
    pub(crate) fn into_error(self) -> ServerError {
        match self.start() {
            Ok(started) => match *started {
                Ok(reply) => reply.result.err().unwrap_or_else(stopped_again),
                Err(e) => ServerError::new(ErrorKind::Busy, ErrorPhase::Request, e.to_string()),
            },
            Err(e) => e,
        }
    }
}

/// A server that started, and stopped again before its peer was read.
fn stopped_again() -> ServerError {
    ServerError::new(
        ErrorKind::ConnectFailed,
        ErrorPhase::Running,
        "the server stopped right after it started",
    )
}

/// What `up --foreground` asks of the supervisor it runs in the terminal. `R` is
/// the report of the start, whose type this module does not know.
pub struct Foreground<R> {
    /// The servers to start (empty: every enabled one).
    pub servers: Vec<String>,
    /// Called with the report of the start.
    pub on_started: Box<dyn FnOnce(R) + Send>,
}

/// Names that are no server of the fleet, as they were given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no server named {} in this fleet", self.quoted())]
pub(crate) struct UnknownServers(pub Vec<String>);

impl UnknownServers {
    /// The names, each in backquotes: "`a`, `b`".
    pub(crate) fn quoted(&self) -> String {
        self.0
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Which servers a command without names is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unnamed {
    /// Every enabled server.
    Enabled,
    /// Every server, disabled ones too (`down`, so that nothing is left running).
    All,
}

/// The servers a command is about: the named ones, each once, in the order they
/// were named, all of which must exist; with no names, those `unnamed` says.
pub(crate) fn select<'f>(
    fleet: &'f Fleet,
    names: &[String],
    unnamed: Unnamed,
) -> Result<Vec<&'f ServerSpec>, UnknownServers> {
    if names.is_empty() {
        return Ok(fleet
            .servers
            .iter()
            .filter(|s| s.enabled || unnamed == Unnamed::All)
            .collect());
    }
    let mut picked: Vec<&ServerSpec> = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        match fleet.server(name) {
            Some(spec) if !picked.iter().any(|p| p.name == spec.name) => picked.push(spec),
            Some(_) => {}
            None => unknown.push(name.clone()),
        }
    }
    match unknown.is_empty() {
        true => Ok(picked),
        false => Err(UnknownServers(unknown)),
    }
}

/// Runs every task at once and returns their results in the order of the tasks,
/// `None` for one that panicked; `on_done` sees each result as it comes.
pub(crate) async fn join_in_order<F>(
    tasks: impl IntoIterator<Item = F>,
    mut on_done: impl FnMut(&F::Output),
) -> Vec<Option<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut set = JoinSet::new();
    let mut out = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        set.spawn(async move { (i, task.await) });
        out.push(None);
    }
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, result)) => {
                on_done(&result);
                out[i] = Some(result);
            }
            Err(e) => tracing::error!(error = %e, "a task failed"),
        }
    }
    out
}

/// Sends `intent` to every authority at once and returns the replies in the order
/// of `handles`; `on_reply` sees each reply as it comes.
pub(crate) async fn request_all(
    handles: &[Handle],
    intent: Intent,
    options: CallOptions,
    on_reply: impl FnMut(&Result<Reply, RequestError>),
) -> Vec<Result<Reply, RequestError>> {
    let requests = handles
        .iter()
        .cloned()
        .map(|handle| async move { handle.request(intent, options).await });
    let replies = join_in_order(requests, on_reply).await;
    replies
        .into_iter()
        .zip(handles)
        .map(|(r, h)| r.unwrap_or_else(|| Err(RequestError::Gone(h.name().to_owned()))))
        .collect()
}

/// What a SIGINT or SIGTERM asks for, by how many came before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Press {
    /// The first: stop waiting, interrupt starts, tear down (L6, L8).
    Interrupt,
    /// The second: teardowns SIGKILL at once; confirmation still runs.
    Escalate,
    /// The third and later: exit without waiting.
    Exit,
}

/// SIGINT and SIGTERM as one stream, counted.
pub(crate) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    presses: u32,
}

impl Signals {
    pub(crate) fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            presses: 0,
        })
    }

    /// Waits for the next signal.
    pub(crate) async fn next(&mut self) -> Press {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
        self.presses = self.presses.saturating_add(1);
        match self.presses {
            1 => Press::Interrupt,
            2 => Press::Escalate,
            _ => Press::Exit,
        }
    }
}
