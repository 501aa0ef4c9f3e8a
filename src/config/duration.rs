//! Deadlines as the user writes them: `500ms`, `10s`, `2m`, `1h` or `none`.
//!
//! This module owns the one grammar for durations, shared by the fleet file and
//! the CLI flags, so that a value accepted in one place is accepted in the other
//! and prints back the same way. It knows nothing about YAML.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A deadline: either a finite duration or, when the user explicitly wrote
/// `none`, no deadline at all (the only way to get an unbounded wait, see L2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    After(Duration),
    Never,
}

/// The deadline of connect and cleanup when neither the server nor `defaults` sets one.
pub const DEFAULT_TIMEOUT: Timeout = Timeout::After(Duration::from_secs(10));

impl Timeout {
    pub fn as_duration(self) -> Option<Duration> {
        match self {
            Timeout::After(d) => Some(d),
            Timeout::Never => None,
        }
    }
}

impl Timeout {
    /// The instant the deadline falls on, counted from now; `None` for no deadline.
    pub fn deadline(self) -> Option<tokio::time::Instant> {
        self.as_duration().map(|d| tokio::time::Instant::now() + d)
    }
}

/// A per-request deadline on the control socket: a number of milliseconds, where
/// 0 stands for `none` (a deadline is never zero, see [`DurationError::Zero`]),
/// and an absent field for the server's own setting.
pub(crate) mod millis {
    use super::Timeout;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(t: &Option<Timeout>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            None => s.serialize_none(),
            Some(Timeout::Never) => s.serialize_u64(0),
            Some(Timeout::After(d)) => {
                s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            }
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timeout>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(|ms| match ms {
            0 => Timeout::Never,
            ms => Timeout::After(Duration::from_millis(ms)),
        }))
    }
}

impl Default for Timeout {
    fn default() -> Self {
        DEFAULT_TIMEOUT
    }
}

/// Why a duration was refused; the text is shown to the user as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration; write e.g. 10s, 500ms, 2m, 1h or none")]
    Empty,
    #[error("`{0}` has no unit; add a unit: {0}s")]
    NoUnit(String),
    #[error("`{text}` has an unknown unit `{unit}`; use ms, s, m or h")]
    UnknownUnit { text: String, unit: String },
    #[error("`{0}` is not a whole number of a unit; write e.g. 1500ms instead of 1.5s")]
    NotWhole(String),
    #[error("`{0}` is negative; a deadline must be positive")]
    Negative(String),
    #[error(
        "`{0}` is zero, a deadline that can never be met; use a positive duration, or none for no deadline"
    )]
    Zero(String),
    #[error("`{0}` is too large")]
    TooLarge(String),
    #[error("`{0}` is not a duration; write e.g. 10s, 500ms, 2m, 1h or none")]
    Malformed(String),
}

/// Parses `500ms`, `10s`, `2m`, `1h` or `none`.
pub fn parse_duration(s: &str) -> Result<Timeout, String> {
    parse(s).map_err(|e| e.to_string())
}

pub(crate) fn parse(s: &str) -> Result<Timeout, DurationError> {
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s == "none" {
        return Ok(Timeout::Never);
    }
    let owned = || s.to_string();
    if s.starts_with('-') {
        return Err(DurationError::Negative(owned()));
    }
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(DurationError::Malformed(owned()));
    }
    if unit.starts_with('.') {
        return Err(DurationError::NotWhole(owned()));
    }
    // Parsed as u128 so that a long run of digits is "too large", not "malformed".
    let amount: u128 = match digits.parse() {
        Ok(n) => n,
        Err(_) => return Err(DurationError::TooLarge(owned())),
    };
    let millis_per_unit: u128 = match unit {
        "" => return Err(DurationError::NoUnit(digits.to_string())),
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(DurationError::UnknownUnit {
                text: owned(),
                unit: other.to_string(),
            });
        }
    };
    if amount == 0 {
        return Err(DurationError::Zero(owned()));
    }
    let millis = amount
        .checked_mul(millis_per_unit)
        .and_then(|m| u64::try_from(m).ok())
        .ok_or_else(|| DurationError::TooLarge(owned()))?;
    Ok(Timeout::After(Duration::from_millis(millis)))
}

impl FromStr for Timeout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s)
    }
}

/// Prints the largest unit that represents the value exactly, so that the text
/// parses back to the same value.
impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = match self {
            Timeout::Never => return f.write_str("none"),
            Timeout::After(d) => *d,
        };
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d.subsec_nanos() % 1_000_000 != 0 {
            // Only code can build such a value; it has no exact spelling in the grammar.
            return write!(f, "{d:?}");
        }
        let millis = d.as_millis();
        for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
            if millis % size == 0 {
                return write!(f, "{}{unit}", millis / size);
            }
        }
        write!(f, "{millis}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after_ms(ms: u64) -> Timeout {
        Timeout::After(Duration::from_millis(ms))
    }

    #[test]
    fn parses_every_unit_and_none() {
        assert_eq!(parse_duration("500ms"), Ok(after_ms(500)));
        assert_eq!(parse_duration("10s"), Ok(after_ms(10_000)));
        assert_eq!(parse_duration("2m"), Ok(after_ms(120_000)));
        assert_eq!(parse_duration("1h"), Ok(after_ms(3_600_000)));
        assert_eq!(parse_duration("none"), Ok(Timeout::Never));
        assert_eq!("10s".parse::<Timeout>(), Ok(after_ms(10_000)));
    }

    #[test]
    fn displays_the_largest_exact_unit() {
        assert_eq!(after_ms(500).to_string(), "500ms");
        assert_eq!(after_ms(10_000).to_string(), "10s");
        assert_eq!(after_ms(120_000).to_string(), "2m");
        assert_eq!(after_ms(3_600_000).to_string(), "1h");
        assert_eq!(after_ms(90_000).to_string(), "90s");
        assert_eq!(after_ms(1_500).to_string(), "1500ms");
        assert_eq!(Timeout::Never.to_string(), "none");
        assert_eq!(
            Timeout::After(Duration::from_micros(1500)).to_string(),
            "1.5ms"
        );
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "1ms",
            "999ms",
            "1s",
            "61s",
            "59m",
            "2h",
            "100h",
            "none",
            "7200001ms",
        ] {
            let parsed = parse_duration(text).unwrap();
            assert_eq!(parse_duration(&parsed.to_string()), Ok(parsed), "{text}");
        }
        assert_eq!(parse_duration("60s").unwrap().to_string(), "1m");
        assert_eq!(parse_duration("120m").unwrap().to_string(), "2h");
    }

    #[test]
    fn refuses_bad_durations_with_a_reason() {
        assert_eq!(
            parse_duration("10").unwrap_err(),
            "`10` has no unit; add a unit: 10s"
        );
        assert!(parse_duration("0s").unwrap_err().contains("zero"));
        assert!(parse_duration("0ms").unwrap_err().contains("zero"));
        assert!(parse_duration("0").unwrap_err().contains("no unit"));
        assert!(parse_duration("").unwrap_err().contains("empty"));
        assert!(
            parse_duration("10x")
                .unwrap_err()
                .contains("unknown unit `x`")
        );
        assert!(parse_duration("10 s").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("10S").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("1.5s").unwrap_err().contains("whole number"));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("s").unwrap_err().contains("not a duration"));
        assert!(
            parse_duration("None")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(
            parse_duration("forever")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(
            parse_duration("99999999999999999999999h")
                .unwrap_err()
                .contains("too large")
        );
        assert!(
            parse_duration("9999999999999999999999999999999999999999999s")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn as_duration() {
        assert_eq!(after_ms(5).as_duration(), Some(Duration::from_millis(5)));
        assert_eq!(Timeout::Never.as_duration(), None);
        assert_eq!(Timeout::default(), after_ms(10_000));
    }
}
