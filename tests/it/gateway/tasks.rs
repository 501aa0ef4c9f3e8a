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
    Exchange::send(http, "POST", &headers, &request(id, method, params)).answer(id)
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

// ---------------------------------------------------------------------------------
// Tasks of protocol 2025-11-25, for clients of the legacy era

const LEGACY: &str = "2025-11-25";

/// The `tasks` capability of the fixture's `--legacy-tasks`.
fn legacy_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// The headers of a request in legacy session `id`.
fn legacy_headers(id: &str) -> [(&str, &str); 2] {
    [("Mcp-Session-Id", id), ("MCP-Protocol-Version", LEGACY)]
}

/// Opens a legacy session at the HTTP door: its id and the gateway's answer
/// to `initialize`.
#[track_caller]
fn legacy_session(http: &Http) -> (String, Value) {
    raw_session_in(http, LEGACY, "raw-legacy", "1", true)
}

/// A request in legacy session `session`: its answer, as one JSON body or on
/// a stream.
#[track_caller]
fn legacy_ask(http: &Http, session: &str, id: u64, method: &str, params: Value) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    Exchange::send(http, "POST", &legacy_headers(session), &request.to_string()).answer(id)
}

/// The id of the task that the answer `made` to a call says was created: the
/// gateway's (it starts `0.`), ending in `ending`.
#[track_caller]
fn task_made(made: &Value, ending: &str) -> String {
    let task = made["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {made}"))
        .to_owned();
    assert!(task.starts_with("0.") && task.ends_with(ending), "{task}");
    task
}

/// The next `notifications/tasks/status` on a session's GET stream.
#[track_caller]
fn task_status(stream: &mut Exchange) -> Value {
    loop {
        if let (_, Some(data)) = stream.event()
            && data["method"] == "notifications/tasks/status"
        {
            return data;
        }
    }
}

/// The GET stream of legacy session `session`, open.
#[track_caller]
fn legacy_stream(http: &Http, session: &str) -> Exchange {
    let stream = Exchange::send(http, "GET", &legacy_headers(session), "");
    assert_eq!(stream.status, 200);
    stream
}

/// A call of `tool` with `arguments` as a task (request 2) in legacy session
/// `session`: its answer.
#[track_caller]
fn legacy_task_call(http: &Http, session: &str, tool: &str, arguments: Value) -> Value {
    legacy_ask(
        http,
        session,
        2,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "task": {"ttl": 60000}}),
    )
}

/// What a door is asked, whichever it is: `ask(id, method, params)`.
type Ask<'a> = dyn FnMut(u64, &str, Value) -> Value + 'a;

/// What both doors must do with 2025-11-25 tasks, once a task `made` was
/// created and its status `completed` came: `tasks/get`, `tasks/result`,
/// `tasks/cancel` and `tasks/list` with the gateway's ids, and -32602 for ids
/// the gateway never gave or of a generation that ended.
#[track_caller]
fn legacy_tasks_answer(door: &str, ask: &mut Ask, made: &str) {
    let got = ask(10, "tasks/get", json!({"taskId": made}));
    assert_eq!(got["result"]["taskId"], made, "{door}: {got}");
    assert_eq!(got["result"]["status"], "completed", "{door}: {got}");
    let result = ask(11, "tasks/result", json!({"taskId": made}));
    assert_eq!(
        result["result"]["content"][0]["text"], r#"{"a":1}"#,
        "{door}: {result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], made,
        "{door}: {result}"
    );
    // A task held working, cancelled at its server.
    let held = ask(
        12,
        "tools/call",
        json!({"name": "fx__echo", "arguments": {"hold": true}, "task": {"ttl": 60000}}),
    );
    let held = held["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{door}: {held}"))
        .to_owned();
    let cancelled = ask(13, "tasks/cancel", json!({"taskId": held}));
    assert_eq!(
        cancelled["result"]["status"], "cancelled",
        "{door}: {cancelled}"
    );
    assert_eq!(cancelled["result"]["taskId"], held, "{door}: {cancelled}");
    // Every task of the server, the fixture's pages of one followed.
    let listed = ask(14, "tasks/list", json!({}));
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{door}: {listed}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(
        ids.contains(&made) && ids.contains(&held.as_str()),
        "{door}: {listed}"
    );
    assert!(
        ids.iter().all(|id| id.starts_with("0.")),
        "{door}: {listed}"
    );
    // Ids never given, and one of a generation after the task's.
    let parts: Vec<&str> = made.splitn(3, '.').collect();
    let later = format!("0.{}.{}", parts[1].parse::<u64>().unwrap() + 1, parts[2]);
    let elsewhere = format!("1.{}.{}", parts[1], parts[2]);
    for forged in [
        "forged",
        "0.x.task-1",
        "9.1.task-1",
        later.as_str(),
        elsewhere.as_str(),
    ] {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let refused = ask(15, method, json!({"taskId": forged}));
            assert_eq!(
                refused["error"]["code"], -32602,
                "{door}: {method} {forged}: {refused}"
            );
        }
    }
}

/// A client of the legacy era gets the tasks of protocol 2025-11-25 through
/// both doors: the `tasks` capability as its servers declare it, a
/// `tools/call` with a `task` answered with a task id of the gateway's
/// (server, generation, the server's id), the task's status notification
/// on its session with that id, `tasks/get|result|cancel` routed to the
/// server, `tasks/list` merged and paged, forged ids refused.
#[test]
fn legacy_tasks_pass_through_both_doors_with_the_gateways_ids() {
    let fleet = fleet_of(
        "gw-legacy-tasks",
        &[
            fixture_server("fx", &["--legacy-tasks", "--page-size", "1"], ""),
            fixture_server("plain", &[], ""),
        ],
    );
    let http = serve(&fleet, &[]);

    // `serve`.
    let (session, init) = legacy_session(&http);
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        legacy_capability(),
        "the gateway declares the tasks its server declares: {init}"
    );
    let mut stream = legacy_stream(&http, &session);
    let made = legacy_task_call(&http, &session, "fx__echo", json!({"a": 1}));
    let made = task_made(&made, ".task-1");
    let status = task_status(&mut stream);
    assert_eq!(status["params"]["taskId"], made, "{status}");
    assert_eq!(status["params"]["status"], "completed", "{status}");
    drop(stream);
    let mut ask =
        |id: u64, method: &str, params: Value| legacy_ask(&http, &session, id, method, params);
    legacy_tasks_answer("serve", &mut ask, &made);

    // `connect`.
    let mut wire = crate::pass_through::Wire::connect(&fleet);
    assert_eq!(
        wire.initialized["result"]["capabilities"]["tasks"],
        legacy_capability(),
        "{}",
        wire.initialized
    );
    wire.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx__echo", "arguments": {"a": 1}, "task": {"ttl": 60000}}}));
    let made = wire.answer(2);
    let made = task_made(&made, ".task-3");
    let status = loop {
        let line = wire.next();
        if line["method"] == "notifications/tasks/status" {
            break line;
        }
    };
    assert_eq!(status["params"]["taskId"], made, "{status}");
    let mut ask = |id: u64, method: &str, params: Value| {
        wire.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        wire.answer(id)
    };
    legacy_tasks_answer("connect", &mut ask, &made);
    drop(wire);
    down_and_no_leftovers(&fleet);
}

/// The same with a server reached over HTTP (the conformance member with
/// `--legacy-tasks`, spoken to in the legacy era): the `tasks` capability it
/// declares in its answer to `initialize` is the gateway's, the call and the task
/// requests go to it as side requests of the gateway's, and the status it
/// sends on its session's GET stream reaches the client's.
#[test]
fn legacy_tasks_of_an_http_server_pass_through_with_the_gateways_ids() {
    let fleet = TestFleet::raw("gw-legacy-tasks-http", "version: 1\nservers: {}\n");
    let (mut member, url) = crate::conformance::http_member_with(&fleet, &["--legacy-tasks"]);
    std::fs::write(
        &fleet.path,
        format!("version: 1\nservers:\n  m:\n    url: {url}\n"),
    )
    .unwrap();
    let http = serve(&fleet, &[]);
    let (session, init) = legacy_session(&http);
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "the gateway declares the tasks its remote server declares: {init}"
    );
    let mut stream = legacy_stream(&http, &session);
    let made = legacy_task_call(&http, &session, "m__greet", json!({"name": "tasks"}));
    let made = task_made(&made, "");
    let status = task_status(&mut stream);
    assert_eq!(status["params"]["taskId"], made, "{status}");
    drop(stream);
    let got = legacy_ask(&http, &session, 3, "tasks/get", json!({"taskId": made}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["taskId"], made, "{got}");
    let result = legacy_ask(&http, &session, 4, "tasks/result", json!({"taskId": made}));
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, tasks!",
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], made,
        "{result}"
    );
    let listed = legacy_ask(&http, &session, 5, "tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"][0]["taskId"], made, "{listed}");
    let down = fleet.run(&["down"]);
    let _ = member.kill();
    let _ = member.wait();
    assert_code(&down, 0);
    fleet.assert_no_leftovers();
}
