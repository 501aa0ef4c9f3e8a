//! The command line, as clap definitions. Parsed values are plain data; the
//! commands turn them into the objects they run. Also the source of
//! `completions/`, `man/` and the book's command reference.

pub mod complete;
pub mod examples;
pub mod reference;
pub(crate) mod values;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use values::{LineCount, Since};

use crate::config::Timeout;
use crate::output::report::Format;

/// The version as `--version` shows it: the package's, and the commit it was built
/// from when it was built in a git checkout (`build.rs`), e.g.
/// `0.1.0 (3f2a9c1 2026-12-01)`.
pub const VERSION: &str = env!("MCPFLEET_VERSION");

#[derive(Debug, Parser)]
#[command(
    name = "mcpfleet",
    version = VERSION,
    about = "Run a fleet of MCP servers: one serialized authority per server, bounded waits, verified teardown",
    long_about = None,
)]
pub struct Cli {
    /// The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or
    /// mcpfleet.yml in the current directory or above it); after `logs` and
    /// `events` only as --file (their -f is --follow)
    #[arg(short = 'f', long = "file", global = true, value_name = "FILE")]
    pub file: Option<PathBuf>,

    /// The fleet's state directory (default: $MCPFLEET_STATE_DIR, then
    /// $XDG_STATE_HOME/mcpfleet/<fleet>)
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Output format for the result on stdout
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Text)]
    pub output: Format,

    /// When to colour logs, warnings and errors on stderr, and help (auto: on a
    /// terminal, unless $NO_COLOR is set and not empty; always: also into a file
    /// or a pipe)
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// No progress and no log lines below errors on stderr
    #[arg(short, long, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// `--color`: whether stderr may carry ANSI colour escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// The `--color` of a command line that clap could not parse (its error or help
/// is still printed in the colour asked for): the last one given before `--`.
pub fn color_in(args: &[std::ffi::OsString]) -> ColorChoice {
    use clap::ValueEnum;
    let mut choice = ColorChoice::Auto;
    let mut words = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(word) = words.next() {
        let value = match word.strip_prefix("--color") {
            _ if word == "--" => break,
            Some("") => words.next(),
            Some(rest) => match rest.strip_prefix('=') {
                Some(v) => Some(v.to_owned().into()),
                None => continue,
            },
            None => continue,
        };
        if let Some(parsed) = value.and_then(|v| ColorChoice::from_str(&v, false).ok()) {
            choice = parsed;
        }
    }
    choice
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start servers in parallel, list their tools, tear them all down, verify
    /// that nothing of them is left, and report (for CI)
    Check(CheckArgs),
    /// Start servers (and the supervisor, when none runs) and wait until each is
    /// ready or failed
    Up(UpArgs),
    /// Tear servers down, verified; with no names, every server of the fleet
    Down(DownArgs),
    /// Show each server's state; never starts anything
    Status(StatusArgs),
    /// Stop a server's current generation, confirm it is gone, start the next
    Reconnect(ReconnectArgs),
    /// Clear a server's quarantine, once nothing of it is alive
    Reset(ResetArgs),
    /// List the tools of running servers, or of one server (started if needed)
    Tools(ToolsArgs),
    /// Call a tool of a server (started if needed) and print its result
    Call(CallArgs),
    /// Serve the fleet as one MCP server on stdin/stdout, for an MCP client to
    /// launch (starts the supervisor and the servers as `up` does)
    Connect(ConnectArgs),
    /// Serve the fleet as one MCP server over streamable HTTP at /mcp, from the
    /// supervisor, with a bearer token (starts the servers as `up` does)
    Serve(ServeArgs),
    /// Show the servers' stderr logs
    Logs(LogsArgs),
    /// Show the event log (every transition) as NDJSON
    Events(EventsArgs),
    /// Print the supervisor's metrics once, in Prometheus' text format (from
    /// state.json when no supervisor runs)
    Metrics(MetricsArgs),
    /// Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with
    /// PKCE): opens the browser, or prints the URL to open, and keeps the tokens
    Login(LoginArgs),
    /// Forget the tokens of remote servers, revoking them where the
    /// authorization server offers revocation
    Logout(LogoutArgs),
    /// Check a fleet file and print the resolved fleet (secrets redacted)
    Validate,
    /// List the fleets under the state root: name, fleet file, state directory,
    /// supervisor pid, servers running/total (with --state-dir, that one)
    Ls,
    /// Print a fleet file made from an MCP client's configuration: Claude Desktop,
    /// Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})
    Import(ImportArgs),
    /// Run the supervisor of a fleet (started by `up`; not for direct use)
    #[command(hide = true)]
    Supervise,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write every page into DIR
    #[command(hide = true)]
    Man {
        /// Write mcpfleet.1 and one page per command (mcpfleet-up.1, ...) here
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The completion script for `shell`, as checked into `completions/`.
pub fn completion_script(shell: clap_complete::Shell) -> Vec<u8> {
    complete::script(shell)
}

/// The command line as `mcpfleet` parses it: [`Cli`], with the exit codes after
/// the long help (`--help`) of the program and of every command.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let table = crate::output::exit::table();
    let with_table = |cmd: clap::Command| {
        let text = match cmd.get_after_help() {
            Some(after) => format!("{after}\n\n{table}"),
            None => table.clone(),
        };
        cmd.after_long_help(text)
    };
    with_table(Cli::command()).mut_subcommands(with_table)
}

/// The manual pages, as checked into `man/`: `mcpfleet.1`, then one per command
/// that `--help` lists (`mcpfleet-up.1`, ...), each with its file name. They say
/// the package's version, whatever `--version` adds to it, so that they change
/// only with the command line.
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    use clap::CommandFactory;
    let mut top = Cli::command()
        .version(env!("CARGO_PKG_VERSION"))
        .long_version(None::<&str>)
        .disable_help_subcommand(true);
    top.build();
    let mut commands = vec![top.clone()];
    commands.extend(top.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    commands
        .into_iter()
        .enumerate()
        .map(|(i, cmd)| {
            let examples = examples::of(if i == 0 { "mcpfleet" } else { cmd.get_name() });
            let man = clap_mangen::Man::new(cmd);
            let mut page = Vec::new();
            man.render(&mut page)
                .expect("rendering into memory does not fail");
            page.extend_from_slice(examples_section(examples).as_bytes());
            page.extend_from_slice(exit_status_section().as_bytes());
            (man.get_filename(), page)
        })
        .collect()
}

/// The EXAMPLES section of a manual page (roff); empty without examples.
fn examples_section(examples: &[examples::Example]) -> String {
    let roff = |text: &str| text.replace('\\', "\\e").replace('-', "\\-");
    let mut out = String::new();
    if examples.is_empty() {
        return out;
    }
    out.push_str(".SH EXAMPLES\n");
    for example in examples {
        out.push_str(&format!(
            ".PP\n{}:\n.PP\n.RS 4\n.nf\n\\fB{}\\fR\n.fi\n.RE\n",
            roff(example.about),
            roff(example.line)
        ));
    }
    out
}

/// The EXIT STATUS section of a manual page (roff).
fn exit_status_section() -> String {
    let mut out = String::from(".SH \"EXIT STATUS\"\nWhen servers end differently, the most severe code wins.\n");
    for code in crate::output::exit::Code::ALL {
        out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", code.as_i32(), code.meaning().replace('-', "\\-")));
    }
    out
}

#[derive(Debug, Args)]
#[command(
    after_help = "Servers are read from `mcpServers` (claude_desktop_config.json, .mcp.json, \
.cursor/mcp.json, mcp_config.json) or `servers` (.vscode/mcp.json). A secret written in the \
file (a value of an env variable or header whose name holds KEY, TOKEN, SECRET, PASSWORD or \
AUTH) is not copied: it becomes ${env:NAME}, and stderr says which variables to set. Entries \
that cannot be carried over (type sse, VS Code ${input:...}, unknown types) are kept as \
comments with the reason. The same file can be used directly: mcpfleet -f .mcp.json check"
)]
pub struct ImportArgs {
    /// The client's configuration file (JSON; VS Code's comments and trailing commas allowed)
    // Its id, `file`, keeps the global -f/--file out of `import`, which reads no
    // fleet file (a command's own argument of a global's id takes its place).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write the fleet file to PATH instead of stdout (refused if PATH exists, unless --force)
    #[arg(short = 'O', long = "out", value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Replace the file named by --out if it exists
    #[arg(long, requires = "out")]
    pub force: bool,
    /// The fleet's `name:` (default: the name of the directory the fleet file goes to, as with --out, else of the current directory)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Servers to check (default: every enabled server)
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,

    /// How many servers start at once (default: 4 per CPU core)
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,

    /// Count an escalated teardown (a signal was needed) as a failure: exit 5
    #[arg(long)]
    pub strict: bool,

    /// Override every server's connect timeout (e.g. 30s, 2m, none)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub connect_timeout: Option<Timeout>,

    /// Override every server's cleanup timeout (e.g. 5s, none)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub cleanup_timeout: Option<Timeout>,

    /// Also write a JUnit XML report to FILE: one test case per server (stdout and
    /// the exit code stay the same)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Compare each server's tools (names, input and output schemas) with the
    /// snapshot FILE; a difference exits 9
    #[arg(long, value_name = "FILE")]
    pub expect_tools: Option<PathBuf>,

    /// Write the tools of every server that started to the snapshot FILE (the
    /// entries of servers that did not start are kept)
    #[arg(long, value_name = "FILE")]
    pub update_tools: Option<PathBuf>,
}

/// How long to wait for a server's authority to take the request.
#[derive(Debug, Args, Clone, Copy)]
pub struct WaitArgs {
    /// Give up (exit 7) if the server's authority has not taken the request within
    /// this long; the request is then withdrawn, never run later
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub wait_timeout: Option<Timeout>,
}

#[derive(Debug, Args, Clone)]
pub struct UpArgs {
    /// Servers to start (default: every enabled server)
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Recover a quarantined server: SIGKILL what is left of it, confirm, start
    #[arg(long)]
    pub force: bool,
    /// Run the supervisor in this terminal: Ctrl-C tears everything down, a second
    /// Ctrl-C SIGKILLs the servers, a third exits at once
    #[arg(long)]
    pub foreground: bool,
    /// Print the plan (start, restart and why, keep, orphaned, stop) and change
    /// nothing
    #[arg(long, conflicts_with_all = ["foreground", "watch"])]
    pub dry_run: bool,
    /// Stop the servers that are no longer in the fleet file (otherwise they are
    /// left running, as orphans, until `down`)
    #[arg(long)]
    pub remove_orphans: bool,
    /// Stay in the foreground and apply every change of the fleet file as it is
    /// saved; Ctrl-C ends the watch and leaves the fleet up (with --foreground it
    /// tears the fleet down)
    #[arg(long)]
    pub watch: bool,
    /// Override the connect timeout for this start (e.g. 30s, none)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub connect_timeout: Option<Timeout>,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// Servers the client sees (default: every enabled server)
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Override the connect timeout of the servers' start (e.g. 30s, none)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub connect_timeout: Option<Timeout>,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Servers to start with it (default: every enabled server); clients see all
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Where to listen, ADDRESS:PORT (default: 127.0.0.1:7077; port 0 picks one)
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Override the connect timeout of the servers' start (e.g. 30s, none)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub connect_timeout: Option<Timeout>,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Debug, Args)]
pub struct DownArgs {
    /// Servers to tear down (default: all of them)
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Count an escalated teardown as a failure: exit 5
    #[arg(long)]
    pub strict: bool,
    /// Override the cleanup timeout for this teardown
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub cleanup_timeout: Option<Timeout>,
    /// In a fleet across hosts: drain this host only (its servers stop there
    /// and other hosts take them over; its supervisor leaves)
    #[arg(long, value_name = "HOST", conflicts_with = "servers")]
    pub host: Option<String>,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Print OpenMetrics 1.0 text instead of Prometheus' text format 0.0.4
    #[arg(long)]
    pub openmetrics: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Servers to show (default: all of them)
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Servers to authorize (default: every remote server with `auth: oauth`)
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// Print the URL to open, and start no browser
    #[arg(long)]
    pub no_browser: bool,
    /// How long to wait for the authorization, per server (default 5m)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<Timeout>,
}

#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// Servers whose tokens to forget
    #[arg(value_name = "SERVER", required = true)]
    pub servers: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReconnectArgs {
    /// Servers to reconnect
    #[arg(value_name = "SERVER", required = true)]
    pub servers: Vec<String>,
    /// Only if the current generation is N; otherwise refuse (exit 6)
    #[arg(long, value_name = "N")]
    pub if_generation: Option<u64>,
    /// Recover a quarantined server first
    #[arg(long)]
    pub force: bool,
    /// Count an escalated teardown as a failure: exit 5
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Debug, Args)]
pub struct ResetArgs {
    /// The quarantined server
    #[arg(value_name = "SERVER")]
    pub server: String,
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Only this server (started if it is not running)
    #[arg(value_name = "SERVER")]
    pub server: Option<String>,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The server
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// The tool
    #[arg(value_name = "TOOL")]
    pub tool: String,
    /// The tool's arguments, as a JSON object
    #[arg(long = "args", value_name = "JSON")]
    pub arguments: Option<String>,
    /// How long the call may take (default 60s)
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<Timeout>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The fleet file, as -f/--file before the command (-f here is --follow)
    #[arg(long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Only this server's log (default: all, each line prefixed with its server)
    #[arg(value_name = "SERVER", conflicts_with = "gateway")]
    pub server: Option<String>,
    /// The gateway's log instead: client sessions, refused HTTP requests, calls a
    /// server could not serve, servers' requests relayed to clients
    #[arg(long)]
    pub gateway: bool,
    /// Keep printing what is written
    #[arg(short, long)]
    pub follow: bool,
    /// How many of the last lines of each log to print first, or `all`
    #[arg(short = 'n', long = "lines", visible_alias = "tail", value_name = "N", default_value = "100", value_parser = values::parse_line_count)]
    pub lines: LineCount,
    /// Only lines written since then: a duration before now (10m, 1h30m) or an
    /// RFC 3339 time (2026-05-04T10:21:07Z)
    #[arg(long, value_name = "WHEN", value_parser = values::parse_since)]
    pub since: Option<Since>,
    /// Begin each line of a server's log with the time it was written (UTC RFC
    /// 3339); the gateway's lines always begin with theirs
    #[arg(short, long)]
    pub timestamps: bool,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The fleet file, as -f/--file before the command (-f here is --follow)
    #[arg(long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Keep printing events as they are recorded
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N events, or `all`
    #[arg(short = 'n', long = "lines", visible_alias = "tail", value_name = "N", default_value = "all", value_parser = values::parse_line_count)]
    pub lines: LineCount,
    /// Only events since then: a duration before now (10m, 1h30m) or an RFC 3339
    /// time (2026-05-04T10:21:07Z)
    #[arg(long, value_name = "WHEN", value_parser = values::parse_since)]
    pub since: Option<Since>,
}

fn parse_timeout(s: &str) -> Result<Timeout, String> {
    crate::config::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::Path;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn jobs_must_be_positive_and_durations_valid() {
        assert!(Cli::try_parse_from(["mcpfleet", "check", "-j", "0"]).is_err());
        assert!(Cli::try_parse_from(["mcpfleet", "check", "--connect-timeout", "soon"]).is_err());
        let cli = Cli::try_parse_from(["mcpfleet", "check", "a", "b", "--connect-timeout", "none"])
            .expect("parses");
        match cli.command {
            Command::Check(args) => {
                assert_eq!(args.servers, vec!["a", "b"]);
                assert_eq!(args.connect_timeout, Some(Timeout::Never));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn global_flags_go_before_or_after_the_command() {
        let cli =
            Cli::try_parse_from(["mcpfleet", "status", "-f", "x.yaml", "-o", "json"]).unwrap();
        assert_eq!(cli.file.as_deref(), Some(Path::new("x.yaml")));
        assert_eq!(cli.output, Format::Json);
        let cli = Cli::try_parse_from(["mcpfleet", "-f", "x.yaml", "logs", "-f"]).unwrap();
        assert_eq!(cli.file.as_deref(), Some(Path::new("x.yaml")));
        let Command::Logs(args) = cli.command else {
            panic!()
        };
        assert!(args.follow);
        let cli = Cli::try_parse_from(["mcpfleet", "logs", "--file", "y.yaml", "-f"]).unwrap();
        assert_eq!(cli.file.as_deref(), Some(Path::new("y.yaml")));
        let cli = Cli::try_parse_from(["mcpfleet", "events", "--color", "never", "--file", "z"]);
        let cli = cli.unwrap();
        assert_eq!(cli.file.as_deref(), Some(Path::new("z")));
        assert_eq!(cli.color, ColorChoice::Never);
        let Command::Import(args) =
            Cli::try_parse_from(["mcpfleet", "import", "a.json", "-O", "f.yaml", "-o", "json"])
                .unwrap()
                .command
        else {
            panic!()
        };
        assert_eq!(args.out.as_deref(), Some(Path::new("f.yaml")));
    }

    #[test]
    fn the_colour_of_an_unparsed_command_line() {
        let args = |words: &[&str]| -> Vec<std::ffi::OsString> {
            std::iter::once("mcpfleet")
                .chain(words.iter().copied())
                .map(Into::into)
                .collect()
        };
        assert_eq!(color_in(&args(&["bogus"])), ColorChoice::Auto);
        assert_eq!(
            color_in(&args(&["--color", "always", "x"])),
            ColorChoice::Always
        );
        assert_eq!(
            color_in(&args(&["up", "--color=never"])),
            ColorChoice::Never
        );
        assert_eq!(
            color_in(&args(&["--color=never", "--color", "always"])),
            ColorChoice::Always
        );
        assert_eq!(color_in(&args(&["--color", "pink"])), ColorChoice::Auto);
        assert_eq!(color_in(&args(&["--colors=never"])), ColorChoice::Auto);
        assert_eq!(color_in(&args(&["--", "--color=never"])), ColorChoice::Auto);
    }
}
