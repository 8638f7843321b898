import { parseArgs, type ParseArgsConfig } from 'node:util';
import { MAX_TIMER_MS, parseDuration } from '../config/duration.parse.js';

/** What the CLI's process exits with; README "CLI reference" lists them. */
export const EXIT = {
  /** Done: the slot ran and completed (or had completed already), or the command succeeded. */
  ok: 0,
  /** The slot's run failed (failed, timed_out, dead, lease_lost, aborted), here or before. */
  failed: 1,
  /** Bad arguments, an unknown job, or the app failed to bootstrap. */
  usage: 2,
  /** Redis or the database could not be reached: the slot did not run. */
  unavailable: 69,
  /** Another process holds the slot (or the job's lease) right now: not run here, try later. */
  tempfail: 75,
  /** The overall `--timeout` passed. */
  timeout: 124,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A wrong command line; the CLI prints the message and the command's usage, and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

const MODULE_HELP = `  -m, --module <file>[#Export]  the compiled file of the app's root module, e.g. dist/app.module.js#AppModule
                                (default: $DISTRIBUTED_CRON_MODULE; export: AppModule, else the default export)`;
const COMMON_HELP = `      --timeout <duration>      give up after this long (exit 124), e.g. 30s, 2h (default: 1h for run, trigger, replay; 60s otherwise)
      --verbose                 also log the library's info lines (on stderr)
  -h, --help                    this help`;

interface CommandSpec {
  usage: string;
  summary: string;
  positional?: string;
  options: NonNullable<ParseArgsConfig['options']>;
  /** Lines of the command's own options. */
  help: string;
  /** What the command does and its exit codes, after the options. */
  details?: string;
  /** Works on files alone: no --module, no app booted, no --timeout. */
  standalone?: boolean;
}

const JSON_OPTION = { json: { type: 'boolean' } } as const;
const SLOT_HELP = `      --slot <ISO-8601>         the slot to run, an instant of the job's schedule (default: the latest slot at or before now, within the job's skew tolerance)
      --json                    print the outcome and the execution's row as JSON`;
const SLOT_OPTIONS = { slot: { type: 'string' }, ...JSON_OPTION } as const;

export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  run: {
    usage: 'run <job> --module <file> [--slot <ISO-8601>]',
    summary: "run the job's current slot once, fleet-wide (the container command of a Kubernetes CronJob)",
    positional: 'job',
    options: SLOT_OPTIONS,
    help: SLOT_HELP,
    details: `Claims the slot through the same lease and run history as the app's own timers, runs the handler
in this process (with the job's retries), writes the row and exits:
  0 it completed here, or it had completed already (prints "already done"), or the job is paused
  1 it failed, here or in the run that had it before (exit 1 again, no second run)
  75 another process is running this slot or this job right now: not run here
  69 Redis or the database could not be reached: not run
  2 bad arguments or the app failed to bootstrap; 124 --timeout passed; 143, 130 SIGTERM, SIGINT`,
  },
  trigger: {
    usage: 'trigger <job> --module <file> [--slot <ISO-8601>]',
    summary: 'trigger a slot now, in this process (as DistributedCronService.trigger), and wait for its end',
    positional: 'job',
    options: SLOT_OPTIONS,
    help: SLOT_HELP,
    details: 'Exit codes as for run.',
  },
  replay: {
    usage: 'replay <executionId> --module <file>',
    summary: 'run a dead or failed execution again, as a new attempt, in this process',
    positional: 'executionId',
    options: JSON_OPTION,
    help: "      --json                    print the outcome and the execution's row as JSON",
    details: 'Exits 0 when the new attempt completed, 1 when it failed, 75 when another process runs it, 2 when it is not replayable.',
  },
  history: {
    usage: 'history --module <file> [--job <name>] [--schedule <id>] [--status <status>[,<status>]] [--limit <n>] [--json]',
    summary: 'the run history, newest slot first',
    options: {
      job: { type: 'string' },
      schedule: { type: 'string' },
      status: { type: 'string', multiple: true },
      limit: { type: 'string' },
      ...JSON_OPTION,
    },
    help: `      --job <name>              one job's rows
      --schedule <id>           one schedule's rows (DistributedCronService.schedules)
      --status <s>[,<s>]        only rows with these statuses (repeatable)
      --limit <n>               at most this many rows (default 20)
      --json                    a JSON array of rows instead of a table`,
  },
  jobs: {
    usage: 'jobs --module <file> [--json]',
    summary: "the app's jobs: effective schedule, zone, overlap, paused, next slot",
    options: JSON_OPTION,
    help: '      --json                    a JSON array instead of a table',
  },
  pause: {
    usage: 'pause <job> --module <file>',
    summary: 'pause the job on every instance (and CronJob pod) until resume',
    positional: 'job',
    options: {},
    help: '',
  },
  resume: {
    usage: 'resume <job> --module <file>',
    summary: 'resume a paused job',
    positional: 'job',
    options: {},
    help: '',
  },
  'schedules list': {
    usage: 'schedules list --module <file> [--handler <name>] [--search <text>] [--enabled|--paused] [--limit <n>] [--cursor <c>] [--json]',
    summary: 'the schedules created at run time, in id order, a page at a time',
    options: {
      handler: { type: 'string' },
      search: { type: 'string' },
      enabled: { type: 'boolean' },
      paused: { type: 'boolean' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      ...JSON_OPTION,
    },
    help: `      --handler <name>          only the schedules of this @DistributedCronHandler
      --search <text>           only schedules whose id contains this text (any case)
      --enabled | --paused      only enabled, or only paused, schedules
      --limit <n>               at most this many (1-1000, default 50)
      --cursor <c>              the page after the one that printed "more: --cursor <c>"
      --json                    { schedules, next } as JSON instead of a table`,
  },
  'schedules get': {
    usage: 'schedules get <id> --module <file> [--json]',
    summary: 'one schedule: its definition, state, next due time and next runs',
    positional: 'id',
    options: JSON_OPTION,
    help: '      --json                    { schedule, nextRuns } as JSON',
  },
  'schedules pause': {
    usage: 'schedules pause <id> --module <file> [--note <text>] [--json]',
    summary: 'pause the schedule fleet-wide until resume',
    positional: 'id',
    options: { note: { type: 'string' }, ...JSON_OPTION },
    help: `      --note <text>             why (kept with the schedule, shown by list and get)
      --json                    the schedule as JSON`,
  },
  'schedules resume': {
    usage: 'schedules resume <id> --module <file> [--json]',
    summary: 'resume a paused schedule from its next slot after now',
    positional: 'id',
    options: JSON_OPTION,
    help: '      --json                    the schedule as JSON',
  },
  'schedules trigger': {
    usage: 'schedules trigger <id> --module <file> [--json]',
    summary: "trigger the schedule's slot now, in this process, and wait for its end",
    positional: 'id',
    options: JSON_OPTION,
    help: "      --json                    print the outcome and the schedule's newest row as JSON",
    details:
      'Exits 0 when it ran and completed, 1 when it failed, 75 when another process holds it, 69 when Redis or the database could not be reached.',
  },
  manifest: {
    usage: 'manifest --module <file> [--job <name>] [--image <image>] [--namespace <ns>]',
    summary: 'print a Kubernetes CronJob per job (YAML) whose container runs `run <job>`',
    options: { job: { type: 'string' }, image: { type: 'string' }, namespace: { type: 'string' } },
    help: `      --job <name>              only this job
      --image <image>           the container image (default: a <image> placeholder)
      --namespace <ns>          metadata.namespace (default: a <namespace> placeholder)`,
  },
  prisma: {
    usage: 'prisma [--schema <file|dir>] [--migrations <dir>] [--check]',
    summary: "add the library's models to the app's Prisma schema and write the migration its history lacks",
    options: { schema: { type: 'string' }, migrations: { type: 'string' }, check: { type: 'boolean' } },
    standalone: true,
    help: `      --schema <file|dir>       the app's Prisma schema: one file, or a schema folder (default: \`schema\` in prisma.config.ts,
                                else "prisma.schema" in package.json, else prisma/schema.prisma, else the folder prisma/schema/)
      --migrations <dir>        the app's migrations folder (default: \`migrations.path\` in prisma.config.ts, else migrations
                                next to the schema)
      --check                   write nothing; exit 1 when something would be written (for CI)`,
    details: `Run it in the app's folder; it needs no app, database or Redis. It writes the models DistributedCronRun
and DistributedCronJob (distributed-cron.prisma in a schema folder, or a block between marker comments
in one schema.prisma) and ONE new migration, prisma/migrations/<UTC now>_distributed_cron/migration.sql,
with the library's steps the history does not have yet (idempotent SQL). Run again: writes nothing.
After an upgrade of the library: writes only the new steps. Then: npx prisma migrate deploy (or
npx prisma migrate dev) and npx prisma generate.
  0 done, or up to date; 1 --check and something would be written; 2 bad arguments or no schema found`,
  },
};

export const PROGRAM = 'nestjs-distributed-cron';

/** Commands of two words (`schedules list`): the group, and its subcommands in COMMANDS. */
const GROUPS: Readonly<Record<string, string>> = { schedules: 'the schedules created at run time (DistributedCronService.schedules)' };
const subcommands = (group: string): string[] =>
  Object.keys(COMMANDS)
    .filter((name) => name.startsWith(`${group} `))
    .map((name) => name.slice(group.length + 1));

function groupHelp(group: string): string {
  const names = subcommands(group);
  const width = Math.max(...names.map((name) => name.length));
  const lines = names.map((name) => `  ${name.padEnd(width)}  ${COMMANDS[`${group} ${name}`]!.summary}`);
  return `Usage: ${PROGRAM} ${group} <command> [<id>] --module <file>[#Export] [options]

${GROUPS[group]![0]!.toUpperCase()}${GROUPS[group]!.slice(1)}.

Commands:
${lines.join('\n')}

Run \`${PROGRAM} ${group} <command> --help\` for a command's options.`;
}

export function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const lines = Object.entries(COMMANDS).map(([name, spec]) => `  ${name.padEnd(width)}  ${spec.summary}`);
  return `Usage: ${PROGRAM} <command> --module <file>[#Export] [options]
       ${PROGRAM} prisma [--schema <file|dir>] [--migrations <dir>] [--check]

Boots the app's root module without its schedules (no timers, catch-up or sweeps) and does one thing;
\`prisma\` works on the app's Prisma files alone.

Commands:
${lines.join('\n')}

Run \`${PROGRAM} <command> --help\` for a command's options and exit codes.`;
}

export function commandHelp(name: string): string {
  if (GROUPS[name] !== undefined) return groupHelp(name);
  const spec = COMMANDS[name]!;
  if (spec.standalone) {
    return `Usage: ${PROGRAM} ${spec.usage}

${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}.

Options:
${spec.help}
  -h, --help                    this help${spec.details ? `\n\n${spec.details}` : ''}`;
  }
  return `Usage: ${PROGRAM} ${spec.usage}

${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}.

Options:
${MODULE_HELP}
${spec.help ? `${spec.help}\n` : ''}${COMMON_HELP}${spec.details ? `\n\n${spec.details}` : ''}`;
}

/** One parsed command line. */
export interface CommandLine {
  command: string;
  /** The job or execution ID the command takes, if it takes one. */
  target: string | undefined;
  modulePath: string | undefined;
  timeoutMs: number | undefined;
  verbose: boolean;
  help: boolean;
  values: Readonly<Record<string, string | boolean | string[] | undefined>>;
}

export function parseCommandLine(argv: readonly string[]): CommandLine {
  let [command, ...rest] = argv;
  const helpOf = (name: string): CommandLine => ({
    command: name,
    target: undefined,
    modulePath: undefined,
    timeoutMs: undefined,
    verbose: false,
    help: true,
    values: {},
  });
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') return helpOf('help');
  if (GROUPS[command] !== undefined) {
    const [sub, ...after] = rest;
    if (sub === undefined || sub === '--help' || sub === '-h') return helpOf(command);
    if (COMMANDS[`${command} ${sub}`] === undefined) {
      throw new UsageError(`unknown command '${command} ${sub}'; ${command} commands: ${subcommands(command).join(', ')}`);
    }
    [command, rest] = [`${command} ${sub}`, after];
  }
  const spec = COMMANDS[command];
  if (!spec) {
    const names = [...new Set(Object.keys(COMMANDS).map((name) => name.split(' ')[0]!))];
    throw new UsageError(`unknown command '${command}'; commands: ${names.join(', ')}`);
  }
  const help = { help: { type: 'boolean', short: 'h' } } as const;
  const app = { module: { type: 'string', short: 'm' }, timeout: { type: 'string' }, verbose: { type: 'boolean' } } as const;
  let parsed;
  try {
    // A standalone command (`prisma`) boots no app: no --module, --timeout or --verbose.
    parsed = parseArgs({
      args: [...rest],
      allowPositionals: true,
      strict: true,
      options: spec.standalone ? { ...spec.options, ...help } : { ...spec.options, ...app, ...help },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { positionals } = parsed;
  const values = parsed.values as Readonly<Record<string, string | boolean | string[] | undefined>>;
  const wantsHelp = values.help === true;
  const wanted = spec.positional ? 1 : 0;
  if (!wantsHelp && positionals.length !== wanted) {
    throw new UsageError(
      wanted === 1
        ? `${command} takes one <${spec.positional}>, got ${positionals.length}`
        : `${command} takes no arguments, got '${positionals[0]}'`,
    );
  }
  return {
    command,
    target: positionals[0],
    modulePath: spec.standalone ? undefined : ((values.module as string | undefined) ?? process.env.DISTRIBUTED_CRON_MODULE),
    timeoutMs: values.timeout === undefined ? undefined : parseTimeout(values.timeout as string),
    verbose: values.verbose === true,
    help: wantsHelp,
    values,
  };
}

function parseTimeout(text: string): number {
  let ms: number;
  try {
    ms = parseDuration(text, '--timeout');
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (ms < 1 || ms > MAX_TIMER_MS) throw new UsageError(`--timeout must be from 1ms to about 24 days, got '${text}'`);
  return ms;
}
