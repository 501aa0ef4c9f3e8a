//! The open-files limit on Linux (`RLIMIT_NOFILE`).

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
