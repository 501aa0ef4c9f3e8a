use super::*;
use crate::lifecycle::error::{ErrorPhase, ServerError};

fn event(from: Phase, to: Phase, cause: Cause) -> Event {
    Event {
        time: "2026-01-02T03:04:05.678Z".into(),
        server: "a".into(),
        generation: Some(1),
        from,
        to,
        cause,
        duration_ms: 250,
        waited_ms: 0,
        error: None,
        teardown: None,
    }
}

fn text(m: &Metrics) -> String {
    let view = View {
        servers: vec![ServerView {
            name: "a".into(),
            state: Phase::Running,
            generation: Some(2),
            uptime: Some(Duration::from_millis(1500)),
            queued: Some(1),
            escaped: 0,
        }],
        gateway_sessions: Some(0),
        ..View::default()
    };
    render(Some(m), view.clone(), Format::Prometheus)
}

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "no line `{line}` in:\n{text}"
    );
}

#[test]
fn starts_restarts_and_teardowns_are_counted_from_transitions() {
    let m = Metrics::new();
    m.observe(&event(Phase::Stopped, Phase::Starting, Cause::Start));
    m.observe(&event(Phase::Starting, Phase::Running, Cause::Start));
    // Idle stop, then a use starts it again: a restart caused by idle.
    m.observe(&event(Phase::Running, Phase::Stopping, Cause::Idle));
    let mut stopped = event(Phase::Stopping, Phase::Stopped, Cause::Idle);
    stopped.teardown = Some(crate::lifecycle::summary::Outcome::Escalated);
    m.observe(&stopped);
    m.observe(&event(Phase::Stopped, Phase::Starting, Cause::Start));
    m.observe(&event(Phase::Starting, Phase::Failed, Cause::Start));
    // The restart policy after an exit.
    m.observe(&event(Phase::Backoff, Phase::Starting, Cause::Restart));
    m.observe(&event(Phase::Starting, Phase::Running, Cause::Restart));
    m.observe(&event(Phase::Running, Phase::CrashLoop, Cause::Exited));
    let t = text(&m);
    has(
        &t,
        r#"mcpfleet_server_starts_total{server="a",outcome="ok"} 2"#,
    );
    has(
        &t,
        r#"mcpfleet_server_starts_total{server="a",outcome="failed"} 1"#,
    );
    has(
        &t,
        r#"mcpfleet_server_restarts_total{server="a",cause="idle"} 1"#,
    );
    has(
        &t,
        r#"mcpfleet_server_restarts_total{server="a",cause="exit"} 1"#,
    );
    has(
        &t,
        r#"mcpfleet_server_restarts_total{server="a",cause="health"} 0"#,
    );
    has(
        &t,
        r#"mcpfleet_server_teardowns_total{server="a",outcome="escalated"} 1"#,
    );
    has(
        &t,
        r#"mcpfleet_server_teardowns_total{server="a",outcome="clean"} 0"#,
    );
    has(&t, r#"mcpfleet_server_crash_loops_total{server="a"} 1"#);
    has(
        &t,
        r#"mcpfleet_connect_duration_seconds_count{server="a"} 2"#,
    );
    has(
        &t,
        r#"mcpfleet_connect_duration_seconds_bucket{server="a",le="0.25"} 2"#,
    );
    has(
        &t,
        r#"mcpfleet_teardown_duration_seconds_sum{server="a"} 0.25"#,
    );
    has(&t, r#"mcpfleet_server_state{server="a",state="running"} 1"#);
    has(&t, r#"mcpfleet_server_state{server="a",state="stopped"} 0"#);
    has(&t, r#"mcpfleet_server_uptime_seconds{server="a"} 1.5"#);
    has(&t, r#"mcpfleet_authority_queue_depth{server="a"} 1"#);
}

#[test]
fn refusals_calls_and_waits_are_counted_by_reason_and_outcome() {
    let m = Metrics::new();
    let mut fenced = event(Phase::Running, Phase::Running, Cause::Reconnect);
    fenced.error = Some(ServerError::new(
        ErrorKind::Fenced,
        ErrorPhase::Request,
        "generation 1 is not current",
    ));
    m.observe(&fenced);
    // A restart that could not begin stays in backoff: not a refusal.
    let mut again = event(Phase::Backoff, Phase::Backoff, Cause::Restart);
    again.error = Some(ServerError::new(
        ErrorKind::Quarantined,
        ErrorPhase::Request,
        "x",
    ));
    m.observe(&again);
    m.busy("a");
    m.busy("a");
    m.accepted("a", Duration::from_millis(3));
    m.called("a", CallOutcome::Ok, Duration::from_millis(1));
    m.called("a", CallOutcome::Error, Duration::from_millis(1));
    m.called("a", CallOutcome::Cancelled, Duration::from_secs(200));
    let t = text(&m);
    has(
        &t,
        r#"mcpfleet_requests_refused_total{server="a",reason="fenced"} 1"#,
    );
    has(
        &t,
        r#"mcpfleet_requests_refused_total{server="a",reason="busy"} 2"#,
    );
    has(
        &t,
        r#"mcpfleet_requests_refused_total{server="a",reason="quarantined"} 0"#,
    );
    has(&t, r#"mcpfleet_calls_total{server="a",outcome="ok"} 1"#);
    has(&t, r#"mcpfleet_calls_total{server="a",outcome="error"} 1"#);
    has(
        &t,
        r#"mcpfleet_calls_total{server="a",outcome="cancelled"} 1"#,
    );
    has(&t, r#"mcpfleet_calls_total{server="a",outcome="failed"} 0"#);
    has(
        &t,
        r#"mcpfleet_call_duration_seconds_bucket{server="a",le="120.0"} 2"#,
    );
    has(
        &t,
        r#"mcpfleet_call_duration_seconds_bucket{server="a",le="+Inf"} 3"#,
    );
    has(
        &t,
        r#"mcpfleet_authority_wait_seconds_bucket{server="a",le="0.0025"} 0"#,
    );
    has(
        &t,
        r#"mcpfleet_authority_wait_seconds_bucket{server="a",le="0.01"} 1"#,
    );
}

#[test]
fn without_a_supervisor_only_gauges_are_shown() {
    let view = View {
        servers: vec![ServerView {
            name: "a".into(),
            state: Phase::Quarantined,
            generation: Some(4),
            uptime: None,
            queued: None,
            escaped: 0,
        }],
        ..View::default()
    };
    let t = render(None, view.clone(), Format::OpenMetrics);
    has(&t, "mcpfleet_supervisor_up 0");
    has(&t, "mcpfleet_servers_quarantined 1");
    has(&t, r#"mcpfleet_server_generation{server="a"} 4"#);
    assert!(!t.contains("_total"), "{t}");
    assert!(t.ends_with("# EOF\n"));
}
