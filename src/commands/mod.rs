//! The commands, one file each, and what they share: finding and loading the fleet
//! file, and the error type at the edge that maps to exit codes.

mod answer;
mod cli_error;
mod fleet_file;
mod global;
mod request;
mod run;

pub(crate) mod auth;
pub(crate) mod chain;
pub(crate) mod check;
pub(crate) mod client;
pub mod connect;
pub(crate) mod fleet_ops;
pub(crate) mod import;
pub(crate) mod ls;
pub(crate) mod metrics;
pub(crate) mod observe;
mod other_build;
pub(crate) mod target;
pub(crate) mod validate;
pub(crate) mod watch;

pub use cli_error::CliError;
pub(crate) use fleet_file::{current_dir, how_found, warn_passed_over};
pub use fleet_file::{file_version, find_fleet, load_fleet, read_fleet, write_atomically};
pub use global::Global;
pub use fleet_ops::Supervisor;
pub use run::run;
