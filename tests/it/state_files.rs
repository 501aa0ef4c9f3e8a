//! The state directory and the fleet file it serves, through the real binary: two
//! files that map to one state directory (the second is refused), a running
//! fleet whose file is deleted (`status`, `logs`, `events` and `down` still work
//! from the recorded copy), and `ls`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// `mcpfleet -f <fleet> ARGS` with the default state directory under `xdg`
/// (`$XDG_STATE_HOME`), not the test's own `$MCPFLEET_STATE_DIR`.
fn at_root(fleet: &TestFleet, xdg: &Path, args: &[&str]) -> Output {
    let mut cmd = fleet.command(args);
    cmd.env_remove("MCPFLEET_STATE_DIR")
        .env("XDG_STATE_HOME", xdg);
    run_bounded(cmd, Duration::from_secs(120))
}

fn json_at_root(fleet: &TestFleet, xdg: &Path, args: &[&str]) -> (Output, Value) {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let out = at_root(fleet, xdg, &all);
    let doc = parse_doc(&out);
    (out, doc)
}

/// Waits until no supervisor runs in `state_dir` (an idle one lingers a moment).
fn wait_supervisor_gone(state_dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while lock_pid_in(state_dir).is_some_and(is_alive) {
        assert!(
            Instant::now() < deadline,
            "the supervisor of {} did not exit",
            state_dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

#[test]
fn a_second_fleet_file_with_the_same_name_is_refused_naming_both() {
    let xdg = tempfile::tempdir().unwrap();
    let body = |server: &str| {
        format!(
            "version: 1\nname: demo\nservers:\n{}",
            fixture_server(server, &[], "")
        )
    };
    let a = TestFleet::raw("statefile-same-a", &body("first"));
    let b = TestFleet::raw("statefile-same-b", &body("second"));
    let (a_file, b_file) = (canonical(&a.path), canonical(&b.path));
    let shared = xdg.path().join("mcpfleet/demo");

    let (out, doc) = json_at_root(&a, xdg.path(), &["up"]);
    assert_code(&out, 0);
    assert_eq!(doc["servers"][0]["state"], "running");

    // The second project's `up` starts nothing and says why.
    let out = at_root(&b, xdg.path(), &["up"]);
    assert_code(&out, 2);
    let err = stderr(&out);
    assert!(err.contains(&a_file.display().to_string()), "{err}");
    assert!(err.contains(&b_file.display().to_string()), "{err}");
    assert!(
        err.contains("--state-dir") && err.contains("name:"),
        "{err}"
    );
    assert!(stdout(&out).is_empty(), "no report: {}", stdout(&out));
    let (out, doc) = json_at_root(&b, xdg.path(), &["status"]);
    assert_code(&out, 2);
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["error"]["kind"], "state_dir_taken", "{doc}");
    assert!(b.alive().is_empty(), "the second fleet started something");
    // Naming the shared directory explicitly is refused just the same.
    let out = at_root(
        &b,
        xdg.path(),
        &["--state-dir", shared.to_str().unwrap(), "up"],
    );
    assert_code(&out, 2);
    assert!(stderr(&out).contains(&a_file.display().to_string()));

    // The first fleet is untouched: its server, its record.
    let (out, doc) = json_at_root(&a, xdg.path(), &["status"]);
    assert_code(&out, 0);
    let names: Vec<&str> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first"]);
    assert_eq!(doc["servers"][0]["state"], "running");
    let recorded = std::fs::read(shared.join("fleet.path")).unwrap();
    assert_eq!(recorded, format!("{}\n", a_file.display()).into_bytes());
    assert_eq!(
        std::fs::read(shared.join("fleet.yaml")).unwrap(),
        std::fs::read(&a.path).unwrap(),
        "the copy is the file's exact text"
    );

    // With a state directory of its own, the second fleet runs beside the first.
    let own = b.dir.path().join("own-state");
    let out = at_root(
        &b,
        xdg.path(),
        &["--state-dir", own.to_str().unwrap(), "up"],
    );
    assert_code(&out, 0);
    let out = at_root(
        &b,
        xdg.path(),
        &["--state-dir", own.to_str().unwrap(), "down"],
    );
    assert_code(&out, 0);
    b.assert_no_leftovers();

    // Once the first file is gone and its supervisor too, the second takes the
    // directory over, with a notice.
    assert_code(&at_root(&a, xdg.path(), &["down"]), 0);
    a.assert_no_leftovers();
    wait_supervisor_gone(&shared);
    std::fs::remove_file(&a.path).unwrap();
    let out = at_root(&b, xdg.path(), &["up"]);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("which is gone") && err.contains(&b_file.display().to_string()),
        "{err}"
    );
    assert_eq!(
        std::fs::read(shared.join("fleet.path")).unwrap(),
        format!("{}\n", b_file.display()).into_bytes()
    );
    // The copy is the text the running supervisor read: an edit shows in it
    // once a supervisor starts with the edited file.
    let first_text = std::fs::read(&b.path).unwrap();
    assert_eq!(
        std::fs::read(shared.join("fleet.yaml")).unwrap(),
        first_text
    );
    let mut edited = first_text.clone();
    edited.extend_from_slice(b"# edited\n");
    std::fs::write(&b.path, &edited).unwrap();
    assert_code(&at_root(&b, xdg.path(), &["status"]), 0);
    assert_eq!(
        std::fs::read(shared.join("fleet.yaml")).unwrap(),
        first_text
    );
    assert_code(&at_root(&b, xdg.path(), &["down"]), 0);
    wait_supervisor_gone(&shared);
    assert_code(&at_root(&b, xdg.path(), &["up"]), 0);
    assert_eq!(std::fs::read(shared.join("fleet.yaml")).unwrap(), edited);
    assert_code(&at_root(&b, xdg.path(), &["down"]), 0);
    b.assert_no_leftovers();
}

#[test]
fn a_fleet_whose_file_is_gone_is_still_seen_and_stopped_from_its_copy() {
    let xdg = tempfile::tempdir().unwrap();
    let fleet = TestFleet::fixtures(
        "statefile-gone",
        &[
            ("talker", &["--stderr-line", "hello from talker"], ""),
            ("quiet", &["--grandchild"], ""),
        ],
    );
    let file = canonical(&fleet.path);
    assert_code(&at_root(&fleet, xdg.path(), &["up"]), 0);
    let running = fleet.alive();
    assert!(
        running.len() >= 4,
        "supervisor, guardian, servers: {running:?}"
    );
    // A state directory named without a file: the file it records is meant.
    let dir = find_dir(xdg.path(), &fleet.path);
    let by_dir = || {
        let mut cmd = std::process::Command::new(mcpfleet_bin());
        cmd.args([
            "--output",
            "json",
            "--state-dir",
            dir.to_str().unwrap(),
            "status",
        ])
        .current_dir(xdg.path())
        .env(TEST_ID_VAR, &fleet.test_id)
        .env_remove("MCPFLEET_STATE_DIR")
        .env_remove("MCPFLEET_FILE")
        .stdin(std::process::Stdio::null());
        run_bounded(cmd, Duration::from_secs(60))
    };
    let out = by_dir();
    assert_code(&out, 0);
    assert!(!stderr(&out).contains("is gone"), "{}", stderr(&out));
    assert_eq!(server(&parse_doc(&out), "talker")["state"], "running");
    std::fs::remove_file(&fleet.path).unwrap();
    let out = by_dir();
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains("is gone; using the copy"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server(&parse_doc(&out), "quiet")["state"], "running");

    // `-f` names a file that is gone: its state directory is the one whose record
    // names it.
    let (out, doc) = json_at_root(&fleet, xdg.path(), &["status"]);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "the fleet file {} is gone; using the copy recorded in",
            file.display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert_eq!(server(&doc, "talker")["state"], "running");
    assert_eq!(server(&doc, "quiet")["state"], "running");

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = at_root(&fleet, xdg.path(), &["logs", "talker"]);
        assert_code(&out, 0);
        if stdout(&out).contains("hello from talker") {
            break;
        }
        assert!(Instant::now() < deadline, "no log: {}", stdout(&out));
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = at_root(&fleet, xdg.path(), &["events"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("\"to\":\"running\""),
        "{}",
        stdout(&out)
    );

    // Commands that need the file say so, and where the copy is.
    let out = at_root(&fleet, xdg.path(), &["up"]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains("holds a copy"), "{}", stderr(&out));
    assert_code(&at_root(&fleet, xdg.path(), &["call", "talker", "echo"]), 2);

    let (out, doc) = json_at_root(&fleet, xdg.path(), &["down"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "talker")["state"], "stopped");
    assert_eq!(server(&doc, "quiet")["state"], "stopped");
    fleet.assert_no_leftovers();
}

#[test]
fn a_crashed_supervisor_of_a_gone_file_is_recovered_by_down() {
    // With $MCPFLEET_STATE_DIR, as every other test here: the directory is named.
    let fleet = TestFleet::fixtures("statefile-gone-crash", &[("a", &["--grandchild"], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    std::fs::remove_file(&fleet.path).unwrap();
    let supervisor = fleet.lock_pid().expect("a supervisor");
    kill_all(&[supervisor]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_alive(supervisor) {
        assert!(Instant::now() < deadline, "the supervisor survived SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
    // What the dead supervisor left is shown...
    let (out, doc) = fleet.run_json(&["status"]);
    assert_code(&out, 5);
    assert!(
        stderr(&out).contains("is gone; using the copy"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server(&doc, "a")["state"], "quarantined", "{doc}");
    // ...and `down` starts a supervisor from the copy, which recovers it.
    let out = fleet.run(&["down"]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
    let (out, doc) = fleet.run_json(&["status"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "a")["state"], "stopped");
}

#[test]
fn ls_lists_running_and_stopped_fleets_and_an_empty_root() {
    let xdg = tempfile::tempdir().unwrap();
    let empty = at_root_ls(xdg.path(), &[]);
    assert_code(&empty, 0);
    assert_eq!(stdout(&empty), "NAME  FILE  STATE DIR  PID  SERVERS\n");
    let empty = at_root_ls(xdg.path(), &["--output", "json"]);
    assert_code(&empty, 0);
    assert_eq!(parse_doc(&empty), serde_json::json!([]));

    let named = format!(
        "version: 1\nname: alpha\nservers:\n{}{}",
        fixture_server("one", &[], ""),
        fixture_server("two", &[], "")
    );
    let running = TestFleet::raw("statefile-ls-running", &named);
    let stopped = TestFleet::fixtures("statefile-ls-stopped", &[("x", &[], "")]);
    assert_code(&at_root(&running, xdg.path(), &["up", "one"]), 0);
    assert_code(&at_root(&stopped, xdg.path(), &["up"]), 0);
    assert_code(&at_root(&stopped, xdg.path(), &["down"]), 0);
    let stopped_dir = find_dir(xdg.path(), &stopped.path);
    wait_supervisor_gone(&stopped_dir);
    let alpha_dir = canonical(&xdg.path().join("mcpfleet/alpha"));
    let pid = lock_pid_in(&alpha_dir).expect("alpha's supervisor");

    let out = at_root_ls(xdg.path(), &["--output", "json"]);
    assert_code(&out, 0);
    let doc = parse_doc(&out);
    let fleets = doc.as_array().expect("an array");
    assert_eq!(fleets.len(), 2, "{doc}");
    let alpha = fleets.iter().find(|f| f["name"] == "alpha").expect("alpha");
    assert_eq!(alpha["file"], canonical(&running.path).to_str().unwrap());
    assert_eq!(alpha["file_exists"], true);
    assert_eq!(alpha["state_dir"], alpha_dir.to_str().unwrap());
    assert_eq!(alpha["supervisor_pid"], pid);
    assert_eq!(alpha["servers_running"], 1);
    assert_eq!(alpha["servers_total"], 2);
    let other = fleets.iter().find(|f| f["name"] != "alpha").unwrap();
    assert_eq!(other["file"], canonical(&stopped.path).to_str().unwrap());
    assert_eq!(other["state_dir"], stopped_dir.to_str().unwrap());
    assert_eq!(other["supervisor_pid"], Value::Null);
    assert_eq!(other["servers_running"], 0);
    assert_eq!(other["servers_total"], 1);

    // Text: one line each; a file that is gone says so.
    std::fs::remove_file(&stopped.path).unwrap();
    let out = at_root_ls(xdg.path(), &[]);
    assert_code(&out, 0);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("NAME "), "{text}");
    let alpha_line = lines
        .iter()
        .find(|l| l.starts_with("alpha "))
        .expect("alpha");
    let last_two = |line: &str| -> Vec<String> {
        let cells: Vec<&str> = line.split_whitespace().collect();
        cells[cells.len() - 2..]
            .iter()
            .map(|c| c.to_string())
            .collect()
    };
    assert_eq!(
        last_two(alpha_line),
        [pid.to_string(), "1/2".into()],
        "{text}"
    );
    let other_line = lines
        .iter()
        .find(|l| !l.starts_with("alpha ") && !l.starts_with("NAME"))
        .unwrap();
    assert!(other_line.contains(" (gone)"), "{text}");
    assert_eq!(last_two(other_line), ["-", "0/1"], "{text}");

    assert_code(&at_root(&running, xdg.path(), &["down"]), 0);
    running.assert_no_leftovers();
    stopped.assert_no_leftovers();
}

/// `mcpfleet ls ARGS` with the state root under `xdg`.
fn at_root_ls(xdg: &Path, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(mcpfleet_bin());
    cmd.arg("ls")
        .args(args)
        .env_remove("MCPFLEET_STATE_DIR")
        .env("XDG_STATE_HOME", xdg)
        .stdin(std::process::Stdio::null());
    run_bounded(cmd, Duration::from_secs(60))
}

/// The state directory under `xdg` whose record names `file`.
fn find_dir(xdg: &Path, file: &Path) -> PathBuf {
    let want = format!("{}\n", canonical(file).display());
    std::fs::read_dir(xdg.join("mcpfleet"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|d| {
            std::fs::read_to_string(d.join("fleet.path"))
                .ok()
                .as_deref()
                == Some(&want)
        })
        .map(|d| canonical(&d))
        .expect("a state directory records the file")
}

/// Stopping needs none of what starting needed: a fleet started with a
/// `${env:}` secret set is seen (`status`, `logs`, `events`) and stopped
/// (`down`) from a shell where it is not set, with a warning naming it; `up`
/// still refuses without it. The secret's value reaches no file of the state
/// directory.
#[test]
fn a_fleet_is_seen_and_stopped_without_the_secret_it_started_with() {
    const VAR: &str = "MCPFLEET_TEST_STOP_SECRET";
    const VALUE: &str = "s3cret-value-never-on-disk";
    let fleet = TestFleet::raw(
        "statefile-no-secret",
        &format!(
            "version: 1\nservers:\n{}{}",
            fixture_server(
                "a",
                &["--stderr-line", "hello from a"],
                &format!("env: {{TOKEN: \"${{env:{VAR}}}\"}}")
            ),
            fixture_server("b", &["--grandchild"], "")
        ),
    );
    let with = |args: &[&str]| {
        let mut cmd = fleet.command(args);
        cmd.env(VAR, VALUE);
        run_bounded(cmd, Duration::from_secs(120))
    };
    let without = |args: &[&str]| {
        let mut cmd = fleet.command(args);
        cmd.env_remove(VAR);
        run_bounded(cmd, Duration::from_secs(120))
    };
    assert_code(&with(&["up"]), 0);
    let supervisor = fleet.lock_pid().expect("a supervisor");

    let warned = |out: &Output| {
        let err = stderr(out);
        assert!(
            err.contains(&format!("`${{env:{VAR}}}` not set")) && err.contains("warning"),
            "{err}"
        );
    };
    let out = without(&["--output", "json", "status"]);
    assert_code(&out, 0);
    warned(&out);
    let doc = parse_doc(&out);
    assert_eq!(server(&doc, "a")["state"], "running", "{doc}");
    assert_eq!(server(&doc, "b")["state"], "running", "{doc}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = without(&["logs", "a"]);
        assert_code(&out, 0);
        if stdout(&out).contains("hello from a") {
            break;
        }
        assert!(Instant::now() < deadline, "no log: {}", stdout(&out));
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = without(&["events"]);
    assert_code(&out, 0);
    assert!(
        stdout(&out).contains("\"to\":\"running\""),
        "{}",
        stdout(&out)
    );

    // Starting still needs it.
    let out = without(&["up"]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains(VAR), "{}", stderr(&out));
    assert_eq!(fleet.lock_pid(), Some(supervisor));

    let out = without(&["--output", "json", "down"]);
    assert_code(&out, 0);
    warned(&out);
    let doc = parse_doc(&out);
    assert_eq!(server(&doc, "a")["state"], "stopped", "{doc}");
    assert_eq!(server(&doc, "b")["state"], "stopped", "{doc}");
    fleet.assert_no_leftovers();

    for entry in std::fs::read_dir(fleet.state_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(VALUE),
                "the secret is in {}",
                path.display()
            );
        }
    }
}

/// One fleet file leads to one supervisor whatever the caller's environment: a
/// client that launches mcpfleet with a few variables (another `$HOME`, no
/// `$XDG_STATE_HOME`), or with none at all, reaches the supervisor that runs
/// under the state root of the shell that started it, and starts no second one.
#[test]
fn a_caller_with_another_environment_reaches_the_same_supervisor() {
    let xdg = tempfile::tempdir().unwrap();
    let other_home = tempfile::tempdir().unwrap();
    let fleet = TestFleet::fixtures("statefile-one-supervisor", &[("a", &[], "")]);
    assert_code(&at_root(&fleet, xdg.path(), &["up"]), 0);
    let dir = find_dir(xdg.path(), &fleet.path);
    let supervisor = lock_pid_in(&dir).expect("a supervisor");
    let before = fleet.alive();
    let minimal = |home: Option<&Path>, args: &[&str]| {
        let mut cmd = std::process::Command::new(mcpfleet_bin());
        cmd.arg("-f")
            .arg(&fleet.path)
            .args(args)
            .env_clear()
            .env(TEST_ID_VAR, &fleet.test_id)
            .current_dir(fleet.dir.path())
            .stdin(std::process::Stdio::null());
        if let Some(home) = home {
            cmd.env("HOME", home);
        }
        run_bounded(cmd, Duration::from_secs(120))
    };
    for home in [Some(other_home.path()), None] {
        let out = minimal(home, &["--output", "json", "up"]);
        assert_code(&out, 0);
        assert_eq!(server(&parse_doc(&out), "a")["state"], "running");
        let out = minimal(home, &["--output", "json", "status"]);
        assert_code(&out, 0);
        assert_eq!(server(&parse_doc(&out), "a")["state"], "running");
        assert_eq!(lock_pid_in(&dir), Some(supervisor));
        let mut now = fleet.alive();
        now.sort();
        let mut was = before.clone();
        was.sort();
        assert_eq!(now, was, "no second supervisor, no second server");
    }
    assert!(
        !other_home.path().join(".local/state/mcpfleet").exists(),
        "nothing under the other environment's state root"
    );
    let out = minimal(Some(other_home.path()), &["down"]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
}
