//! Both eras of the protocol at both doors (docs/design.md §14, "Both eras at
//! both doors"): the official Python SDK's client as a 2026-07-28 client (per-
//! request `_meta`, no `initialize`, no session) and as a legacy one, through
//! `connect` and through `serve`; and the HTTP door on the wire: the headers and
//! `_meta` a 2026-07-28 request must carry, the methods that era removed, and
//! requests of that era that open no session and are not held to what opening
//! one may cost.

use super::*;

/// The `mode` of a client that opens with `initialize`.
const LEGACY: &str = "legacy";
/// The `mode` of a client that asks `server/discover` first, and takes the
/// newest era the server names.
const AUTO: &str = "auto";

/// The Python SDK's client in `mode` through `door`, once it is connected.
#[track_caller]
fn open_in(fleet: &TestFleet, mode: &str, door: Door) -> Client {
    let (client, first) =
        Client::open_in_mode(fleet, Sdk::Python, "Python client", mode, door, &[]);
    let version = first["protocol_version"].as_str().unwrap_or_default();
    match mode {
        LEGACY => assert_eq!(version, "2025-11-25", "{first}"),
        _ => assert_eq!(version, MODERN, "{first}"),
    }
    client
}

/// Every page of a list answered to a 2026-07-28 client says it is complete
/// and how long it may be kept, and by whom: at once stale, and only for this
/// client, since the merged list changes whenever a server's does.
#[track_caller]
fn assert_modern_pages(answer: &Value) {
    let pages = answer["hints"].as_array().expect("hints");
    assert!(!pages.is_empty(), "{answer}");
    for page in pages {
        assert_eq!(
            page,
            &json!({"ttlMs": 0, "cacheScope": "private", "resultType": "complete"}),
            "{answer}"
        );
    }
}

/// A fixture (tools only), the published server-everything (tools, prompts,
/// resources) and a server on the TypeScript SDK behind both doors, to a
/// 2026-07-28 client (pinned, and one that asks `server/discover` first) and a
/// legacy one at each: `server/discover` names every version and the gateway;
/// tools, prompts and resources are listed (a 2026-07-28 client's pages with
/// `resultType`, `ttlMs` and `cacheScope`), tools called (twice each, so that
/// over stdio the second call passes through), with progress, a prompt got and
/// a resource read. Over stdio a 2026-07-28 client is a session of its own,
/// opened by its first request and named by its `_meta`, and it is sent no
/// `list_changed` of the gateway's accord while the legacy one is; over HTTP it
/// has no session at all.
#[test]
fn both_eras_list_call_get_and_read_through_both_doors() {
    let fleet = fleet_of(
        "gw-eras",
        &[
            fixture_server("a", &["--tools", "2"], ""),
            everything("everything"),
            sdk_server("js"),
        ],
    );
    let http = serve(&fleet, &[]);
    let mut tools = vec!["a__echo".to_owned(), "a__tool_2".to_owned()];
    tools.extend(tools_of(&fleet, "js").iter().map(|t| format!("js__{t}")));
    tools.extend(
        tools_of(&fleet, "everything")
            .iter()
            .map(|t| format!("everything__{t}")),
    );
    tools.sort();
    let uri = "demo://resource/static/document/architecture.md";

    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut clients = Vec::new();
        for mode in [MODERN, AUTO, LEGACY] {
            let mut client = open_in(&fleet, mode, door);
            let label = client.label.clone();

            let discover = ok(&mut client, json!({"op": "discover"}))["result"].clone();
            assert_eq!(
                discover["supportedVersions"],
                json!([
                    "2026-07-28",
                    "2025-11-25",
                    "2025-06-18",
                    "2025-03-26",
                    "2024-11-05"
                ]),
                "{label}: {discover}"
            );
            assert_eq!(
                discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpfleet",
                "{label}: {discover}"
            );
            assert_eq!(
                discover["capabilities"]["tools"]["listChanged"], true,
                "{discover}"
            );
            assert!(
                discover["instructions"]
                    .as_str()
                    .is_some_and(|i| i.contains("SERVER__NAME")),
                "{discover}"
            );

            let listed = ok(&mut client, json!({"op": "list_tools"}));
            assert_eq!(names(&listed, "tools", "name"), tools, "{label}");
            let gen_a = generation_of(&fleet, "a");
            for _ in 0..2 {
                let arguments = json!({"era": mode});
                let result = client.call("a__echo", arguments.clone());
                assert_eq!(text(&result), arguments.to_string(), "{label}");
                assert_from(&result, "a", gen_a);
            }
            let result = client.call("everything__echo", json!({"message": mode}));
            assert!(text(&result).contains(mode), "{label}: {result}");
            // The servers behind speak the legacy era: what a 2026-07-28
            // request says of its client in `_meta` is not passed on (the
            // second call over stdio passes through).
            for _ in 0..2 {
                let result = client.call("js__meta", json!({}));
                let meta: Value = serde_json::from_str(text(&result)).expect("JSON");
                let keys: Vec<&String> = meta.as_object().expect("an object").keys().collect();
                assert!(
                    keys.iter()
                        .all(|k| !k.starts_with("io.modelcontextprotocol/")),
                    "{label}: the server got {meta}"
                );
            }

            let prompts = ok(&mut client, json!({"op": "list_prompts"}));
            let prompt_names = names(&prompts, "prompts", "name");
            assert!(
                prompt_names.contains(&"everything__simple-prompt".to_owned()),
                "{label}: {prompt_names:?}"
            );
            let prompt = ok(
                &mut client,
                json!({"op": "get_prompt", "name": "everything__simple-prompt"}),
            );
            assert_eq!(
                prompt["result"]["messages"][0]["content"]["text"],
                "This is a simple prompt without arguments.",
                "{label}: {prompt}"
            );

            let resources = ok(&mut client, json!({"op": "list_resources"}));
            assert!(
                names(&resources, "resources", "uri").contains(&uri.to_owned()),
                "{label}: {resources}"
            );
            let templates = ok(&mut client, json!({"op": "list_resource_templates"}));
            let read = ok(&mut client, json!({"op": "read_resource", "uri": uri}));
            assert_eq!(read["result"]["contents"][0]["uri"], uri, "{label}: {read}");

            // Progress comes back on the call's own stream (the second call
            // over stdio passes through).
            for _ in 0..2 {
                let answer = ok(
                    &mut client,
                    json!({"op": "call", "name": "js__slow", "arguments": {"ms": 50}, "progress": true}),
                );
                assert_eq!(
                    answer["result"]["content"][0]["text"], "done",
                    "{label}: {answer}"
                );
                assert_eq!(
                    answer["progress"][0]["message"], "started",
                    "{label}: {answer}"
                );
            }

            if mode != LEGACY {
                for answer in [&listed, &prompts, &resources, &templates] {
                    assert_modern_pages(answer);
                }
                assert_eq!(prompt["result"]["resultType"], "complete", "{prompt}");
                assert_eq!(read["result"]["resultType"], "complete", "{read}");
            }
            clients.push((mode, client));
        }
        // Over stdio each client is a session; over HTTP only the legacy one.
        let sessions = match door {
            Door::Stdio(_) => 3,
            Door::Http(_) => 1,
        };
        assert_eq!(
            status(&fleet)["gateway"]["sessions"],
            sessions,
            "{}",
            door.name()
        );

        if let Door::Stdio(_) = door {
            let (out, _) = fleet.run_json(&["reconnect", "a"]);
            assert_code(&out, 0);
            let (_, legacy) = &mut clients[2];
            legacy.expect_notification(TOOLS_CHANGED, "after reconnect");
            let generation = generation_of(&fleet, "a");
            for (_, modern) in &mut clients[..2] {
                let heard = ok(modern, json!({"op": "notifications"}));
                for method in LISTS_CHANGED {
                    assert!(heard["counts"][method].is_null(), "{heard}");
                }
                // Its next call follows the new generation.
                let result = modern.call("a__echo", json!({}));
                assert_from(&result, "a", generation);
            }
        }
        for (_, client) in clients {
            client.close();
        }
    }
    // Each stdio session, of either era, is named by its client.
    let events = gateway_events(&fleet);
    let named = events
        .iter()
        .filter(|e| {
            e["gateway"] == "session-opened"
                && e["door"] == "stdio"
                && e["client"]
                    .as_str()
                    .is_some_and(|c| c.starts_with(Sdk::Python.client_name()))
        })
        .count();
    assert_eq!(named, 3, "{events:#?}");
    let http_sessions = events
        .iter()
        .filter(|e| e["gateway"] == "session-opened" && e["door"] == "http")
        .count();
    assert_eq!(http_sessions, 1, "the legacy client's alone: {events:#?}");
    down_and_no_leftovers(&fleet);
}

/// A server that speaks 2026-07-28 alone (the fixture in `--era modern`) asks
/// for input in its result to `prompts/get` and `resources/read`, one input
/// request a round for three rounds: for a legacy client, through each door,
/// the gateway asks the client each one as a server request and sends the
/// request again with the client's answer and the server's exact
/// `requestState` (which carries the answers so far), until the server
/// answers with the client's own answers. A 2026-07-28 client gets the
/// input-required results as they are, and its SDK answers them itself.
#[test]
fn a_modern_servers_input_on_prompts_get_and_resources_read_is_asked_of_a_legacy_client() {
    let fleet = fleet_of(
        "gw-input-prompts",
        &[fixture_server(
            "m",
            &[
                "--era",
                "modern",
                "--log-and-subscribe",
                "--ask",
                "sampling",
                "--ask",
                "elicitation",
                "--ask",
                "roots",
            ],
            "",
        )],
    );
    let http = serve(&fleet, &[]);
    let doors = [Door::Stdio(&[]), Door::Http(&http)];
    for (mode, door) in [LEGACY, MODERN]
        .into_iter()
        .flat_map(|m| doors.map(|d| (m, d)))
    {
        let mut client = open_in(&fleet, mode, door);
        let label = client.label.clone();
        let answered = |text: &Value| -> Value {
            let text = text.as_str().unwrap_or_else(|| panic!("{label}: no text"));
            let answers: Value =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{label}: {e}: {text}"));
            assert_eq!(answers[0]["model"], "python-sdk", "{label}: {answers}");
            assert_eq!(answers[1]["action"], "accept", "{label}: {answers}");
            assert_eq!(
                answers[2]["roots"][0]["uri"], "file:///tmp",
                "{label}: {answers}"
            );
            answers
        };
        let prompt = ok(
            &mut client,
            json!({"op": "get_prompt", "name": "m__logged"}),
        );
        answered(&prompt["result"]["messages"][0]["content"]["text"]);
        let read = ok(
            &mut client,
            json!({"op": "read_resource", "uri": "fixture://r"}),
        );
        assert_eq!(
            read["result"]["contents"][0]["uri"], "fixture://r",
            "{label}: {read}"
        );
        answered(&read["result"]["contents"][0]["text"]);
        let asked = ok(&mut client, json!({"op": "requests"}));
        assert_eq!(
            asked["counts"],
            json!({"roots/list": 2, "sampling/createMessage": 2, "elicitation/create": 2}),
            "{label}: {asked}"
        );
        client.close();
    }
    down_and_no_leftovers(&fleet);
}

/// The `_meta` every request of the 2026-07-28 era carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    })
}

/// A request of `method` with `params` and the modern `_meta`.
fn modern_request(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = modern_meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// The headers of a 2026-07-28 request of `method` (and `name`, for the
/// methods that name what they act on).
fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    headers
}

/// An answer that is 400 with JSON-RPC error `code` for request `id`.
#[track_caller]
fn assert_refused(exchange: Exchange, code: i64, id: u64, why: &str) -> Value {
    assert_eq!(exchange.status, 400, "{why}");
    let body = exchange.json();
    assert_eq!(body["error"]["code"], code, "{why}: {body}");
    assert_eq!(body["id"], id, "{why}: {body}");
    body
}

/// The HTTP door on the wire, to requests of the 2026-07-28 era: a well-formed
/// one is served without a session; the methods that era removed are 404 with
/// -32601 and the request's id (an `initialize` among them: it opens no
/// session); a request without the `_meta` the era requires, or with a
/// malformed one, is 400 with -32602; a version the gateway does not speak is
/// 400 with -32022 and the versions it does; `MCP-Protocol-Version` that
/// differs from `_meta`, and a missing or wrong `Mcp-Method` or `Mcp-Name`, are
/// 400 with -32020, and so is an `Mcp-Param-*` header (of a tool's
/// `x-mcp-header` annotation) that is missing or differs from the arguments.
/// GET and DELETE are 405, and a session id is not looked at.
#[test]
fn the_http_door_checks_what_a_modern_request_must_carry() {
    let region = r#"echo={"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}"#;
    let fleet = fleet_of(
        "gw-modern-wire",
        &[fixture_server("a", &["--input-schema", region], "")],
    );
    let http = serve(&fleet, &[]);

    let list = modern_request(1, "tools/list", json!({}));
    let mut answer = Exchange::send(&http, "POST", &modern_headers("tools/list", None), &list);
    assert_eq!(answer.status, 200);
    assert!(
        answer.header("mcp-session-id").is_none(),
        "{:?}",
        answer.headers
    );
    let listed = answer.answer_to(1);
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{listed}"
    );

    let call = modern_request(
        2,
        "tools/call",
        json!({"name": "a__echo", "arguments": {"k": 1}}),
    );
    let mut answer = Exchange::send(
        &http,
        "POST",
        &modern_headers("tools/call", Some("a__echo")),
        &call,
    );
    assert_eq!(answer.status, 200);
    let called = answer.answer_to(2);
    assert_eq!(
        called["result"]["content"][0]["text"], r#"{"k":1}"#,
        "{called}"
    );

    // The tool's `x-mcp-header` annotation: the header must say what the
    // arguments say (the catalog is current: the tools were just listed).
    let call = modern_request(
        3,
        "tools/call",
        json!({"name": "a__echo", "arguments": {"region": "eu"}}),
    );
    let mut headers = modern_headers("tools/call", Some("a__echo"));
    headers.push(("Mcp-Param-Region", "eu"));
    let mut answer = Exchange::send(&http, "POST", &headers, &call);
    assert_eq!(answer.status, 200);
    assert!(answer.answer_to(3)["result"]["content"].is_array());
    headers.pop();
    let nameless = Exchange::send(&http, "POST", &headers, &call);
    assert_refused(nameless, -32020, 3, "no Mcp-Param-Region");
    headers.push(("Mcp-Param-Region", "us"));
    let other = Exchange::send(&http, "POST", &headers, &call);
    assert_refused(other, -32020, 3, "another Mcp-Param-Region");

    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ] {
        let params = json!({"uri": "demo://x", "level": "info", "protocolVersion": MODERN,
            "capabilities": {}, "clientInfo": {"name": "raw-http", "version": "1"}});
        let body = modern_request(31, method, params);
        let answer = Exchange::send(&http, "POST", &modern_headers(method, None), &body);
        assert_eq!(answer.status, 404, "{method}");
        let body = answer.json();
        assert_eq!(body["error"]["code"], -32601, "{method}: {body}");
        assert_eq!(body["id"], 31, "{method}: {body}");
    }

    let bare = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}});
    let answer = Exchange::send(
        &http,
        "POST",
        &modern_headers("tools/list", None),
        &bare.to_string(),
    );
    assert_refused(answer, -32602, 4, "no _meta");
    let mut malformed = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list",
        "params": {"_meta": modern_meta()}});
    malformed["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!(5);
    let answer = Exchange::send(
        &http,
        "POST",
        &modern_headers("tools/list", None),
        &malformed.to_string(),
    );
    assert_refused(answer, -32602, 5, "capabilities that are not an object");

    let mut future = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list",
        "params": {"_meta": modern_meta()}});
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let answer = Exchange::send(
        &http,
        "POST",
        &[
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        &future.to_string(),
    );
    let body = assert_refused(answer, -32022, 6, "a version not spoken");
    let supported = &body["error"]["data"]["supported"];
    for version in [MODERN, "2025-11-25", "2024-11-05"] {
        assert!(
            supported
                .as_array()
                .is_some_and(|s| s.contains(&json!(version))),
            "{body}"
        );
    }

    let list = modern_request(7, "tools/list", json!({}));
    let other = [
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Mcp-Method", "tools/list"),
    ];
    assert_refused(
        Exchange::send(&http, "POST", &other, &list),
        -32020,
        7,
        "header and _meta differ",
    );
    let unnamed = [("MCP-Protocol-Version", MODERN)];
    assert_refused(
        Exchange::send(&http, "POST", &unnamed, &list),
        -32020,
        7,
        "no Mcp-Method",
    );
    let wrong = modern_headers("prompts/list", None);
    assert_refused(
        Exchange::send(&http, "POST", &wrong, &list),
        -32020,
        7,
        "another Mcp-Method",
    );
    let call = modern_request(8, "tools/call", json!({"name": "a__echo", "arguments": {}}));
    let nameless = modern_headers("tools/call", None);
    assert_refused(
        Exchange::send(&http, "POST", &nameless, &call),
        -32020,
        8,
        "no Mcp-Name",
    );
    let misnamed = modern_headers("tools/call", Some("a__tool_2"));
    assert_refused(
        Exchange::send(&http, "POST", &misnamed, &call),
        -32020,
        8,
        "another Mcp-Name",
    );

    // That era has no GET stream and no session to DELETE; a session id it
    // sends is not looked at.
    for method in ["GET", "DELETE"] {
        let answer = Exchange::send(&http, method, &[("MCP-Protocol-Version", MODERN)], "");
        assert_eq!(answer.status, 405, "{method}");
    }
    let mut headers = modern_headers("tools/list", None);
    headers.push(("Mcp-Session-Id", "no-such-session"));
    let list = modern_request(9, "tools/list", json!({}));
    let mut answer = Exchange::send(&http, "POST", &headers, &list);
    assert_eq!(answer.status, 200);
    assert!(answer.answer_to(9)["result"]["tools"].is_array());

    assert_eq!(
        status(&fleet)["gateway"]["sessions"],
        0,
        "{}",
        status(&fleet)
    );
    assert!(
        !gateway_events(&fleet)
            .iter()
            .any(|e| e["gateway"] == "session-opened"),
        "{:#?}",
        gateway_events(&fleet)
    );
    down_and_no_leftovers(&fleet);
}

/// Requests of the 2026-07-28 era are not sessions: with the cap on sessions
/// reached (`gateway.max_sessions: 2`),
/// a flood of them is served, none is counted, and one larger than a new
/// session's `initialize` may be is served too; one more `initialize` is still
/// refused at the cap. `server/discover` tells how tools are named under each
/// server's `prefix:`, an empty one included.
#[test]
fn modern_requests_open_no_session_and_are_not_held_to_its_limits() {
    let fleet = TestFleet::raw(
        "gw-modern-flood",
        &format!(
            "version: 1\ngateway:\n  max_sessions: 2\nservers:\n{}{}",
            fixture_server("a", &[], "prefix: \"\""),
            fixture_server("b", &[], "prefix: bee"),
        ),
    );
    let http = serve(&fleet, &[]);
    let whole = raw_session(&http, "whole", "1", true);
    raw_session(&http, "other", "1", true);

    let list = modern_request(1, "tools/list", json!({}));
    for n in 0..60 {
        let mut answer = Exchange::send(&http, "POST", &modern_headers("tools/list", None), &list);
        assert_eq!(
            answer.status, 200,
            "modern request {n} at the cap on sessions"
        );
        let listed = answer.answer_to(1);
        assert!(listed["result"]["tools"].is_array(), "{listed}");
    }
    let large = json!({"padding": "x".repeat(200 * 1024)});
    let call = modern_request(2, "tools/call", json!({"name": "echo", "arguments": large}));
    let mut answer = Exchange::send(
        &http,
        "POST",
        &modern_headers("tools/call", Some("echo")),
        &call,
    );
    assert_eq!(answer.status, 200, "a 200 KiB modern call");
    let called = answer.answer_to(2);
    assert_eq!(called["result"]["content"][0]["text"], large.to_string());

    let discover = modern_request(3, "server/discover", json!({}));
    let mut answer = Exchange::send(
        &http,
        "POST",
        &modern_headers("server/discover", None),
        &discover,
    );
    assert_eq!(answer.status, 200);
    let discovered = answer.answer_to(3);
    let instructions = discovered["result"]["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(
        instructions.contains("those of `a` keep their own names"),
        "{discovered}"
    );
    assert!(
        instructions.contains("those of `b` are named bee__NAME"),
        "{discovered}"
    );

    assert_eq!(
        status(&fleet)["gateway"]["sessions"],
        2,
        "{}",
        status(&fleet)
    );
    let log = std::fs::read_to_string(fleet.state_dir().join("gateway.log")).unwrap_or_default();
    assert!(
        !log.contains("new HTTP session"),
        "no modern request met the cap: {log}"
    );
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "third", "version": "1"}}});
    let third = Exchange::send(&http, "POST", &[], &initialize.to_string());
    assert_eq!(third.status, 503, "an initialize beyond the cap of 2");
    assert_eq!(ping(&http, &whole), 200, "the whole session stays");
    down_and_no_leftovers(&fleet);
}
