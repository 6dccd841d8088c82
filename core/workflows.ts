import { ConfigFileError, isConfigDir, listConfigDir, readConfigFile } from './config-files.js';
import { findCommand } from './group-config.js';
import { folderChain } from './types.js';
import { parseWorkflow, STEP_NAME, type Workflow, type WorkflowProblem } from './workflow-file.js';

/**
 * A group's workflow files (docs/WORKFLOWS.md): `workflows/<name>.md` of the nearest folder of the group's
 * chain that has a `workflows/` folder, the group's own first, then its ancestors' (inherited like its
 * chat commands). Read through the configuration reader (core/config-files.ts: no link followed); a file
 * that cannot be read or parsed is reported with its problems and never runs.
 */

/** One workflow file as found: its parsed workflow and every problem, each with its line. */
export interface WorkflowFile {
  name: string;
  /** Relative to the configuration root. */
  file: string;
  /** The group folder whose configuration holds it. */
  from: string;
  workflow: Workflow | null;
  problems: WorkflowProblem[];
}

/** What a check needs to know beyond the file: which agent names exist. */
export interface WorkflowFacts {
  /** True for a built-in agent or an agent_profiles row. */
  agentKnown(name: string): boolean;
}

/** The nearest folder of `folder`'s chain with a `workflows/` folder (null: none; a link counts as none). */
function workflowsFrom(root: string, folder: string): string | null {
  for (const f of folderChain(folder)) {
    try {
      if (isConfigDir(root, `${f}/workflows`)) return f;
    } catch {
      // A link or unreadable folder: reported by listWorkflows, skipped here.
    }
  }
  return null;
}

/**
 * Every workflow file of `folder`, sorted by name, each parsed and (with `facts`) checked against the
 * group's agents and command files. Never throws for what a file contains.
 */
export function listWorkflows(root: string, folder: string, facts?: WorkflowFacts): WorkflowFile[] {
  const from = workflowsFrom(root, folder);
  if (from === null) return [];
  let entries: ReturnType<typeof listConfigDir>;
  try {
    entries = listConfigDir(root, `${from}/workflows`);
  } catch (err) {
    const file = `${from}/workflows`;
    return [{ name: '', file, from, workflow: null, problems: [{ line: 0, reason: reasonOf(err) }] }];
  }
  return entries.map((e) => {
    const file = `${from}/workflows/${e.name}`;
    const name = e.name.replace(/\.md$/, '');
    if (e.kind !== 'file' || !e.name.endsWith('.md') || !STEP_NAME.test(name))
      return {
        name,
        file,
        from,
        workflow: null,
        problems: [{ line: 0, reason: 'is not a workflow file (workflows/<name>.md, name in a-z0-9_-)' }],
      };
    return readOne(root, folder, from, name, file, facts);
  });
}

/** The workflow `name` of `folder`, parsed and checked; undefined when there is no such file. */
export function findWorkflow(
  root: string,
  folder: string,
  name: string,
  facts?: WorkflowFacts,
): WorkflowFile | undefined {
  if (!STEP_NAME.test(name)) return undefined;
  const from = workflowsFrom(root, folder);
  if (from === null) return undefined;
  const file = `${from}/workflows/${name}.md`;
  const found = readOne(root, folder, from, name, file, facts);
  return found.workflow === null && found.problems.length === 0 ? undefined : found;
}

function readOne(
  root: string,
  folder: string,
  from: string,
  name: string,
  file: string,
  facts: WorkflowFacts | undefined,
): WorkflowFile {
  let text: string | null;
  try {
    text = readConfigFile(root, file);
  } catch (err) {
    return { name, file, from, workflow: null, problems: [{ line: 0, reason: reasonOf(err) }] };
  }
  if (text === null) return { name, file, from, workflow: null, problems: [] };
  const { workflow, problems } = parseWorkflow(name, text);
  if (facts) problems.push(...factProblems(root, folder, workflow, facts));
  problems.sort((a, b) => a.line - b.line);
  return { name, file, from, workflow, problems };
}

/** What the file alone cannot tell: agent names that do not exist, command files that are missing. */
function factProblems(root: string, folder: string, wf: Workflow, facts: WorkflowFacts): WorkflowProblem[] {
  const out: WorkflowProblem[] = [];
  for (const s of wf.steps) {
    if (s.kind !== 'agent') continue;
    if (s.agent !== null && !facts.agentKnown(s.agent))
      out.push({
        line: s.line,
        reason: `step '${s.name}': agent '${s.agent}' is neither built in (claude, codex) nor an agent_profiles row`,
      });
    if (s.command !== null) {
      const problems: string[] = [];
      const found = findCommand(root, folder, s.command, (p) => problems.push(`${p.file} ${p.reason}`));
      if (!found)
        out.push({
          line: s.line,
          reason: `step '${s.name}': command file commands/${s.command}.md not found for ${folder}${problems.length ? ` (${problems.join('; ')})` : ''}`,
        });
    }
  }
  return out;
}

function reasonOf(err: unknown): string {
  return err instanceof ConfigFileError ? err.message : `cannot be read: ${(err as Error).message}`;
}

/** `file:line: reason` for each problem (line 0: the file as a whole). */
export function problemLines(f: Pick<WorkflowFile, 'file' | 'problems'>): string[] {
  return f.problems.map((p) => `${f.file}${p.line > 0 ? `:${p.line}` : ''}: ${p.reason}`);
}
