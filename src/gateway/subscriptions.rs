//! Resource subscriptions through the gateway (docs/design.md §14,
//! "Subscriptions"): per server and URI, the client sessions that subscribed.
//! The first subscriber subscribes at the server, the last to leave (by
//! `resources/unsubscribe` or the end of its session) unsubscribes there, and
//! a server's `notifications/resources/updated` goes to the subscribers
//! alone. Pure but for [`subscribe_at`] and [`unsubscribe_at`].

use std::collections::{BTreeMap, BTreeSet};

use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::service::{Peer, RoleClient, ServiceError};

/// By server and URI, the sessions subscribed.
#[derive(Default)]
pub(super) struct Subscriptions {
    by: BTreeMap<(usize, String), BTreeSet<u64>>,
}

impl Subscriptions {
    /// Session `session` subscribes to `uri` at server `server`: whether it is
    /// the first (the server is to be subscribed).
    pub(super) fn subscribe(&mut self, session: u64, server: usize, uri: &str) -> bool {
        let sessions = self.by.entry((server, uri.to_owned())).or_default();
        sessions.insert(session) && sessions.len() == 1
    }

    /// Session `session` unsubscribes from `uri`: the servers it was the last
    /// subscriber of `uri` at (to be unsubscribed).
    pub(super) fn unsubscribe(&mut self, session: u64, uri: &str) -> Vec<usize> {
        let mut last = Vec::new();
        self.by.retain(|(server, at), sessions| {
            if at == uri && sessions.remove(&session) && sessions.is_empty() {
                last.push(*server);
            }
            !sessions.is_empty()
        });
        last
    }

    /// Session `session` ended: what it was the last subscriber of.
    pub(super) fn forget(&mut self, session: u64) -> Vec<(usize, String)> {
        let mut last = Vec::new();
        self.by.retain(|key, sessions| {
            if sessions.remove(&session) && sessions.is_empty() {
                last.push(key.clone());
            }
            !sessions.is_empty()
        });
        last
    }

    /// The URIs of server `server` that have subscribers.
    pub(super) fn uris(&self, server: usize) -> Vec<String> {
        self.by
            .keys()
            .filter(|(s, _)| *s == server)
            .map(|(_, uri)| uri.clone())
            .collect()
    }

    /// The sessions subscribed to `uri` at server `server`.
    pub(super) fn audience(&self, server: usize, uri: &str) -> Vec<u64> {
        self.by
            .get(&(server, uri.to_owned()))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Whether the server at `peer` declares `resources.subscribe`.
pub(super) fn declares(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|info| {
        info.capabilities
            .resources
            .as_ref()
            .is_some_and(|r| r.subscribe == Some(true))
    })
}

#[expect(deprecated, reason = "resources/subscribe is legacy-only, and every version we serve is")]
pub(super) async fn subscribe_at(peer: &Peer<RoleClient>, uri: &str) -> Result<(), ServiceError> {
    peer.subscribe(SubscribeRequestParams::new(uri)).await
}

#[expect(deprecated, reason = "resources/unsubscribe is legacy-only, and every version we serve is")]
pub(super) async fn unsubscribe_at(peer: &Peer<RoleClient>, uri: &str) -> Result<(), ServiceError> {
    peer.unsubscribe(UnsubscribeRequestParams::new(uri)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_subscriber_subscribes_the_last_unsubscribes_and_updates_go_to_subscribers() {
        let mut subs = Subscriptions::default();
        assert!(subs.subscribe(1, 0, "a://x"));
        assert!(!subs.subscribe(2, 0, "a://x"));
        assert!(!subs.subscribe(2, 0, "a://x"));
        assert!(subs.subscribe(2, 1, "b://y"));
        assert_eq!(subs.audience(0, "a://x"), vec![1, 2]);
        assert_eq!(subs.audience(0, "a://other"), Vec::<u64>::new());
        assert_eq!(subs.uris(0), vec!["a://x".to_owned()]);
        assert_eq!(subs.unsubscribe(1, "a://x"), Vec::<usize>::new());
        assert_eq!(subs.unsubscribe(1, "a://x"), Vec::<usize>::new());
        assert_eq!(subs.audience(0, "a://x"), vec![2]);
        let mut gone = subs.forget(2);
        gone.sort();
        assert_eq!(gone, vec![(0, "a://x".to_owned()), (1, "b://y".to_owned())]);
        assert!(subs.uris(0).is_empty());
    }
}
