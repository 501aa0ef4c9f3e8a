//! `up --watch`: converge on the fleet file, then again each time it is saved
//! (docs/design.md §16). The file is polled (its modification time, size, inode
//! and device, every 250 ms: portable, and it sees an editor that saves by
//! renaming a new file over the old one), a change is taken once the file has
//! been still for 300 ms, and a file that is invalid is reported with its
//! positions while the running fleet is kept (R5). Ctrl-C ends the watch only;
//! with `--foreground` the supervisor in this process tears the fleet down.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::request::{send, up_op};
use super::target::Target;
use super::{CliError, Global, read_fleet};
use crate::cli::UpArgs;
use crate::host::Signals;
use crate::output::exit::Code;
use crate::output::report::{Format, write_stdout};
use crate::protocol::FleetSource;

/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(250);
/// How long a changed file must stay still before it is read: an editor may
/// write it in several steps.
const SETTLE: Duration = Duration::from_millis(300);

/// What tells one version of the file from another without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(SystemTime, u64, u64, u64)>);

impl Stamp {
    fn of(path: &Path) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp(std::fs::metadata(path).ok().map(|m| {
            (
                m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                m.len(),
                m.ino(),
                m.dev(),
            )
        }))
    }
}

/// Returns at the next Ctrl-C (SIGINT or SIGTERM); never without `signals`.
async fn interrupted(signals: &mut Option<Signals>) {
    match signals {
        Some(s) => {
            s.next().await;
        }
        None => std::future::pending().await,
    }
}

/// Watches `path` from `stamp` on, and returns when it changed (not necessarily
/// its text: the caller compares) and has settled; `None` when interrupted.
async fn next_change(path: &Path, stamp: &mut Stamp, signals: &mut Option<Signals>) -> Option<()> {
    loop {
        tokio::select! {
            () = interrupted(signals) => return None,
            () = tokio::time::sleep(POLL) => {}
        }
        let mut seen = Stamp::of(path);
        if seen == *stamp {
            continue;
        }
        loop {
            tokio::select! {
                () = interrupted(signals) => return None,
                () = tokio::time::sleep(SETTLE) => {}
            }
            let again = Stamp::of(path);
            if again == seen {
                break;
            }
            seen = again;
        }
        *stamp = seen;
        return Some(());
    }
}

/// `up --watch` without `--foreground`: the first `up`, then one per change.
pub(crate) async fn up(t: Target, args: &UpArgs, g: &Global) -> Result<Code, CliError> {
    let mut stamp = Stamp::of(&t.path);
    // Listening from the start: once a request has listened for Ctrl-C, the
    // signal no longer ends the process by itself.
    let mut signals = Signals::new().ok();
    let first = send(&t, up_op(&t, args, false), true, "up", g).await?;
    if first == Code::Interrupted {
        return Ok(first);
    }
    eprintln!(
        "mcpfleet up --watch: watching {}; Ctrl-C stops watching and leaves the fleet up",
        t.path.display()
    );
    let mut current = t;
    loop {
        if next_change(&current.path, &mut stamp, &mut signals)
            .await
            .is_none()
        {
            eprintln!(
                "mcpfleet up --watch: stopped watching; the fleet stays up (`mcpfleet down` stops it)"
            );
            return Ok(Code::Interrupted);
        }
        match apply(&mut current, args, g, true).await {
            Ok(Some(Code::Interrupted)) => return Ok(Code::Interrupted),
            Ok(_) => {}
            // A change the supervisor refused (a server named on the command line
            // that the file no longer has, say) ends nothing: the next may do.
            Err(e) => eprintln!("mcpfleet up --watch: {e:#}"),
        }
    }
}

/// `up --watch --foreground`: the supervisor runs in this process and made the
/// first `up`; each change is sent to it like any client's. Ends when the
/// supervisor's Ctrl-C ends the requests (the caller drops it at teardown).
pub(crate) async fn alongside(t: Target, args: UpArgs, g: Global) {
    let mut stamp = Stamp::of(&t.path);
    let mut signals = None;
    let mut current = t;
    while next_change(&current.path, &mut stamp, &mut signals)
        .await
        .is_some()
    {
        match apply(&mut current, &args, &g, false).await {
            Ok(Some(Code::Interrupted)) => return,
            Ok(_) => {}
            Err(e) => eprintln!("mcpfleet up --watch: {e:#}"),
        }
    }
}

/// Reads the changed file and, if it is valid and different, sends `up` with it
/// (starting a supervisor if `start` and none runs: the last one may have gone
/// idle); `None` when nothing was sent (the same text, or an invalid one: reported).
async fn apply(
    current: &mut Target,
    args: &UpArgs,
    g: &Global,
    start: bool,
) -> Result<Option<Code>, CliError> {
    let path: PathBuf = current.path.clone();
    let (fleet, source) = match read_fleet(&path) {
        Ok(read) => read,
        Err(e) => {
            eprintln!("mcpfleet up --watch: {e:#}");
            eprintln!(
                "mcpfleet up --watch: the running fleet is kept; fix the file and save it again"
            );
            if g.output != Format::Text {
                let _ = write_stdout(&CliError::Config(e).to_json("up"));
            }
            return Ok(None);
        }
    };
    // The same text with the same values is no change, whatever its version
    // (a file touched, or saved unchanged).
    let same = |a: &FleetSource, b: &FleetSource| a.text == b.text && a.env == b.env;
    if let (Some(new), Some(old)) = (&source, &current.source)
        && same(new, old)
    {
        return Ok(None);
    }
    eprintln!("mcpfleet up --watch: {} changed; applying", path.display());
    current.fleet = fleet;
    current.source = source;
    let code = send(current, up_op(current, args, false), start, "up", g).await?;
    Ok(Some(code))
}
