//! `mcpfleet import` and `-f CLIENT.json` through the real binary, on example
//! files of each client's documented format (`tests/data/import/`), laid out
//! where each client keeps them: the fleet file printed passes `validate` and
//! says the same servers, no secret of the client's file reaches it or any
//! other output, the variables to set are listed on stderr, entries that cannot
//! be carried over are comments with their reason, bad input exits 2 with its
//! place, and a client's file runs directly (`-f .mcp.json check`, `up`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

/// Every literal secret of the example files.
const SECRETS: &[&str] = &[
    "ghp_exampleExampleExample0123456789abcd",
    "BSAexampleBraveKey0123456789",
    "pg-example-pass-42",
    "AIzaSyExampleStitchKey0123456789",
    "lin_api_exampleLinearToken0123",
    "ntn_exampleNotionSecret0123456",
    "sk-search-example-0123456789",
    "local-example-key-0123",
    "value-example-0123456789",
    "<YOUR_PERSONAL_ACCESS_TOKEN>",
];

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

/// A project folder with each example where its client keeps it.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        for (from, to) in [
            ("claude_desktop_config.json", "claude_desktop_config.json"),
            (".mcp.json", ".mcp.json"),
            ("cursor-mcp.json", ".cursor/mcp.json"),
            ("mcp_config.json", "mcp_config.json"),
            ("vscode-mcp.json", ".vscode/mcp.json"),
        ] {
            let to = dir.path().join(to);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(data(from), to).unwrap();
        }
        // The working directory and env file the examples name.
        std::fs::create_dir_all(dir.path().join("server")).unwrap();
        std::fs::write(dir.path().join(".env"), "PROJECT=app\n").unwrap();
        Project { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }
}

fn mcpfleet(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(mcpfleet_bin());
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("MCPFLEET_FILE")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, Duration::from_secs(60))
}

/// The variables stderr tells the user to set: the first word of each
/// indented line after "set these environment variables".
fn variables_to_set(err: &str) -> Vec<String> {
    err.lines()
        .skip_while(|l| !l.contains("set these environment variables"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// Imports `file` of the project, checks what every import must hold, and
/// returns the fleet file, stderr and the variables to set.
fn import(project: &Project, file: &str) -> (String, String, Vec<String>) {
    let path = project.path(file);
    let out = mcpfleet(&["import", path.to_str().unwrap()], &[]);
    assert_code(&out, 0);
    let (yaml, err) = (stdout(&out), stderr(&out));
    for secret in SECRETS {
        assert!(
            !yaml.contains(secret),
            "{secret} copied into the fleet file:\n{yaml}"
        );
        assert!(!err.contains(secret), "{secret} on stderr:\n{err}");
    }
    assert!(
        yaml.contains(path.to_str().unwrap()),
        "the header names the source:\n{yaml}"
    );
    let vars = variables_to_set(&err);
    for var in &vars {
        assert!(
            yaml.contains(&format!("${{env:{var}}}")),
            "{var} is used in the fleet file:\n{yaml}"
        );
    }
    (yaml, err, vars)
}

/// `mcpfleet validate` of the fleet file, every variable of `vars` set (a URL
/// to a URL): the resolved fleet as JSON.
fn validate(project: &Project, yaml: &str, vars: &[&str]) -> Value {
    let file = project.path("fleet.yaml");
    std::fs::write(&file, yaml).unwrap();
    let env: Vec<(&str, &str)> = vars
        .iter()
        .map(|v| match v.ends_with("_URL") {
            true => (*v, "https://api.example.com"),
            false => (*v, "set"),
        })
        .collect();
    let out = mcpfleet(
        &["-f", file.to_str().unwrap(), "--output", "json", "validate"],
        &env,
    );
    assert_code(&out, 0);
    parse_doc(&out)["fleet"].clone()
}

fn resolved<'a>(fleet: &'a Value, name: &str) -> &'a Value {
    fleet["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name} in {fleet}"))
}

#[test]
fn claude_desktop_config() {
    let project = Project::new();
    let (yaml, err, vars) = import(&project, "claude_desktop_config.json");
    assert_eq!(
        vars,
        [
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "BRAVE_API_KEY",
            "POSTGRES_PASSWORD"
        ]
    );
    assert!(
        err.contains("\"Memory Server\" is named `memory-server`"),
        "{err}"
    );
    let fleet = validate(
        &project,
        &yaml,
        &[
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "BRAVE_API_KEY",
            "POSTGRES_PASSWORD",
        ],
    );
    let names: Vec<&str> = fleet["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "filesystem",
            "github",
            "brave-search",
            "memory-server",
            "postgres"
        ]
    );
    let fs = resolved(&fleet, "filesystem");
    assert_eq!(fs["command"], "npx");
    assert_eq!(
        fs["args"],
        serde_json::json!([
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/Users/username/Desktop",
            "/Users/username/Downloads"
        ])
    );
    assert_eq!(
        resolved(&fleet, "github")["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${env:GITHUB_PERSONAL_ACCESS_TOKEN}"
    );
    assert_eq!(
        resolved(&fleet, "memory-server")["env"]["MEMORY_FILE_PATH"],
        "/Users/username/memory.json"
    );
}

#[test]
fn claude_code_mcp_json() {
    let project = Project::new();
    let (yaml, err, vars) = import(&project, ".mcp.json");
    assert_eq!(vars, ["STITCH_X_GOOG_API_KEY", "NOTION_API_KEY"]);
    // The legacy transport is kept as a comment with its reason, and said.
    assert!(
        yaml.contains("# NOT CARRIED OVER: \"linear\" (line 21): it uses the legacy HTTP+SSE"),
        "{yaml}"
    );
    assert!(
        err.contains("server \"linear\" (line 21) is not carried over"),
        "{err}"
    );
    let fleet = validate(
        &project,
        &yaml,
        &[
            "STITCH_X_GOOG_API_KEY",
            "NOTION_API_KEY",
            "GITHUB_PAT",
            "AIRTABLE_API_KEY",
            "API_KEY",
            "API_BASE_URL",
        ],
    );
    assert_eq!(fleet["servers"].as_array().unwrap().len(), 6);
    let github = resolved(&fleet, "github");
    assert_eq!(github["transport"], "http");
    assert_eq!(github["url"], "https://api.githubcopilot.com/mcp/");
    assert_eq!(
        github["headers"]["Authorization"],
        "Bearer ${env:GITHUB_PAT}"
    );
    assert_eq!(
        resolved(&fleet, "api-server")["url"],
        "${env:API_BASE_URL}/mcp"
    );
    assert_eq!(resolved(&fleet, "airtable")["transport"], "stdio");
}

#[test]
fn cursor_mcp_json() {
    let project = Project::new();
    let (yaml, _, vars) = import(&project, ".cursor/mcp.json");
    assert_eq!(
        vars,
        ["SEARCH_API_KEY", "LOCAL_API_API_KEY", "LOCAL_API_API_KEY_2"]
    );
    assert!(
        yaml.contains("# NOT CARRIED OVER: \"remote-sse\""),
        "{yaml}"
    );
    let mut all = vars.iter().map(String::as_str).collect::<Vec<_>>();
    all.push("USERJOT_API_TOKEN");
    let fleet = validate(&project, &yaml, &all);
    let tools = resolved(&fleet, "project-tools");
    let root = std::fs::canonicalize(project.dir.path()).unwrap();
    let server_py = tools["args"][0].as_str().unwrap();
    assert!(
        Path::new(server_py).ends_with("tools/server.py")
            && (server_py.starts_with(root.to_str().unwrap())
                || server_py.starts_with(project.dir.path().to_str().unwrap())),
        "${{workspaceFolder}} is the project: {server_py}"
    );
    // `envFile` is `env_file:`, shown as its path.
    let env_file = tools["env_file"][0].as_str().unwrap();
    assert!(env_file.ends_with("/.env"), "{tools}");
    assert!(!fleet.to_string().contains("PROJECT=app"));
    assert_eq!(
        resolved(&fleet, "userjot")["headers"]["Authorization"],
        "Bearer ${env:USERJOT_API_TOKEN}"
    );
}

#[test]
fn windsurf_mcp_config_json() {
    let project = Project::new();
    let (yaml, _, vars) = import(&project, "mcp_config.json");
    assert_eq!(vars, ["GITHUB_PERSONAL_ACCESS_TOKEN"]);
    assert!(
        yaml.contains("# NOT CARRIED OVER: \"vault-reader\""),
        "{yaml}"
    );
    let fleet = validate(
        &project,
        &yaml,
        &["GITHUB_PERSONAL_ACCESS_TOKEN", "AUTH_TOKEN"],
    );
    assert_eq!(
        resolved(&fleet, "figma")["url"],
        "https://figma.example.com/mcp"
    );
    assert_eq!(resolved(&fleet, "git")["enabled"], false);
    assert_eq!(resolved(&fleet, "ollama")["enabled"], true);
}

#[test]
fn vscode_mcp_json() {
    let project = Project::new();
    let (yaml, err, vars) = import(&project, ".vscode/mcp.json");
    assert!(vars.is_empty(), "{vars:?}");
    for name in ["Perplexity", "legacy", "socket"] {
        assert!(
            yaml.contains(&format!("# NOT CARRIED OVER: \"{name}\"")),
            "{name}:\n{yaml}"
        );
        assert!(
            err.contains(&format!("server \"{name}\"")),
            "{name}:\n{err}"
        );
    }
    assert!(
        yaml.contains("${input:perplexity-key}"),
        "the reason names the input"
    );
    let fleet = validate(&project, &yaml, &[]);
    assert_eq!(
        resolved(&fleet, "my-python-server")["cwd"],
        std::fs::canonicalize(project.path("server"))
            .unwrap()
            .to_str()
            .unwrap()
    );
}

#[test]
fn the_fleet_is_named_after_its_directory_or_by_name() {
    let project = Project::new();
    let source = project.path(".mcp.json");
    let dir = project.path("My Tools.v2");
    std::fs::create_dir(&dir).unwrap();
    let target = dir.join("mcpfleet.yaml");
    let args = [
        "import",
        source.to_str().unwrap(),
        "--out",
        target.to_str().unwrap(),
    ];
    assert_code(&mcpfleet(&args, &[]), 0);
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(written.contains("\nname: my-tools-v2\n"), "{written}");

    let out = mcpfleet(&["import", source.to_str().unwrap(), "--name", "team"], &[]);
    assert_code(&out, 0);
    assert!(stdout(&out).contains("\nname: team\n"), "{}", stdout(&out));
    assert!(stderr(&out).contains("as fleet `team`"), "{}", stderr(&out));

    let out = mcpfleet(
        &["import", source.to_str().unwrap(), "--name", "Team X"],
        &[],
    );
    assert_code(&out, 2);
    assert!(
        stderr(&out).contains("--name \"Team X\" is not a fleet name"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn out_writes_a_file_and_never_replaces_one_unasked() {
    let project = Project::new();
    let source = project.path(".mcp.json");
    let target = project.path("fleet.yaml");
    let args = [
        "import",
        source.to_str().unwrap(),
        "--out",
        target.to_str().unwrap(),
    ];
    let out = mcpfleet(&args, &[]);
    assert_code(&out, 0);
    assert!(stdout(&out).is_empty());
    let written = std::fs::read_to_string(&target).unwrap();
    // Named after the directory the file goes to, as docker compose names a
    // project: its state directory gets a readable name, not a hash.
    let dir = project.dir.path().file_name().unwrap().to_str().unwrap();
    let name: String = dir
        .to_ascii_lowercase()
        .trim_start_matches(['.', '_', '-'])
        .replace('.', "-");
    assert!(
        written.contains(&format!("version: 1\nname: {name}\nservers:\n")),
        "{written}"
    );

    std::fs::write(&target, "mine").unwrap();
    let out = mcpfleet(&args, &[]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");

    let mut forced = args.to_vec();
    forced.push("--force");
    assert_code(&mcpfleet(&forced, &[]), 0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), written);
}

#[test]
fn bad_input_exits_2_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude_desktop_config.json");
    std::fs::write(
        &file,
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let out = mcpfleet(&["import", path], &[]);
    assert_code(&out, 2);
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(err.contains(&format!("{path}:4:5: ")), "{err}");
    assert!(err.contains("not valid JSON"), "{err}");
    // The same place in a JSON document, and through -f.
    let out = mcpfleet(&["--output", "json", "import", path], &[]);
    assert_code(&out, 2);
    let doc = parse_doc(&out);
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["error"]["errors"][0]["line"], 4);
    assert_eq!(doc["error"]["errors"][0]["column"], 5);
    let out = mcpfleet(&["-f", path, "check"], &[]);
    assert_code(&out, 2);
    assert!(stderr(&out).contains(&format!("{path}:4:5: ")));

    for (text, says) in [
        ("[]", "expected an object with `mcpServers` or `servers`"),
        ("{\"mcpServers\": {}}", "`mcpServers` lists no server"),
        (
            "{\"servers\": {\"a\": {\"type\": \"sse\", \"url\": \"http://h/sse\"}}}",
            "no server can be carried over",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = mcpfleet(&["import", path], &[]);
        assert_code(&out, 2);
        assert!(stderr(&out).contains(says), "{text}: {}", stderr(&out));
    }
    let out = mcpfleet(
        &["import", dir.path().join("missing.json").to_str().unwrap()],
        &[],
    );
    assert_code(&out, 2);
    assert!(stderr(&out).contains("missing.json"), "{}", stderr(&out));
}

/// A client's file runs as a fleet with `-f`: the fixture server gets the
/// secret written in the file, the entry that cannot be carried over is a
/// warning, and the secret appears in no output and no file of the state
/// directory.
#[test]
fn a_clients_file_runs_directly() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let secret = format!("sk-import-{nanos}-secret");
    let mut fleet = TestFleet::raw("import-direct", "");
    fleet.path = fleet.dir.path().join(".mcp.json");
    let pid_file = fleet.dir.path().join("pid.json");
    let json = serde_json::json!({
        "mcpServers": {
            "Fixture Server": {
                "type": "stdio",
                "command": fixture_bin().to_str().unwrap(),
                "args": ["--pid-file", pid_file.to_str().unwrap()],
                "env": { "API_KEY": secret, "LOG_LEVEL": "debug" }
            },
            "old": { "type": "sse", "url": "http://127.0.0.1:9/sse" }
        }
    });
    std::fs::write(&fleet.path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let mut seen = String::new();
    let mut record = |what: &str, out: &Output| {
        seen.push_str(&format!("== {what}\n{}{}", stdout(out), stderr(out)));
    };

    let (out, doc) = fleet.run_json(&["check"]);
    record("check", &out);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "fixture-server")["state"], "stopped");
    let err = stderr(&out);
    assert!(
        err.contains("server \"old\""),
        "the skipped entry is said: {err}"
    );
    assert!(err.contains("is named `fixture-server`"), "{err}");

    let out = fleet.run(&["up"]);
    record("up", &out);
    assert_code(&out, 0);
    let (pid, _) = read_pid_file(&pid_file);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let wanted = format!("API_KEY={secret}");
    assert!(
        environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()),
        "the server did not get the secret of the client's file"
    );
    for args in [
        &["status"][..],
        &["--output", "json", "status"],
        &["validate"],
        &["--output", "json", "validate"],
        &["-vv", "--output", "ndjson", "reconnect", "fixture-server"],
        &["events"],
        &["logs"],
        &["--output", "json", "down"],
    ] {
        let out = fleet.run(args);
        record(&args.join(" "), &out);
    }
    assert!(
        seen.contains("${env:API_KEY}"),
        "shown as its variable:\n{seen}"
    );
    let state = fleet.state_dir();
    for dir in [state.clone(), state.join("logs")] {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                let bytes = std::fs::read(entry.path()).unwrap_or_default();
                seen.push_str(&format!("== {}\n", entry.path().display()));
                seen.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    if let Some(at) = seen.find(&secret) {
        panic!(
            "the secret leaked:\n{}",
            &seen[at.saturating_sub(300)..(at + 50).min(seen.len())]
        );
    }
    fleet.assert_no_leftovers();
}
