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
}

impl Cluster {
    fn start(label: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let test_id = format!("{label}-{}", std::process::id());
        let members = ports
            .iter()
            .enumerate()
            .map(|(i, (client, peer))| {
                let log = std::fs::File::create(dir.path().join(format!("m{i}.log"))).unwrap();
                Command::new("etcd")
                    .args(["--name", &format!("m{i}")])
                    .arg("--data-dir")
                    .arg(dir.path().join(format!("m{i}")))
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
                    .args(["--initial-cluster-token", &test_id])
                    .args(["--initial-cluster-state", "new"])
                    .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                    .env(TEST_ID_VAR, &test_id)
                    .stdin(Stdio::null())
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
                    .expect("etcd (Debian's etcd-server; .ci/install-etcd installs it)")
            })
            .collect();
        Cluster {
            members,
            endpoints: ports
                .iter()
                .map(|(client, _)| format!("http://127.0.0.1:{client}"))
                .collect(),
            dir,
        }
    }

    fn kill(&mut self, member: usize) {
        let _ = self.members[member].kill();
        let _ = self.members[member].wait();
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
        match Coordinator::join(&cluster.endpoints, prefix, host, ttl).await {
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
