/**
 * Names that point nowhere (issue 43): a group's agent that is neither built in nor a profile, a route to a
 * group or daemon that is not registered, a task or limit of a missing group. Each is refused or warned
 * about where it is written (CLI, dashboard API) and listed by `routes check` and `gated doctor`.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { routesAdminApi } from '../../http/routes-admin.js';
import { silentLogger } from '../../core/log.js';
import { tempDir } from '../helpers/db.js';
import { gatedCli } from '../helpers/cli.js';

function fresh(): string {
  const path = join(tempDir('gated-names-'), 'gated.db');
  openDatabase(path).close();
  return path;
}

const sqlite = (path: string, sql: string) => execFileSync('sqlite3', [path], { input: sql });

describe('names that point nowhere', () => {
  it('groups agent refuses an agent that is neither built in nor a profile, and changes nothing', async () => {
    const path = fresh();
    expect((await gatedCli(path, 'groups', 'add', 'ops')).code).toBe(0);
    const bad = await gatedCli(path, 'groups', 'agent', 'ops', 'gpt4');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(
      /agent 'gpt4' is neither built in nor an agent_profiles row \(known: 'claude', 'codex'\): nothing changed/,
    );
    const db = openDatabase(path);
    expect(db.prepare(`SELECT agent FROM registered_groups WHERE folder = 'ops'`).pluck().get()).toBeNull();
    db.prepare(`INSERT INTO agent_profiles (name, command) VALUES ('gpt4', 'node agent.mjs')`).run();
    db.close();
    expect((await gatedCli(path, 'groups', 'agent', 'ops', 'gpt4')).code).toBe(0);
    expect((await gatedCli(path, 'groups', 'agent', 'ops', 'codex')).code).toBe(0);
  });

  it('routes add warns of a group that is not registered; routes check and doctor list every dangling name', async () => {
    const path = fresh();
    const add = await gatedCli(path, 'routes', 'add', 'nowhere', '--seq', '5', '--match', 'platform=web');
    expect(add.code).toBe(0);
    expect(add.err).toMatch(
      /^warning: group 'nowhere' is not registered: the messages it takes fail until 'gated groups add nowhere'/,
    );
    expect((await gatedCli(path, 'groups', 'add', 'ops')).code).toBe(0);
    const quiet = await gatedCli(path, 'routes', 'add', 'ops', '--seq', '6', '--match', 'platform=x');
    expect(quiet.err).toBe('');
    // What sqlite3 can write and the CLI would not: an unknown agent, a daemon, a task and a limit of no group.
    sqlite(
      path,
      `UPDATE registered_groups SET agent = 'gpt4' WHERE folder = 'ops';
       INSERT INTO routes (seq, match, target) VALUES (7, 'platform=y', 'daemon:ghost');
       INSERT INTO tasks (group_folder, chat_jid, kind, spec, text, next_run_at, anchor_at, created_by)
         VALUES ('gone', 'web:gone', 'every', '1h', 'hi', '2999-01-01T00:00:00Z', '2999-01-01T00:00:00Z', 'sql');
       INSERT INTO limits (group_folder, runs_per_day) VALUES ('gone', 3);`,
    );
    const check = await gatedCli(path, 'routes', 'check');
    expect(check.code).toBe(0); // every row is valid; the names are warnings
    expect(check.out.trim()).toBe('all routes valid');
    expect(check.err.trim().split('\n')).toEqual([
      expect.stringMatching(/^warning: route 1: group 'nowhere' is not registered/),
      expect.stringMatching(/^warning: route 3: daemon 'ghost' is not registered/),
      expect.stringMatching(/^warning: group ops: agent 'gpt4' is neither built in/),
      expect.stringMatching(/^warning: task 1: group 'gone' is not registered/),
      expect.stringMatching(/^warning: limits gone: group 'gone' is not registered/),
    ]);
    const doctor = await gatedCli(path, 'doctor');
    const names = doctor.out.split('\n').filter((l) => /^\S+\s+names\s/.test(l));
    expect(names[0]).toMatch(
      /^WARN\s+names\s+route 1: group 'nowhere'.*\(and 2 more: gated routes check lists them\)/,
    );
    // Mended, doctor says so.
    sqlite(
      path,
      `DELETE FROM routes WHERE target IN ('nowhere', 'daemon:ghost'); UPDATE registered_groups SET agent = NULL;
       DELETE FROM tasks; DELETE FROM limits;`,
    );
    const mended = await gatedCli(path, 'doctor');
    expect(mended.out).toMatch(/OK\s+names\s+every route, agent, task and limit points somewhere/);
    expect((await gatedCli(path, 'routes', 'check')).out.trim()).toBe('all routes valid');
  });

  it("the dashboard's route add names a group that is not registered in its answer", async () => {
    const path = fresh();
    const db = openDatabase(path);
    try {
      const api = routesAdminApi(db, silentLogger());
      const post = (target: string) =>
        api.request('/', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ seq: 1, match: 'platform=web', target }),
        });
      const res = await post('ghost');
      expect(res.status).toBe(201);
      expect(((await res.json()) as { warning?: string }).warning).toMatch(/group 'ghost' is not registered/);
      db.prepare(`INSERT INTO registered_groups (folder) VALUES ('real')`).run();
      expect(((await (await post('real')).json()) as { warning?: string }).warning).toBeUndefined();
    } finally {
      db.close();
    }
  });
});
