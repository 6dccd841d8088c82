import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { compileRoutes, explainFields, formatExplain } from '../../router/index.js';
import { danglingNames, danglingTarget } from '../../store/dangling.js';
import { addCheckedRoute, listRoutes, removeRoute, routeHits } from '../../store/routes.js';
import { audited } from './access.js';
import { action, intArg, type CliContext } from '../context.js';
import { formatTable, terminalStyle } from '../table.js';

/** `gated routes list | add | rm | check | explain`. */
export function routesCommand(program: Command): void {
  const routes = program.command('routes').description('show and edit the routing table');
  routes
    .command('list')
    .description('rows in the order they are tried (seq, then id), with hits and validity')
    .action(action((ctx) => listRouteRows(ctx)));
  routeEditCommands(routes);
  routeCheckCommands(routes);
}

/** `gated routes list`: the rows as a table, each with its hits and validity. */
function listRouteRows(ctx: CliContext): void {
  const db = ctx.db({ readOnly: true });
  const rows = listRoutes(db);
  const problems = new Map(
    compileRoutes(rows)
      .problems()
      .map((p) => [p.id, p.reason]),
  );
  const hits = routeHits(db);
  const lines = formatTable(
    ['id', 'seq', 'hits', 'match', 'target', 'impulse', 'status'],
    rows.map((r) => {
      const reason = problems.get(r.id);
      return [
        r.id,
        r.seq,
        hits.get(r.id) ?? 0,
        r.match || '(all)',
        { text: r.target, tint: 'cyan' },
        r.impulse_config ?? '',
        reason === undefined ? { text: 'ok', tint: 'green' } : { text: `INVALID: ${reason}`, tint: 'red' },
      ];
    }),
    terminalStyle(),
  );
  for (const line of lines) ctx.out(line);
}

/** `gated routes add | rm`. */
function routeEditCommands(routes: Command): void {
  routes
    .command('add')
    .description('add a route; an invalid row is refused')
    .argument('<target>', 'krons/content | folder:PATH | builtin:ping | builtin:drop | daemon:NAME')
    // Both are required: a forgotten --match would add a catch-all, and a forgotten --seq would put it
    // first, so one typo would take every message of the instance. `--match ''` asks for a catch-all.
    .requiredOption('--seq <n>', 'position: lower is tried first')
    .requiredOption(
      '--match <pairs>',
      "space-separated key=glob pairs (keys: platform room chat_jid sender verb); '' matches everything",
    )
    .option('--impulse <json>', 'impulse_config JSON, e.g. {"threshold":300}')
    .action(
      action((ctx, target: string, opts: { seq: string; match: string; impulse?: string }) => {
        const row = {
          seq: intArg('--seq', opts.seq),
          match: opts.match,
          target,
          impulse_config: opts.impulse ?? null,
        };
        ctx.out(String(audited(ctx, (db) => addCheckedRoute(db, row), { create: true })));
        // Accepted (a group may be added after its route), but said: until then every message it takes fails.
        const nowhere = danglingTarget(ctx.db(), target);
        if (nowhere) process.stderr.write(`warning: ${nowhere}\n`);
      }),
    );

  routes
    .command('rm')
    .description('delete a route by id')
    .argument('<id>')
    .action(
      action((ctx, id: string) => {
        const n = intArg('id', id);
        if (!audited(ctx, (db) => removeRoute(db, n))) throw new UsageError(`no route with id ${n}`);
        ctx.out(`route ${n} removed`);
      }),
    );
}

/** `gated routes check | explain`. */
function routeCheckCommands(routes: Command): void {
  routes
    .command('check')
    .description(
      'list invalid rows (id, then reason; exit 1 if any); on stderr, warnings for the names that point ' +
        'nowhere (a route to a group or daemon not registered, a group naming an unknown agent)',
    )
    .action(
      action((ctx) => {
        const db = ctx.db({ readOnly: true });
        const problems = compileRoutes(listRoutes(db)).problems();
        for (const p of problems) ctx.out(`${p.id}\t${p.reason}`);
        if (problems.length === 0) ctx.out('all routes valid');
        // On stderr: stdout stays one line per invalid row, starting with its id (scripts read it).
        for (const d of danglingNames(db))
          process.stderr.write(`warning: ${d.where}: ${d.reason} (${d.fix})\n`);
        return problems.length ? 1 : 0;
      }),
    );

  routes
    .command('explain')
    .description('show, row by row, why each route would or would not take a message with these fields')
    .argument('<fields...>', 'KEY=VALUE pairs: platform room chat_jid sender verb')
    .action(
      action((ctx, words: string[]) => {
        const fields = explainFields(words);
        if ('error' in fields) throw new UsageError(fields.error);
        for (const line of formatExplain(
          compileRoutes(listRoutes(ctx.db({ readOnly: true }))).explain(fields),
        ))
          ctx.out(line);
      }),
    );
}
