//! What a 2026-07-28 client hears through the gateway (docs/design.md §14,
//! "Listen streams"): on a `subscriptions/listen` stream, the fleet's list
//! changes and the updates of the resources it asked for, nothing else, through
//! both doors; the stream is a subscriber at the server for as long as it is
//! open. The client is the official Python SDK's, pinned to 2026-07-28.

use super::*;

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
        let mut client = Client::modern(&fleet, door, &[]);
        let label = client.label.clone();
        let listed = ok(&mut client, json!({"op": "list_resources"}));
        assert!(
            listed.to_string().contains("fixture://r"),
            "{label}: {listed}"
        );

        listen_all(&fleet, &mut client, n);
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
        let mut leveled = Client::modern(&fleet, door, &["--log-level", "warning"]);
        let mut silent = Client::modern(&fleet, door, &[]);
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

const UPDATED: &str = "notifications/resources/updated";

/// The `subscriptions/listen` lines a fixture of `name` wrote so far (each
/// with the filter it was asked for, as written), and how many streams ended.
fn listens_at(fleet: &TestFleet, name: &str) -> (Vec<String>, usize) {
    let out = fleet.run(&["logs", name, "-n", "1000"]);
    assert_code(&out, 0);
    let text = stdout(&out);
    let opened = text
        .lines()
        .filter_map(|l| {
            l.split_once("fixture: subscriptions/listen ")
                .map(|(_, f)| f.to_owned())
        })
        .collect();
    let ended = text
        .lines()
        .filter(|l| l.ends_with("fixture: listen ended"))
        .count();
    (opened, ended)
}

/// Waits (10 s at most) until `done` holds of what [`listens_at`] reads.
#[track_caller]
fn await_listens(
    fleet: &TestFleet,
    name: &str,
    why: &str,
    done: impl Fn(&[String], usize) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (opened, ended) = listens_at(fleet, name);
        if done(&opened, ended) {
            return opened;
        }
        assert!(
            Instant::now() < deadline,
            "{why}: the server saw these listen streams: {opened:?}, {ended} ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server of the 2026-07-28 era alone tells of its list changes and
/// resource updates only on its own listen streams: the gateway holds one
/// there per generation, for every list change and the resources its clients
/// subscribed to (opened again as that set changes). Its tool list change
/// reaches a legacy session as `list_changed` and a modern client's listen
/// stream; a resource update reaches its subscribers only; a new generation
/// gets a stream of its own, and `down` leaves nothing behind.
#[test]
fn a_modern_servers_list_changes_and_resource_updates_reach_the_gateways_clients() {
    let fleet = fleet_of(
        "gw-listen-at",
        &[fixture_server(
            "mx",
            &["--era", "modern", "--log-and-subscribe"],
            "",
        )],
    );
    let http = serve(&fleet, &[]);
    let mut legacy = Client::open(&fleet, Sdk::Python, Door::Stdio(&[]));
    let mut client = Client::modern(&fleet, Door::Http(&http), &[]);
    let label = client.label.clone();
    // The server starts: the gateway listens there for every list's changes.
    let listed = ok(&mut client, json!({"op": "list_resources"}));
    assert!(
        listed.to_string().contains("fixture://r"),
        "{label}: {listed}"
    );
    let lists =
        r#"{"promptsListChanged":true,"resourcesListChanged":true,"toolsListChanged":true}"#;
    await_listens(&fleet, "mx", "a stream for the list changes", |o, _| {
        o == [lists.to_owned()]
    });

    // A modern client listens to the server's resource: the gateway's stream
    // there is opened again with it, and the one before ends.
    let tools = ok(
        &mut client,
        json!({"op": "listen", "handle": "tools", "tools_list_changed": true}),
    );
    assert_eq!(
        tools["honored"],
        json!({"toolsListChanged": true}),
        "{label}: {tools}"
    );
    let updates = ok(
        &mut client,
        json!({"op": "listen", "handle": "r", "resource_subscriptions": ["fixture://r"]}),
    );
    assert_eq!(
        updates["honored"],
        json!({"resourceSubscriptions": ["fixture://r"]}),
        "{label}: {updates}"
    );
    let with_r = r#"{"promptsListChanged":true,"resourceSubscriptions":["fixture://r"],"resourcesListChanged":true,"toolsListChanged":true}"#;
    await_listens(&fleet, "mx", "a stream with the resource", |o, ended| {
        o == [lists.to_owned(), with_r.to_owned()] && ended == 1
    });

    // The server changes its tools: a legacy session hears list_changed, the
    // modern stream that asked for tool changes hears it, the other does not.
    legacy.forget(&LISTS_CHANGED);
    legacy.call("mx__echo", json!({"change": "tools"}));
    legacy.expect_notification(TOOLS_CHANGED, "from the modern server's listen stream");
    let heard = events(&mut client, "tools", 1);
    assert!(
        !heard.is_empty()
            && heard
                .iter()
                .all(|e| *e == json!({"event": "ToolsListChanged"})),
        "{label}: {heard:?}"
    );

    // An update of the resource reaches the stream subscribed to it, not the
    // legacy session, which did not subscribe.
    legacy.call("mx__echo", json!({"update": "fixture://r"}));
    assert_eq!(
        events(&mut client, "r", 1),
        vec![json!({"event": "ResourceUpdated", "uri": "fixture://r"})],
        "{label}"
    );
    legacy.ping();
    assert_eq!(super::params_of(&mut legacy, UPDATED), Vec::<Value>::new());

    // The legacy session subscribes too (the URIs at the server stay the
    // same) and gets the next update as well.
    ok(
        &mut legacy,
        json!({"op": "subscribe", "uri": "fixture://r"}),
    );
    legacy.call("mx__echo", json!({"update": "fixture://r"}));
    legacy.expect_notification(UPDATED, "to the legacy subscriber");
    assert_eq!(
        super::params_of(&mut legacy, UPDATED),
        vec![json!({"uri": "fixture://r"})]
    );

    // A new generation: the gateway listens there again, with the resource
    // that still has subscribers, and its changes reach the clients.
    let (out, _) = fleet.run_json(&["reconnect", "mx"]);
    assert_code(&out, 0);
    await_listens(&fleet, "mx", "a stream at the new generation", |o, _| {
        o.len() == 3 && o[2] == with_r
    });
    legacy.forget(&LISTS_CHANGED);
    legacy.call("mx__echo", json!({"change": "tools"}));
    legacy.expect_notification(TOOLS_CHANGED, "from the new generation's listen stream");

    // The last subscribers leave: the stream is opened again without it.
    ok(&mut client, json!({"op": "listen_close", "handle": "r"}));
    ok(
        &mut legacy,
        json!({"op": "unsubscribe", "uri": "fixture://r"}),
    );
    await_listens(&fleet, "mx", "a stream without the resource", |o, _| {
        o.len() == 4 && o[3] == lists
    });
    ok(
        &mut client,
        json!({"op": "listen_close", "handle": "tools"}),
    );
    client.close();
    legacy.close();
    down_and_no_leftovers(&fleet);
}

/// Through each door, a modern client whose requests carry `logLevel:
/// warning` gets the log messages of its `prompts/get` and `resources/read`
/// as of its `tools/call`, from a legacy server and one of its own era, named
/// by the server; and every message the server sent before its answer is
/// there once the answer is (read at once, never waited for), however many.
#[test]
fn a_modern_clients_prompts_get_and_resources_read_hear_their_log_messages_before_the_answer() {
    let fleet = fleet_of(
        "gw-reqlog",
        &[
            fixture_server("fx", &["--log-and-subscribe"], ""),
            fixture_server("mx", &["--era", "modern", "--log-and-subscribe"], ""),
        ],
    );
    let http = serve(&fleet, &[]);
    let levels = "debug,info,warning,emergency";
    let at = |server: &str| {
        vec![
            (format!("{server}/app"), "message at emergency".to_owned()),
            (format!("{server}/app"), "message at warning".to_owned()),
        ]
    };
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut client = Client::modern(&fleet, door, &["--log-level", "warning"]);
        let label = client.label.clone();
        let mut wanted = Vec::new();
        for server in ["fx", "mx"] {
            let prompt = ok(
                &mut client,
                json!({"op": "get_prompt", "name": format!("{server}__logged"), "arguments": {"log": levels}}),
            );
            assert!(prompt.to_string().contains("logged"), "{label}: {prompt}");
            wanted.extend(at(server));
            wanted.sort();
            assert_eq!(
                messages(&mut client),
                wanted,
                "{label}: prompts/get of {server}"
            );
        }
        let read = ok(
            &mut client,
            json!({"op": "read_resource", "uri": format!("fixture://log/{levels}")}),
        );
        assert!(read.to_string().contains("read"), "{label}: {read}");
        wanted.extend(at("fx"));
        wanted.sort();
        assert_eq!(messages(&mut client), wanted, "{label}: resources/read");

        // Many messages, each before the answer.
        let many = vec!["warning"; 200].join(",");
        // Before: one by each prompt, and one by the read of fx's resource.
        for (server, before) in [("fx", 2), ("mx", 1)] {
            ok(
                &mut client,
                json!({"op": "get_prompt", "name": format!("{server}__logged"), "arguments": {"log": many}}),
            );
            let warned = messages(&mut client)
                .iter()
                .filter(|(logger, data)| {
                    *logger == format!("{server}/app") && data == "message at warning"
                })
                .count();
            assert_eq!(
                warned,
                before + 200,
                "{label}: {server}'s messages before its answer"
            );
        }
        client.close();
    }
    down_and_no_leftovers(&fleet);
}
