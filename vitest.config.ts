import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 120_000,
    // Real servers (dockerd, a local Bot API, an atproto network) are started by the suites that need
    // them; the suite fails, never skips, when one cannot start.
    passWithNoTests: false,
    reporters: ['default'],
  },
});
