/**
 * The Claude agent's steering and approvals in its container on the docker runtime (the process runtime's
 * suites: claude-turn-end.test.ts, claude-steering.test.ts): in steer mode a follow-up sent while a Bash
 * command runs and one sent while the command's approval waits, each answered once within seconds with the
 * run ending by its idle timeout, and `/interrupt` cutting a streamed turn. The offline image carries this
 * machine's bash, sh and the few programs the commands run (claude-docker-support.ts), and allows shell
 * commands in the container as the production image does.
 */
import { test } from 'vitest';
import { useClaudeDocker } from './claude-docker-support.js';
import {
  interruptScenario,
  RUN_TIMEOUT_MS,
  steerWhileApprovalScenario,
  steerWhileBashScenario,
} from './claude-steer-support.js';

const suite = useClaudeDocker('claude-steer-test');
const env = { GATED_RUN_TIMEOUT_MS: RUN_TIMEOUT_MS };

test(
  'docker: steer mode, a follow-up while a Bash command runs is answered once, within seconds',
  { timeout: 120_000 },
  async () => {
    await steerWhileBashScenario(await suite.start({ env }), suite.api);
  },
);

test(
  'docker: steer mode, a follow-up while a Bash command waits for approval is answered once',
  { timeout: 120_000 },
  async () => {
    await steerWhileApprovalScenario(await suite.start({ env }), suite.api);
  },
);

test(
  'docker: /interrupt mid-stream cuts the turn, marks it, and the new message is answered',
  { timeout: 120_000 },
  async () => {
    await interruptScenario(await suite.start(), suite.api);
  },
);
