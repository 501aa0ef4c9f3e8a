//! What each request does (docs/design.md §9): `dispatch` routes a request to
//! its step; each step takes up the request's fleet file first where the
//! request carries one (R1), then asks the authorities or reads the fleet's
//! view. The gateway's own request (`gateway`) is not here: it turns its
//! connection into an MCP session (`gateway_door.rs`).

use tokio::sync::mpsc;

use super::answer::{Answer, Response, call_options, reply};
use super::converge;
use super::handle::FleetHandle;
use super::plan::Up;
use super::streaming::streaming;
use crate::host::{self, Unnamed};
use crate::lifecycle::authority::CallOptions;
use crate::lifecycle::state::Intent;
use crate::metrics::exposition::Format;
use crate::output::report::{GatewayReport, Report, ServerReport};
use crate::protocol::{Deadlines, FleetSource, MetricsText, Op};

/// Answers one request, sending its events on `tx` before the reply it returns.
pub(super) async fn dispatch(
    op: Op,
    fleet: &FleetHandle,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    match op {
        Op::Ping => reply(Report::new("ping", Vec::new(), false)),
        Op::Metrics { openmetrics } => metrics(fleet, openmetrics),
        // Answered in `server.rs`, which owns the connection it turns into an
        // MCP session.
        Op::Gateway { .. } => Response::Error {
            message: "a gateway request needs a connection of its own".into(),
        },
        Op::Serve {
            servers,
            listen,
            deadlines,
            fleet: source,
        } => serve(fleet, servers, listen, deadlines, source, tx).await,
        Op::Tools {
            server,
            deadlines,
            fleet: source,
        } => {
            if let Err(message) = fleet.take_up(source.as_ref()).await {
                return Response::Error { message };
            }
            super::calls::tools(fleet, server, call_options(deadlines, false)).await
        }
        Op::Call {
            server,
            tool,
            arguments,
            timeout_ms,
            deadlines,
            fleet: source,
        } => {
            if let Err(message) = fleet.take_up(source.as_ref()).await {
                return Response::Error { message };
            }
            let options = call_options(deadlines, false);
            super::calls::call(fleet, &server, &tool, arguments, timeout_ms, options).await
        }
        Op::Status {
            servers,
            fleet: source,
        } => {
            let answer = status(fleet, &servers, source.as_ref());
            placed(fleet, answer).await
        }
        Op::Up {
            servers,
            force,
            deadlines,
            fleet: source,
            dry_run,
            remove_orphans,
        } => {
            let up = Up {
                servers,
                fleet: source,
                options: call_options(deadlines, force),
                dry_run,
                remove_orphans,
            };
            placed_up(fleet, up, tx).await
        }
        Op::Down {
            servers,
            deadlines,
            strict,
            fleet: source,
            host,
        } => {
            #[cfg(feature = "etcd")]
            if let Some(host) = host {
                return drain(fleet, source.as_ref(), &host).await;
            }
            #[cfg(not(feature = "etcd"))]
            if host.is_some() {
                return Response::Error {
                    message: crate::config::NO_ETCD.into(),
                };
            }
            let change = Change {
                command: "down",
                names: servers,
                intent: Intent::Stop,
                options: call_options(deadlines, false),
                strict,
            };
            down(fleet, source.as_ref(), change, tx).await
        }
        Op::Reconnect {
            servers,
            if_generation,
            force,
            deadlines,
            strict,
            fleet: source,
        } => {
            let change = Change {
                command: "reconnect",
                names: servers,
                intent: Intent::Reconnect { if_generation },
                options: call_options(deadlines, force),
                strict,
            };
            #[cfg(feature = "etcd")]
            if fleet.fixed.hosts.is_some() {
                return reconnect_here(fleet, source.as_ref(), change, tx).await;
            }
            change_after_take_up(fleet, source.as_ref(), change, tx).await
        }
        Op::Reset { server } => {
            let change = Change {
                command: "reset",
                names: vec![server],
                intent: Intent::Reset,
                options: CallOptions::default(),
                strict: false,
            };
            self::change(fleet, change, tx).await
        }
    }
}

/// `metrics`: the scrape, on the control socket.
fn metrics(fleet: &FleetHandle, openmetrics: bool) -> Response {
    let format = if openmetrics {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    };
    let metrics = super::scrape::prepare(&fleet.view(), &fleet.fixed, format).render();
    Response::Reply {
        report: Answer::Metrics(MetricsText { metrics }),
    }
}

/// `up`: on a host of a fleet that spans hosts, the servers are wanted up in
/// etcd first, the file published for every host, and the answer shows where
/// each runs (docs/design.md §19).
async fn placed_up(fleet: &FleetHandle, up: Up, tx: &mpsc::UnboundedSender<String>) -> Response {
    #[cfg(feature = "etcd")]
    let text = up.fleet.as_ref().map(|s| s.text.clone());
    let dry_run = up.dry_run;
    // Wanted up before anything starts: a `down` before it must not
    // stop what this `up` starts (L25).
    if !dry_run && let Err(message) = want(fleet, &up).await {
        return Response::Error { message };
    }
    let answer = converge::up(fleet, up, tx).await;
    // The file this `up` read, for every host to converge on (L25).
    #[cfg(feature = "etcd")]
    if !dry_run
        && let (Some(hosts), Some(text)) = (&fleet.fixed.hosts, text)
        && matches!(answer, Response::Reply { .. })
    {
        hosts.publish_fleet(&text).await;
    }
    placing(fleet, &answer).await;
    placed(fleet, answer).await
}

/// `serve`: the file taken up, the HTTP door opened (or found open), then the
/// selected servers started as `up` starts them.
async fn serve(
    fleet: &FleetHandle,
    servers: Vec<String>,
    listen: Option<String>,
    deadlines: Deadlines,
    source: Option<FleetSource>,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    if let Err(message) = fleet.take_up(source.as_ref()).await {
        return Response::Error { message };
    }
    if let Err(message) = fleet.open_http(listen).await {
        return Response::Error { message };
    }
    let up = Up {
        servers,
        fleet: source,
        options: call_options(deadlines, false),
        dry_run: false,
        remove_orphans: false,
    };
    match placed_up(fleet, up, tx).await {
        Response::Reply {
            report: Answer::Report(mut report),
        } => {
            report.command = "serve".into();
            report.gateway = Some(gateway_report(fleet));
            reply(report)
        }
        other => other,
    }
}

/// `status`, with the gateway when its door is open or a session is.
fn status(fleet: &FleetHandle, servers: &[String], source: Option<&FleetSource>) -> Response {
    let mut report = match converge::status(fleet, servers, source) {
        Ok(r) => r,
        Err(message) => return Response::Error { message },
    };
    report.gateway = Some(gateway_report(fleet)).filter(|g| g.url.is_some() || g.sessions > 0);
    reply(report)
}

/// `down`: on a host of a fleet that spans hosts, the fleet is told first that
/// the servers are wanted down, so that the hosts that run them stop them too,
/// and the answer waits for them (docs/design.md §19).
async fn down(
    fleet: &FleetHandle,
    source: Option<&FleetSource>,
    change: Change,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    #[cfg(feature = "etcd")]
    if let Some(hosts) = fleet.fixed.hosts.clone() {
        if let Err(message) = fleet.take_up(source).await {
            return Response::Error { message };
        }
        let names = match fleet.select(&change.names, Unnamed::All) {
            Ok(handles) => handles.iter().map(|h| h.name().to_owned()).collect::<Vec<_>>(),
            Err(message) => return Response::Error { message },
        };
        if let Err(message) = hosts.want(&names, false).await {
            return Response::Error { message };
        }
        let answer = self::change(fleet, change, tx).await;
        let deadline = std::time::Instant::now() + crate::supervisor::hosts::RELEASE_WAIT;
        let still = hosts.wait_released(&names, deadline).await;
        let Response::Reply {
            report: Answer::Report(mut report),
        } = answer
        else {
            return answer;
        };
        for line in &mut report.servers {
            if let Some((_, host)) = still.iter().find(|(name, _)| name == &line.name) {
                line.host = Some(host.clone());
                line.state = crate::lifecycle::state::Phase::Running;
                let code = crate::output::exit::Code::TeardownNotClean;
                line.exit_code = code.as_i32();
                line.error = Some(crate::output::report::ErrorReport {
                    kind: crate::lifecycle::error::ErrorKind::TeardownFailed,
                    phase: crate::lifecycle::error::ErrorPhase::Teardown,
                    message: format!("host {host} still runs it"),
                    stderr_tail: Vec::new(),
                });
            }
        }
        report.rank();
        return reply(report);
    }
    change_after_take_up(fleet, source, change, tx).await
}

/// `down --host NAME`: that host stops what it runs and leaves, and the other
/// hosts take its servers over; the answer shows where each server runs then.
#[cfg(feature = "etcd")]
async fn drain(fleet: &FleetHandle, source: Option<&FleetSource>, host: &str) -> Response {
    let Some(hosts) = fleet.fixed.hosts.clone() else {
        return Response::Error {
            message: "--host drains one host of a fleet across hosts; this fleet file has no `coordination:`".into(),
        };
    };
    if let Err(message) = fleet.take_up(source).await {
        return Response::Error { message };
    }
    let drained = match hosts.drain(host).await {
        Ok(drained) => drained,
        Err(message) => return Response::Error { message },
    };
    if host == hosts.me() {
        let handles = fleet.handles();
        let _ = host::request_all(&handles, Intent::Stop, CallOptions::default(), |_| {}).await;
        fleet.after_down().await;
    }
    let gone = hosts.wait_host_gone(host, std::time::Instant::now() + crate::supervisor::hosts::RELEASE_WAIT).await;
    let deadline = std::time::Instant::now() + hosts.placing_wait();
    hosts.wait_owned(&drained, deadline).await;
    let view = fleet.view();
    let lines = view
        .roster
        .servers
        .iter()
        .map(|h| ServerReport::of_state(&h.handle.published()))
        .collect();
    let mut report = Report::new("down", lines, false);
    hosts.place(&mut report).await;
    if !gone {
        report.exit_code = report
            .exit_code
            .max(crate::output::exit::Code::TeardownNotClean.as_i32());
        for line in &mut report.servers {
            if line.host.as_deref() == Some(host) {
                line.exit_code = crate::output::exit::Code::TeardownNotClean.as_i32();
            }
        }
    }
    reply(report)
}

/// `reconnect` on a host of a fleet across hosts: a server that another host
/// runs is reconnected there, not here; its line says which host
/// (`owned_elsewhere`, exit 6), and the others are reconnected as always.
#[cfg(feature = "etcd")]
async fn reconnect_here(
    fleet: &FleetHandle,
    source: Option<&FleetSource>,
    mut change: Change,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    use crate::lifecycle::error::{ErrorKind, ErrorPhase, ServerError};
    use crate::output::exit::Code;
    let Some(hosts) = fleet.fixed.hosts.clone() else {
        return change_after_take_up(fleet, source, change, tx).await;
    };
    if let Err(message) = fleet.take_up(source).await {
        return Response::Error { message };
    }
    let elsewhere = hosts.run_elsewhere(&change.names).await;
    if elsewhere.is_empty() {
        return self::change(fleet, change, tx).await;
    }
    change.names.retain(|n| !elsewhere.iter().any(|(name, _, _)| name == n));
    let mut report = match change.names.is_empty() {
        true => Report::new("reconnect", Vec::new(), false),
        false => match self::change(fleet, change, tx).await {
            Response::Reply {
                report: Answer::Report(report),
            } => report,
            other => return other,
        },
    };
    let view = fleet.view();
    for (name, host, generation) in elsewhere {
        let transport = view
            .roster
            .held(&name)
            .map_or("stdio", |h| h.spec.transport.kind());
        let error = ServerError::new(
            ErrorKind::OwnedElsewhere,
            ErrorPhase::Request,
            format!("{name} runs on host {host}; reconnect it there (`MCPFLEET_HOST={host}`)"),
        );
        let mut line =
            ServerReport::unpublished(&name, transport, crate::lifecycle::state::Phase::Running, Some(error), Code::Refused);
        line.generation = generation;
        line.host = Some(host);
        report.servers.push(line);
    }
    report.rank();
    reply(report)
}

/// On a host of a fleet that spans hosts, records that the servers `up`
/// reported on are wanted running, for every host to follow.
async fn want(fleet: &FleetHandle, up: &Up) -> Result<(), String> {
    #[cfg(feature = "etcd")]
    if let Some(hosts) = &fleet.fixed.hosts {
        // The servers of the file this `up` converges on: the request's, or
        // the one the supervisor runs. An invalid file is `up`'s to refuse.
        let file = match &up.fleet {
            Some(source) => match fleet.read_file(source) {
                Ok(file) => file,
                Err(_) => return Ok(()),
            },
            None => fleet.view().roster.fleet.clone(),
        };
        let names: Vec<String> = file
            .servers
            .iter()
            .filter(|s| s.enabled || up.servers.contains(&s.name))
            .filter(|s| up.servers.is_empty() || up.servers.contains(&s.name))
            .map(|s| s.name.clone())
            .collect();
        return hosts.want(&names, true).await;
    }
    let _ = (fleet, up);
    Ok(())
}

/// On a host of a fleet that spans hosts, waits (bounded) for the hosts that
/// the servers `up` could not start here are placed on to take them.
async fn placing(fleet: &FleetHandle, answer: &Response) {
    #[cfg(feature = "etcd")]
    if let Some(hosts) = &fleet.fixed.hosts
        && let Response::Reply {
            report: Answer::Report(report),
        } = answer
    {
        let elsewhere: Vec<String> = report
            .servers
            .iter()
            .filter(|s| {
                s.error
                    .as_ref()
                    .is_some_and(|e| e.kind == crate::lifecycle::error::ErrorKind::OwnedElsewhere)
            })
            .map(|s| s.name.clone())
            .collect();
        if !elsewhere.is_empty() {
            let deadline = std::time::Instant::now() + hosts.placing_wait();
            hosts.wait_owned(&elsewhere, deadline).await;
        }
    }
    let _ = (fleet, answer);
}

/// On a host of a fleet that spans hosts, shows where each server of the
/// answer runs.
async fn placed(fleet: &FleetHandle, answer: Response) -> Response {
    #[cfg(feature = "etcd")]
    if let Some(hosts) = &fleet.fixed.hosts
        && let Response::Reply {
            report: Answer::Report(mut report),
        } = answer
    {
        hosts.place(&mut report).await;
        return reply(report);
    }
    let _ = fleet;
    answer
}

/// A request that asks the same of each named server's authority: `down`,
/// `reconnect`, `reset`.
struct Change {
    command: &'static str,
    names: Vec<String>,
    intent: Intent,
    options: CallOptions,
    strict: bool,
}

/// [`change`], after taking up the request's fleet file.
async fn change_after_take_up(
    fleet: &FleetHandle,
    source: Option<&FleetSource>,
    change: Change,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    if let Err(message) = fleet.take_up(source).await {
        return Response::Error { message };
    }
    self::change(fleet, change, tx).await
}

/// Asks each selected server's authority for the change, streaming their
/// events; a `down` of the whole fleet closes the gateway's door after it and
/// says whether the supervisor stays.
async fn change(
    fleet: &FleetHandle,
    change: Change,
    tx: &mpsc::UnboundedSender<String>,
) -> Response {
    let Change {
        command,
        names,
        intent,
        options,
        strict,
    } = change;
    let must_name = matches!(intent, Intent::Reconnect { .. } | Intent::Reset);
    let unnamed = match intent {
        Intent::Stop => Unnamed::All,
        _ => Unnamed::Enabled,
    };
    let handles = match fleet.select(&names, unnamed) {
        Ok(_) if must_name && names.is_empty() => {
            return Response::Error {
                message: format!("{command} needs at least one server name"),
            };
        }
        Ok(h) => h,
        Err(message) => return Response::Error { message },
    };
    // `down` of the whole fleet closes the HTTP door too: once the servers are
    // down, so that the calls in flight get their answer (G4); meanwhile calls
    // through the gateway do not start servers again.
    let whole_fleet_down = intent == Intent::Stop && names.is_empty();
    let gateway = &fleet.fixed.gateway;
    if whole_fleet_down {
        gateway.hold_starts(true).await;
    }
    let replies = streaming(&fleet.fixed.events, &fleet.fixed.tracker, &handles, tx, |handles| async move {
        host::request_all(&handles, intent, options, |_| {}).await
    })
    .await;
    let supervisor = match whole_fleet_down {
        true => {
            let leaving = fleet.after_down().await;
            gateway.hold_starts(false).await;
            Some(leaving)
        }
        false => None,
    };
    if intent == Intent::Stop {
        // An orphan that `down` stopped is forgotten (docs/design.md §16).
        let stopped: Vec<String> = handles.iter().map(|h| h.name().to_owned()).collect();
        fleet.forget_orphans(stopped).await;
    }
    let lines = handles
        .iter()
        .zip(replies)
        .map(|(h, r)| ServerReport::of_reply(h.name(), r, intent, strict))
        .collect();
    let mut report = Report::new(command, lines, false);
    report.supervisor = supervisor;
    reply(report)
}

/// The gateway as `serve` and `status` show it.
fn gateway_report(fleet: &FleetHandle) -> GatewayReport {
    let open = fleet.listening();
    GatewayReport {
        url: open.as_ref().map(|o| o.url()),
        token_file: open
            .and_then(|o| o.token_file)
            .map(|f| f.display().to_string()),
        sessions: fleet.fixed.gateway.sessions(),
    }
}
