//! Verified teardown of a stdio server (rule L5).
//!
//! ```text
//!  close stdin ──► wait `eof` ──► SIGTERM group ──► wait `term` ──► SIGKILL group ──► wait `kill`
//!       │ gone            │ gone                          │ gone                         │
//!       ▼                 ▼                               ▼                              ▼
//!     clean           escalated(TERM)              escalated(KILL)        failed (something left)
//! ```
//!
//! "Gone" means: the group leader has exited, no living process is left in its
//! process group, *and* no member of its lineage is alive (see `lineage`: every
//! descendant by parentage, also one that left the group and session and cleared
//! its environment). Members outside the group are signalled with the group, one by
//! one and pinned against pid reuse, as systemd's `KillMode=control-group` ends a whole
//! cgroup; a teardown that had to end one is never `clean`. Once the group is empty
//! and only such members are left, the EOF grace is not waited out. The leader is
//! only reaped at the very end, so that its pid (and with it the group id) cannot be
//! reused by an unrelated process while the group is being signalled. Whatever is
//! still alive then (a member, or any process carrying the generation's tag) makes
//! the teardown `failed`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use super::lineage::{self, Lineage, Member, ProcId};
use super::table::{self, Table};
use super::tag::Tag;
use crate::config::Timeout;
use crate::platform::{self, Signal};

pub(crate) use crate::platform::ExitKind;

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
pub(crate) struct Grace {
    pub eof: Duration,
    pub term: Duration,
    /// `None` only when the user wrote `cleanup_timeout: none`.
    pub kill: Option<Duration>,
}

impl Grace {
    /// Splits a cleanup deadline: 30% for stdin EOF, 50% after SIGTERM, 20% to
    /// confirm SIGKILL. An unbounded cleanup still escalates after fixed graces but
    /// then waits for confirmation without limit.
    pub(crate) fn from_cleanup(cleanup: Timeout) -> Grace {
        match cleanup.as_duration() {
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

/// What one teardown found and did. Whether that was clean is the lifecycle's
/// judgement (`lifecycle::summary::Outcome::of`).
#[derive(Debug, Clone)]
pub struct TeardownReport {
    pub signal: Option<TeardownSignal>,
    pub duration: Duration,
    /// Processes of the generation still alive when teardown gave up or finished.
    pub leftover_pids: Vec<i32>,
    /// Members of the lineage that had left the server's process group (a new
    /// session or group), seen alive while teardown ran: a signal to the group did
    /// not reach them, so they were signalled one by one.
    pub escaped_pids: Vec<i32>,
    /// Identities of the leftovers, to find them again (a quarantine).
    pub leftover_ids: Vec<ProcId>,
    /// How the group leader ended, if it was seen to end.
    pub exit: Option<ExitKind>,
    /// Why a teardown without processes (a remote session) failed.
    pub failure: Option<String>,
    /// What else is worth saying about a teardown without processes (the server
    /// had already ended the session).
    pub note: Option<String>,
}

impl TeardownReport {
    /// A teardown that had no process to end (a remote session).
    pub fn without_processes(duration: Duration, failure: Option<String>) -> TeardownReport {
        TeardownReport {
            signal: None,
            duration,
            leftover_pids: Vec::new(),
            escaped_pids: Vec::new(),
            leftover_ids: Vec::new(),
            exit: None,
            failure,
            note: None,
        }
    }
}

/// The process side of a generation that teardown works on.
pub(crate) struct Target<'a> {
    pub child: &'a mut tokio::process::Child,
    pub pid: i32,
    pub pgid: i32,
    pub tag: &'a Tag,
    /// Every descendant of the leader, in the group or not.
    pub lineage: &'a Lineage,
}

/// What one wait of teardown saw at its end.
enum Wait {
    /// The leader exited, its group is empty and no member of its lineage is
    /// alive; the table that showed it.
    Gone(Arc<Table>),
    /// The leader and its group are gone, but members that left the group live on:
    /// waiting for them to end by themselves is pointless.
    OnlyEscapees,
    /// The limit passed.
    TimedOut,
}

/// One teardown in progress: what it has seen and sent so far.
struct Run<'a> {
    pid: i32,
    pgid: i32,
    lineage: &'a Lineage,
    exit: Option<ExitKind>,
    /// Pids of members seen outside the group.
    escaped: BTreeSet<i32>,
    /// Members outside the group already sent the current signal.
    signalled: BTreeSet<ProcId>,
}

impl Run<'_> {
    /// Waits until the leader has exited and neither its group nor its lineage
    /// holds a living process, or until `limit` passes (`None`: no limit). With
    /// `signal`, members that appear outside the group meanwhile are sent it too
    /// (a group signal reaches new members by itself).
    async fn wait(&mut self, limit: Option<Duration>, signal: Option<Signal>, early: bool) -> Wait {
        let deadline = limit.map(|l| Instant::now() + l);
        let mut interval = Duration::from_millis(1);
        loop {
            if self.exit.is_none() {
                // Polled without reaping the leader.
                self.exit = platform::exit_unreaped(self.pid);
            }
            if self.exit.is_some() {
                let table = table::fresh(Instant::now()).await;
                let outside = self.lineage.outside_group();
                self.escaped.extend(outside.iter().map(|m| m.id.pid));
                if let Some(signal) = signal {
                    self.send(&outside, signal);
                }
                let group_empty = table.group_members(self.pgid).is_empty();
                if group_empty && self.lineage.settled() {
                    return Wait::Gone(table);
                }
                if group_empty && early && !outside.is_empty() {
                    return Wait::OnlyEscapees;
                }
            }
            let now = Instant::now();
            let sleep = match deadline {
                Some(d) if now >= d => return Wait::TimedOut,
                Some(d) => interval.min(d - now),
                None => interval,
            };
            tokio::time::sleep(sleep).await;
            interval = (interval * 2).min(Duration::from_millis(50));
        }
    }

    /// Signals the group and every member of the lineage outside it.
    async fn signal_all(&mut self, signal: Signal) {
        // A group already empty is no error: nothing to do.
        if let Err(e) = platform::signal_group(self.pgid, signal) {
            tracing::warn!(pgid = self.pgid, signal = signal.as_str(), error = %e, "could not signal process group");
        }
        self.signalled.clear();
        let _ = table::fresh(Instant::now()).await;
        let outside = self.lineage.outside_group();
        self.escaped.extend(outside.iter().map(|m| m.id.pid));
        self.send(&outside, signal);
    }

    fn send(&mut self, members: &[Member], signal: Signal) {
        for m in members {
            if self.signalled.insert(m.id) {
                tracing::debug!(
                    pid = m.id.pid,
                    signal = signal.as_str(),
                    "signalling a process that left the group"
                );
                lineage::signal(m.id, signal);
            }
        }
    }
}

/// Tears down a generation whose stdin has already been closed by the caller.
/// `started` is when teardown began, closing stdin included: the EOF grace counts
/// from there.
/// `escalate` cuts the graceful steps short: once it fires, the group gets SIGKILL
/// at once (a second Ctrl-C); the confirmation that follows is never skipped.
pub(crate) async fn teardown(
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
        lineage,
    } = target;
    // From here on, an orphan shared with other generations may be given to this
    // one; the passes below (one each poll once the leader has exited) keep the
    // lineage current.
    lineage.begin_ending();
    let mut run = Run {
        pid,
        pgid,
        lineage,
        exit: None,
        escaped: BTreeSet::new(),
        signalled: BTreeSet::new(),
    };
    let mut signal = None;
    // Closing the session already took part of the EOF grace.
    let eof_left = grace.eof.saturating_sub(started.elapsed());
    let mut gone = tokio::select! {
        biased;
        gone = run.wait(Some(eof_left), None, true) => gone,
        _ = escalate.cancelled() => Wait::TimedOut,
    };
    if !matches!(gone, Wait::Gone(_)) && !escalate.is_cancelled() {
        tracing::debug!(
            pid,
            "not gone after stdin closed; SIGTERM to the group and the lineage"
        );
        signal = Some(TeardownSignal::Term);
        run.signal_all(Signal::SIGTERM).await;
        gone = tokio::select! {
            biased;
            gone = run.wait(Some(grace.term), Some(Signal::SIGTERM), false) => gone,
            _ = escalate.cancelled() => Wait::TimedOut,
        };
    }
    if !matches!(gone, Wait::Gone(_)) {
        tracing::debug!(
            pid,
            "still alive after SIGTERM; SIGKILL to the group and the lineage"
        );
        signal = Some(TeardownSignal::Kill);
        run.signal_all(Signal::SIGKILL).await;
        gone = run.wait(grace.kill, Some(Signal::SIGKILL), false).await;
    }
    let (table, mut leftover) = match gone {
        Wait::Gone(table) => (table, Vec::new()),
        _ => {
            let table = table::fresh(Instant::now()).await;
            let mut left: Vec<ProcId> = table.group_members(pgid).iter().map(ProcId::of).collect();
            left.extend(lineage.members().iter().map(|m| m.id));
            // An orphan this generation may have left, still undecided: it may be
            // alive on this generation's account.
            left.extend(lineage.undecided());
            (table, left)
        }
    };
    let exit = run.exit;
    if exit.is_some() {
        // The leader is a zombie now: reaping it cannot block.
        let _ = child.wait().await;
    } else if let Some(stat) = platform::stat(pid) {
        leftover.push(ProcId::of(&stat));
    }
    lineage::reap_orphans(&table);
    // A process carrying the tag that is no member (not below us at all) is still
    // the generation's: it is reported, never ignored.
    leftover.extend(table.tagged(tag.value()).iter().map(ProcId::of));
    leftover.sort_unstable();
    leftover.dedup();
    lineage.close();
    TeardownReport {
        signal,
        duration: started.elapsed(),
        leftover_pids: leftover.iter().map(|id| id.pid).collect(),
        escaped_pids: run
            .escaped
            .into_iter()
            .chain(lineage.escaped_while_ending())
            .collect::<BTreeSet<i32>>()
            .into_iter()
            .collect(),
        leftover_ids: leftover,
        exit,
        failure: None,
        note: None,
    }
}

/// SIGKILLs every living process that carries `tag` or is one of `ids`, and waits
/// up to `limit` for all of them to be gone. Returns the pids still alive after that.
/// For what is left of a quarantined or recovered generation: its processes are no
/// longer anyone's children, so they are found by their tag and their identities,
/// not by a group leader.
pub(crate) async fn kill_leftovers(tag: &str, ids: &[ProcId], limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let alive = leftovers_alive(tag, ids).await;
        if alive.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            return alive.iter().map(|p| p.pid).collect();
        }
        for id in &alive {
            // Pinned by identity: never a process that took a pid since.
            lineage::signal(*id, Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The living processes that carry `tag` or are one of `ids`.
pub(crate) async fn leftovers_alive(tag: &str, ids: &[ProcId]) -> Vec<ProcId> {
    let table = table::fresh(Instant::now()).await;
    let mut alive: Vec<ProcId> = table.tagged(tag).iter().map(ProcId::of).collect();
    alive.extend(ids.iter().copied().filter(ProcId::is_alive));
    alive.sort_unstable();
    alive.dedup();
    alive
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods_add_up_to_the_cleanup_deadline() {
        let g = Grace::from_cleanup(Timeout::After(Duration::from_secs(10)));
        assert_eq!(g.eof, Duration::from_secs(3));
        assert_eq!(g.term, Duration::from_secs(5));
        assert_eq!(g.kill, Some(Duration::from_secs(2)));
        let unbounded = Grace::from_cleanup(Timeout::Never);
        assert_eq!(unbounded.kill, None);
    }
}
