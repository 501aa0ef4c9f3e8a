//! A legacy server's requests of its client during a 2026-07-28 client's call
//! (docs/design.md §14, "Continuations"): the client, which cannot be sent
//! requests, gets an input-required result that carries them, and its retry
//! with the `requestState` the gateway handed out answers them, while the
//! server's call stays in flight at the gateway. Against the fixture's `--ask`
//! (it asks its client during each `tools/call`, and answers with what it got),
//! through both doors with the official Python SDK's client, and on the wire:
//! a `requestState` forged or handed out for another request is refused, a
//! parked call that nobody takes up expires and is cancelled at its server,
//! and no more calls are parked than the bound.

use super::*;

/// A fixture `name` that asks its client, during each call, for each of `asks`
/// in turn.
fn asking(name: &str, asks: &[&str]) -> String {
    let mut args = Vec::new();
    for ask in asks {
        args.extend(["--ask", ask]);
    }
    fixture_server(name, &args, "")
}

/// Through both doors, a 2026-07-28 client's call to a legacy server that asks
/// it for roots, a sampling and an elicitation, one after the other: the
/// client's callbacks get each request (the sampling's numbers as the server
/// wrote them), the server gets each answer (it echoes them), and the gateway
/// says in its log that it put them to the client's call. The same for roots
/// asked during a `resources/read`.
#[test]
fn a_legacy_servers_requests_reach_a_modern_clients_callbacks_and_their_answers_reach_it() {
    let fleet = fleet_of(
        "gw-continue",
        &[
            asking("fx", &["roots", "sampling", "elicitation"]),
            fixture_server("fr", &["--log-and-subscribe", "--ask", "roots"], ""),
        ],
    );
    let http = serve(&fleet, &[]);
    for door in [Door::Stdio(&[]), Door::Http(&http)] {
        let mut client = Client::modern(&fleet, door, &[]);
        let label = client.label.clone();
        let result = client.call("fx__echo", json!({}));
        let answers: Value = serde_json::from_str(text(&result))
            .unwrap_or_else(|e| panic!("{label}: {e}: {result}"));
        assert_eq!(
            answers[0],
            json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]}),
            "{label}: the roots the client gave: {answers}"
        );
        assert_eq!(
            answers[1]["content"]["text"], "sampled by python-sdk",
            "{label}: the client's sampling: {answers}"
        );
        assert_eq!(
            answers[2]["action"], "accept",
            "{label}: the client's elicitation: {answers}"
        );
        let read = client.op(json!({"op": "read_resource", "uri": "fixture://r"}));
        assert_eq!(read["ok"], true, "{label}: {read}");
        let text = read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            serde_json::from_str::<Value>(text).ok(),
            Some(json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]})),
            "{label}: the roots the client gave during resources/read: {read}"
        );
        let counts = client.op(json!({"op": "requests"}));
        assert_eq!(
            counts["counts"],
            json!({"roots/list": 2, "sampling/createMessage": 1, "elicitation/create": 1}),
            "{label}: {counts}"
        );
        let sampled = client.op(json!({"op": "sampled"}));
        assert_eq!(
            sampled["sampled"],
            json!([{"temperature": "0.7", "costPriority": "0.3", "speedPriority": "0.8",
                "intelligencePriority": "0.5"}]),
            "{label}: the sampling's numbers as the server wrote them"
        );
        client.close();
    }
    let out = fleet.run(&["logs", "--gateway"]);
    assert_code(&out, 0);
    let log = stdout(&out);
    for (server, method) in [
        ("fx", "roots/list"),
        ("fx", "sampling/createMessage"),
        ("fx", "elicitation/create"),
        ("fr", "roots/list"),
    ] {
        let line = format!("server {server} asked {method}: put to session");
        assert_eq!(
            log.matches(&line).count(),
            2,
            "one `{line}` per door in the gateway's log:\n{log}"
        );
    }
    down_and_no_leftovers(&fleet);
}

// ---------------------------------------------------------------------------------
// On the wire

/// A `tools/call` of the 2026-07-28 era whose client declares `caps`, with
/// `more` params.
fn modern_call(id: u64, tool: &str, caps: &Value, more: Value) -> String {
    let mut params = json!({"name": tool, "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    }});
    if let (Some(params), Some(more)) = (params.as_object_mut(), more.as_object()) {
        params.extend(more.clone());
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// Sends a 2026-07-28 `tools/call` of `tool` from a client that declares
/// sampling and returns its JSON-RPC answer.
#[track_caller]
fn call(http: &Http, id: u64, tool: &str, more: Value) -> Value {
    call_as(http, id, tool, &json!({"sampling": {}}), more)
}

/// Sends a 2026-07-28 `tools/call` of `tool` from a client that declares
/// `caps` and returns its JSON-RPC answer, whether it comes as JSON or on a
/// stream.
#[track_caller]
fn call_as(http: &Http, id: u64, tool: &str, caps: &Value, more: Value) -> Value {
    let headers = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    let mut exchange = Exchange::send(http, "POST", &headers, &modern_call(id, tool, caps, more));
    let streamed = exchange
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if streamed {
        return exchange.answer_to(id);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut exchange.body, &mut text).expect("read the body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The `requestState` of an input-required result that asks one sampling, as
/// the fixture wrote it.
#[track_caller]
fn parked_state(answer: &Value) -> String {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{answer}");
    let (_, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "sampling/createMessage", "{answer}");
    assert_eq!(request["params"], sampling_as_written(), "{answer}");
    result["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {answer}"))
        .to_owned()
}

/// The retry's params: `state` and an answer to every request of `answer`'s.
fn retry(answer: &Value, state: &str) -> Value {
    let reply = json!({"role": "assistant", "content": {"type": "text", "text": "raw answer"},
        "model": "raw", "stopReason": "endTurn"});
    let responses: serde_json::Map<String, Value> = answer["result"]["inputRequests"]
        .as_object()
        .map(|requests| {
            requests
                .keys()
                .map(|k| (k.clone(), reply.clone()))
                .collect()
        })
        .unwrap_or_default();
    json!({"requestState": state, "inputResponses": responses})
}

#[track_caller]
fn assert_invalid_state(answer: &Value, why: &str, words: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{why}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(words), "{why}: {answer}");
}

/// `serve` on a free loopback port, its supervisor started with `env`.
#[track_caller]
fn serve_with(fleet: &TestFleet, env: &[(&str, &str)]) -> Http {
    let mut command = fleet.command(&["--output", "json", "serve", "--listen", "127.0.0.1:0"]);
    command.envs(env.iter().copied());
    let out = run_bounded(command, Duration::from_secs(120));
    assert_code(&out, 0);
    http_of(fleet, &parse_doc(&out))
}

/// On the wire: the input-required result carries the server's request as it
/// wrote it and a `requestState`; that state sent for another tool, or one
/// the gateway never handed out, is refused with -32602 and leaves the parked
/// call where it is; the retry with it and the client's answer gets the
/// server's result, which echoes the client's answer; the same state again
/// is refused, its call taken up already. A client that does not declare
/// sampling is not asked: the server's request is refused as before, and the
/// server answers the call with that refusal.
#[test]
fn a_request_state_is_taken_up_once_and_only_for_its_own_request() {
    let fleet = fleet_of("gw-continue-wire", &[asking("fx", &["sampling"])]);
    let http = serve(&fleet, &[]);
    let first = call(&http, 1, "fx__echo", json!({}));
    let state = parked_state(&first);

    let other = call(&http, 2, "fx__tool_2", json!({"requestState": state}));
    assert_invalid_state(
        &other,
        "the state of another request",
        "another client's request",
    );
    let forged = format!("mcpfleet1.{}", "0".repeat(32));
    for (id, fake) in [(3, forged.as_str()), (4, "a state of nobody's")] {
        let answer = call(&http, id, "fx__echo", json!({"requestState": fake}));
        assert_invalid_state(
            &answer,
            "a state never handed out",
            "holds no call it names",
        );
    }

    let done = call(&http, 5, "fx__echo", retry(&first, &state));
    let got: Value = serde_json::from_str(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{e}: {done}"));
    assert_eq!(got["content"]["text"], "raw answer", "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");

    let again = call(&http, 6, "fx__echo", retry(&first, &state));
    assert_invalid_state(&again, "a state taken up already", "holds no call it names");

    let unasked = call_as(&http, 7, "fx__echo", &json!({}), json!({}));
    let message = unasked["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("did not declare `sampling`"),
        "a client that cannot sample is not asked: {unasked}"
    );
    down_and_no_leftovers(&fleet);
}

/// A parked call that its client never takes up is ended once its time is up
/// (`MCPFLEET_INPUT_TTL`): the server's request is answered with an error and
/// its call is cancelled, the gateway's log says so, and the state is refused
/// afterwards. No more calls are parked at once than `MCPFLEET_INPUT_MAX`: the
/// one beyond is answered -32001 (busy) and cancelled at its server, and once
/// a parked call is taken up there is room again.
#[test]
fn parked_calls_expire_and_are_bounded_in_number() {
    let fleet = fleet_of("gw-continue-bounds", &[asking("fx", &["sampling"])]);
    let http = serve_with(
        &fleet,
        &[("MCPFLEET_INPUT_TTL", "3s"), ("MCPFLEET_INPUT_MAX", "2")],
    );

    // Bounded in number.
    let one = call(&http, 1, "fx__echo", json!({}));
    let two = call(&http, 2, "fx__echo", json!({}));
    let (state_one, _) = (parked_state(&one), parked_state(&two));
    let three = call(&http, 3, "fx__echo", json!({}));
    assert_eq!(three["error"]["code"], SERVER_UNAVAILABLE, "{three}");
    assert_eq!(three["error"]["data"]["kind"], "busy", "{three}");
    assert!(
        three["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("MCPFLEET_INPUT_MAX")),
        "{three}"
    );
    let done = call(&http, 4, "fx__echo", retry(&one, &state_one));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let four = call(&http, 5, "fx__echo", json!({}));
    let state_four = parked_state(&four);

    // Expired: the second and the fourth, nobody taking them up; the third
    // was cancelled at once.
    let cancelled = await_server_lines(
        &fleet,
        "fx",
        "fixture: the client answered sampling/createMessage with an error",
        3,
    );
    assert_eq!(
        cancelled, 3,
        "the requests of the busy call and of the two that expired"
    );
    let notices = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = fleet.run(&["logs", "fx", "-n", "1000"]);
            let n = stdout(&out)
                .lines()
                .filter(|l| l.contains("fixture: notifications/cancelled for request"))
                .count();
            if n >= 3 || Instant::now() >= deadline {
                break n;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(
        notices, 3,
        "each call the gateway gave up was cancelled at the server"
    );
    let late = call(&http, 6, "fx__echo", retry(&four, &state_four));
    assert_invalid_state(&late, "an expired state", "holds no call it names");

    let out = fleet.run(&["logs", "--gateway"]);
    let log = stdout(&out);
    assert_eq!(
        log.matches("which did not answer within 3s").count(),
        2,
        "{log}"
    );
    assert!(log.contains("which the gateway did not park"), "{log}");
    down_and_no_leftovers(&fleet);
}
