//! The supervisor as one host of a fleet that spans hosts (docs/design.md §19):
//! its membership in etcd ([`Coordinator`]), the ledger that takes each server
//! before a generation of it starts (L19, L20) and gives it up once the
//! generation is confirmed gone, and the watch that follows the fleet: it
//! fences this host when its lease is no longer confirmed (L22), stops what the
//! fleet no longer wants, and takes over a server whose owner is gone, after
//! the lock delay (L23).
//!
//! Only with the `etcd` feature and a `coordination:` in the fleet file; on one
//! host none of this exists.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::persist::StateFile;
use crate::config::{CoordinationSpec, Fleet, Placement, ServerSpec};
use crate::coordination::{CoordinationError, Coordinator, ServerRecord, generation_of, host_id};
use crate::lifecycle::Generation;
use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
use crate::lifecycle::ledger::{Durable, Granted, Ledger, LiveRecord, QuarantineRecord};
use crate::lifecycle::state::Phase;
use crate::output::report::Report;
use crate::process::lineage::ProcId;

/// The file of the state directory that keeps this host's lease, for the
/// next supervisor to revoke.
const LEASE_FILE: &str = "etcd.lease";

/// Whether the last owner of `rec` is gone without giving it up: its record
/// is not the one a release writes.
fn lost(rec: &ServerRecord) -> bool {
    rec.record.as_deref().is_some_and(|r| {
        serde_json::from_str::<serde_json::Value>(r)
            .map_or(true, |v| v["phase"] != "stopped")
    })
}

/// Records `lease` as this host's, for the next supervisor of its state
/// directory to revoke.
pub(super) fn note_lease(file: &std::path::Path, lease: i64) {
    if let Err(e) = crate::state::replace_atomically(file, lease.to_string().as_bytes()) {
        tracing::warn!(error = %e, "cannot record this host's lease in {}", file.display());
    }
}

/// How long `down` waits for the hosts that run its servers to give them up.
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// Where one server stands in etcd, as the last read of the fleet's keys saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The owner host, while its lease lives.
    pub host: Option<String>,
    /// The generation its owner runs: the revision at which it took it.
    pub generation: Option<Generation>,
    /// Whether the fleet wants it running.
    pub desired: Option<bool>,
    /// The lease the owner key is bound to (0 without an owner).
    pub lease: i64,
    /// The revision of its record.
    pub revision: i64,
}

/// This host's membership of the fleet.
pub(crate) struct Hosts {
    pub(super) me: String,
    pub(super) spec: CoordinationSpec,
    pub(super) prefix: String,
    /// Replaced when this host joins again after it was fenced.
    pub(super) coordinator: Mutex<Arc<Coordinator>>,
    /// This supervisor's `state.json`: a generation is recorded there too, for
    /// recovery after a crash (L10).
    local: Arc<StateFile>,
    /// The revision of each owned server's record as this host last wrote it:
    /// what its next change compares (L21).
    pub(super) seen: Mutex<HashMap<String, i64>>,
    /// The fleet's servers as last read from etcd.
    pub(super) placed: Mutex<BTreeMap<String, Placed>>,
    /// Each server's `placement:`, from the fleet file as last taken up.
    pub(super) placements: Mutex<HashMap<String, Placement>>,
    /// Whether some server is wanted running anywhere: this supervisor stays
    /// (as a standby) while it is.
    pub(super) standing: watch::Sender<bool>,
    /// Where this host's lease is kept for the next supervisor to revoke.
    pub(super) lease_file: std::path::PathBuf,
    /// The revision of the fleet file's text this host last published or
    /// took up from etcd.
    pub(super) fleet_seen: std::sync::atomic::AtomicI64,
    /// Set once this host was asked to drain (`down --host`): it takes
    /// nothing more, and leaves once what it runs has stopped.
    pub(super) draining: std::sync::atomic::AtomicBool,
    /// The fleet's token, which every host's gateway takes and sends to
    /// another's (docs/design.md §19).
    pub(super) token: String,
    /// Cancelled when the supervisor begins to leave: no takeover after it.
    pub stop: CancellationToken,
}

fn refusal(kind: ErrorKind, message: String) -> ServerError {
    ServerError::new(kind, ErrorPhase::Request, message)
}

fn unreachable(e: &CoordinationError) -> ServerError {
    match e {
        CoordinationError::Unconfirmed(_) | CoordinationError::Fenced { .. } => {
            refusal(ErrorKind::Fenced, e.to_string())
        }
        _ => refusal(ErrorKind::SpawnFailed, format!("the fleet's etcd: {e}")),
    }
}

impl Hosts {
    /// Joins the fleet in etcd as this host.
    pub(super) async fn join(
        fleet: &Fleet,
        local: Arc<StateFile>,
        dir: &crate::state::StateDir,
    ) -> anyhow::Result<Arc<Hosts>> {
        let mut spec = fleet
            .coordination
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the fleet file has no `coordination:`"))?;
        spec.etcd = spec.endpoints_here().map_err(|e| anyhow::anyhow!("{e}"))?;
        let prefix = fleet.coordination_prefix();
        let me = host_id();
        let coordinator = Coordinator::join(&spec.etcd, spec.tls.as_ref(), &prefix, &me, spec.ttl)
            .await
            .map_err(|e| anyhow::anyhow!("cannot join the fleet in etcd ({}): {e}", spec.etcd.join(", ")))?;
        tracing::info!(host = %me, prefix = %prefix, lease = coordinator.lease(), "joined the fleet in etcd");
        // The lease of this state directory's previous supervisor, which is
        // gone (this one holds the lock) and whose processes recovery dealt
        // with: revoked, so that its servers are free now, not after its TTL.
        let kept = dir.root().join(LEASE_FILE);
        if let Some(previous) = std::fs::read_to_string(&kept)
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
            && previous != coordinator.lease()
        {
            match coordinator.revoke(previous).await {
                Ok(()) => tracing::info!(lease = previous, "revoked the lease of this host's previous supervisor"),
                Err(e) => tracing::warn!(lease = previous, error = %e, "cannot revoke the lease of this host's previous supervisor; its servers are free once its TTL has run out"),
            }
        }
        note_lease(&kept, coordinator.lease());
        // One token for every host's gateway: the fleet file's, else the
        // one kept in etcd (the first host to join writes it).
        let token = match &fleet.gateway.token {
            Some(text) => text.value.clone(),
            None => {
                let fresh = crate::gateway::http::new_token()?;
                coordinator
                    .fleet_token(&fresh)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot read the fleet's token in etcd: {e}"))?
            }
        };
        // A host that joins is back in the fleet, drained before or not.
        if let Err(e) = coordinator.clear_drain().await {
            tracing::warn!(error = %e, "cannot clear this host's drain in etcd");
        }
        Ok(Arc::new(Hosts {
            me,
            spec,
            prefix,
            coordinator: Mutex::new(Arc::new(coordinator)),
            local,
            seen: Mutex::new(HashMap::new()),
            placed: Mutex::new(BTreeMap::new()),
            placements: Mutex::new(placements_of(fleet.servers.iter())),
            standing: watch::channel(true).0,
            lease_file: kept,
            draining: std::sync::atomic::AtomicBool::new(false),
            fleet_seen: std::sync::atomic::AtomicI64::new(0),
            token,
            stop: CancellationToken::new(),
        }))
    }

    pub(crate) fn me(&self) -> &str {
        &self.me
    }

    /// Whether this host was asked to drain.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// This host drains: it takes nothing more and stops standing by.
    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::SeqCst);
        self.standing.send_if_modified(|s| std::mem::replace(s, false));
    }

    /// `down --host HOST`: the servers `host` runs now; this host begins to
    /// drain, or `host` is asked to in etcd.
    pub(crate) async fn drain(&self, host: &str) -> Result<Vec<String>, String> {
        let coordinator = self.coordinator();
        let all = coordinator
            .servers()
            .await
            .map_err(|e| format!("cannot read the fleet from etcd: {e}"))?;
        let owned = all
            .iter()
            .filter(|(_, r)| r.owner.as_deref() == Some(host))
            .map(|(name, _)| name.clone())
            .collect();
        if host == self.me {
            self.begin_drain();
        } else {
            let live = coordinator
                .hosts()
                .await
                .map_err(|e| format!("cannot read the fleet's hosts from etcd: {e}"))?;
            if !live.iter().any(|h| h == host) && !all.values().any(|r| r.owner.as_deref() == Some(host)) {
                return Err(format!("no host {host} is in the fleet (hosts: {})", live.join(", ")));
            }
            coordinator
                .set_drain(host)
                .await
                .map_err(|e| format!("cannot ask host {host} to drain: {e}"))?;
        }
        Ok(owned)
    }

    /// Waits until `host` has left the fleet (its key gone), or `deadline`;
    /// whether it has. This host, draining, counts as gone.
    pub(crate) async fn wait_host_gone(&self, host: &str, deadline: Instant) -> bool {
        if host == self.me {
            return true;
        }
        loop {
            match self.coordinator().hosts().await {
                Ok(live) if !live.iter().any(|h| h == host) => return true,
                _ if Instant::now() >= deadline => return false,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    pub(super) fn coordinator(&self) -> Arc<Coordinator> {
        self.coordinator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether this host's lease is confirmed now: no etcd round trip (L22).
    /// This host's lease now.
    pub(super) fn lease(&self) -> i64 {
        self.coordinator().lease()
    }

    pub(crate) fn confirmed(&self) -> bool {
        self.coordinator().confirmed().is_ok()
    }

    pub(crate) fn standing(&self) -> watch::Receiver<bool> {
        self.standing.subscribe()
    }

    /// Records what the fleet wants of `servers`, for every host to follow.
    pub(crate) async fn want(&self, servers: &[String], up: bool) -> Result<(), String> {
        let coordinator = self.coordinator();
        for name in servers {
            coordinator
                .set_desired(name, up)
                .await
                .map_err(|e| format!("cannot record in etcd that {name} is wanted {}: {e}", if up { "up" } else { "down" }))?;
        }
        Ok(())
    }

    /// Shows each server of `report` as the fleet runs it: a server that
    /// another host runs is `running` there, with that host's generation,
    /// and not an error of this host's; every server owned names its host.
    pub(crate) async fn place(&self, report: &mut Report) {
        let placed = match self.coordinator().servers().await {
            Ok(all) => all
                .iter()
                .map(|(name, rec)| (name.clone(), (rec.owner.clone(), generation_of(rec))))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the fleet from etcd for a report");
                self.placed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .map(|(name, p)| (name.clone(), (p.host.clone(), p.generation)))
                    .collect::<BTreeMap<_, _>>()
            }
        };
        for line in &mut report.servers {
            let Some((Some(host), generation)) = placed.get(&line.name).cloned() else {
                continue;
            };
            let here = host == self.me;
            let refused = line
                .error
                .as_ref()
                .is_some_and(|e| e.kind == ErrorKind::OwnedElsewhere);
            // What this host did last (stopped, or a start that failed
            // here) is history: another host runs the server now.
            let at_rest = matches!(line.state, Phase::Stopped | Phase::Failed | Phase::CrashLoop);
            match !here && (refused || at_rest) {
                true => line.runs_elsewhere(host, generation),
                false => line.host = Some(host),
            }
        }
        report.rank();
    }

    /// Publishes the fleet file `up` read, for every host to converge on.
    pub(crate) async fn publish_fleet(&self, text: &str) {
        match self.coordinator().publish_fleet(text).await {
            Ok(revision) => {
                self.fleet_seen
                    .fetch_max(revision, std::sync::atomic::Ordering::SeqCst);
            }
            Err(e) => tracing::warn!(error = %e, "cannot publish the fleet file in etcd; the other hosts keep theirs"),
        }
    }

    /// Those of `servers` that another host runs now: name, host, generation.
    pub(crate) async fn run_elsewhere(
        &self,
        servers: &[String],
    ) -> Vec<(String, String, Option<Generation>)> {
        let Ok(all) = self.coordinator().servers().await else {
            return Vec::new();
        };
        servers
            .iter()
            .filter_map(|name| {
                let rec = all.get(name)?;
                let host = rec.owner.clone().filter(|h| h != &self.me)?;
                Some((name.clone(), host, generation_of(rec)))
            })
            .collect()
    }

    /// Waits until each of `servers` has an owner, or `deadline`.
    pub(crate) async fn wait_owned(&self, servers: &[String], deadline: Instant) {
        while Instant::now() < deadline {
            match self.coordinator().servers().await {
                Ok(all) if servers.iter().all(|s| all.get(s).is_some_and(|r| r.owner.is_some())) => {
                    return;
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// How long `up` waits for the hosts a server is placed on to take it:
    /// the lock delay, two reads of the fleet, and a start.
    pub(crate) fn placing_wait(&self) -> Duration {
        self.spec.lock_delay + 2 * self.period() + Duration::from_secs(15)
    }

    /// How often the fleet's keys are read: a third of the TTL, at most a second.
    pub(super) fn period(&self) -> Duration {
        (self.spec.ttl / 3).min(Duration::from_secs(1))
    }

    /// Waits until none of `servers` has an owner any more, or `deadline`;
    /// the ones still owned then, with their hosts.
    pub(crate) async fn wait_released(
        &self,
        servers: &[String],
        deadline: Instant,
    ) -> Vec<(String, String)> {
        loop {
            let still: Vec<(String, String)> = match self.coordinator().servers().await {
                Ok(all) => servers
                    .iter()
                    .filter_map(|s| {
                        let owner = all.get(s)?.owner.clone()?;
                        Some((s.clone(), owner))
                    })
                    .collect(),
                Err(_) => servers.iter().map(|s| (s.clone(), "unknown".to_owned())).collect(),
            };
            if still.is_empty() || Instant::now() >= deadline {
                return still;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The record written with a take or a release: who and when.
    fn record(&self, phase: &str) -> String {
        serde_json::json!({
            "host": self.me,
            "phase": phase,
            "time": crate::lifecycle::events::rfc3339(std::time::SystemTime::now()),
        })
        .to_string()
    }

    /// Takes `server` for a new generation: in one transaction when no host
    /// owns it (L19), or by a fenced update when this host already does; the
    /// generation is the revision written (L20).
    async fn take(&self, server: &str) -> Result<Generation, ServerError> {
        if self.is_draining() {
            return Err(refusal(
                ErrorKind::OwnedElsewhere,
                format!("{server}: this host ({}) is draining (`down --host`)", self.me),
            ));
        }
        let placement = self
            .placements
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(server)
            .cloned()
            .unwrap_or_default();
        if !placement.allows(&self.me) {
            return Err(refusal(
                ErrorKind::OwnedElsewhere,
                format!(
                    "{server} is placed on {}, not on this host ({})",
                    placement.hosts.join(", "),
                    self.me
                ),
            ));
        }
        let coordinator = self.coordinator();
        let mut waited = false;
        for _ in 0..4 {
            coordinator.confirmed().map_err(|e| unreachable(&e))?;
            let now = coordinator.server(server).await.map_err(|e| unreachable(&e))?;
            // An owner lost without giving the server up (its lease ran out):
            // the lock delay first, whoever takes it (L23).
            if now.owner.is_none() && !waited && lost(&now) {
                waited = true;
                tokio::time::sleep(self.spec.lock_delay).await;
                continue;
            }
            if now.desired == Some(false) && now.owner.is_none() {
                return Err(refusal(
                    ErrorKind::Cancelled,
                    format!("{server} is wanted down (a `down` on some host); `up` it to start it"),
                ));
            }
            let taken = match &now.owner {
                Some(host) if host != &self.me || now.owner_lease != coordinator.lease() => {
                    let generation = generation_of(&now);
                    return Err(refusal(
                        ErrorKind::OwnedElsewhere,
                        format!(
                            "{server} runs on host {host}{}",
                            generation.map_or(String::new(), |g| format!(" (generation {g})"))
                        ),
                    ));
                }
                Some(_) => coordinator
                    .update(server, now.revision, &self.record("starting"))
                    .await,
                None => coordinator
                    .take(server, now.revision, &self.record("starting"))
                    .await
                    .map(|t| t.revision),
            };
            match taken {
                Ok(revision) => {
                    self.seen
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(server.to_owned(), revision);
                    return Ok(revision.max(0) as Generation);
                }
                // Another host moved the record between the read and the
                // transaction: read again.
                Err(CoordinationError::Fenced { .. } | CoordinationError::Owned { .. }) => {
                    continue;
                }
                Err(e) => return Err(unreachable(&e)),
            }
        }
        Err(refusal(
            ErrorKind::Busy,
            format!("{server}: other hosts kept changing its record; try again"),
        ))
    }

    /// Gives `server` up once its generation is confirmed gone.
    async fn release(&self, server: &str) {
        let Some(seen) = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(server)
        else {
            return;
        };
        if let Err(e) = self
            .coordinator()
            .release(server, seen, &self.record("stopped"))
            .await
        {
            tracing::warn!(server, error = %e, "could not give the server up in etcd (another host may own it now)");
        }
    }

    /// Gives up `server`, owned by this host under its current lease at
    /// `revision` but run by none of its generations (a start that failed
    /// before anything ran, a release that did not reach etcd).
    pub(super) async fn give_up(&self, server: &str, revision: i64) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(server);
        match self
            .coordinator()
            .release(server, revision, &self.record("stopped"))
            .await
        {
            Ok(_) => tracing::info!(server, "gave up a server this host owned but did not run"),
            Err(e) => tracing::warn!(server, error = %e, "could not give up a server this host does not run"),
        }
    }

    /// Leaves the fleet: the lease is revoked, and with it the owner keys
    /// still held.
    pub(super) async fn leave(&self) {
        if let Err(e) = self.coordinator().revoke_own().await {
            tracing::warn!(error = %e, "cannot revoke this host's lease; its keys go when its TTL has run out");
        }
    }
}

pub(super) fn placements_of<'a>(servers: impl Iterator<Item = &'a ServerSpec>) -> HashMap<String, Placement> {
    servers
        .map(|s| (s.name.clone(), s.placement.clone()))
        .collect()
}



/// The ledger of a host of the fleet: etcd first, then `state.json`.
pub(super) struct HostLedger(pub Arc<Hosts>);

impl Ledger for HostLedger {
    fn reserve(&self, server: &str, generation: Generation) -> Granted {
        let (hosts, server) = (self.0.clone(), server.to_owned());
        Box::pin(async move {
            let given = hosts.take(&server).await?;
            if given < generation {
                hosts.release(&server).await;
                return Err(ServerError::new(
                    ErrorKind::SpawnFailed,
                    ErrorPhase::Spawn,
                    format!("etcd gave generation {given}, below {generation} recorded here: was the etcd cluster replaced?"),
                ));
            }
            if let Err(e) = hosts.local.reserve(&server, given).await {
                hosts.release(&server).await;
                return Err(e);
            }
            Ok(given)
        })
    }

    fn spawned(&self, server: &str, record: LiveRecord) -> Durable {
        self.0.local.spawned(server, record)
    }

    fn serving(&self) -> Result<(), ServerError> {
        match self.0.confirmed() {
            true => Ok(()),
            false => Err(refusal(
                ErrorKind::Fenced,
                "this host's lease in etcd is not confirmed: it serves no call until it is (fenced)".to_owned(),
            )),
        }
    }

    fn lineage(&self, server: &str, generation: Generation, members: Vec<ProcId>) -> Durable {
        self.0.local.lineage(server, generation, members)
    }

    fn ended(
        &self,
        server: &str,
        generation: Generation,
        quarantine: Option<QuarantineRecord>,
    ) -> Durable {
        let quarantined = quarantine.is_some();
        let local = self.0.local.ended(server, generation, quarantine);
        let (hosts, server) = (self.0.clone(), server.to_owned());
        Box::pin(async move {
            let written = local.await;
            // A quarantined generation may still live: the server stays this
            // host's, so that no other host starts one over it (L4).
            if !quarantined {
                hosts.release(&server).await;
            }
            written
        })
    }
}
