import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../core/log.js';
import { createGateway } from '../gateway/gateway.js';
import type { QueueControl } from '../gateway/layers/types.js';
import { openDatabase } from '../store/db.js';

const idleQueue: QueueControl = {
  async stop() {
    return false;
  },
  interrupt: () => false,
  resetSession() {},
  facts: () => ({ running: false, waiting: 0, backoffUntil: null }),
  snapshot: () => ({ active: [], waiting: [] }),
};

/**
 * The cost of one poll tick that finds nothing new, with `stored` messages already processed in the
 * database (half inbound and done, half outbound and delivered), plus the cost of a tick that takes one new
 * row. Flat across sizes is the goal: the cursor query is an index seek, not a scan.
 */
export function benchPollTick(stored: number): { stored: number; emptyTickUs: number; oneRowTickUs: number } {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-poll-'));
  try {
    const db = openDatabase(join(dir, 'gated.db'));
    db.prepare(`INSERT INTO registered_groups (folder) VALUES ('g')`).run();
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, '', 'g')`).run();
    const fill = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, is_from_me, state, delivery, group_folder, session_topic)
       VALUES (?, 'u', 'stored message', ?, ?, ?, 'g', '')`,
    );
    db.transaction(() => {
      for (let i = 0; i < stored; i++) {
        const out = i % 2;
        fill.run(`bench:${i % 1000}`, out, out ? null : 'done', out ? 'sent' : null);
      }
    })();
    const last = db.prepare('SELECT max(id) FROM messages').pluck().get() as number;
    db.prepare(`INSERT INTO router_state (key, value) VALUES ('poll_cursor', ?)`).run(String(last));
    db.pragma('optimize');

    const gateway = createGateway({
      db,
      config: { pollMs: 1_000_000, admins: [] },
      log: silentLogger(),
      queue: idleQueue,
    });
    const time = (fn: () => void, n: number) => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < n; i++) fn();
      return Number(process.hrtime.bigint() - start) / 1e3 / n;
    };
    gateway.routes.current();
    time(() => gateway.loop.tick(), 200);
    const emptyTickUs = time(() => gateway.loop.tick(), 2000);
    const insert = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content) VALUES ('bench:1', 'u', 'new')`,
    );
    const oneRowTickUs = time(() => {
      insert.run();
      gateway.loop.tick();
    }, 500);
    gateway.stop();
    db.close();
    return { stored, emptyTickUs: round(emptyTickUs), oneRowTickUs: round(oneRowTickUs) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x: number) => Math.round(x * 10) / 10;

if (import.meta.url === `file://${process.argv[1]}`) {
  const sizes = process.argv.includes('--quick') ? [10_000, 100_000] : [10_000, 100_000, 1_000_000];
  console.log('stored\tempty tick µs\ttick with 1 new row µs\ttarget ≤ 2000 µs at 1M');
  for (const n of sizes) {
    const r = benchPollTick(n);
    console.log(`${r.stored}\t${r.emptyTickUs}\t${r.oneRowTickUs}`);
  }
}
