# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mcpfleet_global_optspecs
    string join \n f/file= state-dir= o/output= color= v/verbose q/quiet h/help V/version
end

function __fish_mcpfleet_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_mcpfleet_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_mcpfleet_using_subcommand
    set -l cmd (__fish_mcpfleet_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s V -l version -d 'Print version'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "check" -d 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "up" -d 'Start servers (and the supervisor, when none runs) and wait until each is ready or failed'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "down" -d 'Tear servers down, verified; with no names, every server of the fleet'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "status" -d 'Show each server\'s state; never starts anything'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "reconnect" -d 'Stop a server\'s current generation, confirm it is gone, start the next'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "reset" -d 'Clear a server\'s quarantine, once nothing of it is alive'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "tools" -d 'List the tools of running servers, or of one server (started if needed)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "call" -d 'Call a tool of a server (started if needed) and print its result'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "connect" -d 'Serve the fleet as one MCP server on stdin/stdout, for an MCP client to launch (starts the supervisor and the servers as `up` does)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "serve" -d 'Serve the fleet as one MCP server over streamable HTTP at /mcp, from the supervisor, with a bearer token (starts the servers as `up` does)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "logs" -d 'Show the servers\' stderr logs'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "events" -d 'Show the event log (every transition) as NDJSON'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "metrics" -d 'Print the supervisor\'s metrics once, in Prometheus\' text format (from state.json when no supervisor runs)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "login" -d 'Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with PKCE): opens the browser, or prints the URL to open, and keeps the tokens'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "logout" -d 'Forget the tokens of remote servers, revoking them where the authorization server offers revocation'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "validate" -d 'Check a fleet file and print the resolved fleet (secrets redacted)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "ls" -d 'List the fleets under the state root: name, fleet file, state directory, supervisor pid, servers running/total (with --state-dir, that one)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "import" -d 'Print a fleet file made from an MCP client\'s configuration: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s j -l jobs -d 'How many servers start at once (default: 4 per CPU core)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l connect-timeout -d 'Override every server\'s connect timeout (e.g. 30s, 2m, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l cleanup-timeout -d 'Override every server\'s cleanup timeout (e.g. 5s, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l junit -d 'Also write a JUnit XML report to FILE: one test case per server (stdout and the exit code stay the same)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l expect-tools -d 'Compare each server\'s tools (names, input and output schemas) with the snapshot FILE; a difference exits 9' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l update-tools -d 'Write the tools of every server that started to the snapshot FILE (the entries of servers that did not start are kept)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l strict -d 'Count an escalated teardown (a signal was needed) as a failure: exit 5'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l connect-timeout -d 'Override the connect timeout for this start (e.g. 30s, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l wait-timeout -d 'Give up (exit 7) if the server\'s authority has not taken the request within this long; the request is then withdrawn, never run later' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l force -d 'Recover a quarantined server: SIGKILL what is left of it, confirm, start'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l foreground -d 'Run the supervisor in this terminal: Ctrl-C tears everything down, a second Ctrl-C SIGKILLs the servers, a third exits at once'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l dry-run -d 'Print the plan (start, restart and why, keep, orphaned, stop) and change nothing'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l remove-orphans -d 'Stop the servers that are no longer in the fleet file (otherwise they are left running, as orphans, until `down`)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -l watch -d 'Stay in the foreground and apply every change of the fleet file as it is saved; Ctrl-C ends the watch and leaves the fleet up (with --foreground it tears the fleet down)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand up" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -l cleanup-timeout -d 'Override the cleanup timeout for this teardown' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -l host -d 'In a fleet across hosts: drain this host only (its servers stop there and other hosts take them over; its supervisor leaves)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -l wait-timeout -d 'Give up (exit 7) if the server\'s authority has not taken the request within this long; the request is then withdrawn, never run later' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -l strict -d 'Count an escalated teardown as a failure: exit 5'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand down" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand status" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -l if-generation -d 'Only if the current generation is N; otherwise refuse (exit 6)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -l wait-timeout -d 'Give up (exit 7) if the server\'s authority has not taken the request within this long; the request is then withdrawn, never run later' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -l force -d 'Recover a quarantined server first'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -l strict -d 'Count an escalated teardown as a failure: exit 5'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reconnect" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand reset" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand tools" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -l args -d 'The tool\'s arguments, as a JSON object' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -l timeout -d 'How long the call may take (default 60s)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand call" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -l connect-timeout -d 'Override the connect timeout of the servers\' start (e.g. 30s, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -l wait-timeout -d 'Give up (exit 7) if the server\'s authority has not taken the request within this long; the request is then withdrawn, never run later' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand connect" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -l listen -d 'Where to listen, ADDRESS:PORT (default: 127.0.0.1:7077; port 0 picks one)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -l connect-timeout -d 'Override the connect timeout of the servers\' start (e.g. 30s, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -l wait-timeout -d 'Give up (exit 7) if the server\'s authority has not taken the request within this long; the request is then withdrawn, never run later' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand serve" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -l file -d 'The fleet file, as -f/--file before the command (-f here is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s n -l lines -l tail -d 'How many of the last lines of each log to print first, or `all`' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -l since -d 'Only lines written since then: a duration before now (10m, 1h30m) or an RFC 3339 time (2026-05-04T10:21:07Z)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -l gateway -d 'The gateway\'s log instead: client sessions, refused HTTP requests, calls a server could not serve, servers\' requests relayed to clients'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s f -l follow -d 'Keep printing what is written'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s t -l timestamps -d 'Begin each line of a server\'s log with the time it was written (UTC RFC 3339); the gateway\'s lines always begin with theirs'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logs" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -l file -d 'The fleet file, as -f/--file before the command (-f here is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -s n -l lines -l tail -d 'Only the last N events, or `all`' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -l since -d 'Only events since then: a duration before now (10m, 1h30m) or an RFC 3339 time (2026-05-04T10:21:07Z)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -s f -l follow -d 'Keep printing events as they are recorded'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand events" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -l openmetrics -d 'Print OpenMetrics 1.0 text instead of Prometheus\' text format 0.0.4'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -l timeout -d 'How long to wait for the authorization, per server (default 5m)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -l no-browser -d 'Print the URL to open, and start no browser'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand login" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand logout" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand ls" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -s O -l out -d 'Write the fleet file to PATH instead of stdout (refused if PATH exists, unless --force)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -l name -d 'The fleet\'s `name:` (default: the name of the directory the fleet file goes to, as with --out, else of the current directory)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -l force -d 'Replace the file named by --out if it exists'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand import" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -l state-dir -d 'The fleet\'s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s o -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -l color -d 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "check" -d 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "up" -d 'Start servers (and the supervisor, when none runs) and wait until each is ready or failed'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "down" -d 'Tear servers down, verified; with no names, every server of the fleet'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "status" -d 'Show each server\'s state; never starts anything'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "reconnect" -d 'Stop a server\'s current generation, confirm it is gone, start the next'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "reset" -d 'Clear a server\'s quarantine, once nothing of it is alive'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "tools" -d 'List the tools of running servers, or of one server (started if needed)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "call" -d 'Call a tool of a server (started if needed) and print its result'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "connect" -d 'Serve the fleet as one MCP server on stdin/stdout, for an MCP client to launch (starts the supervisor and the servers as `up` does)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "serve" -d 'Serve the fleet as one MCP server over streamable HTTP at /mcp, from the supervisor, with a bearer token (starts the servers as `up` does)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "logs" -d 'Show the servers\' stderr logs'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "events" -d 'Show the event log (every transition) as NDJSON'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "metrics" -d 'Print the supervisor\'s metrics once, in Prometheus\' text format (from state.json when no supervisor runs)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "login" -d 'Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with PKCE): opens the browser, or prints the URL to open, and keeps the tokens'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "logout" -d 'Forget the tokens of remote servers, revoking them where the authorization server offers revocation'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "validate" -d 'Check a fleet file and print the resolved fleet (secrets redacted)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "ls" -d 'List the fleets under the state root: name, fleet file, state directory, supervisor pid, servers running/total (with --state-dir, that one)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "import" -d 'Print a fleet file made from an MCP client\'s configuration: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check up down status reconnect reset tools call connect serve logs events metrics login logout validate ls import completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'

function __fish_mcpfleet_servers
    set -l words (commandline -opc)
    $words[1] __servers $words[2..-1] (commandline -ct) 2>/dev/null
end
complete -c mcpfleet -a '(__fish_mcpfleet_servers)'
