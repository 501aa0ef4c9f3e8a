//! Stopping a generation: the verified teardown (L5), quarantine and its
//! clearing (L7), and the durable notes of how a generation ended.

use super::*;

impl Actor {
    /// Ends a quarantine: with `kill`, SIGKILLs every process still carrying the
    /// quarantined generation's tag first. Succeeds only once none is alive.
    pub(super) async fn clear_quarantine(
        &mut self,
        generation: Generation,
        kill: bool,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        let started = Instant::now();
        let Some((tag, ids)) = self.quarantine_left.clone() else {
            return Done::ok();
        };
        let mut alive: Vec<i32> = teardown::leftovers_alive(&tag, &ids)
            .await
            .iter()
            .map(|p| p.pid)
            .collect();
        if kill && !alive.is_empty() {
            alive = teardown::kill_leftovers(&tag, &ids, Duration::from_secs(5)).await;
        }
        if !alive.is_empty() {
            let error = ServerError::new(
                ErrorKind::Quarantined,
                ErrorPhase::Request,
                format!(
                    "generation {generation} still has living processes ({}); use --force to SIGKILL them",
                    alive
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            self.emit(
                Phase::Quarantined,
                Some(generation),
                cause,
                started.elapsed(),
                waited,
                Some(error.clone()),
            );
            return Done::err(error);
        }
        self.quarantine_left = None;
        self.note_end(generation, None).await;
        self.set(State::Stopped, cause, started.elapsed(), waited, None);
        Done::ok()
    }

    pub(super) async fn stop(
        &mut self,
        generation: Generation,
        options: CallOptions,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        match self.live.take() {
            Some(live) => {
                self.stop_live(live, generation, options, cause, waited)
                    .await
            }
            None => Done::ok(),
        }
    }

    pub(super) async fn stop_live(
        &mut self,
        live: Live,
        generation: Generation,
        options: CallOptions,
        cause: Cause,
        waited: Duration,
    ) -> Done {
        let started = Instant::now();
        self.set(
            State::Stopping { generation },
            cause,
            Duration::ZERO,
            waited,
            None,
        );
        let cleanup = options
            .cleanup_timeout
            .unwrap_or(self.config.cleanup_timeout);
        let tag = live.tag_value();
        let report = self.tear_down(live, cleanup, started).await;
        let summary = TeardownSummary::new(generation, &report);
        let failure = report
            .failure
            .clone()
            .map(|m| ServerError::new(ErrorKind::TeardownFailed, ErrorPhase::Teardown, m));
        let next = state::after_teardown(generation, report.leftover_pids.clone(), failure);
        let error = match &next {
            State::Quarantined { error, .. } => Some(error.clone()),
            _ => None,
        };
        self.record_end(generation, &next, tag, &report.leftover_ids)
            .await;
        self.set(
            next,
            cause,
            started.elapsed(),
            Duration::ZERO,
            error.clone(),
        );
        self.last_teardown = Some(summary.clone());
        Done {
            result: error.map_or(Ok(()), Err),
            connect: None,
            teardown: Some(summary),
        }
    }

    /// Closes the session (which closes the server's stdin) and runs the verified
    /// teardown. Never cancelled: cleanup belongs to the resource, not the caller.
    pub(super) async fn tear_down(
        &mut self,
        mut live: Live,
        cleanup: Timeout,
        started: Instant,
    ) -> TeardownReport {
        let grace = Grace::from_cleanup(cleanup);
        let report = match &mut live.kind {
            LiveKind::Process(process) => {
                // The lineage as it is while the server still runs: once its stdin
                // closes it may exit, and its children become orphans whose
                // parentage is no longer there to read (L13). Without a child
                // there is nothing new to read (orphans are tracked already).
                if crate::process::procfs::has_children(process.pid) {
                    let _ = crate::process::procfs::fresh(started).await;
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
        report
    }

    /// Tells the ledger how a generation ended, and keeps the tag of a quarantined
    /// one so that its leftovers can be found again.
    pub(super) async fn record_end(
        &mut self,
        generation: Generation,
        next: &State,
        tag: String,
        leftover: &[ProcId],
    ) {
        let quarantine = match next {
            State::Quarantined {
                error,
                leftover_pids,
                ..
            } => {
                self.quarantine_left = Some((tag.clone(), leftover.to_vec()));
                Some(QuarantineRecord {
                    generation,
                    message: error.message.clone(),
                    leftover_pids: leftover_pids.clone(),
                    tag,
                    leftover: leftover.to_vec(),
                })
            }
            _ => None,
        };
        self.note_end(generation, quarantine).await;
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
    /// a quarantine is never reported before it is kept.
    pub(super) async fn note_end(
        &self,
        generation: Generation,
        quarantine: Option<QuarantineRecord>,
    ) {
        let durable = self.ledger.ended(&self.config.name, generation, quarantine);
        if let Err(e) = durable.await {
            tracing::error!(server = %self.config.name, error = %e, "cannot write state.json (ended)");
        }
    }
}
