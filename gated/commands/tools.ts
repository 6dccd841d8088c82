import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import {
  checkToolRule,
  inputFromLine,
  shellCommand,
  ToolRuleTable,
  type ToolExplainLine,
  type ToolVerdict,
} from '../../router/tool-rules.js';
import { normalizeToolCode, toolApprovalsOf, type ToolApproval } from '../../store/tool-approvals.js';
import { action, intArg, type CliContext } from '../context.js';
import { loadShellParser } from '../../queue/shell-parser.js';
import { DEFAULT_AUTONOMY } from '../../router/autonomy.js';
import { autonomyReader } from '../../store/groups.js';
import { formatTable, terminalStyle } from '../table.js';
import { audited, cliActor } from './access.js';

/** `gated tools list | add | rm | check | explain` (docs/APPROVALS.md). */
export function toolsCommand(program: Command): void {
  const tools = program.command('tools').description('show and edit the tool rules (allow, ask, deny)');
  tools
    .command('list')
    .description('rules in the order they are tried (group, seq, id), with validity')
    .action(action(async (ctx) => listToolRules(ctx, await ruleTable(ctx))));
  ruleEditCommands(tools);
  ruleCheckCommands(tools);
  approvalsCommand(program);
}

/** The stored rules compiled, with the shell parser. */
async function ruleTable(ctx: CliContext): Promise<ToolRuleTable> {
  return new ToolRuleTable(toolApprovalsOf(ctx.db()).rules(), await loadShellParser());
}

/** `gated tools list`: the rules as a table, each with its validity, then what decides the rest. */
function listToolRules(ctx: CliContext, table: ToolRuleTable): void {
  const store = toolApprovalsOf(ctx.db());
  const bad = new Map(table.invalid.map((i) => [i.row.id, i.reason]));
  const rows = store.rules();
  const lines = formatTable(
    ['id', 'group', 'seq', 'tool', 'input', 'decision', 'approvers', 'status'],
    rows.map((r) => {
      const reason = bad.get(r.id);
      return [
        r.id,
        r.group_folder,
        r.seq,
        r.tool,
        r.input ?? '*',
        { text: String(r.decision), tint: 'cyan' },
        r.approvers ?? 'owners',
        reason === undefined ? { text: 'ok', tint: 'green' } : { text: `INVALID: ${reason}`, tint: 'red' },
      ];
    }),
    terminalStyle(),
  );
  for (const line of lines) ctx.out(line);
  ctx.out("what no rule decides: the group's autonomy preset (gated groups list shows each group's)");
}

/** `gated tools add | rm`. */
function ruleEditCommands(tools: Command): void {
  tools
    .command('add')
    .description('add a rule; an invalid row is refused')
    .argument('<group>', 'group folder (the rule covers the groups below it too)')
    .argument('<decision>', 'allow | ask | deny')
    .requiredOption('--seq <n>', 'position within the group: lower is tried first')
    .requiredOption('--tool <glob>', 'glob over the tool name: Bash, Write, mcp__github__*')
    .option('--input <glob>', 'glob over the input line (command, path or JSON)', '*')
    .option('--approvers <who>', 'owners | members (who may decide an ask)', 'owners')
    .action(
      action(
        (
          ctx,
          group: string,
          decision: string,
          o: { seq: string; tool: string; input: string; approvers: string },
        ) => {
          const row = {
            group_folder: group,
            seq: intArg('--seq', o.seq),
            tool: o.tool,
            input: o.input,
            decision,
            approvers: o.approvers,
          };
          const reason = checkToolRule(row);
          if (reason) throw new UsageError(`tool rule refused: ${reason}`);
          ctx.out(String(audited(ctx, (db) => toolApprovalsOf(db).addRule(row))));
        },
      ),
    );

  tools
    .command('rm')
    .description('delete a rule by id')
    .argument('<id>')
    .action(
      action((ctx, id: string) => {
        const n = intArg('id', id);
        if (!audited(ctx, (db) => toolApprovalsOf(db).removeRule(n)))
          throw new UsageError(`no tool rule with id ${n}`);
        ctx.out(`tool rule ${n} removed`);
      }),
    );
}

/** `gated tools check | explain`. */
function ruleCheckCommands(tools: Command): void {
  tools
    .command('check')
    .description('list invalid rules (id, then reason); exit 1 if any')
    .action(
      action(async (ctx) => {
        const table = await ruleTable(ctx);
        for (const p of table.invalid) ctx.out(`${p.row.id}\t${p.reason}`);
        if (table.invalid.length === 0) ctx.out('all tool rules valid');
        return table.invalid.length ? 1 : 0;
      }),
    );

  tools
    .command('explain')
    .description('show, rule by rule, why each would or would not decide this tool call')
    .argument('<group>', 'group folder')
    .argument('<tool>', 'tool name, e.g. Bash')
    .argument('[input...]', 'the input line: the command, the path, or the JSON')
    // The input line is a command: `rm -rf /tmp` must reach it, not be parsed as options.
    .allowUnknownOption(true)
    .action(
      action(async (ctx, group: string, tool: string, input: string[]) => {
        const table = await ruleTable(ctx);
        const stored = autonomyReader(ctx.db())(group);
        const autonomy = stored?.level ?? DEFAULT_AUTONOMY;
        const note =
          stored === undefined
            ? ', the group is not registered'
            : stored.level === stored.stored
              ? ''
              : `, stored ${JSON.stringify(stored.stored)} is not a level`;
        ctx.out(`autonomy: ${autonomy}${note}`);
        const call = inputFromLine(tool, input.join(' '));
        const { parts, unproven, verdict } = table.explain(group, tool, call, autonomy);
        const shell = shellCommand(tool, { command: '' }) !== null;
        for (const part of parts) {
          if (shell)
            ctx.out(`command: ${part.line === '' ? "''" : part.line} → ${verdictText(part.verdict)}`);
          for (const l of part.lines) ctx.out((shell ? '  ' : '') + explainLine(l));
        }
        for (const why of unproven) ctx.out(`not provable: ${why}`);
        ctx.out(`decision: ${verdictText(verdict)}`);
      }),
    );
}

function verdictText(v: ToolVerdict): string {
  return `${v.decision} (${v.why}${v.decision === 'ask' ? `, approvers ${v.approvers}` : ''})`;
}

function explainLine(l: ToolExplainLine): string {
  const r = l.row;
  const head = `${r.id}\t${r.group_folder} seq ${r.seq} ${r.tool} ${r.input ?? '*'} → ${r.decision}: `;
  switch (l.verdict) {
    case 'matched':
      return head + 'matches: decides';
    case 'shadowed':
      return head + 'matches, but an earlier rule decided';
    case 'no-match':
      return head + `${l.field} does not match`;
    case 'invalid':
      return head + `invalid, never matches (${l.reason})`;
  }
}

/** One approval row for `approvals list`. */
function approvalCells(a: ToolApproval): (string | number)[] {
  const when = new Date(a.created_at).toISOString();
  return [
    a.code,
    a.state,
    a.group_folder + (a.topic ? `#${a.topic}` : ''),
    a.chat_jid,
    a.tool,
    a.summary ?? a.input_line,
    when,
    a.decided_by ?? '',
    a.note ?? '',
  ];
}

/** `gated approvals list | approve | reject` for tool approvals. */
function approvalsCommand(program: Command): void {
  const approvals = program
    .command('approvals')
    .description('tool calls waiting for a human, and decided ones');

  approvals
    .command('list')
    .description('pending tool approvals, then the most recent decided ones')
    .option('--decided <n>', 'how many decided rows to show', '20')
    .action(
      action((ctx, o: { decided: string }) => {
        const store = toolApprovalsOf(ctx.db());
        const rows = [...store.pending(), ...store.recent(intArg('--decided', o.decided))];
        const head = ['code', 'state', 'session', 'chat', 'tool', 'summary', 'asked', 'by', 'note'];
        for (const line of formatTable(head, rows.map(approvalCells), terminalStyle())) ctx.out(line);
      }),
    );

  for (const approve of [true, false]) {
    const verb = approve ? 'approve' : 'reject';
    approvals
      .command(verb)
      .description(`${verb} a pending tool call by its code (as an admin)`)
      .argument('<code>')
      .option('--note <text>', 'a reason the agent receives (reject)')
      .action(
        action((ctx, typed: string, o: { note?: string }) => {
          const code = normalizeToolCode(typed);
          if (!code) throw new UsageError(`'${typed}' is not a tool approval code (5 characters)`);
          const actor = cliActor();
          const done = audited(ctx, (db) =>
            toolApprovalsOf(db).decide(code, approve, actor, o.note ?? null, Date.now()),
          );
          if (!done) {
            const row = toolApprovalsOf(ctx.db()).byCode(code);
            throw new UsageError(
              row ? `${code} was already decided (${row.state})` : `no tool approval with code ${code}`,
            );
          }
          ctx.out(`${approve ? 'approved' : 'rejected'} ${done.tool} (${code})`);
        }),
      );
  }
}
