/**
 * `npm run chaos`: the fault-injection suite (see bench/chaos/README.md).
 *
 *   node <build>/bench/chaos/run.js [--quick] [--seed N] [--sentinel] [--queue] [--cli] [--leader] [--dynamic] [--duration S]
 *                                   [--jobs N] [--instances N] [--drain S] [--out FILE] [--keep]
 *
 * Starts a private Redis (or a Sentinel setup) and a private PostgreSQL cluster, one TCP proxy per
 * instance and server, N app instances as processes; injects seeded faults; then computes the
 * verdict from the handlers' side-effect logs and the run history, prints it, writes
 * bench/results/chaos.json (a `--quick` run: .tmp/chaos-quick.json) and exits 1 when any of the five figures is not 0.
 */
import { randomInt } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startSentinel, type SentinelSetup } from '../../test/support/sentinel.js';
import { startTcpProxy, type TcpProxy } from '../../test/support/tcp-proxy.js';
import { FAULT_DESCRIPTIONS, injectFault, planFaults, type FaultRecord } from './faults.js';
import { Fleet } from './fleet.js';
import { formatLeaderChanges, LEADER_LEASE_MS, LEADER_RENEW_MS, leaderChanges, leaderFinder } from './leader.js';
import { HOST, PrivatePostgres, PrivateRedis } from './infra.js';
import type { InstanceConfig, RedisTarget } from './instance.js';
import {
  chaosJobs,
  cliJobsOf,
  coverage,
  LEASE_MS,
  MAX_DURATION_MS,
  RENEW_MS,
  SWEEP_MS,
  type EndLine,
  type LibLine,
  type StartLine,
} from './jobs.js';
import { PodController } from './pods.js';
import { formatReport } from './report.js';
import { computeVerdict, type RunRow } from './verdict.js';
import { SCHEDULE_COUNT, ScheduleDriver, scheduleJobs, type SchedReply } from './dynamic.js';
import { computeDynamicVerdict, formatDynamic, type TableRow } from './dynamic.verdict.js';

interface Args {
  quick: boolean;
  seed: number;
  sentinel: boolean;
  /** Queue mode: 2 schedulers, the other instances workers, every job on one BullMQ queue. */
  queue: boolean;
  /** CronJob mode: some jobs' slots run in CLI pods started by a pod controller; the fleet sweeps them. */
  cli: boolean;
  /** Leader mode: `mode: 'leader'`, and leader-targeted faults (SIGKILL, SIGSTOP past the leader lease). */
  leader: boolean;
  /** Run-time schedules: the `chaos-tenant` handler on every instance, a driver changing schedules at random. */
  dynamic: boolean;
  windowSeconds: number;
  drainSeconds: number;
  jobs: number;
  instances: number;
  out: string;
  keep: boolean;
}

const root = process.env.CHAOS_ROOT ?? process.cwd();

function parseArgs(argv: string[]): Args {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    if (i < 0) return undefined;
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new Error(`${name} needs a value`);
    return v;
  };
  const known = new Set(['--quick', '--seed', '--sentinel', '--duration', '--drain', '--jobs', '--instances', '--out', '--keep']);
  known.add('--queue');
  known.add('--cli');
  known.add('--leader');
  known.add('--dynamic');
  for (const a of argv) if (a.startsWith('--') && !known.has(a)) throw new Error(`unknown option ${a} (known: ${[...known].join(' ')})`);
  const quick = argv.includes('--quick');
  if (argv.includes('--cli') && (argv.includes('--queue') || argv.includes('--sentinel')))
    throw new Error('--cli runs in-app jobs in pods against one Redis: not with --queue or --sentinel');
  if (argv.includes('--dynamic') && argv.includes('--queue'))
    throw new Error('--dynamic: schedules created at run time do not run in queue mode; not with --queue');
  const seedText = value('--seed');
  const seed = seedText === undefined ? randomInt(1, 2 ** 31 - 1) : Number(seedText);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a non-negative integer, got ${seedText}`);
  const num = (name: string, fallback: number): number => {
    const v = value(name);
    if (v === undefined) return fallback;
    const x = Number(v);
    if (!Number.isFinite(x) || x <= 0) throw new Error(`${name} must be a positive number, got ${v}`);
    return x;
  };
  return {
    quick,
    seed,
    sentinel: argv.includes('--sentinel'),
    queue: argv.includes('--queue'),
    cli: argv.includes('--cli'),
    leader: argv.includes('--leader'),
    dynamic: argv.includes('--dynamic'),
    windowSeconds: num('--duration', quick ? 55 : 560),
    drainSeconds: num('--drain', quick ? 18 : 25),
    jobs: Math.round(num('--jobs', 32)),
    instances: Math.round(num('--instances', 5)),
    // A quick run (CI) writes beside the other scratch output, so the committed full-run figures
    // in bench/results/ stay as they were measured.
    out: value('--out') ?? (quick ? path.join(root, '.tmp', 'chaos-quick.json') : path.join(root, 'bench', 'results', 'chaos.json')),
    keep: argv.includes('--keep'),
  };
}

const t0 = Date.now();
function log(message: string): void {
  process.stderr.write(`[chaos +${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${message}\n`);
}

async function sleepUntil(epochMs: number): Promise<void> {
  for (;;) {
    const wait = epochMs - Date.now();
    if (wait <= 0) return;
    await sleep(Math.min(wait, 1_000));
  }
}

function parseLines<T>(file: string, onBad: () => void): T[] {
  const out: T[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      onBad();
    }
  }
  return out;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const variant = `${args.quick ? 'quick' : 'full'}${args.sentinel ? '+sentinel' : ''}${args.queue ? '+queue' : ''}${args.cli ? '+cli' : ''}${args.leader ? '+leader' : ''}${args.dynamic ? '+dynamic' : ''}`;
  const source = process.env.CHAOS_SRC_LABEL ?? 'working tree';
  log(
    `seed ${args.seed} (reproduce with --seed ${args.seed}${args.quick ? ' --quick' : ''}${args.sentinel ? ' --sentinel' : ''}${args.queue ? ' --queue' : ''}${args.cli ? ' --cli' : ''}${args.leader ? ' --leader' : ''}${args.dynamic ? ' --dynamic' : ''}); ${variant}; code under test: ${source}`,
  );
  const jobs = chaosJobs(args.jobs);
  const cover = coverage(jobs);
  log(
    `${jobs.length} jobs (periods 1/2/5 s, lease ${LEASE_MS} ms, renew ${RENEW_MS} ms): ${Object.entries(cover)
      .map(([o, c]) => `${o} ${c.jobs} (recover ${c.recover}, retry ${c.retry}, timeout ${c.timeout})`)
      .join('; ')}`,
  );
  const cliJobs = args.cli ? cliJobsOf(jobs) : [];
  if (args.cli) log(`CronJob mode: the slots of ${cliJobs.map((j) => j.name).join(', ')} run in CLI pods; the fleet sweeps them`);

  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'dcron-chaos-'));
  // The postgres user must be able to reach its data directory inside.
  chmodSync(stateDir, 0o755);
  const logDir = path.join(stateDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const migrationsDir = process.env.CHAOS_MIGRATIONS ?? path.join(root, 'prisma', 'migrations');
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'instance.js');

  let postgres: PrivatePostgres | undefined;
  let redis: PrivateRedis | undefined;
  let sentinel: SentinelSetup | undefined;
  const proxies: TcpProxy[] = [];
  let fleet: Fleet | undefined;
  let pods: PodController | undefined;
  let cleaned = false;
  const cleanupSync = (): void => {
    if (cleaned) return;
    cleaned = true;
    fleet?.killAllNow();
    pods?.killAllNow();
    postgres?.stopSync();
    if (!args.keep) rmSync(stateDir, { recursive: true, force: true });
  };
  process.on('exit', cleanupSync);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      log(`${signal}: cleaning up`);
      cleanupSync();
      process.exit(130);
    });
  }

  try {
    // --- servers -------------------------------------------------------------------------------
    log(`private servers under ${stateDir}`);
    const [pgServer] = await Promise.all([
      PrivatePostgres.create(path.join(stateDir, 'pg'), migrationsDir),
      (async () => {
        if (args.sentinel) sentinel = await startSentinel({ downAfterMs: 1_000, failoverTimeoutMs: 5_000 });
        else redis = await PrivateRedis.start(path.join(stateDir, 'redis'));
      })(),
    ]);
    postgres = pgServer;
    const redisPort = redis ? redis.port : (await sentinel!.master()).port;
    log(
      `postgres on ${postgres.port}, ${redis ? `redis on ${redis.port}` : `sentinel master on ${redisPort}, sentinels ${sentinel!.sentinels.map((s) => s.port).join(',')}`}`,
    );

    // --- one proxy per instance and server ----------------------------------------------------------
    // Sentinel mode: the first half of the instances find the master through the sentinels (no proxy);
    // the others reach it through their proxy, moved to the new master after a failover.
    const viaSentinel = (slot: number): boolean => args.sentinel && slot < Math.ceil(args.instances / 2);
    const redisProxies: Array<TcpProxy | undefined> = [];
    const pgProxies: TcpProxy[] = [];
    for (let slot = 0; slot < args.instances; slot++) {
      const pgProxy = await startTcpProxy({ targetPort: postgres.port });
      pgProxies.push(pgProxy);
      proxies.push(pgProxy);
      if (viaSentinel(slot)) redisProxies.push(undefined);
      else {
        const proxy = await startTcpProxy({ targetPort: redisPort });
        redisProxies.push(proxy);
        proxies.push(proxy);
      }
    }
    const redisProxied = [...Array(args.instances).keys()].filter((slot) => !viaSentinel(slot));

    // --- the fleet ---------------------------------------------------------------------------------
    let epoch: number | undefined;
    let driver: ScheduleDriver | undefined;
    const f = (fleet = new Fleet({
      script,
      instances: args.instances,
      log,
      onEvent: (event) => {
        if (event.event === 'sched') driver?.onReply(event as SchedReply);
      },
      config: (slot, id, waitForGo): InstanceConfig => {
        const target: RedisTarget = viaSentinel(slot)
          ? { kind: 'sentinel', sentinels: sentinel!.sentinels, name: sentinel!.masterName }
          : { kind: 'direct', host: HOST, port: redisProxies[slot]!.port };
        return {
          instanceId: id,
          seed: args.seed,
          jobCount: args.jobs,
          redis: target,
          databaseUrl: postgres!.url(pgProxies[slot]!.port, `chaos-${id}`),
          logDir,
          waitForGo,
          epochMs: waitForGo ? undefined : epoch,
          poolMax: 5,
          queue: args.queue ? { role: slot < 2 ? 'scheduler' : 'worker' } : undefined,
          cliJobs: args.cli ? cliJobs.map((j) => j.name) : undefined,
          leader: args.leader ? { leaseMs: LEADER_LEASE_MS, renewMs: LEADER_RENEW_MS } : undefined,
          dynamic: args.dynamic || undefined,
        };
      },
    }));
    log(`starting ${args.instances} instances`);
    await Promise.race([
      Promise.all([...Array(args.instances).keys()].map((slot) => f.spawn(slot, true))),
      sleep(90_000).then(() => {
        throw new Error('the instances did not all start within 90 s');
      }),
    ]);
    // Slot offsets (the handlers' seeded behaviour) and fault times count from an epoch on a 10 s
    // boundary (periods 1, 2 and 5 s all align on it), at least 2 s away; the fleet warms up until then.
    epoch = Math.ceil((Date.now() + 2_000) / 10_000) * 10_000;
    for (let slot = 0; slot < args.instances; slot++) f.send(slot, `go ${epoch}`);
    const windowFrom = epoch + 3_000;
    const windowTo = epoch + args.windowSeconds * 1_000;
    if (args.cli) {
      const built = path.join(path.dirname(script), '..', '..');
      pods = new PodController({
        seed: args.seed,
        jobs: cliJobs,
        epoch,
        slotsFrom: windowFrom,
        slotsBefore: windowTo,
        followUpsUntil: windowTo + 8_000,
        cliMain: path.join(built, 'src', 'cli', 'main.js'),
        modulePath: path.join(path.dirname(script), 'pod.module.js'),
        config: (id) => ({
          instanceId: id,
          seed: args.seed,
          jobCount: args.jobs,
          jobs: cliJobs.map((j) => j.name),
          redis: { host: HOST, port: redisPort },
          databaseUrl: postgres!.url(postgres!.port, `chaos-${id}`),
          logDir,
          epochMs: epoch!,
        }),
        logDir,
        log,
      });
      pods.start();
    }
    log(
      `all up; epoch ${new Date(epoch).toISOString()}; slots counted in [epoch+3s, epoch+${args.windowSeconds}s); then ${args.drainSeconds} s of drain without faults`,
    );

    // --- faults ------------------------------------------------------------------------------------
    const plan = planFaults({
      seed: args.seed,
      instances: args.instances,
      firstAt: 5_000,
      lastEnd: args.windowSeconds * 1_000 - 2_000,
      quick: args.quick,
      sentinel: args.sentinel,
      redisProxied,
      leader: args.leader ? { leaseMs: LEADER_LEASE_MS } : undefined,
    });
    log(`${plan.length} faults planned`);
    let driving: Promise<void> | undefined;
    if (args.dynamic) {
      const driverFd = openSync(path.join(logDir, 'driver.jsonl'), 'a');
      const d = (driver = new ScheduleDriver(
        {
          upSlots: () => f.upSlots(),
          idOf: (slot) => f.current(slot)?.id,
          diedAt: (id) => f.lives.find((l) => l.id === id)?.diedAt,
          send: (slot, line) => f.send(slot, line),
          append: (line) => writeSync(driverFd, `${JSON.stringify(line)}\n`),
          log,
        },
        args.seed,
      ));
      driving = (async () => {
        await d.createAll(epoch + 10_000);
        log(`driver: ${SCHEDULE_COUNT} schedules upserted (${d.lines.length} calls); changing them at random until the window ends`);
        await d.churn(250, 4);
        closeSync(driverFd);
        log(`driver: ${d.lines.length} calls, ${d.lines.filter((l) => !l.ok).length} failed or unanswered`);
      })();
    }
    const faults: FaultRecord[] = [];
    const respawn = async (slot: number): Promise<void> => {
      const life = await f.spawn(slot, false);
      log(`  instance ${life.id} (pid ${life.pid}) up after ${life.readyAt! - life.spawnedAt} ms`);
    };
    for (let i = 0; i < plan.length; i++) {
      const fault = plan[i]!;
      if (Date.now() > epoch + fault.at + 5_000) {
        // A fault took far longer than planned (a hung restart): do not run past the window.
        if (Date.now() > windowTo - 2_000) {
          log(`behind schedule: the last ${plan.length - i} planned faults are not injected`);
          break;
        }
      }
      await sleepUntil(epoch + fault.at);
      const record = await injectFault(fault, i + 1, epoch + fault.at, {
        fleet: f,
        redis,
        sentinel,
        postgres,
        redisProxies,
        pgProxies,
        respawn,
        log,
        findLeader: args.leader ? leaderFinder(f, async () => (redis ? redis.port : (await sentinel!.master()).port)) : undefined,
      });
      faults.push(record);
      log(
        `fault #${record.n} at +${((record.start - epoch) / 1000).toFixed(1)}s ${record.kind}${record.target ? ` ${record.target}` : ''}` +
          ` ${record.end - record.start} ms${fault.durationMs && record.kind === 'kill' ? ` (restart after ${fault.durationMs} ms)` : ''}${record.detail ? `: ${record.detail}` : ''}${record.error ? ` FAILED: ${record.error}` : ''}`,
      );
    }
    await sleepUntil(windowTo);
    driver?.stop();
    await driving;
    log(`faults over; draining ${args.drainSeconds} s`);
    await sleepUntil(windowTo + args.drainSeconds * 1_000);
    if (pods) {
      await pods.finish(20_000);
      log(`${pods.pods.length} CronJob pods, all exited`);
    }

    // --- read the run history (the instances are still up), then stop them ------------------------------
    const queriedAt = Date.now();
    const db = new pg.Client({ connectionString: postgres.url(postgres.port, 'chaos-verdict') });
    await db.connect();
    const { rows: raw } = await db.query<Record<string, unknown>>('SELECT * FROM distributed_cron_runs');
    const table: TableRow[] = args.dynamic
      ? (await db.query<TableRow>('SELECT id, expression, data, options, enabled FROM distributed_cron_schedules')).rows
      : [];
    await db.end();
    const ms = (v: unknown): number | null => (v === null || v === undefined ? null : (v as Date).getTime());
    const rows: RunRow[] = raw.map((r) => ({
      job_name: String(r.job_name),
      execution_id: String(r.execution_id),
      status: String(r.status),
      trigger: String(r.trigger),
      scheduled_at: ms(r.scheduled_at)!,
      started_at: ms(r.started_at),
      finished_at: ms(r.finished_at),
      instance_id: String(r.instance_id),
      attempt: Number(r.attempt),
      max_attempts: Number(r.max_attempts),
      fencing_token: r.fencing_token === null ? null : Number(r.fencing_token),
      error: (r.error as string | null) ?? null,
      next_attempt_at: ms(r.next_attempt_at),
      created_at: ms(r.created_at)!,
      updated_at: ms(r.updated_at)!,
    }));
    log(`${rows.length} rows read; stopping the fleet`);
    await f.stopAll();
    const endedAt = Date.now();

    // --- the logs ------------------------------------------------------------------------------------
    const startLines: StartLine[] = [];
    const endLines: EndLine[] = [];
    const libLines: LibLine[] = [];
    let badLines = 0;
    for (const file of readdirSync(logDir)) {
      const full = path.join(logDir, file);
      if (file.endsWith('.lib.jsonl')) libLines.push(...parseLines<LibLine>(full, () => badLines++));
      else if (file.endsWith('.jsonl')) {
        for (const line of parseLines<StartLine | EndLine>(full, () => badLines++)) {
          if (line.type === 'start') startLines.push(line);
          else if (line.type === 'end') endLines.push(line);
        }
      }
    }
    if (badLines) log(`${badLines} unreadable log lines skipped (torn by a SIGKILL)`);

    const dynamic = driver && computeDynamicVerdict({ driver: driver.lines, startLines, table, windowFrom, windowTo });
    const schedules = dynamic && { jobs: scheduleJobs(SCHEDULE_COUNT), dueSlots: dynamic.dueSlots };
    const verdict = computeVerdict({
      schedules,
      jobs,
      windowFrom,
      windowTo,
      queriedAt,
      endedAt,
      startLines,
      endLines,
      libLines,
      rows,
      lives: f.lives,
      faults,
      leaseMs: LEASE_MS,
      renewMs: RENEW_MS,
      sweepMs: SWEEP_MS,
      maxDurationMs: MAX_DURATION_MS,
      pods: pods && { jobs: cliJobs.map((j) => j.name), records: pods.pods },
    });
    // The schedules' share of the four figures: the same verdict over their handlers and rows only.
    const scheduleIds = new Set(schedules?.jobs.map((j) => j.name));
    const ofSchedules =
      schedules &&
      computeVerdict({
        schedules,
        jobs: [],
        windowFrom,
        windowTo,
        queriedAt,
        endedAt,
        startLines: startLines.filter((l) => scheduleIds.has(l.jobName)),
        endLines: endLines.filter((l) => scheduleIds.has(l.jobName)),
        libLines,
        rows: rows.filter((r) => scheduleIds.has(r.job_name)),
        lives: f.lives,
        faults,
        leaseMs: LEASE_MS,
        renewMs: RENEW_MS,
        sweepMs: SWEEP_MS,
        maxDurationMs: MAX_DURATION_MS,
      });
    const wallSeconds = Math.round((Date.now() - t0) / 1000);
    const leaders = args.leader ? leaderChanges({ jobs, epoch, windowTo, libLines, startLines, rows, faults }) : undefined;
    process.stdout.write(
      formatReport(
        { seed: args.seed, variant, instances: args.instances, jobs: args.jobs, windowSeconds: args.windowSeconds, wallSeconds, source },
        faults,
        verdict,
      ) +
        (leaders ? formatLeaderChanges(leaders, epoch) : '') +
        (dynamic && ofSchedules ? formatDynamic(dynamic, ofSchedules) : ''),
    );

    // Keep the raw logs for debugging (under the project's ignored .tmp/).
    const keptLogs = path.join(root, '.tmp', 'chaos', `logs-${args.seed}`);
    rmSync(keptLogs, { recursive: true, force: true });
    mkdirSync(path.dirname(keptLogs), { recursive: true });
    cpSync(logDir, keptLogs, { recursive: true });
    writeFileSync(path.join(keptLogs, 'faults.json'), JSON.stringify({ epoch, faults, lives: f.lives, pods: pods?.pods }, null, 1));
    writeFileSync(path.join(keptLogs, 'rows.json'), JSON.stringify(rows));

    const byKind: Record<string, number> = {};
    for (const fr of faults) byKind[fr.kind] = (byKind[fr.kind] ?? 0) + 1;
    const starts = faults.map((fr) => fr.start).sort((a, b) => a - b);
    let maxGap = starts.length ? starts[0]! - epoch : 0;
    for (let i = 1; i < starts.length; i++) maxGap = Math.max(maxGap, starts[i]! - starts[i - 1]!);
    const result = {
      suite: 'chaos',
      variant,
      seed: args.seed,
      reproduce: `npm run chaos -- --seed ${args.seed}${args.quick ? ' --quick' : ''}${args.sentinel ? ' --sentinel' : ''}${args.queue ? ' --queue' : ''}${args.cli ? ' --cli' : ''}${args.leader ? ' --leader' : ''}${args.dynamic ? ' --dynamic' : ''}`,
      codeUnderTest: source,
      startedAt: new Date(t0).toISOString(),
      wallSeconds,
      epoch: new Date(epoch).toISOString(),
      window: { from: new Date(windowFrom).toISOString(), to: new Date(windowTo).toISOString(), seconds: (windowTo - windowFrom) / 1000 },
      drainSeconds: args.drainSeconds,
      instances: args.instances,
      jobs: jobs.map((j) => ({
        name: j.name,
        expression: j.expression,
        overlap: j.overlap,
        recover: j.recover,
        retry: j.retry,
        timeoutMs: j.timeoutMs,
      })),
      settings: {
        leaseMs: LEASE_MS,
        renewMs: RENEW_MS,
        sweepMs: SWEEP_MS,
        maxHandlerMs: MAX_DURATION_MS,
        ...(args.leader ? { leader: { leaseMs: LEADER_LEASE_MS, renewMs: LEADER_RENEW_MS } } : {}),
      },
      figures: { ...verdict.figures, ...dynamic?.figures },
      pass: Object.values(verdict.figures).every((v) => v === 0) && Object.values(dynamic?.figures ?? {}).every((v) => v === 0),
      faults: {
        total: faults.length,
        byKind,
        maxSecondsBetweenStarts: Math.round(maxGap / 100) / 10,
        descriptions: FAULT_DESCRIPTIONS,
        list: faults.map((fr) => ({ ...fr, startOffsetS: (fr.start - epoch!) / 1000, endOffsetS: (fr.end - epoch!) / 1000 })),
      },
      verdict,
      processes: f.lives,
      ...(pods ? { pods: pods.pods, podSlotsMissed: pods.missedSlots } : {}),
      ...(leaders ? { leaderChanges: leaders } : {}),
      ...(dynamic && ofSchedules
        ? { dynamic: { ...dynamic, dueSlots: dynamic.dueSlots.length, figuresOfSchedules: ofSchedules.figures, driver: driver!.lines } }
        : {}),
      rawLogs: keptLogs,
    };
    mkdirSync(path.dirname(args.out), { recursive: true });
    writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
    log(`wrote ${args.out}; raw logs in ${keptLogs}`);
    return result.pass ? 0 : 1;
  } finally {
    fleet?.killAllNow();
    await Promise.all(proxies.map((p) => p.close()));
    await redis?.stop();
    await sentinel?.stop();
    await postgres?.stop();
    cleanupSync();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(`ERROR: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(2);
  },
);
