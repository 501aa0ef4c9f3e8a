//! Shell completion: the scripts clap generates, without the hidden commands,
//! and with server names completed where a command takes a `SERVER`. A script
//! asks the binary for the names (`mcpfleet __servers WORDS...`, the words of
//! the command line up to the cursor), which reads the fleet file those words
//! name, or finds, and prints its servers' names one a line. It starts nothing
//! and asks no supervisor, and prints nothing when the cursor is not on a
//! server's place or no fleet file can be read.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::Cli;

/// The hidden first argument that asks for server names.
pub const SERVERS_ARG: &str = "__servers";

/// The completion script for `shell`, as checked into `completions/`.
pub fn script(shell: clap_complete::Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut visible(&Cli::command()), "mcpfleet", &mut out);
    let text = String::from_utf8(out).expect("clap_complete writes UTF-8");
    let text = match shell {
        clap_complete::Shell::Bash => bash(text),
        clap_complete::Shell::Zsh => zsh(text),
        clap_complete::Shell::Fish => fish(text),
        _ => text,
    };
    text.into_bytes()
}

/// `cmd` without its hidden subcommands and arguments, at every level: what a
/// completion script offers. Only what completion reads is carried over.
fn visible(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(cmd.get_name().to_owned())
        .args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(visible),
        );
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(version.to_owned());
    }
    out
}

/// bash: server names first where the binary gives some, else clap's completion.
fn bash(text: String) -> String {
    let text = text.replace("complete -F _mcpfleet ", "complete -F _mcpfleet_with_servers ");
    text + r#"
_mcpfleet_with_servers() {
    local names
    names=$("${COMP_WORDS[0]}" __servers "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
    if [[ -n "${names}" ]]; then
        COMPREPLY=( $(compgen -W "${names}" -- "${COMP_WORDS[COMP_CWORD]}") )
        return 0
    fi
    _mcpfleet "$@"
}
"#
}

/// zsh: the `SERVER` arguments complete with the names the binary gives.
fn zsh(text: String) -> String {
    let text: String = text
        .lines()
        .map(|line| {
            let server = line.starts_with("'*::servers -- ")
                || line.starts_with("':server -- ")
                || line.starts_with("'::server -- ");
            match server {
                true => line.replacen(":_default'", ":_mcpfleet_servers'", 1),
                false => line.to_owned(),
            }
        })
        .map(|line| line + "\n")
        .collect();
    let function = r#"(( $+functions[_mcpfleet_servers] )) ||
_mcpfleet_servers() {
    local -a line names
    line=(${(z)LBUFFER})
    [[ "${LBUFFER}" == *[[:space:]] ]] && line+=('')
    names=(${(f)"$(_call_program servers ${line[1]} __servers ${line[2,-1]} 2>/dev/null)"})
    _describe -t servers 'server' names
}

"#;
    match text.rfind("if [ \"$funcstack[1]\" = \"_mcpfleet\" ]") {
        Some(at) => format!("{}{function}{}", &text[..at], &text[at..]),
        None => text + function,
    }
}

/// fish: the names the binary gives, wherever it gives some.
fn fish(text: String) -> String {
    text + r#"
function __fish_mcpfleet_servers
    set -l words (commandline -opc)
    $words[1] __servers $words[2..-1] (commandline -ct) 2>/dev/null
end
complete -c mcpfleet -a '(__fish_mcpfleet_servers)'
"#
}

/// `mcpfleet __servers WORDS...`: prints the names of the servers of the fleet
/// file the words name (or that is found) when the last word is in a `SERVER`'s
/// place. Always exits 0: a completion has no errors to show.
pub fn servers_from_args(args: &[std::ffi::OsString]) -> u8 {
    let words: Vec<String> = args
        .iter()
        .skip(2)
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    if let Some(file) = server_place(&words) {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let env = std::env::var_os(crate::config::FILE_ENV_VAR);
        let names = server_names(file.as_deref(), env.as_deref(), &cwd);
        let text: String = names.into_iter().map(|n| n + "\n").collect();
        let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
    }
    0
}

/// Whether the last of `words` (the command line after `mcpfleet`, up to and
/// with the word at the cursor) is in the place of a `SERVER`; if so, with the
/// fleet file that `-f`/`--file` names, if any.
pub(crate) fn server_place(words: &[String]) -> Option<Option<PathBuf>> {
    let (current, before) = words.split_last()?;
    if current.starts_with('-') {
        return None;
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut file = None;
    let mut positional = 0usize;
    let mut at_top = true;
    let mut i = 0;
    while i < before.len() {
        let word = &before[i];
        i += 1;
        if word == "--" {
            continue;
        }
        let arg = if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            cmd.get_arguments()
                .find(|a| a.get_long() == Some(name))
                .map(|a| (a, inline.map(str::to_owned)))
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let first = chars.next()?;
            let rest: String = chars.collect();
            cmd.get_arguments()
                .find(|a| a.get_short() == Some(first))
                .map(|a| (a, (!rest.is_empty()).then_some(rest)))
        } else {
            if at_top {
                cmd = cmd.find_subcommand(word)?.clone();
                at_top = false;
            } else {
                positional += 1;
            }
            continue;
        };
        let Some((arg, inline)) = arg else { continue };
        if !arg.get_action().takes_values() {
            continue;
        }
        let value = match inline {
            Some(v) => Some(v),
            None => {
                i += 1;
                before.get(i - 1).cloned()
            }
        };
        // A value at the cursor (`-f <TAB>`) is no server.
        let value = value?;
        if arg.get_id() == "file" {
            file = Some(PathBuf::from(value));
        }
    }
    if at_top {
        return None;
    }
    let mut positionals = cmd.get_positionals();
    let place = positionals.find(|a| {
        a.get_index().is_some_and(|index| {
            index == positional + 1
                || (index <= positional + 1
                    && a.get_num_args().is_some_and(|n| n.max_values() > 1))
        })
    })?;
    let is_server = place
        .get_value_names()
        .is_some_and(|names| names.iter().any(|n| n == "SERVER"));
    is_server.then_some(file)
}

/// The servers of the fleet file `explicit` names (else `$MCPFLEET_FILE`, else
/// the nearest default one from `cwd`), in file order; none when it cannot be
/// read. A variable that is not set does not hide the names.
fn server_names(explicit: Option<&Path>, env_file: Option<&OsStr>, cwd: &Path) -> Vec<String> {
    let Ok(found) = crate::config::discover(explicit, env_file, cwd) else {
        return Vec::new();
    };
    let lookup = |name: &str| {
        std::env::var(name)
            .ok()
            .or_else(|| Some("http://unset.invalid".to_owned()))
    };
    match crate::config::load(&found.path, &lookup) {
        Ok(fleet) => fleet.servers.into_iter().map(|s| s.name).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(line: &str) -> Option<Option<PathBuf>> {
        let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        if line.is_empty() {
            words = vec![String::new()];
        }
        server_place(&words)
    }

    #[test]
    fn a_server_is_completed_in_a_servers_place_only() {
        assert_eq!(place("up "), Some(None));
        assert_eq!(place("up a b"), Some(None));
        assert_eq!(place("down --wait-timeout 5s a"), Some(None));
        assert_eq!(place("-f x.yaml status "), Some(Some("x.yaml".into())));
        assert_eq!(place("--file=x.yaml status "), Some(Some("x.yaml".into())));
        assert_eq!(place("tools --file x.yaml "), Some(Some("x.yaml".into())));
        assert_eq!(place("call "), Some(None));
        assert_eq!(place("logs -f "), Some(None), "logs' -f is --follow");
        // The tool's place, a flag, a flag's value, no command yet, a command
        // without servers.
        assert_eq!(place("call a "), None);
        assert_eq!(place("up --"), None);
        assert_eq!(place("up --connect-timeout "), None);
        assert_eq!(place("-f "), None);
        assert_eq!(place(""), None);
        assert_eq!(place("import "), None);
        assert_eq!(place("nosuch "), None);
    }

    #[test]
    fn scripts_offer_no_hidden_command() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let text = String::from_utf8(script(shell)).unwrap();
            assert!(!text.contains("supervise"), "{shell}");
            assert!(text.contains("__servers"), "{shell}");
            assert!(text.contains("reconnect"), "{shell}");
        }
    }
}
