//! The coordination of a fleet that spans hosts (docs/design.md §19), against a
//! real etcd: three members on loopback (Debian's `etcd-server`, which
//! `.ci/install-etcd` installs), and three coordinators acting as three hosts.
//! Built with the `etcd` feature: `cargo test --features etcd --test etcd`.
//!
//! What is proven: a server is taken by one host at a time, whatever the race;
//! generations only grow; a change from a host that is not at the record's
//! revision, or whose lease is not the owner's, fails (fenced); a host whose
//! lease it cannot renew stops acting by its own deadline, before etcd expires
//! the lease, and a standby takes the server only once the owner's key is gone;
//! the fleet goes on when the etcd leader is killed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcpfleet::coordination::{CoordinationError, Coordinator};

/// Every process a test starts carries this variable (`.ci/leaks` looks for it).
const TEST_ID_VAR: &str = "MCPFLEET_TEST_ID";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three etcd members on loopback, killed when dropped.
struct Cluster {
    members: Vec<Child>,
    endpoints: Vec<String>,
    dir: tempfile::TempDir,
    /// `(client, peer)` port of each member.
    ports: Vec<(u16, u16)>,
    test_id: String,
}

impl Cluster {
    fn start(label: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let test_id = format!("{label}-{}", std::process::id());
        let mut cluster = Cluster {
            members: Vec::new(),
            endpoints: ports
                .iter()
                .map(|(client, _)| format!("http://127.0.0.1:{client}"))
                .collect(),
            dir,
            ports,
            test_id,
        };
        cluster.members = (0..3).map(|i| cluster.spawn(i)).collect();
        cluster
    }

    /// Starts member `i`; again after it was killed, on its own data.
    fn spawn(&self, i: usize) -> Child {
        let initial: Vec<String> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let (client, peer) = self.ports[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("m{i}.log")))
            .unwrap();
        Command::new("etcd")
            .args(["--name", &format!("m{i}")])
            .arg("--data-dir")
            .arg(self.dir.path().join(format!("m{i}")))
            .args([
                "--listen-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args([
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-token", &self.test_id])
            .args(["--initial-cluster-state", "new"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .env(TEST_ID_VAR, &self.test_id)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("etcd (Debian's etcd-server; .ci/install-etcd installs it)")
    }

    fn kill(&mut self, member: usize) {
        let _ = self.members[member].kill();
        let _ = self.members[member].wait();
    }

    fn restart(&mut self, member: usize) {
        self.kill(member);
        self.members[member] = self.spawn(member);
    }

    /// The member that leads now, by index.
    async fn leader(&self) -> Option<usize> {
        let mut client = etcd_client::Client::connect(&self.endpoints, None)
            .await
            .ok()?;
        let status = client.status().await.ok()?;
        let leader = status.leader();
        let members = client.member_list().await.ok()?;
        let name = members
            .members()
            .iter()
            .find(|m| m.id() == leader)?
            .name()
            .to_owned();
        name.strip_prefix('m')?.parse().ok()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// Joins `host` once the cluster answers (it elects a leader first).
async fn join(cluster: &Cluster, prefix: &str, host: &str, ttl: Duration) -> Coordinator {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Coordinator::join(&cluster.endpoints, None, prefix, host, ttl).await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("{host} could not join: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("m0.log")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_taken_by_one_host_at_a_time_and_generations_only_grow() {
    let cluster = Cluster::start("etcd-take");
    let ttl = Duration::from_secs(10);
    let hosts = [
        join(&cluster, "/fleet-a", "a", ttl).await,
        join(&cluster, "/fleet-a", "b", ttl).await,
        join(&cluster, "/fleet-a", "c", ttl).await,
    ];
    assert_eq!(hosts[0].hosts().await.unwrap().len(), 3);
    // The three race for the same server.
    let (ra, rb, rc) = tokio::join!(
        hosts[0].take("s", 0, "{\"phase\":\"starting\"}"),
        hosts[1].take("s", 0, "{\"phase\":\"starting\"}"),
        hosts[2].take("s", 0, "{\"phase\":\"starting\"}"),
    );
    let results = [ra, rb, rc];
    let winners: Vec<usize> = (0..3).filter(|i| results[*i].is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let w = winners[0];
    let owner = hosts[w].host().to_owned();
    for (i, r) in results.iter().enumerate() {
        if i != w {
            match r {
                Err(CoordinationError::Owned { host, .. }) => assert_eq!(*host, owner),
                other => panic!("{other:?}"),
            }
        }
    }
    let taken = results[w].as_ref().unwrap();
    let record = hosts[w].server("s").await.unwrap();
    assert_eq!(record.owner.as_deref(), Some(owner.as_str()));
    assert_eq!(record.revision, taken.revision);

    // The owner moves the record on; a change at the old revision is fenced,
    // and so is one from another host, whatever revision it names.
    let running = hosts[w]
        .update("s", taken.revision, "{\"phase\":\"running\"}")
        .await
        .unwrap();
    assert!(running > taken.revision);
    assert!(matches!(
        hosts[w].update("s", taken.revision, "{}").await,
        Err(CoordinationError::Fenced { .. })
    ));
    let other = (w + 1) % 3;
    assert!(matches!(
        hosts[other].update("s", running, "{}").await,
        Err(CoordinationError::Fenced { .. })
    ));
    // Given up, it is another host's to take, under a greater generation.
    let released = hosts[w]
        .release("s", running, "{\"phase\":\"stopped\"}")
        .await
        .unwrap();
    assert!(matches!(
        hosts[other].take("s", taken.revision, "{}").await,
        Err(CoordinationError::Fenced { .. })
    ));
    let next = hosts[other]
        .take("s", released, "{\"phase\":\"starting\"}")
        .await
        .unwrap();
    assert!(next.generation > taken.generation);
    assert_eq!(
        hosts[w].server("s").await.unwrap().owner.as_deref(),
        Some(hosts[other].host())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_cannot_renew_its_lease_stops_by_its_own_deadline_and_a_standby_takes_over() {
    let cluster = Cluster::start("etcd-fence");
    // A short TTL, and the take right after the join: on a loaded machine the
    // owner's first renewal may come late, and it would then (rightly) refuse.
    let ttl = Duration::from_secs(3);
    let owner = join(&cluster, "/fleet-b", "owner", ttl).await;
    let taken = owner.take("s", 0, "{\"phase\":\"running\"}").await.unwrap();
    let standby = join(&cluster, "/fleet-b", "standby", Duration::from_secs(10)).await;
    // The owner is cut off from renewing (a pause, a partition): from its own
    // deadline on it may not act, before etcd expires its lease.
    owner.stop_renewing();
    let cut = Instant::now();
    while owner.confirmed().is_ok() {
        assert!(cut.elapsed() < ttl, "the owner still acts past its TTL");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fenced_after = cut.elapsed();
    assert!(matches!(
        owner.update("s", taken.revision, "{}").await,
        Err(CoordinationError::Unconfirmed(_))
    ));
    // etcd still holds the owner's key: no standby may take the server yet.
    assert!(
        matches!(
            standby.take("s", taken.revision, "{}").await,
            Err(CoordinationError::Owned { .. })
        ),
        "taken {fenced_after:?} after the cut"
    );
    // Once the lease has expired (and a lock delay), the standby takes it.
    let lock_delay = Duration::from_millis(500);
    let deadline = Instant::now() + Duration::from_secs(15);
    let next = loop {
        match standby
            .take("s", taken.revision, "{\"phase\":\"starting\"}")
            .await
        {
            Ok(next) => break next,
            Err(CoordinationError::Owned { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(lock_delay).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    let taken_over = cut.elapsed();
    assert!(next.generation > taken.generation);
    assert!(
        taken_over >= ttl,
        "taken over {taken_over:?} after the cut, before the TTL ran out"
    );
    // Even a release, which a fenced host may still try, cannot touch it now.
    assert!(matches!(
        owner.release("s", taken.revision, "{}").await,
        Err(CoordinationError::Fenced { .. })
    ));
    println!(
        "fenced itself {fenced_after:?} after the cut; taken over {taken_over:?} after it (ttl {ttl:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_goes_on_when_an_etcd_member_is_killed() {
    let mut cluster = Cluster::start("etcd-member");
    let ttl = Duration::from_secs(10);
    let a = join(&cluster, "/fleet-c", "a", ttl).await;
    let first = a.take("s1", 0, "{}").await.unwrap();
    cluster.kill(0);
    // The other two elect a leader if the killed one was it; the client turns
    // to them.
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        match a.take("s2", 0, "{}").await {
            Ok(t) => break t,
            Err(e) if Instant::now() > deadline => {
                panic!("{e}\n{}", log_of(cluster.dir.path()))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert!(second.generation > first.generation);
    assert!(a.confirmed().is_ok());
}

// --- Three supervisors as three hosts ----------------------------------------

/// A fleet file with `coordination:` and three supervisors, each with its own
/// state directory and host name, as three hosts; their servers are fixture
/// servers that journal their start and every call they serve.
struct Hosts {
    dir: tempfile::TempDir,
    file: std::path::PathBuf,
    journal: std::path::PathBuf,
    test_id: String,
    /// Each host's own etcd endpoints (`$MCPFLEET_ETCD`), when set.
    etcd_of: std::collections::HashMap<String, String>,
    /// More environment for each host's commands.
    env_of: std::collections::HashMap<String, Vec<(String, String)>>,
}

const HOSTS: [&str; 3] = ["a", "b", "c"];

fn fixture_bin() -> std::path::PathBuf {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "-p", "mcpfleet-fixture"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success());
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("mcpfleet-fixture")
}

impl Hosts {
    fn new(cluster: &Cluster, label: &str, servers: &[&str], ttl: &str, lock_delay: &str) -> Hosts {
        Hosts::with(cluster, label, servers, ttl, lock_delay, "")
    }

    /// As [`Hosts::new`], with `extra` (indented lines) under each server.
    fn with(
        cluster: &Cluster,
        label: &str,
        servers: &[&str],
        ttl: &str,
        lock_delay: &str,
        extra: &str,
    ) -> Hosts {
        let coordination = format!("  etcd: [{}]\n", cluster.endpoints.join(", "));
        Hosts::of(&coordination, label, servers, ttl, lock_delay, extra)
    }

    /// As [`Hosts::with`], `coordination` (indented lines) saying how etcd
    /// is reached.
    fn of(
        coordination: &str,
        label: &str,
        servers: &[&str],
        ttl: &str,
        lock_delay: &str,
        extra: &str,
    ) -> Hosts {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.ndjson");
        let fixture = fixture_bin();
        let mut body = format!(
            "version: 1\nname: {label}\ncoordination:\n{coordination}  ttl: {ttl}\n  lock_delay: {lock_delay}\nservers:\n"
        );
        for name in servers {
            body.push_str(&format!(
                "  {name}:\n    command: {}\n    args: [--journal, {}]\n{extra}",
                serde_json::to_string(fixture.to_str().unwrap()).unwrap(),
                serde_json::to_string(journal.to_str().unwrap()).unwrap(),
            ));
        }
        let file = dir.path().join("mcpfleet.yaml");
        std::fs::write(&file, body).unwrap();
        Hosts {
            file,
            journal,
            test_id: format!("{label}-{}", std::process::id()),
            dir,
            etcd_of: Default::default(),
            env_of: Default::default(),
        }
    }

    fn state_dir(&self, host: &str) -> std::path::PathBuf {
        self.dir.path().join(format!("state-{host}"))
    }

    /// `mcpfleet -f FILE ARGS` on `host`, bounded: what it wrote.
    fn output(&self, host: &str, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new("timeout");
        cmd.arg("120")
            .arg(env!("CARGO_BIN_EXE_mcpfleet"))
            .arg("-f")
            .arg(&self.file)
            .args(args);
        self.env(&mut cmd, host);
        cmd.stdin(Stdio::null()).output().unwrap()
    }

    /// `mcpfleet -f FILE --output json ARGS` on `host`, bounded.
    fn run(&self, host: &str, args: &[&str]) -> (i32, serde_json::Value) {
        let out = self.output(host, &[&["--output", "json"][..], args].concat());
        let code = out.status.code().unwrap_or(-1);
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "{host}: mcpfleet {args:?} exit {code}, no JSON: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (code, doc)
    }

    /// `mcpfleet -f FILE ARGS` on `host`, in the background.
    fn spawn(&self, host: &str, args: &[&str]) -> Child {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpfleet"));
        cmd.arg("-f").arg(&self.file).args(args);
        self.env(&mut cmd, host);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// `mcpfleet supervise` on `host`, once its supervisor holds its lock.
    fn supervise(&self, host: &str) -> Child {
        let child = self.spawn(host, &["supervise"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.processes_of(host).is_empty()
            || !self.state_dir(host).join("supervisor.lock").exists()
        {
            assert!(
                Instant::now() < deadline,
                "{host}'s supervisor did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    }

    /// What every command on `host` runs with.
    fn env(&self, cmd: &mut Command, host: &str) {
        cmd.env(TEST_ID_VAR, &self.test_id)
            .env("MCPFLEET_HOST", host)
            .env("MCPFLEET_STATE_DIR", self.state_dir(host))
            // Each host's gateway on a port of its own.
            .env("MCPFLEET_LISTEN", "127.0.0.1:0")
            .env_remove("RUST_LOG");
        for (name, value) in self.env_of.get(host).into_iter().flatten() {
            cmd.env(name, value);
        }
        match self.etcd_of.get(host) {
            Some(endpoints) => cmd.env("MCPFLEET_ETCD", endpoints),
            None => cmd.env_remove("MCPFLEET_ETCD"),
        };
    }

    /// `(state, generation, host)` of each server, as `status` on `host` shows it.
    fn placement(&self, host: &str) -> Vec<(String, String, Option<u64>, Option<String>)> {
        let (_, doc) = self.run(host, &["status"]);
        doc["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_owned(),
                    s["state"].as_str().unwrap().to_owned(),
                    s["generation"].as_u64(),
                    s["host"].as_str().map(str::to_owned),
                )
            })
            .collect()
    }

    /// Waits until `status` on `host` shows `server` running on a host that
    /// `pick` accepts; its host and generation.
    fn wait_running(
        &self,
        host: &str,
        server: &str,
        limit: Duration,
        pick: impl Fn(&str) -> bool,
    ) -> (String, u64) {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self.placement(host);
            let found = seen
                .iter()
                .find(|(name, state, _, on)| {
                    name == server && state == "running" && on.as_deref().is_some_and(&pick)
                })
                .map(|(_, _, g, on)| (on.clone().unwrap(), g.unwrap()));
            if let Some(found) = found {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{server} never ran as asked: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every living process of `host`: its supervisor, guardian and servers
    /// (they carry its state directory in their environment).
    fn processes_of(&self, host: &str) -> Vec<i32> {
        let entry = format!("MCPFLEET_STATE_DIR={}", self.state_dir(host).display());
        processes_with(&[&entry, &format!("{TEST_ID_VAR}={}", self.test_id)])
    }

    /// The pid of the supervisor of `host`.
    fn supervisor(&self, host: &str) -> i32 {
        let text = std::fs::read_to_string(self.state_dir(host).join("supervisor.lock")).unwrap();
        text.lines().next().unwrap().trim().parse().unwrap()
    }

    /// The fixture servers alive now, by their `MCPFLEET_TAG` (`scope:server:generation`).
    fn servers_alive(&self) -> Vec<(i32, String)> {
        let mut out = Vec::new();
        for pid in processes_with(&[&format!("{TEST_ID_VAR}={}", self.test_id)]) {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            if let Some(tag) = env
                .split(|b| *b == 0)
                .find_map(|e| e.strip_prefix(b"MCPFLEET_TAG="))
            {
                out.push((pid, String::from_utf8_lossy(tag).into_owned()));
            }
        }
        out
    }

    /// Waits until no process of the run is left (after `down`), or fails.
    fn assert_nothing_left(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let left = processes_with(&[&format!("{TEST_ID_VAR}={}", self.test_id)]);
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "left after down: {left:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `down` on `host`: nothing of the run is left, and the standby
    /// supervisor `standby` has exited cleanly.
    fn down_from(&self, host: &str, mut standby: Child) {
        let (code, doc) = self.run(host, &["down"]);
        assert_eq!(code, 0, "{doc}");
        self.assert_nothing_left(Duration::from_secs(20));
        assert!(standby.wait().unwrap().success());
    }

    fn journal(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.journal)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for pid in processes_with(&[&format!("{TEST_ID_VAR}={}", self.test_id)]) {
            unsafe_kill(pid, 9);
        }
    }
}

fn unsafe_kill(pid: i32, signal: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

/// Living processes whose environment holds every one of `entries`.
fn processes_with(entries: &[&str]) -> Vec<i32> {
    let mut out = Vec::new();
    for dir in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = dir.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(dir.path().join("environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        let zombie = std::fs::read_to_string(dir.path().join("stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if !zombie && entries.iter().all(|e| vars.contains(&e.as_bytes())) {
            out.push(pid);
        }
    }
    out
}

/// The checker of a run's journal: per server, generations start in
/// increasing order, and no call is served by a generation older than one
/// that has already served a call.
/// The server and generation of a journal line, from its `MCPFLEET_TAG`
/// (`scope:server:generation`).
fn tagged(line: &serde_json::Value) -> (String, u64) {
    let tag = line["tag"].as_str().unwrap_or_default();
    let mut parts = tag.rsplitn(3, ':');
    let generation: u64 = parts.next().and_then(|g| g.parse().ok()).unwrap_or(0);
    (parts.next().unwrap_or_default().to_owned(), generation)
}

fn check_journal(journal: &[serde_json::Value]) -> Vec<String> {
    let mut violations = Vec::new();
    let mut started: std::collections::HashMap<String, u64> = Default::default();
    let mut newest_call: std::collections::HashMap<String, u64> = Default::default();
    for line in journal {
        let (server, generation) = tagged(line);
        match line["event"].as_str() {
            Some("start") => {
                if let Some(last) = started.get(&server)
                    && *last >= generation
                {
                    violations.push(format!(
                        "{server}: generation {generation} started after {last}"
                    ));
                }
                started.insert(server, generation);
            }
            Some("call") => {
                let newest = newest_call.entry(server.clone()).or_insert(generation);
                if generation < *newest {
                    violations.push(format!(
                        "{server}: generation {generation} served a call after generation {newest} did"
                    ));
                }
                *newest = (*newest).max(generation);
            }
            _ => {}
        }
    }
    violations
}

/// Over etcd's history (L20): every generation the journal saw start is the
/// revision at which a host wrote its server's record taking it (`starting`),
/// not any other write.
async fn check_history(
    endpoints: &[String],
    prefix: &str,
    journal: &[serde_json::Value],
) -> Vec<String> {
    let mut client = etcd_client::Client::connect(endpoints, None).await.unwrap();
    let started: std::collections::BTreeSet<(String, u64)> = journal
        .iter()
        .filter(|l| l["event"] == "start")
        .map(tagged)
        .collect();
    let mut violations = Vec::new();
    for (server, generation) in started {
        let key = format!("{prefix}/servers/{server}/state");
        let at = etcd_client::GetOptions::new().with_revision(generation as i64);
        let found = match client.get(key, Some(at)).await {
            Ok(found) => found,
            Err(e) => {
                violations.push(format!("{server}: etcd's history at {generation}: {e}"));
                continue;
            }
        };
        match found.kvs().first() {
            Some(kv) if kv.mod_revision() == generation as i64 => {
                let record: serde_json::Value =
                    serde_json::from_slice(kv.value()).unwrap_or_default();
                if record["phase"] != "starting" {
                    violations.push(format!(
                        "{server}: generation {generation} is a write of {record}, not a take"
                    ));
                }
            }
            Some(kv) => violations.push(format!(
                "{server}: generation {generation} is no write of its record (last written at {})",
                kv.mod_revision()
            )),
            None => violations.push(format!("{server}: no record at revision {generation}")),
        }
    }
    violations
}

#[test]
fn the_checker_finds_what_it_looks_for() {
    let line = |event: &str, generation: u64| serde_json::json!({"event": event, "tag": format!("s0:alpha:{generation}")});
    assert!(
        check_journal(&[
            line("start", 5),
            line("call", 5),
            line("start", 9),
            line("call", 9)
        ])
        .is_empty()
    );
    assert_eq!(
        check_journal(&[line("start", 9), line("start", 5)]).len(),
        1
    );
    assert_eq!(
        check_journal(&[
            line("start", 5),
            line("start", 9),
            line("call", 9),
            line("call", 5)
        ])
        .len(),
        1
    );
}

#[test]
fn three_supervisors_run_each_server_once_and_a_lost_or_paused_host_is_taken_over() {
    let cluster = Cluster::start("hosts-takeover");
    wait_for_quorum(&cluster);
    let hosts = Hosts::new(&cluster, "takeover", &["alpha", "beta"], "3s", "1s");

    // `up` on the three hosts at once: each server runs on exactly one of them.
    std::thread::scope(|s| {
        let ups: Vec<_> = HOSTS
            .iter()
            .map(|h| s.spawn(|| hosts.run(h, &["up"])))
            .collect();
        for (host, up) in HOSTS.iter().zip(ups) {
            let (code, doc) = up.join().unwrap();
            assert_eq!(code, 0, "up on {host}: {doc}");
        }
    });
    let views: Vec<_> = HOSTS.iter().map(|h| hosts.placement(h)).collect();
    for view in &views {
        assert_eq!(view, &views[0], "every host shows the same fleet");
        for (name, state, generation, on) in view {
            assert_eq!(state, "running", "{name}: {view:?}");
            assert!(generation.is_some() && on.is_some(), "{name}: {view:?}");
        }
    }
    let alive = hosts.servers_alive();
    assert_eq!(alive.len(), 2, "one process per server: {alive:?}");
    let owner = views[0][0].3.clone().unwrap();
    let first = views[0][0].2.unwrap();
    let (code, doc) = hosts.run(&owner, &["call", "alpha", "echo"]);
    assert_eq!(code, 0, "{doc}");
    // A reconnect on another host names the owner instead of acting.
    let other = HOSTS.iter().find(|h| **h != owner).unwrap();
    let (code, doc) = hosts.run(other, &["reconnect", "alpha"]);
    assert_eq!(code, 6, "{doc}");
    assert_eq!(
        doc["servers"][0]["error"]["kind"], "owned_elsewhere",
        "{doc}"
    );
    assert_eq!(doc["servers"][0]["host"], owner.as_str(), "{doc}");

    // The owner of alpha is lost: its supervisor, guardian and servers SIGKILLed.
    let lost = hosts.processes_of(&owner);
    assert!(lost.len() >= 3, "{owner}: {lost:?}");
    let killed = Instant::now();
    for pid in &lost {
        unsafe_kill(*pid, 9);
    }
    let witness = HOSTS.iter().find(|h| **h != owner).unwrap();
    let (heir, second) =
        hosts.wait_running(witness, "alpha", Duration::from_secs(30), |h| h != owner);
    let takeover = killed.elapsed();
    eprintln!("takeover after a host loss: {takeover:?} (ttl 3s, lock delay 1s)");
    assert!(second > first, "generation {second} after {first}");
    // TTL + lock delay + a read period + the start, with room for a loaded machine.
    assert!(takeover < Duration::from_secs(15), "{takeover:?}");
    let (code, doc) = hosts.run(&heir, &["call", "alpha", "echo"]);
    assert_eq!(code, 0, "{doc}");

    // The heir is paused past its TTL: a third host takes alpha over, and the
    // paused one, once it runs again, tears its generation down (fenced).
    let paused = hosts.supervisor(&heir);
    let heirs_server: Vec<i32> = hosts
        .servers_alive()
        .into_iter()
        .filter(|(_, tag)| tag.ends_with(&format!(":alpha:{second}")))
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(heirs_server.len(), 1);
    unsafe_kill(paused, 19);
    let third_host = HOSTS.iter().find(|h| **h != owner && **h != heir).unwrap();
    let (on, third) = hosts.wait_running(third_host, "alpha", Duration::from_secs(30), |h| {
        h == *third_host
    });
    assert_eq!(on, *third_host);
    assert!(third > second);
    let (code, doc) = hosts.run(third_host, &["call", "alpha", "echo"]);
    assert_eq!(code, 0, "{doc}");
    unsafe_kill(paused, 18);
    let deadline = Instant::now() + Duration::from_secs(10);
    while heirs_server.iter().any(|p| {
        std::path::Path::new(&format!("/proc/{p}")).exists()
            && !std::fs::read_to_string(format!("/proc/{p}/stat"))
                .unwrap_or_default()
                .contains(") Z")
    }) {
        assert!(
            Instant::now() < deadline,
            "the paused host did not fence its generation"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // `down` on any host stops the fleet on every host, and every supervisor leaves.
    let (code, doc) = hosts.run(third_host, &["down"]);
    assert_eq!(code, 0, "{doc}");
    hosts.assert_nothing_left(Duration::from_secs(20));
    let violations = check_journal(&hosts.journal());
    assert!(
        violations.is_empty(),
        "{violations:?}\n{:?}",
        hosts.journal()
    );
}

/// Three etcd members; server gamma placed on host c only, c's supervisor
/// standing by, and `up` on a, which waits for c to take it: its answer.
fn gamma_placed_on_c(label: &str) -> (Cluster, Hosts, Child, serde_json::Value) {
    let cluster = Cluster::start(&format!("hosts-{label}"));
    wait_for_quorum(&cluster);
    let hosts = Hosts::with(
        &cluster,
        label,
        &["gamma"],
        "3s",
        "1s",
        "    placement: {hosts: [c]}\n    tools: {deny: [tool_3]}\n",
    );
    let c = hosts.supervise("c");
    let (code, doc) = hosts.run("a", &["up"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["servers"][0]["host"], "c", "{doc}");
    (cluster, hosts, c, doc)
}

#[test]
fn a_server_runs_only_where_it_is_placed() {
    // c's supervisor stands by; `up` on a, where gamma may not run, waits for
    // c to take it.
    let (_cluster, hosts, c, doc) = gamma_placed_on_c("placement");
    assert_eq!(doc["servers"][0]["state"], "running", "{doc}");
    let on_c: Vec<_> = hosts
        .servers_alive()
        .into_iter()
        .filter(|(pid, _)| hosts.processes_of("c").contains(pid))
        .collect();
    assert_eq!(on_c.len(), 1, "{on_c:?}");
    // b has never run a supervisor: its `status` reads etcd, and its `down`
    // stops the fleet on every host.
    let (code, doc) = hosts.run("b", &["status"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["servers"][0]["host"], "c", "{doc}");
    assert_eq!(doc["servers"][0]["state"], "running", "{doc}");
    assert!(
        !hosts.state_dir("b").join("supervisor.lock").exists()
            || hosts.processes_of("b").is_empty()
    );
    hosts.down_from("b", c);
}

#[test]
fn down_host_drains_one_host_and_the_others_take_its_servers() {
    let cluster = Cluster::start("hosts-drain");
    wait_for_quorum(&cluster);
    let hosts = Hosts::new(&cluster, "drain", &["alpha", "beta"], "3s", "1s");
    let (code, doc) = hosts.run("a", &["up"]);
    assert_eq!(code, 0, "{doc}");
    let (code, doc) = hosts.run("b", &["up"]);
    assert_eq!(code, 0, "{doc}");
    for server in &doc["servers"].as_array().unwrap()[..] {
        assert_eq!(server["host"], "a", "{doc}");
    }
    let a_servers: Vec<i32> = hosts
        .servers_alive()
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| hosts.processes_of("a").contains(pid))
        .collect();
    assert_eq!(a_servers.len(), 2);
    // Drained from b: a stops its servers and leaves, b takes them over.
    let (code, doc) = hosts.run("b", &["down", "--host", "a"]);
    assert_eq!(code, 0, "{doc}");
    for server in &doc["servers"].as_array().unwrap()[..] {
        assert_eq!(server["host"], "b", "{doc}");
        assert_eq!(server["state"], "running", "{doc}");
    }
    assert!(hosts.processes_of("a").is_empty(), "a left nothing behind");
    // `up` on a brings it back into the fleet, as a standby.
    let (code, doc) = hosts.run("a", &["up"]);
    assert_eq!(code, 0, "{doc}");
    assert!(!hosts.processes_of("a").is_empty());
    // A host drains itself the same way.
    let (code, doc) = hosts.run("b", &["down", "--host", "b"]);
    assert_eq!(code, 0, "{doc}");
    let (_, on) = hosts.wait_running("a", "alpha", Duration::from_secs(20), |h| h == "a");
    assert!(on > 0);
    let (code, doc) = hosts.run("a", &["down"]);
    assert_eq!(code, 0, "{doc}");
    hosts.assert_nothing_left(Duration::from_secs(20));
    // Without `coordination:` there is no host to drain: a usage error.
    let single = hosts.dir.path().join("single.yaml");
    std::fs::write(&single, "version: 1\nservers:\n  a: {command: x}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpfleet"))
        .arg("-f")
        .arg(&single)
        .args(["down", "--host", "a"])
        .env("MCPFLEET_STATE_DIR", hosts.dir.path().join("single-state"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_up_of_an_edited_file_on_any_host_converges_the_host_that_runs_the_server() {
    let cluster = Cluster::start("hosts-publish");
    wait_for_quorum(&cluster);
    let hosts = Hosts::new(&cluster, "publish", &["alpha", "beta"], "3s", "1s");
    let (code, doc) = hosts.run("a", &["up"]);
    assert_eq!(code, 0, "{doc}");
    let (code, doc) = hosts.run("b", &["up"]);
    assert_eq!(code, 0, "{doc}");
    let before = hosts.placement("b");
    assert!(
        before.iter().all(|p| p.3.as_deref() == Some("a")),
        "{before:?}"
    );
    let (code, _) = hosts.run("a", &["call", "alpha", "tool_4"]);
    assert_ne!(code, 0, "alpha has three tools at first");
    // alpha gets a fourth tool; the edit is taken up by `up` on b alone.
    let text = std::fs::read_to_string(&hosts.file).unwrap();
    let alpha_args = text.find("args: [--journal,").unwrap();
    let edited = format!(
        "{}args: [--tools, \"4\", --journal,{}",
        &text[..alpha_args],
        &text[alpha_args + "args: [--journal,".len()..]
    );
    std::fs::write(&hosts.file, edited).unwrap();
    let (code, doc) = hosts.run("b", &["up"]);
    assert_eq!(code, 0, "{doc}");
    let old = before.iter().find(|p| p.0 == "alpha").unwrap().2.unwrap();
    let (on, generation) = hosts.wait_running("b", "alpha", Duration::from_secs(20), |h| h == "a");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut now = (on, generation);
    while now.1 <= old {
        assert!(
            Instant::now() < deadline,
            "alpha was not restarted on a: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
        now = hosts.wait_running("b", "alpha", Duration::from_secs(5), |h| h == "a");
    }
    let (code, doc) = hosts.run("a", &["call", "alpha", "tool_4"]);
    assert_eq!(code, 0, "the host that runs alpha took the edit up: {doc}");
    let beta = hosts
        .placement("b")
        .into_iter()
        .find(|p| p.0 == "beta")
        .unwrap();
    let beta_before = before.iter().find(|p| p.0 == "beta").unwrap();
    assert_eq!(
        beta.2, beta_before.2,
        "beta did not change, and was not restarted"
    );
    let (code, doc) = hosts.run("b", &["down"]);
    assert_eq!(code, 0, "{doc}");
    hosts.assert_nothing_left(Duration::from_secs(20));
}

#[test]
fn a_server_that_cannot_start_on_its_host_is_given_up_and_runs_on_another() {
    let cluster = Cluster::start("hosts-give-up");
    wait_for_quorum(&cluster);
    let mut hosts = Hosts::new(&cluster, "giveup", &[], "3s", "1s");
    // The command comes from each host's environment: missing on a.
    let text = std::fs::read_to_string(&hosts.file).unwrap();
    std::fs::write(
        &hosts.file,
        format!("{text}  delta:\n    command: ${{env:DELTA_BIN}}\n"),
    )
    .unwrap();
    let fixture = fixture_bin().display().to_string();
    hosts.env_of.insert(
        "a".into(),
        vec![("DELTA_BIN".into(), "/nonexistent/delta".into())],
    );
    hosts
        .env_of
        .insert("b".into(), vec![("DELTA_BIN".into(), fixture)]);
    let mut standby = hosts.supervise("b");
    let (code, doc) = hosts.run("a", &["up"]);
    assert_eq!(code, 3, "the spawn fails on a: {doc}");
    // a gives delta up after two reads; b, a standby, takes and runs it.
    let (on, _) = hosts.wait_running("a", "delta", Duration::from_secs(20), |h| h == "b");
    assert_eq!(on, "b");
    let (code, doc) = hosts.run("b", &["call", "delta", "echo"]);
    assert_eq!(code, 0, "{doc}");
    let (code, doc) = hosts.run("a", &["down"]);
    assert_eq!(code, 0, "{doc}");
    hosts.assert_nothing_left(Duration::from_secs(20));
    assert!(standby.wait().unwrap().success());
}

/// Waits until the cluster has a leader.
/// A POST to `url` over HTTP/1.0 with `headers`: its status and body.
fn post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// A `tools/call` of protocol 2026-07-28 of `tool`, with `marker` as its
/// argument, and the headers it goes with (the token's among them).
fn modern_call(tool: &str, marker: &str) -> (Vec<(&'static str, String)>, String) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {"marker": marker}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "etcd-test", "version": "1"}}}});
    let headers = vec![
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
        ("Mcp-Method", "tools/call".to_owned()),
        ("Mcp-Name", tool.to_owned()),
    ];
    (headers, body.to_string())
}

/// `serve` on `host`: the URL of its gateway and the token it takes.
fn gateway_of(hosts: &Hosts, host: &str) -> (String, String) {
    let (code, doc) = hosts.run(host, &["serve"]);
    assert_eq!(code, 0, "{doc}");
    let url = doc["gateway"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc}"))
        .to_owned();
    let file = doc["gateway"]["token_file"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc}"));
    let token = std::fs::read_to_string(file).unwrap().trim().to_owned();
    (url, token)
}

#[test]
fn any_hosts_gateway_relays_a_call_to_the_one_generation_that_runs_the_server() {
    let (_cluster, hosts, c, doc) = gamma_placed_on_c("relay");
    let generation = doc["servers"][0]["generation"].as_u64().unwrap();
    // Both hosts' gateways take the fleet's one token.
    let (url_a, token) = gateway_of(&hosts, "a");
    let (url_c, token_c) = gateway_of(&hosts, "c");
    assert_eq!(token, token_c, "one token for the fleet");
    assert_ne!(url_a, url_c);
    let bearer = format!("Bearer {token}");
    // Through a's gateway, which runs nothing: the call is relayed to c, under
    // the name it has on every host.
    let (mut headers, body) = modern_call("gamma__echo", "via-a");
    headers.push(("Authorization", bearer.clone()));
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let (status, text) = post(&url_a, &headers, &body);
        if status == 200 && text.contains("via-a") && !text.contains("\"error\"") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "never relayed: {status} {text}\n{}",
            std::fs::read_to_string(hosts.state_dir("a").join("supervisor.log"))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(!answer.contains("isError\":true"), "{answer}");
    // The journal says who served it: gamma's generation on c.
    let served: Vec<_> = hosts
        .journal()
        .into_iter()
        .filter(|e| e["event"] == "call")
        .collect();
    assert!(!served.is_empty(), "no call in the journal");
    let tag = served.last().unwrap()["tag"].as_str().unwrap().to_owned();
    assert!(tag.ends_with(&format!(":gamma:{generation}")), "{tag}");
    let pid = served.last().unwrap()["pid"].as_i64().unwrap() as i32;
    assert!(hosts.processes_of("c").contains(&pid), "served on c: {pid}");
    assert!(!hosts.processes_of("a").contains(&pid));
    // `call` on a goes the same way.
    let (code, doc) = hosts.run("a", &["call", "gamma", "echo"]);
    assert_eq!(code, 0, "{doc}");
    // c's gateway is the fencing point: gamma's endpoint there serves the
    // running generation only, with the fleet's token only, under the names
    // gamma gives (the relaying gateway names them).
    let endpoint = format!("{url_c}/servers/gamma");
    let (plain_headers, body) = modern_call("echo", "direct");
    let with = |generation: Option<String>, bearer: &str| {
        let mut h: Vec<(&str, String)> = plain_headers.clone();
        h.push(("Authorization", bearer.to_owned()));
        if let Some(g) = generation {
            h.push(("Mcpfleet-Generation", g));
        }
        let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
        post(&endpoint, &h, &body)
    };
    let (status, text) = with(Some(generation.to_string()), &bearer);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("direct"), "{text}");
    // What the fleet file hides is hidden there too.
    let (hidden_headers, hidden) = modern_call("tool_3", "hidden");
    let mut h: Vec<(&str, String)> = hidden_headers;
    h.push(("Authorization", bearer.clone()));
    h.push(("Mcpfleet-Generation", generation.to_string()));
    let h: Vec<(&str, &str)> = h.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let (_, text) = post(&endpoint, &h, &hidden);
    assert!(text.contains("unknown tool `tool_3`"), "{text}");
    let (status, text) = with(Some((generation + 1).to_string()), &bearer);
    assert_eq!(status, 409, "another generation is refused: {text}");
    assert!(
        text.contains(&format!("generation {generation} does")),
        "{text}"
    );
    let (status, text) = with(None, &bearer);
    assert_eq!(status, 400, "no generation: {text}");
    let (status, _) = with(Some(generation.to_string()), "Bearer wrong");
    assert_eq!(status, 401);
    let (status, _) = post(
        &format!("{url_c}/servers/nope"),
        &[("Authorization", &bearer)],
        "{}",
    );
    assert_eq!(status, 404);
    hosts.down_from("a", c);
}

/// A CA (`ca.pem`), and a server's and a client's certificate and key signed
/// by it (`server.pem`, `server.key`, `client.pem`, `client.key`), for
/// 127.0.0.1 and localhost, made in `dir` by `openssl`.
fn certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=mcpfleet-test-ca",
            ],
        ]
        .concat(),
    );
    for (name, usage) in [("server", "serverAuth"), ("client", "clientAuth")] {
        std::fs::write(
            dir.join(format!("{name}.ext")),
            format!("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n"),
        )
        .unwrap();
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/CN={name}"),
                ],
            ]
            .concat(),
        );
        openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
}

/// One etcd member that speaks TLS only and asks every client for a
/// certificate (`--client-cert-auth`), with the PEM files of its CA, its own
/// certificate and a client's, made by `openssl`; killed when dropped.
struct TlsMember {
    child: Child,
    endpoint: String,
    dir: tempfile::TempDir,
}

impl TlsMember {
    fn start(test_id: &str) -> TlsMember {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        certificates(dir.path());
        let (client, peer) = (free_port(), free_port());
        let endpoint = format!("https://127.0.0.1:{client}");
        let log = std::fs::File::create(at("etcd.log")).unwrap();
        let child = Command::new("etcd")
            .args(["--name", "tls", "--data-dir"])
            .arg(at("data"))
            .args([
                "--listen-client-urls",
                &endpoint,
                "--advertise-client-urls",
                &endpoint,
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args(["--initial-cluster", &format!("tls=http://127.0.0.1:{peer}")])
            .arg("--cert-file")
            .arg(at("server.pem"))
            .arg("--key-file")
            .arg(at("server.key"))
            .arg("--trusted-ca-file")
            .arg(at("ca.pem"))
            .arg("--client-cert-auth")
            .env(TEST_ID_VAR, test_id)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("etcd (Debian's etcd-server; .ci/install-etcd installs it)");
        TlsMember {
            child,
            endpoint,
            dir,
        }
    }

    fn pem(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

impl Drop for TlsMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_fleet_reaches_etcd_over_tls_with_a_client_certificate() {
    let member = TlsMember::start(&format!("hosts-tls-{}", std::process::id()));
    let coordination = format!(
        "  etcd: [{}]\n  tls: {{ca: {}, cert: {}, key: {}}}\n",
        member.endpoint,
        member.pem("ca.pem"),
        member.pem("client.pem"),
        member.pem("client.key"),
    );
    let hosts = Hosts::of(&coordination, "tls", &["gamma"], "3s", "1s", "");
    // etcd takes a moment to elect itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    let doc = loop {
        let (code, doc) = hosts.run("a", &["up"]);
        if code == 0 {
            break doc;
        }
        assert!(Instant::now() < deadline, "up over TLS: {doc}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(doc["servers"][0]["host"], "a", "{doc}");
    assert_eq!(doc["servers"][0]["state"], "running", "{doc}");
    // b runs no supervisor: its `status` reads etcd over TLS too.
    let (code, doc) = hosts.run("b", &["status"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["servers"][0]["host"], "a", "{doc}");
    // Without a client certificate, etcd refuses the host: a clear error,
    // and nothing starts.
    let without = Hosts::of(
        &format!(
            "  etcd: [{}]\n  tls: {{ca: {}}}\n",
            member.endpoint,
            member.pem("ca.pem")
        ),
        "tls-refused",
        &["delta"],
        "3s",
        "1s",
        "",
    );
    let out = without.output("c", &["up"]);
    assert_ne!(out.status.code(), Some(0));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(said.contains("etcd"), "{said}");
    without.assert_nothing_left(Duration::from_secs(20));
    // A fleet file whose endpoints are https:// without `tls` is refused
    // where it says so.
    std::fs::write(
        &without.file,
        format!(
            "version: 1\ncoordination:\n  etcd: [{}]\nservers:\n  x:\n    command: x\n",
            member.endpoint
        ),
    )
    .unwrap();
    let out = without.output("c", &["validate"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("3:9") && said.contains("need `tls"), "{said}");
    let (code, doc) = hosts.run("a", &["down"]);
    assert_eq!(code, 0, "{doc}");
    hosts.assert_nothing_left(Duration::from_secs(20));
}

#[test]
fn gateways_relay_over_https_when_the_fleet_file_gives_them_a_certificate() {
    let cluster = Cluster::start("hosts-https");
    wait_for_quorum(&cluster);
    let pems = tempfile::tempdir().unwrap();
    certificates(pems.path());
    let pem = |name: &str| pems.path().join(name).display().to_string();
    let hosts = Hosts::with(
        &cluster,
        "https",
        &["gamma"],
        "3s",
        "1s",
        "    placement: {hosts: [c]}\n",
    );
    let text = std::fs::read_to_string(&hosts.file).unwrap();
    let tls = format!(
        "version: 1\ngateway:\n  tls: {{cert: {}, key: {}, ca: {}}}\n",
        pem("server.pem"),
        pem("server.key"),
        pem("ca.pem")
    );
    std::fs::write(&hosts.file, text.replacen("version: 1\n", &tls, 1)).unwrap();
    let c = hosts.supervise("c");
    let (code, doc) = hosts.run("a", &["up"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["servers"][0]["host"], "c", "{doc}");
    let (url_c, _) = gateway_of(&hosts, "c");
    assert!(url_c.starts_with("https://127.0.0.1:"), "{url_c}");
    // A call on a, which runs nothing: relayed to c's gateway over HTTPS.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, doc) = hosts.run("a", &["call", "gamma", "echo"]);
        if code == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never relayed over HTTPS: {doc}\n{}",
            std::fs::read_to_string(hosts.state_dir("a").join("supervisor.log"))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let pid = hosts
        .journal()
        .iter()
        .rev()
        .find(|e| e["event"] == "call")
        .and_then(|e| e["pid"].as_i64())
        .unwrap() as i32;
    assert!(hosts.processes_of("c").contains(&pid), "served on c: {pid}");
    // The door speaks HTTPS only: plain HTTP gets no HTTP answer.
    let (status, _) = post(&url_c.replacen("https://", "http://", 1), &[], "{}");
    assert_eq!(status, 0);
    hosts.down_from("a", c);
}

fn wait_for_quorum(cluster: &Cluster) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let c = join(cluster, "/quorum", "probe", Duration::from_secs(5)).await;
        let _ = c.leave().await;
    });
}

// --- Chaos ---------------------------------------------------------------------

/// A TCP proxy in front of each etcd member, for one host: cutting it drops
/// every connection and refuses new ones, as a network partition would.
struct Proxy {
    endpoints: String,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn new(cluster: &Cluster) -> Proxy {
        use std::sync::atomic::Ordering;
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::<std::net::TcpStream>::new()));
        let mut endpoints = Vec::new();
        for (client, _) in &cluster.ports {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            endpoints.push(format!("http://{}", listener.local_addr().unwrap()));
            let (target, cut, open) = (*client, cut.clone(), open.clone());
            std::thread::spawn(move || {
                for inbound in listener.incoming().flatten() {
                    if cut.load(Ordering::SeqCst) {
                        continue;
                    }
                    let Ok(outbound) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                        continue;
                    };
                    let mut held = open.lock().unwrap();
                    held.push(inbound.try_clone().unwrap());
                    held.push(outbound.try_clone().unwrap());
                    for (mut from, mut to) in [
                        (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                        (outbound, inbound),
                    ] {
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut from, &mut to);
                            let _ = to.shutdown(std::net::Shutdown::Both);
                        });
                    }
                }
            });
        }
        Proxy {
            endpoints: endpoints.join(","),
            cut,
            open,
        }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
        if cut {
            for stream in self.open.lock().unwrap().drain(..) {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// A small deterministic generator: the run prints its seed, and
/// `MCPFLEET_CHAOS_SEED` replays it.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

const SERVERS: [&str; 3] = ["alpha", "beta", "gamma"];

impl Hosts {
    /// Waits until the fleet is quiet: every server running, on one host, as
    /// `status` on `witness` shows, with exactly one process of it alive.
    fn wait_quiet(
        &self,
        witness: &str,
        limit: Duration,
    ) -> Vec<(String, String, Option<u64>, Option<String>)> {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self.placement(witness);
            let alive = self.servers_alive();
            let quiet = seen.iter().all(|(name, state, _, on)| {
                state == "running"
                    && on.is_some()
                    && alive
                        .iter()
                        .filter(|(_, tag)| tag.contains(&format!(":{name}:")))
                        .count()
                        == 1
            });
            if quiet {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "never quiet: {seen:?}, alive {alive:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A call to each server through the host that runs it, and one through
    /// the next host, whose gateway relays it; none through `avoid` (a host
    /// paused or killed: its CLI would wait for it, or start it again).
    /// Failures are allowed (a fault may be under way), what was served is
    /// in the journal.
    fn call_each(
        &self,
        placement: &[(String, String, Option<u64>, Option<String>)],
        avoid: Option<&str>,
    ) -> usize {
        let next = |on: &str| HOSTS[(HOSTS.iter().position(|h| *h == on).unwrap_or(0) + 1) % 3];
        placement
            .iter()
            .filter_map(|(name, _, _, on)| Some((name, on.as_deref()?)))
            .flat_map(|(name, on)| [(name, on), (name, next(on))])
            .filter(|(_, via)| Some(*via) != avoid)
            .filter(|(name, via)| self.run(via, &["call", name, "echo"]).0 == 0)
            .count()
    }
}

#[test]
fn chaos_of_three_hosts_never_lets_two_generations_serve() {
    let rounds: usize = std::env::var("MCPFLEET_CHAOS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(8);
    let seed: u64 = std::env::var("MCPFLEET_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("chaos: seed {seed} (MCPFLEET_CHAOS_SEED replays it), {rounds} rounds");
    let mut rng = Rng(seed);
    let mut cluster = Cluster::start("hosts-chaos");
    wait_for_quorum(&cluster);
    let mut hosts = Hosts::new(&cluster, "chaos", &SERVERS, "3s", "1s");
    let proxies: Vec<Proxy> = HOSTS.iter().map(|_| Proxy::new(&cluster)).collect();
    for (host, proxy) in HOSTS.iter().zip(&proxies) {
        hosts
            .etcd_of
            .insert(host.to_string(), proxy.endpoints.clone());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for host in HOSTS {
            let hosts = &hosts;
            s.spawn(move || {
                let (code, doc) = hosts.run(host, &["up"]);
                assert_eq!(code, 0, "up on {host}: {doc}");
            });
        }
    });
    let mut placement = hosts.wait_quiet("a", Duration::from_secs(30));
    let mut served = hosts.call_each(&placement, None);
    let mut faults: std::collections::BTreeMap<&str, usize> = Default::default();
    let file = std::fs::read_to_string(&hosts.file).unwrap();
    for round in 0..rounds {
        let victim = HOSTS[rng.below(3)];
        let fault = [
            "kill-host",
            "pause-owner",
            "kill-etcd-leader",
            "cut-off-host",
            "edit-fleet-file",
            "concurrent-up-reconnect",
        ][rng.below(6)];
        *faults.entry(fault).or_default() += 1;
        eprintln!("chaos: round {round}: {fault} ({victim})");
        match fault {
            "kill-host" => {
                for pid in hosts.processes_of(victim) {
                    unsafe_kill(pid, 9);
                }
                std::thread::sleep(Duration::from_millis(500));
                served += hosts.call_each(
                    &hosts.placement(
                        HOSTS[(HOSTS.iter().position(|h| *h == victim).unwrap() + 1) % 3],
                    ),
                    Some(victim),
                );
                // The host comes back: its supervisor recovers what it left, and stands by.
                assert_eq!(
                    hosts.run(victim, &["up"]).0,
                    0,
                    "up on {victim} after its loss"
                );
            }
            "pause-owner" => {
                let owner = placement[rng.below(SERVERS.len())].3.clone().unwrap();
                let pid = hosts.supervisor(&owner);
                unsafe_kill(pid, 19);
                std::thread::sleep(Duration::from_secs(5));
                let others: Vec<&str> = HOSTS.iter().copied().filter(|h| *h != owner).collect();
                served += hosts.call_each(&hosts.placement(others[0]), Some(&owner));
                // The moment it runs again, calls through the paused owner
                // must not be served by its old generations: it is fenced
                // (L22, L24). Relayed to the new owner, they may be served.
                let owned: Vec<(&str, u64)> = placement
                    .iter()
                    .filter(|p| p.3.as_deref() == Some(owner.as_str()))
                    .map(|p| (p.0.as_str(), p.2.unwrap()))
                    .collect();
                unsafe_kill(pid, 18);
                for (name, old) in owned {
                    let (code, doc) = hosts.run(&owner, &["call", name, "echo"]);
                    let last = hosts.journal().into_iter().rev().find(|e| {
                        e["event"] == "call"
                            && e["tag"]
                                .as_str()
                                .is_some_and(|t| t.contains(&format!(":{name}:")))
                    });
                    let by_old = last.is_some_and(|e| {
                        e["tag"]
                            .as_str()
                            .unwrap()
                            .ends_with(&format!(":{name}:{old}"))
                    });
                    assert!(
                        code != 0 || !by_old,
                        "the paused owner {owner} served {name} by generation {old}: {doc}"
                    );
                }
            }
            "kill-etcd-leader" => {
                let leader = runtime.block_on(cluster.leader()).unwrap_or(0);
                cluster.kill(leader);
                served += hosts.call_each(&placement, None);
                std::thread::sleep(Duration::from_secs(2));
                cluster.restart(leader);
            }
            "cut-off-host" => {
                let index = HOSTS.iter().position(|h| *h == victim).unwrap();
                proxies[index].set_cut(true);
                std::thread::sleep(Duration::from_secs(5));
                let other = HOSTS[(index + 1) % 3];
                served += hosts.call_each(&hosts.placement(other), None);
                proxies[index].set_cut(false);
            }
            "edit-fleet-file" => {
                // A change of definition, taken up by `up` on one host: each
                // owner restarts its server under a new generation.
                let edited = match round % 2 {
                    0 => file.replace("args: [--journal,", "args: [--tools, \"4\", --journal,"),
                    _ => file.clone(),
                };
                std::fs::write(&hosts.file, edited).unwrap();
                hosts.run(victim, &["up"]);
            }
            _ => {
                let (name, _, generation, owner) = placement[rng.below(SERVERS.len())].clone();
                let other = HOSTS
                    .iter()
                    .copied()
                    .find(|h| Some(*h) != owner.as_deref())
                    .unwrap();
                let generation = generation.unwrap().to_string();
                std::thread::scope(|s| {
                    let hosts = &hosts;
                    let owner = owner.as_deref().unwrap();
                    let name = name.as_str();
                    let generation = generation.as_str();
                    s.spawn(move || {
                        hosts.run(owner, &["reconnect", name, "--if-generation", generation])
                    });
                    s.spawn(move || hosts.run(other, &["up"]));
                });
            }
        }
        placement = hosts.wait_quiet(HOSTS[(round + 1) % 3], Duration::from_secs(40));
        served += hosts.call_each(&placement, None);
    }
    std::fs::write(&hosts.file, &file).unwrap();
    let (code, doc) = hosts.run("a", &["down"]);
    assert_eq!(code, 0, "{doc}");
    hosts.assert_nothing_left(Duration::from_secs(30));
    let journal = hosts.journal();
    let mut violations = check_journal(&journal);
    violations.extend(runtime.block_on(check_history(
        &cluster.endpoints,
        "/mcpfleet/chaos",
        &journal,
    )));
    let starts = journal.iter().filter(|l| l["event"] == "start").count();
    let calls = journal.iter().filter(|l| l["event"] == "call").count();
    eprintln!(
        "chaos: seed {seed}: {rounds} rounds, faults {faults:?}, {starts} generations started, {calls} calls served ({served} answered), {} violations",
        violations.len()
    );
    assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    assert!(calls >= served, "a call answered but not journaled");
}
