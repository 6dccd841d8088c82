// One memory measurement, in a fresh process on the compiled gated (dist/), so neither the benchmark
// harness nor the TypeScript loader is counted: N registered groups with N sessions and one route each,
// the whole gated started (HTTP, queue, loop), one message routed per group (held by the impulse gate, so
// no agent runs), then RSS after a settle. Prints JSON.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const n = Number(process.argv[2]);
const { loadConfig } = await import('../dist/core/config.js');
const { silentLogger } = await import('../dist/core/log.js');
const { openDatabase } = await import('../dist/store/db.js');
const { startGated } = await import('../dist/gated/app.js');

const dir = mkdtempSync(join(tmpdir(), 'gated-bench-mem-'));
const dbPath = join(dir, 'gated.db');
const db = openDatabase(dbPath);
db.transaction(() => {
  const g = db.prepare('INSERT INTO registered_groups (folder) VALUES (?)');
  const s = db.prepare('INSERT INTO sessions (group_folder, topic, session_id) VALUES (?, ?, ?)');
  const r = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
  for (let i = 0; i < n; i++) {
    g.run(`m/g${i}`);
    s.run(`m/g${i}`, '', `session-${i}`);
    r.run(i, `platform=bench room=g${i}`, `m/g${i}`);
  }
})();
db.close();
mkdirSync(join(dir, 'groups'), { recursive: true });
const baseline = process.memoryUsage().rss;
const config = loadConfig({ GATED_DB: dbPath, GATED_GROUPS_DIR: join(dir, 'groups'), GATED_HTTP_PORT: '0' });
const gated = await startGated({ config, log: silentLogger(), channels: [] });
for (let i = 0; i < n; i++)
  gated.gateway.sink({ chat_jid: `bench:g${i}`, sender: 'b', content: '+1', verb: 'reaction' });
await new Promise((r) => setTimeout(r, 1500));
const held = gated.db.prepare(`SELECT count(*) FROM messages WHERE state = 'held'`).pluck().get();
const rss = process.memoryUsage().rss;
await gated.close(1000);
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  JSON.stringify({
    groups: n,
    held,
    rssMB: Math.round(rss / 2 ** 20),
    baselineMB: Math.round(baseline / 2 ** 20),
  }) + '\n',
);
