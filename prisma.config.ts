import { defineConfig } from 'prisma/config';

const DEFAULT_DATABASE_URL = 'postgresql://cron:cron@127.0.0.1:5432/distributed_cron';

export default defineConfig({
  // Folder: every *.prisma file in it is part of the schema (base.prisma + distributed-cron.prisma).
  schema: 'prisma/schema',
  migrations: {
    path: 'prisma/migrations',
  },
  datasource: {
    url: process.env.DATABASE_URL || DEFAULT_DATABASE_URL,
  },
});
