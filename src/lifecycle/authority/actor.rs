//! The authority task's loop, and the executor of the core's effects: what wakes
//! the task, how each effect is carried out, and how every transition is recorded
//! (L1, L9, L12) and published.

use super::*;

/// Sleeps until `at` (one of the core's timers), or forever when there is nothing
/// to wait for.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(drive::tokio_instant(at)).await,
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

/// Returns when a new configuration was given; never once every handle is gone.
async fn config_changed(configs: &mut watch::Receiver<ServerConfig>) {
    if configs.changed().await.is_err() {
        std::future::pending::<()>().await;
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

impl Actor {
    pub(super) async fn run(mut self, mut core: Core, mut rx: mpsc::Receiver<Message>) {
        loop {
            let input = tokio::select! {
                biased;
                _ = self.ctx.shutdown.cancelled() => break,
                // Before the queue: a request sent after `Handle::configure` is
                // taken with the new configuration.
                () = config_changed(&mut self.configs) => {
                    self.reconfigure(&mut core).await;
                    continue;
                }
                m = rx.recv() => match m {
                    None => break,
                    Some(Message::Touch) => Input::Used,
                    Some(Message::Transition { intent, options, enqueued, accepted, reply }) => {
                        if accepted.send(()).is_err() {
                            tracing::debug!(server = %self.config.name, "request withdrawn before it was taken");
                            continue;
                        }
                        // The caller may be gone by the end (L6): the outcome is
                        // recorded all the same.
                        self.ctx.events.accepted(&self.config.name, enqueued.elapsed());
                        self.request = Request { options, reply: Some(reply), ..Request::default() };
                        let stale = self.launched.as_ref().is_some_and(|d| *d != self.config.definition);
                        Input::Request { intent, force: options.force, stale, waited: enqueued.elapsed() }
                    }
                },
                _ = exited(&self.live) => Input::ExitSeen,
                _ = until(core.retry_at()) => Input::Retry,
                _ = until(core.ping_at()) => Input::Ping,
                _ = until(core.idle_at()) => Input::Idle,
                _ = lineage_changed(&self.live) => {
                    self.note_lineage();
                    continue;
                }
            };
            // A use changes only the idle timer, which nothing outside reads:
            // publishing after each one would wake every watcher per call.
            let used = matches!(input, Input::Used);
            drive::drive(&mut core, &mut self, input).await;
            self.request = Request::default();
            if !used {
                self.publish(&core);
            }
        }
        // No new requests from here on; answer everything already queued (L9).
        rx.close();
        while let Ok(message) = rx.try_recv() {
            if let Message::Transition { reply, .. } = message {
                let error = ServerError::cancelled("the request (the authority is shutting down)");
                let _ = reply.send(self.reply(&core, Err(error)));
            }
        }
        drive::drive(&mut core, &mut self, Input::Shutdown).await;
    }

    /// Takes the newest configuration: the settings go to the core at once; the
    /// definition waits for the next launch.
    async fn reconfigure(&mut self, core: &mut Core) {
        let config = self.configs.borrow_and_update().clone();
        let supervision = config.supervision;
        self.config = config;
        drive::drive(core, self, Input::Configure(supervision)).await;
        self.publish(core);
    }

    pub(super) fn publish(&self, core: &Core) {
        let peer = self.live.as_ref().and_then(|l| {
            l.session.as_ref().map(|session| Reach {
                generation: l.generation,
                peer: session.peer(),
                link: session.link(),
            })
        });
        self.publish_peer.send_replace(peer);
        self.publish.send_replace(self.snapshot(core));
    }

    /// Records a transition (L12) and publishes the state it led to.
    fn record(&mut self, core: &Core, t: machine::Transition) {
        if t.to == Phase::Backoff
            && let Some(at) = core.retry_at()
        {
            let delay = at.saturating_duration_since(drive::now());
            tracing::info!(server = %self.config.name, generation = t.generation, delay_ms = millis(delay), "restart scheduled");
        }
        let event = Event {
            time: rfc3339(SystemTime::now()),
            server: self.config.name.clone(),
            generation: t.generation,
            from: t.from,
            to: t.to,
            cause: t.cause,
            duration_ms: millis(t.duration),
            waited_ms: millis(t.waited),
            error: t.error,
            teardown: if t.to == Phase::Stopping {
                None
            } else {
                self.torn_down.take()
            },
        };
        self.ctx.events.record(&event);
        self.publish(core);
    }

    pub(super) fn snapshot(&self, core: &Core) -> Snapshot {
        let state = core.state();
        let error = match state {
            State::Failed { error, .. }
            | State::Quarantined { error, .. }
            | State::Backoff { error, .. }
            | State::CrashLoop { error, .. } => Some(error.clone()),
            _ => None,
        };
        let last = core.last_generation();
        // A running generation keeps its transport until it is replaced.
        let transport = match self.live.as_ref().map(|l| &l.kind) {
            Some(LiveKind::Process(_)) => "stdio",
            Some(LiveKind::Remote(_)) => "http",
            None => self.config.endpoint.name(),
        };
        Snapshot {
            name: self.config.name.clone(),
            transport: transport.to_owned(),
            state: state.phase(),
            // A stopped server shows the generation it last had.
            generation: state.generation().or((last > 0).then_some(last)),
            pid: state.pid(),
            tools: self.live.as_ref().map(|l| l.tools),
            server_info: self.live.as_ref().and_then(|l| l.server_info.clone()),
            uptime_ms: self
                .live
                .as_ref()
                .and_then(|l| l.ready_at)
                .map(|t| millis(t.elapsed())),
            ready_at: self.live.as_ref().and_then(|l| l.ready_at),
            restarts: core.restarts(),
            retry_in_ms: core
                .retry_at()
                .map(|t| millis(t.saturating_duration_since(drive::now()))),
            retry_at: core.retry_at().map(drive::tokio_instant),
            error,
            last_teardown: self.last_teardown.clone(),
            definition: self.launched.clone(),
        }
    }

    fn reply(&mut self, core: &Core, result: Result<(), ServerError>) -> Reply {
        Reply {
            snapshot: self.snapshot(core),
            result,
            connect: self.request.connect.take(),
            teardown: self.request.teardown.take(),
            listed: self.request.listed.take(),
        }
    }

    /// Pings the running generation within `timeout`.
    async fn ping(&self, core: &Core, timeout: Duration) -> bool {
        let peer = self
            .live
            .as_ref()
            .and_then(|l| l.session.as_ref().map(|s| s.peer()));
        let Some(peer) = peer else { return false };
        let answered = matches!(
            tokio::time::timeout(timeout, session::ping(&peer)).await,
            Ok(Ok(()))
        );
        if !answered {
            tracing::warn!(server = %self.config.name, missed = core.missed_pings() + 1, "health ping missed");
        }
        answered
    }
}

impl drive::Executor for Actor {
    async fn execute(&mut self, effect: Effect, core: &Core) -> Option<Input> {
        match effect {
            Effect::Reserve(generation) => Some(Input::Reserved(self.reserve(generation).await)),
            Effect::Launch(generation) => Some(Input::Started(self.launch(generation).await)),
            Effect::TearDown(_) => Some(Input::TornDown(self.stop().await)),
            Effect::Sweep(_) => Some(self.sweep().await),
            Effect::Clear { generation, kill } => Some(self.clear(generation, kill).await),
            Effect::Ping { timeout } => Some(Input::Pinged {
                answered: self.ping(core, timeout).await,
            }),
            Effect::NoteEnd {
                generation,
                quarantine,
            } => {
                self.note_end(generation, quarantine).await;
                None
            }
            Effect::Record(transition) => {
                self.record(core, transition);
                None
            }
            Effect::Answer(result) => {
                if let Some(reply) = self.request.reply.take() {
                    let _ = reply.send(self.reply(core, result));
                }
                None
            }
        }
    }
}
