//! Shared harness of the integration tests: the real `mcpfleet` binary, the fixture
//! server, fleet files in temporary directories, and leak checks.
//!
//! Every process a test starts carries `MCPFLEET_TEST_ID=<unique id>` in its
//! environment, which every descendant inherits (a server that escapes its process
//! group with `setsid` too). `TestFleet::assert_no_leftovers` fails the test when any
//! process with its id is alive, and dropping a `TestFleet` SIGKILLs whatever is left,
//! so that a failing test does not leak into the next one. `.ci/run` checks again,
//! for every test id at once, after the whole suite.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) const TEST_ID_VAR: &str = "MCPFLEET_TEST_ID";

/// The `mcpfleet` binary under test.
pub(crate) fn mcpfleet_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpfleet"))
}

/// The fixture server, built once per test binary (it lives in its own package, so
/// cargo does not hand its path to this one).
pub(crate) fn fixture_bin() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "mcpfleet-fixture"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build -p mcpfleet-fixture");
        assert!(status.success(), "cargo build -p mcpfleet-fixture failed");
        // target/debug/deps/<test> -> target/debug/mcpfleet-fixture
        let exe = std::env::current_exe().expect("test exe path");
        let dir = exe.parent().and_then(Path::parent).expect("target dir");
        let path = dir.join("mcpfleet-fixture");
        assert!(path.exists(), "fixture not found at {}", path.display());
        path
    })
}

/// The cache of published servers (`.cache/`: npm packages in `npm/`, Python ones
/// in the virtualenv `venv/`), installed by `.ci/install-servers` on first use so
/// that `cargo test` works on a fresh machine.
pub(crate) fn published_servers() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new("bash")
            .arg(root.join(".ci/install-servers"))
            .current_dir(root)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "cannot install the published servers; run: bash .ci/install-servers (it needs npm and python3 with the package registries)"
        );
        root.join(".cache")
    })
}

fn unique_id(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{label}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A fleet file in its own temporary directory, and the processes started for it.
pub(crate) struct TestFleet {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub test_id: String,
}

impl TestFleet {
    /// A fleet file with `body` as its text.
    pub(crate) fn raw(label: &str, body: &str) -> TestFleet {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("mcpfleet.yaml");
        std::fs::write(&path, body).expect("write fleet file");
        TestFleet {
            dir,
            path,
            test_id: unique_id(label),
        }
    }

    /// A fleet of fixture servers: `(name, fixture args, extra server keys)`.
    pub(crate) fn fixtures(label: &str, servers: &[(&str, &[&str], &str)]) -> TestFleet {
        let mut body = String::from("version: 1\nservers:\n");
        for (name, args, extra) in servers {
            body.push_str(&fixture_server(name, args, extra));
        }
        TestFleet::raw(label, &body)
    }

    /// This fleet's state directory (inside the test's temporary directory).
    pub(crate) fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `mcpfleet -f <fleet> ARGS`, tagged with this test's id, with its own state
    /// directory.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(mcpfleet_bin());
        cmd.arg("-f")
            .arg(&self.path)
            .args(args)
            .env(TEST_ID_VAR, &self.test_id)
            .env("MCPFLEET_STATE_DIR", self.state_dir())
            .env_remove("RUST_LOG")
            .env_remove("MCPFLEET_FILE")
            .stdin(Stdio::null());
        cmd
    }

    /// Starts `mcpfleet ARGS` in the background with stdout and stderr captured.
    pub(crate) fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcpfleet")
    }

    /// Runs `mcpfleet` to its end, bounded: a hang fails the test instead of CI.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        run_bounded(self.command(args), Duration::from_secs(120))
    }

    /// Runs with `--output json` and parses the document.
    pub(crate) fn run_json(&self, args: &[&str]) -> (Output, Value) {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        let doc = parse_doc(&out);
        (out, doc)
    }

    /// The pid the supervisor wrote on the first line of `supervisor.lock`, if any
    /// (it may have exited since).
    pub(crate) fn lock_pid(&self) -> Option<i32> {
        lock_pid_in(&self.state_dir())
    }

    /// Living processes that carry this test's id.
    pub(crate) fn alive(&self) -> Vec<i32> {
        processes_with(&format!("{TEST_ID_VAR}={}", self.test_id))
    }

    /// Fails when anything this test started is still alive, after a grace for
    /// processes that are exiting right now (an idle supervisor lingers a few
    /// seconds before it exits).
    pub(crate) fn assert_no_leftovers(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let alive = self.alive();
            if alive.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                let described: Vec<String> = alive.iter().map(|p| describe(*p)).collect();
                kill_all(&alive);
                panic!("processes left behind: {}", described.join("; "));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestFleet {
    fn drop(&mut self) {
        kill_all(&self.alive());
    }
}

/// The YAML of one fixture server.
pub(crate) fn fixture_server(name: &str, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args
        .iter()
        .map(|a| serde_json::to_string(a).unwrap())
        .collect();
    let mut s = format!(
        "  {name}:\n    command: {}\n    args: [{}]\n",
        serde_json::to_string(fixture_bin().to_str().unwrap()).unwrap(),
        args.join(", ")
    );
    for line in extra.lines().filter(|l| !l.trim().is_empty()) {
        s.push_str("    ");
        s.push_str(line.trim());
        s.push('\n');
    }
    s
}

/// Runs a command with a hard limit; on timeout it is killed and the test fails.
pub(crate) fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpfleet");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for mcpfleet"),
        Err(_) => {
            unsafe { libc_kill(pid, 9) };
            panic!("mcpfleet did not finish within {limit:?}");
        }
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Sends SIGINT (a Ctrl-C) to `pid`.
pub(crate) fn sigint(pid: u32) {
    // SAFETY: kill(2) with the pid of a child this test started.
    unsafe { libc_kill(pid as i32, 2) };
}

/// Sends SIGKILL to each pid.
pub(crate) fn kill_all(pids: &[i32]) {
    for pid in pids {
        // SAFETY: kill(2) with a pid we found alive; a stale pid gets ESRCH.
        unsafe { libc_kill(*pid, 9) };
    }
}

/// Whether a process is alive (not a zombie).
pub(crate) fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Living processes whose environment contains `entry` (`NAME=VALUE`), or, when
/// `entry` ends with `=`, any value of that variable.
pub(crate) fn processes_with(entry: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let hit = environ.split(|b| *b == 0).any(|var| {
            if entry.ends_with('=') {
                var.starts_with(entry.as_bytes())
            } else {
                var == entry.as_bytes()
            }
        });
        if hit && is_alive(pid) {
            found.push(pid);
        }
    }
    found
}

fn describe(pid: i32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default();
    format!("{pid} ({})", cmdline.trim())
}

/// The pid on the first line of `supervisor.lock` in `state_dir`.
pub(crate) fn lock_pid_in(state_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(state_dir.join("supervisor.lock")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The JSON document a command printed; a test fails, showing both streams, when
/// there is none.
pub(crate) fn parse_doc(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            stdout(out),
            stderr(out)
        )
    })
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The exit code, with stdout and stderr in the message when it is not `want`.
#[track_caller]
pub(crate) fn assert_code(out: &Output, want: i32) {
    assert_eq!(
        out.status.code(),
        Some(want),
        "exit code\nstdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// The report entry of one server.
#[track_caller]
pub(crate) fn server<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["servers"]
        .as_array()
        .expect("servers array")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name} in {doc}"))
}

/// Reads the fixture's pid file: (pid, grandchildren).
pub(crate) fn read_pid_file(path: &Path) -> (i32, Vec<i32>) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let v: Value = serde_json::from_str(&text).expect("pid file is JSON");
            let pid = v["pid"].as_i64().unwrap() as i32;
            let gc = v["grandchildren"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_i64().unwrap() as i32)
                .collect();
            return (pid, gc);
        }
        assert!(
            Instant::now() < deadline,
            "no pid file at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// splitmix64: a tiny deterministic generator, so that randomized tests replay
/// from a seed. Every seed gives a good stream.
#[derive(Clone)]
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A duration of up to `ms` milliseconds (exclusive).
    pub(crate) fn millis_below(&mut self, ms: usize) -> Duration {
        Duration::from_millis(self.below(ms) as u64)
    }

    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A cgroup-v1 freezer cgroup of its own, for a process that no signal can end
/// until it is thawed (as a process stuck in the kernel would be): how the tests
/// make a teardown that cannot be confirmed. On drop, whatever is in it is thawed,
/// killed and waited for, and the cgroup is removed.
pub(crate) struct Freezer {
    pub dir: PathBuf,
}

/// Where the cgroup-v1 freezer hierarchy is mounted.
const FREEZER_ROOT: &str = "/sys/fs/cgroup/freezer";

impl Freezer {
    pub(crate) fn new(label: &str) -> Freezer {
        assert!(
            Path::new(FREEZER_ROOT).join("freezer.state").exists()
                || Path::new(FREEZER_ROOT).join("cgroup.procs").exists(),
            "these tests freeze a process to make a teardown fail: they need the cgroup-v1 \
             freezer mounted at {FREEZER_ROOT} and permission to create a cgroup in it (root)"
        );
        Freezer {
            dir: Path::new(FREEZER_ROOT).join(unique_id(label)),
        }
    }

    /// The cgroup's path, for the fixture's `--frozen-grandchild`.
    pub(crate) fn path(&self) -> &str {
        self.dir.to_str().expect("utf-8 path")
    }

    /// The pids in the cgroup.
    pub(crate) fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Lets the frozen processes run again: a SIGKILL sent meanwhile takes effect.
    pub(crate) fn thaw(&self) {
        let _ = std::fs::write(self.dir.join("freezer.state"), "THAWED");
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        if !self.dir.exists() {
            return;
        }
        self.thaw();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = self.pids();
            kill_all(&pids);
            if pids.iter().all(|p| !is_alive(*p)) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The pids that the fixture's `--escape` descendants noted in `PID_FILE.escapees`,
/// once `n` of them have. Escapees that clear their environment carry no test id:
/// hold them in an [`Escapees`] so that a failing test still ends them.
pub(crate) fn wait_escapees(pid_file: &Path, n: usize) -> Escapees {
    let mut path = pid_file.as_os_str().to_owned();
    path.push(".escapees");
    let path = PathBuf::from(path);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return Escapees(pids);
        }
        assert!(
            Instant::now() < deadline,
            "{n} escapees expected in {}, found {pids:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Escaped processes of a test, killed when it ends whatever happened.
pub(crate) struct Escapees(pub Vec<i32>);

impl Drop for Escapees {
    fn drop(&mut self) {
        // Only a fixture: the pid of an escapee that is long gone may be reused.
        let ours: Vec<i32> = self
            .0
            .iter()
            .copied()
            .filter(|p| describe(*p).contains("mcpfleet-fixture"))
            .collect();
        kill_all(&ours);
    }
}

// ---------------------------------------------------------------------------------
// The gateway's tests (tests/it/gateway.rs, tests/it/inspector.rs): fleets of published
// servers, the HTTP door, the event log

/// The gateway's HTTP door, as `serve` reported it.
pub(crate) struct Http {
    pub url: String,
    pub token: String,
}

/// A path as a string in a fleet file (JSON quoting, which YAML reads).
pub(crate) fn quoted(path: &Path) -> String {
    serde_json::to_string(path.to_str().expect("utf-8 path")).unwrap()
}

/// The published server-everything, over stdio.
pub(crate) fn everything(name: &str) -> String {
    let script = published_servers()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    format!(
        "  {name}:\n    command: node\n    args: [{}, stdio]\n    connect_timeout: 60s\n",
        quoted(&script)
    )
}

/// A fleet of the servers given as YAML (`fixture_server`, `everything`, ...),
/// whose call results name the server and generation that answered
/// (`gateway.meta: true`).
pub(crate) fn fleet_of(label: &str, servers: &[String]) -> TestFleet {
    TestFleet::raw(
        label,
        &format!(
            "version: 1\ngateway:\n  meta: true\nservers:\n{}",
            servers.concat()
        ),
    )
}

/// Opens the HTTP door on a free loopback port (starting `servers`, all by
/// default) and checks what `serve` reports.
#[track_caller]
pub(crate) fn serve(fleet: &TestFleet, servers: &[&str]) -> Http {
    let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(servers);
    let (out, doc) = fleet.run_json(&args);
    assert_code(&out, 0);
    http_of(fleet, &doc)
}

/// The door a `serve` document reports; its token file is `gateway.token` in the
/// state directory.
#[track_caller]
pub(crate) fn http_of(fleet: &TestFleet, doc: &Value) -> Http {
    let gateway = &doc["gateway"];
    let url = gateway["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no url: {doc}"));
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{doc}"
    );
    assert_eq!(gateway["sessions"], 0, "{doc}");
    let token_file = PathBuf::from(gateway["token_file"].as_str().expect("token_file"));
    assert_eq!(
        std::fs::canonicalize(&token_file).expect("the token file exists"),
        std::fs::canonicalize(fleet.state_dir())
            .unwrap()
            .join("gateway.token"),
        "{doc}"
    );
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(token.len(), 64, "32 random bytes in hex");
    Http {
        url: url.to_owned(),
        token,
    }
}

/// The names of a server's tools, as `mcpfleet tools SERVER` lists them.
pub(crate) fn tools_of(fleet: &TestFleet, name: &str) -> Vec<String> {
    let (out, doc) = fleet.run_json(&["tools", name]);
    assert_code(&out, 0);
    server(&doc, name)["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of a call's result.
pub(crate) fn text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {result}"))
}

/// The gateway's lines of the event log.
pub(crate) fn gateway_events(fleet: &TestFleet) -> Vec<Value> {
    std::fs::read_to_string(fleet.state_dir().join("events.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("an event is JSON"))
        .filter(|e| e.get("gateway").is_some())
        .collect()
}

/// `down` of the whole fleet, then nothing of the test is left.
#[track_caller]
pub(crate) fn down_and_no_leftovers(fleet: &TestFleet) {
    let out = fleet.run(&["down"]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
}
