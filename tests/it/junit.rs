//! `check --junit FILE` through the real binary: the report of a fleet with a
//! healthy, a failing and a disabled fixture server is valid against the Jenkins
//! JUnit schema (junit-10.xsd, installed into `.cache/junit-xsd` by
//! `.ci/install-servers`) by a real XML Schema validator, xmllint; its contents are
//! read back through XPath; and check's stdout and exit code are what they are
//! without the flag.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The Jenkins JUnit schema, from the project's cache.
fn schema() -> PathBuf {
    let xsd = published_servers().join("junit-xsd/junit-10.xsd");
    assert!(
        xsd.is_file(),
        "no {}: run bash .ci/install-servers",
        xsd.display()
    );
    xsd
}

/// Validates `xml` against the schema with xmllint; fails with its words.
fn assert_valid(xml: &Path) {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(xml)
        .output()
        .expect("xmllint (Debian's libxml2-utils, installed by .ci/install-servers as root)");
    assert!(
        out.status.success(),
        "{} is not valid JUnit XML:\n{}{}",
        xml.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The string value of an XPath expression over `xml`, as xmllint reads it.
fn xpath(xml: &Path, expr: &str) -> String {
    let out = Command::new("xmllint")
        .args(["--xpath", &format!("string({expr})")])
        .arg(xml)
        .output()
        .expect("xmllint");
    assert!(out.status.success(), "xmllint --xpath {expr}: {out:?}");
    let mut value = String::from_utf8(out.stdout).expect("UTF-8");
    // xmllint ends what it prints with a line feed of its own.
    if value.ends_with('\n') {
        value.pop();
    }
    value
}

/// check's text output with its timings, and the column widths they make, taken
/// out.
fn untimed(out: &std::process::Output) -> String {
    let re = regex::Regex::new(r"\d+ms").unwrap();
    re.replace_all(&stdout(out), "Nms")
        .lines()
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn three_kinds_of_server(label: &str) -> TestFleet {
    let mut body = String::from("version: 1\nname: ci-fleet\nservers:\n");
    body.push_str(&fixture_server("alpha", &["--tools", "2"], ""));
    // Markup, a carriage return and control characters that XML 1.0 cannot carry.
    body.push_str(&fixture_server(
        "dies",
        &[
            "--stderr-line",
            "\u{1b}[31mfatal\u{1b}[0m: <config> & \"quotes\" \u{7}\rend",
            "--exit-during-init",
            "7",
        ],
        "",
    ));
    body.push_str(&fixture_server("off", &[], "enabled: false"));
    TestFleet::raw(label, &body)
}

#[test]
fn a_healthy_a_failing_and_a_disabled_server_make_a_valid_junit_report() {
    let fleet = three_kinds_of_server("junit");
    let report = fleet.dir.path().join("reports/mcpfleet.xml");
    std::fs::create_dir(report.parent().unwrap()).unwrap();
    let plain = fleet.run(&["check"]);
    let with = fleet.run(&["check", "--junit", report.to_str().unwrap()]);
    // The flag changes neither stdout nor the exit code.
    assert_code(&plain, 3);
    assert_code(&with, 3);
    assert_eq!(untimed(&with), untimed(&plain));

    assert_valid(&report);
    let bytes = std::fs::read(&report).unwrap();
    assert!(
        !bytes.iter().any(|b| *b < 0x20 && !b"\t\n\r".contains(b)),
        "a control character reached the report"
    );
    // Written atomically: nothing else in its directory.
    let entries: Vec<_> = std::fs::read_dir(report.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec!["mcpfleet.xml"]);

    let x = |expr: &str| xpath(&report, expr);
    assert_eq!(x("count(/testsuites/testsuite)"), "1");
    let suite = "/testsuites/testsuite";
    assert_eq!(x(&format!("{suite}/@name")), "ci-fleet");
    assert_eq!(x(&format!("{suite}/@tests")), "3");
    assert_eq!(x(&format!("{suite}/@failures")), "1");
    assert_eq!(x(&format!("{suite}/@errors")), "0");
    assert_eq!(x(&format!("{suite}/@skipped")), "1");
    assert!(!x(&format!("{suite}/@hostname")).is_empty());
    assert!(x(&format!("{suite}/@timestamp")).ends_with('Z'));
    assert_eq!(
        x(&format!(
            "{suite}/properties/property[@name='exit_code']/@value"
        )),
        "3"
    );
    assert_eq!(x("count(//testcase[@classname='mcpfleet.ci-fleet'])"), "3");

    let case = |name: &str| format!("//testcase[@name='{name}']");
    // The healthy one: no failure, its teardown in system-out.
    assert_eq!(x(&format!("count({}/failure)", case("alpha"))), "0");
    let time: f64 = x(&format!("{}/@time", case("alpha"))).parse().unwrap();
    assert!(time > 0.0, "{time}");
    let out = x(&format!("{}/system-out", case("alpha")));
    assert!(out.contains("teardown: clean"), "{out}");
    assert!(out.contains("teardown signal: none"), "{out}");
    assert!(out.contains("leftover pids: none"), "{out}");

    // The failing one: kind, phase, message and stderr, the characters XML cannot
    // carry replaced, markup and the carriage return kept.
    let failure = format!("{}/failure", case("dies"));
    assert_eq!(x(&format!("{failure}/@type")), "connect_failed");
    let message = x(&format!("{failure}/@message"));
    assert!(message.starts_with("initialize: "), "{message}");
    assert!(message.contains("exit code 7"), "{message}");
    let body = x(&failure);
    assert!(body.contains("kind: connect_failed"), "{body}");
    assert!(body.contains("phase: initialize"), "{body}");
    assert!(
        body.contains("\u{FFFD}[31mfatal\u{FFFD}[0m: <config> & \"quotes\" \u{FFFD}\rend"),
        "{body:?}"
    );
    let out = x(&format!("{}/system-out", case("dies")));
    assert!(out.contains("exit: exit code 7"), "{out}");

    // The disabled one: skipped, with why.
    assert_eq!(
        x(&format!("{}/skipped/@message", case("off"))),
        "disabled in the fleet file (enabled: false)"
    );
    fleet.assert_no_leftovers();
}

#[test]
fn servers_left_out_by_name_are_skipped_and_a_passing_run_has_no_failure() {
    let fleet = three_kinds_of_server("junit-named");
    let report = fleet.dir.path().join("r.xml");
    let out = fleet.run(&["check", "alpha", "--junit", report.to_str().unwrap()]);
    assert_code(&out, 0);
    assert_valid(&report);
    let x = |expr: &str| xpath(&report, expr);
    assert_eq!(x("/testsuites/testsuite/@failures"), "0");
    assert_eq!(x("/testsuites/testsuite/@skipped"), "2");
    assert_eq!(x("count(//failure)"), "0");
    assert_eq!(
        x("//testcase[@name='dies']/skipped/@message"),
        "not selected: the command line named other servers"
    );
    fleet.assert_no_leftovers();
}

#[test]
fn a_report_that_cannot_be_written_is_refused_before_anything_starts() {
    let fleet = three_kinds_of_server("junit-nowhere");
    let report = fleet.dir.path().join("no/such/dir/r.xml");
    let (out, doc) = fleet.run_json(&["check", "--junit", report.to_str().unwrap()]);
    assert_code(&out, 2);
    assert_eq!(doc["error"]["kind"], "usage");
    assert!(
        stderr(&out).contains(&format!("cannot write {}", report.display())),
        "{}",
        stderr(&out)
    );
    // Nothing was started: no state of any server, and no file.
    assert!(!report.exists());
    fleet.assert_no_leftovers();
}

#[test]
fn a_difference_of_tools_is_the_failure_of_its_server() {
    let fleet = TestFleet::fixtures("junit-tools", &[("alpha", &["--tools", "2"], "")]);
    let tools = fleet.dir.path().join("tools.json");
    let tools_arg = tools.to_str().unwrap();
    assert_code(&fleet.run(&["check", "--update-tools", tools_arg]), 0);
    std::fs::write(
        &fleet.path,
        format!(
            "version: 1\nservers:\n{}",
            fixture_server("alpha", &["--tools", "3"], "")
        ),
    )
    .unwrap();
    let report = fleet.dir.path().join("r.xml");
    let out = fleet.run(&[
        "check",
        "--expect-tools",
        tools_arg,
        "--junit",
        report.to_str().unwrap(),
    ]);
    assert_code(&out, 9);
    assert_valid(&report);
    let x = |expr: &str| xpath(&report, expr);
    assert_eq!(x("/testsuites/testsuite/@failures"), "1");
    // No `name:` in the fleet file: the suite is named by the file.
    assert_eq!(
        x("/testsuites/testsuite/@name"),
        fleet.path.to_str().unwrap()
    );
    assert_eq!(x("//testcase/@classname"), "mcpfleet.mcpfleet");
    let failure = "//testcase[@name='alpha']/failure";
    assert_eq!(x(&format!("{failure}/@type")), "tools_differ");
    let message = x(&format!("{failure}/@message"));
    assert!(message.contains("1 added, 0 removed"), "{message}");
    assert!(
        x(failure).contains("+ tool `tool_3` (added)"),
        "{}",
        x(failure)
    );
    fleet.assert_no_leftovers();
}

#[test]
fn with_strict_an_escalated_teardown_is_the_failure_and_its_signal_is_in_system_out() {
    let fleet = TestFleet::fixtures(
        "junit-strict",
        &[("stubborn", &["--ignore-eof"], "cleanup_timeout: 2s")],
    );
    let report = fleet.dir.path().join("r.xml");
    let out = fleet.run(&["check", "--strict", "--junit", report.to_str().unwrap()]);
    assert_code(&out, 5);
    assert_valid(&report);
    let x = |expr: &str| xpath(&report, expr);
    let case = "//testcase[@name='stubborn']";
    assert_eq!(x(&format!("{case}/failure/@type")), "teardown_escalated");
    let message = x(&format!("{case}/failure/@message"));
    assert!(message.starts_with("teardown: escalated in "), "{message}");
    let out = x(&format!("{case}/system-out"));
    assert!(out.contains("teardown signal: SIGTERM"), "{out}");
    fleet.assert_no_leftovers();
}
