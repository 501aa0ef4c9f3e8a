//! The authority task's loop: what wakes it, how a request is planned and
//! carried out, and how every transition is recorded (L1, L9, L12) and published.

use super::*;

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn exited(live: &Option<Live>) {
    match live {
        // The main process exited, or its session ended while it runs on (its
        // stdout closed, or cut off for exceeding a limit): either way the server
        // no longer serves, and must be torn down and reported.
        Some(Live {
            kind: LiveKind::Process(p),
            session,
            ..
        }) => {
            let session_ended = async {
                match session {
                    Some(s) => s.ended().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = p.exit.exited() => {}
                _ = session_ended => {}
            }
        }
        // A remote server has no process to watch: its session ends when the
        // server no longer knows it (it restarted, or ended the session).
        Some(Live {
            kind: LiveKind::Remote(_),
            session: Some(session),
            ..
        }) => session.ended().await,
        _ => std::future::pending().await,
    }
}

async fn lineage_changed(live: &Option<Live>) {
    match live {
        Some(Live {
            kind: LiveKind::Process(p),
            ..
        }) => p.lineage.changed().await,
        _ => std::future::pending().await,
    }
}

impl Done {
    pub(super) fn ok() -> Done {
        Done {
            result: Ok(()),
            connect: None,
            teardown: None,
        }
    }

    pub(super) fn err(e: ServerError) -> Done {
        Done {
            result: Err(e),
            connect: None,
            teardown: None,
        }
    }
}

impl Actor {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Message>) {
        loop {
            let idle_at = self.idle_at();
            let wake = tokio::select! {
                biased;
                _ = self.ctx.shutdown.cancelled() => break,
                m = rx.recv() => match m {
                    Some(m) => Wake::Message(m),
                    None => Wake::Closed,
                },
                _ = exited(&self.live) => Wake::Exited,
                _ = until(self.retry_at) => Wake::Retry,
                _ = until(self.ping_at) => Wake::Ping,
                _ = until(idle_at) => Wake::Idle,
                _ = lineage_changed(&self.live) => Wake::Lineage,
            };
            match wake {
                Wake::Closed => break,
                Wake::Message(m) => self.handle(m).await,
                Wake::Exited => self.on_exit().await,
                Wake::Retry => self.on_retry().await,
                Wake::Ping => self.on_ping().await,
                Wake::Idle => self.on_idle().await,
                Wake::Lineage => self.note_lineage(),
            }
            self.publish();
        }
        // No new requests from here on; answer everything already queued (L9).
        rx.close();
        while let Ok(message) = rx.try_recv() {
            match message {
                Message::Transition { reply, .. } => {
                    let _ = reply.send(self.reply(Done::err(ServerError::cancelled(
                        "the request (the authority is shutting down)",
                    ))));
                }
                Message::Touch => {}
            }
        }
        if let Some(live) = self.live.take() {
            let generation = live.generation;
            let options = CallOptions::default();
            self.stop_live(live, generation, options, Cause::Shutdown, Duration::ZERO)
                .await;
        }
    }

    pub(super) async fn handle(&mut self, message: Message) {
        match message {
            Message::Touch => self.last_used = tokio::time::Instant::now(),
            Message::Transition {
                intent,
                options,
                enqueued,
                accepted,
                reply,
            } => {
                if accepted.send(()).is_err() {
                    tracing::debug!(server = %self.config.name, "request withdrawn before it was taken");
                    return;
                }
                let waited = enqueued.elapsed();
                let done = self.transition(intent, options, waited).await;
                // The caller may be gone (L6): the outcome is recorded all the same.
                let _ = reply.send(self.reply(done));
            }
        }
    }

    pub(super) async fn transition(
        &mut self,
        intent: Intent,
        options: CallOptions,
        waited: Duration,
    ) -> Done {
        let cause = match intent {
            Intent::Start => Cause::Start,
            Intent::Stop => Cause::Stop,
            Intent::Reconnect { .. } => Cause::Reconnect,
            Intent::Reset => Cause::Reset,
        };
        match state::plan(&self.state, intent, self.last_generation, options.force) {
            Plan::Nothing => Done::ok(),
            Plan::Refuse(error) => {
                let phase = self.state.phase();
                let generation = self.state.generation();
                self.emit(
                    phase,
                    generation,
                    cause,
                    Duration::ZERO,
                    waited,
                    Some(error.clone()),
                );
                Done::err(error)
            }
            Plan::Start { next } => self.start(next, options, cause, waited).await,
            Plan::Stop { generation } => self.stop(generation, options, cause, waited).await,
            Plan::Restart { generation, next } => {
                let stopped = self.stop(generation, options, cause, waited).await;
                if stopped.result.is_err() || self.state != State::Stopped {
                    return stopped;
                }
                let mut started = self.start(next, options, cause, Duration::ZERO).await;
                started.teardown = started.teardown.or(stopped.teardown);
                started
            }
            Plan::Recover { generation, next } => {
                let recovered = self.clear_quarantine(generation, true, cause, waited).await;
                if recovered.result.is_err() {
                    return recovered;
                }
                self.start(next, options, cause, Duration::ZERO).await
            }
            Plan::Clear { generation } => {
                self.clear_quarantine(generation, false, cause, waited)
                    .await
            }
            Plan::Settle => {
                self.set(State::Stopped, cause, Duration::ZERO, waited, None);
                Done::ok()
            }
        }
    }

    /// Changes state and records the transition.
    pub(super) fn set(
        &mut self,
        next: State,
        cause: Cause,
        duration: Duration,
        waited: Duration,
        error: Option<ServerError>,
    ) {
        let from = self.state.phase();
        // A transition to `stopped` is still about the generation that stopped.
        let generation = next.generation().or(self.state.generation());
        // Timers belong to the states they serve: leaving them drops the timer, so a
        // user's request always cancels a pending restart.
        if !matches!(next, State::Backoff { .. }) {
            self.retry_at = None;
        }
        if !matches!(next, State::Running { .. }) {
            self.ping_at = None;
        }
        if matches!(cause, Cause::Start | Cause::Reconnect | Cause::Stop)
            && matches!(next, State::Starting { .. } | State::Stopped)
        {
            // A person asked for this: the restart count begins anew.
            self.history.clear();
        }
        self.state = next;
        self.emit(from, generation, cause, duration, waited, error);
        self.publish();
    }

    /// When an idle server is due to be stopped.
    pub(super) fn idle_at(&self) -> Option<tokio::time::Instant> {
        let idle = self.config.supervision.idle_timeout?;
        self.live.as_ref()?;
        Some(self.last_used + idle)
    }

    pub(super) fn publish(&self) {
        let peer = self.live.as_ref().and_then(|l| {
            l.session
                .as_ref()
                .map(|session| (l.generation, session.peer()))
        });
        self.publish_peer.send_replace(peer);
        self.publish.send_replace(self.snapshot());
    }

    pub(super) fn emit(
        &self,
        from: Phase,
        generation: Option<Generation>,
        cause: Cause,
        duration: Duration,
        waited: Duration,
        error: Option<ServerError>,
    ) {
        let event = Event {
            time: rfc3339(SystemTime::now()),
            server: self.config.name.clone(),
            generation,
            from,
            to: self.state.phase(),
            cause,
            duration_ms: millis(duration),
            waited_ms: millis(waited),
            error,
        };
        self.ctx.events.record(&event);
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        let error = match &self.state {
            State::Failed { error, .. }
            | State::Quarantined { error, .. }
            | State::Backoff { error, .. }
            | State::CrashLoop { error, .. } => Some(error.clone()),
            _ => None,
        };
        Snapshot {
            name: self.config.name.clone(),
            transport: self.config.endpoint.name().to_owned(),
            state: self.state.phase(),
            // A stopped server shows the generation it last had.
            generation: self
                .state
                .generation()
                .or((self.last_generation > 0).then_some(self.last_generation)),
            pid: self.state.pid(),
            tools: self.live.as_ref().map(|l| l.tools),
            server_info: self.live.as_ref().and_then(|l| l.server_info.clone()),
            uptime_ms: self
                .live
                .as_ref()
                .and_then(|l| l.ready_at)
                .map(|t| millis(t.elapsed())),
            ready_at: self.live.as_ref().and_then(|l| l.ready_at),
            restarts: self.history.count(),
            retry_in_ms: self
                .retry_at
                .map(|t| millis(t.saturating_duration_since(tokio::time::Instant::now()))),
            retry_at: self.retry_at,
            error,
            last_teardown: self.last_teardown.clone(),
        }
    }

    pub(super) fn reply(&self, done: Done) -> Reply {
        Reply {
            snapshot: self.snapshot(),
            result: done.result,
            connect: done.connect,
            teardown: done.teardown,
        }
    }
}
