//! `tools`, `call`, `logs` and `events`. The first two go through the supervisor's
//! session with the server; the last two read the state directory and need no
//! supervisor at all. A log and its rotated files are read as one (`chain.rs`).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::chain::Chain;
use super::client;
use super::target::Target;
use super::{CliError, Global};
use crate::cli::{CallArgs, EventsArgs, LogsArgs, ToolsArgs};
use crate::host::{self, Unnamed};
use crate::lifecycle::events::rfc3339;
use crate::output::calls::{CallBody, CallReport};
use crate::output::exit::Code;
use crate::output::report::{Format, json_line, serde_plain, write_stdout};
use crate::process::stderr::unstamp;
use crate::protocol::{Deadlines, Op};

pub(crate) async fn tools(t: Target, args: &ToolsArgs, g: &Global) -> Result<Code, CliError> {
    let op = Op::Tools {
        server: args.server.clone(),
        deadlines: Deadlines::default(),
        fleet: t.source.clone(),
    };
    let doc = match exchange(&t, op, args.server.is_some(), "tools", g).await? {
        Ok(doc) => doc,
        Err(code) => return Ok(code),
    };
    let text = match g.output {
        Format::Text => {
            let out = match &doc.body {
                CallBody::Tools { servers } => tools_table(servers),
                _ => String::new(),
            };
            say_failure("tools", &doc);
            out
        }
        _ => json_line(&doc),
    };
    print(&text)?;
    Ok(Code::from_i32(doc.exit_code))
}

/// The tools of `servers` as a table: a header, a row per tool, the first line
/// of its description.
fn tools_table(servers: &[crate::output::calls::ServerTools]) -> String {
    let mut rows = vec![[
        "SERVER".to_owned(),
        "TOOL".to_owned(),
        "DESCRIPTION".to_owned(),
    ]];
    for server in servers {
        for tool in &server.tools {
            let description = tool.description.as_deref().unwrap_or("");
            rows.push([
                server.name.clone(),
                tool.name.clone(),
                description.lines().next().unwrap_or("").to_owned(),
            ]);
        }
    }
    crate::output::table::render(&rows)
}

pub(crate) async fn call(t: Target, args: &CallArgs, g: &Global) -> Result<Code, CliError> {
    let arguments = match &args.arguments {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Some(map),
            Ok(_) => {
                return Err(CliError::Usage(
                    "--args must be a JSON object, e.g. '{\"path\": \".\"}'".into(),
                ));
            }
            Err(e) => return Err(CliError::Usage(format!("--args is not valid JSON: {e}"))),
        },
    };
    let op = Op::Call {
        server: args.server.clone(),
        tool: args.tool.clone(),
        arguments,
        timeout_ms: args
            .timeout
            .map(|t| t.as_duration().map_or(u64::MAX, |d| d.as_millis() as u64)),
        deadlines: Deadlines::default(),
        fleet: t.source.clone(),
    };
    let doc = match exchange(&t, op, true, "call", g).await? {
        Ok(doc) => doc,
        Err(code) => return Ok(code),
    };
    let text = match g.output {
        Format::Text => {
            say_failure("call", &doc);
            let mut out = String::new();
            if let CallBody::Result { result, .. } = &doc.body {
                // The tool's result is the server's MCP answer: its text blocks
                // as they are, any other block as JSON.
                for block in result["content"].as_array().into_iter().flatten() {
                    match block["text"].as_str() {
                        Some(text) => out.push_str(text),
                        None => out.push_str(&block.to_string()),
                    }
                    out.push('\n');
                }
            }
            out
        }
        _ => json_line(&doc),
    };
    print(&text)?;
    Ok(Code::from_i32(doc.exit_code))
}

/// Says on stderr why a `tools` or `call` failed, when it did: the error on the
/// server's session, or the start that did not succeed (each server's state,
/// error and last stderr lines), so that the text output of a failure is never
/// silent (docs/design.md §6).
fn say_failure(command: &str, doc: &CallReport) {
    let text = failure_text(command, doc);
    if !text.is_empty() {
        eprint!("{text}");
    }
}

fn failure_text(command: &str, doc: &CallReport) -> String {
    let mut out = String::new();
    match &doc.body {
        CallBody::Failed { error, .. } => {
            out.push_str(&format!("mcpfleet {command}: {}\n", error.message));
        }
        CallBody::NotStarted { servers } => {
            for s in servers {
                out.push_str(&format!(
                    "mcpfleet {command}: `{}` did not start: it is {}",
                    s.name,
                    s.state.as_str()
                ));
                match &s.error {
                    Some(e) => out.push_str(&format!(
                        ", error [{}] {}: {}\n",
                        serde_plain(&e.kind),
                        serde_plain(&e.phase),
                        e.message
                    )),
                    None => out.push_str(&format!(" (exit {})\n", s.exit_code)),
                }
                if let Some(e) = &s.error {
                    for line in &e.stderr_tail {
                        out.push_str(&format!("  | {line}\n"));
                    }
                }
            }
        }
        CallBody::Tools { .. } | CallBody::Result { .. } => {}
    }
    out
}

/// Sends `op`; `Err(code)` when the supervisor could not be reached or the
/// caller was interrupted (already reported on stderr).
async fn exchange(
    t: &Target,
    op: Op,
    start: bool,
    command: &str,
    g: &Global,
) -> Result<Result<CallReport, Code>, CliError> {
    match client::ask(&t.dir, &t.fleet.file, start, op, |_| {}).await {
        Ok(doc) => Ok(Ok(doc)),
        Err(e) => super::request::no_report(e, command, "mcpfleet: interrupted", g).map(Err),
    }
}

fn print(text: &str) -> Result<(), CliError> {
    write_stdout(text).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into())
}

pub(crate) async fn logs(t: Target, args: &LogsArgs) -> Result<Code, CliError> {
    let since = args.since.map(|s| s.earliest(SystemTime::now()));
    let lines = args.lines.get();
    if args.gateway {
        let view = View::new(Kind::Gateway, since, false, String::new());
        let mut tail = Tail::new(t.dir.gateway_log(), view);
        tail.last_lines(lines, &mut print)?;
        if args.follow {
            follow(std::slice::from_mut(&mut tail)).await?;
        }
        return Ok(Code::Ok);
    }
    let named: Vec<String> = args.server.iter().cloned().collect();
    let servers: Vec<String> = host::select(&t.fleet, &named, Unnamed::All)
        .map_err(|e| CliError::Usage(e.to_string()))?
        .into_iter()
        .map(|s| s.name.clone())
        .collect();
    let prefix = servers.len() > 1;
    let mut tails: Vec<Tail> = servers
        .iter()
        .map(|s| {
            let prefix = if prefix {
                format!("{s} | ")
            } else {
                String::new()
            };
            let view = View::new(Kind::Stderr, since, args.timestamps, prefix);
            Tail::new(t.dir.server_log(s), view)
        })
        .collect();
    for tail in &mut tails {
        tail.last_lines(lines, &mut print)?;
    }
    if args.follow {
        follow(&mut tails).await?;
    }
    Ok(Code::Ok)
}

pub(crate) async fn events(t: Target, args: &EventsArgs) -> Result<Code, CliError> {
    let since = args.since.map(|s| s.earliest(SystemTime::now()));
    let view = View::new(Kind::Events, since, false, String::new());
    let mut tail = Tail::new(t.dir.events(), view);
    tail.last_lines(args.lines.get(), &mut print)?;
    if args.follow {
        follow(std::slice::from_mut(&mut tail)).await?;
    }
    Ok(Code::Ok)
}

/// Polls the files for new lines until interrupted.
async fn follow(tails: &mut [Tail]) -> Result<(), CliError> {
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        for tail in tails.iter_mut() {
            print(&tail.new_lines())?;
            tail.notice_missed();
        }
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// Which file a [`View`] reads: where each line's time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A server's stderr log: `TIME<TAB>LINE` (`process::stderr::Stamper`); the
    /// time is shown only with `--timestamps`.
    Stderr,
    /// The gateway's log: `TIME LINE`, shown as written.
    Gateway,
    /// The event log: JSON lines with a `time` field, shown as written.
    Events,
}

/// How the lines of one file are shown: which are kept (`--since`), with or
/// without their time, behind which prefix.
struct View {
    kind: Kind,
    since: Option<SystemTime>,
    timestamps: bool,
    prefix: String,
    /// Whether the last line with a time was kept: a line without one (written
    /// by an earlier version, or cut by the log's rotation) goes with it.
    keeping: bool,
}

impl View {
    fn new(kind: Kind, since: Option<SystemTime>, timestamps: bool, prefix: String) -> View {
        View {
            kind,
            since,
            timestamps,
            prefix,
            keeping: since.is_none(),
        }
    }

    /// `line` as shown, or `None` when `--since` leaves it out.
    fn show(&mut self, line: &str) -> Option<String> {
        let (time, text) = match self.kind {
            Kind::Stderr => unstamp(line),
            Kind::Gateway if self.since.is_some() => (leading_time(line), line),
            Kind::Events if self.since.is_some() => (event_time(line), line),
            Kind::Gateway | Kind::Events => (None, line),
        };
        if let Some(since) = self.since {
            if let Some(time) = time {
                self.keeping = time >= since;
            }
            if !self.keeping {
                return None;
            }
        }
        let prefix = &self.prefix;
        Some(match time {
            Some(time) if self.kind == Kind::Stderr && self.timestamps => {
                format!("{prefix}{} {text}\n", rfc3339(time))
            }
            _ => format!("{prefix}{text}\n"),
        })
    }
}

/// The time a line of the gateway's log begins with (`Journal::line`).
fn leading_time(line: &str) -> Option<SystemTime> {
    let (time, _) = line.split_once(' ')?;
    humantime::parse_rfc3339_weak(time).ok()
}

/// The `time` of an event line.
fn event_time(line: &str) -> Option<SystemTime> {
    #[derive(serde::Deserialize)]
    struct Timed<'a> {
        #[serde(borrow)]
        time: Option<std::borrow::Cow<'a, str>>,
    }
    let timed: Timed = serde_json::from_str(line).ok()?;
    humantime::parse_rfc3339_weak(&timed.time?).ok()
}

/// A log read as its lines, through its [`View`]: first what its files hold,
/// then what is written to them, across rotations (`chain.rs`).
struct Tail {
    chain: Chain,
    lines: Lines,
}

/// How much of the end of a log `-n N` looks at for its last N lines.
const TAIL_WINDOW: u64 = 8 * 1024 * 1024;

impl Tail {
    fn new(path: PathBuf, view: View) -> Tail {
        Tail {
            chain: Chain::new(path),
            lines: Lines {
                view,
                partial: Vec::new(),
            },
        }
    }

    /// Hands `out` the last `n` complete lines that the view keeps. All of
    /// them (`n` is `usize::MAX`) are streamed from the oldest rotated file on,
    /// in bounded memory; a count looks at most at the last 8 MiB of the log.
    fn last_lines(
        &mut self,
        n: usize,
        out: &mut dyn FnMut(&str) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let lines = &mut self.lines;
        if n == usize::MAX {
            let mut failed = None;
            let _ = self.chain.read_existing(None, &mut |bytes| {
                out(&lines.take(bytes).concat()).map_err(|e| {
                    failed = Some(e);
                    std::io::Error::other("cannot write to stdout")
                })
            });
            return failed.map_or(Ok(()), Err);
        }
        let mut bytes = Vec::new();
        let cut = self
            .chain
            .read_existing(Some(TAIL_WINDOW), &mut |b| {
                bytes.extend_from_slice(b);
                Ok(())
            })
            .unwrap_or(false);
        // The first line of the window may be the end of a longer one.
        let start = match cut {
            true => bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |i| i + 1),
            false => 0,
        };
        let shown = lines.take(&bytes[start..]);
        let skip = shown.len().saturating_sub(n);
        out(&shown[skip..].concat())
    }

    /// The lines written since the last read, as shown.
    fn new_lines(&mut self) -> String {
        let mut bytes = Vec::new();
        let _ = self.chain.read_new(&mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        });
        self.lines.take(&bytes).concat()
    }

    /// Says on stderr that lines were rotated away before they were read.
    fn notice_missed(&mut self) {
        if self.chain.take_missed() {
            eprintln!(
                "mcpfleet: some lines were rotated away before they could be read (the log rotates faster than it is read)"
            );
        }
    }
}

/// Bytes of a log turned into lines as its view shows them.
struct Lines {
    view: View,
    /// The bytes of a line whose end has not been read yet.
    partial: Vec<u8>,
}

impl Lines {
    /// The lines `bytes` completes, each as the view shows it (or not at all);
    /// an unfinished last line waits for its end.
    fn take(&mut self, bytes: &[u8]) -> Vec<String> {
        self.partial.extend_from_slice(bytes);
        let Some(last) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        complete[..last]
            .split(|b| *b == b'\n')
            .filter_map(|line| {
                let line = String::from_utf8_lossy(line);
                self.view.show(line.strip_suffix('\r').unwrap_or(&line))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_795_941_700 + secs)
    }

    fn shown(view: &mut View, lines: &[&str]) -> String {
        lines.iter().filter_map(|l| view.show(l)).collect()
    }

    #[test]
    fn a_server_log_is_shown_without_its_times_unless_asked() {
        let log = [
            "old line of an earlier version",
            "2026-11-29T08:41:40.000Z\tfirst",
            "2026-11-29T08:41:50.000Z\tsecond",
            "rest of a line cut by rotation",
            "2026-11-29T08:42:00.500Z\tthird",
        ];
        let mut plain = View::new(Kind::Stderr, None, false, String::new());
        assert_eq!(
            shown(&mut plain, &log),
            "old line of an earlier version\nfirst\nsecond\nrest of a line cut by rotation\nthird\n"
        );
        let mut timed = View::new(Kind::Stderr, None, true, "a | ".into());
        assert_eq!(
            shown(&mut timed, &log[1..3]),
            "a | 2026-11-29T08:41:40.000Z first\na | 2026-11-29T08:41:50.000Z second\n"
        );
        // --since: from the first line at or after the time; a line without a
        // time goes with the one before it.
        let mut since = View::new(Kind::Stderr, Some(t(10)), false, String::new());
        assert_eq!(
            shown(&mut since, &log),
            "second\nrest of a line cut by rotation\nthird\n"
        );
        let mut none = View::new(Kind::Stderr, Some(t(61)), false, String::new());
        assert_eq!(shown(&mut none, &log), "");
    }

    #[test]
    fn gateway_and_event_lines_are_shown_as_written() {
        let gateway = [
            "2026-11-29T08:41:40.000Z session 1 opened (stdio)",
            "2026-11-29T08:41:50.000Z session 1 closed",
        ];
        let mut all = View::new(Kind::Gateway, None, true, String::new());
        assert_eq!(
            shown(&mut all, &gateway),
            format!("{}\n{}\n", gateway[0], gateway[1])
        );
        let mut since = View::new(Kind::Gateway, Some(t(5)), false, String::new());
        assert_eq!(shown(&mut since, &gateway), format!("{}\n", gateway[1]));

        let events = [
            r#"{"time":"2026-11-29T08:41:40.000Z","server":"a","from":"stopped","to":"starting"}"#,
            r#"{"time":"2026-11-29T08:41:50.000Z","gateway":"session-opened","session":1}"#,
        ];
        let mut since = View::new(Kind::Events, Some(t(5)), false, String::new());
        assert_eq!(shown(&mut since, &events), format!("{}\n", events[1]));
        let mut all = View::new(Kind::Events, None, false, String::new());
        assert_eq!(shown(&mut all, &events).lines().count(), 2);
    }

    /// What `last_lines` prints.
    fn last(tail: &mut Tail, n: usize) -> String {
        let mut text = String::new();
        tail.last_lines(n, &mut |s| {
            text.push_str(s);
            Ok(())
        })
        .unwrap();
        text
    }

    #[test]
    fn the_last_lines_are_counted_after_since() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let mut log = String::new();
        for i in 0..10 {
            log.push_str(&format!("2026-11-29T08:41:{:02}.000Z\tline {i}\n", 40 + i));
        }
        std::fs::write(&path, &log).unwrap();
        let view = View::new(Kind::Stderr, Some(t(5)), false, String::new());
        let mut tail = Tail::new(path.clone(), view);
        assert_eq!(last(&mut tail, 2), "line 8\nline 9\n");
        let view = View::new(Kind::Stderr, Some(t(5)), false, String::new());
        let mut tail = Tail::new(path.clone(), view);
        assert_eq!(last(&mut tail, usize::MAX).lines().count(), 5);
        let view = View::new(Kind::Stderr, None, false, String::new());
        let mut tail = Tail::new(path, view);
        assert_eq!(last(&mut tail, 0), "");
    }

    #[test]
    fn a_log_is_read_with_its_rotated_files_and_followed_across_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let line = |i: u32| format!("2026-11-29T08:41:{:02}.000Z\tline {i}\n", 40 + i);
        // A server's log is rotated by chunks: a line may be cut in two.
        let old: String = (0..4).map(line).collect();
        let (head, tail_of_3) = old.split_at(old.len() - 4);
        std::fs::write(dir.path().join("s.log.1"), head).unwrap();
        std::fs::write(&path, tail_of_3).unwrap();
        let plain = || View::new(Kind::Stderr, None, false, String::new());
        let mut all = Tail::new(path.clone(), plain());
        assert_eq!(
            last(&mut all, usize::MAX),
            "line 0\nline 1\nline 2\nline 3\n"
        );
        let mut two = Tail::new(path.clone(), plain());
        assert_eq!(last(&mut two, 2), "line 2\nline 3\n");
        let since = View::new(Kind::Stderr, Some(t(2)), false, String::new());
        let mut since = Tail::new(path.clone(), since);
        assert_eq!(last(&mut since, usize::MAX), "line 2\nline 3\n");

        // Followed: a line, then a rotation with a line after it, then one more.
        let append = |text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        append(&line(4));
        crate::state::rotation::rotate(&path, 1).unwrap();
        append(&line(5));
        assert_eq!(all.new_lines(), "line 4\nline 5\n");
        append(&line(6));
        assert_eq!(all.new_lines(), "line 6\n");
        assert_eq!(all.new_lines(), "");
    }
}
