/**
 * The CLI loads only the module of the command a call names (gated/program.ts, COMMAND_MODULES): the
 * table's names must be exactly what each module registers, in the order `gated --help` lists them, or a
 * command would be refused as unknown or missing from the help.
 */
import { Command } from 'commander';
import { expect, test } from 'vitest';
import { buildProgram, COMMAND_MODULES } from '../../gated/program.js';

const names = (p: Command) => p.commands.map((c) => c.name());

test('each command module registers exactly the top-level commands the table names', async () => {
  for (const m of COMMAND_MODULES) {
    const p = new Command('gated');
    for (const register of await m.load()) register(p);
    expect(names(p), `the module of ${m.names.join(', ')}`).toEqual(m.names);
  }
});

test('the whole program lists every command in the table order; one command loads only its own', async () => {
  const all = await buildProgram();
  expect(names(all)).toEqual(['run', 'chat', ...COMMAND_MODULES.flatMap((m) => m.names)]);
  expect(names(await buildProgram('receipts'))).toEqual(['run', 'chat', 'runs', 'receipts']);
  expect(names(await buildProgram('run'))).toEqual(['run', 'chat']);
});
