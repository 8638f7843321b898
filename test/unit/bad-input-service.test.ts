/**
 * DistributedCronService checks every argument: the error names the method, the job (when known)
 * and the parameter. Methods that return a Promise reject (they never throw synchronously); the
 * stores are not called with bad input.
 */
import 'reflect-metadata';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { parseCronSchedule } from '../../src/scheduling/cron.schedule.js';
import type { JobRegistry } from '../../src/nest/job.registry.js';
import { DistributedCronSchedules } from '../../src/schedules/schedules.api.js';
import { DistributedCronService } from '../../src/nest/distributed-cron.service.js';

const JOB = 'daily-report';

function fakeRuntime() {
  const schedule = parseCronSchedule('0 8 * * *', 'Asia/Shanghai');
  const executor = {
    job: { name: JOB, expression: '0 8 * * *', timeZone: 'Asia/Shanghai', overlap: 'skip', leaseMs: 30_000, renewMs: 10_000, schedule },
    stats: {},
    fire: vi.fn(async () => 'ran'),
    retry: vi.fn(async () => 'ran'),
  };
  return {
    instanceId: 'test',
    clock: () => Date.parse('2026-08-14T12:00:00Z'),
    jobs: new Map([[JOB, { executor, timer: { active: true } }]]),
    history: { list: vi.fn(async () => []), get: vi.fn(async () => undefined) },
    flags: { setPaused: vi.fn(async () => undefined), isPaused: vi.fn(async () => false) },
    executor,
  };
}

let runtime: ReturnType<typeof fakeRuntime>;
let cron: DistributedCronService;
beforeEach(() => {
  runtime = fakeRuntime();
  const never = (): never => {
    throw new Error('not called by these tests');
  };
  cron = new DistributedCronService(
    runtime.jobs as unknown as JobRegistry,
    { ...runtime.history, lastSuccess: never },
    { existing: never, running: never },
    { owner: never },
    runtime.flags,
    { elector: undefined },
    runtime.clock,
    runtime.instanceId,
    new DistributedCronSchedules({ store: null, handlers: () => [], module: {}, clock: runtime.clock }),
  );
});

/** The call returns a Promise that rejects with this message; it does not throw synchronously. */
async function rejects(call: () => Promise<unknown>, message: string | RegExp): Promise<void> {
  let promise: Promise<unknown> | undefined;
  expect(() => {
    promise = call();
  }).not.toThrow();
  expect(promise).toBeInstanceOf(Promise);
  const error = await promise!.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(TypeError);
  if (typeof message === 'string') expect((error as Error).message).toBe(message);
  else expect((error as Error).message).toMatch(message);
}

/** The call throws synchronously a TypeError with exactly this message. */
function throws(call: () => unknown, message: string): void {
  let error: unknown;
  try {
    call();
  } catch (thrown) {
    error = thrown;
  }
  expect(error).toBeInstanceOf(TypeError);
  expect((error as Error).message).toBe(message);
}

describe('trigger()', () => {
  it('rejects an Invalid Date, naming the method, the job and the parameter', async () => {
    await rejects(() => cron.trigger(JOB, new Date('x')), "trigger('daily-report'): `scheduledAt` must be a valid Date, got Invalid Date");
    expect(runtime.executor.fire).not.toHaveBeenCalled();
  });

  it('rejects a scheduledAt that is not a Date', async () => {
    await rejects(
      () => cron.trigger(JOB, '2026-08-14' as never),
      `trigger('daily-report'): \`scheduledAt\` must be a valid Date, got "2026-08-14"`,
    );
    await rejects(() => cron.trigger(JOB, 1_786_000_000_000 as never), /`scheduledAt` must be a valid Date, got 1786000000000$/);
    await rejects(() => cron.trigger(JOB, null as never), /`scheduledAt` must be a valid Date, got null$/);
  });

  it('rejects a job name that is not a non-empty string, or names no job', async () => {
    await rejects(() => cron.trigger(42 as never), 'trigger(): `jobName` must be a non-empty string, got 42');
    await rejects(() => cron.trigger(''), 'trigger(): `jobName` must be a non-empty string, got ""');
    await rejects(
      () => cron.trigger('nightly'),
      /^trigger\('nightly'\): `jobName` must name a job of this app: no @DistributedCron job named 'nightly' \(known: daily-report\)$/,
    );
    expect(runtime.executor.fire).not.toHaveBeenCalled();
  });

  it('still triggers with a valid Date or none', async () => {
    expect(await cron.trigger(JOB, new Date('2026-08-14T00:00:00Z'))).toBe('ran');
    expect(await cron.trigger(JOB)).toBe('ran');
    expect(runtime.executor.fire).toHaveBeenCalledTimes(2);
  });
});

describe('pause(), resume(), isPaused()', () => {
  it.each(['pause', 'resume', 'isPaused'] as const)('%s() rejects a bad or unknown job name without touching Redis', async (method) => {
    await rejects(() => cron[method](undefined as never), `${method}(): \`jobName\` must be a non-empty string, got undefined`);
    await rejects(() => cron[method]({ name: JOB } as never), `${method}(): \`jobName\` must be a non-empty string, got an object`);
    await rejects(() => cron[method]('nightly'), new RegExp(`^${method}\\('nightly'\\): \`jobName\` must name a job of this app`));
    expect(runtime.flags.setPaused).not.toHaveBeenCalled();
    expect(runtime.flags.isPaused).not.toHaveBeenCalled();
  });
});

describe('history()', () => {
  it.each([
    [
      'a filter that is not an object',
      'daily-report',
      'history(): `filter` must be an object like { jobName, scheduleId, status, since, until, limit }, got "daily-report"',
    ],
    ['null', null, 'history(): `filter` must be an object like { jobName, scheduleId, status, since, until, limit }, got null'],
    [
      'an unknown key (a typo would list every job)',
      { name: JOB },
      'history(): `filter.name` is not a filter; known: jobName, scheduleId, status, since, until, limit',
    ],
    ['a job name that is not a string', { jobName: 7 }, 'history(): `filter.jobName` must be a non-empty string, got 7'],
    ['an empty schedule id', { scheduleId: '' }, 'history(): `filter.scheduleId` must be a non-empty string, got ""'],
    ['a schedule id that is not a string', { scheduleId: 42 }, 'history(): `filter.scheduleId` must be a non-empty string, got 42'],
    [
      'an unknown status',
      { jobName: JOB, status: 'complete' },
      /^history\('daily-report'\): `filter\.status` must be a status or a list of them \('queued', 'running', 'completed'.*\), got "complete"$/,
    ],
    [
      'an unknown status in a list',
      { status: ['failed', 'deadd'] },
      /^history\(\): `filter\.status` must be a status or a list of them .*, got "deadd"$/,
    ],
    ['an empty status list', { status: [] }, 'history(): `filter.status` must not be an empty list; leave it out to list every status'],
    [
      'an Invalid Date since',
      { jobName: JOB, since: new Date('yesterday') },
      "history('daily-report'): `filter.since` must be a valid Date, got Invalid Date",
    ],
    ['a since that is a string', { since: '2026-01-01' }, 'history(): `filter.since` must be a valid Date, got "2026-01-01"'],
    ['an Invalid Date until', { until: new Date(Number.NaN) }, 'history(): `filter.until` must be a valid Date, got Invalid Date'],
    [
      'since after until',
      { since: new Date('2026-02-01T00:00:00Z'), until: new Date('2026-01-01T00:00:00Z') },
      'history(): `filter.since` (2026-02-01T00:00:00.000Z) must not be after `filter.until` (2026-01-01T00:00:00.000Z)',
    ],
    ['a zero limit', { limit: 0 }, 'history(): `filter.limit` must be a positive integer, got 0'],
    ['a fractional limit', { limit: 2.5 }, 'history(): `filter.limit` must be a positive integer, got 2.5'],
    ['a limit given as a string', { limit: '10' }, 'history(): `filter.limit` must be a positive integer, got "10"'],
    ['an infinite limit', { limit: Number.POSITIVE_INFINITY }, 'history(): `filter.limit` must be a positive integer, got Infinity'],
  ] as Array<[string, unknown, string | RegExp]>)('rejects %s', async (_what, filter, message) => {
    await rejects(() => cron.history(filter as never), message);
    expect(runtime.history.list).not.toHaveBeenCalled();
  });

  it('passes a valid filter through', async () => {
    const filter = { jobName: JOB, status: ['failed', 'dead'] as const, since: new Date(0), until: new Date(), limit: 20 };
    await cron.history({ ...filter, status: [...filter.status] });
    await cron.history();
    expect(runtime.history.list).toHaveBeenCalledTimes(2);
  });
});

describe('execution() and replay()', () => {
  it.each(['execution', 'replay'] as const)('%s() rejects an execution ID that is not a non-empty string', async (method) => {
    await rejects(() => cron[method](''), `${method}(): \`executionId\` must be a non-empty string, got ""`);
    await rejects(() => cron[method](undefined as never), `${method}(): \`executionId\` must be a non-empty string, got undefined`);
    await rejects(() => cron[method](123 as never), `${method}(): \`executionId\` must be a non-empty string, got 123`);
    expect(runtime.history.get).not.toHaveBeenCalled();
  });
});

describe('replay() of a row whose job this app does not schedule', () => {
  it('rejects naming the execution and the job', async () => {
    runtime.history.get.mockResolvedValueOnce({ jobName: 'billing', executionId: 'billing:2026-08-14', status: 'dead' } as never);
    await rejects(
      () => cron.replay('billing:2026-08-14'),
      `replay('billing'): \`executionId\` "billing:2026-08-14" belongs to a job this app does not schedule; replay it from an app that has the job (known here: daily-report)`,
    );
    expect(runtime.executor.retry).not.toHaveBeenCalled();
  });
});

describe('nextRuns()', () => {
  it.each([
    [0, '0'],
    [-1, '-1'],
    [2.5, '2.5'],
    [Number.NaN, 'NaN'],
    [1_001, '1001'],
    [1e9, '1000000000'],
    ['3', '"3"'],
    [null, 'null'],
  ] as Array<[unknown, string]>)('throws for count %s, which is not an integer from 1 to 1000', (count, shown) => {
    throws(() => cron.nextRuns(JOB, count as never), `nextRuns('daily-report'): \`count\` must be an integer from 1 to 1000, got ${shown}`);
  });

  it('throws for a from that is not a valid Date', () => {
    throws(() => cron.nextRuns(JOB, 3, new Date('x')), "nextRuns('daily-report'): `from` must be a valid Date, got Invalid Date");
    throws(() => cron.nextRuns(JOB, 3, '2026-08-14' as never), 'nextRuns(\'daily-report\'): `from` must be a valid Date, got "2026-08-14"');
  });

  it('throws for a bad job name', () => {
    throws(() => cron.nextRuns(5 as never), 'nextRuns(): `jobName` must be a non-empty string, got 5');
  });

  it('still lists up to 1000 runs, 5 by default', () => {
    expect(cron.nextRuns(JOB)).toHaveLength(5);
    expect(cron.nextRuns(JOB, 1_000, new Date('2026-08-14T12:00:00Z'))).toHaveLength(1_000);
  });
});
