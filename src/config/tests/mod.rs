//! Tests of the fleet file as the rest of the crate sees it: `load_str`, `load`,
//! `discover`, and what a broken file reports, position by position. This file
//! holds what they share (a test environment, loading helpers); the tests are in
//! one file per topic.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

mod env_file;
mod auth;
mod expansion;
mod gateway;
mod policies;
mod policy_errors;
mod recorded;
mod remote;
mod reporting;
mod shape;
mod supervisor;
mod coordination;

const SECRET: &str = "s3cr3t-t0k3n";

fn env(name: &str) -> Option<String> {
    match name {
        "API_KEY" => Some(SECRET.to_string()),
        "TOKEN" => Some(SECRET.to_string()),
        "USER_NAME" => Some("ada".to_string()),
        "SUBDIR" => Some("sub".to_string()),
        "EMPTY" => Some(String::new()),
        "URL" => Some("https://mcp.example.org/mcp".to_string()),
        "MULTILINE" => Some(format!("{SECRET}\r\nInjected: 1")),
        _ => None,
    }
}

/// A fleet file path in a directory that exists, so that the default `cwd` is valid.
fn fleet_path() -> PathBuf {
    std::env::temp_dir().join("mcpfleet-config-test.yaml")
}

fn ok(text: &str) -> Fleet {
    match load_str(text, &fleet_path(), &env) {
        Ok(fleet) => fleet,
        Err(e) => panic!("expected a valid fleet, got:\n{e}"),
    }
}

/// Each error as `LINE:COL: PATH: MESSAGE`.
fn errors(text: &str) -> Vec<String> {
    match load_str(text, Path::new("fleet.yaml"), &env) {
        Ok(fleet) => panic!("expected errors, got {fleet:#?}"),
        Err(e) => {
            assert_eq!(e.file, Path::new("fleet.yaml"));
            e.errors.iter().map(ToString::to_string).collect()
        }
    }
}

fn one_error(text: &str) -> String {
    let errors = errors(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap_or_default()
}

fn stdio(server: &ServerSpec) -> &StdioSpec {
    match &server.transport {
        Transport::Stdio(stdio) => stdio,
        Transport::Http(_) => panic!("`{}` is a remote server", server.name),
    }
}

fn http(server: &ServerSpec) -> &HttpSpec {
    match &server.transport {
        Transport::Http(http) => http,
        Transport::Stdio(_) => panic!("`{}` is a stdio server", server.name),
    }
}

const HEAD: &str = "version: 1\nservers:\n";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
