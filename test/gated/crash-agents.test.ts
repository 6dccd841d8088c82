import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, until } from '../helpers/process.js';

/** Live processes whose command line contains `text`, with their parent pids. */
function processes(text: string): Array<{ pid: number; ppid: number }> {
  const found: Array<{ pid: number; ppid: number }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      found.push({ pid: Number(entry), ppid });
    } catch {
      // ended while we looked
    }
  }
  return found;
}

describe('gated killed -9 on the process runtime', () => {
  it('takes its spawner and every agent with it, even agents that ignore the end of their stdin', async () => {
    const dir = tempDir();
    const n = String(3000 + Math.floor(Math.random() * 999_000));
    // Agents that never read stdin: only a kill ends them.
    const env = gatedEnv(dir, { GATED_MAX_CONCURRENT: '3', GATED_AGENT_CMD: `exec sleep ${n}` });
    const seed = openDatabase(env.GATED_DB);
    for (const g of ['g1', 'g2', 'g3']) {
      addGroup(seed, env.GATED_GROUPS_DIR, g);
      insertInbound(seed, { chat_jid: `web:${g}`, sender: 'u', content: 'hello' });
    }
    seed.close();
    const sleepers = () => processes(`sleep\0${n}\0`);
    const gated = gatedRun(env);
    try {
      await until(() => sleepers().length === 3, 30_000, 'three agents running');
      const spawners = processes('spawner.mjs').filter((p) => p.ppid === gated.pid);
      expect(spawners).toHaveLength(1);
      gated.kill('SIGKILL');
      await exited(gated);
      await until(
        () => sleepers().length === 0 && processes('spawner.mjs').every((p) => p.pid !== spawners[0]!.pid),
        10_000,
        'the agents and the spawner gone',
      );
    } finally {
      for (const p of sleepers()) process.kill(p.pid, 'SIGKILL');
    }
  }, 60_000);
});
