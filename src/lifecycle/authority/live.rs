//! What a running generation holds: its session, and its processes or its
//! remote session's end.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::super::state::Generation;
use crate::platform::ExitWatch;
use crate::process::lineage::Lineage;
use crate::process::remote::DeleteProbe;
use crate::process::session::Session;
use crate::process::spawn::Tag;
use crate::process::stderr::StderrTail;


/// What a running generation holds.
pub(super) struct Live {
    pub(super) generation: Generation,
    pub(super) session: Option<Session>,
    pub(super) tools: usize,
    pub(super) server_info: Option<String>,
    /// The protocol version its session speaks, as the era probe and the
    /// handshake found it (each generation probes anew).
    pub(super) protocol_version: Option<String>,
    /// When the handshake and tools/list were done.
    pub(super) ready_at: Option<Instant>,
    /// The server's processes (stdio), or how its session ends (remote).
    pub(super) kind: LiveKind,
}

pub(super) enum LiveKind {
    Process(Box<LiveProcess>),
    Remote(DeleteProbe),
}

/// The processes of a stdio generation.
pub(super) struct LiveProcess {
    pub(super) child: tokio::process::Child,
    pub(super) pid: i32,
    pub(super) pgid: i32,
    pub(super) tag: Tag,
    pub(super) stderr: StderrTail,
    pub(super) stderr_task: tokio::task::JoinHandle<()>,
    /// Fires when the main process exits on its own.
    pub(super) exit: ExitWatch,
    /// Every descendant of the main process (L13), kept current by the passes over
    /// the process table, and written to the ledger as it changes.
    pub(super) lineage: Lineage,
    /// Ends the reading of the server's stdout that goes on after its session was
    /// closed (L5: a server that writes while it shuts down must not die of EPIPE).
    pub(super) stdout_drain: CancellationToken,
}

impl Live {
    pub(super) fn new(generation: Generation, kind: LiveKind) -> Live {
        Live {
            generation,
            session: None,
            tools: 0,
            server_info: None,
            protocol_version: None,
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

    /// The server's stderr tail, to be read once teardown has drained the pipe
    /// (a server that dies writes its last words a moment before it is seen to
    /// exit).
    pub(super) fn stderr_tail(&self) -> Option<StderrTail> {
        self.process().map(|p| p.stderr.clone())
    }
}
