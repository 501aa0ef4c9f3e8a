//! `coordination:`: the etcd cluster of a fleet that spans hosts.

use super::*;

#[test]
fn coordination_is_absent_unless_written_and_has_defaults() {
    assert_eq!(ok(&format!("{HEAD}  a: {{command: x}}\n")).coordination, None);
    let fleet = ok(&format!(
        "{HEAD}  a: {{command: x}}\ncoordination:\n  etcd: [127.0.0.1:2379, 'http://e2:2380']\n"
    ));
    let spec = fleet.coordination.unwrap();
    assert_eq!(spec.etcd, ["http://127.0.0.1:2379", "http://e2:2380"]);
    assert_eq!(spec.prefix, None);
    assert_eq!((spec.ttl, spec.lock_delay), (secs(10), secs(5)));
    let set = ok(&format!(
        "{HEAD}  a: {{command: x}}\ncoordination: {{etcd: http://e:2379, prefix: /teams/tools/, ttl: 3s, lock_delay: 0}}\n"
    ))
    .coordination
    .unwrap();
    assert_eq!(set.etcd, ["http://e:2379"]);
    assert_eq!(set.prefix.as_deref(), Some("/teams/tools"));
    assert_eq!((set.ttl, set.lock_delay), (secs(3), Duration::ZERO));
}

#[test]
fn a_wrong_coordination_names_its_place() {
    let at = |value: &str| {
        one_error(&format!(
            "{HEAD}  a: {{command: x}}\ncoordination:\n  etcd: [127.0.0.1:2379]\n  {value}\n"
        ))
    };
    assert_eq!(
        at("ttl: 1s"),
        "6:8: coordination.ttl: `ttl` must be from 2s to 2m"
    );
    assert_eq!(
        at("lock_delay: forever"),
        "6:15: coordination.lock_delay: `forever` is not a duration; write e.g. 10s, 500ms, 2m or 1h"
    );
    assert_eq!(
        at("prefix: tools"),
        "6:11: coordination.prefix: `tools` is not a key prefix: write an absolute path of letters, digits, `.`, `_` and `-`, such as /mcpfleet/tools"
    );
    assert_eq!(
        at("endpoints: [x:1]"),
        "6:3: coordination.endpoints: unknown key `endpoints`; did you mean `etcd`?"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a: {{command: x}}\ncoordination: {{ttl: 5s}}\n")),
        "4:15: coordination: `coordination` needs `etcd`: the endpoints of the etcd cluster, e.g. [http://10.0.0.1:2379]"
    );
    assert_eq!(
        one_error(&format!(
            "{HEAD}  a: {{command: x}}\ncoordination:\n  etcd: [127.0.0.1:2379, https://e:2379]\n"
        )),
        "5:9: coordination.etcd: `https://` endpoints need `tls: {ca: FILE}`: the CA that signed etcd's certificates"
    );
    let tls_errors = |rest: &str| {
        errors(&format!(
            "{HEAD}  a: {{command: x}}\ncoordination:\n  etcd: [https://e:2379]\n  tls: {rest}\n"
        ))
    };
    let tls = |rest: &str| {
        let errors = tls_errors(rest);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        errors.into_iter().next().unwrap_or_default()
    };
    assert_eq!(
        tls("{ca: /nonexistent/ca.pem}"),
        "6:13: coordination.tls.ca: cannot read `/nonexistent/ca.pem`: No such file or directory (os error 2)"
    );
    let alone = tls_errors("{cert: /nonexistent/c.pem}");
    assert!(
        alone.contains(&"6:8: coordination.tls: `tls` needs `cert` and `key` together: the client certificate and its key".to_owned()),
        "{alone:#?}"
    );
    let not_pem = tls("{ca: Cargo.toml}");
    assert!(
        not_pem.starts_with("6:13: coordination.tls.ca: `")
            && not_pem.ends_with("/Cargo.toml` is not a PEM file (no `-----BEGIN`)"),
        "{not_pem}"
    );
    let unknown = tls_errors("{cacert: x}");
    assert!(
        unknown.contains(&"6:9: coordination.tls.cacert: unknown key `cacert`; did you mean `ca`?".to_owned()),
        "{unknown:#?}"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a: {{command: x}}\ncoordination:\n  etcd: []\n")),
        "5:9: coordination.etcd: `etcd` is empty; name at least one endpoint, e.g. http://127.0.0.1:2379"
    );
}

#[test]
fn placement_names_hosts_and_standbys() {
    let fleet = ok(&format!(
        "{HEAD}  a: {{command: x}}\n  b:\n    command: x\n    placement: {{hosts: [node-1.lan, node_2], standbys: 1}}\n  c: {{command: x, placement: {{hosts: solo}}}}\n"
    ));
    assert_eq!(fleet.servers[0].placement, Placement::default());
    assert!(fleet.servers[0].placement.allows("anywhere"));
    let b = &fleet.servers[1].placement;
    assert_eq!(b.hosts, ["node-1.lan", "node_2"]);
    assert_eq!(b.standbys, Some(1));
    assert!(b.allows("node_2") && !b.allows("node-3"));
    assert_eq!(fleet.servers[2].placement.hosts, ["solo"]);
    let at = |value: &str| one_error(&format!("{HEAD}  a:\n    command: x\n    placement: {value}\n"));
    assert_eq!(
        at("{hosts: [a b]}"),
        "5:25: servers.a.placement.hosts[0]: `a b` is not a host name: letters, digits, `.`, `_` and `-`, at most 253"
    );
    assert_eq!(
        at("{standbys: -1}"),
        "5:27: servers.a.placement.standbys: `standbys` must be a whole number from 0 to 64, not `-1`"
    );
    assert_eq!(
        at("{replicas: 2}"),
        "5:17: servers.a.placement.replicas: unknown key `replicas`; did you mean `standbys`?"
    );
}

#[test]
fn standbys_are_the_first_allowed_live_hosts_by_name() {
    let live: Vec<String> = ["c", "a", "d", "b"].map(String::from).to_vec();
    let any = Placement::default();
    assert!(["a", "b", "c", "d"].iter().all(|h| any.may_take(h, &live)));
    let two = Placement {
        hosts: Vec::new(),
        standbys: Some(2),
    };
    let takers: Vec<&str> = ["a", "b", "c", "d"]
        .into_iter()
        .filter(|h| two.may_take(h, &live))
        .collect();
    assert_eq!(takers, ["a", "b"]);
    let placed = Placement {
        hosts: vec!["d".into(), "c".into(), "x".into()],
        standbys: Some(1),
    };
    let takers: Vec<&str> = ["a", "b", "c", "d"]
        .into_iter()
        .filter(|h| placed.may_take(h, &live))
        .collect();
    assert_eq!(takers, ["c"]);
    // Zero standbys still lets one host take a server no host runs.
    let none = Placement {
        hosts: vec!["b".into()],
        standbys: Some(0),
    };
    assert!(none.may_take("b", &live) && !none.may_take("a", &live));
}
