/**
 * The read model of the run history in PostgreSQL (`RunReadModel`): the dashboard's queries,
 * through the app's PrismaClient. Values are
 * always parameters; only column names and `$n` placeholders are written into the SQL. Every query
 * is bounded by an index range (see prisma/migrations/20261201000000_dashboard_indexes): history
 * pages use keyset pagination on (scheduled_at, id), newest first.
 */
import type { PrismaClientLike, RunRecord, RunStatus } from '../distributed-cron.interfaces.js';
import { COLUMNS, rowColumns, ScheduleColumn, TABLE, toRecord } from './prisma-run.sql.js';
import { instantOut, queryRows, toBigIntText, toDate, toDateOrNull, toInt, toNumberOrNull, toText } from './raw-sql.js';
import type { DayCount, HistoryCursor, HistoryPage, HistoryPageQuery, JobSummaryRow, JobTimings, RunReadModel } from './read-model.js';

/** Newest first, by the columns of `alias` (never by a bare name: that would be the text output column). */
const ORDER = (alias: string): string => `ORDER BY ${alias}.scheduled_at DESC, ${alias}.id DESC`;
const SUCCESS: RunStatus[] = ['completed', 'completed_with_errors'];

export function encodeCursor(cursor: HistoryCursor): string {
  return Buffer.from(`${cursor.scheduledAt.toISOString()}|${cursor.id}`).toString('base64url');
}

/** The cursor in a `next` value, or undefined when it is not one. */
export function decodeCursor(text: string): HistoryCursor | undefined {
  const [at, id] = Buffer.from(text, 'base64url').toString().split('|');
  const scheduledAt = new Date(at ?? '');
  if (Number.isNaN(scheduledAt.getTime()) || !/^\d{1,19}$/.test(id ?? '')) return undefined;
  return { scheduledAt, id: id! };
}

/**
 * One page of the history (see `PrismaRunReadModel.historyPage`); `present`: the table has
 * `schedule_id`.
 */
async function historyPageOf(prisma: PrismaClientLike, query: HistoryPageQuery, present: boolean): Promise<HistoryPage> {
  const params: unknown[] = [];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  // A job's rows are read through a LATERAL join on the job name, so that the planner sees a
  // parameter, not a constant, and reads the job's index in order rather than the global one
  // with a filter (which could walk every newer row of other jobs).
  const job = query.jobName === undefined ? undefined : param([query.jobName]);
  const where: string[] = job === undefined ? [] : ['job_name = j.name'];
  if (query.trigger !== undefined) where.push(`trigger = ${param(query.trigger)}::text`);
  if (query.scheduleId !== undefined) where.push(`schedule_id = ${param(query.scheduleId)}::text`);
  if (query.from !== undefined) where.push(`scheduled_at >= ${param(query.from)}::timestamptz`);
  if (query.to !== undefined) where.push(`scheduled_at < ${param(query.to)}::timestamptz`);
  if (query.executionId !== undefined) where.push(`execution_id = ${param(query.executionId)}::text`);
  if (query.after !== undefined) {
    where.push(`(scheduled_at, id) < (${param(query.after.scheduledAt)}::timestamptz, ${param(query.after.id)}::bigint)`);
  }
  const limit = `${param(query.limit + 1)}::integer`;
  const range = (conditions: string[]): string => {
    const scan = `SELECT id, ${COLUMNS(present)} FROM ${TABLE} s${conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : ''} ${ORDER('s')} LIMIT ${limit}`;
    return job === undefined ? scan : `SELECT r.* FROM unnest(${job}::text[]) AS j(name) CROSS JOIN LATERAL (${scan}) r`;
  };
  const statuses = query.statuses ?? [];
  const ranges = statuses.length === 0 ? [range(where)] : statuses.map((status) => range([...where, `status = ${param(status)}::text`]));
  const sql = `SELECT page.id::text AS id, ${rowColumns('page', present)} FROM (${ranges.map((r) => `(${r})`).join(' UNION ALL ')}) page
    ${ORDER('page')} LIMIT ${limit}`;
  const rows = await queryRows(prisma, sql, ...params);
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  return {
    rows: page.map(toRecord),
    next:
      rows.length > query.limit && last
        ? encodeCursor({ scheduledAt: toDate(last.scheduled_at, 'scheduled_at'), id: toBigIntText(last.id, 'id') })
        : undefined,
  };
}

export class PrismaRunReadModel implements RunReadModel {
  /** Whether the table has `schedule_id` (a database without the schedules' step has not). */
  private readonly scheduleColumn = new ScheduleColumn();

  constructor(private readonly prisma: PrismaClientLike) {}

  /**
   * One page of the history. A status list becomes one index range per status (UNION ALL of
   * LIMITed scans) rather than a filter over every row.
   */
  async historyPage(query: HistoryPageQuery): Promise<HistoryPage> {
    // No row names a schedule on a table without the column.
    return this.scheduleColumn.read((present) =>
      !present && query.scheduleId !== undefined ? Promise.resolve({ rows: [] }) : historyPageOf(this.prisma, query, present),
    );
  }

  /** Rows per job and status scheduled since `since`. */
  async counts(jobNames: string[], since: Date): Promise<Map<string, Partial<Record<RunStatus, number>>>> {
    const counts = new Map<string, Partial<Record<RunStatus, number>>>(jobNames.map((name) => [name, {}]));
    if (jobNames.length === 0) return counts;
    const rows = await queryRows(
      this.prisma,
      `SELECT job_name, status, count(*)::int AS n FROM ${TABLE}
       WHERE job_name = ANY($1::text[]) AND scheduled_at >= $2::timestamptz GROUP BY job_name, status`,
      jobNames,
      since,
    );
    for (const row of rows) counts.get(toText(row.job_name, 'job_name'))![toText(row.status, 'status') as RunStatus] = toInt(row.n, 'n');
    return counts;
  }

  /** Last row, last success and first deploy of each job. */
  async jobSummaries(jobNames: string[]): Promise<Map<string, JobSummaryRow>> {
    const summaries = new Map<string, JobSummaryRow>(
      jobNames.map((jobName) => [jobName, { jobName, last: undefined, lastSuccess: undefined, firstSeen: undefined }]),
    );
    if (jobNames.length === 0) return summaries;
    const [lasts, successes, births] = await Promise.all([
      this.scheduleColumn.read((present) =>
        queryRows(
          this.prisma,
          `SELECT ${rowColumns('r', present)} FROM unnest($1::text[]) AS j(name)
           CROSS JOIN LATERAL (SELECT ${COLUMNS(present)} FROM ${TABLE} s WHERE job_name = j.name ${ORDER('s')} LIMIT 1) r`,
          jobNames,
        ),
      ),
      queryRows(
        this.prisma,
        `SELECT j.name::text AS job_name, ${instantOut(`(SELECT max(s.finished_at) FROM unnest($2::text[]) AS ok(status)
           CROSS JOIN LATERAL (SELECT finished_at FROM ${TABLE} WHERE job_name = j.name AND status = ok.status
                               ORDER BY scheduled_at DESC LIMIT 1) s)`)} AS at
         FROM unnest($1::text[]) AS j(name)`,
        jobNames,
        SUCCESS,
      ),
      queryRows(
        this.prisma,
        `SELECT job_name, ${instantOut('first_seen_at')} AS first_seen_at FROM distributed_cron_jobs WHERE job_name = ANY($1::text[])`,
        jobNames,
      ),
    ]);
    for (const row of lasts) summaries.get(toText(row.job_name, 'job_name'))!.last = toRecord(row);
    for (const row of successes) {
      const at = toDateOrNull(row.at, 'at');
      if (at) summaries.get(toText(row.job_name, 'job_name'))!.lastSuccess = at;
    }
    for (const row of births) summaries.get(toText(row.job_name, 'job_name'))!.firstSeen = toDate(row.first_seen_at, 'first_seen_at');
    return summaries;
  }

  /** `running` rows of these jobs. */
  async running(jobNames: string[]): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(
        this.prisma,
        `SELECT ${rowColumns('r', present)} FROM ${TABLE} r WHERE status = 'running' AND job_name = ANY($1::text[]) ${ORDER('r')} LIMIT 200`,
        jobNames,
      ),
    );
    return rows.map(toRecord);
  }

  /** Rows of these jobs scheduled in `[since, now]`, newest first, at most `limit`. */
  async timeline(jobNames: string[], since: Date, limit: number): Promise<RunRecord[]> {
    if (jobNames.length === 0) return [];
    const rows = await this.scheduleColumn.read((present) =>
      queryRows(
        this.prisma,
        `SELECT ${rowColumns('r', present)} FROM ${TABLE} r
         WHERE job_name = ANY($1::text[]) AND scheduled_at >= $2::timestamptz ${ORDER('r')} LIMIT $3::integer`,
        jobNames,
        since,
        limit,
      ),
    );
    return rows.map(toRecord);
  }

  /** Rows per day (in `timeZone`) and status since `since`. */
  async perDay(jobNames: string[], since: Date, timeZone: string): Promise<DayCount[]> {
    if (jobNames.length === 0) return [];
    const rows = await queryRows(
      this.prisma,
      `SELECT to_char(scheduled_at AT TIME ZONE $3::text, 'YYYY-MM-DD')::text AS day, status, count(*)::int AS n FROM ${TABLE}
       WHERE job_name = ANY($1::text[]) AND scheduled_at >= $2::timestamptz GROUP BY 1, 2 ORDER BY 1`,
      jobNames,
      since,
      timeZone,
    );
    return rows.map((row) => ({
      day: toText(row.day, 'day'),
      status: toText(row.status, 'status') as RunStatus,
      count: toInt(row.n, 'n'),
    }));
  }

  /** Duration and start delay (started_at - scheduled_at) percentiles per job since `since`, in ms. */
  async timings(jobNames: string[], since: Date): Promise<JobTimings[]> {
    if (jobNames.length === 0) return [];
    const rows = await queryRows(
      this.prisma,
      `SELECT job_name, count(*)::int AS n,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::text AS d50,
         percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::text AS d95,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_at) * 1000)::text AS s50,
         percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_at) * 1000)::text AS s95
       FROM ${TABLE} WHERE job_name = ANY($1::text[]) AND scheduled_at >= $2::timestamptz AND started_at IS NOT NULL
       GROUP BY job_name ORDER BY job_name`,
      jobNames,
      since,
    );
    const ms = (value: unknown, column: string): number | null => {
      const number = toNumberOrNull(value, column);
      return number === null ? null : Math.round(number);
    };
    return rows.map((row) => ({
      jobName: toText(row.job_name, 'job_name'),
      runs: toInt(row.n, 'n'),
      durationP50: ms(row.d50, 'd50'),
      durationP95: ms(row.d95, 'd95'),
      delayP50: ms(row.s50, 's50'),
      delayP95: ms(row.s95, 's95'),
    }));
  }
}
