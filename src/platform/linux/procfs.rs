//! The process table from `/proc`: one process's `stat` line, the pids listed,
//! whether a process has children, a variable of another process's environment,
//! the boot id and the host name. Reads only; every read tolerates the process
//! vanishing midway, which is the normal case while a group is being torn down.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::platform::portable::{ProcStat, Usage};

/// Parses the text of `/proc/PID/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted from the last `)`.
pub(super) fn parse_stat(text: &str) -> Option<ProcStat> {
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

/// The value of the variable `name` in the environment of `pid`, from
/// `/proc/PID/environ`. Unreadable environments (another user's process, a
/// zombie) have none.
pub fn env_value(pid: i32, name: &str) -> Option<Arc<str>> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    environ
        .split(|b| *b == 0)
        .find_map(|e| e.strip_prefix(prefix.as_bytes()))
        .map(|v| Arc::from(String::from_utf8_lossy(v).as_ref()))
}

/// The command line of `pid`, from `/proc/PID/cmdline`, when the process
/// belongs to this user (`None` for another user's, or one that is gone).
pub fn own_cmdline(pid: i32) -> Option<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::MetadataExt;
    let dir = format!("/proc/{pid}");
    if fs::metadata(&dir).ok()?.uid() != super::process::uid() {
        return None;
    }
    let bytes = fs::read(format!("{dir}/cmdline")).ok()?;
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(&bytes);
    Some(
        bytes
            .split(|b| *b == 0)
            .map(|a| std::ffi::OsString::from_vec(a.to_vec()))
            .collect(),
    )
}

/// The kernel's boot id: start times are only comparable within one boot.
/// Read once per process: it cannot change while we run.
pub fn boot_id() -> Option<String> {
    static BOOT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT_ID
        .get_or_init(|| read_trimmed(Path::new("/proc/sys/kernel/random/boot_id")))
        .clone()
}

/// The host's name, when it has one.
pub fn hostname() -> Option<String> {
    read_trimmed(Path::new("/proc/sys/kernel/hostname")).filter(|h| !h.is_empty())
}

/// Time since boot, suspended time included (`CLOCK_BOOTTIME`): a clock that
/// a frozen or suspended machine sees move on when it wakes.
pub fn boot_clock() -> std::time::Duration {
    use nix::time::{ClockId, clock_gettime};
    let t = clock_gettime(ClockId::CLOCK_BOOTTIME)
        .unwrap_or_else(|_| nix::sys::time::TimeSpec::new(0, 0));
    std::time::Duration::new(
        t.tv_sec().max(0) as u64,
        t.tv_nsec().clamp(0, 999_999_999) as u32,
    )
}

/// This process's resident memory (`statm`), open descriptors (`fd/`), CPU
/// time and start time (`stat`, with the boot time of `/proc/stat`).
pub fn own_usage() -> Option<Usage> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()? as u64;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()? as f64;
    let statm = fs::read_to_string("/proc/self/statm").ok()?;
    let resident_pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    let open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = stat.get(stat.rfind(')')? + 1..)?;
    // Fields numbered from 3 (state): utime is 14, stime 15, starttime 22.
    let fields: Vec<&str> = after_name.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let cpu = (field(14)? + field(15)?) as f64 / ticks;
    let boot: u64 = fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    Some(Usage {
        resident_bytes: resident_pages * page,
        // The descriptor the listing itself held is closed again.
        open_fds: open_fds.saturating_sub(1),
        cpu_seconds: cpu,
        start_time_seconds: boot as f64 + field(22)? as f64 / ticks,
    })
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
        assert!(hostname().is_some());
    }

    #[test]
    fn reads_a_variable_of_a_child_environment() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("MCPFLEET_PLATFORM_PROBE", "a=b c")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // The child's environment is its own once it has exec'd `sleep`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let value = loop {
            match env_value(pid, "MCPFLEET_PLATFORM_PROBE") {
                Some(v) => break Some(v),
                None if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                None => break None,
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(value.as_deref(), Some("a=b c"));
        assert_eq!(env_value(pid, "MCPFLEET_PLATFORM_PROBE"), None, "reaped: gone");
    }
    #[test]
    fn reads_the_command_line_of_our_own_process_only() {
        let me = std::process::id() as i32;
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        assert_eq!(own_cmdline(me), Some(args));
        assert_eq!(own_cmdline(i32::MAX), None, "no such process");
        // Another user's process (pid 1, unless the tests run as its user).
        use std::os::unix::fs::MetadataExt;
        let init = fs::metadata("/proc/1").map(|m| m.uid()).ok();
        if init.is_some_and(|uid| uid != super::super::process::uid()) {
            assert_eq!(own_cmdline(1), None);
        }
    }

    #[test]
    fn reads_our_own_usage() {
        let u = own_usage().expect("own usage");
        assert!(u.resident_bytes > 1024 * 1024, "{u:?}");
        // stdin, stdout, stderr at least.
        assert!(u.open_fds >= 3, "{u:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            u.start_time_seconds > now - 3600.0 && u.start_time_seconds <= now + 1.0,
            "{u:?}"
        );
    }
}
