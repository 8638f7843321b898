/** Bootstrap refusals and the action rate limit, without services. */
import { describe, expect, it } from 'vitest';
import { DistributedCronDashboardModule, type DistributedCronDashboardOptions } from '../../src/dashboard/index.js';
import { ActionRateLimit } from '../../src/dashboard/dashboard.security.js';

const forRoot = (options: unknown) => () => DistributedCronDashboardModule.forRoot(options as DistributedCronDashboardOptions);

describe('DistributedCronDashboardModule.forRoot', () => {
  it('refuses to start without an explicit access decision, naming the option', () => {
    expect(forRoot({})).toThrow(/option `guard`: missing: .*`guard: AdminGuard`.*`canActivate: \(request\) => boolean`.*`public: true`/);
    expect(forRoot(undefined)).toThrow(/option `guard`: missing/);
    expect(forRoot({ readOnly: true })).toThrow(/option `guard`: missing/);
    expect(forRoot({ public: false })).toThrow(/option `public`: must be `true`/);
    expect(forRoot({ public: 'yes' })).toThrow(/option `public`: must be `true`/);
  });

  it('names the wrong option', () => {
    expect(forRoot({ public: true, canActivate: () => true })).toThrow(/option `public`: give only one of/);
    expect(forRoot({ guard: class NotAGuard {} })).toThrow(/option `guard`: must be a Nest guard class/);
    expect(forRoot({ public: true, path: 'cron' })).toThrow(/option `path`: must look like '\/cron'/);
    expect(forRoot({ public: true, refreshEvery: '1 minute' })).toThrow(/option `refreshEvery`:/);
    expect(forRoot({ public: true, actionsPerMinute: 0 })).toThrow(/option `actionsPerMinute`: must be a positive integer/);
    expect(forRoot({ public: true, pubic: true })).toThrow(/option `pubic`: is not an option/);
  });

  it('accepts a guard class, a function or public: true', () => {
    class AdminGuard {
      canActivate(): boolean {
        return true;
      }
    }
    expect(forRoot({ guard: AdminGuard })().controllers).toHaveLength(1);
    expect(forRoot({ canActivate: () => false })().controllers).toHaveLength(1);
    expect(forRoot({ public: true, path: '/admin/cron' })().controllers).toHaveLength(1);
  });
});

describe('the action rate limit', () => {
  it('lets each client take at most N actions per sliding minute', () => {
    let now = 0;
    const limit = new ActionRateLimit(2, () => now);
    limit.take('a');
    limit.take('a');
    expect(() => limit.take('a')).toThrow(/at most 2 a minute/);
    limit.take('b');
    now = 60_001;
    limit.take('a');
  });
});
