"""A scripted MCP client built on the official Python SDK (PyPI `mcp`).

Connects to one MCP server, prints one JSON line once initialized, then answers
JSON commands read one per line on stdin with one JSON line each, in order.
The command line and the protocol are described in README.md beside this file;
client.mjs speaks the same protocol on the official TypeScript SDK.

    python client.py [--mode MODE] [--log-level LEVEL] --stdio CMD [ARGS...]
    python client.py [--mode MODE] [--log-level LEVEL] --http URL [--token TOKEN] [--origin ORIGIN]

MODE is the SDK's `Client(mode=...)`: `legacy` (the default: the `initialize`
handshake), `auto` (probe with `server/discover`, else `initialize`), or a modern
protocol version such as `2026-07-28` (adopted without any probe: per-request `_meta`).
LEVEL is the SDK's `Client(log_level=...)`: a modern client's requests carry it in
`_meta`, and the log messages it brings are kept like any other.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, NoReturn

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import Client, MCPError, StdioServerParameters
from mcp_types.version import LATEST_MODERN_VERSION
from mcp.client.streamable_http import streamable_http_client

SDK_NAME = "python-sdk"
ROOTS = [types.Root(uri="file:///tmp", name="tmp")]
PAGE_HINTS = ("ttlMs", "cacheScope", "resultType")  # a list page's fields beside its items
SERVER_REQUESTS = ("roots/list", "sampling/createMessage", "elicitation/create")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # each ends the session like the end of stdin
# For initialize and for each request without a timeout_ms of its own (the TypeScript SDK's default)
TIMEOUT_MS = int(os.environ.get("MCP_CLIENT_TIMEOUT_MS", "60000"))
USAGE = "usage: client.py [--mode MODE] [--log-level LEVEL] (--stdio CMD [ARGS...] | --http URL [--token TOKEN] [--origin ORIGIN])"


# ---------------------------------------------------------------- command line


@dataclass
class Target:
    command: list[str] | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    mode: str = "legacy"
    log_level: str | None = None


def parse_args(argv: list[str]) -> Target:
    mode = "legacy"
    log_level = None
    while len(argv) >= 2 and argv[0] in ("--mode", "--log-level"):
        if argv[0] == "--mode":
            mode = argv[1]
        else:
            log_level = argv[1]
        argv = argv[2:]
    if len(argv) >= 2 and argv[0] == "--stdio":
        return Target(command=argv[1:], mode=mode, log_level=log_level)
    if len(argv) >= 2 and argv[0] == "--http":
        target = Target(url=argv[1], mode=mode, log_level=log_level)
        rest = argv[2:]
        while rest:
            if len(rest) < 2 or rest[0] not in ("--token", "--origin"):
                usage()
            name, value, rest = rest[0], rest[1], rest[2:]
            if name == "--token":
                target.headers["Authorization"] = f"Bearer {value}"
            else:
                target.headers["Origin"] = value
        return target
    usage()


def usage() -> NoReturn:
    print(USAGE, file=sys.stderr)
    raise SystemExit(2)


# ---------------------------------------------------------------- JSON helpers


def emit(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(whole_numbers(answer), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def whole_numbers(value: Any) -> Any:
    """`value` with every whole float as an integer: pydantic writes a float field's 1 as 1.0
    (progress values, priorities...), the TypeScript SDK writes 1, and JSON tells them apart no more."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def dump(model: Any) -> Any:
    """A result model as the JSON the server sent (wire names, no fields the SDK defaulted)."""
    return model.model_dump(by_alias=True, mode="json", exclude_unset=True)


def leaf_exception(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def error_of(exc: BaseException) -> dict[str, Any]:
    exc = leaf_exception(exc)
    if isinstance(exc, MCPError):
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return error
    return {"message": str(exc) or type(exc).__name__, "type": type(exc).__name__}


# ---------------------------------------------------------------- the client


class MissingField(Exception):
    pass


def need(command: dict[str, Any], name: str) -> Any:
    if name not in command:
        raise MissingField(f"missing field: {name}")
    return command[name]



@dataclass
class PendingCall:
    """A tools/call started by call_start: its cancel scope and, once done, its answer."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    progress: list[dict[str, Any]] = field(default_factory=list)
    answer: dict[str, Any] | None = None


@dataclass
class OpenListen:
    """A subscriptions/listen stream opened by listen: its cancel scope, what it honoured, the events it heard."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    acked: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    heard: anyio.Event = field(default_factory=anyio.Event)
    honored: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None


def event_of(event: Any) -> dict[str, Any]:
    """A listen stream's event: its kind (the SDK's class name) and, for an update, its URI."""
    uri = getattr(event, "uri", None)
    return {"event": type(event).__name__, **({"uri": uri} if uri is not None else {})}


class Harness:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.client: Client | None = None
        self.connected = False
        self.stopped_by: str | None = None  # the name of the signal that ended the session
        self.http_status: int | None = None  # last HTTP error status seen (>= 400)
        self.notifications: Counter[str] = Counter()  # all received
        # the params of these, in the order they came
        self.params: dict[str, list[Any]] = {"notifications/message": [], "notifications/resources/updated": []}
        self.unclaimed: Counter[str] = Counter()  # since the last wait_notification per method
        self.notified = anyio.Event()
        self.requests: Counter[str] = Counter({method: 0 for method in SERVER_REQUESTS})
        self.sampled: list[dict[str, str | None]] = []  # the numbers of each sampling request, as repr()
        self.calls: dict[str, PendingCall] = {}
        self.listens: dict[str, OpenListen] = {}
        self.task_group: anyio.abc.TaskGroup | None = None
        self.ops: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "list_tools": self.op_list("tools", "list_tools", "tools"),
            "list_prompts": self.op_list("prompts", "list_prompts", "prompts"),
            "list_resources": self.op_list("resources", "list_resources", "resources"),
            "list_resource_templates": self.op_list(
                "resourceTemplates", "list_resource_templates", "resource_templates"
            ),
            "get_prompt": self.op_get_prompt,
            "read_resource": self.op_read_resource,
            "complete": self.op_complete,
            "call": self.op_call,
            "call_start": self.op_call_start,
            "call_await": self.op_call_await,
            "call_cancel": self.op_call_cancel,
            "wait_notification": self.op_wait_notification,
            "notifications": self.op_notifications,
            "ping": self.op_ping,
            "discover": self.op_discover,
            "set_level": self.op_set_level,
            "roots_changed": self.op_roots_changed,
            "subscribe": self.op_subscribe,
            "unsubscribe": self.op_unsubscribe,
            "requests": self.op_requests,
            "sampled": self.op_sampled,
            "listen": self.op_listen,
            "listen_events": self.op_listen_events,
            "listen_close": self.op_listen_close,
        }

    # -- connecting

    async def connect(self, stack: AsyncExitStack) -> Client:
        if self.target.command is not None:
            server: Any = StdioServerParameters(
                command=self.target.command[0],
                args=self.target.command[1:],
                env=dict(os.environ),  # the server gets this client's whole environment
            )
        else:
            http = httpx2.AsyncClient(
                headers=self.target.headers,
                timeout=httpx2.Timeout(30, read=300),  # the SDK's own client's timeouts
                event_hooks={"response": [self.note_http_status]},
            )
            await stack.enter_async_context(http)
            server = streamable_http_client(self.target.url, http_client=http)
        client = Client(
            server,
            client_info=types.Implementation(name=f"mcpfleet-tests-{SDK_NAME}", version=version("mcp")),
            list_roots_callback=self.on_list_roots,
            sampling_callback=self.on_sampling,
            elicitation_callback=self.on_elicitation,
            message_handler=self.on_message,
            cache=None,  # every list and read goes to the server
            mode=self.target.mode,
            log_level=self.target.log_level,
            read_timeout_seconds=TIMEOUT_MS / 1000,
        )
        self.client = await stack.enter_async_context(client)
        return self.client

    async def note_http_status(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.http_status = response.status_code

    def initialized(self, client: Client) -> dict[str, Any]:
        return {
            "ok": True,
            "event": "initialized",
            "server_info": dump(client.server_info) if client.server_info else None,
            "capabilities": dump(client.server_capabilities),
            "protocol_version": client.protocol_version,
        }

    def connect_failed(self, exc: BaseException) -> dict[str, Any]:
        error = error_of(exc)
        error.setdefault("code", None)
        error["http_status"] = self.http_status
        return {"ok": False, "event": "initialized", "error": error}

    # -- what the server sends

    async def on_list_roots(self, context: Any) -> types.ListRootsResult:
        self.requests["roots/list"] += 1
        return types.ListRootsResult(roots=ROOTS)

    async def on_sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.requests["sampling/createMessage"] += 1
        prefs = params.model_preferences
        priority = lambda name: repr(getattr(prefs, name)) if prefs is not None else None  # noqa: E731
        self.sampled.append({
            "temperature": repr(params.temperature),
            "costPriority": priority("cost_priority"),
            "speedPriority": priority("speed_priority"),
            "intelligencePriority": priority("intelligence_priority"),
        })
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled by {SDK_NAME}"),
            model=SDK_NAME,
            stop_reason="endTurn",
        )

    async def on_elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.requests["elicitation/create"] += 1
        return types.ElicitResult(action="accept", content={})

    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            print(f"client.py: transport error: {message!r}", file=sys.stderr)
            return
        method = getattr(message, "method", None)
        if method:
            if method in self.params:
                params = getattr(message, "params", None)
                self.params[method].append(dump(params) if params is not None else None)
            self.notifications[method] += 1
            self.unclaimed[method] += 1
            self.notified.set()
            self.notified = anyio.Event()

    # -- commands

    async def answer(self, line: str) -> dict[str, Any]:
        try:
            command = json.loads(line)
        except ValueError as exc:
            return {"ok": False, "error": {"message": f"not JSON: {exc}"}}
        if not isinstance(command, dict):
            return {"ok": False, "error": {"message": "a command is a JSON object"}}
        op = self.ops.get(command.get("op"))
        if op is None:
            answer: dict[str, Any] = {"ok": False, "error": {"message": f"unknown op: {command.get('op')!r}"}}
        else:
            try:
                answer = await op(command)
            except MissingField as exc:
                answer = {"ok": False, "error": {"message": str(exc)}}
            except Exception as exc:
                answer = {"ok": False, "error": error_of(exc)}
        if "id" in command:
            answer["id"] = command["id"]
        return answer

    def op_list(self, key: str, method: str, field: str) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        """An op listing every page of one kind: `key` in the answer, `Client.<method>`, `<page>.<field>`."""

        async def list_all(command: dict[str, Any]) -> dict[str, Any]:
            list_page = getattr(self.client, method)
            items: list[Any] = []
            pages, cursor, hints = 0, None, []
            while True:
                page = await list_page(cursor=cursor)
                pages += 1
                items.extend(dump(item) for item in getattr(page, field))
                # What each page said of itself beside its items, as sent
                wire = dump(page)
                hints.append({name: wire[name] for name in PAGE_HINTS if name in wire})
                cursor = page.next_cursor
                if not cursor:
                    return {"ok": True, key: items, "pages": pages, "hints": hints}

        return list_all

    async def op_get_prompt(self, command: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.get_prompt(need(command, "name"), command.get("arguments"))
        return {"ok": True, "result": dump(result)}

    async def op_read_resource(self, command: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.read_resource(need(command, "uri"))
        return {"ok": True, "result": dump(result)}

    async def op_complete(self, command: dict[str, Any]) -> dict[str, Any]:
        ref, argument = need(command, "ref"), need(command, "argument")
        if ref.get("type") == "ref/prompt":
            reference: Any = types.PromptReference(type="ref/prompt", name=ref["name"])
        else:
            reference = types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"])
        result = await self.client.complete(reference, argument)
        return {"ok": True, "completion": dump(result.completion)}

    async def op_call(self, command: dict[str, Any], progress: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        name, arguments = need(command, "name"), command.get("arguments") or {}
        progress = [] if progress is None else progress

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append({"progress": value, "total": total, "message": message})

        timeout_ms = command.get("timeout_ms")
        try:
            result = await self.client.call_tool(
                name,
                arguments,
                read_timeout_seconds=timeout_ms / 1000 if timeout_ms else None,
                progress_callback=on_progress if command.get("progress") else None,
            )
        except Exception as exc:
            return {"ok": False, "error": error_of(exc), "progress": progress}
        await anyio.sleep(0)  # let progress callbacks already spawned by the SDK run
        return {"ok": True, "result": dump(result), "progress": progress}

    async def op_call_start(self, command: dict[str, Any]) -> dict[str, Any]:
        handle = need(command, "handle")
        need(command, "name")
        if handle in self.calls:
            return {"ok": False, "error": {"message": f"handle in use: {handle}"}}
        pending = self.calls[handle] = PendingCall()

        async def run() -> None:
            with pending.scope:
                pending.answer = await self.op_call(command, pending.progress)
            if pending.answer is None:
                pending.answer = {
                    "ok": False,
                    "cancelled": True,
                    "error": {"message": "cancelled by the client"},
                    "progress": pending.progress,
                }
            pending.done.set()

        self.task_group.start_soon(run)
        return {"ok": True, "started": handle}

    async def op_call_await(self, command: dict[str, Any]) -> dict[str, Any]:
        handle = need(command, "handle")
        pending = self.calls.pop(handle, None)
        if pending is None:
            return {"ok": False, "error": {"message": f"no such handle: {handle}"}}
        await pending.done.wait()
        return dict(pending.answer)

    async def op_call_cancel(self, command: dict[str, Any]) -> dict[str, Any]:
        handle = need(command, "handle")
        pending = self.calls.get(handle)
        if pending is None:
            return {"ok": False, "error": {"message": f"no such handle: {handle}"}}
        in_flight = not pending.done.is_set()
        # The SDK sends notifications/cancelled when the awaiting task is cancelled.
        pending.scope.cancel()
        await pending.done.wait()
        return {"ok": True, "cancelled": handle, "in_flight": in_flight}

    async def op_wait_notification(self, command: dict[str, Any]) -> dict[str, Any]:
        method = need(command, "method")
        timeout_ms = command.get("timeout_ms", 5000)
        with anyio.move_on_after(timeout_ms / 1000):
            while not self.unclaimed[method]:
                await self.notified.wait()
        count = self.unclaimed.pop(method, 0)
        if not count:
            return {"ok": False, "error": {"message": "timeout"}}
        return {"ok": True, "method": method, "count": count}

    async def op_notifications(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "counts": dict(self.notifications), "params": json.loads(json.dumps(self.params))}

    async def op_set_level(self, command: dict[str, Any]) -> dict[str, Any]:
        await self.client.set_logging_level(need(command, "level"))
        return {"ok": True}

    async def op_roots_changed(self, command: dict[str, Any]) -> dict[str, Any]:
        await self.client.send_roots_list_changed()
        return {"ok": True}

    async def op_subscribe(self, command: dict[str, Any]) -> dict[str, Any]:
        await self.client.subscribe_resource(need(command, "uri"))
        return {"ok": True}

    async def op_unsubscribe(self, command: dict[str, Any]) -> dict[str, Any]:
        await self.client.unsubscribe_resource(need(command, "uri"))
        return {"ok": True}

    async def op_ping(self, command: dict[str, Any]) -> dict[str, Any]:
        await self.client.session.send_ping()
        return {"ok": True}

    async def op_discover(self, command: dict[str, Any]) -> dict[str, Any]:
        """One `server/discover` on the wire (the SDK's `discover()` may answer from what it adopted)."""
        version = command.get("version") or LATEST_MODERN_VERSION
        return {"ok": True, "result": await self.client.session.send_discover(version)}

    async def op_listen(self, command: dict[str, Any]) -> dict[str, Any]:
        """Open a subscriptions/listen stream under `handle`; answered once it is acknowledged."""
        handle = need(command, "handle")
        if handle in self.listens:
            return {"ok": False, "error": {"message": f"handle in use: {handle}"}}
        listening = self.listens[handle] = OpenListen()

        async def run() -> None:
            with listening.scope:
                try:
                    async with self.client.listen(
                        tools_list_changed=bool(command.get("tools_list_changed")),
                        prompts_list_changed=bool(command.get("prompts_list_changed")),
                        resources_list_changed=bool(command.get("resources_list_changed")),
                        resource_subscriptions=command.get("resource_subscriptions") or (),
                    ) as sub:
                        listening.honored = dump(sub.honored)
                        listening.acked.set()
                        async for event in sub:
                            listening.events.append(event_of(event))
                            listening.heard.set()
                            listening.heard = anyio.Event()
                except Exception as exc:
                    listening.error = error_of(exc)
            listening.acked.set()
            listening.done.set()
            listening.heard.set()

        self.task_group.start_soon(run)
        await listening.acked.wait()
        if listening.error is not None:
            self.listens.pop(handle, None)
            return {"ok": False, "error": listening.error}
        return {"ok": True, "honored": listening.honored}

    async def op_listen_events(self, command: dict[str, Any]) -> dict[str, Any]:
        """The events stream `handle` heard, once it heard `count` (default 1) or `timeout_ms` passed."""
        listening = self.listens.get(need(command, "handle"))
        if listening is None:
            return {"ok": False, "error": {"message": "no such handle"}}
        count = command.get("count", 1)
        with anyio.move_on_after(command.get("timeout_ms", 5000) / 1000):
            while len(listening.events) < count and not listening.done.is_set():
                await listening.heard.wait()
        return {"ok": True, "events": list(listening.events), "ended": listening.done.is_set(), "error": listening.error}

    async def op_listen_close(self, command: dict[str, Any]) -> dict[str, Any]:
        """Close stream `handle` (over HTTP its response stream closes; over stdio notifications/cancelled)."""
        listening = self.listens.pop(need(command, "handle"), None)
        if listening is None:
            return {"ok": False, "error": {"message": "no such handle"}}
        listening.scope.cancel()
        await listening.done.wait()
        return {"ok": True, "events": listening.events}

    async def op_requests(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "counts": dict(self.requests)}

    async def op_sampled(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "sampled": self.sampled}


# ---------------------------------------------------------------- main loop


def stdin_lines() -> MemoryObjectReceiveStream[str]:
    """The lines of stdin, read by a daemon thread: waiting for one can be cancelled, and never delays the exit."""
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        try:
            for line in sys.stdin:
                anyio.from_thread.run_sync(send.send_nowait, line, token=token)
            anyio.from_thread.run_sync(send.close, token=token)
        except RuntimeError:
            pass  # the event loop has ended

    threading.Thread(target=pump, name="stdin", daemon=True).start()
    return receive


async def serve(harness: Harness, lines: MemoryObjectReceiveStream[str]) -> dict[str, Any] | None:
    """Answer commands until `close` (returned) or the end of stdin (None)."""
    async for line in lines:
        if not line.strip():
            continue
        close = _as_close(line)
        if close is not None:
            return close
        emit(await harness.answer(line))
    return None


def _as_close(line: str) -> dict[str, Any] | None:
    try:
        command = json.loads(line)
    except ValueError:
        return None
    return command if isinstance(command, dict) and command.get("op") == "close" else None


async def session(harness: Harness) -> int:
    """Connect, answer commands, close; the exit status."""
    async with AsyncExitStack() as stack:
        try:
            client = await harness.connect(stack)
        except Exception as exc:
            emit(harness.connect_failed(exc))
            return 1
        harness.connected = True
        emit(harness.initialized(client))
        async with anyio.create_task_group() as calls:
            harness.task_group = calls
            close = await serve(harness, stdin_lines())
            calls.cancel_scope.cancel()  # calls still in flight end with the session
    # Leaving the stack closed the session: a DELETE over HTTP; over stdio the server's stdin
    # was closed, then the SDK waited for it to exit, then ended its process group.
    if close is not None:
        emit({"ok": True, "closed": True, **({"id": close["id"]} if "id" in close else {})})
    return 0


async def stop_on_signal(harness: Harness, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            harness.stopped_by = signal.Signals(signum).name
            scope.cancel()
            return


async def main(argv: list[str]) -> int:
    harness = Harness(parse_args(argv))
    status = 0
    async with anyio.create_task_group() as guard:
        guard.start_soon(stop_on_signal, harness, guard.cancel_scope)
        try:
            status = await session(harness)
        except Exception as exc:
            print(f"client.py: {error_of(exc)['message']}", file=sys.stderr)
        guard.cancel_scope.cancel()
    if harness.stopped_by and not harness.connected:
        error = {"code": None, "message": f"stopped by {harness.stopped_by}", "http_status": None}
        emit({"ok": False, "event": "initialized", "error": error})
        return 1
    return status


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
