//! The platform boundary: the operating system is reached only through
//! `src/platform/`, and a build for a system it does not implement fails with one
//! clear error.
//!
//! No other target can be built here (its standard library is not installed), so
//! the second half is checked on `src/lib.rs` itself: with the name of this system
//! swapped for another one in its `cfg`s, which is what building for that system
//! changes, rustc must stop at the `compile_error!` alone.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// What only `src/platform/` may call or read: the kernel's interfaces below std
/// and tokio, and the choice of system.
const SYSTEM_ONLY: &str = r"(^|[^A-Za-z0-9_])(nix|libc)::|/proc\b|prctl|pidfd|killpg|setpgid|waitpid|waitid|[gs]etrlimit|O_PATH|target_os|std::os::linux";

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The code of a Rust source with its comments blanked out (strings are code: a
/// path in a string is a use of it).
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        code.push('\n');
                    }
                    i += 1;
                }
            }
            continue;
        }
        if c == 'r' && (next == Some('"') || next == Some('#')) {
            // A raw string: r"..." or r#"..."#, kept whole.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut k = j + 1;
                while k < chars.len() && !chars[k..].starts_with(&close) {
                    k += 1;
                }
                let end = (k + close.len()).min(chars.len());
                code.extend(&chars[i..end]);
                i = end;
                continue;
            }
        }
        if c == '"' {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            let end = (k + 1).min(chars.len());
            code.extend(&chars[i..end]);
            i = end;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '"'), or else a lifetime.
            let len = match (next, chars.get(i + 2)) {
                (Some('\\'), _) => chars[i + 2..]
                    .iter()
                    .position(|c| *c == '\'')
                    .map(|p| p + 3),
                (Some(_), Some('\'')) => Some(3),
                _ => None,
            };
            if let Some(len) = len {
                code.extend(&chars[i..(i + len).min(chars.len())]);
                i += len;
                continue;
            }
        }
        code.push(c);
        i += 1;
    }
    code
}

#[test]
fn comments_are_not_code_but_strings_are() {
    let code = code_of(
        "let a = \"/proc/x\"; // pidfd\n/* killpg /* nested */ */ let b = '\"'; let c = r#\"\" // no\"#; x // y\nz",
    );
    assert_eq!(
        code,
        "let a = \"/proc/x\"; \n let b = '\"'; let c = r#\"\" // no\"#; x \nz"
    );
}

#[test]
fn only_the_platform_module_talks_to_the_system() {
    let pattern = regex::Regex::new(SYSTEM_ONLY).unwrap();
    let src = Path::new(ROOT).join("src");
    let platform = src.join("platform");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "found the sources: {}", files.len());
    let mut found = Vec::new();
    let mut platform_uses = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let code = code_of(&text);
        let hits = code
            .lines()
            .enumerate()
            .filter(|(_, l)| pattern.is_match(l));
        if file.starts_with(&platform) {
            platform_uses += hits.count();
            continue;
        }
        // lib.rs chooses the systems the crate is built for (see below).
        if file == &src.join("lib.rs") {
            continue;
        }
        for (n, line) in hits {
            let name = file.strip_prefix(ROOT).unwrap().display().to_string();
            found.push(format!("{name}:{}: {}", n + 1, line.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "the operating system is reached outside src/platform/; go through \
         crate::platform instead:\n{}",
        found.join("\n")
    );
    // The pattern finds what it looks for: the platform module is full of it.
    assert!(platform_uses > 20, "{platform_uses} uses in src/platform/");
}

#[test]
fn lib_rs_builds_every_module_only_where_the_platform_is_implemented() {
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).unwrap();
    let code = code_of(&lib);
    let gate = "#[cfg(not(target_os = \"linux\"))]\ncompile_error!(";
    assert!(code.contains(gate), "lib.rs has no {gate}");
    // Every module is declared inside the macro that puts the Linux cfg on it.
    let start = code
        .find("on_implemented_platforms! {")
        .expect("the modules' block");
    let end = start + code[start..].find('}').expect("its end");
    let inside = &code[start..end];
    let outside = format!("{}{}", &code[..start], &code[end..]);
    assert!(
        !outside.contains("mod "),
        "a module declared outside the gate"
    );
    for module in ["platform", "process", "supervisor", "commands"] {
        assert!(inside.contains(&format!("pub mod {module};")), "{module}");
    }
    assert!(code.contains("$(#[cfg(target_os = \"linux\")] $module)*"));
}

#[test]
fn elsewhere_the_build_stops_at_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).unwrap();
    // As a build for macOS sees it. Only lib.rs is copied: a module that were not
    // left out would be a second error (its file is missing).
    let elsewhere = lib.replace("target_os = \"linux\"", "target_os = \"macos\"");
    assert_ne!(elsewhere, lib);
    std::fs::write(tmp.path().join("lib.rs"), &elsewhere).unwrap();
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "lib",
            "--crate-name",
            "mcpfleet",
            "--emit",
            "metadata",
            "--out-dir",
        ])
        .arg(tmp.path())
        .arg(tmp.path().join("lib.rs"))
        .output()
        .expect("rustc runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error"))
        .filter(|l| !l.starts_with("error: aborting due to"))
        .collect();
    assert_eq!(errors.len(), 1, "one error, not more:\n{stderr}");
    assert!(
        errors[0].starts_with("error: mcpfleet builds on Linux only"),
        "{stderr}"
    );
    // It names the module a port implements and where to read about it.
    let message = stderr.replace('\n', " ");
    for words in [
        "src/platform/",
        "Porting to another system",
        "docs/src/platforms/other-systems.md",
        "/proc",
        "pidfd",
    ] {
        assert!(message.contains(words), "{words}: {stderr}");
    }
    // The page it names is there, with the section it names.
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/platforms/other-systems.md"),
    )
    .expect("the page the error names");
    assert!(page.contains("\n## Porting to another system\n"), "{page}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
