//! What both HTTP doors (the gateway's, the metrics') share: their caps,
//! fitted within the open-files limit, and their bearer token.

use std::path::PathBuf;

use super::fixed::Fixed;
use crate::config::Fleet;
use crate::gateway::http;

/// The caps of both HTTP doors, fitted within the open-files limit.
#[derive(Debug, Clone, Copy)]
pub(super) struct DoorCaps {
    pub gateway: http::Caps,
    /// Open connections of the metrics' own door.
    pub metrics: usize,
}

/// The caps `fleet` asks for (or the defaults), fitted so that both doors full
/// at once leave the servers' descriptors and a reserve for the control socket
/// below the open-files limit (docs/design.md §10). A cap cut to fit is said in
/// the gateway's log.
pub(super) fn caps(fixed: &Fixed, fleet: &Fleet) -> DoorCaps {
    use crate::gateway::bounds;
    let wanted = [
        fleet
            .gateway
            .max_connections
            .unwrap_or(bounds::GATEWAY_CONNECTIONS),
        fleet
            .metrics
            .max_connections
            .unwrap_or(bounds::METRICS_CONNECTIONS),
    ];
    let room = fixed.files.for_doors(fleet.servers.len());
    let fitted = crate::process::limits::fit(&wanted, room);
    if fitted != wanted {
        fixed.gateway.note(format_args!(
            "the open-files limit ({}) leaves the HTTP doors room for {room} connections: \
             at most {} on the gateway's, {} on the metrics' (asked: {}, {})",
            fixed.files.soft, fitted[0], fitted[1], wanted[0], wanted[1]
        ));
    }
    DoorCaps {
        gateway: http::Caps {
            connections: fitted[0],
            sessions: fleet.gateway.max_sessions.unwrap_or(bounds::SESSIONS),
        },
        metrics: fitted[1],
    }
}

/// The bearer token of the HTTP doors (the gateway's, the metrics'): the fleet
/// file's (`${env:NAME}`) wins; else one is kept, 0600, in the state directory,
/// whose path comes with it.
pub(super) fn door_token(fixed: &Fixed, fleet: &Fleet) -> Result<(String, Option<PathBuf>), String> {
    match &fleet.gateway.token {
        Some(text) => Ok((text.value.clone(), None)),
        None => {
            let file = fixed.dir.root().join(TOKEN_FILE);
            let token = token(&file).map_err(|e| {
                format!(
                    "cannot create the gateway's token in {}: {e}",
                    file.display()
                )
            })?;
            Ok((token, Some(file)))
        }
    }
}

/// The file of the state directory that keeps the HTTP doors' token when the
/// fleet file gives none.
pub(super) const TOKEN_FILE: &str = "gateway.token";

/// Keeps `token` in `path` (0600), in place of any there: on a host of a
/// fleet that spans hosts, the fleet's token, which every host's gateway
/// takes (docs/design.md §19).
pub(super) fn keep_token(path: &std::path::Path, token: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = crate::state::open_rw(path)?;
    f.set_len(0)?;
    f.write_all(token.as_bytes())?;
    f.sync_data()
}

/// The token in `path`, created (0600, 32 random bytes) when there is none.
fn token(path: &std::path::Path) -> std::io::Result<String> {
    match crate::state::read_nofollow(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).trim().to_owned();
            if !text.is_empty() {
                return Ok(text);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = http::new_token()?;
    keep_token(path, &token)?;
    Ok(token)
}
