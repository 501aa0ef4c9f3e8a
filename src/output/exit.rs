//! The exit-code table (docs/design.md §5). Never renumbered. When servers end differently,
//! the highest-ranked code wins: 2, 5, 4, 3, 6, 7, 8, 9, 1, then 0.

use crate::lifecycle::error::ErrorKind;
use crate::lifecycle::summary::Outcome;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Everything asked for succeeded.
    Ok,
    /// Internal error: a bug, or an I/O error of the tool itself.
    Internal,
    /// Usage error or invalid fleet file.
    Usage,
    /// A server failed to start: spawn failed, exited during the handshake, protocol error.
    StartFailed,
    /// A connect deadline passed.
    ConnectTimeout,
    /// Teardown not clean: failed or timed out, processes left alive, or quarantined.
    TeardownNotClean,
    /// Refused: quarantined, or an `--if-generation` precondition failed.
    Refused,
    /// Busy: the authority did not accept the request within `--wait-timeout`.
    Busy,
    /// The supervisor is unreachable.
    Unreachable,
    /// A server's tools differ from the expected ones (`check --expect-tools`).
    ToolsDiffer,
    /// The CLI was interrupted.
    Interrupted,
}

impl Code {
    pub fn as_i32(self) -> i32 {
        match self {
            Code::Ok => 0,
            Code::Internal => 1,
            Code::Usage => 2,
            Code::StartFailed => 3,
            Code::ConnectTimeout => 4,
            Code::TeardownNotClean => 5,
            Code::Refused => 6,
            Code::Busy => 7,
            Code::Unreachable => 8,
            Code::ToolsDiffer => 9,
            Code::Interrupted => 130,
        }
    }

    /// Higher wins. An interruption outranks everything: the caller must learn that
    /// it did not see the end. A difference of tools is only found on servers that
    /// started, so every way of not starting, not ending clean or not being served
    /// outranks it; it is still a finding about the servers, which an internal
    /// error is not (docs/design.md §5).
    fn rank(self) -> u8 {
        match self {
            Code::Ok => 0,
            Code::Internal => 1,
            Code::ToolsDiffer => 2,
            Code::Unreachable => 3,
            Code::Busy => 4,
            Code::Refused => 5,
            Code::StartFailed => 6,
            Code::ConnectTimeout => 7,
            Code::TeardownNotClean => 8,
            Code::Usage => 9,
            Code::Interrupted => 10,
        }
    }

    /// Every code, in the order of their numbers.
    pub const ALL: [Code; 11] = [
        Code::Ok,
        Code::Internal,
        Code::Usage,
        Code::StartFailed,
        Code::ConnectTimeout,
        Code::TeardownNotClean,
        Code::Refused,
        Code::Busy,
        Code::Unreachable,
        Code::ToolsDiffer,
        Code::Interrupted,
    ];

    /// The code with number `n`; an unknown number is an internal error.
    pub fn from_i32(n: i32) -> Code {
        Code::ALL
            .into_iter()
            .find(|c| c.as_i32() == n)
            .unwrap_or(Code::Internal)
    }

    /// What the code means, in a line, for `--help` and the manual pages.
    pub fn meaning(self) -> &'static str {
        match self {
            Code::Ok => "everything asked for succeeded",
            Code::Internal => "internal error: a bug, an I/O error of mcpfleet, a request the supervisor refused (malformed, or while it shuts down)",
            Code::Usage => "usage error, an invalid fleet file, or a state directory that serves another fleet file",
            Code::StartFailed => {
                "a server failed to start or serve (spawn, handshake, protocol, unauthorized, session lost, auth required: run mcpfleet login), a failed call or tools, a server failed or in crash-loop in status"
            }
            Code::ConnectTimeout => "a server's connect deadline passed (also what left a server failed in status)",
            Code::TeardownNotClean => {
                "teardown not clean: a failed teardown, a quarantined server, with --strict an escalated one; a down of the whole fleet after which the supervisor or its guardian still runs"
            }
            Code::Refused => {
                "refused: quarantined, or fenced (--if-generation named another generation, or this host's lease in etcd is not confirmed), or run by another host (owned_elsewhere)"
            }
            Code::Busy => "busy: the wait deadline passed and the request was withdrawn",
            Code::Unreachable => "the supervisor is unreachable, was lost during the request (also under connect), or is of another mcpfleet build",
            Code::ToolsDiffer => "the tools differ from the snapshot of check --expect-tools",
            Code::Interrupted => "interrupted (Ctrl-C); also a request answered cancelled",
        }
    }
}

/// The exit-code table as text: a heading, then a line per code.
pub(crate) fn table() -> String {
    let mut out = String::from("Exit codes (when servers end differently, the most severe wins):\n");
    for code in Code::ALL {
        out.push_str(&format!("  {:<4} {}\n", code.as_i32(), code.meaning()));
    }
    out
}

impl Code {

    /// The code that wins between two outcomes.
    pub fn max(self, other: Code) -> Code {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// The code of one error kind.
    pub fn of_error(kind: ErrorKind) -> Code {
        match kind {
            ErrorKind::SpawnFailed
            | ErrorKind::ConnectFailed
            | ErrorKind::Protocol
            | ErrorKind::Exited
            | ErrorKind::CrashLoop
            | ErrorKind::SessionLost
            | ErrorKind::Unauthorized
            | ErrorKind::AuthRequired => Code::StartFailed,
            ErrorKind::ConnectTimeout => Code::ConnectTimeout,
            ErrorKind::TeardownFailed => Code::TeardownNotClean,
            ErrorKind::Quarantined | ErrorKind::Fenced | ErrorKind::OwnedElsewhere => Code::Refused,
            ErrorKind::Busy => Code::Busy,
            ErrorKind::Cancelled => Code::Interrupted,
        }
    }

    /// The code of a teardown outcome; `strict` counts an escalation as not clean.
    pub fn of_teardown(outcome: Outcome, strict: bool) -> Code {
        match outcome {
            Outcome::Clean => Code::Ok,
            Outcome::Escalated if strict => Code::TeardownNotClean,
            Outcome::Escalated => Code::Ok,
            Outcome::Failed => Code::TeardownNotClean,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranking_follows_the_documented_order() {
        let order = [
            Code::Usage,
            Code::TeardownNotClean,
            Code::ConnectTimeout,
            Code::StartFailed,
            Code::Refused,
            Code::Busy,
            Code::Unreachable,
            Code::ToolsDiffer,
            Code::Internal,
            Code::Ok,
        ];
        for (i, high) in order.iter().enumerate() {
            for low in &order[i + 1..] {
                assert_eq!(high.max(*low), *high, "{high:?} must beat {low:?}");
                assert_eq!(low.max(*high), *high, "{high:?} must beat {low:?}");
            }
        }
        assert_eq!(Code::Usage.max(Code::Interrupted), Code::Interrupted);
    }

    #[test]
    fn numbers_never_change() {
        let table = [
            (Code::Ok, 0),
            (Code::Internal, 1),
            (Code::Usage, 2),
            (Code::StartFailed, 3),
            (Code::ConnectTimeout, 4),
            (Code::TeardownNotClean, 5),
            (Code::Refused, 6),
            (Code::Busy, 7),
            (Code::Unreachable, 8),
            (Code::ToolsDiffer, 9),
            (Code::Interrupted, 130),
        ];
        for (code, n) in table {
            assert_eq!(code.as_i32(), n);
            assert_eq!(Code::from_i32(n), code);
        }
    }

    #[test]
    fn escalation_counts_only_when_strict() {
        assert_eq!(Code::of_teardown(Outcome::Escalated, false), Code::Ok);
        assert_eq!(
            Code::of_teardown(Outcome::Escalated, true),
            Code::TeardownNotClean
        );
        assert_eq!(
            Code::of_teardown(Outcome::Failed, false),
            Code::TeardownNotClean
        );
        assert_eq!(
            Code::of_error(ErrorKind::ConnectTimeout),
            Code::ConnectTimeout
        );
        assert_eq!(Code::of_error(ErrorKind::ConnectFailed), Code::StartFailed);
        assert_eq!(Code::of_error(ErrorKind::Unauthorized), Code::StartFailed);
        assert_eq!(Code::of_error(ErrorKind::AuthRequired), Code::StartFailed);
        assert_eq!(Code::of_error(ErrorKind::SessionLost), Code::StartFailed);
    }
}
