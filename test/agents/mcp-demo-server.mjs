// A small stdio MCP server for the configuration tests (docs/AGENTS.md): one tool, `lookup`, that answers
// with the query and whether the secret its mcp.json asks for reached it (never the secret itself). Each
// call is appended to `demo-lookups.log` in its working directory (the group's folder), so a test can
// count how often the tool really ran.
import { appendFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'demo', version: '1.0.0' });
server.registerTool(
  'lookup',
  {
    description: 'Look a word up in the demo dictionary.',
    inputSchema: { query: z.string().describe('the word') },
  },
  async ({ query }) => {
    appendFileSync('demo-lookups.log', `${query}\n`);
    const token = process.env.DEMO_TOKEN ?? '';
    const secret = token === 'demo-secret-42' ? 'token ok' : token === '' ? 'no token' : 'wrong token';
    return { content: [{ type: 'text', text: `definition of ${query} (${secret})` }] };
  },
);
await server.connect(new StdioServerTransport());
