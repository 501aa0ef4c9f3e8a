//! OAuth for remote servers against a loopback authorization server that is
//! also the protected MCP server (`tests/oauth/server.py`, standard library
//! Python): `mcpfleet login --no-browser` completed by fetching the printed URL
//! as a browser would, the bearer token sent only to the resource it was issued
//! for, expiry and one refresh under concurrent calls, a rotated refresh token
//! written before it is used (and so surviving a SIGKILL of the supervisor),
//! logout with revocation, a denied consent, a login that times out, and no
//! token in any output or state file. The server's journal (one JSON line per
//! request, tokens only as hash prefixes) is what the tests judge by.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// The Python interpreter itself, not a launcher that would run it as its
/// child (pyenv's shims do), so that stopping the server stops it.
fn python() -> &'static Path {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth/server.py")
}

/// The loopback authorization server, stopped when dropped.
struct AuthServer {
    child: Child,
    base: String,
    journal: PathBuf,
}

impl AuthServer {
    fn start(fleet: &TestFleet, args: &[&str]) -> AuthServer {
        let journal = fleet.dir.path().join("journal.jsonl");
        let mut child = Command::new(python())
            .arg(script())
            .arg("--journal")
            .arg(&journal)
            .args(args)
            .env(TEST_ID_VAR, &fleet.test_id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tests/oauth/server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the server's address");
        let base = line.trim().to_owned();
        assert!(base.starts_with("http://127.0.0.1:"), "{base:?}");
        AuthServer {
            child,
            base,
            journal,
        }
    }

    fn events(&self, kind: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == kind)
            .collect()
    }

    fn refreshes(&self) -> Vec<Value> {
        self.events("token")
            .into_iter()
            .filter(|e| e["grant_type"] == "refresh_token")
            .collect()
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn oauth_fleet(
    label: &str,
    body: impl Fn(&str) -> String,
    server_args: &[&str],
) -> (TestFleet, AuthServer) {
    let fleet = TestFleet::raw(label, "version: 1\nservers: {}\n");
    let server = AuthServer::start(&fleet, server_args);
    std::fs::write(&fleet.path, body(&server.base)).unwrap();
    (fleet, server)
}

fn one_server(base: &str) -> String {
    format!("version: 1\nservers:\n  r:\n    url: {base}/mcp\n    auth: oauth\n")
}

/// What a browser does with the printed URL: follows the authorization
/// server's redirect to mcpfleet's loopback listener.
fn open_in_browser(url: &str) {
    let out = run_bounded(
        {
            let mut c = Command::new("python3");
            c.args([
                "-c",
                "import sys, urllib.request\ntry:\n    urllib.request.urlopen(sys.argv[1], timeout=20).read()\nexcept Exception as e:\n    print(e)\n",
                url,
            ]);
            c
        },
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A login started with `cmd` (stdout and stderr piped): the process, its
/// stderr past the first line, and that line with the URL it prints (empty
/// when it printed none).
struct Started {
    child: Child,
    err: BufReader<std::process::ChildStderr>,
    first: String,
    url: String,
}

fn start_login(mut cmd: Command) -> Started {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn mcpfleet login");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let url = first
        .split_once(": http")
        .map(|(_, rest)| format!("http{}", rest.trim()))
        .unwrap_or_default();
    Started {
        child,
        err,
        first,
        url,
    }
}

/// `mcpfleet login ARGS --no-browser`, completed by "a browser" (unless
/// `browse` is false), to its end.
fn login(fleet: &TestFleet, args: &[&str], browse: bool) -> (std::process::Output, String) {
    let mut all = vec!["--output", "json", "login", "--no-browser"];
    all.extend_from_slice(args);
    login_with(fleet.command(&all), browse)
}

/// The login `cmd`, completed by "a browser" (unless `browse` is false), to
/// its end: its output, and all it wrote on stderr.
fn login_with(cmd: Command, browse: bool) -> (std::process::Output, String) {
    let Started {
        mut child,
        mut err,
        first,
        url,
    } = start_login(cmd);
    if browse && !url.is_empty() {
        open_in_browser(&url);
    }
    let mut rest = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "login did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    (out, format!("{first}{rest}"))
}

fn token_file(fleet: &TestFleet, server: &str) -> PathBuf {
    fleet.state_dir().join(format!("auth/{server}.json"))
}

/// The raw tokens kept for `server`: every `access_token` and `refresh_token`
/// in its token file.
fn kept_tokens(fleet: &TestFleet, server: &str) -> Vec<String> {
    let text = std::fs::read_to_string(token_file(fleet, server)).unwrap_or_default();
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let mut out = Vec::new();
    for grant in doc["grants"]
        .as_object()
        .into_iter()
        .flat_map(|g| g.values())
    {
        let response = &grant["credentials"]["token_response"];
        for key in ["access_token", "refresh_token"] {
            if let Some(t) = response[key].as_str() {
                out.push(t.to_owned());
            }
        }
    }
    out
}

/// The hash prefix the journal gives a token.
fn journal_hash(token: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import hashlib, sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16])",
            token,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Fails when any of `secrets` is in `text`.
fn assert_hidden(what: &str, text: &str, secrets: &[String]) {
    for s in secrets {
        assert!(!text.contains(s.as_str()), "a token is in {what}:\n{text}");
    }
}

/// Every file of the state directory but the token files.
fn state_files_text(fleet: &TestFleet) -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "auth") {
                    walk(&path, out);
                }
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    let mut out = String::new();
    walk(&fleet.state_dir(), &mut out);
    out
}

#[test]
fn login_then_the_token_goes_only_to_its_resource_and_nowhere_else() {
    let (fleet, auth) = oauth_fleet(
        "oauth-login",
        |base| {
            format!(
                "version: 1\nservers:\n  r:\n    url: {base}/mcp\n    auth: oauth\n  o:\n    url: {base}/other\n    auth: oauth\n"
            )
        },
        &[],
    );
    // Before any login: a kind of its own, and the command that fixes it.
    let (out, doc) = fleet.run_json(&["check", "r"]);
    assert_code(&out, 3);
    assert_eq!(server(&doc, "r")["error"]["kind"], "auth_required", "{doc}");
    assert!(
        stdout(&out).contains("mcpfleet login r"),
        "{}",
        stdout(&out)
    );

    let (out, err) = login(&fleet, &["r"], true);
    assert_code(&out, 0);
    let doc = parse_doc(&out);
    let r = server(&doc, "r");
    assert_eq!(r["ok"], true, "{doc}");
    assert_eq!(r["resource"], format!("{}/mcp", auth.base));
    assert_eq!(r["refresh"], true);
    assert!(err.contains("open this URL to authorize r: "), "{err}");
    // The token file: the owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(token_file(&fleet, "r"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let tokens = kept_tokens(&fleet, "r");
    assert_eq!(tokens.len(), 2, "an access and a refresh token");

    let (out, doc) = fleet.run_json(&["check"]);
    // `r` is authorized; `o` (another resource of the same server) is not.
    assert!(server(&doc, "r")["error"].is_null(), "{doc}");
    assert_eq!(server(&doc, "o")["error"]["kind"], "auth_required", "{doc}");
    assert_code(&out, 3);
    let requests = auth.events("request");
    let to_mcp: Vec<&Value> = requests.iter().filter(|e| e["path"] == "/mcp").collect();
    assert!(
        to_mcp
            .iter()
            .any(|e| e["method"] == "tools/list" && e["status"] == 200),
        "{requests:?}"
    );
    // Every request of mcpfleet's sessions carried the token (only the
    // login's first, unauthorized request, which asks for the challenge, did
    // not), and it was a token for /mcp.
    let granted = auth
        .events("token")
        .iter()
        .find(|e| e["grant_type"] == "authorization_code" && e["ok"] == true)
        .map(|e| e["t"].as_f64().unwrap())
        .expect("the login's code exchange");
    for e in to_mcp.iter().filter(|e| e["token"].is_null()) {
        assert!(
            e["t"].as_f64().unwrap() < granted,
            "a request without the token: {e}"
        );
    }
    for e in to_mcp.iter().filter(|e| !e["token"].is_null()) {
        assert_eq!(e["token_resource"], format!("{}/mcp", auth.base), "{e}");
    }
    // No token of /mcp was ever offered to /other.
    for e in requests.iter().filter(|e| e["path"] == "/other") {
        assert_ne!(e["token_resource"], format!("{}/mcp", auth.base), "{e}");
    }
    // Nothing shows a token: outputs, state files, the recorded fleet.
    assert_hidden(
        "check's output",
        &format!("{}{}", stdout(&out), stderr(&out)),
        &tokens,
    );
    assert_hidden("login's output", &format!("{}{err}", stdout(&out)), &tokens);
    let (out, _) = fleet.run_json(&["status"]);
    assert_hidden("status", &stdout(&out), &tokens);
    assert_hidden("the state directory", &state_files_text(&fleet), &tokens);
}

#[test]
fn an_expired_token_is_refreshed_once_under_concurrent_calls_and_the_rotation_is_kept() {
    // 20 s tokens are renewed in their last 10 s (to the second): the eight
    // calls have those 10 s to come and go, however loaded the machine.
    let (fleet, auth) = oauth_fleet("oauth-refresh", one_server, &["--token-ttl", "20"]);
    let (out, _) = login(&fleet, &[], true);
    assert_code(&out, 0);
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let before = kept_tokens(&fleet, "r");
    std::thread::sleep(Duration::from_millis(11_000));
    let calls: Vec<_> = (0..8)
        .map(|_| fleet.spawn(&["--output", "json", "call", "r", "whoami"]))
        .collect();
    for call in calls {
        let out = call.wait_with_output().unwrap();
        assert_code(&out, 0);
        assert!(stdout(&out).contains("/mcp"), "{}", stdout(&out));
    }
    let refreshes = auth.refreshes();
    assert_eq!(
        refreshes.len(),
        1,
        "one refresh for eight calls: {refreshes:?}"
    );
    assert_eq!(refreshes[0]["ok"], true, "{refreshes:?}");
    // The rotated refresh token is the one kept, written before its access
    // token was sent: a SIGKILL of the supervisor now loses nothing.
    let supervisor = fleet.lock_pid().expect("a supervisor");
    let after = kept_tokens(&fleet, "r");
    assert_ne!(before, after);
    assert_eq!(
        journal_hash(&after[1]),
        refreshes[0]["refresh_token"].as_str().unwrap(),
        "the file keeps the rotated refresh token"
    );
    kill_all(&[supervisor]);
    // The next refresh, by another process, uses the rotated token and
    // succeeds (the old one would be refused: the server rotates).
    std::thread::sleep(Duration::from_millis(11_000));
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 0);
    assert!(server(&doc, "r")["error"].is_null(), "{doc}");
    let refreshes = auth.refreshes();
    assert_eq!(
        refreshes.len(),
        2,
        "{refreshes:?}\n{:?}\n{}",
        auth.events("request"),
        stderr(&out)
    );
    assert!(refreshes.iter().all(|r| r["ok"] == true), "{refreshes:?}");
    let (out, _) = fleet.run_json(&["down"]);
    assert!(
        out.status.success() || out.status.code() == Some(8),
        "{}",
        stdout(&out)
    );
    drop(auth);
    fleet.assert_no_leftovers();
}

#[test]
fn logout_revokes_and_forgets() {
    let (fleet, auth) = oauth_fleet("oauth-logout", one_server, &[]);
    let (out, _) = login(&fleet, &[], true);
    assert_code(&out, 0);
    let (out, doc) = fleet.run_json(&["logout", "r"]);
    assert_code(&out, 0);
    assert_eq!(server(&doc, "r")["forgotten"], true, "{doc}");
    let revoked = auth.events("revoke");
    assert!(revoked.iter().any(|e| e["revoked"] == true), "{revoked:?}");
    assert!(!token_file(&fleet, "r").exists());
    let (out, doc) = fleet.run_json(&["check"]);
    assert_code(&out, 3);
    assert_eq!(server(&doc, "r")["error"]["kind"], "auth_required", "{doc}");
}

#[test]
fn a_denied_consent_and_a_login_nobody_completes_fail_with_what_to_do() {
    let (fleet, _auth) = oauth_fleet("oauth-denied", one_server, &["--deny"]);
    let (out, err) = login(&fleet, &["r"], true);
    assert_code(&out, 3);
    let doc = parse_doc(&out);
    assert_eq!(server(&doc, "r")["kind"], "auth_denied", "{doc}");
    assert!(err.contains("access_denied"), "{err}");
    assert!(err.contains("mcpfleet login r"), "{err}");
    assert!(!token_file(&fleet, "r").exists());

    let (out, err) = login(&fleet, &["r", "--timeout", "1s"], false);
    assert_code(&out, 4);
    assert_eq!(server(&parse_doc(&out), "r")["kind"], "timeout");
    assert!(err.contains("no redirect came within 1s"), "{err}");
}

#[test]
fn a_scope_the_grant_lacks_asks_for_a_login_that_asks_for_both() {
    let (fleet, auth) = oauth_fleet(
        "oauth-step-up",
        |base| {
            format!(
                "version: 1\nservers:\n  r:\n    url: {base}/mcp\n    auth: {{oauth: {{scopes: [\"mcp:read\"]}}}}\n"
            )
        },
        &[],
    );
    let (out, _) = login(&fleet, &[], true);
    assert_code(&out, 0);
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    let (out, doc) = fleet.run_json(&["call", "r", "write"]);
    assert_code(&out, 3);
    assert_eq!(doc["error"]["kind"], "auth_required", "{doc}");
    let said = doc.to_string();
    assert!(
        said.contains("mcp:write") && said.contains("mcpfleet login r"),
        "{said}"
    );
    let (_, doc) = fleet.run_json(&["status", "r"]);
    assert_eq!(server(&doc, "r")["auth"]["state"], "needs_login", "{doc}");
    // The second login asks for what was granted and what the server wants.
    let (out, _) = login(&fleet, &[], true);
    assert_code(&out, 0);
    let asked: Vec<String> = auth
        .events("authorize")
        .iter()
        .map(|e| e["scope"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[1].contains("mcp:read") && asked[1].contains("mcp:write"),
        "{asked:?}"
    );
    // The running server takes the new token at its next request.
    let (out, doc) = fleet.run_json(&["call", "r", "write"]);
    assert_code(&out, 0);
    let (_, status) = fleet.run_json(&["status", "r"]);
    assert_eq!(
        server(&status, "r")["auth"]["state"],
        "valid",
        "{status} {doc}"
    );
    let (out, _) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    drop(auth);
    fleet.assert_no_leftovers();
}

/// A POST of `form` to `url`, as the authorization server's clients send.
fn post_form(url: &str, form: &str) {
    let out = Command::new(python())
        .args([
            "-c",
            "import sys, urllib.request\nurllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={'Content-Type': 'application/x-www-form-urlencoded'}), timeout=20).read()\n",
            url,
            form,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_refresh_the_authorization_server_refuses_needs_a_login_and_says_so() {
    let (fleet, auth) = oauth_fleet("oauth-refused", one_server, &["--token-ttl", "10"]);
    let (out, _) = login(&fleet, &[], true);
    assert_code(&out, 0);
    let (out, _) = fleet.run_json(&["up"]);
    assert_code(&out, 0);
    // The grant is revoked behind mcpfleet's back.
    let refresh = kept_tokens(&fleet, "r").pop().unwrap();
    post_form(
        &format!("{}/revoke", auth.base),
        &format!("token={refresh}"),
    );
    std::thread::sleep(Duration::from_millis(6500));
    let (out, doc) = fleet.run_json(&["call", "r", "whoami"]);
    assert_code(&out, 3);
    assert_eq!(doc["error"]["kind"], "auth_required", "{doc}");
    assert!(doc.to_string().contains("mcpfleet login r"), "{doc}");
    let refreshes = auth.refreshes();
    assert_eq!(
        refreshes.len(),
        1,
        "no retry of a refused refresh: {refreshes:?}"
    );
    assert_eq!(refreshes[0]["ok"], false);
    let (out, doc) = fleet.run_json(&["status", "r"]);
    assert_code(&out, 3);
    let state = &server(&doc, "r")["auth"];
    assert_eq!(state["state"], "needs_login", "{doc}");
    let out = fleet.run(&["status"]);
    assert!(stdout(&out).contains("auth: needs login (the authorization server refused to refresh the grant): run `mcpfleet login r`"), "{}", stdout(&out));
    assert_hidden("status", &doc.to_string(), &[refresh]);
    let (out, _) = fleet.run_json(&["down"]);
    assert_code(&out, 0);
    drop(auth);
    fleet.assert_no_leftovers();
}

#[test]
fn ci_starts_from_a_refresh_token_in_the_environment_and_keeps_its_rotation() {
    // A developer's login gives the refresh token CI is handed.
    let (dev, auth) = oauth_fleet("oauth-seed", one_server, &[]);
    let (out, _) = login(&dev, &[], true);
    assert_code(&out, 0);
    let seed = kept_tokens(&dev, "r").pop().unwrap();
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(token_file(&dev, "r")).unwrap()).unwrap();
    let client_id =
        doc["grants"].as_object().unwrap().values().next().unwrap()["credentials"]["client_id"]
            .as_str()
            .unwrap()
            .to_owned();
    let ci = TestFleet::raw(
        "oauth-seed-ci",
        &format!(
            "version: 1\nservers:\n  r:\n    url: {}/mcp\n    auth:\n      oauth:\n        client_id: {client_id}\n        refresh_token: ${{env:SEED_TOKEN}}\n",
            auth.base
        ),
    );
    let run = |args: &[&str]| {
        let mut cmd = ci.command(&["--output", "json"]);
        cmd.args(args).env("SEED_TOKEN", &seed);
        run_bounded(cmd, Duration::from_secs(60))
    };
    let out = run(&["check"]);
    assert_code(&out, 0);
    assert_hidden(
        "check",
        &format!("{}{}", stdout(&out), stderr(&out)),
        std::slice::from_ref(&seed),
    );
    // The seed was exchanged once, and its rotation is what is kept now.
    let kept = kept_tokens(&ci, "r");
    assert_eq!(kept.len(), 2);
    assert_ne!(kept[1], seed);
    let out = run(&["check"]);
    assert_code(&out, 0);
    assert_eq!(auth.refreshes().len(), 1, "{:?}", auth.refreshes());
    assert_hidden(
        "the state directory",
        &state_files_text(&ci),
        &[seed, kept[1].clone()],
    );
}

#[test]
fn a_forged_redirect_and_a_taken_port_are_refused_with_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (fleet, _auth) = oauth_fleet(
        "oauth-forged",
        |base| {
            format!(
                "version: 1\nservers:\n  r:\n    url: {base}/mcp\n    auth: oauth\n  p:\n    url: {base}/mcp\n    auth: {{oauth: {{redirect_port: {port}}}}}\n"
            )
        },
        &[],
    );
    let (out, err) = login(&fleet, &["p"], false);
    assert_code(&out, 2);
    assert_eq!(server(&parse_doc(&out), "p")["kind"], "port_taken");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("redirect_port"),
        "{err}"
    );
    drop(taken);

    // A redirect with another `state` than the login sent is refused.
    let started = start_login(fleet.command(&["--output", "json", "login", "--no-browser", "r"]));
    let redirect = url::Url::parse(&started.url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "redirect_uri")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    open_in_browser(&format!("{redirect}?code=forged&state=not-the-one"));
    let out = started.child.wait_with_output().unwrap();
    assert_code(&out, 3);
    assert_eq!(server(&parse_doc(&out), "r")["kind"], "auth_wrong_state");
    assert!(!token_file(&fleet, "r").exists());
}

/// A private session bus with a Secret Service (GNOME Keyring) in a temporary
/// home, tagged with the fleet's test id; ended when dropped.
struct SecretService {
    bus: String,
    pid: i32,
    _home: tempfile::TempDir,
}

impl SecretService {
    fn start(fleet: &TestFleet) -> SecretService {
        use std::io::Write;
        let home = tempfile::tempdir().unwrap();
        let out = Command::new("dbus-daemon")
            .args(["--session", "--fork", "--print-address=1", "--print-pid=1"])
            .env("HOME", home.path())
            .env(TEST_ID_VAR, &fleet.test_id)
            .output()
            .expect("dbus-daemon (package dbus-daemon) runs");
        let out = String::from_utf8(out.stdout).unwrap();
        let mut lines = out.lines();
        let bus = lines.next().unwrap().to_owned();
        let pid = lines.next().unwrap().trim().parse().unwrap();
        let service = SecretService {
            bus,
            pid,
            _home: home,
        };
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--unlock", "--components=secrets"])
            .env("HOME", service._home.path())
            .env("XDG_DATA_HOME", service._home.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &service.bus)
            .env(TEST_ID_VAR, &fleet.test_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon (package gnome-keyring) runs");
        keyring.stdin.take().unwrap().write_all(b"test").unwrap();
        assert!(keyring.wait().unwrap().success());
        service
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        // The keyring daemon leaves with its bus.
        kill_all(&[self.pid]);
    }
}

#[test]
fn tokens_kept_in_the_desktop_keyring_serve_like_the_files_and_leave_no_token_on_disk() {
    let (fleet, auth) = oauth_fleet(
        "oauth-keyring",
        |base| {
            format!(
                "version: 1\nservers:\n  r:\n    url: {base}/mcp\n    auth: {{oauth: {{store: keyring}}}}\n"
            )
        },
        &[],
    );
    let service = SecretService::start(&fleet);
    let with_bus = |args: &[&str]| {
        let mut cmd = fleet.command(&["--output", "json"]);
        cmd.args(args).env("DBUS_SESSION_BUS_ADDRESS", &service.bus);
        run_bounded(cmd, Duration::from_secs(60))
    };
    // The login, with the bus, completed by "a browser".
    let mut login = fleet.command(&["--output", "json", "login", "--no-browser"]);
    login.env("DBUS_SESSION_BUS_ADDRESS", &service.bus);
    let (out, _) = login_with(login, true);
    assert_code(&out, 0);
    // Nothing of the grant is on disk: only the lock file.
    assert!(!token_file(&fleet, "r").exists());
    let out = with_bus(&["check"]);
    assert_code(&out, 0);
    let tokens: Vec<String> = auth
        .events("token")
        .iter()
        .filter_map(|e| e["access_token"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tokens.len(), 1, "one token, from the login");
    let requests = auth.events("request");
    assert!(
        requests
            .iter()
            .any(|e| e["method"] == "tools/list" && e["token"] == tokens[0].as_str()),
        "{requests:?}"
    );
    let status = parse_doc(&with_bus(&["status", "r"]));
    assert_eq!(server(&status, "r")["auth"]["state"], "valid", "{status}");
    let out = with_bus(&["logout", "r"]);
    assert_code(&out, 0);
    assert_eq!(server(&parse_doc(&out), "r")["forgotten"], true);
    let out = with_bus(&["check"]);
    assert_code(&out, 3);
    drop(service);
    drop(auth);
    fleet.assert_no_leftovers();
}

#[test]
fn offline_access_false_asks_for_no_refresh_token() {
    let (fleet, auth) = oauth_fleet(
        "oauth-online",
        |base| {
            format!(
                "version: 1\nservers:\n  r:\n    url: {base}/mcp\n    auth: {{oauth: {{scopes: [\"mcp:read\"], offline_access: false}}}}\n"
            )
        },
        &[],
    );
    let (out, _) = login(&fleet, &[], true);
    assert_code(&out, 0);
    let asked: Vec<Value> = auth.events("authorize");
    assert_eq!(asked.len(), 1);
    // Asked for without `offline_access` (whether a refresh token comes all
    // the same is the authorization server's choice).
    assert_eq!(asked[0]["scope"], "mcp:read", "{asked:?}");
}
