//! Names the commit that `mcpfleet --version` was built from:
//! `mcpfleet 0.1.0 (3f2a9c1 2026-12-01)`, the short hash followed by `-dirty` when
//! the files the binary is built from differ from that commit, and the commit's
//! date. Without git, or outside a git checkout of this crate (a source archive, a
//! crate unpacked inside some other repository), it is the package's version
//! alone: `mcpfleet 0.1.0`.
//!
//! The result is `MCPFLEET_VERSION` for `cli`. The script runs again when HEAD
//! moves (HEAD itself, the branch it names, packed refs; in a linked worktree, where
//! `.git` is a file, git says where those are) and when a source file changes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is built from, relative to the crate's root: a change to one of
/// them makes the tree dirty. (The fixture, tests, docs and benchmarks are not in
/// the binary.)
pub(crate) const SOURCES: &[&str] = &["src", "build.rs", "Cargo.toml", "Cargo.lock"];

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo::rerun-if-changed=build.rs");
    let long = match describe(&dir, Path::new("git")) {
        Some(commit) => {
            for path in commit.watch.iter().map(|p| p.as_path()).chain(
                SOURCES
                    .iter()
                    .map(Path::new)
                    .filter(|p| dir.join(p).exists()),
            ) {
                println!("cargo::rerun-if-changed={}", path.display());
            }
            format!("{version} ({commit})")
        }
        None => version,
    };
    println!("cargo::rustc-env=MCPFLEET_VERSION={long}");
}

/// The commit a checkout stands at, as `--version` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Commit {
    /// `git rev-parse --short HEAD`.
    pub(crate) hash: String,
    /// Whether a file of [`SOURCES`] differs from the commit (untracked new files
    /// under `src` included).
    pub(crate) dirty: bool,
    /// The commit's date (committer date, `YYYY-MM-DD`), when git gives it.
    pub(crate) date: Option<String>,
    /// The files whose change means HEAD moved: the build runs again then.
    pub(crate) watch: Vec<PathBuf>,
}

impl fmt::Display for Commit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.hash)?;
        if self.dirty {
            write!(f, "-dirty")?;
        }
        if let Some(date) = &self.date {
            write!(f, " {date}")?;
        }
        Ok(())
    }
}

/// The commit `dir` stands at, asking the program `git`; `None` when `dir` is not
/// the top of a git work tree (a directory below another repository's top is not
/// this crate's checkout) or when git cannot be run or answers nothing useful.
pub(crate) fn describe(dir: &Path, git: &Path) -> Option<Commit> {
    let ask = |args: &[&str]| -> Option<String> {
        let out = Command::new(git)
            .arg("-C")
            .arg(dir)
            // Reading only: never rewrite the index (which the next build would
            // see as a change).
            .arg("--no-optional-locks")
            .args(args)
            // A build run from a git hook inherits these; they name another
            // repository than the one at `dir`.
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_COMMON_DIR")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| {
            String::from_utf8_lossy(&out.stdout)
                .trim_end_matches(['\n', '\r'])
                .to_owned()
        })
    };
    let top = ask(&["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    let hash = ask(&["rev-parse", "--short", "HEAD"]).filter(|h| !h.is_empty())?;
    let date =
        ask(&["log", "-1", "--date=short", "--format=%cd", "HEAD"]).filter(|d| !d.is_empty());
    let mut status = vec!["status", "--porcelain", "--untracked-files=normal", "--"];
    status.extend(SOURCES);
    // Unknown counts as dirty: the hash alone would claim more than is known.
    let dirty = ask(&status).is_none_or(|s| !s.is_empty());

    let git_path = |name: &str| ask(&["rev-parse", "--git-path", name]).map(|p| dir.join(p));
    let mut watch = Vec::new();
    watch.extend(git_path("HEAD"));
    if let Some(branch) = ask(&["symbolic-ref", "-q", "HEAD"])
        && let Some(loose) = git_path(&branch)
    {
        // A branch whose ref is only packed gets a loose file at its next commit:
        // its directory changes then.
        match loose.exists() {
            true => watch.push(loose),
            false => watch.extend(loose.parent().filter(|p| p.exists()).map(Path::to_owned)),
        }
    }
    // Refs in the reftable format (git 2.45 and newer) live in a directory of
    // their own.
    watch.extend(
        ["packed-refs", "reftable"]
            .iter()
            .filter_map(|name| git_path(name))
            .filter(|p| p.exists()),
    );
    Some(Commit {
        hash,
        dirty,
        date,
        watch,
    })
}
