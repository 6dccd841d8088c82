import { describe, expect, it } from 'vitest';
import { parseWorkflow } from '../../core/workflow-file.js';
import { stepPrompt, stepStates, type StoredAgentStep } from '../../gateway/workflow-state.js';
import type { WorkflowEvent } from '../../store/workflows.js';

const ev = (step: string, kind: WorkflowEvent['kind'], output: string | null = null): WorkflowEvent => ({
  id: 0,
  run_id: 1,
  step,
  kind,
  attempt: 1,
  message_id: null,
  approval_id: null,
  output,
  note: null,
  at: 0,
});

describe('a step prompt (docs/WORKFLOWS.md)', () => {
  const { workflow } = parseWorkflow('w', '## a\nA\n## b\nneeds: a\nB $ARGUMENTS then $STEP_a\n');
  const b = workflow.steps[1] as StoredAgentStep;

  it('puts in the arguments and outputs once: neither is read again for $ARGUMENTS or $STEP_', () => {
    const states = stepStates(workflow, [ev('a', 'started'), ev('a', 'done', 'out says $ARGUMENTS')]);
    // A user's arguments naming a step's output, an agent's output naming the arguments: both stay as written.
    expect(stepPrompt(b, '$STEP_a please', states)).toBe('B $STEP_a please then out says $ARGUMENTS');
  });

  it('a command step takes the run arguments as written, and its arguments: field filled', () => {
    const states = stepStates(workflow, [ev('a', 'started'), ev('a', 'done', 'OUT')]);
    const cmd = { ...b, prompt: null, command: 'x', commandText: 'Do: $ARGUMENTS' } as StoredAgentStep;
    expect(stepPrompt({ ...cmd, arguments: null }, 'see $STEP_a', states)).toBe(
      'Do: see $STEP_a\n\nOutput of step a:\nOUT',
    );
    expect(stepPrompt({ ...cmd, arguments: '$ARGUMENTS: $STEP_a' }, 'go', states)).toBe('Do: go: OUT');
  });
});
