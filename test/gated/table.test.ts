import { describe, expect, it } from 'vitest';
import { duration, statusLines } from '../../gated/commands/status.js';
import { formatTable, terminalStyle } from '../../gated/table.js';
import { freshDb } from '../helpers/db.js';

const ESC = '\u001b[';
const strip = (s: string) =>
  s
    .split(ESC)
    .map((part, i) => (i === 0 ? part : part.replace(/^[0-9;]*m/, '')))
    .join('');

describe('CLI tables', () => {
  it('a terminal gets aligned columns with colour; a pipe gets tab-separated lines', () => {
    expect(terminalStyle({ isTTY: true }, {})).toEqual({ aligned: true, color: true });
    expect(terminalStyle({ isTTY: true }, { NO_COLOR: '1' })).toEqual({ aligned: true, color: false });
    expect(terminalStyle({ isTTY: false }, {})).toEqual({ aligned: false, color: false });
    expect(terminalStyle({}, { FORCE_COLOR: '1' })).toEqual({ aligned: true, color: true });

    const rows = [
      [1, 'platform=telegram', { text: 'ok', tint: 'green' as const }],
      [12, '(all)', { text: 'INVALID: bad\tglob', tint: 'red' as const }],
    ];
    expect(formatTable(['id', 'match', 'status'], rows, { aligned: false, color: false })).toEqual([
      'id\tmatch\tstatus',
      '1\tplatform=telegram\tok',
      '12\t(all)\tINVALID: bad glob',
    ]);
    const aligned = formatTable(['id', 'match', 'status'], rows, { aligned: true, color: true });
    expect(aligned[1]).toContain(`${ESC}32mok`);
    expect(aligned[2]).toContain(`${ESC}31mINVALID`);
    expect(aligned.map(strip)).toEqual([
      'id  match              status',
      '1   platform=telegram  ok',
      '12  (all)              INVALID: bad\tglob',
    ]);
    expect(formatTable(['a'], [], { aligned: true, color: false })).toEqual(['a']);
  });

  it('gated status: runs, queues and recent runs as tables, results coloured on a terminal', () => {
    const { db } = freshDb();
    db.prepare(`INSERT INTO registered_groups (folder) VALUES ('demo')`).run();
    // #1 worked 0.8 s and sat idle 2.2 s; #2 ended with a restart (no idle_ms); #3 is on a turn; #4 waits.
    db.prepare(
      `INSERT INTO session_log (group_folder, topic, chat_jid, started_at, ended_at, result, error, idle_ms) VALUES
       ('demo', '', 'web:demo', '2026-11-23T06:00:00Z', '2026-11-23T06:00:03Z', 'ok', NULL, 2200),
       ('demo', 'support', NULL, '2026-11-23T06:01:00Z', '2026-11-23T06:01:30Z', 'error', 'exit 1', NULL),
       ('demo', '', 'web:demo', '2026-11-23T06:02:00Z', NULL, NULL, NULL, NULL),
       ('demo', 'other', 'web:demo', '2026-11-23T06:03:00Z', NULL, NULL, NULL, NULL)`,
    ).run();
    db.prepare(
      `INSERT INTO messages (chat_jid, content, state, group_folder, session_topic, run_id) VALUES
       ('web:demo', 'x', 'parked', 'demo', 'support', NULL),
       ('web:demo', 'on it', 'running', 'demo', '', 3),
       ('web:demo', 'answered', 'done', 'demo', 'other', 4)`,
    ).run();
    const plain = statusLines(db);
    expect(plain).toContain('groups (1): demo');
    expect(plain).toContain('  #1\tdemo\t2026-11-23T06:00:00Z\tok\t800 ms\t2.2 s\t');
    expect(plain).toContain('  #2\tdemo#support\t2026-11-23T06:01:00Z\terror\t?\t?\texit 1');
    expect(plain.join('\n')).not.toContain(ESC);
    const tty = statusLines(db, { aligned: true, color: true });
    expect(tty.find((l) => l.includes('#2'))).toContain(`${ESC}31merror`);
    expect(tty.find((l) => l.includes('parked'))).toContain(`${ESC}35mparked`);
    const after = (title: string, rows: number) => {
      const at = tty.findIndex((l) => strip(l).startsWith(title));
      return tty.slice(at + 1, at + 1 + rows).map(strip);
    };
    // Open runs in the dashboard's words: running (a turn in progress) or idle (answered, waiting).
    expect(after('runs (2):', 3)).toEqual([
      '  run  state    session     chat      since',
      '  #3   running  demo        web:demo  2026-11-23T06:02:00Z',
      '  #4   idle     demo#other  web:demo  2026-11-23T06:03:00Z',
    ]);
    expect(after('recent runs:', 5)).toEqual([
      '  run  session       started               state    worked  idle   error',
      '  #4   demo#other    2026-11-23T06:03:00Z  idle',
      '  #3   demo          2026-11-23T06:02:00Z  running',
      '  #2   demo#support  2026-11-23T06:01:00Z  error    ?       ?      exit 1',
      '  #1   demo          2026-11-23T06:00:00Z  ok       800 ms  2.2 s',
    ]);
  });

  it("a run's time as the dashboard writes it", () => {
    expect([450, 3200, 59_949, 300_000, 5_400_000].map(duration)).toEqual([
      '450 ms',
      '3.2 s',
      '59.9 s',
      '5 min',
      '1.5 h',
    ]);
  });
});
