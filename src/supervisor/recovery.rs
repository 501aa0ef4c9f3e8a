//! Crash recovery (L10): before a supervisor starts anything, it finds what its
//! predecessor left running and tears it down.
//!
//! Every process of a generation carries `MCPFLEET_TAG=<scope>:<server>:<generation>`,
//! where the scope belongs to the state directory. A process is taken for one of
//! ours only when it carries that tag, when its pid, start time and boot id all
//! match a live record of `state.json` or a member of that record's lineage (a
//! descendant that cleared its environment, L13), or when it descends by parentage
//! from one of those; a pid alone is never enough. Leftovers get SIGTERM, then
//! SIGKILL; what is still alive after that is quarantined.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::persist::StateFile;
use crate::config::Timeout;
use crate::lifecycle::error::pid_list;
use crate::lifecycle::ledger::QuarantineRecord;
use crate::lifecycle::state::Generation;
use crate::lifecycle::summary::Outcome;
use crate::platform::{self, ProcStat, Signal};
use crate::process::lineage::{self, ProcId};
use crate::process::table::{self, Table};
use crate::process::teardown::Grace;

/// What recovery did with one generation it found.
#[derive(Debug, Clone)]
pub(super) struct Recovered {
    pub server: String,
    pub generation: Generation,
    pub pids: Vec<i32>,
    pub outcome: Outcome,
    pub signal: Option<&'static str>,
    pub leftover_pids: Vec<i32>,
    pub duration: Duration,
}

/// Finds and tears down every living process of `scope`, and records the result in
/// `state`. `cleanup` gives each server's cleanup deadline.
pub(super) async fn recover(
    scope: &str,
    state: &StateFile,
    adopted: &[ProcId],
    cleanup: &dyn Fn(&str) -> Timeout,
) -> Vec<Recovered> {
    let found = find(scope, state, adopted);
    // Every generation is torn down at once: one slow server must not hold up the
    // recovery of the others (and with it the supervisor's start).
    let mut set = tokio::task::JoinSet::new();
    for ((server, generation), ids) in found {
        let grace = Grace::from_cleanup(cleanup(&server));
        let tag = format!("{scope}:{server}:{generation}");
        set.spawn(async move {
            let started = Instant::now();
            let (signal, leftover, ids) = terminate_all(&tag, ids, grace).await;
            let leftover: Vec<ProcId> = leftover;
            (server, generation, ids, signal, leftover, started.elapsed())
        });
    }
    let mut out = Vec::new();
    while let Some(Ok((server, generation, ids, signal, leftover, duration))) =
        set.join_next().await
    {
        let pids: Vec<i32> = ids.iter().map(|id| id.pid).collect();
        let outcome = match (&signal, leftover.is_empty()) {
            (_, false) => Outcome::Failed,
            (None, true) => Outcome::Clean,
            (Some(_), true) => Outcome::Escalated,
        };
        let tag = format!("{scope}:{server}:{generation}");
        let leftover_pids: Vec<i32> = leftover.iter().map(|id| id.pid).collect();
        let quarantine = (!leftover.is_empty()).then(|| QuarantineRecord {
            generation,
            message: format!(
                "left running by a previous supervisor and still alive after SIGKILL: {}",
                pid_list(&leftover_pids)
            ),
            leftover_pids: leftover_pids.clone(),
            tag,
            leftover: leftover.clone(),
        });
        if let Err(e) = state.update(|doc| {
            let rec = doc.servers.entry(server.clone()).or_default();
            rec.last_generation = rec.last_generation.max(generation);
            if rec
                .live
                .as_ref()
                .is_some_and(|l| l.generation == generation)
            {
                rec.live = None;
            }
            if quarantine.is_some() {
                rec.quarantine = quarantine.clone();
            }
        }) {
            tracing::error!(error = %e, "cannot record recovery in state.json");
        }
        out.push(Recovered {
            server,
            generation,
            pids,
            outcome,
            signal,
            leftover_pids,
            duration,
        });
    }
    // Live records whose processes are all gone are simply closed (no write when
    // there is none: a clean predecessor left none).
    if state.snapshot().servers.values().any(|r| r.live.is_some()) {
        let _ = state.update(|doc| {
            for rec in doc.servers.values_mut() {
                rec.live = None;
            }
        });
    }
    out
}

/// Every living process of the scope, by (server, generation): by tag, by a
/// recorded identity, as adopted by the predecessor's guardian, and every living
/// descendant of those.
fn find(
    scope: &str,
    state: &StateFile,
    adopted: &[ProcId],
) -> BTreeMap<(String, Generation), Vec<ProcId>> {
    let mut found: BTreeMap<(String, Generation), Vec<ProcId>> = BTreeMap::new();
    let prefix = format!("{scope}:");
    for (stat, rest) in Table::scan().tagged_with_prefix(&prefix) {
        let Some((server, generation)) = rest.rsplit_once(':') else {
            continue;
        };
        let Ok(generation) = generation.parse() else {
            continue;
        };
        found
            .entry((server.to_owned(), generation))
            .or_default()
            .push(ProcId::of(&stat));
    }
    let boot = platform::boot_id();
    for (server, rec) in state.snapshot().servers {
        let Some(live) = rec.live else { continue };
        // Start times are only comparable within the boot that recorded them.
        if live.boot_id.is_none() || live.boot_id != boot {
            continue;
        }
        let root = live.start_time.map(|start_time| ProcId {
            pid: live.pid,
            start_time,
        });
        for id in root.iter().chain(&live.lineage) {
            if id.is_alive() {
                let ids = found.entry((server.clone(), live.generation)).or_default();
                if !ids.contains(id) {
                    ids.push(*id);
                }
            }
        }
    }
    // Adopted processes that nothing above identifies (an orphan that cleared its
    // environment before it was recorded) go with the generation spawned last
    // before they were born: the predecessor's tree held nothing else.
    let lives: Vec<((String, Generation), u64)> = state
        .snapshot()
        .servers
        .into_iter()
        .filter_map(|(server, rec)| {
            let live = rec.live?;
            Some(((server, live.generation), live.start_time.unwrap_or(0)))
        })
        .collect();
    for id in adopted {
        if found.values().any(|ids| ids.contains(id)) || !id.is_alive() {
            continue;
        }
        let owner = lives
            .iter()
            .filter(|(_, born)| *born <= id.start_time)
            .max_by_key(|(_, born)| *born)
            .or(lives.first())
            .map(|(key, _)| key.clone());
        match owner {
            Some(key) => found.entry(key).or_default().push(*id),
            None => {
                // No generation was recorded live: still ours to end.
                tracing::warn!(
                    pid = id.pid,
                    "ending a process adopted from the previous supervisor that no recorded generation owns"
                );
                lineage::signal(*id, Signal::SIGKILL);
            }
        }
    }
    // Their descendants, read while their parents still live: once a parent is
    // ended, a child that left its group and environment is found by nothing else.
    let table = Table::scan();
    for ids in found.values_mut() {
        for s in descendants(&table, ids) {
            let id = ProcId::of(&s);
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    found
}

/// Tears down the processes found of one generation, then looks again by its tag:
/// a process that one of them forked just after the first look (a server killed
/// in the middle of starting its helpers) is found once its parent is gone, and
/// torn down in turn. Returns the strongest signal sent, what is left, and every
/// process that was found.
async fn terminate_all(
    tag: &str,
    mut ids: Vec<ProcId>,
    grace: Grace,
) -> (Option<&'static str>, Vec<ProcId>, Vec<ProcId>) {
    let (mut signal, mut leftover) = terminate(&ids, grace).await;
    // The late ones have had no stdin of ours: no EOF grace, SIGTERM at once.
    let late_grace = Grace {
        eof: Duration::ZERO,
        ..grace
    };
    for _ in 0..5 {
        if !leftover.is_empty() {
            break;
        }
        let table = table::fresh(Instant::now()).await;
        let late: Vec<ProcId> = table
            .tagged(tag)
            .iter()
            .chain(descendants(&table, &ids).iter())
            .map(ProcId::of)
            .filter(|id| !ids.contains(id))
            .collect();
        if late.is_empty() {
            break;
        }
        ids.extend(late.iter().copied());
        let (late_signal, late_left) = terminate(&late, late_grace).await;
        signal = strongest(signal, late_signal);
        leftover = late_left;
    }
    (signal, leftover, ids)
}

fn strongest(a: Option<&'static str>, b: Option<&'static str>) -> Option<&'static str> {
    let rank = |s: Option<&str>| match s {
        None => 0,
        Some("SIGTERM") => 1,
        Some(_) => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// Living processes below `ids` by parentage: what one of them forked (before it
/// died, or while it runs) whatever its group, session or environment.
fn descendants(table: &Table, ids: &[ProcId]) -> Vec<ProcStat> {
    let mut parents: Vec<ProcId> = ids.to_vec();
    let mut found = Vec::new();
    while let Some(parent) = parents.pop() {
        for p in table.procs() {
            let s = p.stat;
            if s.ppid == parent.pid && s.start_time >= parent.start_time && s.is_alive() {
                let id = ProcId::of(&s);
                if !ids.contains(&id) && !found.iter().any(|f: &ProcStat| f.pid == s.pid) {
                    found.push(s);
                    parents.push(id);
                }
            }
        }
    }
    found
}

/// SIGTERM, wait, SIGKILL, wait. Returns the strongest signal sent and what is left.
/// Each process is followed by its pid *and* start time, so a pid that is reused
/// while this runs is neither waited for nor signalled.
async fn terminate(ids: &[ProcId], grace: Grace) -> (Option<&'static str>, Vec<ProcId>) {
    // Their stdin closed when the old supervisor died: give them the EOF grace first.
    let mut left = wait_gone(ids, grace.eof).await;
    if left.is_empty() {
        return (None, Vec::new());
    }
    send(&left, Signal::SIGTERM);
    left = wait_gone(&left, grace.term).await;
    if left.is_empty() {
        return (Some("SIGTERM"), Vec::new());
    }
    send(&left, Signal::SIGKILL);
    left = wait_gone(&left, grace.kill.unwrap_or(Duration::from_secs(10))).await;
    (Some("SIGKILL"), left)
}

fn send(ids: &[ProcId], signal: Signal) {
    for id in ids {
        lineage::signal(*id, signal);
    }
}

async fn wait_gone(ids: &[ProcId], limit: Duration) -> Vec<ProcId> {
    let deadline = Instant::now() + limit;
    loop {
        let alive: Vec<ProcId> = ids.iter().copied().filter(ProcId::is_alive).collect();
        if alive.is_empty() || Instant::now() >= deadline {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
