
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'mcpfleet' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'mcpfleet'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'mcpfleet' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)')
            [CompletionResult]::new('up', 'up', [CompletionResultType]::ParameterValue, 'Start servers (and the supervisor, when none runs) and wait until each is ready or failed')
            [CompletionResult]::new('down', 'down', [CompletionResultType]::ParameterValue, 'Tear servers down, verified; with no names, every server of the fleet')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show each server''s state; never starts anything')
            [CompletionResult]::new('reconnect', 'reconnect', [CompletionResultType]::ParameterValue, 'Stop a server''s current generation, confirm it is gone, start the next')
            [CompletionResult]::new('reset', 'reset', [CompletionResultType]::ParameterValue, 'Clear a server''s quarantine, once nothing of it is alive')
            [CompletionResult]::new('tools', 'tools', [CompletionResultType]::ParameterValue, 'List the tools of running servers, or of one server (started if needed)')
            [CompletionResult]::new('call', 'call', [CompletionResultType]::ParameterValue, 'Call a tool of a server (started if needed) and print its result')
            [CompletionResult]::new('connect', 'connect', [CompletionResultType]::ParameterValue, 'Serve the fleet as one MCP server on stdin/stdout, for an MCP client to launch (starts the supervisor and the servers as `up` does)')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve the fleet as one MCP server over streamable HTTP at /mcp, from the supervisor, with a bearer token (starts the servers as `up` does)')
            [CompletionResult]::new('logs', 'logs', [CompletionResultType]::ParameterValue, 'Show the servers'' stderr logs')
            [CompletionResult]::new('events', 'events', [CompletionResultType]::ParameterValue, 'Show the event log (every transition) as NDJSON')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Print the supervisor''s metrics once, in Prometheus'' text format (from state.json when no supervisor runs)')
            [CompletionResult]::new('login', 'login', [CompletionResultType]::ParameterValue, 'Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with PKCE): opens the browser, or prints the URL to open, and keeps the tokens')
            [CompletionResult]::new('logout', 'logout', [CompletionResultType]::ParameterValue, 'Forget the tokens of remote servers, revoking them where the authorization server offers revocation')
            [CompletionResult]::new('validate', 'validate', [CompletionResultType]::ParameterValue, 'Check a fleet file and print the resolved fleet (secrets redacted)')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the fleets under the state root: name, fleet file, state directory, supervisor pid, servers running/total (with --state-dir, that one)')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Print a fleet file made from an MCP client''s configuration: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish, elvish, powershell)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpfleet;check' {
            [CompletionResult]::new('-j', '-j', [CompletionResultType]::ParameterName, 'How many servers start at once (default: 4 per CPU core)')
            [CompletionResult]::new('--jobs', '--jobs', [CompletionResultType]::ParameterName, 'How many servers start at once (default: 4 per CPU core)')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Override every server''s connect timeout (e.g. 30s, 2m, none)')
            [CompletionResult]::new('--cleanup-timeout', '--cleanup-timeout', [CompletionResultType]::ParameterName, 'Override every server''s cleanup timeout (e.g. 5s, none)')
            [CompletionResult]::new('--junit', '--junit', [CompletionResultType]::ParameterName, 'Also write a JUnit XML report to FILE: one test case per server (stdout and the exit code stay the same)')
            [CompletionResult]::new('--expect-tools', '--expect-tools', [CompletionResultType]::ParameterName, 'Compare each server''s tools (names, input and output schemas) with the snapshot FILE; a difference exits 9')
            [CompletionResult]::new('--update-tools', '--update-tools', [CompletionResultType]::ParameterName, 'Write the tools of every server that started to the snapshot FILE (the entries of servers that did not start are kept)')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--strict', '--strict', [CompletionResultType]::ParameterName, 'Count an escalated teardown (a signal was needed) as a failure: exit 5')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;up' {
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Override the connect timeout for this start (e.g. 30s, none)')
            [CompletionResult]::new('--wait-timeout', '--wait-timeout', [CompletionResultType]::ParameterName, 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Recover a quarantined server: SIGKILL what is left of it, confirm, start')
            [CompletionResult]::new('--foreground', '--foreground', [CompletionResultType]::ParameterName, 'Run the supervisor in this terminal: Ctrl-C tears everything down, a second Ctrl-C SIGKILLs the servers, a third exits at once')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Print the plan (start, restart and why, keep, orphaned, stop) and change nothing')
            [CompletionResult]::new('--remove-orphans', '--remove-orphans', [CompletionResultType]::ParameterName, 'Stop the servers that are no longer in the fleet file (otherwise they are left running, as orphans, until `down`)')
            [CompletionResult]::new('--watch', '--watch', [CompletionResultType]::ParameterName, 'Stay in the foreground and apply every change of the fleet file as it is saved; Ctrl-C ends the watch and leaves the fleet up (with --foreground it tears the fleet down)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;down' {
            [CompletionResult]::new('--cleanup-timeout', '--cleanup-timeout', [CompletionResultType]::ParameterName, 'Override the cleanup timeout for this teardown')
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'In a fleet across hosts: drain this host only (its servers stop there and other hosts take them over; its supervisor leaves)')
            [CompletionResult]::new('--wait-timeout', '--wait-timeout', [CompletionResultType]::ParameterName, 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--strict', '--strict', [CompletionResultType]::ParameterName, 'Count an escalated teardown as a failure: exit 5')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;status' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;reconnect' {
            [CompletionResult]::new('--if-generation', '--if-generation', [CompletionResultType]::ParameterName, 'Only if the current generation is N; otherwise refuse (exit 6)')
            [CompletionResult]::new('--wait-timeout', '--wait-timeout', [CompletionResultType]::ParameterName, 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Recover a quarantined server first')
            [CompletionResult]::new('--strict', '--strict', [CompletionResultType]::ParameterName, 'Count an escalated teardown as a failure: exit 5')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;reset' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;tools' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;call' {
            [CompletionResult]::new('--args', '--args', [CompletionResultType]::ParameterName, 'The tool''s arguments, as a JSON object')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long the call may take (default 60s)')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;connect' {
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Override the connect timeout of the servers'' start (e.g. 30s, none)')
            [CompletionResult]::new('--wait-timeout', '--wait-timeout', [CompletionResultType]::ParameterName, 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;serve' {
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Where to listen, ADDRESS:PORT (default: 127.0.0.1:7077; port 0 picks one)')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'Override the connect timeout of the servers'' start (e.g. 30s, none)')
            [CompletionResult]::new('--wait-timeout', '--wait-timeout', [CompletionResultType]::ParameterName, 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;logs' {
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file, as -f/--file before the command (-f here is --follow)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'How many of the last lines of each log to print first, or `all`')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'How many of the last lines of each log to print first, or `all`')
            [CompletionResult]::new('--tail', '--tail', [CompletionResultType]::ParameterName, 'How many of the last lines of each log to print first, or `all`')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only lines written since then: a duration before now (10m, 1h30m) or an RFC 3339 time (2026-05-04T10:21:07Z)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--gateway', '--gateway', [CompletionResultType]::ParameterName, 'The gateway''s log instead: client sessions, refused HTTP requests, calls a server could not serve, servers'' requests relayed to clients')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep printing what is written')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep printing what is written')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Begin each line of a server''s log with the time it was written (UTC RFC 3339); the gateway''s lines always begin with theirs')
            [CompletionResult]::new('--timestamps', '--timestamps', [CompletionResultType]::ParameterName, 'Begin each line of a server''s log with the time it was written (UTC RFC 3339); the gateway''s lines always begin with theirs')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;events' {
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file, as -f/--file before the command (-f here is --follow)')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Only the last N events, or `all`')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Only the last N events, or `all`')
            [CompletionResult]::new('--tail', '--tail', [CompletionResultType]::ParameterName, 'Only the last N events, or `all`')
            [CompletionResult]::new('--since', '--since', [CompletionResultType]::ParameterName, 'Only events since then: a duration before now (10m, 1h30m) or an RFC 3339 time (2026-05-04T10:21:07Z)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep printing events as they are recorded')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep printing events as they are recorded')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;metrics' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--openmetrics', '--openmetrics', [CompletionResultType]::ParameterName, 'Print OpenMetrics 1.0 text instead of Prometheus'' text format 0.0.4')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;login' {
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'How long to wait for the authorization, per server (default 5m)')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--no-browser', '--no-browser', [CompletionResultType]::ParameterName, 'Print the URL to open, and start no browser')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;logout' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;validate' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;ls' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;import' {
            [CompletionResult]::new('-O', '-O ', [CompletionResultType]::ParameterName, 'Write the fleet file to PATH instead of stdout (refused if PATH exists, unless --force)')
            [CompletionResult]::new('--out', '--out', [CompletionResultType]::ParameterName, 'Write the fleet file to PATH instead of stdout (refused if PATH exists, unless --force)')
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'The fleet''s `name:` (default: the name of the directory the fleet file goes to, as with --out, else of the current directory)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Replace the file named by --out if it exists')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;completions' {
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)')
            [CompletionResult]::new('--state-dir', '--state-dir', [CompletionResultType]::ParameterName, 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Output format for the result on stdout')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No progress and no log lines below errors on stderr')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'mcpfleet;help' {
            [CompletionResult]::new('check', 'check', [CompletionResultType]::ParameterValue, 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)')
            [CompletionResult]::new('up', 'up', [CompletionResultType]::ParameterValue, 'Start servers (and the supervisor, when none runs) and wait until each is ready or failed')
            [CompletionResult]::new('down', 'down', [CompletionResultType]::ParameterValue, 'Tear servers down, verified; with no names, every server of the fleet')
            [CompletionResult]::new('status', 'status', [CompletionResultType]::ParameterValue, 'Show each server''s state; never starts anything')
            [CompletionResult]::new('reconnect', 'reconnect', [CompletionResultType]::ParameterValue, 'Stop a server''s current generation, confirm it is gone, start the next')
            [CompletionResult]::new('reset', 'reset', [CompletionResultType]::ParameterValue, 'Clear a server''s quarantine, once nothing of it is alive')
            [CompletionResult]::new('tools', 'tools', [CompletionResultType]::ParameterValue, 'List the tools of running servers, or of one server (started if needed)')
            [CompletionResult]::new('call', 'call', [CompletionResultType]::ParameterValue, 'Call a tool of a server (started if needed) and print its result')
            [CompletionResult]::new('connect', 'connect', [CompletionResultType]::ParameterValue, 'Serve the fleet as one MCP server on stdin/stdout, for an MCP client to launch (starts the supervisor and the servers as `up` does)')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Serve the fleet as one MCP server over streamable HTTP at /mcp, from the supervisor, with a bearer token (starts the servers as `up` does)')
            [CompletionResult]::new('logs', 'logs', [CompletionResultType]::ParameterValue, 'Show the servers'' stderr logs')
            [CompletionResult]::new('events', 'events', [CompletionResultType]::ParameterValue, 'Show the event log (every transition) as NDJSON')
            [CompletionResult]::new('metrics', 'metrics', [CompletionResultType]::ParameterValue, 'Print the supervisor''s metrics once, in Prometheus'' text format (from state.json when no supervisor runs)')
            [CompletionResult]::new('login', 'login', [CompletionResultType]::ParameterValue, 'Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with PKCE): opens the browser, or prints the URL to open, and keeps the tokens')
            [CompletionResult]::new('logout', 'logout', [CompletionResultType]::ParameterValue, 'Forget the tokens of remote servers, revoking them where the authorization server offers revocation')
            [CompletionResult]::new('validate', 'validate', [CompletionResultType]::ParameterValue, 'Check a fleet file and print the resolved fleet (secrets redacted)')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the fleets under the state root: name, fleet file, state directory, supervisor pid, servers running/total (with --state-dir, that one)')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Print a fleet file made from an MCP client''s configuration: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print a shell completion script (bash, zsh, fish, elvish, powershell)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'mcpfleet;help;check' {
            break
        }
        'mcpfleet;help;up' {
            break
        }
        'mcpfleet;help;down' {
            break
        }
        'mcpfleet;help;status' {
            break
        }
        'mcpfleet;help;reconnect' {
            break
        }
        'mcpfleet;help;reset' {
            break
        }
        'mcpfleet;help;tools' {
            break
        }
        'mcpfleet;help;call' {
            break
        }
        'mcpfleet;help;connect' {
            break
        }
        'mcpfleet;help;serve' {
            break
        }
        'mcpfleet;help;logs' {
            break
        }
        'mcpfleet;help;events' {
            break
        }
        'mcpfleet;help;metrics' {
            break
        }
        'mcpfleet;help;login' {
            break
        }
        'mcpfleet;help;logout' {
            break
        }
        'mcpfleet;help;validate' {
            break
        }
        'mcpfleet;help;ls' {
            break
        }
        'mcpfleet;help;import' {
            break
        }
        'mcpfleet;help;completions' {
            break
        }
        'mcpfleet;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
