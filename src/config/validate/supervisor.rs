//! `supervisor:` at the top level: how the files that the supervisor writes for as
//! long as it runs are kept to a size (docs/design.md §3, "Rotation").
//!
//! ```yaml
//! supervisor:
//!   max_file_size: 16MiB   # B, KiB, MiB or GiB; at least 1 KiB
//!   keep_files: 2          # rotated files kept of each, 1 to 20
//! ```

use super::super::keys::Level;
use super::super::walk::{Entry, Validator};
use super::super::yaml::Node;
use super::super::spec::{Rotation, SupervisorSpec};

/// A size as the fleet file writes it: a positive whole number and a unit.
/// Values too large for 64 bits and sizes under [`Rotation::MIN_BYTES`] also
/// match it; the parser refuses them.
pub const SIZE_PATTERN: &str = "^0*[1-9][0-9]*(B|KiB|MiB|GiB)$";

/// The units of a size, with their number of bytes.
const UNITS: [(&str, u64); 4] = [
    ("KiB", 1024),
    ("MiB", 1024 * 1024),
    ("GiB", 1024 * 1024 * 1024),
    ("B", 1),
];

/// Bytes of a size written `16MiB`, `512KiB`, `1GiB` or `4096B`; the message
/// says what is wrong otherwise.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let example = "write e.g. 16MiB, 512KiB or 1GiB";
    let Some((digits, unit)) = UNITS
        .iter()
        .find_map(|(unit, bytes)| text.strip_suffix(unit).map(|d| (d, *bytes)))
    else {
        return Err(
            match text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty() {
                true => format!("`{text}` has no unit; {example} (units: B, KiB, MiB, GiB)"),
                false => format!("`{text}` is not a size; {example}"),
            },
        );
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{text}` is not a size; {example}"));
    }
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(unit)) {
        Some(0) => Err(format!("`{text}` is zero; {example}")),
        Some(bytes) => Ok(bytes),
        None => Err(format!("`{text}` is too large")),
    }
}

impl Validator<'_> {
    pub(super) fn supervisor(&mut self, entry: &Entry) -> SupervisorSpec {
        let mut spec = SupervisorSpec::default();
        if matches!(entry.value, Node::Null) {
            return spec;
        }
        let Some(entries) = self.mapping(entry.value, &entry.value_at, "a mapping") else {
            return spec;
        };
        for e in &entries {
            match e.key.as_str() {
                "max_file_size" => {
                    if let Some(bytes) = self.file_size(e) {
                        spec.rotation.max_bytes = bytes;
                    }
                }
                "keep_files" => {
                    if let Some(keep) = self.keep_files(e) {
                        spec.rotation.keep = keep;
                    }
                }
                _ => {
                    self.unknown_key(e, Level::Supervisor);
                }
            }
        }
        spec
    }

    fn file_size(&mut self, entry: &Entry) -> Option<u64> {
        let text = match entry.value {
            Node::Str(text) | Node::Number { raw: text } => text,
            other => {
                self.expected(&entry.value_at, "a size such as 16MiB", other);
                return None;
            }
        };
        match parse_size(text) {
            Ok(bytes) if bytes >= Rotation::MIN_BYTES => Some(bytes),
            Ok(_) => {
                self.error(
                    &entry.value_at,
                    format!("`{text}` is too small; `max_file_size` is at least 1KiB"),
                );
                None
            }
            Err(message) => {
                self.error(&entry.value_at, message);
                None
            }
        }
    }

    fn keep_files(&mut self, entry: &Entry) -> Option<u32> {
        let range = format!("a whole number from 1 to {}", Rotation::MAX_KEEP);
        let Node::Number { raw } = entry.value else {
            self.expected(&entry.value_at, &range, entry.value);
            return None;
        };
        match raw.parse::<u32>() {
            Ok(n) if (1..=Rotation::MAX_KEEP).contains(&n) => Some(n),
            _ => {
                self.error(
                    &entry.value_at,
                    format!("`keep_files` must be {range}, not `{raw}`"),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16MiB"), Ok(16 * 1024 * 1024));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("0004KiB"), Ok(4096));
        assert_eq!(parse_size("2GiB"), Ok(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_size("4096B"), Ok(4096));
        for bad in [
            "", "MiB", "16", "16M", "16mb", "1.5MiB", "-1KiB", "16 MiB", "0KiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("16").unwrap_err().contains("no unit"));
        assert!(
            parse_size("99999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
        assert!(parse_size("0B").unwrap_err().contains("zero"));
    }
}
