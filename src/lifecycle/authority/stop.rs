//! Stopping a generation: the verified teardown (L5), quarantine and its
//! clearing (L7), and the durable notes of how a generation ended.

use std::time::{Duration, Instant};


use super::super::core::{self as machine, Ended, Input};
use super::super::error::{ErrorKind, ErrorPhase, ServerError};
use super::super::events::millis;
use super::super::ledger::{QuarantineRecord};
use super::super::state::Generation;
use super::super::summary::{Outcome, TeardownSummary};
use crate::config::Timeout;
use crate::process::remote::{DeleteOutcome, lost_session};
use crate::process::session::Session;
use crate::process::teardown::{self, Grace, TeardownReport};

use super::actor::Actor;
use super::live::{Live, LiveKind};

/// How long a process whose session ended is given to be seen exiting.
const EXIT_AFTER_EOF: Duration = Duration::from_millis(200);

impl Actor {
    /// Looks for what is left of a quarantined generation and, with `kill`,
    /// SIGKILLs every process still carrying its tag or one of its identities (L7).
    pub(super) async fn clear(&mut self, generation: Generation, kill: bool) -> Input {
        let started = Instant::now();
        let mut alive = Vec::new();
        if let Some((tag, ids)) = &self.quarantine_left {
            alive = teardown::leftovers_alive(tag, ids)
                .await
                .iter()
                .map(|p| p.pid)
                .collect();
            if kill && !alive.is_empty() {
                alive = teardown::kill_leftovers(tag, ids, Duration::from_secs(5)).await;
            }
        }
        if alive.is_empty() {
            self.quarantine_left = None;
        } else {
            tracing::info!(server = %self.config.name, generation, ?alive, "quarantine kept");
        }
        Input::Cleared {
            alive,
            took: started.elapsed(),
        }
    }

    /// Tears the running generation down, under the request's cleanup deadline.
    pub(super) async fn stop(&mut self) -> Ended {
        let Some(live) = self.live.take() else {
            return Ended::default();
        };
        let cleanup = self
            .request
            .options
            .cleanup_timeout
            .unwrap_or(self.config.cleanup_timeout);
        self.tear_down(live, cleanup, Instant::now()).await
    }

    /// The running generation's process exited, or its session ended: say why,
    /// and sweep what is left of it.
    pub(super) async fn sweep(&mut self) -> Input {
        let Some(live) = self.live.take() else {
            return Input::Swept {
                error: ServerError::new(ErrorKind::Exited, ErrorPhase::Running, "exited"),
                ended: Ended::default(),
                up_for: Duration::ZERO,
            };
        };
        let generation = live.generation;
        let up_for = live.ready_at.map_or(Duration::ZERO, |t| t.elapsed());
        let stderr = live.stderr_tail();
        // Looked at before teardown: whether the process was still running when
        // its session ended, and why the session was cut off.
        let violation = live.session.as_ref().and_then(Session::violation);
        let lost = live.session.as_ref().and_then(Session::lost);
        // A process that exits closes its stdout a moment before it is seen to
        // have exited: give the exit that moment before calling it a process
        // that runs on without its session.
        let process_exited = match &live.kind {
            LiveKind::Process(p) => tokio::time::timeout(EXIT_AFTER_EOF, p.exit.exited())
                .await
                .is_ok(),
            LiveKind::Remote(_) => true,
        };
        let ended = self
            .tear_down(live, self.config.cleanup_timeout, Instant::now())
            .await;
        let stderr = stderr.map_or_else(Vec::new, |t| t.lines());
        let how = ended
            .exit
            .map_or_else(|| "exit status unknown".to_owned(), |e| e.to_string());
        let error = match violation {
            Some(why) => ServerError::new(
                ErrorKind::Protocol,
                ErrorPhase::Running,
                format!("generation {generation}'s session was ended: {why}"),
            ),
            None if lost.is_some() => ServerError::new(
                ErrorKind::SessionLost,
                ErrorPhase::Running,
                format!(
                    "generation {generation}'s session ended: {}; the server may have restarted",
                    lost_session(lost.as_deref().unwrap_or_default())
                ),
            ),
            None if !process_exited => ServerError::new(
                ErrorKind::Protocol,
                ErrorPhase::Running,
                format!(
                    "generation {generation} closed its stdout while running; it was torn down ({how})"
                ),
            ),
            None => ServerError::new(
                ErrorKind::Exited,
                ErrorPhase::Running,
                format!("generation {generation} exited while running ({how})"),
            ),
        }
        .with_stderr(stderr);
        Input::Swept {
            error,
            ended,
            up_for,
        }
    }

    /// Closes the session (which closes the server's stdin) and runs the verified
    /// teardown. Never cancelled: cleanup belongs to the resource, not the caller.
    pub(super) async fn tear_down(
        &mut self,
        mut live: Live,
        cleanup: Timeout,
        started: Instant,
    ) -> Ended {
        let tag = live.tag_value();
        let grace = Grace::from_cleanup(cleanup);
        let report = match &mut live.kind {
            LiveKind::Process(process) => {
                // The lineage as it is while the server still runs: once its stdin
                // closes it may exit, and its children become orphans whose
                // parentage is no longer there to read (L13). Without a child
                // there is nothing new to read (orphans are tracked already).
                if crate::platform::has_children(process.pid) {
                    let _ = crate::process::table::fresh(started).await;
                }
                if let Some(session) = live.session.take() {
                    session.close(grace.eof).await;
                }
                let report = teardown::teardown(
                    teardown::Target {
                        child: &mut process.child,
                        pid: process.pid,
                        pgid: process.pgid,
                        tag: &process.tag,
                        lineage: &process.lineage,
                    },
                    grace,
                    started,
                    &self.ctx.escalate,
                )
                .await;
                // The server's processes are gone (or given up on): nothing more
                // worth reading will come from its stdout.
                process.stdout_drain.cancel();
                // Every holder of the stderr pipe is gone unless something escaped;
                // give the drain a moment to read the last lines, then stop it.
                let drain = &mut process.stderr_task;
                if tokio::time::timeout(Duration::from_millis(200), drain)
                    .await
                    .is_err()
                {
                    process.stderr_task.abort();
                }
                report
            }
            LiveKind::Remote(probe) => {
                // Ending the session is the whole teardown: the DELETE must have
                // succeeded (or not been needed) within the cleanup deadline.
                let limit = cleanup.as_duration().unwrap_or(Duration::from_secs(3600));
                // A session the server no longer knows has nothing left to end,
                // whatever becomes of the DELETE that closing it still sends.
                let lost = live.session.as_ref().and_then(Session::lost);
                let ended = match live.session.take() {
                    Some(session) => session.close(limit).await,
                    None => true,
                };
                let already_lost = lost.is_some();
                let outcome = match lost {
                    Some(how) => Some(DeleteOutcome::AlreadyGone(how)),
                    None => probe.outcome(),
                };
                let failure = match (ended || already_lost, &outcome) {
                    (false, _) => Some(format!(
                        "ending the session did not finish within {}",
                        Timeout::After(limit)
                    )),
                    (true, Some(DeleteOutcome::Failed(e))) => {
                        Some(format!("ending the session (DELETE) failed: {e}"))
                    }
                    (true, _) => None,
                };
                let mut report = TeardownReport::without_processes(started.elapsed(), failure);
                if let (None, Some(DeleteOutcome::AlreadyGone(how))) = (&report.failure, outcome) {
                    let note = format!("the server had already ended the session ({how})");
                    tracing::info!(server = %self.config.name, generation = live.generation, "{note}");
                    report.note = Some(note);
                }
                report
            }
        };
        tracing::debug!(
            server = %self.config.name,
            generation = live.generation,
            outcome = ?Outcome::of(&report),
            ms = millis(report.duration),
            "teardown"
        );
        let summary = TeardownSummary::new(live.generation, &report);
        self.torn_down = Some(summary.outcome);
        self.last_teardown = Some(summary.clone());
        self.request.teardown = Some(summary);
        self.ended = Some((tag, report.leftover_ids));
        Ended {
            leftover_pids: report.leftover_pids,
            failure: report
                .failure
                .map(|m| ServerError::new(ErrorKind::TeardownFailed, ErrorPhase::Teardown, m)),
            exit: report.exit,
            took: started.elapsed(),
        }
    }

    /// Writes the running generation's lineage to the ledger, so that a supervisor
    /// that starts after a crash finds its members by identity (L10, L13).
    pub(super) fn note_lineage(&self) {
        let Some(live) = &self.live else { return };
        let Some(process) = live.process() else {
            return;
        };
        let members = process.lineage.recorded();
        let durable = self
            .ledger
            .lineage(&self.config.name, live.generation, members);
        let server = self.config.name.clone();
        self.ctx.tracker.spawn(async move {
            if let Err(e) = durable.await {
                tracing::error!(server, error = %e, "cannot write state.json (lineage)");
            }
        });
    }

    /// Notes that a generation ended and waits until the note is on disk, so that
    /// a quarantine is never reported before it is kept (L7). A quarantine keeps
    /// the tag and the identities of what was left, to find those processes again.
    pub(super) async fn note_end(
        &mut self,
        generation: Generation,
        quarantine: Option<machine::Quarantine>,
    ) {
        let quarantine = quarantine.map(|q| {
            let (tag, leftover) = self.ended.clone().unwrap_or_default();
            self.quarantine_left = Some((tag.clone(), leftover.clone()));
            QuarantineRecord {
                generation,
                message: q.message,
                leftover_pids: q.leftover_pids,
                tag,
                leftover,
            }
        });
        let durable = self.ledger.ended(&self.config.name, generation, quarantine);
        if let Err(e) = durable.await {
            tracing::error!(server = %self.config.name, error = %e, "cannot write state.json (ended)");
        }
    }
}
