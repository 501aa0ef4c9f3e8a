//! `${env:}` expansion, `cwd`, and the resolved fleet that `validate` prints.

use super::*;

#[test]
fn expansion_in_command_args_env_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let file = dir.path().join("mcpfleet.yaml");
    let text = format!(
        "{HEAD}  a:\n    command: ${{env:USER_NAME}}-bin\n    args: [\"--token=${{env:TOKEN}}\", \"${{env:USER_NAME}}:${{env:USER_NAME}}\", plain]\n    env: {{AUTH: \"Bearer ${{env:API_KEY}}\"}}\n    cwd: ./${{env:SUBDIR}}\n"
    );
    let fleet = load_str(&text, &file, &env).unwrap();
    let spec = stdio(&fleet.servers[0]);
    assert_eq!(spec.command.value, "ada-bin");
    assert_eq!(spec.command.display(), "${env:USER_NAME}-bin");
    assert_eq!(spec.args[0].value, format!("--token={SECRET}"));
    assert_eq!(spec.args[0].display(), "--token=${env:TOKEN}");
    assert_eq!(spec.args[1].value, "ada:ada");
    assert_eq!(spec.args[2], Text::literal("plain"));
    assert_eq!(spec.env[0].1.value, format!("Bearer {SECRET}"));
    assert_eq!(spec.env[0].1.display(), "Bearer ${env:API_KEY}");
    assert_eq!(spec.cwd, dir.path().join("sub").canonicalize().unwrap());
}

#[test]
fn expansion_errors_are_reported_at_the_string() {
    assert_eq!(
        errors(&format!(
            "{HEAD}  a:\n    command: \"${{env:NOPE}}\"\n    args: [\"${{env:A-B}}\", \"${{env:OPEN\", \"${{env:X1}}${{env:X2}}\"]\n    env: {{K: \"${{env:MISSING}}\"}}\n  b:\n    command: \"${{env:EMPTY}}\"\n"
        )),
        [
            "4:14: servers.a.command: environment variable `NOPE` is not set",
            "5:12: servers.a.args[0]: `${env:A-B}` does not name a valid environment variable (letters, digits and _, not starting with a digit)",
            "5:26: servers.a.args[1]: `${env:` is not closed with `}`",
            "5:40: servers.a.args[2]: environment variable `X1` is not set",
            "5:40: servers.a.args[2]: environment variable `X2` is not set",
            "6:14: servers.a.env.K: environment variable `MISSING` is not set",
            "8:14: servers.b.command: `command` is empty once `${env:EMPTY}` is expanded",
        ]
    );
}

#[test]
fn secrets_never_reach_resolved_output() {
    let fleet = ok(&format!(
        "{HEAD}  a:\n    command: \"${{env:TOKEN}}\"\n    args: [\"--key=${{env:API_KEY}}\"]\n    env: {{API_KEY: \"${{env:API_KEY}}\", AUTH: \"Bearer ${{env:TOKEN}}\"}}\n"
    ));
    let json = fleet.resolved_json().to_string();
    let yaml = fleet.resolved_yaml();
    let debug = format!("{fleet:?}");
    for shown in [&json, &yaml, &debug] {
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains("${env:API_KEY}"), "{shown}");
        assert!(shown.contains("Bearer ${env:TOKEN}"), "{shown}");
    }
    // The value is still there for the code that starts the process.
    assert_eq!(stdio(&fleet.servers[0]).command.value, SECRET);
}

#[test]
fn resolved_json_shape() {
    let fleet = ok(
        "version: 1\nname: demo\nservers:\n  a:\n    command: npx\n    args: [x]\n    env: {B: b, A: a}\n    enabled: false\n    cleanup_timeout: none\n",
    );
    let json = fleet.resolved_json();
    let cwd = fleet.file.parent().unwrap().display().to_string();
    assert_eq!(
        json,
        serde_json::json!({
            "version": 1,
            "file": fleet.file.display().to_string(),
            "name": "demo",
            "servers": [{
                "name": "a", "enabled": false, "transport": "stdio",
                "command": "npx", "args": ["x"], "env": {"A": "a", "B": "b"},
                "env_file": [], "cwd": cwd, "shell": false,
                "connect_timeout": "10s", "cleanup_timeout": "none",
                "restart": {
                    "policy": "never",
                    "backoff": {"initial": "500ms", "max": "30s"},
                    "max_restarts": 5,
                    "window": "1m",
                },
                "health": null,
                "idle_timeout": "none",
            }],
        })
    );
}

#[test]
fn resolved_yaml_is_a_fleet_file_that_loads_to_the_same_fleet() {
    let fleet = ok(
        "version: 1\nname: demo\ndefaults: {connect_timeout: 90s}\nservers:\n  a:\n    command: npx\n    args: [\"1.10\", \"yes\", \"true\", \"\", \"#x\", \"a: b\", 8080]\n    env: {Z: \"null\", A: \"~\"}\n  b:\n    command: y\n    enabled: false\n    shell: true\n",
    );
    let yaml = fleet.resolved_yaml();
    assert!(yaml.starts_with("# resolved from "), "{yaml}");
    let again = load_str(&yaml, &fleet_path(), &env).unwrap();
    assert_eq!(
        format!("{:?}", again.servers),
        format!("{:?}", fleet.servers),
        "{yaml}"
    );
    assert_eq!(again.name, fleet.name);
}

#[test]
fn relative_cwd_is_resolved_against_the_fleet_file_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data/x")).unwrap();
    std::fs::write(dir.path().join("afile"), "").unwrap();
    let file = dir.path().join("fleet.yaml");
    std::fs::write(
        &file,
        "version: 1\nservers:\n  a: {command: x, cwd: data/x}\n  b: {command: x, cwd: ..}\n  c: {command: x}\n",
    )
    .unwrap();
    let fleet = load(&file, &env).unwrap();
    let base = dir.path().canonicalize().unwrap();
    assert_eq!(fleet.file, base.join("fleet.yaml"));
    assert_eq!(stdio(&fleet.servers[0]).cwd, base.join("data/x"));
    assert_eq!(stdio(&fleet.servers[1]).cwd, base.parent().unwrap());
    assert_eq!(stdio(&fleet.servers[2]).cwd, base);

    let text = "version: 1\nservers:\n  a: {command: x, cwd: nope}\n  b: {command: x, cwd: afile}\n  c: {command: x, cwd: ''}\n";
    let err = load_str(text, &file, &env).unwrap_err();
    let messages: Vec<_> = err.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            format!("3:24: servers.a.cwd: directory `{}` does not exist", base.join("nope").display()),
            format!("4:24: servers.b.cwd: `{}` is not a directory", base.join("afile").display()),
            "5:24: servers.c.cwd: `cwd` must not be empty; leave it out for the fleet file's directory".to_string(),
        ]
    );
}

#[test]
fn a_templated_cwd_is_shown_as_its_template() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.yaml");
    let err = load_str(
        "version: 1\nservers:\n  a: {command: x, cwd: \"/x/${env:TOKEN}\"}\n",
        &file,
        &env,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("directory `/x/${env:TOKEN}` does not exist"),
        "{text}"
    );
    assert!(!text.contains(SECRET));
}
