//! `env_file:` of a server and of `defaults:`: what a server gets and in which
//! order, where errors point, and that the values never reach output.

use super::*;

/// A fleet file `text` in a directory of its own, with `files` beside it.
fn load_with(
    files: &[(&str, &str)],
    text: &str,
) -> (tempfile::TempDir, Result<Fleet, ConfigErrors>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let fleet = load_str(text, &dir.path().join("fleet.yaml"), &env);
    (dir, fleet)
}

/// What server `name` gets on top of the inherited environment.
fn environment(fleet: &Fleet, name: &str) -> Vec<(String, String)> {
    stdio(fleet.server(name).unwrap())
        .environment()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.value.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn located(result: Result<Fleet, ConfigErrors>) -> Vec<String> {
    match result {
        Ok(fleet) => panic!("expected errors, got {fleet:#?}"),
        Err(e) => e.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn one_file_or_a_list_relative_to_the_fleet_file() {
    let (dir, fleet) = load_with(
        &[
            (".env", "A=1\nB=from-env\n"),
            ("conf/more.env", "export C='three'\n"),
        ],
        &format!(
            "{HEAD}  one:\n    command: x\n    env_file: .env\n  two:\n    command: x\n    env_file: [.env, ./conf/more.env]\n  none:\n    command: x\n"
        ),
    );
    let fleet = fleet.unwrap();
    assert_eq!(
        environment(&fleet, "one"),
        pairs(&[("A", "1"), ("B", "from-env")])
    );
    assert_eq!(
        environment(&fleet, "two"),
        pairs(&[("A", "1"), ("B", "from-env"), ("C", "three")])
    );
    assert!(environment(&fleet, "none").is_empty());
    let files = &stdio(fleet.server("two").unwrap()).env_files;
    assert_eq!(files[1].path, dir.path().join("conf/more.env"));
    assert_eq!(
        files[1].shown,
        dir.path().join("conf/more.env").display().to_string()
    );
}

/// `defaults:` first, then the server's files in order, then `env:`; of a
/// name set twice, the later wins.
#[test]
fn precedence_defaults_then_the_servers_files_then_env() {
    let (_dir, fleet) = load_with(
        &[
            (
                "defaults.env",
                "D=defaults\nX=defaults\nY=defaults\nZ=defaults\n",
            ),
            ("first.env", "X=first\nY=first\nZ=first\n"),
            ("second.env", "Y=second\nZ=second\n"),
        ],
        "version: 1\ndefaults:\n  env_file: defaults.env\nservers:\n  a:\n    command: x\n    env_file: [first.env, second.env]\n    env: {Z: env}\n  b:\n    command: x\n  remote:\n    url: http://h/mcp\n",
    );
    let fleet = fleet.unwrap();
    assert_eq!(
        environment(&fleet, "a"),
        pairs(&[
            ("D", "defaults"),
            ("X", "first"),
            ("Y", "second"),
            ("Z", "env")
        ])
    );
    assert_eq!(
        environment(&fleet, "b"),
        pairs(&[
            ("D", "defaults"),
            ("X", "defaults"),
            ("Y", "defaults"),
            ("Z", "defaults")
        ])
    );
    // A remote server has no environment: `defaults:` leaves it alone.
    assert!(matches!(
        fleet.server("remote").unwrap().transport,
        Transport::Http(_)
    ));
}

#[test]
fn the_path_may_come_from_the_environment_and_is_shown_as_written() {
    let (dir, fleet) = load_with(
        &[("sub/.env", "A=1\n")],
        "version: 1\nservers:\n  a:\n    command: x\n    env_file: ${env:SUBDIR}/.env\n",
    );
    let fleet = fleet.unwrap();
    let file = &stdio(&fleet.servers[0]).env_files[0];
    assert_eq!(file.path, dir.path().join("sub/.env"));
    assert_eq!(file.shown, "${env:SUBDIR}/.env");
}

#[test]
fn a_missing_or_unreadable_file_is_an_error_at_its_entry() {
    let (dir, fleet) = load_with(
        &[("a-dir/x", ""), ("ok.env", "A=1\n")],
        "version: 1\ndefaults:\n  env_file: nope.env\nservers:\n  a:\n    command: x\n    env_file: [ok.env, missing.env, a-dir]\n  b:\n    command: x\n    env_file: \"\"\n",
    );
    let root = dir.path().display();
    assert_eq!(
        located(fleet),
        [
            format!(
                "3:13: defaults.env_file: cannot read env file `{root}/nope.env`: no such file"
            ),
            format!(
                "7:24: servers.a.env_file[1]: cannot read env file `{root}/missing.env`: no such file"
            ),
            format!(
                "7:37: servers.a.env_file[2]: cannot read env file `{root}/a-dir`: it is a directory"
            ),
            "10:15: servers.b.env_file: `env_file` must not be empty; name a file".to_string(),
        ]
    );
}

#[test]
fn a_malformed_line_names_the_env_file_and_its_line_never_its_text() {
    let (dir, fleet) = load_with(
        &[("bad.env", "# settings\nA=1\nghp_secretToken123\n")],
        "version: 1\nservers:\n  a:\n    command: x\n    env_file: bad.env\n",
    );
    let errors = located(fleet);
    assert_eq!(
        errors,
        [format!(
            "5:15: servers.a.env_file: {}/bad.env:3:1: a name without `=`; lines are NAME=value (NAME= for an empty value)",
            dir.path().display()
        )]
    );
    assert!(!errors[0].contains("ghp_secret"));
    let (_dir, fleet) = load_with(
        &[("latin1.env", "A=caf\u{e9}\n")],
        "version: 1\nservers:\n  a:\n    command: x\n    env_file: latin1.env\n",
    );
    assert!(fleet.is_ok());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bin.env"), b"A=\xff\n").unwrap();
    let errors = located(load_str(
        "version: 1\nservers:\n  a:\n    command: x\n    env_file: bin.env\n",
        &dir.path().join("fleet.yaml"),
        &env,
    ));
    assert!(errors[0].contains("not valid UTF-8"), "{errors:?}");
}

#[test]
fn the_wrong_kind_of_value_and_a_remote_server_are_errors() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: x\n    env_file: {{a: b}}\n"
        )),
        ["5:15: servers.a.env_file: expected a path or a list of paths, found a mapping"]
    );
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: x\n    env_file: [[a]]\n"
        )),
        ["5:16: servers.a.env_file[0]: expected a string, found a sequence"]
    );
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    url: http://h\n    env_file: .env\n"
        )),
        ["5:5: servers.a.env_file: `env_file` only applies to stdio servers (`command`)"]
    );
    assert_eq!(
        errors(&format!("{HEAD}  a:\n    command: x\n    envfile: .env\n")),
        ["5:5: servers.a.envfile: unknown key `envfile`; did you mean `env_file`?"]
    );
}

/// Values from a file are secrets: `validate` shows the file's path, Debug a
/// placeholder, and nothing shows the value.
#[test]
fn values_from_files_never_reach_output() {
    let (_dir, fleet) = load_with(
        &[("secrets.env", &format!("API_KEY=\"{SECRET}\"\n"))],
        &format!("{HEAD}  a:\n    command: x\n    env_file: secrets.env\n    env: {{LOG: info}}\n"),
    );
    let fleet = fleet.unwrap();
    assert_eq!(
        environment(&fleet, "a")[0],
        ("API_KEY".to_string(), SECRET.to_string())
    );
    let json = fleet.resolved_json().to_string();
    let yaml = fleet.resolved_yaml();
    let debug = format!("{fleet:?}");
    for shown in [&json, &yaml, &debug] {
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains("secrets.env"), "{shown}");
    }
    assert!(debug.contains("<API_KEY from "), "{debug}");
    // The resolved fleet is itself a fleet file that means the same.
    let again = load_str(&yaml, &fleet.file, &env).unwrap();
    assert_eq!(environment(&again, "a"), environment(&fleet, "a"));
}
