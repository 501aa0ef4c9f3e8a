//! `mcpfleet connect`: the gateway's stdio door (docs/design.md §14). An MCP client
//! launches it as its server command. It asks the supervisor (starting one if none
//! runs) for a gateway session over the control socket. When its stdin and stdout
//! are pipes or sockets (as every MCP client gives them), it hands them to the
//! supervisor over that socket and waits: the supervisor speaks with the client
//! directly, and closes the socket when the session ends. Otherwise (a terminal, a
//! file) it copies bytes: its stdin to the supervisor, the supervisor to its
//! stdout. All aggregation and routing live in the supervisor (G1); stdout
//! carries nothing but MCP.

use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

use tokio::io::{AsyncWriteExt, BufReader};

use super::client::{self, ClientError};
use super::request::no_report;
use super::target::Target;
use super::{CliError, Global};
use crate::cli::ConnectArgs;
use crate::errors::Detail;
use crate::output::exit::Code;
use crate::output::report::Format;
use crate::protocol::{self, Deadlines, Line, MAX_LINE_BYTES, Op, PROTOCOL_VERSION, Request};

/// The start's report, as far as the bridge reads it.
#[derive(serde::Deserialize)]
struct Started {
    exit_code: i32,
    #[serde(default)]
    servers: Vec<StartedServer>,
}

#[derive(serde::Deserialize)]
struct StartedServer {
    name: String,
    state: String,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

type Response = protocol::Response<serde_json::Value, Started>;

pub async fn connect(t: Target, args: &ConnectArgs, g: &Global) -> Result<Code, CliError> {
    // Stdout is the client's MCP channel: whatever the output format, an error
    // is said on stderr only.
    let text = Global {
        output: Format::Text,
        quiet: g.quiet,
        verbose: g.verbose,
    };
    match bridge(t, args).await {
        Ok(code) => Ok(code),
        Err(e) => no_report(e, "connect", "mcpfleet connect: interrupted", &text),
    }
}

async fn bridge(t: Target, args: &ConnectArgs) -> Result<Code, ClientError> {
    let handover = can_hand_over();
    let stream = client::connect(&t.dir, &t.fleet.file, true).await?;
    let pid = client::peer_pid(&stream);
    let (read, mut write) = stream.into_split();
    let request = protocol::encode(&Request {
        v: PROTOCOL_VERSION,
        op: Op::Gateway {
            servers: args.servers.clone(),
            deadlines: Deadlines {
                wait_ms: args.wait.wait_timeout,
                connect_ms: args.connect_timeout,
                cleanup_ms: None,
            },
            fleet: t.source.clone(),
            handover,
        },
    });
    let unreachable = |e: std::io::Error| ClientError::Unreachable(Detail::cause(e));
    write
        .write_all(request.as_bytes())
        .await
        .map_err(unreachable)?;
    let mut reader = BufReader::new(read);
    let started = loop {
        let line = protocol::read_line(&mut reader, MAX_LINE_BYTES)
            .await
            .map_err(unreachable)?;
        let Line::Text(text) = line else {
            return Err(ClientError::Unreachable(Detail::words(
                "the supervisor closed the connection before the gateway session began",
                )
            ));
        };
        match serde_json::from_str::<Response>(&text) {
            Ok(protocol::Response::Event { .. }) => continue,
            Ok(protocol::Response::Reply { report }) => break report,
            Ok(protocol::Response::Error { message }) => {
                return Err(client::refused(&text, message, pid));
            }
            Err(e) => {
                return Err(ClientError::Unreachable(Detail::because("unreadable answer", e)));
            }
        }
    };
    // A server that did not start is not fatal: the client sees the others, and a
    // call to it answers with its error (G4). Say so where people look.
    if started.exit_code != 0 {
        for s in started.servers.iter().filter(|s| s.error.is_some()) {
            let message = s
                .error
                .as_ref()
                .and_then(|e| e.get("message"))
                .and_then(|m| m.as_str())
                .unwrap_or_default();
            eprintln!("mcpfleet connect: `{}` is {}: {message}", s.name, s.state);
        }
    }
    // From here the connection carries the client's session, or its handover.
    // Either way this process only does plain blocking reads and writes: tokio's
    // stdin and stdout would hand every read and write to its blocking pool, a
    // switch between threads each time.
    let early = reader.buffer().to_vec();
    let stream = reader
        .into_inner()
        .reunite(write)
        .map_err(|e| ClientError::Unreachable(Detail::cause(e)))?
        .into_std()
        .map_err(unreachable)?;
    stream.set_nonblocking(false).map_err(unreachable)?;
    if handover {
        if !early.is_empty() {
            return Err(ClientError::Unreachable(Detail::words(
                "the supervisor spoke before it had the client's stdin and stdout",
                )
            ));
        }
        // Nothing else runs in this process from here on: the wait blocks its one
        // runtime thread, and no other thread is started.
        return hand_over(stream).map(|()| Code::Ok);
    }
    // The supervisor ends the session when the client's input ends; a supervisor
    // that goes ends the copy to stdout.
    let to_supervisor = stream.try_clone().map_err(unreachable)?;
    std::thread::spawn(move || copy_stdin(to_supervisor));
    let copied = tokio::task::spawn_blocking(move || copy_to_stdout(&early, stream))
        .await
        .map_err(|e| ClientError::Unreachable(Detail::cause(e)))?;
    match copied {
        Ok(()) => Ok(Code::Ok),
        // The client closed our stdout: it is gone, and so is its session.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Code::Ok),
        Err(e) => Err(ClientError::Unreachable(Detail::because("lost the supervisor", e))),
    }
}

/// Whether stdin and stdout can be handed to the supervisor: both are pipes or
/// sockets, which it reads and writes without blocking.
fn can_hand_over() -> bool {
    use crate::platform::{StreamKind, stream_kind};
    let fit = |kind: std::io::Result<StreamKind>| {
        matches!(kind, Ok(StreamKind::Pipe | StreamKind::Socket))
    };
    fit(stream_kind(std::io::stdin().as_fd())) && fit(stream_kind(std::io::stdout().as_fd()))
}

/// Sends stdin and stdout to the supervisor, then waits until it closes the
/// connection: the session has ended (the client's input ended, or the
/// supervisor stopped). Were this process killed instead, the connection's end
/// tells the supervisor to end the session. A supervisor that could not take
/// them says why in one line before it closes the connection.
///
/// The wait is done by a new image of this binary (`mcpfleet __held FD`), in the
/// same process: the client still waits on this pid, and the memory taken to
/// reach the supervisor (the fleet file, the runtime, the parsers) is given
/// back, so each client's `connect` holds what a bare process holds. When that
/// exec fails, this image waits in its place.
fn hand_over(stream: UnixStream) -> Result<(), ClientError> {
    crate::platform::send_fds(
        stream.as_fd(),
        protocol::HANDOVER,
        &[std::io::stdin().as_fd(), std::io::stdout().as_fd()],
    )
    .map_err(lost)?;
    let e = exec_held(&stream);
    tracing::debug!("connect waits in place: cannot exec `{HELD_ARG}`: {e}");
    wait_closed(stream)
}

fn lost(e: std::io::Error) -> ClientError {
    ClientError::Unreachable(Detail::because("handing over stdin and stdout", e))
}

/// The first argument of `connect`'s own image after the handover (never typed
/// by people).
pub const HELD_ARG: &str = "__held";

/// Execs `mcpfleet __held FD` with the connection left open as FD; returns only
/// when that fails, with the connection as it was.
fn exec_held(stream: &UnixStream) -> std::io::Error {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return e,
    };
    if let Err(e) = crate::platform::set_close_on_exec(stream.as_fd(), false) {
        return e;
    }
    let e = std::process::Command::new(exe)
        .arg(HELD_ARG)
        .arg(stream.as_raw_fd().to_string())
        .exec();
    let _ = crate::platform::set_close_on_exec(stream.as_fd(), true);
    e
}

/// `mcpfleet __held FD`, as `connect` execs itself after the handover: waits
/// until the supervisor closes connection FD and returns the exit code
/// `connect` ends with, saying on stderr why when it is not 0. `None` when the
/// arguments are not these.
pub fn held_from_args(args: &[std::ffi::OsString]) -> Option<u8> {
    let [_, mode, fd] = args else {
        return None;
    };
    if mode != HELD_ARG {
        return None;
    }
    let stream = crate::platform::inherited_socket(fd.to_str()?.parse().ok()?)?;
    let code = match wait_closed(stream) {
        Ok(()) => Code::Ok,
        Err(e) => {
            let text = Global {
                output: Format::Text,
                quiet: false,
                verbose: 0,
            };
            match no_report(e, "connect", "mcpfleet connect: interrupted", &text) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("mcpfleet connect: {e:#}");
                    e.code()
                }
            }
        }
    };
    Some(code.as_i32() as u8)
}

/// Waits until the supervisor closes the connection: `Ok` when it ended the
/// session ([`protocol::SESSION_ENDED`]), its refusal when it could not take
/// stdin and stdout, and a lost supervisor (exit 8) when the connection closed
/// with nothing said: the supervisor died under the session.
fn wait_closed(mut stream: UnixStream) -> Result<(), ClientError> {
    use std::io::Read;
    let mut said = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if said.len() < 64 * 1024 => said.extend_from_slice(&buf[..n]),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The supervisor went away mid-session: said below.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(lost(e)),
        }
    }
    if said == [protocol::SESSION_ENDED] {
        return Ok(());
    }
    if said.is_empty() {
        return Err(ClientError::Unreachable(Detail::words(
            "it was lost during the session (the connection closed before the session ended)"
                ,
            )
        ));
    }
    let text = String::from_utf8_lossy(&said);
    Err(match serde_json::from_str::<Response>(text.trim()) {
        Ok(protocol::Response::Error { message }) => ClientError::Refused(message),
        _ => ClientError::Unreachable(Detail::words(format!("unreadable answer: {}", text.trim()))),
    })
}

/// The client's input to the supervisor, until it ends; then the supervisor is
/// told that nothing more comes (it ends the session).
fn copy_stdin(mut to: std::os::unix::net::UnixStream) {
    use std::io::{Read, Write};
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// What the supervisor sends, to stdout (`early` first: read with the start's
/// report), until the supervisor closes the connection.
fn copy_to_stdout(early: &[u8], mut from: std::os::unix::net::UnixStream) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(early)?;
    stdout.flush()?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        stdout.write_all(&buf[..n])?;
        stdout.flush()?;
    }
}
