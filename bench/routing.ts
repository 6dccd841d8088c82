import { compileRoutes, type RouteRow } from '../router/index.js';
import type { RouteFields } from '../core/types.js';

/**
 * Route resolution on a compiled table, the way an operator's table grows: one pinned room per group,
 * a few platform/verb rules with globs, a catch-all last. Lookups are a realistic mix: mostly pinned
 * rooms, some that fall through to the glob rules or the catch-all.
 */
export function routingTable(n: number): RouteRow[] {
  const rows: RouteRow[] = [];
  let id = 1;
  for (let i = 0; i < n - 4; i++) {
    rows.push({
      id: id++,
      seq: i,
      match: `platform=telegram room=-100${i}`,
      target: `g/room${i}`,
      impulse_config: null,
    });
  }
  rows.push({
    id: id++,
    seq: n,
    match: 'platform=telegram verb=mention',
    target: 'rhias/mentions',
    impulse_config: null,
  });
  rows.push({ id: id++, seq: n + 1, match: 'verb=[fF]ollow', target: 'krons/notifs', impulse_config: null });
  rows.push({
    id: id++,
    seq: n + 2,
    match: 'platform=blue* sender=did:plc:*',
    target: 'bsky/feed',
    impulse_config: null,
  });
  rows.push({ id: id++, seq: n + 3, match: '', target: 'default/firehose', impulse_config: null });
  return rows;
}

function lookups(n: number, count: number): RouteFields[] {
  const out: RouteFields[] = [];
  for (let i = 0; i < count; i++) {
    const k = (i * 7919) % (n + n / 4);
    const room = k < n ? `-100${k}` : `-999${k}`;
    const platform = i % 10 === 0 ? 'bluesky' : 'telegram';
    out.push({
      platform,
      room,
      chat_jid: `${platform}:${room}`,
      sender: i % 10 === 0 ? 'did:plc:x' : '42',
      verb: i % 5 === 0 ? 'mention' : 'message',
    });
  }
  return out;
}

/** Resolutions per second at each table size (best of a few rounds, after a warm-up). */
export function benchRouting(
  sizes: number[],
  ms = 1500,
): Array<{ routes: number; perSecond: number; nsPerLookup: number }> {
  const results = [];
  for (const n of sizes) {
    const table = compileRoutes(routingTable(n));
    const fields = lookups(n, 4096);
    let sink = 0;
    // Fixed-size rounds; the first ones warm the JIT (a cold table is 10-20x slower), the best is kept.
    const passes = Math.max(1, Math.round(ms / 10));
    const round = () => {
      const start = process.hrtime.bigint();
      for (let p = 0; p < passes; p++) {
        for (let i = 0; i < fields.length; i++) if (table.resolve(fields[i]!)) sink++;
      }
      return (passes * fields.length) / (Number(process.hrtime.bigint() - start) / 1e9);
    };
    round();
    round();
    const best = Math.max(round(), round(), round(), round());
    if (sink < 0) throw new Error('unreachable');
    results.push({ routes: n, perSecond: Math.round(best), nsPerLookup: Math.round(1e9 / best) });
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const quick = process.argv.includes('--quick');
  const rows = benchRouting([10, 100, 1000, 10000], quick ? 300 : 1500);
  console.log('routes\tresolutions/s\tns/lookup\ttarget ≥1,000,000/s at 100');
  for (const r of rows) console.log(`${r.routes}\t${r.perSecond.toLocaleString('en')}\t${r.nsPerLookup}`);
}
