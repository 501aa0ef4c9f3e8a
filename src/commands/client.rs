//! The CLI side of the control socket: find the supervisor of a fleet (starting it,
//! detached, when asked to), send one request, relay its events and return its
//! report. Waiting for a supervisor to come up is bounded, and the request's wait
//! for its authority has a deadline on the supervisor's side; an interrupted caller
//! leaves the supervisor to finish what was asked (L6).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::de::{DeserializeOwned, IgnoredAny};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::errors::Detail;
use crate::host::Signals;
use crate::output::report::EventReport;
use crate::protocol::{self, Line, MAX_LINE_BYTES, Op, PROTOCOL_VERSION, Request, Response};
use crate::state::{StateDir, lock_before, open_append, open_rw};

/// How long the CLI waits for a supervisor to come up and accept the connection.
const CONNECT_WAIT: Duration = Duration::from_secs(30);
/// How long the CLI waits at most for a supervisor it started, which may first have
/// to tear down what a crashed predecessor left.
const RECOVERY_WAIT: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// No supervisor could be reached (exit 8).
    #[error("the supervisor is unreachable")]
    Unreachable(#[source] Detail),
    /// The supervisor refused the request as malformed or naming unknown servers.
    #[error("{0}")]
    Refused(String),
    /// The caller was interrupted; the supervisor carries on (exit 130).
    #[error("interrupted")]
    Interrupted,
    /// The supervisor answered with a report this CLI cannot read (exit 1).
    #[error("{0}")]
    Unreadable(String),
    /// The supervisor went away without reading the request (the connection was
    /// reset with the request unread: a supervisor exiting idle as it arrived).
    /// The request was not carried out; [`ask`] sends it again (exit 8 if not).
    /// The error is printed in the message, so it is not also its source.
    #[error("the supervisor is unreachable: it went away before it read the request ({0})")]
    Unread(std::io::Error),
    /// The supervisor refused the request because it speaks another version of
    /// the control protocol: it is of another mcpfleet build, started before
    /// this one was installed (exit 8; `down` of the whole fleet stops it by
    /// signal, docs/design.md §9).
    #[error("{}", describe_other_build(*pid, speaks))]
    OtherBuild {
        /// The supervisor's pid, as the socket's peer (the process that listens).
        pid: Option<i32>,
        /// The protocol versions it speaks, when it said.
        speaks: Vec<u32>,
        /// What it answered.
        message: String,
    },
}

/// The supervisor (pid N) of another build, and the protocol versions of both.
pub(crate) fn describe_other_build(pid: Option<i32>, speaks: &[u32]) -> String {
    let who = match pid {
        Some(pid) => format!("the supervisor of this fleet (pid {pid})"),
        None => "the supervisor of this fleet".to_owned(),
    };
    let its = match speaks {
        [] => "another version of the control protocol".to_owned(),
        [one] => format!("control protocol {one}"),
        many => {
            let all: Vec<String> = many.iter().map(u32::to_string).collect();
            format!("control protocol {}", all.join(" or "))
        }
    };
    format!(
        "{who} is of another mcpfleet build: it speaks {its}, this mcpfleet speaks {PROTOCOL_VERSION}"
    )
}

/// The error of a request the supervisor refused with the error line `line`
/// (its message `message`): [`ClientError::OtherBuild`] when it refused it for
/// speaking another protocol, else [`ClientError::Refused`].
pub(crate) fn refused(line: &str, message: String, pid: Option<i32>) -> ClientError {
    let refusal = protocol::Refusal::read(line).unwrap_or_else(|| message.clone().into());
    match refusal.other_protocol() {
        Some(other) => ClientError::OtherBuild {
            pid,
            speaks: other.speaks,
            message,
        },
        None => ClientError::Refused(message),
    }
}

/// The pid of the process at the other end of a connection to the control
/// socket: the supervisor that listens on it.
pub(crate) fn peer_pid(stream: &UnixStream) -> Option<i32> {
    stream.peer_cred().ok().and_then(|c| c.pid())
}

/// How many times [`ask`] sends a request that a supervisor left unread.
const UNREAD_RETRIES: usize = 3;

/// Connects (starting a supervisor when `start`) and sends `op`, as
/// [`connect`] and [`request`]; a request that the supervisor left unread is sent
/// again on a new connection, to a new supervisor if need be.
pub(crate) async fn ask<R: DeserializeOwned>(
    dir: &StateDir,
    fleet_file: &Path,
    start: bool,
    op: Op,
    mut on_event: impl FnMut(EventReport),
) -> Result<R, ClientError> {
    let mut tries = 0;
    loop {
        let stream = connect(dir, fleet_file, start).await?;
        match request(stream, op.clone(), &mut on_event).await {
            Err(ClientError::Unread(why)) if tries < UNREAD_RETRIES => {
                tracing::info!("the supervisor left the request unread ({why}); sending it again");
                tries += 1;
            }
            other => return other,
        }
    }
}

/// Connects to the supervisor of `dir`, starting one for `fleet_file` when `start`.
pub(crate) async fn connect(
    dir: &StateDir,
    fleet_file: &Path,
    start: bool,
) -> Result<UnixStream, ClientError> {
    let socket = dir.socket();
    let deadline = Instant::now() + CONNECT_WAIT;
    let hard_deadline = Instant::now() + RECOVERY_WAIT;
    let mut spawned: Option<std::process::Child> = None;
    // Held while this client starts a supervisor and waits for it, so that of many
    // clients arriving together one starts it and the others find it serving.
    let mut spawn_lock: Option<std::fs::File> = None;
    let mut poll = Duration::from_millis(1);
    loop {
        let attempt = match dir.socket_path() {
            Ok(short) => UnixStream::connect(short.as_path()).await,
            Err(e) => Err(e),
        };
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) if !start => {
                return Err(ClientError::Unreachable(Detail::because(
                    socket.display().to_string(),
                    e,
                )));
            }
            Err(e) => {
                // A supervisor we started that failed will not come back by itself:
                // say why instead of starting more. One that exited with success found
                // another holding the lock (perhaps one that is shutting down): start
                // another try.
                match spawned.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    Some(status) if !status.success() => {
                        return Err(ClientError::Unreachable(Detail::words(format!(
                            "the supervisor failed to start ({status}): {}",
                            last_line(&dir.supervisor_log())
                        ))));
                    }
                    Some(_) => spawned = None,
                    None => {}
                }
                if spawn_lock.is_none() {
                    spawn_lock = Some(take_spawn_lock(dir, deadline).await?);
                    // Another client may have started one while this one waited.
                    continue;
                }
                if spawned.is_none() {
                    spawned = Some(spawn_supervisor(dir, fleet_file).map_err(|e| {
                        ClientError::Unreachable(Detail::because("cannot start the supervisor", e))
                    })?);
                }
                // A supervisor we started and that still runs is recovering what its
                // predecessor left (bounded by cleanup timeouts): keep waiting for it.
                let ours_running = spawned.is_some() && Instant::now() < hard_deadline;
                if Instant::now() > deadline && !ours_running {
                    return Err(ClientError::Unreachable(Detail::words(format!(
                        "no supervisor answered on {} within {}s ({e}); see {}",
                        socket.display(),
                        CONNECT_WAIT.as_secs(),
                        dir.supervisor_log().display()
                    ))));
                }
                // A supervisor starts in a few milliseconds: look often at first.
                tokio::time::sleep(poll).await;
                poll = (poll * 2).min(Duration::from_millis(5));
            }
        }
    }
}

/// Takes `spawn.lock` in the state directory, waiting until `deadline`.
async fn take_spawn_lock(dir: &StateDir, deadline: Instant) -> Result<std::fs::File, ClientError> {
    let unreachable = |e: std::io::Error| {
        ClientError::Unreachable(Detail::because(
            format!("cannot lock {}", dir.root().display()),
            e,
        ))
    };
    let file = open_rw(&dir.root().join("spawn.lock")).map_err(unreachable)?;
    match lock_before(&file, deadline, async || false).await {
        Ok(true) => Ok(file),
        Ok(false) => Err(ClientError::Unreachable(Detail::words(
            "another client has been starting the supervisor for too long",
            )
        )),
        Err(e) => Err(unreachable(e)),
    }
}

/// The last non-empty line of a log file, for error messages.
fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("see {}", path.display()))
}

/// Starts `mcpfleet supervise` detached: a new session, no terminal, stdin and
/// stdout closed, stderr appended to `supervisor.log` (which the supervisor
/// rotates, at once if it is past its size already).
fn spawn_supervisor(dir: &StateDir, fleet_file: &Path) -> std::io::Result<std::process::Child> {
    let exe = std::env::current_exe()?;
    let log = open_append(&dir.supervisor_log())?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("-f")
        .arg(fleet_file)
        .arg("--state-dir")
        .arg(dir.root())
        .arg("supervise")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    crate::platform::detach_into_new_session(&mut cmd);
    cmd.spawn()
}

/// Sends `op` and waits for its report `R` (`Report`, or `CallReport` for `tools`
/// and `call`), handing each event to `on_event`. A first Ctrl-C (or SIGTERM)
/// stops waiting: the supervisor goes on with the request.
pub(crate) async fn request<R: DeserializeOwned>(
    stream: UnixStream,
    op: Op,
    mut on_event: impl FnMut(EventReport),
) -> Result<R, ClientError> {
    let pid = peer_pid(&stream);
    let (read, mut write) = stream.into_split();
    let line = protocol::encode(&Request {
        v: PROTOCOL_VERSION,
        op,
    });
    // A reset before any answer means the request was never read: the
    // supervisor closed with it still in its socket's queue.
    let unread = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        )
    };
    write.write_all(line.as_bytes()).await.map_err(|e| {
        if unread(&e) {
            ClientError::Unread(e)
        } else {
            ClientError::Unreachable(Detail::because("cannot send the request", e))
        }
    })?;
    let mut reader = BufReader::new(read);
    let mut answered = false;
    let answer = async {
        loop {
            let line = protocol::read_line(&mut reader, MAX_LINE_BYTES)
                .await
                .map_err(|e| {
                    if !answered && unread(&e) {
                        ClientError::Unread(e)
                    } else {
                        ClientError::Unreachable(Detail::because("lost the supervisor", e))
                    }
                })?;
            answered = true;
            let text = match line {
                Line::Text(t) => t,
                Line::Closed => {
                    return Err(ClientError::Unreachable(Detail::words(
                        "the supervisor closed the connection without an answer",
                        )
                    ));
                }
                Line::TooLong | Line::NotUtf8 => {
                    return Err(ClientError::Unreachable(Detail::words(
                        "the supervisor sent an unreadable answer",
                        )
                    ));
                }
            };
            match serde_json::from_str::<Response<EventReport, R>>(&text) {
                Ok(Response::Event { event }) => on_event(event),
                Ok(Response::Reply { report }) => return Ok(report),
                Ok(Response::Error { message }) => return Err(refused(&text, message, pid)),
                Err(e) => match serde_json::from_str::<Response<IgnoredAny, IgnoredAny>>(&text) {
                    // An event this CLI cannot read costs that event, not the request.
                    Ok(Response::Event { .. }) => tracing::warn!(error = %e, "unreadable event"),
                    Ok(Response::Reply { .. }) => {
                        return Err(ClientError::Unreadable(format!("unreadable report: {e}")));
                    }
                    _ => return Err(ClientError::Unreachable(Detail::because("unreadable answer", e))),
                },
            }
        }
    };
    let Ok(mut signals) = Signals::new() else {
        return answer.await;
    };
    tokio::select! {
        r = answer => r,
        _ = signals.next() => Err(ClientError::Interrupted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that closes with our connection still in its queue (as a
    /// supervisor exiting idle does) leaves the request unread, and says so.
    #[tokio::test]
    async fn a_request_left_in_a_closing_listeners_queue_is_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let stream = UnixStream::connect(&path).await.unwrap();
        let asked = tokio::spawn(request::<IgnoredAny>(stream, Op::Ping, |_| {}));
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(listener);
        match asked.await.unwrap() {
            Err(ClientError::Unread(_)) => {}
            other => panic!("expected an unread request, got {other:?}"),
        }
    }

    /// A supervisor of another build refuses the request for its protocol: the
    /// client says so, with the pid of the process that listens and the
    /// versions it speaks; any other refusal stays a refusal.
    #[tokio::test]
    async fn a_supervisor_of_another_protocol_is_told_apart_from_other_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let answers = [
            r#"{"type":"error","message":"protocol version 2 is not supported (this supervisor speaks 1)"}"#,
            r#"{"type":"error","message":"protocol version 3 is not supported (this supervisor speaks 1 and 2)","speaks":[1,2]}"#,
            r#"{"type":"error","message":"invalid request: unknown field `version`, expected one of `path`, `text`, `env`"}"#,
            r#"{"type":"error","message":"usage: no server named `x` in this fleet"}"#,
        ];
        let mut got = Vec::new();
        for answer in answers {
            let stream = UnixStream::connect(&path).await.unwrap();
            let asked = tokio::spawn(request::<IgnoredAny>(stream, Op::Ping, |_| {}));
            let (mut accepted, _) = listener.accept().await.unwrap();
            let mut line = String::new();
            let mut reader = BufReader::new(&mut accepted);
            tokio::io::AsyncBufReadExt::read_line(&mut reader, &mut line)
                .await
                .unwrap();
            assert!(line.starts_with(r#"{"v":2,"#), "{line}");
            accepted
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
            got.push(asked.await.unwrap());
        }
        let me = Some(std::process::id() as i32);
        let speaks: Vec<Option<Vec<u32>>> = got
            .iter()
            .map(|r| match r {
                Err(ClientError::OtherBuild { pid, speaks, .. }) => {
                    assert_eq!(*pid, me);
                    Some(speaks.clone())
                }
                Err(ClientError::Refused(_)) => None,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            speaks,
            vec![Some(vec![1]), Some(vec![1, 2]), Some(vec![]), None]
        );
        let shown = got[0].as_ref().unwrap_err().to_string();
        assert_eq!(
            shown,
            format!(
                "the supervisor of this fleet (pid {}) is of another mcpfleet build: it speaks control protocol 1, this mcpfleet speaks 2",
                std::process::id()
            )
        );
    }

    /// A supervisor that read the request and then went away did not leave it
    /// unread: that is not retried.
    #[tokio::test]
    async fn a_request_read_and_then_dropped_is_not_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let stream = UnixStream::connect(&path).await.unwrap();
        let asked = tokio::spawn(request::<IgnoredAny>(stream, Op::Ping, |_| {}));
        let (mut accepted, _) = listener.accept().await.unwrap();
        let mut reader = BufReader::new(&mut accepted);
        let mut line = String::new();
        tokio::io::AsyncBufReadExt::read_line(&mut reader, &mut line)
            .await
            .unwrap();
        drop(accepted);
        match asked.await.unwrap() {
            Err(ClientError::Unreachable(_)) => {}
            other => panic!("expected an unreachable supervisor, got {other:?}"),
        }
    }
}
