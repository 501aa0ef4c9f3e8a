//! The fleet task: the one task that owns the roster (the fleet file as last
//! taken up and the authority of every server held), the gateway's membership
//! that follows it, and the doors (the gateway's HTTP door, the metrics' own).
//! It takes [`Command`]s one at a time from every [`FleetHandle`] and, after
//! each, publishes the [`View`] readers need through a `watch`, as an
//! authority publishes its `Snapshot`. Nothing it does awaits: a command is a
//! moment's work (a start or a stop is the authorities' to do, asked by the
//! request itself, outside this task).

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::fixed::Fixed;
use super::guardian;
use super::handle::{Command, FleetHandle, View};
use super::http_door::{self, Listening};
use super::metrics_door::{self, MetricsDoor};
use super::plan;
use super::roster::{self, Roster};
use super::scrape;
use crate::lifecycle::state::Phase;
use crate::metrics::http::Render;
use crate::output::report::SupervisorReport;

/// What the fleet task owns.
struct FleetTask {
    fixed: Arc<Fixed>,
    /// Shared with the views published: changed copy-on-write.
    roster: Arc<Roster>,
    /// The gateway's HTTP door, once `serve` opened it.
    http: Option<Listening>,
    /// The metrics' own door (`metrics.listen`), while open.
    metrics_door: Option<MetricsDoor>,
    exit_when_idle: bool,
    stdio_sessions: usize,
    publish: watch::Sender<Arc<View>>,
    /// What renders the metrics for the doors.
    scrape: Render,
}

/// Starts the fleet task with `roster` (its authorities created, the gateway
/// attached), after opening the metrics door that its file asks for, and
/// returns the first handle to it. The task ends once every handle is gone or
/// the authorities are told to shut down.
pub(super) fn spawn(fixed: Arc<Fixed>, roster: Roster) -> FleetHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let first = View {
        roster: Arc::new(roster),
        listening: None,
        exit_when_idle: false,
    };
    let roster = first.roster.clone();
    let (publish, view) = watch::channel(Arc::new(first));
    let scrape = scrape::render(view.clone(), Arc::downgrade(&fixed));
    let mut task = FleetTask {
        fixed: fixed.clone(),
        roster,
        http: None,
        metrics_door: None,
        exit_when_idle: false,
        stdio_sessions: 0,
        publish,
        scrape,
    };
    task.follow_metrics_listen();
    task.publish();
    fixed.tracker.spawn(task.run(rx));
    FleetHandle::new(tx, view, fixed)
}

impl FleetTask {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let shutdown = self.fixed.authorities.shutdown.clone();
        loop {
            let command = tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => command,
                    None => break,
                },
                () = shutdown.cancelled() => break,
            };
            self.take(command);
        }
        metrics_door::close(&mut self.metrics_door);
    }

    /// Does what `command` says, publishes the view that follows, and answers.
    fn take(&mut self, command: Command) {
        match command {
            Command::TakeUp {
                file,
                source,
                reply,
            } => {
                self.take_up(*file, *source);
                self.publish();
                let _ = reply.send(());
            }
            Command::PlanUp { up, file, reply } => {
                let planned = plan::plan(
                    Arc::make_mut(&mut self.roster),
                    &self.fixed,
                    &up,
                    file.map(|f| *f),
                );
                // The metrics' door follows the file taken up, as after any
                // request's: opened, moved or closed (docs/design.md §17).
                if planned.is_ok() {
                    self.follow_metrics_listen();
                }
                self.publish();
                let _ = reply.send(planned);
            }
            Command::ForgetOrphans { names, reply } => {
                Arc::make_mut(&mut self.roster).forget_orphans(&names);
                self.publish();
                let _ = reply.send(());
            }
            Command::OpenHttp { listen, reply } => {
                let opened = http_door::open(
                    &self.fixed,
                    &self.roster.fleet,
                    self.http.as_ref(),
                    listen,
                    self.scrape.clone(),
                );
                if let Ok(open) = &opened {
                    self.http = Some(open.clone());
                }
                self.publish();
                let _ = reply.send(opened);
            }
            Command::CloseHttp { reply } => {
                if let Some(open) = self.http.take() {
                    http_door::close(&self.fixed, open);
                    self.publish();
                }
                let _ = reply.send(());
            }
            Command::AfterDown { reply } => {
                if let Some(open) = self.http.take() {
                    http_door::close(&self.fixed, open);
                }
                let leaving = self.leave_after_down();
                self.publish();
                let _ = reply.send(leaving);
            }
            Command::KeepWhenIdle => {
                self.exit_when_idle = false;
                self.publish();
            }
            Command::StdioSession(opened) => {
                match opened {
                    true => self.stdio_sessions += 1,
                    false => self.stdio_sessions = self.stdio_sessions.saturating_sub(1),
                }
                self.publish();
            }
            Command::CloseMetrics { reply } => {
                metrics_door::close(&mut self.metrics_door);
                self.publish();
                let _ = reply.send(());
            }
        }
    }

    /// Brings the roster to a request's file (validated by the request), unless
    /// it is the file last taken up or older than it (R6).
    fn take_up(&mut self, file: crate::config::Fleet, source: crate::protocol::FleetSource) {
        if self.roster.source.as_ref() == Some(&source) {
            return;
        }
        if let Some(kept) = self.roster.newer_than(&source) {
            roster::kept_newer(&source, &kept);
            return;
        }
        Arc::make_mut(&mut self.roster).sync(&self.fixed, file, Some(source));
        self.follow_metrics_listen();
    }

    /// Opens, moves or closes the metrics door to match the file taken up.
    fn follow_metrics_listen(&mut self) {
        metrics_door::follow(
            &self.fixed,
            &self.roster.fleet,
            &mut self.metrics_door,
            &self.scrape,
        );
    }

    /// After a `down` of the whole fleet: what keeps this supervisor running,
    /// if anything; else it exits as soon as it is idle (docs/design.md §3).
    fn leave_after_down(&mut self) -> SupervisorReport {
        let running: Vec<String> = self
            .roster
            .servers
            .iter()
            .map(|h| &h.handle)
            .filter(|h| {
                matches!(
                    h.published().state,
                    Phase::Running | Phase::Starting | Phase::Stopping | Phase::Backoff
                )
            })
            .map(|h| h.name().to_owned())
            .collect();
        let sessions = self.stdio_sessions;
        let stays = if !running.is_empty() {
            Some(format!(
                "servers were started again since the `down` began: {}",
                running.join(", ")
            ))
        } else if sessions > 0 {
            Some(format!(
                "{sessions} gateway client session(s) of `mcpfleet connect` are open; it exits once they close"
            ))
        } else if self.http.is_some() {
            Some("the gateway's HTTP door was opened again since the `down` began".to_owned())
        } else {
            None
        };
        if stays.is_none() {
            self.exit_when_idle = true;
        }
        SupervisorReport {
            pid: std::process::id() as i32,
            guardian: guardian::guardian().map(|g| g.pid),
            stays,
            exited: false,
        }
    }

    fn publish(&self) {
        self.publish.send_replace(Arc::new(View {
            roster: self.roster.clone(),
            listening: self.http.clone(),
            exit_when_idle: self.exit_when_idle,
        }));
    }
}
