import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { backupDatabase, restoreDatabase } from '../../store/backup.js';
import { openDatabase } from '../../store/db.js';
import { action } from '../context.js';
import { liveOwner } from '../../store/owner.js';

/** `gated backup FILE` and `gated restore FILE` (docs/OPERATIONS.md). */
export function backupCommands(program: Command): void {
  program
    .command('backup')
    .description('copy the database into FILE with SQLite online backup (safe while gated runs)')
    .argument('<file>', 'where the copy goes; must not exist yet')
    .action(
      action(async (ctx, file: string) => {
        const to = resolve(file);
        const { pages } = await backupDatabase(ctx.db(), to);
        ctx.out(`backed up ${ctx.config.db} to ${to} (${pages} pages, integrity ok)`);
      }),
    );

  program
    .command('restore')
    .description('replace the database by the backup FILE (gated must be stopped; the old file is kept)')
    .argument('<file>', 'a file made by gated backup')
    .action(
      action((ctx, file: string) => {
        const target = ctx.config.db;
        if (existsSync(target)) {
          // Opened without applying the schema: a restore must not migrate the database it is replacing.
          const db = openDatabase(target, { noSchema: true });
          try {
            const hasState = db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'router_state'`).get();
            const owner = hasState ? liveOwner(db) : undefined;
            if (owner) {
              throw new UsageError(
                `a gated (pid ${owner.pid} on ${owner.host}) runs on ${target}; stop it before restoring`,
              );
            }
          } finally {
            db.close();
          }
        }
        const { aside, version } = restoreDatabase(resolve(file), target);
        ctx.out(`restored ${resolve(file)} to ${target} (schema version ${version})`);
        if (aside) ctx.out(`the replaced database is kept at ${aside}`);
      }),
    );
}
