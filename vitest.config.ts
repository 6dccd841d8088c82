import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';

/**
 * Test files run at once: GATED_TEST_WORKERS, else twice the cores (at least 2, at most 8: 4 on a 2-core
 * machine; vitest's own default, one less than the cores, ran one file after the other there). Most of the
 * suite's time is spent waiting on real servers (dockerd, Chromium, the atproto network, agents' turns), not
 * on the CPU. Files share nothing: every port is one the kernel picked, every folder a fresh one, every
 * dockerd has its own socket, data root and exec root, and the run has its own temp folder
 * (test/global-setup.ts). A new file gets the same. Measured numbers: docs/TESTING.md.
 */
const workers =
  Number(process.env.GATED_TEST_WORKERS) || Math.min(8, Math.max(2, 2 * availableParallelism()));

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: workers,
    // dist/ brought up to date for the tests that start the CLI, and the run's own temp folder.
    globalSetup: ['test/global-setup.ts'],
    // Generous: on a loaded machine a test on real servers takes many times its idle duration.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Real servers (dockerd, a local Bot API, an atproto network) are started by the suites that need
    // them; the suite fails, never skips, when one cannot start.
    passWithNoTests: false,
    // The longest files first (measured durations: test/durations.json), so the run ends on short ones.
    sequence: { sequencer: LongestFirst },
    reporters: ['default'],
  },
});
