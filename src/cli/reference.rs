//! The book's command reference (`docs/src/reference/commands.md`), rendered as
//! markdown from the command line's definitions, so that it says what `--help`
//! and the manual pages say: every command that `--help` lists, its usage, its
//! arguments and options with their defaults and values, and its examples
//! (`examples.rs`). `tests/it/book.rs` holds the page to this.

use std::fmt::Write;

use super::examples;

/// Where the page goes in the repository.
pub const PAGE: &str = "docs/src/reference/commands.md";

/// The page, whole.
pub fn markdown() -> String {
    let mut top = super::command()
        .version(env!("CARGO_PKG_VERSION"))
        .long_version(None::<&str>)
        .disable_help_subcommand(true);
    top.build();
    let mut out = String::new();
    out.push_str(
        "<!-- Generated from the command line's definitions (src/cli/) by \
         mcpfleet::cli::reference::markdown; do not edit. To regenerate: \
         MCPFLEET_UPDATE_BOOK=1 cargo test --test it book:: -->\n\n",
    );
    out.push_str("# Commands\n\n");
    out.push_str(
        "Every command and its arguments and options, as `mcpfleet --help`, `mcpfleet \
         COMMAND --help` and the manual pages give them, with examples. The options \
         of every command are listed once, under [`mcpfleet`](#mcpfleet), and said \
         in full in [Options of every command](options.md); what each exit code means \
         is in [Exit codes](exit-codes.md).\n\n",
    );
    let commands: Vec<&clap::Command> = top.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    out.push_str("| command | what it does |\n|---|---|\n");
    for cmd in &commands {
        let _ = writeln!(
            out,
            "| [`{}`](#mcpfleet-{}) | {} |",
            cmd.get_name(),
            cmd.get_name(),
            cell(&text(cmd.get_about()))
        );
    }
    out.push('\n');
    section(&mut out, &top, "mcpfleet", true);
    out.push_str("### Exit codes\n\nWhen servers end differently, the most severe code wins.\n\n");
    out.push_str("| code | meaning |\n|---|---|\n");
    for code in crate::output::exit::Code::ALL {
        let _ = writeln!(out, "| {} | {} |", code.as_i32(), cell(code.meaning()));
    }
    out.push('\n');
    for cmd in commands {
        section(&mut out, cmd, cmd.get_name(), false);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// One command's section: `name` is `mcpfleet` for the program, else the
/// command's name.
fn section(out: &mut String, cmd: &clap::Command, name: &str, top: bool) {
    let title = if top { "mcpfleet".to_owned() } else { format!("mcpfleet {name}") };
    let _ = writeln!(out, "## `{title}`\n");
    let about = text(cmd.get_long_about().or(cmd.get_about()));
    if !about.is_empty() {
        let _ = writeln!(out, "{}\n", prose(&about));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| top || !a.is_global_set())
        .collect();
    let positionals: Vec<&&clap::Arg> = args.iter().filter(|a| a.is_positional()).collect();
    if !positionals.is_empty() {
        out.push_str("Arguments:\n\n");
        for arg in positionals {
            let _ = writeln!(out, "- `{}`: {}", positional(arg), one_line(&describe(arg)));
        }
        out.push('\n');
    }
    let options: Vec<&&clap::Arg> = args.iter().filter(|a| !a.is_positional()).collect();
    if !options.is_empty() {
        out.push_str("Options:\n\n");
        for arg in options {
            let _ = writeln!(out, "- `{}`: {}", option(arg), one_line(&describe(arg)));
        }
        out.push('\n');
    }
    if top {
        out.push_str(
            "`-h`, `--help` prints the help of the program or of a command (`--help` also \
             lists the exit codes); `-V`, `--version` the version and the commit it was \
             built from.\n\n",
        );
    }
    let after = text(cmd.get_after_help());
    if !after.is_empty() {
        let _ = writeln!(out, "{}\n", prose(&after));
    }
    let examples = examples::of(name);
    if !examples.is_empty() {
        out.push_str("Examples:\n\n```sh\n");
        for (i, example) in examples.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = writeln!(out, "# {}\n{}", example.about, example.line);
        }
        out.push_str("```\n\n");
    }
}

/// A positional argument as its usage shows it: `SERVER`, `SERVER...`.
fn positional(arg: &clap::Arg) -> String {
    let name = value_names(arg).join(" ");
    match arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
        true => format!("{name}..."),
        false => name,
    }
}

/// An option with its short and long names and its value: `-f, --file <FILE>`.
fn option(arg: &clap::Arg) -> String {
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let mut out = names.join(", ");
    if arg.get_action().takes_values() {
        let _ = write!(out, " <{}>", value_names(arg).join("> <"));
    }
    out
}

fn value_names(arg: &clap::Arg) -> Vec<String> {
    match arg.get_value_names() {
        Some(names) => names.iter().map(|n| n.to_string()).collect(),
        None => vec![arg.get_id().as_str().to_uppercase()],
    }
}

/// The argument's help, then its default, its values and its aliases.
fn describe(arg: &clap::Arg) -> String {
    let mut out = text(arg.get_long_help().or(arg.get_help()));
    let mut notes = Vec::new();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("default: {}", defaults.join(", ")));
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("values: {}", values.join(", ")));
    }
    let aliases: Vec<String> = arg
        .get_visible_aliases()
        .unwrap_or_default()
        .iter()
        .map(|a| format!("`--{a}`"))
        .collect();
    if !aliases.is_empty() {
        notes.push(format!("alias: {}", aliases.join(", ")));
    }
    if !notes.is_empty() {
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(out, "({})", notes.join("; "));
    }
    out
}

/// A help text as plain text, without styling.
fn text(styled: Option<&clap::builder::StyledStr>) -> String {
    styled.map(|s| s.to_string().trim().to_owned()).unwrap_or_default()
}

/// Text for markdown: outside code spans, `<`, `>` and `*` are escaped, so that
/// `<fleet>` is not taken for HTML nor `*` for emphasis. Lines stay as written.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
            continue;
        }
        for c in part.chars() {
            match c {
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '*' => out.push_str("\\*"),
                c => out.push(c),
            }
        }
    }
    out
}

/// Text for a list item: as `prose`, on one line.
fn one_line(text: &str) -> String {
    prose(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Text for a table cell: as `one_line`, with `|` escaped.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}
