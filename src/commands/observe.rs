//! `tools`, `call`, `logs` and `events`. The first two go through the supervisor's
//! session with the server; the last two read the state directory and need no
//! supervisor at all.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::client;
use super::target::Target;
use super::{CliError, Global};
use crate::cli::{CallArgs, EventsArgs, LogsArgs, ToolsArgs};
use crate::host::{self, Unnamed};
use crate::output::calls::{CallBody, CallReport};
use crate::output::exit::Code;
use crate::output::report::{Format, json_line, write_stdout};
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
    let stream = match client::connect(&t.dir, &t.fleet.file, start).await {
        Ok(s) => s,
        Err(e) => return Ok(Err(super::fleet_ops::unreachable(command, &e, g))),
    };
    match client::request(stream, op, |_| {}).await {
        Ok(doc) => Ok(Ok(doc)),
        Err(e) => super::fleet_ops::no_report(e, command, "mcpfleet: interrupted", g).map(Err),
    }
}

fn print(text: &str) -> Result<(), CliError> {
    write_stdout(text).map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}").into())
}

pub async fn logs(t: Target, args: &LogsArgs) -> Result<Code, CliError> {
    if args.gateway {
        let mut tail = Tail::new(t.dir.gateway_log(), String::new());
        print(&tail.last_lines(args.lines))?;
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
            Tail::new(
                t.dir.server_log(s),
                if prefix {
                    format!("{s} | ")
                } else {
                    String::new()
                },
            )
        })
        .collect();
    for tail in &mut tails {
        print(&tail.last_lines(args.lines))?;
    }
    if args.follow {
        follow(&mut tails).await?;
    }
    Ok(Code::Ok)
}

pub async fn events(t: Target, args: &EventsArgs) -> Result<Code, CliError> {
    let mut tail = Tail::new(t.dir.events(), String::new());
    print(&tail.last_lines(args.lines.unwrap_or(usize::MAX)))?;
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

/// A file read from where it was last read, surviving rotation (a file that got
/// shorter is read again from its start).
struct Tail {
    path: PathBuf,
    prefix: String,
    offset: u64,
    partial: String,
}

impl Tail {
    fn new(path: PathBuf, prefix: String) -> Tail {
        Tail {
            path,
            prefix,
            offset: 0,
            partial: String::new(),
        }
    }

    /// The last `n` complete lines, in bounded memory (at most 8 MiB is read).
    fn last_lines(&mut self, n: usize) -> String {
        let len = file_len(&self.path);
        let start = len.saturating_sub(8 * 1024 * 1024);
        self.offset = start;
        let text = self.read_from_offset();
        let mut lines: Vec<&str> = text.lines().collect();
        if start > 0 && !lines.is_empty() {
            lines.remove(0); // a line cut by the 8 MiB window
        }
        let skip = lines.len().saturating_sub(n);
        lines[skip..]
            .iter()
            .map(|l| format!("{}{l}\n", self.prefix))
            .collect()
    }

    fn new_lines(&mut self) -> String {
        if file_len(&self.path) < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        let text = self.read_from_offset();
        text.lines()
            .map(|l| format!("{}{l}\n", self.prefix))
            .collect()
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
