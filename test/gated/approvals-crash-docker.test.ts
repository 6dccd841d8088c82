import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, spawnGated, until } from '../helpers/process.js';
import { seedPendingTool } from './approvals-crash-support.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';

/**
 * kill -9 of gated while a tool approval is pending, docker runtime (docs/APPROVALS.md, "Restarts"): the
 * example agent's `!tool` mode in a container of a private dockerd. The killed gated's container is
 * swept by the restarted one; the re-run's container asks the same question, which finds the stored row
 * (no second chat message); the CLI's decision from another process answers it; the tool ran once, and no
 * container is left.
 */
const IMAGE = 'gated-approvals-agent:test';
let engine: TestDockerd | undefined;

beforeAll(async () => {
  engine = await startDockerd();
  await engine.buildAgentImage(IMAGE);
}, 180_000);

afterAll(async () => {
  await engine?.stop();
});

describe('a pending tool approval across kill -9, docker runtime', () => {
  it('one chat message asked, the decision after the restart answers the re-run in a new container, the tool ran once', async () => {
    const dir = tempDir('gated-approvals-docker-');
    const env = gatedEnv(dir, {
      GATED_IDLE_TIMEOUT_MS: '500',
      GATED_RUNTIME: 'docker',
      DOCKER_HOST: engine!.host,
      GATED_AGENT_IMAGE: IMAGE,
    });
    const { id, watch, get, asks, expectRanOnce } = seedPendingTool(env);
    const containers = async () => {
      const instance = get(`SELECT value FROM router_state WHERE key = 'instance_id'`) as string;
      const list = await engine!.docker.listContainers({
        all: true,
        filters: { label: [`${INSTANCE_LABEL}=${instance}`] },
      });
      return list.map((c) => c.Id);
    };

    const first = gatedRun(env);
    await until(() => asks().length === 1, 60_000, 'the question in the chat');
    const runBefore = get(`SELECT run_id FROM tool_approvals`) as number;
    const [asking] = await containers();
    expect(asking).toBeDefined();
    first.kill('SIGKILL');
    await exited(first);
    expect(get(`SELECT state FROM tool_approvals`)).toBe('pending');

    const second = gatedRun(env);
    try {
      // The re-run's agent asks again from a new container: the stored row now names the new run.
      await until(
        () => (get(`SELECT run_id FROM tool_approvals`) as number) > runBefore,
        60_000,
        'the re-ask',
      );
      // The dead gated's container was swept by the new one.
      await until(async () => !(await containers()).includes(asking!), 30_000, 'the old container swept');
      const code = get(`SELECT code FROM tool_approvals`) as string;
      const cli = spawnGated(['approvals', 'approve', code], env);
      expect(await exited(cli)).toBe(0);
      await until(() => get(`SELECT state FROM messages WHERE id = ${id}`) === 'done', 60_000, 'the answer');
    } finally {
      second.kill('SIGTERM');
      expect(await exited(second)).toBe(0);
    }

    expectRanOnce();
    expect(await containers()).toEqual([]);
    watch.close();
  }, 240_000);
});
