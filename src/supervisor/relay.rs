//! A gateway on every host (docs/design.md §19, L24): this host's gateway
//! door is kept open and published in etcd, where the other hosts' gateways
//! find it, and a call to a server another host runs is relayed to that host's
//! gateway, at the server's own endpoint (`/mcp/servers/NAME`), for the one
//! generation the fleet's keys show it running. The owner's gateway refuses a
//! request for any other generation, so a call never reaches a generation
//! older than the one etcd shows.
//!
//! ```text
//!  client ─► this host's gateway ─► member NAME: no generation runs here
//!              └ its relay (a session of protocol 2026-07-28) ─► owner host's
//!                gateway /mcp/servers/NAME, Mcpfleet-Generation: G ─► G
//! ```
//!
//! Only with the `etcd` feature and a `coordination:` in the fleet file.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::handle::FleetHandle;
use super::hosts::{Hosts, Placed};
use crate::lifecycle::Generation;
use crate::lifecycle::authority::{Handle, Reach};
use crate::process::notice::Listener;
use crate::process::session::Session;

/// Where this host's gateway listens, over the fleet file's `gateway.listen`:
/// each host of a fleet that spans hosts opens its gateway when it joins.
pub const LISTEN_ENV: &str = "MCPFLEET_LISTEN";

/// The URL of this host's gateway as the other hosts reach it
/// (`http://HOST:PORT/mcp`); by default the address it listens at, or this
/// host's name when it listens on every address.
pub const ADVERTISE_ENV: &str = "MCPFLEET_ADVERTISE";

/// How long a relay's session may take to open.
const OPEN_WITHIN: Duration = Duration::from_secs(10);
/// How long a relay's session that is no longer wanted may take to close.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);
/// How long after a relay failed to open it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(3);

/// Where the calls to one server go: its generation, on its owner host.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    host: String,
    generation: Generation,
    /// The server's endpoint at the owner's gateway.
    url: String,
}

/// One server's relay: aimed at `target`, and how far it got.
struct Relay {
    target: Target,
    leg: Leg,
}

/// How far a relay got.
enum Leg {
    Opening,
    Open(Box<Session>),
    /// It could not open, at this moment: tried again after [`RETRY_AFTER`].
    Failed(Instant),
}

/// The relays of this host, and where its own gateway was last published.
pub(crate) struct Relays {
    /// The fleet's token, which every host's gateway takes.
    token: String,
    /// The CA of the other hosts' gateway certificates (`gateway.tls.ca`).
    ca: Option<reqwest::Certificate>,
    open: Mutex<HashMap<String, Relay>>,
    /// The lease and URL this host's gateway was last published under.
    published: Mutex<Option<(i64, String)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Relays {
    pub(super) fn new(token: String, ca: Option<reqwest::Certificate>) -> Arc<Relays> {
        Arc::new(Relays {
            token,
            ca,
            open: Mutex::default(),
            published: Mutex::default(),
        })
    }
}

/// The CA of `gateway.tls.ca`, read; `None` without one, or when it cannot
/// be read (said in the log: relays then trust the system's roots only).
pub(super) fn gateways_ca(fleet: &crate::config::Fleet) -> Option<reqwest::Certificate> {
    let path = fleet.gateway.tls.as_ref()?.ca.as_ref()?;
    let read = std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|pem| reqwest::Certificate::from_pem(&pem).map_err(|e| e.to_string()));
    match read {
        Ok(ca) => Some(ca),
        Err(e) => {
            tracing::warn!(error = %e, file = %path.display(), "cannot read gateway.tls.ca; relays trust the system's roots only");
            None
        }
    }
}

/// Where this host's gateway listens: `$MCPFLEET_LISTEN`, else what the
/// fleet file says (`None`).
pub(super) fn listen_here() -> Option<String> {
    std::env::var(LISTEN_ENV)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The URL the other hosts reach this host's gateway at, listening at `addr`
/// (over HTTPS with `tls`).
fn advertised(addr: std::net::SocketAddr, tls: bool) -> String {
    if let Ok(url) = std::env::var(ADVERTISE_ENV)
        && !url.trim().is_empty()
    {
        return url.trim().trim_end_matches('/').to_owned();
    }
    if addr.ip().is_unspecified() {
        let host = crate::platform::hostname().unwrap_or_else(|| "localhost".to_owned());
        let scheme = if tls { "https" } else { "http" };
        return format!("{scheme}://{host}:{}{}", addr.port(), crate::gateway::http::PATH);
    }
    crate::gateway::http::url(addr, tls)
}

/// Keeps this host's gateway door open and published under its lease, for
/// the other hosts to relay calls to the servers it runs, while the fleet
/// wants a server running anywhere; closes it once it wants none, as a `down`
/// closes the door of the host it ran on. Called before the host stops
/// standing by, so that a supervisor about to leave finds its door closed.
pub(super) async fn keep_door(hosts: &Hosts, relays: &Relays, fleet: &FleetHandle, wanted: bool) {
    if !wanted {
        if fleet.listening().is_some() {
            fleet.close_http().await;
        }
        *lock(&relays.published) = None;
        return;
    }
    let open = match fleet.listening() {
        Some(open) => open,
        None => match fleet.open_http(listen_here()).await {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(error = %e, "cannot open this host's gateway: no other host can relay calls to its servers");
                return;
            }
        },
    };
    let url = advertised(open.addr, open.tls);
    let lease = hosts.lease();
    let now = Some((lease, url.clone()));
    if *lock(&relays.published) == now {
        return;
    }
    match hosts.coordinator().publish_gateway(&url).await {
        Ok(()) => {
            tracing::info!(%url, "this host's gateway published for the other hosts");
            *lock(&relays.published) = now;
        }
        Err(e) => tracing::warn!(error = %e, "cannot publish this host's gateway in etcd"),
    }
}

/// Aims each server's relay at the generation its owner runs, when that
/// owner is another host whose gateway is published; drops the relays of
/// servers this host runs, that no host runs, or that left the fleet.
pub(super) async fn follow(
    hosts: &Hosts,
    relays: &Arc<Relays>,
    fleet: &FleetHandle,
    placed: &BTreeMap<String, Placed>,
) {
    let gateways = match hosts.coordinator().gateways().await {
        Ok(gateways) => gateways,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the hosts' gateways from etcd");
            return;
        }
    };
    let view = fleet.view();
    let mut held = std::collections::HashSet::new();
    for server in &view.roster.servers {
        let name = &server.spec.name;
        held.insert(name.as_str());
        let target = placed.get(name).and_then(|p| {
            let host = p.host.clone().filter(|h| *h != hosts.me)?;
            let url = gateways.get(&host)?;
            Some(Target {
                url: format!("{}/servers/{name}", url.trim_end_matches('/')),
                generation: p.generation?,
                host,
            })
        });
        let listener = fleet.fixed.gateway.listener(server.slot);
        aim(relays, name, target, &server.handle, listener, &fleet.fixed.tracker);
    }
    let gone: Vec<Relay> = {
        let mut open = lock(&relays.open);
        let names: Vec<String> = open.keys().filter(|n| !held.contains(n.as_str())).cloned().collect();
        names.iter().filter_map(|n| open.remove(n)).collect()
    };
    for relay in gone {
        close(relay, &fleet.fixed.tracker);
    }
}

fn close(relay: Relay, tracker: &tokio_util::task::TaskTracker) {
    if let Leg::Open(session) = relay.leg {
        tracker.spawn(async move {
            session.close(CLOSE_WITHIN).await;
        });
    }
}

/// Aims server `name`'s relay at `target` (`None`: no relay): a relay aimed
/// elsewhere is dropped at once, and a new one opened in a task of its own.
fn aim(
    relays: &Arc<Relays>,
    name: &str,
    target: Option<Target>,
    handle: &Handle,
    listener: Arc<dyn Listener>,
    tracker: &tokio_util::task::TaskTracker,
) {
    let mut open = lock(&relays.open);
    if let Some(relay) = open.get(name)
        && Some(&relay.target) == target.as_ref()
    {
        let again = match &relay.leg {
            Leg::Opening => false,
            Leg::Open(session) => session.lost().is_some(),
            Leg::Failed(at) => at.elapsed() >= RETRY_AFTER,
        };
        if !again {
            return;
        }
    }
    if let Some(old) = open.remove(name) {
        handle.relay(None);
        close(old, tracker);
    }
    let Some(target) = target else {
        return;
    };
    open.insert(
        name.to_owned(),
        Relay {
            target: target.clone(),
            leg: Leg::Opening,
        },
    );
    drop(open);
    let (relays, name, handle) = (relays.clone(), name.to_owned(), handle.clone());
    tracker.spawn(async move {
        let remote = crate::process::remote::Remote {
            url: target.url.clone(),
            headers: vec![
                ("Authorization".to_owned(), format!("Bearer {}", relays.token)),
                (crate::gateway::http::GENERATION.to_owned(), target.generation.to_string()),
            ],
            keeper: None,
            ca: relays.ca.clone(),
        };
        let opening = Session::initialize_http(&remote, Default::default(), Some(listener), OPEN_WITHIN);
        let opened = match tokio::time::timeout(OPEN_WITHIN, opening).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} s", OPEN_WITHIN.as_secs())),
        };
        // What is left to close, once the lock is let go: a session opened
        // for a relay aimed elsewhere meanwhile.
        let stale = settle(&relays, &name, &target, &handle, opened);
        if let Some(session) = stale {
            let _ = session.close(CLOSE_WITHIN).await;
        }
    });
}

/// Records how the relay of `name` to `target` opened: relayed to from now
/// on, or to be tried again. The session when the relay was aimed elsewhere
/// meanwhile, for the caller to close.
fn settle(
    relays: &Relays,
    name: &str,
    target: &Target,
    handle: &Handle,
    opened: Result<Session, String>,
) -> Option<Session> {
    let mut open = lock(&relays.open);
    let Some(relay) = open
        .get_mut(name)
        .filter(|r| r.target == *target && matches!(r.leg, Leg::Opening))
    else {
        return opened.ok();
    };
    match opened {
        Ok(session) => {
            tracing::info!(server = %name, host = %target.host, generation = target.generation, "calls relayed to the host that runs it");
            handle.relay(Some(Reach {
                generation: target.generation,
                session: session.reachable(),
            }));
            relay.leg = Leg::Open(Box::new(session));
        }
        Err(e) => {
            relay.leg = Leg::Failed(Instant::now());
            tracing::warn!(server = %name, host = %target.host, error = %e, "cannot relay calls to the host that runs it; trying again");
        }
    }
    None
}
