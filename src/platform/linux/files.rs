//! Files on Linux: the `O_NOFOLLOW` flag for the state directory's files, stderr's
//! size and its replacement (for `supervisor.log`'s rotation), whether an error
//! means the descriptors ran out, and a socket path of any length through
//! an `O_PATH` descriptor and `/proc/self/fd`.

use std::path::{Path, PathBuf};

/// The open flag that refuses a symlink in the last component of a path, for
/// `OpenOptionsExt::custom_flags`.
pub const O_NOFOLLOW: i32 = nix::libc::O_NOFOLLOW;

/// The size of the file on this process's stderr (fd 2), if it is one.
pub fn stderr_size() -> Option<u64> {
    use std::os::fd::AsFd;
    let stat = nix::sys::stat::fstat(std::io::stderr().as_fd()).ok()?;
    Some(stat.st_size.max(0) as u64)
}

/// Puts `file` on this process's stderr (fd 2) in place of what was there.
pub fn redirect_stderr(file: &std::fs::File) -> std::io::Result<()> {
    nix::unistd::dup2_stderr(file).map_err(std::io::Error::from)
}

/// Whether `e` says that this process (EMFILE) or the system (ENFILE) has no
/// descriptor left.
pub fn too_many_open_files(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EMFILE | nix::libc::ENFILE)
    )
}

/// The error an open gets when this process has no descriptor left (EMFILE),
/// for code that must act out that case.
pub fn out_of_descriptors() -> std::io::Error {
    std::io::Error::from_raw_os_error(nix::libc::EMFILE)
}

/// A path to a Unix socket that `bind` and `connect` accept. The kernel takes at
/// most 107 bytes of path in a socket address; a state directory may be longer.
/// A longer path is reached through `/proc/self/fd/N/NAME`, where N is a
/// descriptor of the socket's directory, held open as long as this value lives:
/// the same directory and socket file, by a path of a few dozen bytes.
pub struct SocketPath {
    path: PathBuf,
    /// The directory, when the path goes through its descriptor.
    _dir: Option<std::fs::File>,
}

/// The longest path used as it is (the kernel's limit, less its terminating NUL,
/// with room to spare).
const SOCKET_PATH_MAX: usize = 100;

impl SocketPath {
    pub fn new(path: &Path) -> std::io::Result<SocketPath> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        if path.as_os_str().len() <= SOCKET_PATH_MAX {
            return Ok(SocketPath {
                path: path.to_owned(),
                _dir: None,
            });
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is not a path to a socket file", path.display()),
            ));
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
            .open(parent)?;
        let short = Path::new("/proc/self/fd")
            .join(dir.as_raw_fd().to_string())
            .join(name);
        Ok(SocketPath {
            path: short,
            _dir: Some(dir),
        })
    }

    /// The path to hand to `bind` or `connect`, valid while `self` lives.
    pub fn as_path(&self) -> &Path {
        &self.path
    }
}
