import type { Command } from 'commander';
import type { Db } from '../../store/db.js';
import { action } from '../context.js';

/** The instance facts `gated status` prints, read from the database (works beside a running gated). */
export function statusLines(db: Db): string[] {
  const out: string[] = [];
  const groups = db.prepare('SELECT folder FROM registered_groups ORDER BY folder').pluck().all() as string[];
  out.push(`groups (${groups.length}): ${groups.join(', ') || '-'}`);
  const running = db
    .prepare(
      `SELECT id, group_folder, topic, chat_jid, started_at FROM session_log WHERE result IS NULL ORDER BY id`,
    )
    .all() as { id: number; group_folder: string; topic: string; chat_jid: string; started_at: string }[];
  out.push(`runs (${running.length}):`);
  for (const r of running)
    out.push(
      `  #${r.id} ${r.group_folder}${r.topic ? '#' + r.topic : ''} ${r.chat_jid} since ${r.started_at}`,
    );
  const queued = db
    .prepare(
      `SELECT group_folder, session_topic, state, count(*) n FROM messages
       WHERE state IN ('held', 'ready', 'parked') GROUP BY group_folder, session_topic, state`,
    )
    .all() as { group_folder: string; session_topic: string; state: string; n: number }[];
  out.push(`queued sessions (${queued.length}):`);
  for (const q of queued)
    out.push(`  ${q.group_folder}${q.session_topic ? '#' + q.session_topic : ''} ${q.state} ${q.n}`);
  const outbox = db
    .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'pending'`)
    .pluck()
    .get() as number;
  const failed = db
    .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'failed'`)
    .pluck()
    .get() as number;
  out.push(`undelivered replies: ${outbox} pending, ${failed} failed`);
  const recent = db
    .prepare(
      `SELECT id, group_folder, topic, started_at, ended_at, result, error FROM session_log ORDER BY id DESC LIMIT 10`,
    )
    .all() as {
    id: number;
    group_folder: string;
    topic: string;
    started_at: string;
    ended_at: string | null;
    result: string | null;
    error: string | null;
  }[];
  out.push('recent runs:');
  for (const r of recent) {
    out.push(
      `  #${r.id} ${r.group_folder}${r.topic ? '#' + r.topic : ''} ${r.started_at} ${r.result ?? 'running'}${r.error ? ' ' + r.error : ''}`,
    );
  }
  return out;
}

/** `gated status`. */
export function statusCommand(program: Command): void {
  program
    .command('status')
    .description('groups, runs, queues, undelivered replies, recent session_log rows')
    .action(
      action((ctx) => {
        for (const line of statusLines(ctx.db())) ctx.out(line);
      }),
    );
}
