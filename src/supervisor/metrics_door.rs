//! The metrics' own HTTP door at the fleet file's `metrics.listen`, for a
//! supervisor without the gateway's (docs/design.md §17). It follows the fleet
//! file: opened when the supervisor starts, moved or closed when `up` takes up a
//! file that changed it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use ::http::Request;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::doors::{caps, door_token};
use super::fixed::Fixed;
use crate::config::Fleet;
use crate::gateway::http as door;
use crate::metrics::http::{PATH, Render, answer, not_found};

/// The door, while open.
pub(super) struct MetricsDoor {
    /// What the fleet file asked for (a port 0 becomes `addr`'s).
    pub wanted: SocketAddr,
    pub addr: SocketAddr,
    stop: CancellationToken,
}

/// Opens, moves or closes `door` to match `fleet`'s `metrics.listen`. A door
/// that cannot open is a warning in `supervisor.log` and `gateway.log`: the
/// servers are not held up for it.
pub(super) fn follow(fixed: &Fixed, fleet: &Fleet, door: &mut Option<MetricsDoor>, scrape: &Render) {
    let wanted = fleet.metrics.listen;
    if door.as_ref().map(|d| d.wanted) == wanted {
        return;
    }
    if let Some(open) = door.take() {
        open.stop.cancel();
        tracing::info!(addr = %open.addr, "metrics: door closed");
        fixed
            .gateway
            .note(format_args!("metrics door at {} closed", open.addr));
    }
    let Some(wanted) = wanted else { return };
    match open(fixed, fleet, wanted, scrape.clone()) {
        Ok(open) => {
            tracing::info!(addr = %open.addr, "metrics: serving /metrics");
            fixed.gateway.note(format_args!(
                "metrics door open at http://{}/metrics",
                open.addr
            ));
            *door = Some(open);
        }
        Err(e) => {
            tracing::warn!("metrics: {e}");
            fixed.gateway.note(format_args!("metrics door: {e}"));
        }
    }
}

fn open(
    fixed: &Fixed,
    fleet: &Fleet,
    wanted: SocketAddr,
    scrape: Render,
) -> Result<MetricsDoor, String> {
    let cannot = |e: std::io::Error| format!("cannot listen at {wanted}: {e}");
    let listener = std::net::TcpListener::bind(wanted).map_err(cannot)?;
    listener.set_nonblocking(true).map_err(cannot)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(cannot)?;
    let addr = listener.local_addr().map_err(cannot)?;
    let (token, _) = door_token(fixed, fleet)?;
    let stop = fixed.shutdown.child_token();
    let door = door::Door {
        name: "metrics",
        key: "metrics.max_connections",
        cap: caps(fixed, fleet).metrics,
        journal: fixed.gateway.clone(),
        tls: None,
    };
    serve(
        listener,
        token.into(),
        scrape,
        door,
        stop.clone(),
        &fixed.tracker,
    );
    Ok(MetricsDoor { wanted, addr, stop })
}

/// Closes the metrics door, if open: the supervisor is leaving.
pub(super) fn close(door: &mut Option<MetricsDoor>) {
    if let Some(open) = door.take() {
        open.stop.cancel();
        tracing::info!(addr = %open.addr, "metrics: door closed");
    }
}

/// Serves [`PATH`] alone on `listener` until `shutdown`; every request must
/// carry `Authorization: Bearer <token>`.
fn serve(
    listener: TcpListener,
    token: Arc<str>,
    render: Render,
    door: door::Door,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) {
    door::accept_each(listener, shutdown, tracker, door, move |_peer| {
        let (token, render) = (token.clone(), render.clone());
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let (token, render) = (token.clone(), render.clone());
            async move {
                let response = if request.uri().path() != PATH {
                    not_found()
                } else if !door::authorized(&request, &token) {
                    door::unauthorized()
                } else {
                    answer(&request, &render).await
                };
                Ok::<_, Infallible>(response)
            }
        })
    });
}
