/**
 * One conformance suite for every Runtime (one interface, one shared suite): the same cases run against the process
 * runtime and the docker runtime on a real engine, with the same test agent
 * (test/queue/agents/conformance-agent.mjs). Part of it drives the raw AgentHandle, part drives the real
 * queue on a real database, so idle and hard timeouts and /stop are proven end to end on each runtime.
 */
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createOutputParser, type OutputBlock } from '../../queue/protocol/parser.js';
import { createQueue } from '../../queue/queue.js';
import type { AgentExit, AgentHandle, Runtime } from '../../queue/runtime/types.js';
import type { WorkQueue } from '../../queue/types.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { ready } from './helpers.js';
import { recordingSignals } from '../helpers/signals.js';

/** What a runtime's test file provides. */
export interface ConformanceEnv {
  /** A runtime whose agents run the conformance agent, with `groupsDir` as GATED_GROUPS_DIR. */
  runtime(groupsDir: string): Runtime;
  /** The agent's working directory as the agent itself sees it. */
  workdirSeenByAgent(groupDir: string): string;
  /**
   * The agent's processes are this machine's (process runtime), so the test can look for them in /proc
   * (by a tag on their command line: in a PID namespace the pids the agent sees are not the host's).
   */
  hostPids: boolean;
  /** Fails when anything of the suite is left behind (containers with our label, processes). */
  assertNothingLeft(): Promise<void>;
}

/** Pids of this machine's processes whose command line carries `tag` as an argument. */
function processesTagged(tag: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(tag);
      } catch {
        return false;
      }
    })
    .map(Number);
}

const input = (contents: string[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    prompt: contents.join('\n'),
    sessionId: null,
    group: 'conf',
    topic: '',
    chatJid: 'test:conf',
    messages: contents.map((content, i) => ({ id: i + 1, content })),
    ...extra,
  }) + '\n';

const followUp = (content: string) =>
  JSON.stringify({ type: 'message', prompt: content, messages: [{ content }] }) + '\n';

/** Collects a handle's blocks; `next()` resolves with the next block to arrive. */
function reader(handle: AgentHandle) {
  const blocks: OutputBlock[] = [];
  const waiters: Array<(b: OutputBlock) => void> = [];
  const parser = createOutputParser({
    maxBlockBytes: 1 << 22,
    onBlock: (b) => {
      const w = waiters.shift();
      if (w) w(b);
      else blocks.push(b);
    },
  });
  handle.stdout.on('data', (c: Buffer) => parser.push(c));
  handle.stdout.on('end', () => parser.end());
  return {
    next: () => new Promise<OutputBlock>((r) => (blocks.length ? r(blocks.shift()!) : waiters.push(r))),
    pending: blocks,
  };
}

function settledFlag(p: Promise<AgentExit>) {
  const state = { done: false };
  void p.then(() => (state.done = true));
  return state;
}

/** Registers the conformance cases for one runtime. */
export function runtimeConformance(name: string, env: () => ConformanceEnv): void {
  describe(`runtime conformance: ${name}`, () => {
    const queues: WorkQueue[] = [];
    const groupsDir = () => tempDir('gated-conf-groups-');
    const start = async (rt: Runtime, groups: string) => {
      const groupDir = join(groups, 'conf');
      const handle = await rt.start({ runId: 1, group: 'conf', topic: '', groupDir });
      return { handle, groupDir };
    };

    afterAll(async () => {
      for (const q of queues) await q.close(0);
      await env().assertNothingLeft();
    });

    it('delivers the first line and follow-ups in order and streams each reply before exit', async () => {
      const groups = groupsDir();
      const { handle } = await start(env().runtime(groups), groups);
      const out = reader(handle);
      const exited = settledFlag(handle.exited);
      expect(handle.write(input(['echo a', 'echo b']))).toBe(true);
      expect((await out.next()).result).toBe('echo: a');
      expect((await out.next()).result).toBe('echo: b');
      expect(exited.done).toBe(false);
      expect(handle.write(followUp('echo c'))).toBe(true);
      expect(handle.write(followUp('echo ünïcødé 😀'))).toBe(true);
      const c = await out.next();
      expect(c).toEqual({ status: 'ok', result: 'echo: c', newSessionId: 'conf-new' });
      expect((await out.next()).result).toBe('echo: ünïcødé 😀');
      expect(exited.done).toBe(false);
      handle.closeStdin();
      expect(handle.stdinOpen).toBe(false);
      expect(handle.write(followUp('too late'))).toBe(false);
      expect(await handle.exited).toMatchObject({ code: 0, signal: null });
    });

    it('carries a large input line intact', async () => {
      const groups = groupsDir();
      const { handle } = await start(env().runtime(groups), groups);
      const out = reader(handle);
      const big = 'x'.repeat(300_000);
      handle.write(input([`echo ${big}`]));
      expect((await out.next()).result).toBe(`echo: ${big}`);
      handle.closeStdin();
      expect((await handle.exited).code).toBe(0);
    });

    it('captures the exit code and the tail of stderr', async () => {
      const groups = groupsDir();
      const { handle } = await start(env().runtime(groups), groups);
      const out = reader(handle);
      handle.write(input(['stderr first complaint', 'exit 3']));
      expect((await out.next()).result).toBe('stderr: ok');
      const exit = await handle.exited;
      expect(exit.code).toBe(3);
      expect(exit.stderrTail).toContain('first complaint\n');
      expect(exit.stderrTail).toContain('exiting 3\n');
    });

    it('kills an agent that ignores end of stdin, and everything it started', async () => {
      const groups = groupsDir();
      const { handle } = await start(env().runtime(groups), groups);
      const out = reader(handle);
      handle.write(input(['child', 'hang']));
      const tag = /child: \d+ (\S+)/.exec((await out.next()).result ?? '')?.[1] ?? 'no tag';
      expect((await out.next()).result).toBe('hanging');
      handle.closeStdin();
      handle.kill();
      const exit = await handle.exited;
      expect(exit.code === 137 || exit.signal === 'SIGKILL').toBe(true);
      if (env().hostPids) {
        expect(tag).toMatch(/^conformance-child-/);
        await vi.waitFor(() => expect(processesTagged(tag)).toEqual([]), { timeout: 5000 });
      }
    });

    it('runs in the group folder, writable, with no secret in its environment', async () => {
      const groups = groupsDir();
      process.env.GATED_CONFORMANCE_SECRET = 'must-not-leak';
      try {
        const { handle, groupDir } = await start(env().runtime(groups), groups);
        const out = reader(handle);
        handle.write(input(['whoami', 'env']));
        const who = (await out.next()).result ?? '';
        expect(who).toContain(`cwd=${env().workdirSeenByAgent(groupDir)}`);
        expect(readFileSync(join(groupDir, 'conformance-was-here.txt'), 'utf8')).toBe('ok\n');
        const names = ((await out.next()).result ?? '').split(',');
        expect(names).not.toContain('GATED_CONFORMANCE_SECRET');
        expect(names.filter((n) => /TOKEN|PASSWORD|SECRET|KEY/.test(n))).toEqual([]);
        handle.closeStdin();
        await handle.exited;
      } finally {
        delete process.env.GATED_CONFORMANCE_SECRET;
      }
    });

    describe('through the queue', () => {
      const queueOn = (over: { idleTimeoutMs?: number; runTimeoutMs?: number } = {}) => {
        const { db } = freshDb();
        const groups = groupsDir();
        mkdirSync(join(groups, 'conf'), { recursive: true });
        const { signals, outbound } = recordingSignals();
        const queue = createQueue({
          db,
          runtime: env().runtime(groups),
          config: {
            groupsDir: groups,
            maxConcurrent: 2,
            idleTimeoutMs: over.idleTimeoutMs ?? 60_000,
            runTimeoutMs: over.runTimeoutMs ?? 60_000,
            maxOutputBytes: 1 << 20,
          },
          log: silentLogger(),
          secrets: { ANTHROPIC_API_KEY: 'sk-test' },
          signals,
        });
        queues.push(queue);
        const runEnded = () =>
          vi.waitFor(
            () => {
              const r = db.prepare('SELECT * FROM session_log ORDER BY id DESC LIMIT 1').get() as
                Record<string, unknown> | undefined;
              expect(r?.result).not.toBeNull();
              expect(r?.result).toBeDefined();
              return r!;
            },
            { timeout: 15_000, interval: 20 },
          );
        const replies = () =>
          db
            .prepare('SELECT content FROM messages WHERE is_from_me = 1 ORDER BY id')
            .pluck()
            .all() as string[];
        return { db, queue, outbound, runEnded, replies, key: { group: 'conf', topic: '' } };
      };

      it('closes stdin after the idle timeout; the agent exits and the run is ok', async () => {
        const q = queueOn({ idleTimeoutMs: 300 });
        ready(q.db, { group: 'conf', content: 'echo hi' });
        q.queue.wake();
        const run = await q.runEnded();
        expect(run).toMatchObject({ result: 'ok', exit_code: 0, replies: 1 });
        expect(q.replies()).toEqual(['echo: hi']);
        expect(q.db.prepare('SELECT session_id FROM sessions').pluck().get()).toBe('conf-new');
      });

      it('passes secrets on stdin only', async () => {
        const q = queueOn({ idleTimeoutMs: 200 });
        ready(q.db, { group: 'conf', content: 'secrets' });
        q.queue.wake();
        await q.runEnded();
        expect(q.replies()).toEqual(['ANTHROPIC_API_KEY']);
      });

      it('kills a run at the hard timeout and logs it as timeout', async () => {
        // Long enough for a container to start on a busy machine, short enough for a test.
        const q = queueOn({ runTimeoutMs: 4000 });
        const id = ready(q.db, { group: 'conf', content: 'hang' });
        q.queue.wake();
        const run = await q.runEnded();
        expect(run).toMatchObject({ result: 'timeout' });
        // 'hanging' was delivered, so the batch is answered and not retried.
        expect(q.replies()).toEqual(['hanging']);
        expect(q.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id)).toBe('done');
      });

      it('stops a running agent with /stop', async () => {
        const q = queueOn();
        const id = ready(q.db, { group: 'conf', content: 'silent' });
        q.queue.wake();
        await vi.waitFor(() => expect(q.queue.facts(q.key).running).toBe(true), { timeout: 10_000 });
        expect(await q.queue.stop(q.key)).toBe(true);
        const run = await q.runEnded();
        expect(run).toMatchObject({ result: 'stopped' });
        expect(q.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id)).toBe('stopped');
        expect(q.queue.facts(q.key).running).toBe(false);
      });
    });
  });
}
