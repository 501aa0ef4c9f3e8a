// A scripted MCP client built on the official TypeScript SDK 2.x (npm
// @modelcontextprotocol/client), which speaks both protocol eras: the 2025 one
// (`initialize`) and 2026-07-28 (per-request `_meta`, input-required results,
// `subscriptions/listen`).
//
// Connects to one MCP server, prints one JSON line once connected, then answers
// JSON commands read one per line on stdin with one JSON line each, in order. The
// command line and the protocol are those of client.py (README.md beside this file),
// where this SDK has them:
//
//     node client2.mjs [--mode MODE] [--log-level LEVEL] --stdio CMD [ARGS...]
//     node client2.mjs [--mode MODE] [--log-level LEVEL] --http URL [--token TOKEN] [--origin ORIGIN]
//
// MODE is the SDK's `versionNegotiation.mode`: `legacy` (the default), `auto`, or a
// version to pin (`2026-07-28`). LEVEL goes into each request's `_meta` on a
// 2026-07-28 connection (the SDK has no option of its own for it).
//
// The SDK is loaded from the project's cache (.cache/ts-sdk2, see .ci/install-servers),
// or from the node_modules directory named by MCP_TS_SDK2_DIR.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const MODULES =
  process.env.MCP_TS_SDK2_DIR ??
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../../.cache/ts-sdk2/node_modules');
const PACKAGE = path.join(MODULES, '@modelcontextprotocol/client');
const sdk = (file) => import(pathToFileURL(path.join(PACKAGE, 'dist', file)).href);

const { Client, StreamableHTTPClientTransport, ProtocolError, SdkHttpError, LOG_LEVEL_META_KEY, SUBSCRIPTION_ID_META_KEY } =
  await sdk('index.mjs');
const { StdioClientTransport } = await sdk('stdio.mjs');
const SDK_VERSION = JSON.parse(readFileSync(path.join(PACKAGE, 'package.json'), 'utf8')).version;

const SDK_NAME = 'typescript-sdk-2';
const ROOTS = [{ uri: 'file:///tmp', name: 'tmp' }];
const SERVER_REQUESTS = ['roots/list', 'sampling/createMessage', 'elicitation/create'];
const PAGE_HINTS = ['ttlMs', 'cacheScope', 'resultType'];
// For connecting and for each request without a timeout_ms of its own (the SDK's default).
const TIMEOUT_MS = Number(process.env.MCP_CLIENT_TIMEOUT_MS ?? 60000);
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'];
const USAGE =
  'usage: client2.mjs [--mode MODE] [--log-level LEVEL] (--stdio CMD [ARGS...] | --http URL [--token TOKEN] [--origin ORIGIN])';
// What a listen stream hears, by method, under the names client.py gives (the Python SDK's classes).
const EVENTS = {
  'notifications/tools/list_changed': 'ToolsListChanged',
  'notifications/prompts/list_changed': 'PromptsListChanged',
  'notifications/resources/list_changed': 'ResourcesListChanged',
  'notifications/resources/updated': 'ResourceUpdated',
};

// ---------------------------------------------------------------- command line

function parseArgs(argv) {
  let mode = 'legacy';
  let logLevel = null;
  while (argv.length >= 2 && ['--mode', '--log-level'].includes(argv[0])) {
    if (argv[0] === '--mode') mode = argv[1];
    else logLevel = argv[1];
    argv = argv.slice(2);
  }
  if (argv.length >= 2 && argv[0] === '--stdio') {
    return { mode, logLevel, command: argv.slice(1) };
  }
  if (argv.length >= 2 && argv[0] === '--http') {
    const target = { mode, logLevel, url: argv[1], headers: {} };
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
  if (error instanceof ProtocolError) {
    // The SDK prefixes the server's message with "MCP error <code>: "; give it back as sent.
    const message = error.message.replace(/^MCP error -?\d+: /, '');
    return error.data === undefined ? { code: error.code, message } : { code: error.code, message, data: error.data };
  }
  const cause = error?.cause ? ` (${error.cause.code ?? error.cause.message ?? error.cause})` : '';
  return { message: `${error?.message ?? error}${cause}`, type: error?.name ?? typeof error, sdk_code: error?.code };
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
    this.stoppedBy = null; // the name of the signal that ended the session
    this.transportClosed = null; // settles when the transport has closed (stdio: the server has exited)
    this.httpStatus = null; // last HTTP error status seen (>= 400)
    this.notifications = {}; // all received, by method
    this.params = { 'notifications/message': [], 'notifications/resources/updated': [] }; // their params, in order
    this.unclaimed = {}; // since the last wait_notification, by method
    this.waiters = new Set(); // wake-ups for wait_notification and listen_events
    this.requests = Object.fromEntries(SERVER_REQUESTS.map((method) => [method, 0]));
    this.sent = {}; // requests sent on the wire, by method
    this.lastListenId = null; // the id of the last subscriptions/listen sent
    this.listens = new Map(); // handle -> { id, subscription, events, ended }
    this.calls = new Map(); // handle -> { controller, done, answer }
    const list = (key, method) => this.opList(key, method);
    this.ops = {
      list_tools: list('tools', 'listTools'),
      list_prompts: list('prompts', 'listPrompts'),
      list_resources: list('resources', 'listResources'),
      list_resource_templates: list('resourceTemplates', 'listResourceTemplates'),
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
        await this.client.subscribeResource(this.withLevel({ uri: need(command, 'uri') }), { timeout: TIMEOUT_MS }), { ok: true }
      ),
      unsubscribe: async (command) => (
        await this.client.unsubscribeResource(this.withLevel({ uri: need(command, 'uri') }), { timeout: TIMEOUT_MS }),
        { ok: true }
      ),
      listen: (command) => this.opListen(command),
      listen_events: (command) => this.opListenEvents(command),
      listen_close: (command) => this.opListenClose(command),
      ping: async () => (await this.client.ping({ timeout: TIMEOUT_MS }), { ok: true }),
      discover: async () => ({ ok: true, result: await this.client.discover({ timeout: TIMEOUT_MS }) }),
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
    const send = this.transport.send.bind(this.transport);
    this.transport.send = (message, options) => {
      if (message && 'method' in message && 'id' in message) {
        this.sent[message.method] = (this.sent[message.method] ?? 0) + 1;
        if (message.method === 'subscriptions/listen') this.lastListenId = message.id;
      }
      return send(message, options);
    };
    const mode = this.target.mode;
    this.client = new Client(
      { name: `mcpfleet-tests-${SDK_NAME}`, version: SDK_VERSION },
      {
        capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } },
        versionNegotiation: { mode: ['legacy', 'auto'].includes(mode) ? mode : { pin: mode } },
      },
    );
    this.client.onerror = (error) => process.stderr.write(`client2.mjs: ${errorOf(error).message}\n`);
    this.client.setRequestHandler('roots/list', () => this.onListRoots());
    this.client.setRequestHandler('sampling/createMessage', (request) => this.onSampling(request));
    this.client.setRequestHandler('elicitation/create', (request) => this.onElicitation(request));
    await this.client.connect(this.transport, { timeout: TIMEOUT_MS });
  }

  modern() {
    return this.client.getProtocolEra() === 'modern';
  }

  // `params` with this client's log level in `_meta`, on a 2026-07-28 connection.
  withLevel(params) {
    if (!this.target.logLevel || !this.modern()) return params;
    return { ...params, _meta: { ...params._meta, [LOG_LEVEL_META_KEY]: this.target.logLevel } };
  }

  initialized() {
    return {
      ok: true,
      event: 'initialized',
      server_info: this.client.getServerVersion() ?? null,
      capabilities: this.client.getServerCapabilities() ?? null,
      protocol_version: this.client.getNegotiatedProtocolVersion() ?? null,
      era: this.client.getProtocolEra() ?? null,
    };
  }

  connectFailed(error) {
    if (this.stoppedBy) {
      return { ok: false, event: 'initialized', error: { code: null, message: `stopped by ${this.stoppedBy}`, http_status: null } };
    }
    const status = error instanceof SdkHttpError ? error.status : this.httpStatus;
    return { ok: false, event: 'initialized', error: { code: null, ...errorOf(error), http_status: status } };
  }

  async close() {
    for (const call of this.calls.values()) call.controller.abort('client closing');
    for (const listen of this.listens.values()) await listen.subscription.close().catch(() => {});
    if (this.transport instanceof StreamableHTTPClientTransport && this.transport.sessionId !== undefined) {
      // The SDK's close only drops the connection; ending a legacy session is a DELETE of its own.
      await this.transport.terminateSession().catch(() => {});
    }
    await this.client.close(); // stdio: ends the server's stdin, then SIGTERM, then SIGKILL
  }

  // -- what the server asks (legacy: requests; 2026-07-28: input-required results)

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

  onElicitation(request) {
    this.requests['elicitation/create'] += 1;
    // Each string field of a form is answered with its name, so that an answer shows it was read.
    const properties = request.params?.requestedSchema?.properties ?? {};
    const content = {};
    for (const [name, schema] of Object.entries(properties)) {
      if (schema?.type === 'string' && !schema.enum && !schema.oneOf) content[name] = `${name} from ${SDK_NAME}`;
      else if (schema?.type === 'boolean') content[name] = true;
    }
    return { action: 'accept', content };
  }

  onNotification(method, params) {
    if (Object.hasOwn(this.params, method)) this.params[method].push(params ?? null);
    this.notifications[method] = (this.notifications[method] ?? 0) + 1;
    this.unclaimed[method] = (this.unclaimed[method] ?? 0) + 1;
    const event = EVENTS[method];
    if (event) {
      const id = params?._meta?.[SUBSCRIPTION_ID_META_KEY];
      for (const listen of this.listens.values()) {
        if (listen.ended || (id !== undefined && id !== listen.id)) continue;
        listen.events.push(event === 'ResourceUpdated' ? { event, uri: params?.uri } : { event });
      }
    }
    for (const wake of this.waiters) wake();
  }

  // Resolves once `done()` holds, or after `timeoutMs`.
  until(done, timeoutMs) {
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve();
      };
      const wake = () => done() && finish();
      const timer = setTimeout(finish, timeoutMs);
      this.waiters.add(wake);
    });
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

  // An op listing every page of one kind, the SDK's way (it follows the cursors and
  // aggregates): `key` in the answer; `pages`, the requests it sent; `hints`, the
  // freshness hints of the result (its first page's).
  opList(key, method) {
    return async () => {
      const wire = { 'listTools': 'tools/list', 'listPrompts': 'prompts/list', 'listResources': 'resources/list',
        'listResourceTemplates': 'resources/templates/list' }[method];
      const before = this.sent[wire] ?? 0;
      const result = await this.client[method](this.withLevel({}), { timeout: TIMEOUT_MS, cacheMode: 'refresh' });
      const hints = Object.fromEntries(PAGE_HINTS.filter((name) => name in result).map((name) => [name, result[name]]));
      return { ok: true, [key]: result[key], pages: (this.sent[wire] ?? 0) - before, hints: [hints] };
    };
  }

  async opGetPrompt(command) {
    const params = this.withLevel({ name: need(command, 'name'), arguments: command.arguments });
    return { ok: true, result: await this.client.getPrompt(params, { timeout: TIMEOUT_MS }) };
  }

  async opComplete(command) {
    const result = await this.client.complete(this.withLevel({ ref: need(command, 'ref'), argument: need(command, 'argument') }), {
      timeout: TIMEOUT_MS,
    });
    return { ok: true, completion: result.completion };
  }

  async opReadResource(command) {
    const params = this.withLevel({ uri: need(command, 'uri') });
    return { ok: true, result: await this.client.readResource(params, { timeout: TIMEOUT_MS, cacheMode: 'bypass' }) };
  }

  async opCall(command, signal) {
    const params = this.withLevel({ name: need(command, 'name'), arguments: command.arguments ?? {} });
    const progress = [];
    const options = { signal, timeout: command.timeout_ms || TIMEOUT_MS };
    if (command.progress) {
      options.onprogress = ({ progress: value, total, message }) =>
        progress.push({ progress: value, total: total ?? null, message: message ?? null });
    }
    try {
      const result = await this.client.callTool(params, options);
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
    await this.until(() => this.unclaimed[method], command.timeout_ms ?? 5000);
    const count = this.unclaimed[method] ?? 0;
    delete this.unclaimed[method];
    return count ? { ok: true, method, count } : { ok: false, error: { message: 'timeout' } };
  }

  async opListen(command) {
    const handle = need(command, 'handle');
    if (this.listens.has(handle)) return { ok: false, error: { message: `handle in use: ${handle}` } };
    const filter = {};
    for (const [field, name] of [
      ['tools_list_changed', 'toolsListChanged'],
      ['prompts_list_changed', 'promptsListChanged'],
      ['resources_list_changed', 'resourcesListChanged'],
      ['resource_subscriptions', 'resourceSubscriptions'],
    ]) {
      if (field in command) filter[name] = command[field];
    }
    const listen = { id: undefined, subscription: null, events: [], ended: false, how: null };
    const subscription = await this.client.listen(filter, { timeout: TIMEOUT_MS });
    listen.id = this.lastListenId;
    listen.subscription = subscription;
    this.listens.set(handle, listen);
    subscription.closed.then((how) => {
      listen.ended = true;
      listen.how = how;
      for (const wake of this.waiters) wake();
    });
    return { ok: true, honored: subscription.honoredFilter };
  }

  async opListenEvents(command) {
    const listen = this.listens.get(need(command, 'handle'));
    if (!listen) return { ok: false, error: { message: `no such handle: ${command.handle}` } };
    const count = command.count ?? 1;
    await this.until(() => listen.events.length >= count || listen.ended, command.timeout_ms ?? 5000);
    return { ok: true, events: [...listen.events], ended: listen.ended, error: null };
  }

  async opListenClose(command) {
    const handle = need(command, 'handle');
    const listen = this.listens.get(handle);
    if (!listen) return { ok: false, error: { message: `no such handle: ${handle}` } };
    this.listens.delete(handle);
    await listen.subscription.close();
    const how = await listen.subscription.closed;
    return { ok: true, events: listen.events, closed: how };
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
  process.on('unhandledRejection', (error) => process.stderr.write(`client2.mjs: ${errorOf(error).message}\n`));
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
    await Promise.race([harness.transportClosed, new Promise((resolve) => setTimeout(resolve, 5000))]);
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
