//! The operating system, behind one boundary: every call into the kernel that std
//! and tokio do not make portable, and every file of `/proc`, is made here and
//! nowhere else in the crate. A port to another system implements this module and
//! touches no other (docs/architecture.md, and the book's
//! docs/src/platforms/other-systems.md).
//!
//! ```text
//!  process::table, lineage, teardown   supervisor::guardian, state       commands
//!            │                                   │                          │
//!            └──────────────► platform (this API: types from `portable`, functions from `os`)
//!                                    │
//!                                    └─ linux/: /proc, pidfd, waitid, killpg,
//!                                       PR_SET_CHILD_SUBREAPER, O_PATH, rlimit
//! ```
//!
//! What the rest of the crate asks of it:
//!
//! - the process table: [`stat`] of one process ([`ProcStat`]: parent, group,
//!   session, whether it still runs, and a start time that with [`boot_id`] tells
//!   a reused pid apart), [`pids`], [`has_children`], the value of a variable in
//!   another process's environment ([`env_value`]), the command line of a
//!   process of this user ([`own_cmdline`], to find a running supervisor), the
//!   [`hostname`], and what this process uses ([`own_usage`], for its metrics);
//! - processes: noticing an exit without reaping it ([`ExitWatch`],
//!   [`exit_unreaped`]), signalling a process group ([`signal_group`]) and one
//!   process pinned against pid reuse ([`signal_pinned`]), reaping by pid
//!   ([`reap_if_exited`], [`wait_for_exit`]), our own session and group, the child
//!   subreaper ([`become_subreaper`]: orphans of our servers come back to us),
//!   [`fork`] for the guardian, a new session for a detached supervisor
//!   ([`detach_into_new_session`]), our uid and its home directory from the
//!   user database ([`home_dir`]);
//! - files: `O_NOFOLLOW` for the state directory, stderr's size and its
//!   replacement by another file ([`redirect_stderr`], for the rotation of
//!   `supervisor.log`), a socket path of any length
//!   ([`SocketPath`]), whether an error means the descriptors ran out, and the
//!   open-files limit;
//! - descriptors: whether one is a pipe, a socket or something else
//!   ([`stream_kind`]), and handing them to another process over a Unix socket
//!   ([`send_fds`], [`recv_fds`]: how `connect` gives the supervisor its stdin
//!   and stdout).
//!
//! It keeps no state of servers and decides nothing: it answers and carries out.
//! What a generation's lineage is, when to signal and whom, stays in `process`.
//! On another system the crate does not build: `lib.rs` compiles nothing but its
//! one `compile_error!` there.

mod portable;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;

// The process table.
pub use os::{
    boot_clock, boot_id, env_value, has_children, hostname, own_cmdline, own_usage, pids, stat,
};

// Processes: exits, signals, reaping, sessions, the subreaper, who we are.
pub use os::{
    Errno, ExitWatch, Forked, Signal, become_subreaper, detach_into_new_session, is_subreaper, euid,
    exit_unreaped, fork, home_dir, ignore_interrupts, parent_pid, process_group_id, reap_if_exited,
    session_id, signal_group, signal_pinned, uid, wait_for_exit,
};

// Descriptors: what kind of stream one is, and handing them to another process.
pub use os::{inherited_socket, recv_fds, send_fds, set_close_on_exec, stream_kind};

// Files and limits.
pub use os::{
    O_NOFOLLOW, SocketPath, open_files_limit, redirect_stderr, run_thread_when_idle,
    set_open_files_limit, stderr_size, too_many_open_files, out_of_descriptors,
};

// The types every implementation answers with.
pub use portable::{ExitKind, ProcStat, StreamKind, Usage};
