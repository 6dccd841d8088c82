// One MCP server as the Codex CLI sees it: a stdio server that forwards its tool list and every call to
// the agent process over the bridge's unix socket (bridge.mjs), which asks gated before anything runs.
//
// Usage (written by config.mjs into the CLI's mcp_servers): node mcp-proxy.mjs SERVER, with the socket's
// path in GATED_CODEX_BRIDGE. It exits when the CLI closes its stdin or the agent closes the socket.
import { createConnection } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const name = process.argv[2];
const path = process.env.GATED_CODEX_BRIDGE;
if (!name || !path) {
  process.stderr.write('usage: GATED_CODEX_BRIDGE=SOCKET node mcp-proxy.mjs SERVER\n');
  process.exit(2);
}

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

// The tool list is fetched before the CLI's handshake is answered: the CLI does not always wait for a
// server's list before its first request to the model, and a list ready at once is never missed.
const tools = await bridge('list');
const server = new Server({ name, version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (req) =>
  bridge('call', { tool: req.params.name, args: req.params.arguments ?? {} }),
);
const transport = new StdioServerTransport();
transport.onclose = () => process.exit(0);
process.stdin.on('end', () => process.exit(0));
await server.connect(transport);
