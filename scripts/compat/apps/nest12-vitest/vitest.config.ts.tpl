import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.spec.ts', 'test/**/*.e2e-spec.ts'],
    setupFiles: ['test/e2e.env.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
