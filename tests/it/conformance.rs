//! The gateway against the official MCP conformance suite (npm
//! `@modelcontextprotocol/conformance`, 0.1.16 and 0.2.0-alpha.12, run with the node
//! 22 they need; `.ci/install-servers` installs them under `.cache/conformance-*`),
//! in its server mode: the suite plays the client and scores the server at a URL.
//!
//! The server behind the gateway is `tests/conformance/member.mjs`, written to pass
//! the suite's server scenarios. Each run of the suite (0.1.16's default suite;
//! 0.2.0-alpha.12 with `--requirements 2025-11-25` and with `--requirements
//! 2026-07-28`) goes three ways: straight to the member over HTTP, through `serve`
//! with the member as a remote (HTTP) server, and through `serve` with the member
//! as a stdio server, both with `prefix: ""` so that names are the member's own.
//! Behind `serve` the member serves both eras for the runs of 0.1.16 and at
//! 2025-11-25 (the gateway speaks it the legacy era), and the 2026-07-28 era alone
//! (`--modern-only`) for the run at 2026-07-28, so that the gateway speaks that era
//! to it and its tasks (an extension of that era) can pass through.
//! A scenario passes when none of its checks (each scenario's `checks.json` in the
//! suite's `-o` directory) is a `FAILURE` or a `WARNING`.
//!
//! What the test holds to:
//! - straight to the member, every scenario passes except those listed in
//!   `tests/conformance/member-gaps.yml` (what the member does not implement);
//! - through `serve`, every scenario that passes straight to the member passes too,
//!   except those listed in `tests/conformance/gateway-gaps.yml`, per run and per
//!   member transport, each with the reason;
//! - an entry of either file whose scenario passes (or did not run) is stale and fails
//!   the test, so the lists only shrink.
//!
//! The suite sends no `Authorization` header, and `serve` wants one on every
//! request: a proxy in this test stands in front of the door and adds the bearer
//! token to each request, passing everything else (every other header, bodies, SSE
//! streams) through byte for byte, so `Host` and `Origin` reach the gateway as the
//! suite sent them (`dns-rebinding-protection` depends on it).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::common::*;

/// The bound on one run of the suite: its scenarios wait 30 s at most for a server
/// that does not answer, and a run has about 50 of them.
const RUN_LIMIT: Duration = Duration::from_secs(240);

/// One run of the suite: the version and its arguments.
struct Run {
    /// How the gap files name it.
    name: &'static str,
    version: &'static str,
    args: &'static [&'static str],
}

const RUNS: &[Run] = &[
    Run {
        name: "0.1.16",
        version: "0.1.16",
        args: &[],
    },
    Run {
        name: "0.2.0-alpha.12 2025-11-25",
        version: "0.2.0-alpha.12",
        args: &["--requirements", "2025-11-25"],
    },
    Run {
        name: "0.2.0-alpha.12 2026-07-28",
        version: "0.2.0-alpha.12",
        args: &["--requirements", "2026-07-28"],
    },
];

/// What a scenario's checks said: the failing ones (`FAILURE`, `WARNING`) with their
/// messages; none means it passed.
type Outcomes = BTreeMap<String, Vec<String>>;

/// `run → scenario → reason` (member-gaps.yml).
type MemberGaps = BTreeMap<String, BTreeMap<String, String>>;
/// `run → member transport → scenario → gap` (gateway-gaps.yml).
type GatewayGaps = BTreeMap<String, BTreeMap<String, BTreeMap<String, Gap>>>;

/// A scenario that passes straight to the member but not through `serve`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Gap {
    /// It fails every time, for this reason.
    Fails(String),
    /// It fails in some runs and passes in others.
    Intermittent(Intermittent),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Intermittent {
    /// Why, when it fails.
    intermittent: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn node() -> PathBuf {
    published_servers().join("inspector/node_modules/node/bin/node")
}

fn member_script() -> PathBuf {
    root().join("tests/conformance/member.mjs")
}

/// The member over HTTP, tagged with `fleet`'s test id (of the 2026-07-28 era
/// alone when `modern_only`); its URL.
pub(crate) fn http_member(fleet: &TestFleet, modern_only: bool) -> (Child, String) {
    http_member_with(fleet, if modern_only { &["--modern-only"] } else { &[] })
}

/// The member over HTTP with `flags`, tagged with `fleet`'s test id; its URL.
pub(crate) fn http_member_with(fleet: &TestFleet, flags: &[&str]) -> (Child, String) {
    let mut child = Command::new(node())
        .arg(member_script())
        .args(["http", "0"])
        .args(flags)
        .env(TEST_ID_VAR, &fleet.test_id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the member");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .expect("the member's port");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the member printed {line:?}, not its port"));
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs the suite against `url`, bounded; what each scenario's checks said.
fn run_suite(run: &Run, url: &str, fleet: &TestFleet, out: &Path) -> Outcomes {
    let cli = published_servers().join(format!(
        "conformance-{}/node_modules/@modelcontextprotocol/conformance/dist/index.js",
        run.version
    ));
    std::fs::create_dir_all(out).expect("the results directory");
    let mut child = Command::new(node())
        .arg(cli)
        .args(["server", "--url", url, "-o"])
        .arg(out)
        .args(run.args)
        .env(TEST_ID_VAR, &fleet.test_id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the conformance suite");
    let deadline = Instant::now() + RUN_LIMIT;
    while child.try_wait().expect("wait for the suite").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the conformance suite {} against {url} did not finish within {RUN_LIMIT:?}",
                run.name
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("the suite's output");
    let log = [output.stdout.as_slice(), output.stderr.as_slice()].concat();
    std::fs::write(out.with_extension("log"), &log).expect("write the suite's log");
    let outcomes = read_outcomes(out);
    assert!(
        !outcomes.is_empty(),
        "the suite {} against {url} wrote no results; it said:\n{}",
        run.name,
        String::from_utf8_lossy(&log)
    );
    outcomes
}

/// The suite's `-o` directory: `server-<scenario>-<timestamp>/checks.json` per
/// scenario.
fn read_outcomes(dir: &Path) -> Outcomes {
    let stamp = regex::Regex::new(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[0-9-]+Z$").unwrap();
    let mut outcomes = Outcomes::new();
    for entry in std::fs::read_dir(dir).expect("the results directory") {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let scenario = stamp
            .captures(&name)
            .unwrap_or_else(|| panic!("a result directory named {name}"))[1]
            .to_owned();
        let path = entry.path().join("checks.json");
        if !path.exists() {
            // The suite writes no checks when the scenario itself throws.
            outcomes.insert(
                scenario,
                vec!["the suite wrote no checks.json: the scenario threw (its error is in the output of the suite, which MCPFLEET_CONFORMANCE_RESULTS keeps)".into()],
            );
            continue;
        }
        let checks: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let failing = checks
            .as_array()
            .expect("checks.json is an array")
            .iter()
            .filter(|c| matches!(c["status"].as_str(), Some("FAILURE" | "WARNING")))
            .map(|c| {
                format!(
                    "{} {}: {}",
                    c["status"].as_str().unwrap_or(""),
                    c["id"].as_str().unwrap_or("?"),
                    c["errorMessage"].as_str().unwrap_or("(no message)")
                )
            })
            .collect();
        assert!(
            outcomes.insert(scenario.clone(), failing).is_none(),
            "{scenario} ran twice in {}",
            dir.display()
        );
    }
    outcomes
}

fn gaps<T: serde::de::DeserializeOwned + Default>(file: &str) -> T {
    let path = root().join("tests/conformance").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let parsed: Option<T> =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parsed.unwrap_or_default()
}

// ---------------------------------------------------------------------------------
// The proxy that adds the token

/// Accepts connections on `listener` and relays each to `upstream`, adding
/// `Authorization: Bearer TOKEN` to every request on it; responses, bodies and
/// every other header pass unchanged.
async fn proxy(listener: TcpListener, upstream: SocketAddr, token: String) {
    while let Ok((client, _)) = listener.accept().await {
        let token = token.clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                let _ = relay(client, server, &token).await;
            }
        });
    }
}

async fn relay(client: TcpStream, server: TcpStream, token: &str) -> std::io::Result<()> {
    let (client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let mut from_client = BufReader::new(client_read);
    let auth = format!("Authorization: Bearer {token}\r\n");
    'requests: loop {
        // The request line and the headers, the token after the request line.
        let mut length = 0u64;
        let mut chunked = false;
        let mut first = true;
        loop {
            let mut line = Vec::new();
            if from_client.read_until(b'\n', &mut line).await? == 0 {
                break 'requests;
            }
            server_write.write_all(&line).await?;
            if first {
                server_write.write_all(auth.as_bytes()).await?;
                first = false;
                continue;
            }
            if line == b"\r\n" || line == b"\n" {
                break;
            }
            let text = String::from_utf8_lossy(&line).to_ascii_lowercase();
            if let Some(v) = text.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            } else if let Some(v) = text.strip_prefix("transfer-encoding:") {
                chunked = v.contains("chunked");
            }
        }
        if chunked {
            loop {
                let mut size_line = Vec::new();
                if from_client.read_until(b'\n', &mut size_line).await? == 0 {
                    break 'requests;
                }
                server_write.write_all(&size_line).await?;
                let size = String::from_utf8_lossy(&size_line);
                let size = u64::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
                    .unwrap_or(0);
                // The chunk and its CRLF; after the last one, the trailers' end.
                copy_exactly(&mut from_client, &mut server_write, size + 2).await?;
                if size == 0 {
                    break;
                }
            }
        } else {
            copy_exactly(&mut from_client, &mut server_write, length).await?;
        }
    }
    let _ = server_write.shutdown().await;
    let _ = down.await;
    Ok(())
}

async fn copy_exactly(
    from: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    n: u64,
) -> std::io::Result<()> {
    let copied = tokio::io::copy(&mut from.take(n), to).await?;
    if copied < n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// The test

/// One way to the member: straight, or through `serve` (behind the proxy).
struct Target {
    /// `direct`, `http` or `stdio`.
    name: &'static str,
    url: String,
    fleet: TestFleet,
    member: Option<Child>,
    /// Behind the gateway: a member of the 2026-07-28 era alone (for the run
    /// at 2026-07-28, so that the gateway speaks that era to it, as it does to
    /// a server that names no other), or one of both eras (for the other runs,
    /// spoken to in the legacy era). `None`: straight to a member, every run.
    modern_only: Option<bool>,
}

impl Target {
    /// Whether `run` goes to this target.
    fn takes(&self, run: &Run) -> bool {
        self.modern_only
            .is_none_or(|modern| modern == run.name.ends_with("2026-07-28"))
    }
}

#[test]
fn the_gateway_passes_the_conformance_scenarios_its_member_passes() {
    let started = Instant::now();
    let member_gaps: MemberGaps = gaps("member-gaps.yml");
    let gateway_gaps: GatewayGaps = gaps("gateway-gaps.yml");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // Straight to a member of its own.
    let direct_fleet = TestFleet::raw("conformance-direct", "version: 1\nservers: {}\n");
    let (direct_member, direct_url) = http_member(&direct_fleet, false);
    let mut targets = vec![Target {
        name: "direct",
        url: direct_url,
        fleet: direct_fleet,
        member: Some(direct_member),
        modern_only: None,
    }];
    // Through `serve`: the member as a remote server, and as a stdio one; of
    // both eras, and of 2026-07-28 alone.
    let mut behind = Vec::new();
    for modern_only in [false, true] {
        let (suffix, flag) = match modern_only {
            true => ("-modern", ", --modern-only"),
            false => ("", ""),
        };
        let http_fleet = TestFleet::raw(
            &format!("conformance-http{suffix}"),
            "version: 1\nservers: {}\n",
        );
        let (http_member_child, http_member_url) = http_member(&http_fleet, modern_only);
        std::fs::write(
            &http_fleet.path,
            format!(
                "version: 1\nservers:\n  member:\n    url: {http_member_url}\n    prefix: \"\"\n"
            ),
        )
        .unwrap();
        let stdio_fleet = TestFleet::raw(
            &format!("conformance-stdio{suffix}"),
            &format!(
                "version: 1\nservers:\n  member:\n    command: {}\n    args: [{}, stdio{flag}]\n    prefix: \"\"\n",
                quoted(&node()),
                quoted(&member_script())
            ),
        );
        behind.push(("http", http_fleet, Some(http_member_child), modern_only));
        behind.push(("stdio", stdio_fleet, None, modern_only));
    }
    for (name, fleet, member, modern_only) in behind {
        let door = serve(&fleet, &[]);
        let upstream: SocketAddr = door
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .expect("the door's address");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("the proxy's port");
        let port = listener.local_addr().unwrap().port();
        runtime.spawn(proxy(listener, upstream, door.token));
        targets.push(Target {
            name,
            url: format!("http://127.0.0.1:{port}/mcp"),
            fleet,
            member,
            modern_only: Some(modern_only),
        });
    }

    // Every run, the three ways at once. The suite's results stay in
    // MCPFLEET_CONFORMANCE_RESULTS when it names a directory.
    let scratch = tempfile::tempdir().unwrap();
    let results = std::env::var_os("MCPFLEET_CONFORMANCE_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().to_owned());
    assert!(
        std::fs::read_dir(&results).map_or(true, |mut d| d.next().is_none()),
        "MCPFLEET_CONFORMANCE_RESULTS={} is not empty: the suite's results go to a new or empty directory",
        results.display()
    );
    let mut outcomes: BTreeMap<(&str, &str), Outcomes> = BTreeMap::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| {
                let dir = results.join(target.name);
                scope.spawn(move || {
                    RUNS.iter()
                        .enumerate()
                        .filter(|(_, run)| target.takes(run))
                        .map(|(i, run)| {
                            let out = dir.join(i.to_string());
                            (run.name, run_suite(run, &target.url, &target.fleet, &out))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (target, handle) in targets.iter().zip(handles) {
            for (run, o) in handle.join().expect("a run of the suite") {
                outcomes.insert((run, target.name), o);
            }
        }
    });
    let took = started.elapsed();

    for target in &mut targets {
        if target.name != "direct" {
            let out = target.fleet.run(&["down"]);
            assert_code(&out, 0);
        }
        if let Some(mut member) = target.member.take() {
            let _ = member.kill();
            let _ = member.wait();
        }
    }
    drop(runtime);
    for target in &targets {
        target.fleet.assert_no_leftovers();
    }

    let problems = compare(&outcomes, &member_gaps, &gateway_gaps);
    eprintln!("conformance: {} suite runs in {took:.1?}", outcomes.len());
    assert!(
        problems.is_empty(),
        "{} conformance problem(s) (tests/conformance/*-gaps.yml name the known ones):\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

/// What is wrong with `outcomes` against the two gap files, one message each.
fn compare(
    outcomes: &BTreeMap<(&str, &str), Outcomes>,
    member_gaps: &MemberGaps,
    gateway_gaps: &GatewayGaps,
) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = BTreeMap::new();
    let no_gaps = BTreeMap::new();
    for run in member_gaps.keys().chain(gateway_gaps.keys()) {
        if !RUNS.iter().any(|r| r.name == run) {
            problems.push(format!(
                "a gap file names the run {run:?}, which the test does not run"
            ));
        }
    }
    for run in RUNS.iter().map(|r| r.name) {
        let direct = &outcomes[&(run, "direct")];
        let known = member_gaps.get(run).unwrap_or(&empty);
        for (scenario, failing) in direct {
            match (failing.is_empty(), known.get(scenario)) {
                (false, None) => problems.push(format!(
                    "[{run}] {scenario} fails straight to the member:\n  {}",
                    failing.join("\n  ")
                )),
                (true, Some(reason)) => problems.push(format!(
                    "[{run}] {scenario} passes straight to the member: its entry in member-gaps.yml ({reason}) is stale"
                )),
                _ => {}
            }
        }
        for scenario in known.keys().filter(|s| !direct.contains_key(*s)) {
            problems.push(format!(
                "[{run}] member-gaps.yml names {scenario}, which the run does not have"
            ));
        }
        let by_transport = gateway_gaps.get(run);
        for transport in ["http", "stdio"] {
            let through = &outcomes[&(run, transport)];
            let known = by_transport
                .and_then(|t| t.get(transport))
                .unwrap_or(&no_gaps);
            for (scenario, failing) in through {
                let passes_direct = direct.get(scenario).is_some_and(|f| f.is_empty());
                match (passes_direct, failing.is_empty(), known.get(scenario)) {
                    (true, false, None) => problems.push(format!(
                        "[{run}, {transport} member] {scenario} passes straight to the member but fails through serve:\n  {}",
                        failing.join("\n  ")
                    )),
                    (true, false, Some(Gap::Intermittent(Intermittent { intermittent }))) => {
                        eprintln!(
                            "conformance: [{run}, {transport} member] {scenario} failed this time, a known intermittent gap: {intermittent}"
                        );
                    }
                    (true, true, Some(Gap::Fails(reason))) => problems.push(format!(
                        "[{run}, {transport} member] {scenario} passes through serve: its entry in gateway-gaps.yml ({reason}) is stale"
                    )),
                    (false, _, Some(_)) => problems.push(format!(
                        "[{run}, {transport} member] gateway-gaps.yml names {scenario}, which does not pass straight to the member"
                    )),
                    _ => {}
                }
            }
            for scenario in known.keys().filter(|s| !through.contains_key(*s)) {
                problems.push(format!(
                    "[{run}, {transport} member] gateway-gaps.yml names {scenario}, which the run does not have"
                ));
            }
        }
        if let Some(t) = by_transport {
            for transport in t
                .keys()
                .filter(|t| !["http", "stdio"].contains(&t.as_str()))
            {
                problems.push(format!(
                    "[{run}] gateway-gaps.yml names the member transport {transport:?}; there are http and stdio"
                ));
            }
        }
    }
    problems
}
