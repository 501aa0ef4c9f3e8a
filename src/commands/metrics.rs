//! `mcpfleet metrics`: the supervisor's metrics, printed once as a scrape would
//! get them (for node_exporter's textfile collector and for scripts). With no
//! supervisor, the gauges that `state.json` and the process table tell, with
//! `mcpfleet_supervisor_up 0` and no counters (docs/design.md §17).

use super::answer::offline_report;
use super::request::no_report;
use super::target::Target;
use super::{CliError, Global, client};
use crate::cli::MetricsArgs;
use crate::metrics::exposition::Format;
use crate::metrics::{ServerView, View};
use crate::output::exit::Code;
use crate::output::report;
use crate::protocol::Op;
use crate::protocol::MetricsText;
use crate::state::Persisted;

pub(crate) async fn run(t: Target, args: &MetricsArgs, g: &Global) -> Result<Code, CliError> {
    let format = if args.openmetrics {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    };
    let (text, running) = match client::connect(&t.dir, &t.fleet.file, false).await {
        Ok(stream) => {
            let op = Op::Metrics {
                openmetrics: args.openmetrics,
            };
            match client::request::<MetricsText>(stream, op, |_| {}).await {
                Ok(answer) => (answer.metrics, true),
                // The supervisor was exiting idle: state.json tells the rest.
                Err(client::ClientError::Unread(_)) => (offline(&t, format)?, false),
                Err(e) => {
                    let interrupted = "mcpfleet metrics: interrupted";
                    return no_report(e, "metrics", interrupted, g);
                }
            }
        }
        Err(_) => (offline(&t, format)?, false),
    };
    let out = match g.output {
        report::Format::Text => text,
        _ => report::json_line(&serde_json::json!({
            "command": "metrics",
            "supervisor": running,
            "format": format.content_type(),
            "metrics": text,
        })),
    };
    report::write_stdout(&out).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    Ok(Code::Ok)
}

/// The gauges of every server from `state.json` and the process table.
fn offline(t: &Target, format: Format) -> Result<String, CliError> {
    let persisted = Persisted::load(&t.dir.state()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let names: Vec<&str> = t.fleet.servers.iter().map(|s| s.name.as_str()).collect();
    let lines = offline_report(&t.fleet, &t.dir, &persisted, &names);
    let view = View {
        servers: lines
            .into_iter()
            .map(|line| ServerView {
                name: line.name,
                state: line.state,
                generation: line.generation,
                uptime: None,
                queued: None,
                escaped: 0,
            })
            .collect(),
        ..View::default()
    };
    Ok(crate::metrics::render(None, view, format))
}
