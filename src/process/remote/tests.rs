use super::*;

#[test]
fn an_unknown_session_is_recognized_in_the_words_of_the_common_sdks() {
    for said in [
        "Bad Request: No valid session ID provided",
        "Session not found",
        "Not Found: Invalid or expired session ID",
        "unknown session id",
    ] {
        assert!(names_unknown_session(said), "{said}");
    }
    for said in [
        "Bad Request: Unsupported protocol version",
        "Internal server error",
        "invalid params",
    ] {
        assert!(!names_unknown_session(said), "{said}");
    }
}

#[test]
fn bodies_become_one_bounded_line_without_markup_or_control_characters() {
    let page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
                <title>Error</title>\n</head>\n<body>\n<pre>Cannot POST /sse</pre>\n\
                </body>\n</html>\n";
    assert_eq!(body_excerpt(page), "Cannot POST /sse");
    assert_eq!(
        body_excerpt(
            r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#
        ),
        "Bad Request: No valid session ID provided"
    );
    assert_eq!(
        body_excerpt("store down\r\n\u{1b}[31mretry\u{7}"),
        "store down \\u{1b}[31mretry\\u{7}"
    );
    let long = "x".repeat(1000);
    let cut = body_excerpt(&long);
    assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
    assert!(cut.ends_with('…'));
}

#[test]
fn a_challenge_shows_its_scheme_realm_and_scope_only() {
    assert_eq!(
        describe_challenge(r#"Bearer realm="mcp", scope="tools""#),
        r#"Bearer realm "mcp", scope "tools""#
    );
    assert_eq!(
        describe_challenge(
            r#"Bearer error="invalid_token", error_description="token abc expired", resource_metadata="https://x/y""#
        ),
        r#"Bearer error "invalid_token""#
    );
    assert_eq!(
        describe_challenge(r#"Basic realm="a \"b\" c""#),
        r#"Basic realm "a "b" c""#
    );
    assert_eq!(describe_challenge("Bearer"), "Bearer");
}

#[test]
fn a_status_and_body_are_split_from_rmcps_wording() {
    let (status, body) = split_status("HTTP 404 Not Found: Cannot POST /sse").unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, "Cannot POST /sse");
    assert!(split_status("something else").is_none());
}

#[test]
fn secrets_of_headers_and_url_are_redacted() {
    let remote = Remote {
        url: "http://user:hunter2-pass@h/mcp?key=url-secret-1&x=1".into(),
        headers: vec![
            ("Authorization".into(), "Bearer s3cret-token".into()),
            ("X-Trace".into(), "1".into()),
        ],
        keeper: None,
        ca: None,
    };
    let secrets = secrets_of(&remote);
    let text = "bad token s3cret-token (Bearer s3cret-token) at /mcp?key=url-secret-1 \
                by hunter2-pass; Bearer realm 1";
    let shown = redact(text, &secrets);
    for secret in ["s3cret-token", "url-secret-1", "hunter2-pass"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("Bearer realm 1"), "{shown}");
}

#[test]
fn a_failure_is_found_inside_rmcps_errors() {
    let failure = HttpFailure {
        kind: FailureKind::Unauthorized,
        message: "no".into(),
        signal: None,
    };
    let error: Error = StreamableHttpError::Io(std::io::Error::other(failure));
    let found = failure_in(&error).unwrap();
    assert_eq!(found.kind, FailureKind::Unauthorized);
    assert_eq!(found.message, "no");
    let other: Error = StreamableHttpError::UnexpectedEndOfStream;
    assert!(failure_in(&other).is_none());
}

fn error_answer(id: Option<RequestId>, message: &'static str) -> StreamableHttpPostResponse {
    let error = rmcp::model::ErrorData::new(rmcp::model::ErrorCode(-32000), message, None);
    StreamableHttpPostResponse::Json(rmcp::model::ServerJsonRpcMessage::error(error, id), None)
}

#[tokio::test]
async fn answers_that_say_the_session_is_unknown_are_a_lost_session() {
    let remote = Remote {
        url: "http://127.0.0.1:9/mcp".into(),
        headers: Vec::new(),
        keeper: None,
        ca: None,
    };
    let judge = |sent: Sent, answer: Result<StreamableHttpPostResponse, Error>| {
        let loss = SessionLoss::default();
        let client = ObservedClient::new(&remote, DeleteProbe::default(), loss.clone());
        async move {
            let judged = client
                .judge_post(sent, answer, "http://127.0.0.1:9/mcp", &Headers::new())
                .await;
            let failure = judged
                .as_ref()
                .err()
                .and_then(|e| failure_in(e))
                .map(|f| (f.kind, f.message.clone()));
            (failure, loss.how())
        }
    };
    let request = |id: i64, session: bool| Sent {
        session,
        request: Some(RequestId::Number(id)),
        initialize: false,
    };
    let unknown = "Bad Request: No valid session ID provided";

    // server-everything: 400 with an error that has no id.
    let (failure, how) = judge(request(7, true), Ok(error_answer(None, unknown))).await;
    assert_eq!(failure.unwrap().0, FailureKind::SessionLost);
    assert_eq!(how.unwrap(), format!("it answered \"{unknown}\""));
    // An id that is not the request's ("server-error").
    let other = Some(RequestId::String("server-error".into()));
    let (failure, _) = judge(request(7, true), Ok(error_answer(other, unknown))).await;
    assert_eq!(failure.unwrap().0, FailureKind::SessionLost);
    // A 404 to a request with a session.
    let (failure, how) = judge(request(7, true), Err(StreamableHttpError::SessionExpired)).await;
    assert_eq!(failure.unwrap().0, FailureKind::SessionLost);
    assert_eq!(how.as_deref(), Some("HTTP 404"));
    // The request's own error is its answer, whatever it says.
    let own = Some(RequestId::Number(7));
    let (failure, how) = judge(request(7, true), Ok(error_answer(own, "Session not found"))).await;
    assert!(failure.is_none() && how.is_none());
    // Without a session there is none to lose; an error for no request still
    // fails the request at once.
    let (failure, how) = judge(request(7, false), Ok(error_answer(None, unknown))).await;
    assert_eq!(failure.unwrap().0, FailureKind::Other);
    assert!(how.is_none());
}

#[tokio::test]
async fn a_loss_fires_once_the_error_that_found_it_is_dropped() {
    let remote = Remote {
        url: "http://127.0.0.1:9/mcp".into(),
        headers: Vec::new(),
        keeper: None,
        ca: None,
    };
    let loss = SessionLoss::default();
    let client = ObservedClient::new(&remote, DeleteProbe::default(), loss.clone());
    let error = client.lost("HTTP 404");
    assert_eq!(loss.how().as_deref(), Some("HTTP 404"));
    assert!(
        !loss.lost.is_cancelled(),
        "not before the error is delivered"
    );
    let found = failure_in(&error).unwrap();
    assert_eq!(found.kind, FailureKind::SessionLost);
    assert_eq!(
        found.message,
        "the server no longer knows this session (HTTP 404)"
    );
    drop(error);
    tokio::time::timeout(Duration::from_secs(1), loss.lost())
        .await
        .expect("the loss fired");
}

#[test]
fn a_bearer_challenge_with_resource_metadata_is_auth_required_with_what_to_add() {
    let bare = Remote {
        url: "http://127.0.0.1:9/mcp".into(),
        headers: Vec::new(),
        keeper: None,
        ca: None,
    };
    let client = ObservedClient::new(&bare, DeleteProbe::default(), SessionLoss::default());
    let challenge = "Bearer resource_metadata=\"http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp\", scope=\"read\"";
    let error: Error = StreamableHttpError::AuthRequired(
        rmcp::transport::streamable_http_client::AuthRequiredError::new(challenge.into()),
    );
    let (kind, message, status) = client.describe(&error);
    assert_eq!(kind, FailureKind::AuthRequired);
    assert_eq!(status, Some(StatusCode::UNAUTHORIZED));
    assert!(message.contains("`auth: oauth`"), "{message}");
    assert!(message.contains("mcpfleet login"), "{message}");

    // Credentials in `headers:` that were refused are theirs to fix, as before;
    // and a challenge without resource metadata is not MCP authorization.
    let with_headers = Remote {
        headers: vec![("Authorization".into(), "Bearer x".into())],
        ..bare.clone()
    };
    let client = ObservedClient::new(&with_headers, DeleteProbe::default(), SessionLoss::default());
    assert_eq!(client.describe(&error).0, FailureKind::Unauthorized);
    let client = ObservedClient::new(&bare, DeleteProbe::default(), SessionLoss::default());
    let plain: Error = StreamableHttpError::AuthRequired(
        rmcp::transport::streamable_http_client::AuthRequiredError::new("Bearer realm=\"mcp\"".into()),
    );
    assert_eq!(client.describe(&plain).0, FailureKind::Unauthorized);
}
