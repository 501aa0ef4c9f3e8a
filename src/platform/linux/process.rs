//! Processes on Linux: signals to a group and to one process pinned by a pidfd,
//! exits seen with `waitid(WNOWAIT)` and reaped by pid, our session and group,
//! `PR_SET_CHILD_SUBREAPER`, `fork`, `setsid` for a detached child, and our uid.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;

pub use nix::errno::Errno;
pub use nix::sys::signal::Signal;

use crate::platform::portable::ExitKind;

/// Sends `signal` to every process of group `pgid`. A group that is already empty
/// is no error: there is nothing left to signal.
pub fn signal_group(pgid: i32, signal: Signal) -> Result<(), Errno> {
    match nix::sys::signal::killpg(Pid::from_raw(pgid), signal) {
        Err(Errno::ESRCH) => Ok(()),
        other => other,
    }
}

/// Sends `signal` to the process `pid`, and to no other that may have taken its
/// pid since: the process is pinned by a pidfd, and `still_same` (its start time
/// checked) is asked after pinning. False when it was already gone.
pub fn signal_pinned(pid: i32, signal: Signal, still_same: impl Fn() -> bool) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; the fd
    // is owned by the OwnedFd from here on.
    let raw = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        // No pidfds (Linux before 5.3): check, then signal by pid.
        return still_same() && nix::sys::signal::kill(Pid::from_raw(pid), signal).is_ok();
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    if !still_same() {
        return false;
    }
    // SAFETY: the fd is a valid pidfd for the whole call; a null siginfo is allowed.
    let sent = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal as i32,
            std::ptr::null::<nix::libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
}

/// How our child `pid` exited, if it has, without reaping it: its pid (and group
/// id) stay taken until it is reaped.
pub fn exit_unreaped(pid: i32) -> Option<ExitKind> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(pid)), flags) {
        Ok(WaitStatus::Exited(_, code)) => Some(ExitKind::Code(code)),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(ExitKind::Signal(sig as i32)),
        Ok(_) => None,
        // ECHILD: already reaped by someone; treat as exited with unknown status.
        Err(Errno::ECHILD) => Some(ExitKind::Code(-1)),
        Err(_) => None,
    }
}

/// Reaps our child `pid` if it has exited; never waits, never touches another
/// child (no `waitpid(-1)`).
pub fn reap_if_exited(pid: i32) {
    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

/// Waits, blocking the thread, until our child `pid` has exited, and reaps it.
pub fn wait_for_exit(pid: i32) -> Result<ExitKind, Errno> {
    loop {
        match waitpid(Pid::from_raw(pid), None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(ExitKind::Code(code)),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok(ExitKind::Signal(signal as i32)),
            Ok(_) => continue,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The session of this process (-1 when it cannot be told).
pub fn session_id() -> i32 {
    nix::unistd::getsid(None).map_or(-1, |s| s.as_raw())
}

/// The process group of this process.
pub fn process_group_id() -> i32 {
    nix::unistd::getpgrp().as_raw()
}

/// Makes this process a child subreaper: orphans of its descendants are
/// re-parented to it instead of to init. It stays one across `exec`.
pub fn become_subreaper() -> Result<(), Errno> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// Whether this process is a child subreaper (false when it cannot be told).
pub fn is_subreaper() -> bool {
    nix::sys::prctl::get_child_subreaper().unwrap_or(false)
}

/// Which side of a [`fork`] this is.
pub enum Forked {
    Child,
    Parent { child: i32 },
}

/// Forks this process.
///
/// # Safety
///
/// No other thread may exist: the child goes on as a copy of this thread alone,
/// and a lock another thread held would stay held in it for ever.
pub unsafe fn fork() -> Result<Forked, Errno> {
    // SAFETY: as promised by the caller.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => Ok(Forked::Child),
        nix::unistd::ForkResult::Parent { child } => Ok(Forked::Parent {
            child: child.as_raw(),
        }),
    }
}

/// This process's parent.
pub fn parent_pid() -> i32 {
    nix::unistd::getppid().as_raw()
}

/// Ignores SIGINT and SIGHUP from now on (and across `exec`): a process that must
/// outlive the terminal session it was started from.
pub fn ignore_interrupts() {
    use nix::sys::signal::{SigHandler, signal};
    // SAFETY: setting a signal to SIG_IGN has no handler to be unsafe about.
    unsafe {
        let _ = signal(Signal::SIGINT, SigHandler::SigIgn);
        let _ = signal(Signal::SIGHUP, SigHandler::SigIgn);
    }
}

/// Has the child that `cmd` spawns start a new session, with no controlling
/// terminal: a terminal's hang-up and Ctrl-C no longer reach it.
pub fn detach_into_new_session(cmd: &mut std::process::Command) {
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
}

/// The real user id of this process.
pub fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The home directory of this process's user, from the user database (not
/// `$HOME`): the same whatever environment the process was given.
pub fn home_dir() -> Option<std::path::PathBuf> {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok()??;
    Some(user.dir).filter(|d| d.is_absolute())
}

/// A signal is named as this system names it (`SIGKILL`).
impl std::fmt::Display for ExitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exit code {c}"),
            ExitKind::Signal(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "killed by {}", sig.as_str()),
                Err(_) => write!(f, "killed by signal {s}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_kinds_read_well() {
        assert_eq!(ExitKind::Code(3).to_string(), "exit code 3");
        assert_eq!(ExitKind::Signal(9).to_string(), "killed by SIGKILL");
    }

    // The children here are reaped by the functions under test, not by `wait`.
    #[test]
    #[expect(clippy::zombie_processes, reason = "the function under test reaps the child")]
    fn an_exit_is_seen_unreaped_then_reaped() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let exit = loop {
            match exit_unreaped(pid) {
                Some(exit) => break exit,
                None if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                None => panic!("exit not seen"),
            }
        };
        assert_eq!(exit, ExitKind::Code(7));
        // Not reaped: still a zombie in the table, and seen again.
        assert!(!crate::platform::stat(pid).unwrap().is_alive());
        assert_eq!(exit_unreaped(pid), Some(ExitKind::Code(7)));
        reap_if_exited(pid);
        assert_eq!(crate::platform::stat(pid), None, "reaped");
    }

    #[test]
    #[expect(clippy::zombie_processes, reason = "the function under test reaps the child")]
    fn a_pinned_signal_goes_only_to_the_same_process() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(!signal_pinned(pid, Signal::SIGKILL, || false), "not the same");
        assert!(signal_pinned(pid, Signal::SIGKILL, || true));
        assert_eq!(
            wait_for_exit(pid),
            Ok(ExitKind::Signal(Signal::SIGKILL as i32))
        );
    }
}
