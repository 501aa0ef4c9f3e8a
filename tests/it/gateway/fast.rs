//! The HTTP door's fast lane (docs/design.md §14, "The fast lane"): a plain
//! `tools/call` of the 2026-07-28 era is answered from its server's answer in
//! one JSON body, with what the long way answers; what is not plain takes the
//! long way and is refused as before; a client that goes away cancels the call.

use super::*;

/// The `_meta` of a 2026-07-28 request from a client that declares nothing.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    })
}

/// A plain `tools/call` of `tool` with `arguments`.
fn call(id: u64, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta()}})
    .to_string()
}

/// The headers of a 2026-07-28 `tools/call` of `tool`.
fn headers(tool: &str) -> Vec<(&str, &str)> {
    vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ]
}

/// The count of `server`'s calls with `outcome` in the metrics.
fn calls(fleet: &TestFleet, server: &str, outcome: &str) -> u64 {
    let metrics = stdout(&fleet.run(&["metrics"]));
    metrics
        .lines()
        .find(|l| {
            l.starts_with("mcpfleet_calls_total{")
                && l.contains(&format!("server=\"{server}\""))
                && l.contains(&format!("outcome=\"{outcome}\""))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// A modern `tools/list`, so that the catalog is built and current.
fn list(http: &Http) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": meta()}})
    .to_string();
    let mut listed = Exchange::send(
        http,
        "POST",
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        &body,
    );
    assert_eq!(listed.status, 200);
    let listed = listed.answer_to(1);
    assert!(listed["result"]["tools"].is_array(), "{listed}");
}

/// A plain call is answered in one JSON body, the long way's answer is an event
/// stream (a browser's `Origin` sends it there); both carry the same result
/// (with `resultType` and the server and generation that answered), and both
/// are counted.
#[test]
fn a_plain_call_is_answered_in_one_body_with_what_the_long_way_answers() {
    let fleet = fleet_of("gw-fast", &[fixture_server("a", &[], "")]);
    let http = serve(&fleet, &[]);
    list(&http);

    let arguments = json!({"k": 1, "t": 0.7, "s": "é\"\\"});
    let mut fast = Exchange::send(
        &http,
        "POST",
        &headers("a__echo"),
        &call(2, "a__echo", arguments.clone()),
    );
    assert_eq!(fast.status, 200);
    assert!(fast.is_json(), "one JSON body: {:?}", fast.headers);
    assert!(
        fast.header("mcp-session-id").is_none(),
        "{:?}",
        fast.headers
    );
    let fast = fast.answer_to(2);

    let mut slow_headers = headers("a__echo");
    slow_headers.push(("Origin", "http://localhost:1"));
    let mut slow = Exchange::send(
        &http,
        "POST",
        &slow_headers,
        &call(3, "a__echo", arguments.clone()),
    );
    assert_eq!(slow.status, 200);
    assert!(!slow.is_json(), "the long way's stream: {:?}", slow.headers);
    let slow = slow.answer_to(3);

    assert_eq!(fast["result"], slow["result"], "fast: {fast}\nslow: {slow}");
    assert_eq!(fast["jsonrpc"], "2.0");
    let result = &fast["result"];
    assert_eq!(result["resultType"], "complete", "{fast}");
    assert_eq!(result["_meta"]["mcpfleet/server"], "a", "{fast}");
    let echoed: Value = serde_json::from_str(text(result)).unwrap();
    assert_eq!(echoed, arguments, "the arguments reach the server as sent");

    // A string id comes back as it went.
    let body = call(4, "a__tool_2", json!({})).replace("\"id\":4", "\"id\":\"four\"");
    let fast = Exchange::send(&http, "POST", &headers("a__tool_2"), &body);
    assert!(fast.is_json(), "{:?}", fast.headers);
    let fast = fast.json();
    assert_eq!(fast["id"], "four", "{fast}");
    assert_eq!(text(&fast["result"]), "tool_2", "{fast}");

    assert_eq!(calls(&fleet, "a", "ok"), 3);
    down_and_no_leftovers(&fleet);
}

/// A call with a progress token to a server that sends progress before its
/// answer: an event stream of the progress under the client's token, in order,
/// then the answer, as the long way sends it.
#[test]
fn progress_before_the_answer_comes_first_on_an_event_stream() {
    let fleet = fleet_of(
        "gw-fast-progress",
        &[fixture_server("p", &["--progress", "3"], "")],
    );
    let http = serve(&fleet, &[]);
    list(&http);
    let tokened = |id: u64| {
        call(id, "p__echo", json!({"n": id}))
            .replace(r#""_meta":{"#, r#""_meta":{"progressToken":"mine","#)
    };
    let read = |mut exchange: Exchange, id: u64| {
        assert_eq!(exchange.status, 200);
        assert!(!exchange.is_json(), "{:?}", exchange.headers);
        let mut progress = Vec::new();
        loop {
            let (_, data) = exchange.event();
            let Some(data) = data else { continue };
            if data["id"] == id {
                return (progress, data);
            }
            assert_eq!(data["method"], "notifications/progress", "{data}");
            assert_eq!(data["params"]["progressToken"], "mine", "{data}");
            progress.push(data["params"]["progress"].clone());
        }
    };
    let fast = Exchange::send(&http, "POST", &headers("p__echo"), &tokened(2));
    let (fast_progress, fast) = read(fast, 2);
    let mut slow_headers = headers("p__echo");
    slow_headers.push(("Origin", "http://localhost:1"));
    let slow = Exchange::send(&http, "POST", &slow_headers, &tokened(3));
    let (slow_progress, slow) = read(slow, 3);
    // As the server wrote them: integers.
    assert_eq!(fast_progress, vec![json!(1), json!(2), json!(3)]);
    let numbers = |p: &[Value]| p.iter().map(|v| v.as_f64()).collect::<Vec<_>>();
    assert_eq!(numbers(&fast_progress), numbers(&slow_progress));
    assert_eq!(text(&fast["result"]), r#"{"n":2}"#, "{fast}");
    assert_eq!(fast["result"]["resultType"], slow["result"]["resultType"]);
    assert_eq!(fast["result"]["_meta"], slow["result"]["_meta"]);
    down_and_no_leftovers(&fleet);
}

/// What the fast lane does not take is answered as the long way answers it:
/// without the token 401; an `Mcp-Name` that is not the tool's, or a version in
/// `_meta` that is not the header's, 400 with -32020; `_meta` without the
/// client's capabilities 400 with -32602; an unknown tool -32602.
#[test]
fn what_the_fast_lane_does_not_take_is_answered_as_before() {
    let fleet = fleet_of("gw-fast-refused", &[fixture_server("a", &[], "")]);
    let http = serve(&fleet, &[]);
    list(&http);
    let body = call(5, "a__echo", json!({}));

    let stranger = Http {
        url: http.url.clone(),
        token: "0".repeat(64),
    };
    let refused = Exchange::send(&stranger, "POST", &headers("a__echo"), &body);
    assert_eq!(refused.status, 401);

    let refused = Exchange::send(&http, "POST", &headers("a__tool_2"), &body);
    assert_eq!(refused.status, 400);
    let refused = refused.json();
    assert_eq!(refused["error"]["code"], -32020, "{refused}");
    assert_eq!(refused["id"], 5, "{refused}");

    let other = body.replace(
        r#"protocolVersion":"2026-07-28""#,
        r#"protocolVersion":"2025-11-25""#,
    );
    assert_ne!(other, body);
    let refused = Exchange::send(&http, "POST", &headers("a__echo"), &other).json();
    assert_eq!(refused["error"]["code"], -32020, "{refused}");

    let bare = body.replace(r#""io.modelcontextprotocol/clientCapabilities":{},"#, "");
    assert_ne!(bare, body);
    let refused = Exchange::send(&http, "POST", &headers("a__echo"), &bare);
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"]["code"], -32602);

    let mut unknown = Exchange::send(
        &http,
        "POST",
        &headers("a__nope"),
        &call(6, "a__nope", json!({})),
    );
    let unknown = unknown.answer_to(6);
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    down_and_no_leftovers(&fleet);
}

/// A client that drops its connection while its call is at the server: the
/// call is cancelled at once (counted so), not when the server answers.
#[test]
fn a_client_that_goes_away_cancels_its_call() {
    let noted = tempfile_path("gw-fast-noted");
    let fleet = fleet_of(
        "gw-fast-gone",
        &[fixture_server(
            "a",
            &[
                "--call-delay-ms",
                "30000",
                "--note-requests",
                noted.to_str().unwrap(),
            ],
            "",
        )],
    );
    let http = serve(&fleet, &[]);
    list(&http);
    let rest = http.url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').expect("a path"));
    let body = call(8, "a__echo", json!({}));
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the door");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n",
        http.token,
        body.len()
    );
    for (name, value) in headers("a__echo") {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&noted)
        .unwrap_or_default()
        .contains("tools/call")
    {
        assert!(
            Instant::now() < deadline,
            "the call did not reach the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = Instant::now();
    drop(stream);
    while calls(&fleet, "a", "cancelled") != 1 {
        assert!(Instant::now() < deadline, "the call was not cancelled");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        gone.elapsed() < Duration::from_secs(15),
        "cancelled before the server answered"
    );
    assert_eq!(calls(&fleet, "a", "ok"), 0);
    down_and_no_leftovers(&fleet);
    let _ = std::fs::remove_file(&noted);
}

/// A path for a file of this test, in the system's temporary directory.
fn tempfile_path(label: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{label}-{}", std::process::id()))
}
