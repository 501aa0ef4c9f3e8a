//! Verified teardown of a stdio server (rule L5).
//!
//! ```text
//!  close stdin ──► wait `eof` ──► SIGTERM group ──► wait `term` ──► SIGKILL group ──► wait `kill`
//!       │ gone            │ gone                          │ gone                         │
//!       ▼                 ▼                               ▼                              ▼
//!     clean           escalated(TERM)              escalated(KILL)        failed (something left)
//! ```
//!
//! "Gone" means: the group leader has exited *and* no living process is left in its
//! process group. The leader is only reaped at the very end, so that its pid (and
//! with it the group id) cannot be reused by an unrelated process while the group is
//! being signalled. Last, every process that still carries the generation's
//! environment tag is reported, which catches descendants that escaped the group
//! with `setsid`: they make the teardown `failed` rather than silently survive.
//!
//! `teardown` signals only the group it was given. `kill_tagged` signals single
//! processes, each found a moment before by its generation's tag.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use super::procfs::{self, Table};
use super::spawn::Tag;

/// How teardown ended (DESIGN §4, L5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Closing stdin sufficed.
    Clean,
    /// A signal was needed, and then everything was confirmed gone.
    Escalated,
    /// Something could not be confirmed gone within the deadline.
    Failed,
}

/// The strongest signal teardown had to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeardownSignal {
    Term,
    Kill,
}

impl TeardownSignal {
    pub fn name(self) -> &'static str {
        match self {
            TeardownSignal::Term => "SIGTERM",
            TeardownSignal::Kill => "SIGKILL",
        }
    }
}

/// How long each step of teardown may wait. Together they never exceed the
/// server's `cleanup_timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    pub eof: Duration,
    pub term: Duration,
    /// `None` only when the user wrote `cleanup_timeout: none`.
    pub kill: Option<Duration>,
}

impl Grace {
    /// Splits a cleanup deadline: 30% for stdin EOF, 50% after SIGTERM, 20% to
    /// confirm SIGKILL. An unbounded cleanup still escalates after fixed graces but
    /// then waits for confirmation without limit.
    pub fn from_cleanup(cleanup: Option<Duration>) -> Grace {
        match cleanup {
            Some(total) => Grace {
                eof: total.mul_f64(0.3),
                term: total.mul_f64(0.5),
                kill: Some(total.mul_f64(0.2)),
            },
            None => Grace {
                eof: Duration::from_secs(3),
                term: Duration::from_secs(5),
                kill: None,
            },
        }
    }
}

/// What the leader's exit looked like, when it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    Code(i32),
    Signal(i32),
}

impl std::fmt::Display for ExitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exit code {c}"),
            ExitKind::Signal(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "killed by {}", sig.as_str()),
                Err(_) => write!(f, "killed by signal {s}"),
            },
        }
    }
}

/// The result of one teardown.
#[derive(Debug, Clone)]
pub struct TeardownReport {
    pub outcome: Outcome,
    pub signal: Option<TeardownSignal>,
    pub duration: Duration,
    /// Processes of the generation still alive when teardown gave up or finished.
    pub leftover_pids: Vec<i32>,
    /// How the group leader ended, if it was seen to end.
    pub exit: Option<ExitKind>,
    /// Why a teardown without processes (a remote session) failed.
    pub failure: Option<String>,
}

/// The process side of a generation that teardown works on.
pub struct Target<'a> {
    pub child: &'a mut tokio::process::Child,
    pub pid: i32,
    pub pgid: i32,
    pub tag: &'a Tag,
}

/// Polls whether the leader exited, without reaping it.
fn leader_exit(pid: i32) -> Option<ExitKind> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(pid)), flags) {
        Ok(WaitStatus::Exited(_, code)) => Some(ExitKind::Code(code)),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(ExitKind::Signal(sig as i32)),
        Ok(_) => None,
        // ECHILD: already reaped by someone; treat as exited with unknown status.
        Err(nix::errno::Errno::ECHILD) => Some(ExitKind::Code(-1)),
        Err(_) => None,
    }
}

/// Waits until the leader has exited and its group holds no living process, or
/// until `limit` passes (`None`: no limit). Returns the process table that showed
/// the group empty: it was read after the leader's exit was seen, and the checks
/// that follow (orphans to reap, escapees by tag) read the same table.
async fn wait_gone(
    pid: i32,
    pgid: i32,
    exit: &mut Option<ExitKind>,
    limit: Option<Duration>,
) -> Option<Arc<Table>> {
    let deadline = limit.map(|l| Instant::now() + l);
    let mut interval = Duration::from_millis(1);
    loop {
        if exit.is_none() {
            *exit = leader_exit(pid);
        }
        if exit.is_some() {
            let table = procfs::fresh(Instant::now()).await;
            if table.group_members(pgid).is_empty() {
                return Some(table);
            }
        }
        let now = Instant::now();
        let sleep = match deadline {
            Some(d) if now >= d => return None,
            Some(d) => interval.min(d - now),
            None => interval,
        };
        tokio::time::sleep(sleep).await;
        interval = (interval * 2).min(Duration::from_millis(50));
    }
}

fn signal_group(pgid: i32, signal: Signal) {
    // ESRCH means the group is already empty: nothing to do.
    if let Err(e) = killpg(Pid::from_raw(pgid), signal)
        && e != nix::errno::Errno::ESRCH
    {
        tracing::warn!(pgid, signal = signal.as_str(), error = %e, "could not signal process group");
    }
}

/// Tears down a generation whose stdin has already been closed by the caller.
/// `started` is when teardown began, closing stdin included: the EOF grace counts
/// from there.
/// `escalate` cuts the graceful steps short: once it fires, the group gets SIGKILL
/// at once (a second Ctrl-C); the confirmation that follows is never skipped.
pub async fn teardown(
    target: Target<'_>,
    grace: Grace,
    started: Instant,
    escalate: &CancellationToken,
) -> TeardownReport {
    let Target {
        child,
        pid,
        pgid,
        tag,
    } = target;
    let mut exit = None;
    let mut signal = None;
    // Closing the session already took part of the EOF grace.
    let eof_left = grace.eof.saturating_sub(started.elapsed());
    let mut gone = tokio::select! {
        biased;
        gone = wait_gone(pid, pgid, &mut exit, Some(eof_left)) => gone,
        _ = escalate.cancelled() => None,
    };
    if gone.is_none() && !escalate.is_cancelled() {
        tracing::debug!(pid, "no exit after stdin closed; SIGTERM to the group");
        signal = Some(TeardownSignal::Term);
        signal_group(pgid, Signal::SIGTERM);
        gone = tokio::select! {
            biased;
            gone = wait_gone(pid, pgid, &mut exit, Some(grace.term)) => gone,
            _ = escalate.cancelled() => None,
        };
    }
    if gone.is_none() {
        tracing::debug!(pid, "still alive after SIGTERM; SIGKILL to the group");
        signal = Some(TeardownSignal::Kill);
        signal_group(pgid, Signal::SIGKILL);
        gone = wait_gone(pid, pgid, &mut exit, grace.kill).await;
    }
    let (table, mut leftover) = match gone {
        Some(table) => (table, Vec::new()),
        None => {
            let table = procfs::fresh(Instant::now()).await;
            let members = table.group_members(pgid).iter().map(|s| s.pid).collect();
            (table, members)
        }
    };
    if exit.is_some() {
        // The leader is a zombie now: reaping it cannot block.
        let _ = child.wait().await;
    } else if !leftover.contains(&pid) {
        leftover.push(pid);
    }
    reap_orphans(&table, |s| s.pgid == pgid && s.pid != pid);
    for escaped in table.tagged(tag.value()) {
        if !leftover.contains(&escaped.pid) {
            leftover.push(escaped.pid);
        }
    }
    leftover.sort_unstable();
    let outcome = if !leftover.is_empty() {
        Outcome::Failed
    } else if signal.is_some() {
        Outcome::Escalated
    } else {
        Outcome::Clean
    };
    TeardownReport {
        outcome,
        signal,
        duration: started.elapsed(),
        leftover_pids: leftover,
        exit,
        failure: None,
    }
}

/// Reaps the zombies among our own children that `which` selects. A supervisor is
/// a child subreaper, so a server's orphaned descendants become its children; when
/// they die, nobody else will collect them. They are reaped one by one by pid, never
/// with `waitpid(-1)`, which would steal the exit status of the servers that tokio
/// waits on.
pub fn reap_orphans(table: &Table, which: impl Fn(&procfs::ProcStat) -> bool) {
    let me = std::process::id() as i32;
    for s in table.procs().iter().map(|p| &p.stat) {
        if s.ppid == me && !s.is_alive() && which(s) {
            let _ = nix::sys::wait::waitpid(Pid::from_raw(s.pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// SIGKILLs every living process whose tag is `tag` and waits up to `limit` for
/// all of them to be gone. Returns the pids still alive after that.
/// For what is left of a quarantined or recovered generation: its processes are no
/// longer anyone's children, so they are found by their tag, not by a group leader.
pub async fn kill_tagged(tag: &str, limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let alive = procfs::fresh(Instant::now()).await.tagged(tag);
        if alive.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            return alive.iter().map(|p| p.pid).collect();
        }
        for p in &alive {
            // The tag was read from this very pid a moment ago: it is ours, not a
            // reused pid. ESRCH means it is already gone.
            let _ = nix::sys::signal::kill(Pid::from_raw(p.pid), Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods_add_up_to_the_cleanup_deadline() {
        let g = Grace::from_cleanup(Some(Duration::from_secs(10)));
        assert_eq!(g.eof, Duration::from_secs(3));
        assert_eq!(g.term, Duration::from_secs(5));
        assert_eq!(g.kill, Some(Duration::from_secs(2)));
        let unbounded = Grace::from_cleanup(None);
        assert_eq!(unbounded.kill, None);
    }

    #[test]
    fn exit_kinds_read_well() {
        assert_eq!(ExitKind::Code(3).to_string(), "exit code 3");
        assert_eq!(ExitKind::Signal(9).to_string(), "killed by SIGKILL");
    }
}
