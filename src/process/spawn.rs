//! Starting a stdio server: its own process group, no shell unless asked for, piped
//! stdin and stdout for the MCP session, stderr always drained, and an environment
//! tag that every descendant inherits so that teardown can find all of them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use super::redact::Redactor;
use super::stderr::{LogFile, StderrTail};
use crate::platform;
// The tag is spawn's to give; it lives in its own module so that `table`, which
// reads it back, needs nothing from here.
pub use super::tag::{TAG_VAR, Tag};

/// What to run, already resolved from the fleet file.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
    /// Values the server's stderr must not show: replaced as it is read.
    pub secrets: Vec<String>,
}

impl Launch {
    /// A launch line from the fleet file's `command`/`args`/`shell`. With `shell`,
    /// the command is a script for `/bin/sh -c`, and `args` become `$1`, `$2`, ...
    pub fn new(
        command: &str,
        args: &[String],
        shell: bool,
        env: Vec<(String, String)>,
        cwd: PathBuf,
        name: &str,
    ) -> Launch {
        let env = env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        if shell {
            let mut sh_args: Vec<OsString> = vec!["-c".into(), command.into(), name.into()];
            sh_args.extend(args.iter().map(OsString::from));
            Launch {
                program: "/bin/sh".into(),
                args: sh_args,
                env,
                cwd,
                secrets: Vec::new(),
            }
        } else {
            Launch {
                program: command.into(),
                args: args.iter().map(OsString::from).collect(),
                env,
                cwd,
                secrets: Vec::new(),
            }
        }
    }

    /// This launch, with `secrets` kept out of the server's stderr (those too
    /// short to look for are dropped: `process::redact`).
    pub fn with_secrets<'a>(mut self, secrets: impl IntoIterator<Item = &'a str>) -> Launch {
        self.secrets = super::redact::secrets(secrets);
        self
    }
}

/// A spawned server process. The caller owns it until teardown consumes it.
pub struct Spawned {
    pub child: Child,
    pub pid: i32,
    /// Equal to `pid`: the server leads its own group.
    pub pgid: i32,
    /// Process start time in ticks since boot, for identity checks.
    pub start_time: Option<u64>,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: StderrTail,
    /// The task that drains stderr; it ends when the last holder of the pipe exits.
    pub stderr_task: JoinHandle<()>,
    pub tag: Tag,
}

/// The server's stderr log could not be opened: nothing was spawned, and the
/// program is not to blame.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the server's log {}: {error}", path.display())]
pub struct LogOpenError {
    pub path: std::path::PathBuf,
    #[source]
    pub error: std::io::Error,
}

/// Spawns `launch` as the leader of a new process group. Its stderr, its secrets
/// redacted, is kept as a tail and, with `stderr_log`, also appended to that file,
/// by a task on `tracker` (the caller's, which waits for it).
pub fn spawn(
    launch: &Launch,
    tag: Tag,
    server: &str,
    stderr_log: Option<&Path>,
    tracker: &tokio_util::task::TaskTracker,
) -> std::io::Result<Spawned> {
    let log = stderr_log
        .map(|path| {
            LogFile::open(path).map_err(|e| {
                std::io::Error::other(LogOpenError {
                    path: path.to_owned(),
                    error: e,
                })
            })
        })
        .transpose()?;
    let mut cmd = Command::new(&launch.program);
    cmd.args(&launch.args)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .env(TAG_VAR, tag.value())
        .current_dir(&launch.cwd)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Only a backstop for a bug: teardown is always explicit escalation.
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .map(|p| p as i32)
        .ok_or_else(|| std::io::Error::other("child exited before its pid was read"))?;
    let stderr = StderrTail::default();
    let pipe = child.stderr.take().expect("stderr was piped");
    let redactor = Redactor::new(launch.secrets.iter().map(String::as_str));
    let stderr_task = tracker.spawn(stderr.clone().drain(pipe, server.to_owned(), log, redactor));
    Ok(Spawned {
        stdin: child.stdin.take(),
        stdout: child.stdout.take(),
        start_time: platform::stat(pid).map(|s| s.start_time),
        child,
        pid,
        pgid: pid,
        stderr,
        stderr_task,
        tag,
    })
}
