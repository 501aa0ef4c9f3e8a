//! Draining a server's stderr. A server whose stderr pipe fills up blocks on its next
//! write, so the pipe is always read to the end, whatever the server writes. Only the
//! last lines are kept, each cut to a bounded length, so a flood of any size costs a
//! fixed amount of memory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};

/// How many of the last stderr lines are kept for error messages.
pub const TAIL_LINES: usize = 20;
/// The longest stderr line kept; the rest of a longer line is dropped.
pub const MAX_LINE_BYTES: usize = 1024;

/// The last lines a server wrote to stderr. Shared between the drain task, which
/// appends, and the authority, which reads a copy when it reports an error; it holds
/// log text only, never lifecycle state.
#[derive(Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<TailBuffer>>,
}

#[derive(Default)]
struct TailBuffer {
    lines: VecDeque<String>,
    /// The unfinished last line, at most `MAX_LINE_BYTES` long.
    partial: Vec<u8>,
    /// Bytes read in all, for diagnostics.
    total_bytes: u64,
}

impl TailBuffer {
    fn push_bytes(&mut self, mut chunk: &[u8]) {
        self.total_bytes += chunk.len() as u64;
        while let Some(nl) = chunk.iter().position(|b| *b == b'\n') {
            self.extend_partial(&chunk[..nl]);
            self.finish_line();
            chunk = &chunk[nl + 1..];
        }
        self.extend_partial(chunk);
    }

    fn extend_partial(&mut self, bytes: &[u8]) {
        let room = MAX_LINE_BYTES.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish_line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial)
            .trim_end_matches('\r')
            .to_owned();
        self.partial.clear();
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    fn snapshot(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.lines.iter().cloned().collect();
        if !self.partial.is_empty() {
            lines.push(String::from_utf8_lossy(&self.partial).into_owned());
        }
        if lines.len() > TAIL_LINES {
            lines.drain(..lines.len() - TAIL_LINES);
        }
        lines
    }
}

impl StderrTail {
    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lock().snapshot()
    }

    /// How many bytes the server wrote to stderr so far.
    pub fn total_bytes(&self) -> u64 {
        self.lock().total_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TailBuffer> {
        // A panic while holding this lock can only come from a bug in this file;
        // the buffer is still usable text, so recover it rather than propagate.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads `pipe` to its end, keeping the tail and appending everything to `log`
    /// when given. Returns when every holder of the pipe's write end (the server and
    /// any descendant) has closed it.
    pub async fn drain(
        self,
        mut pipe: impl AsyncRead + Unpin,
        server: String,
        mut log: Option<LogFile>,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    tracing::trace!(server = %server, bytes = n, "stderr");
                    self.lock().push_bytes(&buf[..n]);
                    if let Some(l) = &mut log
                        && let Err(e) = l.append(&buf[..n])
                    {
                        tracing::warn!(server = %server, error = %e, "cannot write the stderr log; it stops here");
                        log = None;
                    }
                }
            }
        }
    }
}

/// A server's stderr log, bounded in size: past `MAX_LOG_BYTES` the file is moved
/// to `NAME.1` (replacing an older one) and a new file is begun, so a server keeps
/// at most twice the limit on disk.
pub struct LogFile {
    path: PathBuf,
    file: File,
    written: u64,
}

/// The size at which a stderr log is rotated.
pub const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;

impl LogFile {
    /// Opens `path` for appending (0600, never through a symlink).
    pub fn open(path: &Path) -> std::io::Result<LogFile> {
        let file = open_log(path)?;
        let written = file.metadata()?.len();
        Ok(LogFile {
            path: path.to_path_buf(),
            file,
            written,
        })
    }

    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.written + bytes.len() as u64 > MAX_LOG_BYTES && self.written > 0 {
            std::fs::rename(&self.path, self.path.with_extension("log.1"))?;
            self.file = open_log(&self.path)?;
            self.written = 0;
        }
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_lines_each_cut_to_the_limit() {
        let mut t = TailBuffer::default();
        for i in 0..100 {
            t.push_bytes(format!("line {i}\n").as_bytes());
        }
        let long = vec![b'x'; MAX_LINE_BYTES * 3];
        t.push_bytes(&long);
        t.push_bytes(b"\nlast");
        let lines = t.snapshot();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines.last().unwrap(), "last");
        assert_eq!(lines[lines.len() - 2].len(), MAX_LINE_BYTES);
        assert_eq!(lines[0], "line 82");
        assert_eq!(
            t.total_bytes,
            100 * 8 - 10 + (MAX_LINE_BYTES * 3) as u64 + 5
        );
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut t = TailBuffer::default();
        t.push_bytes(b"hel");
        t.push_bytes(b"lo\r\nwor");
        t.push_bytes(b"ld\n");
        assert_eq!(t.snapshot(), vec!["hello", "world"]);
    }

    #[tokio::test]
    async fn the_log_file_is_rotated_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let mut log = LogFile::open(&path).unwrap();
        let chunk = vec![b'x'; 1024 * 1024];
        for _ in 0..5 {
            log.append(&chunk).unwrap();
        }
        let current = std::fs::metadata(&path).unwrap().len();
        let rotated = std::fs::metadata(dir.path().join("s.log.1")).unwrap().len();
        assert_eq!(current, 1024 * 1024);
        assert_eq!(rotated, 4 * 1024 * 1024);
    }

    #[tokio::test]
    async fn drain_reads_to_the_end() {
        let data = b"a\nb\nc".to_vec();
        let tail = StderrTail::default();
        tail.clone().drain(&data[..], "t".into(), None).await;
        assert_eq!(tail.lines(), vec!["a", "b", "c"]);
        assert_eq!(tail.total_bytes(), 5);
    }
}
