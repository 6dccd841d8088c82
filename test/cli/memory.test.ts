/**
 * `gated memory list | search | add | rm` (docs/MEMORY.md) on a real SQLite file: add prints the new id,
 * search ranks by shared words, rm names what it removed, and every change is audited as the CLI's user.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { gatedCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';

it('adds, lists, searches and removes facts, audited as cli:<user>', async () => {
  const path = join(tempDir('gated-cli-'), 'gated.db');
  openDatabase(path).close();
  expect((await gatedCli(path, 'groups', 'add', 'club')).code).toBe(0);
  const add = await gatedCli(path, 'memory', 'add', 'club', 'the', 'boiler', 'is', 'serviced', 'in', 'May');
  expect(add.code).toBe(0);
  const id = add.out.trim();
  expect(id).toMatch(/^\d+$/);
  const about = (
    await gatedCli(path, 'memory', 'add', 'club', 'likes tea', '--sender', 'telegram:7')
  ).out.trim();
  expect((await gatedCli(path, 'memory', 'add', 'nowhere', 'x')).code).toBe(2);
  expect((await gatedCli(path, 'memory', 'add', 'club', 'x', '--sender', 'nobody')).code).toBe(2);
  const list = (await gatedCli(path, 'memory', 'list', 'club')).out;
  expect(list).toMatch(new RegExp(`${id}\\s+group\\s.*the boiler is serviced in May`));
  expect(list).toMatch(new RegExp(`${about}\\s+telegram:7\\s.*likes tea`));
  expect((await gatedCli(path, 'memory', 'list', 'club', '--sender', 'telegram:7')).out).not.toContain(
    'boiler',
  );
  const found = (await gatedCli(path, 'memory', 'search', 'club', 'when', 'is', 'the', 'boiler', 'serviced'))
    .out;
  expect(found).toContain('the boiler is serviced in May');
  expect(found).not.toContain('likes tea');
  expect(await gatedCli(path, 'memory', 'rm', id)).toMatchObject({ code: 0, out: `fact ${id} removed\n` });
  expect((await gatedCli(path, 'memory', 'rm', id)).code).toBe(2);
  const db = openDatabase(path);
  const actors = db
    .prepare(`SELECT action, actor FROM audit WHERE subject = 'memories' ORDER BY id`)
    .all() as { action: string; actor: string }[];
  db.close();
  expect(actors.map((a) => a.action)).toEqual(['insert', 'insert', 'delete']);
  expect(actors.every((a) => a.actor.startsWith('cli:'))).toBe(true);
});
