// Prisma 6.19 variant of prisma.config.ts for the compatibility matrix (s-prisma6, s-oldest): Prisma 6's
// config has no `datasource` block (the URL is in prisma/schema/base.prisma).
import { defineConfig } from 'prisma/config';

export default defineConfig({
  schema: 'prisma/schema',
  migrations: {
    path: 'prisma/migrations',
  },
});
