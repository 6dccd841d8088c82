// The tool bridge between the Codex CLI and this agent process (docs/AGENTS.md, "The Codex agent").
//
// `codex exec` cannot ask anybody about a tool call, so the CLI is never given a tool server directly:
// every MCP server of its configuration is mcp-proxy.mjs, a small stdio server that forwards its tool list
// and each call over a unix socket to this process. Here each call is first asked about (an `ask` block;
// gated answers with a `permission` line, docs/APPROVALS.md) and only after an `allow`:
// - a tool of the group's own MCP servers (mcp.json) runs on the real server, which this process started
//   once for the whole run (a Codex turn is a new CLI process; the servers outlive it);
// - a gated action (server `gated`, actions.mjs) is recorded for the turn's final block;
// - a memory tool (server `gated`: recall, search_history, memory.mjs) asks gated and returns its answer.
// A `deny` becomes the tool's error result, which the model reads (`Refused: NOTE`). The CLI's own tools
// (its shell) are asked about the same way by its PreToolUse hook (hook.mjs), which connects here too.
//
// The socket lives in a private directory (mode 0700) under the system's temp folder, never in the group's
// folder; it is removed when the run ends. Anything that reaches it is still asked about like the model's
// own calls, so it grants nothing the tool rules do not.
import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { actionCall, actionTools, SERVER } from './actions.mjs';
import { MEMORY_TOOLS, memoryCheck, memoryResult, memoryToolList } from './memory.mjs';
import { ownedTempDir, removeOwnedDir, sweepOwnedDirs } from './owned-dir.mjs';

/** How long one tool of a group's server may run once allowed (the question's wait is not counted). */
const TOOL_RUN_MS = Number(process.env.GATED_CODEX_TOOL_MS ?? 600_000);

/** How long a call's end waits for gated's receipt line before the model gets the result without it. */
const RECEIPT_MS = Number(process.env.GATED_CODEX_RECEIPT_MS ?? 10_000);

/**
 * Tool questions to gated, waiting for their `permission` lines by ask id, and the ends of the calls
 * allowed, reported (a `tool_result` block, docs/PROTOCOL.md) and waiting for their `receipt` lines.
 */
export class Asks {
  #waiting = new Map();
  #receipts = new Map();
  #count = 0;
  #emit;

  /** `emit(block)` prints an output block. */
  constructor(emit) {
    this.#emit = emit;
  }

  /**
   * Asks about `tool` with `input`; resolves with gated's `{id, decision, note, receipt}` (`receipt`: the
   * sealed record of a refused call, which never runs).
   */
  ask(tool, input, summary) {
    this.#count += 1;
    const id = `ask-${this.#count}`;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      this.#emit({ status: 'ok', result: null, ask: { id, tool, input, ...(summary ? { summary } : {}) } });
    });
  }

  /** A permission line from gated: answers the question it names (unknown ids are ignored). */
  permission(line) {
    const answer = this.#waiting.get(line.id);
    this.#waiting.delete(line.id);
    const receipt = typeof line.receipt === 'string' ? line.receipt : undefined;
    answer?.({
      id: line.id,
      decision: line.decision === 'allow' ? 'allow' : 'deny',
      note: line.note,
      receipt,
    });
  }

  /**
   * Reports how the call allowed as ask `id` ended: `output` as the model gets it (its size and SHA-256),
   * or `error`. Resolves with gated's receipt, or undefined when none came within RECEIPT_MS.
   */
  ended(id, { output, error }) {
    const end =
      error !== undefined
        ? { error: error.slice(0, 2000) }
        : { bytes: Buffer.byteLength(output), sha256: createHash('sha256').update(output).digest('hex') };
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#receipts.delete(id);
        resolve(undefined);
      }, RECEIPT_MS);
      this.#receipts.set(id, (receipt) => {
        clearTimeout(timer);
        resolve(receipt);
      });
      this.#emit({ status: 'ok', result: null, tool_result: { id, ...end } });
    });
  }

  /** A receipt line from gated: hands the receipt to the call's end that waits for it. */
  receipt(line) {
    const give = this.#receipts.get(line.id);
    this.#receipts.delete(line.id);
    give?.(typeof line.receipt === 'string' ? line.receipt : undefined);
  }
}

/** The tool's result with gated's receipt of the call as one more text part, which the model may cite. */
function withReceipt(result, receipt) {
  if (!receipt) return result;
  const note = { type: 'text', text: `gated receipt of this call: ${receipt}` };
  return { ...result, content: [...(Array.isArray(result.content) ? result.content : []), note] };
}

function refusal(text) {
  return { content: [{ type: 'text', text }], isError: true };
}

function transportOf(server, cwd) {
  if (server.type === 'stdio')
    return new StdioClientTransport({
      command: server.command,
      args: server.args,
      // The server's own settings and a minimal environment (PATH, HOME, …): nothing of this process's.
      env: { ...getDefaultEnvironment(), ...server.env },
      cwd,
      stderr: 'inherit',
    });
  const init = { requestInit: { headers: server.headers } };
  return server.type === 'sse'
    ? new SSEClientTransport(new URL(server.url), init)
    : new StreamableHTTPClientTransport(new URL(server.url), init);
}

/** The bridge: the socket, the group's servers as MCP clients, and the questions before each call. */
export class ToolBridge {
  #servers;
  #actions;
  #asks;
  /** The CLI's call ids of its own tools allowed, to their ask ids (until their ends are reported). */
  #used = new Map();
  #memory;
  #record;
  #log;
  #cwd;
  #clients = new Map();
  #dir = null;
  #listener = null;
  #sockets = new Set();
  /** The socket's path, once started. */
  socket = null;
  /** True when the CLI runs hook.mjs before its own tools (it was started with hook trust bypassed). */
  hooks = false;

  /**
   * `servers`: the group's MCP servers (secrets filled in, gated's form); `actions`: the action types to
   * offer; `asks`: an Asks; `memory`: the MemoryQuestions that answer recall and search_history (none: no
   * memory tools); `record(action)`: keeps an allowed action for the turn's block.
   */
  constructor({ servers, actions, asks, memory, record, log, cwd }) {
    this.#servers = { ...servers };
    this.#actions = actions;
    this.#memory = memory ?? null;
    if (this.#offersGated && Object.hasOwn(this.#servers, SERVER)) {
      log(`the group's MCP server '${SERVER}' is hidden by gated's tools of that name`);
      delete this.#servers[SERVER];
    }
    this.#asks = asks;
    this.#record = record;
    this.#log = log;
    this.#cwd = cwd;
  }

  /** The server names the CLI is given (each one a proxy). */
  get names() {
    return [...Object.keys(this.#servers), ...(this.#offersGated ? [SERVER] : [])];
  }

  /** True when the server `gated` is offered: actions, or the memory tools. */
  get #offersGated() {
    return this.#actions.length > 0 || this.#memory !== null;
  }

  /** True when gated's actions are offered (server `gated`). */
  get offersActions() {
    return this.#actions.length > 0;
  }

  /** Listens on a new private socket; returns its path. */
  async start() {
    const parent = socketParent();
    // A run killed with -9 left its socket folder there: the next one removes it.
    await sweepOwnedDirs(parent, SOCKET_PREFIX);
    this.#dir = await ownedTempDir(parent, SOCKET_PREFIX);
    const path = join(this.#dir, 'tools.sock');
    this.#listener = createServer((socket) => this.#serve(socket));
    await new Promise((resolve, reject) => {
      this.#listener.once('error', reject);
      this.#listener.listen(path, resolve);
    });
    this.socket = path;
    // The group's servers start now, beside the first turn's CLI: its tool list is then ready sooner.
    await Promise.allSettled(Object.keys(this.#servers).map((name) => this.#client(name)));
    return path;
  }

  /** Closes the socket and the group's servers, and removes the private directory. */
  async close() {
    for (const s of this.#sockets) s.destroy();
    await new Promise((resolve) => (this.#listener ? this.#listener.close(() => resolve()) : resolve()));
    await Promise.allSettled([...this.#clients.values()].map(async (c) => (await c).close()));
    if (this.#dir) removeOwnedDir(this.#dir);
  }

  // One connection (a proxy, or the hook): newline-framed JSON requests `{id, op: 'list'|'call'|'hook',
  // server, tool?, args?}`, answered `{id, ok, value|error}` in any order. Once it closes (the CLI of the
  // turn exited, or an interrupt stopped it), a question still waiting no longer runs its tool when
  // allowed.
  #serve(socket) {
    this.#sockets.add(socket);
    const conn = { open: true };
    let buf = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() !== '') void this.#answer(socket, conn, line);
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      conn.open = false;
      this.#sockets.delete(socket);
    });
  }

  async #answer(socket, conn, line) {
    let req;
    try {
      req = JSON.parse(line);
    } catch {
      return;
    }
    let reply;
    try {
      const value =
        req.op === 'list'
          ? await this.#list(req.server)
          : req.op === 'hook'
            ? await this.#hook(req)
            : req.op === 'post'
              ? await this.#post(req)
              : await this.#call(req, conn);
      reply = { id: req.id, ok: true, value };
    } catch (err) {
      reply = { id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    if (conn.open) socket.write(`${JSON.stringify(reply)}\n`);
  }

  #client(name) {
    const server = this.#servers[name];
    if (!server) throw new Error(`no MCP server '${name}'`);
    let client = this.#clients.get(name);
    if (!client) {
      client = (async () => {
        const c = new Client({ name: 'gated-codex-agent', version: '1.0.0' });
        await c.connect(transportOf(server, this.#cwd));
        return c;
      })();
      // A server that failed to start is tried again by the next turn's CLI.
      client.catch((err) => {
        this.#log(`MCP server ${name} could not start: ${err instanceof Error ? err.message : err}`);
        this.#clients.delete(name);
      });
      this.#clients.set(name, client);
    }
    return client;
  }

  async #list(name) {
    if (name === SERVER && this.#offersGated)
      return [...actionTools(this.#actions), ...(this.#memory ? memoryToolList() : [])];
    const { tools } = await (await this.#client(name)).listTools();
    return tools;
  }

  // A tool of the CLI's own (hook.mjs): asked about under its own name; the CLI runs it when allowed.
  async #hook({ tool, args, use }) {
    if (typeof tool !== 'string' || tool === '') throw new Error('no tool named');
    const answer = await this.#asks.ask(tool, typeof args === 'object' && args !== null ? args : {});
    // Its end (the PostToolUse hook) is reported under this ask, found by the CLI's id of the call.
    if (answer.decision === 'allow' && typeof use === 'string' && use !== '') this.#used.set(use, answer.id);
    return answer;
  }

  // How a tool of the CLI's own ended (hook.mjs, PostToolUse): reported, its receipt for the model.
  async #post({ use, output }) {
    const id = this.#used.get(use);
    if (id === undefined) throw new Error('no allowed call of this id');
    this.#used.delete(use);
    const text = typeof output === 'string' ? output : JSON.stringify(output ?? null);
    return { receipt: await this.#asks.ended(id, { output: text }) };
  }

  async #call({ server, tool, args }, conn) {
    const input = typeof args === 'object' && args !== null ? args : {};
    const full = `mcp__${server}__${tool}`;
    const isAction = server === SERVER && this.#actions.includes(tool);
    const isMemory = server === SERVER && this.#memory !== null && MEMORY_TOOLS.includes(tool);
    const call = isAction ? actionCall(tool, input) : null;
    if (call?.refused) return refusal(`Not recorded: ${call.refused}`);
    const malformed = isMemory ? memoryCheck(input) : null;
    if (malformed) return refusal(`Not asked: ${malformed}`);
    const summary = call?.summary ?? (typeof input.description === 'string' ? input.description : undefined);
    const { id, decision, note, receipt } = await this.#asks.ask(full, input, summary);
    if (decision !== 'allow')
      return withReceipt(refusal(note ? `Refused: ${note}` : 'Refused by the operator.'), receipt);
    // Allowed after the turn's CLI went away (an interrupt): the call no longer belongs to any turn.
    if (!conn.open) return refusal('The turn ended before the call was allowed.');
    const result = await this.#run({ server, tool, input, isMemory, call });
    // How it ended, on record: the error's text, or the output as the model gets it; its receipt goes
    // with the result (docs/SECURITY.md, "Receipts").
    const text = JSON.stringify(result.content ?? []);
    const end = result.isError ? { error: text } : { output: text };
    return withReceipt(result, await this.#asks.ended(id, end));
  }

  async #run({ server, tool, input, isMemory, call }) {
    if (isMemory) return memoryResult(tool, await this.#memory.ask(tool, input.query, input.limit));
    if (call) {
      this.#record(call.action);
      return {
        content: [
          { type: 'text', text: `Recorded: ${call.summary}. It will be applied when this answer is stored.` },
        ],
      };
    }
    const client = await this.#client(server);
    try {
      return await client.callTool({ name: tool, arguments: input }, undefined, { timeout: TOOL_RUN_MS });
    } catch (err) {
      return refusal(`The tool failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

/** The longest socket path Linux takes is 107 bytes; this leaves room for the folder's random suffix. */
const SOCKET_PATH_MAX = 90;

/** The name of a run's socket folder, before mkdtemp's six characters. */
const SOCKET_PREFIX = 'gated-codex-';

/**
 * Where the socket's private folder goes: the run's own HOME (the process runtime gives each run one in
 * the group's folder; the images' HOME is their tmpfs /tmp), so that a run killed before it could remove
 * the folder (kill -9) leaves it there and not in the machine's temp folder. The temp folder when HOME is
 * unset or too deep for a socket path.
 */
function socketParent() {
  const home = process.env.HOME;
  if (home && join(home, 'gated-codex-XXXXXX', 'tools.sock').length <= SOCKET_PATH_MAX) return home;
  return tmpdir();
}
