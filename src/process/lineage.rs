//! A generation's lineage: every process descended from the server's first process
//! by parentage, whatever its process group, session or environment (rule L13).
//!
//! ```text
//!   server (leader of its group) ──fork──► helper ──setsid, env -i──► daemon
//!        │                                   └─ exits: daemon is re-parented to us
//!        └─ every process seen below the leader, or arriving as our orphan and
//!           attributed to this generation, is a member until it is gone
//! ```
//!
//! The process group alone misses a descendant that called `setsid` or `setpgid`,
//! and the environment tag misses one that cleared its environment. Parentage
//! misses nothing while the parent lives; once the parent dies, the orphan is
//! re-parented to the nearest child subreaper, which the supervisor and `check`
//! both are, so it arrives as a child of ours. An arriving orphan is attributed to
//! the generation that (in this order) already knew it, whose tag it carries, whose
//! known member leads its session or process group, or that is the only one alive
//! when the orphan was born (only an orphan without a tag: one whose tag names a
//! generation that no longer runs, a quarantined one's leftover, is no one's). An orphan that fits several generations waits until
//! only one of them is left running, or all that are left are tearing down; then
//! each of those takes it as a member (each ends it and reports it, none is called
//! clean on a guess). It is never signalled while a generation that may own it
//! still serves, and a teardown that ends while such an orphan is undecided is not
//! over: it waits for the decision within its deadline, and past it reports the
//! orphan as left (failed, quarantined), since it may be this generation's.
//!
//! Lineages are refreshed by every pass over the process table (`table::Table::scan`
//! hands its table to [`observe`], which the first [`Lineage::prepare`] registers
//! with `table::on_every_pass`), so no pass is made per server: while servers run, the
//! periodic [`sweep`] makes one, and every teardown makes its own. This module
//! decides membership only; `teardown` signals, and the authority writes members to
//! the ledger.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::table::{self, Table};
use crate::platform::{self, ProcStat, Signal};

/// A process by identity: a pid alone is reused, a pid with its start time (see
/// `platform::ProcStat`) is not, within one boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcId {
    pub pid: i32,
    pub start_time: u64,
}

impl ProcId {
    pub fn of(stat: &ProcStat) -> ProcId {
        ProcId {
            pid: stat.pid,
            start_time: stat.start_time,
        }
    }

    /// True while this very process (not a reuse of its pid) is alive.
    pub fn is_alive(&self) -> bool {
        platform::stat(self.pid).is_some_and(|s| s.is_alive() && s.start_time == self.start_time)
    }
}

/// A living member as the last pass saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    pub id: ProcId,
    pub pgid: i32,
    pub sid: i32,
}

/// How many pids of former members are remembered to attribute orphans by their
/// session or group leader. A server that runs a short command per call (a `git`
/// per request) sheds members all its life; the oldest are forgotten first.
const KNOWN_PIDS: usize = 512;

/// The lineage of one generation. Cheap to clone; all clones are one lineage.
#[derive(Clone)]
pub(crate) struct Lineage(Arc<Shared>);

struct Shared {
    /// The server's first process and its process group, once it is spawned. A
    /// lineage is registered before the spawn, so that anything the new process
    /// forks in its first moments has a lineage to be attributed to (see
    /// [`Lineage::prepare`]).
    root: std::sync::OnceLock<(ProcId, i32)>,
    tag: Arc<str>,
    inner: Mutex<Inner>,
    /// Woken when the set of living members changes, for the ledger.
    changed: Notify,
}

impl Shared {
    fn root(&self) -> Option<ProcId> {
        self.root.get().map(|(root, _)| *root)
    }

    fn pgid(&self) -> Option<i32> {
        self.root.get().map(|(_, pgid)| *pgid)
    }
}

#[derive(Default)]
struct Inner {
    /// Living members other than the root, by pid.
    members: BTreeMap<i32, Member>,
    /// Pids that members have had (the root's included), newest last.
    known: VecDeque<i32>,
    /// Set when teardown begins: an orphan shared with other generations may now
    /// be given to this one once they have all ended or are ending too.
    ending: bool,
    /// Pids of members seen outside the server's process group since teardown
    /// began. One that another teardown ended first (an orphan shared between
    /// generations) is still this teardown's to report.
    escaped: std::collections::BTreeSet<i32>,
    /// Set when teardown is over: the lineage takes no new members.
    closed: bool,
}

impl Inner {
    fn remember(&mut self, pid: i32) {
        if !self.known.contains(&pid) {
            if self.known.len() >= KNOWN_PIDS {
                self.known.pop_front();
            }
            self.known.push_back(pid);
        }
    }
}

/// Every lineage of this process, and orphans that fit more than one of them.
#[derive(Default)]
struct Registry {
    lineages: Vec<Weak<Shared>>,
    undecided: Vec<Undecided>,
}

/// An orphan that arrived and fits several generations.
struct Undecided {
    id: ProcId,
    candidates: Vec<Weak<Shared>>,
    since: Instant,
}

impl Undecided {
    /// Whether `lineage` is among the generations that may own this orphan.
    fn may_be(&self, lineage: &Lineage) -> bool {
        self.candidates
            .iter()
            .any(|c| std::ptr::eq(c.as_ptr(), Arc::as_ptr(&lineage.0)))
    }
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Spawns under way whose lineage is not tracked yet. A server this process just
/// spawned is its child, leads its own group in its session, and is not yet a
/// root: exactly what an orphan that changed only its process group looks like.
/// While a spawn is under way, such a child is left for the next pass rather than
/// taken for another generation's orphan.
static SPAWNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Held from just before a server is spawned until its lineage is tracked.
pub(crate) struct Spawning(());

impl Spawning {
    pub(crate) fn begin() -> Spawning {
        SPAWNING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Spawning(())
    }
}

impl Drop for Spawning {
    fn drop(&mut self) {
        SPAWNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn registry() -> std::sync::MutexGuard<'static, Option<Registry>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lineage {
    /// A lineage for a server about to be spawned, whose processes will carry
    /// `tag`. Until [`Lineage::started`] names its first process, it takes no
    /// member by parentage, but it counts as a generation that may own an orphan:
    /// a process forked by the new server before its lineage knew its root is
    /// then never given to another generation on the ground that it was alone.
    pub(crate) fn prepare(tag: &str) -> Lineage {
        // From the first lineage on, every pass over the process table updates
        // them all: before it there is nothing to update.
        table::on_every_pass(observe);
        let shared = Arc::new(Shared {
            root: std::sync::OnceLock::new(),
            tag: tag.into(),
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
        });
        let mut reg = registry();
        let reg = reg.get_or_insert_with(Registry::default);
        reg.lineages.retain(|w| w.strong_count() > 0);
        reg.lineages.push(Arc::downgrade(&shared));
        Lineage(shared)
    }

    /// The server's first process is `root`, leader of process group `pgid`.
    pub(crate) fn started(&self, root: ProcId, pgid: i32) {
        if self.0.root.set((root, pgid)).is_ok() {
            lock(&self.0.inner).remember(root.pid);
        }
    }

    /// Living members other than the root, as the last pass saw them.
    pub(crate) fn members(&self) -> Vec<Member> {
        lock(&self.0.inner).members.values().copied().collect()
    }

    /// Living members that are not in the server's process group: what a signal to
    /// the group does not reach.
    pub(crate) fn outside_group(&self) -> Vec<Member> {
        let pgid = self.0.pgid();
        lock(&self.0.inner)
            .members
            .values()
            .filter(|m| Some(m.pgid) != pgid)
            .copied()
            .collect()
    }

    /// What a ledger keeps of this lineage: its members, and the orphans still
    /// undecided between it and other generations. A supervisor that starts after
    /// a crash tears down every generation its predecessor left, so for it an
    /// orphan that may be this generation's is one to end.
    pub(crate) fn recorded(&self) -> Vec<ProcId> {
        let mut ids: Vec<ProcId> = self.members().iter().map(|m| m.id).collect();
        let guard = registry();
        if let Some(reg) = guard.as_ref() {
            for u in &reg.undecided {
                if u.may_be(self) && !ids.contains(&u.id) {
                    ids.push(u.id);
                }
            }
        }
        ids
    }

    /// Living orphans that may be this generation's but are not decided yet (see
    /// the module comment). A teardown is not over while there are any: they are
    /// decided once the other generations that may own them end too, and what is
    /// still undecided when the teardown's time is up is reported as left.
    pub(crate) fn undecided(&self) -> Vec<ProcId> {
        let guard = registry();
        let Some(reg) = guard.as_ref() else {
            return Vec::new();
        };
        reg.undecided
            .iter()
            .filter(|u| u.may_be(self))
            .map(|u| u.id)
            .filter(ProcId::is_alive)
            .collect()
    }

    /// True when no member is alive and no orphan that may be this generation's
    /// is undecided, as one consistent view (a pass moves an orphan from
    /// undecided to member under the same lock).
    pub(crate) fn settled(&self) -> bool {
        let guard = registry();
        let undecided = guard.as_ref().is_some_and(|reg| {
            reg.undecided
                .iter()
                .any(|u| u.may_be(self) && u.id.is_alive())
        });
        let members = !lock(&self.0.inner).members.is_empty();
        drop(guard);
        !undecided && !members
    }

    /// Resolves when the set of living members has changed since the last call.
    pub(crate) async fn changed(&self) {
        self.0.changed.notified().await;
    }

    /// Teardown has begun.
    pub(crate) fn begin_ending(&self) {
        lock(&self.0.inner).ending = true;
    }

    /// Members seen outside the process group since teardown began.
    pub(crate) fn escaped_while_ending(&self) -> Vec<i32> {
        lock(&self.0.inner).escaped.iter().copied().collect()
    }

    /// Teardown is over: what is still alive stays with the report (and the
    /// quarantine), and the lineage takes no new members.
    pub(crate) fn close(&self) {
        lock(&self.0.inner).closed = true;
    }
}

/// Brings every lineage of this process up to date with `table`. Called by every
/// pass over the process table (registered with `table::on_every_pass`).
pub(crate) fn observe(table: &Table) {
    let mut guard = registry();
    let Some(reg) = guard.as_mut() else { return };
    reg.lineages.retain(|w| w.strong_count() > 0);
    if reg.lineages.is_empty() && reg.undecided.is_empty() {
        return;
    }
    let lineages: Vec<Arc<Shared>> = reg.lineages.iter().filter_map(Weak::upgrade).collect();
    let me = std::process::id() as i32;
    let by_pid: HashMap<i32, &ProcStat> = table
        .procs()
        .iter()
        .map(|p| (p.stat.pid, &p.stat))
        .collect();
    let mut children: HashMap<i32, Vec<&ProcStat>> = HashMap::new();
    // Processes by tag: one lookup per lineage instead of a walk of the table.
    let mut by_tag: HashMap<&str, Vec<&ProcStat>> = HashMap::new();
    for p in table.procs() {
        children.entry(p.stat.ppid).or_default().push(&p.stat);
        if let Some(tag) = p.tag.as_deref() {
            by_tag.entry(tag).or_default().push(&p.stat);
        }
    }
    let roots: HashSet<ProcId> = lineages.iter().filter_map(|l| l.root()).collect();
    let claimed: HashSet<i32> = lineages
        .iter()
        .flat_map(|l| lock(&l.inner).members.keys().copied().collect::<Vec<_>>())
        .collect();

    // Orphans that arrived at this process: attribute each to its generation.
    // Only a subreaper adopts orphans; in a process that is not one (a program
    // that embeds the library, a test binary), every child that is not a server
    // was started by someone else in the process and is theirs.
    let adopts = platform::is_subreaper();
    let my_sid = platform::session_id();
    let spawning = SPAWNING.load(std::sync::atomic::Ordering::SeqCst) > 0;
    let mut given: Vec<(Arc<Shared>, ProcId)> = Vec::new();
    for p in table.procs() {
        let s = &p.stat;
        if !adopts
            || s.ppid != me
            || !s.is_alive()
            || roots.contains(&ProcId::of(s))
            || claimed.contains(&s.pid)
        {
            continue;
        }
        let my_pgid = platform::process_group_id();
        if spawning && s.sid == my_sid && (s.pgid == s.pid || s.pgid == my_pgid) {
            // Perhaps a server being spawned right now (before or after it made
            // itself a group leader): looked at next pass.
            continue;
        }
        if reg.undecided.iter().any(|u| u.id == ProcId::of(s)) {
            continue;
        }
        match attribute(s, p.tag.as_deref(), &lineages) {
            Attribution::One(l) => given.push((l, ProcId::of(s))),
            Attribution::Several(candidates) => {
                tracing::warn!(
                    pid = s.pid,
                    candidates = candidates.len(),
                    "an orphan arrived that more than one running generation could have left; \
                     it is ended once all but the ones tearing down have ended"
                );
                for l in &candidates {
                    l.changed.notify_one();
                }
                reg.undecided.push(Undecided {
                    id: ProcId::of(s),
                    candidates: candidates.iter().map(Arc::downgrade).collect(),
                    since: Instant::now(),
                });
            }
            Attribution::None => {}
        }
    }
    // Undecided orphans: decided once only one candidate is left open, or every
    // open one is tearing down (the last of them to end owns it).
    let mut unowned = Vec::new();
    reg.undecided.retain_mut(|u| {
        if roots.contains(&u.id) {
            return false;
        }
        let alive = by_pid
            .get(&u.id.pid)
            .is_some_and(|s| s.is_alive() && s.start_time == u.id.start_time);
        if !alive {
            return false;
        }
        let open: Vec<Arc<Shared>> = u
            .candidates
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|l| !lock(&l.inner).closed)
            .collect();
        let decided = match open.as_slice() {
            [] => {
                unowned.push(u.id);
                return false;
            }
            [_] => open,
            // Each of them may have left it: each ends it and reports it, so
            // that none of them is called clean on a guess.
            many if many.iter().all(|l| lock(&l.inner).ending) => open,
            _ => return true,
        };
        tracing::debug!(
            pid = u.id.pid,
            owners = decided.len(),
            waited_ms = u.since.elapsed().as_millis() as u64,
            "an undecided orphan was attributed"
        );
        given.extend(decided.into_iter().map(|l| (l, u.id)));
        false
    });
    for id in unowned {
        // Every generation that could have left it has ended: it belongs to none
        // that still runs, and nothing else would ever end it.
        tracing::warn!(
            pid = id.pid,
            "ending an orphan that no running generation owns"
        );
        let _ = signal(id, Signal::SIGKILL);
    }

    for l in &lineages {
        let mut inner = lock(&l.inner);
        if inner.closed {
            continue;
        }
        let before: Vec<i32> = inner.members.keys().copied().collect();
        let mut next: BTreeMap<i32, Member> = BTreeMap::new();
        let mut queue: Vec<ProcId> = Vec::new();
        let admit = |s: &ProcStat, next: &mut BTreeMap<i32, Member>, queue: &mut Vec<ProcId>| {
            if s.is_alive() && !next.contains_key(&s.pid) {
                next.insert(
                    s.pid,
                    Member {
                        id: ProcId::of(s),
                        pgid: s.pgid,
                        sid: s.sid,
                    },
                );
                queue.push(ProcId::of(s));
            }
        };
        let same = |id: &ProcId| {
            by_pid
                .get(&id.pid)
                .filter(|s| s.start_time == id.start_time)
        };
        if let Some(root) = l.root().and_then(|r| same(&r)) {
            // The root itself is not a member, but its children are.
            queue.push(ProcId::of(root));
        }
        for m in inner.members.values() {
            if let Some(s) = same(&m.id) {
                admit(s, &mut next, &mut queue);
            }
        }
        for (owner, id) in &given {
            if Arc::ptr_eq(owner, l)
                && let Some(s) = same(id)
            {
                admit(s, &mut next, &mut queue);
            }
        }
        for s in by_tag.get(&*l.tag).into_iter().flatten() {
            if Some(ProcId::of(s)) != l.root() {
                admit(s, &mut next, &mut queue);
            }
        }
        while let Some(parent) = queue.pop() {
            for child in children.get(&parent.pid).into_iter().flatten() {
                // A child is never older than its parent: an older one with this
                // ppid belongs to an earlier holder of the pid.
                if child.start_time >= parent.start_time && Some(ProcId::of(child)) != l.root() {
                    admit(child, &mut next, &mut queue);
                }
            }
        }
        for pid in next.keys() {
            inner.remember(*pid);
        }
        if inner.ending {
            let pgid = l.pgid();
            let outside: Vec<i32> = next
                .values()
                .filter(|m| Some(m.pgid) != pgid)
                .map(|m| m.id.pid)
                .collect();
            inner.escaped.extend(outside);
        }
        let after: Vec<i32> = next.keys().copied().collect();
        inner.members = next;
        drop(inner);
        if before != after {
            l.changed.notify_one();
        }
    }
    // Held to the end: a teardown asking whether its lineage is settled never
    // sees an orphan between being undecided and being a member.
    drop(guard);
}

enum Attribution {
    One(Arc<Shared>),
    Several(Vec<Arc<Shared>>),
    None,
}

/// Which generation an orphan that arrived at this process belongs to.
fn attribute(s: &ProcStat, tag: Option<&str>, lineages: &[Arc<Shared>]) -> Attribution {
    let open = || lineages.iter().filter(|l| !lock(&l.inner).closed);
    if let Some(tag) = tag {
        // A tag names the generation the process descends from. When that one is
        // no longer running (the leftover of a quarantined generation), the orphan
        // is no other generation's, whenever it was born.
        return match open().find(|l| &*l.tag == tag) {
            Some(l) => Attribution::One(l.clone()),
            None => Attribution::None,
        };
    }
    let my_sid = platform::session_id();
    let led_by_member = |l: &&Arc<Shared>| {
        let inner = lock(&l.inner);
        [s.sid, s.pgid]
            .into_iter()
            .any(|id| id != my_sid && (inner.known.contains(&id) || Some(id) == l.pgid()))
    };
    let by_leader: Vec<Arc<Shared>> = open().filter(led_by_member).cloned().collect();
    if let [one] = by_leader.as_slice() {
        return Attribution::One(one.clone());
    }
    // Born while these generations ran: one of them left it.
    let candidates: Vec<Arc<Shared>> = open()
        // A lineage still being spawned may own anything born from now on.
        .filter(|l| l.root().is_none_or(|r| r.start_time <= s.start_time))
        .cloned()
        .collect();
    match candidates.len() {
        0 => Attribution::None,
        1 => Attribution::One(candidates[0].clone()),
        _ => Attribution::Several(candidates),
    }
}

/// Sends `signal` to the process `id`, and to no other that may have taken its pid
/// since: the process is pinned (`platform::signal_pinned`), and its start time is
/// checked after pinning. False when it was already gone.
pub(crate) fn signal(id: ProcId, signal: Signal) -> bool {
    platform::signal_pinned(id.pid, signal, || id.is_alive())
}

/// How often the lineages of running servers are refreshed, and dead orphans reaped.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// One pass over the process table: refreshes every lineage and reaps the dead
/// orphans re-parented to this process.
pub(crate) async fn sweep() {
    let table = table::fresh(Instant::now()).await;
    reap_orphans(&table);
}

/// Sweeps every [`SWEEP_EVERY`] until `stop` fires: what keeps the lineages of
/// running servers current between teardowns, in the supervisor and in `check`.
pub(crate) async fn keep_current(stop: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(SWEEP_EVERY) => sweep().await,
        }
    }
}

/// Makes this process a child subreaper: orphans of its servers are re-parented
/// to it instead of to init, so no descendant of a server leaves its tree.
pub(crate) fn become_subreaper() {
    if let Err(e) = platform::become_subreaper() {
        tracing::warn!(error = %e, "cannot become a child subreaper; a descendant of a server that is orphaned may escape teardown");
    }
}

/// Reaps the zombies among our own children that are not server leaders. A child
/// subreaper collects the dead orphans of its servers, and nobody else will. They
/// are reaped one by one by pid, never with `waitpid(-1)`, which would steal the
/// exit status of the leaders that tokio waits on. A leader leads its own group in
/// our session and is registered as a lineage root; anything else is an orphan.
/// A process that is not a subreaper adopts no orphans, and its other children
/// are waited on by whoever started them (a test harness's `Child`, say): it
/// reaps nothing, so no pid it does not own is freed for reuse under its owner.
pub(crate) fn reap_orphans(table: &Table) {
    if !platform::is_subreaper() {
        return;
    }
    let me = std::process::id() as i32;
    let dead: Vec<&ProcStat> = table
        .procs()
        .iter()
        .map(|p| &p.stat)
        .filter(|s| s.ppid == me && !s.is_alive())
        .collect();
    if dead.is_empty() {
        return;
    }
    let my_sid = platform::session_id();
    let roots: HashSet<ProcId> = {
        let guard = registry();
        guard.as_ref().map_or_else(HashSet::new, |r| {
            r.lineages
                .iter()
                .filter_map(Weak::upgrade)
                .filter_map(|l| l.root())
                .collect()
        })
    };
    let unregistered: Vec<&ProcStat> = dead
        .into_iter()
        .filter(|s| !roots.contains(&ProcId::of(s)))
        .collect();
    // A leader not yet registered looks like this; a former member that made
    // itself a group leader in our session is known by its pid.
    let leader_shaped = |s: &ProcStat| s.pgid == s.pid && s.sid == my_sid;
    // Former members are looked up once for the whole table, not once per dead
    // child: while many servers are torn down at once, a table shows many leaders
    // that their own teardowns have reaped and unregistered since the pass, and a
    // look over every lineage for each of them cost more than the pass itself.
    let former = if unregistered.iter().any(|s| leader_shaped(s)) {
        former_members()
    } else {
        HashSet::new()
    };
    for s in unregistered {
        if !leader_shaped(s) || former.contains(&s.pid) {
            platform::reap_if_exited(s.pid);
        }
    }
}

/// The pids that members of this process's lineages have had, each lineage's own
/// root aside.
fn former_members() -> HashSet<i32> {
    let guard = registry();
    let Some(reg) = guard.as_ref() else {
        return HashSet::new();
    };
    let mut pids = HashSet::new();
    for l in reg.lineages.iter().filter_map(Weak::upgrade) {
        let root = l.root().map(|r| r.pid);
        pids.extend(
            lock(&l.inner)
                .known
                .iter()
                .filter(|pid| Some(**pid) != root),
        );
    }
    pids
}

#[cfg(test)]
mod tests {
    use super::reap_orphans;
    use crate::process::table::Table;

    /// A process that is not a subreaper leaves its dead children to whoever
    /// started them: a harness's `Child` still collects its own exit status
    /// (reaping it here would free its pid for reuse under its owner).
    #[test]
    fn a_process_that_is_not_a_subreaper_reaps_none_of_its_children() {
        assert!(!crate::platform::is_subreaper(), "the test runner is no subreaper");
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while crate::platform::stat(pid).is_some_and(|s| s.is_alive()) {
            assert!(std::time::Instant::now() < deadline, "true did not exit");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        reap_orphans(&Table::scan());
        assert!(crate::platform::stat(pid).is_some(), "reaped by reap_orphans");
        assert!(child.wait().expect("its owner waits for it").success());
    }
}
