
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
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --output 'Output format for the result on stdout'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand check 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
            cand validate 'Check a fleet file and print the resolved fleet (secrets redacted)'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpfleet;check'= {
            cand -j 'How many servers start at once (default: 4 per CPU core)'
            cand --jobs 'How many servers start at once (default: 4 per CPU core)'
            cand --connect-timeout 'Override every server''s connect timeout (e.g. 30s, 2m, none)'
            cand --cleanup-timeout 'Override every server''s cleanup timeout (e.g. 5s, none)'
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --output 'Output format for the result on stdout'
            cand --strict 'Count an escalated teardown (a signal was needed) as a failure: exit 5'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;validate'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --output 'Output format for the result on stdout'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;completions'= {
            cand -f 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --file 'The fleet file (default: $MCPFLEET_FILE, then ./mcpfleet.yaml)'
            cand --output 'Output format for the result on stdout'
            cand -v 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand --verbose 'More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides'
            cand -q 'No progress and no log lines below errors on stderr'
            cand --quiet 'No progress and no log lines below errors on stderr'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'mcpfleet;help'= {
            cand check 'Start servers in parallel, list their tools, tear them all down, verify that nothing of them is left, and report (for CI)'
            cand validate 'Check a fleet file and print the resolved fleet (secrets redacted)'
            cand completions 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'mcpfleet;help;check'= {
        }
        &'mcpfleet;help;validate'= {
        }
        &'mcpfleet;help;completions'= {
        }
        &'mcpfleet;help;help'= {
        }
    ]
    $completions[$command]
}
