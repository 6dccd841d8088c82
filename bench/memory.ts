/**
 * Memory (docs/MEMORY.md): what recall and history search cost with a large store, and what the history
 * index costs the pipe.
 *
 *   npx tsx bench/memory.ts            # 1,000,000 messages and 100,000 facts; bursts of 100 x 1,000 (several minutes)
 *   npx tsx bench/memory.ts --quick    # a tenth of every number
 *   --no-burst (part 1 only), --no-search (part 2 only), --pairs=N (N bursts off and N on; default 2),
 *   --groups=N (the messages and facts over N groups; default 100)
 *
 * 1. A database of N messages over 100 groups (--groups) (10 chats each, words drawn from a 20,000-word vocabulary with
 *    a Zipf-like spread, as chat text has) and F facts (F / 100 per group), indexed by the history indexer's
 *    own passes (store/history-index.ts), timed. Then 2,000 recalls and 2,000 history searches of 2 to 5
 *    words each in a random group: p50 / p99 / max in ms (the target is a p50 of at most 5 ms); history
 *    searches both as a member sees it (every served row) and as a stranger (only its own rows). `again`:
 *    the same queries a second time, when the words' counts are known (store/fts-terms.ts).
 * 2. The burst (bench/pipeline.ts: groups x messages by the external writer, cap 5, process runtime) with the
 *    history index off and on, interleaved (off, on, off, on): gated's CPU per message, with "on" measured
 *    until the indexer has caught up with the last row (its work behind the pipe counted).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type Db } from '../store/db.js';
import { HistoryIndex } from '../store/history-index.js';
import { MemoryStore } from '../store/memory.js';
import type { Gated } from '../gated/app.js';
import { burst, pct } from './pipeline.js';

const quick = process.argv.includes('--quick');
const MESSAGES = quick ? 100_000 : 1_000_000;
const FACTS = quick ? 10_000 : 100_000;
// --groups=1: one group holding every message (docs/MEMORY.md: its group is then checked on the row).
const GROUPS = Number(
  /^--groups=(\d+)$/.exec(process.argv.find((a) => a.startsWith('--groups=')) ?? '')?.[1] ?? 100,
);
const QUERIES = 2000;
const VOCABULARY = 20_000;

/** A deterministic generator (mulberry32), so runs are comparable. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(44);

/** Word n of the vocabulary: letters only, distinct. */
function word(n: number): string {
  let s = '';
  let v = n + 1;
  while (v > 0) {
    s += String.fromCharCode(97 + (v % 26));
    v = Math.floor(v / 26);
  }
  return s + 'o';
}
/** A word drawn Zipf-like: rank r with weight about 1/r. */
function zipf(): string {
  return word(Math.floor(Math.exp(random() * Math.log(VOCABULARY))) - 1);
}
function sentence(min: number, max: number): string {
  const n = min + Math.floor(random() * (max - min + 1));
  return Array.from({ length: n }, zipf).join(' ');
}
const group = (i: number) => `b/g${i}`;

/** Fills `db` with the messages (half inbound, half their answers) and the facts. */
function fill(db: Db): { fillMs: number } {
  const t0 = performance.now();
  const inbound = db.prepare(
    `INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic, timestamp)
     VALUES (?, ?, ?, 'done', ?, '', ?)`,
  );
  const reply = db.prepare(
    `INSERT INTO messages (chat_jid, is_from_me, content, reply_to_id, kind, delivery) VALUES (?, 1, ?, ?, 'reply', 'sent')`,
  );
  const start = Date.now() - 60 * 86_400_000;
  for (let done = 0; done < MESSAGES;) {
    db.transaction(() => {
      for (let k = 0; k < 10_000 && done < MESSAGES; k++, done += 2) {
        const g = Math.floor(random() * GROUPS);
        const chat = `bench:g${g}c${Math.floor(random() * 10)}`;
        const at = new Date(start + done * 5000).toISOString();
        const id = inbound.run(
          chat,
          `u${Math.floor(random() * 50)}`,
          sentence(4, 16),
          group(g),
          at,
        ).lastInsertRowid;
        reply.run(chat, sentence(6, 24), id);
      }
    })();
  }
  const memory = new MemoryStore(db, { maxFacts: FACTS, maxFactBytes: 2048 });
  db.transaction(() => {
    for (let i = 0; i < FACTS; i++) {
      const g = i % GROUPS;
      const scope = random() < 0.3 ? `bench:u${Math.floor(random() * 50)}` : 'group';
      memory.remember({
        group: group(g),
        scope,
        text: sentence(5, 20),
        provenance: { by: 'bench' },
        actor: 'bench',
      });
    }
  })();
  return { fillMs: Math.round(performance.now() - t0) };
}

function timed(
  n: number,
  fn: (i: number) => unknown,
): { p50: number; p99: number; max: number; hits: number } {
  const ms: number[] = [];
  let hits = 0;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = fn(i) as unknown[];
    ms.push(performance.now() - t);
    hits += r.length > 0 ? 1 : 0;
  }
  ms.sort((a, b) => a - b);
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return { p50: r3(pct(ms, 50)), p99: r3(pct(ms, 99)), max: r3(ms.at(-1)!), hits };
}

/** Part 1: the store's numbers. */
function searches() {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-memory-'));
  try {
    const db = openDatabase(join(dir, 'gated.db'));
    const { fillMs } = fill(db);
    const index = new HistoryIndex(db);
    const t0 = performance.now();
    let passes = 0;
    while (index.indexNext().more) passes++;
    const indexMs = Math.round(performance.now() - t0);
    const memory = new MemoryStore(db);
    const query = () => sentence(2, 5);
    const queries = Array.from({ length: QUERIES }, query);
    const groups = Array.from({ length: QUERIES }, () => group(Math.floor(random() * GROUPS)));
    // Warm the cache as a running gated's would be.
    for (let i = 0; i < 200; i++) memory.recall(queries[i]!, { group: groups[i]!, senders: ['bench:u1'] });
    const recall = timed(QUERIES, (i) =>
      memory.recall(queries[i]!, { group: groups[i]!, senders: ['bench:u1'] }, 10),
    );
    const history = timed(QUERIES, (i) => index.search(queries[i]!, { group: groups[i]!, only: null }, 20));
    const stranger = timed(QUERIES, (i) =>
      index.search(queries[i]!, { group: groups[i]!, only: ['bench:u7'] }, 20),
    );
    // The same queries again: every word's count is known by now (store/fts-terms.ts), as in a gated that
    // has been searched for a while.
    const again = {
      recall: timed(QUERIES, (i) =>
        memory.recall(queries[i]!, { group: groups[i]!, senders: ['bench:u1'] }, 10),
      ),
      historyMember: timed(QUERIES, (i) => index.search(queries[i]!, { group: groups[i]!, only: null }, 20)),
      historyStranger: timed(QUERIES, (i) =>
        index.search(queries[i]!, { group: groups[i]!, only: ['bench:u7'] }, 20),
      ),
    };
    const size =
      Number(db.pragma('page_count', { simple: true })) * Number(db.pragma('page_size', { simple: true }));
    db.close();
    return {
      messages: MESSAGES,
      facts: FACTS,
      groups: GROUPS,
      fillSeconds: fillMs / 1000,
      indexSeconds: indexMs / 1000,
      indexRowsPerSecond: Math.round(MESSAGES / (indexMs / 1000)),
      indexPasses: passes + 1,
      databaseMB: Math.round(size / 2 ** 20),
      recall,
      historyMember: history,
      historyStranger: stranger,
      again,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Waits until the history indexer has indexed the last row. */
async function indexed(g: Gated): Promise<void> {
  const index = new HistoryIndex(g.db);
  const last = () => Number(g.db.prepare('SELECT max(id) FROM messages').pluck().get() ?? 0);
  const end = Date.now() + 300_000;
  while (index.cursor() < last()) {
    if (Date.now() > end) throw new Error('the history index did not catch up within 5 minutes');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Part 2: the burst with the index off and on, interleaved. */
async function bursts() {
  const groups = quick ? 100 : 1000;
  const perGroup = 100;
  const rows = [];
  const pairs = Number(
    /^--pairs=(\d+)$/.exec(process.argv.find((a) => a.startsWith('--pairs=')) ?? '')?.[1] ?? 2,
  );
  for (const on of Array.from({ length: pairs * 2 }, (_, i) => i % 2 === 1)) {
    const r = await burst(groups, perGroup, 600_000, undefined, undefined, {
      env: { GATED_HISTORY_INDEX: on ? '1' : '0' },
      ...(on ? { drain: indexed } : {}),
    });
    rows.push({
      index: on ? 'on' : 'off',
      messages: groups * perGroup,
      delivered: r.delivered,
      wallSeconds: r.wallSeconds,
      runs: r.runs,
      gatedCpuSeconds: r.gatedCpuSeconds,
      gatedCpuUsPerMessage: r.gatedCpuUsPerMessage,
      replyP50ms: r.replyP50ms,
      eventLoopDelayP99ms: r.eventLoopDelayP99ms,
    });
    console.error(JSON.stringify(rows.at(-1)));
  }
  return rows;
}

if (!process.argv.includes('--no-search')) console.log(JSON.stringify(searches(), null, 2));
const b = process.argv.includes('--no-burst') ? [] : await bursts();
if (b.length > 0) {
  console.table(b);
  const mean = (k: 'on' | 'off') => {
    const xs = b.filter((r) => r.index === k).map((r) => r.gatedCpuUsPerMessage);
    return xs.reduce((a, x) => a + x, 0) / xs.length;
  };
  console.log(
    `CPU per message: off ${mean('off').toFixed(0)} us, on ${mean('on').toFixed(0)} us (${((mean('on') / mean('off') - 1) * 100).toFixed(1)} %)`,
  );
}
