//! `connect` handing its stdin and stdout to the supervisor (docs/design.md §14,
//! "Doors"), seen from the operating system: with pipes (as MCP clients give
//! them) the supervisor holds the client's very pipes and `connect` copies
//! nothing; with a socket the same; a `connect` killed mid-session ends the
//! session and the client's stdout closes; and a `connect` whose stdout is a
//! file copies bytes as before.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(30);

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "mcpfleet-tests-handover", "version": "1"}}})
    .to_string()
}

fn initialized() -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()
}

fn echo(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "fx__echo", "arguments": {"id": id}}})
    .to_string()
}

/// Reads lines from `read` until the answer to `id`; what comes before it is
/// dropped.
fn answer_of(read: &mut impl BufRead, id: u64) -> Value {
    answers_of(read, &[id]).remove(0)
}

/// Reads lines from `read` until the answers to every one of `ids`, whatever
/// their order (calls that take the long way may be answered in any order).
fn answers_of(read: &mut impl BufRead, ids: &[u64]) -> Vec<Value> {
    let mut found: Vec<Option<Value>> = vec![None; ids.len()];
    while found.iter().any(Option::is_none) {
        let mut line = String::new();
        let n = read.read_line(&mut line).expect("read connect's output");
        assert!(
            n > 0,
            "connect's output ended before the answers to {ids:?}"
        );
        let value: Value = serde_json::from_str(&line).expect("JSON-RPC lines only");
        if value.get("method").is_none()
            && let Some(at) = ids.iter().position(|id| value["id"] == *id)
        {
            found[at] = Some(value);
        }
    }
    found.into_iter().flatten().collect()
}

/// The pipe or socket behind descriptor `fd` of process `pid` (`pipe:[N]`).
fn file_of(pid: u32, fd: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether process `pid` holds a descriptor of `file` (`pipe:[N]`, `socket:[N]`).
fn holds(pid: i32, file: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == file))
        })
        .unwrap_or(false)
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "connect did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Open client sessions, as `status` shows them (no `gateway` at all: none).
fn sessions(fleet: &TestFleet) -> u64 {
    let (_, doc) = fleet.run_json(&["status"]);
    match doc.get("gateway") {
        None => 0,
        Some(g) => g["sessions"].as_u64().unwrap_or_else(|| panic!("{doc}")),
    }
}

/// Waits until `connect` (process `pid`) runs its own image for the rest of
/// the session (`mcpfleet __held FD`), and returns its threads and the
/// descriptors it holds.
fn held(pid: u32) -> (u64, Vec<String>) {
    let deadline = Instant::now() + BOUND;
    loop {
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.split('\0').nth(1) == Some("__held") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "connect never took its own image after the handover: {cmdline:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{status}"));
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .collect();
    (threads, fds)
}

fn until_sessions(fleet: &TestFleet, want: u64) {
    let deadline = Instant::now() + BOUND;
    while sessions(fleet) != want {
        assert!(
            Instant::now() < deadline,
            "the gateway did not get to {want} sessions"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_supervisor_takes_the_clients_pipes_and_a_killed_connect_ends_the_session() {
    let fleet = TestFleet::fixtures("handover-pipes", &[("fx", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let supervisor = fleet.lock_pid().expect("a supervisor after up");
    let mut child = fleet
        .command(&["connect"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn connect");
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    writeln!(input, "{}", initialize()).unwrap();
    assert_eq!(
        answer_of(&mut output, 0)["result"]["serverInfo"]["name"],
        "mcpfleet"
    );
    writeln!(input, "{}\n{}", initialized(), echo(1)).unwrap();
    let answer = answer_of(&mut output, 1);
    // Without `gateway.meta`, the result is the server's own: no `_meta` added.
    assert!(answer["result"]["content"].is_array(), "{answer}");
    assert!(answer["result"].get("_meta").is_none(), "{answer}");

    // The session runs on the client's own pipes, held by the supervisor.
    let pid = child.id();
    let (stdin, stdout) = (file_of(pid, 0), file_of(pid, 1));
    assert!(stdin.starts_with("pipe:") && stdout.starts_with("pipe:"));
    assert!(
        holds(supervisor, &stdin),
        "the supervisor reads the client's stdin pipe"
    );
    assert!(
        holds(supervisor, &stdout),
        "the supervisor writes the client's stdout pipe"
    );
    assert_eq!(sessions(&fleet), 1);
    // connect waits in an image of its own: one thread, and no runtime left
    // (no epoll or eventfd descriptor), only its stdio and the connection.
    let (threads, fds) = held(pid);
    assert_eq!(threads, 1);
    assert!(!fds.iter().any(|f| f.starts_with("anon_inode:")), "{fds:?}");
    assert!(fds.contains(&stdin) && fds.contains(&stdout), "{fds:?}");

    // connect killed: the supervisor ends the session and lets go of the pipes,
    // so the client's read of its stdout ends instead of waiting forever.
    child.kill().unwrap();
    child.wait().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = output.read_to_end(&mut rest);
        let _ = tx.send(());
    });
    rx.recv_timeout(BOUND)
        .expect("the client's stdout closed once connect was gone");
    until_sessions(&fleet, 0);
    assert!(!holds(supervisor, &stdin) && !holds(supervisor, &stdout));
    let events = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap();
    assert!(
        events.contains("\"gateway\":\"session-closed\""),
        "the session's end is an event:\n{events}"
    );
    drop(input);
    down_and_no_leftovers(&fleet);
}

#[test]
fn a_socket_is_handed_over_too_and_the_clients_end_lets_connect_exit_0() {
    let fleet = TestFleet::fixtures("handover-socket", &[("fx", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let supervisor = fleet.lock_pid().expect("a supervisor after up");
    // One socket as both stdin and stdout, as a client built on socketpairs gives.
    let (ours, theirs) = UnixStream::pair().unwrap();
    let theirs_out = theirs.try_clone().unwrap();
    let mut child = fleet
        .command(&["connect"])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::from(OwnedFd::from(theirs_out)))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn connect");
    let mut input = ours.try_clone().unwrap();
    let mut output = BufReader::new(ours.try_clone().unwrap());
    writeln!(input, "{}", initialize()).unwrap();
    answer_of(&mut output, 0);
    writeln!(input, "{}\n{}\n{}", initialized(), echo(1), echo(2)).unwrap();
    let answers = answers_of(&mut output, &[1, 2]);
    assert!(
        answers.iter().all(|a| a["result"].is_object()),
        "{answers:?}"
    );
    let socket = file_of(child.id(), 0);
    assert!(socket.starts_with("socket:"), "{socket}");
    assert!(
        holds(supervisor, &socket),
        "the supervisor holds the client's socket"
    );

    // The client is done writing: the session ends and connect exits 0.
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status}");
    until_sessions(&fleet, 0);
    down_and_no_leftovers(&fleet);
}

#[test]
fn a_connect_whose_stdout_is_a_file_copies_bytes_as_before() {
    let fleet = TestFleet::fixtures("handover-file", &[("fx", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let supervisor = fleet.lock_pid().expect("a supervisor after up");
    let out_path = fleet.dir.path().join("connect.out");
    let out_file = std::fs::File::create(&out_path).unwrap();
    let mut child = fleet
        .command(&["connect"])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(out_file))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn connect");
    let mut input = child.stdin.take().unwrap();
    let stdin = file_of(child.id(), 0);
    writeln!(input, "{}", initialize()).unwrap();
    // The file grows as connect copies; read it as a client would read a pipe.
    let mut reader = BufReader::new(std::fs::File::open(&out_path).unwrap());
    let mut tail = |id: u64| -> Value {
        let deadline = Instant::now() + BOUND;
        let mut line = String::new();
        loop {
            let mut piece = String::new();
            if reader.read_line(&mut piece).unwrap() == 0 {
                assert!(Instant::now() < deadline, "no answer to {id} in the file");
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            line.push_str(&piece);
            if !line.ends_with('\n') {
                continue;
            }
            let value: Value = serde_json::from_str(&line).expect("JSON-RPC lines only");
            line.clear();
            if value["id"] == id && value.get("method").is_none() {
                return value;
            }
        }
    };
    tail(0);
    writeln!(input, "{}\n{}", initialized(), echo(7)).unwrap();
    assert!(tail(7)["result"].is_object());
    assert!(
        !holds(supervisor, &stdin),
        "with a file for stdout nothing is handed over"
    );
    drop(input);
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status}");
    down_and_no_leftovers(&fleet);
}

#[test]
fn the_supervisor_takes_nothing_but_a_pipe_or_a_socket_and_says_why() {
    use std::os::fd::AsFd;
    let fleet = TestFleet::fixtures("handover-refused", &[("fx", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    // A client of the control socket that hands over a file instead of stdio.
    let mut control =
        UnixStream::connect(fleet.state_dir().join("control.sock")).expect("the control socket");
    control.set_read_timeout(Some(BOUND)).unwrap();
    writeln!(control, r#"{{"v":1,"op":"gateway","handover":true}}"#).unwrap();
    let mut reader = BufReader::new(control.try_clone().unwrap());
    let mut report = String::new();
    reader.read_line(&mut report).unwrap();
    assert!(report.contains("\"report\""), "{report}");
    let file = tempfile::tempfile().unwrap();
    mcpfleet::platform::send_fds(
        control.as_fd(),
        mcpfleet::protocol::HANDOVER,
        &[file.as_fd(), file.as_fd()],
    )
    .unwrap();
    let mut said = String::new();
    reader
        .read_to_string(&mut said)
        .expect("the supervisor closes the connection");
    assert!(
        said.contains("neither a pipe nor a socket"),
        "the refusal says why: {said}"
    );
    assert_eq!(sessions(&fleet), 0);
    let log = std::fs::read_to_string(fleet.state_dir().join("gateway.log")).unwrap();
    assert!(log.contains("did not hand over"), "{log}");
    down_and_no_leftovers(&fleet);
}

#[test]
fn the_held_image_exits_0_when_the_supervisor_ends_8_when_it_is_lost_and_1_with_its_refusal() {
    // `mcpfleet __held FD` is what `connect` becomes after the handover; here the
    // test is the supervisor's end of the connection, given to it as fd 0.
    let held = |said: &str| {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut child = std::process::Command::new(mcpfleet_bin())
            .args(["__held", "0"])
            .env(TEST_ID_VAR, "handover-held")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the held image");
        // It waits as long as the connection is open.
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            child.try_wait().unwrap().is_none(),
            "it waits while the connection is open"
        );
        let mut ours = ours;
        ours.write_all(said.as_bytes()).unwrap();
        drop(ours);
        let status = wait_exit(&mut child);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code(), stderr)
    };
    // The supervisor ended the session: one byte, then the close.
    let (code, stderr) = held(std::str::from_utf8(&[mcpfleet::protocol::SESSION_ENDED]).unwrap());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    // Closed with nothing said: the supervisor was lost under the session (8).
    let (code, stderr) = held("");
    assert_eq!(code, Some(8), "{stderr}");
    assert!(
        stderr.contains("mcpfleet connect: the supervisor is unreachable"),
        "{stderr}"
    );
    // A refusal, as the supervisor writes it before it closes the connection.
    let refusal = mcpfleet::protocol::encode(&mcpfleet::protocol::Response::<(), ()>::Error {
        message: "the supervisor could not take stdin and stdout: no".into(),
    });
    let (code, stderr) = held(&refusal);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("mcpfleet connect: the supervisor could not take stdin and stdout: no"),
        "{stderr}"
    );
    // Not a connection: nothing to wait on.
    let status = std::process::Command::new(mcpfleet_bin())
        .args(["__held", "99"])
        .env(TEST_ID_VAR, "handover-held")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}

#[test]
fn connect_exits_0_quietly_when_its_session_ends_and_8_when_the_supervisor_dies_under_it() {
    let fleet = TestFleet::fixtures("handover-lost", &[("fx", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let spawn = || {
        let mut child = fleet
            .command(&["connect"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn connect");
        let mut input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        writeln!(input, "{}", initialize()).unwrap();
        answer_of(&mut output, 0);
        writeln!(input, "{}\n{}", initialized(), echo(1)).unwrap();
        answer_of(&mut output, 1);
        held(child.id());
        (child, input, output)
    };
    let finish = |mut child: Child| {
        let status = wait_exit(&mut child);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.code(), stderr)
    };

    // The client's input ends: the session ends as it should, exit 0, nothing said.
    let (child, input, _output) = spawn();
    drop(input);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.is_empty(), "a normal end says nothing: {stderr}");

    // The supervisor killed under a session: 8, and a line on stderr.
    let (child, _input, _output) = spawn();
    let supervisor = fleet.lock_pid().expect("a supervisor");
    kill_all(&[supervisor]);
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(8), "{stderr}");
    assert!(
        stderr.contains("mcpfleet connect: the supervisor is unreachable"),
        "{stderr}"
    );
    // A new supervisor recovers what the killed one left, and ends it.
    down_and_no_leftovers(&fleet);
}
