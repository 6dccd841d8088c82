/**
 * Memory across kill -9 (docs/MEMORY.md): a fact remembered before gated dies is given to the turn that was
 * in flight when it died, once that turn runs again after the restart, and the history indexed before the
 * crash (and after it, from the indexer's cursor) is still searchable.
 */
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, until } from '../helpers/process.js';

it('a fact and the history survive kill -9; the re-run of the interrupted turn is given the fact', async () => {
  const dir = tempDir();
  const env = gatedEnv(dir, {
    GATED_IDLE_TIMEOUT_MS: '300',
    // Slow to start, so the second turn's run is in flight when gated dies.
    GATED_AGENT_CMD: 'sleep 1; exec node "$GATED_HOME/agents/example/agent.mjs"',
  });
  const seed = openDatabase(env.GATED_DB);
  addGroup(seed, env.GATED_GROUPS_DIR, 'club');
  upsertMember(seed, 'club', 'web:u', 'owner');
  const say = (content: string) => insertInbound(seed, { chat_jid: 'web:club', sender: 'u', content })!;
  const watch = new Database(env.GATED_DB, { readonly: true });
  const get = (sql: string, ...args: unknown[]) =>
    watch
      .prepare(sql)
      .pluck()
      .get(...args);
  const replyTo = (id: number) =>
    watch
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ? ORDER BY id`)
      .pluck()
      .all(id) as string[];

  const first = gatedRun(env);
  const remembered = say('!remember the boiler is serviced in May');
  await until(
    () => get('SELECT state FROM messages WHERE id = ?', remembered) === 'done',
    30_000,
    'remembered',
  );
  const fact = get('SELECT id FROM memories') as number;
  await until(
    () => Number(get(`SELECT value FROM router_state WHERE key = 'history_index_cursor'`) ?? 0) >= remembered,
    30_000,
    'the first turn indexed',
  );
  // The first run ends (idle), so the question starts a run of its own, slow to start.
  await until(() => get('SELECT count(*) FROM session_log WHERE result IS NULL') === 0, 30_000, 'run ended');
  const asked = say('when is the boiler serviced?');
  await until(() => get('SELECT state FROM messages WHERE id = ?', asked) === 'running', 30_000, 'in flight');
  first.kill('SIGKILL');
  await exited(first);
  expect(get('SELECT state FROM messages WHERE id = ?', asked)).toBe('running');

  const second = gatedRun(env);
  await until(() => get('SELECT state FROM messages WHERE id = ?', asked) === 'done', 30_000, 'answered');
  expect(replyTo(asked)).toEqual([
    `memory: #${fact} [group] the boiler is serviced in May\necho: when is the boiler serviced?`,
  ]);
  const search = say('!search boiler serviced');
  await until(() => get('SELECT state FROM messages WHERE id = ?', search) === 'done', 30_000, 'searched');
  const found = replyTo(search).join('\n');
  expect(found).toContain(`found: #${remembered} u: !remember the boiler is serviced in May`);
  expect(found).toContain(`found: #${asked} u: when is the boiler serviced?`);
  second.kill('SIGTERM');
  expect(await exited(second)).toBe(0);
  watch.close();
  seed.close();
}, 120_000);
