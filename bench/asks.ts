import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../core/config.js';
import { silentLogger } from '../core/log.js';
import { packageFile } from '../core/paths.js';
import { startGated } from '../gated/app.js';
import { addGroup, setAutonomy } from '../store/groups.js';

/** The `asks` scenario's numbers: ask → permission line for a tool an `allow` rule decides (no human). */
export interface AskLatency {
  asks: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * A real gated (SQLite file, queue, process runtime) whose group has 50 tool rules, the last of which
 * allows `Bash ls *`; the agent (bench/ask-agent.mjs) asks `asks` times in a row and times each question
 * from its `ask` block to the `permission` line it reads (docs/APPROVALS.md).
 */
export async function benchAsks(asks: number): Promise<AskLatency> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-asks-'));
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_POLL_MS: '50',
    GATED_AGENT_CMD: `ASKS=${asks} node '${packageFile('bench', 'ask-agent.mjs')}'`,
  });
  const g = await startGated({ config, log: silentLogger(), channels: [], http: false });
  try {
    addGroup(g.db, config.groupsDir, 'ops');
    // What no rule decides is refused, as GATED_TOOL_DEFAULT=deny did before autonomy presets.
    setAutonomy(g.db, 'ops', 'read_only');
    const rule = g.db.prepare(
      `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES ('ops', ?, ?, ?, ?)`,
    );
    for (let i = 0; i < 49; i++) rule.run(i, `mcp__server${i}__*`, '*', 'ask');
    rule.run(100, 'Bash', 'ls *', 'allow');
    const id = g.gateway.sink({ chat_jid: 'local:ops', sender: 'bench', content: 'go' })!;
    const deadline = Date.now() + 120_000;
    let answer: string | undefined;
    while (!answer && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      answer = g.db
        .prepare('SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?')
        .pluck()
        .get(id) as string | undefined;
    }
    if (!answer) throw new Error('the ask agent did not answer within 120 s');
    const times = JSON.parse(answer) as number[];
    const at = (q: number) =>
      Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]! * 1000) / 1000;
    return { asks: times.length, p50Ms: at(0.5), p90Ms: at(0.9), p99Ms: at(0.99), maxMs: at(1) };
  } finally {
    await g.close(2000);
    rmSync(dir, { recursive: true, force: true });
  }
}
