//! `mcpfleet validate`: check a fleet file and print the resolved fleet, with every
//! value that came from `${env:...}` shown as its template, never its value.

use std::path::Path;

use serde_json::json;

use super::{CliError, Global, load_fleet};
use crate::output::exit::Code;
use crate::output::report::{Format, SCHEMA_VERSION, write_stdout};

pub(crate) fn run(file: Option<&Path>, global: &Global) -> Result<Code, CliError> {
    let fleet = load_fleet(file)?;
    let text = match global.output {
        Format::Text => fleet.resolved_yaml(),
        Format::Json | Format::Ndjson => {
            let doc = json!({
                "schema_version": SCHEMA_VERSION,
                "command": "validate",
                "exit_code": 0,
                "file": fleet.file,
                "fleet": fleet.resolved_json(),
            });
            if global.output == Format::Json {
                format!(
                    "{}\n",
                    serde_json::to_string_pretty(&doc).expect("json values serialize")
                )
            } else {
                format!("{doc}\n")
            }
        }
    };
    write_stdout(&text).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
    if !global.quiet && global.output == Format::Text {
        eprintln!(
            "{}: valid, {} server(s), {} enabled",
            fleet.file.display(),
            fleet.servers.len(),
            fleet.enabled().count()
        );
    }
    Ok(Code::Ok)
}
