//! What a 2026-07-28 client hears through the gateway (docs/design.md §14,
//! "Listen streams"): on a `subscriptions/listen` stream, the fleet's list
//! changes and the updates of the resources it asked for, nothing else, through
//! both doors; the stream is a subscriber at the server for as long as it is
//! open. The client is the official Python SDK's, pinned to 2026-07-28.

use super::*;

/// The version a modern client pins.
const MODERN: &str = "2026-07-28";

/// The Python SDK's client pinned to 2026-07-28 through `door`, connected.
#[track_caller]
fn modern(fleet: &TestFleet, door: Door, more: &[&str]) -> Client {
    let label = format!("Python client ({MODERN}) over {}", door.name());
    let mut args: Vec<OsString> = vec!["--mode".into(), MODERN.into()];
    args.extend(more.iter().map(OsString::from));
    args.extend(door.args(fleet));
    let (client, first) = Client::start(fleet, Sdk::Python, &label, args);
    assert_eq!(
        first["ok"],
        true,
        "{label} did not connect: {first}\nstderr:\n{}",
        client.stderr_text()
    );
    assert_eq!(first["protocol_version"], MODERN, "{first}");
    client
}

/// An answer that must be `ok`.
#[track_caller]
fn ok(client: &mut Client, command: Value) -> Value {
    let answer = client.op(command.clone());
    assert_eq!(answer["ok"], true, "{}: {command}: {answer}", client.label);
    answer
}

/// The events stream `handle` heard once it heard `count` (or 10 s passed).
fn events(client: &mut Client, handle: &str, count: usize) -> Vec<Value> {
    let heard = ok(
        client,
        json!({"op": "listen_events", "handle": handle, "count": count, "timeout_ms": 10_000}),
    );
    heard["events"].as_array().cloned().unwrap_or_default()
}

/// Through each door in turn, a modern client opens two listen streams: one
/// for tool list changes and two resources, of which the gateway honours the
/// one whose server takes subscriptions (and subscribes that server once), one
/// for prompt list changes alone. An update of the listened resource reaches
/// the first stream, an update of another resource reaches neither; after
/// `mcpfleet reconnect` each stream hears the list change it asked for and no
/// other. Closing the first stream unsubscribes the server.
#[test]
fn a_modern_client_hears_on_its_listen_streams_what_it_asked_for_through_both_doors() {
    let fleet = fleet_of(
        "gw-listen",
        &[
            fixture_server("fx", &["--log-and-subscribe"], ""),
            fixture_server("other", &[], ""),
        ],
    );
    let http = serve(&fleet, &[]);
    for (n, door) in [Door::Stdio(&[]), Door::Http(&http)]
        .into_iter()
        .enumerate()
    {
        let mut client = modern(&fleet, door, &[]);
        let label = client.label.clone();
        let listed = ok(&mut client, json!({"op": "list_resources"}));
        assert!(
            listed.to_string().contains("fixture://r"),
            "{label}: {listed}"
        );

        let all = ok(
            &mut client,
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
                &fleet,
                "fx",
                "fixture: resources/subscribe fixture://r",
                n + 1
            ),
            n + 1,
            "{label}: the listen stream subscribes the server"
        );
        let prompts = ok(
            &mut client,
            json!({"op": "listen", "handle": "prompts", "prompts_list_changed": true}),
        );
        assert_eq!(
            prompts["honored"],
            json!({"promptsListChanged": true}),
            "{label}: {prompts}"
        );

        // An update of a resource nobody listens to goes nowhere; the one
        // listened to reaches the stream that asked for it, after it.
        client.call("fx__echo", json!({"update": "fixture://s"}));
        client.call("fx__echo", json!({"update": "fixture://r"}));
        assert_eq!(
            events(&mut client, "all", 1),
            vec![json!({"event": "ResourceUpdated", "uri": "fixture://r"})],
            "{label}"
        );

        // A new generation changes every list (announced as the server stops
        // and again as it starts): each stream hears what it asked, and only that.
        let (out, _) = fleet.run_json(&["reconnect", "other"]);
        assert_code(&out, 0);
        let heard = events(&mut client, "all", 2);
        assert_eq!(
            heard[0],
            json!({"event": "ResourceUpdated", "uri": "fixture://r"}),
            "{label}: {heard:?}"
        );
        assert!(
            heard[1..]
                .iter()
                .all(|e| *e == json!({"event": "ToolsListChanged"})),
            "{label}: {heard:?}"
        );
        let heard = events(&mut client, "prompts", 1);
        assert!(
            !heard.is_empty()
                && heard
                    .iter()
                    .all(|e| *e == json!({"event": "PromptsListChanged"})),
            "{label}: {heard:?}"
        );

        // Closed, the stream leaves nothing behind: the server is unsubscribed.
        ok(&mut client, json!({"op": "listen_close", "handle": "all"}));
        assert_eq!(
            await_server_lines(
                &fleet,
                "fx",
                "fixture: resources/unsubscribe fixture://r",
                n + 1
            ),
            n + 1,
            "{label}: closing the stream unsubscribes the server"
        );
        ok(
            &mut client,
            json!({"op": "listen_close", "handle": "prompts"}),
        );
        // Nothing else came on the stream that asked for prompts alone.
        client.close();
    }
    down_and_no_leftovers(&fleet);
}

/// The log messages a client got so far, as (logger, data), sorted.
fn messages(client: &mut Client) -> Vec<(String, String)> {
    let counts = ok(client, json!({"op": "notifications"}));
    let mut logged: Vec<(String, String)> = counts["params"]["notifications/message"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&m["logger"]), text(&m["data"]))
        })
        .collect();
    logged.sort();
    logged
}

/// Through each door, a modern client whose requests carry `logLevel:
/// warning` gets, for its call, the server's messages at `warning` and above,
/// named by the server, and none of another client's call; a modern client
/// whose requests carry no `logLevel` gets none.
#[test]
fn a_modern_clients_call_hears_its_servers_log_messages_at_its_level() {
    let fleet = fleet_of(
        "gw-calllog",
        &[fixture_server("fx", &["--log-and-subscribe"], "")],
    );
    let http = serve(&fleet, &[]);
    let levels = json!(["debug", "info", "warning", "emergency"]);
    let wanted = vec![
        ("fx/app".to_owned(), "message at emergency".to_owned()),
        ("fx/app".to_owned(), "message at warning".to_owned()),
    ];
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut leveled = modern(&fleet, door, &["--log-level", "warning"]);
        let mut silent = modern(&fleet, door, &[]);
        let label = leveled.label.clone();
        let called = leveled.call("fx__echo", json!({"log": levels}));
        assert_eq!(called["isError"], Value::Null, "{label}: {called}");
        assert_eq!(messages(&mut leveled), wanted, "{label}");

        let called = silent.call("fx__echo", json!({"log": levels}));
        assert_eq!(called["isError"], Value::Null, "{label}: {called}");
        silent.call("fx__echo", json!({}));
        assert_eq!(
            messages(&mut silent),
            Vec::<(String, String)>::new(),
            "{label}: no logLevel, no messages"
        );
        assert_eq!(
            messages(&mut leveled),
            wanted,
            "{label}: another client's call"
        );
        leveled.close();
        silent.close();
    }
    down_and_no_leftovers(&fleet);
}
