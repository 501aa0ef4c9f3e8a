//! Keeping secrets out of what a server writes: its stderr (`stderr.rs`) and the
//! messages of a remote server (`remote`). Every byte that is part of an
//! occurrence of a secret is replaced: a run of text covered by one or more
//! occurrences (overlapping ones, or one secret inside another) becomes a single
//! [`MARKER`], so no piece of a secret survives next to it.
//!
//! A stream (a server's stderr, read in chunks of any size) goes through a
//! [`Redactor`]. It holds back only what it must: the longest end of what it has
//! read that is the beginning of a secret (so at most the longest secret's length
//! less one byte), and writes everything before it at once. The held bytes are
//! written when the next bytes show whether they complete a secret, or when the
//! stream ends; never on a timer, because bytes written before a secret is
//! complete can no longer be taken back. A server that writes the beginning of
//! a secret and then nothing for a long time shows, until it writes again or
//! exits, its output up to that beginning.
//!
//! Values shorter than [`MIN_SECRET_BYTES`] are not looked for: "1", "true" or
//! "info" in an environment variable would blot out those words wherever a
//! server writes them, and a credential is longer.

use std::sync::Arc;

use memchr::memmem;

/// What replaces a secret.
pub(crate) const MARKER: &[u8] = b"[redacted]";

/// The shortest value that is looked for (docs/design.md §6).
pub(crate) const MIN_SECRET_BYTES: usize = 8;

/// The values to look for, as given: those too short dropped, duplicates dropped,
/// longest first.
pub(crate) fn secrets<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut secrets: Vec<String> = values
        .into_iter()
        .filter(|s| s.len() >= MIN_SECRET_BYTES)
        .map(str::to_owned)
        .collect();
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    secrets
}

/// `text` with every secret of `secrets` replaced by [`MARKER`].
pub(crate) fn redact(text: &str, secrets: &[String]) -> String {
    if !secrets.iter().any(|s| text.contains(s.as_str())) {
        return text.to_owned();
    }
    let mut redactor = Redactor::new(secrets.iter().map(String::as_str));
    let mut out = redactor.push(text.as_bytes());
    out.extend(redactor.finish());
    // Secrets and markers are whole UTF-8 text, and so is what is left between.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Redacts a stream read in chunks: [`Redactor::push`] each chunk and write what
/// it returns, then [`Redactor::finish`] at the end.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Arc<[Box<[u8]>]>,
    /// The longest secret's length.
    longest: usize,
    /// Bytes read but not decided yet: the end of the stream that may be the
    /// beginning of a secret.
    held: Vec<u8>,
    /// How many bytes at the start of `held` a marker written already covers:
    /// a secret that completes over them extends that marker.
    covered: usize,
}

impl Redactor {
    /// Looks for `secrets` (those shorter than [`MIN_SECRET_BYTES`] are left out).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Redactor {
        let secrets: Arc<[Box<[u8]>]> = self::secrets(secrets)
            .into_iter()
            .map(|s| s.into_bytes().into_boxed_slice())
            .collect();
        Redactor {
            longest: secrets.first().map_or(0, |s| s.len()),
            secrets,
            held: Vec::new(),
            covered: 0,
        }
    }

    /// Whether there is anything to look for.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// How many bytes are held back, waiting for what comes next.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The next bytes of the stream; returns what can be written now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.is_empty() {
            return chunk.to_vec();
        }
        self.held.extend_from_slice(chunk);
        let decided = self.undecided_from();
        self.emit(decided)
    }

    /// The stream has ended: what is held back, redacted.
    pub fn finish(&mut self) -> Vec<u8> {
        self.emit(self.held.len())
    }

    /// Where the longest end of `held` that is a proper beginning of a secret
    /// starts; `held.len()` when there is none.
    fn undecided_from(&self) -> usize {
        let n = self.held.len();
        let from = n.saturating_sub(self.longest.saturating_sub(1));
        (from..n)
            .find(|&i| {
                let end = &self.held[i..];
                self.secrets
                    .iter()
                    .any(|s| s.len() > end.len() && s.starts_with(end))
            })
            .unwrap_or(n)
    }

    /// Writes out `held[..decided]`, secrets replaced, and keeps the rest.
    fn emit(&mut self, decided: usize) -> Vec<u8> {
        let buf = &self.held;
        // Every occurrence starting before `decided`, overlapping ones too.
        let mut found: Vec<(usize, usize)> = Vec::new();
        for secret in self.secrets.iter() {
            let finder = memmem::Finder::new(secret);
            let mut at = 0;
            while at < decided {
                let Some(i) = finder.find(&buf[at..]) else {
                    break;
                };
                let start = at + i;
                if start >= decided {
                    break;
                }
                found.push((start, start + secret.len()));
                at = start + 1;
            }
        }
        found.sort_unstable();
        let mut out = Vec::with_capacity(decided);
        let mut covered = self.covered;
        let mut done = 0;
        for (start, end) in found {
            let from = done.max(covered);
            if from < start {
                out.extend_from_slice(&buf[from..start]);
            }
            if start >= covered {
                out.extend_from_slice(MARKER);
                covered = end;
            } else {
                covered = covered.max(end);
            }
            done = start;
        }
        let from = done.max(covered);
        if from < decided {
            out.extend_from_slice(&buf[from..decided]);
        }
        self.held.drain(..decided);
        self.covered = covered.saturating_sub(decided);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "sk-live-0123456789";

    fn whole(secrets: &[&str], text: &str) -> String {
        let mut r = Redactor::new(secrets.iter().copied());
        let mut out = r.push(text.as_bytes());
        out.extend(r.finish());
        String::from_utf8(out).unwrap()
    }

    /// `text` pushed in the pieces cut at `cuts`, with what each push returned.
    fn pieces(secrets: &[&str], text: &str, cuts: &[usize]) -> (String, Vec<Vec<u8>>) {
        let mut r = Redactor::new(secrets.iter().copied());
        let mut outs = Vec::new();
        let mut last = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            outs.push(r.push(&text.as_bytes()[last..cut]));
            last = cut;
        }
        outs.push(r.finish());
        let all: Vec<u8> = outs.concat();
        (String::from_utf8(all).unwrap(), outs)
    }

    #[test]
    fn a_secret_is_replaced_wherever_it_is() {
        assert_eq!(whole(&[S], S), "[redacted]");
        assert_eq!(
            whole(&[S], &format!("key={S}\n{S}{S} end")),
            "key=[redacted]\n[redacted][redacted] end"
        );
        assert_eq!(whole(&[S], "nothing here\n"), "nothing here\n");
        assert_eq!(whole(&[], "nothing to look for"), "nothing to look for");
    }

    #[test]
    fn a_secret_split_across_two_reads_at_every_point_is_replaced() {
        let text = format!("before {S} after\n");
        for cut in 0..=text.len() {
            let (out, parts) = pieces(&[S], &text, &[cut]);
            assert_eq!(out, "before [redacted] after\n", "cut at {cut}");
            for part in &parts {
                let part = String::from_utf8_lossy(part);
                assert!(!part.contains("sk-"), "cut at {cut}: {part:?}");
            }
        }
        // Every byte a read of its own.
        let cuts: Vec<usize> = (1..text.len()).collect();
        assert_eq!(pieces(&[S], &text, &cuts).0, "before [redacted] after\n");
    }

    #[test]
    fn only_the_beginning_of_a_secret_is_held_back() {
        let mut r = Redactor::new([S]);
        assert_eq!(r.push(b"ready: sk-li"), b"ready: ");
        assert_eq!(r.held(), 5);
        // Not a secret after all: written at once.
        assert_eq!(r.push(b"ke this\n"), b"sk-like this\n");
        assert_eq!(r.held(), 0);
        // A line that ends in no beginning of a secret is written whole.
        assert_eq!(r.push(b"prompt> "), b"prompt> ");
        // The longest end that could begin one, even when a shorter one could too.
        assert_eq!(r.push(b"sk-sk-live-0"), b"sk-");
        assert_eq!(r.held(), 9);
        assert_eq!(r.finish(), b"sk-live-0");
        assert_eq!(r.held(), 0);
        assert!(r.finish().is_empty());
    }

    #[test]
    fn what_is_held_back_is_written_at_the_end() {
        let (out, parts) = pieces(&[S], "last words sk-live-01", &[]);
        assert_eq!(out, "last words sk-live-01");
        assert_eq!(parts[0], b"last words ");
        assert_eq!(parts[1], b"sk-live-01");
    }

    #[test]
    fn overlapping_secrets_leave_nothing_of_either() {
        let a = "abcdefgh12";
        let b = "gh12345678";
        for text in ["xx abcdefgh12345678 yy", "xx gh12345678 abcdefgh12 yy"] {
            let expected = whole(&[a, b], text);
            assert!(!expected.contains("gh") && !expected.contains("12"), "{expected}");
            for cut in 0..=text.len() {
                assert_eq!(pieces(&[a, b], text, &[cut]).0, expected, "cut at {cut}");
            }
        }
        assert_eq!(whole(&[a, b], "xx abcdefgh12345678 yy"), "xx [redacted] yy");
        // A secret that repeats into itself.
        assert_eq!(whole(&["abababab"], "ababababab!"), "[redacted]!");
    }

    #[test]
    fn a_secret_that_begins_another_is_never_cut_from_it() {
        let short = "password";
        let long = "password-and-more";
        for text in ["x password-and-more y", "x password y", "x password-and-mo"] {
            for cut in 0..=text.len() {
                let (out, _) = pieces(&[short, long], text, &[cut]);
                assert!(!out.contains("-and-more"), "cut at {cut}: {out}");
                assert!(!out.contains("password"), "cut at {cut}: {out}");
            }
        }
        assert_eq!(whole(&[short, long], "x password-and-more y"), "x [redacted] y");
        assert_eq!(whole(&[short, long], "x password-and-mo"), "x [redacted]-and-mo");
        // A secret inside another, longer one.
        assert_eq!(
            whole(&["inner-secret", "the-inner-secret-too"], "the-inner-secret-too"),
            "[redacted]"
        );
    }

    #[test]
    fn multibyte_text_and_secrets() {
        let secret = "clé-été-ünïcødé";
        let text = format!("日本語 {secret} ✓\n");
        for cut in 0..=text.len() {
            let (out, _) = pieces(&[secret], &text, &[cut]);
            assert_eq!(out, "日本語 [redacted] ✓\n", "cut at {cut}");
        }
        // Text that is not UTF-8 passes as it is.
        let mut r = Redactor::new([S]);
        let mut out = r.push(b"\xff\xfe sk-live-0123");
        out.extend(r.push(b"456789 \xc3"));
        out.extend(r.finish());
        assert_eq!(out, b"\xff\xfe [redacted] \xc3");
    }

    #[test]
    fn short_values_are_not_looked_for() {
        assert_eq!(whole(&["1", "true", "seven77"], "1 true seven77"), "1 true seven77");
        assert_eq!(
            secrets(["12345678", "1234", "abcdefghij", "12345678"]),
            ["abcdefghij", "12345678"]
        );
        let r = Redactor::new(["short"]);
        assert!(r.is_empty());
    }

    #[test]
    fn redacts_text_at_once() {
        let secrets = secrets([S, "another-one"]);
        assert_eq!(
            redact(&format!("a {S} b another-one c"), &secrets),
            "a [redacted] b [redacted] c"
        );
        assert_eq!(redact("plain", &secrets), "plain");
    }

    /// Against a plain model: every byte inside an occurrence replaced, each run of
    /// them one marker; random texts and cuts from a small alphabet, so that
    /// secrets occur, overlap and begin often.
    #[test]
    fn any_cutting_gives_what_redacting_all_at_once_gives() {
        fn model(secrets: &[&str], text: &[u8]) -> Vec<u8> {
            // A marker where an occurrence begins outside the run before it,
            // which it extends when it begins inside.
            let mut out = Vec::new();
            let mut run_end = 0;
            for i in 0..text.len() {
                let ends: Vec<usize> = secrets
                    .iter()
                    .filter(|s| s.len() >= MIN_SECRET_BYTES && text[i..].starts_with(s.as_bytes()))
                    .map(|s| i + s.len())
                    .collect();
                let end = ends.iter().copied().max();
                if i < run_end {
                    run_end = run_end.max(end.unwrap_or(0));
                } else if let Some(end) = end {
                    out.extend_from_slice(MARKER);
                    run_end = end;
                } else {
                    out.push(text[i]);
                }
            }
            out
        }
        let secrets = ["abaabbab", "babbabba", "aabbaabbab", "bbbbbbbb"];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let len = (next() % 40) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| if next() % 2 == 0 { b'a' } else { b'b' })
                .collect();
            let expected = model(&secrets, &text);
            let mut r = Redactor::new(secrets);
            let mut out = Vec::new();
            let mut at = 0;
            while at < text.len() {
                let step = 1 + (next() % 6) as usize;
                let end = (at + step).min(text.len());
                out.extend(r.push(&text[at..end]));
                assert!(r.held() < 10, "held {}", r.held());
                at = end;
            }
            out.extend(r.finish());
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expected),
                "text {:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}
