
use builtin;
use str;

set edit:completion:arg-completer[mcpfleet] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'mcpfleet'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'mcpfleet'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand check 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
            cand up 'Start servers (and the supervisor, when none runs) and wait until each is ready or failed'
            cand down 'Tear servers down, verified; with no names, every server of the fleet'
            cand status 'Show each server''s state; never starts anything'
            cand reconnect 'Stop a server''s current generation, confirm it is gone, start the next'
            cand reset 'Clear a server''s quarantine, once nothing of it is alive'
            cand tools 'List the tools of running servers, or of one server (started if needed)'
            cand call 'Call a tool of a server (started if needed) and print its result'
            cand connect 'Serve the fleet as one MCP server on stdin/stdout, for an MCP client to launch (starts the supervisor and the servers as `up` does)'
            cand serve 'Serve the fleet as one MCP server over streamable HTTP at /mcp, from the supervisor, with a bearer token (starts the servers as `up` does)'
            cand logs 'Show the servers'' stderr logs'
            cand events 'Show the event log (every transition) as NDJSON'
            cand metrics 'Print the supervisor''s metrics once, in Prometheus'' text format (from state.json when no supervisor runs)'
            cand login 'Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with PKCE): opens the browser, or prints the URL to open, and keeps the tokens'
            cand logout 'Forget the tokens of remote servers, revoking them where the authorization server offers revocation'
            cand validate 'Check a fleet file and print the resolved fleet (secrets redacted)'
            cand ls 'List the fleets under the state root: name, fleet file, state directory, supervisor pid, servers running/total (with --state-dir, that one)'
            cand import 'Print a fleet file made from an MCP client''s configuration: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpfleet;check'= {
            cand -j 'How many servers start at once (default: 4 per CPU core)'
            cand --jobs 'How many servers start at once (default: 4 per CPU core)'
            cand --connect-timeout 'Override every server''s connect timeout (e.g. 30s, 2m, none)'
            cand --cleanup-timeout 'Override every server''s cleanup timeout (e.g. 5s, none)'
            cand --junit 'Also write a JUnit XML report to FILE: one test case per server (stdout and the exit code stay the same)'
            cand --expect-tools 'Compare each server''s tools (names, input and output schemas) with the snapshot FILE; a difference exits 9'
            cand --update-tools 'Write the tools of every server that started to the snapshot FILE (the entries of servers that did not start are kept)'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --strict 'Count an escalated teardown (a signal was needed) as a failure: exit 5'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;up'= {
            cand --connect-timeout 'Override the connect timeout for this start (e.g. 30s, none)'
            cand --wait-timeout 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --force 'Recover a quarantined server: SIGKILL what is left of it, confirm, start'
            cand --foreground 'Run the supervisor in this terminal: Ctrl-C tears everything down, a second Ctrl-C SIGKILLs the servers, a third exits at once'
            cand --dry-run 'Print the plan (start, restart and why, keep, orphaned, stop) and change nothing'
            cand --remove-orphans 'Stop the servers that are no longer in the fleet file (otherwise they are left running, as orphans, until `down`)'
            cand --watch 'Stay in the foreground and apply every change of the fleet file as it is saved; Ctrl-C ends the watch and leaves the fleet up (with --foreground it tears the fleet down)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;down'= {
            cand --cleanup-timeout 'Override the cleanup timeout for this teardown'
            cand --host 'In a fleet across hosts: drain this host only (its servers stop there and other hosts take them over; its supervisor leaves)'
            cand --wait-timeout 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --strict 'Count an escalated teardown as a failure: exit 5'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;status'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;reconnect'= {
            cand --if-generation 'Only if the current generation is N; otherwise refuse (exit 6)'
            cand --wait-timeout 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --force 'Recover a quarantined server first'
            cand --strict 'Count an escalated teardown as a failure: exit 5'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;reset'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;tools'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;call'= {
            cand --args 'The tool''s arguments, as a JSON object'
            cand --timeout 'How long the call may take (default 60s)'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;connect'= {
            cand --connect-timeout 'Override the connect timeout of the servers'' start (e.g. 30s, none)'
            cand --wait-timeout 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;serve'= {
            cand --listen 'Where to listen, ADDRESS:PORT (default: 127.0.0.1:7077; port 0 picks one)'
            cand --connect-timeout 'Override the connect timeout of the servers'' start (e.g. 30s, none)'
            cand --wait-timeout 'Give up (exit 7) if the server''s authority has not taken the request within this long; the request is then withdrawn, never run later'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;logs'= {
            cand --file 'The fleet file, as -f/--file before the command (-f here is --follow)'
            cand -n 'How many of the last lines of each log to print first, or `all`'
            cand --lines 'How many of the last lines of each log to print first, or `all`'
            cand --tail 'How many of the last lines of each log to print first, or `all`'
            cand --since 'Only lines written since then: a duration before now (10m, 1h30m) or an RFC 3339 time (2026-05-04T10:21:07Z)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --gateway 'The gateway''s log instead: client sessions, refused HTTP requests, calls a server could not serve, servers'' requests relayed to clients'
            cand -f 'Keep printing what is written'
            cand --follow 'Keep printing what is written'
            cand -t 'Begin each line of a server''s log with the time it was written (UTC RFC 3339); the gateway''s lines always begin with theirs'
            cand --timestamps 'Begin each line of a server''s log with the time it was written (UTC RFC 3339); the gateway''s lines always begin with theirs'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;events'= {
            cand --file 'The fleet file, as -f/--file before the command (-f here is --follow)'
            cand -n 'Only the last N events, or `all`'
            cand --lines 'Only the last N events, or `all`'
            cand --tail 'Only the last N events, or `all`'
            cand --since 'Only events since then: a duration before now (10m, 1h30m) or an RFC 3339 time (2026-05-04T10:21:07Z)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -f 'Keep printing events as they are recorded'
            cand --follow 'Keep printing events as they are recorded'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;metrics'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --openmetrics 'Print OpenMetrics 1.0 text instead of Prometheus'' text format 0.0.4'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;login'= {
            cand --timeout 'How long to wait for the authorization, per server (default 5m)'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --no-browser 'Print the URL to open, and start no browser'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;logout'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;validate'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;ls'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;import'= {
            cand -O 'Write the fleet file to PATH instead of stdout (refused if PATH exists, unless --force)'
            cand --out 'Write the fleet file to PATH instead of stdout (refused if PATH exists, unless --force)'
            cand --name 'The fleet''s `name:` (default: the name of the directory the fleet file goes to, as with --out, else of the current directory)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand --force 'Replace the file named by --out if it exists'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;completions'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then the nearest mcpfleet.yaml or mcpfleet.yml in the current directory or above it); after `logs` and `events` only as --file (their -f is --follow)'
            cand --state-dir 'The fleet''s state directory (default: $MCPFLEET_STATE_DIR, then $XDG_STATE_HOME/mcpfleet/<fleet>)'
            cand -o 'Output format for the result on stdout'
            cand --output 'Output format for the result on stdout'
            cand --color 'When to colour logs, warnings and errors on stderr, and help (auto: on a terminal, unless $NO_COLOR is set and not empty; always: also into a file or a pipe)'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;help'= {
            cand check 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
            cand up 'Start servers (and the supervisor, when none runs) and wait until each is ready or failed'
            cand down 'Tear servers down, verified; with no names, every server of the fleet'
            cand status 'Show each server''s state; never starts anything'
            cand reconnect 'Stop a server''s current generation, confirm it is gone, start the next'
            cand reset 'Clear a server''s quarantine, once nothing of it is alive'
            cand tools 'List the tools of running servers, or of one server (started if needed)'
            cand call 'Call a tool of a server (started if needed) and print its result'
            cand connect 'Serve the fleet as one MCP server on stdin/stdout, for an MCP client to launch (starts the supervisor and the servers as `up` does)'
            cand serve 'Serve the fleet as one MCP server over streamable HTTP at /mcp, from the supervisor, with a bearer token (starts the servers as `up` does)'
            cand logs 'Show the servers'' stderr logs'
            cand events 'Show the event log (every transition) as NDJSON'
            cand metrics 'Print the supervisor''s metrics once, in Prometheus'' text format (from state.json when no supervisor runs)'
            cand login 'Authorize mcpfleet for remote servers with `auth: oauth` (OAuth 2.1 with PKCE): opens the browser, or prints the URL to open, and keeps the tokens'
            cand logout 'Forget the tokens of remote servers, revoking them where the authorization server offers revocation'
            cand validate 'Check a fleet file and print the resolved fleet (secrets redacted)'
            cand ls 'List the fleets under the state root: name, fleet file, state directory, supervisor pid, servers running/total (with --state-dir, that one)'
            cand import 'Print a fleet file made from an MCP client''s configuration: Claude Desktop, Claude Code, Cursor, Windsurf or VS Code (secrets become ${env:NAME})'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpfleet;help;check'= {
        }
        &'mcpfleet;help;up'= {
        }
        &'mcpfleet;help;down'= {
        }
        &'mcpfleet;help;status'= {
        }
        &'mcpfleet;help;reconnect'= {
        }
        &'mcpfleet;help;reset'= {
        }
        &'mcpfleet;help;tools'= {
        }
        &'mcpfleet;help;call'= {
        }
        &'mcpfleet;help;connect'= {
        }
        &'mcpfleet;help;serve'= {
        }
        &'mcpfleet;help;logs'= {
        }
        &'mcpfleet;help;events'= {
        }
        &'mcpfleet;help;metrics'= {
        }
        &'mcpfleet;help;login'= {
        }
        &'mcpfleet;help;logout'= {
        }
        &'mcpfleet;help;validate'= {
        }
        &'mcpfleet;help;ls'= {
        }
        &'mcpfleet;help;import'= {
        }
        &'mcpfleet;help;completions'= {
        }
        &'mcpfleet;help;help'= {
        }
    ]
    $completions[$command]
}
