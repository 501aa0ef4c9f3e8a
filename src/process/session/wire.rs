//! The bytes of an MCP session over a stream, shared by rmcp and the gateway's
//! pass-through calls (docs/design.md §14, "Pass-through calls").
//!
//! rmcp keeps the session: it reads every message it is given, writes its own,
//! and closes it. Under it, on the bytes, sit two things:
//!
//! - an [`Outbox`]: one queue of whole lines to the peer. rmcp writes into it
//!   through [`Outbox::writer`], the gateway with [`Outbox::send_with`]. Whoever
//!   queues a line writes the queue to the stream at once, without waiting and
//!   without a task in between; only what the stream does not take at once is
//!   left to the outbox's own task, which waits until the peer reads. While an
//!   [`Intercepted`] reader hands the lines of one read to its hook, what they
//!   queue is written once that read is sorted ([`deferred`]): the lines of one
//!   read go out in one write to each peer.
//! - [`Intercepted`]: the peer's stream as rmcp reads it, with each whole line
//!   offered first to a [`Hook`]; a line the hook takes never reaches rmcp.
//!
//! Neither parses anything: what a line means is the hook's business.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::stdout::MAX_MESSAGE_BYTES;

/// The most an outbox holds unwritten: a peer that reads nothing while this much
/// waits for it is cut off (its outbox closed), rather than growing the
/// supervisor without bound.
const MAX_QUEUED: usize = 4 * MAX_MESSAGE_BYTES;

/// How long the outbox goes on writing what was queued once it is closed: a
/// peer that no longer reads does not keep its stream open.
const FLUSH_AFTER_CLOSE: Duration = Duration::from_secs(5);

/// The largest buffer kept from one write for the next.
const MAX_SPARE: usize = 1 << 20;

/// A stream an [`Outbox`] writes to: what it takes now, without waiting, and a
/// way to wait until it takes more. Dropping it closes the stream (a socket's
/// write half is shut down).
pub(crate) trait Sink: Send + Sync + 'static {
    /// Writes what the stream takes now; `WouldBlock` when it takes nothing.
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Waits until the stream may take more.
    fn writable(&self) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>>;
}

impl Sink for tokio::net::unix::pipe::Sender {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        tokio::net::unix::pipe::Sender::try_write(self, buf)
    }
    fn writable(&self) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>> {
        Box::pin(tokio::net::unix::pipe::Sender::writable(self))
    }
}

impl Sink for tokio::net::UnixStream {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        tokio::net::UnixStream::try_write(self, buf)
    }
    fn writable(&self) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>> {
        Box::pin(tokio::net::UnixStream::writable(self))
    }
}

impl Sink for tokio::net::unix::OwnedWriteHalf {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        tokio::net::unix::OwnedWriteHalf::try_write(self, buf)
    }
    fn writable(&self) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>> {
        Box::pin(tokio::net::unix::OwnedWriteHalf::writable(self))
    }
}

impl Sink for Box<dyn Sink> {
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        (**self).try_write(buf)
    }
    fn writable(&self) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>> {
        (**self).writable()
    }
}

/// Whole lines on their way to one peer (see the module comment).
pub(crate) struct Outbox {
    state: Mutex<State>,
    /// Wakes the outbox's task: it has bytes to carry on with, or the outbox closed.
    wake: Notify,
    /// Cancelled when the outbox closes: from then on, [`FLUSH_AFTER_CLOSE`] bounds
    /// the wait for a peer that does not read.
    closed: CancellationToken,
    /// Cancelled once the task has let go of the stream ([`Outbox::finished`]).
    finished: CancellationToken,
}

struct State {
    /// Whole lines queued, not yet being written.
    queued: Vec<u8>,
    /// What a writer took and the stream did not take at once: the task writes
    /// it, before anything queued since.
    stalled: Vec<u8>,
    /// Someone writes now (whoever queued, or the task): nobody else may.
    writing: bool,
    /// Listed already in the current [`deferred`] scope.
    listed: bool,
    closed: bool,
    /// The stream, until the outbox is closed and what it held is written or
    /// given up: then it is dropped, which closes the stream.
    sink: Option<Arc<dyn Sink>>,
    /// The buffer of the last write, for the next one.
    spare: Vec<u8>,
}

/// How one write to the stream went.
enum Wrote {
    All,
    /// The stream took this much and no more for now.
    Part(usize),
    Failed,
}

fn write_now(sink: &dyn Sink, bytes: &[u8]) -> Wrote {
    let mut done = 0;
    while done < bytes.len() {
        match sink.try_write(&bytes[done..]) {
            Ok(0) => return Wrote::Failed,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Wrote::Part(done),
            Err(_) => return Wrote::Failed,
        }
    }
    Wrote::All
}

impl Outbox {
    /// An outbox writing to `sink`, with the task that carries on with what the
    /// stream does not take at once. The task ends once the outbox is closed and
    /// what was queued is written (or [`FLUSH_AFTER_CLOSE`] has passed), or when
    /// a write fails; the sink is dropped then, which closes the stream. The task
    /// is `tracker`'s, so whoever waits for the tracker also waits for the last
    /// bytes to be written or given up on.
    pub(crate) fn spawn(sink: impl Sink, tracker: &TaskTracker) -> Arc<Outbox> {
        let outbox = Arc::new(Outbox {
            state: Mutex::new(State {
                queued: Vec::new(),
                stalled: Vec::new(),
                writing: false,
                listed: false,
                closed: false,
                sink: Some(Arc::new(sink)),
                spare: Vec::new(),
            }),
            wake: Notify::new(),
            closed: CancellationToken::new(),
            finished: CancellationToken::new(),
        });
        tracker.spawn(carry(outbox.clone()));
        outbox
    }

    /// Queues what `fill` appends to the queue, which must be whole lines, and
    /// writes it (at the end of the [`deferred`] scope, within one); false (and
    /// nothing queued) once the outbox is closed.
    pub(crate) fn send_with(self: &Arc<Self>, fill: impl FnOnce(&mut Vec<u8>)) -> bool {
        let mut state = lock(&self.state);
        if state.closed {
            return false;
        }
        fill(&mut state.queued);
        if state.queued.len() + state.stalled.len() > MAX_QUEUED {
            tracing::warn!(
                queued = state.queued.len() + state.stalled.len(),
                "a peer read nothing while its messages piled up; its stream is closed"
            );
            state.queued.clear();
            drop(state);
            self.close();
            return false;
        }
        if state.writing {
            // Whoever writes now takes it too.
            return true;
        }
        let listed = state.listed;
        state.listed = true;
        drop(state);
        if !DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(list) => {
                if !listed {
                    list.push(self.clone());
                }
                true
            }
            None => false,
        }) {
            self.flush();
        }
        true
    }

    /// Writes what is queued, now, as far as the stream takes it without
    /// waiting; the rest is left to the task. Nothing when another writer is
    /// at it (it takes what was queued too).
    fn flush(&self) {
        let mut state = lock(&self.state);
        state.listed = false;
        while !state.writing && !state.queued.is_empty() {
            let Some(sink) = state.sink.clone() else {
                state.queued.clear();
                return;
            };
            state.writing = true;
            let spare = std::mem::take(&mut state.spare);
            let mut batch = std::mem::replace(&mut state.queued, spare);
            drop(state);
            let wrote = write_now(&*sink, &batch);
            drop(sink);
            state = lock(&self.state);
            match wrote {
                Wrote::All => {
                    state.writing = false;
                    batch.clear();
                    if batch.capacity() <= MAX_SPARE && state.spare.capacity() < batch.capacity() {
                        state.spare = batch;
                    }
                }
                Wrote::Part(done) => {
                    // The task goes on from here, and holds the right to write.
                    batch.drain(..done);
                    state.stalled = batch;
                    drop(state);
                    self.wake.notify_one();
                    return;
                }
                Wrote::Failed => {
                    state.writing = false;
                    state.queued.clear();
                    drop(state);
                    self.close();
                    return;
                }
            }
        }
        let finished = state.closed && !state.writing;
        drop(state);
        if finished {
            self.wake.notify_one();
        }
    }

    /// Closes the outbox: what was queued is still written, nothing more is taken.
    pub(crate) fn close(&self) {
        lock(&self.state).closed = true;
        self.closed.cancel();
        self.wake.notify_one();
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    /// Resolves once the outbox is closed and its stream let go of: what was
    /// queued is written, or was given up after [`FLUSH_AFTER_CLOSE`].
    pub(crate) async fn finished(&self) {
        self.finished.cancelled().await;
    }

    /// The outbox as an `AsyncWrite`, for rmcp's transport. Dropping it, or
    /// shutting it down, closes the outbox: rmcp closing its session closes the
    /// stream, whoever else holds the outbox.
    pub(crate) fn writer(self: &Arc<Outbox>) -> OutboxWriter {
        OutboxWriter {
            outbox: self.clone(),
            partial: Vec::new(),
            closes: Arc::new(AtomicBool::new(true)),
        }
    }

    /// A writer like [`Outbox::writer`] that closes the outbox only once the flag
    /// returned with it is set: until then, an attempt at a session that fails
    /// leaves the stream open for the next one.
    pub(crate) fn writer_held(self: &Arc<Outbox>) -> (OutboxWriter, Arc<AtomicBool>) {
        let closes = Arc::new(AtomicBool::new(false));
        let writer = OutboxWriter {
            outbox: self.clone(),
            partial: Vec::new(),
            closes: closes.clone(),
        };
        (writer, closes)
    }
}

/// What the outbox's task does next.
enum Next {
    /// Write what stalled: the right to write is the task's.
    Carry(Vec<u8>, Arc<dyn Sink>),
    /// Write what was queued while nobody was writing (after a close).
    Flush,
    Wait,
    Finish,
}

/// The task of an outbox: writes what the stream did not take at once, waiting
/// until the peer reads, and closes the stream once the outbox is closed and
/// empty.
async fn carry(outbox: Arc<Outbox>) {
    // One bound for the whole flush after the close, however the peer trickles.
    let give_up = async {
        outbox.closed.cancelled().await;
        tokio::time::sleep(FLUSH_AFTER_CLOSE).await;
    };
    tokio::pin!(give_up);
    loop {
        let next = {
            let mut state = lock(&outbox.state);
            if state.writing && !state.stalled.is_empty() {
                match state.sink.clone() {
                    Some(sink) => Next::Carry(std::mem::take(&mut state.stalled), sink),
                    None => Next::Finish,
                }
            } else if state.writing {
                Next::Wait
            } else if !state.queued.is_empty() {
                Next::Flush
            } else if state.closed {
                Next::Finish
            } else {
                Next::Wait
            }
        };
        match next {
            Next::Wait => outbox.wake.notified().await,
            Next::Flush => outbox.flush(),
            Next::Finish => break,
            Next::Carry(mut bytes, sink) => {
                let mut failed = false;
                while !bytes.is_empty() && !failed {
                    let ready = tokio::select! {
                        ready = sink.writable() => ready.is_ok(),
                        () = &mut give_up => false,
                    };
                    failed = !ready;
                    if ready {
                        match write_now(&*sink, &bytes) {
                            Wrote::All => bytes.clear(),
                            Wrote::Part(done) => drop(bytes.drain(..done)),
                            Wrote::Failed => failed = true,
                        }
                    }
                }
                drop(sink);
                lock(&outbox.state).writing = false;
                if failed {
                    outbox.close();
                    break;
                }
                outbox.flush();
            }
        }
    }
    // Closed and written, or given up: the stream closes with its last handle.
    let mut state = lock(&outbox.state);
    state.closed = true;
    state.queued = Vec::new();
    state.stalled = Vec::new();
    state.spare = Vec::new();
    let sink = state.sink.take();
    drop(state);
    outbox.closed.cancel();
    drop(sink);
    outbox.finished.cancel();
}

thread_local! {
    /// The outboxes to write at the end of the current [`deferred`] scope.
    static DEFERRED: RefCell<Option<Vec<Arc<Outbox>>>> = const { RefCell::new(None) };
}

/// Runs `f`, and writes what it queued in any outbox once it returns, once per
/// outbox: the lines that one read brings go out together.
pub(crate) fn deferred<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the outer scope and writes, also when `f` panics.
    struct Scope(Option<Vec<Arc<Outbox>>>);
    impl Drop for Scope {
        fn drop(&mut self) {
            let outer = self.0.take();
            let listed = DEFERRED.with(|d| std::mem::replace(&mut *d.borrow_mut(), outer));
            for outbox in listed.unwrap_or_default() {
                outbox.flush();
            }
        }
    }
    let _scope = Scope(DEFERRED.with(|d| d.borrow_mut().replace(Vec::new())));
    f()
}

/// rmcp's side of an [`Outbox`]. Only whole lines are queued: bytes after the
/// last newline wait for the rest of their line, so that a line of rmcp's and one
/// of the gateway's never interleave, however rmcp splits its writes.
pub(crate) struct OutboxWriter {
    outbox: Arc<Outbox>,
    partial: Vec<u8>,
    /// Whether shutting it down, or dropping it, closes the outbox.
    closes: Arc<AtomicBool>,
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
        if self.closes.load(Ordering::Acquire) {
            self.outbox.close();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for OutboxWriter {
    fn drop(&mut self) {
        if self.closes.load(Ordering::Acquire) {
            self.outbox.close();
        }
    }
}

/// What looks at each whole line of a peer's stream before rmcp does.
pub(crate) trait Hook: Send {
    /// True when the hook took `line` (its newline removed): rmcp never sees it.
    /// Called in the middle of a read, so it must not wait for anything.
    fn take(&mut self, line: &[u8]) -> bool;

    /// The stream ended (or failed): no line comes any more.
    fn ended(&mut self) {}
}

/// A peer's stream with every whole line offered to a [`Hook`] first (see the
/// module comment). A line longer than `max` is not offered: it is passed on as
/// it comes, and rmcp's own limit deals with it.
pub(crate) struct Intercepted<R> {
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
    pub(crate) fn new(inner: R, max: usize, hook: Box<dyn Hook>) -> Intercepted<R> {
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
            deferred(|| this.sort(&chunk[..n]));
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    async fn a_held_writer_closes_the_outbox_only_once_told_to() {
        let (write, mut read) = tokio::net::UnixStream::pair().unwrap();
        let outbox = Outbox::spawn(write, &TaskTracker::new());
        // A first attempt at a session lets go of its writer: the stream stays.
        let (mut first, _) = outbox.writer_held();
        first.write_all(b"{\"attempt\":1}\n").await.unwrap();
        drop(first);
        assert!(!outbox.is_closed(), "a held writer dropped leaves the outbox open");
        // The second is told to close it when it goes.
        let (mut second, closes) = outbox.writer_held();
        second.write_all(b"{\"attempt\":2}\n").await.unwrap();
        closes.store(true, Ordering::Release);
        drop(second);
        assert!(outbox.is_closed());
        let mut all = Vec::new();
        read.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"{\"attempt\":1}\n{\"attempt\":2}\n".to_vec());
    }

    #[tokio::test]
    async fn the_outbox_writes_whole_lines_in_order_and_closing_it_ends_the_stream() {
        let (write, mut read) = tokio::net::UnixStream::pair().unwrap();
        let outbox = Outbox::spawn(write, &TaskTracker::new());
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

    #[tokio::test]
    async fn what_the_stream_does_not_take_at_once_is_written_once_the_peer_reads() {
        let (write, mut read) = tokio::net::UnixStream::pair().unwrap();
        let outbox = Outbox::spawn(write, &TaskTracker::new());
        // Far more than a socket's buffer: most of it waits for the reader, and
        // lines queued meanwhile come after it, whole.
        let line = format!("{{\"x\":\"{}\"}}\n", "y".repeat(1000));
        for _ in 0..2000 {
            assert!(outbox.send_with(|q| q.extend_from_slice(line.as_bytes())));
        }
        assert!(outbox.send_with(|q| q.extend_from_slice(b"{\"last\":1}\n")));
        outbox.close();
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut all))
            .await
            .expect("the outbox closes the stream once it is written")
            .unwrap();
        assert_eq!(all.len(), 2000 * line.len() + b"{\"last\":1}\n".len());
        assert!(all.ends_with(b"}\n{\"last\":1}\n"));
        assert!(all.split(|b| *b == b'\n').filter(|l| !l.is_empty()).all(|l| l.len() == line.len() - 1 || l == b"{\"last\":1}"));
    }

    #[tokio::test]
    async fn a_peer_that_never_reads_is_cut_off_after_the_close() {
        tokio::time::pause();
        let (write, read) = tokio::net::UnixStream::pair().unwrap();
        let outbox = Outbox::spawn(write, &TaskTracker::new());
        let line = format!("{{\"x\":\"{}\"}}\n", "y".repeat(4000));
        for _ in 0..200 {
            outbox.send_with(|q| q.extend_from_slice(line.as_bytes()));
        }
        outbox.close();
        // The task gives up FLUSH_AFTER_CLOSE later and drops the stream: the
        // peer sees its end once it reads what was written.
        tokio::time::sleep(FLUSH_AFTER_CLOSE + Duration::from_secs(1)).await;
        tokio::time::resume();
        let mut read = read;
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut all))
            .await
            .expect("the stream was closed")
            .unwrap();
        assert!(all.len() < 200 * line.len(), "what was never taken is dropped");
    }

    #[tokio::test]
    async fn lines_queued_within_one_deferred_scope_go_out_in_one_write() {
        /// Counts the writes it takes.
        struct Counting(std::os::unix::net::UnixStream, Arc<Mutex<Vec<usize>>>);
        impl Sink for Counting {
            fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
                use std::io::Write;
                lock(&self.1).push(buf.len());
                (&self.0).write(buf)
            }
            fn writable(&self) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>> {
                Box::pin(async { Ok(()) })
            }
        }
        let (write, read) = std::os::unix::net::UnixStream::pair().unwrap();
        let writes = Arc::new(Mutex::new(Vec::new()));
        let outbox = Outbox::spawn(Counting(write, writes.clone()), &TaskTracker::new());
        deferred(|| {
            for i in 0..5 {
                outbox.send_with(|q| q.extend_from_slice(format!("{{\"n\":{i}}}\n").as_bytes()));
            }
            assert!(lock(&writes).is_empty(), "nothing is written within the scope");
        });
        outbox.send_with(|q| q.extend_from_slice(b"{\"n\":5}\n"));
        assert_eq!(*lock(&writes), vec![5 * 8, 8], "one write for the scope, one outside it");
        drop(read);
    }
}
