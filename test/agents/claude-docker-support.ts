/**
 * The Claude agent in its container under the docker runtime, for the suites that run it there: a private
 * dockerd (test/infra/dockerd.ts) started for the file with the image built offline from agents/claude
 * (docker/build-offline.sh, with a shell as its production image has), a Messages API per test, and after each test the check that no container of
 * the test's gated is left.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { createDockerRuntime, INSTANCE_LABEL } from '../../queue/runtime/docker.js';
import { startDockerd, type TestDockerd } from '../infra/dockerd.js';
import { MessagesApiServer } from '../infra/messages-api.js';
import { startClaudeChat, type ClaudeChat, type ClaudeChatOptions } from './claude-support.js';

const IMAGE = 'gated-claude:test';
/**
 * This machine's programs the agent's shell commands need in the offline image (its production image,
 * node:20-slim, has them), and the setting that image carries: shell commands allowed in the container.
 */
const SHELL_PROGRAMS = ['bash', 'sh', 'sleep', 'touch', 'tee'];
const SHELL_ON = ['GATED_CLAUDE_SHELL=1'];

/** What a docker suite of the Claude agent reaches during a test. */
export interface ClaudeDockerSuite {
  readonly engine: TestDockerd;
  readonly api: MessagesApiServer;
  /** The instance label value of the suite's containers. */
  readonly instance: string;
  /** Gated on the docker runtime (the agent on the host network, to reach the loopback API); closed after. */
  start(more?: ClaudeChatOptions): Promise<ClaudeChat>;
  /** Forget the test's gated (the test closed it itself). */
  forget(): void;
}

/** Registers the hooks of a docker suite of the Claude agent in the calling file or describe block. */
export function useClaudeDocker(name: string): ClaudeDockerSuite {
  const instance = `${name}-${process.pid}`;
  let engine: TestDockerd | undefined;
  let api: MessagesApiServer | undefined;
  let chat: ClaudeChat | undefined;
  beforeAll(async () => {
    engine = await startDockerd();
    await engine.buildAgentImage(IMAGE, packageFile('agents', 'claude'), undefined, SHELL_PROGRAMS, SHELL_ON);
  }, 180_000);
  afterAll(async () => {
    await engine?.stop();
  });
  beforeEach(async () => {
    api = await MessagesApiServer.start();
  });
  afterEach(async () => {
    await chat?.gated.close(5000);
    chat = undefined;
    await api?.close();
    const left = await engine!.docker.listContainers({
      all: true,
      filters: { label: [`${INSTANCE_LABEL}=${instance}`] },
    });
    expect(left).toEqual([]);
  });
  return {
    get engine() {
      if (!engine) throw new Error('the test engine runs only within the suite');
      return engine;
    },
    get api() {
      if (!api) throw new Error('the Messages API runs only during a test');
      return api;
    },
    instance,
    async start(more = {}) {
      const docker = this.engine.docker;
      chat = await startClaudeChat(this.api, {
        ...more,
        network: 'host',
        runtime: (groupsDir) =>
          createDockerRuntime({ docker, image: IMAGE, instanceId: instance, groupsDir }),
      });
      return chat;
    },
    forget() {
      chat = undefined;
    },
  };
}
