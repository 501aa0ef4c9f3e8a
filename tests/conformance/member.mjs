// The member server of the conformance tests (tests/it/conformance.rs): a server that
// implements what the server scenarios of the MCP conformance suite ask of the
// server under test, so that the suite can run against it directly and through the
// gateway. It speaks JSON-RPC itself (node's standard library only), so that what it
// sends is exactly what is written here:
//
//   node member.mjs stdio        MCP over stdin/stdout (newline-delimited JSON)
//   node member.mjs http PORT    streamable HTTP at http://127.0.0.1:PORT/mcp (0: a free
//                                port); it prints the port once it listens
//   ... --modern-only            serves the 2026-07-28 era alone: `server/discover`
//                                names only it, and `initialize` is refused with -32022
//   ... --note-notifications PATH  appends the method of each notification a client
//                                sends it to PATH, one a line
//   ... --legacy-tasks           legacy sessions have the tasks of 2025-11-25: `tasks`
//                                declared, a `tools/call` with a `task` answered
//                                `{"task": ...}` and completed at once (its status sent
//                                as `notifications/tasks/status` outside the request),
//                                `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`
//
// Both transports serve both eras (unless --modern-only): an `initialize` opens a legacy session (over HTTP
// with an Mcp-Session-Id, resumable SSE streams, a GET stream and DELETE), and a
// request that carries the 2026-07-28 per-request `_meta` is served statelessly
// (input-required results instead of requests to the client, `subscriptions/listen`,
// and the tasks extension, SEP-2663, for requests that declare it).
import fs from 'node:fs';
import http from 'node:http';
import crypto from 'node:crypto';
import readline from 'node:readline';

const MODERN = '2026-07-28';
const LEGACY = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const ARGS = process.argv.slice(2);
const MODERN_ONLY = ARGS.includes('--modern-only');
const LEGACY_TASKS = ARGS.includes('--legacy-tasks');
const NOTED = ARGS.includes('--note-notifications') ? ARGS[ARGS.indexOf('--note-notifications') + 1] : undefined;
const noteNotification = (msg) => { if (NOTED !== undefined) fs.appendFileSync(NOTED, `${msg.method}\n`); };
const SUPPORTED = MODERN_ONLY ? [MODERN] : [MODERN, ...LEGACY];
const refuseLegacy = (params) => new RpcError(-32022, `Unsupported protocol version: ${params?.protocolVersion} (this server speaks ${MODERN} alone)`, { supported: [MODERN], requested: params?.protocolVersion }, 400);
const INFO = { name: 'mcpfleet-conformance-member', version: '1.0.0' };
const K = (k) => `io.modelcontextprotocol/${k}`;
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
const REMOVED = ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe'];
const STATE_KEY = crypto.randomBytes(32);

// A 1x1 red PNG and a short silent WAV.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = Buffer.concat([
  Buffer.from('RIFF'), u32(36 + 8), Buffer.from('WAVEfmt '), u32(16), u16(1), u16(1), u32(8000), u32(8000), u16(1), u16(8),
  Buffer.from('data'), u32(8), Buffer.alloc(8, 128),
]).toString('base64');
function u32(n) { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; }
function u16(n) { const b = Buffer.alloc(2); b.writeUInt16LE(n); return b; }

class RpcError extends Error {
  constructor(code, message, data, status) { super(message); this.code = code; this.data = data; this.status = status; }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ type: 'text', text: t });
const noArgs = { type: 'object', properties: {} };

// ---------------------------------------------------------------- catalog
let dynamicTool = false;
let dynamicPrompt = false;

function tool(name, description, inputSchema = noArgs, extra = {}) {
  return { name, description, inputSchema, ...extra };
}
function toolList() {
  const tools = [
    tool('test_simple_text', 'Returns a simple text'),
    tool('test_image_content', 'Returns an image'),
    tool('test_audio_content', 'Returns audio'),
    tool('test_embedded_resource', 'Returns an embedded resource'),
    tool('test_multiple_content_types', 'Returns text, an image and a resource'),
    tool('test_tool_with_logging', 'Logs three messages while it runs'),
    tool('test_tool_with_progress', 'Reports progress three times'),
    tool('test_error_handling', 'Always fails'),
    tool('test_sampling', 'Asks the client to sample', { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] }),
    tool('test_elicitation', 'Asks the user', { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }),
    tool('test_elicitation_sep1034_defaults', 'Elicits with defaults'),
    tool('test_elicitation_sep1330_enums', 'Elicits with enums'),
    tool('test_reconnection', 'Closes its SSE stream before it answers'),
    tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: {
        name: { type: 'string' }, address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] }, phone: { type: 'string' }, email: { type: 'string' },
      },
      allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
      if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
      then: { required: ['phone'] },
      else: { required: ['email'] },
      additionalProperties: false,
    }),
    tool('test_missing_capability', 'Needs the sampling capability'),
    tool('test_streaming_elicitation', 'Elicits (as an input-required result on 2026-07-28)'),
    tool('test_logging_tool', 'Logs at the request\'s log level'),
    tool('test_trigger_tool_change', 'Changes the tool list'),
    tool('test_trigger_prompt_change', 'Changes the prompt list'),
    tool('test_input_required_result_elicitation', 'Input-required: elicitation'),
    tool('test_input_required_result_sampling', 'Input-required: sampling'),
    tool('test_input_required_result_list_roots', 'Input-required: roots'),
    tool('test_input_required_result_request_state', 'Input-required with request state'),
    tool('test_input_required_result_multiple_inputs', 'Input-required: three requests'),
    tool('test_input_required_result_multi_round', 'Input-required: two rounds'),
    tool('test_input_required_result_tampered_state', 'Input-required with signed state'),
    tool('test_input_required_result_capabilities', 'Input-required within the client\'s capabilities'),
  ];
  tools.push(tool('test_custom_header', 'Mirrors its region into the Mcp-Param-Region header (2026-07-28)', {
    type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, query: { type: 'string' } }, required: ['region'] }));
  // The tasks extension (SEP-2663, 2026-07-28): `execution.taskSupport` says which
  // tools may answer with a task.
  const task = (support) => ({ execution: { taskSupport: support } });
  tools.push(
    // A field no specification names, which a gateway passes on as written.
    tool('greet', 'Greets, at once', { type: 'object', properties: { name: { type: 'string' } } },
      { ...task('forbidden'), 'x-vendor': { tier: 'gold', weight: 0.7 } }),
    tool('slow_compute', 'Computes for `seconds`, as a task', { type: 'object', properties: { seconds: { type: 'number' }, label: { type: 'string' } } }, task('optional')),
    tool('failing_job', 'Fails as a tool after 1 s, as a task', noArgs, task('required')),
    tool('protocol_error_job', 'Fails with a protocol error, as a task', noArgs, task('optional')),
    tool('confirm_delete', 'Asks to confirm, as a task', { type: 'object', properties: { filename: { type: 'string' } } }, task('optional')),
    tool('multi_input', 'Asks two questions at once, as a task', noArgs, task('optional')),
    tool('test_tool_with_task', 'Asks a name, then works on it as a task', noArgs, task('required')),
  );
  if (dynamicTool) tools.push(tool('test_dynamic_tool', 'Added by test_trigger_tool_change'));
  return tools;
}
function promptList() {
  const prompts = [
    { name: 'test_simple_prompt', description: 'A simple prompt' },
    { name: 'test_prompt_with_arguments', description: 'A prompt with arguments', arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true }] },
    { name: 'test_prompt_with_embedded_resource', description: 'A prompt with a resource', arguments: [
      { name: 'resourceUri', description: 'URI of the resource to embed', required: true }] },
    { name: 'test_prompt_with_image', description: 'A prompt with an image' },
    { name: 'test_input_required_result_prompt', description: 'Input-required on prompts/get' },
  ];
  if (dynamicPrompt) prompts.push({ name: 'test_dynamic_prompt', description: 'Added by test_trigger_prompt_change' });
  return prompts;
}
const RESOURCES = [
  { uri: 'test://static-text', name: 'static-text', description: 'A static text resource', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'static-binary', description: 'A static binary resource', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'watched-resource', description: 'A resource to subscribe to', mimeType: 'text/plain' },
];
const TEMPLATES = [
  { uriTemplate: 'test://template/{id}/data', name: 'template', description: 'Data by id', mimeType: 'application/json' },
];
function readResource(uri) {
  if (uri === 'test://static-text') return [{ uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }];
  if (uri === 'test://static-binary') return [{ uri, mimeType: 'image/png', blob: PNG }];
  if (uri === 'test://watched-resource') return [{ uri, mimeType: 'text/plain', text: 'Watched resource content.' }];
  const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (m) return [{ uri, mimeType: 'application/json', text: JSON.stringify({ id: m[1], templateTest: true, data: `Data for ID: ${m[1]}` }) }];
  throw new RpcError(-32602, 'Resource not found', { uri });
}

// ---------------------------------------------------------------- request state
function seal(payload) {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${crypto.createHmac('sha256', STATE_KEY).update(body).digest('base64url')}`;
}
function unseal(state, tool) {
  const [body, mac] = String(state).split('.');
  const want = body && crypto.createHmac('sha256', STATE_KEY).update(body).digest('base64url');
  if (!mac || mac !== want) throw new RpcError(-32602, 'requestState failed its integrity check');
  const payload = JSON.parse(Buffer.from(body, 'base64url').toString());
  if (payload.tool !== tool) throw new RpcError(-32602, 'requestState belongs to another request');
  return payload;
}
const elicit = (message, properties, required) => ({ method: 'elicitation/create', params: { mode: 'form', message, requestedSchema: { type: 'object', properties, required } } });
const sample = (t, maxTokens) => ({ method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: text(t) }], maxTokens } });
const roots = () => ({ method: 'roots/list', params: {} });
const inputRequired = (inputRequests, requestState) => ({ resultType: 'input_required', inputRequests, ...(requestState === undefined ? {} : { requestState }) });
function responses(params) {
  if ('inputResponses' in params && (params.inputResponses === null || typeof params.inputResponses !== 'object' || Array.isArray(params.inputResponses))) {
    throw new RpcError(-32602, 'inputResponses must be an object');
  }
  return params.inputResponses;
}
function elicited(r, key) {
  if (r === undefined) return undefined;
  if (r === null || typeof r !== 'object' || typeof r.action !== 'string') throw new RpcError(-32602, `inputResponses.${key} is not an elicitation result`);
  return r;
}

// ---------------------------------------------------------------- handlers
// ctx: { modern, caps, logLevel (modern), session (legacy), notify(msg), request(method, params) }
function shouldLog(ctx, level) {
  const at = ctx.modern ? ctx.logLevel : ctx.session.logLevel;
  if (at === undefined) return !ctx.modern;
  return LEVELS.indexOf(level) >= LEVELS.indexOf(at);
}
function log(ctx, level, data) {
  if (shouldLog(ctx, level)) ctx.notify({ jsonrpc: '2.0', method: 'notifications/message', params: { level, logger: 'member', data } });
}

async function callTool(params, ctx) {
  const name = params.name;
  const args = params.arguments ?? {};
  const needModern = () => { if (!ctx.modern) throw new RpcError(-32602, `${name} answers with an input-required result, which needs protocol ${MODERN}`); };
  switch (name) {
    case 'test_simple_text': return { content: [text('This is a simple text response for testing.')] };
    case 'test_image_content': return { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] };
    case 'test_audio_content': return { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] };
    case 'test_embedded_resource': return { content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] };
    case 'test_multiple_content_types': return { content: [
      text('Multiple content types test:'),
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } }] };
    case 'test_tool_with_logging':
    case 'test_logging_tool':
      log(ctx, 'info', 'Tool execution started'); await sleep(50);
      log(ctx, 'info', 'Tool processing data'); await sleep(50);
      log(ctx, 'info', 'Tool execution completed');
      return { content: [text('Tool with logging executed successfully')] };
    case 'test_tool_with_progress': {
      const token = params._meta?.progressToken;
      for (const [i, p] of [0, 50, 100].entries()) {
        if (i > 0) await sleep(50);
        if (token !== undefined) ctx.notify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: p, total: 100 } });
      }
      return { content: [text('Tool with progress executed successfully')] };
    }
    case 'test_error_handling': return { isError: true, content: [text('This tool intentionally returns an error for testing')] };
    case 'test_sampling': {
      if (ctx.modern) {
        const r = responses(params)?.sampling;
        if (r === undefined) return inputRequired({ sampling: sample(String(args.prompt ?? ''), 100) });
        return { content: [text(`LLM response: ${r?.content?.text ?? ''}`)] };
      }
      if (!ctx.caps?.sampling) return { isError: true, content: [text('The client does not support sampling')] };
      const r = await ctx.request('sampling/createMessage', sample(String(args.prompt ?? ''), 100).params);
      return { content: [text(`LLM response: ${r?.content?.text ?? ''}`)] };
    }
    case 'test_elicitation': {
      const req = elicit(String(args.message ?? ''), {
        username: { type: 'string', description: "User's response" },
        email: { type: 'string', description: "User's email address" } }, ['username', 'email']);
      let r;
      if (ctx.modern) {
        r = elicited(responses(params)?.elicitation, 'elicitation');
        if (r === undefined) return inputRequired({ elicitation: req });
      } else {
        if (!ctx.caps?.elicitation) return { isError: true, content: [text('The client does not support elicitation')] };
        r = await ctx.request('elicitation/create', req.params);
      }
      return { content: [text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
    }
    case 'test_elicitation_sep1034_defaults':
    case 'test_elicitation_sep1330_enums': {
      const properties = name === 'test_elicitation_sep1034_defaults' ? {
        name: { type: 'string', description: 'Name', default: 'John Doe' },
        age: { type: 'integer', description: 'Age', default: 30 },
        score: { type: 'number', description: 'Score', default: 95.5 },
        status: { type: 'string', description: 'Status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verified', default: true },
      } : {
        untitledSingle: { type: 'string', description: 'Untitled single-select', enum: ['option1', 'option2', 'option3'] },
        titledSingle: { type: 'string', description: 'Titled single-select', oneOf: [
          { const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }] },
        legacyEnum: { type: 'string', description: 'Legacy titled enum', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', description: 'Untitled multi-select', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: { type: 'array', description: 'Titled multi-select', items: { anyOf: [
          { const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] } },
      };
      const req = elicit('Please review and update the form fields', properties, []);
      delete req.params.requestedSchema.required;
      let r;
      if (ctx.modern) {
        r = elicited(responses(params)?.form, 'form');
        if (r === undefined) return inputRequired({ form: req });
      } else {
        r = await ctx.request('elicitation/create', req.params);
      }
      return { content: [text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`)] };
    }
    case 'test_reconnection':
      // The HTTP transport closes the request's stream first (see `post`); the
      // answer comes when the client has resumed it.
      await ctx.closeStream?.();
      await sleep(100);
      return { content: [text('Reconnection test completed successfully')] };
    case 'json_schema_2020_12_tool': return { content: [text(`Received: ${JSON.stringify(args)}`)] };
    case 'test_missing_capability':
      if (!ctx.caps?.sampling) throw new RpcError(-32021, 'This tool needs the sampling capability', { requiredCapabilities: { sampling: {} } });
      return { content: [text('The client declared sampling')] };
    case 'test_streaming_elicitation': {
      if (!ctx.modern) return callTool({ ...params, name: 'test_elicitation', arguments: { message: 'Streaming elicitation' } }, ctx);
      if (!ctx.caps?.elicitation) throw new RpcError(-32021, 'This tool needs the elicitation capability', { requiredCapabilities: { elicitation: {} } });
      const r = elicited(responses(params)?.confirm, 'confirm');
      if (r === undefined) return inputRequired({ confirm: elicit('Please confirm', { ok: { type: 'boolean' } }, ['ok']) });
      return { content: [text(`Elicitation answered: ${r.action}`)] };
    }
    case 'test_trigger_tool_change':
      dynamicTool = !dynamicTool;
      changed('tools');
      return { content: [text(`test_dynamic_tool ${dynamicTool ? 'added' : 'removed'}`)] };
    case 'test_trigger_prompt_change':
      dynamicPrompt = !dynamicPrompt;
      changed('prompts');
      return { content: [text(`test_dynamic_prompt ${dynamicPrompt ? 'added' : 'removed'}`)] };
    case 'test_custom_header': return { content: [text(`region: ${args.region}`)] };
    case 'test_dynamic_tool': return { content: [text('dynamic')] };
    case 'greet': return { content: [text(`Hello, ${args.name ?? 'World'}!`)] };
    case 'slow_compute': {
      const seconds = Math.max(0, Number(args.seconds ?? 0));
      const answer = () => ({ content: [text(`computed ${args.label ?? ''} in ${seconds} s`)] });
      if (!withTasks(ctx)) { await sleep(Math.min(seconds, 5) * 1000); return answer(); }
      return startTask((t) => t.after(seconds * 1000, () => t.complete(answer())));
    }
    case 'failing_job':
      needTasks(ctx);
      return startTask((t) => t.after(1000, () => t.complete({ isError: true, content: [text('The job failed')] })));
    case 'protocol_error_job':
      if (!withTasks(ctx)) throw new RpcError(-32603, 'The job broke');
      return startTask((t) => t.after(100, () => t.fail({ code: -32603, message: 'The job broke' })));
    case 'confirm_delete':
    case 'multi_input': {
      const asks = name === 'confirm_delete'
        ? { confirm: elicit(`Delete ${args.filename ?? 'the file'}?`, { confirm: { type: 'boolean' } }, ['confirm']) }
        : { name: elicit('What is your name?', { name: { type: 'string' } }, ['name']), confirm: elicit('Go on?', { confirm: { type: 'boolean' } }, ['confirm']) };
      if (!withTasks(ctx)) throw new RpcError(-32021, `${name} runs as a task`, { requiredCapabilities: { extensions: { [TASKS]: {} } } });
      return startTask((t) => t.ask(asks, (answers) => t.complete({ content: [text(`${name}: ${JSON.stringify(answers)}`)] })));
    }
    case 'test_tool_with_task': {
      needTasks(ctx);
      const r = elicited(responses(params)?.user_name, 'user_name');
      if (r === undefined) return inputRequired({ user_name: elicit('What is your name?', { name: { type: 'string' } }, ['name']) });
      const who = r.content?.name;
      return startTask((t) => t.after(200, () => t.complete({ content: [text(`Worked for ${who}`)] })));
    }
    case 'test_input_required_result_elicitation': {
      needModern();
      const r = elicited(responses(params)?.user_name, 'user_name');
      if (r === undefined) return inputRequired({ user_name: elicit('What is your name?', { name: { type: 'string' } }, ['name']) });
      return { content: [text(`Hello, ${r.content?.name ?? 'stranger'}!`)] };
    }
    case 'test_input_required_result_sampling': {
      needModern();
      const r = responses(params)?.capital_question;
      if (r === undefined) return inputRequired({ capital_question: sample('What is the capital of France?', 100) });
      return { content: [text(`The model said: ${r?.content?.text ?? ''}`)] };
    }
    case 'test_input_required_result_list_roots': {
      needModern();
      const r = responses(params)?.client_roots;
      if (r === undefined) return inputRequired({ client_roots: roots() });
      return { content: [text(`Roots: ${(r?.roots ?? []).map((x) => x.uri).join(', ')}`)] };
    }
    case 'test_input_required_result_request_state':
    case 'test_input_required_result_tampered_state': {
      needModern();
      const r = elicited(responses(params)?.confirm, 'confirm');
      if (r === undefined || params.requestState === undefined) {
        return inputRequired({ confirm: elicit('Please confirm', { ok: { type: 'boolean' } }, ['ok']) }, seal({ tool: name, round: 1 }));
      }
      unseal(params.requestState, name);
      return { content: [text(`state-ok: confirmed=${r.content?.ok}`)] };
    }
    case 'test_input_required_result_multiple_inputs': {
      needModern();
      const r = responses(params) ?? {};
      const asks = {
        user_name: elicit('What is your name?', { name: { type: 'string' } }, ['name']),
        greeting: sample('Generate a greeting', 50),
        client_roots: roots(),
      };
      if (params.requestState !== undefined) unseal(params.requestState, name);
      if (params.requestState === undefined || Object.keys(asks).some((k) => r[k] === undefined)) {
        return inputRequired(asks, seal({ tool: name, round: 1 }));
      }
      elicited(r.user_name, 'user_name');
      return { content: [text(`Hello ${r.user_name.content?.name}; greeting: ${r.greeting?.content?.text}; ${r.client_roots?.roots?.length ?? 0} root(s)`)] };
    }
    case 'test_input_required_result_multi_round': {
      needModern();
      const r = responses(params) ?? {};
      const round = params.requestState === undefined ? 0 : unseal(params.requestState, name).round;
      if (round === 1 && elicited(r.step1, 'step1')) {
        return inputRequired({ step2: elicit('Step 2: What is your favorite color?', { color: { type: 'string' } }, ['color']) },
          seal({ tool: name, round: 2, name: r.step1.content?.name }));
      }
      if (round === 2 && elicited(r.step2, 'step2')) {
        const { name: who } = unseal(params.requestState, name);
        return { content: [text(`${who} likes ${r.step2.content?.color}`)] };
      }
      return inputRequired({ step1: elicit('Step 1: What is your name?', { name: { type: 'string' } }, ['name']) }, seal({ tool: name, round: 1 }));
    }
    case 'test_input_required_result_capabilities': {
      needModern();
      const r = responses(params);
      if (r !== undefined) return { content: [text(`Answered: ${Object.keys(r).sort().join(', ')}`)] };
      const asks = {};
      if (ctx.caps?.elicitation) asks.user_name = elicit('What is your name?', { name: { type: 'string' } }, ['name']);
      if (ctx.caps?.sampling) asks.greeting = sample('Generate a greeting', 50);
      if (ctx.caps?.roots) asks.client_roots = roots();
      if (Object.keys(asks).length === 0) throw new RpcError(-32021, 'This tool needs sampling, elicitation or roots', { requiredCapabilities: { sampling: {} } });
      return inputRequired(asks);
    }
    default:
      throw new RpcError(-32602, `Unknown tool: ${name}`);
  }
}

function getPrompt(params, ctx) {
  const a = params.arguments ?? {};
  switch (params.name) {
    case 'test_simple_prompt': return { messages: [{ role: 'user', content: text('This is a simple prompt for testing.') }] };
    case 'test_prompt_with_arguments': return { messages: [{ role: 'user', content: text(`Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'`) }] };
    case 'test_prompt_with_embedded_resource': return { messages: [
      { role: 'user', content: { type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: text('Please process the embedded resource above.') }] };
    case 'test_prompt_with_image': return { messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: text('Please analyze the image above.') }] };
    case 'test_input_required_result_prompt': {
      if (!ctx.modern) throw new RpcError(-32602, `test_input_required_result_prompt needs protocol ${MODERN}`);
      const r = elicited(responses(params)?.user_context, 'user_context');
      if (r === undefined) return inputRequired({ user_context: elicit('What context should the prompt use?', { context: { type: 'string' } }, ['context']) });
      return { messages: [{ role: 'user', content: text(`Use this context: ${r.content?.context}`) }] };
    }
    case 'test_dynamic_prompt': if (dynamicPrompt) return { messages: [{ role: 'user', content: text('dynamic') }] };
    // fall through
    default: throw new RpcError(-32602, `Unknown prompt: ${params.name}`);
  }
}

function complete(params) {
  const words = { arg1: ['paris', 'park', 'party'], arg2: ['world', 'word', 'work'], id: ['123', '456'] };
  const values = (words[params.argument?.name] ?? []).filter((w) => w.startsWith(params.argument?.value ?? ''));
  return { completion: { values, total: values.length, hasMore: false } };
}

// ---------------------------------------------------------------- tasks (SEP-2663)
const TASKS = K('tasks');
const tasks = new Map();
const withTasks = (ctx) => ctx.modern && ctx.caps?.extensions?.[TASKS] !== undefined;
function needTasks(ctx) {
  if (!withTasks(ctx)) throw new RpcError(-32021, 'This tool runs only as a task: declare the tasks extension', { requiredCapabilities: { extensions: { [TASKS]: {} } } });
}
// A task, stored before its CreateTaskResult is sent; `run` drives it.
function startTask(run) {
  const now = new Date().toISOString();
  const t = {
    taskId: crypto.randomUUID(), status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs: 60_000, pollIntervalMs: 200,
    timer: null, asks: null, answers: {}, onAnswered: null,
  };
  const settle = (status, fields) => {
    if (['completed', 'failed', 'cancelled'].includes(t.status)) return;
    clearTimeout(t.timer);
    Object.assign(t, { status, lastUpdatedAt: new Date().toISOString(), asks: null }, fields);
  };
  t.after = (ms, f) => { t.timer = setTimeout(f, ms); t.timer.unref(); };
  t.complete = (result) => settle('completed', { result });
  t.fail = (error) => settle('failed', { error });
  t.cancel = () => settle('cancelled', {});
  t.ask = (asks, onAnswered) => { Object.assign(t, { status: 'input_required', asks, onAnswered }); };
  tasks.set(t.taskId, t);
  run(t);
  return { resultType: 'task', ...envelope(t) };
}
const envelope = (t) => ({ taskId: t.taskId, status: t.status, createdAt: t.createdAt, lastUpdatedAt: t.lastUpdatedAt, ttlMs: t.ttlMs, pollIntervalMs: t.pollIntervalMs });
function taskOf(params, ctx) {
  if (!withTasks(ctx)) throw new RpcError(-32021, 'tasks/* needs the tasks extension', { requiredCapabilities: { extensions: { [TASKS]: {} } } });
  const t = tasks.get(params.taskId);
  if (!t) throw new RpcError(-32602, `Unknown task: ${params.taskId}`);
  return t;
}
function taskMethod(method, params, ctx) {
  const t = taskOf(params, ctx);
  if (method === 'tasks/get') {
    return { resultType: 'complete', ...envelope(t),
      ...(t.status === 'input_required' ? { inputRequests: t.asks } : {}),
      ...(t.result ? { result: t.result } : {}), ...(t.error ? { error: t.error } : {}) };
  }
  if (method === 'tasks/update') {
    if (t.status === 'input_required') {
      for (const [k, v] of Object.entries(params.inputResponses ?? {})) {
        if (t.asks[k] === undefined) continue;
        t.answers[k] = v;
        delete t.asks[k];
      }
      t.lastUpdatedAt = new Date().toISOString();
      if (Object.keys(t.asks).length === 0) { t.status = 'working'; t.asks = null; t.onAnswered(t.answers); }
    }
    return { resultType: 'complete' };
  }
  t.cancel();
  return { resultType: 'complete' };
}

const cacheHints = (r) => ({ ...r, ttlMs: 0, cacheScope: 'public' });

// ---------------------------------------------------------------- tasks of 2025-11-25 (--legacy-tasks)
const legacyTasks = new Map();
const legacyWire = (t) => ({ taskId: t.taskId, status: t.status, createdAt: t.createdAt, lastUpdatedAt: t.createdAt, ttl: 60000, pollInterval: 100 });
async function legacyTask(method, params, ctx) {
  if (method === 'tools/call') {
    const { task: _asked, ...call } = params;
    const result = await callTool(call, ctx);
    const t = { taskId: crypto.randomUUID(), status: 'working', createdAt: new Date().toISOString(), result };
    legacyTasks.set(t.taskId, t);
    const created = { task: legacyWire(t) };
    t.status = 'completed';
    // After the answer, outside the request (over HTTP on the session's GET stream).
    setTimeout(() => ctx.session.push({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: legacyWire(t) }), 50);
    return created;
  }
  if (method === 'tasks/list') return { tasks: [...legacyTasks.values()].map(legacyWire) };
  const t = legacyTasks.get(params.taskId);
  if (!t) throw new RpcError(-32602, `Unknown task: ${params.taskId}`);
  if (method === 'tasks/get') return legacyWire(t);
  if (method === 'tasks/result') return { ...t.result, _meta: { [K('related-task')]: { taskId: t.taskId } } };
  if (t.status !== 'working') throw new RpcError(-32602, `Task ${t.taskId} is ${t.status}`);
  t.status = 'cancelled';
  return legacyWire(t);
}

async function dispatch(method, params, ctx) {
  if (LEGACY_TASKS && !ctx.modern && ((method === 'tools/call' && params.task) || ['tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel'].includes(method))) {
    return legacyTask(method, params, ctx);
  }
  switch (method) {
    case 'ping': return {};
    case 'logging/setLevel':
      if (!LEVELS.includes(params.level)) throw new RpcError(-32602, `Unknown level: ${params.level}`);
      ctx.session.logLevel = params.level;
      return {};
    case 'tools/list': return ctx.modern ? cacheHints({ tools: toolList() }) : { tools: toolList() };
    case 'tools/call': return callTool(params, ctx);
    case 'prompts/list': return ctx.modern ? cacheHints({ prompts: promptList() }) : { prompts: promptList() };
    case 'prompts/get': return getPrompt(params, ctx);
    case 'resources/list': return ctx.modern ? cacheHints({ resources: RESOURCES }) : { resources: RESOURCES };
    case 'resources/templates/list': return ctx.modern ? cacheHints({ resourceTemplates: TEMPLATES }) : { resourceTemplates: TEMPLATES };
    case 'resources/read': {
      const contents = readResource(params.uri);
      return ctx.modern ? cacheHints({ contents }) : { contents };
    }
    case 'resources/subscribe': ctx.session.subscriptions.add(params.uri); return {};
    case 'resources/unsubscribe': ctx.session.subscriptions.delete(params.uri); return {};
    case 'completion/complete': return complete(params);
    case 'tasks/get': case 'tasks/update': case 'tasks/cancel':
      if (ctx.modern) return taskMethod(method, params, ctx);
    // fall through: the tasks extension is a 2026-07-28 one
    default: throw new RpcError(-32601, `Method not found: ${method}`);
  }
}

const CAPABILITIES = {
  tools: { listChanged: true }, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: true },
  logging: {}, completions: {},
};
function discoverResult() {
  return { resultType: 'complete', supportedVersions: SUPPORTED, capabilities: { ...CAPABILITIES, extensions: { [TASKS]: {} } }, instructions: 'The member server of mcpfleet\'s conformance tests.',
    ttlMs: 0, cacheScope: 'public', _meta: { [K('serverInfo')]: INFO } };
}
function initializeResult(params) {
  const v = LEGACY.includes(params?.protocolVersion) ? params.protocolVersion : LEGACY[0];
  const capabilities = LEGACY_TASKS ? { ...CAPABILITIES, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } } : CAPABILITIES;
  return { protocolVersion: v, capabilities, serverInfo: INFO, instructions: 'The member server of mcpfleet\'s conformance tests.' };
}

// Modern request checks: what is wrong with a request's `_meta` (and, over HTTP, its
// MCP-Protocol-Version header), as a JSON-RPC error with its HTTP status.
function checkModern(method, params, header) {
  const meta = params?._meta;
  const v = meta?.[K('protocolVersion')];
  if (header !== undefined && v !== undefined && header !== v) {
    return new RpcError(-32020, `Header mismatch: MCP-Protocol-Version ${header} but _meta names ${v}`, undefined, 400);
  }
  if (typeof v !== 'string' || typeof meta?.[K('clientCapabilities')] !== 'object' || meta[K('clientCapabilities')] === null) {
    return new RpcError(-32602, 'Invalid params: _meta needs io.modelcontextprotocol/protocolVersion and clientCapabilities', undefined, 400);
  }
  if (v !== MODERN) return new RpcError(-32022, `Unsupported protocol version: ${v}`, { supported: [MODERN], requested: v }, 400);
  if (REMOVED.includes(method)) return new RpcError(-32601, `Method not found: ${method}`, undefined, 404);
  if (meta[K('logLevel')] !== undefined && !LEVELS.includes(meta[K('logLevel')])) return new RpcError(-32602, 'Invalid log level', undefined, 400);
  return null;
}
function modernCtx(params, notify) {
  const meta = params._meta;
  return { modern: true, caps: meta[K('clientCapabilities')], logLevel: meta[K('logLevel')], notify };
}
// The standard headers of a 2026-07-28 POST (Mcp-Method, Mcp-Name, Mcp-Param-*):
// present and equal to what the body says, else 400 with -32020.
function headerValue(raw) {
  if (raw === undefined) return undefined;
  const v = raw.trim();
  const m = /^=\?base64\?(.*)\?=$/.exec(v);
  if (!m) return v;
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(m[1])) return null;
  return Buffer.from(m[1], 'base64').toString('utf8');
}
function checkHeaders(msg, headers) {
  const mismatch = (what) => new RpcError(-32020, `Header mismatch: ${what}`, undefined, 400);
  if (headerValue(headers['mcp-method']) !== msg.method) return mismatch('Mcp-Method does not name the method of the body');
  const p = msg.params ?? {};
  const name = msg.method === 'resources/read' ? p.uri
    : ['tools/call', 'prompts/get'].includes(msg.method) ? p.name
      : ['tasks/get', 'tasks/update', 'tasks/cancel'].includes(msg.method) ? p.taskId : undefined;
  if (name !== undefined && headerValue(headers['mcp-name']) !== name) return mismatch('Mcp-Name does not name what the body does');
  if (msg.method === 'tools/call') {
    const schema = toolList().find((t) => t.name === p.name)?.inputSchema;
    for (const [arg, prop] of Object.entries(schema?.properties ?? {})) {
      const h = prop['x-mcp-header'];
      if (h === undefined) continue;
      const value = p.arguments?.[arg];
      const sent = headerValue(headers[`mcp-param-${h.toLowerCase()}`]);
      if (value === undefined || value === null) { if (sent !== undefined) return mismatch(`Mcp-Param-${h} without ${arg}`); continue; }
      if (sent !== String(value)) return mismatch(`Mcp-Param-${h} does not match ${arg}`);
    }
  }
  return null;
}
const isModern = (msg, header) => msg.method === 'server/discover' || msg.params?._meta?.[K('protocolVersion')] !== undefined || (header !== undefined && header >= MODERN && /^\d{4}-/.test(header));
const errorOf = (id, e) => ({ jsonrpc: '2.0', id, error: e instanceof RpcError
  ? { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) }
  : { code: -32603, message: String(e?.message ?? e) } });
const statusOf = (e) => (e instanceof RpcError ? (e.status ?? ({ '-32601': 404, '-32020': 400, '-32021': 400, '-32022': 400 })[e.code] ?? 200) : 200);
const withType = (r) => (r.resultType ? r : { resultType: 'complete', ...r });

// List changes and resource updates reach legacy sessions and modern listeners.
const sessions = new Set();
const listeners = new Set();
function changed(kind) {
  const method = `notifications/${kind}/list_changed`;
  for (const s of sessions) s.push({ jsonrpc: '2.0', method });
  const filter = kind === 'tools' ? 'toolsListChanged' : kind === 'prompts' ? 'promptsListChanged' : 'resourcesListChanged';
  for (const l of listeners) if (l.filter[filter]) l.send({ jsonrpc: '2.0', method, params: { _meta: { [K('subscriptionId')]: l.id } } });
}
setInterval(() => {
  for (const s of sessions) if (s.subscriptions.has('test://watched-resource')) {
    s.push({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'test://watched-resource' } });
  }
  for (const l of listeners) if (l.filter.resourceSubscriptions?.includes('test://watched-resource')) {
    l.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'test://watched-resource', _meta: { [K('subscriptionId')]: l.id } } });
  }
}, 3000).unref();

function listen(id, params, send) {
  const asked = params.notifications ?? {};
  const honored = {};
  for (const k of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) if (asked[k]) honored[k] = true;
  if (Array.isArray(asked.resourceSubscriptions)) honored.resourceSubscriptions = asked.resourceSubscriptions.filter((u) => RESOURCES.some((r) => r.uri === u));
  const l = { id, filter: honored, send };
  send({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { _meta: { [K('subscriptionId')]: id }, notifications: honored } });
  listeners.add(l);
  return () => listeners.delete(l);
}

// ---------------------------------------------------------------- legacy sessions
class Session {
  constructor(caps, write) {
    this.id = crypto.randomUUID();
    this.caps = caps ?? {};
    this.logLevel = undefined;
    this.subscriptions = new Set();
    this.pending = new Map();
    this.nextId = 1;
    this.write = write; // where messages outside a request go (stdio; HTTP: the GET stream)
  }
  push(msg) { this.write?.(msg); }
  request(method, params, send) {
    const id = `member-${this.nextId++}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      send({ jsonrpc: '2.0', id, method, params });
    });
  }
  answer(msg) {
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) p.reject(new RpcError(msg.error.code, msg.error.message, msg.error.data)); else p.resolve(msg.result);
  }
}
function legacyCtx(session, send) {
  return { modern: false, session, caps: session.caps, notify: send, request: (m, p) => session.request(m, p, send) };
}

// ---------------------------------------------------------------- stdio
function serveStdio() {
  const out = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
  let session = null;
  const inflight = new Map();
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', async (line) => {
    if (!line.trim()) return;
    let msg;
    try { msg = JSON.parse(line); } catch { out({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }); return; }
    if (msg.method === undefined) { session?.answer(msg); return; }
    if (msg.id === undefined) {
      noteNotification(msg);
      if (msg.method === 'notifications/cancelled') inflight.get(msg.params?.requestId)?.();
      return;
    }
    const params = msg.params ?? {};
    try {
      if (msg.method === 'initialize' && params._meta?.[K('protocolVersion')] === undefined) {
        if (MODERN_ONLY) throw refuseLegacy(params);
        if (session) sessions.delete(session);
        session = new Session(params.capabilities, out);
        sessions.add(session);
        out({ jsonrpc: '2.0', id: msg.id, result: initializeResult(params) });
        return;
      }
      if (isModern(msg)) {
        const bad = checkModern(msg.method, params);
        if (bad) throw bad;
        if (msg.method === 'server/discover') { out({ jsonrpc: '2.0', id: msg.id, result: discoverResult() }); return; }
        if (msg.method === 'subscriptions/listen') {
          const stop = listen(msg.id, params, out);
          inflight.set(msg.id, () => { stop(); inflight.delete(msg.id); out({ jsonrpc: '2.0', id: msg.id, result: { resultType: 'complete', _meta: { [K('subscriptionId')]: msg.id } } }); });
          return;
        }
        const result = await dispatch(msg.method, params, modernCtx(params, out));
        out({ jsonrpc: '2.0', id: msg.id, result: withType(result) });
        return;
      }
      if (msg.method === 'ping') { out({ jsonrpc: '2.0', id: msg.id, result: {} }); return; }
      if (!session) throw new RpcError(-32600, 'The session is not initialized');
      out({ jsonrpc: '2.0', id: msg.id, result: await dispatch(msg.method, params, legacyCtx(session, out)) });
    } catch (e) {
      out(errorOf(msg.id, e));
    }
  });
  rl.on('close', () => process.exit(0));
}

// ---------------------------------------------------------------- streamable HTTP
const LOCAL = /^(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/;
function allowed(req) {
  if (!LOCAL.test(req.headers.host ?? '')) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try { return LOCAL.test(new URL(origin).host); } catch { return false; }
}
function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

// A response stream that can be resumed: every event has an id `<stream>_<n>`, kept
// until the stream ends; a GET with Last-Event-ID replays what followed and goes on.
const streams = new Map();
let streamCount = 0;
class Stream {
  constructor(session, res) {
    this.id = `s${++streamCount}`;
    this.session = session;
    this.events = [];
    this.res = null;
    this.done = false;
    streams.set(this.id, this);
    this.attach(res);
    this.event('');
  }
  attach(res) {
    this.res = res;
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no', ...(this.session ? { 'Mcp-Session-Id': this.session.id } : {}) });
    res.on('close', () => { if (this.res === res) this.res = null; });
  }
  event(data) {
    const ev = { id: `${this.id}_${this.events.length}`, data };
    this.events.push(ev);
    this.res?.write(`id: ${ev.id}\nretry: 500\ndata: ${data}\n\n`);
  }
  send(msg) { this.event(JSON.stringify(msg)); }
  detach() { const r = this.res; this.res = null; r?.end(); }
  finish(msg) {
    this.send(msg);
    this.done = true;
    this.res?.end();
    this.res = null;
    setTimeout(() => streams.delete(this.id), 60_000).unref();
  }
  resume(after, res) {
    this.attach(res);
    for (const ev of this.events.slice(after + 1)) res.write(`id: ${ev.id}\ndata: ${ev.data}\n\n`);
    if (this.done) { res.end(); this.res = null; }
  }
}

function serveHttp(port) {
  const byId = new Map();
  const server = http.createServer(async (req, res) => {
    if (!allowed(req)) { json(res, 403, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Host or Origin not allowed' } }); return; }
    const url = new URL(req.url, 'http://localhost');
    if (url.pathname !== '/mcp') { json(res, 404, undefined); return; }
    const sid = req.headers['mcp-session-id'];
    const header = req.headers['mcp-protocol-version'];
    if (req.method === 'GET') {
      const last = req.headers['last-event-id'];
      const session = sid && byId.get(sid);
      if (!session) { json(res, sid ? 404 : 405, undefined, sid ? {} : { Allow: 'POST' }); return; }
      if (last) {
        const m = /^(s\d+)_(\d+)$/.exec(last);
        const stream = m && streams.get(m[1]);
        if (!stream || stream.session !== session) { json(res, 404, undefined); return; }
        stream.resume(Number(m[2]), res);
        return;
      }
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'Mcp-Session-Id': session.id });
      res.write(': open\n\n');
      session.write = (msg) => res.write(`data: ${JSON.stringify(msg)}\n\n`);
      res.on('close', () => { session.write = null; });
      return;
    }
    if (req.method === 'DELETE') {
      const session = sid && byId.get(sid);
      if (!session) { json(res, sid ? 404 : 400, undefined); return; }
      byId.delete(sid); sessions.delete(session);
      json(res, 200, undefined);
      return;
    }
    if (req.method !== 'POST') { json(res, 405, undefined, { Allow: 'GET, POST, DELETE' }); return; }
    let msg;
    try {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      msg = JSON.parse(Buffer.concat(chunks).toString());
    } catch { json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }); return; }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) { json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'One JSON-RPC message per POST' } }); return; }
    const params = msg.params ?? {};

    if (msg.method !== undefined && isModern(msg, header)) {
      if (msg.id === undefined) { noteNotification(msg); res.writeHead(202).end(); return; }
      // Stateless: an SSE stream opens with the first notification; an answer
      // before any is one JSON body with its status.
      let stream = null;
      const notify = (m) => {
        if (!stream) { res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' }); stream = true; }
        res.write(`data: ${JSON.stringify(m)}\n\n`);
      };
      const reply = (status, body) => { if (stream) res.end(`data: ${JSON.stringify(body)}\n\n`); else json(res, status, body); };
      try {
        const bad = checkModern(msg.method, params, header) ?? checkHeaders(msg, req.headers);
        if (bad) throw bad;
        if (msg.method === 'server/discover') { reply(200, { jsonrpc: '2.0', id: msg.id, result: discoverResult() }); return; }
        if (msg.method === 'subscriptions/listen') {
          const stop = listen(msg.id, params, notify);
          res.on('close', stop);
          return;
        }
        const result = await dispatch(msg.method, params, modernCtx(params, notify));
        reply(200, { jsonrpc: '2.0', id: msg.id, result: withType(result) });
      } catch (e) {
        reply(statusOf(e), errorOf(msg.id, e));
      }
      return;
    }

    if (msg.method === 'initialize') {
      if (MODERN_ONLY) { const e = refuseLegacy(params); json(res, 400, errorOf(msg.id, e)); return; }
      const session = new Session(params.capabilities, null);
      byId.set(session.id, session); sessions.add(session);
      json(res, 200, { jsonrpc: '2.0', id: msg.id, result: initializeResult(params) }, { 'Mcp-Session-Id': session.id });
      return;
    }
    if (!sid) { json(res, 400, { jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32600, message: 'Mcp-Session-Id required' } }); return; }
    const session = byId.get(sid);
    if (!session) { json(res, 404, { jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32600, message: 'Unknown session' } }); return; }
    if (msg.method === undefined) { session.answer(msg); res.writeHead(202).end(); return; }
    if (msg.id === undefined) { noteNotification(msg); res.writeHead(202).end(); return; }
    const stream = new Stream(session, res);
    const ctx = legacyCtx(session, (m) => stream.send(m));
    ctx.closeStream = async () => { await sleep(50); stream.detach(); };
    try {
      stream.finish({ jsonrpc: '2.0', id: msg.id, result: await dispatch(msg.method, params, ctx) });
    } catch (e) {
      stream.finish(errorOf(msg.id, e));
    }
  });
  // The port on stdout (`http 0` picks a free one), once it listens.
  server.listen(port, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
}

const [mode, port] = ARGS.filter((a) => !a.startsWith('--'));
if (mode === 'stdio') serveStdio();
else if (mode === 'http' && /^\d+$/.test(port ?? '')) serveHttp(Number(port));
else { process.stderr.write('usage: member.mjs stdio | member.mjs http PORT [--modern-only] [--legacy-tasks] [--note-notifications PATH]\n'); process.exit(2); }
