import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, spawnGated, until } from '../helpers/process.js';
import { seedPendingTool } from './approvals-crash-support.js';

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
    const { id, watch, get, asks, expectRanOnce } = seedPendingTool(env);

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

    expectRanOnce();
    watch.close();
  }, 120_000);
});
