// The compatibility matrix run by `npm run test:compat` (scripts/compat.sh).
//
// Consumer rows (a, b, c; kind 'consumer', scripts/compat/consumer.mjs) are apps as users build
// them: the app in `app` installs the packed library with a plain `npm install`, follows the
// quick start and runs its own `tests`. `node` is the oldest Node the row's dependencies accept
// (an --engine-strict install passes from there on); `redisDb` is the Redis database it flushes
// and uses; `absent` lists packages that must not be installed.
//
// Suite rows (s-*) run a subset of the repository's own suite against other peer versions: each
// pins exact versions on top of the repository's devDependencies; `overlay` names a folder under
// scripts/compat/overlays/ whose files replace the copied ones in the scratch project (e.g. a
// Prisma 6 schema header).
const nest12 = {
  '@nestjs/common': '12.5.1',
  '@nestjs/core': '12.5.1',
  '@nestjs/schedule': '12.0.2',
  '@nestjs/testing': '12.1.1',
};
const nest11 = {
  '@nestjs/common': '11.2.10',
  '@nestjs/core': '11.2.10',
  '@nestjs/schedule': '6.1.3',
  '@nestjs/testing': '11.2.6',
  // The Nest 11 line of the optional integrations the repository tests (dashboard, health).
  '@nestjs/platform-express': '11.2.10',
  '@nestjs/platform-fastify': '11.2.8',
  '@nestjs/terminus': '11.1.1',
  '@nestjs/event-emitter': '3.1.0',
};
// The oldest versions inside the recommended peer ranges (scripts/compat/recommended-peers.json).
const nest11Oldest = {
  '@nestjs/common': '11.0.0',
  '@nestjs/core': '11.0.0',
  '@nestjs/schedule': '6.0.0',
  '@nestjs/testing': '11.0.0',
  '@nestjs/platform-express': '11.0.0',
  '@nestjs/platform-fastify': '11.0.3', // 11.0.0-11.0.1 still declared Nest 10 peers
  '@nestjs/terminus': '11.0.0',
  '@nestjs/event-emitter': '3.0.0',
  // @nestjs/schedule 6.0.0 pins cron 4.3.0; with a second copy (4.4.0) at the top level,
  // tsc rejects src/nest/distributed-cron.explorer.ts `registry.addCronJob(name, cronJob)`
  // (two CronJob classes with private members). A deduped install has one cron: pin it.
  cron: '4.3.0',
};
const prisma7 = { '@prisma/client': '7.10.0', '@prisma/adapter-pg': '7.10.0', prisma: '7.10.0' };
const prisma6 = { '@prisma/client': '6.19.3', '@prisma/adapter-pg': '6.19.3', prisma: '6.19.3' };
const prisma6Oldest = { '@prisma/client': '6.19.0', '@prisma/adapter-pg': '6.19.0', prisma: '6.19.0' };

const jestJson = (name, config) => ({
  name,
  command: `npx --no-install jest --ci${config ? ` --config ${config}` : ''} --json --outputFile=.tmp/${name}.json`,
  report: `.tmp/${name}.json`,
});
const vitestJson = (name) => ({
  name,
  command: `npx --no-install vitest run --reporter=default --reporter=json --outputFile=.tmp/${name}.json`,
  report: `.tmp/${name}.json`,
});

export const rows = {
  a: {
    kind: 'consumer',
    title: 'NestJS 11 CommonJS app (examples/nest11-jest): TypeScript 5.9 module commonjs, Jest 30 + ts-jest, ioredis 5, Prisma 6.19',
    app: 'examples/nest11-jest',
    node: '20.19',
    redisDb: 11,
    tests: [jestJson('unit'), jestJson('e2e', './test/jest-e2e.json')],
  },
  b: {
    kind: 'consumer',
    title: 'NestJS 12 ESM app: TypeScript nodenext, Vitest 4.1 + vite 8.3, ioredis 6, Prisma 7.10 + @prisma/adapter-pg',
    app: 'scripts/compat/apps/nest12-vitest',
    node: '22.12',
    redisDb: 12,
    tests: [{ ...vitestJson('vitest'), before: ['npx --no-install tsc --noEmit -p tsconfig.json'] }],
  },
  c: {
    kind: 'consumer',
    title: 'only the required peers, on iovalkey (no ioredis, bullmq, OpenTelemetry, prom-client, Terminus, event-emitter)',
    app: 'scripts/compat/apps/required-peers',
    node: '20.19',
    redisDb: 13,
    tests: [
      {
        name: 'node:test',
        before: ['npx --no-install tsc -p tsconfig.json'],
        command: 'set -o pipefail; node --test --test-reporter=tap dist/fleet.test.js | tee .tmp/node-test.tap',
        report: '.tmp/node-test.tap',
        format: 'tap',
      },
    ],
    absent: ['ioredis', 'bullmq', '@opentelemetry/api', 'prom-client', '@nestjs/terminus', '@nestjs/event-emitter'],
  },
  's-nest12': { title: 'suite: NestJS 12 + Prisma 7.10 (current)', deps: { ...nest12, ...prisma7 } },
  's-nest11': { title: 'suite: NestJS 11 + Prisma 7.10', deps: { ...nest11, ...prisma7 } },
  's-prisma6': { title: 'suite: NestJS 12 + Prisma 6.19', deps: { ...nest12, ...prisma6 }, overlay: 'prisma6' },
  's-oldest': {
    title: 'suite: oldest in the ranges: NestJS 11.0.0 + @nestjs/schedule 6.0.0 + Prisma 6.19.0 + ioredis 5.2.5',
    // ioredis 5.2.5 is the first 5.x whose named export `Redis` is a value (`import { Redis } from
    // 'ioredis'`, as the suite and the quick start's RedisService write it). 5.0.0-5.0.2 have no
    // named export (the library's `import type { Redis }` fails: TS2614); 5.0.3-5.2.4 export it as a
    // type only (the suite's `new Redis()` fails: TS1362).
    deps: { ...nest11Oldest, ...prisma6Oldest, ioredis: '5.2.5' },
    overlay: 'prisma6',
  },
};

// The subset of the suite each row runs (paths relative to the project root).
export const testSubset = [
  'test/unit',
  'test/integration/exactly-once.test.ts',
  'test/integration/overlap.test.ts',
  'test/integration/crash-takeover.test.ts',
  'test/integration/service.test.ts',
  'test/integration/bootstrap.test.ts',
  'test/integration/failures.test.ts',
];

// What CI runs (`npm run test:compat -- --ci`): the Nest 11 CommonJS consumer app (row a) and the
// suite row furthest from the main suite (the oldest versions of every range) on a smaller
// subset; the main suite itself is s-nest12. `npm run test:compat` runs every row.
export const ciRows = ['a', 's-oldest'];
// Files left out of the scratch projects: they check the repository itself, not the peers (the
// import rules run the repository's ESLint config, which the scratch projects do not install).
export const excludedTests = ['test/unit/import-layers.test.ts'];

export const ciTestSubset = [
  'test/unit',
  'test/integration/exactly-once.test.ts',
  'test/integration/bootstrap.test.ts',
  'test/integration/service.test.ts',
];

// Dev tools the scratch projects do not need (lint, release tooling, local file: packages).
export const dropDevDependencies = ['@changesets/cli', '@eslint/js', 'eslint', 'globals', 'prettier', 'nestjs-distributed-cron-lint'];

// `node scripts/compat/rows.mjs <cmd> [args]` — small CLI used by compat.sh.
if (import.meta.url === `file://${process.argv[1]}`) {
  const [cmd, ...args] = process.argv.slice(2);
  if (cmd === 'list') console.log(Object.keys(rows).join(' '));
  else if (cmd === 'kind') console.log(rows[args[0]] ? (rows[args[0]].kind ?? 'suite') : 'unknown');
  else if (cmd === 'overlay') console.log(rows[args[0]]?.overlay ?? '');
  else if (cmd === 'title') console.log(rows[args[0]]?.title ?? '');
  else if (cmd === 'tests') console.log((process.env.COMPAT_CI ? ciTestSubset : testSubset).join('\n'));
  else if (cmd === 'excluded-tests') console.log(excludedTests.join('\n'));
  else if (cmd === 'ci-rows') console.log(ciRows.join(' '));
  else if (cmd === 'package-json') {
    // args: <row> <path to the repository's package.json>
    const { readFileSync } = await import('node:fs');
    const base = JSON.parse(readFileSync(args[1], 'utf8'));
    const row = rows[args[0]];
    if (!row) throw new Error(`unknown row ${args[0]}`);
    const devDependencies = { ...base.devDependencies, ...row.deps };
    for (const name of dropDevDependencies) delete devDependencies[name];
    const pkg = {
      name: `compat-row-${args[0]}`,
      private: true,
      type: 'module',
      devDependencies,
      overrides: base.overrides,
    };
    console.log(JSON.stringify(pkg, null, 2));
  } else {
    console.error(`unknown command ${cmd}`);
    process.exit(2);
  }
}
