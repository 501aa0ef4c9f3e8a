//! The completion scripts checked into `completions/` and the manual pages in
//! `man/` must match what the binary generates.
//! `MCPFLEET_UPDATE_COMPLETIONS=1 cargo test --test it completions::` rewrites the
//! scripts, `MCPFLEET_UPDATE_MAN=1 cargo test --test it completions::` the pages.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const SCRIPTS: [(&str, &str); 5] = [
    ("bash", "mcpfleet.bash"),
    ("zsh", "_mcpfleet"),
    ("fish", "mcpfleet.fish"),
    ("elvish", "mcpfleet.elv"),
    ("powershell", "_mcpfleet.ps1"),
];

#[test]
fn checked_in_completions_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let update = std::env::var_os("MCPFLEET_UPDATE_COMPLETIONS").is_some();
    let mut stale = Vec::new();
    for (shell, file) in SCRIPTS {
        let out = Command::new(common::mcpfleet_bin())
            .args(["completions", shell])
            .output()
            .expect("run mcpfleet completions");
        assert!(out.status.success(), "completions {shell} failed");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("check"),
            "{shell}: the script knows the subcommands"
        );
        let path = dir.join(file);
        if update {
            std::fs::write(&path, &out.stdout).expect("write completion script");
        } else if std::fs::read(&path).ok().as_deref() != Some(&out.stdout[..]) {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "stale completion scripts {stale:?}: run MCPFLEET_UPDATE_COMPLETIONS=1 cargo test --test it completions::"
    );
}

#[test]
fn checked_in_man_pages_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let update = std::env::var_os("MCPFLEET_UPDATE_MAN").is_some();
    let fresh = tempfile::tempdir().expect("temp dir");
    let out = Command::new(common::mcpfleet_bin())
        .arg("man")
        .arg("--dir")
        .arg(fresh.path())
        .output()
        .expect("run mcpfleet man");
    assert!(out.status.success(), "mcpfleet man --dir failed: {out:?}");
    let pages = |dir: &Path| -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "1"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).expect("read a page"))
            })
            .collect()
    };
    let generated = pages(fresh.path());
    for name in [
        "mcpfleet.1",
        "mcpfleet-up.1",
        "mcpfleet-logs.1",
        "mcpfleet-check.1",
    ] {
        assert!(
            generated.contains_key(name),
            "no {name} in {:?}",
            generated.keys()
        );
    }
    assert!(
        !generated.contains_key("mcpfleet-supervise.1"),
        "hidden commands have no page"
    );
    let main = String::from_utf8_lossy(&generated["mcpfleet.1"]);
    assert!(main.starts_with(".ie"), "a roff page: {main:.200}");
    assert!(main.contains(".TH mcpfleet 1"), "{main:.400}");
    // The page on stdout is the main one.
    let printed = Command::new(common::mcpfleet_bin())
        .arg("man")
        .output()
        .expect("run mcpfleet man");
    assert!(printed.status.success());
    assert_eq!(printed.stdout, generated["mcpfleet.1"]);

    if update {
        std::fs::create_dir_all(&dir).expect("create man/");
        for name in pages(&dir).keys().filter(|n| !generated.contains_key(*n)) {
            std::fs::remove_file(dir.join(name)).expect("remove a page of a command that is gone");
        }
        for (name, page) in &generated {
            std::fs::write(dir.join(name), page).expect("write a page");
        }
    }
    let checked_in = pages(&dir);
    let stale: Vec<&String> = generated
        .keys()
        .chain(checked_in.keys())
        .filter(|n| generated.get(*n) != checked_in.get(*n))
        .collect();
    assert!(
        stale.is_empty(),
        "stale manual pages {stale:?}: run MCPFLEET_UPDATE_MAN=1 cargo test --test it completions::"
    );
}

/// The bash script, sourced into a real bash, completes the fleet's server
/// names where a command takes a server (also with a variable of the fleet file
/// unset), commands without the hidden ones, and options where options go.
#[test]
fn bash_completes_server_names_and_no_hidden_command() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mcpfleet.yaml"),
        "version: 1\nservers:\n  alpha:\n    command: x\n    env: {K: \"${env:MCPFLEET_TEST_UNSET_SECRET}\"}\n  beta:\n    command: y\n",
    )
    .unwrap();
    let script = Command::new(common::mcpfleet_bin())
        .args(["completions", "bash"])
        .output()
        .unwrap()
        .stdout;
    std::fs::write(dir.path().join("mcpfleet.bash"), script).unwrap();
    let bin = common::mcpfleet_bin();
    let complete = |words: &[&str]| -> String {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source ./mcpfleet.bash; COMP_WORDS=(mcpfleet {}); COMP_CWORD={}; \
             _mcpfleet_with_servers mcpfleet '{}' '{}'; echo \"${{COMPREPLY[*]}}\"",
            quoted.join(" "),
            words.len(),
            words.last().unwrap(),
            words
                .get(words.len().wrapping_sub(2))
                .unwrap_or(&"mcpfleet"),
        );
        let out = Command::new("bash")
            .args(["--norc", "-c", &program])
            .current_dir(dir.path())
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", bin.parent().unwrap().display()),
            )
            .env_remove("MCPFLEET_FILE")
            .env_remove("MCPFLEET_TEST_UNSET_SECRET")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(complete(&["up", ""]), "alpha beta");
    assert_eq!(complete(&["down", "alpha", "b"]), "beta");
    assert_eq!(complete(&["call", ""]), "alpha beta");
    assert_eq!(complete(&["-f", "mcpfleet.yaml", "status", "a"]), "alpha");
    let commands = complete(&["s"]);
    assert!(
        commands.contains("status") && commands.contains("serve"),
        "{commands}"
    );
    assert!(!commands.contains("supervise"), "{commands}");
    assert!(complete(&["up", "--f"]).contains("--force"));
}

/// `--help` of the program and of each command, and every manual page, list the
/// exit codes; `man --dir` makes the directory it is given.
#[test]
fn help_and_manual_pages_list_the_exit_codes() {
    for args in [&["--help"][..], &["down", "--help"], &["import", "--help"]] {
        let out = Command::new(common::mcpfleet_bin())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Exit codes"), "{args:?}:\n{text}");
        for line in [
            "  0    everything asked for succeeded",
            "  8    the supervisor is unreachable",
            "  130  interrupted",
        ] {
            assert!(text.contains(line), "{args:?} lacks {line:?}:\n{text}");
        }
    }
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("share/man/man1");
    let out = Command::new(common::mcpfleet_bin())
        .arg("man")
        .arg("--dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "man --dir into a new directory: {out:?}"
    );
    for page in ["mcpfleet.1", "mcpfleet-down.1", "mcpfleet-check.1"] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.contains(".SH \"EXIT STATUS\""), "{page}");
        assert!(text.contains("\\fB9\\fR"), "{page}");
    }
}

/// Every manual page has an EXAMPLES section with the examples of its command
/// (`src/cli/examples.rs`), at least one, before the exit codes.
#[test]
fn every_manual_page_has_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::mcpfleet_bin())
        .arg("man")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut cmd = mcpfleet::cli::command().disable_help_subcommand(true);
    cmd.build();
    let names = std::iter::once("mcpfleet".to_owned()).chain(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_owned()),
    );
    let mut pages = 0;
    for name in names {
        let file = match name.as_str() {
            "mcpfleet" => "mcpfleet.1".to_owned(),
            sub => format!("mcpfleet-{sub}.1"),
        };
        let page = std::fs::read_to_string(dir.path().join(&file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let examples = page
            .find(".SH EXAMPLES\n")
            .unwrap_or_else(|| panic!("{file} has no EXAMPLES:\n{page}"));
        let exit = page.find(".SH \"EXIT STATUS\"").expect("EXIT STATUS");
        assert!(examples < exit, "{file}: EXAMPLES before EXIT STATUS");
        let section = &page[examples..exit];
        let listed = mcpfleet::cli::examples::of(&name);
        assert!(!listed.is_empty(), "{name} has no examples");
        for example in listed {
            let line = format!("\\fB{}\\fR", example.line.replace('-', "\\-"));
            assert!(section.contains(&line), "{file} lacks {line}:\n{section}");
        }
        pages += 1;
    }
    assert!(pages >= 17, "{pages} pages");
}
