//! The gateway: the fleet served to MCP clients as one MCP server
//! (docs/design.md §14). It lives in the supervisor, once; `mcpfleet connect`
//! (stdio, over the control socket) and `mcpfleet serve` (streamable HTTP) are
//! doors to it (G1).
//!
//! ```text
//!  client ─► door ─► ClientSession (one per client session, `session.rs`)
//!                      │ tools/list, prompts/list, resources/list: the catalog,
//!                      │   refreshed per server when its generation changes or it
//!                      │   announces a change
//!                      └ tools/call: the server's published peer (G2); a server
//!                          that is not running gets a start request first
//!  server ─► Listener (its session's notifications) ─► the gateway's task ─►
//!            lists marked stale, each client's queue (G5); log messages to the
//!            sessions at their level, resource updates to the subscribers
//!  client's logging/setLevel, resources/subscribe ─► the gateway's task
//!            (`logging.rs`, `subscriptions.rs`) ─► the servers' level and
//!            subscriptions, kept for each new generation
//!  2026-07-28 client's subscriptions/listen (`listen.rs`) ─► a subscriber
//!            at the gateway's task, which puts list changes and resource
//!            updates on the stream; its call's logLevel (`call_log.rs`) ─►
//!            the server's messages during the call, on the call's stream
//!  authority snapshots ─► watcher ─► the gateway's task ─► list_changed on each
//!                                     client's queue (G5)
//! ```
//!
//! The gateway never holds a server's session of its own and never waits in an
//! authority's queue for a call: calls go through the peer the authority
//! publishes, in parallel (G2). Its members are set by the supervisor's fleet
//! task alone (`aggregate.rs`); what it knows each server offers, its catalogs,
//! its client sessions, the routes of progress and the calls in flight are
//! owned by the gateway's task (`desk.rs`), which publishes what readers need;
//! what it knows of each server's lists is in `catalog.rs`; what it sends each
//! client goes through that client's one queue (`clients.rs`); servers'
//! requests of their client are relayed by `relay.rs` (to a 2026-07-28
//! client in input-required results, its call parked in `inputs.rs`); the
//! sessions' log levels
//! and resource subscriptions are kept in `logging.rs` and `subscriptions.rs`
//! (owned by the gateway's task). This file only declares
//! and re-exports.

pub(crate) mod aggregate;
pub(crate) mod bounds;
mod call_log;
mod catalog;
mod clients;
mod desk;
mod era;
mod fast;
pub(crate) mod http;
pub(crate) mod inputs;
mod journal;
mod legacy_tasks;
mod listen;
mod listen_at;
mod logging;
pub(crate) mod member;
pub(crate) mod names;
mod pass;
mod relay;
mod resume;
mod roots;
mod session;
mod subscriptions;
mod tasks;
mod written;

pub(crate) use aggregate::Gateway;
pub(crate) use desk::SessionEvent;
pub(crate) use journal::Journal;
pub(crate) use member::{Exposure, Member};
pub(crate) use pass::PassThrough;
pub(crate) use session::{ClientSession, Opened};
pub(crate) use written::{AsWritten, UntokenedTransport};
