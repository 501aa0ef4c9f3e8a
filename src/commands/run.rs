//! From the parsed command line to the command that runs it, and its exit code.

use std::future::Future;
use std::path::Path;


use crate::cli::{Cli, Command};
use crate::output::exit::Code;
use crate::output::report::{
    Format,
    write_stdout,
};
use super::target::{FileNeed, Target};

use super::cli_error::CliError;
use super::global::Global;
use super::fleet_ops::Supervisor;
use super::{auth, check, connect, fleet_ops, import, ls, metrics, observe, validate};

/// Runs the parsed command line and returns its exit code. Prints the result and
/// any error; never exits the process itself.
pub async fn run(cli: Cli, supervisor: Supervisor) -> Code {
    let global = Global {
        output: cli.output,
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    let (name, result) = match &cli.command {
        Command::Check(args) => (
            "check",
            check::run(cli.file.as_deref(), cli.state_dir.as_deref(), args, &global).await,
        ),
        Command::Validate => ("validate", validate::run(cli.file.as_deref(), &global)),
        Command::Ls => ("ls", ls::run(cli.state_dir.as_deref(), &global).await),
        Command::Import(args) => ("import", import::run(args, &global)),
        Command::Up(args) => (
            "up",
            with_target(&cli, FileNeed::File, |t| {
                fleet_ops::up(t, args, &global, supervisor)
            })
            .await,
        ),
        Command::Down(args) => (
            "down",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                fleet_ops::down(t, args, &global)
            })
            .await,
        ),
        Command::Status(args) => (
            "status",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                fleet_ops::status(t, args, &global)
            })
            .await,
        ),
        Command::Reconnect(args) => (
            "reconnect",
            with_target(&cli, FileNeed::File, |t| {
                fleet_ops::reconnect(t, args, &global)
            })
            .await,
        ),
        Command::Reset(args) => (
            "reset",
            with_target(&cli, FileNeed::File, |t| fleet_ops::reset(t, args, &global)).await,
        ),
        Command::Login(args) => (
            "login",
            with_target(&cli, FileNeed::File, |t| auth::login(t, args, &global)).await,
        ),
        Command::Logout(args) => (
            "logout",
            with_target(&cli, FileNeed::CopyWillDo, |t| auth::logout(t, args, &global)).await,
        ),
        Command::Tools(args) => (
            "tools",
            with_target(&cli, FileNeed::File, |t| observe::tools(t, args, &global)).await,
        ),
        Command::Call(args) => (
            "call",
            with_target(&cli, FileNeed::File, |t| observe::call(t, args, &global)).await,
        ),
        Command::Connect(args) => (
            "connect",
            with_target(&cli, FileNeed::File, |t| connect::connect(t, args, &global)).await,
        ),
        Command::Serve(args) => (
            "serve",
            with_target(&cli, FileNeed::File, |t| fleet_ops::serve(t, args, &global)).await,
        ),
        Command::Logs(args) => (
            "logs",
            with_target(&cli, FileNeed::CopyWillDo, |t| observe::logs(t, args)).await,
        ),
        Command::Events(args) => (
            "events",
            with_target(&cli, FileNeed::CopyWillDo, |t| observe::events(t, args)).await,
        ),
        Command::Metrics(args) => (
            "metrics",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                metrics::run(t, args, &global)
            })
            .await,
        ),
        Command::Supervise => (
            "supervise",
            with_target(&cli, FileNeed::CopyWillDo, |t| {
                fleet_ops::supervise(t, supervisor)
            })
            .await,
        ),
        Command::Completions { shell } => {
            let script = crate::cli::completion_script(*shell);
            let text = String::from_utf8_lossy(&script);
            let written = write_stdout(&text)
                .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into());
            ("completions", written.map(|()| Code::Ok))
        }
        Command::Man { dir } => ("man", man(dir.as_deref())),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mcpfleet {name}: {e:#}");
            if global.output != Format::Text {
                let _ = write_stdout(&e.to_json(name));
            }
            e.code()
        }
    }
}

/// `mcpfleet man`: the main page on stdout, or every page written into `dir`.
fn man(dir: Option<&Path>) -> Result<Code, CliError> {
    let pages = crate::cli::man_pages();
    let Some(dir) = dir else {
        let (_, main) = &pages[0];
        write_stdout(&String::from_utf8_lossy(main))
            .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))?;
        return Ok(Code::Ok);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    for (name, page) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, page)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(Code::Ok)
}

async fn with_target<F, Fut>(cli: &Cli, need: FileNeed, f: F) -> Result<Code, CliError>
where
    F: FnOnce(Target) -> Fut,
    Fut: Future<Output = Result<Code, CliError>>,
{
    let target = Target::load(cli.file.as_deref(), cli.state_dir.as_deref(), need)?;
    f(target).await
}
