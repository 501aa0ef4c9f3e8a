//! A fleet's authority kept in etcd v3, for a fleet that spans hosts
//! (docs/design.md §19, L19 to L24). Built with the `etcd` feature.
//!
//! Keys, under a per-fleet prefix `P`:
//!
//! - `P/hosts/HOST`: bound to the host's lease (its TTL, kept alive); gone when
//!   the host is.
//! - `P/servers/NAME/owner`: the owner host, bound to its lease (L19).
//! - `P/servers/NAME/state`: durable, the server's record. Its mod revision is
//!   what every change compares (L21); the revision at which a host took the
//!   server is the generation it runs (L20).
//!
//! A host fences itself: its lease is confirmed until the last acknowledged
//! keepalive (taken at the moment it was sent) plus the TTL, minus a margin, on
//! the clock that counts suspension too (`CLOCK_BOOTTIME`); past that it may no longer act (L22), and every change
//! it makes compares its lease in the same transaction, so one that lapsed
//! meanwhile fails.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::EtcdTls;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, Txn, TxnOp,
};

/// How much of the TTL a host keeps in hand before its own deadline: a
/// keepalive's answer may come late, and the clocks of hosts differ in rate.
const MARGIN_FRACTION: u32 = 5;
/// The deadline of one request to etcd.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The environment variable that names this host in the fleet; the system's
/// host name by default.
pub const HOST_ENV: &str = "MCPFLEET_HOST";

/// This host's name in the fleet: `$MCPFLEET_HOST`, else the host name.
pub fn host_id() -> String {
    if let Ok(name) = std::env::var(HOST_ENV)
        && !name.trim().is_empty()
    {
        return name.trim().to_owned();
    }
    crate::platform::hostname().unwrap_or_else(|| "localhost".to_owned())
}

/// Reads every server of the fleet under `prefix` once, without joining (no
/// lease): what `status` shows on a host whose supervisor is not running.
pub async fn read(
    endpoints: &[String],
    tls: Option<&EtcdTls>,
    prefix: &str,
) -> Result<std::collections::BTreeMap<String, ServerRecord>, CoordinationError> {
    servers_of(connect(endpoints, tls).await?, prefix.trim_end_matches('/'), None).await
}

/// A client of `endpoints` (over TLS with `tls`), each request under
/// [`REQUEST_TIMEOUT`].
async fn connect(endpoints: &[String], tls: Option<&EtcdTls>) -> Result<Client, CoordinationError> {
    let mut options = ConnectOptions::new()
        .with_connect_timeout(REQUEST_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT);
    if let Some(tls) = tls {
        options = options.with_tls(tls_options(tls)?);
    }
    Client::connect(endpoints, Some(options)).await.map_err(etcd)
}

/// What `tls` names, read: the CA, and the client's certificate and key.
fn tls_options(tls: &EtcdTls) -> Result<etcd_client::TlsOptions, CoordinationError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| CoordinationError::Tls(format!("cannot read {}: {e}", path.display())))
    };
    let mut options =
        etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)?));
    if let Some((cert, key)) = &tls.identity {
        options = options.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(options)
}

/// The keys of every server under `prefix` (or of `only` that one), by name:
/// one range read.
async fn servers_of(
    mut client: Client,
    prefix: &str,
    only: Option<&str>,
) -> Result<std::collections::BTreeMap<String, ServerRecord>, CoordinationError> {
    let base = format!("{prefix}/servers/");
    let range = match only {
        Some(name) => format!("{base}{name}/"),
        None => base.clone(),
    };
    let found = client
        .get(range, Some(GetOptions::new().with_prefix()))
        .await
        .map_err(etcd)?;
    let mut out = std::collections::BTreeMap::<String, ServerRecord>::new();
    for kv in found.kvs() {
        let key = String::from_utf8_lossy(kv.key());
        let Some((name, what)) = key.strip_prefix(&base).and_then(|k| k.split_once('/')) else {
            continue;
        };
        let rec = out.entry(name.to_owned()).or_default();
        let value = String::from_utf8_lossy(kv.value()).into_owned();
        match what {
            "owner" => {
                rec.owner = Some(value);
                rec.owner_lease = kv.lease();
            }
            "state" => {
                rec.revision = kv.mod_revision();
                rec.record = Some(value);
            }
            "desired" => rec.desired = Some(value == "up"),
            _ => {}
        }
    }
    Ok(out)
}

/// The generation the owner of `rec` runs: the revision of its record.
pub fn generation_of(rec: &ServerRecord) -> Option<u64> {
    (rec.owner.is_some() && rec.revision > 0).then_some(rec.revision as u64)
}

/// A moment on the clock that counts a suspended system too
/// (`CLOCK_BOOTTIME`), so that a host frozen or suspended past its deadline
/// sees it passed when it wakes (L22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Moment(Duration);

impl Moment {
    fn now() -> Moment {
        Moment(crate::platform::boot_clock())
    }

    fn since(self, earlier: Moment) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl std::ops::Add<Duration> for Moment {
    type Output = Moment;
    fn add(self, d: Duration) -> Moment {
        Moment(self.0 + d)
    }
}

/// Why the coordination could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CoordinationError {
    #[error("etcd could not be reached or refused: {0}")]
    Etcd(String),
    /// The files of `coordination.tls` could not be read.
    #[error("TLS to etcd: {0}")]
    Tls(String),
    /// This host's lease is not confirmed: it may no longer act (L22).
    #[error("this host's lease is not confirmed (last confirmed {0:?} ago): it is fenced")]
    Unconfirmed(Duration),
    /// The server is owned by another host, whose lease is alive.
    #[error("{server} is owned by host {host}")]
    Owned { server: String, host: String },
    /// The server's record is not at the revision the caller last saw: another
    /// host changed it, or this one is fenced (L21).
    #[error("{server} moved on (record at revision {found}, expected {expected}): fenced")]
    Fenced {
        server: String,
        expected: i64,
        found: i64,
    },
}

fn etcd(e: impl std::fmt::Display) -> CoordinationError {
    CoordinationError::Etcd(e.to_string())
}

/// What taking a server gave: its generation and the revision of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The generation, the revision of the transaction that took the server
    /// (L20): unique and increasing across the cluster.
    pub generation: i64,
    /// The revision of the server's record now, what the next change compares.
    pub revision: i64,
}

/// What etcd holds of one server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerRecord {
    /// The owner host, while its lease lives.
    pub owner: Option<String>,
    /// The lease the owner key is bound to (0 without an owner): tells this
    /// host's lease from one a previous supervisor of the same host held.
    pub owner_lease: i64,
    /// Whether the fleet wants the server running (`up`) or not (`down`),
    /// as the last `up` or `down` on any host said; `None` before either.
    pub desired: Option<bool>,
    /// The record's mod revision; 0 when there is none.
    pub revision: i64,
    /// The record as written.
    pub record: Option<String>,
}

/// One host's membership of the fleet in etcd.
pub struct Coordinator {
    client: Client,
    prefix: String,
    host: String,
    lease: i64,
    ttl: Duration,
    /// Until when the lease is known to live; `None` once lost.
    confirmed_until: Arc<Mutex<Option<Moment>>>,
    keepalive: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("prefix", &self.prefix)
            .field("host", &self.host)
            .field("lease", &self.lease)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Coordinator {
    /// Joins the fleet under `prefix` as `host`: a lease of `ttl`, kept alive
    /// every third of it, and the host's key bound to it.
    pub async fn join(
        endpoints: &[String],
        tls: Option<&EtcdTls>,
        prefix: &str,
        host: &str,
        ttl: Duration,
    ) -> Result<Coordinator, CoordinationError> {
        let mut client = connect(endpoints, tls).await?;
        // A lease of whole seconds, rounded up: the host's own deadline counts
        // from the TTL asked for, never past the one etcd keeps.
        let secs = i64::try_from(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0))
            .unwrap_or(i64::MAX)
            .max(1);
        let asked = Moment::now();
        let lease = client.lease_grant(secs, None).await.map_err(etcd)?.id();
        let prefix = prefix.trim_end_matches('/').to_owned();
        client
            .put(
                format!("{prefix}/hosts/{host}"),
                host,
                Some(PutOptions::new().with_lease(lease)),
            )
            .await
            .map_err(etcd)?;
        let confirmed_until = Arc::new(Mutex::new(Some(asked + (ttl - ttl / MARGIN_FRACTION))));
        let keepalive = tokio::spawn(keep_alive(
            client.clone(),
            lease,
            ttl,
            confirmed_until.clone(),
        ));
        Ok(Coordinator {
            client,
            prefix,
            host: host.to_owned(),
            lease,
            ttl,
            confirmed_until,
            keepalive,
        })
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn lease(&self) -> i64 {
        self.lease
    }

    fn owner_key(&self, server: &str) -> String {
        format!("{}/servers/{server}/owner", self.prefix)
    }

    fn state_key(&self, server: &str) -> String {
        format!("{}/servers/{server}/state", self.prefix)
    }

    fn desired_key(&self, server: &str) -> String {
        format!("{}/servers/{server}/desired", self.prefix)
    }

    /// Publishes the fleet file's text for every host to converge on (the
    /// last `up` on any host); the revision it was written at.
    pub async fn publish_fleet(&self, text: &str) -> Result<i64, CoordinationError> {
        let mut client = self.client.clone();
        let put = client
            .put(format!("{}/fleet", self.prefix), text, None)
            .await
            .map_err(etcd)?;
        Ok(put.header().map_or(0, |h| h.revision()))
    }

    /// The fleet file's text last published, and the revision it was
    /// written at.
    pub async fn fleet(&self) -> Result<Option<(String, i64)>, CoordinationError> {
        let mut client = self.client.clone();
        let found = client
            .get(format!("{}/fleet", self.prefix), None)
            .await
            .map_err(etcd)?;
        Ok(found.kvs().first().map(|kv| {
            (
                String::from_utf8_lossy(kv.value()).into_owned(),
                kv.mod_revision(),
            )
        }))
    }

    fn drain_key(&self, host: &str) -> String {
        format!("{}/drain/{host}", self.prefix)
    }

    /// Asks `host` to drain: stop what it runs and leave (`down --host`). The
    /// key stays until that host joins again.
    pub async fn set_drain(&self, host: &str) -> Result<(), CoordinationError> {
        let mut client = self.client.clone();
        client
            .put(self.drain_key(host), "drain", None)
            .await
            .map_err(etcd)?;
        Ok(())
    }

    /// Whether this host was asked to drain.
    pub async fn draining(&self) -> Result<bool, CoordinationError> {
        let mut client = self.client.clone();
        let found = client
            .get(self.drain_key(&self.host), None)
            .await
            .map_err(etcd)?;
        Ok(!found.kvs().is_empty())
    }

    /// Forgets that this host was asked to drain: it is back in the fleet.
    pub async fn clear_drain(&self) -> Result<(), CoordinationError> {
        let mut client = self.client.clone();
        client
            .delete(self.drain_key(&self.host), None)
            .await
            .map_err(etcd)?;
        Ok(())
    }

    /// Publishes where this host's gateway takes the calls other hosts relay
    /// to the servers it runs, bound to its lease: gone with the host.
    pub async fn publish_gateway(&self, url: &str) -> Result<(), CoordinationError> {
        let mut client = self.client.clone();
        client
            .put(
                format!("{}/gateways/{}", self.prefix, self.host),
                url,
                Some(PutOptions::new().with_lease(self.lease)),
            )
            .await
            .map_err(etcd)?;
        Ok(())
    }

    /// Where each host's gateway takes relayed calls, by host: one range read.
    pub async fn gateways(&self) -> Result<std::collections::BTreeMap<String, String>, CoordinationError> {
        let mut client = self.client.clone();
        let base = format!("{}/gateways/", self.prefix);
        let found = client
            .get(base.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(etcd)?;
        Ok(found
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = String::from_utf8_lossy(kv.key());
                let host = key.strip_prefix(&base)?.to_owned();
                Some((host, String::from_utf8_lossy(kv.value()).into_owned()))
            })
            .collect())
    }

    /// The fleet's token, which every host's gateway takes and which one
    /// host's gateway sends another's: `fresh` written unless a host wrote
    /// one first, in one transaction.
    pub async fn fleet_token(&self, fresh: &str) -> Result<String, CoordinationError> {
        let mut client = self.client.clone();
        let key = format!("{}/token", self.prefix);
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), fresh, None)])
            .or_else([TxnOp::get(key, None)]);
        let answer = client.txn(txn).await.map_err(etcd)?;
        if answer.succeeded() {
            return Ok(fresh.to_owned());
        }
        answer
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                etcd_client::TxnOpResponse::Get(got) => got
                    .kvs()
                    .first()
                    .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                _ => None,
            })
            .ok_or_else(|| etcd("the fleet's token vanished while it was read"))
    }

    /// Records whether the fleet wants `server` running. Not fenced: any
    /// host may say it, and the owner follows (docs/design.md §19).
    pub async fn set_desired(&self, server: &str, up: bool) -> Result<(), CoordinationError> {
        let mut client = self.client.clone();
        let value = if up { "up" } else { "down" };
        client
            .put(self.desired_key(server), value, None)
            .await
            .map_err(etcd)?;
        Ok(())
    }

    /// Every server etcd holds anything of, by name: one range read.
    pub async fn servers(
        &self,
    ) -> Result<std::collections::BTreeMap<String, ServerRecord>, CoordinationError> {
        servers_of(self.client.clone(), &self.prefix, None).await
    }

    /// Whether this host may act now: its lease is confirmed on the
    /// clock that counts suspension (L22).
    pub fn confirmed(&self) -> Result<(), CoordinationError> {
        let until = *self.confirmed_until.lock().unwrap_or_else(|p| p.into_inner());
        let now = Moment::now();
        match until {
            Some(until) if now < until => Ok(()),
            Some(until) => Err(CoordinationError::Unconfirmed(
                now.since(until) + self.ttl / MARGIN_FRACTION,
            )),
            None => Err(CoordinationError::Unconfirmed(self.ttl)),
        }
    }

    /// Fences this membership for good: no renewal can confirm it again, so
    /// nothing is taken or served under its lease any more (L22).
    pub fn fence(&self) {
        self.keepalive.abort();
        *self.confirmed_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Leaves at once, through a shared handle: fenced, then the lease
    /// revoked, and with it every key bound to it.
    pub async fn revoke_own(&self) -> Result<(), CoordinationError> {
        self.fence();
        self.revoke(self.lease).await
    }

    /// Stops renewing the lease: the host leaves by letting it lapse (its keys
    /// go with it once the TTL has passed), and is fenced from its deadline on.
    pub fn stop_renewing(&self) {
        self.keepalive.abort();
    }

    /// Leaves at once: the lease is revoked, and with it the host's and its
    /// servers' owner keys.
    pub async fn leave(mut self) -> Result<(), CoordinationError> {
        self.keepalive.abort();
        *self.confirmed_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.client.lease_revoke(self.lease).await.map_err(etcd)?;
        Ok(())
    }

    /// Revokes `lease`, one this host held before (a previous supervisor of
    /// its state directory, now gone): the owner keys bound to it go at once,
    /// rather than when its TTL runs out. A lease already gone is no error.
    pub async fn revoke(&self, lease: i64) -> Result<(), CoordinationError> {
        let mut client = self.client.clone();
        match client.lease_revoke(lease).await {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().contains("not found") => Ok(()),
            Err(e) => Err(etcd(e)),
        }
    }

    /// What etcd holds of `server`.
    pub async fn server(&self, server: &str) -> Result<ServerRecord, CoordinationError> {
        let mut found = servers_of(self.client.clone(), &self.prefix, Some(server)).await?;
        Ok(found.remove(server).unwrap_or_default())
    }

    /// The hosts whose leases live now.
    pub async fn hosts(&self) -> Result<Vec<String>, CoordinationError> {
        let mut client = self.client.clone();
        let found = client
            .get(
                format!("{}/hosts/", self.prefix),
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .map_err(etcd)?;
        Ok(found
            .kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
            .collect())
    }

    /// Takes `server` for this host, in one transaction: no owner, and the
    /// record at `seen` (the revision last seen; 0 for none), then the owner key
    /// bound to this host's lease and `record` written (L19).
    pub async fn take(
        &self,
        server: &str,
        seen: i64,
        record: &str,
    ) -> Result<Taken, CoordinationError> {
        self.confirmed()?;
        let owner = self.owner_key(server);
        let state = self.state_key(server);
        let txn = Txn::new()
            .when(vec![
                Compare::version(owner.clone(), CompareOp::Equal, 0),
                Compare::mod_revision(state.clone(), CompareOp::Equal, seen),
            ])
            .and_then(vec![
                TxnOp::put(owner, self.host.clone(), Some(PutOptions::new().with_lease(self.lease))),
                TxnOp::put(state, record, None),
            ]);
        let mut client = self.client.clone();
        let answer = client.txn(txn).await.map_err(etcd)?;
        if answer.succeeded() {
            let revision = answer.header().map_or(0, |h| h.revision());
            return Ok(Taken {
                generation: revision,
                revision,
            });
        }
        let now = self.server(server).await?;
        match now.owner {
            Some(host) => Err(CoordinationError::Owned {
                server: server.to_owned(),
                host,
            }),
            None => Err(CoordinationError::Fenced {
                server: server.to_owned(),
                expected: seen,
                found: now.revision,
            }),
        }
    }

    /// Writes `record` for `server`, which this host owns, if the record is
    /// still at `seen` and the owner key still holds this host's lease (L21);
    /// the new revision. A failure means this host is fenced: it ends the
    /// server's generation at once.
    pub async fn update(
        &self,
        server: &str,
        seen: i64,
        record: &str,
    ) -> Result<i64, CoordinationError> {
        self.confirmed()?;
        let txn = Txn::new()
            .when(self.owned_at(server, seen))
            .and_then(vec![TxnOp::put(self.state_key(server), record, None)]);
        self.fenced_txn(server, seen, txn).await
    }

    /// Gives `server` up: its record written as `record` and its owner key
    /// deleted, under the same compares as [`Coordinator::update`]. Allowed
    /// past this host's own deadline: giving up is what a fenced host does.
    pub async fn release(
        &self,
        server: &str,
        seen: i64,
        record: &str,
    ) -> Result<i64, CoordinationError> {
        let txn = Txn::new().when(self.owned_at(server, seen)).and_then(vec![
            TxnOp::put(self.state_key(server), record, None),
            TxnOp::delete(self.owner_key(server), None),
        ]);
        self.fenced_txn(server, seen, txn).await
    }

    fn owned_at(&self, server: &str, seen: i64) -> Vec<Compare> {
        vec![
            Compare::mod_revision(self.state_key(server), CompareOp::Equal, seen),
            Compare::lease(self.owner_key(server), CompareOp::Equal, self.lease),
        ]
    }

    async fn fenced_txn(&self, server: &str, seen: i64, txn: Txn) -> Result<i64, CoordinationError> {
        let mut client = self.client.clone();
        let answer = client.txn(txn).await.map_err(etcd)?;
        if answer.succeeded() {
            return Ok(answer.header().map_or(0, |h| h.revision()));
        }
        let now = self.server(server).await?;
        Err(CoordinationError::Fenced {
            server: server.to_owned(),
            expected: seen,
            found: now.revision,
        })
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

/// Renews `lease` every third of `ttl`; each acknowledged renewal confirms
/// the lease until the moment it was sent plus the TTL, minus the margin. A
/// renewal that etcd answers with TTL 0 means the lease is gone: the host is
/// fenced for good.
async fn keep_alive(
    mut client: Client,
    lease: i64,
    ttl: Duration,
    confirmed_until: Arc<Mutex<Option<Moment>>>,
) {
    let period = (ttl / 3).max(Duration::from_millis(100));
    let mut stream = None;
    loop {
        tokio::time::sleep(period).await;
        if stream.is_none() {
            stream = client.lease_keep_alive(lease).await.ok();
        }
        let Some((keeper, answers)) = stream.as_mut() else {
            continue;
        };
        let sent = Moment::now();
        let answered = async {
            keeper.keep_alive().await.ok()?;
            answers.message().await.ok().flatten()
        };
        match tokio::time::timeout(period, answered).await {
            Ok(Some(answer)) if answer.ttl() > 0 => {
                let until = sent + (ttl - ttl / MARGIN_FRACTION);
                let mut confirmed = confirmed_until.lock().unwrap_or_else(|p| p.into_inner());
                if confirmed.is_some() {
                    *confirmed = Some(until);
                }
            }
            Ok(Some(_)) => {
                *confirmed_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
                return;
            }
            // No answer: the stream is opened again at the next period; the
            // deadline stays where the last answer put it.
            _ => stream = None,
        }
    }
}
