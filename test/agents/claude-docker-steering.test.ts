/**
 * The Claude agent's steering and approvals in its container on the docker runtime (the process runtime's
 * suites: claude-turn-end.test.ts, claude-steering.test.ts): a message steered into a turn while a tool
 * call's approval waits, answered once with the run ending by its idle timeout, and `/interrupt` cutting a
 * streamed turn. The offline image has no shell (docker/build-offline.sh copies node and its libraries), so
 * the approval is asked about the file tool; steering while a Bash command runs is tested on the process
 * runtime only.
 */
import { test } from 'vitest';
import { useClaudeDocker } from './claude-docker-support.js';
import { interruptScenario, RUN_TIMEOUT_MS, steerWhileApprovalScenario } from './claude-steer-support.js';

const suite = useClaudeDocker('claude-steer-test');
const env = { GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS };

test(
  'docker: a follow-up steered in while an approval waits is answered once',
  { timeout: 120_000 },
  async () => {
    await steerWhileApprovalScenario(await suite.start({ env }), suite.api, 'Write');
  },
);

test(
  'docker: /interrupt mid-stream cuts the turn, marks it, and the new message is answered',
  { timeout: 120_000 },
  async () => {
    await interruptScenario(await suite.start(), suite.api);
  },
);
