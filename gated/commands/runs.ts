import type { Command } from 'commander';
import type { RunRow } from '../../http/queries.js';
import { UsageError } from '../../core/errors.js';
import { parseReceipt, sameMac } from '../../store/receipts.js';
import { ToolCallStore, type ToolCallRow } from '../../store/tool-calls.js';
import { action, intArg, type CliContext } from '../context.js';
import { receiptKey } from '../receipt-key.js';
import { formatTable, terminalStyle } from '../table.js';

/** `gated runs show RUN` and `gated receipts verify [RUN] | check RECEIPT` (docs/SECURITY.md, "Receipts"). */
export function runsCommands(program: Command): void {
  const runs = program
    .command('runs')
    .description("show an agent run: its usage and its tool calls' timeline");
  runs
    .command('show')
    .description('one run (a session_log id): what it served and cost, then each tool call in order')
    .argument('<run>', 'the run id (session_log.id; the dashboard and `gated status` show it)')
    .action(action((ctx, run: string) => showRun(ctx, intArg('run', run))));
  const receipts = program.command('receipts').description('check the signed records of tool calls');
  receipts
    .command('verify')
    .description("check each run's chain of receipts (or one run's); names the first broken link, exit 1")
    .argument('[run]', 'only this run')
    .action(action((ctx, run?: string) => verify(ctx, run === undefined ? undefined : intArg('run', run))));
  receipts
    .command('check')
    .description('check one receipt as an agent or model quoted it: the record it names, and that it holds')
    .argument('<receipt>', 'gated-receipt:v1:RUN.SEQ:MAC (text around it is ignored)')
    .option('--run <id>', "the run that cited it: another run's receipt is refused (an echoed one)")
    .action(
      action((ctx, receipt: string, opts: { run?: string }) =>
        check(ctx, receipt, opts.run === undefined ? undefined : intArg('--run', opts.run)),
      ),
    );
}

/** A session_log row as `runs show` reads it (the columns the dashboard's rows also name). */
type SessionRow = Omit<RunRow, 'idle_ms' | 'work_ms'>;

function store(ctx: CliContext): ToolCallStore {
  return new ToolCallStore(ctx.db({ readOnly: true }), receiptKey(ctx.config.receiptKeyFile));
}

function showRun(ctx: CliContext, runId: number): number {
  const db = ctx.db({ readOnly: true });
  const run = db.prepare('SELECT * FROM session_log WHERE id = ?').get(runId) as SessionRow | undefined;
  if (!run) throw new UsageError(`no run ${runId}`);
  const topic = run.topic ? ` #${run.topic}` : '';
  ctx.out(`run ${run.id}: ${run.group_folder}${topic} in ${run.chat_jid ?? '?'}`);
  ctx.out(`started ${run.started_at}, ended ${run.ended_at ?? '(running)'}: ${run.result ?? 'running'}`);
  if (run.error) ctx.out(`error: ${run.error}`);
  ctx.out(
    `messages ${run.messages}, replies ${run.replies}, tokens ${run.input_tokens ?? 0} in / ${run.output_tokens ?? 0} out, cost $${(run.cost_usd ?? 0).toFixed(4)}`,
  );
  // Showing signs nothing: no key is read (verify and check read it).
  const calls = new ToolCallStore(db, Buffer.alloc(32)).ofRun(runId);
  if (calls.length === 0) {
    ctx.out('no tool calls');
    return 0;
  }
  const style = terminalStyle();
  for (const line of formatTable(
    ['seq', 'turn', 'tool', 'decision', 'decided by', 'started', 'ms', 'output', 'error', 'input'],
    calls.map((c) => callCells(c)),
    style,
  ))
    ctx.out(line);
  return 0;
}

function callCells(c: ToolCallRow): Array<string | number | null | { text: string; tint?: 'red' | 'green' }> {
  const output = c.output_bytes === null ? '' : `${c.output_bytes} B ${c.output_sha256?.slice(0, 12) ?? ''}`;
  return [
    c.seq ?? '(open)',
    c.turn,
    c.tool,
    {
      text: c.decision ?? 'asked',
      tint: c.decision === 'deny' ? 'red' : c.decision === 'allow' ? 'green' : undefined,
    },
    c.decided_by,
    new Date(c.started_at).toISOString(),
    c.ended_at === null ? '' : c.ended_at - c.started_at,
    output.trim(),
    c.error === null ? null : { text: c.error.slice(0, 80), tint: 'red' },
    c.input.length > 80 ? `${c.input.slice(0, 79)}…` : c.input,
  ];
}

function verify(ctx: CliContext, only: number | undefined): number {
  const s = store(ctx);
  const runs = only === undefined ? s.runs() : [only];
  let records = 0;
  for (const run of runs) {
    const broken = s.verify(run);
    if (broken) {
      ctx.out(
        `broken: run ${broken.run_id}, record ${broken.seq} (tool_calls id ${broken.id}): ${broken.reason}`,
      );
      return 1;
    }
    records += s.ofRun(run).filter((c) => c.seq !== null).length;
  }
  ctx.out(`ok: ${records} records in ${runs.length} run${runs.length === 1 ? '' : 's'} verify`);
  return 0;
}

function check(ctx: CliContext, text: string, citedBy: number | undefined): number {
  const r = parseReceipt(text);
  if (!r) throw new UsageError('not a receipt: expected gated-receipt:v1:RUN.SEQ:MAC');
  if (citedBy !== undefined && r.runId !== citedBy) {
    // A real receipt of another run proves nothing about this one: an agent may echo any it has seen.
    ctx.out(`not this run's: the receipt names run ${r.runId}, not run ${citedBy}`);
    return 1;
  }
  const s = store(ctx);
  const row = s.at(r.runId, r.seq);
  if (!row || !sameMac(row.receipt, r.mac)) {
    ctx.out(`forged or unknown: run ${r.runId} has no record ${r.seq} with this receipt`);
    return 1;
  }
  const broken = s.verify(r.runId);
  if (broken && broken.seq <= r.seq) {
    ctx.out(
      `broken: run ${broken.run_id}, record ${broken.seq} (tool_calls id ${broken.id}): ${broken.reason}`,
    );
    return 1;
  }
  ctx.out(`ok: run ${r.runId}, record ${r.seq}: ${row.tool} ${row.decision} by ${row.decided_by ?? '?'}`);
  ctx.out(`input ${row.input_bytes} B sha256 ${row.input_sha256}: ${row.input.slice(0, 200)}`);
  const end = row.error ?? `output ${row.output_bytes ?? '?'} B sha256 ${row.output_sha256 ?? '?'}`;
  ctx.out(
    `started ${new Date(row.started_at).toISOString()}, ended ${new Date(row.ended_at ?? 0).toISOString()}: ${end}`,
  );
  return 0;
}
