//! The types every implementation of `platform` answers with: they say nothing of
//! how a system finds them out, so a port fills in the same ones. What is written
//! in a system's own terms (a signal's name in [`ExitKind`]'s `Display`) is that
//! system's module's.

/// What kind of stream a descriptor is ([`stream_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A pipe or a FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// Anything else: a terminal, a file, a device.
    Other,
}

/// What this process uses, for its metrics ([`own_usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub resident_bytes: u64,
    pub open_fds: u64,
    /// User and system time.
    pub cpu_seconds: f64,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// One process as the process table shows it, reduced to what teardown and
/// identity need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub ppid: i32,
    /// Process group id: the group that [`signal_group`] reaches.
    pub pgid: i32,
    /// Session id: a process that called `setsid` has left its server's session.
    pub sid: i32,
    /// The state letter; `Z` (zombie) and `X` (dead) are no longer running.
    pub state: char,
    /// When the process started, in the system's own unit (on Linux, clock ticks
    /// since boot): with the boot id it tells a reused pid apart from the process
    /// that was recorded, and a child never started before its parent.
    pub start_time: u64,
}

impl ProcStat {
    /// A zombie has exited: it holds its pid until reaped but runs no code.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// What a process's exit looked like, when it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    Code(i32),
    Signal(i32),
}
