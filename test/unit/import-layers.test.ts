/**
 * The import rule of `npm run lint` (eslint.config.js, drawn in docs/architecture.md "How it is
 * built"), run on imports that cross the layers and on imports that keep to them. The text is
 * linted as if it were the file named (the file's own text is not read).
 */
import { ESLint } from 'eslint';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({ cwd: root });
});

/** The layer-rule messages for `code` linted as the file `file` (relative to src/). */
async function crossings(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${root}src/${file}` });
  return result!.messages.filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports').map((m) => m.message);
}

describe('the one direction of imports', () => {
  it('refuses an import from a tier above', async () => {
    expect(await crossings('config/job.config.ts', "export type { JobExecutor } from '../execution/job.executor.js';\n")).toEqual([
      expect.stringMatching(/config\/ must not import execution\/, which sits above it/),
    ]);
    expect(await crossings('scheduling/cron.schedule.ts', "export type { JobConfig } from '../config/job.config.js';\n")).toHaveLength(1);
    expect(
      await crossings(
        'distributed-cron.interfaces.ts',
        "export type { RunStartEvent } from './observability/observability.interfaces.js';\n",
      ),
    ).toHaveLength(1);
    expect(
      await crossings(
        'observability/heartbeat.pinger.ts',
        "export type { DistributedCronRuntime } from '../nest/distributed-cron.runtime.js';\n",
      ),
    ).toHaveLength(1);
  });

  it('refuses an import from another folder of the same tier', async () => {
    expect(await crossings('topology/bullmq.bridge.ts', "export type { LeaseKeeper } from '../leasing/lease.keeper.js';\n")).toEqual([
      expect.stringMatching(/topology\/ must not import leasing\/, which sits beside it in the same tier/),
    ]);
  });

  it('allows imports from the tiers below, and a subfolder of its own tier to import the shell', async () => {
    const down = [
      "export type { JobConfig } from '../config/job.config.js';",
      "export type { LeaseStore } from '../leasing/lease.store.js';",
      "export { parseCronSchedule } from '../scheduling/cron.schedule.js';",
      "export type { RunRecord } from '../distributed-cron.interfaces.js';",
      "export { describeError } from '../errors/error.redact.js';",
    ].join('\n');
    expect(await crossings('execution/run.sweeper.ts', `${down}\n`)).toEqual([]);
    expect(
      await crossings(
        'observability/terminus/distributed-cron.health.ts',
        "export type { DistributedCronRuntime } from '../../nest/distributed-cron.runtime.js';\n",
      ),
    ).toEqual([]);
  });

  it("allows the module options the ports' types, not their code", async () => {
    expect(await crossings('distributed-cron.module-options.ts', "export type { LeaseStore } from './leasing/lease.store.js';\n")).toEqual(
      [],
    );
    expect(
      await crossings('distributed-cron.module-options.ts', "export { RedisLeaseStore } from './leasing/redis-lease.store.js';\n"),
    ).toHaveLength(1);
  });

  // Goes with the two exceptions in eslint.config.js: each takes its port from leasing/lease.store.ts.
  it('allows the alert dispatcher and the retention runner their ports from leasing/lease.store.ts, nothing else of leasing/', async () => {
    const leaseStore = "export type { FailureStreaks, JobFlags } from '../leasing/lease.store.js';\n";
    expect(await crossings('alerting/alert.dispatcher.ts', leaseStore)).toEqual([]);
    expect(await crossings('history/retention.runner.ts', leaseStore)).toEqual([]);
    expect(await crossings('alerting/slack.alerter.ts', leaseStore)).toHaveLength(1);
    expect(
      await crossings('alerting/alert.dispatcher.ts', "export type { LeaseKeeper } from '../leasing/lease.keeper.js';\n"),
    ).toHaveLength(1);
  });
});
