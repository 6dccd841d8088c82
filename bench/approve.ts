/**
 * A typed `/approve` → the agent's answer (bench/README.md, "Approve"), with the database's file watcher
 * off (gated/app.ts `watchCommits: false`, as on a network mount): a real gated (SQLite file, poll loop,
 * queue, process runtime) whose group asks about every `Bash` call; its agent (test/queue/agents/ask-agent.mjs,
 * no think time) asks once per turn. Per round: a message makes the agent ask, and once the question is
 * stored an admin's `/approve CODE` is written through the in-process sink; timed from that write to the
 * agent's answer row (its `outbound` signal, with the tool run). Prints p50, p90 and max.
 *
 *   npx tsx bench/approve.ts [rounds] [--watch]    # --watch: with the file watcher, as by default
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../core/config.js';
import { silentLogger } from '../core/log.js';
import { packageFile } from '../core/paths.js';
import { startGated } from '../gated/app.js';
import { addGroup } from '../store/groups.js';

/** The figures of one sitting, in ms. */
export interface ApproveLatency {
  rounds: number;
  watch: boolean;
  p50Ms: number;
  p90Ms: number;
  maxMs: number;
}

async function until<T>(fn: () => T | undefined, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** `rounds` approvals one after the other in one run of the agent. */
export async function benchApprove(rounds: number, watch = false): Promise<ApproveLatency> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-approve-'));
  const agent = packageFile('test', 'queue', 'agents', 'ask-agent.mjs');
  const config = loadConfig({
    GATED_DB: join(dir, 'gated.db'),
    GATED_GROUPS_DIR: join(dir, 'groups'),
    GATED_ADMINS: 'local:boss',
    GATED_AGENT_CMD: `THINK_MS=0 node '${agent}'`,
    GATED_IDLE_TIMEOUT_MS: '600000',
  });
  const g = await startGated({ config, log: silentLogger(), channels: [], http: false, watchCommits: watch });
  try {
    addGroup(g.db, config.groupsDir, 'ops');
    g.db
      .prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES ('ops', 0, 'Bash', '*', 'ask')`,
      )
      .run();
    const pending = g.db
      .prepare(`SELECT code FROM tool_approvals WHERE state = 'pending' ORDER BY id DESC LIMIT 1`)
      .pluck();
    const contentOf = g.db.prepare('SELECT content FROM messages WHERE id = ?').pluck();
    let answered: ((at: number) => void) | undefined;
    g.signals.outbound.on((id) => {
      if (id === undefined || !answered) return;
      const text = contentOf.get(id) as string | undefined;
      if (text?.includes('tool Bash ran')) answered(performance.now());
    });
    const times: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const ask = { tool: 'Bash', input: { command: `touch /tmp/never-${i}` }, summary: 'a file' };
      g.gateway.sink({ chat_jid: 'local:ops', sender: 'boss', content: `!ask ${JSON.stringify(ask)}` });
      const code = await until(() => pending.get() as string | undefined, 30_000, 'the question');
      const answer = new Promise<number>((resolve) => (answered = resolve));
      const t0 = performance.now();
      g.gateway.sink({ chat_jid: 'local:ops', sender: 'boss', content: `/approve ${code}` });
      const t1 = await Promise.race([
        answer,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`round ${i}: no answer within 30 s`)), 30_000).unref(),
        ),
      ]);
      answered = undefined;
      times.push(t1 - t0);
    }
    times.sort((a, b) => a - b);
    const at = (q: number) =>
      Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]! * 10) / 10;
    return { rounds, watch, p50Ms: at(0.5), p90Ms: at(0.9), maxMs: at(1) };
  } finally {
    await g.close(2000);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rounds = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 30);
  const r = await benchApprove(rounds, process.argv.includes('--watch'));
  process.stdout.write(
    `/approve → the agent's answer, file watcher ${r.watch ? 'on' : 'off'}, ${r.rounds} rounds: ` +
      `p50 ${r.p50Ms} ms, p90 ${r.p90Ms} ms, max ${r.maxMs} ms\n`,
  );
}
