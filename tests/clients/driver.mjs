// What the scripted MCP clients on the official TypeScript SDKs share (client.mjs on
// the 1.x SDK, client2.mjs on 2.x): the door on the command line, the line protocol
// (README.md beside this file), what they answer a server's requests with, the counts
// and params of the notifications they hear, the calls in flight and the waits. Each
// client supplies its SDK's calls: connecting, listing, and the rest of its ops.

import { createInterface } from 'node:readline';

export const ROOTS = [{ uri: 'file:///tmp', name: 'tmp' }];
export const SERVER_REQUESTS = ['roots/list', 'sampling/createMessage', 'elicitation/create'];
// For connecting and for each request without a timeout_ms of its own (the SDK's default).
export const TIMEOUT_MS = Number(process.env.MCP_CLIENT_TIMEOUT_MS ?? 60000);
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'];

// ---------------------------------------------------------------- command line

// `target` with the door `argv` names (`--stdio CMD [ARGS...]` or `--http URL [--token
// TOKEN] [--origin ORIGIN]`); exits with `usageText` on anything else.
export function parseDoor(argv, target, usageText) {
  if (argv.length >= 2 && argv[0] === '--stdio') {
    return { ...target, command: argv.slice(1) };
  }
  if (argv.length >= 2 && argv[0] === '--http') {
    const http = { ...target, url: argv[1], headers: {} };
    for (let rest = argv.slice(2); rest.length > 0; rest = rest.slice(2)) {
      if (rest.length < 2 || !['--token', '--origin'].includes(rest[0])) usage(usageText);
      if (rest[0] === '--token') http.headers.Authorization = `Bearer ${rest[1]}`;
      else http.headers.Origin = rest[1];
    }
    return http;
  }
  usage(usageText);
}

function usage(text) {
  process.stderr.write(`${text}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------- JSON helpers

function emit(answer) {
  return new Promise((resolve) => process.stdout.write(`${JSON.stringify(answer)}\n`, resolve));
}

const isNotification = (message) => message && 'method' in message && !('id' in message);

// ---------------------------------------------------------------- the client

class MissingField extends Error {}

export function need(command, field) {
  if (!(field in command)) throw new MissingField(`missing field: ${field}`);
  return command[field];
}

// A client of the line protocol. A subclass connects (`connect`, with `openTransport`),
// closes (`close`), calls a tool (`callTool`), says which version it negotiated
// (`negotiatedVersion`) and why it could not connect (`failureStatus`), answers
// elicitations (`onElicitation`) and adds its SDK's ops (`list_*`, `get_prompt`,
// `read_resource`, `complete`, `subscribe`, ...).
export class Driver {
  constructor(target, sdkName, errorOf) {
    this.target = target;
    this.sdkName = sdkName;
    this.errorOf = errorOf;
    this.client = null;
    this.transport = null;
    this.stoppedBy = null; // the name of the signal that ended the session
    this.transportClosed = null; // settles when the transport has closed (stdio: the server has exited)
    this.httpStatus = null; // last HTTP error status seen (>= 400)
    this.notifications = {}; // all received, by method
    this.params = { 'notifications/message': [], 'notifications/resources/updated': [] }; // their params, in order
    this.unclaimed = {}; // since the last wait_notification, by method
    this.waiters = new Set(); // wake-ups for the waits
    this.requests = Object.fromEntries(SERVER_REQUESTS.map((method) => [method, 0]));
    this.calls = new Map(); // handle -> { controller, done, answer }
    this.ops = {
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
      ping: async () => (await this.client.ping({ timeout: TIMEOUT_MS }), { ok: true }),
      requests: async () => ({ ok: true, counts: { ...this.requests } }),
    };
  }

  // -- connecting

  // Makes the transport of the door (the SDK's `Stdio` or `Http` transport class),
  // counting every notification that comes on it.
  openTransport(Stdio, Http) {
    this.transport = this.makeTransport(Stdio, Http);
    // Client.connect keeps the onmessage and onclose set beforehand and calls them first.
    this.transport.onmessage = (message) => {
      if (isNotification(message)) this.onNotification(message.method, message.params); // count every notification
    };
    this.transportClosed = new Promise((resolve) => (this.transport.onclose = resolve));
  }

  makeTransport(Stdio, Http) {
    if (this.target.command) {
      const [command, ...args] = this.target.command;
      // The server gets this client's whole environment, and its stderr.
      return new Stdio({ command, args, env: { ...process.env }, stderr: 'inherit' });
    }
    const noteStatus = async (url, init) => {
      const response = await fetch(url, init);
      if (response.status >= 400) this.httpStatus = response.status;
      return response;
    };
    return new Http(new URL(this.target.url), {
      requestInit: { headers: this.target.headers },
      fetch: noteStatus,
    });
  }

  initialized() {
    return {
      ok: true,
      event: 'initialized',
      server_info: this.client.getServerVersion() ?? null,
      capabilities: this.client.getServerCapabilities() ?? null,
      protocol_version: this.negotiatedVersion(),
      ...this.moreInitialized(),
    };
  }

  // What a subclass adds to the line that says the client connected.
  moreInitialized() {
    return {};
  }

  connectFailed(error) {
    if (this.stoppedBy) {
      return { ok: false, event: 'initialized', error: { code: null, message: `stopped by ${this.stoppedBy}`, http_status: null } };
    }
    const status = this.failureStatus(error);
    return { ok: false, event: 'initialized', error: { code: null, ...this.errorOf(error), http_status: status } };
  }

  // Settles once the transport of a connection that failed has closed.
  closedAfterFailure() {
    return this.transportClosed;
  }

  // `params` as a request carries them (a subclass may add to its `_meta`).
  withLevel(params) {
    return params;
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
      content: { type: 'text', text: `sampled by ${this.sdkName}` },
      model: this.sdkName,
      stopReason: 'endTurn',
    };
  }

  onNotification(method, params) {
    if (Object.hasOwn(this.params, method)) this.params[method].push(params ?? null);
    this.notifications[method] = (this.notifications[method] ?? 0) + 1;
    this.unclaimed[method] = (this.unclaimed[method] ?? 0) + 1;
    this.heard(method, params);
    for (const wake of this.waiters) wake();
  }

  // A notification, for a subclass that keeps more of them.
  heard(_method, _params) {}

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
        answer = { ok: false, error: error instanceof MissingField ? { message: error.message } : this.errorOf(error) };
      }
    }
    if ('id' in command) answer.id = command.id;
    return answer;
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
      const result = await this.callTool(params, options);
      return { ok: true, result, progress };
    } catch (error) {
      if (signal?.aborted) {
        return { ok: false, cancelled: true, error: { message: 'cancelled by the client' }, progress };
      }
      return { ok: false, error: this.errorOf(error), progress };
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

// Connects `harness`, then answers commands until `close` or the end of stdin; the
// exit code. `script` names the client in what it writes to stderr.
export async function run(harness, script) {
  process.on('unhandledRejection', (error) => process.stderr.write(`${script}: ${harness.errorOf(error).message}\n`));
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
    await harness.closedAfterFailure();
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
