// One MCP server as the Codex CLI sees it: a stdio server that forwards its tool list and every call to
// the agent process over the bridge's unix socket (bridge.mjs), which asks gated before anything runs.
//
// Usage (written by config.mjs into the CLI's mcp_servers): node mcp-proxy.mjs SERVER, with the socket's
// path in GATED_CODEX_BRIDGE. It exits when the CLI closes its stdin or the agent closes the socket.
//
// It speaks the few JSON-RPC messages of MCP's stdio transport it needs (initialize, tools/list,
// tools/call, ping) by hand and imports nothing: the CLI starts one per server for every turn, and it does
// not always wait long for a server's tools before its first request to the model, so the proxy must be up
// and answer at once (node alone starts in a fraction of the time the SDK's imports take on a busy machine).
import { createConnection } from 'node:net';
import { createInterface } from 'node:readline';

const name = process.argv[2];
const path = process.env.GATED_CODEX_BRIDGE;
if (!name || !path) {
  process.stderr.write('usage: GATED_CODEX_BRIDGE=SOCKET node mcp-proxy.mjs SERVER\n');
  process.exit(2);
}
/** The protocol version answered when the client asks for none we know. */
const PROTOCOL = '2025-06-18';

const socket = createConnection(path);
const pending = new Map();
let next = 0;
let buf = '';
socket.setEncoding('utf8');
socket.on('data', (chunk) => {
  buf += chunk;
  for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    let reply;
    try {
      reply = JSON.parse(line);
    } catch {
      continue;
    }
    const p = pending.get(reply.id);
    pending.delete(reply.id);
    if (reply.ok) p?.resolve(reply.value);
    else p?.reject(new Error(reply.error ?? 'the bridge failed'));
  }
});
// Without the agent there is nothing to forward to.
socket.on('error', (err) => {
  process.stderr.write(`mcp-proxy ${name}: ${err.message}\n`);
  process.exit(1);
});
socket.on('close', () => process.exit(0));

function bridge(op, fields = {}) {
  next += 1;
  const id = next;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    socket.write(`${JSON.stringify({ id, op, server: name, ...fields })}\n`);
  });
}

// Asked for at once, so that the CLI's tools/list finds it ready.
const tools = bridge('list');
tools.catch(() => {});

function send(message) {
  process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
}

async function handle(msg) {
  switch (msg.method) {
    case 'initialize':
      return {
        protocolVersion: msg.params?.protocolVersion ?? PROTOCOL,
        capabilities: { tools: {} },
        serverInfo: { name, version: '1.0.0' },
      };
    case 'ping':
      return {};
    case 'tools/list':
      return { tools: await tools };
    case 'tools/call':
      return bridge('call', { tool: msg.params?.name, args: msg.params?.arguments ?? {} });
    default:
      throw Object.assign(new Error(`method not found: ${msg.method}`), { code: -32601 });
  }
}

const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on('line', (line) => {
  if (line.trim() === '') return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    send({ id: null, error: { code: -32700, message: 'parse error' } });
    return;
  }
  // Notifications (no id: initialized, cancelled, …) need no answer.
  if (msg.id === undefined || msg.id === null || typeof msg.method !== 'string') return;
  handle(msg).then(
    (result) => send({ id: msg.id, result }),
    (err) => send({ id: msg.id, error: { code: err.code ?? -32603, message: err.message } }),
  );
});
input.on('close', () => process.exit(0));
