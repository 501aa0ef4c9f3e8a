//! The mapping of each client's documented format, on the example files in
//! `tests/data/import/`, read as if they lay where each client keeps them:
//! what is carried over, what is not and why, that secrets are moved to
//! variables and never written, and that the fleet file reads back as the
//! same servers with the same values.

use std::path::{Path, PathBuf};

use super::super::{Fleet, Transport as Running, load_str};
use super::*;

const CLAUDE_DESKTOP: &str = include_str!("../../../tests/data/import/claude_desktop_config.json");
const CLAUDE_CODE: &str = include_str!("../../../tests/data/import/.mcp.json");
const CURSOR: &str = include_str!("../../../tests/data/import/cursor-mcp.json");
const WINDSURF: &str = include_str!("../../../tests/data/import/mcp_config.json");
const VSCODE: &str = include_str!("../../../tests/data/import/vscode-mcp.json");

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

fn import(text: &str, path: &str) -> Imported {
    parse(text, Path::new(path)).unwrap_or_else(|e| panic!("{e}"))
}

fn names(imported: &Imported) -> Vec<&str> {
    imported.servers.iter().map(|s| s.name.as_str()).collect()
}

fn server<'a>(imported: &'a Imported, name: &str) -> &'a Server {
    imported
        .servers
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

fn skipped<'a>(imported: &'a Imported, name: &str) -> &'a Skipped {
    imported
        .skipped
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} is not among the skipped"))
}

/// A stdio server's command, args, env and cwd.
type StdioParts<'a> = (
    &'a str,
    &'a [String],
    &'a [(String, String)],
    Option<&'a str>,
);

fn stdio(server: &Server) -> StdioParts<'_> {
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            ..
        } => (command, args, env, cwd.as_deref()),
        other => panic!("{other:?}"),
    }
}

fn http(server: &Server) -> (&str, &[(String, String)]) {
    match &server.transport {
        Transport::Http { url, headers, .. } => (url, headers),
        other => panic!("{other:?}"),
    }
}

fn var_of(imported: &Imported, value: &str) -> String {
    imported
        .secrets
        .iter()
        .find(|s| s.value == value)
        .unwrap_or_else(|| panic!("no variable holds {value}"))
        .var
        .clone()
}

/// The fleet file, written and read back with each secret's variable set to
/// the secret and every other variable to `set-NAME`; no secret is in the text.
fn round_trip(imported: &Imported, dir: &Path) -> Fleet {
    let text = imported.fleet_file();
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} was copied:\n{text}");
    }
    let env = |name: &str| {
        imported
            .secrets
            .iter()
            .find(|s| s.var == name)
            .map(|s| s.value.clone())
            .or_else(|| match name {
                "API_BASE_URL" => Some("https://api.example.com".to_string()),
                _ => Some(format!("set-{name}")),
            })
    };
    load_str(&text, &dir.join("fleet.yaml"), &env)
        .unwrap_or_else(|e| panic!("the fleet file is not valid: {e}\n{text}"))
}

fn fleet_env(fleet: &Fleet, server: &str, key: &str) -> String {
    match &fleet.server(server).unwrap().transport {
        Running::Stdio(s) => s
            .env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.value.clone())
            .unwrap_or_else(|| panic!("no {key}")),
        Running::Http(_) => panic!("{server} is remote"),
    }
}

fn tmp() -> PathBuf {
    std::env::temp_dir()
}

#[test]
fn claude_desktop() {
    let imported = import(
        CLAUDE_DESKTOP,
        "/home/ada/.config/Claude/claude_desktop_config.json",
    );
    assert_eq!(imported.client, Client::ClaudeDesktop);
    assert_eq!(
        names(&imported),
        [
            "filesystem",
            "github",
            "brave-search",
            "memory-server",
            "postgres"
        ]
    );
    assert!(imported.skipped.is_empty());
    let memory = server(&imported, "memory-server");
    assert_eq!(memory.original, "Memory Server");
    assert!(
        imported
            .notices()
            .iter()
            .any(|n| n.contains("\"Memory Server\" is named `memory-server`"))
    );
    let (command, args, env, cwd) = stdio(server(&imported, "github"));
    assert_eq!(command, "npx");
    assert_eq!(args, ["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(
        env,
        [(
            "GITHUB_PERSONAL_ACCESS_TOKEN".to_string(),
            "${env:GITHUB_PERSONAL_ACCESS_TOKEN}".to_string()
        )]
    );
    assert_eq!(cwd, None);
    assert_eq!(
        var_of(&imported, "ghp_exampleExampleExample0123456789abcd"),
        "GITHUB_PERSONAL_ACCESS_TOKEN"
    );
    // A password in a connection string is a secret too.
    let (_, args, _, _) = stdio(server(&imported, "postgres"));
    assert_eq!(
        args[2],
        "postgresql://readonly:${env:POSTGRES_PASSWORD}@localhost:5432/mydb"
    );
    // Read back with the variables set, the servers are what the client runs.
    let fleet = round_trip(&imported, &tmp());
    assert_eq!(
        fleet_env(&fleet, "github", "GITHUB_PERSONAL_ACCESS_TOKEN"),
        "ghp_exampleExampleExample0123456789abcd"
    );
    assert_eq!(
        fleet_env(&fleet, "memory-server", "MEMORY_FILE_PATH"),
        "/Users/username/memory.json"
    );
    let Running::Stdio(pg) = &fleet.server("postgres").unwrap().transport else {
        panic!()
    };
    assert_eq!(
        pg.args[2].value,
        "postgresql://readonly:pg-example-pass-42@localhost:5432/mydb"
    );
    assert_eq!(
        pg.args[2].display(),
        "postgresql://readonly:${env:POSTGRES_PASSWORD}@localhost:5432/mydb"
    );
    let text = imported.fleet_file();
    assert!(text.starts_with("# Fleet file imported by `mcpfleet import` from Claude Desktop"));
    assert!(text.contains("#   /home/ada/.config/Claude/claude_desktop_config.json\n"));
    assert!(text.contains(
        "#   GITHUB_PERSONAL_ACCESS_TOKEN  env GITHUB_PERSONAL_ACCESS_TOKEN of server github\n"
    ));
}

#[test]
fn claude_code() {
    let imported = import(CLAUDE_CODE, "/home/ada/app/.mcp.json");
    assert_eq!(imported.client, Client::ClaudeCode);
    assert_eq!(
        names(&imported),
        [
            "github",
            "sentry",
            "stitch",
            "airtable",
            "api-server",
            "notion"
        ]
    );
    let (url, headers) = http(server(&imported, "github"));
    assert_eq!(url, "https://api.githubcopilot.com/mcp/");
    assert_eq!(
        headers[0],
        ("Authorization".into(), "Bearer ${env:GITHUB_PAT}".into())
    );
    let (_, headers) = http(server(&imported, "stitch"));
    assert_eq!(
        headers[0],
        (
            "X-Goog-Api-Key".into(),
            "${env:STITCH_X_GOOG_API_KEY}".into()
        )
    );
    // ${VAR} and ${VAR:-default}, Claude Code's forms.
    let api = server(&imported, "api-server");
    assert_eq!(http(api).0, "${env:API_BASE_URL}/mcp");
    assert!(
        api.notes
            .iter()
            .any(|n| n.contains("default is not carried over"))
    );
    assert_eq!(
        imported.defaults,
        [(
            "API_BASE_URL".to_string(),
            "https://api.example.com".to_string()
        )]
    );
    let (_, _, env, _) = stdio(server(&imported, "airtable"));
    assert_eq!(env[0].1, "${env:AIRTABLE_API_KEY}");
    // The value of a secret flag; `API_KEY` is the file's own reference, so
    // the secret gets another name.
    let (_, args, _, _) = stdio(server(&imported, "notion"));
    assert_eq!(args[3], "${env:NOTION_API_KEY}");
    // The legacy transport is kept as a comment, its token hidden.
    let linear = skipped(&imported, "linear");
    assert!(
        linear.reason.contains("legacy HTTP+SSE"),
        "{}",
        linear.reason
    );
    assert!(linear.entry.contains("https://mcp.linear.app/sse"));
    let text = imported.fleet_file();
    assert!(
        text.contains("  # NOT CARRIED OVER: \"linear\" (line 21): it uses the legacy HTTP+SSE")
    );
    assert!(text.contains("  #   {\"type\": \"sse\", \"url\": \"https://mcp.linear.app/sse\""));
    let fleet = round_trip(&imported, &tmp());
    let Running::Http(stitch) = &fleet.server("stitch").unwrap().transport else {
        panic!()
    };
    assert_eq!(
        stitch.headers[0].1.value,
        "AIzaSyExampleStitchKey0123456789"
    );
    assert_eq!(fleet.servers.len(), 6);
}

#[test]
fn cursor() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    std::fs::write(dir.path().join(".env"), "PROJECT=app\n").unwrap();
    let path = dir.path().join(".cursor/mcp.json");
    let imported = import(CURSOR, path.to_str().unwrap());
    assert_eq!(imported.client, Client::Cursor);
    assert_eq!(
        names(&imported),
        ["web-search", "userjot", "local-api", "project-tools"]
    );
    let (_, _, env, _) = stdio(server(&imported, "web-search"));
    assert_eq!(
        env,
        [
            (
                "SEARCH_API_KEY".to_string(),
                "${env:SEARCH_API_KEY}".to_string()
            ),
            ("LOG_LEVEL".to_string(), "info".to_string())
        ]
    );
    assert_eq!(
        http(server(&imported, "userjot")).1[0].1,
        "Bearer ${env:USERJOT_API_TOKEN}"
    );
    // Secrets in the query and in a header of the same server get two names.
    let (url, headers) = http(server(&imported, "local-api"));
    assert_eq!(
        url,
        "http://localhost:3000/mcp?api_key=${env:LOCAL_API_API_KEY}&format=json"
    );
    assert_eq!(headers[0].1, "${env:LOCAL_API_API_KEY_2}");
    // The workspace is the folder that holds .cursor/.
    let tools = server(&imported, "project-tools");
    let (_, args, _, _) = stdio(tools);
    assert_eq!(
        args,
        [
            format!("{root}/tools/server.py"),
            "--home".into(),
            "${env:HOME}".into()
        ]
    );
    // `envFile` becomes `env_file:`, and the server gets what the file holds.
    let Transport::Stdio { env_files, .. } = &tools.transport else {
        panic!()
    };
    assert_eq!(env_files, &[format!("{root}/.env")]);
    assert!(
        imported
            .fleet_file()
            .contains(&format!("    env_file: [{root}/.env]\n"))
    );
    assert!(
        skipped(&imported, "remote-sse")
            .reason
            .contains("type: sse")
    );
    let fleet = round_trip(&imported, dir.path());
    let Running::Stdio(tools) = &fleet.server("project-tools").unwrap().transport else {
        panic!()
    };
    let environment = tools.environment();
    assert_eq!(environment[0].0, "PROJECT");
    assert_eq!(environment[0].1.value, "app");
    let Running::Http(local) = &fleet.server("local-api").unwrap().transport else {
        panic!()
    };
    assert_eq!(
        local.url.value,
        "http://localhost:3000/mcp?api_key=local-example-key-0123&format=json"
    );
}

#[test]
fn windsurf() {
    let imported = import(WINDSURF, "/home/ada/.codeium/windsurf/mcp_config.json");
    assert_eq!(imported.client, Client::Windsurf);
    assert_eq!(
        names(&imported),
        ["github", "figma", "ollama", "git", "puppeteer"]
    );
    assert_eq!(
        http(server(&imported, "figma")),
        (
            "https://figma.example.com/mcp",
            &[(
                "Authorization".to_string(),
                "Bearer ${env:AUTH_TOKEN}".to_string()
            )][..]
        )
    );
    assert!(server(&imported, "ollama").enabled);
    assert!(!server(&imported, "git").enabled);
    let puppeteer = server(&imported, "puppeteer");
    assert_eq!(puppeteer.deny_tools, ["puppeteer_evaluate"]);
    assert!(puppeteer.notes.iter().any(|n| n.contains("`alwaysAllow`")));
    assert!(
        skipped(&imported, "vault-reader")
            .reason
            .contains("${file:/run/secrets/vault-token}")
    );
    let fleet = round_trip(&imported, &tmp());
    assert!(!fleet.server("git").unwrap().enabled);
    assert_eq!(
        fleet.server("puppeteer").unwrap().expose.deny,
        ["puppeteer_evaluate"]
    );
    // A placeholder left in the example is a literal like any other: not copied.
    assert_eq!(
        fleet_env(&fleet, "github", "GITHUB_PERSONAL_ACCESS_TOKEN"),
        "<YOUR_PERSONAL_ACCESS_TOKEN>"
    );
}

#[test]
fn vscode() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("server")).unwrap();
    std::fs::write(dir.path().join(".env"), "").unwrap();
    let path = dir.path().join(".vscode/mcp.json");
    let imported = import(VSCODE, path.to_str().unwrap());
    assert_eq!(imported.client, Client::VsCode);
    assert_eq!(
        names(&imported),
        ["fetch", "github", "memory", "my-python-server"]
    );
    let perplexity = skipped(&imported, "Perplexity");
    assert!(
        perplexity.reason.contains("${input:perplexity-key}"),
        "{}",
        perplexity.reason
    );
    assert!(
        skipped(&imported, "legacy")
            .reason
            .contains("legacy HTTP+SSE")
    );
    assert!(
        skipped(&imported, "socket")
            .reason
            .contains("unknown `type` \"websocket\"")
    );
    let root = dir.path().display().to_string();
    let (_, _, env, _) = stdio(server(&imported, "memory"));
    assert_eq!(env[0].1, format!("{root}/.vscode/memory.json"));
    let python = server(&imported, "my-python-server");
    assert_eq!(stdio(python).3, Some(format!("{root}/server").as_str()));
    assert!(python.notes.iter().any(|n| n.contains("`dev`")));
    // Skipped entries stay in file order between the others.
    let text = imported.fleet_file();
    let perplexity_at = text.find("NOT CARRIED OVER: \"Perplexity\"").unwrap();
    let fetch_at = text.find("  fetch:\n").unwrap();
    let legacy_at = text.find("NOT CARRIED OVER: \"legacy\"").unwrap();
    assert!(perplexity_at < fetch_at && fetch_at < legacy_at, "{text}");
    let fleet = round_trip(&imported, dir.path());
    assert_eq!(fleet.servers.len(), 4);
}

#[test]
fn vscode_user_settings_hold_servers_under_mcp() {
    let imported = import(
        r#"{"editor.fontSize": 14, "mcp": {"servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}}"#,
        "/home/ada/.config/Code/User/settings.json",
    );
    assert_eq!(imported.client, Client::VsCode);
    assert_eq!(names(&imported), ["time"]);
}

#[test]
fn entries_that_cannot_be_servers_say_why() {
    let cases = [
        (
            r#"{"command": ["x"]}"#,
            "`command` (line 1) must be a string, found an array",
        ),
        (
            r#"{"command": "x", "args": "a b"}"#,
            "`args` (line 1) must be an array of strings",
        ),
        (
            r#"{"command": "x", "env": {"A-B": "1"}}"#,
            "not a valid environment variable name",
        ),
        (r#"{"url": "ftp://h/mcp"}"#, "`url` is not a valid URL"),
        (
            r#"{"url": "https://h", "headers": {"a b": "1"}}"#,
            "not a valid HTTP header name",
        ),
        (
            r#"{"url": "https://h", "headers": {"A": "1", "a": "2"}}"#,
            "given twice",
        ),
        (
            r#"{"command": "x", "url": "https://h"}"#,
            "both `command` and `url`",
        ),
        (r#"{"args": []}"#, "neither `command` nor `url`"),
        (
            r#"{"type": "stdio", "url": "https://h"}"#,
            "`type` is stdio, but there is no `command`",
        ),
        (
            r#"{"type": "http"}"#,
            "`type` is http, but there is no `url`",
        ),
        (
            r#"{"type": "stdio", "command": "x", "url": "https://h"}"#,
            "a stdio server (`command`) with `url`",
        ),
        (
            r#"{"type": "http", "url": "https://h", "command": "x"}"#,
            "with `command`",
        ),
        (
            r#"{"type": 3, "command": "x"}"#,
            "`type` (line 1) must be a string",
        ),
        (r#"["x"]"#, "expected an object, found an array"),
        (r#"{"command": ""}"#, "`command` is empty"),
    ];
    for (entry, says) in cases {
        let text = format!(r#"{{"mcpServers": {{"ok": {{"command": "x"}}, "bad": {entry}}}}}"#);
        let imported = import(&text, "/tmp/.mcp.json");
        assert_eq!(names(&imported), ["ok"], "{entry}");
        let reason = &skipped(&imported, "bad").reason;
        assert!(reason.contains(says), "{entry}: {reason}");
    }
}

#[test]
fn a_refused_entry_leaves_no_secret_behind() {
    let imported = import(
        r#"{"mcpServers": {
            "bad": {"command": "x", "env": {"API_KEY": "sk-refused-000000"}, "args": "oops"},
            "good": {"command": "x", "env": {"API_KEY": "sk-kept-111111"}}
        }}"#,
        "/tmp/.mcp.json",
    );
    assert_eq!(imported.secrets.len(), 1);
    assert_eq!(imported.secrets[0].var, "API_KEY");
    assert_eq!(imported.secrets[0].value, "sk-kept-111111");
    let text = imported.fleet_file();
    assert!(!text.contains("sk-refused-000000"), "{text}");
    assert!(
        text.contains("\"API_KEY\": \"[secret not copied]\""),
        "{text}"
    );
}

#[test]
fn names_are_made_valid_and_unique() {
    let imported = import(
        r#"{"mcpServers": {
            "GitHub": {"command": "a"},
            "github": {"command": "b"},
            "My  Server!": {"command": "c"},
            "--": {"command": "d"},
            "x": {"command": "e"},
            "x": {"command": "f"}
        }}"#,
        "/tmp/.mcp.json",
    );
    assert_eq!(
        names(&imported),
        ["github", "github-2", "my-server", "server", "x"]
    );
    // A client reads the last of two entries with one name.
    assert_eq!(stdio(server(&imported, "x")).0, "f");
    assert!(
        skipped(&imported, "x")
            .reason
            .contains("used again on line 7")
    );
    let long = "A".repeat(100);
    let imported = import(
        &format!(r#"{{"mcpServers": {{"{long}": {{"command": "a"}}}}}}"#),
        "/tmp/.mcp.json",
    );
    assert_eq!(imported.servers[0].name, "a".repeat(60));
}

#[test]
fn files_that_are_not_a_clients_are_refused_with_a_place() {
    let cases = [
        (
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n    \"b\": 1\n}}",
            "4:5: (top level): not valid JSON: expected `,` or `}` after a member of the object, found `\"`",
        ),
        (
            "[1]",
            "1:1: (top level): expected an object with `mcpServers` or `servers`, found an array",
        ),
        ("{\"other\": 1}", "1:1: (top level): no `mcpServers`"),
        (
            "{\"mcpServers\": []}",
            "1:16: mcpServers: expected an object of servers, found an array",
        ),
        (
            "{\"servers\": {}}",
            "1:13: servers: `servers` lists no server",
        ),
        (
            "{\"mcpServers\": {\"a\": {\"type\": \"sse\", \"url\": \"https://h/sse\"}}}",
            "1:16: mcpServers: no server can be carried over: `a` (line 1): it uses the legacy HTTP+SSE",
        ),
    ];
    for (text, want) in cases {
        let err = parse(text, Path::new("x.json")).unwrap_err();
        assert_eq!(err.file, Path::new("x.json"));
        let shown = err.errors[0].to_string();
        assert!(shown.starts_with(want), "{text}\n{shown}");
    }
}

#[test]
fn which_files_are_a_clients() {
    let client = r#"{"mcpServers": {"a": {"command": "x"}}}"#;
    assert!(is_client_file(Path::new("a.json"), client));
    assert!(is_client_file(Path::new("fleet"), client));
    assert!(is_client_file(Path::new("a.JSON"), "{ not json"));
    // A fleet file written as JSON, or in YAML's flow style, is a fleet file.
    assert!(!is_client_file(
        Path::new("fleet.json"),
        r#"{"version": 1, "servers": {"a": {"command": "x"}}}"#
    ));
    assert!(!is_client_file(
        Path::new("fleet.yaml"),
        "{version: 1, servers: {a: {command: x}}}"
    ));
    assert!(!is_client_file(Path::new("fleet.yaml"), "version: 1\n"));
}

/// `-f .mcp.json`: the secrets of the file are the values, shown as the
/// variables they moved to; an error points into the client's file.
#[test]
fn a_clients_file_loads_as_a_fleet() {
    let env = |name: &str| match name {
        "GITHUB_PAT" | "AIRTABLE_API_KEY" | "API_KEY" => Some("from-env".to_string()),
        _ => None,
    };
    let fleet = load_client_file(CLAUDE_CODE, Path::new("/tmp/.mcp.json"), &env).unwrap();
    assert_eq!(fleet.servers.len(), 6);
    let Running::Http(stitch) = &fleet.server("stitch").unwrap().transport else {
        panic!()
    };
    assert_eq!(
        stitch.headers[0].1.value,
        "AIzaSyExampleStitchKey0123456789"
    );
    assert_eq!(
        stitch.headers[0].1.display(),
        "${env:STITCH_X_GOOG_API_KEY}"
    );
    // The default of ${API_BASE_URL:-...} applies when the variable is unset.
    let Running::Http(api) = &fleet.server("api-server").unwrap().transport else {
        panic!()
    };
    assert_eq!(api.url.value, "https://api.example.com/mcp");
    assert!(
        fleet
            .notices
            .iter()
            .any(|n| n.contains("\"linear\" (line 21) is not carried over"))
    );
    let shown = format!("{:?}\n{}", fleet, fleet.resolved_yaml());
    for secret in SECRETS {
        assert!(!shown.contains(secret), "{secret}");
    }

    let err = load_client_file(CLAUDE_CODE, Path::new("/tmp/.mcp.json"), &|_| None).unwrap_err();
    let shown: Vec<String> = err.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "7:26: mcpServers.github.headers.Authorization: environment variable `GITHUB_PAT` is not set",
            "33:29: mcpServers.airtable.env.AIRTABLE_API_KEY: environment variable `AIRTABLE_API_KEY` is not set",
            "40:26: mcpServers.api-server.headers.Authorization: environment variable `API_KEY` is not set",
        ]
    );
}

/// `envFile` under `-f`: the file is read as `env_file:` is, and a missing one
/// is an error at the `envFile` of the client's file.
#[test]
fn env_file_of_a_clients_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".vscode/mcp.json");
    let text = "{\n  \"servers\": {\n    \"py\": {\n      \"command\": \"python\",\n      \"envFile\": \"${workspaceFolder}/.env\"\n    }\n  }\n}\n";
    let err = load_client_file(text, &path, &|_| None).unwrap_err();
    let shown: Vec<String> = err.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [format!(
            "5:18: servers.py.envFile: cannot read env file `{}/.env`: no such file",
            dir.path().display()
        )]
    );
    std::fs::write(dir.path().join(".env"), "TOKEN=from-file\n").unwrap();
    let fleet = load_client_file(text, &path, &|_| None).unwrap();
    let Running::Stdio(py) = &fleet.servers[0].transport else {
        panic!()
    };
    assert_eq!(py.environment()[0].1.value, "from-file");
    assert!(!format!("{fleet:?}").contains("from-file"));
}

/// Mutated client files (bytes flipped, cut, spliced) are mapped to a fleet
/// file that is YAML, or refused with a line and column or a key path; never a
/// panic.
#[test]
fn mutated_files_never_panic() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    let sources = [CLAUDE_DESKTOP, CLAUDE_CODE, CURSOR, WINDSURF, VSCODE];
    let specials = b"{}[]\":,\\/*$-0 \n\te";
    for round in 0..2000 {
        let mut bytes = sources[round % sources.len()].as_bytes().to_vec();
        for _ in 0..1 + next(4) {
            let at = next(bytes.len());
            match next(4) {
                0 => bytes[at] = specials[next(specials.len())],
                1 => bytes.truncate(at),
                2 => {
                    let from = next(bytes.len());
                    let piece: Vec<u8> = bytes[from..(from + next(40)).min(bytes.len())].to_vec();
                    bytes.splice(at..at, piece);
                }
                _ => {
                    bytes.remove(at.min(bytes.len().saturating_sub(1)));
                }
            }
            if bytes.is_empty() {
                break;
            }
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        match parse(&text, Path::new("/tmp/p/.vscode/mcp.json")) {
            Ok(imported) => {
                // Whatever the names and values, the text is YAML.
                let yaml = imported.fleet_file();
                if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(&yaml) {
                    panic!("{text:?} gave a fleet file that is not YAML: {e}\n{yaml}");
                }
            }
            Err(e) => {
                let error = &e.errors[0];
                assert!(
                    error.line.is_some() || !error.path.is_empty(),
                    "{text:?}: {e}"
                );
            }
        }
    }
}

#[test]
fn package_runners_get_room_for_their_first_start() {
    let imported = import(CLAUDE_DESKTOP, "/home/u/.config/Claude/claude_desktop_config.json");
    let github = server(&imported, "github");
    assert_eq!(github.connect_timeout, Some("60s"));
    assert!(
        github.notes.iter().any(|n| n.contains("`npx`") && n.contains("60s")),
        "{:?}",
        github.notes
    );
    let text = imported.fleet_file();
    let fleet = load_str(&text, Path::new("/f.yaml"), &|_| Some("set".into()))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let github = fleet.servers.iter().find(|s| s.name == "github").unwrap();
    assert_eq!(github.connect_timeout.to_string(), "1m");

    // A server started otherwise keeps the default.
    let imported = import(CURSOR, "/p/.cursor/mcp.json");
    let python = imported
        .servers
        .iter()
        .find(|s| matches!(&s.transport, Transport::Stdio { command, .. } if command == "python"))
        .expect("a python server");
    assert_eq!(python.connect_timeout, None);

    for (command, runner) in [
        ("npx", Some("npx")),
        ("/usr/local/bin/uvx", Some("uvx")),
        ("npx.cmd", Some("npx")),
        ("bunx", Some("bunx")),
        ("node", None),
        ("npx-wrapper", None),
    ] {
        assert_eq!(super::map::package_runner(command), runner, "{command}");
    }
}

#[test]
fn a_fleet_name_from_a_directory() {
    for (dir, name) in [
        ("/home/u/My Project", "my-project"),
        ("/srv/tools.v2", "tools-v2"),
        ("/home/u/.hidden", "hidden"),
        ("/", "fleet"),
        ("/home/u/ü", "fleet"),
    ] {
        assert_eq!(name_for_dir(Path::new(dir)), name, "{dir}");
    }
    let imported = import(CLAUDE_CODE, "/p/.mcp.json");
    let text = imported.fleet_file_named(Some("team"));
    let fleet = load_str(&text, Path::new("/f.yaml"), &|_| Some("https://x".into()))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(fleet.name.as_deref(), Some("team"));
}

#[test]
fn an_mcp_remote_bridge_becomes_the_remote_server_with_oauth() {
    let imported = import(
        r#"{"mcpServers": {
            "linear": {"command": "npx", "args": ["-y", "mcp-remote", "https://mcp.linear.app/mcp"]},
            "atlassian": {"command": "npx", "args": ["mcp-remote@0.1.18", "https://mcp.atlassian.com/v1/mcp", "3334", "--allow-http"]},
            "legacy": {"command": "npx", "args": ["mcp-remote", "https://example.com/sse"]},
            "headers": {"command": "npx", "args": ["mcp-remote", "https://example.com/mcp", "--header", "X-A: b"]}
        }}"#,
        "claude_desktop_config.json",
    );
    for name in ["linear", "atlassian"] {
        let s = server(&imported, name);
        assert!(
            matches!(s.transport, Transport::Http { oauth: true, .. }),
            "{name}: {:?}",
            s.transport
        );
        assert!(s.notes.iter().any(|n| n.contains("mcpfleet login")), "{:?}", s.notes);
    }
    assert_eq!(http(server(&imported, "linear")).0, "https://mcp.linear.app/mcp");
    // What mcpfleet cannot speak, or would lose, stays the bridge.
    assert_eq!(stdio(server(&imported, "legacy")).0, "npx");
    assert_eq!(stdio(server(&imported, "headers")).0, "npx");
    let fleet = round_trip(&imported, &tmp());
    match &fleet.server("linear").unwrap().transport {
        Running::Http(h) => assert!(matches!(
            h.auth.as_deref(),
            Some(crate::config::AuthSpec::OAuth(_))
        )),
        other => panic!("{other:?}"),
    }
}
