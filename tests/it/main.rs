//! The integration tests of mcpfleet, one module per topic, built as one test
//! binary: each binary links the whole crate, and one link is much cheaper than
//! one per topic. `cargo test --test it TOPIC::` runs one topic's tests (e.g.
//! `cargo test --test it gateway::`).
//!
//! The tests of all modules run on the threads of one process, so none may change
//! what the process shares (its environment, current directory, umask, resource
//! limits or signal dispositions): a test that needs such a change makes it in the
//! child it starts (`pre_exec`, `Command::env`).

mod common;

mod authority;
mod bad_input;
mod book;
mod calls;
mod chaos;
mod check;
mod command_line;
mod completions;
mod conformance;
mod conformance_client;
mod env_file;
mod eras;
mod fleet_file;
mod foreground;
mod gateway;
mod handover;
mod import;
mod inspector;
mod junit;
mod limits;
mod lineage;
mod metrics;
mod oauth;
mod pass_through;
mod platform;
mod published;
mod reconcile;
mod remote;
mod restart;
mod rotation;
mod schema;
mod security;
mod soak;
mod state_files;
mod supervisor;
mod tools_contract;
mod traces;
mod version;
