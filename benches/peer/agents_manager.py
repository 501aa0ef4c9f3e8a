"""The peer side of the fleet benchmark: openai-agents' MCPServerManager.

Starts N MCPServerStdio servers, all running the same command, through
`MCPServerManager(servers, connect_in_parallel=True)`, lists the tools of every
server that came up, tears the manager down, and prints one line of JSON with
the times and counts.

    .cache/peer-venv/bin/python benches/peer/agents_manager.py \
        --n N --timeouts default|raised [--tag TAG] [--bound SECONDS] -- COMMAND [ARGS...]

Every process a server starts carries MCPFLEET_TEST_ID=<TAG> in its
environment, which is how teardown is checked: a process is alive while some
/proc/PID/environ (other than this script's own) holds that entry. A zombie
has an empty environ in /proc, so it counts as gone.

Timeouts. `default` leaves the library's own defaults in place (openai-agents
0.24.0: MCPServerStdio.client_session_timeout_seconds=5,
MCPServerManager.connect_timeout_seconds=10.0 and cleanup_timeout_seconds=10.0);
`raised` sets those three to 120 s. The stdio transport of the `mcp` package
has fixed shutdown grace periods as module constants (no parameter reaches
them); they are left alone and reported under timeout_values.fixed.

Whatever happens, exactly one JSON line goes to stdout and the exit code is
0: errors end up in first_error. A watchdog thread bounds the whole run
(--bound, 300 s by default): when it fires, it SIGKILLs every tagged process,
prints what was measured so far and exits. Library and server logs go to
stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import signal
import sys
import threading
import time

RAISED_S = 120.0
POLL_S = 0.005
GONE_BOUND_S = 20.0
DEFAULT_BOUND_S = 300.0
TAG_VAR = "MCPFLEET_TEST_ID"

# Snapshot before anything here can touch the environment: the servers get
# exactly this plus the tag.
BASE_ENV = dict(os.environ)
SELF_PID = os.getpid()

result: dict = {
    "n": None,
    "timeouts": None,
    "timeout_values": None,
    "ready": 0,
    "failed": 0,
    "first_error": None,
    "init_ms": None,
    "tools": 0,
    "tools_ms": None,
    "teardown_ms": None,
    "left_after_cleanup": None,
    "left": None,
    "killed": 0,
    "peak_rss_kb": None,
    # Extras, beyond the fields the benchmark reads.
    "cleanup_ms": None,
    "tools_failed": 0,
    "cleanup_errors": 0,
    "peer": None,
    "bound_hit": False,
}
_emit_lock = threading.Lock()
_emitted = False


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(exc: BaseException) -> str:
    """One line for an exception, reaching into exception groups for a cause."""
    inner = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    text = f"{type(inner).__name__}: {inner}" if str(inner) else type(inner).__name__
    if inner is not exc:
        text = f"{type(exc).__name__} > {text}"
    return short(text)


def note_error(text: str) -> None:
    if result["first_error"] is None:
        result["first_error"] = short(text)


def _write(data: dict) -> None:
    """Prints the JSON line; the caller holds _emit_lock and checked _emitted."""
    global _emitted
    _emitted = True
    try:
        data["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except Exception:
        pass
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def emit() -> None:
    """Prints the JSON line, once, whoever calls first."""
    with _emit_lock:
        if not _emitted:
            _write(dict(result))


# --- /proc -----------------------------------------------------------------


def carries_tag(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return entry in data.split(b"\0")


def scan(entry: bytes) -> set[int]:
    """Every live process but this one whose environment holds the entry."""
    found = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            pid = int(name)
            if pid != SELF_PID and carries_tag(pid, entry):
                found.add(pid)
    return found


def still_alive(pids: set[int], entry: bytes) -> set[int]:
    return {pid for pid in pids if carries_tag(pid, entry)}


def kill_all(entry: bytes) -> int:
    """SIGKILLs every tagged process, a few passes in case any spawns more."""
    killed: set[int] = set()
    for _ in range(5):
        pids = scan(entry)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.05)
    return len(killed)


# --- arguments -------------------------------------------------------------


def parse_args(argv: list[str]) -> dict:
    if "--" not in argv:
        raise ValueError("usage: --n N --timeouts default|raised [--tag TAG] [--bound S] -- COMMAND [ARGS...]")
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1 :]
    if not command:
        raise ValueError("no command after --")
    args = {"n": None, "timeouts": None, "tag": "bench-peer", "bound": DEFAULT_BOUND_S, "command": command}
    i = 0
    while i < len(opts):
        key = opts[i]
        if key not in ("--n", "--timeouts", "--tag", "--bound") or i + 1 >= len(opts):
            raise ValueError(f"bad argument: {key}")
        value = opts[i + 1]
        i += 2
        if key == "--n":
            args["n"] = int(value)
            if args["n"] < 1:
                raise ValueError("--n must be at least 1")
        elif key == "--timeouts":
            if value not in ("default", "raised"):
                raise ValueError("--timeouts must be default or raised")
            args["timeouts"] = value
        elif key == "--tag":
            if not value or "\0" in value:
                raise ValueError("bad --tag")
            args["tag"] = value
        else:
            args["bound"] = float(value)
    if args["n"] is None or args["timeouts"] is None:
        raise ValueError("--n and --timeouts are required")
    return args


# --- the run ---------------------------------------------------------------


def fixed_transport_timeouts() -> dict:
    """The stdio transport's shutdown grace periods, read from the installed mcp."""
    try:
        from mcp.client import stdio as mcp_stdio
    except Exception:
        return {}
    names = {
        "stdio_process_termination_s": "PROCESS_TERMINATION_TIMEOUT",
        "stdio_force_kill_s": "FORCE_KILL_TIMEOUT",
        "stdio_kill_reap_s": "_KILL_REAP_TIMEOUT",
        "stdio_writer_flush_s": "_WRITER_FLUSH_TIMEOUT",
    }
    return {key: getattr(mcp_stdio, attr) for key, attr in names.items() if hasattr(mcp_stdio, attr)}


async def run(args: dict) -> None:
    entry = f"{TAG_VAR}={args['tag']}".encode()

    from agents.mcp import MCPServerManager, MCPServerStdio

    try:
        from agents import set_tracing_disabled

        set_tracing_disabled(True)
    except Exception:
        pass

    env = dict(BASE_ENV)
    env[TAG_VAR] = args["tag"]
    server_kwargs: dict = {}
    manager_kwargs: dict = {}
    if args["timeouts"] == "raised":
        server_kwargs["client_session_timeout_seconds"] = RAISED_S
        manager_kwargs["connect_timeout_seconds"] = RAISED_S
        manager_kwargs["cleanup_timeout_seconds"] = RAISED_S

    servers = [
        MCPServerStdio(
            {"command": args["command"][0], "args": list(args["command"][1:]), "env": env},
            name=f"s{i}",
            **server_kwargs,
        )
        for i in range(args["n"])
    ]
    manager = MCPServerManager(servers, connect_in_parallel=True, **manager_kwargs)
    # What the objects actually hold, defaults included.
    result["timeout_values"] = {
        "client_session_timeout_seconds": servers[0].client_session_timeout_seconds,
        "connect_timeout_seconds": manager.connect_timeout_seconds,
        "cleanup_timeout_seconds": manager.cleanup_timeout_seconds,
        "fixed": fixed_transport_timeouts(),
    }

    # (a) connect.
    t = time.monotonic()
    try:
        await manager.__aenter__()
    except BaseException as exc:  # noqa: BLE001 - everything is a result here
        note_error(f"connect: {describe(exc)}")
    result["init_ms"] = ms(time.monotonic() - t)
    active = manager.active_servers
    failed = manager.failed_servers
    errors = manager.errors
    result["ready"] = len(active)
    result["failed"] = len(failed)
    for server in failed:
        if server in errors:
            result["first_error"] = describe(errors[server])
            break

    # (b) list tools on every server that came up, all at once.
    if active:
        t = time.monotonic()
        try:
            lists = await asyncio.gather(*(s.list_tools() for s in active), return_exceptions=True)
        except BaseException as exc:  # noqa: BLE001
            lists = [exc]
        result["tools_ms"] = ms(time.monotonic() - t)
        for tools in lists:
            if isinstance(tools, BaseException):
                result["tools_failed"] += 1
                note_error(f"list_tools: {describe(tools)}")
            else:
                result["tools"] += len(tools)

    # (c) teardown: the manager's exit, then until no tagged process is left.
    before = dict(manager.errors)
    t = time.monotonic()
    try:
        await manager.__aexit__(None, None, None)
    except BaseException as exc:  # noqa: BLE001
        result["cleanup_errors"] += 1
        note_error(f"cleanup: {describe(exc)}")
    returned = time.monotonic()
    result["cleanup_ms"] = ms(returned - t)
    for server, exc in manager.errors.items():
        if before.get(server) is not exc:
            result["cleanup_errors"] += 1
            note_error(f"cleanup: {describe(exc)}")

    alive = scan(entry)
    result["left_after_cleanup"] = len(alive)
    gone_at = returned
    deadline = returned + GONE_BOUND_S
    while True:
        if alive:
            alive = still_alive(alive, entry)
        if not alive:
            # The ones we knew of are gone; make sure nothing else is.
            alive = scan(entry)
            if not alive:
                gone_at = time.monotonic() if result["left_after_cleanup"] else returned
                break
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL_S)
    if alive:
        result["left"] = len(alive)
        result["teardown_ms"] = None
        result["killed"] = kill_all(entry)
        note_error(f"teardown: {len(alive)} process(es) alive {GONE_BOUND_S:.0f} s after cleanup, SIGKILLed")
    else:
        result["left"] = 0
        result["teardown_ms"] = ms(gone_at - t)


def watchdog(bound: float, entry: bytes) -> None:
    """The last resort: past the bound, kill, report and leave.

    It holds the output lock from the moment it fires, so the main thread,
    which may still finish once the servers are killed, cannot print a line
    that hides the bound being hit."""
    time.sleep(bound)
    try:
        with _emit_lock:
            if not _emitted:
                # The main thread goes on while the servers are killed (and
                # would record their deaths as its own results): report what
                # had been measured when the bound hit.
                data = dict(result)
                earlier = data["first_error"]
                data["first_error"] = short(
                    f"overall bound of {bound:.0f} s hit; tagged processes SIGKILLed"
                    + (f" | before: {earlier}" if earlier else "")
                )
                data["bound_hit"] = True
                data["left"] = len(scan(entry))
                data["killed"] = kill_all(entry)
                _write(data)
    finally:
        os._exit(0)


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        args = parse_args(sys.argv[1:])
    except Exception as exc:  # noqa: BLE001
        result["first_error"] = short(f"arguments: {exc}")
        emit()
        return
    result["n"] = args["n"]
    result["timeouts"] = args["timeouts"]
    try:
        from importlib.metadata import version

        result["peer"] = f"openai-agents {version('openai-agents')}"
    except Exception:
        pass
    entry = f"{TAG_VAR}={args['tag']}".encode()
    threading.Thread(target=watchdog, args=(args["bound"], entry), daemon=True).start()
    try:
        asyncio.run(run(args))
    except BaseException as exc:  # noqa: BLE001
        note_error(f"run: {describe(exc)}")
        # Something broke before or during teardown: leave nothing behind.
        if result["left"] is None:
            alive = scan(entry)
            result["left"] = len(alive)
            if alive:
                result["killed"] = kill_all(entry)
    emit()


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:  # noqa: BLE001
        note_error(f"main: {describe(exc)}")
        emit()
    sys.stdout.flush()
    # Nothing left to wait for: skip interpreter shutdown, which could block on
    # a stray non-daemon thread of the library.
    os._exit(0)
