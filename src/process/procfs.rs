//! Reading the process table from `/proc`: who is in a process group, who carries a
//! generation's tag, and what identifies a process beyond its pid.
//!
//! This module only reads. It never signals or reaps; `teardown` decides what to do
//! with what it finds. Every read tolerates the process vanishing midway, which is
//! the normal case while a group is being torn down.

use std::fs;
use std::path::Path;

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

/// All pids currently listed in `/proc`.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Living members of a process group (zombies excluded).
pub fn group_members(pgid: i32) -> Vec<ProcStat> {
    pids()
        .into_iter()
        .filter_map(stat)
        .filter(|s| s.pgid == pgid && s.is_alive())
        .collect()
}

/// Whether the environment of `pid` contains exactly the entry `entry` (`NAME=VALUE`).
/// Unreadable environments (another user's process, a zombie) do not match.
pub fn environ_contains(pid: i32, entry: &[u8]) -> bool {
    let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ.split(|b| *b == 0).any(|e| e == entry)
}

/// Living processes whose environment carries `entry`: every descendant of a server
/// inherits its tag, including one that left the process group with `setsid`.
pub fn tagged(entry: &[u8]) -> Vec<ProcStat> {
    let me = std::process::id() as i32;
    pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter_map(stat)
        .filter(|s| s.is_alive() && environ_contains(s.pid, entry))
        .collect()
}

/// Living processes with a `NAME=VALUE` entry that starts with `prefix`, each with
/// the rest of that entry: how a supervisor finds every generation of its own scope.
pub fn tagged_with_prefix(prefix: &[u8]) -> Vec<(ProcStat, String)> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for pid in pids() {
        if pid == me {
            continue;
        }
        let Some(stat) = stat(pid).filter(ProcStat::is_alive) else {
            continue;
        };
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if let Some(entry) = environ.split(|b| *b == 0).find(|e| e.starts_with(prefix)) {
            found.push((
                stat,
                String::from_utf8_lossy(&entry[prefix.len()..]).into_owned(),
            ));
        }
    }
    found
}

/// The kernel's boot id: start times are only comparable within one boot.
pub fn boot_id() -> Option<String> {
    read_trimmed(Path::new("/proc/sys/kernel/random/boot_id"))
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
