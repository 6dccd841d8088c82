/**
 * A group's configuration folder for tests (docs/AGENTS.md): instructions, a skill, a chat command and an
 * MCP server (test/agents/mcp-demo-server.mjs), plus a broken server entry and a skill without SKILL.md, so
 * that what cannot be used is reported while the rest works.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The instruction line the model must see. */
export const INSTRUCTION = 'Answer as the ship librarian. MARK-INSTRUCTIONS-7';
/** The secret the demo MCP server expects (passed as `<group>:DEMO_TOKEN=DEMO_TOKEN_VALUE`). */
export const DEMO_TOKEN = 'demo-secret-42';

/**
 * Writes the configuration of `folder` under `root`; `mcp: false` leaves out mcp.json (an agent in a
 * container cannot start the demo server from its host path).
 */
export function writeGroupConfig(root: string, folder: string, opts: { mcp?: boolean } = {}): string {
  const dir = join(root, folder);
  mkdirSync(join(dir, 'skills', 'haiku'), { recursive: true });
  mkdirSync(join(dir, 'skills', 'empty'), { recursive: true });
  mkdirSync(join(dir, 'commands'), { recursive: true });
  writeFileSync(join(dir, 'CLAUDE.md'), `${INSTRUCTION}\n`);
  writeFileSync(
    join(dir, 'skills', 'haiku', 'SKILL.md'),
    '---\nname: haiku\ndescription: Write any answer as a haiku when asked for poetry\n---\n\nThree lines: 5, 7, 5.\n',
  );
  writeFileSync(join(dir, 'commands', 'summarize.md'), 'Summarize this in one line: $ARGUMENTS\n');
  if (opts.mcp === false) return dir;
  const server = join(process.cwd(), 'test', 'agents', 'mcp-demo-server.mjs');
  writeFileSync(
    join(dir, 'mcp.json'),
    JSON.stringify({
      mcpServers: {
        demo: { command: 'node', args: [server], env: { DEMO_TOKEN: '${DEMO_TOKEN}' } },
        broken: { args: [1] },
      },
    }),
  );
  return dir;
}

/** Writes one configuration file of `folder` under `root` (its folders made). */
export function writeGroupFile(root: string, folder: string, name: string, text: string): void {
  mkdirSync(join(root, folder), { recursive: true });
  writeFileSync(join(root, folder, name), text);
}
