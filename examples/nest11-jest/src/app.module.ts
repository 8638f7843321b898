import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { DistributedCronModule } from 'nestjs-distributed-cron';
import { InfraModule } from './infra/infra.module';
import { PrismaService } from './infra/prisma.service';
import { RedisService } from './infra/redis.service';
import { ReportsModule } from './reports/reports.module';

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
