//! Draining a server's stderr. A server whose stderr pipe fills up blocks on its next
//! write, so the pipe is always read to the end, whatever the server writes. Only the
//! last lines are kept, each cut to a bounded length, so a flood of any size costs a
//! fixed amount of memory.
//!
//! The log file holds every line as `TIME<TAB>LINE`, TIME being when the line's
//! first byte was read, in UTC RFC 3339 with milliseconds (always 24 bytes):
//! `mcpfleet logs` shows the time with `--timestamps`, filters on it with
//! `--since`, and removes it otherwise ([`unstamp`]). The line itself is written
//! as the server wrote it, whatever its length, as it arrives (a line that is not
//! finished yet is in the file already, after its time).
//!
//! The server's secrets (what `${env:}` and `env_file:` gave it) are replaced
//! by `[redacted]` as the bytes are read, before the tail or the log sees them
//! (`process::redact`): neither ever holds one, so neither does what is made
//! from them (errors, events, `status`, `logs`). A line whose end may be the
//! beginning of a secret is written up to that beginning until the next bytes
//! come or the pipe closes.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncReadExt};

use super::redact::Redactor;

/// How many of the last stderr lines are kept for error messages.
pub(crate) const TAIL_LINES: usize = 20;
/// The longest stderr line kept; the rest of a longer line is dropped.
pub(crate) const MAX_LINE_BYTES: usize = 1024;

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
    /// when given, both with `redactor`'s secrets replaced. Returns when every
    /// holder of the pipe's write end (the server and any descendant) has closed it.
    pub async fn drain(
        self,
        mut pipe: impl AsyncRead + Unpin,
        server: String,
        mut log: Option<LogFile>,
        mut redactor: Redactor,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        let mut stamper = Stamper::default();
        let mut write = |text: &[u8], log: &mut Option<LogFile>| {
            if text.is_empty() {
                return;
            }
            self.lock().push_bytes(text);
            if let Some(l) = log
                && let Err(e) = l.append(&stamper.stamp(text, SystemTime::now()))
            {
                tracing::warn!(server = %server, error = %e, "cannot write the stderr log; it stops here");
                *log = None;
            }
        };
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    tracing::trace!(server = %server, bytes = n, "stderr");
                    self.lock().total_bytes += n as u64;
                    write(&redactor.push(&buf[..n]), &mut log);
                }
            }
        }
        write(&redactor.finish(), &mut log);
        // A line left unfinished is ended, so that the next generation's first
        // line begins a line of its own, with its time.
        if let Some(l) = &mut log
            && let Some(end) = stamper.finish()
        {
            let _ = l.append(end);
        }
    }
}

/// Puts the time before every line of a server's stderr, for its log file.
#[derive(Default)]
pub(crate) struct Stamper {
    /// The last chunk ended inside a line, whose time is written already.
    mid_line: bool,
}

/// Between a line's time and its text in a server's log.
pub(crate) const STAMP_SEPARATOR: u8 = b'\t';
/// The length of a time as written by [`Stamper`]: `2026-05-04T10:21:07.114Z`.
const STAMP_LEN: usize = 24;

impl Stamper {
    /// `chunk` as the log holds it: `now` before each line that begins in it.
    pub(crate) fn stamp(&mut self, chunk: &[u8], now: SystemTime) -> Vec<u8> {
        let mut time = None;
        let mut out = Vec::with_capacity(chunk.len() + STAMP_LEN + 1);
        let mut rest = chunk;
        while !rest.is_empty() {
            if !self.mid_line {
                let time = time.get_or_insert_with(|| stamp_time(now));
                out.extend_from_slice(time.as_bytes());
                out.push(STAMP_SEPARATOR);
            }
            let (line, more) = match rest.iter().position(|b| *b == b'\n') {
                Some(nl) => rest.split_at(nl + 1),
                None => (rest, &[][..]),
            };
            out.extend_from_slice(line);
            self.mid_line = line.last() != Some(&b'\n');
            rest = more;
        }
        out
    }
}

impl Stamper {
    /// What ends the log's last line when the server's stderr closed inside it.
    pub(crate) fn finish(&mut self) -> Option<&'static [u8]> {
        std::mem::take(&mut self.mid_line).then_some(b"\n")
    }
}

/// `t` in UTC RFC 3339 with milliseconds, within what the format can say.
fn stamp_time(t: SystemTime) -> String {
    let last = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999);
    humantime::format_rfc3339_millis(t.clamp(UNIX_EPOCH, last)).to_string()
}

/// A line of a server's log, as its time and the text the server wrote. A line
/// with no time (one written by an earlier version of mcpfleet, or the rest of
/// a line that the log's rotation cut in two) is `(None, line)`.
pub(crate) fn unstamp(line: &str) -> (Option<SystemTime>, &str) {
    let stamped = line.as_bytes().get(STAMP_LEN) == Some(&STAMP_SEPARATOR);
    match line.get(..STAMP_LEN).filter(|_| stamped) {
        Some(time) => match humantime::parse_rfc3339(time) {
            Ok(t) => (Some(t), &line[STAMP_LEN + 1..]),
            Err(_) => (None, line),
        },
        None => (None, line),
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
pub(crate) const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;

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
        .custom_flags(crate::platform::O_NOFOLLOW)
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

    #[test]
    fn every_line_gets_the_time_its_first_byte_came() {
        let t1 = UNIX_EPOCH + Duration::from_millis(1_795_941_714_123);
        let t2 = t1 + Duration::from_secs(1);
        let mut s = Stamper::default();
        let mut log = s.stamp(b"one\ntw", t1);
        log.extend(s.stamp(b"o\n", t2));
        log.extend(s.stamp(b"", t2));
        log.extend(s.stamp(b"three\n\nfour", t2));
        let text = String::from_utf8(log).unwrap();
        assert_eq!(
            text,
            "2026-11-29T08:41:54.123Z\tone\n\
             2026-11-29T08:41:54.123Z\ttwo\n\
             2026-11-29T08:41:55.123Z\tthree\n\
             2026-11-29T08:41:55.123Z\t\n\
             2026-11-29T08:41:55.123Z\tfour"
        );
        let lines: Vec<_> = text.lines().map(unstamp).collect();
        assert_eq!(lines[0], (Some(t1), "one"));
        assert_eq!(lines[1], (Some(t1), "two"));
        assert_eq!(lines[3], (Some(t2), ""));
        assert_eq!(lines[4], (Some(t2), "four"));
    }

    #[tokio::test]
    async fn a_line_left_unfinished_is_ended_when_stderr_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        for data in [&b"first\nunfinished"[..], b"next generation\n"] {
            let log = LogFile::open(&path).unwrap();
            StderrTail::default()
                .drain(data, "t".into(), Some(log), Redactor::default())
                .await;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().map(|l| unstamp(l).1).collect();
        assert_eq!(
            lines,
            ["first", "unfinished", "next generation"],
            "{text:?}"
        );
        assert!(text.lines().all(|l| unstamp(l).0.is_some()), "{text:?}");
    }

    #[test]
    fn a_line_without_a_time_is_shown_as_it_is() {
        for line in [
            "",
            "plain text",
            "2026-11-29T08:41:54.123Z no tab after the time",
            "2026-11-29T08:41:54.123Z",
            "2026-13-29T08:41:54.123Z\tnot a date",
            "été 2026-11-29T08:41:54.123\tcut inside a character",
        ] {
            assert_eq!(unstamp(line), (None, line));
        }
        // A server's own time after mcpfleet's stays in the text.
        let (t, text) = unstamp("2026-11-29T08:41:54.123Z\t2026-01-01T00:00:00.000Z\tINFO x");
        assert!(t.is_some());
        assert_eq!(text, "2026-01-01T00:00:00.000Z\tINFO x");
    }

    #[tokio::test]
    async fn drain_reads_to_the_end() {
        let data = b"a\nb\nc".to_vec();
        let tail = StderrTail::default();
        tail.clone()
            .drain(&data[..], "t".into(), None, Redactor::default())
            .await;
        assert_eq!(tail.lines(), vec!["a", "b", "c"]);
        assert_eq!(tail.total_bytes(), 5);
    }

    #[tokio::test]
    async fn the_tail_and_the_log_see_only_redacted_text() {
        use tokio::io::AsyncWriteExt;
        const SECRET: &str = "sk-live-0123456789";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let (mut server, pipe) = tokio::io::duplex(64);
        let tail = StderrTail::default();
        let drain = tokio::spawn(tail.clone().drain(
            pipe,
            "t".into(),
            Some(LogFile::open(&path).unwrap()),
            Redactor::new([SECRET]),
        ));
        server.write_all(b"token: sk-live-01").await.unwrap();
        // What cannot be the secret is written at once; its beginning waits.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tail.lines() != ["token: "] {
            assert!(std::time::Instant::now() < deadline, "{:?}", tail.lines());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let log = std::fs::read_to_string(&path).unwrap();
        assert!(log.ends_with("\ttoken: ") && !log.contains("sk-"), "{log:?}");
        server.write_all(b"23456789 ok\nagain ").await.unwrap();
        server.write_all(SECRET.as_bytes()).await.unwrap();
        server.write_all(b"\nbye sk-li").await.unwrap();
        drop(server);
        drain.await.unwrap();
        // Held bytes that did not become the secret are written at the end.
        assert_eq!(tail.lines(), ["token: [redacted] ok", "again [redacted]", "bye sk-li"]);
        assert_eq!(tail.total_bytes(), 17 + 18 + 18 + 10);
        let log = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = log.lines().map(|l| unstamp(l).1).collect();
        assert_eq!(lines, ["token: [redacted] ok", "again [redacted]", "bye sk-li"]);
    }
}
