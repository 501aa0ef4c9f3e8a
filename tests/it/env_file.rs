//! `env_file:` through the real binary: a server gets the variables of its env
//! files, in order (`defaults:` first, then its own, then `env:`, which wins);
//! a missing file or a malformed line is exit 2 at the entry's line and column;
//! and a value from a file appears in no output of any command, no log and no
//! file of the state directory, like a value from `${env:}`.

use std::path::Path;
use std::process::Output;

use crate::common::*;
use serde_json::Value;

/// The environment of a living process, as `NAME=VALUE` strings.
fn environ(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn a_server_gets_its_env_files_in_order_and_env_wins() {
    let fleet = TestFleet::raw("env-file-order", "");
    let dir = fleet.dir.path();
    write(
        dir,
        "defaults.env",
        "# every server\nD=defaults\nX=defaults\nY=defaults\nZ=defaults\n",
    );
    write(dir, "first.env", "export X=first\nY='first one'\nZ=first\n");
    write(
        dir,
        "second.env",
        "Y=\"second\\tline\"\nZ=second # a comment\n",
    );
    let pid_a = dir.join("a.pid");
    let pid_b = dir.join("b.pid");
    let mut body = String::from("version: 1\ndefaults:\n  env_file: defaults.env\nservers:\n");
    body.push_str(&fixture_server(
        "a",
        &["--pid-file", pid_a.to_str().unwrap()],
        "env_file: [first.env, ./second.env]\nenv: {Z: env}",
    ));
    body.push_str(&fixture_server(
        "b",
        &["--pid-file", pid_b.to_str().unwrap()],
        "",
    ));
    std::fs::write(&fleet.path, body).unwrap();

    let out = fleet.run(&["up"]);
    assert_code(&out, 0);
    let (a, _) = read_pid_file(&pid_a);
    let (b, _) = read_pid_file(&pid_b);
    let env_a = environ(a);
    for want in ["D=defaults", "X=first", "Y=second\tline", "Z=env"] {
        assert!(env_a.iter().any(|v| v == want), "{want} in {env_a:?}");
    }
    let env_b = environ(b);
    for want in ["D=defaults", "X=defaults", "Y=defaults", "Z=defaults"] {
        assert!(env_b.iter().any(|v| v == want), "{want} in {env_b:?}");
    }
    // `validate` shows the files, in the order they apply.
    let (out, doc) = fleet.run_json(&["validate"]);
    assert_code(&out, 0);
    let files: Vec<&str> = doc["fleet"]["servers"][0]["env_file"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[0].ends_with("/defaults.env") && files[2].ends_with("/second.env"));
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_missing_file_or_a_malformed_line_is_exit_2_at_the_entry() {
    let fleet = TestFleet::raw(
        "env-file-missing",
        "version: 1\nservers:\n  a:\n    command: /bin/true\n    env_file: [ok.env, missing.env]\n",
    );
    write(fleet.dir.path(), "ok.env", "A=1\n");
    let out = fleet.run(&["check"]);
    assert_code(&out, 2);
    let err = stderr(&out);
    let file = fleet.path.display().to_string();
    assert!(
        err.contains(&format!(
            "{file}:5:24: servers.a.env_file[1]: cannot read env file `"
        )),
        "{err}"
    );
    assert!(err.contains("missing.env`: no such file"), "{err}");
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 2);
    assert_eq!(doc["error"]["kind"], "invalid_fleet_file");
    assert_eq!(doc["error"]["errors"][0]["line"], 5);
    assert_eq!(doc["error"]["errors"][0]["column"], 24);
    assert!(fleet.lock_pid().is_none(), "no supervisor was started");

    write(
        fleet.dir.path(),
        "missing.env",
        "A=1\n\nexport sk_live_pasted_alone\n",
    );
    let out = fleet.run(&["check"]);
    assert_code(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{file}:5:24: servers.a.env_file[1]: "))
            && err.contains("missing.env:3:1: "),
        "the env file's line: {err}"
    );
    assert!(!err.contains("sk_live"), "{err}");
    fleet.assert_no_leftovers();
}

/// A value from an env file reaches the server, and nothing else: text, JSON
/// and NDJSON of every command, `-vvv` logs, events, server logs and every file
/// of the state directory; also when a server with that file cannot be spawned.
#[test]
fn values_from_env_files_never_reach_output_or_logs() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = format!("envfile-s3cr3t-{nanos}");
    let fleet = TestFleet::raw("env-file-secrets", "");
    let dir = fleet.dir.path();
    write(
        dir,
        "secrets.env",
        &format!("API_KEY={secret}\nQUOTED=\"Bearer {secret}\"\n"),
    );
    let pid_file = dir.join("holder.pid");
    let mut body = String::from("version: 1\ndefaults:\n  env_file: secrets.env\nservers:\n");
    body.push_str(&fixture_server(
        "holder",
        &[
            "--pid-file",
            pid_file.to_str().unwrap(),
            "--stderr-line",
            "started",
        ],
        "",
    ));
    body.push_str("  missing:\n    command: /nonexistent/mcp-server\n    connect_timeout: 5s\n");
    std::fs::write(&fleet.path, body).unwrap();

    let mut seen = String::new();
    let mut record = |what: &str, out: &Output| {
        seen.push_str(&format!(
            "== {what} (exit {:?})\n{}{}",
            out.status.code(),
            stdout(out),
            stderr(out)
        ));
    };
    let out = fleet.run(&["up", "holder"]);
    record("up holder", &out);
    assert_code(&out, 0);
    let (pid, _) = read_pid_file(&pid_file);
    assert!(
        environ(pid).contains(&format!("API_KEY={secret}")),
        "the server did not get the value of its env file"
    );
    for args in [
        &["up"][..],
        &["--output", "json", "up"],
        &["status"],
        &["--output", "json", "status"],
        &["--output", "ndjson", "status"],
        &["tools"],
        &[
            "--output",
            "json",
            "call",
            "holder",
            "echo",
            "--args",
            "{\"text\": \"hi\"}",
        ],
        &["--output", "json", "call", "missing", "echo"],
        &["events"],
        &["logs"],
        &["validate"],
        &["--output", "json", "validate"],
        &["-vv", "--output", "ndjson", "reconnect", "holder"],
        &["--output", "json", "down"],
        &["-vvv", "--output", "json", "check"],
        &["--output", "ndjson", "check", "missing"],
    ] {
        let out = fleet.run(args);
        record(&args.join(" "), &out);
    }
    fleet.assert_no_leftovers();
    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    for d in [state.clone(), state.join("logs")] {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let bytes = std::fs::read(entry.path()).unwrap_or_default();
                seen.push_str(&format!("== {}\n", entry.path().display()));
                seen.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    // The commands did run, and said where the values come from.
    assert!(
        seen.contains("secrets.env"),
        "validate names the file:\n{seen}"
    );
    assert!(
        seen.contains("spawn_failed"),
        "the failed spawn was reported"
    );
    let validated: Value = {
        let (out, doc) = fleet.run_json(&["validate"]);
        assert_code(&out, 0);
        doc
    };
    assert!(
        validated["fleet"]["servers"][0]["env"]
            .as_object()
            .unwrap()
            .is_empty()
    );
    if let Some(at) = seen.find(&secret) {
        let from = seen[..at].rfind("== ").unwrap_or(0);
        let context = &seen[at.saturating_sub(300).max(from)..(at + 100).min(seen.len())];
        panic!("the secret leaked:\n{context}");
    }
}

/// A server that prints its secrets on stderr, one from `${env:}` and one from
/// an env file, each whole and then cut in two writes 300 ms apart: no output of
/// `up`, `status`, `events` or `logs`, and no file of the state directory
/// (`events.ndjson`, `logs/NAME.log`), shows them or any piece of them; the
/// server's log and its stderr tail show `[redacted]` where they were.
#[test]
fn secrets_a_server_prints_on_stderr_are_redacted_everywhere() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    // What is unique in each: a piece of either left over would show it.
    let env_mark = format!("{nanos}e");
    let file_mark = format!("{nanos}f");
    let env_secret = format!("from-env-{env_mark}-end");
    let file_secret = format!("from-file-{file_mark}-end");
    let fleet = TestFleet::raw("stderr-secrets", "");
    let dir = fleet.dir.path();
    write(dir, "secrets.env", &format!("FILE_KEY={file_secret}\n"));
    let print = ["--stderr-env", "ENV_KEY", "--stderr-env", "FILE_KEY"];
    let extra = "env: {ENV_KEY: \"${env:STDERR_SECRET}\"}\nenv_file: secrets.env";
    let mut body = String::from("version: 1\nservers:\n");
    body.push_str(&fixture_server("talker", &print, extra));
    let mut crash = print.to_vec();
    crash.extend(["--exit-during-init", "3"]);
    body.push_str(&fixture_server("crasher", &crash, extra));
    std::fs::write(&fleet.path, body).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = fleet.command(args);
        cmd.env("STDERR_SECRET", &env_secret);
        run_bounded(cmd, std::time::Duration::from_secs(60))
    };
    let mut seen = String::new();
    let mut record = |what: &str, out: &Output| {
        seen.push_str(&format!(
            "== {what} (exit {:?})\n{}{}",
            out.status.code(),
            stdout(out),
            stderr(out)
        ));
    };

    let out = run(&["up", "talker"]);
    record("up talker", &out);
    assert_code(&out, 0);
    // The crasher fails with its stderr tail in the error.
    let out = run(&["up", "crasher"]);
    record("up crasher", &out);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let (out, status) = {
        let out = run(&["--output", "json", "status"]);
        let doc = parse_doc(&out);
        (out, doc)
    };
    record("status (json)", &out);
    let tail = server(&status, "crasher").to_string();
    assert!(
        tail.contains("FILE_KEY=[redacted]") && tail.contains("ENV_KEY=[redacted]"),
        "the stderr tail, redacted: {tail}"
    );
    // Both halves of the cut writes have reached the talker's log.
    let log = fleet.state_dir().join("logs").join("talker.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("FILE_KEY again: [redacted]\n") {
            assert!(text.contains("ENV_KEY again: [redacted]\n"), "{text}");
            assert!(text.contains("\tENV_KEY=[redacted]\n"), "{text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the talker's log: {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for args in [
        &["up"][..],
        &["--output", "json", "up"],
        &["status"],
        &["--output", "ndjson", "status"],
        &["events"],
        &["--output", "json", "events"],
        &["logs"],
        &["logs", "crasher"],
        &["logs", "--timestamps", "talker"],
        &["--output", "json", "down"],
    ] {
        let out = run(args);
        record(&args.join(" "), &out);
    }
    fleet.assert_no_leftovers();
    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    for d in [state.clone(), state.join("logs")] {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let bytes = std::fs::read(entry.path()).unwrap_or_default();
                seen.push_str(&format!("== {}\n", entry.path().display()));
                seen.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    for (file, must) in [
        ("events.ndjson", "FILE_KEY=[redacted]"),
        ("talker.log", "ENV_KEY again: [redacted]"),
        ("crasher.log", "FILE_KEY again: [redacted]"),
    ] {
        let at = seen
            .find(&format!("/{file}\n"))
            .unwrap_or_else(|| panic!("no {file} in the state directory"));
        assert!(seen[at..].contains(must), "{file} shows {must}");
    }
    for mark in [&env_mark, &file_mark] {
        if let Some(at) = seen.find(mark.as_str()) {
            let from = seen[..at].rfind("== ").unwrap_or(0);
            let context = &seen[at.saturating_sub(300).max(from)..(at + 100).min(seen.len())];
            panic!("a secret leaked:\n{context}");
        }
    }
}
