//! The server's stdout as rmcp reads it.
//!
//! It is read through a guard (`StdoutGuard`), which keeps what a server can cost
//! the supervisor bounded whatever it writes: one message (one line) may be at most
//! [`MAX_MESSAGE_BYTES`], and a longer one ends the session with a protocol error
//! that names the limit, instead of being buffered; lines that cannot be JSON-RPC at
//! all (a banner, debug output, binary noise) are dropped before they are parsed,
//! and what is logged about them is bounded (the first one, then a count at most
//! every [`DROPPED_REPORT_EVERY`]), however many there are. Once the session is
//! over, what rmcp lets go of is read on and discarded (`EndSignal`, rule L5).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// The largest message (one line of the server's stdout, its newline included) the
/// supervisor accepts: the same as rmcp's default for stdio and its limit of one
/// event over streamable HTTP, so that what is accepted over one transport is
/// accepted over the other. A longer line ends the session.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How often, at most, the count of dropped non-JSON lines is logged.
pub(crate) const DROPPED_REPORT_EVERY: Duration = Duration::from_secs(10);

/// How much of a dropped line is shown in the log.
const PREVIEW_BYTES: usize = 120;

/// The reason a server's stdout was cut off, shared between the reader that found
/// it and the session that reports it.
#[derive(Clone, Default)]
pub(super) struct Violation(Arc<Mutex<Option<String>>>);

impl Violation {
    pub(super) fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, why: &str) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| why.to_owned());
    }
}

/// Where the reader is within the current line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
    /// Nothing but whitespace yet: the first other byte decides.
    Start,
    /// A line that may be JSON-RPC: passed on.
    Pass,
    /// A line that cannot be JSON-RPC: dropped.
    Drop,
}

/// The server's stdout as rmcp reads it, with the limits of the module comment
/// applied. Bytes are filtered in place in the caller's buffer, so the guard holds
/// no buffer of its own: its memory is a few counters and one short preview.
pub(super) struct StdoutGuard<R> {
    inner: R,
    max_line: usize,
    violation: Violation,
    /// Set once the limit was exceeded: every later read fails the same way.
    failed: Option<String>,
    state: LineState,
    /// Bytes of the current line so far, leading whitespace included.
    line_len: usize,
    dropped: DroppedLines,
}

/// Non-JSON lines seen on a server's stdout, and when they were last reported.
#[derive(Default)]
struct DroppedLines {
    /// The beginning of the line being dropped, for the log.
    preview: Vec<u8>,
    /// Lines and bytes dropped since the last report.
    lines: u64,
    bytes: u64,
    total_lines: u64,
    last_report: Option<Instant>,
}

impl DroppedLines {
    fn start_line(&mut self) {
        self.preview.clear();
    }

    fn add(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        let room = PREVIEW_BYTES.saturating_sub(self.preview.len());
        self.preview
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// A dropped line has ended: log the first one of a session, and after that a
    /// count at most every `DROPPED_REPORT_EVERY`.
    fn end_line(&mut self) {
        self.lines += 1;
        self.total_lines += 1;
        let now = Instant::now();
        match self.last_report {
            None => {
                // Escaped: the server's bytes must not reach a terminal as they are.
                let preview = String::from_utf8_lossy(&self.preview);
                tracing::warn!(
                    line = %preview.trim_end().escape_debug(),
                    "a server wrote a line that is not JSON-RPC to stdout; it was dropped \
                     (stdout is for MCP messages only; further ones are counted)"
                );
                self.lines = 0;
                self.bytes = 0;
                self.last_report = Some(now);
            }
            Some(at) if now.duration_since(at) >= DROPPED_REPORT_EVERY => self.report(now),
            Some(_) => {}
        }
    }

    fn report(&mut self, now: Instant) {
        if self.lines > 0 {
            tracing::warn!(
                lines = self.lines,
                bytes = self.bytes,
                total_lines = self.total_lines,
                "a server keeps writing lines that are not JSON-RPC to stdout; they were dropped"
            );
        }
        self.lines = 0;
        self.bytes = 0;
        self.last_report = Some(now);
    }
}

/// The server's stdout as handed to rmcp: says when rmcp drops it, which it does
/// when its service loop ends for whatever reason, and then keeps reading it.
///
/// The session ends before the server does: closing the session closes the
/// server's stdin, and a server that writes while it shuts down (a last log line,
/// an answer in flight) must not die of a broken pipe. So what rmcp lets go of is
/// read on and discarded until the server's side is closed or `drain_until` fires
/// (the authority fires it once teardown has ended the server's processes).
pub(super) struct EndSignal<R: AsyncRead + Send + Unpin + 'static> {
    inner: Option<R>,
    ended: CancellationToken,
    drain_until: CancellationToken,
}

impl<R: AsyncRead + Send + Unpin + 'static> EndSignal<R> {
    /// `ended` is cancelled when rmcp drops `inner`; from then on it is drained
    /// until `drain_until` fires or the server closes it.
    pub(super) fn new(
        inner: R,
        ended: CancellationToken,
        drain_until: CancellationToken,
    ) -> EndSignal<R> {
        EndSignal {
            inner: Some(inner),
            ended,
            drain_until,
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> Drop for EndSignal<R> {
    fn drop(&mut self) {
        self.ended.cancel();
        if let (Some(inner), Ok(runtime)) =
            (self.inner.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(drain_rest(inner, self.drain_until.clone()));
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> AsyncRead for EndSignal<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut().inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_read(cx, buf),
            None => Poll::Ready(Ok(())),
        }
    }
}

/// Reads and discards the rest of a server's stdout (see [`EndSignal`]).
async fn drain_rest<R: AsyncRead + Unpin>(mut stdout: R, until: CancellationToken) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 8192];
    let mut discarded = 0u64;
    loop {
        tokio::select! {
            _ = until.cancelled() => break,
            read = stdout.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n as u64,
            },
        }
    }
    if discarded > 0 {
        tracing::info!(
            bytes = discarded,
            "discarded what a server wrote to stdout after its session was closed"
        );
    }
}

impl<R> Drop for StdoutGuard<R> {
    fn drop(&mut self) {
        // What was counted since the last report is not lost with the session.
        self.dropped.report(Instant::now());
    }
}

impl<R> StdoutGuard<R> {
    pub(super) fn new(inner: R, max_line: usize, violation: Violation) -> StdoutGuard<R> {
        StdoutGuard {
            inner,
            max_line,
            violation,
            failed: None,
            state: LineState::Start,
            line_len: 0,
            dropped: DroppedLines::default(),
        }
    }

    fn too_long(&mut self) -> io::Error {
        let why = format!(
            "message too large: the server wrote more than {} MiB ({} bytes) to stdout \
             without ending the line, beyond the limit of one MCP message; the session was ended",
            self.max_line / (1024 * 1024),
            self.max_line
        );
        tracing::warn!("{why}");
        self.violation.set(&why);
        self.failed = Some(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }

    /// Filters `bytes` in place: the bytes to pass on are moved to the front, and
    /// their count is returned. Fails when a line grows beyond the limit.
    fn filter(&mut self, bytes: &mut [u8]) -> io::Result<usize> {
        let mut kept = 0;
        let mut i = 0;
        while i < bytes.len() {
            if self.state == LineState::Start {
                let b = bytes[i];
                i += 1;
                self.line_len += 1;
                match b {
                    b'\n' => self.line_len = 0,
                    b' ' | b'\t' | b'\r' => {}
                    // An object or a batch, or the byte order mark that rmcp skips.
                    b'{' | b'[' | 0xEF => {
                        self.state = LineState::Pass;
                        bytes[kept] = b;
                        kept += 1;
                    }
                    _ => {
                        self.state = LineState::Drop;
                        self.dropped.start_line();
                        self.dropped.add(&[b]);
                    }
                }
                if self.line_len > self.max_line {
                    return Err(self.too_long());
                }
                continue;
            }
            // The rest of the line, up to and including its newline, in one step.
            let rest = &bytes[i..];
            let (take, ends) = match rest.iter().position(|b| *b == b'\n') {
                Some(nl) => (nl + 1, true),
                None => (rest.len(), false),
            };
            self.line_len += take;
            if self.line_len > self.max_line {
                return Err(self.too_long());
            }
            match self.state {
                LineState::Pass => {
                    if kept != i {
                        bytes.copy_within(i..i + take, kept);
                    }
                    kept += take;
                }
                _ => {
                    let (start, end) = (i, i + take - usize::from(ends));
                    self.dropped.add(&bytes[start..end]);
                }
            }
            i += take;
            if ends {
                if self.state == LineState::Drop {
                    self.dropped.end_line();
                }
                self.state = LineState::Start;
                self.line_len = 0;
            }
        }
        Ok(kept)
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for StdoutGuard<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(why) = &this.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())));
        }
        loop {
            let start = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let end = buf.filled().len();
            if end == start {
                // The end of the stream.
                return Poll::Ready(Ok(()));
            }
            let kept = match this.filter(&mut buf.filled_mut()[start..end]) {
                Ok(kept) => kept,
                Err(e) => {
                    // A read that fails hands over nothing.
                    buf.set_filled(start);
                    return Poll::Ready(Err(e));
                }
            };
            buf.set_filled(start + kept);
            if kept > 0 {
                return Poll::Ready(Ok(()));
            }
            // Everything read was dropped: read again rather than report an empty
            // read, which would mean the end of the stream. The inner reader spends
            // tokio's cooperative budget, so a flood still yields to other tasks.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Runs `chunks` through a guard as successive reads; what passes, or the error.
    fn feed(max: usize, chunks: &[&[u8]]) -> (Result<Vec<u8>, String>, StdoutGuard<&'static [u8]>) {
        let mut guard = StdoutGuard::new(&b""[..], max, Violation::default());
        let mut out = Vec::new();
        for chunk in chunks {
            let mut bytes = chunk.to_vec();
            match guard.filter(&mut bytes) {
                Ok(kept) => out.extend_from_slice(&bytes[..kept]),
                Err(e) => return (Err(e.to_string()), guard),
            }
        }
        (Ok(out), guard)
    }

    #[test]
    fn json_lines_pass_unchanged_and_other_lines_are_dropped() {
        let (out, guard) = feed(
            1024,
            &[
                b"Server started on stdio\n{\"a\":1}\n",
                b"  \n\r\n[1,2]\r\nnot json {\"b\"",
                b":2}\n  {\"c\":",
                b"3}\n\xef\xbb\xbf{\"d\":4}\n",
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&out.unwrap()),
            "{\"a\":1}\n[1,2]\r\n{\"c\":3}\n\u{feff}{\"d\":4}\n"
        );
        assert_eq!(guard.dropped.total_lines, 2);
        assert!(guard.violation.get().is_none());
    }

    #[test]
    fn a_line_beyond_the_limit_ends_the_stream_with_an_error_naming_it() {
        let max = 2 * 1024 * 1024;
        let line = vec![b'x'; max];
        // Exactly at the limit, its newline included: accepted.
        let mut ok = b"{".to_vec();
        ok.extend_from_slice(&line[..max - 2]);
        ok.push(b'\n');
        let (out, _) = feed(max, &[&ok]);
        assert_eq!(out.unwrap().len(), max);
        // One byte more, in pieces and without a newline: refused, as is a
        // non-JSON line of that size.
        let mut big = b"{".to_vec();
        big.extend_from_slice(&line);
        let mut noise = line.clone();
        noise.push(b'x');
        for body in [big, noise] {
            let (first, second) = body.split_at(max / 2);
            let (out, guard) = feed(max, &[first, second]);
            let e = out.unwrap_err();
            assert!(
                e.contains("2 MiB") && e.contains("message too large"),
                "{e}"
            );
            assert_eq!(guard.violation.get().as_deref(), Some(e.as_str()));
        }
    }

    #[tokio::test]
    async fn reads_skip_dropped_lines_and_stop_for_good_at_the_limit() {
        // Two reads: the first passes a line, the second brings one beyond the limit.
        let first: &'static [u8] = b"noise\nnoise\n{\"ok\":true}\n";
        let data = first.chain(&b"{\"too\":\"long line\"}\n"[..]);
        let violation = Violation::default();
        let mut guard = StdoutGuard::new(data, 16, violation.clone());
        let mut out = Vec::new();
        let e = guard.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(out, b"{\"ok\":true}\n");
        assert!(violation.get().is_some());
        let mut buf = [0u8; 8];
        assert!(guard.read(&mut buf).await.is_err(), "it stays failed");

        let mut guard = StdoutGuard::new(&b"only noise\n\n"[..], 16, Violation::default());
        let mut out = Vec::new();
        assert_eq!(guard.read_to_end(&mut out).await.unwrap(), 0);
        assert_eq!(guard.dropped.total_lines, 1);
    }
}
