//! Log levels, resource subscriptions and listen streams, kept at the servers
//! for the gateway's clients.

use super::*;
use crate::gateway::listen_at::Tells;

/// Log levels and resource subscriptions, kept at the servers for the client
/// sessions (docs/design.md §14, "Logging", "Subscriptions").
#[expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]
impl Gateway {
    /// Session `session` (seeing `scope`) asks for log messages at `level`
    /// and above; each running server whose lowest wanted level changed is
    /// asked for it before this returns.
    pub(in crate::gateway) async fn set_level(&self, session: u64, scope: Scope, level: rmcp::model::LoggingLevel) {
        for (index, level) in self.desk.set_level(session, level, scope).await {
            self.level_at(index, level).await;
        }
    }

    /// Asks server `index`, if it runs and declares `logging`, for messages at
    /// `level` and above. A server that does not run is asked when it starts.
    pub(super) async fn level_at(&self, index: usize, level: rmcp::model::LoggingLevel) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if let Err(e) = crate::gateway::logging::set_at(&peer, level).await {
            self.note(format_args!("server {server}: logging/setLevel failed: {e}"));
        }
    }

    /// Notes session `session`'s subscription to `uri` at server `index`:
    /// whether it is the first (the server is to be subscribed).
    pub(in crate::gateway) async fn subscribed(&self, session: u64, index: usize, uri: &str) -> bool {
        self.desk.subscribe(session, index, uri.to_owned()).await
    }

    /// Session `session` unsubscribes from `uri`; the servers it was the last
    /// subscriber at are unsubscribed before this returns.
    pub(in crate::gateway) async fn unsubscribe(&self, session: u64, uri: &str) {
        for index in self.desk.unsubscribe(session, uri.to_owned()).await {
            self.unsubscribe_at(index, uri).await;
        }
    }

    /// Unsubscribes server `index`, if it runs, from `uri`.
    pub(super) async fn unsubscribe_at(&self, index: usize, uri: &str) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if !crate::gateway::subscriptions::declares(&peer) {
            return;
        }
        if Tells::of(&peer).is_some() {
            // Of the 2026-07-28 era: its listen stream is opened again without it.
            self.at_servers.renewed(index).await;
            return;
        }
        if let Err(e) = crate::gateway::subscriptions::unsubscribe_at(&peer, uri).await {
            self.note(format_args!("server {server}: resources/unsubscribe of {uri} failed: {e}"));
        }
    }

    /// Sends server `index`'s log messages at `level` and above to `queue`
    /// until the guard drops (see [`Desk::call_log`]).
    pub(in crate::gateway) fn call_log(
        &self,
        index: usize,
        level: rmcp::model::LoggingLevel,
        queue: tokio::sync::mpsc::UnboundedSender<rmcp::model::LoggingMessageNotificationParam>,
    ) -> crate::gateway::desk::CallLogging {
        self.desk.call_log(index, level, queue)
    }

    /// Open `subscriptions/listen` streams.
    pub(in crate::gateway) fn listening(&self) -> usize {
        self.desk.board().listening
    }

    /// Opens a listen stream (see [`Desk::listen`]); `None` at the cap.
    pub(in crate::gateway) async fn listen(&self, listen: Listen) -> Option<(Listening, Vec<(usize, String)>)> {
        self.desk.listen(listen).await
    }

    /// The server of `scope` that offers resource `uri` by the lists the
    /// gateway holds (a resource it lists, or a template whose fixed start
    /// `uri` begins with), if its running generation takes resource
    /// subscriptions; with no await, for the answer to a listen request.
    pub(in crate::gateway) fn subscribable_now(&self, scope: &Scope, uri: &str) -> Option<usize> {
        let seen = |i: usize| scope.as_ref().is_none_or(|s| s.contains(&i));
        let owner = {
            let board = self.desk.board();
            let lists = board.lists.iter().enumerate().filter(|(i, _)| seen(*i));
            let listed = lists
                .clone()
                .find(|(_, l)| l.resources.items.iter().any(|r| r.uri == uri));
            let templated = || {
                lists.clone().find(|(_, l)| {
                    l.templates.items.iter().any(|t| {
                        let fixed = t.uri_template.split('{').next().unwrap_or_default();
                        !fixed.is_empty() && uri.starts_with(fixed)
                    })
                })
            };
            listed.or_else(templated).map(|(i, _)| i)?
        };
        self.member(owner)?;
        let (_, reach) = self.reach_now(owner)?;
        crate::gateway::subscriptions::declares(&reach.session.into_peer()).then_some(owner)
    }

    /// Subscribes server `index` to `uri` for a listen stream, which is its
    /// first subscriber there; a failure is written to the gateway's log.
    pub(in crate::gateway) async fn subscribe_for_listen(&self, index: usize, uri: &str) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if let Err(e) = self.subscribe_server(index, &peer, uri).await {
            self.note(format_args!("server {server}: resources/subscribe of {uri} failed: {e}"));
        }
    }

    /// Subscribes server `index`, reached at `peer`, to `uri`, whose first
    /// subscriber has just been counted: a server of the 2026-07-28 era by its
    /// listen stream, which the gateway opens again with the URI (this returns
    /// once it is acknowledged), any other by `resources/subscribe`.
    pub(in crate::gateway) async fn subscribe_server(
        &self,
        index: usize,
        peer: &rmcp::service::Peer<rmcp::service::RoleClient>,
        uri: &str,
    ) -> Result<(), rmcp::service::ServiceError> {
        if Tells::of(peer).is_some() {
            self.at_servers.renewed(index).await;
            return Ok(());
        }
        crate::gateway::subscriptions::subscribe_at(peer, uri).await
    }

    /// Holds a listen stream at server `index`'s running generation if it is
    /// of the 2026-07-28 era and declares a list's changes or resource
    /// subscriptions (see `listen_at.rs`); it asks for the URIs the gateway's
    /// clients subscribed to there, as the gateway's task counts them.
    pub(super) fn listen_at(self: &Arc<Gateway>, index: usize) {
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        let Some(tells) = Tells::of(&peer) else {
            return;
        };
        let weak = Arc::downgrade(self);
        let heard = {
            let weak = weak.clone();
            move |notice| {
                if let Some(gateway) = weak.upgrade() {
                    gateway.desk.heard(index, notice);
                }
            }
        };
        let wanted = {
            let weak = weak.clone();
            move || -> futures::future::BoxFuture<'static, Vec<String>> {
                let weak = weak.clone();
                Box::pin(async move {
                    let Some(gateway) = weak.upgrade() else {
                        return Vec::new();
                    };
                    gateway.desk.wanted(index).await.map(|w| w.uris).unwrap_or_default()
                })
            }
        };
        let note = move |text: String| {
            if let Some(gateway) = weak.upgrade() {
                gateway.note(format_args!("server {server}: {text}"));
            }
        };
        let ends = crate::gateway::listen_at::Ends {
            heard: Box::new(heard),
            wanted: Box::new(wanted),
            note: Box::new(note),
        };
        self.at_servers
            .open(index, reach.generation, peer, tells, ends, &self.tasks);
    }

    /// A new generation of server `index` runs: it is asked for the level the
    /// sessions that see it want, and subscribed to the URIs that still have
    /// subscribers (a server of the 2026-07-28 era by the listen stream the
    /// gateway holds there, `listen_at`).
    pub(super) async fn renew(&self, index: usize) {
        let Some(wanted) = self.desk.wanted(index).await else {
            return;
        };
        let Some((server, reach)) = self.reach_now(index) else {
            return;
        };
        let peer = reach.session.into_peer();
        if Tells::of(&peer).is_some() {
            return;
        }
        if let Some(level) = wanted.level
            && let Err(e) = crate::gateway::logging::set_at(&peer, level).await
        {
            self.note(format_args!("server {server}: logging/setLevel failed: {e}"));
        }
        if !crate::gateway::subscriptions::declares(&peer) {
            return;
        }
        for uri in wanted.uris {
            if let Err(e) = crate::gateway::subscriptions::subscribe_at(&peer, &uri).await {
                self.note(format_args!("server {server}: resources/subscribe of {uri} failed: {e}"));
            }
        }
    }
}
