//! `supervisor:`: how the supervisor's own files are rotated.

use super::*;

#[test]
fn rotation_is_set_by_the_supervisor_block_or_defaults() {
    let fleet = ok(&format!(
        "{HEAD}  a: {{command: x}}\nsupervisor:\n  max_file_size: 64KiB\n  keep_files: 5\n"
    ));
    assert_eq!(
        fleet.supervisor.rotation,
        Rotation {
            max_bytes: 64 * 1024,
            keep: 5
        }
    );
    let only_size = ok(&format!(
        "{HEAD}  a: {{command: x}}\nsupervisor: {{max_file_size: 1GiB}}\n"
    ));
    assert_eq!(only_size.supervisor.rotation.max_bytes, 1024 * 1024 * 1024);
    assert_eq!(only_size.supervisor.rotation.keep, Rotation::DEFAULT.keep);
    for text in [
        format!("{HEAD}  a: {{command: x}}\n"),
        format!("{HEAD}  a: {{command: x}}\nsupervisor:\n"),
        format!("{HEAD}  a: {{command: x}}\nsupervisor: {{}}\n"),
    ] {
        assert_eq!(ok(&text).supervisor.rotation, Rotation::DEFAULT, "{text}");
    }
}

#[test]
fn a_wrong_size_or_count_names_its_place() {
    let at = |value: &str| {
        one_error(&format!(
            "{HEAD}  a: {{command: x}}\nsupervisor:\n  {value}\n"
        ))
    };
    assert_eq!(
        at("max_file_size: 16"),
        "5:18: supervisor.max_file_size: `16` has no unit; write e.g. 16MiB, 512KiB or 1GiB (units: B, KiB, MiB, GiB)"
    );
    assert_eq!(
        at("max_file_size: 512B"),
        "5:18: supervisor.max_file_size: `512B` is too small; `max_file_size` is at least 1KiB"
    );
    assert_eq!(
        at("max_file_size: 16 MB"),
        "5:18: supervisor.max_file_size: `16 MB` is not a size; write e.g. 16MiB, 512KiB or 1GiB"
    );
    assert_eq!(
        at("max_file_size: [1]"),
        "5:18: supervisor.max_file_size: expected a size such as 16MiB, found a sequence"
    );
    assert_eq!(
        at("keep_files: 0"),
        "5:15: supervisor.keep_files: `keep_files` must be a whole number from 1 to 20, not `0`"
    );
    assert_eq!(
        at("keep_files: '3'"),
        "5:15: supervisor.keep_files: expected a whole number from 1 to 20, found a string"
    );
    assert_eq!(
        at("max_size: 1MiB"),
        "5:3: supervisor.max_size: unknown key `max_size`; did you mean `max_file_size`?"
    );
    assert_eq!(
        at("keep: 3"),
        "5:3: supervisor.keep: unknown key `keep`; did you mean `keep_files`?"
    );
    assert_eq!(
        one_error(&format!("{HEAD}  a: {{command: x}}\nsupervisor: 16MiB\n")),
        "4:13: supervisor: expected a mapping, found a string"
    );
}
