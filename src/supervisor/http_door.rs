//! The gateway's HTTP door, which `serve` opens (docs/design.md §14). The fleet
//! task opens and closes it; what it listens at is published with the rest of
//! the fleet's view.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::doors::{caps, door_token};
use super::fixed::Fixed;
use crate::config::Fleet;
use crate::gateway::http;
use crate::metrics::http::Render;

/// Where `serve` listens unless told otherwise.
pub(super) const DEFAULT_LISTEN: &str = "127.0.0.1:7077";

/// The HTTP door, once open.
#[derive(Debug, Clone)]
pub(super) struct Listening {
    pub addr: SocketAddr,
    /// The file that holds the token (`None`: the token came from the fleet file).
    pub token_file: Option<PathBuf>,
    /// Closes the door; a child of the supervisor's shutdown.
    pub stop: tokio_util::sync::CancellationToken,
    /// It serves HTTPS (`gateway.tls`).
    pub tls: bool,
}

impl Listening {
    /// Where it listens, as a URL.
    pub(super) fn url(&self) -> String {
        http::url(self.addr, self.tls)
    }
}

/// Opens the HTTP door at `listen` (or the fleet's `gateway.listen`, or
/// [`DEFAULT_LISTEN`]), or says where it is open already (`open`). Only the
/// fleet task calls it, one request after another, so that of two `serve`
/// requests one opens the door and the other finds it open.
pub(super) fn open(
    fixed: &Fixed,
    fleet: &Fleet,
    open: Option<&Listening>,
    listen: Option<String>,
    scrape: Render,
) -> Result<Listening, String> {
    let config = &fleet.gateway;
    let asked = listen.is_some();
    let wanted: SocketAddr = match listen {
        Some(text) => text
            .parse()
            .map_err(|_| format!("usage: `{text}` is not an address:port to listen on"))?,
        None => config
            .listen
            .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("the default address parses")),
    };
    if let Some(open) = open {
        // Without an address asked for, the door open is the one: on a host
        // of a fleet that spans hosts, it opened where `$MCPFLEET_LISTEN` said.
        if !asked || open.addr == wanted || wanted.port() == 0 {
            return Ok(open.clone());
        }
        return Err(format!(
            "the gateway already listens at {}; `down` closes it",
            open.addr
        ));
    }
    // A certificate that cannot be served is said before anything listens.
    let tls = match &config.tls {
        Some(tls) => Some(http::acceptor(tls).map_err(|e| format!("gateway.tls: {e}"))?),
        None => None,
    };
    let cannot = |e: std::io::Error| format!("cannot listen at {wanted}: {e}");
    let listener = std::net::TcpListener::bind(wanted).map_err(cannot)?;
    listener.set_nonblocking(true).map_err(cannot)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(cannot)?;
    let addr = listener.local_addr().map_err(cannot)?;
    let (token, token_file) = door_token(fixed, fleet)?;
    let stop = fixed.shutdown.child_token();
    let caps = caps(fixed, fleet);
    http::serve(
        fixed.gateway.clone(),
        listener,
        token.into(),
        config.origins.clone(),
        Some(scrape),
        caps.gateway,
        tls.clone(),
        stop.clone(),
        &fixed.tracker,
    );
    let open = Listening {
        addr,
        token_file,
        stop,
        tls: tls.is_some(),
    };
    tracing::info!(url = open.url(), "gateway listening");
    fixed
        .gateway
        .note(format_args!("HTTP door open at {}", open.url()));
    Ok(open)
}

/// Closes the gateway's HTTP door `open`.
pub(super) fn close(fixed: &Fixed, open: Listening) {
    tracing::info!(addr = %open.addr, "gateway: HTTP door closed");
    fixed
        .gateway
        .note(format_args!("HTTP door at {} closed", open.addr));
    open.stop.cancel();
}
