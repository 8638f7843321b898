import { Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '@prisma/client';

@Injectable()
export class PrismaService extends PrismaClient implements OnModuleInit, OnApplicationShutdown {
  constructor() {
    // The driver adapter is here only because Prisma's native query engine cannot be downloaded
    // where this example's CI runs (see prisma/schema.prisma). On the default engine this is
    // `super()` and the library works the same.
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
