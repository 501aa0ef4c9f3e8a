//! The copy of a fleet file recorded in a state directory, read when the file is
//! gone (`load_recorded`): what the environment and the file system say now is
//! not held against it, while the file's own errors still are.

use super::*;

const GONE: &str = "/nonexistent-project/mcpfleet.yaml";
const COPY: &str = "/state/demo/fleet.yaml";

fn recorded(text: &str) -> Result<Fleet, ConfigErrors> {
    load_recorded(text, Path::new(GONE), Path::new(COPY), &env)
}

#[test]
fn values_from_the_environment_and_cwd_are_not_checked_in_a_copy() {
    let text = "version: 1\nname: demo\ngateway:\n  token: ${env:GONE_TOKEN}\n  listen: ${env:GONE_LISTEN}\nservers:\n  a:\n    command: ${env:GONE_COMMAND}\n    cwd: tools\n    env: { KEY: \"${env:GONE_KEY}\" }\n  b:\n    url: ${env:GONE_URL}\n    headers: { Authorization: \"Bearer ${env:GONE_TOKEN}\" }\n";
    // The file itself, read now, is refused...
    let strict = load_str(text, Path::new(GONE), &env).unwrap_err();
    assert!(strict.errors.len() >= 5, "{strict}");
    // ...its copy names the fleet and its servers.
    let fleet = recorded(text).expect("a copy is read");
    assert_eq!(fleet.name.as_deref(), Some("demo"));
    assert_eq!(fleet.file, Path::new(GONE));
    let names: Vec<&str> = fleet.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let a = stdio(&fleet.servers[0]);
    assert_eq!(a.command.display(), "${env:GONE_COMMAND}");
    assert_eq!(a.cwd, Path::new("/nonexistent-project/tools"));
    assert_eq!(http(&fleet.servers[1]).url.display(), "${env:GONE_URL}");
}

#[test]
fn a_copy_with_errors_of_its_own_names_the_copy() {
    let e = recorded("version: 1\nservers:\n  a:\n    comand: x\n").unwrap_err();
    assert_eq!(e.file, Path::new(COPY));
    assert_eq!(e.errors[0].line, Some(4), "{e}");
    let e = recorded("version: 1\nservers:\n  a:\n    command: ${env:bad-name}\n").unwrap_err();
    assert_eq!(e.file, Path::new(COPY));
}
