//! Reading the process table from `/proc`: who is in a process group, who carries a
//! generation's tag, and what identifies a process beyond its pid.
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
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::tag::TAG_VAR;

/// One line of `/proc/PID/stat`, reduced to what teardown and identity need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    /// Process group id: the group that `killpg` reaches.
    pub pgid: i32,
    /// Session id: a process that called `setsid` has left its server's session.
    pub sid: i32,
    /// The state letter; `Z` (zombie) and `X` (dead) are no longer running.
    pub state: char,
    /// Start time in clock ticks since boot (field 22): with the boot id it tells a
    /// reused pid apart from the process that was recorded.
    pub start_time: u64,
}

impl ProcStat {
    /// A zombie has exited: it holds its pid until reaped but runs no code.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses the text of `/proc/PID/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let mut rest = text.get(close + 1..)?.split_ascii_whitespace();
    // Fields after the name, numbered from 3 (state).
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgid = rest.next()?.parse().ok()?;
    let sid = rest.next()?.parse().ok()?;
    // Skip fields 7 to 21 to reach field 22, the start time.
    let start_time = rest.nth(15)?.parse().ok()?;
    Some(ProcStat {
        pid,
        ppid,
        pgid,
        sid,
        state,
        start_time,
    })
}

/// Reads one process's stat line; `None` when it is gone (or unreadable).
pub fn stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Whether `pid` has a child now, from its threads' `children` lists: a few small
/// reads instead of a pass over the whole table. True when it cannot be told.
pub fn has_children(pid: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.filter_map(Result::ok).any(|task| {
        fs::read_to_string(task.path().join("children")).map_or(true, |c| !c.trim().is_empty())
    })
}

/// All pids currently listed in `/proc`.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// A process as one scan saw it, with the value of its `MCPFLEET_TAG` when its
/// environment carries one (only read for living processes).
#[derive(Debug, Clone)]
pub struct Proc {
    pub stat: ProcStat,
    pub tag: Option<Arc<str>>,
}

/// One pass over the whole process table. Teardown asks three questions of the
/// table (who is left in a group, who carries a generation's tag, which dead
/// children to reap); with many servers torn down at once, one pass answers all of
/// them instead of one pass per question per server (see [`fresh`]).
#[derive(Debug)]
pub struct Table {
    /// When the pass began: it saw every process that existed before this instant.
    pub started: Instant,
    procs: Vec<Proc>,
}

impl Table {
    /// Reads the table now, in the calling thread.
    pub fn scan() -> Table {
        let started = Instant::now();
        let me = std::process::id() as i32;
        let mut guard = TAGS.lock().unwrap_or_else(|p| p.into_inner());
        let cache = guard.get_or_insert_with(HashMap::new);
        let mut procs = Vec::new();
        let mut seen = HashSet::new();
        for pid in pids() {
            let Some(stat) = stat(pid) else { continue };
            let key = (pid, stat.start_time);
            let tag = if !stat.is_alive() || pid == me {
                None
            } else if let Some(known) = cache.get(&key) {
                known.clone()
            } else {
                let tag = read_tag(pid);
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

    pub fn procs(&self) -> &[Proc] {
        &self.procs
    }

    /// Living members of a process group (zombies excluded).
    pub fn group_members(&self, pgid: i32) -> Vec<ProcStat> {
        self.procs
            .iter()
            .filter(|p| p.stat.pgid == pgid && p.stat.is_alive())
            .map(|p| p.stat)
            .collect()
    }

    /// Living processes (other than this one) whose `MCPFLEET_TAG` is `value`:
    /// every descendant of a server inherits its tag, including one that left the
    /// process group with `setsid`.
    pub fn tagged(&self, value: &str) -> Vec<ProcStat> {
        self.procs
            .iter()
            .filter(|p| p.tag.as_deref() == Some(value))
            .map(|p| p.stat)
            .collect()
    }

    /// Living processes whose tag starts with `prefix`, each with the rest of the
    /// tag: how a supervisor finds every generation of its own scope.
    pub fn tagged_with_prefix(&self, prefix: &str) -> Vec<(ProcStat, String)> {
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
pub fn on_every_pass(observe: fn(&Table)) {
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
pub async fn fresh(after: Instant) -> Arc<Table> {
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

/// The value of `MCPFLEET_TAG` in the environment of `pid`. Unreadable
/// environments (another user's process, a zombie) have none.
fn read_tag(pid: i32) -> Option<Arc<str>> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{TAG_VAR}=");
    environ
        .split(|b| *b == 0)
        .find_map(|e| e.strip_prefix(prefix.as_bytes()))
        .map(|v| Arc::from(String::from_utf8_lossy(v).as_ref()))
}

/// The kernel's boot id: start times are only comparable within one boot.
/// Read once per process: it cannot change while we run.
pub fn boot_id() -> Option<String> {
    static BOOT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT_ID
        .get_or_init(|| read_trimmed(Path::new("/proc/sys/kernel/random/boot_id")))
        .clone()
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_spaces_and_parens_in_the_name() {
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let s = parse_stat(line).expect("parses");
        assert_eq!(s.pid, 4242);
        assert_eq!(s.ppid, 1);
        assert_eq!(s.pgid, 4242);
        assert_eq!(s.sid, 4242);
        assert_eq!(s.state, 'S');
        assert_eq!(s.start_time, 987654);
        assert!(s.is_alive());
    }

    #[test]
    fn a_zombie_is_not_alive_and_garbage_does_not_parse() {
        let line = "7 (z) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(!parse_stat(line).unwrap().is_alive());
        assert_eq!(parse_stat("not a stat line"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn reads_our_own_process() {
        let me = std::process::id() as i32;
        let s = stat(me).expect("own stat");
        assert_eq!(s.pid, me);
        assert!(s.start_time > 0);
        assert!(pids().contains(&me));
        assert!(boot_id().is_some_and(|b| b.len() >= 32));
    }
}
