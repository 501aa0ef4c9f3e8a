//! The state directory (docs/design.md §3), the contract between the CLI and the
//! supervisor: where it is and how its files are opened (`dir.rs`), the fleet file
//! it serves and whether a supervisor holds its lock (`record.rs`), `state.json`
//! as data (`persisted.rs`), and its rotating files, `events.ndjson` and
//! `supervisor.log` (`rotation.rs`).
//!
//! Both sides use it and it uses neither: it imports nothing from `commands` or
//! `supervisor` (docs/architecture.md, "Dependencies").

mod dir;
mod persisted;
mod record;
pub mod rotation;

pub use dir::{
    STATE_DIR_ENV, SUPERVISOR_LOG, SocketPath, StateDir, chosen, is_own_dir, live_supervisor_of,
    lock_before, open_append, open_rw, read_bounded_nofollow, read_nofollow, replace_atomically,
    state_dirs, state_root, tag_scope,
};
pub use persisted::{Persisted, STATE_VERSION, ServerRecord, SupervisorRecord};
pub use record::{
    COPY_FILE, Claim, ClaimError, PATH_FILE, RecordError, RecordedFleet, claim, find_recording,
    record_fleet, recorded_fleet, supervisor_runs,
};
