//! Values of flags that are more than a number or a word: `--since` and the line
//! counts of `logs` and `events`. Parsed into plain values; the clock is read by
//! the command that uses them.

use std::time::{Duration, SystemTime};

/// `--since`: a time, or how long before now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// `10m`, `1h30m`: that long before the command runs.
    Ago(Duration),
    /// An RFC 3339 time: `2026-05-04T10:21:07Z`, `2026-05-04T12:21:07+02:00`.
    At(SystemTime),
}

impl Since {
    /// The earliest time shown, for a command run at `now`.
    pub fn earliest(self, now: SystemTime) -> SystemTime {
        match self {
            Since::Ago(d) => now
                .checked_sub(d)
                .map_or(SystemTime::UNIX_EPOCH, |t| t.max(SystemTime::UNIX_EPOCH)),
            Since::At(t) => t,
        }
    }
}

pub(crate) fn parse_since(s: &str) -> Result<Since, String> {
    let s = s.trim();
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(Since::Ago(d));
    }
    parse_time(s).map(Since::At).ok_or_else(|| {
        format!(
            "`{s}` is neither a duration (10m, 1h30m) nor an RFC 3339 time with its zone (2026-05-04T10:21:07Z, 2026-05-04T12:21:07+02:00)"
        )
    })
}

/// An RFC 3339 time: date, `T` (or a space), time with optional fraction, and
/// `Z` or an offset `+HH:MM`/`-HH:MM`. A time without a zone is refused: it
/// would mean another moment on every machine.
fn parse_time(s: &str) -> Option<SystemTime> {
    let bytes = s.as_bytes();
    let (local, offset) = if let Some(local) = s.strip_suffix(['Z', 'z']) {
        (local, 0)
    } else if bytes.len() > 6
        && matches!(bytes[bytes.len() - 6], b'+' | b'-')
        && bytes[bytes.len() - 3] == b':'
    {
        let (local, zone) = s.split_at(s.len() - 6);
        let hours: i64 = zone.get(1..3)?.parse().ok()?;
        let minutes: i64 = zone.get(4..6)?.parse().ok()?;
        if hours > 23 || minutes > 59 {
            return None;
        }
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        (local, sign * (hours * 3600 + minutes * 60))
    } else {
        return None;
    };
    // 2026-05-04T10:21:07: the date and the time are both there.
    if local.len() < 19 || !matches!(local.as_bytes()[10], b'T' | b't' | b' ') {
        return None;
    }
    let mut local = local.to_owned();
    local.replace_range(10..11, "T");
    let as_utc = humantime::parse_rfc3339_weak(&local).ok()?;
    // 12:00+02:00 is 10:00 UTC.
    let shift = Duration::from_secs(offset.unsigned_abs());
    if offset >= 0 {
        as_utc.checked_sub(shift)
    } else {
        as_utc.checked_add(shift)
    }
}

/// `-n/--tail`: the last N lines, or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineCount {
    All,
    Last(usize),
}

impl LineCount {
    pub fn get(self) -> usize {
        match self {
            LineCount::All => usize::MAX,
            LineCount::Last(n) => n,
        }
    }
}

pub(crate) fn parse_line_count(s: &str) -> Result<LineCount, String> {
    if s == "all" {
        return Ok(LineCount::All);
    }
    s.parse()
        .map(LineCount::Last)
        .map_err(|_| format!("`{s}` is not a number of lines (or `all`)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> Since {
        Since::At(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn since_takes_durations_and_times_with_a_zone() {
        assert_eq!(parse_since("10m"), Ok(Since::Ago(Duration::from_secs(600))));
        assert_eq!(
            parse_since("1h30m"),
            Ok(Since::Ago(Duration::from_secs(5400)))
        );
        assert_eq!(parse_since("2026-05-04T10:21:07Z"), Ok(at(1_777_890_067)));
        assert_eq!(parse_since("2026-05-04 10:21:07z"), Ok(at(1_777_890_067)));
        assert_eq!(
            parse_since("2026-05-04T12:21:07.5+02:00"),
            Ok(Since::At(
                UNIX_EPOCH + Duration::from_millis(1_777_890_067_500)
            ))
        );
        assert_eq!(
            parse_since("2026-05-04T08:21:07-02:00"),
            Ok(at(1_777_890_067))
        );
        for bad in [
            "",
            "10",
            "soon",
            "2026-05-04",
            "2026-05-04T10:21:07",
            "2026-05-04T10:21:07+2:00",
            "2026-05-04T10:21:07+24:00",
            "2026-05-04X10:21:07Z",
            "2026-13-04T10:21:07Z",
        ] {
            let err = parse_since(bad).unwrap_err();
            assert!(err.contains("neither a duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn since_counts_back_from_now() {
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        assert_eq!(
            Since::Ago(Duration::from_secs(10)).earliest(now),
            UNIX_EPOCH + Duration::from_secs(990)
        );
        assert_eq!(
            Since::Ago(Duration::from_secs(5000)).earliest(now),
            UNIX_EPOCH
        );
        assert_eq!(at(5).earliest(now), UNIX_EPOCH + Duration::from_secs(5));
    }

    #[test]
    fn line_counts() {
        assert_eq!(parse_line_count("all"), Ok(LineCount::All));
        assert_eq!(parse_line_count("0"), Ok(LineCount::Last(0)));
        assert_eq!(parse_line_count("25").map(LineCount::get), Ok(25));
        assert_eq!(LineCount::All.get(), usize::MAX);
        assert!(parse_line_count("-1").is_err());
        assert!(parse_line_count("ten").is_err());
    }
}
