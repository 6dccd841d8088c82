import { describe, expect, it } from 'vitest';
import { parseWorkflow, runOrder } from '../../core/workflow-file.js';

const reasons = (text: string) => parseWorkflow('w', text).problems.map((p) => `${p.line}: ${p.reason}`);

describe('workflow files (docs/WORKFLOWS.md)', () => {
  it('reads steps, fields, prompts, gates and failure handling', () => {
    const { workflow, problems } = parseWorkflow(
      'ship',
      [
        '# ship',
        'Plan and ship.',
        '',
        '## plan',
        'agent: codex',
        'model: gpt-5',
        'Plan: $ARGUMENTS',
        'Note: a colon line after the fields is prompt text.',
        '',
        '## ok',
        'needs: plan',
        'approve: Go?',
        'approvers: members',
        'timeout: 2h',
        '',
        '## build',
        'needs: ok',
        'command: implement',
        'arguments: $ARGUMENTS with $STEP_plan',
        'on-failure: retry 3',
      ].join('\n'),
    );
    expect(problems).toEqual([]);
    expect(workflow.description).toBe('Plan and ship.');
    const [plan, ok, build] = workflow.steps;
    expect(plan).toMatchObject({
      kind: 'agent',
      line: 4,
      agent: 'codex',
      model: 'gpt-5',
      prompt: 'Plan: $ARGUMENTS\nNote: a colon line after the fields is prompt text.',
    });
    expect(ok).toMatchObject({ kind: 'gate', needs: ['plan'], approvers: 'members', timeoutMs: 7_200_000 });
    expect(build).toMatchObject({ command: 'implement', onFailure: { kind: 'retry', times: 3 } });
    expect(runOrder(workflow).map((l) => l.map((s) => s.name))).toEqual([['plan'], ['ok'], ['build']]);
  });

  it('names the line of each problem', () => {
    expect(
      reasons(
        [
          '## a', // 1
          'needs: b', // 2
          'A', // 3
          '## b', // 4
          'needs: a', // 5
          'B', // 6
          '## c', // 7
          'need: a', // 8: a typo of a field
          'C uses $STEP_d', // 9
          '## d', // 10
          'approve: ok?', // 11
          'agent: claude', // 12
          '## e', // 13
          'command: x', // 14
          'also a prompt', // 15
          '## f', // 16
          'on-failure: retry 99', // 17
          'F', // 18
          '## Bad Name', // 19
          'x', // 20
          '## g', // 21
        ].join('\n'),
      ),
    ).toEqual([
      '1: the steps depend on each other in a cycle: a → b → a',
      "8: unknown field 'need' (known: needs, agent, model, command, arguments, approve, approvers, timeout, on-failure)",
      "12: step 'd': a gate (approve:) has no 'agent'",
      "14: step 'e': has both a command file and prompt text: choose one",
      "17: step 'f': on-failure must be 'stop', 'continue' or 'retry N' (N from 1 to 10), not 'retry 99'",
      "19: step name 'Bad Name' is not allowed (a-z0-9, - and _; 32 at most)",
      "21: step 'g': has no prompt text, command: or approve:",
    ]);
  });

  it('refuses unknown and own dependencies, twice-defined steps, and $STEP_ of a step not needed', () => {
    expect(reasons('## a\nneeds: a, zz\nA $STEP_b\n## b\nB\n## b\nB again')).toEqual([
      "1: step 'a' needs itself",
      "1: step 'a' needs 'zz', which is no step of this file",
      "1: step 'a' uses $STEP_b, which is not a step it needs (directly or through others)",
      "6: step 'b' is defined twice",
    ]);
    expect(reasons('just text')).toEqual(['0: has no steps (## <name> headings)']);
  });

  it('puts steps that need nothing between them in one level', () => {
    const { workflow } = parseWorkflow('f', '## l\nL\n## r\nR\n## j\nneeds: l, r\nJ');
    expect(runOrder(workflow).map((l) => l.map((s) => s.name))).toEqual([['l', 'r'], ['j']]);
  });
});
