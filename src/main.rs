use mcpfleet::cli::Cli;

fn main() -> std::process::ExitCode {
    // A supervisor's guardian, as it execs itself (see supervisor::guardian).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == mcpfleet::supervisor::guardian::GUARD_ARG)
    {
        let code = mcpfleet::supervisor::guardian::run_from_args(&args).unwrap_or(2);
        return std::process::ExitCode::from(code);
    }
    // A `connect` that handed its stdin and stdout over, as it execs itself (see
    // commands::connect).
    if args
        .get(1)
        .is_some_and(|a| a == mcpfleet::commands::connect::HELD_ARG)
    {
        let code = mcpfleet::commands::connect::held_from_args(&args).unwrap_or(2);
        return std::process::ExitCode::from(code);
    }
    // A completion script asking for the fleet's server names (see cli::complete).
    if args
        .get(1)
        .is_some_and(|a| a == mcpfleet::cli::complete::SERVERS_ARG)
    {
        let code = mcpfleet::cli::complete::servers_from_args(&args);
        return std::process::ExitCode::from(code);
    }
    let parsed = mcpfleet::cli::command()
        .try_get_matches_from(&args)
        .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors exit 2.
            print_clap(&e, mcpfleet::cli::color_in(&args));
            return std::process::ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // A detached supervisor gets a guardian above it (see supervisor::guardian),
    // forked before any thread exists.
    if let (mcpfleet::cli::Command::Supervise, Some(dir)) = (&cli.command, &cli.state_dir)
        && let Some(code) = mcpfleet::supervisor::guardian::split(dir)
    {
        return std::process::ExitCode::from(code);
    }
    mcpfleet::logging::init(cli.verbose, cli.quiet, cli.color);
    // `connect` waits for one connection most of its life (after handing its stdin
    // and stdout to the supervisor): one thread does, and keeps its memory small.
    let runtime = match &cli.command {
        mcpfleet::cli::Command::Connect(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Runtime::new(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpfleet: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    // The commands run the supervisor in this process for `up --foreground` and
    // `supervise`; they get it from here, as they do not depend on it.
    let code = runtime.block_on(mcpfleet::commands::run(
        cli,
        |fleet, dir, source, version, foreground| {
            Box::pin(mcpfleet::supervisor::run(
                fleet, dir, source, version, foreground,
            ))
        },
    ));
    std::process::ExitCode::from(code.as_i32() as u8)
}

/// Prints clap's usage error (stderr) or help (stdout), coloured as `--color`
/// and `$NO_COLOR` say for that stream.
fn print_clap(e: &clap::Error, color: mcpfleet::cli::ColorChoice) {
    use std::io::{IsTerminal, Write};
    let styled = e.render();
    let write = |out: &mut dyn Write, terminal: bool| {
        let no_color = std::env::var_os("NO_COLOR");
        let _ = if mcpfleet::logging::colored(color, terminal, no_color.as_deref()) {
            write!(out, "{}", styled.ansi())
        } else {
            write!(out, "{styled}")
        };
        let _ = out.flush();
    };
    if e.use_stderr() {
        write(
            &mut std::io::stderr().lock(),
            std::io::stderr().is_terminal(),
        );
    } else {
        write(
            &mut std::io::stdout().lock(),
            std::io::stdout().is_terminal(),
        );
    }
}
