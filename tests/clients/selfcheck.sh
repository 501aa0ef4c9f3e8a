#!/usr/bin/env bash
# Checks client.py (Python SDK) and client.mjs (TypeScript SDK) for real: each against the
# published server-everything and against fixture_server.mjs, over stdio and over streamable
# HTTP, then a session ended by the end of stdin, one ended by SIGTERM, and connections that
# fail (401, 403, no such command). selfcheck.py drives each run and checks every answer.
# A developer's check, not part of CI; needs .ci/install-servers to have run.
# Prints one line per run (and one per failed check); exits non-zero on any failure.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="$root/.cache/venv/bin/python"
everything="$root/.cache/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
token=selfcheck-token
origin=http://selfcheck.example

work="$(mktemp -d)"
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

everything_port=$(free_port)
PORT=$everything_port node "$everything" streamableHttp >"$work/everything.log" 2>&1 &
servers+=($!)
fixture_port=$(free_port)
FIXTURE_TOKEN=$token FIXTURE_ORIGIN=$origin node "$here/fixture_server.mjs" http "$fixture_port" >"$work/fixture.log" 2>&1 &
servers+=($!)
if ! wait_port "$everything_port" || ! wait_port "$fixture_port"; then
  echo "the HTTP servers did not start"
  exit 1
fi
everything_url="http://127.0.0.1:$everything_port/mcp"
fixture_url="http://127.0.0.1:$fixture_port/mcp"

echo "python client: mcp $("$py" -c 'from importlib.metadata import version; print(version("mcp"))')," \
  "typescript client: @modelcontextprotocol/sdk $(node -p "require('$root/.cache/npm/node_modules/@modelcontextprotocol/sdk/package.json').version")"

failed=0
run() { "$py" "$here/selfcheck.py" "$@" || failed=1; }
for sdk in python typescript; do
  case $sdk in
    python) client=("$py" "$here/client.py") ;;
    typescript) client=(node "$here/client.mjs") ;;
  esac
  run $sdk everything -- "${client[@]}" --stdio node "$everything" stdio
  run $sdk everything -- "${client[@]}" --http "$everything_url" --token "$token" --origin "$origin"
  run $sdk fixture -- "${client[@]}" --stdio node "$here/fixture_server.mjs" stdio
  run $sdk fixture --server-log "$work/fixture.log" -- "${client[@]}" --http "$fixture_url" --token "$token" --origin "$origin"
  run $sdk eof -- "${client[@]}" --stdio node "$here/fixture_server.mjs" stdio
  run $sdk eof --server-log "$work/fixture.log" -- "${client[@]}" --http "$fixture_url" --token "$token"
  run $sdk signal -- "${client[@]}" --stdio node "$everything" stdio
  run $sdk refused --expect-status 401 -- "${client[@]}" --http "$fixture_url" --token wrong-token
  run $sdk refused --expect-status 401 -- "${client[@]}" --http "$fixture_url"
  run $sdk refused --expect-status 403 -- "${client[@]}" --http "$fixture_url" --token "$token" --origin http://elsewhere.example
  run $sdk refused -- "${client[@]}" --stdio "$work/no-such-server"
done

left=$(ps -eo pid=,args= | grep -F -e "$everything stdio" -e "$here/fixture_server.mjs stdio" | grep -v -e grep -e selfcheck)
if [[ -n $left ]]; then
  echo "FAILED: stdio servers still running:"
  echo "$left"
  failed=1
else
  echo "ok     no stdio server process left running"
fi
exit $failed
