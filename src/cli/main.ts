#!/usr/bin/env node
/**
 * `nestjs-distributed-cron`: runs one slot of a job from outside the app (a Kubernetes CronJob's
 * container command), the operator's commands, and `prisma` (the library's models and migration
 * into the app's Prisma files). See `nestjs-distributed-cron --help`.
 */
import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { describeError } from '../errors/error.redact.js';
import type { LoadedApp } from './app.loader.js';
import { commandHelp, EXIT, mainHelp, parseCommandLine, PROGRAM, UsageError, type CommandLine, type ExitCode } from './cli.args.js';
import { manifest } from './manifest.js';
import { history, jobs, pauseOrResume, type Printed } from './operator.commands.js';
import { getSchedule, listSchedules, pauseOrResumeSchedule, triggerSchedule } from './schedule.commands.js';
import { fireSlot, replaySlot } from './slot.commands.js';

/** Commands that run a handler get an hour by default; the others a minute. */
const LONG_COMMANDS = new Set(['run', 'trigger', 'replay', 'schedules trigger']);
const LONG_TIMEOUT_MS = 3_600_000;
const SHORT_TIMEOUT_MS = 60_000;
/** How long closing the app may take after the command (its shutdownTimeout aborts running handlers first). */
const CLOSE_GRACE_MS = 30_000;

const out = (text: string): void => void process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
const err = (text: string): void => void process.stderr.write(`${PROGRAM}: ${text}\n`);

async function perform(loaded: LoadedApp, line: CommandLine): Promise<ExitCode> {
  const json = line.values.json === true;
  const print = ({ text, json: data }: Printed): ExitCode => {
    out(json ? JSON.stringify(data, null, 2) : text);
    return EXIT.ok;
  };
  switch (line.command) {
    case 'run':
    case 'trigger':
    case 'replay': {
      const result =
        line.command === 'replay'
          ? await replaySlot(loaded, line.target!)
          : await fireSlot(loaded, line.target!, line.values.slot as string | undefined, line.command === 'run' ? 'schedule' : 'manual');
      if (json) out(JSON.stringify(result, null, 2));
      else (result.exitCode === EXIT.ok ? out : err)(result.message);
      return result.exitCode;
    }
    case 'history':
      return print(await history(loaded, line));
    case 'jobs':
      return print(await jobs(loaded));
    case 'pause':
    case 'resume':
      return print(await pauseOrResume(loaded, line));
    case 'schedules list':
      return print(await listSchedules(loaded, line));
    case 'schedules get':
      return print(await getSchedule(loaded, line));
    case 'schedules pause':
    case 'schedules resume':
      return print(await pauseOrResumeSchedule(loaded, line));
    case 'schedules trigger': {
      const result = await triggerSchedule(loaded, line);
      if (json) out(JSON.stringify(result, null, 2));
      else (result.exitCode === EXIT.ok ? out : err)(result.message);
      return result.exitCode;
    }
    case 'manifest': {
      const { job, image, namespace } = line.values as { job?: string; image?: string; namespace?: string };
      const configs = [...loaded.jobs.values()].map(({ executor }) => executor.job);
      const result = manifest(configs, { modulePath: line.modulePath!, image, namespace }, job);
      for (const why of result.skipped) err(why);
      out(result.yaml);
      return EXIT.ok;
    }
    default:
      throw new UsageError(`unknown command '${line.command}'`);
  }
}

/** `prisma`: files only, no app. */
async function prisma(line: CommandLine): Promise<number> {
  const { prismaCommand, PrismaLayoutError } = await import('./prisma.command.js');
  const { schema, migrations, check } = line.values as { schema?: string; migrations?: string; check?: boolean };
  try {
    const result = prismaCommand({ cwd: process.cwd(), schema, migrations, check: check === true, now: new Date() });
    for (const warning of result.warnings) err(warning);
    out(result.lines.join('\n'));
    return result.exitCode;
  } catch (error) {
    if (error instanceof PrismaLayoutError) {
      err(`prisma: ${error.message}`);
      return EXIT.usage;
    }
    // Not 1: `--check` exits 1 for "something would be written", and CI must tell the two apart.
    err(`prisma failed: ${describeError(error)}`);
    return EXIT.usage;
  }
}

/** Boots the app, performs the command, closes the app; never longer than the timeout (plus the close grace). */
async function main(argv: readonly string[]): Promise<number> {
  let line: CommandLine;
  try {
    line = parseCommandLine(argv);
  } catch (error) {
    err(`${(error as Error).message}\nRun \`${PROGRAM} --help\` for usage.`);
    return EXIT.usage;
  }
  if (line.help) {
    out(line.command === 'help' ? mainHelp() : commandHelp(line.command));
    return EXIT.ok;
  }
  if (line.command === 'prisma') return prisma(line);
  if (!line.modulePath) {
    err(`--module is required (or set DISTRIBUTED_CRON_MODULE)\n\n${commandHelp(line.command)}`);
    return EXIT.usage;
  }
  const timeoutMs = line.timeoutMs ?? (LONG_COMMANDS.has(line.command) ? LONG_TIMEOUT_MS : SHORT_TIMEOUT_MS);
  let loaded: LoadedApp | undefined;
  const stop = new AbortController();
  const work = (async (): Promise<number> => {
    // Nest and the library load only now: `--help` and bad arguments answer at once.
    const { bootApp } = await import('./app.loader.js');
    loaded = await bootApp(line.modulePath!, line.verbose);
    return perform(loaded, line);
  })().catch((error: unknown) => {
    if (error instanceof UsageError) {
      err(error.message);
      return EXIT.usage;
    }
    err(`${line.command} failed: ${describeError(error)}`);
    return EXIT.failed;
  });
  const timedOut = sleep(timeoutMs, undefined, { signal: stop.signal }).then(
    () => {
      err(`gave up after --timeout ${timeoutMs} ms; closing the app (a running handler's signal aborts)`);
      return EXIT.timeout;
    },
    () => EXIT.timeout,
  );
  const signalled = new Promise<number>((resolve) => {
    const on = (signal: NodeJS.Signals, code: number): void =>
      void process.once(signal, () => {
        err(`${signal}: closing the app (a running handler's signal aborts)`);
        resolve(code);
      });
    on('SIGTERM', 143);
    on('SIGINT', 130);
  });
  const code = await Promise.race([work, timedOut, signalled]);
  stop.abort();
  // A bootstrap still going when the timeout hit may finish later; it is closed by process exit.
  const app = (loaded as LoadedApp | undefined)?.app;
  if (app) {
    const closed = await Promise.race([app.close().then(() => true), sleep(CLOSE_GRACE_MS, false, { ref: false })]).catch(
      (error: unknown) => {
        err(`closing the app failed: ${describeError(error)}`);
        return true;
      },
    );
    if (!closed) err(`the app did not close within ${CLOSE_GRACE_MS} ms`);
  }
  return code;
}

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  // The app's own clients may keep the event loop alive after app.close(): never hang on them.
  setTimeout(() => process.exit(code), 200).unref();
});
