/**
 * Tool calls on record and their receipts (docs/SECURITY.md, "Receipts"), with the real Claude agent against
 * the local Messages API: a turn of four calls (a write and a command the preset allows, a command a rule
 * refuses, a read the agent refuses by itself) is recorded in the order they were asked, each with what
 * decided it; the model cites the receipts it was handed, each checks out with `gated receipts check`, the
 * run's chain verifies, and a record edited with sqlite3 is named by `gated receipts verify` as the first
 * broken link.
 */
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { parseReceipt } from '../../store/receipts.js';
import { gatedCli } from '../helpers/cli.js';
import { useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();
const SHELL_AGENT = `GATED_CLAUDE_SHELL=1 node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`;

interface Call {
  id: number;
  seq: number | null;
  turn: number | null;
  tool: string;
  input: string;
  decision: string | null;
  decided_by: string | null;
  output_bytes: number | null;
  output_sha256: string | null;
  error: string | null;
  receipt: string | null;
}

test(
  'a turn of four tool calls: recorded in order with their decisions, receipts cited by the model verify, an edit is found',
  { timeout: 120_000 },
  async () => {
    const chat = await suite.start({ env: { GATED_AGENT_CMD: SHELL_AGENT } });
    const db = chat.gated.db;
    const rule = db
      .prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES (?, 1, 'Bash', 'echo refused*', 'deny')`,
      )
      .run(chat.group).lastInsertRowid;
    const script = [
      ['Write', { file_path: join(chat.groupDir, 'one.txt'), content: 'one' }],
      ['Bash', { command: 'echo two' }],
      ['Bash', { command: 'echo refused-three' }],
      ['Read', { file_path: '/etc/hostname' }],
    ];
    const answer = await chat.reply(chat.send(`CALLS ${JSON.stringify(script)}`));
    const [run] = chat.runs();
    const calls = db.prepare('SELECT * FROM tool_calls WHERE run_id = ? ORDER BY id').all(run!.id) as Call[];

    // In the order they were asked, each with what decided it, all sealed in one chain.
    expect(calls.map((c) => [c.tool, c.decision])).toEqual([
      ['Write', 'allow'],
      ['Bash', 'allow'],
      ['Bash', 'deny'],
      ['Read', 'agent'],
    ]);
    expect(calls[0]!.decided_by).toMatch(/^autonomy full/);
    expect(calls[2]!.decided_by).toBe(`tool rule ${rule}`);
    expect(calls[2]!.error).toMatch(/^denied by tool rule/);
    expect(calls[3]!.error).toMatch(/^refused by the agent: Only files inside the working directory/);
    expect(calls.map((c) => c.turn)).toEqual([1, 1, 1, 1]);
    expect(calls.map((c) => c.seq).sort()).toEqual([1, 2, 3, 4]);
    expect(JSON.parse(calls[1]!.input)).toEqual({ command: 'echo two' });
    // The calls that ran have their output's size and digest; the refused ones none.
    for (const c of calls.slice(0, 2)) {
      expect(c.output_bytes).toBeGreaterThan(0);
      expect(c.output_sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(calls[2]!.output_sha256).toBeNull();
    expect(statSync(join(chat.groupDir, 'one.txt')).size).toBe(3);

    // The model read every receipt beside its tool's result (or refusal), and cites them.
    const cited = answer.split('\n').slice(1);
    expect(answer.split('\n')[0]).toBe('Calls done.');
    expect(cited.map((r) => parseReceipt(r)?.seq).sort()).toEqual([1, 2, 3, 4]);
    const stored = new Set(calls.map((c) => `gated-receipt:v1:${run!.id}.${c.seq}:${c.receipt}`));
    for (const r of cited) expect(stored.has(r), r).toBe(true);

    const path = chat.gated.config.db;
    const ok = await gatedCli(path, 'receipts', 'check', `the model said ${cited[1]} earlier`);
    expect(ok.code, ok.out + ok.err).toBe(0);
    expect(ok.out).toMatch(/^ok: run \d+, record 2: /);
    const forged = cited[1]!.replace(/[0-9a-f]$/, (d) => (d === '0' ? '1' : '0'));
    expect((await gatedCli(path, 'receipts', 'check', forged)).code).toBe(1);
    const verified = await gatedCli(path, 'receipts', 'verify');
    expect(verified.out.trim()).toBe('ok: 4 records in 1 run verify');
    const shown = await gatedCli(path, 'runs', 'show', String(run!.id));
    expect(shown.out).toMatch(/Bash\s+deny\s+tool rule/);
    expect(shown.out.indexOf('Write')).toBeLessThan(shown.out.indexOf('Read'));

    // An edit made with sqlite3 behind gated's back: the record it changed is the first broken link.
    const second = calls.find((c) => c.seq === 2)!;
    execFileSync('sqlite3', [
      path,
      `UPDATE tool_calls SET error = NULL, output_bytes = 1 WHERE id = ${second.id}`,
    ]);
    const broken = await gatedCli(path, 'receipts', 'verify', String(run!.id));
    expect(broken.code).toBe(1);
    expect(broken.out.trim()).toBe(
      `broken: run ${run!.id}, record 2 (tool_calls id ${second.id}): its receipt does not match its fields (the record was changed, or signed under another key)`,
    );
    // A record removed from the middle: the one after it no longer links.
    execFileSync('sqlite3', [path, `DELETE FROM tool_calls WHERE id = ${second.id}`]);
    const gap = await gatedCli(path, 'receipts', 'verify');
    expect(gap.out.trim()).toMatch(/^broken: run \d+, record 3 .*expected place 2 in the chain, found 3$/);
  },
);
