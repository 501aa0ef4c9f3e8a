//! `mcpfleet --version` names the commit it was built from (build.rs), and the
//! version script falls back to the package's version alone where there is no git
//! or no checkout of this crate.

use std::path::{Path, PathBuf};
use std::process::Command;

// The build script itself, for its `describe`; its `main` is not called here.
#[expect(dead_code, reason = "the build script's `main` is not called here")]
#[path = "../../build.rs"]
mod build_script;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PACKAGE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Runs git in `dir` the way a person would; `None` when it fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn version_line(flag: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpfleet"))
        .arg(flag)
        .output()
        .expect("run mcpfleet");
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn version_names_the_commit_of_this_checkout() {
    let root = Path::new(ROOT);
    let line = version_line("--version");
    let is_checkout = git(root, &["rev-parse", "--show-toplevel"])
        .is_some_and(|top| Path::new(&top).canonicalize().ok() == root.canonicalize().ok());
    if !is_checkout {
        // Built from a source archive: the package's version alone.
        assert_eq!(line, format!("mcpfleet {PACKAGE_VERSION}\n"));
        return;
    }
    let hash = git(root, &["rev-parse", "--short", "HEAD"]).expect("git rev-parse");
    let date = git(root, &["log", "-1", "--date=short", "--format=%cd"]).expect("git log");
    let mut status = vec!["status", "--porcelain", "--"];
    status.extend(build_script::SOURCES);
    let dirty = !git(root, &status).expect("git status").is_empty();
    let dirty = if dirty { "-dirty" } else { "" };
    assert_eq!(
        line,
        format!("mcpfleet {PACKAGE_VERSION} ({hash}{dirty} {date})\n"),
        "--version names HEAD, as `git rev-parse --short HEAD` does"
    );
    assert_eq!(version_line("-V"), line, "-V says the same");
}

/// A git repository in a temporary directory with one commit of a `src/` file.
fn repository(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/lib.rs"), "// one\n").unwrap();
    git(&repo, &["init", "-q"]).expect("git init");
    git(&repo, &["add", "."]).expect("git add");
    git(&repo, &["commit", "-q", "-m", "one"]).expect("git commit");
    repo
}

/// What the build script says of `dir`, asking the `git` on the PATH.
fn describe(dir: &Path) -> Option<build_script::Commit> {
    build_script::describe(dir, Path::new("git"))
}

fn has_git() -> bool {
    git(Path::new(ROOT), &["--version"]).is_some()
}

#[test]
fn a_checkout_is_described_and_edits_to_sources_make_it_dirty() {
    if !has_git() {
        eprintln!("no git on this machine: only the fallbacks can be tried");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let commit = describe(&repo).expect("described");
    assert_eq!(
        commit.hash,
        git(&repo, &["rev-parse", "--short", "HEAD"]).unwrap()
    );
    assert!(!commit.dirty, "{commit:?}");
    let date = commit.date.clone().expect("a date");
    assert!(
        date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-',
        "{date}"
    );
    assert_eq!(commit.to_string(), format!("{} {date}", commit.hash));
    // HEAD and the branch it names are watched.
    assert!(
        commit.watch.iter().any(|p| p.ends_with(".git/HEAD")),
        "{commit:?}"
    );
    assert!(
        commit.watch.iter().any(|p| p.ends_with("refs/heads/main")),
        "{commit:?}"
    );

    // A file outside the sources of the binary does not count; one inside does,
    // tracked or new.
    std::fs::write(repo.join("NOTES.md"), "x").unwrap();
    assert!(!describe(&repo).unwrap().dirty);
    std::fs::write(repo.join("src/new.rs"), "// new\n").unwrap();
    let dirty = describe(&repo).unwrap();
    assert!(dirty.dirty, "{dirty:?}");
    let shown = dirty.to_string();
    assert!(
        shown.starts_with(&format!("{}-dirty ", commit.hash)),
        "{shown}"
    );
    std::fs::remove_file(repo.join("src/new.rs")).unwrap();
    std::fs::write(repo.join("src/lib.rs"), "// two\n").unwrap();
    assert!(describe(&repo).unwrap().dirty);

    // A commit moves HEAD: a new hash, clean again.
    git(&repo, &["commit", "-q", "-am", "two"]).expect("git commit");
    let next = describe(&repo).unwrap();
    assert_ne!(next.hash, commit.hash);
    assert!(!next.dirty);
}

#[test]
fn a_linked_worktree_watches_its_own_head_and_the_shared_branch() {
    if !has_git() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let linked = tmp.path().join("linked");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ],
    )
    .expect("git worktree add");
    assert!(linked.join(".git").is_file(), "`.git` is a file there");
    let commit = describe(&linked).expect("described");
    assert_eq!(
        commit.hash,
        git(&linked, &["rev-parse", "--short", "HEAD"]).unwrap()
    );
    let canonical = |p: &Path| p.canonicalize().unwrap();
    let watched: Vec<PathBuf> = commit.watch.iter().map(|p| canonical(p)).collect();
    let head = canonical(&repo.join(".git/worktrees/linked/HEAD"));
    let branch = canonical(&repo.join(".git/refs/heads/side"));
    assert!(watched.contains(&head), "{watched:?}");
    assert!(watched.contains(&branch), "{watched:?}");
}

#[test]
fn without_git_or_a_checkout_there_is_no_commit() {
    let tmp = tempfile::tempdir().unwrap();
    // A source archive: no `.git` anywhere above (a temporary directory is not
    // in a repository).
    let archive = tmp.path().join("archive");
    std::fs::create_dir_all(archive.join("src")).unwrap();
    assert_eq!(describe(&archive), None);
    // No git program.
    assert_eq!(
        build_script::describe(Path::new(ROOT), &tmp.path().join("no-such-git")),
        None
    );
    if !has_git() {
        return;
    }
    // A crate unpacked inside some other repository: that repository's commit is
    // not this crate's.
    let repo = repository(tmp.path());
    let unpacked = repo.join("vendor/mcpfleet");
    std::fs::create_dir_all(unpacked.join("src")).unwrap();
    assert_eq!(describe(&unpacked), None);
}
