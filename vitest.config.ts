import { defineConfig } from 'vitest/config';

/**
 * Files that start many processes at once (a browser and three apps, a queue fleet of six, CLI
 * pods): they run after the rest, so that the fault tests, whose assertions depend on timing
 * (a lease expiring, a paused process waking), never share the two cores with them.
 */
const PROCESS_HEAVY = [
  'test/dashboard/**/*.test.ts',
  'test/integration/queue-*.test.ts',
  'test/integration/roles.test.ts',
  'test/integration/cli.test.ts',
  'test/integration/observability-*.test.ts',
  'test/integration/pools.test.ts',
  'test/integration/leader-mode.test.ts',
];

const SCALE = ['test/integration/scale-*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration files start several Nest apps and child processes each, but mostly wait on
    // real schedules, leases and sweeps: on a 2-core machine the suite's files run four at a
    // time (each file takes as long as when two run at a time, so timing-sensitive assertions
    // stay honest); the process-heavy ones, whose child processes boot Nest apps, two at a time
    // (three made a CLI pod's boot slow enough to flake); the scale project two.
    maxWorkers: 2,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts', 'bench/**/*.test.ts'],
          exclude: [...PROCESS_HEAVY, ...SCALE],
          maxWorkers: 4,
          sequence: { groupOrder: 0 },
        },
      },
      { extends: true, test: { name: 'processes', include: PROCESS_HEAVY, maxWorkers: 2, sequence: { groupOrder: 1 } } },
      // `npm run test:scale`: five processes with 2,000 jobs each, alone (not part of `npm test`).
      ...(process.env.DISTRIBUTED_CRON_SCALE ? [{ extends: true as const, test: { name: 'scale', include: SCALE } }] : []),
    ],
  },
});
