/**
 * The docker engine dies under a working gated and comes back. The whole gated (real queue, docker runtime,
 * real SQLite file, web channel, delivery) against a private dockerd (test/infra/dockerd.ts) running a slow
 * agent that answers turn by turn (test/queue/agents/turn-agent.mjs, 300 ms per turn). dockerd is killed
 * with SIGKILL while runs are in flight, so nothing is cleaned up on its way down (a SIGTERM would make
 * dockerd remove its containers itself), then started again on the same data root.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { addGroup } from '../../store/groups.js';
import { getState } from '../../store/state.js';
import { closeTestGated, startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';

const IMAGE = 'gated-turn-agent:test';
const GROUPS = ['g1', 'g2', 'g3', 'g4'];

let engine: TestDockerd | undefined;

beforeAll(async () => {
  engine = await startDockerd();
  await engine.buildAgentImage(IMAGE, packageFile('test', 'queue', 'agents'), 'turn-agent.mjs');
}, 180_000);

afterAll(async () => {
  await engine?.stop();
});

describe('the docker engine killed during runs and started again', () => {
  it('fails the runs at once, retries them once it is back, answers every message once and removes the dead runs’ containers', async () => {
    const g = await startTestGated({
      env: {
        GATED_POLL_MS: '50',
        GATED_RUNTIME: 'docker',
        DOCKER_HOST: engine!.host,
        GATED_AGENT_IMAGE: IMAGE,
        GATED_MAX_CONCURRENT: '4',
        // Agents stay for follow-ups: the kill finds every run alive, with follow-up turns open.
        GATED_IDLE_TIMEOUT_MS: '30000',
        // Far longer than the test may take: a run that waits for its hard timeout fails the test.
        GATED_RUN_TIMEOUT_MS: '600000',
      },
      http: false,
      graceMs: 2000,
      seed: (db, config) => {
        for (const group of GROUPS) addGroup(db, config.groupsDir, group, group);
      },
    });
    const config = g.config;
    const instance = getState(g.db, 'instance_id')!;
    // Its own connection: the checks go on after gated is closed.
    const db = new Database(config.db, { readonly: true });
    onTestFinished(() => {
      db.close();
    });
    const count = (sql: string) => db.prepare(sql).pluck().get() as number;
    const sent: Array<{ id: number; content: string }> = [];
    const post = async (group: string, content: string) => {
      const id = (await g.web.post({ folder: group, topic: '', content }))!;
      sent.push({ id, content });
    };
    const wave = async (name: string, n: number) => {
      for (const grp of GROUPS) for (let i = 0; i < n; i++) await post(grp, `${name}-${grp}-${i}`);
    };
    const answered = () => count(`SELECT count(*) FROM messages WHERE is_from_me = 0 AND state = 'done'`);

    // A run per chat answers its first turn and stays for follow-ups (30 s idle timeout).
    await wave('before', 2);
    await until(() => answered() === sent.length, 60_000, 'the first turns answered');
    const inFlight = count(`SELECT count(*) FROM session_log WHERE result IS NULL`);
    expect(inFlight).toBe(GROUPS.length);
    // Follow-ups are written to the live agents, which think 300 ms per turn: the engine dies under them.
    await wave('during', 2);
    await until(
      () => count(`SELECT count(*) FROM messages WHERE state = 'running'`) >= GROUPS.length,
      30_000,
      'follow-up turns written',
    );
    await engine!.stopEngine('SIGKILL');
    const killedAt = Date.now();

    // Every run of the outage ends at once, recorded as failed with the reason; its rows wait, ready.
    await until(
      () =>
        count(`SELECT count(*) FROM session_log WHERE result IS NULL`) === 0 &&
        count(`SELECT count(*) FROM messages WHERE state = 'running'`) === 0,
      15_000,
      'the runs of the outage ended',
    );
    const endedWithin = Date.now() - killedAt;
    await wave('outage', 1);
    // Starts tried while the engine is gone fail the same way and lose nothing.
    await until(
      () => count(`SELECT count(*) FROM session_log WHERE error LIKE 'engine unreachable%'`) > inFlight,
      30_000,
      'a retry while the engine is gone',
    );
    const outage = db
      .prepare(`SELECT result, error FROM session_log WHERE error LIKE 'engine unreachable%'`)
      .all() as Array<{ result: string; error: string }>;
    expect(outage.length).toBeGreaterThan(inFlight);
    for (const r of outage) {
      expect(r.result).toBe('error');
      expect(r.error).toMatch(/^engine unreachable: .*cannot be reached \((ECONNREFUSED|ENOENT)\)/);
    }
    expect(
      count(`SELECT count(*) FROM messages WHERE is_from_me = 0 AND state IN ('parked', 'failed')`),
    ).toBe(0);

    await engine!.startEngine();
    await until(() => answered() === sent.length, 120_000, 'every message answered');
    // Stopping gated ends the runs that came after the outage; their containers are removed as they end.
    await closeTestGated(g, 10_000);

    // Every message answered exactly once: its echo is in exactly one reply row, and nothing failed.
    const replies = db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND kind = 'reply'`)
      .pluck()
      .all() as string[];
    const lines = replies.flatMap((r) => r.split('\n'));
    for (const m of sent)
      expect(
        lines.filter((l) => l === `echo: ${m.content}`),
        m.content,
      ).toHaveLength(1);
    expect(lines).toHaveLength(sent.length);
    expect(count(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND kind = 'error'`)).toBe(0);
    // The outage counted against no message: none used up an attempt.
    expect(count(`SELECT max(attempts) FROM messages WHERE is_from_me = 0`)).toBe(0);

    // No container of any run is left: the dead runs' ones (stopped by the restarted engine, not
    // removed) were swept once the engine answered, the later ones removed as their runs ended.
    const left = await engine!.docker.listContainers({
      all: true,
      filters: { label: [`${INSTANCE_LABEL}=${instance}`] },
    });
    expect(left.map((c) => `${c.Labels['gated.run']}: ${c.State}`)).toEqual([]);
    // The runs of the outage ended within seconds, not at their 10-minute hard timeout.
    expect(endedWithin).toBeLessThan(15_000);
  }, 300_000);
});
