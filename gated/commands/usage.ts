import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { usageOf } from '../../store/usage.js';
import { action, intArg } from '../context.js';
import { formatTable, terminalStyle } from '../table.js';
import { audited } from './access.js';

const DAY = 86_400_000;

/** `gated usage` and `gated prices list | set | rm` (docs/COSTS.md). */
export function usageCommands(program: Command): void {
  program
    .command('usage')
    .description(
      'tokens and cost per UTC day, group and sender, as the agents reported them (a report without a cost ' +
        "is priced by its model's row: gated prices list | set MODEL IN OUT | rm MODEL)",
    )
    .option('--days <n>', 'days back, today included', '7')
    .option('--group <folder>', 'only this group')
    .action(
      action((ctx, opts: { days: string; group?: string }) => {
        const days = intArg('--days', opts.days);
        if (days < 1) throw new UsageError('--days must be at least 1');
        const since = Math.floor(Date.now() / DAY) * DAY - (days - 1) * DAY;
        const rows = usageOf(ctx.db({ readOnly: true })).byDay(since, opts.group ?? null);
        const lines = formatTable(
          ['day', 'group', 'sender', 'reports', 'input tokens', 'output tokens', 'cost usd'],
          rows.map((r) => [
            r.day,
            r.group_folder,
            r.sender ?? '(none)',
            r.reports,
            r.input_tokens,
            r.output_tokens,
            r.cost_usd.toFixed(6),
          ]),
          terminalStyle(),
        );
        for (const line of lines) ctx.out(line);
      }),
    );
  const prices = program
    .command('prices')
    .description('what each model costs, for usage an agent reports without a cost');
  prices
    .command('list')
    .description("every price row (model '*' prices any model without a row of its own)")
    .action(
      action((ctx) => {
        const rows = usageOf(ctx.db({ readOnly: true })).prices();
        const lines = formatTable(
          ['model', 'input usd/Mtok', 'output usd/Mtok'],
          rows.map((r) => [r.model, r.input_per_mtok, r.output_per_mtok]),
          terminalStyle(),
        );
        for (const line of lines) ctx.out(line);
      }),
    );
  prices
    .command('set')
    .description("set a model's prices in US dollars per million tokens (audited)")
    .argument('<model>', "the model's name as its group's agent gets it, or '*'")
    .argument('<input>', 'USD per million input tokens')
    .argument('<output>', 'USD per million output tokens')
    .action(
      action((ctx, model: string, input: string, output: string) => {
        const i = priceArg('input', input);
        const o = priceArg('output', output);
        audited(ctx, (db) => usageOf(db).setPrice(model, i, o));
        ctx.out(`${model}: $${i} per million input tokens, $${o} per million output tokens`);
      }),
    );
  prices
    .command('rm')
    .description("remove a model's price row (audited)")
    .argument('<model>')
    .action(
      action((ctx, model: string) => {
        let removed = false;
        audited(ctx, (db) => (removed = usageOf(db).removePrice(model)));
        if (!removed) throw new UsageError(`no price row for ${model}`);
        ctx.out(`price of ${model} removed`);
      }),
    );
}

function priceArg(name: string, raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new UsageError(`${name} price must be a number of dollars, 0 or more, got '${raw}'`);
  return n;
}
