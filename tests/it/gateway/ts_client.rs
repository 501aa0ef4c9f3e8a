//! The official TypeScript SDK 2.x client (npm `@modelcontextprotocol/client`,
//! behind `tests/clients/client2.mjs`) through both doors, in both protocol eras:
//! pinned to 2026-07-28 (`versionNegotiation: {pin}`: a `server/discover` probe,
//! then per-request `_meta`), probing (`auto`) and legacy (`initialize`). It
//! lists and calls tools (and cancels one), gets prompts, reads resources, hears
//! progress and log messages, subscribes to a resource (legacy: `resources/subscribe`; 2026-07-28:
//! `subscriptions/listen`) and answers sampling, elicitation and roots (legacy:
//! the server's requests; 2026-07-28: input-required results, which the SDK
//! fulfils through the same handlers and sends again).
//!
//! Behind the gateway: a fixture that logs and takes subscriptions (`fx`), the
//! conformance member speaking 2026-07-28 alone (`m`: input-required results,
//! prompts, resources) and a server on the TypeScript SDK 1.x (`js`: progress,
//! list changes, requests of its client while a call is in flight).

use super::*;

/// The client that asks `server/discover` first and takes the newest era named.
const AUTO: &str = "auto";
/// The client that opens with `initialize`.
const LEGACY: &str = "legacy";
/// The version a legacy client of this SDK settles on with the gateway.
const LEGACY_VERSION: &str = "2025-11-25";

/// What the client answers a sampling request with (`client2.mjs`).
const SAMPLED: &str = "sampled by typescript-sdk-2";

/// The conformance member, speaking 2026-07-28 alone, over stdio, run with the
/// node 22 of `.cache/inspector`.
fn modern_member(name: &str) -> String {
    format!(
        "  {name}:\n    command: {}\n    args: [{}, stdio, --modern-only]\n    connect_timeout: 60s\n",
        quoted(&published_servers().join("inspector/node_modules/node/bin/node")),
        quoted(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/member.mjs")),
    )
}

/// `fx` (logs, subscriptions), `m` (2026-07-28 alone) and `js` (TypeScript SDK 1.x).
fn fleet(label: &str) -> TestFleet {
    fleet_of(
        label,
        &[
            fixture_server("fx", &["--log-and-subscribe"], ""),
            modern_member("m"),
            sdk_server("js"),
        ],
    )
}

/// The TypeScript SDK 2.x client in `mode` (with `more` options) through
/// `door`, once it is connected in the era `mode` leads to.
#[track_caller]
fn open_in(fleet: &TestFleet, mode: &str, door: Door, more: &[&str]) -> Client {
    let (client, first) = Client::open_in_mode(
        fleet,
        Sdk::TypeScript2,
        "TypeScript 2.x client",
        mode,
        door,
        more,
    );
    let label = &client.label;
    assert_eq!(first["server_info"]["name"], "mcpfleet", "{first}");
    let (version, era) = match mode {
        LEGACY => (LEGACY_VERSION, "legacy"),
        _ => (MODERN, "modern"),
    };
    assert_eq!(first["protocol_version"], version, "{label}: {first}");
    assert_eq!(first["era"], era, "{label}: {first}");
    client
}

/// The log messages a client got, once it got `count` (or 10 s passed): a
/// legacy session's messages come apart from the call's answer (over HTTP on
/// the session's own stream).
fn messages_once(client: &mut Client, count: usize) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let logged = messages(client);
        if logged.len() >= count || Instant::now() >= deadline {
            return logged;
        }
        client.op(json!({"op": "wait_notification", "method": "notifications/message", "timeout_ms": 1000}));
    }
}

/// The calls `js` logged as cancelled, once there are `count` (or 10 s passed).
fn cancellations(fleet: &TestFleet, count: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = fleet.run(&["logs", "js", "-n", "1000"]);
        assert_code(&out, 0);
        let found = stdout(&out).matches("cancelled request").count();
        if found >= count || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The three eras' clients in turn, through each door.
fn each_client(fleet: &TestFleet, http: &Http, mut check: impl FnMut(&str, Client)) {
    for door in [Door::Stdio(&[]), Door::Http(http)] {
        for mode in [MODERN, AUTO, LEGACY] {
            check(mode, open_in(fleet, mode, door, &[]));
        }
    }
}

/// Through each door, a client of each era lists exactly the fleet's tools
/// (the SDK following the gateway's pages), calls a tool of each server and
/// gets what that server answered, with the progress it sent, cancels a call
/// (which its server hears of), gets prompts and reads a resource of the
/// server that speaks 2026-07-28 alone, and lists the resource the fixture
/// offers. A 2026-07-28 client learns the gateway's versions from
/// `server/discover`, and its lists and reads come with the hints of that era
/// (at once stale, for this client alone), whatever the server said.
#[test]
fn the_typescript_sdk_2_lists_calls_gets_and_reads_in_both_eras_through_both_doors() {
    let fleet = fleet("ts2-basics");
    let http = serve(&fleet, &[]);
    let mut tools: Vec<String> = ["fx", "m", "js"]
        .iter()
        .flat_map(|s| {
            tools_of(&fleet, s)
                .into_iter()
                .map(move |t| format!("{s}__{t}"))
        })
        .collect();
    tools.sort();
    let generation = generation_of(&fleet, "fx");
    let mut cancelled = 0;

    each_client(&fleet, &http, |mode, mut client| {
        let label = client.label.clone();
        let listed = ok(&mut client, json!({"op": "list_tools"}));
        assert_eq!(names(&listed, "tools", "name"), tools, "{label}");

        let arguments = json!({"era": mode});
        let result = client.call("fx__echo", arguments.clone());
        assert_eq!(text(&result), arguments.to_string(), "{label}");
        assert_from(&result, "fx", generation);
        let result = client.call("m__test_simple_text", json!({}));
        assert_eq!(
            text(&result),
            "This is a simple text response for testing.",
            "{label}: {result}"
        );
        assert_eq!(result["_meta"]["mcpfleet/server"], "m", "{label}: {result}");

        let answer = ok(
            &mut client,
            json!({"op": "call", "name": "js__slow", "arguments": {"ms": 50}, "progress": true}),
        );
        assert_eq!(text(&answer["result"]), "done", "{label}: {answer}");
        assert_eq!(
            answer["progress"][0]["message"], "started",
            "{label}: {answer}"
        );

        // A call cancelled the SDK's way (over HTTP in the 2026-07-28 era, by
        // closing its stream) reaches its server as cancelled.
        client.forget(&[PROGRESS]);
        ok(
            &mut client,
            json!({"op": "call_start", "handle": "slow", "progress": true,
                   "name": "js__slow", "arguments": {"ms": 30_000}}),
        );
        client.expect_notification(PROGRESS, "from js__slow");
        let answer = ok(&mut client, json!({"op": "call_cancel", "handle": "slow"}));
        assert_eq!(answer["in_flight"], true, "{label}: {answer}");
        let answer = client.op(json!({"op": "call_await", "handle": "slow"}));
        assert_eq!(answer["cancelled"], true, "{label}: {answer}");
        cancelled += 1;
        assert_eq!(
            cancellations(&fleet, cancelled),
            cancelled,
            "{label}: js saw the call cancelled"
        );

        let prompts = ok(&mut client, json!({"op": "list_prompts"}));
        assert!(
            names(&prompts, "prompts", "name").contains(&"m__test_simple_prompt".to_owned()),
            "{label}: {prompts}"
        );
        let prompt = ok(
            &mut client,
            json!({"op": "get_prompt", "name": "m__test_simple_prompt"}),
        );
        assert_eq!(
            prompt["result"]["messages"][0]["content"]["text"],
            "This is a simple prompt for testing.",
            "{label}: {prompt}"
        );
        let prompt = ok(
            &mut client,
            json!({"op": "get_prompt", "name": "m__test_prompt_with_arguments",
                   "arguments": {"arg1": mode, "arg2": "two"}}),
        );
        assert_eq!(
            prompt["result"]["messages"][0]["content"]["text"],
            format!("Prompt with arguments: arg1='{mode}', arg2='two'"),
            "{label}: {prompt}"
        );

        let resources = ok(&mut client, json!({"op": "list_resources"}));
        let uris = names(&resources, "resources", "uri");
        for uri in [
            "fixture://r",
            "test://static-text",
            "test://watched-resource",
        ] {
            assert!(uris.contains(&uri.to_owned()), "{label}: {uri}: {uris:?}");
        }
        let templates = ok(&mut client, json!({"op": "list_resource_templates"}));
        assert!(
            names(&templates, "resourceTemplates", "uriTemplate")
                .contains(&"test://template/{id}/data".to_owned()),
            "{label}: {templates}"
        );
        let read = ok(
            &mut client,
            json!({"op": "read_resource", "uri": "test://template/7/data"}),
        );
        let contents: Value = serde_json::from_str(
            read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap_or("null"),
        )
        .unwrap_or_else(|e| panic!("{label}: {e}: {read}"));
        assert_eq!(contents["data"], "Data for ID: 7", "{label}: {read}");
        // What the gateway promises of a read is its own (the server behind
        // says `cacheScope: "public"`): in the 2026-07-28 era at once stale and
        // for this client alone, in the legacy era nothing.
        let hints = |read: &Value| {
            (
                read["result"]["ttlMs"].clone(),
                read["result"]["cacheScope"].clone(),
            )
        };
        let promised = match mode {
            LEGACY => (Value::Null, Value::Null),
            _ => (json!(0), json!("private")),
        };
        assert_eq!(hints(&read), promised, "{label}: {read}");

        if mode == LEGACY {
            for answer in [&listed, &prompts, &resources, &templates] {
                assert_eq!(answer["hints"], json!([{}]), "{label}: {answer}");
            }
        } else {
            for answer in [&listed, &prompts, &resources, &templates] {
                assert_eq!(
                    answer["hints"],
                    json!([{"ttlMs": 0, "cacheScope": "private"}]),
                    "{label}: {answer}"
                );
            }
            let discover = ok(&mut client, json!({"op": "discover"}))["result"].clone();
            assert_eq!(
                discover["supportedVersions"],
                json!([
                    MODERN,
                    "2025-11-25",
                    "2025-06-18",
                    "2025-03-26",
                    "2024-11-05"
                ]),
                "{label}: {discover}"
            );
        }
        client.close();
    });
    // Over HTTP only the legacy client opened a session; over stdio each did.
    let opened = |door: &str| {
        gateway_events(&fleet)
            .iter()
            .filter(|e| {
                e["gateway"] == "session-opened"
                    && e["door"] == door
                    && e["client"]
                        .as_str()
                        .is_some_and(|c| c.starts_with(Sdk::TypeScript2.client_name()))
            })
            .count()
    };
    assert_eq!(opened("http"), 1, "{:#?}", gateway_events(&fleet));
    assert!(opened("stdio") >= 3, "{:#?}", gateway_events(&fleet));
    down_and_no_leftovers(&fleet);
}

/// Through each door, a client of each era answers what a server asks of it
/// while its call is in flight. From the server that speaks 2026-07-28 alone,
/// input-required results: a 2026-07-28 client gets them as they are and the
/// SDK fulfils them through its handlers and calls again; for a legacy client
/// the gateway asks the client itself and calls again. On `prompts/get` too,
/// for a 2026-07-28 client. From the legacy server `js`, requests, which go to
/// a legacy client as requests. Each answer the server got is the client's own.
#[test]
fn the_typescript_sdk_2_answers_sampling_elicitation_and_roots_in_both_eras() {
    let fleet = fleet("ts2-asks");
    let http = serve(&fleet, &[]);
    each_client(&fleet, &http, |mode, mut client| {
        let label = client.label.clone();
        let result = client.call("m__test_input_required_result_sampling", json!({}));
        assert_eq!(
            text(&result),
            format!("The model said: {SAMPLED}"),
            "{label}: {result}"
        );
        let result = client.call("m__test_input_required_result_elicitation", json!({}));
        assert_eq!(
            text(&result),
            "Hello, name from typescript-sdk-2!",
            "{label}: {result}"
        );
        let result = client.call("m__test_input_required_result_list_roots", json!({}));
        assert_eq!(text(&result), "Roots: file:///tmp", "{label}: {result}");
        let result = client.call("m__test_elicitation", json!({"message": "Who are you?"}));
        // The form's answer as the server got it (a JSON object: its keys in no
        // order of their own).
        let said = text(&result)
            .strip_prefix("User response: action=accept, content=")
            .unwrap_or_else(|| panic!("{label}: {result}"));
        let content: Value =
            serde_json::from_str(said).unwrap_or_else(|e| panic!("{label}: {e}: {result}"));
        assert_eq!(
            content,
            json!({"username": "username from typescript-sdk-2",
                   "email": "email from typescript-sdk-2"}),
            "{label}: {result}"
        );
        let mut expected =
            json!({"roots/list": 1, "sampling/createMessage": 1, "elicitation/create": 2});

        if mode == LEGACY {
            let asked = |client: &mut Client, method: &str| -> Value {
                let result = client.call("js__ask", json!({ "method": method }));
                assert_ne!(result["isError"], true, "{label}: {method}: {result}");
                serde_json::from_str(text(&result)).unwrap_or_else(|e| panic!("{e}: {result}"))
            };
            let message = asked(&mut client, "sampling/createMessage");
            assert_eq!(message["content"]["text"], SAMPLED, "{label}: {message}");
            assert_eq!(message["model"], "typescript-sdk-2", "{label}: {message}");
            let elicited = asked(&mut client, "elicitation/create");
            assert_eq!(elicited["action"], "accept", "{label}: {elicited}");
            let roots = asked(&mut client, "roots/list");
            assert_eq!(roots["roots"][0]["uri"], "file:///tmp", "{label}: {roots}");
            expected =
                json!({"roots/list": 2, "sampling/createMessage": 2, "elicitation/create": 3});
        } else {
            let prompt = ok(
                &mut client,
                json!({"op": "get_prompt", "name": "m__test_input_required_result_prompt"}),
            );
            assert_eq!(
                prompt["result"]["messages"][0]["content"]["text"],
                "Use this context: context from typescript-sdk-2",
                "{label}: {prompt}"
            );
            expected["elicitation/create"] = json!(3);
        }
        let answered = ok(&mut client, json!({"op": "requests"}));
        assert_eq!(answered["counts"], expected, "{label}: {answered}");
        client.close();
    });
    down_and_no_leftovers(&fleet);
}

/// Through each door: a legacy client sets its level with `logging/setLevel`
/// and hears the fixture's messages at and above it, named by the server;
/// subscribed to the fixture's resource, it hears its update, and not that of
/// another; unsubscribed, the server is too. A 2026-07-28 client whose requests
/// carry `logLevel` hears the messages of its call at and above that level; its
/// `subscriptions/listen` stream hears the update of the resource it named and
/// the tool list change it asked for, and nothing else; closed, the stream
/// unsubscribes the server.
#[test]
fn the_typescript_sdk_2_hears_log_messages_and_resource_updates_in_both_eras() {
    let fleet = fleet("ts2-hears");
    let http = serve(&fleet, &[]);
    let log = json!({"log": ["debug", "info", "warning", "error"]});
    let wanted = vec![
        ("fx/app".to_owned(), "message at error".to_owned()),
        ("fx/app".to_owned(), "message at warning".to_owned()),
    ];
    for (n, door) in [Door::Stdio(&[]), Door::Http(&http)]
        .into_iter()
        .enumerate()
    {
        // Each door's two clients subscribe the server once each, and unsubscribe it.
        let subscribed = n * 2 + 1;

        let mut legacy = open_in(&fleet, LEGACY, door, &[]);
        let label = legacy.label.clone();
        ok(&mut legacy, json!({"op": "set_level", "level": "warning"}));
        ok(
            &mut legacy,
            json!({"op": "subscribe", "uri": "fixture://r"}),
        );
        assert_eq!(
            await_server_lines(
                &fleet,
                "fx",
                "fixture: resources/subscribe fixture://r",
                subscribed
            ),
            subscribed,
            "{label}: the subscription reaches the server"
        );
        legacy.call("fx__echo", json!({"update": "fixture://s"}));
        let mut call = log.clone();
        call["update"] = json!("fixture://r");
        legacy.call("fx__echo", call);
        legacy.expect_notification("notifications/resources/updated", "after the update");
        assert_eq!(messages_once(&mut legacy, wanted.len()), wanted, "{label}");
        let heard = ok(&mut legacy, json!({"op": "notifications"}));
        assert_eq!(
            heard["params"]["notifications/resources/updated"],
            json!([{"uri": "fixture://r"}]),
            "{label}: {heard}"
        );
        ok(
            &mut legacy,
            json!({"op": "unsubscribe", "uri": "fixture://r"}),
        );
        assert_eq!(
            await_server_lines(
                &fleet,
                "fx",
                "fixture: resources/unsubscribe fixture://r",
                subscribed
            ),
            subscribed,
            "{label}: the last subscriber gone, the server is unsubscribed"
        );
        legacy.close();

        let mut modern = open_in(&fleet, MODERN, door, &["--log-level", "warning"]);
        let label = modern.label.clone();
        let called = modern.call("fx__echo", log.clone());
        assert_eq!(called["isError"], Value::Null, "{label}: {called}");
        assert_eq!(messages(&mut modern), wanted, "{label}");

        listen_all(&fleet, &mut modern, subscribed);
        modern.call("fx__echo", json!({"update": "fixture://s"}));
        modern.call("fx__echo", json!({"update": "fixture://r"}));
        let heard = ok(
            &mut modern,
            json!({"op": "listen_events", "handle": "all", "count": 1, "timeout_ms": 10_000}),
        );
        assert_eq!(
            heard["events"],
            json!([{"event": "ResourceUpdated", "uri": "fixture://r"}]),
            "{label}: {heard}"
        );
        modern.call("js__change_lists", json!({}));
        let heard = ok(
            &mut modern,
            json!({"op": "listen_events", "handle": "all", "count": 2, "timeout_ms": 10_000}),
        );
        let events = heard["events"].as_array().expect("events");
        assert!(
            events.len() >= 2
                && events[1..]
                    .iter()
                    .all(|e| *e == json!({"event": "ToolsListChanged"})),
            "{label}: only what the stream asked for: {heard}"
        );
        ok(&mut modern, json!({"op": "listen_close", "handle": "all"}));
        assert_eq!(
            await_server_lines(
                &fleet,
                "fx",
                "fixture: resources/unsubscribe fixture://r",
                subscribed + 1
            ),
            subscribed + 1,
            "{label}: closing the stream unsubscribes the server"
        );
        modern.close();
    }
    down_and_no_leftovers(&fleet);
}
