//! The guardian: a small parent above a detached supervisor, so that the process
//! tree of a fleet never leaves mcpfleet, even when the supervisor is SIGKILLed.
//!
//! ```text
//!  guardian (child subreaper) ── supervisor (child subreaper) ── servers ── their descendants
//!      │  the supervisor dies (SIGKILL):
//!      └─ every process of its tree that was its child (servers, orphans it held)
//!         is re-parented to the guardian, which writes their identities to
//!         `adopted.json` and reaps them as they die, until none is left
//! ```
//!
//! The supervisor is a child subreaper, so every orphan of a server comes back to
//! it (L13). But when the supervisor itself dies, its children go to the nearest
//! subreaper above it, and without one to init, where a descendant that left its
//! server's group, session and environment in the moment before the supervisor
//! recorded it carries nothing a later supervisor could find it by. The guardian
//! is that subreaper: whatever it adopts came from the fleet's tree, and the next
//! supervisor's recovery (L10) takes `adopted.json` as a list of the fleet's
//! leftovers by identity. The guardian ends nothing itself: recovery does, with its
//! usual steps and records.
//!
//! It is forked before the async runtime starts (a fork of a process with threads
//! would be unsafe), runs no async code, and holds no lock and no socket.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::platform::{self, ExitKind, Forked};
use crate::process::lineage::ProcId;
use crate::process::table::Table;

/// The file, in the state directory, where a guardian lists what it adopted.
pub const ADOPTED_FILE: &str = "adopted.json";

/// What a guardian adopted when its supervisor died.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Adopted {
    /// The supervisor that died (its pid), to tell this list from an older one.
    pub supervisor: i32,
    /// The boot the identities belong to.
    pub boot_id: Option<String>,
    /// Every process the guardian adopted, alive when it was listed.
    pub processes: Vec<ProcId>,
}

impl Adopted {
    /// The list in `dir`, if any (a damaged one reads as none: it only ever adds
    /// to what recovery finds by other means).
    pub fn load(dir: &Path) -> Option<Adopted> {
        let text = crate::state::read_nofollow(&dir.join(ADOPTED_FILE)).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

/// Forks the guardian off the process that is about to become the supervisor.
/// Returns `None` in the supervisor (and when no guardian could be made: the
/// supervisor then runs unguarded), and the exit code to end with in the guardian,
/// after its supervisor and every process it adopted are gone.
pub fn split(state_dir: &Path) -> Option<u8> {
    if let Err(e) = platform::become_subreaper() {
        eprintln!(
            "mcpfleet: cannot become a child subreaper ({e}); the supervisor runs without a guardian"
        );
        return None;
    }
    // SAFETY: called before the async runtime or any other thread exists; the
    // child goes on as the single-threaded process it was.
    match unsafe { platform::fork() } {
        Ok(Forked::Child) => {
            let parent = platform::parent_pid();
            GUARDIAN.get_or_init(|| platform::stat(parent).map(|s| ProcId::of(&s)));
            None
        }
        Ok(Forked::Parent { child }) => {
            // The guardian takes an image of its own, named `__guard` in process
            // listings (and free of the supervisor's memory); a subreaper stays
            // one across exec, and so do its children.
            if let Ok(exe) = std::env::current_exe() {
                use std::os::unix::process::CommandExt;
                let e = std::process::Command::new(exe)
                    .arg(GUARD_ARG)
                    .arg(child.to_string())
                    .arg(state_dir)
                    .exec();
                eprintln!("mcpfleet: cannot exec the guardian ({e}); it runs in place");
            }
            Some(guard(child, state_dir.to_owned()))
        }
        Err(e) => {
            eprintln!("mcpfleet: cannot fork a guardian ({e}); the supervisor runs without one");
            None
        }
    }
}

/// The guardian of this process, when it is a guarded supervisor.
static GUARDIAN: std::sync::OnceLock<Option<ProcId>> = std::sync::OnceLock::new();

/// This supervisor's guardian, if it has one.
pub fn guardian() -> Option<ProcId> {
    GUARDIAN.get().copied().flatten()
}

/// Waits (at most `limit`) until the guardian of the supervisor `previous` has
/// listed what it adopted, and returns the living processes of that list. Nothing
/// to wait for when that supervisor had no guardian, or its guardian is gone (it
/// leaves only once it adopted nothing, or everything it adopted has died).
pub fn adopted_from(
    dir: &Path,
    previous: i32,
    guardian: Option<ProcId>,
    limit: Duration,
) -> Vec<ProcId> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let list = Adopted::load(dir).filter(|a| a.supervisor == previous);
        if let Some(list) = list {
            if list.boot_id != platform::boot_id() {
                return Vec::new();
            }
            return list
                .processes
                .into_iter()
                .filter(ProcId::is_alive)
                .collect();
        }
        if !guardian.is_some_and(|g| g.is_alive()) || std::time::Instant::now() >= deadline {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where the guardian says what went wrong. Its stderr is the supervisor's
/// (`supervisor.log`, for a detached supervisor), which the supervisor rotates
/// while it runs: a guardian that held it open would keep a rotated and
/// removed file on disk for the supervisor's whole life. So it lets go of it
/// and appends to the log by name on the rare occasion it has something to say.
struct Log {
    /// `supervisor.log`, when that was the guardian's stderr.
    file: Option<PathBuf>,
}

impl Log {
    fn take_over(dir: &Path) -> Log {
        let path = dir.join(crate::state::SUPERVISOR_LOG);
        if !crate::state::rotation::stderr_is(&path) {
            return Log { file: None };
        }
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null");
        match null.map(|null| crate::platform::redirect_stderr(&null)) {
            Ok(Ok(())) => Log { file: Some(path) },
            _ => Log { file: None },
        }
    }

    fn say(&self, text: &str) {
        use std::io::Write;
        let line = format!("mcpfleet guardian: {text}\n");
        match &self.file {
            Some(path) => {
                if let Ok(mut f) = crate::state::open_append(path) {
                    let _ = f.write_all(line.as_bytes());
                }
            }
            None => eprint!("{line}"),
        }
    }
}

/// How often the guardian looks for new adoptees while it has some.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The first argument that makes `mcpfleet` a guardian (never typed by people).
pub const GUARD_ARG: &str = "__guard";

/// `mcpfleet __guard SUPERVISOR_PID STATE_DIR`, as the guardian execs itself:
/// the exit code, once the supervisor and all it left are gone. `None` when the
/// arguments are not a guardian's.
pub fn run_from_args(args: &[std::ffi::OsString]) -> Option<u8> {
    let [_, mode, pid, dir] = args else {
        return None;
    };
    if mode != GUARD_ARG {
        return None;
    }
    let pid: i32 = pid.to_str()?.parse().ok()?;
    Some(guard(pid, PathBuf::from(dir)))
}

fn guard(supervisor: i32, dir: PathBuf) -> u8 {
    let log = Log::take_over(&dir);
    // The supervisor takes the signals meant for the fleet; the guardian only
    // outlives it. (A SIGINT for the whole session must not end the guardian
    // before the supervisor has torn the servers down.)
    platform::ignore_interrupts();
    let code = match platform::wait_for_exit(supervisor) {
        Ok(ExitKind::Code(code)) => code.clamp(0, 255) as u8,
        Ok(ExitKind::Signal(signal)) => 128u8.saturating_add(signal as u8),
        Err(_) => 1,
    };
    let me = std::process::id() as i32;
    let mut adopted: BTreeSet<ProcId> = BTreeSet::new();
    let mut written = false;
    loop {
        let table = Table::scan();
        let mut alive = Vec::new();
        for p in table.procs() {
            let s = &p.stat;
            if s.ppid != me {
                continue;
            }
            if s.is_alive() {
                alive.push(ProcId::of(s));
            } else {
                // Ours alone to collect: nothing else runs in this process.
                platform::reap_if_exited(s.pid);
            }
        }
        let before = adopted.len();
        adopted.extend(alive.iter().copied());
        // Written at once after a supervisor's death, even empty: the next
        // supervisor's recovery waits for this list before it looks. A supervisor
        // that ended in order left nothing to list.
        let first_after_crash = !written && code != 0;
        if first_after_crash || adopted.len() != before {
            let list = Adopted {
                supervisor,
                boot_id: platform::boot_id(),
                processes: adopted.iter().copied().collect(),
            };
            if let Ok(text) = serde_json::to_vec(&list)
                && let Err(e) = crate::state::replace_atomically(&dir.join(ADOPTED_FILE), &text)
            {
                log.say(&format!("cannot write {ADOPTED_FILE}: {e}"));
            }
            written = true;
        }
        if alive.is_empty() {
            break;
        }
        std::thread::sleep(LOOK_EVERY);
    }
    code
}
