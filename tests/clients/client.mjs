// A scripted MCP client built on the official TypeScript SDK (npm @modelcontextprotocol/sdk).
//
// Connects to one MCP server, prints one JSON line once initialized, then answers
// JSON commands read one per line on stdin with one JSON line each, in order.
// The command line and the protocol are described in README.md beside this file;
// client.py speaks the same protocol on the official Python SDK.
//
//     node client.mjs --stdio CMD [ARGS...]
//     node client.mjs --http URL [--token TOKEN] [--origin ORIGIN]
//
// The SDK is loaded from the project's cache (.cache/npm, see .ci/install-servers),
// or from the package directory named by MCP_TS_SDK_DIR.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SDK_DIR =
  process.env.MCP_TS_SDK_DIR ??
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../../.cache/npm/node_modules/@modelcontextprotocol/sdk');
const sdk = (file) => import(pathToFileURL(path.join(SDK_DIR, 'dist/esm', file)).href);

const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { StreamableHTTPClientTransport, StreamableHTTPError } = await sdk('client/streamableHttp.js');
const { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, McpError } = await sdk('types.js');
const SDK_VERSION = JSON.parse(readFileSync(path.join(SDK_DIR, 'package.json'), 'utf8')).version;

const SDK_NAME = 'typescript-sdk';
const ROOTS = [{ uri: 'file:///tmp', name: 'tmp' }];
const SERVER_REQUESTS = ['roots/list', 'sampling/createMessage', 'elicitation/create'];
// For initialize and for each request without a timeout_ms of its own (the SDK's default).
const TIMEOUT_MS = Number(process.env.MCP_CLIENT_TIMEOUT_MS ?? 60000);
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'];
const USAGE = 'usage: client.mjs --stdio CMD [ARGS...] | --http URL [--token TOKEN] [--origin ORIGIN]';

// ---------------------------------------------------------------- command line

function parseArgs(argv) {
  if (argv.length >= 2 && argv[0] === '--stdio') {
    return { command: argv.slice(1) };
  }
  if (argv.length >= 2 && argv[0] === '--http') {
    const target = { url: argv[1], headers: {} };
    for (let rest = argv.slice(2); rest.length > 0; rest = rest.slice(2)) {
      if (rest.length < 2 || !['--token', '--origin'].includes(rest[0])) usage();
      if (rest[0] === '--token') target.headers.Authorization = `Bearer ${rest[1]}`;
      else target.headers.Origin = rest[1];
    }
    return target;
  }
  usage();
}

function usage() {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------- JSON helpers

function emit(answer) {
  return new Promise((resolve) => process.stdout.write(`${JSON.stringify(answer)}\n`, resolve));
}

function errorOf(error) {
  if (error instanceof McpError) {
    // The SDK prefixes the server's message with "MCP error <code>: "; give it back as sent.
    const message = error.message.replace(/^MCP error -?\d+: /, '');
    return error.data === undefined
      ? { code: error.code, message }
      : { code: error.code, message, data: error.data };
  }
  const cause = error?.cause ? ` (${error.cause.code ?? error.cause.message ?? error.cause})` : '';
  return { message: `${error?.message ?? error}${cause}`, type: error?.name ?? typeof error };
}

const isNotification = (message) => message && 'method' in message && !('id' in message);

// ---------------------------------------------------------------- the client

class MissingField extends Error {}

function need(command, field) {
  if (!(field in command)) throw new MissingField(`missing field: ${field}`);
  return command[field];
}

class Harness {
  constructor(target) {
    this.target = target;
    this.client = null;
    this.transport = null;
    this.protocolVersion = null;
    this.stoppedBy = null; // the name of the signal that ended the session
    this.transportClosed = null; // settles when the transport has closed (stdio: the server has exited)
    this.httpStatus = null; // last HTTP error status seen (>= 400)
    this.notifications = {}; // all received, by method
    this.params = { 'notifications/message': [], 'notifications/resources/updated': [] }; // their params, in order
    this.unclaimed = {}; // since the last wait_notification, by method
    this.waiters = new Set(); // wake-ups for wait_notification
    this.requests = Object.fromEntries(SERVER_REQUESTS.map((method) => [method, 0]));
    this.calls = new Map(); // handle -> { controller, done, answer }
    this.ops = {
      list_tools: this.opList('tools', (params) => this.client.listTools(params, { timeout: TIMEOUT_MS })),
      list_prompts: this.opList('prompts', (params) => this.client.listPrompts(params, { timeout: TIMEOUT_MS })),
      list_resources: this.opList('resources', (params) => this.client.listResources(params, { timeout: TIMEOUT_MS })),
      list_resource_templates: this.opList('resourceTemplates', (params) =>
        this.client.listResourceTemplates(params, { timeout: TIMEOUT_MS }),
      ),
      get_prompt: (command) => this.opGetPrompt(command),
      read_resource: (command) => this.opReadResource(command),
      complete: (command) => this.opComplete(command),
      call: (command) => this.opCall(command),
      call_start: (command) => this.opCallStart(command),
      call_await: (command) => this.opCallAwait(command),
      call_cancel: (command) => this.opCallCancel(command),
      wait_notification: (command) => this.opWaitNotification(command),
      notifications: async () => ({ ok: true, counts: { ...this.notifications }, params: structuredClone(this.params) }),
      set_level: async (command) => (
        await this.client.setLoggingLevel(need(command, 'level'), { timeout: TIMEOUT_MS }), { ok: true }
      ),
      subscribe: async (command) => (
        await this.client.subscribeResource({ uri: need(command, 'uri') }, { timeout: TIMEOUT_MS }), { ok: true }
      ),
      unsubscribe: async (command) => (
        await this.client.unsubscribeResource({ uri: need(command, 'uri') }, { timeout: TIMEOUT_MS }), { ok: true }
      ),
      ping: async () => (await this.client.ping({ timeout: TIMEOUT_MS }), { ok: true }),
      requests: async () => ({ ok: true, counts: { ...this.requests } }),
    };
  }

  // -- connecting

  makeTransport() {
    if (this.target.command) {
      const [command, ...args] = this.target.command;
      // The server gets this client's whole environment, and its stderr.
      return new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
    }
    const noteStatus = async (url, init) => {
      const response = await fetch(url, init);
      if (response.status >= 400) this.httpStatus = response.status;
      return response;
    };
    return new StreamableHTTPClientTransport(new URL(this.target.url), {
      requestInit: { headers: this.target.headers },
      fetch: noteStatus,
    });
  }

  async connect() {
    this.transport = this.makeTransport();
    // Client.connect keeps the onmessage and onclose set beforehand and calls them first.
    this.transport.onmessage = (message) => {
      if (isNotification(message)) this.onNotification(message.method, message.params); // count every notification
    };
    this.transportClosed = new Promise((resolve) => (this.transport.onclose = resolve));
    // The client hands the negotiated version to a transport that takes it (HTTP does, stdio does not).
    const setProtocolVersion = this.transport.setProtocolVersion?.bind(this.transport);
    this.transport.setProtocolVersion = (version) => {
      this.protocolVersion = version;
      setProtocolVersion?.(version);
    };
    this.client = new Client(
      { name: `mcpfleet-tests-${SDK_NAME}`, version: SDK_VERSION },
      { capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } } },
    );
    this.client.onerror = (error) => process.stderr.write(`client.mjs: ${errorOf(error).message}\n`);
    this.client.setRequestHandler(ListRootsRequestSchema, () => this.onListRoots());
    this.client.setRequestHandler(CreateMessageRequestSchema, () => this.onSampling());
    this.client.setRequestHandler(ElicitRequestSchema, () => this.onElicitation());
    await this.client.connect(this.transport, { timeout: TIMEOUT_MS });
  }

  initialized() {
    return {
      ok: true,
      event: 'initialized',
      server_info: this.client.getServerVersion() ?? null,
      capabilities: this.client.getServerCapabilities() ?? null,
      protocol_version: this.protocolVersion,
    };
  }

  connectFailed(error) {
    if (this.stoppedBy) {
      return { ok: false, event: 'initialized', error: { code: null, message: `stopped by ${this.stoppedBy}`, http_status: null } };
    }
    const status = error instanceof StreamableHTTPError && error.code > 0 ? error.code : this.httpStatus;
    return { ok: false, event: 'initialized', error: { code: null, ...errorOf(error), http_status: status } };
  }

  async close() {
    for (const call of this.calls.values()) call.controller.abort('client closing');
    if (this.transport instanceof StreamableHTTPClientTransport) {
      // The SDK's close only drops the connection; ending the session is a DELETE of its own.
      await this.transport.terminateSession().catch(() => {});
    }
    await this.client.close(); // stdio: ends the server's stdin, then SIGTERM, then SIGKILL
  }

  // -- what the server sends

  onListRoots() {
    this.requests['roots/list'] += 1;
    return { roots: ROOTS };
  }

  onSampling() {
    this.requests['sampling/createMessage'] += 1;
    return {
      role: 'assistant',
      content: { type: 'text', text: `sampled by ${SDK_NAME}` },
      model: SDK_NAME,
      stopReason: 'endTurn',
    };
  }

  onElicitation() {
    this.requests['elicitation/create'] += 1;
    return { action: 'accept', content: {} };
  }

  onNotification(method, params) {
    if (Object.hasOwn(this.params, method)) this.params[method].push(params ?? null);
    this.notifications[method] = (this.notifications[method] ?? 0) + 1;
    this.unclaimed[method] = (this.unclaimed[method] ?? 0) + 1;
    for (const wake of this.waiters) wake();
  }

  // -- commands

  async answer(line) {
    let command;
    try {
      command = JSON.parse(line);
    } catch (error) {
      return { ok: false, error: { message: `not JSON: ${error.message}` } };
    }
    if (command === null || typeof command !== 'object' || Array.isArray(command)) {
      return { ok: false, error: { message: 'a command is a JSON object' } };
    }
    const op = Object.hasOwn(this.ops, command.op) ? this.ops[command.op] : null;
    let answer;
    if (!op) {
      answer = { ok: false, error: { message: `unknown op: ${JSON.stringify(command.op)}` } };
    } else {
      try {
        answer = await op(command);
      } catch (error) {
        answer = { ok: false, error: error instanceof MissingField ? { message: error.message } : errorOf(error) };
      }
    }
    if ('id' in command) answer.id = command.id;
    return answer;
  }

  // An op listing every page of one kind: `key` in the answer and in each page.
  opList(key, listPage) {
    return async () => {
      const items = [];
      let pages = 0;
      let cursor;
      do {
        const page = await listPage(cursor === undefined ? undefined : { cursor });
        pages += 1;
        items.push(...page[key]);
        cursor = page.nextCursor;
      } while (cursor);
      return { ok: true, [key]: items, pages };
    };
  }

  async opGetPrompt(command) {
    const params = { name: need(command, 'name'), arguments: command.arguments };
    const result = await this.client.getPrompt(params, { timeout: TIMEOUT_MS });
    return { ok: true, result };
  }

  async opComplete(command) {
    const result = await this.client.complete(
      { ref: need(command, 'ref'), argument: need(command, 'argument') },
      { timeout: TIMEOUT_MS },
    );
    return { ok: true, completion: result.completion };
  }

  async opReadResource(command) {
    return { ok: true, result: await this.client.readResource({ uri: need(command, 'uri') }, { timeout: TIMEOUT_MS }) };
  }

  async opCall(command, signal) {
    const params = { name: need(command, 'name'), arguments: command.arguments ?? {} };
    const progress = [];
    const options = { signal, timeout: command.timeout_ms || TIMEOUT_MS };
    if (command.progress) {
      options.onprogress = ({ progress: value, total, message }) =>
        progress.push({ progress: value, total: total ?? null, message: message ?? null });
    }
    try {
      const result = await this.client.callTool(params, undefined, options);
      return { ok: true, result, progress };
    } catch (error) {
      if (signal?.aborted) {
        return { ok: false, cancelled: true, error: { message: 'cancelled by the client' }, progress };
      }
      return { ok: false, error: errorOf(error), progress };
    }
  }

  async opCallStart(command) {
    const handle = need(command, 'handle');
    if (this.calls.has(handle)) return { ok: false, error: { message: `handle in use: ${handle}` } };
    need(command, 'name');
    const call = { controller: new AbortController(), answer: null };
    call.done = this.opCall(command, call.controller.signal).then((answer) => {
      call.answer = answer;
    });
    this.calls.set(handle, call);
    return { ok: true, started: handle };
  }

  async opCallAwait(command) {
    const handle = need(command, 'handle');
    const call = this.calls.get(handle);
    if (!call) return { ok: false, error: { message: `no such handle: ${handle}` } };
    this.calls.delete(handle);
    await call.done;
    return { ...call.answer };
  }

  async opCallCancel(command) {
    const handle = need(command, 'handle');
    const call = this.calls.get(handle);
    if (!call) return { ok: false, error: { message: `no such handle: ${handle}` } };
    const inFlight = call.answer === null;
    // Aborting the request's signal makes the SDK send notifications/cancelled.
    call.controller.abort('cancelled by the client');
    await call.done;
    return { ok: true, cancelled: handle, in_flight: inFlight };
  }

  async opWaitNotification(command) {
    const method = need(command, 'method');
    const timeoutMs = command.timeout_ms ?? 5000;
    if (!this.unclaimed[method]) {
      await new Promise((resolve) => {
        const finish = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        const wake = () => this.unclaimed[method] && finish();
        const timer = setTimeout(finish, timeoutMs);
        this.waiters.add(wake);
      });
    }
    const count = this.unclaimed[method] ?? 0;
    delete this.unclaimed[method];
    return count ? { ok: true, method, count } : { ok: false, error: { message: 'timeout' } };
  }
}

// ---------------------------------------------------------------- main loop

// Answers commands until `close` (returned) or the end of stdin (null).
async function serve(harness, lines) {
  for await (const line of lines) {
    if (!line.trim()) continue;
    const close = asClose(line);
    if (close) return close;
    await emit(await harness.answer(line));
  }
  return null;
}

function asClose(line) {
  try {
    const command = JSON.parse(line);
    return command?.op === 'close' ? command : null;
  } catch {
    return null;
  }
}

async function main(argv) {
  const harness = new Harness(parseArgs(argv));
  process.on('unhandledRejection', (error) => process.stderr.write(`client.mjs: ${errorOf(error).message}\n`));
  // A signal, or a reader of stdout gone, ends the session like the end of stdin; while
  // connecting, it abandons the connection.
  let stop = (why) => {
    harness.stoppedBy = why;
    harness.client?.close().catch(() => {});
  };
  for (const name of STOP_SIGNALS) process.on(name, () => stop(name));
  process.stdout.on('error', () => stop('a closed stdout'));
  try {
    await harness.connect();
  } catch (error) {
    await emit(harness.connectFailed(error));
    // The SDK may already be closing on its own (then this returns at once): wait for the
    // transport to report closed, so that a stdio server has exited before this process does.
    await harness.client?.close().catch(() => {});
    await harness.transportClosed;
    return 1;
  }
  await emit(harness.initialized());

  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  stop = () => harness.close().finally(() => process.exit(0)); // without waiting for a command in progress
  const close = await serve(harness, lines);
  await harness.close();
  if (close) await emit('id' in close ? { ok: true, closed: true, id: close.id } : { ok: true, closed: true });
  return 0;
}

process.exit(await main(process.argv.slice(2)));
