//! The open-files limit on Linux (`RLIMIT_NOFILE`), and the CPU priority of a
//! background thread.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use super::Errno;

/// The soft and hard open-files limits of this process.
pub fn open_files_limit() -> Result<(u64, u64), Errno> {
    getrlimit(Resource::RLIMIT_NOFILE)
}

/// Sets the soft and hard open-files limits of this process.
pub fn set_open_files_limit(soft: u64, hard: u64) -> Result<(), Errno> {
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard)
}

/// Puts the calling thread (only it, not its process) in `SCHED_IDLE`: the kernel
/// gives it a core when no other thread wants one, and the smallest share
/// otherwise, so it is slowed by a busy machine but never starved.
pub fn run_thread_when_idle() -> Result<(), Errno> {
    let param = nix::libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` lives across the call.
    let rc = unsafe { nix::libc::sched_setscheduler(0, nix::libc::SCHED_IDLE, &param) };
    match rc {
        0 => Ok(()),
        _ => Err(Errno::last()),
    }
}
