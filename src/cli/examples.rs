//! Examples of the program and of every command, in one place: the manual pages
//! carry them as EXAMPLES, and the book's command reference
//! (`docs/src/reference/commands.md`) shows them under each command.

/// One example: a command line and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Example {
    /// What the command line does, as a sentence.
    pub about: &'static str,
    /// The command line, as typed in a shell.
    pub line: &'static str,
}

/// An [`Example`] as a constant, so that the lists below are `'static`.
macro_rules! ex {
    ($about:expr, $line:expr $(,)?) => {
        Example {
            about: $about,
            line: $line,
        }
    };
}

/// The examples of `command`: a command's name (`up`, `logs`, ...), or `mcpfleet`
/// for the program itself. Empty for a name that has none (the hidden commands).
pub fn of(command: &str) -> &'static [Example] {
    match command {
        "mcpfleet" => &[
            ex!(
                "Start every server of the example fleet, list its tools, tear it down and verify that nothing is left",
                "mcpfleet -f config/example.yaml check",
            ),
            ex!(
                "Start the fleet of the nearest mcpfleet.yaml under a supervisor, then stop it",
                "mcpfleet up && mcpfleet down",
            ),
            ex!(
                "The state of every server, as JSON",
                "mcpfleet status -o json",
            ),
        ],
        "check" => &[
            ex!(
                "Check every enabled server of the fleet file",
                "mcpfleet -f mcpfleet.yaml check",
            ),
            ex!(
                "In CI: fail on an escalated teardown, write a JUnit report, and hold the tools to a snapshot",
                "mcpfleet check --strict --junit reports/mcpfleet.xml --expect-tools mcp-tools.json",
            ),
            ex!(
                "Write the snapshot of every server's tools that --expect-tools compares with",
                "mcpfleet check --update-tools mcp-tools.json",
            ),
            ex!(
                "Check two servers, two starts at a time, with a longer connect deadline",
                "mcpfleet check memory time --jobs 2 --connect-timeout 60s",
            ),
        ],
        "up" => &[
            ex!(
                "Start every enabled server (and the supervisor, when none runs)",
                "mcpfleet up",
            ),
            ex!(
                "Show what `up` would change after an edit of the fleet file, and change nothing",
                "mcpfleet up --dry-run",
            ),
            ex!(
                "Converge on the fleet file, and stop the servers it no longer has",
                "mcpfleet up --remove-orphans",
            ),
            ex!(
                "Recover a quarantined server: end what is left of it, then start it",
                "mcpfleet up memory --force",
            ),
            ex!(
                "Run the supervisor in this terminal (Ctrl-C tears the fleet down)",
                "mcpfleet up --foreground",
            ),
        ],
        "down" => &[
            ex!(
                "Tear the whole fleet down, verified, and stop the supervisor",
                "mcpfleet down",
            ),
            ex!(
                "Tear one server down, and fail (exit 5) if it needed a signal",
                "mcpfleet down memory --strict",
            ),
        ],
        "status" => &[
            ex!("The state of every server", "mcpfleet status"),
            ex!(
                "One server's state, generation, last error and drift, as JSON",
                "mcpfleet status memory -o json",
            ),
        ],
        "reconnect" => &[
            ex!(
                "Stop the server's generation, confirm it is gone, start the next",
                "mcpfleet reconnect memory",
            ),
            ex!(
                "The same, only if generation 3 is still the current one (else exit 6)",
                "mcpfleet reconnect memory --if-generation 3",
            ),
        ],
        "login" => &[
            ex!(
                "Authorize every server with `auth: oauth`, in the browser",
                "mcpfleet login",
            ),
            ex!(
                "Print the URL to open elsewhere, and wait up to 10 minutes",
                "mcpfleet login github --no-browser --timeout 10m",
            ),
        ],
        "logout" => &[ex!(
            "Forget (and revoke) a server's tokens",
            "mcpfleet logout github",
        )],
        "reset" => &[ex!(
            "Clear the quarantine of a server once nothing of it is alive",
            "mcpfleet reset memory",
        )],
        "tools" => &[
            ex!("The tools of every running server", "mcpfleet tools"),
            ex!(
                "The tools of one server, started if needed, each whole, as JSON",
                "mcpfleet tools memory -o json",
            ),
        ],
        "call" => &[
            ex!(
                "Call a tool without arguments",
                "mcpfleet call memory read_graph",
            ),
            ex!(
                "Call a tool with arguments, allowing it 2 minutes",
                "mcpfleet call time get_current_time --args '{\"timezone\": \"UTC\"}' --timeout 2m",
            ),
        ],
        "connect" => &[
            ex!(
                "What an MCP client launches to see the whole fleet as one server",
                "mcpfleet -f /path/to/fleet.yaml connect",
            ),
            ex!(
                "The same, offering two servers only",
                "mcpfleet -f /path/to/fleet.yaml connect memory time",
            ),
        ],
        "serve" => &[
            ex!(
                "Serve the fleet over streamable HTTP at http://127.0.0.1:7077/mcp",
                "mcpfleet serve",
            ),
            ex!(
                "The same on a port the system picks (serve and status print it)",
                "mcpfleet serve --listen 127.0.0.1:0",
            ),
        ],
        "logs" => &[
            ex!(
                "The last 100 lines of every server's stderr, each after its server's name",
                "mcpfleet logs",
            ),
            ex!(
                "Follow one server's log, each line after the time it was written",
                "mcpfleet logs memory -f --timestamps",
            ),
            ex!(
                "The gateway's log of the last 10 minutes",
                "mcpfleet logs --gateway --since 10m",
            ),
        ],
        "events" => &[
            ex!("Every transition recorded, as NDJSON", "mcpfleet events"),
            ex!(
                "The last 20 events, then every new one as it is recorded",
                "mcpfleet events --tail 20 -f",
            ),
        ],
        "metrics" => &[
            ex!(
                "The supervisor's metrics, in Prometheus' text format",
                "mcpfleet metrics",
            ),
            ex!("The same in OpenMetrics 1.0", "mcpfleet metrics --openmetrics"),
        ],
        "validate" => &[ex!(
            "Check a fleet file and print the fleet as resolved, secrets redacted",
            "mcpfleet -f mcpfleet.yaml validate",
        )],
        "ls" => &[
            ex!("The fleets under the state root", "mcpfleet ls"),
            ex!("The same, as JSON", "mcpfleet ls -o json"),
        ],
        "import" => &[
            ex!(
                "Print a fleet file made from Claude Desktop's configuration",
                "mcpfleet import ~/.config/Claude/claude_desktop_config.json",
            ),
            ex!(
                "Write a fleet file from VS Code's configuration, named `tools`",
                "mcpfleet import .vscode/mcp.json --out mcpfleet.yaml --name tools",
            ),
        ],
        "completions" => &[ex!(
            "Install the bash completion for your user",
            "mcpfleet completions bash > ~/.local/share/bash-completion/completions/mcpfleet",
        )],
        _ => &[],
    }
}
