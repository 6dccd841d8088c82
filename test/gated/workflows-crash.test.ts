import Database from 'better-sqlite3';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { killRun } from '../agents/crash-support.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, spawnGated, until } from '../helpers/process.js';
import { addProfiles, HOLD, SHIP, WORKFLOW_AGENT_CMD, writeWorkflows } from '../gateway/workflow-support.js';

/**
 * kill -9 of gated during a workflow run (docs/WORKFLOWS.md, "Durable, step by step"): inside a step (its
 * agent holding its answer) and between steps (at a gate, the plan done and the implementation not
 * started). After each restart the run goes on where it was: every step row answered once, the agent
 * answering each step once, and the run finishing.
 */
function setup() {
  const dir = tempDir();
  const configDir = join(dir, 'config');
  const env = gatedEnv(dir, {
    GATED_IDLE_TIMEOUT_MS: '300',
    GATED_CONFIG_DIR: configDir,
    GATED_AGENT_CMD: WORKFLOW_AGENT_CMD,
  });
  const seed = openDatabase(env.GATED_DB);
  addGroup(seed, env.GATED_GROUPS_DIR, 'ops');
  addProfiles(seed);
  seed.close();
  writeWorkflows(configDir, { hold: HOLD, ship: SHIP });
  const folder = join(env.GATED_GROUPS_DIR, 'ops');
  const send = (content: string) => {
    const db = openDatabase(env.GATED_DB);
    insertInbound(db, { chat_jid: 'web:ops', sender: 'u', content });
    db.close();
  };
  const watch = new Database(env.GATED_DB, { readonly: true, fileMustExist: true });
  const get = (sql: string) => watch.prepare(sql).pluck().get();
  const answers = () => {
    const log = join(folder, '.wf-answers.log');
    return existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').sort() : [];
  };
  /** Step targets with how many rows each had and how many replies answered them. */
  const steps = () =>
    watch
      .prepare(
        `SELECT m.target, count(*) AS rows,
                sum((SELECT count(*) FROM messages o WHERE o.reply_to_id = m.id AND o.kind = 'reply')) AS replies
         FROM messages m WHERE m.verb = 'workflow' GROUP BY m.target ORDER BY min(m.id)`,
      )
      .all();
  return { env, folder, send, watch, get, answers, steps };
}

async function kill9(child: ReturnType<typeof gatedRun>, folder: string): Promise<void> {
  child.kill('SIGKILL');
  await exited(child);
  // The agent a run left working, as the machine's end would.
  await killRun(folder, /workflow-agent\.mjs/);
}

describe('a workflow across kill -9 of gated', () => {
  it('inside a step: the step runs again once, answered once, and the run finishes', async () => {
    const { env, folder, send, watch, get, answers, steps } = setup();
    const first = await gatedUp(gatedRun(env));
    send('/workflow run hold go');
    await until(() => existsSync(join(folder, '.wf-held-wf1-middle')), 30_000, 'the middle step working');
    await kill9(first, folder);
    expect(get(`SELECT state FROM workflow_runs WHERE id = 1`)).toBe('running');
    expect(answers()).toEqual(['wf1-first']);

    writeFileSync(join(folder, '.wf-release'), '');
    const second = await gatedUp(gatedRun(env));
    await until(() => get(`SELECT state FROM workflow_runs WHERE id = 1`) === 'done', 30_000, 'the run done');
    second.kill('SIGTERM');
    expect(await exited(second)).toBe(0);
    expect(steps()).toEqual([
      { target: 'workflow:1/first', rows: 1, replies: 1 },
      { target: 'workflow:1/middle', rows: 1, replies: 1 },
      { target: 'workflow:1/last', rows: 1, replies: 1 },
    ]);
    expect(answers()).toEqual(['wf1-first', 'wf1-last', 'wf1-middle']);
    watch.close();
  }, 120_000);

  it('between steps, at a gate: asked once, decided after the restart, the rest runs once', async () => {
    const { env, folder, send, watch, get, answers, steps } = setup();
    const first = await gatedUp(gatedRun(env));
    send('/workflow run ship add a flag');
    const pending = () =>
      get(`SELECT code FROM tool_approvals WHERE state = 'pending'`) as string | undefined;
    const code = await until(pending, 30_000, 'the gate asks');
    await kill9(first, folder);

    const second = await gatedUp(gatedRun(env));
    // The operator decides from another process, as `gated approvals approve` does.
    const cli = spawnGated(['approvals', 'approve', code], env);
    expect(await exited(cli)).toBe(0);
    await until(() => get(`SELECT state FROM workflow_runs WHERE id = 1`) === 'done', 30_000, 'the run done');
    second.kill('SIGTERM');
    expect(await exited(second)).toBe(0);
    expect(get(`SELECT count(*) FROM tool_approvals`)).toBe(1);
    expect(
      get(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND content LIKE '%/approve ${code}%'`),
    ).toBe(1);
    expect(steps()).toEqual([
      { target: 'workflow:1/plan', rows: 1, replies: 1 },
      { target: 'workflow:1/implement', rows: 1, replies: 1 },
      { target: 'workflow:1/review', rows: 1, replies: 1 },
    ]);
    expect(answers()).toEqual(['wf1-implement', 'wf1-plan', 'wf1-review']);
    expect(get(`SELECT content FROM messages WHERE is_from_me = 1 ORDER BY id DESC LIMIT 1`)).toBe(
      'Workflow ship #1 finished: 4 steps.',
    );
    watch.close();
  }, 120_000);
});
