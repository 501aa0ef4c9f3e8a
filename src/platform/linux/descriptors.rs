//! Descriptors handed from one process to another over a Unix socket
//! (`SCM_RIGHTS`), and what kind of stream a descriptor is: how `connect` gives
//! the supervisor its own stdin and stdout (docs/design.md §14, "Doors").

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::sys::stat::{SFlag, fstat};

use crate::platform::portable::StreamKind;

/// What `fd` is: a pipe (or FIFO), a socket, or anything else (a terminal, a
/// file, `/dev/null`).
pub fn stream_kind(fd: BorrowedFd<'_>) -> io::Result<StreamKind> {
    let stat = fstat(fd).map_err(io::Error::from)?;
    let format = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    Ok(if format == SFlag::S_IFIFO {
        StreamKind::Pipe
    } else if format == SFlag::S_IFSOCK {
        StreamKind::Socket
    } else {
        StreamKind::Other
    })
}

/// Whether `fd` is closed when the process execs another image.
pub fn set_close_on_exec(fd: BorrowedFd<'_>, close: bool) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let flags = match close {
        true => FdFlag::FD_CLOEXEC,
        false => FdFlag::empty(),
    };
    fcntl(fd, FcntlArg::F_SETFD(flags))
        .map(drop)
        .map_err(io::Error::from)
}

/// The Unix socket that descriptor `fd`, inherited across exec, is; `None` when
/// no descriptor of that number is open or it is not a socket.
pub fn inherited_socket(fd: i32) -> Option<std::os::unix::net::UnixStream> {
    // SAFETY: F_GETFD reads the descriptor's flags and nothing else; it fails
    // with EBADF when no descriptor `fd` is open.
    if fd < 0 || unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `fd` is open (checked above), and only borrowed for the check below.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    if stream_kind(borrowed).ok()? != StreamKind::Socket {
        return None;
    }
    // SAFETY: `fd` is open (checked above) and owned by nothing else in this
    // process: it was passed across exec for this process to own.
    Some(unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) })
}

/// Sends `byte` over the connected Unix socket `socket`, with `fds` attached: the
/// peer receives its own descriptors of the same open files.
pub fn send_fds(socket: BorrowedFd<'_>, byte: u8, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let raw: Vec<i32> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let data = [byte];
    let iov = [io::IoSlice::new(&data)];
    let rights = [ControlMessage::ScmRights(&raw)];
    loop {
        match sendmsg::<()>(socket.as_raw_fd(), &iov, &rights, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(io::ErrorKind::WriteZero.into()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Receives one byte from the Unix socket `socket` and the descriptors that came
/// with it, at most `max` (more are closed, and are an error), close-on-exec.
/// `Ok(None)` at the end of the stream. Fails with `WouldBlock` on a non-blocking
/// socket with nothing to read.
pub fn recv_fds(socket: BorrowedFd<'_>, max: usize) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    let mut data = [0u8; 1];
    let mut space = nix::cmsg_space!([i32; 8]);
    let mut iov = [io::IoSliceMut::new(&mut data)];
    let (read, fds, truncated) = loop {
        match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let truncated = msg.flags.contains(MsgFlags::MSG_CTRUNC);
                let mut fds = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for cmsg in cmsgs {
                        if let ControlMessageOwned::ScmRights(raw) = cmsg {
                            // SAFETY: the kernel just installed these descriptors in
                            // this process for us; nothing else owns them.
                            fds.extend(raw.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
                        }
                    }
                }
                break (msg.bytes, fds, truncated);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if read == 0 && fds.is_empty() {
        return Ok(None);
    }
    if truncated || fds.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("more descriptors came than the {max} expected"),
        ));
    }
    Ok(Some((data[0], fds)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_pipe_handed_over_is_the_same_pipe_and_kinds_are_told_apart() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut reader, writer) = std::io::pipe().unwrap();
        assert_eq!(stream_kind(reader.as_fd()).unwrap(), StreamKind::Pipe);
        assert_eq!(stream_kind(a.as_fd()).unwrap(), StreamKind::Socket);
        let file = tempfile::tempfile().unwrap();
        assert_eq!(stream_kind(file.as_fd()).unwrap(), StreamKind::Other);

        send_fds(a.as_fd(), 7, &[writer.as_fd()]).unwrap();
        drop(writer);
        let (byte, mut fds) = recv_fds(b.as_fd(), 2).unwrap().unwrap();
        assert_eq!((byte, fds.len()), (7, 1));
        let mut received = std::fs::File::from(fds.pop().unwrap());
        received.write_all(b"through the handed descriptor\n").unwrap();
        drop(received);
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "through the handed descriptor\n");

        drop(a);
        assert!(recv_fds(b.as_fd(), 2).unwrap().is_none(), "the end of the stream");
    }

    #[test]
    fn more_descriptors_than_expected_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = std::io::pipe().unwrap();
        send_fds(a.as_fd(), 1, &[r.as_fd(), w.as_fd()]).unwrap();
        let e = recv_fds(b.as_fd(), 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
