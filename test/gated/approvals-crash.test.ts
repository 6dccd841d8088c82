import Database from 'better-sqlite3';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, spawnGated, until } from '../helpers/process.js';

/**
 * kill -9 of gated while a tool approval is pending (docs/APPROVALS.md, "Restarts"), process runtime with
 * the example agent's `!tool` mode: after the restart the re-run asks the same question, which finds the
 * stored row (no second chat message); the decision, made with the CLI from another process, answers it;
 * the tool runs once.
 */
describe('a pending tool approval across kill -9', () => {
  it('one chat message asked, the decision after the restart answers the re-run, the tool ran once', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, { GATED_IDLE_TIMEOUT_MS: '500' });
    const seed = openDatabase(env.GATED_DB);
    addGroup(seed, env.GATED_GROUPS_DIR, 'ops');
    seed
      .prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, input, decision) VALUES ('ops', 1, 'Bash', '*', 'ask')`,
      )
      .run();
    const id = insertInbound(seed, { chat_jid: 'web:ops', sender: 'u', content: '!tool Bash make deploy' });
    seed.close();
    const watch = new Database(env.GATED_DB, { readonly: true });
    const get = (sql: string) => watch.prepare(sql).pluck().get();
    const asks = () =>
      watch
        .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%/approve %'`)
        .pluck()
        .all() as string[];

    const first = gatedRun(env);
    await until(() => asks().length === 1, 30_000, 'the question in the chat');
    const runBefore = get(`SELECT run_id FROM tool_approvals`) as number;
    first.kill('SIGKILL');
    await exited(first);
    expect(get(`SELECT state FROM tool_approvals`)).toBe('pending');

    const second = gatedRun(env);
    // The re-run's agent asks again: the stored row now names the new run (no new row, no new message).
    await until(() => (get(`SELECT run_id FROM tool_approvals`) as number) > runBefore, 30_000, 'the re-ask');
    const code = get(`SELECT code FROM tool_approvals`) as string;
    const cli = spawnGated(['approvals', 'approve', code], env);
    expect(await exited(cli)).toBe(0);
    await until(() => get(`SELECT state FROM messages WHERE id = ${id}`) === 'done', 30_000, 'the answer');
    second.kill('SIGTERM');
    expect(await exited(second)).toBe(0);

    expect(asks()).toHaveLength(1);
    expect(get(`SELECT count(*) FROM tool_approvals`)).toBe(1);
    const reply = watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
      .pluck()
      .all() as string[];
    expect(reply.join('\n')).toContain('tool Bash ran: {"command":"make deploy"}');
    const log = join(env.GATED_GROUPS_DIR, 'ops', '.tool-runs.log');
    expect(existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []).toEqual([
      'Bash {"command":"make deploy"}',
    ]);
    expect(get(`SELECT used_at IS NOT NULL FROM tool_approvals`)).toBe(1);
    watch.close();
  }, 120_000);
});
