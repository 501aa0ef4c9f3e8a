//! How the lifecycle writes times down: durations in whole milliseconds, instants
//! as RFC 3339 in UTC. Events and summaries both stamp with these.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(t: SystemTime) -> String {
    // The formatter refuses times before 1970 and after the year 9999 (it
    // panics); events are stamped with the clock, so neither happens outside a
    // clock gone wrong, which should still not bring the authority down.
    let last = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999);
    humantime::format_rfc3339_millis(t.clamp(UNIX_EPOCH, last)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times_as_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_941_714_123);
        assert_eq!(rfc3339(t), "2026-11-29T08:41:54.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn times_out_of_the_formatters_range_are_clamped_not_a_panic() {
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(rfc3339(before), "1970-01-01T00:00:00.000Z");
        let far = UNIX_EPOCH + Duration::from_secs(300_000_000_000);
        assert_eq!(rfc3339(far), "9999-12-31T23:59:59.999Z");
    }
}
