import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { expect } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import { runtimeConformance } from './runtime-conformance.js';

const agent = packageFile('test', 'queue', 'agents', 'conformance-agent.mjs');

/** Pids of live processes whose command line mentions the conformance agent (or a child it spawned). */
function agentProcesses(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.includes(agent) || cmd.includes('setInterval(() => {}, 1 << 30)')) pids.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return pids;
}

// Both ways of starting an agent: through the spawner (the default), and from gated itself (the way
// without a spawner).
for (const spawner of [true, false]) {
  runtimeConformance(spawner ? 'process' : 'process, spawned by gated itself', () => ({
    // Not `exec`: sh stays the parent, so killing the process group must reach node and its child too.
    runtime: () => createProcessRuntime({ cmd: `node "${agent}"`, spawner }),
    workdirSeenByAgent: (groupDir) => realpathSync(groupDir),
    hostPids: true,
    assertNothingLeft: async () => expect(agentProcesses()).toEqual([]),
  }));
}
