import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '../generated/prisma/client.js';

@Injectable()
export class PrismaService extends PrismaClient implements OnModuleInit, OnApplicationShutdown {
  constructor() {
    // Prisma 7: a driver adapter is how the client reaches PostgreSQL.
    super({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });
  }

  async onModuleInit() {
    await this.$connect();
  }

  // Closed after the scheduled jobs have stopped and recorded their last runs (Nest calls
  // onModuleDestroy before that, onApplicationShutdown after).
  async onApplicationShutdown() {
    await this.$disconnect();
  }
}
