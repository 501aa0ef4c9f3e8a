//! The environment tag that marks every process of a generation: `spawn` puts it
//! in the server's environment, every descendant inherits it, and `table` reads it
//! back from each process's environment (`platform::env_value`; docs/design.md §3,
//! rule L13).

/// The environment variable that marks every process of a generation.
pub const TAG_VAR: &str = "MCPFLEET_TAG";

/// The mark that a generation's processes carry in their environment, unique per
/// host of authorities, server and generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag(String);

impl Tag {
    pub fn new(scope: &str, server: &str, generation: u64) -> Tag {
        Tag(format!("{scope}:{server}:{generation}"))
    }

    /// The `NAME=VALUE` entry as it appears in a process's environment.
    pub fn environ_entry(&self) -> Vec<u8> {
        format!("{TAG_VAR}={}", self.0).into_bytes()
    }

    pub fn value(&self) -> &str {
        &self.0
    }
}
