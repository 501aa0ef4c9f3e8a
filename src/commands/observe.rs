//! `tools`, `call`, `logs` and `events`. The first two go through the supervisor's
//! session with the server; the last two read the state directory and need no
//! supervisor at all.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::client;
use super::target::Target;
use super::{CliError, Global};
use crate::cli::{CallArgs, EventsArgs, LogsArgs, ToolsArgs};
use crate::host::{self, Unnamed};
use crate::lifecycle::events::rfc3339;
use crate::output::calls::{CallBody, CallReport};
use crate::output::exit::Code;
use crate::output::report::{Format, json_line, write_stdout};
use crate::process::stderr::unstamp;
use crate::protocol::{Deadlines, Op};

pub async fn tools(t: Target, args: &ToolsArgs, g: &Global) -> Result<Code, CliError> {
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
            let mut out = String::new();
            if let CallBody::Tools { servers } = &doc.body {
                for server in servers {
                    for tool in &server.tools {
                        let description = tool.description.as_deref().unwrap_or("");
                        let first = description.lines().next().unwrap_or("");
                        out.push_str(&format!(
                            "{:<16} {:<28} {}\n",
                            server.name, tool.name, first
                        ));
                    }
                }
            }
            if let Some(e) = doc.error() {
                eprintln!("mcpfleet tools: {}", e.message);
            }
            out
        }
        _ => json_line(&doc),
    };
    print(&text)?;
    Ok(Code::from_i32(doc.exit_code))
}

pub async fn call(t: Target, args: &CallArgs, g: &Global) -> Result<Code, CliError> {
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
            if let Some(e) = doc.error() {
                eprintln!("mcpfleet call: {}", e.message);
            }
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
        Err(e) => super::fleet_ops::no_report(e, command, "mcpfleet: interrupted", g).map(Err),
    }
}

fn print(text: &str) -> Result<(), CliError> {
    write_stdout(text).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into())
}

pub async fn logs(t: Target, args: &LogsArgs) -> Result<Code, CliError> {
    let since = args.since.map(|s| s.earliest(SystemTime::now()));
    let lines = args.lines.get();
    if args.gateway {
        let view = View::new(Kind::Gateway, since, false, String::new());
        let mut tail = Tail::new(t.dir.gateway_log(), view);
        print(&tail.last_lines(lines))?;
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
        print(&tail.last_lines(lines))?;
    }
    if args.follow {
        follow(&mut tails).await?;
    }
    Ok(Code::Ok)
}

pub async fn events(t: Target, args: &EventsArgs) -> Result<Code, CliError> {
    let since = args.since.map(|s| s.earliest(SystemTime::now()));
    let view = View::new(Kind::Events, since, false, String::new());
    let mut tail = Tail::new(t.dir.events(), view);
    print(&tail.last_lines(args.lines.get()))?;
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

/// A file read from where it was last read, surviving rotation (a file that got
/// shorter is read again from its start).
struct Tail {
    path: PathBuf,
    view: View,
    offset: u64,
    partial: String,
}

impl Tail {
    fn new(path: PathBuf, view: View) -> Tail {
        Tail {
            path,
            view,
            offset: 0,
            partial: String::new(),
        }
    }

    /// The last `n` complete lines that the view keeps, in bounded memory (at
    /// most 8 MiB is read).
    fn last_lines(&mut self, n: usize) -> String {
        let len = file_len(&self.path);
        let start = len.saturating_sub(8 * 1024 * 1024);
        self.offset = start;
        let text = self.read_from_offset();
        let mut lines = text.lines();
        if start > 0 {
            lines.next(); // a line cut by the 8 MiB window
        }
        let shown: Vec<String> = lines.filter_map(|l| self.view.show(l)).collect();
        let skip = shown.len().saturating_sub(n);
        shown[skip..].concat()
    }

    fn new_lines(&mut self) -> String {
        if file_len(&self.path) < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        let text = self.read_from_offset();
        text.lines().filter_map(|l| self.view.show(l)).collect()
    }

    /// Complete lines from the offset on; an unfinished last line waits for its end.
    fn read_from_offset(&mut self) -> String {
        let Ok(mut file) = File::open(&self.path) else {
            return String::new();
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return String::new();
        }
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        self.offset += bytes.len() as u64;
        let mut text = std::mem::take(&mut self.partial);
        text.push_str(&String::from_utf8_lossy(&bytes));
        match text.rfind('\n') {
            Some(i) => {
                self.partial = text[i + 1..].to_owned();
                text.truncate(i + 1);
                text
            }
            None => {
                self.partial = text;
                String::new()
            }
        }
    }
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
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
        assert_eq!(tail.last_lines(2), "line 8\nline 9\n");
        let view = View::new(Kind::Stderr, Some(t(5)), false, String::new());
        let mut tail = Tail::new(path.clone(), view);
        assert_eq!(tail.last_lines(usize::MAX).lines().count(), 5);
        let view = View::new(Kind::Stderr, None, false, String::new());
        let mut tail = Tail::new(path, view);
        assert_eq!(tail.last_lines(0), "");
    }
}
