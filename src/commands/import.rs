//! `mcpfleet import FILE`: the fleet file made from an MCP client's configuration
//! (docs/design.md §15), on stdout or in the file named by `--out`; on stderr,
//! the variables to set for the secrets that were not copied, and what was
//! renamed or not carried over.

use std::io::Write;

use super::{CliError, Global};
use crate::cli::ImportArgs;
use crate::config::import;
use crate::output::exit::Code;
use crate::output::report::write_stdout;

pub(crate) fn run(args: &ImportArgs, global: &Global) -> Result<Code, CliError> {
    let name = fleet_name(args)?;
    let imported = import::read(&args.file).map_err(CliError::Import)?;
    let text = imported.fleet_file_named(Some(&name));
    match &args.out {
        None => write_stdout(&text).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?,
        Some(path) => {
            let mut options = std::fs::OpenOptions::new();
            options.write(true);
            match args.force {
                true => options.create(true).truncate(true),
                false => options.create_new(true),
            };
            let mut file = options.open(path).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => CliError::Usage(format!(
                    "{} exists; give --force to replace it",
                    path.display()
                )),
                _ => anyhow::anyhow!("cannot write {}: {e}", path.display()).into(),
            })?;
            file.write_all(text.as_bytes())
                .and_then(|()| file.flush())
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
    }
    if !global.quiet {
        for notice in imported.notices() {
            eprintln!("mcpfleet import: {notice}");
        }
    }
    // Without these the fleet does not start: said even with --quiet.
    if !imported.secrets.is_empty() {
        eprintln!(
            "mcpfleet import: {} secret(s) of {} were not copied; set these environment variables:",
            imported.secrets.len(),
            args.file.display()
        );
        for secret in &imported.secrets {
            eprintln!("  {}  ({})", secret.var, secret.origin);
        }
    }
    if !global.quiet {
        let servers = imported.servers.len();
        let skipped = imported.skipped.len();
        let to = match &args.out {
            Some(path) => path.display().to_string(),
            None => "stdout".to_string(),
        };
        eprintln!(
            "mcpfleet import: {servers} server(s) imported from {} ({}) to {to} as fleet `{name}`, \
             {skipped} not carried over",
            args.file.display(),
            imported.client.name()
        );
    }
    Ok(Code::Ok)
}

/// The fleet's name: `--name`, else the name of the directory the fleet file
/// goes to (`--out`'s, else the current one), as docker compose names a project.
fn fleet_name(args: &ImportArgs) -> Result<String, CliError> {
    if let Some(name) = &args.name {
        return match crate::config::is_name(name) {
            true => Ok(name.clone()),
            false => Err(CliError::Usage(format!(
                "--name {name:?} is not a fleet name: lowercase letters, digits, `-` and `_`, \
                 starting with a letter or digit, at most 63"
            ))),
        };
    }
    let dir = match args.out.as_deref().and_then(std::path::Path::parent) {
        Some(parent) if !parent.as_os_str().is_empty() => std::path::absolute(parent),
        _ => std::env::current_dir(),
    }
    .map_err(|e| anyhow::anyhow!("cannot tell the current directory: {e}"))?;
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    Ok(import::name_for_dir(&dir))
}
