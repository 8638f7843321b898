/**
 * The per-file set-up of an integration test: one Prisma client for the test's own queries, the
 * apps the tests start, and optionally a Redis client on the shared Redis and a fake Slack
 * webhook, all closed by vitest hooks.
 *
 *   const { prisma, apps, closeApps } = integrationSetup();
 *   apps.push(...(await startFleet(3, name, '* * * * * *', { name }, handler)));
 */
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { closeAll, type RunningApp } from './app.js';
import { createMigratedDatabase, type ScratchDatabase } from './scratch-database.js';
import { createPrisma, redisUrl } from './services.js';
import { startFakeSlack, type FakeSlack } from './slack.js';

export interface IntegrationSetupOptions {
  /** When the apps still open are closed: after each test, or once after the file. @default 'each' */
  closeApps?: 'each' | 'all';
  /** Start a fake Slack webhook before the file's tests (see `slack`). @default false */
  slack?: boolean;
  /**
   * Run the file's apps and queries on a database of its own (migrated, dropped after the file)
   * instead of the shared one. For files whose apps run on clocks far from the real one: their
   * sweeps would close the waiting rows of other files' jobs as orphans ("not scheduled here for
   * 10 minutes"), and other files' sweeps would close theirs. @default false
   */
  ownDatabase?: boolean;
  /**
   * A Redis client on the shared Redis for the test's own commands (see `redis`), made at once with
   * these options (`true`: ioredis' defaults) and disconnected after the file. @default false
   */
  redis?: boolean | RedisOptions;
}

export interface IntegrationSetup {
  readonly prisma: ReturnType<typeof createPrisma>;
  /** The apps the tests started; push onto it. The hooks close them and empty it. */
  readonly apps: RunningApp[];
  /** Closes the apps started so far and empties `apps` (for a test that checks the rows after shutdown). */
  closeApps: () => Promise<void>;
  /** The fake Slack webhook; usable from `beforeAll` on (only with `slack: true`). */
  readonly slack: FakeSlack;
  /** The file's Redis client on the shared Redis (only with `redis`). */
  readonly redis: Redis;
  /** Runs `stop` after the file's tests, after the apps are closed and before Prisma disconnects. */
  atEnd: (stop: () => unknown) => void;
}

export function integrationSetup({
  closeApps: when = 'each',
  slack: withSlack = false,
  ownDatabase = false,
  redis: redisOptions = false,
}: IntegrationSetupOptions = {}): IntegrationSetup {
  const redisClient =
    redisOptions === false ? undefined : redisOptions === true ? new Redis(redisUrl()) : new Redis(redisUrl(), redisOptions);
  // The client itself (apps take it as their own, and ioredis checks what it is given), or a handle that says what is missing.
  const redis =
    redisClient ??
    new Proxy({} as Redis, {
      get() {
        throw new Error('integrationSetup: no Redis client in this file (pass the redis option)');
      },
    });
  let client = ownDatabase ? undefined : createPrisma();
  // With its own database, the client exists from beforeAll on; a handle taken at import time forwards to it.
  const prisma = new Proxy({} as ReturnType<typeof createPrisma>, {
    get(_, key) {
      if (client === undefined) throw new Error('integrationSetup: the database of this file is ready from beforeAll on');
      const value: unknown = Reflect.get(client, key);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(client) : value;
    },
  });
  let scratch: ScratchDatabase | undefined;
  const sharedUrl = process.env.DATABASE_URL;
  if (ownDatabase) {
    beforeAll(async () => {
      scratch = await createMigratedDatabase('dcron_file');
      // startApp() and the file's own clients connect to databaseUrl(), read from here.
      process.env.DATABASE_URL = scratch.url;
      client = createPrisma(scratch.url);
    });
  }
  const apps: RunningApp[] = [];
  const stops: Array<() => unknown> = [];
  let fakeSlack: FakeSlack | undefined;

  const closeApps = async (): Promise<void> => {
    await closeAll(apps.splice(0));
  };
  // A handle that can be taken at import time and forwards to the webhook started in beforeAll.
  const slack = new Proxy({} as FakeSlack, {
    get(_, key) {
      if (fakeSlack === undefined) throw new Error('integrationSetup: the fake Slack is not started (slack: true, used from beforeAll on)');
      const value: unknown = Reflect.get(fakeSlack, key);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(fakeSlack) : value;
    },
  });

  if (withSlack) {
    beforeAll(async () => {
      fakeSlack = await startFakeSlack();
    });
  }
  if (when === 'each') afterEach(closeApps);
  afterAll(async () => {
    await closeApps();
    for (const stop of stops) await stop();
    await fakeSlack?.close();
    redisClient?.disconnect();
    await client?.$disconnect();
    if (scratch) {
      if (sharedUrl === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = sharedUrl;
      await scratch.drop();
    }
  });

  return { prisma, apps, closeApps, slack, redis, atEnd: (stop) => void stops.push(stop) };
}
