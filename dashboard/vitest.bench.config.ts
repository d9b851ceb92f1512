import { defineConfig } from 'vitest/config';

// The benchmark prints figures; it asserts none of them.
export default defineConfig({
  test: {
    include: ['bench/**/*.bench.ts'],
    environment: 'node',
    testTimeout: 900_000,
    hookTimeout: 60_000,
  },
});
