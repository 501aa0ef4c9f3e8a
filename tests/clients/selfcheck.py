"""Drives client.py or client.mjs through one scenario and checks every answer (see selfcheck.sh).

    selfcheck.py SDK SCENARIO [--server-log FILE] [--expect-status N] -- CLIENT_COMMAND...

SDK is python or typescript (it names the sampling answer to expect); SCENARIO is one of
everything, fixture, eof, signal, refused (see the functions of those names). Prints one
line per failed check and a summary line; the exit status is 1 if any check failed.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

SDK_NAMES = {"python": "python-sdk", "typescript": "typescript-sdk"}
expect_status: int | None = None  # --expect-status, for the refused scenario


class Checks:
    def __init__(self, label: str) -> None:
        self.label = label
        self.passed = 0
        self.failed = 0

    def __call__(self, condition: Any, what: str, detail: Any = None) -> bool:
        if condition:
            self.passed += 1
        else:
            self.failed += 1
            suffix = f": {json.dumps(detail)[:400]}" if detail is not None else ""
            print(f"  FAIL {self.label}: {what}{suffix}", flush=True)
        return bool(condition)


class Client:
    """One client process: commands in on stdin, answers out on stdout, stderr to a file."""

    def __init__(self, argv: list[str]) -> None:
        self.stderr = tempfile.NamedTemporaryFile("w+", prefix="selfcheck-", suffix=".stderr")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.buffer = b""
        self.children: list[int] = []

    def read(self, timeout: float = 30) -> dict[str, Any] | None:
        """The next line of output as JSON; None at the end of the output or after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def ask(self, command: dict[str, Any] | str, timeout: float = 30) -> dict[str, Any]:
        line = command if isinstance(command, str) else json.dumps(command)
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self.read(timeout) or {"ok": None, "error": {"message": "no answer"}}

    def note_children(self) -> None:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True)
        self.children = [int(pid) for pid in out.stdout.split()]

    def wait(self, timeout: float = 15) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def check_no_children_left(client: Client, check: Checks) -> None:
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in client.children) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in client.children if alive(pid)]
    check(not left, "no child process left after the client exited", left)


def text_of(answer: dict[str, Any]) -> str:
    content = (answer.get("result") or {}).get("content") or []
    return "\n".join(block.get("text", "") for block in content)


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item.get("name") for item in items]


def connect(client: Client, check: Checks, server_name: str) -> bool:
    hello = client.read(timeout=60) or {}
    check(hello.get("ok") is True and hello.get("event") == "initialized", "initialized", hello)
    check((hello.get("server_info") or {}).get("name") == server_name, "server_info.name", hello.get("server_info"))
    check(isinstance(hello.get("protocol_version"), str), "protocol_version", hello.get("protocol_version"))
    check("tools" in (hello.get("capabilities") or {}), "capabilities.tools", hello.get("capabilities"))
    client.note_children()
    return hello.get("ok") is True


def close(client: Client, check: Checks) -> None:
    answer = client.ask({"op": "close", "id": "bye"})
    check(answer == {"ok": True, "closed": True, "id": "bye"}, "close", answer)
    check(client.wait() == 0, "exit status 0 after close", client.proc.returncode)
    check_no_children_left(client, check)


def cancel_a_call(client: Client, check: Checks, name: str, arguments: dict[str, Any]) -> None:
    """Start a call with progress, wait for its first progress, cancel it."""
    client.ask({"op": "wait_notification", "method": "notifications/progress", "timeout_ms": 100})  # reset
    start = {"op": "call_start", "handle": "h1", "name": name, "arguments": arguments, "progress": True, "id": 5}
    check(client.ask(start) == {"ok": True, "started": "h1", "id": 5}, "call_start")
    got = client.ask({"op": "wait_notification", "method": "notifications/progress", "timeout_ms": 10000})
    check(got.get("ok") is True and got.get("count", 0) >= 1, "progress before the cancel", got)
    answer = client.ask({"op": "call_cancel", "handle": "h1"})
    check(answer == {"ok": True, "cancelled": "h1", "in_flight": True}, "call_cancel", answer)
    answer = client.ask({"op": "call_await", "handle": "h1"})
    check(answer.get("ok") is False and answer.get("cancelled") is True, "call_await after cancel", answer)
    check(len(answer.get("progress", [])) >= 1, "progress of the cancelled call", answer.get("progress"))


def bad_commands(client: Client, check: Checks) -> None:
    answer = client.ask("this is not JSON")
    check(answer.get("ok") is False and answer["error"].get("message"), "not JSON", answer)
    answer = client.ask({"op": "bogus", "id": 7})
    check(answer.get("ok") is False and answer.get("id") == 7, "unknown op", answer)
    answer = client.ask({"op": "call", "id": "x"})
    check(answer.get("ok") is False and "name" in answer["error"].get("message", ""), "call without name", answer)
    answer = client.ask({"op": "call_await", "handle": "nope"})
    check(answer.get("ok") is False, "call_await of an unknown handle", answer)


# ---------------------------------------------------------------- scenarios


def everything(client: Client, check: Checks, sdk: str, transport: str, server_log: str | None) -> None:
    """The published server-everything: tools, progress, cancellation, sampling, elicitation, roots."""
    if not connect(client, check, "mcp-servers/everything"):
        return
    check(client.ask({"op": "ping", "id": 1}) == {"ok": True, "id": 1}, "ping")
    tools = client.ask({"op": "list_tools"})
    wanted = {"echo", "get-sum", "trigger-long-running-operation", "trigger-sampling-request", "get-roots-list"}
    check(tools.get("ok") and wanted <= set(names(tools.get("tools", []))), "list_tools", tools)
    check(tools.get("pages", 0) >= 1 and all("inputSchema" in t for t in tools.get("tools", [])), "tool shapes")

    answer = client.ask({"op": "call", "name": "echo", "arguments": {"message": "hi"}, "id": 2})
    check(answer.get("ok") and text_of(answer) == "Echo: hi" and answer.get("id") == 2, "call echo", answer)
    answer = client.ask({"op": "call", "name": "get-sum", "arguments": {"a": 2, "b": 3}})
    check(answer.get("ok") and "5" in text_of(answer), "call get-sum", answer)

    long_op = {"op": "call", "name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}}
    answer = client.ask({**long_op, "progress": True})
    progress = answer.get("progress", [])
    check(answer.get("ok") and "completed" in text_of(answer), "call with progress", answer)
    # The TypeScript SDK may drop the last one when it arrives together with the result (see README).
    check(len(progress) >= 3 and all(p.get("total") == 4 for p in progress), "progress notifications", progress)
    check([p["progress"] for p in progress] == list(range(1, len(progress) + 1)), "progress in order", progress)
    answer = client.ask({**long_op, "arguments": {"duration": 3, "steps": 3}, "timeout_ms": 500})
    check(answer.get("ok") is False and answer.get("error", {}).get("code") == -32001, "call timing out", answer)

    cancel_a_call(client, check, "trigger-long-running-operation", {"duration": 30, "steps": 30})

    answer = client.ask({"op": "call", "name": "trigger-sampling-request", "arguments": {"prompt": "hello"}})
    check(f"sampled by {SDK_NAMES[sdk]}" in text_of(answer), "sampling answered by the client", answer)
    answer = client.ask({"op": "call", "name": "trigger-elicitation-request", "arguments": {}})
    check(answer.get("ok") and '"accept"' in text_of(answer), "elicitation accepted", answer)
    answer = client.ask({"op": "call", "name": "get-roots-list", "arguments": {}})
    check("file:///tmp" in text_of(answer), "roots listed by the client", answer)

    prompts = client.ask({"op": "list_prompts"})
    check(prompts.get("ok") and {"simple-prompt", "args-prompt"} <= set(names(prompts.get("prompts", []))), "list_prompts", prompts)
    answer = client.ask({"op": "get_prompt", "name": "args-prompt", "arguments": {"city": "Paris"}})
    check(answer.get("ok") and "Paris" in json.dumps(answer.get("result")), "get_prompt", answer)
    resources = client.ask({"op": "list_resources"})
    check(resources.get("ok") and len(resources.get("resources", [])) >= 1, "list_resources", resources)
    templates = client.ask({"op": "list_resource_templates"})
    check(templates.get("ok") and len(templates.get("resourceTemplates", [])) >= 1, "list_resource_templates", templates)
    answer = client.ask({"op": "read_resource", "uri": "demo://resource/dynamic/text/1"})
    check(answer.get("ok") and "Resource 1" in json.dumps(answer.get("result")), "read_resource", answer)

    check(client.ask({"op": "set_level", "level": "debug"}) == {"ok": True}, "set_level")
    uri = "demo://resource/dynamic/text/1"
    check(client.ask({"op": "subscribe", "uri": uri}) == {"ok": True}, "subscribe")
    # The server logs each subscribe at info.
    deadline = time.monotonic() + 10
    logged: list[Any] = []
    while not logged and time.monotonic() < deadline:
        client.ask({"op": "wait_notification", "method": "notifications/message", "timeout_ms": 1000})
        params = client.ask({"op": "notifications"}).get("params", {}).get("notifications/message", [])
        logged = [m for m in params if uri in str(m.get("data"))]
    check(logged and logged[0].get("level") == "info", "the params of notifications/message", logged)
    check(client.ask({"op": "unsubscribe", "uri": uri}) == {"ok": True}, "unsubscribe")

    counts = client.ask({"op": "requests"}).get("counts", {})
    check(counts.get("sampling/createMessage") == 1 and counts.get("elicitation/create") == 1, "requests", counts)
    check(counts.get("roots/list", 0) >= 1, "roots/list requested", counts)
    counts = client.ask({"op": "notifications"}).get("counts", {})
    check(counts.get("notifications/progress", 0) >= 4, "notifications counted", counts)
    if transport == "stdio":
        # Over HTTP the server sends this one before the client has its GET stream: it is lost.
        got = client.ask({"op": "wait_notification", "method": "notifications/tools/list_changed", "timeout_ms": 3000})
        check(got.get("ok") and got.get("count", 0) >= 1, "tools/list_changed after initialize", got)
    bad_commands(client, check)
    close(client, check)


def fixture(client: Client, check: Checks, sdk: str, transport: str, server_log: str | None) -> None:
    """The fixture server: pagination, list_changed, structured content, errors, cancellation seen by the server."""
    if not connect(client, check, "mcpfleet-client-fixture"):
        return
    expected = {"list_tools": ("tools", 7, 4), "list_prompts": ("prompts", 3, 2),
                "list_resources": ("resources", 5, 3), "list_resource_templates": ("resourceTemplates", 3, 2)}
    for op, (key, count, pages) in expected.items():
        answer = client.ask({"op": op})
        check(len(answer.get(key, [])) == count and answer.get("pages") == pages, f"{op}: {count} items in {pages} pages", answer)
    tools = client.ask({"op": "list_tools"}).get("tools", [])
    check([t for t in tools if t["name"] == "add" and "outputSchema" in t], "outputSchema listed", tools)

    answer = client.ask({"op": "call", "name": "add", "arguments": {"a": 2, "b": 3}})
    check(answer.get("ok") and answer["result"].get("structuredContent") == {"sum": 5}, "structured content", answer)
    answer = client.ask({"op": "call", "name": "fail", "arguments": {}})
    error = answer.get("error", {})
    check(answer.get("ok") is False and error.get("code") == -32042 and error.get("data") == {"detail": "on purpose"}, "JSON-RPC error", answer)

    cancel_a_call(client, check, "slow", {})
    time.sleep(0.3)
    log = open(server_log).read() if server_log else client.stderr_text()
    check("fixture: cancelled request" in log, "the server saw notifications/cancelled", log[-400:])

    check(client.ask({"op": "call", "name": "change_lists"}).get("ok"), "call change_lists")
    for kind in ("tools", "prompts", "resources", "tools"):  # the second tools one comes later, on its own
        method = f"notifications/{kind}/list_changed"
        got = client.ask({"op": "wait_notification", "method": method, "timeout_ms": 5000})
        check(got == {"ok": True, "method": method, "count": 1}, f"wait_notification {kind}", got)
    got = client.ask({"op": "wait_notification", "method": "notifications/tools/list_changed", "timeout_ms": 300})
    check(got == {"ok": False, "error": {"message": "timeout"}}, "wait_notification timeout", got)
    counts = client.ask({"op": "notifications"}).get("counts", {})
    check(counts.get("notifications/tools/list_changed") == 2, "notifications", counts)

    answer = client.ask({"op": "get_prompt", "name": "second", "arguments": {"x": "1"}})
    check(answer.get("ok") and "prompt second" in json.dumps(answer.get("result")), "get_prompt", answer)
    answer = client.ask({"op": "read_resource", "uri": "fixture://resource/3"})
    check(answer.get("result", {}).get("contents", [{}])[0].get("text") == "contents of fixture://resource/3", "read_resource", answer)
    counts = client.ask({"op": "requests"}).get("counts")
    check(set(counts or {}) == {"roots/list", "sampling/createMessage", "elicitation/create"}, "requests", counts)
    deletes = deletes_in(server_log)
    close(client, check)
    if transport == "http":
        time.sleep(0.3)
        check(deletes_in(server_log) == deletes + 1, "close sent DELETE", open(server_log).read()[-300:])


def deletes_in(server_log: str | None) -> int:
    return open(server_log).read().count("ended by DELETE") if server_log else 0


def eof(client: Client, check: Checks, sdk: str, transport: str, server_log: str | None) -> None:
    """The end of stdin closes the session without an answer."""
    if not connect(client, check, "mcpfleet-client-fixture"):
        return
    deletes = deletes_in(server_log)
    client.proc.stdin.close()
    check(client.wait() == 0, "exit status 0 at the end of stdin", client.proc.returncode)
    check(client.read(timeout=1) is None and not client.buffer, "no answer at the end of stdin")
    check_no_children_left(client, check)
    if transport == "http":
        time.sleep(0.3)
        check(deletes_in(server_log) == deletes + 1, "end of stdin sent DELETE")


def stop_signal(client: Client, check: Checks, sdk: str, transport: str, server_log: str | None) -> None:
    """SIGTERM closes the session like the end of stdin (server-everything ignores the end of its stdin)."""
    if not connect(client, check, "mcp-servers/everything"):
        return
    check(client.children, "the server is a child of the client", client.children)
    client.proc.send_signal(signal.SIGTERM)
    check(client.wait() == 0, "exit status 0 after SIGTERM", client.proc.returncode)
    check_no_children_left(client, check)


def refused(client: Client, check: Checks, sdk: str, transport: str, server_log: str | None) -> None:
    """A connection that fails: one ok:false line with the expected HTTP status, if any, and exit status 1."""
    hello = client.read(timeout=60) or {}
    error = hello.get("error") or {}
    check(hello.get("ok") is False and hello.get("event") == "initialized" and error.get("message"), "ok:false", hello)
    check(error.get("http_status") == expect_status, f"http_status {expect_status}", error)
    check(client.wait() == 1, "exit status 1", client.proc.returncode)


SCENARIOS: dict[str, Callable[..., None]] = {
    "everything": everything, "fixture": fixture, "eof": eof, "signal": stop_signal, "refused": refused,
}


def main(argv: list[str]) -> int:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    sdk, scenario = options[0], options[1]
    server_log = options[options.index("--server-log") + 1] if "--server-log" in options else None
    if "--expect-status" in options:
        global expect_status
        expect_status = int(options[options.index("--expect-status") + 1])
    transport = "http" if "--http" in command else "stdio"
    if expect_status is not None:
        scenario_label = f"{scenario} {expect_status}"
    else:
        scenario_label = scenario
    check = Checks(f"{sdk} {scenario_label} {transport}")
    client = Client(command)
    try:
        SCENARIOS[scenario](client, check, sdk, transport, server_log)
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            check(False, "the client was still running at the end")
    verdict = "ok" if check.failed == 0 else "FAILED"
    print(f"{verdict:6} {sdk:10} {transport:5} {scenario_label:14} {check.passed} checks passed, {check.failed} failed", flush=True)
    if check.failed:
        print("  client stderr (end):\n    " + client.stderr_text()[-1500:].replace("\n", "\n    "))
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
