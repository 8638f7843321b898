/**
 * The app module a CronJob pod of the chaos suite boots with the package's CLI
 * (`nestjs-distributed-cron run <job> --slot <ISO> --module <build>/bench/chaos/pod.module.js`):
 * the CLI jobs, defined and handled as the fleet's (app.parts.ts), and its own Redis and Prisma
 * clients, closed with the app as a user's providers close theirs. The handlers write to
 * <logDir>/<instanceId>.jsonl as the fleet's do, so the verdict reads pods and instances alike.
 *
 * Configured by CHAOS_POD (JSON, PodAppConfig).
 */
import 'reflect-metadata';
import { Injectable, type OnApplicationShutdown, type Type } from '@nestjs/common';
import { instanceModule } from '../../test/support/app-module.js';
import { chaosClients, chaosProviders, handlerLog } from './app.parts.js';
import { chaosJobs } from './jobs.js';

export interface PodAppConfig {
  /** The pod's name, its instance ID in the rows and the logs. */
  instanceId: string;
  seed: number;
  jobCount: number;
  /** The jobs the pods run (of the fleet's `jobCount`): a pod's app mounts only these. */
  jobs: string[];
  redis: { host: string; port: number };
  databaseUrl: string;
  logDir: string;
  epochMs: number;
}

const config = JSON.parse(process.env.CHAOS_POD ?? '{}') as PodAppConfig;
const log = handlerLog(config.logDir, config.instanceId);
const { redis, pool, prisma } = chaosClients({ kind: 'direct', ...config.redis }, config.databaseUrl, 2);

/** The app owns its clients and closes them when the app closes. */
@Injectable()
class Clients implements OnApplicationShutdown {
  async onApplicationShutdown(): Promise<void> {
    redis.disconnect();
    await prisma.$disconnect().catch(() => undefined);
    await pool.end().catch(() => undefined);
  }
}

const providers: Type[] = chaosProviders(
  chaosJobs(config.jobCount).filter((job) => config.jobs.includes(job.name)),
  { seed: config.seed, instanceId: config.instanceId, epochMs: () => config.epochMs, append: log.append },
  { disabled: false },
);

export const AppModule = instanceModule(
  { redis, prisma, instanceId: config.instanceId, auditPlainSchedules: false, shutdownTimeout: '2s' },
  [Clients, ...providers],
);
