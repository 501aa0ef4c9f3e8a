//! End to end with published servers nobody here wrote: the reference npm servers
//! (everything, filesystem, memory) and the Python ones (time, git), at pinned
//! versions installed by `.ci/install-servers`. Each starts, lists the tools it
//! really has, answers a real call, and is torn down with nothing left; a server
//! behind `npm exec` (npm -> sh -> node) leaves no orphan.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

fn q(p: &Path) -> String {
    serde_json::to_string(p.to_str().unwrap()).unwrap()
}

/// A fleet of every published server, with their working files in the test's dir.
fn published_fleet(label: &str) -> TestFleet {
    let cache = published_servers();
    let npm = cache.join("npm/node_modules/@modelcontextprotocol");
    let venv = cache.join("venv/bin");
    let fleet = TestFleet::raw(label, "");
    let dir = fleet.dir.path();
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("hello.txt"), "hello from a file\n").unwrap();
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    let body = format!(
        "version: 1
defaults:
  connect_timeout: 60s
  cleanup_timeout: 10s
servers:
  everything:
    command: node
    args: [{everything}, stdio]
  filesystem:
    command: node
    args: [{filesystem}, {files}]
  memory:
    command: node
    args: [{memory}]
    env: {{ MEMORY_FILE_PATH: {memfile} }}
  time:
    command: {time}
    args: [--local-timezone, UTC]
  git:
    command: {gitserver}
    args: [-r, {repo}]
  wrapped:
    command: npm
    args: [exec, --prefix, {prefix}, --, mcp-server-everything, stdio]
",
        everything = q(&npm.join("server-everything/dist/index.js")),
        filesystem = q(&npm.join("server-filesystem/dist/index.js")),
        files = q(&files),
        memory = q(&npm.join("server-memory/dist/index.js")),
        memfile = q(&dir.join("memory.json")),
        time = q(&venv.join("mcp-server-time")),
        gitserver = q(&venv.join("mcp-server-git")),
        repo = q(&repo),
        prefix = q(&cache.join("npm")),
    );
    std::fs::write(&fleet.path, body).unwrap();
    fleet
}

fn tool_names(doc: &Value, server: &str) -> Vec<String> {
    doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .unwrap_or_else(|| panic!("{server} not in {doc}"))["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn check_starts_lists_and_tears_down_every_published_server() {
    let fleet = published_fleet("published-check");
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    for s in doc["servers"].as_array().unwrap() {
        assert_eq!(s["state"], "stopped", "{s}");
        assert!(s["tools"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["teardown"]["leftover_pids"], serde_json::json!([]), "{s}");
        let ms = s["teardown"]["duration_ms"].as_u64().unwrap();
        assert!(ms <= 10_000, "teardown within its 10s deadline: {s}");
        assert_ne!(s["teardown"]["outcome"], "failed", "{s}");
    }
    fleet.assert_no_leftovers();
}

#[test]
fn up_tools_call_and_down_on_published_servers() {
    let fleet = published_fleet("published-up");
    assert_code(&fleet.run(&["up"]), 0);

    // The wrapper really is a chain of processes: npm, sh and node at least.
    let (_, status) = fleet.run_json(&["status", "wrapped"]);
    let leader = status["servers"][0]["pid"].as_i64().unwrap() as i32;
    let tagged = processes_with("MCPFLEET_TAG=");
    let chain = tagged
        .iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|st| {
                st.rsplit(')').next().unwrap().split_whitespace().nth(2)
                    == Some(&leader.to_string())
            })
        })
        .count();
    assert!(
        chain >= 2,
        "expected npm's chain in the wrapped server's group, found {chain}"
    );

    let (out, doc) = fleet.run_json(&["tools"]);
    assert_code(&out, 0);
    assert!(tool_names(&doc, "everything").contains(&"echo".to_owned()));
    assert!(
        tool_names(&doc, "filesystem").contains(&"read_text_file".to_owned())
            || tool_names(&doc, "filesystem").contains(&"read_file".to_owned())
    );
    assert!(tool_names(&doc, "memory").contains(&"read_graph".to_owned()));
    assert!(tool_names(&doc, "time").contains(&"get_current_time".to_owned()));
    assert!(tool_names(&doc, "git").contains(&"git_status".to_owned()));

    let call = |server: &str, tool: &str, args: &str| {
        let out = fleet.run(&["call", server, tool, "--args", args]);
        assert_code(&out, 0);
        stdout(&out)
    };
    assert!(call("everything", "echo", r#"{"message": "published"}"#).contains("published"));
    let files = fleet.dir.path().join("files");
    assert!(
        call(
            "filesystem",
            "list_directory",
            &format!(r#"{{"path": {}}}"#, q(&files))
        )
        .contains("hello.txt")
    );
    assert!(call("memory", "read_graph", "{}").contains("entities"));
    assert!(call("time", "get_current_time", r#"{"timezone": "UTC"}"#).contains("UTC"));
    let repo = fleet.dir.path().join("repo");
    assert!(
        call(
            "git",
            "git_log",
            &format!(r#"{{"repo_path": {}}}"#, q(&repo))
        )
        .contains("first")
    );
    assert!(call("wrapped", "echo", r#"{"message": "through npm"}"#).contains("through npm"));

    let started = Instant::now();
    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "torn down in parallel"
    );
    for s in doc["servers"].as_array().unwrap() {
        assert_eq!(s["state"], "stopped", "{s}");
        assert_eq!(s["teardown"]["leftover_pids"], serde_json::json!([]), "{s}");
    }
    // Nothing of any server is left, the node under npm -> sh included.
    fleet.assert_no_leftovers();
}
