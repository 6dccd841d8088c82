/**
 * The CLI says what it did (issue 43): `--version` prints package.json's version, every `rm` names what it
 * removed, and `tools list` lists rules in the documented order (group, seq, id).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { openDatabase } from '../../store/db.js';
import { gatedCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';

describe('the CLI says what it did', () => {
  it('--version prints the version', async () => {
    const version = (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string })
      .version;
    const r = await gatedCli(join(tempDir('gated-cli-'), 'none.db'), '--version');
    expect(r).toMatchObject({ code: 0, out: `${version}\n` });
  });

  it('rm names what it removed; tools list is ordered by group, then seq, then id', async () => {
    const path = join(tempDir('gated-cli-'), 'gated.db');
    openDatabase(path).close();
    expect((await gatedCli(path, 'groups', 'add', 'zeta')).code).toBe(0);
    expect((await gatedCli(path, 'groups', 'add', 'alpha')).code).toBe(0);
    const route = (
      await gatedCli(path, 'routes', 'add', 'zeta', '--seq', '1', '--match', 'platform=web')
    ).out.trim();
    expect(await gatedCli(path, 'routes', 'rm', route)).toMatchObject({
      code: 0,
      out: `route ${route} removed\n`,
    });
    const add = async (group: string, seq: string) =>
      (await gatedCli(path, 'tools', 'add', group, 'ask', '--seq', seq, '--tool', 'Bash')).out.trim();
    const z1 = await add('zeta', '1');
    const a5 = await add('alpha', '5');
    const a2 = await add('alpha', '2');
    const listed = (await gatedCli(path, 'tools', 'list')).out
      .split('\n')
      .map((l) => /^\s*(\d+)\s/.exec(l)?.[1])
      .filter(Boolean);
    expect(listed).toEqual([a2, a5, z1]);
    expect(await gatedCli(path, 'tools', 'rm', z1)).toMatchObject({
      code: 0,
      out: `tool rule ${z1} removed\n`,
    });
  });
});
