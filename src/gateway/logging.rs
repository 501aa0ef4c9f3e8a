//! Servers' log messages through the gateway (docs/design.md §14, "Logging"):
//! the level each client session asked for (`logging/setLevel`), which
//! sessions a server's `notifications/message` goes to, how it is named after
//! its server, and the level the gateway asks of each server (the lowest any
//! session that sees it asked for). Pure but for [`set_at`], the request to a
//! server.

#![expect(deprecated, reason = "logging is deprecated by the 2026 protocol but spoken by every version we serve")]

use std::collections::HashMap;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::{Peer, RoleClient, ServiceError};

use super::member::Scope;

/// A level's place in RFC 5424's order, from `debug` (0) to `emergency` (7).
pub(super) fn rank(level: LoggingLevel) -> u8 {
    level as u8
}

/// The message as the server wrote it, with its `logger` named by the server:
/// `SERVER`, or `SERVER/LOGGER` when the server named one.
pub(super) fn named(server: &str, mut param: LoggingMessageNotificationParam) -> LoggingMessageNotificationParam {
    param.logger = Some(match param.logger.take() {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_owned(),
    });
    param
}

/// The level each client session asked for, and the level each server was
/// last asked for on their behalf.
#[derive(Default)]
pub(super) struct Levels {
    /// By session: its level and the servers it sees. A session that never
    /// set a level is not here, and gets no message.
    sessions: HashMap<u64, (LoggingLevel, Scope)>,
}

impl Levels {
    /// Session `session`, which sees `scope`, asked for `level`: the servers
    /// (of `servers`) whose wanted level changed, with the new one.
    pub(super) fn set(
        &mut self,
        session: u64,
        level: LoggingLevel,
        scope: Scope,
        servers: usize,
    ) -> Vec<(usize, LoggingLevel)> {
        let before = self.all_wanted(servers);
        self.sessions.insert(session, (level, scope));
        self.changes(before, servers)
    }

    /// Session `session` ended: the servers whose wanted level changed. A
    /// server that no session wants messages of keeps the level it has.
    pub(super) fn forget(&mut self, session: u64, servers: usize) -> Vec<(usize, LoggingLevel)> {
        if !self.sessions.contains_key(&session) {
            return Vec::new();
        }
        let before = self.all_wanted(servers);
        self.sessions.remove(&session);
        self.changes(before, servers)
    }

    /// The lowest level any session that sees server `server` asked for.
    pub(super) fn wanted(&self, server: usize) -> Option<LoggingLevel> {
        self.sessions
            .values()
            .filter(|(_, scope)| sees(scope, server))
            .map(|(level, _)| *level)
            .min_by_key(|level| rank(*level))
    }

    /// The sessions that get server `server`'s message at `level`.
    pub(super) fn audience(&self, server: usize, level: LoggingLevel) -> Vec<u64> {
        let mut sessions: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, (at, scope))| sees(scope, server) && rank(*at) <= rank(level))
            .map(|(id, _)| *id)
            .collect();
        sessions.sort_unstable();
        sessions
    }

    fn all_wanted(&self, servers: usize) -> Vec<Option<LoggingLevel>> {
        (0..servers).map(|s| self.wanted(s)).collect()
    }

    fn changes(&self, before: Vec<Option<LoggingLevel>>, servers: usize) -> Vec<(usize, LoggingLevel)> {
        before
            .into_iter()
            .zip(self.all_wanted(servers))
            .enumerate()
            .filter_map(|(server, (was, now))| match now {
                Some(now) if was != Some(now) => Some((server, now)),
                _ => None,
            })
            .collect()
    }
}

fn sees(scope: &Scope, server: usize) -> bool {
    scope.as_ref().is_none_or(|s| s.contains(&server))
}

/// Asks the server at `peer` for messages at `level` and above, if it declares
/// `logging` and is of the legacy era (the 2026-07-28 era has no
/// `logging/setLevel`: a request carries its level); nothing otherwise.
pub(super) async fn set_at(peer: &Peer<RoleClient>, level: LoggingLevel) -> Result<(), ServiceError> {
    let declares = peer.peer_info().is_some_and(|info| {
        info.capabilities.logging.is_some() && info.protocol_version.has_initialize()
    });
    if !declares {
        return Ok(());
    }
    peer.set_level(SetLevelRequestParams::new(level)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(servers: &[usize]) -> Scope {
        Some(servers.to_vec().into())
    }

    #[test]
    fn levels_follow_rfc_5424_order() {
        use LoggingLevel::*;
        let order = [Debug, Info, Notice, Warning, Error, Critical, Alert, Emergency];
        assert!(order.windows(2).all(|w| rank(w[0]) < rank(w[1])));
    }

    #[test]
    fn each_session_gets_what_is_at_or_above_its_level_from_the_servers_it_sees() {
        let mut levels = Levels::default();
        assert_eq!(levels.set(1, LoggingLevel::Debug, None, 2), vec![(0, LoggingLevel::Debug), (1, LoggingLevel::Debug)]);
        assert_eq!(levels.set(2, LoggingLevel::Error, scope(&[1]), 2), vec![]);
        assert_eq!(levels.audience(1, LoggingLevel::Info), vec![1]);
        assert_eq!(levels.audience(1, LoggingLevel::Error), vec![1, 2]);
        assert_eq!(levels.audience(0, LoggingLevel::Emergency), vec![1]);
        // A session that never set a level gets nothing.
        assert!(!levels.audience(1, LoggingLevel::Emergency).contains(&3));
        // The debug session ends: server 1 is asked for errors only; server 0,
        // which no session wants messages of any more, keeps its level.
        assert_eq!(levels.forget(1, 2), vec![(1, LoggingLevel::Error)]);
        assert_eq!(levels.wanted(0), None);
        assert_eq!(levels.forget(9, 2), vec![]);
    }

    #[test]
    fn a_message_is_named_by_its_server() {
        let message = LoggingMessageNotificationParam::new(LoggingLevel::Info, serde_json::json!({"k": 1}));
        assert_eq!(named("files", message.clone()).logger.as_deref(), Some("files"));
        let message = message.with_logger("db");
        let named = named("files", message);
        assert_eq!(named.logger.as_deref(), Some("files/db"));
        assert_eq!(named.data, serde_json::json!({"k": 1}));
    }
}
