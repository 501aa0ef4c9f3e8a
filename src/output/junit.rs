//! The JUnit XML report of `check --junit FILE` (docs/design.md §6): the same
//! `Report` as text and JSON, in the "Jenkins JUnit" dialect that Jenkins, GitLab
//! and the GitHub Actions test reporters read: `<testsuites>`, one `<testsuite>`
//! for the fleet, one `<testcase>` per server, `<failure>` for a server that did
//! not pass, `<skipped/>` for one the run left out, and the teardown in
//! `<system-out>`. Written by hand: escaping is all it needs, and everything
//! that XML 1.0 does not allow in a document (most control characters, which a
//! server's stderr may well hold) is replaced by U+FFFD.

use std::fmt::Write as _;
use std::time::Duration;

use super::contract::ToolsContract;
use super::report::{Report, ServerReport, serde_plain};
use crate::lifecycle::summary::TeardownSummary;

/// What the report says about the run beside its servers.
#[derive(Debug, Clone)]
pub(crate) struct Suite {
    /// The fleet's `name:`, else its file: the suite's name.
    pub name: String,
    /// The last part of the test cases' class name, `mcpfleet.<class>`.
    pub class: String,
    /// The fleet file, as a property.
    pub file: String,
    /// When the run began, RFC 3339.
    pub timestamp: String,
    pub hostname: String,
    /// How long the whole run took.
    pub time: Duration,
    /// Servers of the fleet the run did not check, with why: `<skipped/>`.
    pub skipped: Vec<(String, String)>,
    /// The snapshot the tools were compared with, to name it in failures.
    pub tools_file: Option<String>,
}

/// The document.
pub(crate) fn render(report: &Report, suite: &Suite) -> String {
    let failures = report.servers.iter().filter(|s| s.exit_code != 0).count();
    let tests = report.servers.len() + suite.skipped.len();
    let time = seconds(suite.time);
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"mcpfleet check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{time}\">"
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{}\" time=\"{time}\" timestamp=\"{}\" hostname=\"{}\">",
        attr(&suite.name),
        suite.skipped.len(),
        attr(&suite.timestamp),
        attr(&suite.hostname),
    );
    x.push_str("    <properties>\n");
    for (name, value) in [
        ("fleet_file", suite.file.clone()),
        ("exit_code", report.exit_code.to_string()),
        ("interrupted", report.interrupted.to_string()),
    ] {
        let _ = writeln!(
            x,
            "      <property name=\"{name}\" value=\"{}\"/>",
            attr(&value)
        );
    }
    x.push_str("    </properties>\n");
    let class = attr(&format!("mcpfleet.{}", suite.class));
    for s in &report.servers {
        let time = seconds(Duration::from_millis(
            s.connect_ms.unwrap_or(0) + s.teardown.as_ref().map_or(0, |t| t.duration_ms),
        ));
        let _ = writeln!(
            x,
            "    <testcase classname=\"{class}\" name=\"{}\" time=\"{time}\">",
            attr(&s.name)
        );
        if s.exit_code != 0 {
            let (kind, message) = reason(s, suite.tools_file.as_deref());
            let _ = writeln!(
                x,
                "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                attr(&kind),
                attr(&message),
                text(&failure_body(s, suite.tools_file.as_deref()))
            );
        }
        let _ = writeln!(x, "      <system-out>{}</system-out>", text(&system_out(s)));
        x.push_str("    </testcase>\n");
    }
    for (name, why) in &suite.skipped {
        let _ = writeln!(
            x,
            "    <testcase classname=\"{class}\" name=\"{}\" time=\"0.000\">\n      <skipped message=\"{}\"/>\n    </testcase>",
            attr(name),
            attr(why)
        );
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// The failure's `type` and `message`: the error kind when the server has an
/// error, else what else made its exit code.
fn reason(s: &ServerReport, tools_file: Option<&str>) -> (String, String) {
    if let Some(e) = &s.error {
        let message = format!("{}: {}", serde_plain(&e.phase), e.message);
        return (serde_plain(&e.kind), message);
    }
    if let Some(t) = s.teardown.as_ref().filter(|t| outcome(t) != "clean") {
        let kind = format!("teardown_{}", outcome(t));
        return (kind, teardown_line(t));
    }
    if let Some(c) = s.tools_contract.as_ref().filter(|c| c.differs()) {
        let file = tools_file.unwrap_or("the snapshot");
        return ("tools_differ".to_owned(), contract_summary(c, file));
    }
    ("failed".to_owned(), format!("exit code {}", s.exit_code))
}

fn contract_summary(c: &ToolsContract, file: &str) -> String {
    c.text(file).into_iter().next().unwrap_or_default()
}

/// Kind, phase, message and the stderr tail of the error, and the tools' diff.
fn failure_body(s: &ServerReport, tools_file: Option<&str>) -> String {
    let mut body = String::new();
    if let Some(e) = &s.error {
        let _ = writeln!(body, "kind: {}", serde_plain(&e.kind));
        let _ = writeln!(body, "phase: {}", serde_plain(&e.phase));
        let _ = writeln!(body, "message: {}", e.message);
        if !e.stderr_tail.is_empty() {
            body.push_str("stderr (last lines):\n");
            for line in &e.stderr_tail {
                let _ = writeln!(body, "  {line}");
            }
        }
    }
    if let Some(c) = &s.tools_contract {
        for line in c.text(tools_file.unwrap_or("the snapshot")) {
            let _ = writeln!(body, "{line}");
        }
    }
    let _ = write!(body, "exit code: {}", s.exit_code);
    body
}

/// The server's run in lines: the start and the teardown, outcome, signal and
/// pids.
fn system_out(s: &ServerReport) -> String {
    let mut out = String::new();
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let _ = writeln!(
        out,
        "server: {} ({}), state {}, generation {}",
        s.name,
        s.transport,
        s.state.as_str(),
        dash(s.generation.map(|g| g.to_string()))
    );
    if let Some(info) = &s.server_info {
        let _ = writeln!(out, "server info: {info}");
    }
    let _ = writeln!(
        out,
        "connect: {}, tools: {}",
        dash(s.connect_ms.map(|ms| format!("{ms} ms"))),
        dash(s.tools.map(|n| n.to_string()))
    );
    match &s.teardown {
        Some(t) => {
            let _ = writeln!(out, "{}", teardown_line(t));
            let _ = writeln!(
                out,
                "teardown signal: {}",
                t.signal.as_deref().unwrap_or("none")
            );
            let _ = writeln!(out, "leftover pids: {}", pids(&t.leftover_pids));
            let _ = writeln!(out, "escaped pids: {}", pids(&t.escaped_pids));
            if let Some(exit) = &t.exit {
                let _ = writeln!(out, "exit: {exit}");
            }
        }
        None => out.push_str("teardown: none (nothing was started)\n"),
    }
    let _ = write!(out, "exit code: {}", s.exit_code);
    out
}

fn teardown_line(t: &TeardownSummary) -> String {
    format!(
        "teardown: {} in {} ms (generation {})",
        outcome(t),
        t.duration_ms,
        t.generation
    )
}

fn outcome(t: &TeardownSummary) -> String {
    serde_plain(&t.outcome)
}

fn pids(list: &[i32]) -> String {
    match list {
        [] => "none".to_owned(),
        _ => list
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Seconds with three decimals, as the schema's time type wants them.
fn seconds(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// Whether XML 1.0 allows `c` in a document at all (its production `Char`).
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Text content: markup characters escaped, a carriage return kept as a
/// reference (a parser would turn a literal one into a line feed), what XML
/// cannot carry replaced.
pub(crate) fn text(s: &str) -> String {
    escape(s, false)
}

/// An attribute value in double quotes: also the quote, and tabs and line ends
/// as references (a parser would turn literal ones into spaces).
pub(crate) fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#13;"),
            '"' if attribute => out.push_str("&quot;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\t' if attribute => out.push_str("&#9;"),
            c if allowed(c) => out.push(c),
            _ => out.push('\u{FFFD}'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_line_ends_are_escaped() {
        assert_eq!(text("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
        assert_eq!(
            text("one\ntwo\r\n\tthree \"q\""),
            "one\ntwo&#13;\n\tthree \"q\""
        );
        assert_eq!(
            attr("say \"hi\"\n\tthere"),
            "say &quot;hi&quot;&#10;&#9;there"
        );
        assert_eq!(text("]]>"), "]]&gt;");
    }

    #[test]
    fn characters_xml_cannot_carry_are_replaced() {
        assert_eq!(
            text("\u{1b}[31mred\u{1b}[0m\u{7}"),
            "\u{FFFD}[31mred\u{FFFD}[0m\u{FFFD}"
        );
        assert_eq!(attr("nul\0here"), "nul\u{FFFD}here");
        assert_eq!(text("\u{FFFE}\u{FFFF}"), "\u{FFFD}\u{FFFD}");
        // Everything else is kept as it is, beyond the BMP too.
        assert_eq!(text("é ✓ 𝄞 \u{7f}"), "é ✓ 𝄞 \u{7f}");
    }

    #[test]
    fn times_have_three_decimals() {
        assert_eq!(seconds(Duration::from_millis(412)), "0.412");
        assert_eq!(seconds(Duration::from_millis(12_005)), "12.005");
        assert_eq!(seconds(Duration::ZERO), "0.000");
    }
}
