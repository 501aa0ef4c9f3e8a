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
import { fileURLToPath, pathToFileURL } from 'node:url';

import { Driver, need, parseDoor, run, TIMEOUT_MS } from './driver.mjs';

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
const PAGE_HINTS = ['ttlMs', 'cacheScope', 'resultType'];
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
  return parseDoor(argv, { mode, logLevel }, USAGE);
}

// ---------------------------------------------------------------- errors

function errorOf(error) {
  if (error instanceof ProtocolError) {
    // The SDK prefixes the server's message with "MCP error <code>: "; give it back as sent.
    const message = error.message.replace(/^MCP error -?\d+: /, '');
    return error.data === undefined ? { code: error.code, message } : { code: error.code, message, data: error.data };
  }
  const cause = error?.cause ? ` (${error.cause.code ?? error.cause.message ?? error.cause})` : '';
  return { message: `${error?.message ?? error}${cause}`, type: error?.name ?? typeof error, sdk_code: error?.code };
}

// ---------------------------------------------------------------- the client

class Harness extends Driver {
  constructor(target) {
    super(target, SDK_NAME, errorOf);
    this.sent = {}; // requests sent on the wire, by method
    this.lastListenId = null; // the id of the last subscriptions/listen sent
    this.listens = new Map(); // handle -> { id, subscription, events, ended }
    const list = (key, method) => this.opList(key, method);
    Object.assign(this.ops, {
      list_tools: list('tools', 'listTools'),
      list_prompts: list('prompts', 'listPrompts'),
      list_resources: list('resources', 'listResources'),
      list_resource_templates: list('resourceTemplates', 'listResourceTemplates'),
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
      discover: async () => ({ ok: true, result: await this.client.discover({ timeout: TIMEOUT_MS }) }),
    });
  }

  // -- connecting

  async connect() {
    this.openTransport(StdioClientTransport, StreamableHTTPClientTransport);
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

  negotiatedVersion() {
    return this.client.getNegotiatedProtocolVersion() ?? null;
  }

  moreInitialized() {
    return { era: this.client.getProtocolEra() ?? null };
  }

  failureStatus(error) {
    return error instanceof SdkHttpError ? error.status : this.httpStatus;
  }

  // Bounded: the 2.x SDK may not report a transport closed that never opened.
  closedAfterFailure() {
    return Promise.race([this.transportClosed, new Promise((resolve) => setTimeout(resolve, 5000))]);
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

  // What a listen stream hears.
  heard(method, params) {
    const event = EVENTS[method];
    if (event) {
      const id = params?._meta?.[SUBSCRIPTION_ID_META_KEY];
      for (const listen of this.listens.values()) {
        if (listen.ended || (id !== undefined && id !== listen.id)) continue;
        listen.events.push(event === 'ResourceUpdated' ? { event, uri: params?.uri } : { event });
      }
    }
  }

  // -- commands

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

  callTool(params, options) {
    return this.client.callTool(params, options);
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

process.exit(await run(new Harness(parseArgs(process.argv.slice(2))), 'client2.mjs'));
