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
import { fileURLToPath, pathToFileURL } from 'node:url';

import { Driver, need, parseDoor, run, TIMEOUT_MS } from './driver.mjs';

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
const USAGE = 'usage: client.mjs --stdio CMD [ARGS...] | --http URL [--token TOKEN] [--origin ORIGIN]';

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

// ---------------------------------------------------------------- the client

class Harness extends Driver {
  constructor(target) {
    super(target, SDK_NAME, errorOf);
    this.protocolVersion = null;
    Object.assign(this.ops, {
      list_tools: this.opList('tools', (params) => this.client.listTools(params, { timeout: TIMEOUT_MS })),
      list_prompts: this.opList('prompts', (params) => this.client.listPrompts(params, { timeout: TIMEOUT_MS })),
      list_resources: this.opList('resources', (params) => this.client.listResources(params, { timeout: TIMEOUT_MS })),
      list_resource_templates: this.opList('resourceTemplates', (params) =>
        this.client.listResourceTemplates(params, { timeout: TIMEOUT_MS }),
      ),
      subscribe: async (command) => (
        await this.client.subscribeResource({ uri: need(command, 'uri') }, { timeout: TIMEOUT_MS }), { ok: true }
      ),
      unsubscribe: async (command) => (
        await this.client.unsubscribeResource({ uri: need(command, 'uri') }, { timeout: TIMEOUT_MS }), { ok: true }
      ),
    });
  }

  // -- connecting

  async connect() {
    this.openTransport(StdioClientTransport, StreamableHTTPClientTransport);
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

  negotiatedVersion() {
    return this.protocolVersion;
  }

  failureStatus(error) {
    return error instanceof StreamableHTTPError && error.code > 0 ? error.code : this.httpStatus;
  }

  async close() {
    for (const call of this.calls.values()) call.controller.abort('client closing');
    if (this.transport instanceof StreamableHTTPClientTransport) {
      // The SDK's close only drops the connection; ending the session is a DELETE of its own.
      await this.transport.terminateSession().catch(() => {});
    }
    await this.client.close(); // stdio: ends the server's stdin, then SIGTERM, then SIGKILL
  }

  // -- what the server asks

  onElicitation() {
    this.requests['elicitation/create'] += 1;
    return { action: 'accept', content: {} };
  }

  // -- commands

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

  callTool(params, options) {
    return this.client.callTool(params, undefined, options);
  }
}

process.exit(await run(new Harness(parseDoor(process.argv.slice(2), {}, USAGE)), 'client.mjs'));
