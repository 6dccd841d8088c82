import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { toolApprovalsOf } from '../../store/tool-approvals.js';
import { gatedCli as gated } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';

describe('gated tools and gated approvals', () => {
  it('add refuses a bad row; check lists rows written with sqlite3 that never match; explain names the deciding rule', async () => {
    const path = join(tempDir(), 'gated.db');
    const db = openDatabase(path);
    expect(
      (
        await gated(path, 'tools', 'add', 'ops', 'ask', '--seq', '1', '--tool', 'Bash', '--input', 'rm *')
      ).out.trim(),
    ).toBe('1');
    const bad = await gated(path, 'tools', 'add', 'ops', 'sometimes', '--seq', '2', '--tool', 'Bash');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/decision 'sometimes'/);
    // As sqlite3 would write it: a connection that is not gated's.
    const raw = new Database(path);
    raw
      .prepare(
        `INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('ops', 0, 'Bash[', 'allow')`,
      )
      .run();
    raw.close();
    const check = await gated(path, 'tools', 'check');
    expect(check.code).toBe(1);
    expect(check.out).toMatch(/^2\ttool: unclosed/);
    const explain = await gated(path, 'tools', 'explain', 'ops/child', 'Bash', 'rm', '-rf', '/tmp/x');
    expect(explain.out).toMatch(/2\t.*invalid, never matches/);
    expect(explain.out.trim().split('\n').at(-1)).toBe('decision: ask (tool rule 1, approvers owners)');
    // A shell command is judged per simple command, each named with its verdict.
    const parts = await gated(path, 'tools', 'explain', 'ops', 'Bash', 'ls -r -l; /bin/rm -fr /x');
    expect(parts.out).toMatch(/^autonomy: supervised, the group is not registered$/m);
    expect(parts.out).toMatch(/^command: ls -lr → allow \(autonomy supervised: a command that reads\)$/m);
    expect(parts.out).toMatch(/^command: rm -fr \/x → ask \(tool rule 1/m);
    const unproven = await gated(path, 'tools', 'explain', 'ops', 'Bash', 'echo $(id)');
    expect(unproven.out).toMatch(/^not provable: a command substitution$/m);
    const audit = db
      .prepare(`SELECT actor FROM audit WHERE subject = 'tool_rules' ORDER BY id`)
      .pluck()
      .all();
    expect(audit).toEqual([expect.stringMatching(/^cli/), 'sql']);
    db.close();
  });

  it('approve and reject by code; a second decision is refused; list shows both', async () => {
    const path = join(tempDir(), 'gated.db');
    const db = openDatabase(path);
    const store = toolApprovalsOf(db);
    const ask = (tool: string) =>
      store.insert({
        group_folder: 'ops',
        topic: '',
        chat_jid: 'telegram:-1',
        run_id: 1,
        ask_id: 'a',
        turn_rows: [1],
        tool,
        input_json: '{}',
        input_line: '{}',
        summary: `run ${tool}`,
        approvers: 'owners',
        rule_id: null,
        created_at: Date.now(),
        expires_at: Date.now() + 60_000,
      });
    const a = ask('Bash');
    const b = ask('Write');
    expect(a.code).toMatch(/^[A-Z2-9]{5}$/);
    expect((await gated(path, 'approvals', 'approve', a.code.toLowerCase())).out).toContain(
      `approved Bash (${a.code})`,
    );
    expect((await gated(path, 'approvals', 'reject', b.code, '--note', 'no writes')).code).toBe(0);
    const again = await gated(path, 'approvals', 'reject', a.code);
    expect(again.code).toBe(2);
    expect(again.err).toContain('already decided (approved)');
    expect(store.get(b.id)).toMatchObject({ state: 'rejected', note: 'no writes' });
    const list = (await gated(path, 'approvals', 'list')).out;
    expect(list).toContain(a.code);
    expect(list).toContain('no writes');
    db.close();
  });

  it('groups autonomy sets the preset (audited); list, config and explain show it; a bad level is refused', async () => {
    const path = join(tempDir(), 'gated.db');
    const db = openDatabase(path);
    expect((await gated(path, 'groups', 'add', 'ops')).code).toBe(0);
    const explain = (cmd: string) => gated(path, 'tools', 'explain', 'ops', 'Bash', cmd);
    expect((await explain('make')).out).toMatch(
      /^decision: ask \(autonomy supervised: a call that may write/m,
    );
    expect((await gated(path, 'groups', 'autonomy', 'ops', 'read_only')).out.trim()).toBe(
      'group ops: autonomy read_only',
    );
    expect((await explain('make')).out).toMatch(/^autonomy: read_only$/m);
    expect((await explain('make')).out).toMatch(/^decision: deny \(autonomy read_only: only reading/m);
    const bad = await gated(path, 'groups', 'autonomy', 'ops', 'yolo');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/bad autonomy 'yolo': read_only, supervised, full/);
    expect((await gated(path, 'groups', 'autonomy', 'nope', 'full')).err).toMatch(/no group 'nope'/);
    expect((await gated(path, 'groups', 'list')).out).toMatch(/^ops\t.*\tread_only\t/m);
    expect((await gated(path, 'groups', 'config', 'ops', '--no-tools')).out).toMatch(
      /^autonomy: read_only /m,
    );
    // A raw edit that names no level reads as supervised, and says so.
    db.prepare(`UPDATE registered_groups SET autonomy = 'lots' WHERE folder = 'ops'`).run();
    expect((await gated(path, 'groups', 'list')).out).toMatch(/bad: lots \(read as supervised\)/);
    expect((await explain('make')).out).toMatch(/^autonomy: supervised, stored "lots" is not a level$/m);
    const audit = db
      .prepare(`SELECT actor, after FROM audit WHERE subject = 'registered_groups' ORDER BY id`)
      .all() as Array<{ actor: string; after: string | null }>;
    expect(audit.map((a) => [a.actor, JSON.parse(a.after ?? '{}').autonomy])).toEqual([
      [expect.stringMatching(/^cli/), 'supervised'],
      [expect.stringMatching(/^cli/), 'read_only'],
      // The raw edit is this test's own connection's, not the CLI's.
      [expect.not.stringMatching(/^cli/), 'lots'],
    ]);
    db.close();
  });
});
