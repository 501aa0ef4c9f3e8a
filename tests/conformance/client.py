"""mcpfleet as the client under test of the MCP conformance suite's client mode.

The suite starts a scenario server and runs this script with the server's URL as
the last argument, the scenario's name in MCP_CONFORMANCE_SCENARIO and, for some
scenarios, what to do in MCP_CONFORMANCE_CONTEXT (JSON). The script writes a fleet
of one remote server at that URL, starts it with `mcpfleet up`, and then does what
the scenario asks through the gateway: an official Python SDK client (PyPI `mcp`)
speaks to `mcpfleet connect` over stdio, and mcpfleet, as the client of the
scenario server, carries each request on. It ends with `mcpfleet down`.

    python client.py URL

For an OAuth scenario (`auth/*`) the server gets an `auth:` first: `oauth`, with
the pre-registered client the scenario's context names, or for the
client-credentials extension `client_credentials`. `mcpfleet login --no-browser`
then prints the authorization URL; the script opens it as a browser would (the
suite's authorization server redirects at once to mcpfleet's loopback listener),
and goes on once the login ends.

Environment: MCPFLEET_BIN (the binary; default `mcpfleet`); MCPFLEET_EXIT_FILE, a
file this script writes its exit status to. Exit status: 0 when every step was
answered, 1 otherwise (the suite's checks decide the verdict).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

SERVER = "s"


# The client ID metadata document the suite's `auth/basic-cimd` expects (a
# constant of the suite; the document itself is never fetched).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
SECRET_VAR = "MCPFLEET_CONFORMANCE_CLIENT_SECRET"


def auth_block(scenario: str, context: dict[str, Any]) -> str:
    """The server's `auth:` for an OAuth scenario, as YAML lines."""
    if not scenario.startswith("auth/"):
        return ""
    if scenario.startswith("auth/client-credentials"):
        return (
            "    auth:\n"
            "      client_credentials:\n"
            f"        client_id: {json.dumps(context.get('client_id', ''))}\n"
            f"        client_secret: ${{env:{SECRET_VAR}}}\n"
        )
    lines = ["    auth:", "      oauth:"]
    if context.get("client_id"):
        lines.append(f"        client_id: {json.dumps(context['client_id'])}")
        if context.get("client_secret"):
            lines.append(f"        client_secret: ${{env:{SECRET_VAR}}}")
        if context.get("issuer"):
            lines.append(f"        issuer: {json.dumps(context['issuer'])}")
    if scenario == "auth/basic-cimd":
        lines.append(f"        client_metadata_url: {CIMD_URL}")
    if len(lines) == 2:
        lines[1] = "      oauth: {}"
    return "\n".join(lines) + "\n"


def fleet_file(directory: Path, url: str, scenario: str, context: dict[str, Any]) -> Path:
    path = directory / "fleet.yaml"
    # `prefix: ""`: the gateway shows the scenario server's names unchanged.
    path.write_text(
        "version: 1\n"
        "servers:\n"
        f"  {SERVER}:\n"
        f"    url: {json.dumps(url)}\n"
        '    prefix: ""\n' + auth_block(scenario, context)
    )
    return path


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def browse(url: str) -> None:
    """What a browser does with the authorization URL: follows the
    authorization server's redirect to the loopback listener."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(url, timeout=20)
        return
    except urllib.error.HTTPError as e:
        location = e.headers.get("Location")
        if not (300 <= e.code < 400 and location):
            raise
    with urllib.request.urlopen(location, timeout=20) as answer:
        answer.read()


def login(base: list[str]) -> int:
    """`mcpfleet login --no-browser`, completed by `browse`."""
    proc = subprocess.Popen(
        [*base, "login", "--no-browser", "--timeout", "25s", SERVER],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        sys.stderr.write(line)
        marker = f"open this URL to authorize {SERVER}: "
        if line.startswith(marker):
            try:
                browse(line[len(marker) :].strip())
            except Exception as e:  # noqa: BLE001 - the login says what came of it
                print(f"client.py: opening the authorization URL: {e!r}", file=sys.stderr)
    return proc.wait()


def defaults_of(schema: dict[str, Any]) -> dict[str, Any]:
    """What a form fills in by itself: each property's `default`."""
    properties = schema.get("properties") or {}
    return {name: p["default"] for name, p in properties.items() if isinstance(p, dict) and "default" in p}


async def on_elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    if not isinstance(schema, dict):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    return types.ElicitResult(action="accept", content=defaults_of(schema))


async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled"),
        model="conformance",
        stop_reason="endTurn",
    )


async def on_roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp", name="tmp")])


# How many times a step is tried again after a login it asked for (a scope the
# grant lacks, a grant the server no longer takes).
RELOGINS = 2


async def relogging(base: list[str], step: Any) -> Any:
    """`step()`, and once more after each `mcpfleet login` its failure asks for."""
    for attempt in range(RELOGINS + 1):
        try:
            return await step()
        except Exception as e:  # noqa: BLE001 - only an authorization failure is retried
            if not base or attempt == RELOGINS or "mcpfleet login" not in str(e):
                raise
            print(f"client.py: {e}; logging in again", file=sys.stderr)
            if await anyio.to_thread.run_sync(login, base) != 0:
                raise


async def drive(command: list[str], scenario: str, context: dict[str, Any], base: list[str]) -> None:
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(
        server,
        mode="legacy",
        elicitation_callback=on_elicitation,
        sampling_callback=on_sampling,
        list_roots_callback=on_roots,
        cache=None,
    ) as client:
        tools = (await relogging(base, client.list_tools)).tools
        names = [t.name for t in tools]
        calls: list[tuple[str, dict[str, Any]]] = []
        if context.get("toolCalls"):
            calls = [(c["name"], c.get("arguments") or {}) for c in context["toolCalls"]]
        elif scenario == "tools_call":
            calls = [("add_numbers", {"a": 1, "b": 2})]
        elif scenario == "json-schema-2020-12-preservation":
            # The focal tool's schema, as the gateway listed it, goes back
            # verbatim: the scenario server compares it with what it sent.
            focal = next(t for t in tools if t.name == "json_schema_2020_12_tool")
            calls = [("json_schema_echo", {"schema": focal.input_schema})]
        elif scenario not in ("initialize", "request-metadata"):
            # Every tool the scenario offers, with no arguments: the scenario
            # server decides what each call shows.
            calls = [(name, {}) for name in names]
        for name, arguments in calls:
            result = await relogging(base, lambda: client.call_tool(name, arguments))
            if getattr(result, "is_error", False) and "mcpfleet login" in str(result):
                raise RuntimeError(str(result))
        if scenario == "http-standard-headers":
            resources = (await client.list_resources()).resources
            for resource in resources[:1]:
                await client.read_resource(resource.uri)
            prompts = (await client.list_prompts()).prompts
            for prompt in prompts[:1]:
                await client.get_prompt(prompt.name, {})


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: client.py [ARGS...] URL", file=sys.stderr)
        return 2
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    binary = os.environ.get("MCPFLEET_BIN", "mcpfleet")
    if context.get("client_secret"):
        os.environ[SECRET_VAR] = context["client_secret"]
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        fleet = fleet_file(directory, url, scenario, context)
        base = [binary, "-f", str(fleet), "--state-dir", str(directory / "state")]
        try:
            oauth = scenario.startswith("auth/") and not scenario.startswith("auth/client-credentials")
            if oauth and login(base) != 0:
                return 1
            up = subprocess.run([*base, "up"], check=False, capture_output=True, text=True)
            for _ in range(RELOGINS if oauth else 0):
                if up.returncode == 0 or "mcpfleet login" not in up.stdout:
                    break
                if login(base) != 0:
                    return 1
                up = subprocess.run([*base, "up"], check=False, capture_output=True, text=True)
            sys.stderr.write(up.stdout + up.stderr)
            if up.returncode != 0:
                return 1
            anyio.run(drive, [*base, "connect"], scenario, context, base if oauth else [])
            return 0
        except Exception as e:  # noqa: BLE001 - the verdict is the suite's; say what failed
            print(f"client.py: {scenario}: {e!r}", file=sys.stderr)
            return 1
        finally:
            subprocess.run([*base, "down"], check=False, stdout=subprocess.DEVNULL)


def main_recorded() -> int:
    code = main()
    exit_file = os.environ.get("MCPFLEET_EXIT_FILE")
    if exit_file:
        Path(exit_file).write_text(f"{code}\n")
    return code


if __name__ == "__main__":
    sys.exit(main_recorded())
