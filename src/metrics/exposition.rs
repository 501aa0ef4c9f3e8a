//! The text formats Prometheus scrapes: its own text format (0.0.4) and, when
//! the scraper asks for it, OpenMetrics 1.0. The two differ in little: a
//! counter's family is named without `_total` in OpenMetrics, which has `# UNIT`
//! lines and ends with `# EOF`.

use std::fmt::Write;
use std::sync::Mutex;

/// Which text format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Prometheus,
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text`, else Prometheus' text format.
    pub(crate) fn negotiate(accept: Option<&str>) -> Format {
        let asks = accept.is_some_and(|a| {
            a.split(',').any(|part| {
                let mut params = part.split(';');
                let kind = params.next().unwrap_or_default().trim();
                let refused = params.any(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.trim().parse::<f64>().ok())
                        .is_some_and(|q| q <= 0.0)
                });
                kind.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            })
        });
        if asks {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Writes metric families, one after the other, in one of the formats.
pub(crate) struct Writer {
    out: String,
    format: Format,
}

/// The buffer of the last text that was sent and let go of, for the next one
/// ([`recycle`]).
static SPARE: Mutex<Option<String>> = Mutex::new(None);

/// The largest buffer kept for the next text.
const MAX_SPARE: usize = 8 * 1024 * 1024;

/// Keeps `text`'s buffer for the next [`Writer`]. A scrape of a large fleet is
/// hundreds of KB: freed on one thread and taken anew on another, each thread's
/// allocator arena would keep a copy of it resident.
pub(crate) fn recycle(mut text: String) {
    if text.capacity() <= MAX_SPARE {
        text.clear();
        *SPARE.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
    }
}

impl Writer {
    /// A writer whose text will be about `size` bytes: the buffer is the last
    /// one [`recycle`]d, or taken once at that size, not grown by doubling
    /// (each doubling leaves garbage behind).
    pub(crate) fn new(format: Format, size: usize) -> Writer {
        let spare = SPARE.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut out = spare.unwrap_or_default();
        out.reserve(size);
        Writer { out, format }
    }

    /// Begins a family. `name` is the family's name without `_total`; the
    /// samples of a counter are named `NAME_total`. A name that ends in
    /// `_seconds` or `_bytes` carries that unit.
    pub(crate) fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind_name = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let total = match (self.format, kind) {
            (Format::Prometheus, Kind::Counter) => "_total",
            _ => "",
        };
        // Written piece by piece: a scrape allocates nothing here either.
        for (head, tail) in [("# HELP ", None), ("# TYPE ", Some(kind_name))] {
            self.out.push_str(head);
            self.out.push_str(name);
            self.out.push_str(total);
            self.out.push(' ');
            match tail {
                Some(kind_name) => self.out.push_str(kind_name),
                None => push_help(&mut self.out, help),
            }
            self.out.push('\n');
        }
        if self.format == Format::OpenMetrics {
            for unit in ["seconds", "bytes"] {
                if name.strip_suffix(unit).is_some_and(|n| n.ends_with('_')) {
                    self.out.push_str("# UNIT ");
                    self.out.push_str(name);
                    self.out.push(' ');
                    self.out.push_str(unit);
                    self.out.push('\n');
                }
            }
        }
    }

    /// One sample: `name` is the sample's full name (`..._total`, `..._bucket`).
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.sample_with(name, "", labels, None, value);
    }

    /// One sample named `name` + `suffix`, with `labels` and then `le` when given.
    /// Writes straight into the text: a scrape allocates nothing per sample.
    pub(crate) fn sample_with(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        le: Option<&str>,
        value: f64,
    ) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() || le.is_some() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                escape_label(&mut self.out, v);
                self.out.push('"');
            }
            if let Some(le) = le {
                if !labels.is_empty() {
                    self.out.push(',');
                }
                self.out.push_str("le=\"");
                self.out.push_str(le);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        number(&mut self.out, value);
        self.out.push('\n');
    }

    /// The samples of one histogram series: cumulative buckets, sum and count.
    pub(crate) fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let mut cumulative = 0u64;
        for (i, le) in LE.iter().enumerate() {
            cumulative += h.counts[i];
            self.sample_with(name, "_bucket", labels, Some(le), cumulative as f64);
        }
        self.sample_with(name, "_bucket", labels, Some("+Inf"), h.count as f64);
        self.sample_with(name, "_sum", labels, None, h.sum);
        self.sample_with(name, "_count", labels, None, h.count as f64);
    }

    pub(crate) fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// The upper bounds of every histogram's buckets, in seconds: from half a
/// millisecond (a call through the gateway) to two minutes (a slow teardown).
/// Each bucket is a line per server and histogram at every scrape: few enough
/// that a fleet of hundreds stays a small scrape.
pub(crate) const BOUNDS: [f64; 12] = [
    0.0005, 0.0025, 0.01, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0,
];

/// The [`BOUNDS`] as the `le` label writes them, in both formats (OpenMetrics
/// wants a float: `1.0`).
const LE: [&str; BOUNDS.len()] = [
    "0.0005", "0.0025", "0.01", "0.025", "0.1", "0.25", "1.0", "2.5", "10.0", "30.0", "60.0",
    "120.0",
];

/// A histogram of durations with the [`BOUNDS`] buckets.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Histogram {
    /// Per bucket (not cumulative); a value above every bound counts only in `count`.
    counts: [u64; BOUNDS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub(crate) fn observe(&mut self, seconds: f64) {
        let seconds = if seconds.is_finite() && seconds > 0.0 {
            seconds
        } else {
            0.0
        };
        if let Some(i) = BOUNDS.iter().position(|b| seconds <= *b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }

}

fn number(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        integer(out, value as i64);
    } else {
        let _ = write!(out, "{value}");
    }
}

/// An integer in decimal, without the formatting machinery: most samples are counts.
fn integer(out: &mut String, value: i64) {
    if value < 0 {
        out.push('-');
    }
    let mut n = value.unsigned_abs();
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or("0"));
}

fn escape_label(out: &mut String, value: &str) {
    // Most values (server names, outcomes) have nothing to escape.
    if memchr::memchr3(b'\\', b'"', b'\n', value.as_bytes()).is_none() {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A family's help text, its backslashes and line ends escaped.
fn push_help(out: &mut String, help: &str) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_chosen_only_when_asked_for() {
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Format::Prometheus
        );
        // What Prometheus 2.x sends.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; q=0")),
            Format::Prometheus
        );
    }

    #[test]
    fn counters_are_named_as_each_format_wants() {
        for (format, type_line, end) in [
            (
                Format::Prometheus,
                "# TYPE x_starts_total counter",
                "x_starts_total{server=\"a\\\"b\"} 3\n",
            ),
            (
                Format::OpenMetrics,
                "# TYPE x_starts counter",
                "x_starts_total{server=\"a\\\"b\"} 3\n# EOF\n",
            ),
        ] {
            let mut w = Writer::new(format, 4096);
            w.family("x_starts", Kind::Counter, "Starts.\nBy server.");
            w.sample("x_starts_total", &[("server", "a\"b")], 3.0);
            let text = w.finish();
            assert!(text.contains(type_line), "{text}");
            assert!(text.contains("By server"), "{text}");
            assert!(text.ends_with(end), "{text}");
        }
    }

    #[test]
    fn the_le_labels_are_the_bounds_and_integers_read_as_rust_writes_them() {
        for (le, bound) in LE.iter().zip(BOUNDS) {
            assert_eq!(le.parse::<f64>().unwrap(), bound);
            assert!(le.contains('.'), "OpenMetrics wants a float: {le}");
        }
        for n in [0i64, 7, -7, 10, 1234567890123, -999_999_999_999_999] {
            let mut out = String::new();
            integer(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let mut h = Histogram::default();
        h.observe(0.0002);
        h.observe(0.3);
        h.observe(500.0);
        h.observe(f64::NAN);
        let mut w = Writer::new(Format::OpenMetrics, 4096);
        w.family("x_wait_seconds", Kind::Histogram, "Waits.");
        w.histogram("x_wait_seconds", &[("server", "a")], &h);
        let text = w.finish();
        assert!(text.contains("# UNIT x_wait_seconds seconds"), "{text}");
        assert!(text.contains("x_wait_seconds_bucket{server=\"a\",le=\"0.0005\"} 2\n"));
        assert!(text.contains("x_wait_seconds_bucket{server=\"a\",le=\"0.25\"} 2\n"));
        assert!(text.contains("x_wait_seconds_bucket{server=\"a\",le=\"1.0\"} 3\n"));
        assert!(text.contains("x_wait_seconds_bucket{server=\"a\",le=\"120.0\"} 3\n"));
        assert!(text.contains("x_wait_seconds_bucket{server=\"a\",le=\"+Inf\"} 4\n"));
        assert!(text.contains("x_wait_seconds_count{server=\"a\"} 4\n"));
        assert!(
            text.contains("x_wait_seconds_sum{server=\"a\"} 500.3002\n"),
            "{text}"
        );
    }
}
