import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';

@Injectable()
export class RedisService extends Redis implements OnApplicationShutdown {
  constructor() {
    super(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  }

  // Closed after the scheduled jobs have released their leases (see PrismaService).
  onApplicationShutdown() {
    this.disconnect();
  }
}
