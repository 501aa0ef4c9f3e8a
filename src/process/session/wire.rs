//! The bytes of an MCP session over a stream, shared by rmcp and the gateway's
//! pass-through calls (docs/design.md §14, "Pass-through calls").
//!
//! rmcp keeps the session: it reads every message it is given, writes its own,
//! and closes it. Under it, on the bytes, sit two things:
//!
//! - an [`Outbox`]: one queue of whole lines to the peer, drained by one writer
//!   task. rmcp writes into it through [`Outbox::writer`], the gateway with
//!   [`Outbox::send_with`]; lines that are queued together are written together,
//!   in one write.
//! - [`Intercepted`]: the peer's stream as rmcp reads it, with each whole line
//!   offered first to a [`Hook`]; a line the hook takes never reaches rmcp.
//!
//! Neither parses anything: what a line means is the hook's business.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::Notify;

use super::stdout::MAX_MESSAGE_BYTES;

/// The most an outbox holds unwritten: a peer that reads nothing while this much
/// waits for it is cut off (its outbox closed), rather than growing the
/// supervisor without bound.
const MAX_QUEUED: usize = 4 * MAX_MESSAGE_BYTES;

/// How long the writer goes on writing what was queued once the outbox is
/// closed: a peer that no longer reads does not keep its stream open.
const FLUSH_AFTER_CLOSE: Duration = Duration::from_secs(5);

/// Whole lines waiting for one writer task (see the module comment).
pub struct Outbox {
    queue: Mutex<Queue>,
    /// Wakes the writer: something was queued, or the outbox closed.
    wake: Notify,
}

struct Queue {
    bytes: Vec<u8>,
    closed: bool,
}

impl Outbox {
    /// An outbox whose lines a task of its own writes to `write`. The task ends
    /// once the outbox is closed and what was queued is written (or
    /// [`FLUSH_AFTER_CLOSE`] has passed), or when a write fails; it shuts `write`
    /// down and drops it then, which closes the stream.
    pub fn spawn<W>(write: W) -> Arc<Outbox>
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let outbox = Arc::new(Outbox {
            queue: Mutex::new(Queue {
                bytes: Vec::new(),
                closed: false,
            }),
            wake: Notify::new(),
        });
        tokio::spawn(drain(outbox.clone(), write));
        outbox
    }

    /// Queues what `fill` appends to the queue, which must be whole lines; false
    /// (and nothing queued) once the outbox is closed.
    pub fn send_with(&self, fill: impl FnOnce(&mut Vec<u8>)) -> bool {
        let mut queue = lock(&self.queue);
        if queue.closed {
            return false;
        }
        fill(&mut queue.bytes);
        let over = queue.bytes.len() > MAX_QUEUED;
        if over {
            queue.closed = true;
            tracing::warn!(
                queued = queue.bytes.len(),
                "a peer read nothing while its messages piled up; its stream is closed"
            );
        }
        drop(queue);
        self.wake.notify_one();
        !over
    }

    /// Closes the outbox: what was queued is still written, nothing more is taken.
    pub fn close(&self) {
        lock(&self.queue).closed = true;
        self.wake.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.queue).closed
    }

    /// The outbox as an `AsyncWrite`, for rmcp's transport. Dropping it, or
    /// shutting it down, closes the outbox: rmcp closing its session closes the
    /// stream, whoever else holds the outbox.
    pub fn writer(self: &Arc<Outbox>) -> OutboxWriter {
        OutboxWriter {
            outbox: self.clone(),
            partial: Vec::new(),
        }
    }
}

/// The writer task of an outbox.
async fn drain<W: AsyncWrite + Unpin>(outbox: Arc<Outbox>, mut write: W) {
    let mut batch = Vec::new();
    loop {
        let closed = {
            let mut queue = lock(&outbox.queue);
            std::mem::swap(&mut queue.bytes, &mut batch);
            queue.closed
        };
        if batch.is_empty() {
            if closed {
                break;
            }
            outbox.wake.notified().await;
            continue;
        }
        let written = async {
            write.write_all(&batch).await?;
            write.flush().await
        };
        let written = match closed {
            false => written.await,
            true => tokio::time::timeout(FLUSH_AFTER_CLOSE, written)
                .await
                .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
        };
        if written.is_err() {
            outbox.close();
            break;
        }
        batch.clear();
        // A burst's memory is not kept for the quiet that follows.
        if batch.capacity() > 1 << 20 {
            batch = Vec::new();
        }
    }
    let _ = tokio::time::timeout(FLUSH_AFTER_CLOSE, write.shutdown()).await;
}

/// rmcp's side of an [`Outbox`]. Only whole lines are queued: bytes after the
/// last newline wait for the rest of their line, so that a line of rmcp's and one
/// of the gateway's never interleave, however rmcp splits its writes.
pub struct OutboxWriter {
    outbox: Arc<Outbox>,
    partial: Vec<u8>,
}

impl AsyncWrite for OutboxWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(last) = memchr::memrchr(b'\n', buf) else {
            this.partial.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        };
        let partial = &mut this.partial;
        let queued = this.outbox.send_with(|queue| {
            queue.append(partial);
            queue.extend_from_slice(&buf[..=last]);
        });
        if !queued {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        this.partial.extend_from_slice(&buf[last + 1..]);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.outbox.close();
        Poll::Ready(Ok(()))
    }
}

impl Drop for OutboxWriter {
    fn drop(&mut self) {
        self.outbox.close();
    }
}

/// What looks at each whole line of a peer's stream before rmcp does.
pub trait Hook: Send {
    /// True when the hook took `line` (its newline removed): rmcp never sees it.
    /// Called in the middle of a read, so it must not wait for anything.
    fn take(&mut self, line: &[u8]) -> bool;

    /// The stream ended (or failed): no line comes any more.
    fn ended(&mut self) {}
}

/// A peer's stream with every whole line offered to a [`Hook`] first (see the
/// module comment). A line longer than `max` is not offered: it is passed on as
/// it comes, and rmcp's own limit deals with it.
pub struct Intercepted<R> {
    inner: R,
    hook: Box<dyn Hook>,
    max: usize,
    /// The current line, until its newline is read.
    line: Vec<u8>,
    /// Read but not yet handed to the reader.
    out: Vec<u8>,
    /// How much of `out` has been handed over.
    handed: usize,
    /// Within a line longer than `max`, passed on unoffered.
    passing: bool,
    ended: bool,
    chunk: Box<[u8]>,
}

impl<R> Intercepted<R> {
    pub fn new(inner: R, max: usize, hook: Box<dyn Hook>) -> Intercepted<R> {
        Intercepted {
            inner,
            hook,
            max,
            line: Vec::new(),
            out: Vec::new(),
            handed: 0,
            passing: false,
            ended: false,
            chunk: vec![0; 8 * 1024].into_boxed_slice(),
        }
    }

    /// Sorts freshly read bytes: whole lines go to the hook or on to `out`.
    fn sort(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = memchr::memchr(b'\n', bytes);
            let take = newline.map_or(bytes.len(), |i| i + 1);
            let (piece, rest) = bytes.split_at(take);
            bytes = rest;
            if self.passing {
                self.out.extend_from_slice(piece);
                self.passing = newline.is_none();
                continue;
            }
            self.line.extend_from_slice(piece);
            if newline.is_some() {
                let text = &self.line[..self.line.len() - 1];
                if !self.hook.take(text) {
                    self.out.extend_from_slice(&self.line);
                }
                self.line.clear();
            } else if self.line.len() > self.max {
                self.out.append(&mut self.line);
                self.passing = true;
            }
        }
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            // An unfinished last line goes on as it is: rmcp drops it.
            self.out.append(&mut self.line);
            self.hook.ended();
        }
    }
}

impl<R> Drop for Intercepted<R> {
    fn drop(&mut self) {
        self.end();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Intercepted<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.handed < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.handed);
                buf.put_slice(&this.out[this.handed..this.handed + n]);
                this.handed += n;
                if this.handed == this.out.len() {
                    this.out.clear();
                    this.handed = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    this.end();
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(Ok(())) => {}
            }
            let n = read.filled().len();
            if n == 0 {
                this.end();
                continue;
            }
            let chunk = std::mem::take(&mut this.chunk);
            this.sort(&chunk[..n]);
            this.chunk = chunk;
            // Everything read may have been taken: read again, rather than report
            // an empty read, which would mean the end of the stream.
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Takes the lines that start with `take`, and counts the ends it is told of.
    struct Taker {
        prefix: &'static [u8],
        taken: Arc<Mutex<Vec<Vec<u8>>>>,
        ended: Arc<Mutex<usize>>,
    }

    impl Hook for Taker {
        fn take(&mut self, line: &[u8]) -> bool {
            if line.starts_with(self.prefix) {
                lock(&self.taken).push(line.to_vec());
                return true;
            }
            false
        }

        fn ended(&mut self) {
            *lock(&self.ended) += 1;
        }
    }

    async fn run(input: Vec<u8>, max: usize) -> (Vec<u8>, Vec<Vec<u8>>, usize) {
        let taken = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(0));
        let hook = Taker {
            prefix: b"{\"take",
            taken: taken.clone(),
            ended: ended.clone(),
        };
        // A reader that hands the input over in pieces of 3 bytes.
        let (mut tx, rx) = tokio::io::duplex(3);
        let feeder = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            tx.write_all(&input).await.unwrap();
        });
        let mut reader = Intercepted::new(rx, max, Box::new(hook));
        let mut passed = Vec::new();
        reader.read_to_end(&mut passed).await.unwrap();
        feeder.await.unwrap();
        drop(reader);
        let taken = lock(&taken).clone();
        let ended = *lock(&ended);
        (passed, taken, ended)
    }

    #[tokio::test]
    async fn lines_the_hook_takes_never_reach_the_reader_and_the_rest_pass_whole() {
        let input = b"{\"a\":1}\n{\"take\":2}\n{\"b\":3}\n{\"take\":4}\n{\"c\"".to_vec();
        let (passed, taken, ended) = run(input, 1024).await;
        assert_eq!(passed, b"{\"a\":1}\n{\"b\":3}\n{\"c\"".to_vec());
        assert_eq!(taken, vec![b"{\"take\":2}".to_vec(), b"{\"take\":4}".to_vec()]);
        assert_eq!(ended, 1, "the end is told once, not again on drop");
    }

    #[tokio::test]
    async fn a_line_beyond_the_limit_is_passed_on_unoffered() {
        let long = format!("{{\"take\":\"{}\"}}\n", "x".repeat(40));
        let input = [long.as_bytes(), b"{\"take\":1}\n"].concat();
        let (passed, taken, _) = run(input, 16).await;
        assert_eq!(passed, long.as_bytes());
        assert_eq!(taken, vec![b"{\"take\":1}".to_vec()]);
    }

    #[tokio::test]
    async fn the_outbox_writes_whole_lines_in_order_and_closing_it_ends_the_stream() {
        let (write, mut read) = tokio::io::duplex(64);
        let outbox = Outbox::spawn(write);
        let mut rmcp = outbox.writer();
        // rmcp's line arrives in two writes, with the gateway's line between them.
        rmcp.write_all(b"{\"rmcp\":").await.unwrap();
        assert!(outbox.send_with(|q| q.extend_from_slice(b"{\"gateway\":1}\n")));
        rmcp.write_all(b"1}\n{\"rmcp\":2}\n").await.unwrap();
        drop(rmcp);
        assert!(outbox.is_closed(), "rmcp letting go closes the outbox");
        assert!(!outbox.send_with(|q| q.extend_from_slice(b"{\"late\":1}\n")));
        let mut all = Vec::new();
        read.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"{\"gateway\":1}\n{\"rmcp\":1}\n{\"rmcp\":2}\n".to_vec());
    }
}
