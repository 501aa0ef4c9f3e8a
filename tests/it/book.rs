//! The book (`docs/`): its command reference is what the code renders, and every
//! relative link and anchor in it, in README.md and in CONTRIBUTING.md resolves.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `docs/src/reference/commands.md` is what `mcpfleet::cli::reference::markdown`
/// renders from the command line's definitions. `MCPFLEET_UPDATE_BOOK=1`
/// rewrites it.
#[test]
fn the_command_reference_is_fresh() {
    let path = root().join(mcpfleet::cli::reference::PAGE);
    let rendered = mcpfleet::cli::reference::markdown();
    if std::env::var_os("MCPFLEET_UPDATE_BOOK").is_some() {
        std::fs::write(&path, &rendered).expect("write the command reference");
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != rendered {
        let line = on_disk
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(rendered.lines().count()));
        panic!(
            "{} differs from what the command line renders (first at line {}: {:?} on disk, {:?} rendered); \
             regenerate it with: MCPFLEET_UPDATE_BOOK=1 cargo test --test it book::",
            mcpfleet::cli::reference::PAGE,
            line + 1,
            on_disk.lines().nth(line).unwrap_or("<end>"),
            rendered.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

/// Every command `--help` lists has a section in the reference, with its
/// options and its examples.
#[test]
fn the_command_reference_has_every_command_and_flag() {
    let page = mcpfleet::cli::reference::markdown();
    let mut cmd = mcpfleet::cli::command().disable_help_subcommand(true);
    cmd.build();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        let heading = format!("\n## `mcpfleet {name}`\n");
        let at = page
            .find(&heading)
            .unwrap_or_else(|| panic!("no section for {name}"));
        let section = &page[at + heading.len()..];
        let section = &section[..section.find("\n## ").unwrap_or(section.len())];
        for arg in sub
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_global_set())
        {
            if let Some(long) = arg.get_long().filter(|l| *l != "help") {
                let listed = section
                    .lines()
                    .any(|l| l.starts_with("- `") && l.contains(&format!("--{long}")));
                assert!(listed, "{name}: --{long}:\n{section}");
            }
        }
        assert!(
            !mcpfleet::cli::examples::of(name).is_empty() && section.contains("Examples:"),
            "{name} has no examples:\n{section}"
        );
    }
    for hidden in ["supervise", "man"] {
        assert!(!page.contains(&format!("`mcpfleet {hidden}`")), "{hidden}");
    }
    for global in [
        "--file",
        "--state-dir",
        "--output",
        "--color",
        "--verbose",
        "--quiet",
    ] {
        let listed = page
            .lines()
            .any(|l| l.starts_with("- `") && l.contains(global));
        assert!(listed, "{global}");
    }
}

/// The markdown files the link check reads: the book's pages, README.md and
/// CONTRIBUTING.md.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join("docs/src"), &mut files);
    files.push(root().join("README.md"));
    files.push(root().join("CONTRIBUTING.md"));
    files
}

/// A file's text with mdBook's `{{#include FILE}}` replaced by FILE's text.
fn expanded(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("{{#include ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "{{#include ".len()..];
        let end = after.find("}}").expect("an include ends with }}");
        let included = path.parent().unwrap().join(after[..end].trim());
        out.push_str(&expanded(&included));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The lines of `text` outside fenced code blocks (those inside are empty), so
/// that line numbers stay.
fn outside_fences(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return "";
            }
            if fenced { "" } else { line }
        })
        .collect()
}

/// A heading's anchor as GitHub and mdBook make it: the text without markup,
/// lower case; whitespace becomes `-`; characters other than letters, digits, `-`
/// and `_` are dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) counts as its text.
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => {
                Some(c.to_lowercase().next().unwrap())
            }
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings, a repeated one with `-1`, `-2`, ...
fn anchors(path: &Path) -> BTreeSet<String> {
    let text = expanded(path);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in outside_fences(&text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the inline links `[text](target)` of a line, outside code spans.
fn link_targets(line: &str) -> Vec<String> {
    let plain: String = line
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after
            .find(|c: char| c == ')' || c.is_whitespace())
            .unwrap_or(after.len());
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

/// Every relative link resolves to a file of the repository, and every `#anchor`
/// to a heading of the markdown file it names (or of its own file).
#[test]
fn every_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    let mut anchor_cache: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        for (n, line) in outside_fences(&text).into_iter().enumerate() {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = match path {
                    "" => file.clone(),
                    p => file.parent().unwrap().join(p),
                };
                if !resolved.exists() {
                    broken.push(format!("{shown}:{}: {target}: no such file", n + 1));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if resolved.extension().is_none_or(|e| e != "md") {
                    continue;
                }
                let key = resolved.canonicalize().unwrap();
                let known = anchor_cache
                    .entry(key)
                    .or_insert_with(|| anchors(&resolved));
                if !known.contains(anchor) {
                    broken.push(format!(
                        "{shown}:{}: {target}: no heading has the anchor #{anchor}",
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The anchors are those GitHub and mdBook make.
#[test]
fn anchors_follow_the_slug_rules() {
    assert_eq!(
        slug(" Tool contracts: `--expect-tools` and `--update-tools`"),
        "tool-contracts---expect-tools-and---update-tools"
    );
    assert_eq!(slug(" `mcpfleet up`"), "mcpfleet-up");
    assert_eq!(slug(" 4.3 Rules"), "43-rules");
    assert_eq!(
        slug(" Importing a client's configuration"),
        "importing-a-clients-configuration"
    );
    assert_eq!(slug(" See [the book](x.md)"), "see-the-book");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.md");
    std::fs::write(
        &page,
        "# A\n\n```sh\n# not a heading\n```\n\n## A\n\n## B\n",
    )
    .unwrap();
    let got: Vec<String> = anchors(&page).into_iter().collect();
    assert_eq!(got, ["a", "a-1", "b"]);
    assert_eq!(
        link_targets("see [x](a.md#b) and `[y](no.md)` and [z](c.md)"),
        ["a.md#b", "c.md"]
    );
}
