//! Sending one request to the supervisor (starting one when asked), showing its
//! progress and events as the output format asks, and turning its answer, or its
//! absence, into an exit code.


use super::client::{self, ClientError};
use super::target::Target;
use super::{CliError, Global};
use crate::cli::UpArgs;
use crate::lifecycle::state::Phase;
use crate::output::exit::Code;
use crate::output::progress::Progress;
use crate::output::report::{self, Format, Report};
use crate::protocol::{Deadlines, Op};

use super::answer::{emit, unreachable};

/// The `up` request of `args`, carrying the fleet file as `t` read it.
pub(super) fn up_op(t: &Target, args: &UpArgs, dry_run: bool) -> Op {
    Op::Up {
        servers: args.servers.clone(),
        force: args.force,
        deadlines: Deadlines {
            wait_ms: args.wait.wait_timeout,
            connect_ms: args.connect_timeout,
            cleanup_ms: None,
        },
        fleet: t.source.clone(),
        dry_run,
        remove_orphans: args.remove_orphans,
    }
}

pub(super) async fn send(
    t: &Target,
    op: Op,
    start: bool,
    command: &'static str,
    g: &Global,
) -> Result<Code, CliError> {
    finish(ask(t, op, start, command, g).await, command, g)
}

/// Sends `op` (starting a supervisor when `start`), showing its progress and
/// events as the output format asks, and returns its report.
pub(super) async fn ask(
    t: &Target,
    op: Op,
    start: bool,
    command: &'static str,
    g: &Global,
) -> Result<Report, ClientError> {
    let ndjson = g.output == Format::Ndjson;
    let verbose = g.verbose > 0 && g.output == Format::Text;
    let progress = Progress::new(!g.quiet && g.output == Format::Text && g.verbose == 0);
    let total = match &op {
        Op::Up { servers, .. } | Op::Down { servers, .. } | Op::Reconnect { servers, .. }
            if !servers.is_empty() =>
        {
            servers.len()
        }
        _ => t.fleet.servers.len(),
    };
    progress.stage(command, total);
    let result = client::ask(&t.dir, &t.fleet.file, start, op, |event| {
        // A server is done when it reaches a state that ends the request for it.
        let settled =
            matches!(
                event.to,
                Phase::Running | Phase::Failed | Phase::Quarantined
            ) || (event.to == Phase::Stopped && event.from == Phase::Stopping && command == "down");
        if settled {
            progress.done_one(&event.server);
        }
        if ndjson {
            let _ = report::write_stdout(&report::event_line(&event));
        } else if verbose {
            let (from, to) = (event.from.as_str(), event.to.as_str());
            eprintln!("{:?} {from:?} -> {to:?}", event.server);
        }
    })
    .await;
    progress.finish();
    result
}

pub(super) fn finish(
    result: Result<Report, ClientError>,
    command: &'static str,
    g: &Global,
) -> Result<Code, CliError> {
    match result {
        Ok(report) => emit(report, g),
        Err(e) => {
            let interrupted = format!(
                "mcpfleet {command}: interrupted; the supervisor carries on with the request (see `mcpfleet status` and `mcpfleet events`)"
            );
            no_report(e, command, &interrupted, g)
        }
    }
}

/// What a request that got no report ends in: an interruption (130, after
/// `interrupted` on stderr), a usage error, an internal error, or an unreachable
/// supervisor.
pub(super) fn no_report(
    e: ClientError,
    command: &str,
    interrupted: &str,
    g: &Global,
) -> Result<Code, CliError> {
    match e {
        ClientError::Interrupted => {
            eprintln!("{interrupted}");
            Ok(Code::Interrupted)
        }
        ClientError::Refused(m) if m.starts_with("usage: ") => {
            Err(CliError::Usage(m["usage: ".len()..].to_owned()))
        }
        ClientError::Refused(m) | ClientError::Unreadable(m) => {
            Err(CliError::Internal(anyhow::anyhow!(m)))
        }
        e @ (ClientError::Unreachable(_) | ClientError::Unread(_)) => {
            Ok(unreachable(command, &e, g))
        }
        e @ ClientError::OtherBuild { .. } => Ok(super::other_build::refuse(command, &e, g)),
    }
}
