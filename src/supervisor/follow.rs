//! The watch that follows the fleet in etcd for one host (docs/design.md
//! §19): it fences this host when its lease is no longer confirmed (L22),
//! stops what the fleet no longer wants here, and takes over a wanted server
//! that no host owns once the lock delay has passed (L23).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handle::FleetHandle;
use super::hosts::{Hosts, Placed, placements_of};
use crate::coordination::generation_of;
use crate::coordination::Coordinator;
use crate::lifecycle::authority::CallOptions;
use crate::lifecycle::state::{Intent, Phase};

/// Fences this host the moment its lease is no longer confirmed (L22): a task
/// of its own, so that no slow request to etcd delays it.
pub(super) async fn fence_watch(hosts: Arc<Hosts>, fleet: FleetHandle) {
    loop {
        tokio::select! {
            () = hosts.stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        if !hosts.confirmed() {
            fence(&hosts, &fleet).await;
        }
    }
}

/// Follows the fleet in etcd until the supervisor leaves: stops what is no
/// longer wanted here or no longer this host's, gives up what this host owns
/// and does not run, and takes over a wanted server that no host owns.
pub(super) async fn follow(hosts: Arc<Hosts>, fleet: FleetHandle) {
    // When this host last asked to take each server no host owned.
    let mut absent_since: HashMap<String, Instant> = HashMap::new();
    // Since when this host has owned each server without running it.
    let mut idle_owned: HashMap<String, Instant> = HashMap::new();
    // The calls relayed to the servers the other hosts run.
    let ca = super::relay::gateways_ca(&fleet.view().roster.fleet);
    let relays = super::relay::Relays::new(hosts.token.clone(), ca);
    loop {
        tokio::select! {
            () = hosts.stop.cancelled() => return,
            () = tokio::time::sleep(hosts.period()) => {}
        }
        if !hosts.confirmed() {
            absent_since.clear();
            idle_owned.clear();
            continue;
        }
        let all = match hosts.coordinator().servers().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the fleet from etcd");
                continue;
            }
        };
        let placed: BTreeMap<String, Placed> = all
            .iter()
            .map(|(name, rec)| {
                let placed = Placed {
                    host: rec.owner.clone(),
                    generation: generation_of(rec),
                    desired: rec.desired,
                    lease: rec.owner_lease,
                    revision: rec.revision,
                };
                (name.clone(), placed)
            })
            .collect();
        // Asked to drain (`down --host` on another host): stop what runs
        // here, take nothing more, and leave.
        if !hosts.is_draining() && hosts.coordinator().draining().await.unwrap_or(false) {
            tracing::info!("asked to drain: stopping every server of this host, then leaving");
            hosts.begin_drain();
            let drained = fleet.clone();
            fleet.fixed.tracker.spawn(async move {
                let handles = drained.handles();
                let _ = crate::host::request_all(&handles, Intent::Stop, CallOptions::default(), |_| {}).await;
                drained.after_down().await;
            });
        }
        converge_on_published(&hosts, &fleet).await;
        let view = fleet.view();
        *hosts.placements.lock().unwrap_or_else(|p| p.into_inner()) =
            placements_of(view.roster.servers.iter().map(|h| &h.spec));
        let live = hosts.coordinator().hosts().await.unwrap_or_default();
        // A host stands by until a `down` has asked every server of the fleet
        // down (docs/design.md §19).
        let wanted = view.roster.servers.iter().any(|h| {
            h.spec.enabled && placed.get(&h.spec.name).and_then(|p| p.desired) != Some(false)
        });
        *hosts.placed.lock().unwrap_or_else(|p| p.into_inner()) = placed.clone();
        let wanted = wanted && !hosts.is_draining();
        // This host's gateway, open for the other hosts while it stands by.
        super::relay::keep_door(&hosts, &relays, &fleet, wanted).await;
        hosts.standing.send_if_modified(|s| std::mem::replace(s, wanted) != wanted);
        if hosts.stop.is_cancelled() || !hosts.confirmed() {
            continue;
        }
        // The calls to what the other hosts run, relayed to their gateways.
        super::relay::follow(&hosts, &relays, &fleet, &placed).await;
        let lease = hosts.lease();
        for held in &view.roster.servers {
            let name = &held.spec.name;
            let at = placed.get(name);
            let owner = at.and_then(|p| p.host.as_deref());
            let ours = owner == Some(hosts.me.as_str()) && at.is_some_and(|p| p.lease == lease);
            let desired = at.and_then(|p| p.desired);
            let handle = held.handle.clone();
            let local = handle.published().state;
            // Owned here and run by no generation (a start that failed before
            // anything ran, a release that did not reach etcd): given up after
            // two reads, so that another host may run it.
            let idle = ours && matches!(local, Phase::Stopped | Phase::Failed);
            match idle {
                true => {
                    let since = *idle_owned.entry(name.clone()).or_insert_with(Instant::now);
                    if since.elapsed() >= 2 * hosts.period()
                        && let Some(at) = at
                    {
                        idle_owned.remove(name);
                        hosts.give_up(name, at.revision).await;
                    }
                }
                false => {
                    idle_owned.remove(name);
                }
            }
            // Running here, yet not this host's under its lease: a generation
            // that outlived a lease (L21, L22). It ends now.
            if local == Phase::Running && !ours {
                tracing::warn!(server = %name, owner = ?owner, "running here without owning it in etcd: stopping it");
                request(&fleet, handle, Intent::Stop);
                continue;
            }
            match (owner, desired) {
                // Wanted down by a host's `down`: this owner follows.
                (Some(_), Some(false)) if ours => {
                    absent_since.remove(name);
                    if matches!(local, Phase::Running | Phase::Backoff | Phase::Failed) {
                        tracing::info!(server = %name, "the fleet wants it down: stopping it");
                        request(&fleet, handle, Intent::Stop);
                    }
                }
                // Wanted, and no host owns it: take it. The take waits the
                // lock delay itself when the owner was lost rather than
                // giving it up (L23); asked again only once that has passed.
                (None, Some(true)) if held.spec.enabled && !held.orphaned => {
                    let again = hosts.spec.lock_delay + 2 * hosts.period();
                    let asked = absent_since.get(name).is_some_and(|at| at.elapsed() < again);
                    if !asked
                        && matches!(local, Phase::Stopped | Phase::Failed)
                        && held.spec.placement.may_take(&hosts.me, &live)
                        && !hosts.is_draining()
                    {
                        tracing::info!(server = %name, "no host runs it: taking it over");
                        absent_since.insert(name.clone(), Instant::now());
                        request(&fleet, handle, Intent::Start);
                    }
                }
                _ => {
                    absent_since.remove(name);
                }
            }
        }
    }
}

/// Takes up the fleet file last published in etcd (by an `up` on any host)
/// when it is newer than the one this host has, and converges on it as `up`
/// would: what this host runs and whose definition changed is restarted, and
/// what no host runs is taken (L25). `${env:}` comes from this host's own
/// environment; relative paths from its own fleet file's folder.
async fn converge_on_published(hosts: &Arc<Hosts>, fleet: &FleetHandle) {
    use std::sync::atomic::Ordering;
    let Ok(Some((text, revision))) = hosts.coordinator().fleet().await else {
        return;
    };
    if revision <= hosts.fleet_seen.load(Ordering::SeqCst) {
        return;
    }
    hosts.fleet_seen.fetch_max(revision, Ordering::SeqCst);
    let view = fleet.view();
    if view.roster.source.as_ref().is_some_and(|s| s.text == text) {
        return;
    }
    let file = view.roster.fleet.file.clone();
    let Some(path) = file.to_str().map(str::to_owned) else {
        return;
    };
    let (parsed, seen) = match crate::config::load_text_from_env(&text, &file) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::warn!(error = %e, revision, "the fleet file published in etcd is not valid here; this host keeps its own");
            return;
        }
    };
    let source = crate::protocol::FleetSource {
        path,
        text,
        env: seen,
        version: None,
    };
    tracing::info!(revision, "taking up the fleet file published in etcd");
    // What runs here converges (a changed definition restarts); nothing else
    // starts: what the fleet wants and no host runs is taken as always.
    let here: Vec<String> = view
        .roster
        .servers
        .iter()
        .filter(|h| !matches!(h.handle.published().state, Phase::Stopped | Phase::Failed))
        .map(|h| h.spec.name.clone())
        .filter(|name| parsed.server(name).is_some())
        .collect();
    let fleet = fleet.clone();
    fleet.fixed.tracker.clone().spawn(async move {
        if here.is_empty() {
            if let Err(e) = fleet.take_up(Some(&source)).await {
                tracing::warn!(error = %e, "cannot take up the fleet file published in etcd");
            }
            return;
        }
        let up = super::plan::Up {
            servers: here,
            fleet: Some(source),
            options: super::answer::call_options(crate::protocol::Deadlines::default(), false),
            dry_run: false,
            remove_orphans: false,
        };
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let _ = super::converge::up(&fleet, up, &tx).await;
    });
}

/// Asks the authority for `intent`, without waiting for its outcome.
fn request(fleet: &FleetHandle, handle: crate::lifecycle::authority::Handle, intent: Intent) {
    fleet.fixed.tracker.spawn(async move {
        let _ = handle.request(intent, CallOptions::default()).await;
    });
}

/// This host's lease is no longer confirmed: it may have been taken over, so
/// what it runs is torn down at once (L22); then it joins again, as a standby.
async fn fence(hosts: &Arc<Hosts>, fleet: &FleetHandle) {
    let running: Vec<_> = fleet
        .handles()
        .into_iter()
        .filter(|h| !matches!(h.published().state, Phase::Stopped))
        .collect();
    tracing::warn!(servers = running.len(), "this host's lease is not confirmed: fencing, every server of it is torn down");
    // Fenced for good: a renewal that gets through late confirms nothing.
    hosts.coordinator().fence();
    let stops = running
        .iter()
        .map(|h| h.request(Intent::Stop, CallOptions::default()));
    // Bounded: a stop waits behind a start under way; what is still running
    // afterwards, the follow task stops once it sees it unowned.
    let bound = hosts.spec.ttl + Duration::from_secs(30);
    if tokio::time::timeout(bound, futures::future::join_all(stops)).await.is_err() {
        tracing::warn!("fencing: some teardowns did not finish in time; joining again meanwhile");
    }
    hosts.seen.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // Join again, with a new lease, until etcd answers or the supervisor leaves.
    loop {
        let joined = Coordinator::join(&hosts.spec.etcd, hosts.spec.tls.as_ref(), &hosts.prefix, &hosts.me, hosts.spec.ttl);
        tokio::select! {
            () = hosts.stop.cancelled() => return,
            joined = joined => match joined {
                Ok(c) => {
                    tracing::info!(lease = c.lease(), "joined the fleet again after fencing");
                    super::hosts::note_lease(&hosts.lease_file, c.lease());
                    let old = std::mem::replace(
                        &mut *hosts.coordinator.lock().unwrap_or_else(|p| p.into_inner()),
                        Arc::new(c),
                    );
                    old.stop_renewing();
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "cannot join the fleet again yet"),
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

