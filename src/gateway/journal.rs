//! The gateway's log (`gateway.log` in the state directory, read by `mcpfleet logs
//! --gateway`): one timestamped line for each thing a client of the gateway would
//! want explained afterwards: the HTTP door opening and closing, client sessions,
//! HTTP requests refused (and why), calls that a server could not serve, and the
//! requests of servers relayed to a client or answered by the gateway. Never a
//! token, a header's value or a call's arguments. Bounded in size like a server's
//! log (docs/design.md §14).

use std::fmt::Display;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::process::stderr::LogFile;

/// Where the gateway writes its lines; silent when it has no file.
#[derive(Default)]
pub(crate) struct Journal {
    file: Mutex<Option<LogFile>>,
}

impl Journal {
    /// A journal appended to `path` (created 0600). A file that cannot be opened
    /// leaves the journal silent, with a warning in the supervisor's log.
    pub(crate) fn open(path: &Path) -> Journal {
        let file = match LogFile::open(path) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open the gateway's log");
                None
            }
        };
        Journal {
            file: Mutex::new(file),
        }
    }

    /// Appends one line: whatever `text` holds (a client's or a server's words
    /// among it), its control characters are escaped, so it stays one line.
    pub(crate) fn line(&self, text: impl Display) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = file.as_mut() {
            let time = crate::lifecycle::events::rfc3339(SystemTime::now());
            let text = text.to_string();
            let text = super::bounds::one_line(&text);
            if let Err(error) = file.append(format!("{time} {text}\n").as_bytes()) {
                tracing::warn!(%error, "cannot write the gateway's log");
            }
        }
    }
}
