import { defineConfig } from 'vitest/config';

/**
 * Test files run at once: GATED_TEST_WORKERS, else vitest's default for a run, one less than the cores (one
 * on a 2-core machine: file after file, while most of the suite's time is spent waiting on real servers
 * rather than on the CPU). Two on two cores is not the default yet: the whole suite has not been run that
 * way (docs/TESTING.md).
 */
const workers = Number(process.env.GATED_TEST_WORKERS) || undefined;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    ...(workers ? { maxWorkers: workers } : {}),
    // dist/ brought up to date for the tests that start the CLI, and the run's own temp folder.
    globalSetup: ['test/global-setup.ts'],
    // Generous: on a loaded machine a test on real servers takes many times its idle duration.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Real servers (dockerd, a local Bot API, an atproto network) are started by the suites that need
    // them; the suite fails, never skips, when one cannot start.
    passWithNoTests: false,
    reporters: ['default'],
  },
});
