//! How the files of a state directory are opened: never through a symlink
//! planted in their place, reads bounded, replacement atomic, locks taken with a
//! deadline.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Reads at most `limit` bytes of a file of the state directory, never following
/// a symlink planted in its place; `Ok(None)` when it is larger.
pub fn read_bounded_nofollow(path: &Path, limit: usize) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(path)?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() <= limit).then_some(bytes))
}

/// Opens a file in the state directory for appending (created 0600), never
/// following a symlink planted in its place.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(path)
}

/// Reads a whole file of the state directory, never following a symlink planted in
/// its place.
pub fn read_nofollow(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens a file for reading and writing (created 0600), never following a symlink.
pub fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(path)
}

/// Takes the exclusive lock of `file`, trying again every 20 ms until `deadline`
/// unless `stop_waiting` says there is no point. `Ok(false)`: not taken.
pub async fn lock_before(
    file: &File,
    deadline: std::time::Instant,
    mut stop_waiting: impl AsyncFnMut() -> bool,
) -> io::Result<bool> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                if stop_waiting().await {
                    return Ok(false);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Replaces `path` atomically with `bytes`: write a temporary file beside it, flush
/// it to disk, rename it over the old one. A reader sees the old or the new file,
/// never a torn one.
pub fn replace_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(&tmp)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        .and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        // What was half written may hold secrets (a token file): it goes.
        let _ = fs::remove_file(&tmp);
    }
    written
}
