import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { politely, sideConnection } from '../helpers/db.js';
import { addGroup } from '../../store/groups.js';
import { startTestGated } from '../helpers/gated.js';

/** Seeded PRNG: a failing run names its seed. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const FUZZ_MS = Number(process.env.FUZZ_MS ?? 20_000);
const CANARY_EVERY_MS = 250;
/**
 * The canary must be answered within this, whatever the rest of the traffic does. Stalls of 17–23 s seen
 * earlier (and canaries never answered in one CI run) were the canary's lane queued behind hundreds of
 * hostile sessions of other groups; slots now go fairly across groups (docs/QUEUE.md), and the worst seen
 * since is ~6 s on two loaded cores. The storm shares the event loop and the machine with the suite: the
 * bound catches a gated that stops serving the chat, not one that is merely shared.
 */
const CANARY_BOUND_MS = 60_000;
/** After the storm, every canary must be answered within this (on a machine shared by many jobs). */
const DRAIN_MS = 25_000;

describe('fuzz: hostile rows, requests and agent output never stall gated', () => {
  it('keeps answering a canary chat within the bound and neither exits nor grows without bound', async () => {
    const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);
    const r = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    const junk = (n: number) =>
      Array.from({ length: n }, () => String.fromCodePoint(Math.floor(r() * 0x1f000))).join('');
    const g = await startTestGated({
      channels: [],
      demo: true,
      graceMs: 2000,
      env: {
        GATED_POLL_MS: '100',
        GATED_IDLE_TIMEOUT_MS: '1000',
        GATED_RUN_TIMEOUT_MS: '5000',
        GATED_MAX_CONCURRENT: '5',
        GATED_AGENT_CMD: `node "${packageFile('test', 'fuzz', 'agent.mjs')}"`,
      },
    });
    const config = g.config;
    for (const f of ['canary', 'g1', 'g2']) addGroup(g.db, config.groupsDir, f);

    // Another connection, as any program with sqlite3 would write: an older database's rules (no CHECKs).
    // It writes politely (test/helpers/db.ts): it shares this thread with gated, which holds the write lock
    // until the end of its turn.
    const ext = sideConnection(config.db);
    ext.pragma('ignore_check_constraints = ON');
    for (const t of ext
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'audit_%'`)
      .pluck()
      .all())
      await politely(() => ext.exec(`DROP TRIGGER "${String(t)}"`));
    const insMsg = ext.prepare(
      `INSERT INTO messages (chat_jid, sender, content, verb, topic, platform_msg_id) VALUES (?, ?, ?, ?, ?, ?)`,
    );
    const insRoute = ext.prepare(
      `INSERT INTO routes (seq, match, target, impulse_config) VALUES (?, ?, ?, ?)`,
    );
    const value = (kind: string): unknown => {
      switch (kind) {
        case 'blob':
          return Buffer.from(junk(8));
        case 'int':
          return Math.floor(r() * 1e9);
        case 'real':
          return r() * 1e6;
        case 'big':
          return 'B'.repeat(Math.floor(r() * 100_000));
        case 'junk':
          return junk(1 + Math.floor(r() * 300));
        default:
          return kind;
      }
    };
    const chats = [
      'web:demo',
      'web:g1',
      'web:g2',
      'telegram:-1',
      'discord:7',
      'x:😀',
      'web:nope',
      'junk',
      'blob',
      'int',
    ];
    const contents = [
      'hello',
      '/ping',
      '/ping@otherbot',
      '@demo hi',
      '@g1',
      '/new',
      '/stop',
      '#t hi',
      'junk',
      'big',
      'blob',
      'int',
      'real',
    ];
    const verbs = ['message', 'mention', 'reaction', 'follow', 'junk', 'blob', 'int'];
    const matches = [
      '',
      'room=[😀-😎]',
      'sender=*a*a*a*a*a*a*a*a*a*b',
      `room=${'x*'.repeat(200)}`,
      'platform=telegram',
      'verb=[',
      'chat_jid=web:*',
      'junk',
      'blob',
      'room=-1 verb=m*',
    ];
    const targets = [
      'g1',
      'g2',
      'demo',
      'builtin:ping',
      'builtin:drop',
      'daemon:nope',
      'folder:../etc',
      'junk',
      'blob',
    ];
    const paths = [
      '/',
      '/healthz',
      '/metrics',
      '/dashboard',
      '/api/chat/groups',
      '/api/chat/history?group=demo&limit=99999',
      '/api/chat/history?group=../x',
      '/api/chat/send',
      '/api/chat/stream?group=demo&after=0',
      '/api/routes',
      '/api/dashboard/status',
      `/${junk(20)}`,
    ];

    let rows = 0;
    let routes = 0;
    let requests = 0;
    let serverErrors = 0;
    const latencies: number[] = [];
    const pendingCanary = new Map<number, number>();
    const replyOf = ext.prepare(`SELECT 1 FROM messages WHERE is_from_me = 1 AND reply_to_id = ?`).pluck();
    let canaryN = 0;

    // A 30 MB message once: memory must stay flat (it is cut in SQLite, never read whole).
    await politely(() => insMsg.run('web:g1', 'u', 'M'.repeat(30 * 1024 * 1024), 'message', '', null));
    rows += 1;
    const rssStart = process.memoryUsage().rss;
    let rssMax = rssStart;
    // Answers are looked for on their own timer, so a slow iteration does not inflate the figures.
    const watch = setInterval(() => {
      for (const [id, at] of pendingCanary) {
        if (replyOf.get(id)) {
          latencies.push(Date.now() - at);
          pendingCanary.delete(id);
        }
      }
    }, 20);
    let inflight = 0;
    const end = Date.now() + FUZZ_MS;
    let nextCanary = Date.now();
    while (Date.now() < end) {
      const t = Date.now();
      if (t >= nextCanary) {
        nextCanary = t + CANARY_EVERY_MS;
        const text = `ping ${canaryN++}`;
        const id = Number(
          (await politely(() => insMsg.run('web:canary', 'canary', text, 'message', '', null)))
            .lastInsertRowid,
        );
        pendingCanary.set(id, t);
      }
      // A burst of hostile rows.
      for (let i = 0; i < 5; i++) {
        const row = [
          value(pick(chats)),
          value(pick(['u', 'blob', 'int', 'junk'])),
          value(pick(contents)),
          value(pick(verbs)),
          value(pick(['', 't', 'blob', 'junk'])),
          r() < 0.2 ? value(pick(['dup', 'blob', 'int'])) : null,
        ];
        try {
          await politely(() => insMsg.run(...row));
          rows += 1;
        } catch {
          // NOT NULL, the dedup index: refused at the door like any writer's bad insert
        }
      }
      if (r() < 0.3) {
        const route = [
          value(pick<string | number>(['int', 'real', 'junk', 'blob', 5]) as string),
          value(pick(matches)),
          value(pick(targets)),
          r() < 0.2 ? value(pick(['{"threshold":1}', 'junk', 'blob', '{"weights":5}'])) : null,
        ];
        try {
          await politely(() => insRoute.run(...route));
          routes += 1;
        } catch {
          // refused at the door
        }
      }
      if (r() < 0.05)
        await politely(() =>
          ext.exec(`DELETE FROM routes WHERE id IN (SELECT id FROM routes ORDER BY random() LIMIT 3)`),
        );
      // Hostile HTTP.
      // At most 10 requests in flight; the loop never waits for them.
      Array.from({ length: Math.min(3, Math.max(0, 10 - inflight)) }, () => {
        const method = pick(['GET', 'POST', 'PUT', 'DELETE']);
        const headers: Record<string, string> = {};
        if (r() < 0.3) headers['content-type'] = 'application/json';
        if (r() < 0.2) headers.origin = pick(['https://attacker.example', g.url!, 'null']);
        if (r() < 0.2) headers['last-event-id'] = pick(['0', '-1', junk(5), '99999999999999999999']);
        const body =
          method === 'GET' || method === 'DELETE'
            ? undefined
            : pick([
                JSON.stringify({ group: 'demo', content: junk(100), client: junk(40) }),
                JSON.stringify({ group: pick<unknown>(['demo', '../x', 5]), content: 'x'.repeat(70_000) }),
                '{',
                junk(500),
              ]);
        requests += 1;
        inflight += 1;
        return fetch(`${g.url}${pick(paths)}`, { method, headers, body, signal: AbortSignal.timeout(3000) })
          .then(async (res) => {
            if (res.status >= 500) serverErrors += 1;
            // Streams are dropped after the headers: the replay must not hold anything up.
            await res.body?.cancel();
          })
          .catch(() => {})
          .finally(() => (inflight -= 1));
      });
      rssMax = Math.max(rssMax, process.memoryUsage().rss);
      await new Promise((res) => setTimeout(res, 20));
    }
    // The canaries still in flight must land too.
    const drainEnd = Date.now() + DRAIN_MS;
    const undone = ext.prepare(
      `SELECT count(*) FROM messages WHERE chat_jid = 'web:canary' AND is_from_me = 0 AND state IS NOT 'done'`,
    );
    while (undone.pluck().get() !== 0 && Date.now() < drainEnd)
      await new Promise((res) => setTimeout(res, 50));
    clearInterval(watch);
    // A canary the timer did not see in time (the machine is shared) still counts if it was answered.
    const stuck = [...pendingCanary.keys()]
      .map(
        (id) =>
          ext.prepare(`SELECT id, state, error FROM messages WHERE id = ?`).get(id) as { state: string },
      )
      .filter((row) => row.state !== 'done');
    ext.close();

    const sorted = [...latencies].sort((a, b) => a - b);
    const p50 = sorted[Math.floor(sorted.length / 2)] ?? NaN;
    const max = sorted.at(-1) ?? NaN;
    const failed = g.db.prepare(`SELECT count(*) FROM messages WHERE state = 'failed'`).pluck().get();
    const healthRes = await fetch(`${g.url}/healthz`);
    const health = { status: healthRes.status, body: await healthRes.text() };
    console.log(
      `fuzz seed=${seed}: ${rows} rows (${failed} failed alone), ${routes} route rows, ${requests} HTTP requests ` +
        `(${serverErrors} 5xx); canary ${canaryN} sent, ${latencies.length} timed, latency p50 ${p50} ms, max ${max} ms; ` +
        `RSS ${Math.round(rssStart / 2 ** 20)} → max ${Math.round(rssMax / 2 ** 20)} MB`,
    );
    expect(stuck, `canaries unanswered (seed ${seed})`).toEqual([]);
    expect(max, `canary latency (seed ${seed})`).toBeLessThan(CANARY_BOUND_MS);
    expect(health.status, `/healthz said ${health.body}`).toBe(200);
    expect(g.gateway.loop.health().failing).toBeUndefined();
    // Bounded growth: the 30 MB row, 2 MB contents and 1 MB session ids are never held whole per row.
    expect(rssMax - rssStart).toBeLessThan(400 * 2 ** 20);
  }, 75_000);
});
