//! `up --foreground`: the supervisor in the terminal. Ctrl-C tears everything down;
//! a second Ctrl-C SIGKILLs what is left instead of waiting for its grace periods.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

#[test]
fn ctrl_c_tears_down_and_a_second_ctrl_c_sigkills() {
    let fleet = TestFleet::fixtures(
        "foreground",
        &[
            ("plain", &[], ""),
            (
                "stubborn",
                &["--ignore-eof", "--ignore-sigterm"],
                "cleanup_timeout: 30s",
            ),
        ],
    );
    let child = fleet.spawn(&["--output", "json", "up", "--foreground"]);
    let pid = child.id();
    // Another CLI sees the foreground supervisor like any other.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut child = Some(child);
    loop {
        let (out, doc) = fleet.run_json(&["status"]);
        if out.status.code() == Some(0)
            && doc["servers"]
                .as_array()
                .is_some_and(|s| s.iter().all(|s| s["state"] == "running"))
        {
            break;
        }
        if Instant::now() > deadline {
            kill_all(&[pid as i32]);
            let out = child.take().unwrap().wait_with_output().unwrap();
            panic!(
                "servers never ran: {doc}\nforeground stdout:\n{}\nforeground stderr:\n{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let child = child.take().unwrap();
    let stubborn_pid = {
        let (_, doc) = fleet.run_json(&["status", "stubborn"]);
        doc["servers"][0]["pid"].as_i64().unwrap() as i32
    };
    let started = Instant::now();
    sigint(pid);
    std::thread::sleep(Duration::from_millis(800));
    // The stubborn server ignores EOF and SIGTERM; its grace periods would take
    // 24 s before SIGKILL. The second Ctrl-C does not wait for them.
    assert!(is_alive(stubborn_pid), "still in its grace period");
    sigint(pid);
    let out = run_wait(child, Duration::from_secs(15));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!is_alive(stubborn_pid));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("the up report");
    assert_eq!(doc["command"], "up");
    assert!(stderr(&out).contains("second signal"), "{}", stderr(&out));
    // The event log shows both teardowns completed.
    let events = std::fs::read_to_string(fleet.state_dir().join("events.ndjson")).unwrap();
    for server in ["plain", "stubborn"] {
        assert!(
            events
                .lines()
                .any(|l| l.contains(&format!("\"server\":\"{server}\""))
                    && l.contains("\"from\":\"stopping\",\"to\":\"stopped\"")),
            "{server} was not recorded stopped:\n{events}"
        );
    }
    fleet.assert_no_leftovers();
}

fn run_wait(child: std::process::Child, limit: Duration) -> std::process::Output {
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            kill_all(&[pid as i32]);
            panic!("the foreground supervisor did not exit within {limit:?}");
        }
    }
}
