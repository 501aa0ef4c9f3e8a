//! One pass over the process table (`platform`'s view of it): who is in a process
//! group, who carries a generation's tag, and what identifies a process beyond its
//! pid.
//!
//! This module only reads. It never signals or reaps; `teardown` decides what to
//! do with what it finds. Every read tolerates the process vanishing midway, which
//! is the normal case while a group is being torn down.
//!
//! It is the bottom of `process`: it imports nothing from `spawn` or `lineage`.
//! Every pass still keeps the lineages current (docs/design.md §12.1, rule L13):
//! `lineage` registers its update with [`on_every_pass`] before its first lineage
//! exists, and each pass hands its table to it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::tag::TAG_VAR;
use crate::platform::{self, ProcStat};

/// A process as one scan saw it, with the value of its `MCPFLEET_TAG` when its
/// environment carries one (only read for living processes).
#[derive(Debug, Clone)]
pub(crate) struct Proc {
    pub stat: ProcStat,
    pub tag: Option<Arc<str>>,
}

/// One pass over the whole process table. Teardown asks three questions of the
/// table (who is left in a group, who carries a generation's tag, which dead
/// children to reap); with many servers torn down at once, one pass answers all of
/// them instead of one pass per question per server (see [`fresh`]).
#[derive(Debug)]
pub(crate) struct Table {
    /// When the pass began: it saw every process that existed before this instant.
    pub started: Instant,
    procs: Vec<Proc>,
}

impl Table {
    /// Reads the table now, in the calling thread.
    pub(crate) fn scan() -> Table {
        let started = Instant::now();
        let me = std::process::id() as i32;
        let mut guard = TAGS.lock().unwrap_or_else(|p| p.into_inner());
        let cache = guard.get_or_insert_with(HashMap::new);
        let mut procs = Vec::new();
        let mut seen = HashSet::new();
        for pid in platform::pids() {
            let Some(stat) = platform::stat(pid) else { continue };
            let key = (pid, stat.start_time);
            let tag = if !stat.is_alive() || pid == me {
                None
            } else if let Some(known) = cache.get(&key) {
                known.clone()
            } else {
                let tag = platform::env_value(pid, TAG_VAR);
                // A tag, once seen, stays: only a process of the generation can have
                // had it. "No tag" is only remembered for processes that are not our
                // own children: a child of ours may not have exec'd its server yet,
                // and gains its tag when it does.
                if tag.is_some() || stat.ppid != me {
                    cache.insert(key, tag.clone());
                }
                tag
            };
            seen.insert(key);
            procs.push(Proc { stat, tag });
        }
        cache.retain(|k, _| seen.contains(k));
        drop(guard);
        let table = Table { started, procs };
        // Every pass keeps the lineages of running servers current: no pass is
        // ever made for one server alone.
        if let Some(observe) = OBSERVER.get() {
            observe(&table);
        }
        table
    }

    pub(crate) fn procs(&self) -> &[Proc] {
        &self.procs
    }

    /// Living members of a process group (zombies excluded).
    pub(crate) fn group_members(&self, pgid: i32) -> Vec<ProcStat> {
        self.procs
            .iter()
            .filter(|p| p.stat.pgid == pgid && p.stat.is_alive())
            .map(|p| p.stat)
            .collect()
    }

    /// Living processes (other than this one) whose `MCPFLEET_TAG` is `value`:
    /// every descendant of a server inherits its tag, including one that left the
    /// process group with `setsid`.
    pub(crate) fn tagged(&self, value: &str) -> Vec<ProcStat> {
        self.procs
            .iter()
            .filter(|p| p.tag.as_deref() == Some(value))
            .map(|p| p.stat)
            .collect()
    }

    /// Living processes whose tag starts with `prefix`, each with the rest of the
    /// tag: how a supervisor finds every generation of its own scope.
    pub(crate) fn tagged_with_prefix(&self, prefix: &str) -> Vec<(ProcStat, String)> {
        self.procs
            .iter()
            .filter_map(|p| {
                let rest = p.tag.as_deref()?.strip_prefix(prefix)?;
                Some((p.stat, rest.to_owned()))
            })
            .collect()
    }
}

/// What every pass hands its table to once it is read: the lineages' update.
static OBSERVER: OnceLock<fn(&Table)> = OnceLock::new();

/// Has every pass from now on call `observe` with its table before anyone else
/// sees it. The first call decides; later ones change nothing.
pub(crate) fn on_every_pass(observe: fn(&Table)) {
    let _ = OBSERVER.set(observe);
}

/// Tags already read, by (pid, start time): an environment is read once per
/// process, not once per scan.
static TAGS: Mutex<Option<TagCache>> = Mutex::new(None);

type TagCache = HashMap<(i32, u64), Option<Arc<str>>>;

/// The last table, shared by everyone who waits for one.
static LAST: tokio::sync::Mutex<Option<Arc<Table>>> = tokio::sync::Mutex::const_new(None);

/// A table that began after `after`. Callers that ask while a pass is under way
/// queue for the next one, which then serves them all: N concurrent teardowns
/// cost a few passes, not N.
pub(crate) async fn fresh(after: Instant) -> Arc<Table> {
    let mut last = LAST.lock().await;
    if let Some(table) = last.as_ref()
        && table.started >= after
    {
        return table.clone();
    }
    let table = match tokio::task::spawn_blocking(Table::scan).await {
        Ok(table) => Arc::new(table),
        Err(_) => Arc::new(Table::scan()),
    };
    *last = Some(table.clone());
    table
}
