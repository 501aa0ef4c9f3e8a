use clap::Parser;
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors exit 2.
            let _ = e.print();
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
    mcpfleet::logging::init(cli.verbose, cli.quiet);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpfleet: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let code = runtime.block_on(mcpfleet::commands::run(cli));
    std::process::ExitCode::from(code.as_i32() as u8)
}
