//! Tool contracts through the real binary: `check --update-tools FILE` writes the
//! snapshot of every server's tools, `check --expect-tools FILE` holds the fleet to
//! it, and a difference (a tool added or removed, a schema changed at a JSON
//! pointer, a new server, a server gone from the fleet) exits 9, below every way a
//! server can fail to start or to end clean (docs/design.md §5).

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{Value, json};

/// The input schema of `echo` in the first snapshot: a nested object.
const NESTED: &str = r#"echo={"type":"object","properties":{"text":{"type":"string"},"opts":{"type":"object","properties":{"depth":{"type":"integer"}}}},"required":["text"]}"#;
/// The same, with `opts.depth` now a number and `text` no longer required.
const NESTED_CHANGED: &str = r#"echo={"type":"object","properties":{"text":{"type":"string"},"opts":{"type":"object","properties":{"depth":{"type":"number"}}}},"required":[]}"#;

/// Replaces the fleet file with these fixture servers.
fn rewrite(fleet: &TestFleet, servers: &[(&str, &[&str], &str)]) {
    let mut body = String::from("version: 1\nservers:\n");
    for (name, args, extra) in servers {
        body.push_str(&fixture_server(name, args, extra));
    }
    std::fs::write(&fleet.path, body).unwrap();
}

fn snapshot_path(fleet: &TestFleet) -> PathBuf {
    fleet.dir.path().join("tools.json")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The (tool, schema, pointer, change) of each schema change of a server line.
fn changes(line: &Value) -> Vec<(String, String, String, String)> {
    line["tools_contract"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap().to_owned();
            (s("tool"), s("schema"), s("pointer"), s("change"))
        })
        .collect()
}

fn owned(list: &[(&str, &str, &str, &str)]) -> Vec<(String, String, String, String)> {
    list.iter()
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()))
        .collect()
}

#[test]
fn a_snapshot_passes_until_the_tools_change_then_the_diff_names_each_pointer() {
    let fleet = TestFleet::fixtures(
        "contract",
        &[
            ("alpha", &["--tools", "3", "--input-schema", NESTED], ""),
            ("beta", &["--tools", "2"], ""),
        ],
    );
    let file = snapshot_path(&fleet);
    let file_arg = file.to_str().unwrap();

    // Written from the run, pretty and sorted.
    let (out, doc) = fleet.run_json(&["check", "--update-tools", file_arg]);
    assert_code(&out, 0);
    assert_eq!(doc["tools_contract"]["updated_file"], file_arg);
    let snapshot = read_json(&file);
    assert_eq!(snapshot["version"], 1);
    let tools = |server: &str| -> Vec<String> {
        snapshot["servers"][server]["tools"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(tools("alpha"), ["echo", "tool_2", "tool_3"]);
    assert_eq!(tools("beta"), ["echo", "tool_2"]);
    assert_eq!(
        snapshot["servers"]["alpha"]["tools"]["echo"]["input_schema"]["properties"]["opts"],
        json!({"type": "object", "properties": {"depth": {"type": "integer"}}})
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("{\n  \"version\": 1,\n"), "{text}");
    let entries: Vec<_> = std::fs::read_dir(fleet.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("tools"))
        .collect();
    assert_eq!(entries, ["tools.json"], "no temporary file is left");

    // The same fleet matches it.
    let (out, doc) = fleet.run_json(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 0);
    for name in ["alpha", "beta"] {
        let c = &server(&doc, name)["tools_contract"];
        assert_eq!(c["status"], "matches", "{name}: {c}");
        assert_eq!(server(&doc, name)["exit_code"], 0);
    }
    assert_eq!(doc["tools_contract"]["expected_file"], file_arg);
    assert_eq!(doc["tools_contract"]["missing_servers"], json!([]));

    // alpha gains a tool and its nested schema changes; beta loses a tool and
    // gains an output schema.
    rewrite(
        &fleet,
        &[
            (
                "alpha",
                &["--tools", "4", "--input-schema", NESTED_CHANGED],
                "",
            ),
            (
                "beta",
                &[
                    "--tools",
                    "1",
                    "--output-schema",
                    r#"echo={"type":"object"}"#,
                ],
                "",
            ),
        ],
    );
    let (out, doc) = fleet.run_json(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 9);
    assert_eq!(doc["exit_code"], 9);
    let alpha = server(&doc, "alpha");
    assert_eq!(alpha["exit_code"], 9);
    assert_eq!(
        alpha["error"],
        Value::Null,
        "a difference is no server error"
    );
    assert_eq!(alpha["tools_contract"]["status"], "differs");
    assert_eq!(alpha["tools_contract"]["added"], json!(["tool_4"]));
    assert_eq!(alpha["tools_contract"]["removed"], json!([]));
    assert_eq!(
        changes(alpha),
        owned(&[
            (
                "echo",
                "input_schema",
                "/properties/opts/properties/depth/type",
                "changed"
            ),
            ("echo", "input_schema", "/required/0", "removed"),
        ])
    );
    let depth = &alpha["tools_contract"]["changed"][0];
    assert_eq!(depth["expected"], "integer");
    assert_eq!(depth["found"], "number");
    let beta = server(&doc, "beta");
    assert_eq!(beta["tools_contract"]["removed"], json!(["tool_2"]));
    assert_eq!(
        changes(beta),
        owned(&[("echo", "output_schema", "", "added")])
    );
    assert_eq!(
        beta["tools_contract"]["changed"][0]["found"],
        json!({"type": "object"})
    );

    // The same in text: the pointer of each change under its server.
    let out = fleet.run(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 9);
    let text = stdout(&out);
    assert!(
        text.contains("tools differ from ")
            && text.contains("1 added, 0 removed, 2 schema change(s)"),
        "{text}"
    );
    assert!(text.contains("+ tool `tool_4` (added)"), "{text}");
    assert!(text.contains("- tool `tool_2` (removed)"), "{text}");
    assert!(
        text.contains("~ `echo` input_schema /properties/opts/properties/depth/type: \"integer\" -> \"number\""),
        "{text}"
    );
    assert!(
        text.contains("~ `echo` output_schema (the whole schema): added {\"type\":\"object\"}"),
        "{text}"
    );
    assert!(text.contains("exit 9"), "{text}");

    // Accepting the change: update, and the new snapshot passes.
    let out = fleet.run(&["check", "--update-tools", file_arg]);
    assert_code(&out, 0);
    let out = fleet.run(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_server_that_fails_to_start_is_a_start_failure_not_a_difference() {
    let fleet = TestFleet::fixtures(
        "contract-fail",
        &[
            ("alpha", &["--tools", "2"], ""),
            ("beta", &["--tools", "2"], ""),
        ],
    );
    let file = snapshot_path(&fleet);
    let file_arg = file.to_str().unwrap();
    assert_code(&fleet.run(&["check", "--update-tools", file_arg]), 0);

    // alpha now fails its handshake; beta's tools differ.
    rewrite(
        &fleet,
        &[
            ("alpha", &["--tools", "2", "--exit-during-init", "4"], ""),
            ("beta", &["--tools", "3"], ""),
        ],
    );
    let (out, doc) = fleet.run_json(&["check", "--expect-tools", file_arg]);
    // A failed start (3) outranks a difference (9).
    assert_code(&out, 3);
    let alpha = server(&doc, "alpha");
    assert_eq!(alpha["exit_code"], 3);
    assert_eq!(alpha["error"]["kind"], "connect_failed");
    assert_eq!(alpha["tools_contract"]["status"], "not_started");
    assert_eq!(alpha["tools_contract"]["removed"], json!([]));
    let beta = server(&doc, "beta");
    assert_eq!(beta["exit_code"], 9);
    assert_eq!(beta["tools_contract"]["added"], json!(["tool_3"]));

    // An update keeps the entry of the server that did not start.
    let before = read_json(&file)["servers"]["alpha"].clone();
    let out = fleet.run(&["check", "--update-tools", file_arg]);
    assert_code(&out, 3);
    assert!(
        stderr(&out).contains("the tools of `alpha` were not updated"),
        "{}",
        stderr(&out)
    );
    let after = read_json(&file);
    assert_eq!(after["servers"]["alpha"], before);
    assert!(after["servers"]["beta"]["tools"]["tool_3"].is_object());
    fleet.assert_no_leftovers();
}

#[test]
fn a_new_server_and_one_gone_from_the_fleet_are_differences() {
    let fleet = TestFleet::fixtures("contract-members", &[("alpha", &[], ""), ("old", &[], "")]);
    let file = snapshot_path(&fleet);
    let file_arg = file.to_str().unwrap();
    assert_code(&fleet.run(&["check", "--update-tools", file_arg]), 0);

    rewrite(
        &fleet,
        &[("alpha", &[], ""), ("fresh", &["--tools", "2"], "")],
    );
    let (out, doc) = fleet.run_json(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 9);
    assert_eq!(server(&doc, "alpha")["tools_contract"]["status"], "matches");
    assert_eq!(server(&doc, "alpha")["exit_code"], 0);
    let fresh = server(&doc, "fresh");
    assert_eq!(fresh["tools_contract"]["status"], "new_server");
    assert_eq!(fresh["tools_contract"]["added"], json!(["echo", "tool_2"]));
    assert_eq!(fresh["exit_code"], 9);
    assert_eq!(doc["tools_contract"]["missing_servers"], json!(["old"]));

    // A server gone from the fleet alone is enough for 9.
    rewrite(&fleet, &[("alpha", &[], "")]);
    let out = fleet.run(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 9);
    assert!(
        stdout(&out).contains("has server `old`, which is not in the fleet file"),
        "{}",
        stdout(&out)
    );
    // An update drops it, and the fleet passes again.
    assert_code(&fleet.run(&["check", "--update-tools", file_arg]), 0);
    assert!(read_json(&file)["servers"].get("old").is_none());
    assert_code(&fleet.run(&["check", "--expect-tools", file_arg]), 0);
    fleet.assert_no_leftovers();
}

#[test]
fn a_missing_or_broken_snapshot_is_refused_before_anything_starts() {
    let fleet = TestFleet::fixtures("contract-bad", &[("alpha", &[], "")]);
    let file = snapshot_path(&fleet);
    let file_arg = file.to_str().unwrap();
    let out = fleet.run(&["check", "--expect-tools", file_arg]);
    assert_code(&out, 2);
    assert!(
        stderr(&out).contains(&format!("cannot read the tools snapshot {file_arg}")),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        &file,
        "{\n  \"version\": 1,\n  \"servers\": {\"alpha\": {\"tool\": {}}}\n}\n",
    )
    .unwrap();
    for flag in ["--expect-tools", "--update-tools"] {
        let (out, doc) = fleet.run_json(&["check", flag, file_arg]);
        assert_code(&out, 2);
        assert_eq!(doc["error"]["kind"], "usage");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{file_arg}:3:")) && message.contains("unknown field `tool`"),
            "{message}"
        );
        assert_eq!(doc["servers"], json!([]));
    }
    fleet.assert_no_leftovers();
}
