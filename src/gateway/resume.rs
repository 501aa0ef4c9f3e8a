//! The HTTP door's session manager: rmcp's own, with two differences. A
//! stream resumed with `Last-Event-ID: K` replays the events after K, never K
//! itself (docs/design.md §14, "HTTP sessions"): rmcp's session replays from
//! the index it is given, K included; the client already has K, so it is
//! asked for the index after it. And what a session streams passes
//! `written.rs` on its way out, which gives tools as their servers wrote them.
//! Every other call is rmcp's, unchanged.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Weak};

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

/// rmcp's [`LocalSessionManager`], whose streams resume after the last event
/// the client saw.
pub(crate) struct Resuming(LocalSessionManager, Weak<super::Gateway>);

impl Resuming {
    pub(crate) fn new(gateway: &Arc<super::Gateway>) -> Resuming {
        Resuming(LocalSessionManager::default(), Arc::downgrade(gateway))
    }

    /// `stream` as the client gets it: through `written.rs`.
    fn written(
        &self,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        let gateway = self.1.clone();
        stream.map(move |mut event| {
            let gateway = gateway.upgrade();
            let message = event.message.as_deref();
            let written = gateway
                .zip(message)
                .and_then(|(g, m)| super::written::message_as_written(&g, m));
            if let Some(written) = written {
                event.message = Some(Arc::new(written));
            }
            event
        })
    }
}

impl Deref for Resuming {
    type Target = LocalSessionManager;
    fn deref(&self) -> &LocalSessionManager {
        &self.0
    }
}

impl DerefMut for Resuming {
    fn deref_mut(&mut self) -> &mut LocalSessionManager {
        &mut self.0
    }
}

/// The id of the event after `last` (rmcp's ids are `INDEX` or
/// `INDEX/REQUEST`); `last` as it is when it is not one of those, for rmcp to
/// refuse.
fn after(last: &str) -> String {
    let (index, rest) = match last.split_once('/') {
        Some((index, request)) => (index, Some(request)),
        None => (last, None),
    };
    let Some(next) = index.parse::<usize>().ok().and_then(|i| i.checked_add(1)) else {
        return last.to_owned();
    };
    match rest {
        Some(request) => format!("{next}/{request}"),
        None => next.to_string(),
    }
}

impl SessionManager for Resuming {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.0.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let answer = self.0.initialize_session(id, message).await?;
        // With the `tasks` of protocol 2025-11-25 its servers declare.
        let tasks = self
            .1
            .upgrade()
            .and_then(|g| super::legacy_tasks::initialized(&g, &None, &answer));
        Ok(tasks.unwrap_or(answer))
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.0.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.0.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.written(self.0.create_stream(id, message).await?))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.0.accept_message(id, message).await
    }

    /// A GET without `Last-Event-ID`: rmcp's, which replays everything the
    /// session's common stream kept.
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.written(self.0.create_standalone_stream(id).await?))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // An event store (none here) replays after the id itself.
        let from = match self.0.event_store() {
            Some(_) => last_event_id,
            None => after(&last_event_id),
        };
        Ok(self.written(self.0.resume(id, from).await?))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.0.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.0.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::after;

    #[test]
    fn the_event_after_an_id_keeps_its_request_and_a_stranger_is_left_as_it_is() {
        assert_eq!(after("0"), "1");
        assert_eq!(after("41"), "42");
        assert_eq!(after("3/7"), "4/7");
        assert_eq!(after("x/7"), "x/7");
        assert_eq!(after(""), "");
        assert_eq!(after(&usize::MAX.to_string()), usize::MAX.to_string());
    }
}
