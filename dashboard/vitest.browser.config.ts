import { defineConfig } from 'vitest/config';

// Browser tests: a real `tarsy serve` and Debian's chromium driven by
// playwright-core. One file at a time: each starts its own server and
// browser, and the machine has two cores.
export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    environment: 'node',
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
