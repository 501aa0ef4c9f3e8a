//! The gateway (docs/design.md §14) end to end: the fleet served as one MCP server
//! through both doors, `mcpfleet connect` (stdio) and `mcpfleet serve` (streamable
//! HTTP), to MCP clients nobody here wrote: the official Python and TypeScript SDKs,
//! behind the scripted clients of `tests/clients/`. Each client runs as the
//! subprocess it is and is driven line by line through its stdin and stdout; every
//! read is bounded, so a hang fails the test. Behind the gateway: fixture servers,
//! the published server-everything and mcp-server-time, and a small server on the
//! TypeScript SDK (`tests/clients/fixture_server.mjs`), which logs the cancellations
//! it receives. Every test ends with `down` and finds no process of its own left,
//! clients and the `connect` processes they launched included.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

mod continuations;
mod eras;
mod fast;
mod listen;
mod tasks;
mod ts_client;

/// The bound on whatever a client waits for when speed is not the point (a start
/// of published servers on a busy machine, an answer): a hang fails the test.
const ANSWER: Duration = Duration::from_secs(45);

/// The SDKs' own request timeout: below [`ANSWER`], so that a request the gateway
/// never answers shows up as the SDK's timeout error rather than as silence.
const SDK_TIMEOUT_MS: &str = "30000";

/// The JSON-RPC error code of a server that cannot serve a request (G4).
const SERVER_UNAVAILABLE: i64 = -32001;

const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
const LISTS_CHANGED: [&str; 3] = [
    TOOLS_CHANGED,
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];
const PROGRESS: &str = "notifications/progress";

// ---------------------------------------------------------------------------------
// Clients

/// The 2026-07-28 era, as a client's `mode` and the version it names.
const MODERN: &str = "2026-07-28";

/// The SDK a client is built on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sdk {
    Python,
    TypeScript,
    /// The TypeScript SDK 2.x (`client2.mjs`), which speaks both eras
    /// (`tests/it/gateway/ts_client.rs`).
    TypeScript2,
}

const SDKS: [Sdk; 2] = [Sdk::Python, Sdk::TypeScript];

impl Sdk {
    /// The client script's command line, without its own arguments.
    fn command(self) -> Command {
        let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
        match self {
            Sdk::Python => {
                let mut cmd = Command::new(published_servers().join("venv/bin/python"));
                cmd.arg(clients.join("client.py"));
                cmd
            }
            Sdk::TypeScript => {
                published_servers();
                let mut cmd = Command::new("node");
                cmd.arg(clients.join("client.mjs"));
                cmd
            }
            Sdk::TypeScript2 => {
                published_servers();
                let mut cmd = Command::new("node");
                cmd.arg(clients.join("client2.mjs"));
                cmd
            }
        }
    }

    /// The name the client gives in `clientInfo`.
    fn client_name(self) -> &'static str {
        match self {
            Sdk::Python => "mcpfleet-tests-python-sdk",
            Sdk::TypeScript => "mcpfleet-tests-typescript-sdk",
            Sdk::TypeScript2 => "mcpfleet-tests-typescript-sdk-2",
        }
    }
}

/// How a client reaches the gateway.
#[derive(Clone, Copy)]
enum Door<'a> {
    /// The client launches `mcpfleet connect SERVER...` as its server.
    Stdio(&'a [&'a str]),
    /// Streamable HTTP, with the gateway's token.
    Http(&'a Http),
}

impl Door<'_> {
    /// The door's name in the event log.
    fn name(&self) -> &'static str {
        match self {
            Door::Stdio(_) => "stdio",
            Door::Http(_) => "http",
        }
    }

    /// The client's command line arguments for this door.
    fn args(&self, fleet: &TestFleet) -> Vec<OsString> {
        match self {
            Door::Stdio(servers) => {
                let mut args: Vec<OsString> = vec![
                    "--stdio".into(),
                    mcpfleet_bin().into(),
                    "-f".into(),
                    fleet.path.clone().into(),
                    "connect".into(),
                ];
                args.extend(servers.iter().map(OsString::from));
                args
            }
            Door::Http(http) => http_args(http, &["--token", &http.token]),
        }
    }
}

/// `--http URL` and more arguments.
fn http_args(http: &Http, more: &[&str]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--http".into(), http.url.clone().into()];
    args.extend(more.iter().map(OsString::from));
    args
}

/// One MCP client process: a command a line on its stdin, an answer a line on its
/// stdout, its stderr (and that of the `connect` it launched) in a file.
struct Client {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: PathBuf,
}

impl Client {
    /// Starts `sdk`'s client through `door` and waits until it is initialized.
    #[track_caller]
    fn open(fleet: &TestFleet, sdk: Sdk, door: Door) -> Client {
        let label = format!("{sdk:?} client over {}", door.name());
        let (client, first) = Client::start(fleet, sdk, &label, door.args(fleet));
        assert_eq!(
            first["ok"],
            true,
            "{label} did not connect: {first}\nstderr:\n{}",
            client.stderr_text()
        );
        assert_eq!(first["server_info"]["name"], "mcpfleet", "{first}");
        assert_eq!(
            first["capabilities"]["tools"]["listChanged"], true,
            "{first}"
        );
        client
    }

    /// Starts `sdk`'s client (`who`, in its label) in `mode`, with `more`
    /// options, through `door`, and waits until it says it connected; returns
    /// it with that first line.
    #[track_caller]
    fn open_in_mode(
        fleet: &TestFleet,
        sdk: Sdk,
        who: &str,
        mode: &str,
        door: Door,
        more: &[&str],
    ) -> (Client, Value) {
        let label = format!("{who} ({mode}) over {}", door.name());
        let mut args: Vec<OsString> = vec!["--mode".into(), mode.into()];
        args.extend(more.iter().map(OsString::from));
        args.extend(door.args(fleet));
        let (client, first) = Client::start(fleet, sdk, &label, args);
        assert_eq!(
            first["ok"],
            true,
            "{label} did not connect: {first}\nstderr:\n{}",
            client.stderr_text()
        );
        (client, first)
    }

    /// The Python SDK's client pinned to 2026-07-28 (with `more` options)
    /// through `door`, connected in that era.
    #[track_caller]
    fn modern(fleet: &TestFleet, door: Door, more: &[&str]) -> Client {
        let (client, first) =
            Client::open_in_mode(fleet, Sdk::Python, "Python client", MODERN, door, more);
        assert_eq!(first["protocol_version"], MODERN, "{first}");
        client
    }

    /// Starts a client with `args`; returns it with its first line, whether it
    /// connected or not.
    #[track_caller]
    fn start(fleet: &TestFleet, sdk: Sdk, label: &str, args: Vec<OsString>) -> (Client, Value) {
        static CLIENTS: AtomicU32 = AtomicU32::new(0);
        let n = CLIENTS.fetch_add(1, Ordering::Relaxed);
        let stderr = fleet.dir.path().join(format!("client-{n}.stderr"));
        let mut child = sdk
            .command()
            .args(args)
            .env(TEST_ID_VAR, &fleet.test_id)
            .env("MCPFLEET_STATE_DIR", fleet.state_dir())
            .env("MCP_CLIENT_TIMEOUT_MS", SDK_TIMEOUT_MS)
            .env_remove("RUST_LOG")
            .env_remove("MCPFLEET_FILE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("client stderr file"))
            .spawn()
            .expect("spawn the client");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Client {
            label: format!("{label} #{n}"),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        };
        let first = client.answer(ANSWER);
        (client, first)
    }

    /// Sends one command without waiting for its answer.
    fn send(&mut self, command: &Value) {
        let stdin = self.stdin.as_mut().expect("the client's stdin is open");
        if let Err(e) = writeln!(stdin, "{command}").and_then(|()| stdin.flush()) {
            panic!(
                "{}: cannot send {command}: {e}\nstderr:\n{}",
                self.label,
                self.stderr_text()
            );
        }
    }

    /// The client's next line, within `limit`.
    #[track_caller]
    fn answer(&mut self, limit: Duration) -> Value {
        match self.lines.recv_timeout(limit) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("{}: an answer that is not JSON ({e}): {line}", self.label)
            }),
            Err(RecvTimeoutError::Timeout) => panic!(
                "{}: no answer within {limit:?}\nstderr:\n{}",
                self.label,
                self.stderr_text()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "{}: exited ({:?}) without an answer\nstderr:\n{}",
                self.label,
                self.child.try_wait(),
                self.stderr_text()
            ),
        }
    }

    /// Sends `command` and returns its answer.
    #[track_caller]
    fn op(&mut self, command: Value) -> Value {
        self.send(&command);
        self.answer(ANSWER)
    }

    /// The result of a tools/call that must succeed.
    #[track_caller]
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.op(json!({"op": "call", "name": tool, "arguments": arguments}));
        assert_eq!(answer["ok"], true, "{}: call {tool}: {answer}", self.label);
        answer["result"].clone()
    }

    /// The JSON-RPC error of a tools/call that must fail.
    #[track_caller]
    fn call_error(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.op(json!({"op": "call", "name": tool, "arguments": arguments}));
        assert_eq!(answer["ok"], false, "{}: call {tool}: {answer}", self.label);
        answer["error"].clone()
    }

    /// The names of every tool listed, every page, sorted.
    #[track_caller]
    fn tool_names(&mut self) -> Vec<String> {
        let answer = self.op(json!({"op": "list_tools"}));
        assert_eq!(answer["ok"], true, "{}: list_tools: {answer}", self.label);
        let mut names: Vec<String> = answer["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().expect("a tool's name").to_owned())
            .collect();
        names.sort();
        names
    }

    #[track_caller]
    fn ping(&mut self) {
        let answer = self.op(json!({"op": "ping"}));
        assert_eq!(answer["ok"], true, "{}: ping: {answer}", self.label);
    }

    /// Waits until a notification `method` has arrived since the last wait for it.
    #[track_caller]
    fn expect_notification(&mut self, method: &str, why: &str) {
        let answer =
            self.op(json!({"op": "wait_notification", "method": method, "timeout_ms": 10_000}));
        assert_eq!(
            answer["ok"], true,
            "{}: no {method} {why}: {answer}",
            self.label
        );
    }

    /// Forgets the notifications of `methods` received so far.
    fn forget(&mut self, methods: &[&str]) {
        for method in methods {
            self.op(json!({"op": "wait_notification", "method": method, "timeout_ms": 1}));
        }
    }

    /// Closes the session; the client exits with status 0.
    #[track_caller]
    fn close(mut self) {
        let answer = self.op(json!({"op": "close"}));
        assert_eq!(answer["closed"], true, "{}: close: {answer}", self.label);
        let status = self.wait_exit(Duration::from_secs(20));
        assert!(status.success(), "{}: exited with {status}", self.label);
    }

    /// Waits for the client to exit, within `limit`.
    #[track_caller]
    fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the client") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: still running after {limit:?}\nstderr:\n{}",
                self.label,
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The end of the client's stderr, for failure messages.
    fn stderr_text(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        let start = (start..=text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text[start..].to_owned()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One client of each SDK through each door, in that order.
fn four_clients(fleet: &TestFleet, http: &Http) -> Vec<Client> {
    let mut clients = Vec::new();
    for sdk in SDKS {
        clients.push(Client::open(fleet, sdk, Door::Stdio(&[])));
        clients.push(Client::open(fleet, sdk, Door::Http(http)));
    }
    clients
}

/// Lets announcements already on their way arrive, then forgets them, so that
/// the next expected one is caused by what the test does next.
fn settle(clients: &mut [Client]) {
    std::thread::sleep(Duration::from_millis(500));
    for client in clients {
        client.forget(&LISTS_CHANGED);
    }
}

// ---------------------------------------------------------------------------------
// Fleets, the supervisor, results

/// The published mcp-server-time (Python).
fn time_server(name: &str) -> String {
    let command = published_servers().join("venv/bin/mcp-server-time");
    format!(
        "  {name}:\n    command: {}\n    args: [--local-timezone, UTC]\n    connect_timeout: 60s\n",
        quoted(&command)
    )
}

/// A server on the TypeScript SDK with a `slow` tool that logs its cancellation
/// and a `change_lists` tool that announces list changes.
fn sdk_server(name: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/fixture_server.mjs");
    published_servers();
    format!(
        "  {name}:\n    command: node\n    args: [{}, stdio]\n    connect_timeout: 60s\n",
        quoted(&script)
    )
}

/// `status` of the whole fleet (its exit code is not the point).
fn status(fleet: &TestFleet) -> Value {
    fleet.run_json(&["status"]).1
}

fn status_of(fleet: &TestFleet, name: &str) -> Value {
    server(&status(fleet), name).clone()
}

/// Polls `status` until `pred` holds for the server, or fails after `limit`.
#[track_caller]
fn wait_status(fleet: &TestFleet, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = status_of(fleet, name);
        if pred(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{name} never {what}: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The generation `status` shows for a server.
fn generation_of(fleet: &TestFleet, name: &str) -> u64 {
    let s = status_of(fleet, name);
    s["generation"]
        .as_u64()
        .unwrap_or_else(|| panic!("no generation: {s}"))
}

/// A result says which server and generation answered it.
#[track_caller]
fn assert_from(result: &Value, server: &str, generation: u64) {
    assert_eq!(result["_meta"]["mcpfleet/server"], server, "{result}");
    assert_eq!(
        result["_meta"]["mcpfleet/generation"], generation,
        "{result}"
    );
}

/// A call's error is the gateway's "server unavailable" for `server`, of `kind`.
#[track_caller]
fn assert_unavailable(error: &Value, server: &str, kind: &str) {
    assert_eq!(error["code"], SERVER_UNAVAILABLE, "{error}");
    assert_eq!(error["data"]["server"], server, "{error}");
    assert_eq!(error["data"]["kind"], kind, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("`{server}`")), "{error}");
}

/// The event log shows a session of each of `sdks` through `door`, opened and
/// then closed.
#[track_caller]
fn assert_sessions_recorded(fleet: &TestFleet, door: &str, sdks: &[Sdk]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let closed = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["gateway"] == "session-closed" && e["door"] == door)
            .count()
    };
    let mut events = gateway_events(fleet);
    while closed(&events) < sdks.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        events = gateway_events(fleet);
    }
    for sdk in sdks {
        let opened = events
            .iter()
            .find(|e| {
                e["gateway"] == "session-opened"
                    && e["door"] == door
                    && e["client"]
                        .as_str()
                        .is_some_and(|c| c.starts_with(sdk.client_name()))
            })
            .unwrap_or_else(|| panic!("no session-opened of {sdk:?} through {door}: {events:#?}"));
        assert!(opened["time"].is_string(), "{opened}");
        let session = &opened["session"];
        assert!(
            events.iter().any(|e| e["gateway"] == "session-closed"
                && e["door"] == door
                && &e["session"] == session),
            "session {session} of {sdk:?} through {door} was not closed: {events:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// 1. Both SDKs, both doors: initialize, list, call, ping; 8. sessions in the log

/// Each SDK's client launches `mcpfleet connect a everything`: both see exactly
/// the tools of those two servers as `SERVER__TOOL`, and nothing of `b`, which
/// `connect` did not start; calls reach the published server and the fixture,
/// results say who answered; `status` counts both sessions; the event log records
/// each session's opening and closing with its door and client.
#[test]
fn connect_serves_the_selected_servers_to_both_sdks() {
    let fleet = fleet_of(
        "gw-connect",
        &[
            fixture_server("a", &["--tools", "2"], ""),
            fixture_server("b", &[], ""),
            everything("everything"),
        ],
    );
    let selected = ["a", "everything"];
    let mut clients: Vec<(Sdk, Client)> = SDKS
        .iter()
        .map(|&sdk| (sdk, Client::open(&fleet, sdk, Door::Stdio(&selected))))
        .collect();

    let doc = status(&fleet);
    assert_eq!(server(&doc, "a")["state"], "running", "{doc}");
    assert_eq!(server(&doc, "everything")["state"], "running", "{doc}");
    assert_eq!(server(&doc, "b")["state"], "stopped", "{doc}");
    assert!(
        server(&doc, "b")["generation"].is_null(),
        "b was never started: {doc}"
    );
    assert_eq!(doc["gateway"]["sessions"], 2, "{doc}");
    assert!(doc["gateway"]["url"].is_null(), "no HTTP door: {doc}");
    let gen_a = server(&doc, "a")["generation"].as_u64().unwrap();
    let gen_everything = server(&doc, "everything")["generation"].as_u64().unwrap();

    let mut expected = vec!["a__echo".to_owned(), "a__tool_2".to_owned()];
    expected.extend(
        tools_of(&fleet, "everything")
            .iter()
            .map(|t| format!("everything__{t}")),
    );
    expected.sort();
    assert!(
        expected.contains(&"everything__echo".to_owned()),
        "{expected:?}"
    );

    for (sdk, client) in &mut clients {
        assert_eq!(client.tool_names(), expected, "{sdk:?}");

        let message = format!("hello from the {sdk:?} SDK");
        let result = client.call("everything__echo", json!({"message": message}));
        assert!(text(&result).contains(&message), "{result}");
        assert_from(&result, "everything", gen_everything);

        let arguments = json!({"sdk": format!("{sdk:?}"), "n": [1, 2]});
        let result = client.call("a__echo", arguments.clone());
        assert_eq!(text(&result), arguments.to_string());
        assert_from(&result, "a", gen_a);

        // Outside the selection: not routed either.
        let error = client.call_error("b__echo", json!({}));
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains("b__echo"),
            "{error}"
        );

        client.ping();
    }
    for (_, client) in clients {
        client.close();
    }
    assert_sessions_recorded(&fleet, "stdio", &SDKS);
    down_and_no_leftovers(&fleet);
}

/// `serve --listen 127.0.0.1:0` opens the HTTP door on a free port with a token
/// in the state directory; each SDK's client, with the token, sees every server's
/// tools, calls the published mcp-server-time and a fixture, and pings; `status`
/// shows the door and both sessions; the event log records both sessions; after
/// `down` the door no longer answers.
#[test]
fn serve_serves_the_whole_fleet_to_both_sdks() {
    let fleet = fleet_of(
        "gw-serve",
        &[
            fixture_server("a", &["--tools", "2"], ""),
            fixture_server("b", &[], ""),
            time_server("time"),
        ],
    );
    let http = serve(&fleet, &[]);
    let mut clients: Vec<(Sdk, Client)> = SDKS
        .iter()
        .map(|&sdk| (sdk, Client::open(&fleet, sdk, Door::Http(&http))))
        .collect();

    let doc = status(&fleet);
    assert_eq!(doc["gateway"]["url"], http.url.as_str(), "{doc}");
    assert_eq!(doc["gateway"]["sessions"], 2, "{doc}");
    let gen_b = server(&doc, "b")["generation"].as_u64().unwrap();
    let gen_time = server(&doc, "time")["generation"].as_u64().unwrap();

    let mut expected: Vec<String> = ["a__echo", "a__tool_2", "b__echo", "b__tool_2", "b__tool_3"]
        .map(String::from)
        .into();
    expected.extend(
        tools_of(&fleet, "time")
            .iter()
            .map(|t| format!("time__{t}")),
    );
    expected.sort();
    assert!(
        expected.contains(&"time__get_current_time".to_owned()),
        "{expected:?}"
    );

    for (sdk, client) in &mut clients {
        assert_eq!(client.tool_names(), expected, "{sdk:?}");

        let result = client.call("time__get_current_time", json!({"timezone": "UTC"}));
        assert!(text(&result).contains("UTC"), "{result}");
        assert_from(&result, "time", gen_time);

        let arguments = json!({"sdk": format!("{sdk:?}")});
        let result = client.call("b__echo", arguments.clone());
        assert_eq!(text(&result), arguments.to_string());
        assert_from(&result, "b", gen_b);

        client.ping();
    }
    for (_, client) in clients {
        client.close();
    }
    assert_sessions_recorded(&fleet, "http", &SDKS);

    down_and_no_leftovers(&fleet);
    let (mut late, first) = Client::start(
        &fleet,
        Sdk::TypeScript,
        "client after down",
        Door::Http(&http).args(&fleet),
    );
    assert_eq!(first["ok"], false, "the door is closed after down: {first}");
    assert_eq!(late.wait_exit(Duration::from_secs(20)).code(), Some(1));
    fleet.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------
// 2. Changes announced to every session; calls follow the new generation

/// Four sessions at once (each SDK through each door) hear `list_changed` for
/// tools, prompts and resources after `mcpfleet reconnect a`, and their next call
/// is answered by generation 2; they hear it too when a server announces a change
/// of its own (to one caller's call), when a server stops and when it starts.
/// `down` of the whole fleet closes the HTTP door while the stdio sessions, which
/// keep the supervisor, go on.
#[test]
fn every_session_hears_of_changes_and_calls_follow_the_new_generation() {
    let fleet = fleet_of(
        "gw-changes",
        &[
            fixture_server("a", &[], ""),
            fixture_server("b", &[], ""),
            sdk_server("js"),
        ],
    );
    let http = serve(&fleet, &[]);
    let mut clients = four_clients(&fleet, &http);
    assert_eq!(status(&fleet)["gateway"]["sessions"], 4);

    let first = generation_of(&fleet, "a");
    for client in &mut clients {
        assert_from(&client.call("a__echo", json!({})), "a", first);
        // Every server was running before any session opened: nothing to announce.
        let counts = client.op(json!({"op": "notifications"}));
        assert!(
            counts["counts"].get(TOOLS_CHANGED).is_none(),
            "{}: an announcement before any change: {counts}",
            client.label
        );
    }

    let (out, doc) = fleet.run_json(&["reconnect", "a"]);
    assert_code(&out, 0);
    let second = server(&doc, "a")["generation"].as_u64().unwrap();
    assert_eq!(second, first + 1, "{doc}");
    for client in &mut clients {
        for method in LISTS_CHANGED {
            client.expect_notification(method, "after `reconnect a`");
        }
        assert_from(&client.call("a__echo", json!({})), "a", second);
    }
    settle(&mut clients);

    // A server's own announcement, during one client's call, reaches every session.
    let result = clients[0].call("js__change_lists", json!({}));
    assert_from(&result, "js", generation_of(&fleet, "js"));
    for client in &mut clients {
        client.expect_notification(TOOLS_CHANGED, "after js announced a change");
    }
    settle(&mut clients);

    assert_code(&fleet.run(&["down", "b"]), 0);
    for client in &mut clients {
        client.expect_notification(TOOLS_CHANGED, "after `down b`");
    }
    settle(&mut clients);
    assert_code(&fleet.run(&["up", "b"]), 0);
    for client in &mut clients {
        client.expect_notification(TOOLS_CHANGED, "after `up b`");
    }

    // `down` closes the HTTP door; the stdio sessions stay, and keep the
    // supervisor: `down` says so, and exits 5 (a process of the fleet is left).
    let (stdio, over_http): (Vec<Client>, Vec<Client>) = clients
        .into_iter()
        .partition(|c| c.label.contains("over stdio"));
    for client in over_http {
        client.close();
    }
    let out = fleet.run(&["down"]);
    assert_code(&out, 5);
    assert!(
        stderr(&out).contains("2 gateway client session(s) of `mcpfleet connect` are open"),
        "{}",
        stderr(&out)
    );
    let doc = status(&fleet);
    assert!(doc["gateway"]["url"].is_null(), "the door is closed: {doc}");
    assert_eq!(doc["gateway"]["sessions"], 2, "{doc}");
    let (mut late, first) = Client::start(
        &fleet,
        Sdk::TypeScript,
        "client after down",
        Door::Http(&http).args(&fleet),
    );
    assert_eq!(first["ok"], false, "the door is closed: {first}");
    assert_eq!(late.wait_exit(Duration::from_secs(20)).code(), Some(1));
    for mut client in stdio {
        client.ping();
        client.close();
    }
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// 3. A call starts an idle-stopped server

/// `lazy` stops after 1 s without use; a call through either door starts a new
/// generation, which answers it, and `status` shows that generation.
#[test]
fn a_call_starts_an_idle_stopped_server() {
    let fleet = fleet_of(
        "gw-idle",
        &[
            fixture_server("lazy", &[], "idle_timeout: 1s"),
            fixture_server("steady", &[], ""),
        ],
    );
    let http = serve(&fleet, &["steady"]);
    // `connect` starts lazy, and its client lists at once, while lazy runs: from
    // then on the gateway knows lazy's tools, also while it is stopped.
    let mut over_stdio = Client::open(&fleet, Sdk::Python, Door::Stdio(&[]));
    assert!(over_stdio.tool_names().contains(&"lazy__echo".to_owned()));
    let mut over_http = Client::open(&fleet, Sdk::TypeScript, Door::Http(&http));

    let mut generation = generation_of(&fleet, "lazy");
    for client in [&mut over_http, &mut over_stdio] {
        let s = wait_status(&fleet, "lazy", "stopped when idle", |s| {
            s["state"] == "stopped"
        });
        assert_eq!(s["generation"], generation, "{s}");

        let arguments = json!({"again": client.label});
        let result = client.call("lazy__echo", arguments.clone());
        assert_eq!(text(&result), arguments.to_string());
        generation += 1;
        assert_from(&result, "lazy", generation);
        let s = status_of(&fleet, "lazy");
        assert_eq!(s["generation"], generation, "{s}");
        // Running, unless its next idle second has passed already.
        assert!(
            s["state"] == "running" || idle_stops(&fleet, "lazy").contains(&generation),
            "{s}"
        );
    }
    assert!(idle_stops(&fleet, "lazy").contains(&1));
    // The metrics count both calls, and both starts that a use caused after the
    // idle stop.
    let out = fleet.run(&["metrics"]);
    assert_code(&out, 0);
    let metrics = stdout(&out);
    for line in [
        r#"mcpfleet_calls_total{server="lazy",outcome="ok"} 2"#,
        r#"mcpfleet_call_duration_seconds_count{server="lazy"} 2"#,
        r#"mcpfleet_server_restarts_total{server="lazy",cause="idle"} 2"#,
        r#"mcpfleet_calls_total{server="steady",outcome="ok"} 0"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no `{line}` in:\n{metrics}"
        );
    }
    over_http.close();
    over_stdio.close();
    down_and_no_leftovers(&fleet);
}

/// The generations of `name` that the event log shows stopped for being idle.
fn idle_stops(fleet: &TestFleet, name: &str) -> Vec<u64> {
    std::fs::read_to_string(fleet.state_dir().join("events.ndjson"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["server"] == name && e["cause"] == "idle" && e["to"] == "stopped")
        .filter_map(|e| e["generation"].as_u64())
        .collect()
}

// ---------------------------------------------------------------------------------
// 4. Quarantined and crash-looping servers

/// A call to a quarantined server (its teardown left a frozen grandchild) and one
/// to a crash-looping server fail at once, through either door, with -32001 and
/// `data` naming the server, its generation and the kind; the others are served.
#[test]
fn calls_to_a_quarantined_or_crash_looping_server_fail_with_its_kind() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("esc.pid");
    let freezer = Freezer::new("gw-quarantine");
    let fleet = fleet_of(
        "gw-quarantine",
        &[
            fixture_server(
                "esc",
                &[
                    "--frozen-grandchild",
                    freezer.path(),
                    "--pid-file",
                    pid_file.to_str().unwrap(),
                ],
                "cleanup_timeout: 1s",
            ),
            // Its first exit is one too many: a crash loop.
            fixture_server(
                "crashy",
                &[],
                "restart: { policy: on-failure, max_restarts: 0, window: 60s }",
            ),
            fixture_server("keeper", &[], ""),
        ],
    );
    let http = serve(&fleet, &[]);
    let mut clients = [
        Client::open(&fleet, Sdk::Python, Door::Stdio(&[])),
        Client::open(&fleet, Sdk::TypeScript, Door::Http(&http)),
    ];
    // The gateway lists what servers offer while they run.
    for client in &mut clients {
        let names = client.tool_names();
        assert!(names.contains(&"esc__echo".to_owned()), "{names:?}");
        assert!(names.contains(&"crashy__echo".to_owned()), "{names:?}");
    }

    // crashy dies (before esc's quarantine: an exit after it is charged with
    // esc's frozen grandchild, a bug of the lineage outside the gateway).
    let crashy = status_of(&fleet, "crashy")["pid"].as_i64().unwrap() as i32;
    kill_all(&[crashy]);
    let s = wait_status(&fleet, "crashy", "went into crash loop", |s| {
        s["state"] == "crash-loop"
    });
    let crashy_generation = s["generation"].clone();
    // esc's teardown cannot end its frozen grandchild.
    let (out, doc) = fleet.run_json(&["down", "esc"]);
    assert_code(&out, 5);
    assert_eq!(server(&doc, "esc")["state"], "quarantined", "{doc}");
    let esc_generation = server(&doc, "esc")["generation"].clone();

    for client in &mut clients {
        let started = Instant::now();
        let error = client.call_error("esc__echo", json!({}));
        assert_unavailable(&error, "esc", "quarantined");
        assert_eq!(error["data"]["generation"], esc_generation, "{error}");
        let error = client.call_error("crashy__echo", json!({}));
        assert_unavailable(&error, "crashy", "crash_loop");
        assert_eq!(error["data"]["generation"], crashy_generation, "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refused at once, not after a wait: {:?}",
            started.elapsed()
        );
        assert_from(&client.call("keeper__echo", json!({})), "keeper", 1);
    }
    let doc = status(&fleet);
    assert_eq!(
        server(&doc, "esc")["state"],
        "quarantined",
        "no call started it: {doc}"
    );
    assert_eq!(server(&doc, "crashy")["state"], "crash-loop", "{doc}");

    // End the frozen grandchild, then clear the quarantine.
    let (_, grandchildren) = read_pid_file(&pid_file);
    freezer.thaw();
    kill_all(&grandchildren);
    let deadline = Instant::now() + Duration::from_secs(10);
    while grandchildren.iter().any(|p| is_alive(*p)) {
        assert!(Instant::now() < deadline, "the grandchild survived SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_code(&fleet.run(&["reset", "esc"]), 0);
    for client in clients {
        client.close();
    }
    down_and_no_leftovers(&fleet);
    drop(freezer);
}

// ---------------------------------------------------------------------------------
// 5. A call in flight when its server goes down

/// Calls in flight to a server that takes 10 s to answer, through both doors, fail
/// at once when `down slow` ends the server, with -32001 naming it (kind
/// `cancelled`); `down` is not held up by them. Then the same through the stdio
/// door under `down` of the whole fleet.
#[test]
fn a_call_in_flight_fails_at_once_when_its_server_goes_down() {
    let fleet = fleet_of(
        "gw-inflight",
        &[fixture_server(
            "slow",
            &["--call-delay-ms", "10000"],
            "cleanup_timeout: 2s",
        )],
    );
    let http = serve(&fleet, &[]);
    let mut over_stdio = Client::open(&fleet, Sdk::Python, Door::Stdio(&[]));
    let mut over_http = Client::open(&fleet, Sdk::TypeScript, Door::Http(&http));

    // `want`: `down` of the whole fleet exits 5 while a `connect` session keeps
    // the supervisor, and says so (docs/design.md §3).
    let cut_short = |clients: &mut [&mut Client], down: &[&str], want: i32| {
        let called = Instant::now();
        for client in clients.iter_mut() {
            let answer = client.op(json!({
                "op": "call_start", "handle": "slow", "name": "slow__echo", "arguments": {}
            }));
            assert_eq!(answer["ok"], true, "{answer}");
        }
        // The calls reach the server, which sleeps on them.
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let out = fleet.run(down);
        let took = started.elapsed();
        assert_code(&out, want);
        if want == 5 {
            assert!(
                stderr(&out).contains("session(s) of `mcpfleet connect` are open"),
                "{}",
                stderr(&out)
            );
        }
        assert!(
            took < Duration::from_secs(5),
            "{down:?} was held up: {took:?}"
        );
        for client in clients.iter_mut() {
            let answer = client.op(json!({"op": "call_await", "handle": "slow"}));
            assert_eq!(answer["ok"], false, "{}: {answer}", client.label);
            assert_unavailable(&answer["error"], "slow", "cancelled");
            let waited = called.elapsed();
            assert!(
                waited < Duration::from_secs(5),
                "{}: answered after {waited:?}, not at once",
                client.label
            );
            client.ping();
        }
    };
    cut_short(&mut [&mut over_stdio, &mut over_http], &["down", "slow"], 0);
    over_http.close();
    assert_code(&fleet.run(&["up"]), 0);
    cut_short(&mut [&mut over_stdio], &["down"], 5);
    over_stdio.close();
    down_and_no_leftovers(&fleet);
}

/// The same through the HTTP door under `down` of the whole fleet, which closes the
/// door once the servers are down: the call still gets its error at once.
#[test]
fn a_call_in_flight_over_http_fails_at_once_when_the_whole_fleet_goes_down() {
    let fleet = fleet_of(
        "gw-inflight-http",
        &[fixture_server(
            "slow",
            &["--call-delay-ms", "10000"],
            "cleanup_timeout: 2s",
        )],
    );
    let http = serve(&fleet, &[]);
    let mut clients: Vec<Client> = SDKS
        .iter()
        .map(|&sdk| Client::open(&fleet, sdk, Door::Http(&http)))
        .collect();
    let called = Instant::now();
    for client in &mut clients {
        client.op(
            json!({"op": "call_start", "handle": "slow", "name": "slow__echo", "arguments": {}}),
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_code(&fleet.run(&["down"]), 0);
    for client in &mut clients {
        client.send(&json!({"op": "call_await", "handle": "slow"}));
        let answer = client.answer(Duration::from_secs(8));
        assert_eq!(answer["ok"], false, "{}: {answer}", client.label);
        assert_unavailable(&answer["error"], "slow", "cancelled");
        assert!(
            called.elapsed() < Duration::from_secs(5),
            "{:?}",
            called.elapsed()
        );
    }
    drop(clients);
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// 6. Progress and cancellation relayed

/// Four clients (each SDK through each door) call server-everything's long running
/// operation at the same time, each with its own number of steps: each gets
/// progress for its own call only. Each then cancels a slow call, which the server
/// behind the gateway sees cancelled; the gateway stays healthy and the next call
/// is answered.
#[test]
fn progress_reaches_its_caller_and_cancellation_reaches_the_server() {
    let fleet = fleet_of("gw-progress", &[everything("everything"), sdk_server("js")]);
    let http = serve(&fleet, &[]);
    let mut clients = four_clients(&fleet, &http);
    let everything_generation = generation_of(&fleet, "everything");
    let js_generation = generation_of(&fleet, "js");

    for (i, client) in clients.iter_mut().enumerate() {
        let answer = client.op(json!({
            "op": "call_start", "handle": "long", "progress": true,
            "name": "everything__trigger-long-running-operation",
            "arguments": {"duration": 1, "steps": 3 + i},
        }));
        assert_eq!(answer["ok"], true, "{answer}");
    }
    for (i, client) in clients.iter_mut().enumerate() {
        let steps = 3 + i as u64;
        let answer = client.op(json!({"op": "call_await", "handle": "long"}));
        assert_eq!(answer["ok"], true, "{}: {answer}", client.label);
        assert!(
            text(&answer["result"]).contains(&format!("Steps: {steps}")),
            "{answer}"
        );
        assert_from(&answer["result"], "everything", everything_generation);
        // The TypeScript SDK may drop the last one (tests/clients/README.md).
        let progress = answer["progress"].as_array().unwrap();
        assert!(
            !progress.is_empty() && progress.len() as u64 <= steps,
            "{}: {answer}",
            client.label
        );
        let mut last = 0;
        for p in progress {
            assert_eq!(
                p["total"], steps,
                "{}: another call's progress: {answer}",
                client.label
            );
            let value = p["progress"].as_u64().unwrap();
            assert!(value > last && value <= steps, "{answer}");
            last = value;
        }
    }

    for client in &mut clients {
        client.forget(&[PROGRESS]);
        let answer = client.op(json!({
            "op": "call_start", "handle": "slow", "progress": true,
            "name": "js__slow", "arguments": {"ms": 30000},
        }));
        assert_eq!(answer["ok"], true, "{answer}");
        // js reports progress as soon as it has the call.
        client.expect_notification(PROGRESS, "from js__slow");
        let answer = client.op(json!({"op": "call_cancel", "handle": "slow"}));
        assert_eq!(answer["in_flight"], true, "{}: {answer}", client.label);
        let answer = client.op(json!({"op": "call_await", "handle": "slow"}));
        assert_eq!(answer["cancelled"], true, "{}: {answer}", client.label);
    }
    // js saw each call cancelled.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = fleet.run(&["logs", "js"]);
        let log = stdout(&out);
        if log.matches("cancelled request").count() >= clients.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "js did not see {} cancellations:\n{log}",
            clients.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for client in &mut clients {
        let result = client.call("js__slow", json!({"ms": 10}));
        assert_eq!(text(&result), "done");
        assert_from(&result, "js", js_generation);
        client.ping();
    }
    assert_eq!(
        generation_of(&fleet, "js"),
        js_generation,
        "js was not restarted"
    );
    for client in clients {
        client.close();
    }
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// 7. Security

/// The HTTP door refuses a foreign Origin (403), a missing token and a wrong one
/// (401), for both SDKs, and opens no session for them; a loopback Origin with the
/// token is served. The token file is 0600, and the token appears in no output of
/// any command and in no file of the state directory but `gateway.token`, with
/// the supervisor logging everything it does (trace).
#[test]
fn the_http_door_refuses_strangers_and_keeps_its_token_secret() {
    let fleet = fleet_of("gw-security", &[fixture_server("a", &[], "")]);
    let mut seen = String::new();
    let mut record = |what: &str, text: &str| seen.push_str(&format!("== {what}\n{text}\n"));

    // The supervisor that `serve` starts inherits RUST_LOG.
    let mut cmd = fleet.command(&["--output", "json", "serve", "--listen", "127.0.0.1:0"]);
    cmd.env("RUST_LOG", "trace");
    let out = run_bounded(cmd, ANSWER);
    record("serve", &format!("{}{}", stdout(&out), stderr(&out)));
    assert_code(&out, 0);
    let http = http_of(&fleet, &parse_doc(&out));
    let token_file = fleet.state_dir().join("gateway.token");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "gateway.token is {mode:o}");

    // Same length, one character off.
    let mut wrong = http.token.clone();
    let last = if wrong.ends_with('0') { "1" } else { "0" };
    wrong.replace_range(wrong.len() - 1.., last);
    for sdk in SDKS {
        for (what, more, refused) in [
            (
                "a foreign Origin",
                vec![
                    "--token",
                    http.token.as_str(),
                    "--origin",
                    "http://evil.example",
                ],
                403,
            ),
            ("no token", vec![], 401),
            ("a wrong token", vec!["--token", wrong.as_str()], 401),
        ] {
            let label = format!("{sdk:?} client with {what}");
            let (mut client, first) = Client::start(&fleet, sdk, &label, http_args(&http, &more));
            assert_eq!(first["ok"], false, "{label}: {first}");
            assert_eq!(first["error"]["http_status"], refused, "{label}: {first}");
            assert_eq!(
                client.wait_exit(Duration::from_secs(20)).code(),
                Some(1),
                "{label}"
            );
            record(&label, &format!("{first}\n{}", client.stderr_text()));
        }
        let label = format!("{sdk:?} client from a loopback Origin");
        let more = [
            "--token",
            http.token.as_str(),
            "--origin",
            "http://localhost:5173",
        ];
        let (mut client, first) = Client::start(&fleet, sdk, &label, http_args(&http, &more));
        assert_eq!(
            first["ok"],
            true,
            "{label}: {first}\n{}",
            client.stderr_text()
        );
        assert_from(&client.call("a__echo", json!({})), "a", 1);
        let stderr = client.stderr_text();
        client.close();
        record(&label, &format!("{first}\n{stderr}"));
    }
    let opened = gateway_events(&fleet)
        .iter()
        .filter(|e| e["gateway"] == "session-opened")
        .count();
    assert_eq!(opened, 2, "a session only for the clients served");

    // The gateway's log says who was refused and why, and which sessions came.
    let out = fleet.run(&["logs", "--gateway"]);
    assert_code(&out, 0);
    let log = stdout(&out);
    for expected in [
        format!("HTTP door open at {}", http.url),
        "(401): no token, or not the gateway's".to_owned(),
        "(403): its Origin or Host is not allowed".to_owned(),
        "opened (http, mcpfleet-tests-python-sdk".to_owned(),
        "opened (http, mcpfleet-tests-typescript-sdk".to_owned(),
    ] {
        assert!(
            log.contains(&expected),
            "no `{expected}` in the gateway's log:\n{log}"
        );
    }
    assert!(
        log.lines().all(|l| l.starts_with("20")),
        "each line is timestamped:\n{log}"
    );

    for args in [
        &["status"][..],
        &["--output", "json", "status"],
        &["events"],
        &["logs"],
        &["logs", "--gateway"],
        &["--output", "json", "down"],
    ] {
        let out = fleet.run(args);
        record(
            &args.join(" "),
            &format!("{}{}", stdout(&out), stderr(&out)),
        );
    }
    fleet.assert_no_leftovers();

    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    let log = std::fs::read_to_string(state.join("supervisor.log")).unwrap();
    assert!(
        log.contains("TRACE"),
        "the supervisor logged at trace:\n{log}"
    );
    for file in files_under(&state) {
        if file == state.join("gateway.token") {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&http.token),
            "the token is in {}",
            file.display()
        );
    }
    assert!(!seen.contains(&http.token), "the token was shown:\n{seen}");
}

/// Every file below `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => files.extend(files_under(&path)),
            Ok(t) if t.is_file() => files.push(path),
            _ => {}
        }
    }
    files
}

/// `connect` that can reach no supervisor (none runs, and none can be started:
/// something else is where its spawn lock goes) exits 8 with the reason on
/// stderr and nothing on stdout, its MCP channel; a client that launched it
/// reports that it could not connect, and exits.
#[test]
fn connect_exits_8_when_no_supervisor_can_be_reached() {
    let fleet = fleet_of("gw-unreachable", &[fixture_server("a", &[], "")]);
    std::fs::create_dir_all(fleet.state_dir().join("spawn.lock")).unwrap();

    let out = run_bounded(fleet.command(&["connect"]), ANSWER);
    assert_code(&out, 8);
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(&out));
    assert!(stderr(&out).contains("unreachable"), "{}", stderr(&out));

    for sdk in SDKS {
        let (mut client, first) = Client::start(
            &fleet,
            sdk,
            "client of an unreachable supervisor",
            Door::Stdio(&[]).args(&fleet),
        );
        assert_eq!(first["ok"], false, "{first}");
        assert_eq!(client.wait_exit(Duration::from_secs(20)).code(), Some(1));
        assert!(
            client.stderr_text().contains("unreachable"),
            "{}",
            client.stderr_text()
        );
    }
    assert!(fleet.lock_pid().is_none(), "no supervisor was started");
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// Servers the gateway has not seen running

/// A server that the gateway has never seen running (here: `serve a` leaves `b`
/// stopped) is started to learn its tools, and a call to one of them is served
/// (G2), not refused as an unknown tool.
#[test]
fn a_server_never_seen_running_can_still_be_called() {
    let fleet = fleet_of(
        "gw-unlisted",
        &[fixture_server("a", &[], ""), fixture_server("b", &[], "")],
    );
    let http = serve(&fleet, &["a"]);
    let mut client = Client::open(&fleet, Sdk::TypeScript, Door::Http(&http));
    let result = client.call("b__echo", json!({}));
    assert_from(&result, "b", 1);
    client.close();
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// Requests of servers: roots, sampling, elicitation

/// What a `js__ask` call answered: the client's answer, as JSON.
#[track_caller]
fn asked(client: &mut Client, method: &str) -> Value {
    let result = client.call("js__ask", json!({ "method": method }));
    assert_ne!(
        result["isError"], true,
        "{}: ask {method}: {result}",
        client.label
    );
    serde_json::from_str(text(&result)).unwrap_or_else(|e| panic!("{e}: {result}"))
}

/// A server's requests of its client (`roots/list`, `sampling/createMessage`,
/// `elicitation/create`) made while a client's call is in flight go to that
/// client, through either door and with either SDK, and to no other: each
/// client answers exactly its own. The published server-everything's sampling
/// tool gets the calling client's answer too. With no client's call in flight
/// (`mcpfleet call`), roots are answered with none and sampling is refused with
/// an error that says why.
#[test]
fn a_servers_requests_go_to_the_client_whose_call_caused_them() {
    let fleet = fleet_of("gw-asks", &[sdk_server("js"), everything("everything")]);
    let http = serve(&fleet, &[]);
    let mut clients = four_clients(&fleet, &http);
    for (i, client) in clients.iter_mut().enumerate() {
        let sdk = SDKS[i / 2];
        let sampled = format!(
            "sampled by {}",
            sdk.client_name().trim_start_matches("mcpfleet-tests-")
        );

        let roots = asked(client, "roots/list");
        assert_eq!(
            roots["roots"][0]["uri"], "file:///tmp",
            "{}: {roots}",
            client.label
        );

        let message = asked(client, "sampling/createMessage");
        assert_eq!(
            message["content"]["text"], sampled,
            "{}: {message}",
            client.label
        );

        let elicited = asked(client, "elicitation/create");
        assert_eq!(elicited["action"], "accept", "{}: {elicited}", client.label);

        let result = client.call(
            "everything__trigger-sampling-request",
            json!({"prompt": "hello", "maxTokens": 5}),
        );
        assert!(
            text(&result).contains(&sampled),
            "{}: {result}",
            client.label
        );
    }
    for client in &mut clients {
        let answer = client.op(json!({"op": "requests"}));
        assert_eq!(
            answer["counts"],
            json!({"roots/list": 1, "sampling/createMessage": 2, "elicitation/create": 1}),
            "{}: each request went to the client whose call caused it",
            client.label
        );
    }

    // Calls in flight take no session ids: the next session is the fifth.
    let fifth = Client::open(&fleet, Sdk::Python, Door::Stdio(&[]));
    let opened = || -> Vec<Value> {
        gateway_events(&fleet)
            .iter()
            .filter(|e| e["gateway"] == "session-opened")
            .map(|e| e["session"].clone())
            .collect()
    };
    // The event is written as the session opens, a moment after the client
    // printed that it is initialized.
    let deadline = Instant::now() + Duration::from_secs(10);
    while opened().len() < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(opened(), [1, 2, 3, 4, 5].map(|n| json!(n)), "session ids");
    fifth.close();

    // No client's call in flight: the gateway answers.
    let (out, doc) =
        fleet.run_json(&["call", "js", "ask", "--args", r#"{"method": "roots/list"}"#]);
    assert_code(&out, 0);
    assert_eq!(
        doc["result"]["content"][0]["text"], r#"{"roots":[]}"#,
        "{doc}"
    );
    let (_, doc) = fleet.run_json(&[
        "call",
        "js",
        "ask",
        "--args",
        r#"{"method": "sampling/createMessage"}"#,
    ]);
    let said = doc["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.starts_with("error -32601:") && said.contains("no client's call to it is in flight"),
        "{doc}"
    );
    let out = fleet.run(&["logs", "--gateway"]);
    assert_code(&out, 0);
    let log = stdout(&out);
    for expected in [
        "server js asked sampling/createMessage: relayed to session",
        "server everything asked sampling/createMessage: relayed to session",
        "server js asked roots/list: answered with no roots (no client's call to it is in flight)",
        "server js asked sampling/createMessage: refused (no client's call to it is in flight)",
    ] {
        assert!(
            log.contains(expected),
            "no `{expected}` in the gateway's log:\n{log}"
        );
    }
    for client in clients {
        client.close();
    }
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// Streamable HTTP on the wire: resuming a stream, ending a session

/// One HTTP/1.0 exchange with the gateway's door (HTTP/1.0: no chunked body, the
/// body ends when the connection does). Reading it is bounded as a whole: a
/// stream kept open by keep-alive events alone cannot hang the test.
struct Exchange {
    status: u16,
    headers: Vec<(String, String)>,
    body: BufReader<std::net::TcpStream>,
    deadline: Instant,
}

impl Exchange {
    #[track_caller]
    fn send(http: &Http, method: &str, headers: &[(&str, &str)], body: &str) -> Exchange {
        let rest = http.url.trim_start_matches("http://");
        let (addr, path) = rest.split_at(rest.find('/').expect("a path"));
        let mut stream = std::net::TcpStream::connect(addr).expect("connect to the door");
        stream.set_read_timeout(Some(ANSWER)).unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n",
            http.token,
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream
            .write_all(request.as_bytes())
            .expect("send the request");
        let mut body = BufReader::new(stream);
        let mut line = String::new();
        body.read_line(&mut line).expect("a status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            body.read_line(&mut line).expect("a header line");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').expect("a header");
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        Exchange {
            status,
            headers,
            body,
            deadline: Instant::now() + ANSWER,
        }
    }

    /// Whether the answer is one JSON body (not an event stream).
    fn is_json(&self) -> bool {
        self.header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The next server-sent event: its `id`, if any, and its data, if any.
    #[track_caller]
    fn event(&mut self) -> (Option<String>, Option<Value>) {
        let (mut id, mut data) = (None, String::new());
        let mut line = String::new();
        loop {
            assert!(
                Instant::now() < self.deadline,
                "no complete event within {ANSWER:?}"
            );
            line.clear();
            let n = self.body.read_line(&mut line).expect("read the stream");
            assert!(n > 0, "the stream ended before the event was complete");
            let field = line.trim_end_matches(['\r', '\n']);
            if field.is_empty() {
                if id.is_some() || !data.is_empty() {
                    break;
                }
                continue;
            }
            if let Some(v) = field.strip_prefix("id:") {
                id = Some(v.trim().to_owned());
            } else if let Some(v) = field.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        let data = (!data.is_empty())
            .then(|| serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}")));
        (id, data)
    }

    /// The whole body of an answer that is one JSON document.
    #[track_caller]
    fn json(self) -> Value {
        let mut text = String::new();
        let mut body = self.body;
        std::io::Read::read_to_string(&mut body, &mut text).expect("read the body");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// The JSON-RPC answer to request `id`, whether it comes on an event
    /// stream or as one JSON body.
    #[track_caller]
    fn answer(mut self, id: u64) -> Value {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            return self.answer_to(id);
        }
        self.json()
    }

    /// Events until the JSON-RPC answer to request `id`; or the answer alone,
    /// when it came as one JSON body.
    #[track_caller]
    fn answer_to(&mut self, id: u64) -> Value {
        if self.is_json() {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut self.body, &mut text).expect("read the body");
            let data: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(data["id"], id, "{data}");
            return data;
        }
        loop {
            if let (_, Some(data)) = self.event()
                && data["id"] == id
            {
                return data;
            }
        }
    }
}

/// A raw streamable-HTTP client: the stream of a `tools/call` is cut off after
/// its first event; a GET with `Last-Event-ID` resumes it and delivers the answer
/// (rmcp keeps each stream's events for that). A DELETE ends the session: the
/// event log records it closed, `status` no longer counts it, and the session id
/// is unknown afterwards.
#[test]
fn a_cut_stream_resumes_and_delete_ends_the_session() {
    let fleet = fleet_of("gw-wire", &[sdk_server("js")]);
    let http = serve(&fleet, &[]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "1"}}});
    let mut init = Exchange::send(&http, "POST", &[], &initialize.to_string());
    assert_eq!(init.status, 200);
    let session = init
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let answer = init.answer_to(1);
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "mcpfleet",
        "{answer}"
    );
    let ours = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = Exchange::send(&http, "POST", &ours, &initialized.to_string());
    assert_eq!(sent.status, 202);

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "js__slow", "arguments": {"ms": 1500}}});
    let mut stream = Exchange::send(&http, "POST", &ours, &call.to_string());
    assert_eq!(stream.status, 200);
    let (first, data) = stream.event();
    let first = first.unwrap_or_else(|| panic!("the stream's first event has no id: {data:?}"));
    drop(stream);

    let mut resumed_headers = ours.to_vec();
    resumed_headers.push(("Last-Event-ID", first.as_str()));
    let mut resumed = Exchange::send(&http, "GET", &resumed_headers, "");
    assert_eq!(resumed.status, 200, "{:?}", resumed.headers);
    let answer = resumed.answer_to(2);
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    drop(resumed);

    let ended = Exchange::send(&http, "DELETE", &ours, "");
    assert!(
        matches!(ended.status, 200 | 202 | 204),
        "DELETE: {}",
        ended.status
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&fleet)["gateway"]["sessions"] != 0 {
        assert!(Instant::now() < deadline, "{}", status(&fleet));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        gateway_events(&fleet)
            .iter()
            .any(|e| e["gateway"] == "session-closed" && e["door"] == "http"),
        "{:#?}",
        gateway_events(&fleet)
    );
    let after = Exchange::send(
        &http,
        "POST",
        &ours,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string(),
    );
    assert_eq!(after.status, 404, "a deleted session is unknown");
    down_and_no_leftovers(&fleet);
}

/// A stream resumed with `Last-Event-ID: K` replays what came after event K and
/// nothing before: the client already has K. A fixture server sends four
/// progress notifications before its answer; the stream is cut after the second,
/// and the resumed one carries the other two and the answer, no event twice.
#[test]
fn a_resumed_stream_replays_only_what_came_after_the_last_event_seen() {
    let fleet = fleet_of(
        "gw-resume",
        &[fixture_server(
            "fx",
            &["--progress", "4", "--call-delay-ms", "1000"],
            "",
        )],
    );
    let http = serve(&fleet, &[]);
    let session = raw_session(&http, "raw-http", "1", true);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx__echo", "arguments": {}, "_meta": {"progressToken": "p"}}});
    let mut stream = Exchange::send(&http, "POST", &of(&session), &call.to_string());
    assert_eq!(stream.status, 200);
    // Progress values as numbers: how they are written is another test's matter.
    let progress_of = |data: &Value| {
        (data["method"] == PROGRESS).then(|| data["params"]["progress"].as_f64().unwrap_or(-1.0))
    };
    let (mut before, mut seen) = (Vec::new(), Vec::new());
    let last = loop {
        let (id, data) = stream.event();
        let id = id.unwrap_or_else(|| panic!("an event with no id: {data:?}"));
        before.push(id.clone());
        let Some(data) = data else { continue };
        assert_ne!(
            data["id"], 2,
            "the answer came before two progress events: {before:?}"
        );
        seen.extend(progress_of(&data));
        if seen.len() == 2 {
            break id;
        }
    };
    drop(stream);

    let mut headers = of(&session).to_vec();
    headers.push(("Last-Event-ID", last.as_str()));
    let mut resumed = Exchange::send(&http, "GET", &headers, "");
    assert_eq!(resumed.status, 200, "{:?}", resumed.headers);
    let (mut after, mut replayed) = (Vec::new(), Vec::new());
    loop {
        let (id, data) = resumed.event();
        after.extend(id);
        let Some(data) = data else { continue };
        replayed.extend(progress_of(&data));
        if data["id"] == 2 {
            assert_eq!(data["result"]["content"][0]["type"], "text", "{data}");
            break;
        }
    }
    for id in &after {
        assert!(
            !before.contains(id),
            "event {id} was delivered before and again after `Last-Event-ID: {last}`: {before:?} then {after:?}"
        );
    }
    let mut unique = after.clone();
    unique.dedup();
    assert_eq!(unique, after, "no event twice");
    assert_eq!(
        replayed.len(),
        2,
        "after event {last}: {replayed:?} (before: {seen:?})"
    );
    let mut all = [seen, replayed].concat();
    all.sort_by(f64::total_cmp);
    assert_eq!(all, [1.0, 2.0, 3.0, 4.0], "each progress once");
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// Values as their servers wrote them

/// The fields a fixture tool is listed with beyond its name, description and
/// input schema: some rmcp models, some it does not (`execution`, `x-vendor`, an
/// annotation of no known name), numbers written as decimals.
pub(crate) const TOOL_FIELDS: &str = r#"{"title":"Echo","annotations":{"readOnlyHint":true,"x-hint":1},"outputSchema":{"type":"object","properties":{"n":{"type":"number","minimum":0.1}}},"_meta":{"vendor/key":0.7},"execution":{"taskSupport":"optional"},"x-vendor":{"level":5}}"#;

/// The fixture tool `echo` of server `server`, as the gateway must list it:
/// every field as the server wrote it, the name aside.
pub(crate) fn echo_as_written(server: &str) -> Value {
    let mut tool: Value = serde_json::from_str(TOOL_FIELDS).unwrap();
    tool["name"] = json!(format!("{server}__echo"));
    tool["description"] = json!("Returns its arguments as JSON text");
    tool["inputSchema"] = json!({"type": "object"});
    tool
}

/// A tool reaches clients with every field its server wrote, through both doors:
/// the Python SDK sees the fields it models (`execution` among them), and a raw
/// client of the HTTP door sees the whole tool, fields nobody models included.
#[test]
fn tools_reach_clients_with_every_field_their_server_wrote() {
    let fields = format!("echo={TOOL_FIELDS}");
    let fleet = fleet_of(
        "gw-tool-fields",
        &[fixture_server("fx", &["--tool-fields", &fields], "")],
    );
    let http = serve(&fleet, &[]);
    let whole = echo_as_written("fx");
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut client = Client::open(&fleet, Sdk::Python, door);
        let answer = client.op(json!({"op": "list_tools"}));
        let echo = answer["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == "fx__echo"))
            .unwrap_or_else(|| panic!("{}: no fx__echo: {answer}", client.label))
            .clone();
        for field in ["title", "outputSchema", "_meta", "execution"] {
            assert_eq!(
                echo[field], whole[field],
                "{}: `{field}` of {echo}",
                client.label
            );
        }
        assert_eq!(
            echo["annotations"]["readOnlyHint"], true,
            "{}: {echo}",
            client.label
        );
        client.close();
    }

    let session = raw_session(&http, "raw-http", "1", true);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let mut listed = Exchange::send(&http, "POST", &of(&session), &list.to_string());
    let answer = listed.answer_to(2);
    let echo = answer["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "fx__echo"))
        .unwrap_or_else(|| panic!("no fx__echo: {answer}"));
    assert_eq!(*echo, whole, "the tool as its server wrote it");
    drop(listed);
    down_and_no_leftovers(&fleet);
}

/// A stdio server of the 2026-07-28 era alone is asked for its tools beside
/// rmcp, with that era's `_meta`: its tool reaches clients through both doors
/// with every field it wrote, `execution` and vendor fields included.
#[test]
fn a_modern_stdio_servers_tools_reach_clients_with_every_field_it_wrote() {
    let fields = format!("echo={TOOL_FIELDS}");
    let fleet = fleet_of(
        "gw-modern-tool-fields",
        &[fixture_server(
            "fx",
            &["--era", "modern", "--tool-fields", &fields],
            "",
        )],
    );
    let http = serve(&fleet, &[]);
    let whole = echo_as_written("fx");

    let session = raw_session(&http, "raw-http", "1", true);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let mut listed = Exchange::send(&http, "POST", &of(&session), &list.to_string());
    let answer = listed.answer_to(2);
    assert_eq!(
        tool_named(std::slice::from_ref(&answer), "fx__echo"),
        Some(whole.clone()),
        "serve: the tool as its server wrote it: {answer}"
    );
    drop(listed);

    let mut wire = crate::pass_through::Wire::connect(&fleet);
    wire.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    let answer = wire.answer(2);
    assert_eq!(
        tool_named(std::slice::from_ref(&answer), "fx__echo"),
        Some(whole),
        "connect: the tool as its server wrote it: {answer}"
    );
    drop(wire);
    down_and_no_leftovers(&fleet);
}

/// The conformance member's tool `greet`, as it writes it: `execution` and a
/// vendor field that no specification names, `x-vendor`, among its fields.
fn greet_as_written(server: &str) -> Value {
    json!({"name": format!("{server}__greet"), "description": "Greets, at once",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "execution": {"taskSupport": "forbidden"},
        "x-vendor": {"tier": "gold", "weight": 0.7}})
}

/// Every tool of `pages`, a `tools/list` answer per page, by name.
fn tool_named(pages: &[Value], name: &str) -> Option<Value> {
    pages
        .iter()
        .flat_map(|page| {
            page["result"]["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|t| t["name"] == name)
}

/// A tool of a server reached over streamable HTTP reaches clients with every
/// field its server wrote, through both doors, from a server spoken to in
/// either era (the conformance member, once in the legacy era, once of the
/// 2026-07-28 era alone); and a call of a tool whose argument the server of
/// that era wants in an `Mcp-Param-*` header still gets through.
#[test]
fn an_http_servers_tools_reach_clients_with_every_field_it_wrote() {
    let fleet = TestFleet::raw("gw-http-tool-fields", "version: 1\nservers: {}\n");
    let (mut legacy, legacy_url) = crate::conformance::http_member(&fleet, false);
    let (mut modern, modern_url) = crate::conformance::http_member(&fleet, true);
    std::fs::write(
        &fleet.path,
        format!(
            "version: 1\nservers:\n  old:\n    url: {legacy_url}\n  new:\n    url: {modern_url}\n"
        ),
    )
    .unwrap();
    let http = serve(&fleet, &[]);

    // `serve`, a raw client: every page of the list.
    let session = raw_session(&http, "raw-http", "1", true);
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 2.. {
        let mut params = json!({});
        if let Some(cursor) = cursor.take() {
            params["cursor"] = json!(cursor);
        }
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        let mut listed = Exchange::send(&http, "POST", &of(&session), &list.to_string());
        let page = listed.answer_to(id);
        cursor = page["result"]["nextCursor"].as_str().map(str::to_owned);
        pages.push(page);
        if cursor.is_none() {
            break;
        }
    }
    // `connect`, a raw client on its stdio.
    let mut wire = crate::pass_through::Wire::connect(&fleet);
    let mut wired = Vec::new();
    for id in 2.. {
        let mut params = json!({});
        if let Some(cursor) = cursor.take() {
            params["cursor"] = json!(cursor);
        }
        wire.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}));
        let page = wire.answer(id);
        cursor = page["result"]["nextCursor"].as_str().map(str::to_owned);
        wired.push(page);
        if cursor.is_none() {
            break;
        }
    }
    for (door, pages) in [("serve", &pages), ("connect", &wired)] {
        for server in ["old", "new"] {
            let name = format!("{server}__greet");
            assert_eq!(
                tool_named(pages, &name),
                Some(greet_as_written(server)),
                "{door}: {name} as its server wrote it"
            );
        }
    }
    // The modern server's tool that wants its argument in a header.
    wire.send(json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": {"name": "new__test_custom_header", "arguments": {"region": "eu-west", "query": "q"}}}));
    let called = wire.answer(99);
    assert!(
        called["result"]["isError"] != true && called.get("error").is_none(),
        "a call whose argument goes in an Mcp-Param header: {called}"
    );
    drop(wire);
    let down = fleet.run(&["down"]);
    for member in [&mut legacy, &mut modern] {
        let _ = member.kill();
        let _ = member.wait();
    }
    assert_code(&down, 0);
    fleet.assert_no_leftovers();
}

/// The sampling request of the fixture's `--ask-sampling`, as it writes it.
pub(crate) fn sampling_as_written() -> Value {
    json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}],
        "modelPreferences": {"costPriority": 0.3, "speedPriority": 0.8, "intelligencePriority": 0.5},
        "temperature": 0.7, "maxTokens": 10})
}

/// The progress of the fixture's `--progress 3` under `token`, as it writes it:
/// whole numbers.
pub(crate) fn progress_as_written(token: &str) -> Vec<Value> {
    (1..=3)
        .map(|n| json!({"progressToken": token, "progress": n, "total": 3}))
        .collect()
}

/// Fixture servers for the numbers tests: `fp` reports progress 1 to 3 before
/// it answers (a moment later), `fs` asks its client for a sampling first.
pub(crate) fn number_servers() -> Vec<String> {
    vec![
        fixture_server("fp", &["--progress", "3", "--call-delay-ms", "300"], ""),
        fixture_server("fs", &["--ask-sampling"], ""),
    ]
}

/// A server's requests of its client and its progress reach the client with
/// their numbers as the server wrote them, through both doors: the Python SDK
/// reads `temperature` 0.7 and priorities 0.3, 0.8, 0.5 (not their `f32`
/// neighbours), and a raw client of the HTTP door reads the sampling request's
/// params and each progress notification as written (`1`, not `1.0`).
#[test]
fn numbers_reach_clients_as_their_server_wrote_them() {
    let fleet = fleet_of("gw-numbers", &number_servers());
    let http = serve(&fleet, &[]);
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut client = Client::open(&fleet, Sdk::Python, door);
        client.call("fs__echo", json!({}));
        let sampled = client.op(json!({"op": "sampled"}));
        assert_eq!(
            sampled["sampled"],
            json!([{"temperature": "0.7", "costPriority": "0.3", "speedPriority": "0.8",
                "intelligencePriority": "0.5"}]),
            "{}",
            client.label
        );
        let answer =
            client.op(json!({"op": "call", "name": "fp__echo", "arguments": {}, "progress": true}));
        assert_eq!(answer["ok"], true, "{}: {answer}", client.label);
        assert_eq!(
            answer["progress"].as_array().map(Vec::len),
            Some(3),
            "{}: {answer}",
            client.label
        );
        client.close();
    }

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
        "clientInfo": {"name": "raw-http", "version": "1"}}});
    let mut init = Exchange::send(&http, "POST", &[], &initialize.to_string());
    let session = init
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    init.answer_to(1);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        Exchange::send(&http, "POST", &of(&session), &initialized.to_string()).status,
        202
    );
    for (id, tool) in [(2, "fp__echo"), (3, "fs__echo")] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}, "_meta": {"progressToken": "p"}}});
        let mut stream = Exchange::send(&http, "POST", &of(&session), &call.to_string());
        let (mut progress, mut asked) = (Vec::new(), 0);
        loop {
            let (_, Some(data)) = stream.event() else {
                continue;
            };
            if data["method"] == PROGRESS {
                progress.push(data["params"].clone());
            } else if data["method"] == "sampling/createMessage" {
                asked += 1;
                // As written: no `_meta.progressToken` the server never wrote.
                assert_eq!(data["params"], sampling_as_written(), "{data}");
                let answer = json!({"jsonrpc": "2.0", "id": data["id"], "result": {"role": "assistant",
                    "content": {"type": "text", "text": "raw"}, "model": "raw"}});
                let sent = Exchange::send(&http, "POST", &of(&session), &answer.to_string());
                assert_eq!(sent.status, 202);
            } else if data["id"] == id {
                assert_eq!(data["result"]["content"][0]["type"], "text", "{data}");
                break;
            }
        }
        if tool == "fp__echo" {
            assert_eq!(
                progress,
                progress_as_written("p"),
                "progress as the server wrote it"
            );
        } else {
            assert_eq!(asked, 1, "the sampling request on the call's stream");
        }
    }
    down_and_no_leftovers(&fleet);
}

/// The same from a server reached over streamable HTTP (the published
/// server-everything): its sampling request's `temperature` 0.7 reaches the
/// Python SDK through both doors as 0.7, and its progress reaches a raw client
/// of the HTTP door with whole numbers.
#[test]
fn numbers_from_an_http_server_reach_clients_as_it_wrote_them() {
    let port = crate::remote::free_port();
    let fleet = fleet_of(
        "gw-numbers-http",
        &[format!(
            "  remote:\n    url: http://127.0.0.1:{port}/mcp\n    connect_timeout: 60s\n"
        )],
    );
    let log = fleet.dir.path().join("remote.log");
    let mut server = crate::remote::start_remote(&fleet, port, &log);
    let http = serve(&fleet, &[]);
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut client = Client::open(&fleet, Sdk::Python, door);
        client.call(
            "remote__trigger-sampling-request",
            json!({"prompt": "hello", "maxTokens": 5}),
        );
        let sampled = client.op(json!({"op": "sampled"}));
        assert_eq!(
            sampled["sampled"][0]["temperature"], "0.7",
            "{}: {sampled}",
            client.label
        );
        client.close();
    }

    let session = raw_session(&http, "raw-http", "1", true);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "remote__trigger-long-running-operation",
            "arguments": {"duration": 1, "steps": 3}, "_meta": {"progressToken": "p"}}});
    let mut stream = Exchange::send(&http, "POST", &of(&session), &call.to_string());
    let mut progress = Vec::new();
    loop {
        let (_, Some(data)) = stream.event() else {
            continue;
        };
        if data["method"] == PROGRESS {
            progress.push(data["params"].clone());
        } else if data["id"] == 2 {
            break;
        }
    }
    // The last step's progress may come after the answer (the server sends it
    // just before): what came is compared.
    assert!(progress.len() >= 2, "{progress:?}");
    assert_eq!(
        progress,
        progress_as_written("p")[..progress.len()],
        "progress as the server wrote it"
    );
    drop(stream);
    assert_code(&fleet.run(&["down"]), 0);
    let _ = server.kill();
    let _ = server.wait();
    fleet.assert_no_leftovers();
}

/// Opens an HTTP session as a raw client named `name`, version `version`, and
/// finishes its handshake unless `handshake` is false; returns its id.
#[track_caller]
fn raw_session(http: &Http, name: &str, version: &str, handshake: bool) -> String {
    raw_session_in(http, "2025-06-18", name, version, handshake).0
}

/// Opens an HTTP session of protocol `protocol` as a raw client named `name`,
/// version `version`, and finishes its handshake unless `handshake` is false;
/// returns its id and the gateway's answer to `initialize`.
#[track_caller]
fn raw_session_in(
    http: &Http,
    protocol: &str,
    name: &str,
    version: &str,
    handshake: bool,
) -> (String, Value) {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": protocol, "capabilities": {},
        "clientInfo": {"name": name, "version": version}}});
    let mut init = Exchange::send(http, "POST", &[], &initialize.to_string());
    assert_eq!(init.status, 200);
    let session = init
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let answer = init.answer_to(1);
    if handshake {
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let headers = [
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", protocol),
        ];
        let sent = Exchange::send(http, "POST", &headers, &initialized.to_string());
        assert_eq!(sent.status, 202);
    }
    (session, answer)
}

/// The headers of a request in session `id`.
fn of(id: &str) -> [(&str, &str); 2] {
    [
        ("Mcp-Session-Id", id),
        ("MCP-Protocol-Version", "2025-06-18"),
    ]
}

/// A ping in session `id`: its HTTP status.
fn ping(http: &Http, id: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"});
    Exchange::send(http, "POST", &of(id), &ping.to_string()).status
}

/// DELETE as the SDKs expect it: 200 for a session it ends, 404 for an id the
/// gateway does not know. A call in flight in the ended session is not left
/// waiting: its stream ends at once, and the call is cancelled (the server is
/// told), not left to run until the server answers.
#[test]
fn delete_ends_a_session_and_its_calls_at_once() {
    let fleet = fleet_of(
        "gw-delete",
        &[fixture_server("slow", &["--call-delay-ms", "60000"], "")],
    );
    let http = serve(&fleet, &[]);
    let unknown = Exchange::send(&http, "DELETE", &of("no-such-session"), "");
    assert_eq!(unknown.status, 404, "a made-up session id");

    let session = raw_session(&http, "raw-http", "1", true);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow__echo", "arguments": {}}});
    let mut stream = Exchange::send(&http, "POST", &of(&session), &call.to_string());
    assert_eq!(stream.status, 200);
    // The call has reached the gateway once its stream is open; give the server
    // the request before the session ends.
    let deadline = Instant::now() + ANSWER;
    while !std::fs::read_to_string(fleet.state_dir().join("events.ndjson"))
        .unwrap_or_default()
        .contains("session-opened")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));

    let ended = Exchange::send(&http, "DELETE", &of(&session), "");
    assert_eq!(ended.status, 200, "DELETE of an open session");
    let began = Instant::now();
    let mut rest = String::new();
    let read = std::io::Read::read_to_string(&mut stream.body, &mut rest);
    let took = began.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the call's stream stayed open {took:?} after DELETE ({read:?}): {rest}"
    );
    // The gateway no longer waits for the server's answer: the call is counted
    // cancelled (and the server told so), not left to the server's minute.
    let cancelled = r#"mcpfleet_calls_total{server="slow",outcome="cancelled"} 1"#;
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let out = fleet.run(&["metrics"]);
        if stdout(&out).contains(cancelled) {
            break;
        }
        assert!(Instant::now() < deadline, "{}", stdout(&out));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(ping(&http, &session), 404, "the ended session is unknown");
    let again = Exchange::send(&http, "DELETE", &of(&session), "");
    assert_eq!(again.status, 404, "a session ended already");
    let deadline = Instant::now() + Duration::from_secs(10);
    while status(&fleet)["gateway"]["sessions"] != 0 {
        assert!(Instant::now() < deadline, "{}", status(&fleet));
        std::thread::sleep(Duration::from_millis(50));
    }
    down_and_no_leftovers(&fleet);
}

/// A client's words about itself cost little and forge nothing: an `initialize`
/// larger than a new session may send is refused (413); a long name is cut in
/// `gateway.log`, the event log and the supervisor's log; a name with a newline
/// and an escape sequence stays inside its own line, escaped.
#[test]
fn a_clients_name_is_cut_and_cannot_forge_a_line() {
    let fleet = fleet_of("gw-words", &[fixture_server("a", &[], "")]);
    let http = serve(&fleet, &[]);
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "x".repeat(4 << 20), "version": "1"}}});
    // The head alone declares the size: the door answers before a byte of the
    // body is sent (sending it too could meet a closed connection).
    let huge = huge.to_string();
    let rest = http.url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').expect("a path"));
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the door");
    stream.set_read_timeout(Some(ANSWER)).unwrap();
    let head = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n",
        http.token,
        huge.len()
    );
    stream.write_all(head.as_bytes()).expect("send the head");
    let mut status = String::new();
    BufReader::new(stream)
        .read_line(&mut status)
        .expect("a status line");
    assert!(status.contains(" 413 "), "{status:?}");

    let forged = "evil\n2026-01-01T00:00:00.000Z session 99 closed (http)\u{1b}[2K";
    raw_session(&http, forged, &"v".repeat(10_000), true);
    raw_session(&http, &"long".repeat(1000), "1", true);
    let deadline = Instant::now() + ANSWER;
    while gateway_events(&fleet).len() < 2 {
        assert!(Instant::now() < deadline, "{:?}", gateway_events(&fleet));
        std::thread::sleep(Duration::from_millis(50));
    }
    let root = fleet.state_dir();
    for file in ["gateway.log", "events.ndjson", "supervisor.log"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        assert!(!text.contains('\u{1b}'), "{file}: {text}");
        assert!(
            !text.contains(&"long".repeat(100)),
            "{file} keeps a long name whole"
        );
        assert!(
            !text.contains(&"v".repeat(100)),
            "{file} keeps a long version whole"
        );
        assert!(
            !text.contains(&"x".repeat(100)),
            "{file} took the refused body"
        );
        for line in text.lines().filter(|l| l.contains("session 99")) {
            assert!(line.contains("evil"), "{file}: a forged line: {line}");
        }
    }
    let log = std::fs::read_to_string(root.join("gateway.log")).unwrap();
    assert!(log.contains("evil\\n2026"), "{log}");
    let names: Vec<String> = gateway_events(&fleet)
        .iter()
        .filter_map(|e| e["client"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.iter().all(|n| n.chars().count() <= 2 * 65 + 1),
        "{names:?}"
    );
    down_and_no_leftovers(&fleet);
}

/// HTTP sessions are capped (`gateway.max_sessions`): one more `initialize` is
/// answered 503 with `Retry-After`, said once in `gateway.log`. A session whose
/// client never sends `notifications/initialized` is closed within seconds, which
/// frees its place.
#[test]
fn http_sessions_are_capped_and_a_half_open_one_expires() {
    let fleet = TestFleet::raw(
        "gw-sessions",
        &format!(
            "version: 1\ngateway:\n  max_sessions: 2\nservers:\n{}",
            fixture_server("a", &[], "")
        ),
    );
    let http = serve(&fleet, &[]);
    let whole = raw_session(&http, "whole", "1", true);
    let half = raw_session(&http, "half", "1", false);
    let opened = Instant::now();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "third", "version": "1"}}});
    for _ in 0..3 {
        let third = Exchange::send(&http, "POST", &[], &initialize.to_string());
        assert_eq!(third.status, 503, "a third session beyond the cap of 2");
        assert_eq!(third.header("retry-after"), Some("1"));
    }
    let log = std::fs::read_to_string(fleet.state_dir().join("gateway.log")).unwrap();
    let lines = log
        .lines()
        .filter(|l| l.contains("new HTTP session"))
        .count();
    assert_eq!(lines, 1, "one line for the burst: {log}");
    assert!(log.contains("(gateway.max_sessions)"), "{log}");

    // The half-open session is closed within seconds, not minutes.
    let deadline = opened + Duration::from_secs(20);
    while ping(&http, &half) != 404 {
        assert!(
            Instant::now() < deadline,
            "a half-open session outlived 20 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        opened.elapsed() >= Duration::from_secs(9),
        "closed too soon"
    );
    assert_eq!(ping(&http, &whole), 200, "a whole session stays");
    let log = std::fs::read_to_string(fleet.state_dir().join("gateway.log")).unwrap();
    assert!(log.contains("sent no `notifications/initialized`"), "{log}");
    raw_session(&http, "third", "1", true);
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// Completions

/// `completion/complete` goes to the server that owns the prompt (under the name
/// that server gives it) or the resource template, through both doors for both
/// SDKs; the gateway declares `completions` only when a server behind it does.
#[test]
fn completions_reach_the_server_that_owns_the_prompt_or_template() {
    let fleet = fleet_of(
        "gw-complete",
        &[everything("ev"), fixture_server("plain", &[], "")],
    );
    let http = serve(&fleet, &[]);
    for sdk in SDKS {
        for door in [Door::Stdio(&[]), Door::Http(&http)] {
            let label = format!("{sdk:?} over {}", door.name());
            let mut client = Client::open(&fleet, sdk, door);
            let prompt = client.op(json!({
                "op": "complete",
                "ref": {"type": "ref/prompt", "name": "ev__completable-prompt"},
                "argument": {"name": "department", "value": "E"},
            }));
            assert_eq!(
                prompt["completion"]["values"],
                json!(["Engineering"]),
                "{label}: {prompt}"
            );
            let template = client.op(json!({
                "op": "complete",
                "ref": {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
                "argument": {"name": "resourceId", "value": "1"},
            }));
            assert_eq!(
                template["completion"]["values"],
                json!(["1"]),
                "{label}: {template}"
            );
            let unknown = client.op(json!({
                "op": "complete",
                "ref": {"type": "ref/prompt", "name": "plain__nothing"},
                "argument": {"name": "x", "value": ""},
            }));
            assert_eq!(unknown["ok"], false, "{label}: {unknown}");
            assert_eq!(unknown["error"]["code"], -32602, "{label}: {unknown}");
            client.close();
        }
    }
    // Seen only through the fixture, which has no completions, the gateway
    // declares none.
    let (only_plain, first) = Client::start(
        &fleet,
        Sdk::Python,
        "client of the fixture alone",
        Door::Stdio(&["plain"]).args(&fleet),
    );
    assert_eq!(first["ok"], true, "{first}");
    assert!(
        first["capabilities"].get("completions").is_none(),
        "{first}"
    );
    only_plain.close();
    let (both, first) = Client::start(
        &fleet,
        Sdk::Python,
        "client of both",
        Door::Stdio(&[]).args(&fleet),
    );
    assert_eq!(first["capabilities"]["completions"], json!({}), "{first}");
    both.close();
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// Logging and resource subscriptions

const MESSAGE: &str = "notifications/message";
const UPDATED: &str = "notifications/resources/updated";

/// An answer that must be `ok`.
#[track_caller]
fn ok(client: &mut Client, command: Value) -> Value {
    let answer = client.op(command.clone());
    assert_eq!(answer["ok"], true, "{}: {command}: {answer}", client.label);
    answer
}

/// The values of `field` of every item of a list answer's `key`, sorted.
#[track_caller]
fn names(answer: &Value, key: &str, field: &str) -> Vec<String> {
    let mut names: Vec<String> = answer[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {answer}"))
        .iter()
        .map(|item| item[field].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// The log messages a client got so far (its answer to `notifications` must
/// be `ok`), as (logger, data), sorted.
fn messages(client: &mut Client) -> Vec<(String, String)> {
    let heard = ok(client, json!({"op": "notifications"}));
    loggers_and_data(
        heard["params"][MESSAGE]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    )
}

/// The (logger, data) of each of log `messages`, sorted (rmcp hands each of a
/// server's notifications to mcpfleet on a task of its own, so two sent close
/// together may arrive swapped).
fn loggers_and_data(messages: Vec<Value>) -> Vec<(String, String)> {
    let mut logged: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&m["logger"]), text(&m["data"]))
        })
        .collect();
    logged.sort();
    logged
}

/// The params of the notifications `method` a client received so far.
fn params_of(client: &mut Client, method: &str) -> Vec<Value> {
    let answer = client.op(json!({"op": "notifications"}));
    answer["params"][method]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The log messages a client received whose text starts with `start`.
fn messages_starting(client: &mut Client, start: &str) -> Vec<Value> {
    params_of(client, MESSAGE)
        .into_iter()
        .filter(|m| m["data"].as_str().is_some_and(|d| d.starts_with(start)))
        .collect()
}

/// Waits (10 s at most) until a client has received a log message whose text
/// starts with `start`; the ones it has.
#[track_caller]
fn await_messages(client: &mut Client, start: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = messages_starting(client, start);
        if !found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        client.op(json!({"op": "wait_notification", "method": MESSAGE, "timeout_ms": 1000}));
    }
}

/// Through both doors for both SDKs, with the published server-everything
/// (which declares `logging` and `resources.subscribe`, logs each subscribe and
/// unsubscribe it gets at `info`, and announces its subscribed resources every
/// 5 s once `toggle-subscriber-updates` ran): each session gets the log
/// messages at or above its own level, named by the server; the server is
/// subscribed once for two sessions and unsubscribed after the last; only
/// subscribers get `resources/updated`, and an unsubscribed session no more.
#[test]
fn log_messages_follow_each_sessions_level_and_updates_reach_subscribers_alone() {
    let fleet = fleet_of(
        "gw-logsub",
        &[everything("ev"), fixture_server("plain", &[], "")],
    );
    let http = serve(&fleet, &[]);
    let uri = "demo://resource/dynamic/text/1";
    // The server's simulated updates, every 5 s, for the URIs it is subscribed to.
    {
        let mut toggler = Client::open(&fleet, Sdk::Python, Door::Stdio(&["ev"]));
        let toggled = toggler.call("ev__toggle-subscriber-updates", json!({}));
        assert_eq!(toggled["isError"], Value::Null, "{toggled}");
        toggler.close();
    }
    for sdk in SDKS {
        for door in [Door::Stdio(&[]), Door::Http(&http)] {
            let label = format!("{sdk:?} over {}", door.name());
            let (mut a, first) = Client::start(&fleet, sdk, &label, door.args(&fleet));
            assert_eq!(
                first["capabilities"]["logging"],
                json!({}),
                "{label}: {first}"
            );
            assert_eq!(
                first["capabilities"]["resources"]["subscribe"], true,
                "{label}: {first}"
            );
            let mut b = Client::open(&fleet, sdk, door);
            assert_eq!(
                a.op(json!({"op": "set_level", "level": "debug"}))["ok"],
                true,
                "{label}"
            );
            assert_eq!(
                b.op(json!({"op": "set_level", "level": "emergency"}))["ok"],
                true,
                "{label}"
            );

            // The first subscriber subscribes at the server, which logs it at
            // `info`: A (debug) gets the message, named by the server; B
            // (emergency) does not.
            let subscribed = a.op(json!({"op": "subscribe", "uri": uri}));
            assert_eq!(subscribed["ok"], true, "{label}: {subscribed}");
            let logged = await_messages(
                &mut a,
                &format!("Received Subscribe Resource request for URI: {uri}"),
            );
            assert_eq!(logged.len(), 1, "{label}: {logged:?}");
            assert_eq!(logged[0]["logger"], "ev", "{label}: {logged:?}");
            assert_eq!(logged[0]["level"], "info", "{label}: {logged:?}");
            // The second subscriber is counted at the gateway alone.
            let subscribed = b.op(json!({"op": "subscribe", "uri": uri}));
            assert_eq!(subscribed["ok"], true, "{label}: {subscribed}");
            a.expect_notification(UPDATED, "to a subscriber");
            b.expect_notification(UPDATED, "to a subscriber");
            let updated = params_of(&mut b, UPDATED);
            assert!(
                updated.iter().all(|u| u["uri"] == uri),
                "{label}: {updated:?}"
            );
            b.ping();
            assert_eq!(
                params_of(&mut b, MESSAGE),
                Vec::<Value>::new(),
                "{label}: B's level is emergency"
            );

            // B unsubscribes: it gets no more updates, A still does, and the
            // server is still subscribed (it logs no unsubscribe).
            let unsubscribed = b.op(json!({"op": "unsubscribe", "uri": uri}));
            assert_eq!(unsubscribed["ok"], true, "{label}: {unsubscribed}");
            b.ping();
            let b_had = params_of(&mut b, UPDATED).len();
            a.forget(&[UPDATED]);
            a.expect_notification(UPDATED, "to the remaining subscriber");
            b.ping();
            assert_eq!(
                params_of(&mut b, UPDATED).len(),
                b_had,
                "{label}: B unsubscribed"
            );

            // A, the last, unsubscribes: the server is unsubscribed.
            let unsubscribed = a.op(json!({"op": "unsubscribe", "uri": uri}));
            assert_eq!(unsubscribed["ok"], true, "{label}: {unsubscribed}");
            let logged = await_messages(
                &mut a,
                &format!("Received Unsubscribe Resource request: {uri}"),
            );
            assert_eq!(
                logged.len(),
                1,
                "{label}: the server is unsubscribed once: {logged:?}"
            );
            assert_eq!(
                messages_starting(&mut a, "Received Subscribe Resource request").len(),
                1,
                "{label}: the server is subscribed once"
            );

            // A URI no server offers.
            let unknown = a.op(json!({"op": "subscribe", "uri": "nowhere://x"}));
            assert_eq!(unknown["ok"], false, "{label}: {unknown}");
            assert_eq!(unknown["error"]["code"], -32602, "{label}: {unknown}");
            a.close();
            b.close();
        }
    }
    // Seen only through the fixture, which declares neither, the gateway
    // declares neither.
    let (only_plain, first) = Client::start(
        &fleet,
        Sdk::Python,
        "client of the fixture alone",
        Door::Stdio(&["plain"]).args(&fleet),
    );
    assert_eq!(first["ok"], true, "{first}");
    assert!(first["capabilities"].get("logging").is_none(), "{first}");
    assert!(
        first["capabilities"]["resources"]
            .get("subscribe")
            .is_none(),
        "{first}"
    );
    only_plain.close();
    down_and_no_leftovers(&fleet);
}

/// Waits (10 s at most) until server `name`'s stderr holds `line` `count`
/// times; the number it holds.
#[track_caller]
fn await_server_lines(fleet: &TestFleet, name: &str, line: &str, count: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = fleet.run(&["logs", name, "-n", "1000"]);
        assert_code(&out, 0);
        let found = stdout(&out).lines().filter(|l| l.ends_with(line)).count();
        if found >= count || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Opens the listen stream `all` of a 2026-07-28 client, for tool list
/// changes and the resources `fixture://r` and one that nobody offers: the
/// gateway honours the tools and `fixture://r` alone, and subscribes server
/// `fx` to it once more than the `subscribed` times it was.
#[track_caller]
fn listen_all(fleet: &TestFleet, client: &mut Client, subscribed: usize) {
    let label = client.label.clone();
    let all = ok(
        client,
        json!({"op": "listen", "handle": "all", "tools_list_changed": true,
               "resource_subscriptions": ["fixture://r", "nobody://offers-this"]}),
    );
    assert_eq!(
        all["honored"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["fixture://r"]}),
        "{label}: {all}"
    );
    assert_eq!(
        await_server_lines(
            fleet,
            "fx",
            "fixture: resources/subscribe fixture://r",
            subscribed + 1
        ),
        subscribed + 1,
        "{label}: the listen stream subscribes the server"
    );
}

/// The data of the log messages a client received so far, with their loggers,
/// sorted.
fn logged(client: &mut Client) -> Vec<(String, String)> {
    loggers_and_data(params_of(client, MESSAGE))
}

/// A legacy client's `notifications/roots/list_changed` reaches each running
/// legacy-era server its session sees, once, over stdio and HTTP: through
/// `connect b m r`, servers `b` and `r` (remote) hear it, and neither `c`
/// (outside that scope) nor `m` (which speaks only 2026-07-28, and has no such
/// notification); through `serve`, which sees the whole fleet, `b`, `c` and `r`
/// hear it.
#[test]
fn a_clients_roots_list_changed_reaches_the_legacy_servers_of_its_scope_once() {
    const HEARD: &str = "fixture: notifications/roots/list_changed";
    let servers = [
        fixture_server("b", &[], ""),
        fixture_server("c", &[], ""),
        fixture_server("m", &["--era", "modern"], ""),
    ];
    let fleet = fleet_of("gw-roots-changed", &servers);
    // `r`: the conformance member over HTTP, which speaks both eras and so is
    // spoken to in the legacy one; it notes each notification it gets.
    let noted = fleet.dir.path().join("member-notifications");
    let noted_arg = noted.to_str().unwrap();
    let (mut member, url) =
        crate::conformance::http_member_with(&fleet, &["--note-notifications", noted_arg]);
    std::fs::write(
        &fleet.path,
        format!(
            "version: 1\ngateway:\n  meta: true\nservers:\n{}  r:\n    url: {url}\n",
            servers.concat()
        ),
    )
    .unwrap();
    let remote_heard = || {
        std::fs::read_to_string(&noted)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == "notifications/roots/list_changed")
            .count()
    };
    let await_remote = |count: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while remote_heard() < count && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        remote_heard()
    };
    // `serve` starts every server.
    let http = serve(&fleet, &[]);
    let mut scoped = Client::open(&fleet, Sdk::Python, Door::Stdio(&["b", "m", "r"]));
    assert_eq!(scoped.op(json!({"op": "roots_changed"}))["ok"], true);
    assert_eq!(await_server_lines(&fleet, "b", HEARD, 1), 1);
    assert_eq!(await_remote(1), 1);
    // Another request of the same session, answered after the notification
    // was handed on: nothing more is coming.
    scoped.ping();
    let mut everywhere = Client::open(&fleet, Sdk::Python, Door::Http(&http));
    assert_eq!(everywhere.op(json!({"op": "roots_changed"}))["ok"], true);
    assert_eq!(await_server_lines(&fleet, "c", HEARD, 1), 1);
    assert_eq!(await_server_lines(&fleet, "b", HEARD, 2), 2);
    assert_eq!(await_remote(2), 2);
    everywhere.ping();
    scoped.ping();
    let heard = |name: &str| {
        let out = fleet.run(&["logs", name, "-n", "1000"]);
        assert_code(&out, 0);
        stdout(&out).lines().filter(|l| l.ends_with(HEARD)).count()
    };
    assert_eq!(heard("b"), 2, "once from each client");
    assert_eq!(heard("c"), 1, "only from the client whose scope holds it");
    assert_eq!(
        heard("m"),
        0,
        "a 2026-07-28 server has no such notification"
    );
    assert_eq!(remote_heard(), 2, "once from each client, over HTTP too");
    scoped.close();
    everywhere.close();
    let down = fleet.run(&["down"]);
    let _ = member.kill();
    let _ = member.wait();
    assert_code(&down, 0);
    fleet.assert_no_leftovers();
}

/// With the fixture (`--log-and-subscribe`), through both doors and both SDKs at
/// once: two sessions at different levels get different messages, named
/// `SERVER` or `SERVER/LOGGER`; the server is asked for the lowest level any
/// session wants (again when that session ends, and by a new generation);
/// `resources/updated` reaches the subscriber alone, and a new generation is
/// subscribed again.
#[test]
fn levels_filter_per_session_and_a_new_generation_gets_the_level_and_subscriptions() {
    let fleet = fleet_of(
        "gw-levels",
        &[fixture_server("fx", &["--log-and-subscribe"], "")],
    );
    let http = serve(&fleet, &[]);
    let mut a = Client::open(&fleet, Sdk::Python, Door::Stdio(&[]));
    let mut b = Client::open(&fleet, Sdk::TypeScript, Door::Http(&http));
    assert_eq!(
        b.op(json!({"op": "set_level", "level": "warning"}))["ok"],
        true
    );
    assert_eq!(
        await_server_lines(&fleet, "fx", "fixture: logging/setLevel warning", 1),
        1
    );
    assert_eq!(
        a.op(json!({"op": "set_level", "level": "debug"}))["ok"],
        true
    );
    assert_eq!(
        await_server_lines(&fleet, "fx", "fixture: logging/setLevel debug", 1),
        1
    );
    let levels = json!(["debug", "info", "warning", "emergency"]);
    let called = a.call("fx__echo", json!({"log": levels, "update": "fixture://r"}));
    assert_eq!(called["isError"], Value::Null, "{called}");
    let wanted = |levels: &[&str]| -> Vec<(String, String)> {
        levels
            .iter()
            .map(|l| {
                let logger = if *l == "debug" { "fx" } else { "fx/app" };
                (logger.to_owned(), format!("message at {l}"))
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while (logged(&mut a).len() < 4 || logged(&mut b).len() < 2) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        logged(&mut a),
        wanted(&["debug", "info", "warning", "emergency"])
    );
    assert_eq!(logged(&mut b), wanted(&["warning", "emergency"]));
    // Nobody subscribed: nobody gets the update.
    a.ping();
    b.ping();
    assert_eq!(params_of(&mut a, UPDATED), Vec::<Value>::new());
    assert_eq!(params_of(&mut b, UPDATED), Vec::<Value>::new());

    // B subscribes; A's call announces an update: B gets it, A does not.
    assert_eq!(
        b.op(json!({"op": "subscribe", "uri": "fixture://r"}))["ok"],
        true
    );
    assert_eq!(
        await_server_lines(&fleet, "fx", "fixture: resources/subscribe fixture://r", 1),
        1
    );
    a.call("fx__echo", json!({"update": "fixture://r"}));
    b.expect_notification(UPDATED, "to the subscriber");
    assert_eq!(
        params_of(&mut b, UPDATED),
        vec![json!({"uri": "fixture://r"})]
    );
    a.ping();
    assert_eq!(params_of(&mut a, UPDATED), Vec::<Value>::new());

    // A new generation is asked for the lowest level and subscribed again.
    let (out, _) = fleet.run_json(&["reconnect", "fx"]);
    assert_code(&out, 0);
    assert_eq!(
        await_server_lines(&fleet, "fx", "fixture: logging/setLevel debug", 2),
        2
    );
    assert_eq!(
        await_server_lines(&fleet, "fx", "fixture: resources/subscribe fixture://r", 2),
        2
    );

    // A subscribes too (counted at the gateway alone), then its session, at
    // debug, ends: the server is asked for warnings, and stays subscribed for
    // B. B, the last subscriber, unsubscribes: the server is unsubscribed.
    let unsubscribed = "fixture: resources/unsubscribe fixture://r";
    let subscribed = "fixture: resources/subscribe fixture://r";
    assert_eq!(
        a.op(json!({"op": "subscribe", "uri": "fixture://r"}))["ok"],
        true
    );
    a.close();
    assert_eq!(
        await_server_lines(&fleet, "fx", "fixture: logging/setLevel warning", 2),
        2
    );
    assert_eq!(
        b.op(json!({"op": "unsubscribe", "uri": "fixture://r"}))["ok"],
        true
    );
    assert_eq!(await_server_lines(&fleet, "fx", unsubscribed, 1), 1);
    assert_eq!(await_server_lines(&fleet, "fx", subscribed, 2), 2);
    // B subscribes again and ends its session: the server is unsubscribed.
    assert_eq!(
        b.op(json!({"op": "subscribe", "uri": "fixture://r"}))["ok"],
        true
    );
    assert_eq!(await_server_lines(&fleet, "fx", subscribed, 3), 3);
    b.close();
    assert_eq!(await_server_lines(&fleet, "fx", unsubscribed, 2), 2);
    down_and_no_leftovers(&fleet);
}

/// Every progress notification a server writes before its answer is on the
/// call's SSE stream before that answer: many calls through the HTTP door to a
/// fixture server that reports progress 1 to 3 and answers at once.
#[test]
fn every_progress_of_a_call_comes_before_its_answer_through_the_http_door() {
    let fleet = fleet_of(
        "gw-progress-order",
        &[fixture_server("fp", &["--progress", "3"], "")],
    );
    let http = serve(&fleet, &[]);
    let session = raw_session(&http, "raw-http", "1", true);
    const CALLS: u64 = 200;
    for id in 2..2 + CALLS {
        let token = format!("t{id}");
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "fp__echo", "arguments": {}, "_meta": {"progressToken": token}}});
        let mut stream = Exchange::send(&http, "POST", &of(&session), &call.to_string());
        assert_eq!(stream.status, 200, "call {id}");
        let mut progress = Vec::new();
        loop {
            let (_, Some(data)) = stream.event() else {
                continue;
            };
            if data["method"] == PROGRESS {
                assert_eq!(data["params"]["progressToken"], token, "call {id}: {data}");
                progress.push(data["params"]["progress"].clone());
            } else if data["id"] == id {
                assert!(data.get("result").is_some(), "call {id}: {data}");
                break;
            }
        }
        assert_eq!(
            progress,
            [json!(1), json!(2), json!(3)],
            "call {id}: the progress before its answer"
        );
    }
    down_and_no_leftovers(&fleet);
}

/// The same from a server reached over streamable HTTP (the conformance member,
/// which reports progress three times, 50 ms apart, and answers at once): each
/// call's progress is on its SSE stream before its answer.
#[test]
fn every_progress_of_an_http_servers_call_comes_before_its_answer() {
    let fleet = TestFleet::raw("gw-progress-order-http", "version: 1\nservers: {}\n");
    let (mut member, url) = crate::conformance::http_member(&fleet, false);
    std::fs::write(
        &fleet.path,
        format!("version: 1\nservers:\n  m:\n    url: {url}\n"),
    )
    .unwrap();
    let http = serve(&fleet, &[]);
    let session = raw_session(&http, "raw-http", "1", true);
    const CALLS: u64 = 60;
    let mut failed = Vec::new();
    for id in 2..2 + CALLS {
        let token = format!("t{id}");
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "m__test_tool_with_progress", "arguments": {},
                "_meta": {"progressToken": token}}});
        let mut stream = Exchange::send(&http, "POST", &of(&session), &call.to_string());
        assert_eq!(stream.status, 200, "call {id}");
        let mut progress = Vec::new();
        loop {
            let (_, Some(data)) = stream.event() else {
                continue;
            };
            if data["method"] == PROGRESS {
                progress.push(data["params"]["progress"].clone());
            } else if data["id"] == id {
                assert!(data.get("result").is_some(), "call {id}: {data}");
                break;
            }
        }
        if progress != [json!(0), json!(50), json!(100)] {
            failed.push((id, progress));
        }
    }
    let down = fleet.run(&["down"]);
    let _ = member.kill();
    let _ = member.wait();
    assert_code(&down, 0);
    fleet.assert_no_leftovers();
    assert!(
        failed.is_empty(),
        "calls whose progress did not all come before the answer: {failed:?}"
    );
}
