//! What a running generation holds: its session, and its processes or its
//! remote session's end.

use super::*;

impl Live {
    pub(super) fn new(generation: Generation, kind: LiveKind) -> Live {
        Live {
            generation,
            session: None,
            tools: 0,
            server_info: None,
            ready_at: None,
            kind,
        }
    }

    pub(super) fn process(&self) -> Option<&LiveProcess> {
        match &self.kind {
            LiveKind::Process(p) => Some(p),
            LiveKind::Remote(_) => None,
        }
    }

    pub(super) fn pid(&self) -> Option<i32> {
        self.process().map(|p| p.pid)
    }

    /// The environment tag of the generation's processes (empty for a remote one).
    pub(super) fn tag_value(&self) -> String {
        self.process()
            .map_or_else(String::new, |p| p.tag.value().to_owned())
    }

    pub(super) fn stderr_lines(&self) -> Vec<String> {
        self.process().map_or_else(Vec::new, |p| p.stderr.lines())
    }
}
