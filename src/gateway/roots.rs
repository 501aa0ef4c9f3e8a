//! A client's `notifications/roots/list_changed`, relayed to the servers its
//! session sees that run in the legacy era (docs/design.md §14, "Roots"): each
//! may then ask `roots/list` again, which is answered as any other (asked of
//! the client whose call caused it). A server of the 2026-07-28 era has no such
//! notification (it asks for roots in an input-required result), and a server
//! that is not running is not started for it.

use super::aggregate::Gateway;
use super::member::Scope;

/// Tells each running legacy-era server in `scope` that the roots of session
/// `session`'s client changed; the number of servers told.
pub(super) async fn relay_changed(gateway: &Gateway, scope: &Scope, session: u64) -> usize {
    let members = gateway.members();
    let mut told = 0;
    for (index, member) in members.iter().enumerate() {
        let Some(member) = member else {
            continue;
        };
        if scope.as_ref().is_some_and(|s| !s.contains(&index)) {
            continue;
        }
        let Some(reach) = member.handle.reach() else {
            continue;
        };
        let peer = reach.session.peer();
        let legacy = peer
            .peer_info()
            .is_none_or(|info| info.protocol_version.has_initialize());
        if !legacy {
            continue;
        }
        match peer.notify_roots_list_changed().await {
            Ok(()) => told += 1,
            Err(e) => gateway.note(format_args!(
                "session {session}: server {} was not told that the client's roots changed: {e}",
                member.handle.name()
            )),
        }
    }
    told
}
