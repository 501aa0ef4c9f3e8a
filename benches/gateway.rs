//! The gateway (`mcpfleet connect`, `mcpfleet serve`; docs/design.md §14) beside
//! the limit and beside mcp-hub, in one run on the same machine. Prints tables and
//! the targets with a PASS/MISS mark computed from the same run; asserts nothing
//! about time (this machine is shared and noisy).
//!
//! ```text
//! cargo bench --bench gateway
//! cargo bench --bench gateway -- --calls 500 --servers 10,50 --skip-hub
//! ```
//!
//! Options: `--calls N` (round trips per measurement, default 2000), `--servers
//! A,B` (fleet sizes for `tools/list`, default 10,200), `--sessions N` (client
//! sessions opened to measure memory per session, default 20), `--cold N` (cold
//! starts, default 5), `--skip-hub` (leave mcp-hub out), `--calls-only` (the round
//! trips alone: no sessions, lists or cold starts).
//!
//! Paths of a `tools/call` round trip to the fixture server's `echo`:
//! - **direct** (the limit): an rmcp client over stdio to the fixture process;
//! - **connect**: the same client over the stdio of `mcpfleet connect`;
//! - **serve**: rmcp's streamable HTTP client at `serve`'s `/mcp`, with the token,
//!   in each protocol era: a legacy session (`initialize`, row `mcpfleet serve`)
//!   and stateless 2026-07-28 requests (`server/discover` first, row `serve
//!   2026-07-28`); the targets of `serve` are read in the cheaper era;
//! - **mcp-hub**: the npm package `mcp-hub` (pinned, installed on first use into
//!   `.cache/bench/mcp-hub`) aggregating the same fixture server; its `/mcp` is
//!   the legacy HTTP+SSE transport, spoken by a small transport written here for
//!   the same rmcp client;
//! - **supervisor socket**, to tell the gateway's cost from the `connect`
//!   process's: the client speaks MCP on the supervisor's control socket itself,
//!   after the `gateway` request that `connect` sends.
//!
//! Beside each path: the CPU time and context switches per call of each of its
//! processes, and the memory of the gateway process (before, with one session,
//! after the calls, and per session over many sessions on a fresh gateway). Then
//! `tools/list` of large fleets, and the cold start of `connect` beside the
//! server's own start. CONTRIBUTING.md ("The gateway" under "Benchmarks") shows a run.
//!
//! Every process the benchmark starts carries `MCPFLEET_TEST_ID=<tag>`; guards tear
//! each fleet down (`down`, then the supervisor), stop mcp-hub's process group and
//! remove the temporary directories, also when a step fails, and a last sweep kills
//! whatever still carries the tag (and says so).

#[path = "common.rs"]
mod common;

use std::future::Future;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientJsonRpcMessage, ClientRequest, Implementation,
    InitializeRequestParams, ListToolsRequest, PaginatedRequestParams, ProtocolVersion,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, ServiceExt};

use common::{ms, tagged};

/// The mcp-hub release compared against.
const HUB_VERSION: &str = "4.2.1";

/// The fixture server's cheapest tool: it returns its arguments.
const TOOL: &str = "echo";

/// How many calls warm a path up before it is measured.
const WARM_UP: usize = 200;

/// The bound of any one measurement: nothing waits longer.
const STEP_LIMIT: Duration = Duration::from_secs(120);

struct Args {
    calls: usize,
    /// Rounds of the interleaved throughput measurement, and calls in each.
    rounds: usize,
    round_calls: usize,
    /// Only the round trips (`--calls-only`): no lists, cold starts or sessions.
    calls_only: bool,
    hub: bool,
    lists: Vec<usize>,
    sessions: usize,
    cold: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        calls: 2000,
        rounds: 7,
        round_calls: 20000,
        calls_only: false,
        hub: true,
        lists: vec![10, 200],
        sessions: 20,
        cold: 5,
    };
    let mut it = std::env::args().skip(1);
    let number = |v: Option<String>, default: usize| {
        v.and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(default)
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--calls" => args.calls = number(it.next(), args.calls),
            "--rounds" => args.rounds = number(it.next(), args.rounds),
            "--round-calls" => args.round_calls = number(it.next(), args.round_calls),
            "--sessions" => args.sessions = number(it.next(), args.sessions),
            "--cold" => args.cold = number(it.next(), args.cold),
            "--skip-hub" => args.hub = false,
            "--calls-only" => args.calls_only = true,
            "--servers" => {
                args.lists = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|n| n.trim().parse().ok())
                    .filter(|n| *n > 0)
                    .collect();
            }
            // `cargo bench` passes --bench to every target.
            _ => {}
        }
    }
    args
}

fn main() {
    // Run as the byte relay of the floor's path (see `relay_trips`).
    if let Some(server) = std::env::var_os(RELAY_ENV) {
        byte_relay(Path::new(&server));
        return;
    }
    let args = parse_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    mcpfleet::process::limits::raise_open_files();
    let fixture = common::release_fixture();
    let scratch = Scratch::new();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    // Load the binary once, so that no measurement pays for a cold page cache.
    let _ = Command::new(mcpfleet_bin()).arg("--version").output();
    println!(
        "gateway benchmark: {} cores, {} calls per measurement (after {WARM_UP} warm-up calls), mcp-hub {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.calls,
        if args.hub {
            HUB_VERSION.to_string()
        } else {
            "skipped (--skip-hub)".into()
        }
    );
    let hub = if args.hub {
        match hub_program(root) {
            Ok(cli) => Some(cli),
            Err(e) => {
                println!("mcp-hub: not installed, left out: {e}");
                None
            }
        }
    } else {
        None
    };
    let ctx = Ctx {
        fixture,
        hub,
        scratch: &scratch,
        args: &args,
    };

    let mut figures = Figures::default();
    // Ctrl-C or SIGTERM drops the run, and with it every guard of what it started.
    let finished = rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = run(&ctx, &mut figures) => true,
            _ = tokio::signal::ctrl_c() => false,
            _ = term.recv() => false,
        }
    });
    if finished {
        print_targets(&figures);
    } else {
        println!("interrupted: tearing down what the benchmark started");
    }
}

async fn run(ctx: &Ctx<'_>, figures: &mut Figures) {
    round_trips(ctx, figures).await;
    if ctx.args.calls_only {
        return;
    }
    lists(ctx, figures).await;
    cold_start(ctx, figures).await;
}

/// What every part of the run shares.
struct Ctx<'a> {
    fixture: PathBuf,
    /// mcp-hub's `cli.js`, when it is installed.
    hub: Option<PathBuf>,
    scratch: &'a Scratch,
    args: &'a Args,
}

/// The figures the targets are computed from.
#[derive(Default)]
struct Figures {
    direct: [Option<Trips>; 2],
    relay: [Option<Trips>; 2],
    connect: [Option<Trips>; 2],
    /// Through `serve` in each era: a legacy session (`initialize`), and
    /// stateless 2026-07-28 requests (`server/discover`, then `_meta`).
    serve: [Option<Trips>; 2],
    serve_modern: [Option<Trips>; 2],
    /// Through `serve` in the 2026-07-28 era on a host of a fleet across
    /// hosts (etcd), its server local (a build with `--features etcd`).
    #[cfg_attr(
        not(feature = "etcd"),
        expect(dead_code, reason = "measured only in a build with --features etcd")
    )]
    serve_across_hosts: [Option<Trips>; 2],
    /// The same call through another host's gateway, which relays it to the
    /// host that runs the server: one gateway hop more.
    #[cfg_attr(
        not(feature = "etcd"),
        expect(dead_code, reason = "measured only in a build with --features etcd")
    )]
    serve_relayed: [Option<Trips>; 2],
    /// The gateway's CPU per call at 16 in flight through `serve`, in µs: in
    /// the legacy era and in the 2026-07-28 era.
    serve_cpu_us: [Option<f64>; 2],
    /// `connect`'s calls per second at 16 in flight as a share of the byte
    /// relay's in the same round, over the interleaved rounds.
    connect_vs_relay: Option<Spread>,
    per_session_serve_kb: Option<f64>,
    /// The `connect` row's memory, with its growth per session.
    connect_session: Option<Memory>,
    /// tools/list p50 through `connect`, by fleet size.
    list_connect: Vec<(usize, f64)>,
    cold_connect: Option<f64>,
    cold_direct: Option<f64>,
    /// Throughput at 16 in flight from the interleaved rounds: each path's
    /// median share of the same round's direct calls per second, and its
    /// median calls per second.
    rounds: Vec<RoundPath>,
}

/// The median of a path's per-round figures, and their least and greatest.
#[derive(Clone, Copy)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        Some(Spread {
            median: *v.get(v.len() / 2)?,
            min: *v.first()?,
            max: *v.last()?,
        })
    }
}

// ---------------------------------------------------------------------------
// 1. tools/call round trips, the CPU they cost, and memory
// ---------------------------------------------------------------------------

/// p50 and p99 of one measurement, in ms, and its throughput.
#[derive(Clone, Copy)]
struct Trips {
    p50: f64,
    p99: f64,
    per_sec: f64,
    failed: usize,
}

/// What the processes of a path spent per call at 16 in flight: CPU time (user
/// and system) in µs by role, and context switches of all their threads.
#[derive(Clone, Default)]
struct CpuUse {
    per_role_us: Vec<(&'static str, f64)>,
    switches: f64,
}

/// The processes of a path, by role: `client` (this benchmark), `bridge`
/// (`connect`), `gateway` (the supervisor, or mcp-hub's node), `server`.
type Roles = Vec<(&'static str, i32)>;

/// Both measurements (1 and 16 in flight), and the CPU of the second.
struct Measured {
    trips: [Result<Trips, String>; 2],
    cpu: Option<CpuUse>,
}

/// Memory of the process a path's client talks to, VmRSS in kB.
#[derive(Default, Clone)]
struct Memory {
    before: Option<u64>,
    session: Option<u64>,
    after: Option<u64>,
    /// Growth per session over `--sessions` sessions on a fresh gateway.
    per_session: Option<f64>,
    /// What each `connect` process holds itself (RssAnon).
    bridge_anon: Option<u64>,
    note: String,
}

/// What opening sessions on a fresh gateway cost.
struct Sessions {
    /// The gateway process's growth per session, kB.
    per_session: f64,
    bridge_anon: Option<u64>,
    note: String,
}

struct PathRow {
    name: &'static str,
    measured: Measured,
    memory: Option<Memory>,
}

const IN_FLIGHT: [usize; 2] = [1, 16];

async fn round_trips(ctx: &Ctx<'_>, figures: &mut Figures) {
    let calls = ctx.args.calls;
    let mut rows = Vec::new();

    // The limit: the fixture server spoken to directly.
    let row = direct_trips(ctx)
        .await
        .unwrap_or_else(|e| failed_row("direct (limit)", e));
    figures.direct = trips_of(&row);
    rows.push(row);

    // The floor of any gateway that is a process between client and server.
    let row = relay_trips(ctx)
        .await
        .unwrap_or_else(|e| failed_row("byte relay (floor)", e));
    figures.relay = trips_of(&row);
    rows.push(row);

    // One fleet with the fixture server, for both doors.
    let fleet = Fleet::new(ctx, "calls", &["fx".to_string()]);
    match fleet.json(&["up"]) {
        Err(e) => {
            for name in ["supervisor socket", "mcpfleet connect", "mcpfleet serve"] {
                rows.push(failed_row(name, format!("up failed: {e}")));
            }
        }
        Ok(_) => {
            let row = socket_trips(ctx, &fleet)
                .await
                .unwrap_or_else(|e| failed_row("supervisor socket", e));
            rows.push(row);
            let row = connect_trips(ctx, &fleet)
                .await
                .unwrap_or_else(|e| failed_row("mcpfleet connect", e));
            figures.connect = trips_of(&row);
            rows.push(row);
            for era in [Era::Legacy, Era::Modern] {
                let row = serve_trips(ctx, &fleet, era)
                    .await
                    .unwrap_or_else(|e| failed_row(era.row(), e));
                figures.serve_cpu_us[era as usize] = gateway_cpu(&row);
                match era {
                    Era::Legacy => figures.serve = trips_of(&row),
                    Era::Modern => figures.serve_modern = trips_of(&row),
                }
                rows.push(row);
            }
            // The same call, on a host of a fleet across hosts (etcd): the
            // server is local, so nothing of etcd is on the call's path.
            #[cfg(feature = "etcd")]
            match across_hosts_trips(ctx).await {
                Ok((row, relayed)) => {
                    figures.serve_across_hosts = trips_of(&row);
                    rows.push(row);
                    match relayed {
                        Ok(relayed) => {
                            figures.serve_relayed = trips_of(&relayed);
                            rows.push(relayed);
                        }
                        Err(e) => rows.push(failed_row("serve, relayed to another host", e)),
                    }
                }
                Err(e) => rows.push(failed_row("serve, across hosts", e)),
            }
            match interleaved(ctx, &fleet).await {
                Ok((rounds, vs_relay)) => {
                    figures.rounds = rounds;
                    figures.connect_vs_relay = vs_relay;
                }
                Err(e) => println!("interleaved rounds: not measured: {e}"),
            }
        }
    }
    drop(fleet);

    let mut hub_note = None;
    match &ctx.hub {
        None if ctx.args.hub => hub_note = Some("mcp-hub: not installed, left out".to_string()),
        None => {}
        Some(cli) => match hub_trips(ctx, cli).await {
            Ok(row) => rows.push(row),
            Err(e) => hub_note = Some(format!("mcp-hub: could not serve, left out: {e}")),
        },
    }

    // Memory per session, each door on a fresh gateway.
    let n = ctx.args.sessions;
    for row in rows.iter_mut().filter(|_| !ctx.args.calls_only) {
        let per_session = match row.name {
            "mcpfleet connect" => connect_sessions(ctx, n).await,
            "mcpfleet serve" => serve_sessions(ctx, n).await,
            "mcp-hub" => match &ctx.hub {
                Some(cli) => hub_sessions(ctx, cli, n).await,
                None => continue,
            },
            _ => continue,
        };
        let Some(memory) = row.memory.as_mut() else {
            continue;
        };
        match per_session {
            Ok(sessions) => {
                memory.per_session = Some(sessions.per_session);
                memory.bridge_anon = sessions.bridge_anon;
                memory.note = sessions.note;
            }
            Err(e) => memory.note = format!("sessions not measured: {e}"),
        }
        match row.name {
            "mcpfleet connect" => figures.connect_session = Some(memory.clone()),
            "mcpfleet serve" => figures.per_session_serve_kb = memory.per_session,
            _ => {}
        }
    }

    println!();
    println!(
        "tools/call round trip (fixture `{TOOL}`), {calls} calls per line, same machine, same run"
    );
    println!(
        "  {:<18} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "path", "in flight", "p50", "p99", "calls/s", "+p50", "calls/s"
    );
    println!(
        "  {:<18} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "", "", "", "", "", "vs direct", "vs direct"
    );
    for row in &rows {
        for (k, trips) in row.measured.trips.iter().enumerate() {
            let base = figures.direct[k];
            match trips {
                Ok(t) => println!(
                    "  {:<18} {:>9} {:>7.3}ms {:>7.3}ms {:>10.0} {:>10} {:>9}{}",
                    row.name,
                    IN_FLIGHT[k],
                    t.p50,
                    t.p99,
                    t.per_sec,
                    base.map_or("-".into(), |b| format!("{:+.3}ms", t.p50 - b.p50)),
                    base.map_or("-".into(), |b| format!(
                        "{:.0}%",
                        100.0 * t.per_sec / b.per_sec
                    )),
                    if t.failed > 0 {
                        format!("  ({} calls failed)", t.failed)
                    } else {
                        String::new()
                    }
                ),
                Err(e) => println!("  {:<18} {:>9}  not measured: {e}", row.name, IN_FLIGHT[k]),
            }
        }
    }
    println!(
        "  (supervisor socket: a client speaking MCP on the supervisor's control socket itself, as `connect`"
    );
    println!("   does for its client: the gateway without the `connect` process)");
    if let Some(note) = &hub_note {
        println!("  {note}");
    }

    println!();
    println!(
        "CPU per call at 16 in flight (user + system time over the {calls} calls, µs per call), context switches per call"
    );
    let roles = ["client", "bridge", "gateway", "server"];
    print!("  {:<18}", "path");
    for role in roles {
        print!(" {role:>8}");
    }
    println!(" {:>8} {:>9}", "total", "switches");
    for row in &rows {
        let Some(cpu) = &row.measured.cpu else {
            continue;
        };
        print!("  {:<18}", row.name);
        for role in roles {
            match cpu.per_role_us.iter().find(|(r, _)| *r == role) {
                Some((_, us)) => print!(" {us:>8.1}"),
                None => print!(" {:>8}", "-"),
            }
        }
        let total: f64 = cpu.per_role_us.iter().map(|(_, us)| us).sum();
        println!(" {total:>8.1} {:>9.1}", cpu.switches);
    }
    println!(
        "  (on 2 cores, calls/s can be at most 2 s / total CPU per call; `client` is this benchmark's rmcp client)"
    );

    if !figures.rounds.is_empty() {
        println!();
        println!(
            "throughput at 16 in flight, interleaved: {} rounds of {} calls, the paths taken in turn in each round",
            ctx.args.rounds, ctx.args.round_calls
        );
        println!(
            "  (each round's calls/s as a share of the same round's direct; the median of the rounds, their least and greatest)"
        );
        println!(
            "  {:<18} {:>10} {:>9} {:>15}",
            "path", "calls/s", "vs direct", "least-greatest"
        );
        for (name, spread, per_sec) in &figures.rounds {
            println!(
                "  {:<18} {:>10.0} {:>8.0}% {:>14}",
                name,
                per_sec,
                spread.median * 100.0,
                format!("{:.0}-{:.0}%", spread.min * 100.0, spread.max * 100.0)
            );
        }
    }

    println!();
    println!(
        "memory of the gateway process (VmRSS): before its client session, with it open, after the calls;"
    );
    println!(
        "and the growth per session over {n} sessions opened on a fresh gateway (each initialized and listed once)"
    );
    println!(
        "  {:<18} {:<20} {:>9} {:>9} {:>9} {:>12}",
        "path", "process", "before", "1 session", "after", "per session"
    );
    for row in &rows {
        let Some(m) = &row.memory else { continue };
        let process = match row.name {
            "mcp-hub" => "mcp-hub (node)",
            _ => "mcpfleet supervisor",
        };
        println!(
            "  {:<18} {:<20} {:>9} {:>9} {:>9} {:>12}  {}",
            row.name,
            process,
            mb(m.before),
            mb(m.session),
            mb(m.after),
            m.per_session
                .map_or("-".into(), |kb| format!("{:+.2}MB", kb / 1024.0)),
            m.note
        );
    }
}

fn trips_of(row: &PathRow) -> [Option<Trips>; 2] {
    [
        row.measured.trips[0].clone().ok(),
        row.measured.trips[1].clone().ok(),
    ]
}

fn failed_row(name: &'static str, e: String) -> PathRow {
    PathRow {
        name,
        measured: Measured {
            trips: [Err(e.clone()), Err(e)],
            cpu: None,
        },
        memory: None,
    }
}

/// Both measurements (1 and 16 in flight) on one client, after a warm-up; the
/// CPU of `roles` is taken over the second (none when a process of them cannot
/// be read).
async fn measure(peer: &Peer<RoleClient>, tool: &str, calls: usize, roles: &Roles) -> Measured {
    if let Err(e) = bounded(trips(peer, tool, WARM_UP, 4)).await {
        return Measured {
            trips: [Err(e.clone()), Err(e)],
            cpu: None,
        };
    }
    let one = bounded(trips(peer, tool, calls, IN_FLIGHT[0])).await;
    let before: Vec<_> = roles.iter().map(|(_, pid)| cpu_of(*pid)).collect();
    let many = bounded(trips(peer, tool, calls, IN_FLIGHT[1])).await;
    let after: Vec<_> = roles.iter().map(|(_, pid)| cpu_of(*pid)).collect();
    let mut cpu = CpuUse::default();
    for (((role, _), b), a) in roles.iter().zip(&before).zip(&after) {
        if let (Some(b), Some(a)) = (b, a) {
            let us = a.0.saturating_sub(b.0) as f64 * 1e6 / clock_ticks() as f64 / calls as f64;
            cpu.per_role_us.push((role, us));
            // A thread that ended takes its switches with it: never below zero.
            cpu.switches += a.1.saturating_sub(b.1) as f64 / calls as f64;
        }
    }
    Measured {
        trips: [one, many],
        cpu: (cpu.per_role_us.len() == roles.len()).then_some(cpu),
    }
}

/// `calls` calls of `tool`, `in_flight` at a time.
async fn trips(peer: &Peer<RoleClient>, tool: &str, calls: usize, in_flight: usize) -> Trips {
    let next = Arc::new(AtomicUsize::new(0));
    let mut arguments = serde_json::Map::new();
    arguments.insert("n".into(), 1.into());
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..in_flight.max(1) {
        let (peer, next, params) = (peer.clone(), next.clone(), params.clone());
        workers.spawn(async move {
            let mut times = Vec::new();
            let mut failed = 0;
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let t = Instant::now();
                let answer = peer.call_tool(params.clone()).await;
                times.push(t.elapsed());
                if !matches!(answer, Ok(r) if r.is_error != Some(true)) {
                    failed += 1;
                }
            }
            (times, failed)
        });
    }
    let mut times = Vec::with_capacity(calls);
    let mut failed = 0;
    while let Some(done) = workers.join_next().await {
        let (t, f) = done.expect("a call worker panicked");
        times.extend(t);
        failed += f;
    }
    let wall = start.elapsed();
    times.sort();
    Trips {
        p50: ms(times[times.len() / 2]),
        p99: ms(times[(times.len() * 99 / 100).min(times.len() - 1)]),
        per_sec: times.len() as f64 / wall.as_secs_f64(),
        failed,
    }
}

fn me() -> i32 {
    std::process::id() as i32
}

/// The fixture server, spoken to directly.
fn direct_command(ctx: &Ctx<'_>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&ctx.fixture);
    cmd.env("MCPFLEET_TEST_ID", ctx.scratch.tag("direct"));
    cmd
}

async fn direct_trips(ctx: &Ctx<'_>) -> Result<PathRow, String> {
    let (client, child) = stdio_client(direct_command(ctx)).await?;
    let server = child.id().map_or(0, |p| p as i32);
    let roles = vec![("client", me()), ("server", server)];
    let measured = measure(client.peer(), TOOL, ctx.args.calls, &roles).await;
    close_stdio(client, child).await;
    Ok(PathRow {
        name: "direct (limit)",
        measured,
        memory: None,
    })
}

/// The environment entry under which this benchmark's binary runs as a byte
/// relay to the server whose path it holds.
const RELAY_ENV: &str = "MCPFLEET_BENCH_RELAY";

/// The floor of any gateway that is a process of its own between client and
/// server: this binary run as [`byte_relay`], which copies bytes and reads
/// nothing of them. No gateway that routes can cost less than its two extra
/// hops of every message.
async fn relay_trips(ctx: &Ctx<'_>) -> Result<PathRow, String> {
    let (client, child) = stdio_client(relay_command(ctx)?).await?;
    let relay = child.id().map_or(0, |p| p as i32);
    let server = std::fs::read_to_string(format!("/proc/{relay}/task/{relay}/children"))
        .ok()
        .and_then(|c| c.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let roles = vec![("client", me()), ("gateway", relay), ("server", server)];
    let measured = measure(client.peer(), TOOL, ctx.args.calls, &roles).await;
    close_stdio(client, child).await;
    Ok(PathRow {
        name: "byte relay (floor)",
        measured,
        memory: None,
    })
}

/// This binary as the byte relay to the fixture server.
fn relay_command(ctx: &Ctx<'_>) -> Result<tokio::process::Command, String> {
    let me_exe = std::env::current_exe().map_err(|e| format!("this benchmark's path: {e}"))?;
    let mut cmd = tokio::process::Command::new(me_exe);
    cmd.env(RELAY_ENV, &ctx.fixture)
        .env("MCPFLEET_TEST_ID", ctx.scratch.tag("relay"));
    Ok(cmd)
}

/// The relay process of [`relay_trips`]: starts `server` with piped stdin and
/// stdout and copies, with a plain thread each way, its own stdin to the
/// server's and the server's stdout to its own, until either ends.
fn byte_relay(server: &Path) {
    use std::io::{Read, Write};
    fn copy(mut from: impl Read, mut to: impl Write) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                break;
            }
        }
    }
    let Ok(mut child) = Command::new(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        return;
    };
    let to_server = child.stdin.take().expect("piped stdin");
    let from_server = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || copy(std::io::stdin().lock(), to_server));
    copy(from_server, std::io::stdout().lock());
    let _ = child.kill();
    let _ = child.wait();
}

/// The paths of the interleaved rounds, in the order of the first round.
const ROUND_PATHS: [&str; 3] = ["direct (limit)", "byte relay (floor)", "mcpfleet connect"];

/// Throughput at 16 in flight of direct, the byte relay and `connect`, measured
/// in `--rounds` rounds that each take the three paths in turn (the order turns
/// by one each round), with all three sessions open throughout. On a shared
/// machine a path measured a few seconds after another meets other load; a
/// share of direct computed within one round, and the median over the rounds,
/// is what the target is read from. Returns each path's share of direct.
async fn interleaved(
    ctx: &Ctx<'_>,
    fleet: &Fleet,
) -> Result<(Vec<RoundPath>, Option<Spread>), String> {
    let paths = [
        (direct_command(ctx), TOOL),
        (relay_command(ctx)?, TOOL),
        (fleet.connect(), "fx__echo"),
    ];
    let mut open = Vec::new();
    for (cmd, tool) in paths {
        match stdio_client(cmd).await {
            Ok((client, child)) => open.push((client, child, tool)),
            Err(e) => {
                for (client, child, _) in open {
                    close_stdio(client, child).await;
                }
                return Err(e);
            }
        }
    }
    let (rounds, calls) = (ctx.args.rounds, ctx.args.round_calls);
    let mut shares = vec![Vec::with_capacity(rounds); open.len()];
    let mut speeds = vec![Vec::with_capacity(rounds); open.len()];
    let mut failure = None;
    'rounds: for round in 0..rounds {
        let mut per_sec = vec![0.0; open.len()];
        for k in 0..open.len() {
            let i = (k + round) % open.len();
            let (client, _, tool) = &open[i];
            if round == 0
                && let Err(e) = bounded(trips(client.peer(), tool, WARM_UP, 4)).await
            {
                failure = Some(e);
                break 'rounds;
            }
            match bounded(trips(client.peer(), tool, calls, IN_FLIGHT[1])).await {
                Ok(t) if t.failed == 0 => per_sec[i] = t.per_sec,
                Ok(t) => {
                    failure = Some(format!("{}: {} calls failed", ROUND_PATHS[i], t.failed));
                    break 'rounds;
                }
                Err(e) => {
                    failure = Some(format!("{}: {e}", ROUND_PATHS[i]));
                    break 'rounds;
                }
            }
        }
        for (i, (share, speed)) in shares.iter_mut().zip(&mut speeds).enumerate() {
            share.push(per_sec[i] / per_sec[0]);
            speed.push(per_sec[i]);
        }
    }
    for (client, child, _) in open {
        close_stdio(client, child).await;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    // `connect` against the byte relay, round by round (paths 2 and 1).
    let vs_relay: Vec<f64> = speeds[2]
        .iter()
        .zip(&speeds[1])
        .map(|(c, r)| c / r)
        .collect();
    let paths = ROUND_PATHS
        .iter()
        .zip(shares.iter().zip(&speeds))
        .filter_map(|(name, (share, speed))| {
            Some((*name, Spread::of(share)?, Spread::of(speed)?.median))
        })
        .collect();
    Ok((paths, Spread::of(&vs_relay)))
}

/// A path of the interleaved rounds: its name, its share of direct and its
/// median calls per second.
type RoundPath = (&'static str, Spread, f64);

/// The running fixture server of a one-server fleet, from `status`.
fn fleet_server(fleet: &Fleet) -> Option<i32> {
    let doc = fleet.json(&["status"]).ok()?;
    doc["servers"][0]["pid"].as_i64().map(|p| p as i32)
}

async fn socket_trips(ctx: &Ctx<'_>, fleet: &Fleet) -> Result<PathRow, String> {
    let supervisor = fleet.supervisor().ok_or("no supervisor after `up`")?;
    let client = socket_client(fleet).await?;
    let roles = vec![
        ("client", me()),
        ("gateway", supervisor),
        ("server", fleet_server(fleet).unwrap_or(0)),
    ];
    let measured = measure(client.peer(), "fx__echo", ctx.args.calls, &roles).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    Ok(PathRow {
        name: "supervisor socket",
        measured,
        memory: None,
    })
}

async fn connect_trips(ctx: &Ctx<'_>, fleet: &Fleet) -> Result<PathRow, String> {
    let supervisor = fleet.supervisor().ok_or("no supervisor after `up`")?;
    let mut memory = Memory {
        before: rss_kb(supervisor),
        ..Memory::default()
    };
    let (client, child) = stdio_client(fleet.connect()).await?;
    memory.session = rss_kb(supervisor);
    let roles = vec![
        ("client", me()),
        ("bridge", child.id().map_or(0, |p| p as i32)),
        ("gateway", supervisor),
        ("server", fleet_server(fleet).unwrap_or(0)),
    ];
    let measured = measure(client.peer(), "fx__echo", ctx.args.calls, &roles).await;
    memory.after = rss_kb(supervisor);
    close_stdio(client, child).await;
    Ok(PathRow {
        name: "mcpfleet connect",
        measured,
        memory: Some(memory),
    })
}

/// The protocol era a client of `serve` speaks.
#[derive(Clone, Copy)]
enum Era {
    /// A session opened with `initialize` (2025-11-25).
    Legacy = 0,
    /// Stateless 2026-07-28 requests, after `server/discover`.
    Modern = 1,
}

impl Era {
    fn row(self) -> &'static str {
        match self {
            Era::Legacy => "mcpfleet serve",
            Era::Modern => "serve 2026-07-28",
        }
    }
}

/// The gateway's CPU per call of a path, in µs, at 16 in flight.
fn gateway_cpu(row: &PathRow) -> Option<f64> {
    let cpu = row.measured.cpu.as_ref()?;
    cpu.per_role_us
        .iter()
        .find(|(role, _)| *role == "gateway")
        .map(|(_, us)| *us)
}

async fn serve_trips(ctx: &Ctx<'_>, fleet: &Fleet, era: Era) -> Result<PathRow, String> {
    let mut row = serve_row(ctx, fleet, era).await?;
    row.name = era.row();
    Ok(row)
}

/// `tools/call` through a fleet across hosts: one etcd member on loopback, the
/// fleet file with `coordination:`, its server run by host `a`; through a's
/// gateway, then through host `b`'s, which relays each call to a's.
#[cfg(feature = "etcd")]
async fn across_hosts_trips(ctx: &Ctx<'_>) -> Result<(PathRow, Result<PathRow, String>), String> {
    let port = |_| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| e.to_string())
    };
    let (client, peer) = (port(0)?, port(1)?);
    let data = ctx.scratch.dir.path().join("etcd");
    let mut etcd = Command::new("etcd")
        .args(["--name", "bench", "--data-dir"])
        .arg(&data)
        .args([
            "--listen-client-urls",
            &format!("http://127.0.0.1:{client}"),
        ])
        .args([
            "--advertise-client-urls",
            &format!("http://127.0.0.1:{client}"),
        ])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .env("MCPFLEET_TEST_ID", ctx.scratch.tag("etcd"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("etcd (Debian's etcd-server) not found: {e}"))?;
    let mut fleet = Fleet::with(
        ctx,
        "hosts",
        &["fx".to_string()],
        &format!("coordination:\n  etcd: [127.0.0.1:{client}]\n  ttl: 5s\n"),
    );
    // The server may run on host a only.
    let text = std::fs::read_to_string(&fleet.file).map_err(|e| e.to_string())?;
    std::fs::write(
        &fleet.file,
        format!("{text}    placement: {{hosts: [a]}}\n"),
    )
    .map_err(|e| e.to_string())?;
    fleet.host = Some("a");
    let other = fleet.on_host(ctx, "b");
    // etcd takes a moment to elect itself.
    let mut up = Err(String::new());
    for _ in 0..50 {
        up = fleet.json(&["up"]);
        if up.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let row = match up {
        Ok(_) => serve_row(ctx, &fleet, Era::Modern).await.map(|mut row| {
            row.name = "serve, across hosts";
            row
        }),
        Err(e) => Err(format!("up failed: {e}")),
    };
    let relayed = match &row {
        Ok(_) => relayed_row(ctx, &other).await,
        Err(_) => Err("not measured: the fleet did not come up".to_owned()),
    };
    drop(other);
    drop(fleet);
    let _ = etcd.kill();
    let _ = etcd.wait();
    row.map(|row| (row, relayed))
}

/// The call through host `b`'s gateway, once its relay to the host that
/// runs the server is open (it opens within a read of etcd).
#[cfg(feature = "etcd")]
async fn relayed_row(ctx: &Ctx<'_>, other: &Fleet) -> Result<PathRow, String> {
    let door = other.serve()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let client = http_client(&door, Era::Modern).await?;
        let call = rmcp::model::CallToolRequestParams::new("fx__echo");
        let answered = bounded(client.peer().call_tool(call)).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
        if matches!(answered, Ok(Ok(_))) {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "no relay to the server's host within 20 s: {answered:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut row = serve_row(ctx, other, Era::Modern).await?;
    row.name = "serve, relayed to another host";
    Ok(row)
}

/// `tools/call` of the fixture through `serve` in `era`, as one row.
async fn serve_row(ctx: &Ctx<'_>, fleet: &Fleet, era: Era) -> Result<PathRow, String> {
    let door = fleet.serve()?;
    let supervisor = fleet.supervisor().ok_or("no supervisor after `serve`")?;
    let mut memory = Memory {
        before: rss_kb(supervisor),
        ..Memory::default()
    };
    let client = http_client(&door, era).await?;
    memory.session = rss_kb(supervisor);
    let roles = vec![
        ("client", me()),
        ("gateway", supervisor),
        ("server", fleet_server(fleet).unwrap_or(0)),
    ];
    let measured = measure(client.peer(), "fx__echo", ctx.args.calls, &roles).await;
    memory.after = rss_kb(supervisor);
    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    Ok(PathRow {
        name: era.row(),
        measured,
        memory: Some(memory),
    })
}

async fn hub_trips(ctx: &Ctx<'_>, cli: &Path) -> Result<PathRow, String> {
    let hub = Hub::start(ctx, cli, "calls", &["fx".to_string()]).await?;
    let mut memory = Memory {
        before: rss_kb(hub.pid),
        ..Memory::default()
    };
    let client = hub.client().await?;
    memory.session = rss_kb(hub.pid);
    let tool = hub_tool(client.peer(), "fx").await?;
    let roles = vec![
        ("client", me()),
        ("gateway", hub.pid),
        ("server", hub.server().unwrap_or(0)),
    ];
    let measured = measure(client.peer(), &tool, ctx.args.calls, &roles).await;
    memory.after = rss_kb(hub.pid);
    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    Ok(PathRow {
        name: "mcp-hub",
        measured,
        memory: Some(memory),
    })
}

/// Memory per session through `connect`: the supervisor's growth per session,
/// and what each `connect` process holds itself.
async fn connect_sessions(ctx: &Ctx<'_>, n: usize) -> Result<Sessions, String> {
    let fleet = Fleet::new(ctx, "sessions-connect", &["fx".to_string()]);
    fleet.json(&["up"])?;
    let supervisor = fleet.supervisor().ok_or("no supervisor after `up`")?;
    let mut open = Vec::new();
    let grown = sessions_growth(supervisor, n, async || {
        let (client, child) = stdio_client(fleet.connect()).await?;
        let _ = bounded(list_all(client.peer())).await;
        open.push((client, child));
        Ok(())
    })
    .await;
    let bridges: Vec<(u64, u64)> = open
        .iter()
        .filter_map(|(_, child)| {
            let pid = child.id()? as i32;
            Some((rss_kb(pid)?, status_kb(pid, "RssAnon:")?))
        })
        .collect();
    for (client, child) in open {
        close_stdio(client, child).await;
    }
    let per_session = grown?;
    let count = bridges.len().max(1) as u64;
    let rss = bridges.iter().map(|b| b.0).sum::<u64>() / count;
    let anon = bridges.iter().map(|b| b.1).sum::<u64>() / count;
    Ok(Sessions {
        per_session,
        bridge_anon: Some(anon),
        note: format!(
            "+ each `connect` process: {} VmRSS, of which {} its own (RssAnon)",
            mb(Some(rss)),
            mb(Some(anon))
        ),
    })
}

async fn serve_sessions(ctx: &Ctx<'_>, n: usize) -> Result<Sessions, String> {
    let fleet = Fleet::new(ctx, "sessions-serve", &["fx".to_string()]);
    let door = fleet.serve()?;
    let supervisor = fleet.supervisor().ok_or("no supervisor after `serve`")?;
    let mut open = Vec::new();
    let grown = sessions_growth(supervisor, n, async || {
        let client = http_client(&door, Era::Legacy).await?;
        let _ = bounded(list_all(client.peer())).await;
        open.push(client);
        Ok(())
    })
    .await;
    for client in open {
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    }
    Ok(Sessions {
        per_session: grown?,
        bridge_anon: None,
        note: String::new(),
    })
}

async fn hub_sessions(ctx: &Ctx<'_>, cli: &Path, n: usize) -> Result<Sessions, String> {
    let hub = Hub::start(ctx, cli, "sessions", &["fx".to_string()]).await?;
    let mut open = Vec::new();
    let grown = sessions_growth(hub.pid, n, async || {
        let client = hub.client().await?;
        let _ = bounded(list_all(client.peer())).await;
        open.push(client);
        Ok(())
    })
    .await;
    for client in open {
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    }
    Ok(Sessions {
        per_session: grown?,
        bridge_anon: None,
        note: "(node: its garbage collector moves this figure)".into(),
    })
}

/// Opens `n` sessions with `open`; the growth of `pid`'s VmRSS per session (kB).
async fn sessions_growth(
    pid: i32,
    n: usize,
    mut open: impl AsyncFnMut() -> Result<(), String>,
) -> Result<f64, String> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kb(pid).ok_or("the gateway process is gone")?;
    for _ in 0..n {
        open().await?;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = rss_kb(pid).ok_or("the gateway process is gone")?;
    Ok((after as f64 - before as f64) / n as f64)
}

/// An MCP session on the supervisor's control socket itself: the `gateway`
/// request that `connect` sends, then MCP on the same connection.
async fn socket_client(fleet: &Fleet) -> Result<Client, String> {
    use mcpfleet::protocol::{Deadlines, Op, PROTOCOL_VERSION, Request, encode};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let path = fleet.state.join("control.sock");
    let stream = tokio::net::UnixStream::connect(&path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let (read, mut write) = stream.into_split();
    let request = encode(&Request {
        v: PROTOCOL_VERSION,
        op: Op::Gateway {
            servers: Vec::new(),
            deadlines: Deadlines::default(),
            fleet: None,
            handover: false,
        },
    });
    write
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("control socket: {e}"))?;
    let mut reader = BufReader::new(read);
    loop {
        let mut line = String::new();
        let read = bounded(reader.read_line(&mut line)).await?;
        if read.map_err(|e| format!("control socket: {e}"))? == 0 {
            return Err("the supervisor closed the control connection".into());
        }
        let doc: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        match doc["type"].as_str() {
            Some("event") => continue,
            Some("reply") => break,
            _ => return Err(format!("the supervisor refused: {}", line.trim())),
        }
    }
    match bounded(BenchClient.serve((reader, write))).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!("initialize on the control socket: {e}")),
        Err(e) => Err(format!("initialize on the control socket: {e}")),
    }
}

/// The name under which mcp-hub lists the fixture server `server`'s `echo`.
async fn hub_tool(peer: &Peer<RoleClient>, server: &str) -> Result<String, String> {
    let tools = bounded(list_names(peer)).await??;
    tools
        .into_iter()
        .find(|t| t.starts_with(server) && t.ends_with(TOOL))
        .ok_or_else(|| format!("mcp-hub lists no `{TOOL}` of `{server}`"))
}

// ---------------------------------------------------------------------------
// 2. tools/list of a large fleet
// ---------------------------------------------------------------------------

/// The p50 of full `tools/list`s (every page), after warm-up, and how many tools
/// and pages one list has.
struct Listed {
    p50: f64,
    tools: usize,
    pages: usize,
}

const LISTS: usize = 20;

async fn lists(ctx: &Ctx<'_>, figures: &mut Figures) {
    if ctx.args.lists.is_empty() {
        return;
    }
    println!();
    println!(
        "tools/list through the gateway (every page; p50 of {LISTS} lists after 3 warm-up lists)"
    );
    println!(
        "  {:>7} {:<18} {:>9} {:>7} {:>6}  note",
        "servers", "path", "p50", "tools", "pages"
    );
    // For scale: one server's own list, directly.
    match direct_list(ctx).await {
        Ok(l) => println!(
            "  {:>7} {:<18} {:>7.3}ms {:>7} {:>6}  one fixture server's own list, directly",
            1, "direct (limit)", l.p50, l.tools, l.pages
        ),
        Err(e) => println!("  {:>7} {:<18}  not measured: {e}", 1, "direct (limit)"),
    }
    for &n in &ctx.args.lists {
        let names: Vec<String> = (0..n).map(|i| format!("s{i:04}")).collect();
        let fleet = Fleet::new(ctx, &format!("list{n}"), &names);
        let t = Instant::now();
        if let Err(e) = fleet.json(&["up"]) {
            println!("  {n:>7} {:<18}  not measured: up failed: {e}", "mcpfleet");
            continue;
        }
        let up = ms(t.elapsed());
        match fleet_list(ctx, &fleet).await {
            Ok((l, call)) => {
                figures.list_connect.push((n, l.p50));
                println!(
                    "  {n:>7} {:<18} {:>7.3}ms {:>7} {:>6}  (`up` took {up:.0}ms; a tools/call through connect in this fleet: p50 {})",
                    "mcpfleet connect",
                    l.p50,
                    l.tools,
                    l.pages,
                    call.map_or_else(|e| e, |c| format!("{:.3}ms", c.p50))
                );
            }
            Err(e) => println!("  {n:>7} {:<18}  not measured: {e}", "mcpfleet connect"),
        }
        match fleet.serve() {
            Ok(door) => match http_client(&door, Era::Legacy).await {
                Ok(client) => {
                    match timed_lists(client.peer()).await {
                        Ok(l) => println!(
                            "  {n:>7} {:<18} {:>7.3}ms {:>7} {:>6}",
                            "mcpfleet serve", l.p50, l.tools, l.pages
                        ),
                        Err(e) => println!("  {n:>7} {:<18}  not measured: {e}", "mcpfleet serve"),
                    }
                    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
                }
                Err(e) => println!("  {n:>7} {:<18}  not measured: {e}", "mcpfleet serve"),
            },
            Err(e) => println!("  {n:>7} {:<18}  not measured: {e}", "mcpfleet serve"),
        }
        drop(fleet);
        if let Some(cli) = &ctx.hub {
            match hub_list(ctx, cli, &names).await {
                Ok((l, ready)) => println!(
                    "  {n:>7} {:<18} {:>7.3}ms {:>7} {:>6}  (ready with all servers after {ready:.0}ms)",
                    "mcp-hub", l.p50, l.tools, l.pages
                ),
                Err(e) => println!("  {n:>7} {:<18}  not measured: {e}", "mcp-hub"),
            }
        }
    }
}

async fn direct_list(ctx: &Ctx<'_>) -> Result<Listed, String> {
    let mut cmd = tokio::process::Command::new(&ctx.fixture);
    cmd.env("MCPFLEET_TEST_ID", ctx.scratch.tag("direct-list"));
    let (client, child) = stdio_client(cmd).await?;
    let listed = timed_lists(client.peer()).await;
    close_stdio(client, child).await;
    listed
}

/// Lists through `connect`, and the p50 of calls in the same fleet (1 in flight).
async fn fleet_list(
    ctx: &Ctx<'_>,
    fleet: &Fleet,
) -> Result<(Listed, Result<Trips, String>), String> {
    let (client, child) = stdio_client(fleet.connect()).await?;
    let listed = timed_lists(client.peer()).await;
    let calls = ctx.args.calls.min(500);
    let call = match bounded(trips(client.peer(), "s0000__echo", WARM_UP, 1)).await {
        Ok(_) => bounded(trips(client.peer(), "s0000__echo", calls, 1)).await,
        Err(e) => Err(e),
    };
    close_stdio(client, child).await;
    Ok((listed?, call))
}

async fn hub_list(ctx: &Ctx<'_>, cli: &Path, names: &[String]) -> Result<(Listed, f64), String> {
    let t = Instant::now();
    let hub = Hub::start(ctx, cli, &format!("list{}", names.len()), names).await?;
    let ready = ms(t.elapsed());
    let client = hub.client().await?;
    let listed = timed_lists(client.peer()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    Ok((listed?, ready))
}

async fn timed_lists(peer: &Peer<RoleClient>) -> Result<Listed, String> {
    let mut pages = 0;
    let mut tools = 0;
    for _ in 0..3 {
        (tools, pages) = bounded(list_all(peer)).await??;
    }
    let mut times = Vec::with_capacity(LISTS);
    for _ in 0..LISTS {
        let t = Instant::now();
        bounded(list_all(peer)).await??;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(Listed {
        p50: ms(times[times.len() / 2]),
        tools,
        pages,
    })
}

/// One full `tools/list`, every page: how many tools and pages. Sent as plain
/// requests, so that no client-side cache can answer.
async fn list_all(peer: &Peer<RoleClient>) -> Result<(usize, usize), String> {
    let mut cursor = None;
    let (mut tools, mut pages) = (0, 0);
    loop {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        match peer.send_request(request).await {
            Ok(ServerResult::ListToolsResult(r)) => {
                tools += r.tools.len();
                pages += 1;
                cursor = r.next_cursor;
                if cursor.is_none() {
                    return Ok((tools, pages));
                }
            }
            Ok(_) => return Err("tools/list: an unexpected answer".into()),
            Err(e) => return Err(format!("tools/list: {e}")),
        }
    }
}

async fn list_names(peer: &Peer<RoleClient>) -> Result<Vec<String>, String> {
    let listed = peer
        .send_request(ClientRequest::ListToolsRequest(
            ListToolsRequest::with_param(PaginatedRequestParams::default()),
        ))
        .await;
    match listed {
        Ok(ServerResult::ListToolsResult(r)) => {
            Ok(r.tools.into_iter().map(|t| t.name.to_string()).collect())
        }
        Ok(_) => Err("tools/list: an unexpected answer".into()),
        Err(e) => Err(format!("tools/list: {e}")),
    }
}

// ---------------------------------------------------------------------------
// 3. Cold start
// ---------------------------------------------------------------------------

async fn cold_start(ctx: &Ctx<'_>, figures: &mut Figures) {
    let runs = ctx.args.cold;
    let mut direct = Vec::new();
    let mut connect = Vec::new();
    let mut errors = Vec::new();
    for i in 0..runs {
        // The servers' own start: spawn the fixture, handshake, first tools/list.
        let mut cmd = tokio::process::Command::new(&ctx.fixture);
        cmd.env("MCPFLEET_TEST_ID", ctx.scratch.tag("cold-direct"));
        let t = Instant::now();
        match stdio_client(cmd).await {
            Ok((client, child)) => {
                match bounded(list_all(client.peer())).await {
                    Ok(Ok(_)) => direct.push(ms(t.elapsed())),
                    Ok(Err(e)) | Err(e) => errors.push(e),
                }
                close_stdio(client, child).await;
            }
            Err(e) => errors.push(e),
        }
        // `connect` with no supervisor: a fresh state directory each time.
        let fleet = Fleet::new(ctx, &format!("cold{i}"), &["fx".to_string()]);
        let t = Instant::now();
        match stdio_client(fleet.connect()).await {
            Ok((client, child)) => {
                match bounded(list_all(client.peer())).await {
                    Ok(Ok(_)) => connect.push(ms(t.elapsed())),
                    Ok(Err(e)) | Err(e) => errors.push(e),
                }
                close_stdio(client, child).await;
            }
            Err(e) => errors.push(e),
        }
        drop(fleet);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!();
    println!(
        "cold start: from spawning the client's server command to the first tools/list answer"
    );
    println!("  (median of {runs} runs; all runs in ms)");
    let (all_direct, all_connect) = (list(&direct), list(&connect));
    figures.cold_direct = median(&mut direct);
    figures.cold_connect = median(&mut connect);
    println!(
        "  {:<44} {:>9}  [{all_direct}]",
        "the server's own start (fixture, directly)",
        opt_ms(figures.cold_direct)
    );
    println!(
        "  {:<44} {:>9}  [{all_connect}]",
        "`mcpfleet connect`, no supervisor running",
        opt_ms(figures.cold_connect)
    );
    if let (Some(c), Some(d)) = (figures.cold_connect, figures.cold_direct) {
        println!("  {:<44} {:>+7.1}ms", "difference", c - d);
    }
    if let Some(e) = errors.first() {
        println!("  {} run(s) failed; first error: {e}", errors.len());
    }
}

// ---------------------------------------------------------------------------
// 4. Targets
// ---------------------------------------------------------------------------

fn print_targets(f: &Figures) {
    println!();
    println!("targets (computed from this run)");
    let line = |what: &str, value: Option<String>, target: &str, pass: Option<bool>| {
        println!(
            "  {:<50} {:>12}   {:<26} {}",
            what,
            value.unwrap_or_else(|| "-".into()),
            target,
            match pass {
                Some(true) => "PASS",
                Some(false) => "MISS",
                None if !target.is_empty() && target != "(shown)" => "not measured",
                None => "",
            }
        );
    };
    let added = |trips: &[Option<Trips>; 2]| trips[0].zip(f.direct[0]).map(|(g, d)| g.p50 - d.p50);
    let connect = added(&f.connect);
    line(
        "added p50 through connect (1 in flight)",
        connect.map(|a| format!("{a:+.3}ms")),
        "<= 0.5ms",
        connect.map(|a| a <= 0.5),
    );
    // `serve` in both eras; the target is read in the cheaper one.
    let serve = [added(&f.serve), added(&f.serve_modern)];
    for (era, a) in ["legacy", "2026-07-28"].iter().zip(serve) {
        line(
            &format!("  added p50 through serve, {era}"),
            a.map(|a| format!("{a:+.3}ms")),
            "",
            None,
        );
    }
    // A host of a fleet across hosts, its server local: no etcd on the path.
    #[cfg(feature = "etcd")]
    {
        let more = f.serve_across_hosts[0]
            .zip(f.serve_modern[0])
            .map(|(h, one)| h.p50 - one.p50);
        line(
            "p50 on a host of a fleet across hosts, vs one host",
            more.map(|a| format!("{a:+.3}ms")),
            "<= 0.05ms (no etcd round trip)",
            more.map(|a| a <= 0.05),
        );
        let hop = f.serve_relayed[0]
            .zip(f.serve_across_hosts[0])
            .map(|(r, h)| r.p50 - h.p50);
        line(
            "p50 through another host's gateway (one hop more)",
            hop.map(|a| format!("{a:+.3}ms")),
            "",
            None,
        );
    }
    let cheaper = serve.into_iter().flatten().reduce(f64::min);
    line(
        "added p50 through serve (1 in flight, cheaper era)",
        cheaper.map(|a| format!("{a:+.3}ms")),
        "<= 0.15ms",
        cheaper.map(|a| a <= 0.15),
    );
    for (era, us) in ["legacy", "2026-07-28"].iter().zip(f.serve_cpu_us) {
        line(
            &format!("  gateway CPU per call through serve, {era}"),
            us.map(|us| format!("{us:.1}us")),
            "",
            None,
        );
    }
    let cheaper = f.serve_cpu_us.into_iter().flatten().reduce(f64::min);
    line(
        "gateway CPU per call through serve (16 in flight, cheaper era)",
        cheaper.map(|us| format!("{us:.1}us")),
        "<= 50us",
        cheaper.map(|us| us <= 50.0),
    );
    // Through `connect`, against the byte relay in the same interleaved rounds:
    // the floor of any process between client and server on this machine.
    let vs_relay = f.connect_vs_relay.map(|s| s.median);
    line(
        "throughput through connect, 16 in flight (rounds)",
        vs_relay.map(|s| format!("{:.0}% of relay", s * 100.0)),
        ">= 80% of the byte relay",
        vs_relay.map(|s| s >= 0.8),
    );
    let serve_share = f.serve[1]
        .zip(f.direct[1])
        .map(|(g, d)| g.per_sec / d.per_sec);
    line(
        "  throughput through serve, 16 in flight",
        serve_share.map(|s| format!("{:.0}% of direct", s * 100.0)),
        "(shown)",
        None,
    );
    let largest = f.list_connect.iter().max_by_key(|(n, _)| *n);
    match largest {
        Some((n, p50)) => line(
            &format!("tools/list of {n} servers through connect (p50)"),
            Some(format!("{p50:.2}ms")),
            "<= 50ms (200 servers)",
            (*n >= 200).then_some(*p50 <= 50.0),
        ),
        None => line(
            "tools/list of 200 servers through connect (p50)",
            None,
            "<= 50ms",
            None,
        ),
    }
    line(
        "memory per client session, serve (supervisor)",
        f.per_session_serve_kb
            .map(|k| format!("{:+.2}MB", k / 1024.0)),
        "<= 1MB",
        f.per_session_serve_kb.map(|k| k <= 1024.0),
    );
    let connect = f.connect_session.as_ref().and_then(|m| m.per_session);
    line(
        "memory per client session, connect (supervisor)",
        connect.map(|k| format!("{:+.2}MB", k / 1024.0)),
        "<= 1MB",
        connect.map(|k| k <= 1024.0),
    );
    let anon = f.connect_session.as_ref().and_then(|m| m.bridge_anon);
    let with_bridge = connect.zip(anon).map(|(k, a)| k + a as f64);
    line(
        "  the same, with its `connect` process (RssAnon)",
        with_bridge.map(|k| format!("{:+.2}MB", k / 1024.0)),
        "<= 1MB",
        with_bridge.map(|k| k <= 1024.0),
    );
    let over = f.cold_connect.zip(f.cold_direct).map(|(c, d)| c - d);
    line(
        "cold start through connect, over the server's own",
        over.map(|o| format!("{o:+.1}ms")),
        "<= +50ms",
        over.map(|o| o <= 50.0),
    );
}

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------

/// The benchmark's MCP client: rmcp's defaults, with the handshake pinned to the
/// newest protocol version that has `initialize` (as mcpfleet's own client).
#[derive(Clone)]
struct BenchClient;

impl ClientHandler for BenchClient {
    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("mcpfleet-bench", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

type Client = RunningService<RoleClient, BenchClient>;

/// Runs `future` under [`STEP_LIMIT`].
async fn bounded<T>(future: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(STEP_LIMIT, future)
        .await
        .map_err(|_| format!("no answer within {}s", STEP_LIMIT.as_secs()))
}

/// Spawns `cmd` and initializes an MCP session over its stdin and stdout.
async fn stdio_client(
    mut cmd: tokio::process::Command,
) -> Result<(Client, tokio::process::Child), String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    match bounded(BenchClient.serve((stdout, stdin))).await {
        Ok(Ok(client)) => Ok((client, child)),
        Ok(Err(e)) => Err(format!("initialize: {e}")),
        Err(e) => Err(format!("initialize: {e}")),
    }
}

/// Ends a stdio session (its server's stdin closes) and waits for the process.
async fn close_stdio(client: Client, mut child: tokio::process::Child) {
    let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// The HTTP door `serve` opened.
struct Door {
    url: String,
    token: String,
}

async fn http_client(door: &Door, era: Era) -> Result<Client, String> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::streamable_http_client::{
        StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
    };
    let config =
        StreamableHttpClientTransportConfig::with_uri(door.url.as_str()).auth_header(&door.token);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let lifecycle = match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    match bounded(BenchClient.serve_with_lifecycle(transport, lifecycle)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!("initialize over HTTP: {e}")),
        Err(e) => Err(format!("initialize over HTTP: {e}")),
    }
}

/// The legacy HTTP+SSE transport (protocol 2024-11-05), as mcp-hub serves it at
/// `/mcp`: a GET opens an event stream whose first event names the endpoint that
/// takes the client's messages by POST; answers come back on the stream.
struct LegacySse {
    http: reqwest::Client,
    endpoint: Arc<str>,
    /// Messages read from the event stream, in order.
    incoming: tokio::sync::mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    /// Reads the event stream; aborted when the transport goes.
    reader: tokio::task::JoinHandle<()>,
}

impl LegacySse {
    async fn open(url: &str) -> Result<LegacySse, String> {
        let base = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
        let http = reqwest::Client::new();
        let mut response = http
            .get(base.clone())
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", response.status()));
        }
        let (tx, incoming) = tokio::sync::mpsc::unbounded_channel();
        let (endpoint_tx, endpoint_rx) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(async move {
            let mut events = SseEvents::default();
            let mut endpoint_tx = Some(endpoint_tx);
            while let Ok(Some(chunk)) = response.chunk().await {
                for (event, data) in events.push(&chunk) {
                    if event == "endpoint" {
                        if let Some(t) = endpoint_tx.take() {
                            let _ = t.send(data);
                        }
                    } else if let Ok(message) = serde_json::from_str(&data)
                        && tx.send(message).is_err()
                    {
                        return;
                    }
                }
            }
        });
        let Ok(Ok(path)) = tokio::time::timeout(Duration::from_secs(10), endpoint_rx).await else {
            reader.abort();
            return Err(format!("GET {url}: no `endpoint` event"));
        };
        let endpoint = base
            .join(path.trim())
            .map_err(|e| format!("endpoint `{path}`: {e}"))?;
        Ok(LegacySse {
            http,
            endpoint: endpoint.as_str().into(),
            incoming,
            reader,
        })
    }
}

impl Drop for LegacySse {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Transport<RoleClient> for LegacySse {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (http, endpoint) = (self.http.clone(), self.endpoint.clone());
        async move {
            let body = serde_json::to_vec(&item)?;
            let response = http
                .post(&*endpoint)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map_err(std::io::Error::other)?;
            let status = response.status();
            let _ = response.bytes().await;
            if !status.is_success() {
                return Err(std::io::Error::other(format!("POST: HTTP {status}")));
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

/// Splits a `text/event-stream` into events: (event name, data).
#[derive(Default)]
struct SseEvents {
    buffer: Vec<u8>,
}

impl SseEvents {
    fn push(&mut self, chunk: &[u8]) -> Vec<(String, String)> {
        self.buffer
            .extend(chunk.iter().copied().filter(|b| *b != b'\r'));
        let mut events = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            let mut event = String::from("message");
            let mut data: Vec<&str> = Vec::new();
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !data.is_empty() {
                events.push((event, data.join("\n")));
            }
        }
        events
    }
}

// ---------------------------------------------------------------------------
// Processes and their guards
// ---------------------------------------------------------------------------

fn mcpfleet_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(common::mcpfleet_binary)
}

/// The run's temporary directory and tag; when it goes, whatever still carries
/// the tag is killed (and said so), then the directory is removed.
struct Scratch {
    dir: tempfile::TempDir,
    tag: String,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::Builder::new()
                .prefix("mcpfleet-bench-gateway-")
                .tempdir()
                .expect("temp dir"),
            tag: format!("bench-gateway-{}", std::process::id()),
        }
    }

    /// The tag of one part of the run.
    fn tag(&self, part: &str) -> String {
        format!("{}-{part}", self.tag)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let left = until_gone(&format!("{}-", self.tag), Duration::from_secs(5));
        if left > 0 {
            println!(
                "cleanup: {left} process(es) of the benchmark were still alive and were killed"
            );
        }
    }
}

/// A fleet file and its state directory; when it goes, the fleet is torn down
/// (`down`, then the supervisor), and everything of it is confirmed gone.
struct Fleet {
    file: PathBuf,
    state: PathBuf,
    tag: String,
    /// The host it runs as (`$MCPFLEET_HOST`), in a fleet across hosts.
    host: Option<&'static str>,
}

impl Fleet {
    fn new(ctx: &Ctx<'_>, name: &str, servers: &[String]) -> Fleet {
        Fleet::with(ctx, name, servers, "")
    }

    /// A fleet of `servers`, with `top` (whole lines) at its top level.
    fn with(ctx: &Ctx<'_>, name: &str, servers: &[String], top: &str) -> Fleet {
        let dir = ctx.scratch.dir.path();
        let file = dir.join(format!("{name}.yaml"));
        let mut body = format!("version: 1\n{top}servers:\n");
        for s in servers {
            body.push_str(&format!("  {s}:\n    command: {}\n", ctx.fixture.display()));
        }
        std::fs::write(&file, body).expect("write the fleet file");
        Fleet {
            file,
            state: dir.join(format!("{name}-state")),
            tag: ctx.scratch.tag(name),
            host: None,
        }
    }

    /// The same fleet file, as another host of a fleet across hosts.
    #[cfg(feature = "etcd")]
    fn on_host(&self, ctx: &Ctx<'_>, host: &'static str) -> Fleet {
        let name = format!("host-{host}");
        Fleet {
            file: self.file.clone(),
            state: ctx.scratch.dir.path().join(format!("{name}-state")),
            tag: ctx.scratch.tag(&name),
            host: Some(host),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(mcpfleet_bin());
        c.arg("-f")
            .arg(&self.file)
            .args(args)
            .env("MCPFLEET_STATE_DIR", &self.state)
            .env("MCPFLEET_TEST_ID", &self.tag)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        if let Some(host) = self.host {
            // Each host's gateway on a port of its own.
            c.env("MCPFLEET_HOST", host)
                .env("MCPFLEET_LISTEN", "127.0.0.1:0");
        }
        c
    }

    /// Runs a command with `--output json`; its document, when it exits 0.
    fn json(&self, args: &[&str]) -> Result<serde_json::Value, String> {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let out = self
            .command(&all)
            .output()
            .map_err(|e| format!("run mcpfleet: {e}"))?;
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if out.status.code() != Some(0) {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "`mcpfleet {}` exited {:?}: {}",
                args.join(" "),
                out.status.code(),
                err.trim().lines().last().unwrap_or_default()
            ));
        }
        Ok(doc)
    }

    /// `mcpfleet connect`, for a client to launch.
    fn connect(&self) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(mcpfleet_bin());
        c.arg("-f")
            .arg(&self.file)
            .arg("connect")
            .env("MCPFLEET_STATE_DIR", &self.state)
            .env("MCPFLEET_TEST_ID", &self.tag)
            .env_remove("RUST_LOG");
        c
    }

    /// Opens the HTTP door on a free loopback port.
    fn serve(&self) -> Result<Door, String> {
        let doc = self.json(&["serve", "--listen", "127.0.0.1:0"])?;
        let gateway = &doc["gateway"];
        let url = gateway["url"]
            .as_str()
            .ok_or_else(|| format!("`serve` reported no url: {doc}"))?;
        let file = gateway["token_file"]
            .as_str()
            .ok_or_else(|| format!("`serve` reported no token file: {doc}"))?;
        let token = std::fs::read_to_string(file)
            .map_err(|e| format!("read {file}: {e}"))?
            .trim()
            .to_owned();
        Ok(Door {
            url: url.to_owned(),
            token,
        })
    }

    fn supervisor(&self) -> Option<i32> {
        std::fs::read_to_string(self.state.join("supervisor.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let supervisor = self.supervisor();
        let _ = self
            .command(&["down", "--wait-timeout", "30s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // Let the supervisor go now rather than after its idle linger.
        if let Some(pid) = supervisor {
            signal(pid, nix::sys::signal::Signal::SIGTERM);
        }
        until_gone(&self.tag, Duration::from_secs(10));
    }
}

/// A running mcp-hub, in a process group of its own; when it goes, the group is
/// sent SIGTERM, then SIGKILL, and everything it started is confirmed gone.
struct Hub {
    child: std::process::Child,
    pid: i32,
    port: u16,
    tag: String,
}

impl Hub {
    /// Starts mcp-hub with the fixture server under each of `names` and waits
    /// until all of them are connected.
    async fn start(ctx: &Ctx<'_>, cli: &Path, name: &str, names: &[String]) -> Result<Hub, String> {
        let dir = ctx.scratch.dir.path().join(format!("hub-{name}"));
        let home = dir.join("home");
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        let tag = ctx.scratch.tag(&format!("hub-{name}"));
        let servers: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .map(|n| {
                let server = serde_json::json!({
                    "command": ctx.fixture,
                    "args": [],
                    "env": { "MCPFLEET_TEST_ID": tag },
                });
                (n.clone(), server)
            })
            .collect();
        let config = dir.join("mcp-hub.json");
        std::fs::write(
            &config,
            serde_json::json!({ "mcpServers": servers }).to_string(),
        )
        .map_err(|e| format!("{}: {e}", config.display()))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let log = std::fs::File::create(dir.join("mcp-hub.log")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new("node");
        cmd.arg(cli)
            .args(["--port", &port.to_string(), "--config"])
            .arg(&config)
            .current_dir(&dir)
            // Its logs, workspace cache and marketplace cache stay in the run's
            // directory.
            .env("HOME", &home)
            .env("XDG_STATE_HOME", home.join("state"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("MCPFLEET_TEST_ID", &tag)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().map_err(|e| format!("spawn node: {e}"))?;
        let mut hub = Hub {
            pid: child.id() as i32,
            child,
            port,
            tag,
        };
        hub.ready(names.len(), &dir).await?;
        Ok(hub)
    }

    /// Waits until mcp-hub says it is ready with `n` servers connected.
    async fn ready(&mut self, n: usize, dir: &Path) -> Result<(), String> {
        let health = format!("http://127.0.0.1:{}/api/health", self.port);
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut last = String::from("no answer");
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("mcp-hub.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(3).collect();
                return Err(format!("mcp-hub exited ({status}): {}", tail.join(" | ")));
            }
            if let Ok(r) = http.get(&health).send().await
                && let Ok(body) = r.bytes().await
                && let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&body)
            {
                let connected = doc["servers"].as_array().map_or(0, |s| {
                    s.iter().filter(|s| s["status"] == "connected").count()
                });
                last = format!("state {}, {connected}/{n} servers connected", doc["state"]);
                if doc["state"] == "ready" && connected == n {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Err(format!("mcp-hub not ready within 120s ({last})"))
    }

    /// The first fixture server mcp-hub started.
    fn server(&self) -> Option<i32> {
        tagged(&format!("MCPFLEET_TEST_ID={}", self.tag))
            .into_iter()
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.starts_with("mcpfleet-fixtu"))
            })
    }

    async fn client(&self) -> Result<Client, String> {
        let url = format!("http://127.0.0.1:{}/mcp", self.port);
        let transport = bounded(LegacySse::open(&url)).await??;
        match bounded(BenchClient.serve(transport)).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(format!("initialize with mcp-hub: {e}")),
            Err(e) => Err(format!("initialize with mcp-hub: {e}")),
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        use nix::sys::signal::Signal;
        let group = nix::unistd::Pid::from_raw(self.pid);
        let _ = nix::sys::signal::killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        until_gone(&self.tag, Duration::from_secs(5));
    }
}

/// The installed mcp-hub's `cli.js`, installed (pinned) into
/// `.cache/bench/mcp-hub` on first use.
fn hub_program(root: &Path) -> Result<PathBuf, String> {
    let prefix = root.join(".cache/bench/mcp-hub");
    let package = prefix.join("node_modules/mcp-hub");
    let cli = package.join("dist/cli.js");
    let installed = || {
        std::fs::read(package.join("package.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|p| p["version"] == HUB_VERSION)
            && cli.exists()
    };
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return Err("`node` cannot be run".into());
    }
    if !installed() {
        std::fs::create_dir_all(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
        println!(
            "installing mcp-hub {HUB_VERSION} into {} ...",
            prefix.display()
        );
        let mut cmd = Command::new("npm");
        cmd.arg("install")
            .arg("--prefix")
            .arg(&prefix)
            .arg(format!("mcp-hub@{HUB_VERSION}"))
            .args(["--no-audit", "--no-fund", "--loglevel", "error"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = run_bounded(cmd, Duration::from_secs(300))?;
        if !out.status.success() || !installed() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "`npm install mcp-hub@{HUB_VERSION}` failed ({}): {}",
                out.status,
                err.trim().lines().take(3).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    Ok(cli)
}

/// Runs `cmd` for at most `limit`; past it, kills it.
fn run_bounded(mut cmd: Command, limit: Duration) -> Result<std::process::Output, String> {
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawn {:?}: {e}", cmd.get_program()))?;
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().map_err(|e| e.to_string()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{:?} did not finish within {}s",
                    cmd.get_program(),
                    limit.as_secs()
                ));
            }
        }
    }
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Waits (at most `limit`) until no process carries `tag` (or, for a tag that
/// ends with `-`, a tag that starts with it); then kills whatever still does.
/// Returns how many were killed.
fn until_gone(tag: &str, limit: Duration) -> usize {
    let entry = format!("MCPFLEET_TEST_ID={tag}");
    let deadline = Instant::now() + limit;
    loop {
        let alive = tagged(&entry);
        if alive.is_empty() {
            return 0;
        }
        if Instant::now() >= deadline {
            for &pid in &alive {
                signal(pid, nix::sys::signal::Signal::SIGKILL);
            }
            return alive.len();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// VmRSS of a process, in kB.
fn rss_kb(pid: i32) -> Option<u64> {
    status_kb(pid, "VmRSS:")
}

/// A `kB` field of a process's `/proc/PID/status`.
fn status_kb(pid: i32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .trim_start_matches(field)
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .ok()
}

/// A process's CPU time (user + system, in clock ticks, dead threads included)
/// and the context switches of its living threads (voluntary and not).
fn cpu_of(pid: i32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Counted from the state (field 3): utime is field 14, stime field 15.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            if let Some(n) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                switches += n.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some((ticks, switches))
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 when it cannot be asked).
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}

fn mb(kb: Option<u64>) -> String {
    kb.map_or("-".into(), |k| format!("{:.1}MB", k as f64 / 1024.0))
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}ms"))
}
