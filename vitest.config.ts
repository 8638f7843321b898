import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration files start several Nest apps and child processes each; on a 2-core
    // machine running them two at a time keeps timing-sensitive assertions honest.
    maxWorkers: 2,
    pool: 'forks',
  },
});
