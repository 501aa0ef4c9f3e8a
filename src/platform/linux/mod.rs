//! The Linux implementation of `platform`: the process table from `/proc`
//! (`procfs.rs`), exits seen through pidfds (`exit_watch.rs`), signals, waits,
//! sessions, the child subreaper and `fork` (`process.rs`), `O_NOFOLLOW` and
//! socket paths through `/proc/self/fd` (`files.rs`), descriptors handed over a
//! Unix socket (`descriptors.rs`), and the open-files limit
//! (`limits.rs`). Every `unsafe` call into the kernel of the crate is here, with
//! the one promise that only its caller can make (no thread exists at `fork`).

mod descriptors;
mod exit_watch;
mod files;
mod limits;
mod procfs;
mod process;

pub use descriptors::{inherited_socket, recv_fds, send_fds, set_close_on_exec, stream_kind};
pub use exit_watch::ExitWatch;
pub use files::{
    O_NOFOLLOW, SocketPath, out_of_descriptors, redirect_stderr, stderr_size, too_many_open_files,
};
pub use limits::{open_files_limit, run_thread_when_idle, set_open_files_limit};
pub use procfs::{boot_clock, boot_id, env_value, has_children, hostname, own_cmdline, own_usage, pids, stat};
pub use process::{
    Errno, Forked, Signal, become_subreaper, detach_into_new_session, is_subreaper, euid, exit_unreaped, fork, home_dir,
    ignore_interrupts, parent_pid, process_group_id, reap_if_exited, session_id, signal_group,
    signal_pinned, uid, wait_for_exit,
};
