/**
 * A delegation chain is one conversation with bounds (docs/SECURITY.md "Bounds"): the whole
 * gateway (startGated) runs the hostile agent (test/agents/hostile-agent.mjs) in every group, on the process
 * runtime and in containers on a real dockerd (test/helpers/runtimes.ts). A parent and child that would answer each other forever stop at the hop bound (20 per originating
 * message, the default); a chain that would nest as deep as there are groups stops at depth 3 (the
 * default); a child that reached its runs_per_day gets no more delegations. Each refusal is a note for the
 * session that asked, which reaches its agent in the next line gated writes to it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import { e2eConfig } from '../channels/support.js';
import { tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { AGENT_RUNTIMES, useAgentRuntime, type RuntimeUnderTest } from '../helpers/runtimes.js';
import { groupDirOf } from '../../core/group-dir.js';

let gated: Gated | undefined;
afterEach(async () => {
  await gated?.close(2000);
  gated = undefined;
}, 30_000);

async function start(rt: RuntimeUnderTest): Promise<Gated> {
  const config = e2eConfig(tempDir('gated-chains-'), rt.env(), {
    groups: [
      ['loop', 'Loop'],
      ['loop/sub', 'Sub'],
      ['loop/sub/sub', 'Sub 2'],
      ['loop/sub/sub/sub', 'Sub 3'],
      ['loop/sub/sub/sub/sub', 'Sub 4'],
      ['capped', 'Capped'],
      ['capped/sub', 'Capped child'],
    ],
    routes: [],
  });
  gated = await startGated({ config, log: silentLogger(), http: false });
  return gated;
}

const notes = (g: Gated, group: string) =>
  g.db
    .prepare(`SELECT content FROM system_messages WHERE group_folder = ? ORDER BY id`)
    .pluck()
    .all(group) as string[];

const said = (g: Gated, chat: string) =>
  g.db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
    .pluck()
    .all(chat) as string[];

/** Every prompt the group's agent was given (the hostile agent logs its input lines). */
const prompts = (g: Gated, group: string): string[] =>
  readFileSync(join(groupDirOf(g.config.groupsDir, group), 'inputs.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => String((JSON.parse(l) as { prompt?: unknown }).prompt ?? ''));

describe.each(AGENT_RUNTIMES)('on the %s runtime', (kind) => {
  const rt = useAgentRuntime(kind, 'hostile-agent.mjs');

  test(
    'a parent and child answering each other stop at 20 hops; the refusal reaches the parent in a note',
    async () => {
      const g = await start(rt);
      const origin = g.gateway.sink({ chat_jid: 'web:loop', sender: 'mallory', content: 'loop sub' })!;
      const reason = `the delegation chain of message ${origin} would make 21 hops; at most 20`;
      await until(() => notes(g, 'loop').some((n) => n.includes(reason)), rt.ms(30_000), 'the hop refusal');
      // Ten delegations and their ten answers: 20 rows placed for the one originating message, none deeper.
      const chain = g.db
        .prepare(
          `SELECT count(*) AS n, min(depth) AS lo, max(depth) AS hi, min(origin) AS o1, max(origin) AS o2
                FROM delegations`,
        )
        .get();
      expect(chain).toEqual({ n: 10, lo: 1, hi: 1, o1: origin, o2: origin });
      expect(g.db.prepare(`SELECT count(*) FROM delegation_rows WHERE origin = ?`).pluck().get(origin)).toBe(
        20,
      );
      expect(g.db.prepare(`SELECT type, reason FROM actions WHERE status = 'refused'`).all()).toEqual([
        { type: 'delegate', reason },
      ]);
      // Nothing more happens: no run is started for the chain after the refusal.
      const runs = g.db.prepare(`SELECT count(*) FROM delegations`).pluck();
      await new Promise((r) => setTimeout(r, rt.ms(1000)));
      expect(runs.get()).toBe(10);
      // The chat goes on, and the parent's agent is told in its next line.
      g.gateway.sink({ chat_jid: 'web:loop', sender: 'mallory', content: 'what happened?' });
      await until(
        () => said(g, 'web:loop').includes('echo: what happened?'),
        rt.ms(15_000),
        'the next answer',
      );
      expect(prompts(g, 'loop').find((p) => p.includes(reason))).toContain(
        `Your delegate action was not applied: ${reason}.`,
      );
    },
    rt.ms(60_000),
  );

  test(
    'a chain that would nest deeper than 3 is refused at the fourth level, in that session’s note',
    async () => {
      const g = await start(rt);
      const origin = g.gateway.sink({ chat_jid: 'web:loop', sender: 'mallory', content: 'dive' })!;
      await until(() => notes(g, 'loop/sub/sub/sub').length > 0, rt.ms(30_000), 'the depth refusal');
      expect(notes(g, 'loop/sub/sub/sub')).toEqual([
        'Your delegate action was not applied: the delegation chain would be 4 deep; at most 3.',
      ]);
      expect(g.db.prepare(`SELECT to_group, depth, origin FROM delegations ORDER BY id`).all()).toEqual([
        { to_group: 'loop/sub', depth: 1, origin },
        { to_group: 'loop/sub/sub', depth: 2, origin },
        { to_group: 'loop/sub/sub/sub', depth: 3, origin },
      ]);
      // The deepest group never ran; the answers climbed back up to the chat.
      await until(
        () => said(g, 'web:loop').some((s) => s.includes('echo: echo: diving')),
        rt.ms(15_000),
        'the answers',
      );
      expect(
        g.db
          .prepare(`SELECT count(*) FROM session_log WHERE group_folder = 'loop/sub/sub/sub/sub'`)
          .pluck()
          .get(),
      ).toBe(0);
    },
    rt.ms(60_000),
  );

  test(
    'every run of a chain counts against the group that runs it: a child at its runs_per_day gets no more',
    async () => {
      const g = await start(rt);
      g.db.prepare(`INSERT INTO limits (group_folder, runs_per_day) VALUES ('capped/sub', 1)`).run();
      g.gateway.sink({ chat_jid: 'web:capped', sender: 'mallory', content: 'loop sub' });
      const reason = "'capped/sub' reached its limit of 1 agent runs per day";
      await until(
        () => notes(g, 'capped').some((n) => n.includes(reason)),
        rt.ms(30_000),
        'the limit refusal',
      );
      expect(g.db.prepare(`SELECT count(*) FROM delegations`).pluck().get()).toBe(1);
      expect(
        g.db.prepare(`SELECT count(*) FROM session_log WHERE group_folder = 'capped/sub'`).pluck().get(),
      ).toBe(1);
      expect(g.db.prepare(`SELECT reason FROM actions WHERE status = 'refused'`).pluck().all()).toEqual([
        reason,
      ]);
    },
    rt.ms(60_000),
  );
});
