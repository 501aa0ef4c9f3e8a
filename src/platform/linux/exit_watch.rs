//! Noticing at once that a server's main process exited, without reaping it: a
//! pidfd becomes readable when its process ends, and the zombie keeps its pid (and
//! group id) until teardown reaps it. Where pidfds are missing (Linux before 5.3),
//! the exit is polled with `waitid(WNOWAIT)` instead.

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;

pub struct ExitWatch {
    pid: i32,
    fd: Option<AsyncFd<OwnedFd>>,
}

impl ExitWatch {
    pub fn new(pid: i32) -> ExitWatch {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; the
        // fd is owned by the OwnedFd from here on.
        let raw = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
        let fd = (raw >= 0)
            .then(|| unsafe { OwnedFd::from_raw_fd(raw as i32) })
            // SAFETY: the OwnedFd is moved into the AsyncFd, which keeps it open and
            // unchanged for its whole life.
            .and_then(|fd| {
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
            });
        ExitWatch { pid, fd }
    }

    /// Resolves when the process has exited (it is then a zombie until reaped).
    pub async fn exited(&self) {
        match &self.fd {
            Some(fd) => {
                // Readable means exited; the readiness is never cleared, so a later
                // call resolves at once as well.
                let _ = fd.readable().await;
            }
            None => loop {
                if has_exited(self.pid) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            },
        }
    }
}

fn has_exited(pid: i32) -> bool {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    !matches!(
        waitid(Id::Pid(Pid::from_raw(pid)), flags),
        Ok(WaitStatus::StillAlive)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notices_an_exit_at_once_without_reaping() {
        let mut child = tokio::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let pid = child.id().unwrap() as i32;
        let watch = ExitWatch::new(pid);
        assert!(watch.fd.is_some(), "pidfd_open is available here");
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(5), watch.exited())
            .await
            .expect("exit noticed");
        assert!(started.elapsed() < Duration::from_secs(1));
        // Not reaped: it is still there as a zombie for teardown to collect.
        let stat = crate::platform::stat(pid).expect("zombie still listed");
        assert!(!stat.is_alive());
        assert!(child.wait().await.unwrap().success());
    }
}
