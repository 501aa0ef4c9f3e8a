//! Security properties, through the real binary:
//!
//! - the control socket is private: created 0600 in a 0700 directory, and a peer of
//!   another uid is refused by its credentials even when the file modes would let it
//!   in (a directory made too open by hand);
//! - a peer that connects and never writes neither blocks the supervisor nor keeps
//!   other clients waiting;
//! - every file of the state directory is private (no group or other write, the
//!   directory 0700), whatever the umask, and none is ever written through a symlink
//!   planted in its place;
//! - secrets from `${env:NAME}` (in `env`, `args`, `headers`) never reach output,
//!   JSON, events, logs or error messages, a failed spawn's included;
//! - a command is never run through a shell unless `shell: true`.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// Connects to `socket` as `uid`, sends a status request and returns what came back.
fn ask_as(uid: u32, socket: &Path) -> String {
    let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
    s.sendall(b'{"v":1,"op":"status"}\n')
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print(data.decode(), end="")
except Exception as e:
    print("ERROR " + type(e).__name__, end="")
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-c").arg(script).arg(socket);
    // SAFETY: setgid/setuid are async-signal-safe; nothing else runs before exec.
    unsafe {
        cmd.pre_exec(move || {
            if uid != 0 && (nix::libc::setgid(uid) != 0 || nix::libc::setuid(uid) != 0) {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run_bounded(cmd, Duration::from_secs(20));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_socket_is_private_and_other_users_are_refused() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("this test switches to another uid and needs root; skipped");
        return;
    }
    let fleet = TestFleet::fixtures("security-peer", &[("one", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    let socket = state.join("control.sock");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&socket), 0o600);

    // The owner is answered.
    assert!(ask_as(0, &socket).contains("\"type\":\"reply\""));
    // Another user cannot even reach the socket through the private directory.
    assert!(ask_as(65534, &socket).starts_with("ERROR"), "no way in");

    // Loosen the modes by hand, as a careless admin might: the credentials check
    // still refuses the other user, who gets no answer at all.
    // Only directories that others cannot pass through are opened (the test's own
    // temporary directory); every bit of their mode is restored afterwards.
    let full = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let mut parents = vec![];
    let mut p = state.as_path();
    while let Some(parent) = p.parent() {
        if full(parent) & 0o001 == 0 {
            parents.push((parent.to_path_buf(), full(parent)));
        }
        p = parent;
    }
    for (dir, m) in &parents {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(m | 0o011)).unwrap();
    }
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let answer = ask_as(65534, &socket);
    // Restore before asserting, so a failure leaves nothing open.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    for (dir, m) in &parents {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(*m)).unwrap();
    }
    assert!(
        !answer.contains("\"type\":\"reply\""),
        "another uid got an answer: {answer}"
    );
    // The supervisor goes on serving its owner.
    assert_code(&fleet.run(&["status"]), 0);
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------
// A peer that never writes

/// Peers that connect and then say nothing (or half a line) are left waiting on
/// their own: while they stay connected, other clients are served as promptly as
/// ever, again and again, including a `down`.
#[test]
fn peers_that_connect_and_never_write_block_nobody() {
    let fleet = TestFleet::fixtures("security-silent", &[("one", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let socket = fleet.state_dir().join("control.sock");
    // Twenty silent peers, and one that sends half a request and stops.
    let mut silent: Vec<UnixStream> = (0..20)
        .map(|_| UnixStream::connect(&socket).expect("connect"))
        .collect();
    let mut half = UnixStream::connect(&socket).expect("connect");
    half.write_all(br#"{"v":1,"op":"sta"#).unwrap();
    silent.push(half);

    let mut slowest = Duration::ZERO;
    for i in 0..5 {
        let started = Instant::now();
        let (out, doc) = fleet.run_json(&["status"]);
        assert_code(&out, 0);
        assert_eq!(server(&doc, "one")["state"], "running");
        let args = format!(r#"{{"i":{i}}}"#);
        let (out, doc) = fleet.run_json(&["call", "one", "echo", "--args", &args]);
        assert_code(&out, 0);
        assert_eq!(doc["result"]["content"][0]["text"], args);
        slowest = slowest.max(started.elapsed());
    }
    eprintln!("status + call with 21 silent peers connected: slowest {slowest:?}");
    assert!(
        slowest < Duration::from_secs(3),
        "clients waited {slowest:?} behind the silent peers"
    );

    // The silent peers got nothing: no answer was made up for them.
    for peer in &mut silent {
        peer.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buf = [0u8; 64];
        match peer.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!(
                "a silent peer was sent {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{e}"
            ),
        }
    }

    // `down` is not held up either, and tears everything down.
    let started = Instant::now();
    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "one")["state"], "stopped");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Once they hang up, the supervisor, now idle, exits.
    drop(silent);
    fleet.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------
// Files of the state directory

/// Mode bits of `path` itself (a symlink is not followed).
fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every entry of the state directory and of `logs/`: private to this user, no
/// group or other write anywhere, the directories 0700, the files 0600.
#[track_caller]
fn assert_private(state: &Path) {
    let me = nix::unistd::getuid().as_raw();
    assert_eq!(mode(state), 0o700, "{}", state.display());
    let mut seen = Vec::new();
    for dir in [state.to_path_buf(), state.join("logs")] {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let m = mode(&path);
            let name = path.strip_prefix(state).unwrap().display().to_string();
            assert_eq!(meta.uid(), me, "{name} belongs to uid {}", meta.uid());
            assert!(!meta.file_type().is_symlink(), "{name} is a symlink");
            assert_eq!(m & 0o022, 0, "{name} is writable by others: {m:o}");
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(m, want, "{name} has mode {m:o}");
            seen.push(name);
        }
    }
    for name in [
        "state.json",
        "events.ndjson",
        "supervisor.lock",
        "supervisor.log",
        "fleet.path",
        "fleet.yaml",
        "logs",
        "logs/one.log",
    ] {
        assert!(seen.iter().any(|s| s == name), "no {name} in {seen:?}");
    }
}

/// With the most permissive umask, every file the supervisor makes is still private:
/// the modes are set explicitly, not left to the umask.
#[test]
fn state_files_are_private_whatever_the_umask() {
    let fleet = TestFleet::fixtures(
        "security-modes",
        &[("one", &["--stderr-line", "hello"], "")],
    );
    let with_umask_0 = |args: &[&str]| {
        let mut cmd = fleet.command(args);
        // SAFETY: umask is async-signal-safe; nothing else runs before exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::libc::umask(0);
                Ok(())
            });
        }
        run_bounded(cmd, Duration::from_secs(60))
    };
    assert_code(&with_umask_0(&["up"]), 0);
    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    // The socket exists only while the supervisor serves.
    assert_eq!(mode(&state.join("control.sock")), 0o600);
    assert_private(&state);
    // A reconnect rewrites state.json and appends to the logs: still private.
    assert_code(&with_umask_0(&["reconnect", "one"]), 0);
    assert_private(&state);
    assert_code(&with_umask_0(&["down"]), 0);
    assert_private(&state);
    fleet.assert_no_leftovers();
}

/// A file outside the state directory that symlinks point to.
struct Victim {
    path: PathBuf,
}

const VICTIM_TEXT: &str = "precious: must never be written by mcpfleet\n";

impl Victim {
    fn new(dir: &Path) -> Victim {
        let path = dir.join("victim.txt");
        std::fs::write(&path, VICTIM_TEXT).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Victim { path }
    }

    /// Replaces `at` (whatever is there) by a symlink to the victim.
    fn plant(&self, at: &Path) {
        let _ = std::fs::remove_file(at);
        std::os::unix::fs::symlink(&self.path, at).unwrap();
    }

    #[track_caller]
    fn assert_untouched(&self, when: &str) {
        let text = std::fs::read_to_string(&self.path).unwrap();
        assert_eq!(text, VICTIM_TEXT, "the victim was written {when}");
        assert_eq!(mode(&self.path), 0o644, "the victim's mode changed {when}");
    }
}

/// Symlinks planted at the paths the supervisor writes (the temporary file of
/// `state.json`, the event log, a server's log and its rotated copy, the lock, the
/// supervisor's log, the record of the fleet file) point at a file outside: `up`, `reconnect` and `down` never
/// write through them. Where a file cannot be opened without following the link,
/// the command fails instead.
#[test]
fn planted_symlinks_are_never_followed() {
    let fleet = TestFleet::fixtures(
        "security-symlinks",
        &[
            // Writes to stderr, so that a log opened through a link would show it.
            ("one", &["--stderr-line", "one says hello"], ""),
            // More than the 4 MiB at which a server log is rotated to NAME.log.1.
            ("chatty", &["--stderr-flood-mb", "5"], ""),
        ],
    );
    let victim = Victim::new(fleet.dir.path());
    let state = fleet.state_dir();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(state.join("logs"))
        .unwrap();

    // Before anything runs: the rotated log of `chatty` is a planted link.
    victim.plant(&state.join("logs/chatty.log.1"));
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "chatty")["state"], "running");
    let rotated = state.join("logs/chatty.log.1");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::symlink_metadata(&rotated).is_ok_and(|m| m.file_type().is_symlink()) {
        assert!(Instant::now() < deadline, "the log was never rotated");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::fs::symlink_metadata(&rotated).unwrap().is_file());
    victim.assert_untouched("by the rotation of a server log");

    // While the supervisor runs: the temporary file of state.json (named after the
    // supervisor's pid), the event log and a server's log are replaced by links.
    let text = std::fs::read_to_string(state.join("state.json")).unwrap();
    let pid = serde_json::from_str::<Value>(&text).unwrap()["supervisor"]["pid"]
        .as_i64()
        .unwrap();
    victim.plant(&state.join(format!("state.tmp.{pid}")));
    victim.plant(&state.join("state.json"));
    victim.plant(&state.join("events.ndjson"));
    victim.plant(&state.join("logs/one.log"));
    // A new generation opens its log anew: through the link it must not.
    let out = fleet.run(&["reconnect", "one"]);
    eprintln!("reconnect over a planted log: {}", stdout(&out));
    victim.assert_untouched("by a reconnect");
    // And the refusal names the log, not the program.
    assert!(
        stdout(&out).contains("cannot open the server's log"),
        "{}",
        stdout(&out)
    );
    let (out, _) = fleet.run_json(&["down"]);
    victim.assert_untouched("by down");
    assert_code(&out, 0);
    let meta = std::fs::symlink_metadata(state.join("state.json")).unwrap();
    assert!(meta.is_file(), "state.json is a regular file");
    serde_json::from_str::<Value>(&std::fs::read_to_string(state.join("state.json")).unwrap())
        .expect("state.json is whole");
    fleet.assert_no_leftovers();

    // With no supervisor: each file it opens at start is a link in turn. The start
    // fails (it cannot open the file safely) and nothing is written through it.
    // The copy of the fleet file goes before its path: with the path gone, the
    // state directory records no file, and the copy is replaced, not followed.
    for name in [
        "events.ndjson",
        "supervisor.lock",
        "supervisor.log",
        "fleet.yaml",
        "fleet.path",
    ] {
        let at = state.join(name);
        victim.plant(&at);
        let out = fleet.run(&["up"]);
        eprintln!(
            "up with {name} planted: exit {:?}, {}",
            out.status.code(),
            stderr(&out).trim()
        );
        victim.assert_untouched(&format!("by up, through {name}"));
        assert_ne!(out.status.code(), Some(0), "up went on through {name}");
        let _ = fleet.run(&["down"]);
        fleet.assert_no_leftovers();
        std::fs::remove_file(&at).unwrap();
    }
    victim.assert_untouched("at the end");
}

// ---------------------------------------------------------------------------------
// Secrets

const SECRET_VAR: &str = "MCPFLEET_TEST_SECRET";

/// Everything a user or a script can see of a fleet: the files of its state
/// directory, as one text.
fn state_dir_text(state: &Path) -> String {
    let mut text = String::new();
    for dir in [state.to_path_buf(), state.join("logs")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let bytes = std::fs::read(entry.path()).unwrap_or_default();
                text.push_str(&format!("== {}\n", entry.path().display()));
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    text
}

/// Secrets from `${env:NAME}` in `env`, `args` and `headers` (and a command line
/// that does not exist, with the secret in its args) reach the servers, but never
/// any output: text and JSON of every command, events, logs, state, and the errors
/// of a failed spawn and of a failed remote connect.
#[test]
fn secrets_from_the_environment_never_reach_output_or_logs() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = format!("s3cr3t-{nanos}-value");
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid-${env:MCPFLEET_TEST_SECRET}.json");
    let fixture = serde_json::to_string(fixture_bin().to_str().unwrap()).unwrap();
    let body = format!(
        r#"version: 1
servers:
  holder:
    command: {fixture}
    args: ["--pid-file", {pid_file}]
    env: {{ API_KEY: "${{env:{SECRET_VAR}}}", MIXED: "a-${{env:{SECRET_VAR}}}-b" }}
  missing:
    command: /nonexistent/mcp-server
    args: ["--token", "${{env:{SECRET_VAR}}}", "--token=${{env:{SECRET_VAR}}}"]
    connect_timeout: 5s
  missing-cmd:
    command: /nonexistent/${{env:{SECRET_VAR}}}/server
  remote:
    url: http://127.0.0.1:9/mcp
    headers: {{ Authorization: "Bearer ${{env:{SECRET_VAR}}}", X-Api-Key: "${{env:{SECRET_VAR}}}" }}
    connect_timeout: 5s
"#,
        pid_file = serde_json::to_string(pid_file.to_str().unwrap()).unwrap(),
    );
    let fleet = TestFleet::raw("security-secrets", &body);
    let run = |args: &[&str]| {
        let mut cmd = fleet.command(args);
        cmd.env(SECRET_VAR, &secret);
        run_bounded(cmd, Duration::from_secs(60))
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

    // The secret does reach the server it is meant for (its environment and args).
    let out = run(&["up", "holder"]);
    record("up holder", &out);
    assert_code(&out, 0);
    let real_pid_file = tmp.path().join(format!("pid-{secret}.json"));
    let (pid, _) = read_pid_file(&real_pid_file);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let api_key = format!("API_KEY={secret}");
    assert!(
        environ.split(|b| *b == 0).any(|v| v == api_key.as_bytes()),
        "the server did not get its secret"
    );

    for args in [
        &["up"][..],
        &["--output", "json", "up"],
        &["status"],
        &["--output", "json", "status"],
        &["--output", "ndjson", "status"],
        &["tools"],
        &["--output", "json", "call", "missing", "echo"],
        &["call", "remote", "echo"],
        &["events"],
        &["logs"],
        &["validate"],
        &["--output", "json", "validate"],
        &["-vv", "--output", "ndjson", "reconnect", "holder"],
        &["--output", "json", "down"],
        &["-vvv", "--output", "json", "check"],
    ] {
        let out = run(args);
        record(&args.join(" "), &out);
    }
    fleet.assert_no_leftovers();
    let (_, doc) = {
        let out = run(&[
            "--output",
            "json",
            "check",
            "missing",
            "missing-cmd",
            "remote",
        ]);
        record("check (json)", &out);
        let doc: Value = serde_json::from_slice(&out.stdout).expect("check JSON");
        (out, doc)
    };
    // The failures are reported, naming what failed, but with templates only.
    let missing = server(&doc, "missing");
    assert_eq!(missing["error"]["kind"], "spawn_failed", "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server"),
        "{missing}"
    );
    let missing_cmd = server(&doc, "missing-cmd");
    assert!(
        missing_cmd["error"]["message"]
            .as_str()
            .unwrap()
            .contains("${env:MCPFLEET_TEST_SECRET}"),
        "the command is shown as its template: {missing_cmd}"
    );
    assert!(!server(&doc, "remote")["error"].is_null());

    seen.push_str(&state_dir_text(
        &std::fs::canonicalize(fleet.state_dir()).unwrap(),
    ));
    assert!(
        seen.contains("${env:MCPFLEET_TEST_SECRET}"),
        "the templates are shown where the values would be"
    );
    if let Some(at) = seen.find(&secret) {
        let from = seen[..at].rfind("== ").unwrap_or(0);
        let context = &seen[at.saturating_sub(300).max(from)..(at + 100).min(seen.len())];
        panic!("the secret leaked:\n{context}");
    }
    fleet.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------
// No shell

/// Commands, args and env values full of shell syntax run as literal program names
/// and arguments: no shell ever sees them, so the marker files that a shell would
/// create never appear. A server with `shell: true` is the control: its marker does
/// appear, so the markers would have caught a shell.
#[test]
fn commands_never_go_through_a_shell_unless_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = |n: u32| tmp.path().join(format!("marker-{n}"));
    let m: Vec<String> = (1..=8).map(|n| marker(n).display().to_string()).collect();
    let q = |s: String| serde_json::to_string(&s).unwrap();
    let fixture = fixture_bin().display().to_string();
    let literal_arg = format!(
        "$(touch {}); `touch {}` | touch {} && touch {}",
        m[2], m[3], m[4], m[5]
    );
    let body = format!(
        r#"version: 1
servers:
  semicolon:
    command: {cmd1}
  subst:
    command: {cmd2}
  piped:
    command: {cmd3}
  literal-args:
    command: {fixture}
    args: ["--stderr-line", {literal_arg}]
    env: {{ SHELL_BAIT: {env_bait} }}
  control:
    command: {control}
    shell: true
"#,
        cmd1 = q(format!("touch {}; {fixture}", m[0])),
        cmd2 = q(format!("$(touch {}) {fixture}", m[1])),
        cmd3 = q(format!("{fixture} | touch {}", m[6])),
        fixture = q(fixture.clone()),
        literal_arg = q(literal_arg.clone()),
        env_bait = q(format!("$(touch {})", m[7])),
        control = q(format!(
            "touch {}/control && exec {fixture}",
            tmp.path().display()
        )),
    );
    let fleet = TestFleet::raw("security-no-shell", &body);
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 3);
    for name in ["semicolon", "subst", "piped"] {
        let s = server(&doc, name);
        assert_eq!(s["error"]["kind"], "spawn_failed", "{s}");
    }
    // The fixture got the shell syntax as one literal argument, and printed it.
    let literal = server(&doc, "literal-args");
    assert_eq!(literal["state"], "stopped", "{literal}");
    assert_eq!(literal["error"], Value::Null, "{literal}");
    for (i, path) in m.iter().enumerate() {
        assert!(
            !Path::new(path).exists(),
            "marker {} exists: a shell ran ({path})",
            i + 1
        );
    }
    assert_eq!(server(&doc, "control")["state"], "stopped");
    assert!(
        tmp.path().join("control").exists(),
        "the control server ran through a shell and made its marker"
    );

    // Under the supervisor too, and the argument arrived verbatim.
    let (out, _) = fleet.run_json(&["up", "literal-args"]);
    assert_code(&out, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let log = fleet.state_dir().join("logs/literal-args.log");
    while !std::fs::read_to_string(&log).is_ok_and(|t| t.contains(&literal_arg)) {
        assert!(
            Instant::now() < deadline,
            "the server log does not show the literal argument: {:?}",
            std::fs::read_to_string(&log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_code(&fleet.run(&["down"]), 0);
    for path in &m {
        assert!(!Path::new(path).exists(), "a shell ran: {path}");
    }
    fleet.assert_no_leftovers();
}

/// A secret in a remote server's `url:` (its query) appears in no output and no
/// log, also when the connection fails and the HTTP client reports the error.
#[test]
fn a_secret_in_a_url_stays_out_of_errors_and_logs() {
    let secret = "url-secret-4242";
    let fleet = TestFleet::raw(
        "url-secret",
        "version: 1\nservers:\n  remote:\n    url: http://127.0.0.1:9/mcp?key=${env:URL_SECRET}\n    connect_timeout: 2s\n",
    );
    for args in [
        &["check"][..],
        &["--output", "json", "check"],
        &["-vv", "check"],
    ] {
        let out = run_bounded(
            {
                let mut c = fleet.command(args);
                c.env("URL_SECRET", secret);
                c
            },
            Duration::from_secs(60),
        );
        assert_code(&out, 3);
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(all.contains("remote"), "{all}");
        assert!(
            !all.contains(secret),
            "the secret leaked with {args:?}:\n{all}"
        );
    }
    fleet.assert_no_leftovers();
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The address of a door's URL (`http://ADDR/...`).
fn addr_of(url: &str) -> std::net::SocketAddr {
    let rest = url.trim_start_matches("http://");
    rest[..rest.find('/').unwrap_or(rest.len())]
        .parse()
        .expect("an address")
}

/// What comes back on `stream` until it closes or `limit` passes.
fn read_for(stream: &mut std::net::TcpStream, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// How long `status` takes to answer.
fn status_takes(fleet: &TestFleet) -> Duration {
    let started = Instant::now();
    let out = run_bounded(fleet.command(&["status"]), Duration::from_secs(20));
    assert!(out.status.code().is_some(), "status: {out:?}");
    started.elapsed()
}

/// Both HTTP doors against peers that hold connections (docs/design.md §10): a
/// flood of idle connections is capped per door (`gateway.max_connections`,
/// `metrics.max_connections`), those beyond the cap are answered 503 with
/// `Retry-After` and closed, counted into a line of `gateway.log` per burst, and
/// `status` keeps answering within a second throughout. Headers sent a byte at a
/// time, and a kept-alive connection left idle, are cut off after the header
/// timeout (10 s), which frees the door again; a body sent a byte a second is
/// answered 408 after the body timeout (30 s); `down` leaves nothing.
#[test]
fn a_flood_of_idle_or_slow_connections_is_capped_and_status_keeps_answering() {
    const GATEWAY_CAP: usize = 20;
    const METRICS_CAP: usize = 5;
    let metrics_port = free_port();
    let fleet = TestFleet::raw(
        "sec-flood",
        &format!(
            "version: 1\ngateway:\n  max_connections: {GATEWAY_CAP}\nmetrics:\n  listen: 127.0.0.1:{metrics_port}\n  max_connections: {METRICS_CAP}\nservers:\n{}",
            fixture_server("a", &[], "")
        ),
    );
    let (out, doc) = fleet.run_json(&["serve", "--listen", "127.0.0.1:0"]);
    assert_code(&out, 0);
    let http = http_of(&fleet, &doc);
    let gateway = addr_of(&http.url);
    let metrics: std::net::SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let started = Instant::now();

    // Headers a byte every half second: cut off after the header timeout.
    let (slow_connected, slow_is_connected) = std::sync::mpsc::channel();
    let slow = std::thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(gateway).unwrap();
        slow_connected.send(()).unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {gateway}\r\nX-Slow: {}",
            "a".repeat(100)
        );
        let began = Instant::now();
        for byte in request.bytes().cycle() {
            if stream.write_all(&[byte]).is_err() || began.elapsed() > Duration::from_secs(30) {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        began.elapsed()
    });
    // Headers at once, then a body a byte a second: answered 408 after the
    // body timeout (30 s).
    let token = http.token.clone();
    // Connected before the flood, so that it is accepted within the cap (the
    // door accepts in the order connections arrived).
    let (connected, is_connected) = std::sync::mpsc::channel();
    let slow_body = std::thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(gateway).unwrap();
        connected.send(()).unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {gateway}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: 1000\r\n\r\n{{"
        )
        .unwrap();
        stream.set_nonblocking(true).unwrap();
        let began = Instant::now();
        let mut answer = Vec::new();
        while began.elapsed() < Duration::from_secs(45) {
            let _ = stream.write_all(b" ");
            let mut buf = [0u8; 1024];
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        (
            began.elapsed(),
            String::from_utf8_lossy(&answer).into_owned(),
        )
    });
    is_connected.recv().unwrap();
    slow_is_connected.recv().unwrap();
    // A kept-alive connection, idle after one answer: closed as long after.
    let mut kept = std::net::TcpStream::connect(gateway).unwrap();
    write!(
        kept,
        "GET /metrics HTTP/1.1\r\nHost: {gateway}\r\nAuthorization: Bearer {}\r\n\r\n",
        http.token
    )
    .unwrap();
    let kept_alive = std::thread::spawn(move || {
        let began = Instant::now();
        let all = read_for(&mut kept, Duration::from_secs(30));
        (began.elapsed(), all)
    });

    // The flood: far more idle connections than either door allows.
    let mut idle: Vec<Vec<std::net::TcpStream>> = [(gateway, 300), (metrics, 60)]
        .iter()
        .map(|&(addr, count)| {
            (0..count)
                .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
                .collect()
        })
        .collect();
    for _ in 0..3 {
        let took = status_takes(&fleet);
        assert!(took < Duration::from_secs(1), "status took {took:?}");
    }
    // Those beyond the cap were told 503 and closed; those within wait.
    let mut refused = [0, 0];
    for (door, streams) in idle.iter_mut().enumerate() {
        for stream in streams.iter_mut().rev().take(30) {
            let answer = read_for(stream, Duration::from_millis(300));
            if !answer.is_empty() {
                assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
                assert!(answer.contains("Retry-After: 1\r\n"), "{answer}");
                assert!(answer.contains("Connection: close\r\n"), "{answer}");
                refused[door] += 1;
            }
        }
    }
    assert_eq!(
        refused,
        [30, 30],
        "the last of each flood are beyond the cap"
    );
    // A client with the token is refused alike while the door is full.
    let mut late = std::net::TcpStream::connect(gateway).unwrap();
    // The answer may come before the request is sent: a failed write is no matter.
    let _ = late.write_all(
        format!(
            "GET /metrics HTTP/1.0\r\nAuthorization: Bearer {}\r\n\r\n",
            http.token
        )
        .as_bytes(),
    );
    let answer = read_for(&mut late, Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");

    let (kept_for, kept_answer) = kept_alive.join().unwrap();
    assert!(kept_answer.starts_with("HTTP/1.1 200 "), "{kept_answer}");
    assert!(
        kept_for < Duration::from_secs(15),
        "an idle kept-alive connection stayed open {kept_for:?}"
    );
    let slow_for = slow.join().unwrap();
    assert!(
        slow_for < Duration::from_secs(15),
        "headers a byte at a time kept a connection {slow_for:?}"
    );
    // Cut by the header timeout (10 s), not refused at the cap.
    assert!(slow_for > Duration::from_secs(8), "cut after {slow_for:?}");
    // The idle flood is cut off by the same timeout: the door serves again.
    let deadline = started + Duration::from_secs(30);
    let served = loop {
        let mut s = std::net::TcpStream::connect(gateway).unwrap();
        let _ = s.write_all(
            format!(
                "GET /metrics HTTP/1.0\r\nAuthorization: Bearer {}\r\n\r\n",
                http.token
            )
            .as_bytes(),
        );
        let answer = read_for(&mut s, Duration::from_secs(5));
        if answer.starts_with("HTTP/1.0 200 ") || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(served.starts_with("HTTP/1.0 200 "), "{served}");
    let took = status_takes(&fleet);
    assert!(took < Duration::from_secs(1), "status took {took:?}");

    let (body_for, body_answer) = slow_body.join().unwrap();
    assert!(
        body_answer.starts_with("HTTP/1.1 408 "),
        "{body_for:?}: {body_answer}"
    );
    assert!(
        body_for < Duration::from_secs(35),
        "a body a byte a second: {body_for:?}"
    );

    // Hundreds of refusals, a few lines: one per door and burst.
    let log = std::fs::read_to_string(fleet.state_dir().join("gateway.log")).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("connection(s) (503)"))
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("gateway door: refused")
            && l.contains("(gateway.max_connections)")),
        "{log}"
    );
    assert!(
        lines.iter().any(|l| l.contains("metrics door: refused")),
        "{log}"
    );
    assert!(lines.len() <= 8, "{log}");
    drop(idle);
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}
