import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import type { Db } from '../../store/db.js';
import { getGroup } from '../../store/groups.js';
import { GROUP_SCOPE, MemoryRefused, MemoryStore, type Fact } from '../../store/memory.js';
import { action, intArg } from '../context.js';
import { formatTable, terminalStyle } from '../table.js';
import { audited, cliActor } from './access.js';

/** The facts as a table, one row each. */
function factRows(facts: readonly Fact[]): string[] {
  return formatTable(
    ['id', 'scope', 'updated', 'by', 'text'],
    facts.map((f) => [f.id, f.scope, f.updated_at, f.actor, f.text.replace(/\s+/g, ' ')]),
    terminalStyle(),
  );
}

function knownGroup(db: Db, folder: string): void {
  if (!getGroup(db, folder)) throw new UsageError(`no group '${folder}' (gated groups list)`);
}

/** A `--sender` option: a sender as `platform:id`. */
function senderScope(raw: string | undefined): string {
  if (raw === undefined) return GROUP_SCOPE;
  if (!/^[a-z][a-z0-9_-]*:\S+$/.test(raw))
    throw new UsageError(`--sender must be platform:id (telegram:7001), got '${raw}'`);
  return raw;
}

/** `gated memory list | search | add | rm` (docs/MEMORY.md). */
export function memoryCommand(program: Command): void {
  const memory = program
    .command('memory')
    .description("the facts a group's agent keeps beyond its sessions (docs/MEMORY.md)");
  memory
    .command('list')
    .description("a group's facts, oldest first")
    .argument('<group>')
    .option('--sender <platform:id>', "only this sender's facts")
    .option('--limit <n>', 'at most this many', '500')
    .action(
      action((ctx, group: string, opts: { sender?: string; limit: string }) => {
        const db = ctx.db({ readOnly: true });
        knownGroup(db, group);
        const store = new MemoryStore(db);
        const limit = intArg('--limit', opts.limit);
        const facts = store.list(
          group,
          opts.sender === undefined ? undefined : senderScope(opts.sender),
          limit,
        );
        for (const l of factRows(facts)) ctx.out(l);
      }),
    );
  memory
    .command('search')
    .description("a group's facts that share words with QUERY, best first (full-text, bm25)")
    .argument('<group>')
    .argument('<query...>')
    .action(
      action((ctx, group: string, query: string[]) => {
        const db = ctx.db({ readOnly: true });
        knownGroup(db, group);
        for (const l of factRows(new MemoryStore(db).search(group, query.join(' ')))) ctx.out(l);
      }),
    );
  memory
    .command('add')
    .description("remember a fact for a group, or for one sender of it (audited); prints the fact's id")
    .argument('<group>')
    .argument('<text...>')
    .option('--sender <platform:id>', 'the fact is about this sender only')
    .action(
      action((ctx, group: string, text: string[], opts: { sender?: string }) => {
        const scope = senderScope(opts.sender);
        const by = cliActor();
        const id = audited(ctx, (db) => {
          knownGroup(db, group);
          try {
            return new MemoryStore(db, {
              maxFacts: ctx.config.memoryMaxFacts,
              maxFactBytes: ctx.config.memoryMaxFactBytes,
            }).remember({ group, scope, text: text.join(' '), provenance: { by }, actor: by }).id;
          } catch (err) {
            if (err instanceof MemoryRefused) throw new UsageError(err.message);
            throw err;
          }
        });
        ctx.out(String(id));
      }),
    );
  memory
    .command('rm')
    .description('forget a fact by its id (audited)')
    .argument('<id>')
    .action(
      action((ctx, raw: string) => {
        const id = intArg('id', raw);
        let removed = false;
        audited(ctx, (db) => (removed = new MemoryStore(db).forget(id)));
        if (!removed) throw new UsageError(`no fact ${id}`);
        ctx.out(`fact ${id} removed`);
      }),
    );
}
