//! The supervisor's servers: the fleet file as it last took it up, and the
//! authority of every server that file named, orphans included (docs/design.md
//! §15). A request that carries the fleet file brings the roster to it first
//! (the fleet task's `take_up`): an authority for each added server, a new
//! configuration for each changed one, orphans marked and no longer offered by
//! the gateway. That starts, restarts and stops nothing: only `up` converges
//! (`converge.rs`), and a server's lifecycle changes only through its authority.
//! The fleet task (`fleet.rs`) owns the roster and publishes a copy of it after
//! each change; nothing else writes it.

use std::sync::Arc;

use super::fixed::Fixed;
use crate::state::ServerRecord;
use crate::state::StateDir;
use crate::config::{Definition, Fleet, ServerSpec, changed_settings};
use crate::gateway::{Exposure, Gateway, Member};
use crate::host::{UnknownServers, Unnamed};
use crate::lifecycle::authority::{self, Context, Handle, Initial, ServerConfig};
use crate::lifecycle::ledger::Ledger;
use crate::lifecycle::state::Phase;
use crate::protocol::{FileVersion, FleetSource};

/// Items per page of the gateway's lists, unless the fleet file says otherwise.
pub(super) const PAGE_SIZE: usize = 500;

/// The fleet file as last taken up, and every server held.
#[derive(Clone)]
pub(super) struct Roster {
    pub fleet: Fleet,
    /// The request's fleet file it was last taken up from (`None`: read by the
    /// supervisor itself at its start): the same file again is not validated
    /// again.
    pub source: Option<FleetSource>,
    /// The version of the file it runs, when known: a request that carries an
    /// older one does not replace it (docs/design.md §16, R6).
    pub version: Option<FileVersion>,
    /// The file's servers in its order, then the orphans.
    pub servers: Vec<Held>,
}

impl Roster {
    /// The version the roster runs, when `source` is an older version of the
    /// file than it: then the roster keeps its own (R6). `None` when either
    /// version is unknown, or `source` is not older.
    pub(super) fn newer_than(&self, source: &FleetSource) -> Option<FileVersion> {
        let (sent, held) = (source.version?, self.version?);
        sent.is_older_than(&held).then_some(held)
    }
}

/// A server the supervisor holds.
#[derive(Clone)]
pub(super) struct Held {
    /// The spec its authority was last given.
    pub spec: ServerSpec,
    pub handle: Handle,
    /// Its index in the gateway, for as long as the supervisor runs.
    pub slot: usize,
    /// No longer in the fleet file: left as it is until `up --remove-orphans`
    /// or `down` stops it, then forgotten.
    pub orphaned: bool,
}

impl Held {
    /// Creates the authority of `spec` (heard by the gateway at `slot`), which
    /// goes on from what `state.json` recorded of the server (`rec`).
    pub(super) fn new(
        spec: ServerSpec,
        slot: usize,
        rec: ServerRecord,
        dir: &StateDir,
        gateway: &Arc<Gateway>,
        ledger: &Arc<dyn Ledger>,
        ctx: &Context,
    ) -> Held {
        let initial = Initial {
            last_generation: rec.last_generation,
            quarantine: rec.quarantine,
            listener: Some(gateway.listener(slot)),
        };
        let handle = authority::spawn_with(
            ServerConfig::from_spec(&spec, Some(dir.server_log(&spec.name)), Some(dir.root())),
            initial,
            ledger.clone(),
            ctx.clone(),
        );
        Held {
            spec,
            handle,
            slot,
            orphaned: false,
        }
    }

    /// The server as the gateway offers it.
    pub(super) fn member(&self) -> Member {
        Member {
            handle: self.handle.clone(),
            exposure: exposure(&self.spec),
            enabled: self.spec.enabled,
        }
    }
}

/// How the gateway shows the server of `spec`: its `prefix:` (by default its
/// name) and its `tools:`.
pub(super) fn exposure(spec: &ServerSpec) -> Exposure {
    Exposure {
        prefix: spec
            .expose
            .prefix
            .clone()
            .unwrap_or_else(|| spec.name.clone()),
        allow: spec.expose.allow.clone(),
        deny: spec.expose.deny.clone(),
    }
}

impl Roster {
    pub(super) fn held(&self, name: &str) -> Option<&Held> {
        self.servers.iter().find(|h| h.spec.name == name)
    }

    /// The authorities of the servers a request is about: the named ones (each
    /// must be held: in the fleet file, or an orphan), or with no names the
    /// file's enabled ones (`Unnamed::Enabled`) or every one held, orphans
    /// included (`Unnamed::All`). An unknown name is a usage error.
    pub(super) fn select(&self, names: &[String], unnamed: Unnamed) -> Result<Vec<Handle>, String> {
        if names.is_empty() {
            return Ok(self
                .servers
                .iter()
                .filter(|h| unnamed == Unnamed::All || (!h.orphaned && h.spec.enabled))
                .map(|h| h.handle.clone())
                .collect());
        }
        let mut picked: Vec<Handle> = Vec::new();
        let mut unknown = Vec::new();
        for name in names {
            match self.held(name) {
                Some(h) if !picked.iter().any(|p| p.name() == name) => {
                    picked.push(h.handle.clone());
                }
                Some(_) => {}
                None => unknown.push(name.clone()),
            }
        }
        match unknown.is_empty() {
            true => Ok(picked),
            false => Err(format!("usage: {}", UnknownServers(unknown))),
        }
    }
}

/// Says in the supervisor's log that a request carried an older version of
/// the fleet file than the one it runs, which it kept (R6).
pub(super) fn kept_newer(source: &FleetSource, kept: &FileVersion) {
    let read = source.version.map(|v| v.changed()).unwrap_or_default();
    tracing::info!(
        read_changed = %read,
        kept_changed = %kept.changed(),
        "a request carried an older version of the fleet file: the newer one is kept"
    );
}

/// Validates the fleet file a request carries, as the caller read it: its text,
/// with `${env:NAME}` looked up in the values the caller found (an MCP client's
/// JSON file is read as `-f` reads it). An invalid one
/// is a usage error that names every position, as the CLI would (R5).
pub(super) fn load(source: &FleetSource) -> Result<Fleet, String> {
    let lookup = |name: &str| source.env.get(name).cloned();
    crate::config::load_text(&source.text, std::path::Path::new(&source.path), &lookup)
        .map_err(|e| format!("usage: {e}"))
}

impl Roster {
    /// Brings the roster to `file`: each added server gets an authority and a place
    /// in the gateway; each server whose spec changed gets its new configuration
    /// (settings at once, the definition for its next generation) and its new
    /// exposure in the gateway; a server no longer in the file is orphaned and
    /// leaves the gateway; an orphan back in the file is held again as it is.
    /// `source` is the request's file it came from (kept as is when `None`).
    pub(super) fn sync(&mut self, fixed: &Fixed, file: Fleet, source: Option<FleetSource>) {
        let mut servers: Vec<Held> = Vec::with_capacity(self.servers.len());
        let mut old = std::mem::take(&mut self.servers);
        for spec in &file.servers {
            let held = match old.iter().position(|h| h.spec.name == spec.name) {
                Some(i) => {
                    let mut held = old.remove(i);
                    let changed = Definition::of(&held.spec) != Definition::of(spec)
                        || !changed_settings(&held.spec, spec).is_empty();
                    if changed {
                        held.handle.configure(ServerConfig::from_spec(
                            spec,
                            Some(fixed.dir.server_log(&spec.name)),
                            Some(fixed.dir.root()),
                        ));
                    }
                    held.spec = spec.clone();
                    if std::mem::replace(&mut held.orphaned, false) {
                        tracing::info!(server = %spec.name, "back in the fleet file");
                        fixed.gateway.join(held.slot, held.member(), &fixed.tracker);
                    } else {
                        fixed.gateway
                            .expose(held.slot, exposure(spec), spec.enabled);
                    }
                    held
                }
                None => {
                    tracing::info!(server = %spec.name, "added to the fleet file");
                    let slot = fixed.gateway.slot();
                    let rec = fixed
                        .state
                        .snapshot()
                        .servers
                        .get(&spec.name)
                        .cloned()
                        .unwrap_or_default();
                    let held = Held::new(
                        spec.clone(),
                        slot,
                        rec,
                        &fixed.dir,
                        &fixed.gateway,
                        &fixed.ledger,
                        &fixed.authorities,
                    );
                    fixed.gateway.join(slot, held.member(), &fixed.tracker);
                    held
                }
            };
            servers.push(held);
        }
        for mut held in old {
            if !std::mem::replace(&mut held.orphaned, true) {
                tracing::info!(server = %held.spec.name, "no longer in the fleet file: orphaned");
                fixed.gateway.leave(held.slot);
            }
            servers.push(held);
        }
        fixed.events.set_rotation(file.supervisor.rotation);
        crate::state::rotation::set_supervisor_log_rotation(file.supervisor.rotation);
        fixed.gateway.set_page_size(
            file.gateway
                .page_size
                .unwrap_or(PAGE_SIZE),
        );
        fixed.gateway.set_meta(file.gateway.meta);
        // The copy that `down`, `status`, `logs` and `events` use if the file
        // goes away is the file the supervisor now runs (docs/design.md §3).
        if let Some(source) = &source
            && let Err(error) = crate::state::record_fleet(
                fixed.dir.root(),
                &file.file,
                &crate::config::recordable(&file.file, &source.text),
            )
        {
            tracing::warn!(%error, "cannot record the fleet file in the state directory");
        }
        self.servers = servers;
        self.fleet = file;
        if let Some(source) = source {
            self.version = source.version;
            self.source = Some(source);
        }
    }

    /// Forgets the orphans among `names` that are at rest (stopped or failed):
    /// their authorities end once no request holds them. A quarantined orphan
    /// stays, so that its quarantine stays visible (L7).
    pub(super) fn forget_orphans(&mut self, names: &[String]) {
        self.servers.retain(|h| {
            let at_rest = matches!(h.handle.published().state, Phase::Stopped | Phase::Failed);
            let forget = h.orphaned && at_rest && names.contains(&h.spec.name);
            if forget {
                tracing::info!(server = %h.spec.name, "orphan stopped and forgotten");
            }
            !forget
        });
    }
}
