//! The fleet file is the truth (docs/design.md §16): `up` under a running
//! supervisor converges on an edited file through the real binary, against real
//! fixture processes. Added servers start, servers whose process definition
//! changed are restarted through their authority (one generation more, another
//! pid), and every other server is provably left alone (the same generation and
//! the same pid). Removed servers are orphans until `up --remove-orphans` or
//! `down`; `status` shows drift; `up --dry-run` changes nothing; `up --watch`
//! applies edits as they are saved and refuses a broken one; a gateway client sees
//! the fleet change. Each test ends with the leak check.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{Value, json};

/// The limit of any wait for the fleet to reach a state.
const SETTLE: Duration = Duration::from_secs(30);

/// The text of a fleet of fixture servers, each named and given its fixture
/// arguments.
fn text(_fleet: &TestFleet, servers: &[(&str, &[&str])]) -> String {
    // Results name the server that answered (`gateway.meta`).
    let mut body = String::from("version: 1\ngateway:\n  meta: true\nservers:\n");
    for (name, args) in servers {
        body.push_str(&fixture_server(name, args, ""));
    }
    body
}

fn new_fleet(label: &str, servers: &[(&str, &[&str])]) -> TestFleet {
    let fleet = TestFleet::raw(label, "version: 1\nservers: {}\n");
    write_fleet(&fleet, servers);
    fleet
}

fn write_fleet(fleet: &TestFleet, servers: &[(&str, &[&str])]) {
    std::fs::write(&fleet.path, text(fleet, servers)).unwrap();
}

/// Replaces the fleet file the way many editors save: a new file renamed over it.
fn rename_fleet(fleet: &TestFleet, servers: &[(&str, &[&str])]) {
    let tmp = fleet.dir.path().join(".mcpfleet.yaml.swp");
    std::fs::write(&tmp, text(fleet, servers)).unwrap();
    std::fs::rename(&tmp, &fleet.path).unwrap();
}

/// Each server's (state, generation, pid) in a document.
fn states(doc: &Value) -> BTreeMap<String, (String, Option<u64>, Option<i64>)> {
    doc["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                (
                    s["state"].as_str().unwrap().to_owned(),
                    s["generation"].as_u64(),
                    s["pid"].as_i64(),
                ),
            )
        })
        .collect()
}

fn pid_of(doc: &Value, name: &str) -> i32 {
    server(doc, name)["pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("{name} has no pid: {doc}")) as i32
}

/// The plan step of `name` in a report: (action, changed keys).
fn step(doc: &Value, name: &str) -> (String, Vec<String>) {
    let step = doc["plan"]
        .as_array()
        .unwrap_or_else(|| panic!("no plan in {doc}"))
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step for {name} in {doc}"));
    let changed = step["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    (step["action"].as_str().unwrap().to_owned(), changed)
}

fn events(fleet: &TestFleet) -> Vec<u8> {
    std::fs::read(fleet.state_dir().join("events.ndjson")).unwrap_or_default()
}

/// `down`, then nothing of the test may be left.
fn down_and_no_leftovers(fleet: &TestFleet) {
    let (out, _) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
}

/// Polls `status --output json` until `done` holds of it.
#[track_caller]
fn wait_status(fleet: &TestFleet, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + SETTLE;
    loop {
        let (_, doc) = fleet.run_json(&["status"]);
        if done(&doc) {
            return doc;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {SETTLE:?}: {doc}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn running(doc: &Value, name: &str, generation: u64) -> bool {
    doc["servers"].as_array().is_some_and(|all| {
        all.iter()
            .any(|s| s["name"] == name && s["state"] == "running" && s["generation"] == generation)
    })
}

#[test]
fn up_converges_restarting_only_what_changed() {
    let fleet = new_fleet("rc-converge", &[("a", &[]), ("b", &[]), ("c", &[])]);
    let (out, first) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let (pa, pb, pc) = (
        pid_of(&first, "a"),
        pid_of(&first, "b"),
        pid_of(&first, "c"),
    );

    // b's args change, d is added, c is removed.
    write_fleet(&fleet, &[("a", &[]), ("b", &["--tools", "5"]), ("d", &[])]);

    // Drift, before any `up`: in JSON...
    let (out, doc) = fleet.run_json(&["status"]);
    assert_code(&out, 0);
    let drift = |name: &str| server(&doc, name)["drift"].clone();
    assert_eq!(
        drift("a"),
        json!({"kind": "none", "keys": [], "restart": false})
    );
    assert_eq!(
        drift("b"),
        json!({"kind": "changed", "keys": ["args"], "restart": true})
    );
    assert_eq!(drift("c")["kind"], "orphaned");
    assert_eq!(drift("d")["kind"], "added");
    assert_eq!(server(&doc, "d")["state"], "stopped");
    // ... and as text.
    let out = fleet.run(&["status"]);
    let text = stdout(&out);
    assert!(
        text.contains("drift: args (the fleet file differs"),
        "{text}"
    );
    assert!(text.contains("drift: orphaned"), "{text}");
    assert!(text.contains("drift: added to the fleet file"), "{text}");
    // Nothing changed meanwhile.
    assert_eq!(
        states(&doc)["b"],
        ("running".into(), Some(1), Some(pb as i64))
    );

    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(step(&doc, "a"), ("keep".into(), vec![]));
    assert_eq!(step(&doc, "b"), ("restart".into(), vec!["args".into()]));
    assert_eq!(step(&doc, "c").0, "orphaned");
    assert_eq!(step(&doc, "d").0, "start");
    let now = states(&doc);
    // Unchanged: the same generation and pid. Changed: one generation more.
    assert_eq!(now["a"], ("running".into(), Some(1), Some(pa as i64)));
    assert_eq!(now["b"].0, "running");
    assert_eq!(now["b"].1, Some(2));
    assert_ne!(now["b"].2, Some(pb as i64));
    assert!(!is_alive(pb), "b's old generation is gone");
    assert_eq!(server(&doc, "b")["tools"], 5, "b runs the new args");
    // The orphan is left running, the added server runs.
    assert_eq!(now["c"], ("running".into(), Some(1), Some(pc as i64)));
    assert_eq!(now["d"].0, "running");
    assert!(is_alive(pa) && is_alive(pc));
    // The restart is recorded with its cause.
    let log = String::from_utf8(events(&fleet)).unwrap();
    assert!(
        log.lines().any(|l| l.contains(r#""server":"b""#)
            && l.contains(r#""cause":"reconcile""#)
            && l.contains(r#""to":"stopping""#)),
        "{log}"
    );

    // A second `up` of the same file changes nothing at all.
    let before = events(&fleet);
    let (out, again) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(states(&again), now);
    assert_eq!(events(&fleet), before);
    let (_, doc) = fleet.run_json(&["status"]);
    for name in ["a", "b", "d"] {
        assert_eq!(server(&doc, name)["drift"]["kind"], "none", "{doc}");
    }

    // `down` stops the orphan too, and forgets it.
    let (out, doc) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "c")["state"], "stopped");
    assert!(!is_alive(pc));
    fleet.assert_no_leftovers();
}

#[test]
fn settings_apply_without_a_restart() {
    let fleet = new_fleet("rc-settings", &[("a", &[])]);
    let (out, first) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let pa = pid_of(&first, "a");
    let mut body = text(&fleet, &[("a", &[])]);
    body.push_str("    connect_timeout: 20s\n    idle_timeout: 10m\n    prefix: alpha\n");
    std::fs::write(&fleet.path, body).unwrap();
    let (_, doc) = fleet.run_json(&["status"]);
    assert_eq!(
        server(&doc, "a")["drift"],
        json!({"kind": "changed", "keys": ["connect_timeout", "idle_timeout", "prefix"], "restart": false})
    );
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(step(&doc, "a").0, "keep");
    let settings = &doc["plan"][0]["settings"];
    assert_eq!(
        *settings,
        json!(["connect_timeout", "idle_timeout", "prefix"])
    );
    assert_eq!(
        states(&doc)["a"],
        ("running".into(), Some(1), Some(pa as i64))
    );
    let (_, doc) = fleet.run_json(&["status"]);
    assert_eq!(server(&doc, "a")["drift"]["kind"], "none");
    down_and_no_leftovers(&fleet);
}

#[test]
fn a_dry_run_changes_nothing() {
    let fleet = new_fleet("rc-dry", &[("a", &[]), ("b", &[])]);
    // With no supervisor, none is started: the plan comes from the file.
    let (out, doc) = fleet.run_json(&["up", "--dry-run"]);
    assert_code(&out, 0);
    assert_eq!(doc["dry_run"], true);
    assert_eq!(step(&doc, "a").0, "start");
    assert!(fleet.lock_pid().is_none(), "no supervisor was started");
    assert!(events(&fleet).is_empty());

    let (out, first) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    write_fleet(&fleet, &[("a", &["--tools", "4"]), ("c", &[])]);
    let before = events(&fleet);
    let (out, doc) = fleet.run_json(&["up", "--dry-run", "--remove-orphans"]);
    assert_code(&out, 0);
    assert_eq!(doc["dry_run"], true);
    assert_eq!(step(&doc, "a"), ("restart".into(), vec!["args".into()]));
    assert_eq!(step(&doc, "b").0, "stop");
    assert_eq!(step(&doc, "c").0, "start");
    let out = fleet.run(&["up", "--dry-run"]);
    assert_code(&out, 0);
    let text = stdout(&out);
    assert!(text.starts_with("SERVER  ACTION"), "{text}");
    assert!(text.contains("orphaned"), "{text}");
    assert!(
        text.contains("up --dry-run: 1 to start, 1 to restart, 1 orphaned; nothing was changed"),
        "{text}"
    );
    // Nothing happened: the event log is the same, byte for byte, and so are
    // the processes.
    assert_eq!(events(&fleet), before);
    let (_, doc) = fleet.run_json(&["status"]);
    let now = states(&doc);
    assert_eq!(now["a"], states(&first)["a"]);
    assert_eq!(now["b"], states(&first)["b"]);
    assert_eq!(now["c"].0, "stopped");
    assert_eq!(server(&doc, "c")["drift"]["kind"], "added");
    down_and_no_leftovers(&fleet);
}

#[test]
fn remove_orphans_stops_them_and_a_server_put_back_continues_its_generations() {
    let fleet = new_fleet("rc-orphans", &[("a", &[]), ("b", &[])]);
    let (out, first) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let (pa, pb) = (pid_of(&first, "a"), pid_of(&first, "b"));
    write_fleet(&fleet, &[("a", &[])]);

    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(step(&doc, "b").0, "orphaned");
    assert!(is_alive(pb), "an orphan is left running");
    let out = fleet.run(&["up"]);
    assert!(stdout(&out).contains("plan: orphaned"), "{}", stdout(&out));

    let (out, doc) = fleet.run_json(&["up", "--remove-orphans"]);
    assert_code(&out, 0);
    assert_eq!(step(&doc, "b").0, "stop");
    assert_eq!(server(&doc, "b")["state"], "stopped");
    assert_eq!(server(&doc, "b")["teardown"]["outcome"], "clean");
    assert!(!is_alive(pb));
    assert_eq!(
        states(&doc)["a"],
        ("running".into(), Some(1), Some(pa as i64))
    );
    // Forgotten: status no longer shows it.
    let (_, doc) = fleet.run_json(&["status"]);
    assert!(
        doc["servers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["name"] != "b")
    );

    // Back in the file: its generations go on from where they were (L3).
    write_fleet(&fleet, &[("a", &[]), ("b", &[])]);
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(states(&doc)["b"].1, Some(2));
    assert_eq!(
        states(&doc)["a"],
        ("running".into(), Some(1), Some(pa as i64))
    );
    down_and_no_leftovers(&fleet);
}

#[test]
fn an_invalid_file_changes_nothing() {
    let fleet = new_fleet("rc-invalid", &[("a", &[])]);
    let (out, first) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let mut body = text(&fleet, &[("a", &[]), ("b", &[])]);
    body.push_str("    argz: [x]\n");
    std::fs::write(&fleet.path, &body).unwrap();
    let line = body.lines().position(|l| l.contains("argz")).unwrap() + 1;
    let before = events(&fleet);

    let out = fleet.run(&["up"]);
    assert_code(&out, 2);
    let err = stderr(&out);
    let at = format!("{}:{line}:5: servers.b.argz", fleet.path.display());
    assert!(err.contains(&at), "{at} in {err}");
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 2);
    assert_eq!(doc["error"]["kind"], "invalid_fleet_file");
    assert_eq!(doc["error"]["errors"][0]["line"], line);
    assert_eq!(doc["error"]["errors"][0]["column"], 5);

    assert_eq!(events(&fleet), before);
    std::fs::write(&fleet.path, text(&fleet, &[("a", &[])])).unwrap();
    let (_, doc) = fleet.run_json(&["status"]);
    assert_eq!(states(&doc), states(&first));
    down_and_no_leftovers(&fleet);
}

/// `up --watch` with its stderr gathered as it comes.
struct Watch {
    child: Child,
    stderr: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Watch {
    fn start(fleet: &TestFleet) -> Watch {
        Watch::start_with(fleet, &["up", "--watch"])
    }

    fn start_with(fleet: &TestFleet, args: &[&str]) -> Watch {
        let mut child = fleet
            .command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Watch {
            child,
            stderr,
            seen: Vec::new(),
        }
    }

    /// Waits for a line of stderr that contains `text`.
    #[track_caller]
    fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + SETTLE;
        loop {
            if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
                let line = line.clone();
                self.seen.retain(|l| *l != line);
                return line;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no `{text}` from up --watch; it said {:?}", self.seen),
            }
        }
    }
}

#[test]
fn watch_applies_edits_and_refuses_a_broken_one() {
    let fleet = new_fleet("rc-watch", &[("a", &[])]);
    let mut watch = Watch::start(&fleet);
    watch.expect("watching");
    let doc = wait_status(&fleet, "a running", |d| running(d, "a", 1));
    let pa = pid_of(&doc, "a");

    // An added server.
    write_fleet(&fleet, &[("a", &[]), ("b", &[])]);
    watch.expect("changed; applying");
    let doc = wait_status(&fleet, "b started", |d| running(d, "b", 1));
    assert_eq!(pid_of(&doc, "a"), pa);

    // Changed args, saved by renaming a new file over the old one.
    rename_fleet(&fleet, &[("a", &["--tools", "4"]), ("b", &[])]);
    watch.expect("changed; applying");
    let doc = wait_status(&fleet, "a restarted", |d| running(d, "a", 2));
    let (pa2, pb) = (pid_of(&doc, "a"), pid_of(&doc, "b"));
    assert!(!is_alive(pa));

    // A broken edit is reported with its position, and the fleet is kept.
    let mut broken = text(&fleet, &[("a", &["--tools", "4"]), ("b", &[])]);
    broken.push_str("    argz: [x]\n");
    std::fs::write(&fleet.path, &broken).unwrap();
    let said = watch.expect("servers.b.argz");
    let line = broken.lines().position(|l| l.contains("argz")).unwrap() + 1;
    assert!(said.contains(&format!(":{line}:5:")), "{said}");
    watch.expect("the running fleet is kept");

    // A later good edit is applied: only b changes.
    write_fleet(
        &fleet,
        &[("a", &["--tools", "4"]), ("b", &["--tools", "2"])],
    );
    watch.expect("changed; applying");
    let doc = wait_status(&fleet, "b restarted", |d| running(d, "b", 2));
    assert_eq!(pid_of(&doc, "a"), pa2, "a is left alone");
    assert_eq!(states(&doc)["a"].1, Some(2));
    assert!(!is_alive(pb));

    // Ctrl-C ends the watch only: the fleet stays up.
    sigint(watch.child.id());
    let status = watch.child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    watch.expect("the fleet stays up");
    let (_, doc) = fleet.run_json(&["status"]);
    assert!(running(&doc, "a", 2) && running(&doc, "b", 2), "{doc}");
    down_and_no_leftovers(&fleet);
}

#[test]
fn watch_in_the_foreground_ends_with_the_fleet() {
    let fleet = new_fleet("rc-watch-fg", &[("a", &[])]);
    let mut watch = Watch::start_with(&fleet, &["up", "--watch", "--foreground"]);
    watch.expect("running in the foreground");
    let doc = wait_status(&fleet, "a running", |d| running(d, "a", 1));
    let pa = pid_of(&doc, "a");
    write_fleet(&fleet, &[("a", &[]), ("b", &[])]);
    watch.expect("changed; applying");
    let doc = wait_status(&fleet, "b started", |d| running(d, "b", 1));
    assert_eq!(pid_of(&doc, "a"), pa);
    let pb = pid_of(&doc, "b");
    // Ctrl-C means `down`, for the servers the watch added too.
    sigint(watch.child.id());
    let status = watch.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!is_alive(pa) && !is_alive(pb));
    fleet.assert_no_leftovers();
}

/// A raw MCP client of the gateway through `mcpfleet connect`.
struct GatewayClient {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
}

impl GatewayClient {
    fn open(fleet: &TestFleet) -> GatewayClient {
        let mut child = fleet
            .command(&["connect"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let mut client = GatewayClient {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "reconcile-test", "version": "1"}}),
        );
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its result; notifications that come first
    /// are kept in `notes`.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let v = self
                .lines
                .recv_timeout(SETTLE)
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    }

    /// Waits for a `notifications/tools/list_changed`.
    fn list_changed(&mut self) {
        loop {
            let v = self
                .lines
                .recv_timeout(SETTLE)
                .expect("no notifications/tools/list_changed");
            if v["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
    }

    fn tools(&mut self) -> Vec<String> {
        let result = self.request("tools/list", json!({}));
        let mut names: Vec<String> = result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }
}

#[test]
fn a_gateway_client_sees_servers_come_and_go() {
    let fleet = new_fleet("rc-gateway", &[("a", &["--tools", "1"])]);
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let mut client = GatewayClient::open(&fleet);
    assert_eq!(client.tools(), ["a__echo"]);

    write_fleet(
        &fleet,
        &[("a", &["--tools", "1"]), ("b", &["--tools", "2"])],
    );
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    client.list_changed();
    assert_eq!(client.tools(), ["a__echo", "b__echo", "b__tool_2"]);
    let result = client.request(
        "tools/call",
        json!({"name": "b__echo", "arguments": {"x": 1}}),
    );
    assert_eq!(result["_meta"]["mcpfleet/server"], "b", "{result}");

    // Removed from the file: gone from the gateway at once, though it still runs.
    write_fleet(&fleet, &[("a", &["--tools", "1"])]);
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "b")["state"], "running");
    client.list_changed();
    assert_eq!(client.tools(), ["a__echo"]);

    drop(client.stdin);
    let _ = client.child.wait();
    down_and_no_leftovers(&fleet);
}

#[test]
fn reconnect_takes_up_the_file_as_well() {
    let fleet = new_fleet("rc-reconnect", &[("a", &[])]);
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    write_fleet(&fleet, &[("a", &["--tools", "6"])]);
    let (out, doc) = fleet.run_json(&["reconnect", "a"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "a")["generation"], 2);
    assert_eq!(server(&doc, "a")["tools"], 6);
    let (_, doc) = fleet.run_json(&["status"]);
    assert_eq!(server(&doc, "a")["drift"]["kind"], "none");
    down_and_no_leftovers(&fleet);
}

/// `${env:NAME}` is resolved as the caller sees it: a value that changed between
/// two `up`s restarts the server that uses it, and appears in no output.
#[test]
fn a_value_from_the_callers_environment_counts() {
    let fleet = new_fleet("rc-env", &[("a", &[])]);
    let mut body = text(&fleet, &[("a", &[])]);
    body.push_str("    env: { TOKEN: \"${env:RC_TOKEN}\" }\n");
    std::fs::write(&fleet.path, body).unwrap();
    let up = |value: &str| {
        let mut cmd = fleet.command(&["--output", "json", "up"]);
        cmd.env("RC_TOKEN", value);
        let out = run_bounded(cmd, SETTLE);
        assert_code(&out, 0);
        for secret in ["first-s3cr3t", "second-s3cr3t"] {
            assert!(!stdout(&out).contains(secret) && !stderr(&out).contains(secret));
        }
        parse_doc(&out)
    };
    let first = up("first-s3cr3t");
    let again = up("first-s3cr3t");
    assert_eq!(step(&again, "a").0, "keep");
    assert_eq!(states(&again)["a"], states(&first)["a"]);
    let changed = up("second-s3cr3t");
    assert_eq!(step(&changed, "a"), ("restart".into(), vec!["env".into()]));
    assert_eq!(states(&changed)["a"].1, Some(2));
    let log = String::from_utf8(events(&fleet)).unwrap();
    assert!(!log.contains("s3cr3t"));
    // `down` needs a file it can read, as any command does.
    write_fleet(&fleet, &[("a", &[])]);
    down_and_no_leftovers(&fleet);
}

/// The fleet file's version as the CLI sends it (`FileVersion` of the
/// protocol): identity, size, modification and change times.
fn version_of(path: &std::path::Path) -> Value {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    json!({
        "dev": m.dev(),
        "ino": m.ino(),
        "size": m.size(),
        "modified_ns": m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        "changed_ns": m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    })
}

/// Writes the fleet file again until its change time differs from `than`
/// (some file systems count changes in ticks of a few milliseconds).
fn write_changed(fleet: &TestFleet, servers: &[(&str, &[&str])], than: &Value) {
    let deadline = Instant::now() + SETTLE;
    loop {
        write_fleet(fleet, servers);
        if version_of(&fleet.path)["changed_ns"] != than["changed_ns"] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the file's change time stood still"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends one request line on the control socket and returns the report of its
/// reply (events skipped).
fn ask_raw(fleet: &TestFleet, request: &Value) -> Value {
    let mut socket =
        std::os::unix::net::UnixStream::connect(fleet.state_dir().join("control.sock"))
            .expect("the control socket");
    socket.set_read_timeout(Some(SETTLE)).unwrap();
    writeln!(socket, "{request}").unwrap();
    for line in BufReader::new(socket).lines() {
        let line: Value = serde_json::from_str(&line.unwrap()).expect("JSON lines");
        match line["type"].as_str() {
            Some("event") => continue,
            Some("reply") => return line["report"].clone(),
            _ => panic!("not a reply: {line}"),
        }
    }
    panic!("the supervisor closed the connection without a reply");
}

#[test]
fn an_up_that_read_an_older_file_never_replaces_the_newer_one() {
    let fleet = new_fleet("rc-older", &[("a", &[])]);
    assert_code(&fleet.run(&["up"]), 0);
    // What a slow `up` read before the edit: the text and its version.
    let old_text = std::fs::read_to_string(&fleet.path).unwrap();
    let old_version = version_of(&fleet.path);
    write_changed(&fleet, &[("a", &[]), ("b", &[])], &old_version);
    let new_version = version_of(&fleet.path);
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert!(running(&doc, "b", 1), "{doc}");
    assert!(doc.get("older_file").is_none(), "{doc}");

    // The slow `up` arrives last, with the older file: the supervisor keeps the
    // newer one, converges on it, and says which it kept.
    let path = fleet.path.to_str().unwrap();
    let report = ask_raw(
        &fleet,
        &json!({"v": 1, "op": "up", "fleet": {
            "path": path, "text": old_text, "env": {}, "version": old_version}}),
    );
    assert_eq!(report["exit_code"], 0, "{report}");
    assert!(running(&report, "b", 1), "{report}");
    assert_eq!(step(&report, "b").0, "keep", "{report}");
    let older = &report["older_file"];
    assert!(older["read_changed"].is_string(), "{report}");
    assert!(
        older["read_changed"].as_str() < older["kept_changed"].as_str(),
        "{report}"
    );
    // Any other request with the older file keeps the newer one too.
    let status = ask_raw(
        &fleet,
        &json!({"v": 1, "op": "tools", "fleet": {
            "path": path, "text": old_text, "env": {}, "version": old_version}}),
    );
    assert_eq!(status["exit_code"], 0, "{status}");
    let doc = wait_status(&fleet, "b held, without drift", |doc| {
        running(doc, "b", 1) && server(doc, "b")["drift"]["kind"] == "none"
    });
    assert_eq!(server(&doc, "a")["drift"]["kind"], "none", "{doc}");
    assert_eq!(new_version, version_of(&fleet.path));

    // An older copy put back with its old modification time (`cp -p`, `mv`) is
    // a new change of the file: it is taken up.
    std::fs::write(&fleet.path, &old_text).unwrap();
    let modified =
        std::time::UNIX_EPOCH + Duration::from_nanos(old_version["modified_ns"].as_u64().unwrap());
    std::fs::File::options()
        .write(true)
        .open(&fleet.path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    let (out, doc) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    assert!(doc.get("older_file").is_none(), "{doc}");
    assert_eq!(step(&doc, "b").0, "orphaned", "{doc}");
    down_and_no_leftovers(&fleet);
}
