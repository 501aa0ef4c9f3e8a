//! What the authority does unasked: a server that exits (or loses its session)
//! while running, restarts with backoff and crash loop, health pings, idle stop.

use super::*;

impl Actor {
    /// The server's main process exited on its own: sweep what is left of its group,
    /// record why, and let the restart policy decide what comes next.
    pub(super) async fn on_exit(&mut self) {
        let Some(live) = self.live.take() else { return };
        let generation = live.generation;
        let up_for = live.ready_at.map_or(Duration::ZERO, |t| t.elapsed());
        let stderr = live.stderr_lines();
        let tag = live.tag_value();
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
        let started = Instant::now();
        let report = self
            .tear_down(live, self.config.cleanup_timeout, started)
            .await;
        let how = report
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
        self.history
            .forget_if_stable(&self.config.supervision.restart, up_for);
        let next = if report.leftover_pids.is_empty() {
            self.after_failure(generation, error.clone(), report.exit)
        } else {
            state::after_teardown(generation, report.leftover_pids.clone(), None)
        };
        self.last_teardown = Some(TeardownSummary::new(generation, &report));
        self.record_end(generation, &next, tag, &report.leftover_ids)
            .await;
        self.set(
            next,
            Cause::Exited,
            started.elapsed(),
            Duration::ZERO,
            Some(error),
        );
    }

    /// After a generation failed (exited, or a restart did not come up): `failed`,
    /// `backoff` with the retry timer set, or `crash-loop`.
    pub(super) fn after_failure(
        &mut self,
        generation: Generation,
        error: ServerError,
        exit: Option<ExitKind>,
    ) -> State {
        let restart = self.config.supervision.restart;
        if !policy::restarts_after(restart.policy, exit) {
            return State::Failed { generation, error };
        }
        if self.history.record(&restart, tokio::time::Instant::now()) {
            let mut error = error;
            error.kind = ErrorKind::CrashLoop;
            error.message = format!(
                "{}; it was restarted {} times within {}, so it stays down until `reconnect`",
                error.message,
                restart.max_restarts,
                Timeout::After(restart.window)
            );
            return State::CrashLoop { generation, error };
        }
        let delay = policy::backoff(&restart, self.history.count() - 1, policy::jitter());
        self.retry_at = Some(tokio::time::Instant::now() + delay);
        tracing::info!(server = %self.config.name, generation, delay_ms = millis(delay), "restart scheduled");
        State::Backoff { generation, error }
    }

    /// The backoff is over: start the next generation. A restart that fails counts
    /// as another failure for the policy.
    pub(super) async fn on_retry(&mut self) {
        self.retry_at = None;
        if !matches!(self.state, State::Backoff { .. }) {
            return;
        }
        let next = self.last_generation + 1;
        let done = self
            .start(next, CallOptions::default(), Cause::Restart, Duration::ZERO)
            .await;
        if let (Err(error), State::Failed { generation, .. }) = (done.result, &self.state) {
            let generation = *generation;
            // The exit status of a failed start is not a clean exit: count it.
            let state = self.after_failure(generation, error, None);
            if !matches!(state, State::Failed { .. }) {
                self.set(state, Cause::Restart, Duration::ZERO, Duration::ZERO, None);
            }
        }
    }

    /// A health ping. After `failures` misses in a row, the server is restarted
    /// through the same path as `reconnect`: the old generation is confirmed gone
    /// before the new one starts (L4).
    pub(super) async fn on_ping(&mut self) {
        let Some(health) = self.config.supervision.health else {
            self.ping_at = None;
            return;
        };
        let peer = self
            .live
            .as_ref()
            .and_then(|l| l.session.as_ref().map(|s| s.peer()));
        let Some(peer) = peer else {
            self.ping_at = None;
            return;
        };
        let answered = matches!(
            tokio::time::timeout(health.timeout, session::ping(&peer)).await,
            Ok(Ok(()))
        );
        self.ping_at = Some(tokio::time::Instant::now() + health.interval);
        if answered {
            self.missed_pings = 0;
            return;
        }
        self.missed_pings += 1;
        tracing::warn!(server = %self.config.name, missed = self.missed_pings, "health ping missed");
        if self.missed_pings < health.failures {
            return;
        }
        self.missed_pings = 0;
        if let State::Running { generation, .. } = self.state {
            let stopped = self
                .stop(
                    generation,
                    CallOptions::default(),
                    Cause::Health,
                    Duration::ZERO,
                )
                .await;
            if stopped.result.is_ok() && self.state == State::Stopped {
                let next = self.last_generation + 1;
                self.start(next, CallOptions::default(), Cause::Health, Duration::ZERO)
                    .await;
            }
        }
    }

    /// No call for `idle_timeout`: stop the server. The next `call` starts it again.
    pub(super) async fn on_idle(&mut self) {
        if let State::Running { generation, .. } = self.state {
            self.stop(
                generation,
                CallOptions::default(),
                Cause::Idle,
                Duration::ZERO,
            )
            .await;
        }
    }
}
