import { defineConfig } from 'vitest/config';

// Unit tests: pure state logic, no browser, no server.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    environment: 'node',
  },
});
