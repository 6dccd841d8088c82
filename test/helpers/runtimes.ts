/**
 * One suite over the runtimes an untrusted agent may run on (docs/SECURITY.md): a test written once under
 * `describe.each(AGENT_RUNTIMES)` gets the settings of its runtime from `useAgentRuntime`. On `process` the
 * agent is a command of this checkout; on `docker` it is the same file built into an image on a private
 * dockerd (test/infra/dockerd.ts), started once for the suite and stopped after it, so the agent then acts
 * from inside a container on the group's folder mounted at /workspace.
 */
import { afterAll, beforeAll } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';

/** The runtimes an agent's suite runs on. */
export const AGENT_RUNTIMES = ['process', 'docker'] as const;
export type AgentRuntime = (typeof AGENT_RUNTIMES)[number];

/** How long starting a test engine and building an agent image may take (a loaded machine included). */
export const ENGINE_START_MS = 240_000;

/** The settings of one runtime for a suite; `env()` is valid once the suite's beforeAll has run. */
export interface RuntimeUnderTest {
  readonly kind: AgentRuntime;
  /** GATED_RUNTIME and what it needs (the command, or the engine and the image). */
  env(): Record<string, string>;
  /** A wait scaled to the runtime: a container's start costs more than a process's. */
  ms(processMs: number): number;
}

/**
 * Registers, in the calling describe block, what `kind` needs to run the agent `agentFile` of test/agents/
 * (with the programs of this machine it runs, copied into its image on docker), and returns its settings.
 */
export function useAgentRuntime(
  kind: AgentRuntime,
  agentFile: string,
  programs: string[] = [],
): RuntimeUnderTest {
  if (kind === 'process') {
    return {
      kind,
      env: () => ({
        GATED_RUNTIME: 'process',
        GATED_AGENT_CMD: `node "$GATED_HOME/test/agents/${agentFile}"`,
      }),
      ms: (n) => n,
    };
  }
  let engine: TestDockerd | undefined;
  const image = `gated-${agentFile.replace(/\.mjs$/, '')}:test`;
  beforeAll(async () => {
    engine = await startDockerd();
    await engine.buildAgentImage(image, packageFile('test', 'agents'), agentFile, programs);
  }, ENGINE_START_MS);
  afterAll(async () => {
    await engine?.stop();
  }, 60_000);
  return {
    kind,
    env: () => {
      if (!engine)
        throw new Error('the test engine is not running: useAgentRuntime must be called in a describe');
      return { GATED_RUNTIME: 'docker', DOCKER_HOST: engine.host, GATED_AGENT_IMAGE: image };
    },
    ms: (n) => n * 2,
  };
}
