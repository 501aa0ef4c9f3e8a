//! Tasks through the gateway (docs/design.md §14, "Tasks"): the tasks extension
//! of 2026-07-28 (SEP-2663) between a client of that era at the HTTP door and
//! the conformance member (`tests/conformance/member.mjs`), run as a stdio
//! server of that era alone, so that the gateway speaks it to the member.

use super::*;

const MODERN: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request whose client declares the tasks extension.
fn request(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// Sends `method` with `params` (`name`: its `Mcp-Name`) to the door; the
/// JSON-RPC answer, whether it comes as one JSON body or on a stream.
#[track_caller]
fn ask(http: &Http, id: u64, method: &str, name: Option<&str>, params: Value) -> Value {
    let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    let mut exchange = Exchange::send(http, "POST", &headers, &request(id, method, params));
    if exchange
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"))
    {
        return exchange.answer_to(id);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut exchange.body, &mut text).expect("read the body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `tasks/get` of `task` until its status is no longer `working`, bounded.
#[track_caller]
fn settled(http: &Http, task: &str) -> Value {
    let deadline = Instant::now() + ANSWER;
    for id in 100.. {
        let got = ask(http, id, "tasks/get", Some(task), json!({"taskId": task}));
        if got["result"]["status"] != "working" {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "task {task} still working: {got}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!()
}

/// The gateway declares the extension as its server does; a call that the
/// server answers with a task reaches the client with a task id of the
/// gateway's, under which `tasks/get` polls it to completion at the server and
/// `tasks/cancel` cancels it there; an id the gateway never handed out is
/// -32602, and so is one of a generation that has ended.
#[test]
fn a_task_is_created_polled_cancelled_through_the_gateway_and_forged_ids_refused() {
    let fleet = TestFleet::raw(
        "gw-tasks",
        &format!(
            "version: 1\nservers:\n  member:\n    command: {}\n    args: [{}, stdio, --modern-only]\n    prefix: \"\"\n",
            quoted(&published_servers().join("inspector/node_modules/node/bin/node")),
            quoted(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/member.mjs")),
        ),
    );
    let http = serve(&fleet, &["member"]);

    let discovered = ask(&http, 1, "server/discover", None, json!({}));
    assert!(
        discovered["result"]["capabilities"]["extensions"][TASKS].is_object(),
        "the gateway declares the extension its server declares: {discovered}"
    );

    let call = json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "x"}});
    let created = ask(&http, 2, "tools/call", Some("slow_compute"), call);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let parts: Vec<&str> = task.splitn(3, '.').collect();
    assert_eq!(
        parts.len(),
        3,
        "server, generation and the server's id: {task}"
    );
    assert_eq!(parts[0], "0", "the fleet's first server: {task}");
    let done = settled(&http, &task);
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["taskId"], task,
        "the gateway's id again: {done}"
    );
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "computed x in 1 s",
        "{done}"
    );

    let call = json!({"name": "slow_compute", "arguments": {"seconds": 60}});
    let long = ask(&http, 3, "tools/call", Some("slow_compute"), call);
    let long = long["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let cancelled = ask(
        &http,
        4,
        "tasks/cancel",
        Some(&long),
        json!({"taskId": long}),
    );
    assert!(cancelled["result"].is_object(), "{cancelled}");
    let after = settled(&http, &long);
    assert_eq!(after["result"]["status"], "cancelled", "{after}");

    let generation = parts[1];
    let other = format!("{}.{generation}.{}", 0, "no-such-task");
    let gone = format!("0.{}.{}", generation.parse::<u64>().unwrap() + 1, parts[2]);
    for forged in ["forged", "7.1.x", "0.x.y", other.as_str(), gone.as_str()] {
        let refused = ask(
            &http,
            5,
            "tasks/get",
            Some(forged),
            json!({"taskId": forged}),
        );
        assert_eq!(refused["error"]["code"], -32602, "{forged}: {refused}");
    }
    stdio_door(&fleet);
    down_and_no_leftovers(&fleet);
}

/// The same through `connect`, once the session is open and the catalog
/// current: a call whose client declares the extension gets a task of the
/// gateway's, polled to completion.
fn stdio_door(fleet: &TestFleet) {
    let mut child = fleet
        .command(&["connect"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn connect");
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        writeln!(stdin, "{}", request(id, method, params)).unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines
                .recv_timeout(ANSWER)
                .expect("connect answered within the bound");
            if line["id"] == id && line.get("method").is_none() {
                return line;
            }
        }
    };
    let listed = ask(1, "tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "y"}});
    let created = ask(2, "tools/call", call);
    assert_eq!(
        created["result"]["resultType"], "task",
        "over stdio: {created}"
    );
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    assert!(task.starts_with("0."), "{task}");
    let deadline = Instant::now() + ANSWER;
    let mut id = 3;
    let done = loop {
        let got = ask(id, "tasks/get", json!({"taskId": task}));
        if got["result"]["status"] != "working" {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "task {task} still working: {got}"
        );
        std::thread::sleep(Duration::from_millis(100));
        id += 1;
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "computed y in 1 s"
    );
    drop(stdin);
    let status = child.wait().expect("connect ends with its stdin");
    assert!(status.success(), "connect: {status}");
}
