import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { DistributedCronModule } from 'nestjs-distributed-cron';
import { InfraModule } from './infra/infra.module.js';
import { PrismaService } from './infra/prisma.service.js';
import { RedisService } from './infra/redis.service.js';
import { ReportsModule } from './reports/reports.module.js';

@Module({
  imports: [
    ScheduleModule.forRoot(),
    DistributedCronModule.forRootAsync({
      imports: [InfraModule],
      inject: [PrismaService, RedisService],
      useFactory: (prisma: PrismaService, redis: RedisService) => ({ prisma, redis, timeZone: 'UTC' }),
    }),
    ReportsModule,
  ],
})
export class AppModule {}
