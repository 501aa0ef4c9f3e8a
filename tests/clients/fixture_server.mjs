// A small MCP server on the official TypeScript SDK, for selfcheck.sh: what the published
// server-everything does not offer. Every listing is paginated (two items a page); tool
// `change_lists` makes the server send list_changed notifications; tool `slow` waits until
// cancelled; tool `ask` makes a request of the client (roots, sampling, elicitation); tool `meta`
// answers with the request's `_meta`; HTTP requests may be held to a bearer token (401) and an Origin (403).
// Events the checks look for (a cancelled request, an ended HTTP session) are written to
// stderr, one line each, starting with "fixture:".
//
//     node fixture_server.mjs stdio
//     FIXTURE_TOKEN=T FIXTURE_ORIGIN=O node fixture_server.mjs http PORT    (endpoint /mcp)

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SDK_DIR =
  process.env.MCP_TS_SDK_DIR ??
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../../.cache/npm/node_modules/@modelcontextprotocol/sdk');
const sdk = (file) => import(pathToFileURL(path.join(SDK_DIR, 'dist/esm', file)).href);

const { Server } = await sdk('server/index.js');
const { StdioServerTransport } = await sdk('server/stdio.js');
const { StreamableHTTPServerTransport } = await sdk('server/streamableHttp.js');
const types = await sdk('types.js');
const { ErrorCode, McpError, isInitializeRequest } = types;

const PAGE_SIZE = 2;
const log = (line) => process.stderr.write(`fixture: ${line}\n`);
const text = (value) => ({ content: [{ type: 'text', text: value }] });

const TOOLS = [
  { name: 'echo', description: 'Echoes `message`.', inputSchema: { type: 'object', properties: { message: { type: 'string' } } } },
  {
    name: 'add',
    description: 'Adds `a` and `b`, as text and as structured content.',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
    outputSchema: { type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] },
  },
  { name: 'slow', description: 'Waits `ms` (default 30000) or until cancelled.', inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } },
  { name: 'change_lists', description: 'Sends the three list_changed notifications, then tools/list_changed again after the answer.', inputSchema: { type: 'object' } },
  { name: 'fail', description: 'Answers with a JSON-RPC error (code -32042, with data).', inputSchema: { type: 'object' } },
  { name: 'meta', description: 'Answers with the `_meta` of the request, as JSON text.', inputSchema: { type: 'object' } },
  {
    name: 'ask',
    description: 'Asks the client `method` (roots/list, sampling/createMessage or elicitation/create) and answers with its answer as JSON text, or with an error result `error CODE: MESSAGE`.',
    inputSchema: { type: 'object', properties: { method: { type: 'string' } }, required: ['method'] },
  },
];
const PROMPTS = ['first', 'second', 'third'].map((name) => ({ name, description: `The ${name} prompt.` }));
const RESOURCES = [1, 2, 3, 4, 5].map((n) => ({ uri: `fixture://resource/${n}`, name: `resource ${n}`, mimeType: 'text/plain' }));
const TEMPLATES = ['a', 'b', 'c'].map((name) => ({ uriTemplate: `fixture://${name}/{id}`, name: `template ${name}` }));

// One page of `items` from `cursor` (the offset, as a string), with the next cursor if any.
function page(items, cursor, key) {
  const start = cursor === undefined ? 0 : Number(cursor);
  if (!Number.isInteger(start) || start < 0 || start > items.length) {
    throw new McpError(ErrorCode.InvalidParams, `bad cursor: ${cursor}`);
  }
  const end = start + PAGE_SIZE;
  return end < items.length ? { [key]: items.slice(start, end), nextCursor: String(end) } : { [key]: items.slice(start) };
}

// What `ask` sends for each method, and the schema of the answer.
const ASKS = {
  'roots/list': () => [{ method: 'roots/list' }, types.ListRootsResultSchema],
  'sampling/createMessage': () => [
    { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }], maxTokens: 10 } },
    types.CreateMessageResultSchema,
  ],
  'elicitation/create': () => [
    { method: 'elicitation/create', params: { mode: 'form', message: 'anything?', requestedSchema: { type: 'object', properties: {} } } },
    types.ElicitResultSchema,
  ],
};

const toolHandlers = {
  echo: async (args) => text(`echo: ${args.message ?? ''}`),
  meta: async (args, extra) => text(JSON.stringify(extra._meta ?? {})),
  add: async (args) => ({ ...text(String(args.a + args.b)), structuredContent: { sum: args.a + args.b } }),
  fail: async () => {
    throw new McpError(-32042, 'fixture failure', { detail: 'on purpose' });
  },
  slow: async (args, extra, server) => {
    const token = extra._meta?.progressToken;
    if (token !== undefined) {
      await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: 1, message: 'started' } });
    }
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, args.ms ?? 30000);
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        log(`cancelled request ${extra.requestId}: ${extra.signal.reason}`);
        resolve();
      });
    });
    return text(extra.signal.aborted ? 'cancelled' : 'done');
  },
  ask: async (args, extra) => {
    const ask = ASKS[args.method];
    if (!ask) throw new McpError(ErrorCode.InvalidParams, `cannot ask ${args.method}`);
    const [request, schema] = ask();
    try {
      return text(JSON.stringify(await extra.sendRequest(request, schema)));
    } catch (error) {
      return { ...text(`error ${error.code}: ${error.message}`), isError: true };
    }
  },
  change_lists: async (args, extra, server) => {
    for (const kind of ['tools', 'prompts', 'resources']) {
      await extra.sendNotification({ method: `notifications/${kind}/list_changed` });
    }
    // Not tied to this request: over HTTP it travels on the session's GET stream.
    setTimeout(() => server.sendToolListChanged().catch((error) => log(`late notification lost: ${error}`)), 200);
    return text('lists changed');
  },
};

function makeServer() {
  const server = new Server(
    { name: 'mcpfleet-client-fixture', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } } },
  );
  server.setRequestHandler(types.ListToolsRequestSchema, (request) => page(TOOLS, request.params?.cursor, 'tools'));
  server.setRequestHandler(types.ListPromptsRequestSchema, (request) => page(PROMPTS, request.params?.cursor, 'prompts'));
  server.setRequestHandler(types.ListResourcesRequestSchema, (request) => page(RESOURCES, request.params?.cursor, 'resources'));
  server.setRequestHandler(types.ListResourceTemplatesRequestSchema, (request) =>
    page(TEMPLATES, request.params?.cursor, 'resourceTemplates'),
  );
  server.setRequestHandler(types.GetPromptRequestSchema, (request) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `prompt ${request.params.name} ${JSON.stringify(request.params.arguments ?? {})}` } }],
  }));
  server.setRequestHandler(types.ReadResourceRequestSchema, (request) => ({
    contents: [{ uri: request.params.uri, mimeType: 'text/plain', text: `contents of ${request.params.uri}` }],
  }));
  server.setRequestHandler(types.CallToolRequestSchema, async (request, extra) => {
    const handler = toolHandlers[request.params.name];
    if (!handler) throw new McpError(ErrorCode.InvalidParams, `no tool ${request.params.name}`);
    return handler(request.params.arguments ?? {}, extra, server);
  });
  return server;
}

// ---------------------------------------------------------------- stdio

async function serveStdio() {
  await makeServer().connect(new StdioServerTransport());
  process.stdin.on('end', () => process.exit(0));
}

// ---------------------------------------------------------------- streamable HTTP

function refuse(request, response) {
  const token = process.env.FIXTURE_TOKEN;
  const origin = process.env.FIXTURE_ORIGIN;
  if (token && request.headers.authorization !== `Bearer ${token}`) {
    response.writeHead(401, { 'WWW-Authenticate': 'Bearer', 'Content-Type': 'text/plain' }).end('unauthorized');
    return true;
  }
  if (origin && request.headers.origin !== undefined && request.headers.origin !== origin) {
    response.writeHead(403, { 'Content-Type': 'text/plain' }).end('forbidden origin');
    return true;
  }
  return false;
}

async function readJson(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
}

function rejectJsonRpc(response, status, message, id = null) {
  response.writeHead(status, { 'Content-Type': 'application/json' });
  response.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id }));
}

async function serveHttp(port) {
  const sessions = new Map();
  const http = createServer(async (request, response) => {
    try {
      if (new URL(request.url, 'http://x').pathname !== '/mcp') return response.writeHead(404).end();
      if (refuse(request, response)) return;
      const body = request.method === 'POST' ? await readJson(request) : undefined;
      const sessionId = request.headers['mcp-session-id'];
      let transport = sessionId ? sessions.get(sessionId) : undefined;
      if (!transport) {
        if (sessionId) return rejectJsonRpc(response, 404, 'Session not found');
        if (request.method !== 'POST' || !isInitializeRequest(body)) {
          return rejectJsonRpc(response, 400, 'Bad Request: no session', body?.id ?? null);
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => sessions.set(id, transport),
          onsessionclosed: (id) => {
            sessions.delete(id);
            log(`session ${id} ended by DELETE`);
          },
        });
        await makeServer().connect(transport);
      }
      await transport.handleRequest(request, response, body);
    } catch (error) {
      log(`error: ${error}`);
      if (!response.headersSent) rejectJsonRpc(response, 500, String(error));
    }
  });
  http.listen(port, '127.0.0.1', () => log(`listening on http://127.0.0.1:${port}/mcp`));
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
}

const [mode, port] = process.argv.slice(2);
if (mode === 'stdio') await serveStdio();
else if (mode === 'http' && port) await serveHttp(Number(port));
else {
  process.stderr.write('usage: fixture_server.mjs stdio | http PORT\n');
  process.exit(2);
}
