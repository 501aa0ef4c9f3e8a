//! The state directory (docs/design.md §3), the contract between the CLI and the
//! supervisor: where it is (`dir.rs`) and how its files are opened (`files.rs`), the fleet file
//! it serves and whether a supervisor holds its lock (`record.rs`), `state.json`
//! as data (`persisted.rs`), and its rotating files, `events.ndjson` and
//! `supervisor.log` (`rotation.rs`).
//!
//! Both sides use it and it uses neither: it imports nothing from `commands` or
//! `supervisor` (docs/architecture.md, "Dependencies").

mod dir;
mod files;
mod persisted;
mod record;
pub mod rotation;

pub use dir::{
    COPY_FILE, PATH_FILE, STATE_DIR_ENV, SUPERVISOR_LOG, SocketPath, StateDir, chosen,
    is_own_dir, state_dirs, state_root, tag_scope,
};
pub use files::{
    lock_before, open_append, open_rw, read_bounded_nofollow, read_nofollow, replace_atomically,
};
pub use persisted::{Persisted, STATE_VERSION, ServerRecord, SupervisorRecord};
pub use record::{
    Claim, ClaimError, RecordError, RecordedFleet, claim, find_recording, live_supervisor_of,
    record_fleet, recorded_fleet, supervisor_runs,
};
