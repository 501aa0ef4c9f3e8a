//! The gateway (docs/design.md §14) with a third client nobody here wrote: the MCP
//! Inspector (npm `@modelcontextprotocol/inspector` 2.12.0) in its CLI mode, run
//! with the node 22 it needs (npm `node` 22.23.3); `.ci/install-servers` installs
//! both into `.cache/inspector`. Each Inspector run is one command line: it
//! connects, does one request (`tools/list`, `tools/call`, `prompts/list`,
//! `resources/list`, `resources/read`), prints one JSON document and exits; each run
//! is bounded in time and killed when it overruns.
//!
//! Through both doors: the Inspector launches `mcpfleet connect` as its stdio
//! server, and it speaks streamable HTTP to `mcpfleet serve` with the bearer token.
//! Behind the gateway: fixture servers and the published server-everything, with
//! lists paged small so that the Inspector has to follow the cursors. Every test
//! ends with `down` and finds no process of its own left, the `connect` processes
//! the Inspector launched included.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

/// The bound on one Inspector run (its connect timeout is below it): a hang
/// fails the test instead of CI.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The Inspector's own connect timeout, in ms: a start of server-everything on a
/// busy machine may take longer than its default 15 s.
const CONNECT_TIMEOUT_MS: &str = "60000";

/// The gateway's page size in these fleets: every list the Inspector asks for
/// takes several pages.
const PAGE_SIZE: usize = 4;

/// The Inspector's exit code when the server demands authorization (its
/// `auth_required`).
const AUTH_REQUIRED: i32 = 3;

/// The Inspector's exit code when it cannot reach the server (its `unreachable`).
const UNREACHABLE: i32 = 4;

/// The name the Inspector's CLI gives in `clientInfo`.
const CLIENT_NAME: &str = "inspector-cli";

// ---------------------------------------------------------------------------------
// The Inspector

/// One finished Inspector run.
struct Run {
    /// What it was asked, for failure messages.
    label: String,
    status: ExitStatus,
    /// The JSON document it printed: `{"result": ...}` or `{"error": ...}`.
    doc: Value,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The result of a run that must have succeeded.
    #[track_caller]
    fn result(&self) -> &Value {
        assert!(
            self.status.success() && self.doc.get("result").is_some(),
            "{}: {}\nstdout:\n{}\nstderr:\n{}",
            self.label,
            self.status,
            self.stdout,
            self.stderr
        );
        &self.doc["result"]
    }

    /// The error of a run that must have failed with exit code `code`.
    #[track_caller]
    fn error(&self, code: i32) -> &Value {
        assert_eq!(
            self.status.code(),
            Some(code),
            "{}: exit code\nstdout:\n{}\nstderr:\n{}",
            self.label,
            self.stdout,
            self.stderr
        );
        assert!(
            self.doc.get("error").is_some(),
            "{}: no error: {}",
            self.label,
            self.doc
        );
        &self.doc["error"]
    }
}

/// Where the Inspector and its node are installed.
fn inspector_dir() -> PathBuf {
    published_servers().join("inspector/node_modules")
}

/// The Inspector's home directory for a fleet: it reads and writes its catalog,
/// client config and stored OAuth under `~/.mcp-inspector`, which must be neither
/// the user's nor shared between tests.
fn inspector_home(fleet: &TestFleet) -> PathBuf {
    let home = fleet.dir.path().join("inspector-home");
    std::fs::create_dir_all(&home).expect("the Inspector's home");
    home
}

/// Runs `inspector --cli --format json ARGS` to its end, within [`RUN_LIMIT`],
/// tagged with the fleet's test id.
#[track_caller]
fn inspector(fleet: &TestFleet, args: &[OsString]) -> Run {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let modules = inspector_dir();
    let label = format!(
        "inspector run #{n} ({})",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out_path = fleet.dir.path().join(format!("inspector-{n}.stdout"));
    let err_path = fleet.dir.path().join(format!("inspector-{n}.stderr"));
    let mut child = Command::new(modules.join("node/bin/node"))
        .arg(modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"))
        .args(["--cli", "--format", "json"])
        .args(["--connect-timeout", CONNECT_TIMEOUT_MS])
        .args(args)
        .env(TEST_ID_VAR, &fleet.test_id)
        .env("HOME", inspector_home(fleet))
        .env_remove("MCP_CATALOG_PATH")
        .env_remove("MCP_CLIENT_CONFIG_PATH")
        .env_remove("MCP_AUTO_OPEN_ENABLED")
        .env_remove("RUST_LOG")
        .env_remove("MCPFLEET_FILE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn the Inspector");
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the Inspector") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{label}: still running after {RUN_LIMIT:?}, killed\nstdout:\n{}\nstderr:\n{}",
                read_lossy(&out_path),
                read_lossy(&err_path)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = read_lossy(&out_path);
    let stderr = read_lossy(&err_path);
    // The result goes to stdout, an error's envelope to stderr.
    let doc = json_document(&stdout)
        .or_else(|| json_document(&stderr))
        .unwrap_or_else(|| {
            panic!("{label}: no JSON document ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}")
        });
    Run {
        label,
        status,
        doc,
        stdout,
        stderr,
    }
}

fn read_lossy(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// The Inspector's document in what it printed on one stream: with `--format json`
/// that is all of it; should a banner or a warning come with it, the last line that
/// is an object with a `result` or an `error`, else the text from the first `{` to
/// the last `}`.
fn json_document(stdout: &str) -> Option<Value> {
    let is_document =
        |v: &Value| v.is_object() && (v.get("result").is_some() || v.get("error").is_some());
    if let Ok(v) = serde_json::from_str::<Value>(stdout.trim())
        && is_document(&v)
    {
        return Some(v);
    }
    if let Some(v) = stdout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .find(is_document)
    {
        return Some(v);
    }
    let (start, end) = (stdout.find('{')?, stdout.rfind('}')?);
    serde_json::from_str::<Value>(stdout.get(start..=end)?)
        .ok()
        .filter(is_document)
}

/// How the Inspector reaches the gateway.
enum Door<'a> {
    /// It launches `mcpfleet -f FLEET connect SERVER...` as its stdio server.
    Stdio(&'a [&'a str]),
    /// Streamable HTTP, with `Authorization: Bearer` and the gateway's token.
    Http(&'a Http),
    /// Streamable HTTP with the headers given (none: no token at all).
    HttpWith(&'a Http, &'a [&'a str]),
}

impl Door<'_> {
    /// The Inspector's arguments for `method` (and `more`, its own options) through
    /// this door. The server's command goes after `--`, so that its options are not
    /// the Inspector's.
    fn args(&self, fleet: &TestFleet, method: &str, more: &[&str]) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
        let header = |token: &str| format!("Authorization: Bearer {token}");
        match self {
            Door::Stdio(_) => {
                // Over stdio the Inspector gives its server only HOME, PATH and a
                // few more of its own environment (the TypeScript SDK's default),
                // so the test id and the state directory are passed by name.
                let id = format!("{TEST_ID_VAR}={}", fleet.test_id);
                let state = format!("MCPFLEET_STATE_DIR={}", fleet.state_dir().display());
                push(&["-e", &id, "-e", &state]);
            }
            Door::Http(http) => {
                push(&["--transport", "http", "--server-url", &http.url]);
                push(&["--header", &header(&http.token)]);
            }
            Door::HttpWith(http, headers) => {
                push(&["--transport", "http", "--server-url", &http.url]);
                for h in *headers {
                    push(&["--header", h]);
                }
            }
        }
        push(&["--method", method]);
        push(more);
        if let Door::Stdio(servers) = self {
            args.push("--".into());
            args.push(mcpfleet_bin().into());
            args.push("-f".into());
            args.push(fleet.path.clone().into());
            args.push("connect".into());
            args.extend(servers.iter().map(OsString::from));
        }
        args
    }
}

/// The Inspector's `method` (with `more` options) through `door`.
#[track_caller]
fn ask(fleet: &TestFleet, door: &Door, method: &str, more: &[&str]) -> Run {
    inspector(fleet, &door.args(fleet, method, more))
}

/// The names under `key` (`tools`, `prompts`) of a list the Inspector printed,
/// sorted; the Inspector follows `nextCursor` itself, so none may be left.
#[track_caller]
fn names(run: &Run, key: &str) -> Vec<String> {
    let result = run.result();
    assert!(
        result.get("nextCursor").is_none_or(Value::is_null),
        "{}: the Inspector left pages unread: {result}",
        run.label
    );
    let mut names: Vec<String> = result[key]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no {key}: {result}", run.label))
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------
// Fleets and checks

/// Fixture `a` (seven tools), fixture `b`, and the published server-everything,
/// with lists paged [`PAGE_SIZE`] items a page.
fn fleet(label: &str) -> TestFleet {
    let body = format!(
        "version: 1\ngateway:\n  page_size: {PAGE_SIZE}\n  meta: true\nservers:\n{}{}{}",
        fixture_server("a", &["--tools", "7"], ""),
        fixture_server("b", &[], ""),
        everything("everything"),
    );
    TestFleet::raw(label, &body)
}

/// The tools the gateway must show for `servers`: each server's own, as `mcpfleet
/// tools` lists them, named `SERVER__TOOL`, sorted.
fn expected_tools(fleet: &TestFleet, servers: &[&str]) -> Vec<String> {
    let mut expected: Vec<String> = servers
        .iter()
        .flat_map(|s| {
            tools_of(fleet, s)
                .into_iter()
                .map(move |t| format!("{s}__{t}"))
        })
        .collect();
    expected.sort();
    expected
}

/// Lists and calls through `door`, which serves `a` and `everything` (and `b`
/// when `with_b`): the tools of exactly those servers, over several pages; a call
/// of the fixture's `echo` with arguments from `--tool-arg`, typed by the
/// Inspector, answered by `a`; server-everything's `echo`; its prompts, named the
/// same way; its resources, under their own URIs, one of which reads. Returns the
/// number of sessions it opened.
#[track_caller]
fn list_and_call(fleet: &TestFleet, door: &Door, with_b: bool) -> usize {
    let mut runs = 0;
    let mut request = |method: &str, more: &[&str]| {
        runs += 1;
        ask(fleet, door, method, more)
    };
    let listed = names(&request("tools/list", &[]), "tools");
    let servers: &[&str] = if with_b {
        &["a", "b", "everything"]
    } else {
        &["a", "everything"]
    };
    let expected = expected_tools(fleet, servers);
    assert!(expected.contains(&"a__tool_7".to_owned()), "{expected:?}");
    assert!(
        expected.contains(&"everything__echo".to_owned()),
        "{expected:?}"
    );
    assert!(expected.len() > 3 * PAGE_SIZE, "{expected:?}");
    assert_eq!(listed, expected);

    let run = request(
        "tools/call",
        &[
            "--tool-name",
            "a__echo",
            "--tool-arg",
            "client=inspector",
            "n=42",
            "flag=true",
        ],
    );
    let result = run.result();
    let echoed: Value = serde_json::from_str(text(result))
        .unwrap_or_else(|e| panic!("{}: the fixture echoes JSON ({e}): {result}", run.label));
    assert_eq!(
        echoed,
        json!({"client": "inspector", "n": 42, "flag": true}),
        "{result}"
    );
    assert_eq!(result["_meta"]["mcpfleet/server"], "a", "{result}");
    assert!(result["_meta"]["mcpfleet/generation"].is_u64(), "{result}");

    let run = request(
        "tools/call",
        &[
            "--tool-name",
            "everything__echo",
            "--tool-arg",
            "message=hello from the Inspector",
        ],
    );
    let result = run.result();
    assert!(
        text(result).contains("hello from the Inspector"),
        "{result}"
    );
    assert_eq!(result["_meta"]["mcpfleet/server"], "everything", "{result}");

    let prompts = names(&request("prompts/list", &[]), "prompts");
    assert!(
        prompts.contains(&"everything__simple-prompt".to_owned()),
        "{prompts:?}"
    );
    assert!(
        prompts.iter().all(|p| p.starts_with("everything__")),
        "only server-everything has prompts: {prompts:?}"
    );

    let run = request("resources/list", &[]);
    let resources = run.result()["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no resources: {}", run.label, run.doc));
    assert!(
        resources.len() > PAGE_SIZE,
        "{}: {} resources",
        run.label,
        resources.len()
    );
    let uri = resources[0]["uri"].as_str().expect("a resource's uri");
    assert!(uri.starts_with("demo://"), "server-everything's: {uri}");
    let run = request("resources/read", &["--uri", uri]);
    let contents = &run.result()["contents"];
    assert_eq!(contents[0]["uri"], uri, "{}: {}", run.label, run.doc);
    runs
}

/// The event log records `n` sessions of the Inspector through `door`, and, when
/// `closed`, their ends.
#[track_caller]
fn assert_inspector_sessions(fleet: &TestFleet, door: &str, n: usize, closed: bool) {
    let count = |events: &[Value], what: &str| {
        events
            .iter()
            .filter(|e| {
                e["gateway"] == what
                    && e["door"] == door
                    && (what == "session-closed"
                        || e["client"]
                            .as_str()
                            .is_some_and(|c| c.starts_with(CLIENT_NAME)))
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut events = gateway_events(fleet);
    while closed && count(&events, "session-closed") < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        events = gateway_events(fleet);
    }
    assert_eq!(count(&events, "session-opened"), n, "{events:?}");
    if closed {
        assert_eq!(count(&events, "session-closed"), n, "{events:?}");
    }
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

// ---------------------------------------------------------------------------------
// Tests

/// The Inspector launches `mcpfleet connect a everything` for each request, as a
/// client configured with that command does: it sees the tools of exactly those
/// two servers (not `b`'s), calls both, lists prompts and resources and reads one;
/// each run is a session opened and closed in the event log, and the servers stay
/// up between runs.
#[test]
fn the_inspector_lists_and_calls_through_connect() {
    let fleet = fleet("inspector-stdio");
    let selected = ["a", "everything"];
    let door = Door::Stdio(&selected);

    let sessions = list_and_call(&fleet, &door, false);

    let doc = fleet.run_json(&["status"]).1;
    assert_eq!(server(&doc, "a")["generation"], 1, "{doc}");
    assert_eq!(server(&doc, "everything")["generation"], 1, "{doc}");
    assert!(
        server(&doc, "b")["generation"].is_null(),
        "b was never started: {doc}"
    );
    assert_inspector_sessions(&fleet, "stdio", sessions, true);
    let doc = fleet.run_json(&["status"]).1;
    assert!(
        doc["gateway"].is_null() || doc["gateway"]["sessions"] == 0,
        "no session left open: {doc}"
    );
    down_and_no_leftovers(&fleet);
}

/// After `serve --listen 127.0.0.1:0`, the Inspector over streamable HTTP with
/// `Authorization: Bearer TOKEN` lists and calls the whole fleet; without the
/// header, or with another token, it fails with its `auth_required` (exit 3), the
/// gateway's reason in the message when it is told not to try OAuth; the token is
/// in no file of the Inspector's; after `down` the door no longer answers (the
/// Inspector's `unreachable`, exit 4).
#[test]
fn the_inspector_lists_and_calls_through_serve_with_the_token() {
    let fleet = fleet("inspector-http");
    let http = serve(&fleet, &[]);

    let sessions = list_and_call(&fleet, &Door::Http(&http), true);
    // The Inspector's CLI does not end its HTTP session when it exits (no DELETE):
    // each run's session stays open until 5 minutes without traffic close it.
    let doc = fleet.run_json(&["status"]).1;
    assert_eq!(doc["gateway"]["url"], http.url.as_str(), "{doc}");
    assert_eq!(doc["gateway"]["sessions"], sessions, "{doc}");

    // No token: what a user would type first (the Inspector, finding no terminal
    // for an OAuth login, gives up), then non-interactive.
    let none = ask(&fleet, &Door::HttpWith(&http, &[]), "tools/list", &[]);
    let error = none.error(AUTH_REQUIRED);
    assert_eq!(error["code"], "auth_required", "{error}");
    let none = ask(
        &fleet,
        &Door::HttpWith(&http, &[]),
        "tools/list",
        &["--stored-auth-only"],
    );
    let error = none.error(AUTH_REQUIRED);
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("unauthorized")),
        "the gateway's 401: {error}"
    );
    let wrong = format!("Authorization: Bearer {}", "0".repeat(64));
    let run = ask(
        &fleet,
        &Door::HttpWith(&http, &[&wrong]),
        "tools/list",
        &["--stored-auth-only"],
    );
    assert_eq!(run.error(AUTH_REQUIRED)["code"], "auth_required");
    let log = std::fs::read_to_string(fleet.state_dir().join("gateway.log")).unwrap_or_default();
    assert!(
        log.lines()
            .filter(|l| l.contains("refused POST") && l.contains("(401)"))
            .count()
            >= 3,
        "{log}"
    );

    // The Inspector's sessions, and none for the refused runs.
    assert_inspector_sessions(&fleet, "http", sessions, false);
    for file in files_under(&inspector_home(&fleet)) {
        let content = std::fs::read(&file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&content).contains(&http.token),
            "the token is in {}",
            file.display()
        );
    }

    down_and_no_leftovers(&fleet);
    let late = ask(&fleet, &Door::Http(&http), "tools/list", &[]);
    assert_eq!(
        late.error(UNREACHABLE)["code"],
        "unreachable",
        "{}",
        late.doc
    );
    fleet.assert_no_leftovers();
}

/// The README's Inspector recipe, run as it is written there: both command lines
/// of its `sh` block, through `npx` with the versions it names (found installed,
/// offline, in the Inspector's cache), with `mcpfleet`, the fleet file, the URL and
/// the token filled in. The fleet has the published mcp-server-time as `time`, as
/// the recipe's call assumes. The `connect` the Inspector launches, with the few
/// variables it passes, reaches the one supervisor of the fleet file: `time`
/// started once.
#[test]
fn the_readmes_inspector_recipe_works_as_written() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let after = readme
        .split_once("To see the fleet as a client does")
        .expect("the README's Inspector recipe")
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("the recipe's sh block")
        .0;
    assert!(
        block.contains("@modelcontextprotocol/inspector@2."),
        "the recipe names the version:\n{block}"
    );
    let time = published_servers().join("venv/bin/mcp-server-time");
    let fleet = TestFleet::raw(
        "inspector-readme",
        &format!(
            "version: 1\nservers:\n  time:\n    command: {}\n    args: [--local-timezone, UTC]\n    connect_timeout: 60s\n",
            quoted(&time)
        ),
    );
    let http = serve(&fleet, &[]);
    let script = block
        // The Inspector gives the `connect` it launches only a few variables
        // (no MCPFLEET_STATE_DIR): it finds the supervisor `serve` started by
        // the fleet file, under the state directory that one was given.
        .replace(
            "mcpfleet -f /path/to/fleet.yaml",
            &format!("{} -f {}", mcpfleet_bin().display(), fleet.path.display()),
        )
        .replace("http://127.0.0.1:7077/mcp", &http.url)
        .replace("Bearer TOKEN", &format!("Bearer {}", http.token));
    assert!(
        !script.contains("/path/to") && !script.contains("TOKEN\""),
        "{script}"
    );
    // npx finds the named versions installed where it runs (the Inspector's cache),
    // and is told not to go to the registry for them.
    let modules = inspector_dir();
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", &script])
        .current_dir(modules.parent().unwrap())
        .env("npm_config_offline", "true")
        .env("npm_config_update_notifier", "false")
        .env(TEST_ID_VAR, &fleet.test_id)
        .env("HOME", inspector_home(&fleet))
        .env_remove("RUST_LOG")
        .env_remove("MCPFLEET_FILE")
        .stdin(Stdio::null());
    let out = run_bounded(cmd, RUN_LIMIT * 2);
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(
        out.status.success(),
        "the recipe failed ({}):\nstdout:\n{text}\nstderr:\n{err}",
        out.status
    );
    assert!(
        text.contains("\"time__get_current_time\""),
        "tools/list lists the tool:\n{text}"
    );
    assert!(
        text.contains("\"timezone\""),
        "tools/call answered:\n{text}"
    );
    assert!(text.contains("UTC"), "with the timezone asked for:\n{text}");
    let doc = fleet.run_json(&["status"]).1;
    assert_eq!(
        server(&doc, "time")["generation"],
        1,
        "one start of `time`: {doc}"
    );
    down_and_no_leftovers(&fleet);
}

/// The Inspector in each protocol era it offers (`--protocol-era`), through
/// both doors, to fixtures `a` (seven tools) and `b` with lists paged
/// [`PAGE_SIZE`] items a page: `modern` (a `server/discover` probe that must
/// name 2026-07-28, then every request with that era's `_meta`), `auto` (which
/// the gateway's answer to the probe takes to 2026-07-28) and `legacy`
/// (`initialize`) each list exactly the fleet's tools and call `a`'s `echo`,
/// answered by `a`. Over HTTP only the legacy runs open sessions (the
/// Inspector leaves them open).
#[test]
fn the_inspector_lists_and_calls_in_both_eras_through_both_doors() {
    let fleet = TestFleet::raw(
        "inspector-eras",
        &format!(
            "version: 1\ngateway:\n  page_size: {PAGE_SIZE}\n  meta: true\nservers:\n{}{}",
            fixture_server("a", &["--tools", "7"], ""),
            fixture_server("b", &[], ""),
        ),
    );
    let http = serve(&fleet, &[]);
    let expected = expected_tools(&fleet, &["a", "b"]);
    assert!(expected.len() > PAGE_SIZE, "{expected:?}");
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        for era in ["modern", "auto", "legacy"] {
            let listed = ask(&fleet, &door, "tools/list", &["--protocol-era", era]);
            assert_eq!(names(&listed, "tools"), expected, "{}", listed.label);
            let arguments = json!({"era": era, "n": 7});
            let run = ask(
                &fleet,
                &door,
                "tools/call",
                &[
                    "--protocol-era",
                    era,
                    "--tool-name",
                    "a__echo",
                    "--tool-args-json",
                    &arguments.to_string(),
                ],
            );
            let result = run.result();
            let echoed: Value = serde_json::from_str(text(result))
                .unwrap_or_else(|e| panic!("{}: {e}: {result}", run.label));
            assert_eq!(echoed, arguments, "{}: {result}", run.label);
            assert_eq!(result["_meta"]["mcpfleet/server"], "a", "{result}");
        }
    }
    // Two legacy runs over HTTP, each a session the Inspector leaves open.
    assert_inspector_sessions(&fleet, "http", 2, false);
    assert_eq!(fleet.run_json(&["status"]).1["gateway"]["sessions"], 2);
    down_and_no_leftovers(&fleet);
}
