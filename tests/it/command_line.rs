//! The habits the command line shares with docker compose, kubectl and cargo,
//! through the real binary: global flags after the command, `-o`, `logs --since
//! --tail --timestamps`, `events --since`, the fleet file found from a
//! subdirectory, and colour (never an escape in a file or a pipe unless asked).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::common::*;
use serde_json::Value;

/// `mcpfleet ARGS` run in `cwd` with nothing named for it: no `-f`, no
/// `$MCPFLEET_FILE`, no `$MCPFLEET_STATE_DIR`; default state directories go
/// under the test's own `$XDG_STATE_HOME`.
fn bare(fleet: &TestFleet, cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(mcpfleet_bin());
    cmd.args(args)
        .current_dir(cwd)
        .env(TEST_ID_VAR, &fleet.test_id)
        .env("XDG_STATE_HOME", fleet.dir.path().join("xdg"))
        .env_remove("MCPFLEET_STATE_DIR")
        .env_remove("MCPFLEET_FILE")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    cmd
}

fn run(cmd: Command) -> Output {
    run_bounded(cmd, Duration::from_secs(120))
}

fn run_in(fleet: &TestFleet, cwd: &Path, args: &[&str]) -> Output {
    run(bare(fleet, cwd, args))
}

/// Runs `mcpfleet ARGS` (as `TestFleet::run` does) until its stdout satisfies
/// `done`, for what the supervisor writes a moment after it answers.
fn run_until(fleet: &TestFleet, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = fleet.run(args);
        assert_code(&out, 0);
        let text = stdout(&out);
        if done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "`{}` never showed what was expected:\n{text}",
            args.join(" ")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn global_flags_work_after_the_command_and_o_is_output() {
    let fleet = TestFleet::fixtures("cl-after", &[("a", &[], ""), ("b", &[], "")]);
    let file = fleet.path.to_str().unwrap();
    let state = fleet.state_dir();
    let state = state.to_str().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let go = |args: &[&str]| run_in(&fleet, elsewhere.path(), args);

    let out = go(&["up", "-f", file, "--state-dir", state, "-o", "json"]);
    assert_code(&out, 0);
    let doc = parse_doc(&out);
    assert_eq!(doc["command"], "up");
    assert_eq!(server(&doc, "a")["state"], "running");

    let out = go(&[
        "status",
        "a",
        "--file",
        file,
        "--output=json",
        "--state-dir",
        state,
    ]);
    assert_code(&out, 0);
    let doc = parse_doc(&out);
    assert_eq!(doc["servers"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(server(&doc, "a")["state"], "running");

    // ndjson with -o, the flags split around the command.
    let out = go(&["-f", file, "status", "-o", "ndjson", "--state-dir", state]);
    assert_code(&out, 0);
    let last: Value = serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "summary", "{}", stdout(&out));

    // After `logs` and `events`, -f is --follow; the fleet file is --file there.
    let out = go(&["events", "--file", file, "--state-dir", state, "-n", "1"]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    let out = go(&["logs", "--file", file, "--state-dir", state, "a"]);
    assert_code(&out, 0);

    let out = go(&["validate", "-o", "json", "-f", file]);
    assert_code(&out, 0);
    assert_eq!(parse_doc(&out)["file"], file);

    // A usage error is still a usage error after the command.
    let out = go(&["status", "-f", file, "-o", "yaml"]);
    assert_code(&out, 2);
    assert!(
        stderr(&out).contains("invalid value 'yaml'"),
        "{}",
        stderr(&out)
    );

    let out = go(&["down", "--state-dir", state, "-o", "json", "-f", file]);
    assert_code(&out, 0);
    assert_eq!(server(&parse_doc(&out), "b")["state"], "stopped");
    fleet.assert_no_leftovers();
}

#[test]
fn import_writes_its_file_with_capital_o() {
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join(".mcp.json");
    std::fs::write(
        &client,
        r#"{"mcpServers": {"time": {"command": "mcp-server-time"}}}"#,
    )
    .unwrap();
    let target = dir.path().join("fleet.yaml");
    let mut cmd = Command::new(mcpfleet_bin());
    cmd.arg("import")
        .arg(&client)
        .arg("-O")
        .arg(&target)
        .stdin(Stdio::null());
    let out = run(cmd);
    assert_code(&out, 0);
    let text = std::fs::read_to_string(&target).expect("the fleet file was written");
    assert!(text.contains("mcp-server-time"), "{text}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

/// The RFC 3339 time a `--timestamps` line begins with.
fn time_of(line: &str) -> SystemTime {
    let start = line.find(" | ").map_or(0, |i| i + 3);
    let time = &line[start..start + 24];
    humantime::parse_rfc3339(time).unwrap_or_else(|e| panic!("no time in {line:?}: {e}"))
}

#[test]
fn logs_since_tail_and_timestamps() {
    let fleet = TestFleet::fixtures(
        "cl-logs",
        &[
            (
                "a",
                &[
                    "--stderr-line",
                    "one",
                    "--stderr-line",
                    "two",
                    "--stderr-line",
                    "three",
                ],
                "",
            ),
            ("b", &["--stderr-line", "from b"], ""),
        ],
    );
    assert_code(&fleet.run(&["up"]), 0);
    run_until(&fleet, &["logs", "a", "--tail", "all"], |t| {
        t.lines().count() == 3
    });

    // Without --timestamps the lines are as the server wrote them; the file
    // holds each with its time.
    let out = fleet.run(&["logs", "a"]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "one\ntwo\nthree\n");
    let file = std::fs::read_to_string(fleet.state_dir().join("logs/a.log")).unwrap();
    let stamped =
        regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\t(one|two|three)$").unwrap();
    assert!(file.lines().all(|l| stamped.is_match(l)), "{file:?}");

    let out = fleet.run(&["logs", "a", "--timestamps"]);
    assert_code(&out, 0);
    let timed =
        regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (one|two|three)$").unwrap();
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().all(|l| timed.is_match(l)), "{text}");

    // --tail is -n: the last lines of each log.
    assert_eq!(stdout(&fleet.run(&["logs", "a", "--tail", "1"])), "three\n");
    assert_eq!(
        stdout(&fleet.run(&["logs", "a", "-n", "2"])),
        "two\nthree\n"
    );
    let both = run_until(&fleet, &["logs", "-t", "--tail", "1"], |t| {
        t.contains("b | ")
    });
    let lines: Vec<&str> = both.lines().collect();
    assert_eq!(lines.len(), 2, "{both}");
    assert!(
        lines[0].starts_with("a | ") && lines[0].ends_with("Z three"),
        "{both}"
    );
    assert!(
        lines[1].starts_with("b | ") && lines[1].ends_with("Z from b"),
        "{both}"
    );

    // A second generation writes the same lines later: --since tells them apart.
    assert_code(&fleet.run(&["reconnect", "a"]), 0);
    let all = run_until(&fleet, &["logs", "a", "-t", "--tail", "all"], |t| {
        t.lines().count() == 6
    });
    let lines: Vec<&str> = all.lines().collect();
    let second = time_of(lines[3]);
    assert!(time_of(lines[2]) < second, "{all}");
    let since = humantime::format_rfc3339_millis(second).to_string();
    let out = fleet.run(&["logs", "a", "--since", &since]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "one\ntwo\nthree\n");
    // The same moment with an offset.
    let offset = humantime::format_rfc3339_millis(second + Duration::from_secs(3600))
        .to_string()
        .replace('Z', "+01:00");
    let out = fleet.run(&["logs", "a", "--since", &offset, "--tail", "1"]);
    assert_eq!(stdout(&out), "three\n");
    let out = fleet.run(&["logs", "a", "--since", "1h"]);
    assert_eq!(stdout(&out).lines().count(), 6, "{}", stdout(&out));
    let later = humantime::format_rfc3339_millis(time_of(lines[5]) + Duration::from_millis(1));
    let out = fleet.run(&["logs", "a", "--since", &later.to_string()]);
    assert_code(&out, 0);
    assert_eq!(stdout(&out), "");

    let out = fleet.run(&["logs", "--since", "yesterday"]);
    assert_code(&out, 2);
    assert!(
        stderr(&out).contains("neither a duration"),
        "{}",
        stderr(&out)
    );

    // The gateway's lines keep the time they begin with; --since applies.
    let out = fleet.run(&["logs", "--gateway", "--since", "1h"]);
    assert_code(&out, 0);

    assert_code(&fleet.run(&["down"]), 0);

    // events --since: the events from a moment on, and --tail.
    let out = fleet.run(&["events"]);
    assert_code(&out, 0);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON"))
        .collect();
    let time = |e: &Value| humantime::parse_rfc3339(e["time"].as_str().unwrap()).unwrap();
    let pivot = events
        .iter()
        .find(|e| e["server"] == "a" && e["generation"] == 2)
        .expect("an event of generation 2");
    let since = pivot["time"].as_str().unwrap();
    let want = events.iter().filter(|e| time(e) >= time(pivot)).count();
    assert!(want > 0 && want < events.len(), "{events:?}");
    let out = fleet.run(&["events", "--since", since]);
    assert_code(&out, 0);
    let got: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), want, "{}", stdout(&out));
    assert!(got.iter().all(|e| time(e) >= time(pivot)));
    let out = fleet.run(&["events", "--since", since, "--tail", "2"]);
    assert_eq!(stdout(&out).lines().count(), 2);
    let out = fleet.run(&["events", "--since", "10m"]);
    assert_eq!(stdout(&out).lines().count(), events.len());
    fleet.assert_no_leftovers();
}

/// A fleet file beside `mcpfleet.yml`, only validated.
const OTHER_FLEET: &str = "version: 1\nname: other\nservers:\n  x:\n    command: unused\n";

/// A fleet whose file is `mcpfleet.yml` in `proj/`, used from `proj/sub/deeper`.
fn nested_fleet(label: &str) -> (TestFleet, PathBuf, PathBuf) {
    let fleet = TestFleet::fixtures(label, &[("a", &[], ""), ("b", &[], "")]);
    let proj = fleet.dir.path().join("proj");
    let deeper = proj.join("sub/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    let file = proj.join("mcpfleet.yml");
    std::fs::rename(&fleet.path, &file).unwrap();
    (fleet, file, deeper)
}

#[test]
fn the_fleet_file_is_found_from_a_subdirectory() {
    let (fleet, file, deeper) = nested_fleet("cl-discover");

    let out = run_in(&fleet, &deeper, &["-v", "validate"]);
    assert_code(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("fleet file {}", file.display()))
            && err.contains("found above the current directory"),
        "-v names the file it found: {err}"
    );
    assert!(err.contains(&format!("{}: valid", file.display())), "{err}");
    let out = run_in(&fleet, &deeper, &["validate", "-o", "json"]);
    assert_eq!(parse_doc(&out)["file"], file.to_str().unwrap());

    let out = run_in(&fleet, &deeper, &["up", "-o", "json"]);
    assert_code(&out, 0);
    let out = run_in(&fleet, &deeper.join(".."), &["status", "-o", "json"]);
    assert_code(&out, 0);
    assert_eq!(server(&parse_doc(&out), "b")["state"], "running");

    // Both names in one directory: mcpfleet.yaml, with a warning. It names
    // another fleet, so mcpfleet.yml's fleet is left alone.
    let other = file.with_extension("yaml");
    std::fs::write(&other, OTHER_FLEET).unwrap();
    let out = run_in(&fleet, &deeper, &["validate", "-o", "json"]);
    assert_code(&out, 0);
    assert_eq!(parse_doc(&out)["file"], other.to_str().unwrap());
    let err = stderr(&out);
    assert!(
        err.contains("WARN")
            && err.contains(&format!(
                "both mcpfleet.yaml and mcpfleet.yml are in {}; using {}",
                file.parent().unwrap().display(),
                other.display()
            )),
        "{err}"
    );
    std::fs::remove_file(&other).unwrap();

    // The file gone, `down` from the subdirectory works from the copy that the
    // state directory recorded.
    let kept = fleet.dir.path().join("kept.yml");
    std::fs::rename(&file, &kept).unwrap();
    let out = run_in(&fleet, &deeper, &["down", "-o", "json"]);
    assert_code(&out, 0);
    assert!(
        stderr(&out).contains(&format!("the fleet file {} is gone", file.display())),
        "{}",
        stderr(&out)
    );
    assert_eq!(server(&parse_doc(&out), "a")["state"], "stopped");

    // With nothing to find, the error says where it looked.
    let out = run_in(&fleet, &deeper, &["up"]);
    assert_code(&out, 2);
    assert!(
        stderr(&out).contains(&format!(
            "no mcpfleet.yaml or mcpfleet.yml in {} or any directory above it",
            deeper.display()
        )),
        "{}",
        stderr(&out)
    );
    fleet.assert_no_leftovers();
}

fn has_escape(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"\x1b[")
}

#[test]
fn no_colour_escapes_in_pipes_and_files_unless_asked() {
    let (fleet, file, deeper) = nested_fleet("cl-colour");
    let state = fleet.state_dir();
    // Logs at debug level, in the CLI and in the supervisor it starts (which
    // inherits RUST_LOG), so that both have lines to colour.
    let with_logs = |args: &[&str]| {
        let mut cmd = bare(&fleet, &deeper, args);
        cmd.env("RUST_LOG", "mcpfleet=debug")
            .env("MCPFLEET_STATE_DIR", &state);
        run(cmd)
    };
    for args in [&["up"][..], &["status", "-v"], &["logs"], &["down"]] {
        let out = with_logs(args);
        assert_code(&out, 0);
        assert!(!has_escape(&out.stdout), "{args:?}: {}", stdout(&out));
        assert!(!has_escape(&out.stderr), "{args:?}: {}", stderr(&out));
        assert!(!out.stderr.is_empty(), "{args:?}: the CLI logged nothing");
    }
    let log = std::fs::read(state.join("supervisor.log")).unwrap();
    assert!(
        log.len() > 100,
        "the supervisor logged: {}",
        String::from_utf8_lossy(&log)
    );
    assert!(
        !has_escape(&log),
        "supervisor.log: {}",
        String::from_utf8_lossy(&log)
    );

    // A warning (two fleet files in one directory) on a captured stderr: plain
    // unless --color always, which wins over NO_COLOR too.
    std::fs::write(file.with_extension("yaml"), OTHER_FLEET).unwrap();
    let warn = |args: &[&str], no_color: bool| {
        let mut cmd = bare(&fleet, &deeper, args);
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let out = run(cmd);
        assert_code(&out, 0);
        assert!(
            stderr(&out).contains("both mcpfleet.yaml"),
            "{}",
            stderr(&out)
        );
        assert!(!has_escape(&out.stdout), "stdout is not coloured");
        has_escape(&out.stderr)
    };
    assert!(!warn(&["validate"], false));
    assert!(!warn(&["validate", "--color", "auto"], false));
    assert!(!warn(&["--color=never", "validate"], false));
    assert!(warn(&["validate", "--color", "always"], false));
    assert!(warn(&["--color", "always", "validate"], true));

    // clap's own usage errors follow --color as well.
    let out = run_in(&fleet, &deeper, &["bogus"]);
    assert_code(&out, 2);
    assert!(!has_escape(&out.stderr), "{}", stderr(&out));
    let out = run_in(&fleet, &deeper, &["--color", "always", "bogus"]);
    assert_code(&out, 2);
    assert!(has_escape(&out.stderr), "{}", stderr(&out));
    fleet.assert_no_leftovers();
}
