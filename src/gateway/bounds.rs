//! What a peer of a door may cost the supervisor (docs/design.md §10, "Bounds on
//! what servers and peers can cost"): the caps and timeouts of the HTTP doors,
//! the pacing of failed `accept`s, the counting of refusals into one line per
//! burst, and the cutting and escaping of the words a client gives about itself.

use std::time::{Duration, Instant};

/// Open connections of the gateway's HTTP door, unless `gateway.max_connections`
/// says otherwise.
pub(crate) const GATEWAY_CONNECTIONS: usize = 512;
/// Open connections of the metrics' own door, unless `metrics.max_connections`
/// says otherwise.
pub(crate) const METRICS_CONNECTIONS: usize = 64;
/// Open HTTP sessions of the gateway, unless `gateway.max_sessions` says otherwise.
pub(crate) const SESSIONS: usize = 256;
/// Open `subscriptions/listen` streams of the gateway, both doors together;
/// one more is refused (docs/design.md §14, "Listen streams").
pub(crate) const LISTENS: usize = 256;
/// How long a request's headers may take to arrive, counted from the moment the
/// door waits for them: on a new connection, and on a kept-alive one between
/// requests (so an idle connection is closed after as long).
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take to arrive once its headers have.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an HTTP session may wait, after its `initialize`, for the client's
/// `notifications/initialized` before it is closed.
pub(crate) const INITIALIZED_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest body of a request that opens a session (`initialize`).
pub(crate) const NEW_SESSION_BODY: usize = 64 * 1024;
/// The longest a client's name or version is kept, in characters, wherever it
/// is written (the gateway's log, the event log, the supervisor's log).
pub(crate) const CLIENT_WORDS: usize = 64;
/// Refused connections that are given a moment to read their 503 before the
/// connection closes; beyond these, a refused connection is closed at once.
pub(crate) const LINGERING: usize = 64;
/// How long a refused connection is given to read its 503.
pub(crate) const LINGER: Duration = Duration::from_millis(500);
/// The least time between two lines that count the same kind of trouble.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(5);
/// The first pause after a failed `accept`; each further failure doubles it.
pub(crate) const BACKOFF_FIRST: Duration = Duration::from_millis(10);
/// The longest pause after failed `accept`s.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The answer to a connection beyond its door's cap: written without reading
/// the request, then the connection closes.
pub(crate) const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Length: 66\r\n\
Retry-After: 1\r\n\
Connection: close\r\n\
\r\n\
busy: this door has as many connections open as it allows; retry\r\n";

/// Counts events of one kind (refusals, failed accepts) and says when a line
/// that reports them is due: at the first, then at most once per
/// [`REPORT_EVERY`], with how many happened since the last line.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Not yet reported.
    pending: u64,
    /// When the last line was due.
    said: Option<Instant>,
}

impl Tally {
    /// Counts one at `now`; returns the count to report if a line is due.
    pub(crate) fn add(&mut self, now: Instant) -> Option<u64> {
        self.pending += 1;
        self.due(now)
    }

    /// The count to report if a line is due at `now` (one is pending and the
    /// last line is old enough).
    pub(crate) fn due(&mut self, now: Instant) -> Option<u64> {
        let quiet = self
            .said
            .is_none_or(|said| now.duration_since(said) >= REPORT_EVERY);
        (self.pending > 0 && quiet).then(|| {
            self.said = Some(now);
            std::mem::take(&mut self.pending)
        })
    }

    /// When the pending count will be due, if any is pending.
    pub(crate) fn next(&self) -> Option<Instant> {
        (self.pending > 0).then(|| self.said.map_or_else(Instant::now, |s| s + REPORT_EVERY))
    }
}

/// The pause after failed `accept`s: [`BACKOFF_FIRST`], doubled at each further
/// failure up to [`BACKOFF_MAX`]; a success starts it over. Running out of
/// descriptors is not retried in a hot loop.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    /// The pause after one more failure.
    pub(crate) fn failed(&mut self) -> Duration {
        let pause = self.next.unwrap_or(BACKOFF_FIRST);
        self.next = Some((pause * 2).min(BACKOFF_MAX));
        pause
    }

    /// An `accept` succeeded.
    pub(crate) fn succeeded(&mut self) {
        self.next = None;
    }
}

/// Failed `accept`s of one listener: paced by a [`Backoff`], counted, and told
/// in the supervisor's log at most once per [`REPORT_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct AcceptErrors {
    backoff: Backoff,
    tally: Tally,
}

impl AcceptErrors {
    /// One more failure of `what`'s `accept`: logs it if a line is due, and
    /// returns how long to wait before the next `accept`.
    pub(crate) fn failed(&mut self, what: &str, error: &std::io::Error) -> Duration {
        let pause = self.backoff.failed();
        if let Some(count) = self.tally.add(Instant::now()) {
            tracing::warn!(
                %error,
                failures = count,
                pause_ms = pause.as_millis() as u64,
                "{what}: accept failed; waiting before the next"
            );
        }
        pause
    }

    /// An `accept` succeeded: the pause starts over.
    pub(crate) fn succeeded(&mut self) {
        self.backoff.succeeded();
    }
}

/// A client's own words about itself (its name, its version): at most
/// [`CLIENT_WORDS`] characters, with control characters escaped, so that they
/// can neither fill a log nor forge a line of it.
pub(crate) fn client_words(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    for c in chars.by_ref().take(CLIENT_WORDS) {
        push_escaped(&mut out, c);
    }
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// `text` with every control character escaped (`\n`, `\u{1b}`, ...): one line,
/// whatever it holds.
pub(crate) fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out.into()
}

fn push_escaped(out: &mut String, c: char) {
    if c.is_control() {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_is_well_formed() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains("\r\nConnection: close"));
        assert!(head.contains("\r\nRetry-After: 1"));
        assert!(head.contains(&format!("\r\nContent-Length: {}", body.len())));
    }

    #[test]
    fn a_tally_says_the_first_then_at_most_once_per_interval() {
        let start = Instant::now();
        let mut tally = Tally::default();
        assert_eq!(tally.next(), None);
        assert_eq!(tally.add(start), Some(1));
        for i in 1..1000 {
            assert_eq!(tally.add(start + Duration::from_millis(i)), None);
        }
        assert_eq!(tally.next(), Some(start + REPORT_EVERY));
        assert_eq!(tally.due(start + Duration::from_secs(1)), None);
        assert_eq!(tally.due(start + REPORT_EVERY), Some(999));
        assert_eq!(tally.next(), None);
        assert_eq!(tally.due(start + REPORT_EVERY * 3), None, "nothing pending");
        assert_eq!(tally.add(start + REPORT_EVERY * 3), Some(1));
    }

    #[test]
    fn failed_accepts_back_off_to_a_bound_and_start_over() {
        let mut backoff = Backoff::default();
        let pauses: Vec<Duration> = (0..10).map(|_| backoff.failed()).collect();
        assert_eq!(pauses[0], BACKOFF_FIRST);
        assert_eq!(pauses[1], BACKOFF_FIRST * 2);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*pauses.last().unwrap(), BACKOFF_MAX);
        backoff.succeeded();
        assert_eq!(backoff.failed(), BACKOFF_FIRST);
    }

    #[test]
    fn a_clients_words_are_cut_and_cannot_forge_a_line() {
        assert_eq!(client_words("claude-code"), "claude-code");
        let forged = client_words("x\n2026-01-01T00:00:00Z session 99 closed (http)\u{1b}[2K");
        assert!(!forged.chars().any(char::is_control), "{forged}");
        assert!(forged.starts_with("x\\n2026"), "{forged}");
        let long = client_words(&"é".repeat(4 * 1024 * 1024));
        assert_eq!(long.chars().count(), CLIENT_WORDS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(one_line("plain"), "plain");
        assert_eq!(one_line("a\r\nb\tc"), "a\\r\\nb\\tc");
    }
}
