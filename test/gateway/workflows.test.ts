import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { runGatedCli } from '../helpers/cli.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { addProfiles, BROKEN, FANOUT, SHIP, WORKFLOW_AGENT_CMD, writeWorkflows } from './workflow-support.js';

/**
 * Workflows end to end (docs/WORKFLOWS.md): a whole gated on the process runtime, group `ops` with the
 * workflow files of workflow-support.ts, a Telegram chat with no channel started (the questions are plain
 * messages, decisions typed).
 */
async function start(env: Record<string, string> = {}, http = false) {
  const configDir = tempDir();
  const g = await startTestGated({
    channels: [],
    http,
    env: { GATED_IDLE_TIMEOUT_MS: '300', GATED_POLL_MS: '50', GATED_CONFIG_DIR: configDir, ...env },
  });
  addGroup(g.db, g.config.groupsDir, 'ops');
  g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'ops')`).run();
  upsertMember(g.db, 'ops', 'telegram:owner', 'owner');
  upsertMember(g.db, 'ops', 'telegram:bob', 'member');
  addProfiles(g.db);
  writeWorkflows(configDir, { ship: SHIP, fanout: FANOUT, broken: BROKEN });
  const chat = 'telegram:-1';
  const replies = () =>
    g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
      .pluck()
      .all(chat) as string[];
  const send = (sender: string, content: string) => g.gateway.sink({ chat_jid: chat, sender, content })!;
  const get = (sql: string, ...args: unknown[]) =>
    g.db
      .prepare(sql)
      .pluck()
      .get(...args);
  const runState = (id: number) => get('SELECT state FROM workflow_runs WHERE id = ?', id) as string;
  const pendingCode = () =>
    get(`SELECT code FROM tool_approvals WHERE state = 'pending' AND ask_id LIKE 'workflow:%'`) as
      string | undefined;
  /** Each step row was answered by exactly one reply. */
  const answeredOnce = (run: number) =>
    g.db
      .prepare(
        `SELECT m.target, (SELECT count(*) FROM messages o WHERE o.reply_to_id = m.id AND o.kind = 'reply') AS n
         FROM messages m WHERE m.verb = 'workflow' AND m.sender_name LIKE ? ORDER BY m.id`,
      )
      .all(`% #${run}`) as Array<{ target: string; n: number }>;
  return { g, configDir, replies, send, get, runState, pendingCode, answeredOnce };
}

describe('a workflow with a gate, on the example agent', () => {
  it('plan → approve → implement → review: the plan waits for an owner, each step answered once, outputs handed on', async () => {
    const { g, replies, send, runState, pendingCode, answeredOnce } = await start({}, true);
    send('owner', '/workflow run ship add a --dry-run flag');
    const code = await until(pendingCode, 20_000, 'the gate asks');
    // The dashboard follows the run, and lists the gate among what waits on a person.
    const view = (await (await fetch(`${g.url}/api/workflows/1`)).json()) as {
      steps: Array<{ name: string; status: string; code: string | null }>;
    };
    expect(view.steps.map((s) => [s.name, s.status, s.code])).toEqual([
      ['plan', 'done', null],
      ['approve', 'asking', code],
      ['implement', 'waiting', null],
      ['review', 'waiting', null],
    ]);
    const waiting = (await (await fetch(`${g.url}/api/waiting`)).json()) as {
      items: Array<{ kind: string; code: string; what: string }>;
    };
    expect(waiting.items).toMatchObject([
      { kind: 'workflow gate', code, what: 'Workflow ship #1, gate approve: Go ahead with this plan?' },
    ]);
    const before = replies().join('\n');
    expect(before).toContain('Workflow ship #1 started: plan, approve (gate), implement, review');
    expect(before).toContain('echo: Plan: add a --dry-run flag');
    expect(before).toContain('Go ahead with this plan?');
    expect(before).toContain(`/approve ${code}`);
    // Nothing after the gate runs before a decision.
    expect(g.db.prepare(`SELECT count(*) FROM messages WHERE verb = 'workflow'`).pluck().get()).toBe(1);

    // A member may not decide an owners' gate; the owner does.
    send('bob', `/approve ${code}`);
    await until(() => replies().some((r) => r.startsWith('you may not approve')), 10_000, 'bob refused');
    expect(pendingCode()).toBe(code);
    send('owner', `/approve ${code} looks good`);
    await until(() => runState(1) === 'done', 30_000, 'the run finished');

    const all = replies().join('\n');
    // implement ran the command file with the run's arguments and was handed the plan through the gate.
    expect(all).toContain('echo: Implement the plan for: add a --dry-run flag');
    expect(all).toContain('Output of step plan:');
    // review ran on its own agent profile and model, with implement's output in its prompt.
    expect(all).toContain(
      'reviewer/careful-1: Review this: echo: Implement the plan for: add a --dry-run flag',
    );
    expect(all).toContain('Workflow ship #1 finished: 4 steps.');
    expect(answeredOnce(1)).toEqual([
      { target: 'workflow:1/plan', n: 1 },
      { target: 'workflow:1/implement', n: 1 },
      { target: 'workflow:1/review', n: 1 },
    ]);
    const kinds = g.db
      .prepare(
        `SELECT step || ' ' || kind FROM workflow_events WHERE run_id = 1 AND step IS NOT NULL ORDER BY id`,
      )
      .pluck()
      .all();
    expect(kinds).toEqual([
      'plan started',
      'plan done',
      'approve asked',
      'approve approved',
      'implement started',
      'implement done',
      'review started',
      'review done',
    ]);
    // The rows are audited like the other operator-facing tables.
    expect(
      g.db.prepare(`SELECT count(*) FROM audit WHERE subject = 'workflow_runs'`).pluck().get(),
    ).toBeGreaterThan(0);
  }, 60_000);

  it('a rejected gate ends the run with the note in the chat; nothing after the gate runs; resume asks again', async () => {
    const { g, replies, send, runState, pendingCode } = await start();
    send('owner', '/workflow run ship rename the flag');
    const code = await until(pendingCode, 20_000, 'the gate asks');
    send('owner', `/reject ${code} the plan skips the migration`);
    await until(() => runState(1) === 'rejected', 20_000, 'the run rejected');
    await until(
      () =>
        replies().some((r) =>
          r.includes('gate approve rejected by telegram:owner: the plan skips the migration'),
        ),
      10_000,
      'the note in the chat',
    );
    expect(
      g.db.prepare(`SELECT count(*) FROM messages WHERE target = 'workflow:1/implement'`).pluck().get(),
    ).toBe(0);
    send('owner', '/workflow resume');
    const again = await until(() => pendingCode(), 20_000, 'the gate asks again');
    expect(again).not.toBe(code);
    // The plan is not run again: it was done.
    expect(g.db.prepare(`SELECT count(*) FROM messages WHERE target = 'workflow:1/plan'`).pluck().get()).toBe(
      1,
    );
    send('owner', '/workflow cancel');
    await until(() => runState(1) === 'cancelled', 10_000, 'cancelled');
    expect(g.db.prepare('SELECT state FROM tool_approvals WHERE code = ?').pluck().get(again)).toBe(
      'cancelled',
    );
  }, 60_000);

  it('two steps that may run at once do, each in its own session, under the cap', async () => {
    const { g, replies, send, runState, answeredOnce } = await start({
      GATED_AGENT_CMD: WORKFLOW_AGENT_CMD,
      GATED_MAX_CONCURRENT: '2',
    });
    send('owner', '/workflow run fanout now');
    await until(() => runState(1) === 'done', 45_000, 'the run finished');
    const all = replies().join('\n');
    // Each waited for the other's start: had they run one after the other, each would say 'alone'.
    expect(all).toMatch(/!barrier 2 left now\ntogether/);
    expect(all).toMatch(/!barrier 2 right now\ntogether/);
    expect(all).toContain('Output of step left:');
    expect(all).toContain('Output of step right:');
    expect(answeredOnce(1).map((r) => r.n)).toEqual([1, 1, 1]);
    const log = join(g.config.groupsDir, 'ops', '.wf-answers.log');
    expect(existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').sort() : []).toEqual([
      'wf1-join',
      'wf1-left',
      'wf1-right',
    ]);
  }, 60_000);

  it('an invalid workflow file never runs and `gated workflows check` names its lines', async () => {
    const { g, configDir, replies, send } = await start();
    send('owner', '/workflow run broken');
    await until(() => replies().some((r) => r.includes('is invalid and does not run')), 10_000, 'refused');
    expect(replies().join('\n')).toContain(
      'ops/workflows/broken.md:2: the steps depend on each other in a cycle: a → b → a',
    );
    expect(g.db.prepare(`SELECT count(*) FROM workflow_runs`).pluck().get()).toBe(0);
    send('owner', '/help');
    await until(() => replies().some((r) => r.includes('Workflows of ops')), 10_000, '/help');
    const help = replies().find((r) => r.includes('Workflows of ops'))!;
    expect(help).toContain('ship: Plan a change, wait for an owner, implement it, review it');
    expect(help).toContain('broken: INVALID');
    // The operator's check, from another process while gated runs (spawned without blocking this event loop,
    // which gated shares: a synchronous spawn held its group commit open and the check waited out the lock).
    const r = await runGatedCli(g.config.db, { GATED_CONFIG_DIR: configDir }, 'workflows', 'check', 'ops');
    expect(r.code, r.err).toBe(1);
    expect(r.err).toBe('');
    expect(r.out).toContain(
      'ops/workflows/broken.md:2: the steps depend on each other in a cycle: a → b → a',
    );
    expect(r.out).toContain(
      "ops/workflows/broken.md:10: step 'c' needs 'nowhere', which is no step of this file",
    );
    expect(r.out).not.toContain('ship.md');
  }, 60_000);
});
