//! The supervisor's side of `connect`'s handover (docs/design.md §14, "Doors"):
//! after the report of its `gateway` request, a `connect` whose stdin and stdout
//! are pipes or sockets sends them over the control connection, and the session
//! is spoken on them directly, with no process copying bytes in between. The
//! connection stays open as long as the session: `connect` closing it (it was
//! killed) ends the session, and the supervisor closing it lets `connect` exit.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWriteExt, BufReader, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf, pipe};

use crate::platform::{self, StreamKind};
use crate::process::session::wire::Sink;
use crate::protocol::{HANDOVER, SESSION_ENDED};

/// How long the descriptors may take to come after the report.
const WITHIN: Duration = Duration::from_secs(10);

/// What a client session reads: the control connection, or the client's own
/// stdin handed over.
pub(super) struct Input(pub Box<dyn AsyncRead + Send + Unpin>);

impl AsyncRead for Input {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

/// The client's stream, handed over: what the session reads and where it writes,
/// and the control connection, which says when `connect` is gone.
pub(super) struct HandedOver {
    pub input: Input,
    pub output: Box<dyn Sink>,
    pub control: UnixStream,
}

/// Receives `connect`'s stdin and stdout on its control connection. When they
/// cannot be taken, `connect` is told why, in one line, before the connection
/// closes.
pub(super) async fn receive(
    reader: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
) -> io::Result<HandedOver> {
    if !reader.buffer().is_empty() {
        return Err(invalid("bytes came before the descriptors"));
    }
    let mut control = reader
        .into_inner()
        .reunite(write)
        .map_err(|_| invalid("the connection's halves do not match"))?;
    match take(&control).await {
        Ok((input, output)) => Ok(HandedOver {
            input: Input(input),
            output,
            control,
        }),
        Err(e) => {
            let message = format!("the supervisor could not take stdin and stdout: {e}");
            let line = crate::protocol::encode(&crate::protocol::Response::<(), ()>::Error {
                message,
            });
            let _ = tokio::time::timeout(WITHIN, control.write_all(line.as_bytes())).await;
            Err(e)
        }
    }
}

/// The two descriptors, as what the session reads and where it writes.
async fn take(control: &UnixStream) -> io::Result<(Box<dyn AsyncRead + Send + Unpin>, Box<dyn Sink>)> {
    let received = tokio::time::timeout(
        WITHIN,
        control.async_io(Interest::READABLE, || platform::recv_fds(control.as_fd(), 2)),
    )
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no descriptors within 10s"))??;
    let Some((byte, fds)) = received else {
        return Err(io::ErrorKind::UnexpectedEof.into());
    };
    let Ok([input, output]) = <[OwnedFd; 2]>::try_from(fds) else {
        return Err(invalid("two descriptors were expected, stdin and stdout"));
    };
    if byte != HANDOVER {
        return Err(invalid("not a handover"));
    }
    Ok((reading(input)?, writing(output)?))
}

/// The client's stdin: a pipe or a socket, read without blocking.
fn reading(fd: OwnedFd) -> io::Result<Box<dyn AsyncRead + Send + Unpin>> {
    match platform::stream_kind(fd.as_fd())? {
        StreamKind::Pipe => Ok(Box::new(pipe::Receiver::from_owned_fd(fd)?)),
        StreamKind::Socket => Ok(Box::new(socket(fd)?)),
        StreamKind::Other => Err(neither("stdin")),
    }
}

/// The client's stdout: a pipe or a socket, written without blocking.
fn writing(fd: OwnedFd) -> io::Result<Box<dyn Sink>> {
    match platform::stream_kind(fd.as_fd())? {
        StreamKind::Pipe => Ok(Box::new(pipe::Sender::from_owned_fd(fd)?)),
        StreamKind::Socket => Ok(Box::new(socket(fd)?)),
        StreamKind::Other => Err(neither("stdout")),
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

fn neither(which: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("the client's {which} is neither a pipe nor a socket"),
    )
}

/// Tells `connect` that the session ended here, as it should ([`SESSION_ENDED`]),
/// before the connection closes: a connection closed without it means the
/// supervisor was lost. One byte always fits in the socket's buffer; a
/// `connect` that is gone already does not need it.
pub(super) fn ended(control: &UnixStream) {
    let _ = control.try_write(&[SESSION_ENDED]);
}

/// Resolves when `connect` has closed its control connection (or it failed).
pub(super) async fn gone(control: &UnixStream) {
    let mut buf = [0u8; 64];
    loop {
        if control.readable().await.is_err() {
            return;
        }
        match control.try_read(&mut buf) {
            Ok(0) => return,
            // Nothing more is expected of `connect`: what comes is ignored.
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}
