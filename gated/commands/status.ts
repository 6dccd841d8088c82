import type { Command } from 'commander';
import type { Db } from '../../store/db.js';
import { action } from '../context.js';
import { formatTable, paint, resultTint, terminalStyle, type TableStyle } from '../table.js';

/** The instance facts `gated status` prints, read from the database (works beside a running gated). */
export function statusLines(db: Db, style: TableStyle = { aligned: false, color: false }): string[] {
  const out: string[] = [];
  const title = (t: string) => out.push(paint(t, 'bold', style));
  const indent = (lines: string[]) => lines.map((l) => `  ${l}`);
  const groups = db.prepare('SELECT folder FROM registered_groups ORDER BY folder').pluck().all() as string[];
  out.push(`groups (${groups.length}): ${groups.join(', ') || '-'}`);
  const running = db
    .prepare(
      `SELECT id, group_folder, topic, chat_jid, started_at FROM session_log WHERE result IS NULL ORDER BY id`,
    )
    .all() as { id: number; group_folder: string; topic: string; chat_jid: string; started_at: string }[];
  title(`runs (${running.length}):`);
  if (running.length)
    out.push(
      ...indent(
        formatTable(
          ['run', 'session', 'chat', 'since'],
          running.map((r) => [`#${r.id}`, session(r.group_folder, r.topic), r.chat_jid, r.started_at]),
          style,
        ),
      ),
    );
  const queued = db
    .prepare(
      `SELECT group_folder, session_topic, state, count(*) n FROM messages
       WHERE state IN ('held', 'ready', 'parked') GROUP BY group_folder, session_topic, state`,
    )
    .all() as { group_folder: string; session_topic: string; state: string; n: number }[];
  title(`queued sessions (${queued.length}):`);
  if (queued.length)
    out.push(
      ...indent(
        formatTable(
          ['session', 'state', 'rows'],
          queued.map((q) => [
            session(q.group_folder, q.session_topic),
            { text: q.state, tint: resultTint(q.state) },
            q.n,
          ]),
          style,
        ),
      ),
    );
  const outbox = db
    .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'pending'`)
    .pluck()
    .get() as number;
  const failed = db
    .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'failed'`)
    .pluck()
    .get() as number;
  const failedText = `${failed} failed`;
  out.push(
    `undelivered replies: ${outbox} pending, ${paint(failedText, failed > 0 ? 'red' : undefined, style)}`,
  );
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
  title('recent runs:');
  if (recent.length)
    out.push(
      ...indent(
        formatTable(
          ['run', 'session', 'started', 'result', 'error'],
          recent.map((r) => [
            `#${r.id}`,
            session(r.group_folder, r.topic),
            r.started_at,
            { text: r.result ?? 'running', tint: resultTint(r.result) },
            { text: r.error ?? '', tint: 'dim' },
          ]),
          style,
        ),
      ),
    );
  return out;
}

function session(group: string, topic: string | null): string {
  return topic ? `${group}#${topic}` : group;
}

/** `gated status`. */
export function statusCommand(program: Command): void {
  program
    .command('status')
    .description('groups, runs, queues, undelivered replies, recent session_log rows')
    .action(
      action((ctx) => {
        for (const line of statusLines(ctx.db({ readOnly: true }), terminalStyle())) ctx.out(line);
      }),
    );
}
