//! How a broken file is reported: every error sorted by position, bounds on how
//! many are located, YAML syntax errors, unreadable and hostile files, and
//! finding the file (`discover`).

use super::*;

#[test]
fn many_errors_are_all_reported_sorted_by_position() {
    let text = "servers:\n  b:\n    command: x\n    shell: maybe\n  A:\n    command: 1\n    args: x\nversion: 3\nextra: 1\n";
    assert_eq!(
        errors(text),
        [
            "4:12: servers.b.shell: expected a boolean (true or false), found a string",
            "5:3: servers.A: invalid server name `A`: use 1 to 63 lowercase letters, digits, `-` and `_`, starting with a letter or digit (names become file and socket names)",
            "7:11: servers.A.args: expected a sequence of strings, found a string; write one item per argument, like [\"-y\", \"some-package\"]",
            "8:10: version: unsupported version `3`; this mcpfleet reads version 1",
            "9:1: extra: unknown key `extra`",
        ]
    );
}

#[test]
fn errors_beyond_a_hundred_are_counted_not_located() {
    let mut text = String::from(HEAD);
    for i in 0..150 {
        text.push_str(&format!("  s{i}: {{command: x, bogus: 1}}\n"));
    }
    let err = load_str(&text, Path::new("f.yaml"), &env).unwrap_err();
    assert_eq!(err.errors.len(), 150);
    assert!(err.errors[..100].iter().all(|e| e.line.is_some()));
    assert!(err.errors[100..].iter().all(|e| e.line.is_none()));
    assert_eq!(err.errors[99].line, Some(102));
    let shown = err.to_string();
    assert!(shown.starts_with("invalid fleet file f.yaml: 150 errors\n"));
    assert!(shown.ends_with("\n... and 50 more errors"), "{shown}");
}

#[test]
fn messages_stay_on_one_line() {
    assert_eq!(
        errors(
            "version: 1
servers:
  a:
    command: x
    \"evil\\nfleet.yaml:1:1: forged\": 1
    connect_timeout: \"1\\ts\"\n"
        ),
        [
            "5:5: servers.a[\"evil\\nfleet.yaml:1:1: forged\"]: unknown key `evil\\nfleet.yaml:1:1: forged`",
            "6:22: servers.a.connect_timeout: `1\\ts` has an unknown unit `\\ts`; use ms, s, m or h",
        ]
    );
}

#[test]
fn large_files_locate_fewer_errors() {
    assert_eq!(locate_budget(0), 100);
    assert_eq!(locate_budget(20 * 1024), 100);
    assert_eq!(locate_budget(512 * 1024), 32);
    assert_eq!(locate_budget(MAX_FILE_BYTES), 16);
    assert_eq!(locate_budget(usize::MAX), 10);
}

#[test]
fn display_of_the_whole_report() {
    let err = load_str(
        "version: 1\nservers:\n  a: {command: x, foo: 1}\n",
        Path::new("dir/f.yaml"),
        &env,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid fleet file dir/f.yaml: 1 error\ndir/f.yaml:3:19: servers.a.foo: unknown key `foo`"
    );
}

#[test]
fn yaml_syntax_errors_have_positions() {
    assert_eq!(
        one_error("version: 1\nservers:\n  a:\n    command: [x\n    args: y\n"),
        "5:9: (top level): YAML syntax error: did not find expected ',' or ']', while parsing a flow sequence at line 4 column 14"
    );
    assert_eq!(
        one_error("version: 1\nservers: a: b\n"),
        "2:11: (top level): YAML syntax error: mapping values are not allowed in this context"
    );
    assert_eq!(
        one_error("version: 1\n\tservers: {}\n"),
        "2:1: (top level): YAML syntax error: found a tab character that violates indentation, while scanning a plain scalar at line 1 column 10"
    );
}

#[test]
fn load_reports_unreadable_oversized_and_non_utf8_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let err = load(&missing, &env).unwrap_err();
    assert_eq!(err.file, missing);
    assert!(
        err.errors[0]
            .message
            .starts_with("cannot read the fleet file"),
        "{err}"
    );

    let big = dir.path().join("big.yaml");
    let mut text = String::from(HEAD);
    while text.len() < 10 * 1024 * 1024 {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&big, &text).unwrap();
    let started = std::time::Instant::now();
    let err = load(&big, &env).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.errors.len(), 1);
    assert!(
        err.errors[0].message.contains("larger than 1024 KiB"),
        "{err}"
    );
    assert!(load_str(&text, &big, &env).is_err());

    let latin1 = dir.path().join("latin1.yaml");
    std::fs::write(&latin1, b"version: 1\nname: caf\xe9\n").unwrap();
    let err = load(&latin1, &env).unwrap_err();
    assert_eq!(
        err.errors[0].to_string(),
        "2:10: (top level): the file is not valid UTF-8"
    );

    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "\u{feff}version: 1\nservers: {a: {command: x}}\n").unwrap();
    assert_eq!(load(&good, &env).unwrap().servers.len(), 1);
}

#[test]
fn hostile_yaml_gives_clean_errors() {
    let mut bomb = String::from(
        "version: 1\nservers: {}\nlol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let refs = vec![format!("*l{}", i - 1); 9].join(", ");
        bomb.push_str(&format!("lol{i}: &l{i} [{refs}]\n"));
    }
    let started = std::time::Instant::now();
    let err = load_str(&bomb, Path::new("bomb.yaml"), &env).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.errors.len(), 1, "{err}");

    let deep = format!(
        "version: 1\nservers: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let err = load_str(&deep, Path::new("deep.yaml"), &env).unwrap_err();
    assert!(err.errors[0].message.contains("nested too deeply"), "{err}");

    let two = load_str("version: 1\n---\nversion: 1\n", Path::new("two.yaml"), &env).unwrap_err();
    assert!(
        two.errors[0]
            .message
            .contains("more than one YAML document"),
        "{two}"
    );
}

#[test]
fn no_input_panics() {
    let valid = "version: 1\nname: demo\ndefaults: {connect_timeout: 5s, health: {interval: 1m}}\nservers:\n  a:\n    command: \"${env:TOKEN}\"\n    args: [\"-y\", 1, &x [a]]\n    env: {K: *x, L: '${env:'}\n    cwd: .\n    restart: {policy: on-failure, backoff: {max: 1s}, max_restarts: 2}\n    health: {timeout: 1s}\n";
    let chars: Vec<char> = valid.chars().collect();
    for cut in 0..=chars.len() {
        let prefix: String = chars[..cut].iter().collect();
        let _ = load_str(&prefix, &fleet_path(), &env);
        for inject in [
            "\"", "[", "{", ":", "&", "*", "!", "\t", "\u{0}", "- ", "\n  ", "? ", "|",
        ] {
            let mut mutated = prefix.clone();
            mutated.push_str(inject);
            mutated.extend(&chars[cut..]);
            let _ = load_str(&mutated, &fleet_path(), &env);
        }
    }
}

#[test]
fn discover_order() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let explicit = cwd.join("explicit.yaml");
    let from_env = cwd.join("env.yaml");
    let default = cwd.join("mcpfleet.yaml");
    for f in [&explicit, &from_env, &default] {
        std::fs::write(f, HEAD).unwrap();
    }
    let find = |explicit: Option<&Path>, env: Option<&OsStr>, cwd: &Path| {
        discover_below(explicit, env, cwd, Some(dir.path())).map(|c| c.path)
    };
    let env_value = OsStr::new("env.yaml");
    assert_eq!(
        find(Some(Path::new("explicit.yaml")), Some(env_value), cwd).unwrap(),
        explicit
    );
    assert_eq!(find(None, Some(env_value), cwd).unwrap(), from_env);
    assert_eq!(
        find(None, Some(from_env.as_os_str()), Path::new("/")).unwrap(),
        from_env
    );
    assert_eq!(find(None, None, cwd).unwrap(), default);
    assert_eq!(find(None, Some(OsStr::new("")), cwd).unwrap(), default);

    // A named file that is missing is an error, never a silent fallback.
    let err = discover_below(
        Some(Path::new("nope.yaml")),
        Some(env_value),
        cwd,
        Some(cwd),
    )
    .unwrap_err();
    assert_eq!(err.file, cwd.join("nope.yaml"));
    assert!(
        err.to_string().contains("-f/--file does not exist"),
        "{err}"
    );
    let err = find(None, Some(OsStr::new("nope.yaml")), cwd).unwrap_err();
    assert!(
        err.to_string().contains("MCPFLEET_FILE does not exist"),
        "{err}"
    );
    std::fs::remove_file(&default).unwrap();
    let err = find(None, None, cwd).unwrap_err();
    assert!(
        err.to_string()
            .contains("no mcpfleet.yaml or mcpfleet.yml in")
            && err.to_string().contains("or any directory above it"),
        "{err}"
    );
    assert_eq!(
        err.file, default,
        "the error names where the file was looked for first"
    );
    let err = find(Some(cwd), None, cwd).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
}

#[test]
fn discover_looks_in_the_parents_for_either_name() {
    let top = tempfile::tempdir().unwrap();
    let deep = top.path().join("a/b/c");
    std::fs::create_dir_all(&deep).unwrap();
    let find = |cwd: &Path| discover_below(None, None, cwd, Some(top.path())).unwrap();

    // The nearest directory that has one wins; `.yml` counts as well.
    std::fs::write(top.path().join("mcpfleet.yaml"), HEAD).unwrap();
    std::fs::write(top.path().join("a/mcpfleet.yml"), HEAD).unwrap();
    let found = find(&deep);
    assert_eq!(found.path, top.path().join("a/mcpfleet.yml"));
    assert_eq!(found.named, Named::Default);
    assert!(found.notices.is_empty(), "{:?}", found.notices);
    assert_eq!(find(top.path()).path, top.path().join("mcpfleet.yaml"));

    // Both names in one directory: `mcpfleet.yaml`, and a notice.
    std::fs::write(top.path().join("a/mcpfleet.yaml"), HEAD).unwrap();
    let found = find(&deep);
    assert_eq!(found.path, top.path().join("a/mcpfleet.yaml"));
    assert_eq!(found.notices.len(), 1, "{:?}", found.notices);
    assert!(
        found.notices[0].contains("both mcpfleet.yaml and mcpfleet.yml are in"),
        "{:?}",
        found.notices
    );

    // A file named on the command line is never looked for.
    let named = discover_below(Some(Path::new("x.yaml")), None, &deep, Some(top.path()));
    assert_eq!(named.unwrap_err().file, deep.join("x.yaml"));

    // Where the copy of a gone default file is looked for: nearest first.
    let all = default_candidates(&deep);
    assert_eq!(all[0], deep.join("mcpfleet.yaml"));
    assert_eq!(all[1], deep.join("mcpfleet.yml"));
    assert_eq!(all[2], top.path().join("a/b/mcpfleet.yaml"));
}

#[test]
fn discover_passes_over_a_parents_file_of_another_user() {
    use std::os::unix::fs::MetadataExt;
    let top = tempfile::tempdir().unwrap();
    let sub = top.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let planted = top.path().join("mcpfleet.yaml");
    std::fs::write(&planted, HEAD).unwrap();
    let me = crate::platform::euid();
    if me != 0 {
        // Only root can give a file away; elsewhere the file is this user's.
        let found = discover_below(None, None, &sub, Some(top.path())).unwrap();
        assert_eq!(found.path, planted);
        return;
    }
    std::os::unix::fs::chown(&planted, Some(4242), None).unwrap();
    assert_eq!(std::fs::metadata(&planted).unwrap().uid(), 4242);
    let err = discover_below(None, None, &sub, Some(top.path())).unwrap_err();
    assert_eq!(err.file, sub.join("mcpfleet.yaml"));
    let found = candidate_below(None, None, &sub, Some(top.path()));
    assert_eq!(found.notices.len(), 1, "{:?}", found.notices);
    assert!(
        found.notices[0].contains("belongs to user 4242"),
        "{:?}",
        found.notices
    );
    // In the current directory itself, the file is taken as it always was.
    let found = discover_below(None, None, top.path(), Some(top.path())).unwrap();
    assert_eq!(found.path, planted);
}
