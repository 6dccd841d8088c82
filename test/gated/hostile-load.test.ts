/**
 * Hostile load (docs/SECURITY.md, "How it is tested"): `gated run` as a child process with the hostile agent
 * (test/agents/hostile-agent.mjs) in its groups, on the process runtime and in containers on a real dockerd
 * (test/helpers/runtimes.ts), while a hostile web client
 * floods posts and uploads and the hostile agent plants links and FIFOs, delegates in a loop, names a FIFO
 * as a file to send and schedules every millisecond. Meanwhile a canary chat talks to its own group. The
 * canary is answered every time; a decoy tree outside every folder hashes the same before and after; the
 * file descriptors and memory of gated stay within the bounds stated below.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, stderrOf, until } from '../helpers/process.js';
import { AGENT_RUNTIMES, useAgentRuntime, type RuntimeUnderTest } from '../helpers/runtimes.js';

/** gated may hold at most this many more file descriptors after the load than before it. */
const FD_GROWTH_BOUND = 64;
/** gated's resident memory may grow by at most this much over the load. */
const RSS_GROWTH_BOUND = 150 * 1024 * 1024;
const CANARY_ROUNDS = 15;
const FLOOD_POSTS = 300;
const FLOOD_UPLOADS = 40;

/** Every file under `dir` with its bytes and mode, and every link with its target, as one hash. */
function treeHash(dir: string): string {
  const h = createHash('sha256');
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = join(dir, rel, name);
      const st = statSync(path, { throwIfNoEntry: false });
      h.update(`${join(rel, name)}\0${st?.mode ?? 'gone'}\0`);
      if (st?.isDirectory()) walk(join(rel, name));
      else if (st?.isFile()) h.update(readFileSync(path));
      else h.update(readlinkSync(path, { encoding: 'utf8' }));
    }
  };
  walk('');
  return h.digest('hex');
}

/** Open descriptors and resident bytes of a process (Linux /proc). */
function usage(pid: number): { fds: number; rss: number } {
  const rssKb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return { fds: readdirSync(`/proc/${pid}/fd`).length, rss: Number(rssKb) * 1024 };
}

describe.each(AGENT_RUNTIMES)('on the %s runtime', (kind) => {
  const rt = useAgentRuntime(kind, 'hostile-agent.mjs', ['mkfifo']);
  test(
    'hostile agent and hostile client at once: the canary is answered every time, nothing outside changes, gated stays bounded',
    () => hostileLoad(rt),
    rt.ms(60_000),
  );
});

async function hostileLoad(rt: RuntimeUnderTest): Promise<void> {
  const dir = tempDir('gated-load-');
  const env = gatedEnv(dir, { ...rt.env(), GATED_IDLE_TIMEOUT_MS: '500' });
  const seed = openDatabase(env.GATED_DB);
  for (const g of ['canary', 'hostile', 'hostile/sub']) addGroup(seed, env.GATED_GROUPS_DIR, g);
  seed.close();

  const decoy = tempDir('gated-decoy-');
  mkdirSync(join(decoy, 'sub'));
  writeFileSync(join(decoy, 'secret.txt'), 'the decoy, never to be read, sent or changed\n');
  writeFileSync(join(decoy, 'sub', 'notes.md'), '# decoy notes\n');
  const before = treeHash(decoy);

  const child = gatedRun(env);
  // Drained, so that gated never waits on a full pipe for its log lines (warnings of refused actions).
  child.stdout!.resume();
  await gatedUp(child);
  const url = /web chat at (\S+)/.exec(stderrOf(child))![1]!.replace(/\/$/, '');
  const db = openDatabase(env.GATED_DB);
  const post = (group: string, content: string) =>
    fetch(`${url}/api/chat/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ group, content }),
    });
  const answered = (text: string) =>
    db
      .prepare(`SELECT 1 FROM messages WHERE is_from_me = 1 AND chat_jid = 'web:canary' AND content = ?`)
      .get(text) !== undefined;
  const canary = async (i: number) => {
    const t0 = Date.now();
    expect((await post('canary', `canary ${i}`)).status).toBe(201);
    await until(() => answered(`echo: canary ${i}`), rt.ms(15_000), `canary ${i} answered`);
    return Date.now() - t0;
  };

  await canary(0);
  const start = usage(child.pid!);

  // The hostile agent: links and FIFOs for the next message ids, a FIFO named as a file to send, a
  // delegation ping-pong, a task every millisecond.
  const next = db.prepare(`SELECT coalesce(max(id), 0) + 1 FROM messages`).pluck().get() as number;
  for (const ask of [
    `plant ${join(decoy, 'secret.txt')} ${next} ${next + FLOOD_POSTS + FLOOD_UPLOADS + 50}`,
    'send-fifo pipe.txt',
    'loop sub',
    'schedule 1ms flood',
  ]) {
    expect((await post('hostile', ask)).status).toBe(201);
  }
  // The hostile client: posts and uploads as fast as four connections carry them.
  const flood = (async () => {
    let sent = 0;
    const worker = async (w: number) => {
      for (let i = w; i < FLOOD_POSTS + FLOOD_UPLOADS; i += 4) {
        if (i < FLOOD_POSTS) {
          await post('hostile', `flood ${i} ${'x'.repeat(i % 50)}`);
        } else {
          const form = new FormData();
          form.set('group', 'hostile');
          form.set('content', `upload ${i}`);
          form.set('file', new Blob([`upload ${i}, not the decoy\n`], { type: 'text/plain' }), 'note.txt');
          await fetch(`${url}/api/chat/upload`, { method: 'POST', body: form });
        }
        sent += 1;
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    return sent;
  })();

  const latencies: number[] = [];
  for (let i = 1; i <= CANARY_ROUNDS; i += 1) latencies.push(await canary(i));
  expect(await flood).toBe(FLOOD_POSTS + FLOOD_UPLOADS);
  // Every canary answered, each within the wait above; the slowest is reported for the record.
  expect(latencies).toHaveLength(CANARY_ROUNDS);
  console.log(`canary answered ${CANARY_ROUNDS}/${CANARY_ROUNDS}, slowest ${Math.max(...latencies)} ms`);

  // The bounds held: the loop stopped at its hops, the task was refused, the FIFO was not sent.
  const refused = () =>
    db.prepare(`SELECT reason FROM actions WHERE status = 'refused'`).pluck().all() as string[];
  // The loop competes with the flood for its session: it may still be on its way to the bound.
  await until(
    () => refused().some((r) => /would make 21 hops; at most 20/.test(r)),
    rt.ms(30_000),
    'the loop bounded',
  );
  const reasons = refused();
  expect(reasons).toContain("a task may fire at most every 1m; '1ms' fires 1ms apart");
  expect(db.prepare(`SELECT count(*) FROM tasks`).pluck().get()).toBe(0);
  expect(db.prepare(`SELECT state FROM outbound_files WHERE path = 'out/pipe.txt'`).pluck().get()).toBe(
    'refused',
  );

  expect(treeHash(decoy)).toBe(before);
  const health = await fetch(`${url}/healthz`);
  expect(health.status).toBe(200);
  const end = usage(child.pid!);
  console.log(
    `gated fds ${start.fds} → ${end.fds}, rss ${(start.rss / 2 ** 20).toFixed(0)} → ${(end.rss / 2 ** 20).toFixed(0)} MiB`,
  );
  expect(end.fds - start.fds).toBeLessThanOrEqual(FD_GROWTH_BOUND);
  expect(end.rss - start.rss).toBeLessThanOrEqual(RSS_GROWTH_BOUND);

  db.close();
  child.kill('SIGTERM');
  expect(await exited(child)).toBe(0);
}
