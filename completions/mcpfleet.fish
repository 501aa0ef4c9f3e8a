# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mcpfleet_global_optspecs
    string join \n f/file= output= v/verbose q/quiet h/help V/version
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

complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -s V -l version -d 'Print version'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "check" -d 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "validate" -d 'Check a fleet file and print the resolved fleet (secrets redacted)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c mcpfleet -n "__fish_mcpfleet_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s j -l jobs -d 'How many servers start at once (default: 4 per CPU core)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l connect-timeout -d 'Override every server\'s connect timeout (e.g. 30s, 2m, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l cleanup-timeout -d 'Override every server\'s cleanup timeout (e.g. 5s, none)' -r
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -l strict -d 'Count an escalated teardown (a signal was needed) as a failure: exit 5'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand check" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand validate" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s f -l file -d 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)' -r -F
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -l output -d 'Output format for the result on stdout' -r -f -a "text\t''
json\t''
ndjson\t''"
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s v -l verbose -d 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s q -l quiet -d 'No progress and no log lines below errors on stderr'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand completions" -s h -l help -d 'Print help'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check validate completions help" -f -a "check" -d 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check validate completions help" -f -a "validate" -d 'Check a fleet file and print the resolved fleet (secrets redacted)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check validate completions help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c mcpfleet -n "__fish_mcpfleet_using_subcommand help; and not __fish_seen_subcommand_from check validate completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
