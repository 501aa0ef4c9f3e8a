//! Bad input everywhere: fuzz-style and property tests of the fleet-file parser
//! and of the control protocol's decoder. Whatever the input, the answer is `Ok` or
//! an error that names its place (file, line and column, or key path); never a
//! panic, never a hang, never unbounded memory.
//!
//! Random cases come from a small deterministic PRNG (splitmix64). Every run uses
//! the same seed unless `MCPFLEET_FUZZ_SEED` is set (a number, decimal or `0x` hex),
//! and a failure prints the seed and the case, so that it can be replayed.
//! `MCPFLEET_FUZZ_ITERS=N` multiplies the number of cases by N (default 1) for a
//! longer search.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use mcpfleet::config::{self, ConfigError, ConfigErrors, Fleet};
use mcpfleet::protocol::{self, Line, MAX_LINE_BYTES, Op, Request};
use serde_json::Value;

// ---------------------------------------------------------------------------------
// Randomness

/// The seed when `MCPFLEET_FUZZ_SEED` is not set.
const BASE_SEED: u64 = 0x6d63_7066_6c65_6574;

/// The generator (`common::Rng`) of case `index` of a test, independent of the
/// cases before it.
fn rng_for_case(test: &str, index: usize) -> Rng {
    let mut name = 0xcbf2_9ce4_8422_2325u64;
    for b in test.bytes() {
        name = (name ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    let mut rng = Rng::new(seed() ^ name ^ (index as u64).wrapping_mul(0x9e37_79b9));
    rng.next();
    rng
}

/// The seed of this run: `MCPFLEET_FUZZ_SEED` when set, else [`BASE_SEED`].
fn seed() -> u64 {
    match std::env::var("MCPFLEET_FUZZ_SEED") {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("MCPFLEET_FUZZ_SEED={text:?} is not a number"))
        }
        Err(_) => BASE_SEED,
    }
}

/// `default` cases, times `MCPFLEET_FUZZ_ITERS` when set.
fn cases(default: usize) -> usize {
    let factor = std::env::var("MCPFLEET_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1);
    default * factor.max(1)
}

/// Says how to replay a failing case; a test that panics prints it on the way out.
struct Replay {
    test: &'static str,
    case: usize,
    input: Vec<u8>,
}

impl Replay {
    fn new(test: &'static str) -> Replay {
        Replay {
            test,
            case: 0,
            input: Vec::new(),
        }
    }

    fn at(&mut self, case: usize, input: &[u8]) {
        self.case = case;
        self.input = input.to_vec();
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let shown = &self.input[..self.input.len().min(4096)];
            eprintln!(
                "{}: failed at case {} with MCPFLEET_FUZZ_SEED={:#x}; input ({} bytes{}):\n{:?}",
                self.test,
                self.case,
                seed(),
                self.input.len(),
                if shown.len() < self.input.len() {
                    ", first 4096 shown"
                } else {
                    ""
                },
                String::from_utf8_lossy(shown)
            );
        }
    }
}

// ---------------------------------------------------------------------------------
// Valid fleet files to start from

const EXAMPLE: &str = include_str!("../../config/example.yaml");

/// Fleet files in the shapes the other tests and the README use, covering every key
/// of the format.
const SEEDS: &[&str] = &[
    EXAMPLE,
    "version: 1\nservers:\n  steady:\n    command: \"/bin/true\"\n    args: [\"--tools\", \"4\"]\n",
    "version: 1\nname: demo\ndefaults:\n  connect_timeout: 30s\nservers:\n  a:\n    command: x\n    args: [\"--token\", \"${env:MCPFLEET_FUZZ_SECRET}\"]\n    env:\n      API_KEY: \"${env:MCPFLEET_FUZZ_SECRET}\"\n      LEVEL: info\n    cleanup_timeout: 500ms\n  b:\n    command: y\n    enabled: false\n",
    "version: 1\nservers:\n  remote:\n    url: http://127.0.0.1:3001/mcp\n    headers: { Authorization: \"Bearer ${env:MCPFLEET_FUZZ_SECRET}\", X-Trace: \"1\" }\n    connect_timeout: 10s\n    cleanup_timeout: 5s\n    health: { interval: 30s, timeout: 5s, failures: 3 }\n",
    "version: 1\ndefaults:\n  connect_timeout: 10s\n  cleanup_timeout: 10s\n  restart:\n    policy: on-failure\n    backoff: { initial: 500ms, max: 30s }\n    max_restarts: 5\n    window: 60s\n  health:\n    interval: 30s\n    timeout: 5s\n    failures: 3\n  idle_timeout: 10m\nservers:\n  crashy:\n    command: fixture\n    args: [\"--crash-after-ms\", \"100\"]\n    restart: { policy: always }\n  scripted:\n    shell: true\n    command: exec my-server --port 0\n  parked:\n    command: some-server\n    enabled: false\n    idle_timeout: none\n",
    "# yaml-language-server: $schema=./mcpfleet.schema.json\nversion: 1\nname: anchors\nservers:\n  one: &base\n    command: npx\n    args:\n      - -y\n      - \"@modelcontextprotocol/server-everything@2026.8.31\"\n      - stdio\n    cwd: .\n  two: *base\n  three:\n    command: 'single quoted'\n    args: [1.10, 0x1F, true, \"7\", '']\n    env:\n      A: |\n        literal block\n      B: >-\n        folded\n        text\n",
];

/// Looks up `${env:NAME}` the same way in every test: a few names are set, the
/// rest are missing (which is an error the fuzzer should reach too).
fn fuzz_env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/fuzz".into()),
        "MCPFLEET_FUZZ_SECRET" => Some("s3cret".into()),
        _ => None,
    }
}

/// Pieces of YAML and of the format that mutations insert: these, and every key
/// and restart policy of the format, taken from the parser's own lists.
const TOKENS: &[&str] = &[
    ":",
    ": ",
    "- ",
    "-",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\"",
    "'",
    "&a ",
    "*a",
    "&b",
    "*b",
    "!",
    "!!str ",
    "!!binary ",
    "!secret ",
    "? ",
    "|",
    ">",
    "#",
    "\n",
    "\n  ",
    "\t",
    "    ",
    "---\n",
    "...\n",
    "%YAML 1.2\n",
    "%TAG ! tag:x,2000:\n",
    "<<: *a\n",
    "${env:",
    "${env:HOME}",
    "${env:NOPE}",
    "}",
    "$$",
    "\\",
    "\\u0000",
    "\"\\0\"",
    "\"\\x00\"",
    "\0",
    "\u{feff}",
    "\r",
    "\r\n",
    "~",
    "null",
    "true",
    "1e400",
    "-1",
    "0",
    "99999999999999999999999h",
    "18446744073709551615ms",
    "none",
    "0ms",
    "1.5s",
    "..",
    "../x",
    "/etc",
    "a/b",
    "\u{e9}",
    "\u{1F600}",
    "\u{85}",
    "\u{2028}",
    "http://",
    "https://[::1]:0/",
];

fn tokens() -> &'static [&'static str] {
    static ALL: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        use mcpfleet::config::{
            BACKOFF_KEYS, DEFAULTS_KEYS, HEALTH_KEYS, RESTART_KEYS, RESTART_POLICIES, SERVER_KEYS,
            SUPERVISOR_KEYS, TOP_KEYS,
        };
        let mut all = TOKENS.to_vec();
        for list in [
            TOP_KEYS,
            DEFAULTS_KEYS,
            SERVER_KEYS,
            RESTART_KEYS,
            BACKOFF_KEYS,
            HEALTH_KEYS,
            RESTART_POLICIES,
            SUPERVISOR_KEYS,
        ] {
            for key in list {
                if !all.contains(key) {
                    all.push(key);
                }
            }
        }
        all
    })
}

/// Values of every type and edge that mutations put after a `key: `.
const VALUES: &[&str] = &[
    "1",
    "0",
    "-1",
    "4294967296",
    "18446744073709551616",
    "1.5",
    "1e3",
    ".inf",
    ".nan",
    "true",
    "False",
    "yes",
    "~",
    "\"\"",
    "''",
    "[]",
    "{}",
    "[a, 1, ~]",
    "{a: 1}",
    "1ms",
    "0ms",
    "none",
    "None",
    "59s",
    "1h",
    "18446744073709551615ms",
    "18446744073709551616ms",
    "307445734561825860m",
    "5124095576030431h",
    "5124095576030432h",
    "00010s",
    "1 s",
    "1.0s",
    "-5s",
    "never",
    "always",
    "on-failure",
    "On-Failure",
    "x",
    "\"a\\0b\"",
    "\"\\x1b[31m\"",
    "\"line\\nbreak\"",
    "\"${env:HOME}\"",
    "\"${env:MCPFLEET_FUZZ_SECRET}x${env:HOME}\"",
    "\"${env:}\"",
    "\"${env:NOPE}\"",
    "\"${env:HOME\"",
    "\"$${env:HOME}\"",
    "http://h",
    "https://[::1]:443/mcp",
    "http://h:0",
    "http://user:pw@h:65535/p?q#f",
    "\"http://h/\\r\\nX: y\"",
    ".",
    "/",
    "..",
    "/nonexistent",
    "/dev/null",
    "/proc",
    "!!str 1",
    "!!int x",
    "!secret x",
    "&x 1",
    "*x",
    "|\n  a\n",
    ">-\n  b\n",
];

/// Applies one random mutation to `text`.
fn mutate(rng: &mut Rng, text: &mut Vec<u8>) {
    let len = text.len();
    let at = |rng: &mut Rng| rng.below(len + 1);
    // Replace the value after a random `: ` up to the end of its line.
    if rng.chance(20) {
        let colons: Vec<usize> = text
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w == b": ")
            .map(|(i, _)| i + 2)
            .collect();
        if !colons.is_empty() {
            let start = *rng.pick(&colons);
            let end = text[start..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(text.len(), |i| start + i);
            text.splice(start..end, rng.pick(VALUES).bytes());
            return;
        }
    }
    match rng.below(10) {
        // Flip one bit.
        0 if len > 0 => {
            let i = rng.below(len);
            text[i] ^= 1 << rng.below(8);
        }
        // Overwrite a byte with a random or an interesting one.
        1 if len > 0 => {
            let i = rng.below(len);
            text[i] = match rng.below(3) {
                0 => rng.next() as u8,
                1 => *rng.pick(b":-[]{},&*!|>#\"'\t\n\r \\%@`?~\0\xff\xc3\xef"),
                _ => *rng.pick(b"abcxyz019 "),
            };
        }
        // Insert random bytes.
        2 => {
            let n = 1 + rng.below(8);
            let bytes = rng.bytes(n);
            let i = at(rng);
            text.splice(i..i, bytes);
        }
        // Insert a token.
        3 | 4 => {
            let token = rng.pick(tokens()).as_bytes().to_vec();
            let i = at(rng);
            text.splice(i..i, token);
        }
        // Delete a range.
        5 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            text.drain(i..i + n);
        }
        // Duplicate a range (a repeated line makes duplicate keys).
        6 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(200));
            let piece = text[i..i + n].to_vec();
            let j = at(rng);
            text.splice(j..j, piece);
        }
        // Splice in a fragment of another valid fleet file, in place of a range.
        7 | 8 => {
            let other = rng.pick(SEEDS).as_bytes();
            let from = rng.below(other.len());
            let n = 1 + rng.below((other.len() - from).min(300));
            let piece = other[from..from + n].to_vec();
            let i = at(rng);
            let cut = rng.below((len - i).min(100) + 1);
            text.splice(i..i + cut, piece);
        }
        // Change the indentation of a line.
        _ => {
            let starts: Vec<usize> = std::iter::once(0)
                .chain(
                    text.iter()
                        .enumerate()
                        .filter(|(_, b)| **b == b'\n')
                        .map(|(i, _)| i + 1),
                )
                .filter(|i| *i < len)
                .collect();
            if let Some(&i) = starts.get(rng.below(starts.len().max(1))) {
                if rng.chance(50) {
                    let n = 1 + rng.below(4);
                    text.splice(i..i, std::iter::repeat_n(b' ', n));
                } else if text.get(i) == Some(&b' ') {
                    text.remove(i);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// Fleet file properties

/// Errors that concern the whole file rather than a place in it.
fn is_whole_file_error(e: &ConfigError) -> bool {
    [
        "the file is empty",
        "the file is larger than",
        "cannot read the fleet file",
    ]
    .iter()
    .any(|m| e.message.starts_with(m))
}

/// Whether an error tells the user where the problem is.
fn names_a_place(e: &ConfigError) -> bool {
    e.line.is_some() || !e.path.is_empty() || is_whole_file_error(e)
}

/// `^[a-z0-9][a-z0-9_-]{0,62}$`, written again here so that the test does not
/// trust the code under test.
fn is_safe_name(name: &str) -> bool {
    let b = name.as_bytes();
    (1..=63).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
}

/// The properties every answer of the parser has, whatever the input.
#[track_caller]
fn check_answer(result: &Result<Fleet, ConfigErrors>, path: &Path) {
    match result {
        Ok(fleet) => {
            assert!(!fleet.servers.is_empty(), "a fleet without servers");
            for s in &fleet.servers {
                assert!(is_safe_name(&s.name), "unsafe server name {:?}", s.name);
            }
            if let Some(name) = &fleet.name {
                assert!(is_safe_name(name), "unsafe fleet name {name:?}");
            }
            // Rendering must not panic, and the YAML form is a valid fleet file
            // (unless absolute paths and quoting made it too large for one).
            let _ = fleet.resolved_json();
            let yaml = fleet.resolved_yaml();
            if yaml.len() > config::MAX_FILE_BYTES {
                return;
            }
            let again = config::load_str(&yaml, path, &fuzz_env).unwrap_or_else(|e| {
                panic!("the resolved YAML is not a valid fleet file: {e}\n{yaml}")
            });
            let names = |f: &Fleet| f.servers.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
            assert_eq!(names(&again), names(fleet), "{yaml}");
        }
        Err(errors) => {
            assert!(!errors.errors.is_empty(), "an error without errors");
            assert_eq!(errors.file, path, "the error names another file");
            for e in &errors.errors {
                assert!(names_a_place(e), "an error without a place: {e:?}");
                assert!(!e.message.is_empty(), "an empty message: {e:?}");
                assert!(
                    !e.message.contains(['\n', '\r']) && !e.path.contains(['\n', '\r']),
                    "a line break would break the one-line-per-error report: {e:?}"
                );
            }
            let shown = errors.to_string();
            let file = path.display().to_string();
            for line in shown.lines().skip(1) {
                assert!(
                    line.starts_with(&file) || line.starts_with("... and "),
                    "a report line that does not start with the file: {line:?}"
                );
            }
        }
    }
}

/// Loads `bytes` as a fleet file through the API the CLI uses, bounded in time.
fn load_bytes(dir: &Path, bytes: &[u8]) -> (Result<Fleet, ConfigErrors>, Duration, PathBuf) {
    let path = dir.join("mcpfleet.yaml");
    std::fs::write(&path, bytes).expect("write the fleet file");
    let started = Instant::now();
    let result = config::load(&path, &fuzz_env);
    (result, started.elapsed(), path)
}

/// The longest one load of a small file may take (debug build, loaded machine).
const SMALL_LOAD_LIMIT: Duration = Duration::from_secs(5);

#[test]
fn mutated_fleet_files_load_or_fail_with_a_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut replay = Replay::new("mutated_fleet_files_load_or_fail_with_a_place");
    let (mut ok, mut failed) = (0, 0);
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for case in 0..cases(400) {
        let mut rng = rng_for_case(replay.test, case);
        let mut text = rng.pick(SEEDS).as_bytes().to_vec();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut text);
        }
        replay.at(case, &text);
        let (result, took, path) = load_bytes(dir.path(), &text);
        assert!(took < SMALL_LOAD_LIMIT, "loading took {took:?}");
        slowest = slowest.max(took);
        check_answer(&result, &path);
        match result {
            Ok(_) => ok += 1,
            Err(_) => failed += 1,
        }
    }
    eprintln!(
        "{ok} valid, {failed} invalid in {:?}; slowest load {slowest:?}",
        started.elapsed()
    );
    // The mutations must reach both sides, or the test proves little.
    assert!(ok > 0 && failed > ok / 4, "{ok} valid, {failed} invalid");
}

#[test]
fn the_seeds_are_valid_fleet_files() {
    let dir = tempfile::tempdir().unwrap();
    for (i, seed) in SEEDS.iter().enumerate() {
        let (result, _, path) = load_bytes(dir.path(), seed.as_bytes());
        if let Err(e) = &result {
            panic!("seed {i} is invalid: {e}");
        }
        check_answer(&result, &path);
    }
}

/// Loads `text`, expects errors, checks their properties and returns them.
#[track_caller]
fn refused(dir: &Path, text: &[u8], limit: Duration) -> Vec<ConfigError> {
    let (result, took, path) = load_bytes(dir, text);
    assert!(took < limit, "loading took {took:?} (limit {limit:?})");
    check_answer(&result, &path);
    match result {
        Ok(fleet) => panic!("accepted: {:?}", fleet.servers),
        Err(e) => e.errors,
    }
}

/// The one error of `errors` whose message contains `needle`.
#[track_caller]
fn error_with<'e>(errors: &'e [ConfigError], needle: &str) -> &'e ConfigError {
    errors
        .iter()
        .find(|e| e.message.contains(needle))
        .unwrap_or_else(|| panic!("no error says {needle:?}: {errors:#?}"))
}

/// The "billion laughs": ten levels of anchors, each a list of ten aliases to the
/// level before; fully expanded that is 10^10 strings.
fn billion_laughs() -> String {
    let mut text = String::from(
        "version: 1\nl0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..=10 {
        let refs = vec![format!("*l{}", level - 1); 10].join(",");
        text.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    text.push_str("servers:\n  a:\n    command: x\n    args: *l10\n");
    text
}

#[test]
fn yaml_bombs_are_refused_fast_with_a_place() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(5);
    // Alias expansion, at the top and where a server would use it.
    let errors = refused(dir.path(), billion_laughs().as_bytes(), limit);
    let e = error_with(&errors, "expand");
    assert!(e.line.is_some(), "{e:?}");
    // Anchors in keys, and merge keys that repeat a mapping.
    let mut keys =
        String::from("version: 1\nk0: &k0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n");
    for level in 1..=8 {
        let merges: Vec<String> = (0..8).map(|i| format!("m{i}: *k{}", level - 1)).collect();
        keys.push_str(&format!("k{level}: &k{level} {{{}}}\n", merges.join(", ")));
    }
    keys.push_str("servers: {a: {command: x, env: *k8}}\n");
    let errors = refused(dir.path(), keys.as_bytes(), limit);
    assert!(errors.iter().all(|e| e.line.is_some()), "{errors:#?}");
    // One large node repeated by many short aliases (quadratic, not exponential).
    let items = vec!["x"; 2_000].join(",");
    let aliases = vec!["*a"; 2_000].join(",");
    let text = format!(
        "version: 1\nbig: &a [{items}]\nservers:\n  s:\n    command: x\n    args: [{aliases}]\n"
    );
    let errors = refused(dir.path(), text.as_bytes(), limit);
    error_with(&errors, "expand");
    // An alias to itself, and to an anchor defined below it.
    let errors = refused(dir.path(), b"version: 1\nservers: &s {a: *s}\n", limit);
    assert!(errors[0].line.is_some(), "{errors:#?}");
    let errors = refused(
        dir.path(),
        b"version: 1\nservers:\n  a: *later\n  b: &later {command: x}\n",
        limit,
    );
    assert_eq!(errors[0].line, Some(3), "{errors:#?}");
}

#[test]
fn deep_nesting_is_refused_fast_with_a_place() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(5);
    let n = 10_000;
    let cases: Vec<(&str, String)> = vec![
        (
            "[",
            format!("version: 1\nservers: {}{}\n", "[".repeat(n), "]".repeat(n)),
        ),
        (
            "{",
            format!(
                "version: 1\nservers: {}{}\n",
                "{a: ".repeat(n),
                "}".repeat(n)
            ),
        ),
        (
            "[{",
            format!("version: 1\nservers: {}\n", "[{a: ".repeat(n / 2)),
        ),
        (
            "unclosed [",
            format!("version: 1\nservers: {}", "[".repeat(n)),
        ),
        (
            "- ",
            format!(
                "version: 1\nservers:\n  a:\n    args:\n      {}x\n",
                "- ".repeat(n)
            ),
        ),
        ("? ", format!("version: 1\nservers: {}x\n", "? ".repeat(n))),
        (
            "!t ",
            format!("version: 1\nservers: {}x\n", "!t ".repeat(n)),
        ),
        (
            "&a ",
            format!("version: 1\nservers: {}x\n", "&a ".repeat(n)),
        ),
        // Block mappings, one space deeper each: as deep as fits in the size limit.
        ("block", {
            let mut text = String::from("version: 1\nservers:\n");
            for depth in 1..1400 {
                text.push_str(&" ".repeat(depth));
                text.push_str("a:\n");
            }
            text
        }),
        // Block sequences of block mappings.
        ("- a:", {
            let mut text = String::from("version: 1\nservers:\n");
            for depth in 1..700 {
                text.push_str(&" ".repeat(depth * 2));
                text.push_str("- a:\n");
            }
            text
        }),
    ];
    for (what, text) in cases {
        let started = Instant::now();
        let errors = refused(dir.path(), text.as_bytes(), limit);
        assert!(
            errors.iter().all(|e| e.line.is_some()),
            "{what}: {errors:#?}"
        );
        eprintln!(
            "{what}: {} bytes refused in {:?}: {}",
            text.len(),
            started.elapsed(),
            errors[0]
        );
    }
}

#[test]
fn odd_bytes_are_refused_at_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(5);
    let place = |errors: &[ConfigError]| (errors[0].line, errors[0].column);
    // Invalid UTF-8: at the first bad byte, in characters.
    let errors = refused(
        dir.path(),
        b"version: 1\nservers:\n  \xc3\xa9a\xff: {command: x}\n",
        limit,
    );
    assert_eq!(place(&errors), (Some(3), Some(5)), "{errors:#?}");
    error_with(&errors, "UTF-8");
    let errors = refused(
        dir.path(),
        b"version: 1\nservers:\n  a: {command: \xed\xa0\x80}\n",
        limit,
    );
    assert_eq!(place(&errors), (Some(3), Some(16)), "{errors:#?}");
    let errors = refused(dir.path(), b"\xfe\xff\x00v", limit);
    assert_eq!(place(&errors), (Some(1), Some(1)), "{errors:#?}");
    // A NUL byte, raw (not the YAML escape).
    let errors = refused(
        dir.path(),
        b"version: 1\nservers:\n  a: {command: x\0y}\n",
        limit,
    );
    assert_eq!(errors[0].line, Some(3), "{errors:#?}");
    let errors = refused(dir.path(), b"\0", limit);
    assert_eq!(errors[0].line, Some(1), "{errors:#?}");
    // Other control characters.
    for c in [0x01u8, 0x08, 0x0b, 0x0c, 0x1b, 0x7f] {
        let mut text = b"version: 1\nservers:\n  a: {command: x".to_vec();
        text.push(c);
        text.extend_from_slice(b"}\n");
        let (result, _, path) = load_bytes(dir.path(), &text);
        check_answer(&result, &path);
    }
    // A byte order mark: fine at the start, a place elsewhere.
    let bom = "\u{feff}version: 1\nservers:\n  a: {command: x}\n";
    let (result, _, path) = load_bytes(dir.path(), bom.as_bytes());
    check_answer(&result, &path);
    assert!(
        result.is_ok(),
        "a leading BOM is allowed: {:?}",
        result.err()
    );
    let errors = refused(
        dir.path(),
        "version: 1\n\u{feff}servers:\n  a: {command: x}\n".as_bytes(),
        limit,
    );
    assert_eq!(errors[0].line, Some(2), "{errors:#?}");
    let (result, _, path) = load_bytes(
        dir.path(),
        "\u{feff}\u{feff}version: 1\nservers:\n  a: {command: x}\n".as_bytes(),
    );
    check_answer(&result, &path);
    // Tabs: as indentation an error at the tab; inside a flow or a value, fine.
    let errors = refused(
        dir.path(),
        b"version: 1\nservers:\n\ta:\n\t\tcommand: x\n",
        limit,
    );
    assert_eq!(errors[0].line, Some(3), "{errors:#?}");
    let errors = refused(
        dir.path(),
        b"version: 1\nservers:\n  a:\n  \tcommand: x\n",
        limit,
    );
    assert_eq!(errors[0].line, Some(4), "{errors:#?}");
    let (result, _, path) = load_bytes(dir.path(), b"version:\t1\nservers: {a:\t{command:\tx}}\n");
    check_answer(&result, &path);
    assert!(result.is_ok(), "{:?}", result.err());
    // CR line ends, alone and with LF.
    for text in [
        &b"version: 1\r\nservers:\r\n  a:\r\n    comand: x\r\n"[..],
        &b"version: 1\rservers:\r  a:\r    comand: x\r"[..],
    ] {
        let errors = refused(dir.path(), text, limit);
        let e = error_with(&errors, "comand");
        assert_eq!((e.line, e.column), (Some(4), Some(5)), "{errors:#?}");
    }
}

#[test]
fn duplicate_keys_name_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(5);
    let text = "version: 1\nservers:\n  a:\n    command: x\n    command: y\n  b: {command: x}\n  a: {command: z}\nversion: 1\n";
    let errors = refused(dir.path(), text.as_bytes(), limit);
    let found: Vec<(Option<usize>, &str, &str)> = errors
        .iter()
        .map(|e| (e.line, e.path.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                Some(5),
                "servers.a.command",
                "duplicate key `command` (first defined on line 4)"
            ),
            (
                Some(7),
                "servers.a",
                "duplicate key `a` (first defined on line 3)"
            ),
            (
                Some(8),
                "version",
                "duplicate key `version` (first defined on line 1)"
            ),
        ],
        "{errors:#?}"
    );
    // Keys that only look alike are different keys; keys that differ only in
    // how they are written are the same.
    let text =
        "version: 1\nservers:\n  a: {command: x}\n  \"a\": {command: y}\n  'a': {command: z}\n";
    let errors = refused(dir.path(), text.as_bytes(), limit);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    // Many duplicates: all reported, bounded in time.
    let text = format!(
        "version: 1\nservers:\n{}",
        "  a: {command: x}\n".repeat(500)
    );
    let errors = refused(dir.path(), text.as_bytes(), Duration::from_secs(15));
    assert_eq!(errors.len(), 499);
    assert!(errors.iter().all(names_a_place));
}

/// Server names that would escape the state directory, break a file or socket name,
/// or read as a command-line option.
fn harmful_names() -> Vec<(&'static str, String)> {
    vec![
        ("parent", "../x".into()),
        ("absolute", "/etc".into()),
        ("slash", "a/b".into()),
        ("dot", ".".into()),
        ("dotdot", "..".into()),
        ("empty", String::new()),
        ("nul", "a\0b".into()),
        ("newline", "a\nb".into()),
        ("carriage return", "a\rb".into()),
        ("trailing newline", "a\n".into()),
        ("10 000 characters", "a".repeat(10_000)),
        ("64 characters", "a".repeat(64)),
        ("option", "-rf".into()),
        ("upper case", "A".into()),
        ("space", "a b".into()),
        ("dot inside", "a.sock".into()),
        ("backslash", "a\\b".into()),
        ("glob", "*".into()),
        ("tilde", "~x".into()),
        ("unicode", "\u{e9}t\u{e9}".into()),
        ("fullwidth", "\u{ff41}".into()),
        ("right-to-left", "a\u{202e}b".into()),
        ("escape", "a\u{1b}[2Jb".into()),
        ("percent", "%2e%2e".into()),
    ]
}

/// A YAML double-quoted scalar, as an explicit key so that any length is allowed.
fn quoted_key(name: &str) -> String {
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn harmful_server_names_are_refused_at_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let limit = Duration::from_secs(5);
    for (what, name) in harmful_names() {
        let text = format!(
            "version: 1\nservers:\n  ? {}\n  : command: x\n",
            quoted_key(&name)
        );
        let errors = refused(dir.path(), text.as_bytes(), limit);
        assert_eq!(errors.len(), 1, "{what}: {errors:#?}");
        let e = &errors[0];
        assert_eq!((e.line, e.column), (Some(3), Some(5)), "{what}: {e:?}");
        assert!(e.path.starts_with("servers"), "{what}: {e:?}");
        assert!(e.message.contains("invalid server name"), "{what}: {e:?}");
        // The key is named, with its control characters escaped.
        let shown: String = name
            .chars()
            .flat_map(|c| match c.is_control() {
                true => c.escape_default().collect::<Vec<_>>(),
                false => vec![c],
            })
            .collect();
        assert!(e.message.contains(&format!("`{shown}`")), "{what}: {e:?}");
        // The same name as a plain key where YAML allows one, and as the fleet's name.
        if !name.is_empty()
            && name.len() < 1000
            && !name.contains(|c: char| c.is_control() || ":#[]{},&*!|>'\"%@`?-~ ".contains(c))
        {
            let text = format!("version: 1\nservers:\n  {name}: {{command: x}}\n");
            let errors = refused(dir.path(), text.as_bytes(), limit);
            assert_eq!(
                (errors[0].line, errors[0].column),
                (Some(3), Some(3)),
                "{what}: {errors:#?}"
            );
        }
        let text = format!(
            "version: 1\nname: {}\nservers: {{a: {{command: x}}}}\n",
            quoted_key(&name)
        );
        let errors = refused(dir.path(), text.as_bytes(), limit);
        assert_eq!(errors[0].path, "name", "{what}: {errors:#?}");
        assert_eq!(errors[0].line, Some(2), "{what}: {errors:#?}");
    }
    // Keys that are not strings at all.
    for key in ["~", "[a]", "{a: b}", "!!binary YQ==", "? a"] {
        let text = format!("version: 1\nservers:\n  ? {key}\n  : command: x\n");
        let errors = refused(dir.path(), text.as_bytes(), limit);
        assert_eq!(errors[0].line, Some(3), "{key}: {errors:#?}");
        assert!(errors[0].path.starts_with("servers"), "{key}: {errors:#?}");
    }
}

// ---------------------------------------------------------------------------------
// Fleet files through the real binary

/// What a child process did, and how much memory it took.
struct Measured {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    /// The highest `VmHWM` (peak resident set size) read from `/proc` while the
    /// child ran, in KiB.
    peak_rss_kib: u64,
    took: Duration,
}

/// The most memory a child of [`run_measured`] may map for data (heap and
/// anonymous mappings): beyond it, allocations fail and the child dies, which
/// fails the test. The hard bound behind the sampled peak.
const CHILD_DATA_LIMIT: u64 = 512 * 1024 * 1024;

/// `VmHWM` of a live process, in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Runs `cmd` to its end under [`CHILD_DATA_LIMIT`], reading its peak memory from
/// `/proc` every millisecond. (`ru_maxrss` from wait4 would not do: a child that
/// the test process spawns inherits the test process's own high-water mark.) A
/// child still running after `limit` is killed and fails the test.
fn run_measured(mut cmd: Command, limit: Duration) -> Measured {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    // SAFETY: setrlimit(2) is async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::resource::setrlimit(
                nix::sys::resource::Resource::RLIMIT_DATA,
                CHILD_DATA_LIMIT,
                CHILD_DATA_LIMIT,
            )
            .map_err(std::io::Error::from)
        });
    }
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpfleet");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mcpfleet") {
            break status;
        }
        peak = peak.max(vm_hwm_kib(child.id()).unwrap_or(0));
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpfleet did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Measured {
        code: status.code(),
        signal: status.signal(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss_kib: peak,
        took: started.elapsed(),
    }
}

/// Runs `mcpfleet -f FLEET ARGS` on `bytes` and checks the usage/config exit code.
#[track_caller]
fn cli_refuses(label: &str, bytes: &[u8], args: &[&str]) -> (TestFleet, Measured) {
    let fleet = TestFleet::raw(label, "");
    std::fs::write(&fleet.path, bytes).unwrap();
    let out = run_measured(fleet.command(args), Duration::from_secs(60));
    assert_eq!(
        (out.code, out.signal),
        (Some(2), None),
        "{label}: {args:?} must exit 2 (invalid fleet file)\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains(fleet.path.to_str().unwrap()),
        "{label}: stderr must name the file:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{label}: {}", out.stderr);
    fleet.assert_no_leftovers();
    (fleet, out)
}

/// The most memory one `validate` of a hostile file may take. A debug build of the
/// CLI alone takes about 10 MiB.
const CLI_RSS_LIMIT_KIB: u64 = 64 * 1024;

#[test]
fn mutated_fleet_files_through_the_cli_exit_0_or_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut replay = Replay::new("mutated_fleet_files_through_the_cli_exit_0_or_2");
    let (mut valid, mut invalid) = (0, 0);
    for case in 0..cases(12) {
        let mut rng = rng_for_case(replay.test, case);
        let mut text = rng.pick(SEEDS).as_bytes().to_vec();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut text);
        }
        // Half of the cases are made valid-looking again: the CLI must accept
        // what the library accepts.
        if case % 2 == 0 {
            let (result, _, _) = load_bytes(dir.path(), &text);
            if result.is_err() {
                text = rng.pick(SEEDS).as_bytes().to_vec();
            }
        }
        replay.at(case, &text);
        let fleet = TestFleet::raw("fuzz-cli", "");
        std::fs::write(&fleet.path, &text).unwrap();
        // The same file, and the same environment, for the library and the CLI.
        let expected = config::load(&fleet.path, &fuzz_env);
        let mut cmd = fleet.command(&["validate"]);
        cmd.env_clear()
            .env(TEST_ID_VAR, &fleet.test_id)
            .env("MCPFLEET_STATE_DIR", fleet.state_dir());
        for name in ["HOME", "MCPFLEET_FUZZ_SECRET"] {
            cmd.env(name, fuzz_env(name).unwrap());
        }
        let out = run_measured(cmd, Duration::from_secs(30));
        assert_ne!(out.code, Some(101), "a panic:\n{}", out.stderr);
        assert_eq!(out.signal, None, "killed by a signal:\n{}", out.stderr);
        match expected {
            Ok(_) => {
                valid += 1;
                assert_eq!(out.code, Some(0), "the library accepts it:\n{}", out.stderr);
            }
            Err(e) => {
                invalid += 1;
                assert_eq!(
                    out.code,
                    Some(2),
                    "the library refuses it ({e}):\n{}",
                    out.stderr
                );
                let file = fleet.path.to_str().unwrap();
                assert!(
                    out.stderr.contains(file),
                    "stderr must name the file:\n{}",
                    out.stderr
                );
                // The first error as the library reports it, position included.
                let first = e.to_string().lines().nth(1).unwrap().to_owned();
                assert!(
                    out.stderr.contains(&first),
                    "{first:?} not in:\n{}",
                    out.stderr
                );
            }
        }
        assert!(
            out.peak_rss_kib < CLI_RSS_LIMIT_KIB,
            "peak RSS {} KiB",
            out.peak_rss_kib
        );
    }
    eprintln!("{valid} valid, {invalid} invalid");
    assert!(valid > 0 && invalid > 0, "{valid} valid, {invalid} invalid");
}

#[test]
fn odd_files_through_the_cli_name_the_place() {
    let deep = format!("version: 1\nservers: {}\n", "[".repeat(10_000));
    let cases: [(&str, &[u8], &str); 7] = [
        (
            "utf8",
            b"version: 1\nservers:\n  a: {command: \"\xff\"}\n",
            ":3:17: ",
        ),
        ("nul", b"version: 1\nservers:\n  a: {command: x\0}\n", ":3:"),
        (
            "bom",
            "version: 1\n\u{feff}servers: {a: {command: x}}\n".as_bytes(),
            ":2:",
        ),
        ("tab", b"version: 1\nservers:\n\ta: {command: x}\n", ":3:"),
        (
            "dup",
            b"version: 1\nservers:\n  a: {command: x}\n  a: {command: x}\n",
            ":4:3: servers.a: duplicate key `a` (first defined on line 3)",
        ),
        (
            "two-docs",
            b"version: 1\nservers: {a: {command: x}}\n---\nversion: 1\n",
            ":4:1: ",
        ),
        ("deep", deep.as_bytes(), ":2:266: "),
    ];
    for (label, bytes, place) in cases {
        let (fleet, out) = cli_refuses(label, bytes, &["validate"]);
        let expected = format!("{}{place}", fleet.path.display());
        assert!(
            out.stderr.contains(&expected),
            "{label}: no {expected:?} in:\n{}",
            out.stderr
        );
    }
}

#[test]
fn a_yaml_bomb_through_the_cli_is_refused_in_bounded_memory() {
    let (_, out) = cli_refuses("bomb", billion_laughs().as_bytes(), &["validate"]);
    assert!(out.stderr.contains("expand"), "{}", out.stderr);
    // For scale: the same command on a small valid file.
    let small = TestFleet::raw(
        "bomb-baseline",
        "version: 1\nservers:\n  a:\n    command: x\n",
    );
    let baseline = run_measured(small.command(&["validate"]), Duration::from_secs(30));
    assert_eq!(baseline.code, Some(0), "{}", baseline.stderr);
    eprintln!(
        "billion laughs: exit 2 in {:?}, peak RSS {} KiB (a valid file: {:?}, {} KiB)",
        out.took, out.peak_rss_kib, baseline.took, baseline.peak_rss_kib
    );
    assert!(
        out.peak_rss_kib < CLI_RSS_LIMIT_KIB,
        "peak RSS {} KiB",
        out.peak_rss_kib
    );
    assert!(out.took < Duration::from_secs(10), "{:?}", out.took);
    // `check` and `up` refuse it before starting anything.
    for command in ["check", "up"] {
        let (fleet, out) = cli_refuses("bomb", billion_laughs().as_bytes(), &[command]);
        assert!(
            out.peak_rss_kib < CLI_RSS_LIMIT_KIB,
            "{command}: peak RSS {} KiB",
            out.peak_rss_kib
        );
        assert!(
            !fleet.state_dir().join("control.sock").exists(),
            "{command} started a supervisor"
        );
    }
}

#[test]
fn huge_files_are_refused_fast_in_bounded_memory() {
    // 50 MB of valid-looking servers.
    let mut servers = String::from("version: 1\nservers:\n");
    let mut i = 0;
    while servers.len() < 50_000_000 {
        servers.push_str(&format!(
            "  server-{i}:\n    command: x\n    args: [\"a\", \"b\"]\n"
        ));
        i += 1;
    }
    let (_, out) = cli_refuses("huge", servers.as_bytes(), &["validate"]);
    assert!(out.stderr.contains("larger than"), "{}", out.stderr);
    eprintln!(
        "{} MB of servers: exit 2 in {:?}, peak RSS {} KiB",
        servers.len() / 1_000_000,
        out.took,
        out.peak_rss_kib
    );
    assert!(
        out.peak_rss_kib < CLI_RSS_LIMIT_KIB,
        "peak RSS {} KiB",
        out.peak_rss_kib
    );
    drop(servers);
    // One 20 MB scalar, through the CLI and the library (both entry points).
    let scalar = format!(
        "version: 1\nservers:\n  a:\n    command: \"{}\"\n",
        "x".repeat(20_000_000)
    );
    let (_, out) = cli_refuses("scalar", scalar.as_bytes(), &["check"]);
    assert!(
        out.peak_rss_kib < CLI_RSS_LIMIT_KIB,
        "peak RSS {} KiB",
        out.peak_rss_kib
    );
    let started = Instant::now();
    let err = config::load_str(&scalar, Path::new("big.yaml"), &fuzz_env).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(err.errors[0].message.contains("larger than"), "{err}");
    // At the limit: accepted; one byte more: refused.
    let dir = tempfile::tempdir().unwrap();
    let head = "version: 1\nservers:\n  a:\n    command: \"";
    let fill = config::MAX_FILE_BYTES - head.len() - 2;
    let at_limit = format!("{head}{}\"\n", "y".repeat(fill));
    assert_eq!(at_limit.len(), config::MAX_FILE_BYTES);
    let (result, took, path) = load_bytes(dir.path(), at_limit.as_bytes());
    check_answer(&result, &path);
    assert!(result.is_ok(), "{:?}", result.err());
    eprintln!("a {} byte scalar loaded in {took:?}", at_limit.len());
    let over = format!("{head}{}\"\n", "y".repeat(fill + 1));
    let errors = refused(dir.path(), over.as_bytes(), Duration::from_secs(1));
    assert!(errors[0].message.contains("larger than"), "{errors:?}");
    // Files that are not files.
    for special in [
        "/dev/zero",
        "/dev/urandom",
        "/dev/null",
        "/proc/self/status",
        "/",
    ] {
        let started = Instant::now();
        let result = config::load(Path::new(special), &fuzz_env);
        assert!(started.elapsed() < Duration::from_secs(5), "{special}");
        check_answer(&result, Path::new(special));
        assert!(result.is_err(), "{special}");
    }
}

/// The largest fleet files the parser accepts, full of servers; slow in a debug
/// build, so it runs when `MCPFLEET_FUZZ_ITERS` asks for more than the default.
#[test]
fn a_fleet_file_at_the_size_limit_is_answered_in_bounded_time() {
    if cases(1) < 2 {
        eprintln!("skipped; set MCPFLEET_FUZZ_ITERS=2 or more to run it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fill = |server: &dyn Fn(usize) -> String| {
        let mut text = String::from("version: 1\nservers:\n");
        let mut i = 0;
        loop {
            let next = server(i);
            if text.len() + next.len() > config::MAX_FILE_BYTES {
                return text;
            }
            text.push_str(&next);
            i += 1;
        }
    };
    let valid = fill(&|i| format!("  s{i}:\n    command: x\n    args: [\"a\", \"b\"]\n"));
    let (result, took, path) = load_bytes(dir.path(), valid.as_bytes());
    check_answer(&result, &path);
    let count = result.unwrap().servers.len();
    eprintln!("{} bytes, {count} valid servers: {took:?}", valid.len());
    assert!(took < Duration::from_secs(30), "{took:?}");
    let broken = fill(&|i| format!("  s{i}:\n    comand: x\n"));
    let started = Instant::now();
    let errors = refused(dir.path(), broken.as_bytes(), Duration::from_secs(60));
    eprintln!(
        "{} bytes, {} errors: {:?}",
        broken.len(),
        errors.len(),
        started.elapsed()
    );
}

#[test]
fn harmful_names_through_the_cli_are_all_reported_and_nothing_starts() {
    let mut text = String::from("version: 1\nservers:\n");
    let names = harmful_names();
    for (_, name) in &names {
        text.push_str(&format!("  ? {}\n  : command: x\n", quoted_key(name)));
    }
    for command in ["validate", "up", "check"] {
        let (fleet, out) = cli_refuses("names", text.as_bytes(), &[command]);
        assert!(
            out.stderr.contains(&format!("{} errors", names.len())),
            "{command}: every name is reported:\n{}",
            out.stderr
        );
        for (i, (what, _)) in names.iter().enumerate() {
            let place = format!("{}:{}:5: servers", fleet.path.display(), 3 + 2 * i);
            assert!(
                out.stderr.contains(&place),
                "{command}: {what}: no {place:?} in:\n{}",
                out.stderr
            );
        }
        // One line per error: no name broke a line or forged one.
        assert_eq!(
            out.stderr.lines().count(),
            1 + names.len(),
            "{}",
            out.stderr
        );
        let entries: Vec<_> = std::fs::read_dir(fleet.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, ["mcpfleet.yaml"], "{command} created files");
    }
}

/// The largest values the format accepts are run, not only parsed: no deadline,
/// backoff or count overflows on its way to the authority.
#[test]
fn the_largest_valid_values_run_without_overflow() {
    let max_ms = format!("{}ms", u64::MAX);
    let fleet = TestFleet::fixtures(
        "extremes",
        &[(
            "edge",
            &[],
            &format!(
                "connect_timeout: {max_ms}\n\
                 cleanup_timeout: {max_ms}\n\
                 restart: {{policy: always, backoff: {{initial: {max_ms}, max: {max_ms}}}, max_restarts: {}, window: {max_ms}}}\n\
                 health: {{interval: {max_ms}, timeout: {}ms, failures: {}}}\n\
                 idle_timeout: {max_ms}",
                u32::MAX,
                u64::MAX - 1,
                u32::MAX
            ),
        )],
    );
    let out = fleet.run(&["--output", "json", "check"]);
    assert_code(&out, 0);
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    fleet.assert_no_leftovers();
    // One more is too large, and says so where it is written.
    let too_large = format!(
        "version: 1\nservers:\n  a:\n    command: x\n    connect_timeout: {}ms\n",
        u128::from(u64::MAX) + 1
    );
    let dir = tempfile::tempdir().unwrap();
    let errors = refused(dir.path(), too_large.as_bytes(), Duration::from_secs(5));
    assert_eq!(
        (errors[0].line, errors[0].column),
        (Some(5), Some(22)),
        "{errors:?}"
    );
    assert!(errors[0].message.contains("too large"), "{errors:?}");
}

// ---------------------------------------------------------------------------------
// The control protocol's decoder

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// Reads every line of `input` with `read_line`, through a buffer of `capacity`.
fn read_all_lines(input: &[u8], capacity: usize, limit: usize) -> Vec<Line> {
    block_on(async {
        let mut reader = tokio::io::BufReader::with_capacity(capacity, input);
        let mut lines = Vec::new();
        loop {
            let line = protocol::read_line(&mut reader, limit)
                .await
                .expect("reading from memory");
            let closed = line == Line::Closed;
            lines.push(line);
            if closed {
                // Closed stays closed.
                let again = protocol::read_line(&mut reader, limit).await.unwrap();
                assert_eq!(again, Line::Closed);
                return lines;
            }
        }
    })
}

/// What `read_line` must give for `input`, computed the obvious way.
fn expected_lines(input: &[u8], limit: usize) -> Vec<Line> {
    let mut pieces: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    // The piece after the last newline is unterminated: dropped at close.
    pieces.pop();
    let mut lines: Vec<Line> = pieces
        .into_iter()
        .map(|piece| match std::str::from_utf8(piece) {
            _ if piece.len() > limit => Line::TooLong,
            Ok(text) => Line::Text(text.to_owned()),
            Err(_) => Line::NotUtf8,
        })
        .collect();
    lines.push(Line::Closed);
    lines
}

#[test]
fn random_bytes_through_the_line_reader_match_a_model() {
    let mut replay = Replay::new("random_bytes_through_the_line_reader_match_a_model");
    for case in 0..cases(300) {
        let mut rng = rng_for_case(replay.test, case);
        let limit = 1 + rng.below(64);
        let mut input = Vec::new();
        for _ in 0..rng.below(12) {
            // Lines around the limit, of text, of random bytes, or broken UTF-8.
            let len = match rng.below(4) {
                0 => limit,
                1 => limit + 1,
                2 => rng.below(3),
                _ => rng.below(3 * limit + 2),
            };
            match rng.below(3) {
                0 => input.extend(rng.bytes(len)),
                1 => input.extend((0..len).map(|_| *rng.pick(b"{}\"abc \\\t\r"))),
                _ => {
                    let text = "\u{e9}\u{20ac}\u{1F600}x".repeat(len / 10 + 1);
                    let mut bytes = text.as_bytes()[..len.min(text.len())].to_vec();
                    if rng.chance(30) && !bytes.is_empty() {
                        let i = rng.below(bytes.len());
                        bytes[i] = 0xff;
                    }
                    input.extend(bytes);
                }
            }
            if rng.chance(90) {
                input.push(b'\n');
            }
        }
        replay.at(case, &input);
        let capacity = 1 + rng.below(2 * limit + 8);
        let got = read_all_lines(&input, capacity, limit);
        assert_eq!(
            got,
            expected_lines(&input, limit),
            "limit {limit}, buffer {capacity}"
        );
    }
}

#[test]
fn lines_at_the_8_mib_limit() {
    let line_of = |len: usize| {
        let mut line = br#"{"v":1,"op":"ping"}"#.to_vec();
        line.resize(len, b' ');
        line.push(b'\n');
        line
    };
    // Exactly at the limit: read, and a valid request (JSON allows the spaces).
    let at = line_of(MAX_LINE_BYTES);
    let started = Instant::now();
    let lines = read_all_lines(&at, 8 * 1024, MAX_LINE_BYTES);
    let Line::Text(text) = &lines[0] else {
        panic!("a line of exactly {MAX_LINE_BYTES} bytes is refused");
    };
    assert_eq!(text.len(), MAX_LINE_BYTES);
    assert_eq!(protocol::parse_request(text).unwrap().op, Op::Ping);
    // One byte more: too long, and the next line is read as usual.
    let mut over = line_of(MAX_LINE_BYTES + 1);
    over.extend_from_slice(b"{\"v\":1,\"op\":\"ping\"}\n");
    let lines = read_all_lines(&over, 8 * 1024, MAX_LINE_BYTES);
    assert_eq!(lines[0], Line::TooLong);
    assert_eq!(lines[1], Line::Text(r#"{"v":1,"op":"ping"}"#.into()));
    // Invalid UTF-8 at the very end of a line at the limit.
    let mut bad = line_of(MAX_LINE_BYTES);
    bad[MAX_LINE_BYTES - 1] = 0xc3;
    assert_eq!(
        read_all_lines(&bad, 8 * 1024, MAX_LINE_BYTES)[0],
        Line::NotUtf8
    );
    // Requests of nearly 8 MiB whose values are small: refused fast, decoded or not.
    let zeros = format!(
        r#"{{"v":1,"op":"status","servers":[{}0]}}"#,
        "0,".repeat((MAX_LINE_BYTES - 64) / 2)
    );
    let names = format!(
        r#"{{"v":1,"op":"call","server":"s","tool":"t","arguments":{{"a":"{}"}}}}"#,
        "n".repeat(MAX_LINE_BYTES - 80)
    );
    for line in [&zeros, &names] {
        assert!(line.len() <= MAX_LINE_BYTES);
        let started = Instant::now();
        let result = protocol::parse_request(line);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        if let Err(e) = result {
            assert!(e.contains("line 1 column"), "{e}");
        }
    }
    eprintln!("8 MiB lines read and decoded in {:?}", started.elapsed());
}

/// Valid requests of every op, with every field.
const REQUESTS: &[&str] = &[
    r#"{"v":1,"op":"up","servers":["a","b"],"force":true,"deadlines":{"wait_ms":500,"connect_ms":1000,"cleanup_ms":0}}"#,
    r#"{"v":1,"op":"down","servers":[],"deadlines":{},"strict":true}"#,
    r#"{"v":1,"op":"reconnect","servers":["a"],"if_generation":3,"force":false,"deadlines":{"wait_ms":1},"strict":false}"#,
    r#"{"v":1,"op":"status","servers":["a"]}"#,
    r#"{"v":1,"op":"reset","server":"a"}"#,
    r#"{"v":1,"op":"tools","server":"a","deadlines":{"connect_ms":18446744073709551615}}"#,
    r#"{"v":1,"op":"call","server":"a","tool":"echo","arguments":{"x":[1,2.5,"\u00e9",null,{"y":true}]},"timeout_ms":10,"deadlines":{}}"#,
    r#"{"v":1,"op":"ping"}"#,
];

/// JSON pieces that mutations insert.
const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1.5",
    "1e400",
    "-0",
    "18446744073709551616",
    "99999999999999999999999999999",
    "\"v\"",
    "\"op\"",
    "\"servers\"",
    "\"server\"",
    "\"tool\"",
    "\"arguments\"",
    "\"deadlines\"",
    "\"wait_ms\"",
    "\"if_generation\"",
    "\"force\"",
    "\"up\"",
    "\"ping\"",
    "\"call\"",
    " ",
    "\t",
    "\r",
    "\u{feff}",
    "\u{2028}",
    "\0",
];

fn mutate_json(rng: &mut Rng, text: &mut Vec<u8>) {
    let len = text.len();
    match rng.below(6) {
        0 if len > 0 => {
            let i = rng.below(len);
            text[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(16));
            text.drain(i..i + n);
        }
        2 => {
            let i = rng.below(len + 1);
            text.truncate(i);
        }
        3 if len > 0 => {
            // Splice a piece of another request.
            let other = rng.pick(REQUESTS).as_bytes();
            let from = rng.below(other.len());
            let piece = other[from..from + 1 + rng.below((other.len() - from).min(40))].to_vec();
            let i = rng.below(len + 1);
            text.splice(i..i, piece);
        }
        _ => {
            let token = rng.pick(JSON_TOKENS).as_bytes().to_vec();
            let i = rng.below(len + 1);
            text.splice(i..i, token);
        }
    }
}

/// The properties of every answer of the decoder.
#[track_caller]
fn check_decoded(line: &str, result: &Result<Request, String>) {
    match result {
        Ok(request) => {
            assert!(protocol::SUPPORTED_VERSIONS.contains(&request.v), "{line}");
            // What was accepted encodes and decodes to the same request.
            let encoded = protocol::encode(request);
            assert_eq!(
                protocol::parse_request(encoded.trim_end()).as_ref(),
                Ok(request),
                "{encoded}"
            );
        }
        Err(message) => {
            assert!(!message.is_empty());
            // One line, whatever the request quoted: it goes to the client and
            // to the supervisor's log.
            assert!(!message.contains(char::is_control), "{message:?}");
            // Every refusal says what is wrong: at a column for JSON syntax, by
            // field or protocol rule for the rest.
            let known = [
                "not JSON: ",
                "invalid request: ",
                "missing protocol version `v`",
                "invalid protocol version `v`",
                "protocol version ",
            ];
            assert!(
                known.iter().any(|k| message.starts_with(k)),
                "an unexplained refusal: {message}"
            );
            if message.starts_with("not JSON") {
                assert!(message.contains(" column "), "{message}");
            }
            if message.contains("invalid type") || message.contains("invalid value") {
                assert!(
                    message.starts_with("invalid request: `"),
                    "a wrong type that names no field: {message} (in {line})"
                );
            }
        }
    }
}

#[test]
fn random_and_mutated_requests_decode_or_fail_with_a_clear_error() {
    let mut replay = Replay::new("random_and_mutated_requests_decode_or_fail_with_a_clear_error");
    let (mut ok, mut failed) = (0, 0);
    for case in 0..cases(3000) {
        let mut rng = rng_for_case(replay.test, case);
        let bytes = if case % 5 == 0 {
            let n = rng.below(64);
            rng.bytes(n)
        } else {
            let mut text = rng.pick(REQUESTS).as_bytes().to_vec();
            for _ in 0..1 + rng.below(3) {
                mutate_json(&mut rng, &mut text);
            }
            text
        };
        replay.at(case, &bytes);
        // The supervisor decodes only what read_line gave as text.
        let Ok(line) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let started = Instant::now();
        let result = protocol::parse_request(line);
        assert!(started.elapsed() < Duration::from_secs(1));
        check_decoded(line, &result);
        match result {
            Ok(_) => ok += 1,
            Err(_) => failed += 1,
        }
    }
    eprintln!("{ok} decoded, {failed} refused");
    assert!(ok > 0 && failed > ok, "{ok} decoded, {failed} refused");
}

#[test]
fn hostile_requests_are_refused_with_what_and_where() {
    let deep_array = format!(
        r#"{{"v":1,"op":"call","server":"a","tool":"t","arguments":{{"a":{}1{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let deep_object = format!(
        r#"{{"v":1,"op":"status","servers":{}}}"#,
        r#"{"a":"#.repeat(20_000)
    );
    let wide = format!(
        r#"{{"v":1,"op":"status","servers":[{}]}}"#,
        vec!["[]"; 200_000].join(",")
    );
    let cases: Vec<(String, &str)> = vec![
        (
            String::new(),
            "not JSON: EOF while parsing a value at line 1 column 0",
        ),
        (
            "{".into(),
            "not JSON: EOF while parsing an object at line 1 column 1",
        ),
        (
            r#"{"v":1,"op":"status""#.into(),
            "not JSON: EOF while parsing an object at line 1 column 20",
        ),
        (
            r#"{"v":1,"op":"stat"#.into(),
            "not JSON: EOF while parsing a string at line 1 column 17",
        ),
        (
            r#"{"v":1,"op":"ping"} {"v":1}"#.into(),
            "not JSON: trailing characters at line 1 column 21",
        ),
        (
            "\u{feff}{\"v\":1,\"op\":\"ping\"}".into(),
            "not JSON: expected value at line 1 column 1",
        ),
        (
            "null".into(),
            "invalid request: expected a JSON object, found null",
        ),
        (
            r#"["v",1]"#.into(),
            "invalid request: expected a JSON object, found an array",
        ),
        (r#"{"op":"ping"}"#.into(), "missing protocol version `v`"),
        (
            r#"{"v":"1","op":"ping"}"#.into(),
            "invalid protocol version `v`: expected the number 1 or 2, found a string",
        ),
        (
            r#"{"v":-1,"op":"ping"}"#.into(),
            "invalid protocol version `v`: expected the number 1 or 2, found `-1`",
        ),
        (
            r#"{"v":18446744073709551616,"op":"ping"}"#.into(),
            "invalid protocol version `v`",
        ),
        (
            r#"{"v":1e400,"op":"ping"}"#.into(),
            "not JSON: number out of range at line 1 column 10",
        ),
        (
            r#"{"v":3,"op":"ping"}"#.into(),
            "protocol version 3 is not supported (this supervisor speaks 1 and 2)",
        ),
        (
            r#"{"v":4294967297,"op":"ping"}"#.into(),
            "protocol version 4294967297 is not supported",
        ),
        (r#"{"v":1}"#.into(), "invalid request: missing field `op`"),
        (
            r#"{"v":1,"op":"explode"}"#.into(),
            "invalid request: unknown variant `explode`",
        ),
        (
            r#"{"v":1,"op":"PING"}"#.into(),
            "invalid request: unknown variant `PING`",
        ),
        (
            r#"{"v":1,"op":0,"servers":[]}"#.into(),
            "invalid request: `op` must be a string, found a number",
        ),
        (
            r#"{"v":1,"op":2,"servers":["a"]}"#.into(),
            "invalid request: `op` must be a string",
        ),
        (
            r#"{"v":1,"op":["ping"]}"#.into(),
            "invalid request: `op` must be a string, found an array",
        ),
        (
            r#"{"v":1,"op":"ping","extra":1}"#.into(),
            "invalid request: unknown field `extra`",
        ),
        (
            r#"{"v":1,"op":"up","servers":"a"}"#.into(),
            "invalid request: `servers`: invalid type: string \"a\", expected a sequence",
        ),
        (
            r#"{"v":1,"op":"up","servers":[1]}"#.into(),
            "invalid request: `servers`: invalid type: integer `1`, expected a string",
        ),
        (
            r#"{"v":1,"op":"up","servers":["a"],"force":1}"#.into(),
            "invalid request: `force`: invalid type",
        ),
        (
            r#"{"v":1,"op":"down","strict":"yes"}"#.into(),
            "invalid request: `strict`: invalid type",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":{"wait_ms":-1}}"#.into(),
            "invalid request: `deadlines`: invalid value: integer `-1`, expected u64",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":{"wait_ms":18446744073709551616}}"#.into(),
            "invalid request: `deadlines`: invalid type: floating point",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":{"wait_ms":1.5}}"#.into(),
            "invalid request: `deadlines`: invalid type: floating point `1.5`, expected u64",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":[]}"#.into(),
            "invalid request: `deadlines` must be an object, found an array",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":[1,2,3]}"#.into(),
            "invalid request: `deadlines` must be an object",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":null}"#.into(),
            "invalid request: `deadlines`: invalid type: null",
        ),
        (
            r#"{"v":1,"op":"up","deadlines":{"timeout":1}}"#.into(),
            "invalid request: unknown field `timeout`",
        ),
        (
            r#"{"v":1,"op":"reconnect","servers":["a"],"if_generation":-3}"#.into(),
            "invalid request: `if_generation`: invalid value",
        ),
        (
            r#"{"v":1,"op":"reconnect"}"#.into(),
            "invalid request: missing field `servers`",
        ),
        (
            r#"{"v":1,"op":"reset"}"#.into(),
            "invalid request: missing field `server`",
        ),
        (
            r#"{"v":1,"op":"reset","server":null}"#.into(),
            "invalid request: `server`: invalid type: null, expected a string",
        ),
        (
            r#"{"v":1,"op":"call","server":"a","tool":"t","arguments":[1]}"#.into(),
            "invalid request: `arguments`: invalid type: sequence, expected a map",
        ),
        (
            r#"{"v":1,"op":"call","server":"a","tool":"t","timeout_ms":1e3}"#.into(),
            "invalid request: `timeout_ms`: invalid type",
        ),
        (
            r#"{"v":1,"op":"status","servers":["\ud800"]}"#.into(),
            "not JSON: unexpected end of hex escape at line 1 column 40",
        ),
        (
            deep_array,
            "not JSON: recursion limit exceeded at line 1 column",
        ),
        (
            deep_object,
            "not JSON: recursion limit exceeded at line 1 column",
        ),
        (
            wide,
            "invalid request: more than 100000 JSON values at line 1 column",
        ),
    ];
    for (line, expected) in cases {
        let started = Instant::now();
        let result = protocol::parse_request(&line);
        assert!(started.elapsed() < Duration::from_secs(2), "{expected}");
        check_decoded(&line, &result);
        let shown: String = line.chars().take(100).collect();
        match result {
            Ok(r) => panic!("{shown}: accepted as {r:?}"),
            Err(e) => assert!(
                e.starts_with(expected),
                "{shown}:\n  got      {e}\n  expected {expected}"
            ),
        }
    }
    // Extreme values that are valid are decoded as written.
    let max = protocol::parse_request(
        r#"{"v":1,"op":"up","deadlines":{"wait_ms":18446744073709551615,"connect_ms":18446744073709551615,"cleanup_ms":0}}"#,
    )
    .unwrap();
    let Op::Up { deadlines, .. } = max.op else {
        panic!("{max:?}");
    };
    assert_eq!(
        deadlines.wait_ms,
        Some(mcpfleet::config::Timeout::After(Duration::from_millis(
            u64::MAX
        )))
    );
    let nul = protocol::parse_request(r#"{"v":1,"op":"reset","server":"a\u0000b\n"}"#).unwrap();
    assert_eq!(
        nul.op,
        Op::Reset {
            server: "a\0b\n".into()
        }
    );
}

// ---------------------------------------------------------------------------------
// A live supervisor

/// Sends `bytes` on a new connection to the control socket, half-closes it when
/// `close`, and returns everything the supervisor wrote before it closed.
fn exchange(socket: &Path, bytes: &[u8], close: bool) -> Vec<u8> {
    let mut stream = UnixStream::connect(socket).expect("connect to the control socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The supervisor may answer and close before it has read everything.
    let _ = stream.write_all(bytes);
    if close {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return answer,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return answer,
            Err(e) => panic!("reading the answer: {e} (after {} bytes)", answer.len()),
        }
    }
}

/// The final line of an answer (`reply` or `error`), after any `event` lines.
#[track_caller]
fn final_line(answer: &[u8], what: &str) -> Value {
    let text = String::from_utf8(answer.to_vec())
        .unwrap_or_else(|_| panic!("{what}: the answer is not UTF-8: {answer:?}"));
    assert!(
        text.ends_with('\n'),
        "{what}: an unterminated answer: {text:?}"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: {e}: {l:?}")))
        .collect();
    let (last, events) = lines.split_last().expect("one line at least");
    assert!(
        events.iter().all(|e| e["type"] == "event"),
        "{what}: {text}"
    );
    last.clone()
}

/// The message of the one error line of an answer.
#[track_caller]
fn error_message(answer: &[u8], what: &str) -> String {
    let last = final_line(answer, what);
    assert_eq!(last["type"], "error", "{what}: {last}");
    assert_eq!(
        answer.iter().filter(|b| **b == b'\n').count(),
        1,
        "{what}: one line"
    );
    last["message"].as_str().expect("a message").to_owned()
}

fn supervisor_of(fleet: &TestFleet) -> u32 {
    let lock = std::fs::read_to_string(fleet.state_dir().join("supervisor.lock"))
        .expect("supervisor.lock");
    lock.lines().next().unwrap().trim().parse().expect("a pid")
}

#[test]
fn a_live_supervisor_answers_bad_requests_and_keeps_serving() {
    let fleet = TestFleet::fixtures("bad-socket", &[("steady", &[], "")]);
    let json = |args: &[&str]| {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let out = run_bounded(fleet.command(&all), Duration::from_secs(60));
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", stderr(&out)));
        (out, doc)
    };
    let (out, up) = json(&["up"]);
    assert_code(&out, 0);
    let mut steady = server(&up, "steady")["pid"].as_i64().unwrap();
    let supervisor = supervisor_of(&fleet);
    let socket = fleet.state_dir().join("control.sock");
    let rss_at_start = vm_hwm_kib(supervisor).expect("the supervisor is alive");
    let still_serving = |what: &str, pid: i64| {
        let (out, status) = json(&["status"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "status after {what}: {}",
            stderr(&out)
        );
        let s = server(&status, "steady");
        assert_eq!(s["state"], "running", "after {what}: {s}");
        assert_eq!(s["pid"], pid, "after {what}: {s}");
        assert_eq!(
            supervisor_of(&fleet),
            supervisor,
            "after {what}: a new supervisor"
        );
        assert!(
            is_alive(supervisor as i32),
            "after {what}: the supervisor died"
        );
    };
    let max = u64::MAX;
    let mut rng = rng_for_case("a_live_supervisor_answers_bad_requests", 0);
    let mut refused: Vec<(String, Vec<u8>, &str)> = vec![
        ("an empty line".into(), b"\n".to_vec(), "not JSON: EOF while parsing a value at line 1 column 0"),
        ("truncated JSON".into(), b"{\"v\":1,\"op\":\"sta\n".to_vec(), "not JSON: "),
        ("invalid UTF-8".into(), b"{\"v\":1,\"op\":\"\xff\xfe\"}\n".to_vec(), "request is not UTF-8"),
        ("a NUL byte".into(), b"{\"v\":1,\0\"op\":\"ping\"}\n".to_vec(), "not JSON: "),
        ("another version".into(), b"{\"v\":3,\"op\":\"status\"}\n".to_vec(), "protocol version 3 is not supported"),
        ("a version as text".into(), b"{\"v\":\"1\",\"op\":\"status\"}\n".to_vec(), "invalid protocol version `v`"),
        ("a huge version".into(), b"{\"v\":1e400,\"op\":\"status\"}\n".to_vec(), "not JSON: number out of range"),
        ("an unknown op".into(), b"{\"v\":1,\"op\":\"explode\"}\n".to_vec(), "invalid request: unknown variant `explode`"),
        // serde reads a number as a variant index: 1 would be `down`.
        ("a number for an op".into(), b"{\"v\":1,\"op\":1}\n".to_vec(), "invalid request: `op` must be a string"),
        ("a wrong type".into(), b"{\"v\":1,\"op\":\"down\",\"servers\":\"steady\"}\n".to_vec(), "invalid request: `servers`: invalid type"),
        ("positional deadlines".into(), b"{\"v\":1,\"op\":\"down\",\"deadlines\":[1,1,1]}\n".to_vec(), "invalid request: `deadlines` must be an object"),
        ("a negative deadline".into(), b"{\"v\":1,\"op\":\"down\",\"deadlines\":{\"cleanup_ms\":-1}}\n".to_vec(), "invalid request: `deadlines`: invalid value"),
        ("deep nesting".into(), format!("{{\"v\":1,\"op\":\"call\",\"server\":\"steady\",\"tool\":\"echo\",\"arguments\":{{\"a\":{}}}}}\n", "[".repeat(50_000)).into_bytes(), "not JSON: recursion limit exceeded"),
        ("8 MiB of zeros".into(), format!("{{\"v\":1,\"op\":\"down\",\"servers\":[{}0]}}\n", "0,".repeat((MAX_LINE_BYTES - 64) / 2)).into_bytes(), "invalid request: more than 100000 JSON values"),
        ("a line over 8 MiB".into(), {
            let mut line = br#"{"v":1,"op":"down"}"#.to_vec();
            line.resize(MAX_LINE_BYTES + 1, b' ');
            line.push(b'\n');
            line
        }, "request longer than"),
    ];
    for i in 0..3 {
        let mut bytes = rng.bytes(2_000);
        bytes.push(b'\n');
        refused.push((format!("random bytes {i}"), bytes, ""));
    }
    for (what, bytes, expected) in &refused {
        let message = error_message(&exchange(&socket, bytes, true), what);
        assert!(message.starts_with(expected), "{what}: {message}");
        still_serving(what, steady);
    }
    // A request cut short by the client: nothing to answer.
    let answer = exchange(&socket, br#"{"v":1,"op":"down""#, true);
    assert!(answer.is_empty(), "{answer:?}");
    still_serving("a truncated request", steady);
    // A client that asks and leaves without reading the answer.
    for _ in 0..5 {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream.write_all(b"{\"v\":1,\"op\":\"status\"}\n").unwrap();
        drop(stream);
    }
    still_serving("clients that left", steady);
    // A silent client does not hold up the others.
    let silent = UnixStream::connect(&socket).unwrap();
    still_serving("a silent client", steady);
    drop(silent);
    // Many clients with garbage at once.
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let answer = exchange(&socket, format!("garbage {i}\n").as_bytes(), true);
                error_message(&answer, "concurrent garbage")
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap().starts_with("not JSON"));
    }
    still_serving("20 clients at once", steady);
    // Valid requests with extreme values are served.
    let ping = {
        let mut line = br#"{"v":1,"op":"ping"}"#.to_vec();
        line.resize(MAX_LINE_BYTES, b' ');
        line.push(b'\n');
        line
    };
    let last = final_line(&exchange(&socket, &ping, true), "an 8 MiB ping");
    assert_eq!(last["type"], "reply", "{last}");
    let up = format!(
        "{{\"v\":1,\"op\":\"up\",\"servers\":[\"steady\"],\"deadlines\":{{\"wait_ms\":{max},\"connect_ms\":{max},\"cleanup_ms\":{max}}}}}\n"
    );
    let last = final_line(
        &exchange(&socket, up.as_bytes(), true),
        "up, longest deadlines",
    );
    assert_eq!(last["type"], "reply", "{last}");
    assert_eq!(last["report"]["exit_code"], 0, "{last}");
    still_serving("up with the longest deadlines", steady);
    let call = format!(
        "{{\"v\":1,\"op\":\"call\",\"server\":\"steady\",\"tool\":\"echo\",\"arguments\":{{\"text\":\"a\\u0000b\\n\"}},\"timeout_ms\":{max},\"deadlines\":{{\"wait_ms\":{max}}}}}\n"
    );
    let last = final_line(
        &exchange(&socket, call.as_bytes(), true),
        "call, longest deadlines",
    );
    assert_eq!(last["type"], "reply", "{last}");
    still_serving("call with the longest deadlines", steady);
    let reconnect = format!(
        "{{\"v\":1,\"op\":\"reconnect\",\"servers\":[\"steady\"],\"if_generation\":1,\"deadlines\":{{\"wait_ms\":{max},\"connect_ms\":{max},\"cleanup_ms\":{max}}}}}\n"
    );
    let last = final_line(
        &exchange(&socket, reconnect.as_bytes(), true),
        "reconnect, longest deadlines",
    );
    assert_eq!(last["type"], "reply", "{last}");
    assert_eq!(last["report"]["exit_code"], 0, "{last}");
    let (_, status) = json(&["status"]);
    assert_eq!(server(&status, "steady")["generation"], 2, "{status}");
    steady = server(&status, "steady")["pid"].as_i64().unwrap();
    still_serving("reconnect with the longest deadlines", steady);
    // Names that are no server's.
    let reset = b"{\"v\":1,\"op\":\"reset\",\"server\":\"../../x\\u0000\\n\"}\n";
    let last = final_line(&exchange(&socket, reset, true), "reset of a bad name");
    assert!(!last.to_string().contains('\n'), "{last}");
    still_serving("a bad server name", steady);

    let rss_at_end = vm_hwm_kib(supervisor).expect("the supervisor is alive");
    eprintln!(
        "supervisor peak RSS: {rss_at_start} KiB after up, {rss_at_end} KiB after the bad requests"
    );
    assert!(
        rss_at_end < 100 * 1024,
        "the supervisor's peak RSS reached {rss_at_end} KiB"
    );
    let (out, _) = json(&["down"]);
    assert_code(&out, 0);
    fleet.assert_no_leftovers();
}
