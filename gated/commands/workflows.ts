import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { formatDuration } from '../../core/duration.js';
import { listWorkflows, problemLines, type WorkflowFile } from '../../core/workflows.js';
import { workflowFacts } from '../../gateway/workflow-runs.js';
import { runOrder } from '../../core/workflow-file.js';
import { getGroup, listGroups } from '../../store/groups.js';
import { action, type CliContext } from '../context.js';

/** The groups a command is about: the one named (registered), else every registered group. */
function groupsOf(ctx: CliContext, group: string | undefined): string[] {
  const db = ctx.db({ readOnly: true });
  if (group === undefined) return listGroups(db).map((g) => g.folder);
  if (!getGroup(db, group)) throw new UsageError(`no registered group '${group}'`);
  return [group];
}

/** `gated workflows check | explain` (docs/WORKFLOWS.md). */
export function workflowsCommand(program: Command): void {
  const wf = program.command('workflows').description("check and explain the groups' workflow files");
  wf.command('check')
    .description('list the problems of every workflow file (file:line: reason); exit 1 if any')
    .argument('[group]', 'one registered group (default: all)')
    .action(
      action((ctx, group: string | undefined) => {
        const facts = workflowFacts(ctx.db({ readOnly: true }));
        let bad = 0;
        let files = 0;
        const said = new Set<string>();
        for (const g of groupsOf(ctx, group)) {
          for (const f of listWorkflows(ctx.config.configDir, g, facts)) {
            files += 1;
            if (f.problems.length === 0) continue;
            bad += 1;
            // A parent's file inherited by several groups is reported once per distinct problem.
            for (const line of problemLines(f)) {
              const shown = f.from === g ? line : `${line} (as used by ${g})`;
              if (said.has(line)) continue;
              said.add(line);
              ctx.out(shown);
            }
          }
        }
        if (bad === 0) ctx.out(files === 0 ? 'no workflow files' : `all ${files} workflow files valid`);
        return bad > 0 ? 1 : 0;
      }),
    );
  wf.command('explain')
    .description('show each workflow of a group: its steps in run order, what each needs and runs, its gates')
    .argument('[group]', 'one registered group (default: all)')
    .action(
      action((ctx, group: string | undefined) => {
        const facts = workflowFacts(ctx.db({ readOnly: true }));
        for (const g of groupsOf(ctx, group))
          for (const f of listWorkflows(ctx.config.configDir, g, facts))
            for (const l of explain(g, f)) ctx.out(l);
      }),
    );
}

/** The lines `explain` prints for one file of one group. */
export function explain(group: string, f: WorkflowFile): string[] {
  const head = `${group}: /workflow run ${f.name} (${f.file})`;
  if (f.problems.length > 0 || f.workflow === null)
    return [`${head}: INVALID, never runs`, ...problemLines(f).map((l) => `  ${l}`)];
  const wf = f.workflow;
  const lines = [head, ...(wf.description ? [`  ${wf.description}`] : [])];
  for (const level of runOrder(wf)) {
    const parallel = level.length > 1 ? ' (these may run at once)' : '';
    for (const s of level) {
      const needs = s.needs.length ? ` after ${s.needs.join(', ')}` : ' first';
      if (s.kind === 'gate') {
        lines.push(
          `  ${s.name}${needs}: GATE waits for ${s.approvers === 'members' ? 'a member or owner' : 'an owner'} ` +
            `(at most ${formatDuration(s.timeoutMs)}): ${s.question}${parallel}`,
        );
        continue;
      }
      const what = s.command !== null ? `command /${s.command}` : 'prompt';
      const agent = `${s.agent ?? "group's agent"}${s.model ? ` model ${s.model}` : ''}`;
      const fail = s.onFailure.kind === 'retry' ? `retry ${s.onFailure.times}` : s.onFailure.kind;
      lines.push(`  ${s.name}${needs}: ${what} on ${agent}, on failure ${fail}${parallel}`);
    }
  }
  return lines;
}
