import { Module, type OnApplicationShutdown } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { PrismaPg } from '@prisma/adapter-pg';
import { Redis } from 'ioredis';
import { writeFileSync } from 'node:fs';
import { register } from 'prom-client';
// In an application: import { DistributedCronModule } from 'nestjs-distributed-cron';
import { DistributedCronModule } from '../../src/index.js';
// The app's PrismaClient, generated from a schema that includes the DistributedCronRun model.
import { PrismaClient } from '../../test/generated/prisma/client.js';
import { ReportService } from './report.service.js';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL || 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron';

const redis = new Redis(REDIS_URL);
const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: DATABASE_URL }) });

@Module({
  imports: [
    ScheduleModule.forRoot(),
    DistributedCronModule.forRootAsync({
      useFactory: () => ({
        redis,
        prisma,
        timeZone: 'Asia/Shanghai',
        // Shown in the run history; defaults to `${hostname}-${pid}-${random}`.
        instanceId: process.env.INSTANCE_ID,
        // The dcron_* metrics in prom-client's default registry (what a /metrics endpoint serves).
        metrics: { prometheus: true },
      }),
    }),
  ],
  providers: [ReportService],
})
export class AppModule implements OnApplicationShutdown {
  // Runs after the library has let running executions finish: the clients are the app's to close.
  async onApplicationShutdown(): Promise<void> {
    // `npm run demo` prints what each instance recorded (scripts/demo.sh sets DEMO_METRICS_DIR).
    const dir = process.env.DEMO_METRICS_DIR;
    if (dir) writeFileSync(`${dir}/${process.env.INSTANCE_ID ?? process.pid}.prom`, await register.metrics());
    redis.disconnect();
    await prisma.$disconnect();
  }
}
