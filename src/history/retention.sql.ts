/**
 * The SQL of history retention: which jobs have rows, what each job must keep, and one bounded
 * DELETE. Every value is a statement parameter.
 */
import type { PrismaClientLike } from '../distributed-cron.interfaces.js';
import { TABLE } from './prisma-run.sql.js';
import { instantOut, queryRows, toBigIntText, toBigIntTextOrNull, toDateOrNull, toInt, toText } from './raw-sql.js';

/** Statuses `retention.completed` applies to. */
export const COMPLETED_STATUSES = ['completed', 'completed_with_errors', 'skipped_overlap', 'skipped_overload'] as const;
/** Statuses `retention.failed` applies to (only rows without a pending next attempt). */
export const FAILED_STATUSES = ['failed', 'timed_out', 'lease_lost', 'aborted'] as const;

/** What one job must keep, read once per pass. */
export interface JobCuts {
  readonly jobName: string;
  /** The job's newest row (catch-up counts missed slots from it). */
  readonly newestId: string;
  /** The job's highest fencing token (its fencing floor); null when no row has one. */
  readonly maxToken: string | null;
  /** When the job last completed (the dead-man's switch reads it); null when never. */
  readonly lastSuccessAt: Date | null;
  /** The oldest of the job's newest `maxRowsPerJob` rows; null when the job has no more rows than that. */
  readonly keepFrom: { at: Date; id: string } | null;
}

/** Deletes rows older than these instants (null: no age limit for that kind). */
export interface AgeCuts {
  readonly completedBefore: Date | null;
  readonly failedBefore: Date | null;
}

/**
 * The job names that have rows, by a skip scan of the (job_name, scheduled_at) index: one index
 * probe per job instead of reading every row.
 */
export async function jobsWithRows(prisma: PrismaClientLike): Promise<string[]> {
  const rows = await queryRows(
    prisma,
    `WITH RECURSIVE jobs(job_name) AS (
       (SELECT job_name FROM ${TABLE} ORDER BY job_name LIMIT 1)
       UNION ALL
       SELECT (SELECT r.job_name FROM ${TABLE} r WHERE r.job_name > jobs.job_name ORDER BY r.job_name LIMIT 1)
       FROM jobs WHERE jobs.job_name IS NOT NULL
     )
     SELECT job_name FROM jobs WHERE job_name IS NOT NULL`,
  );
  return rows.map((row) => toText(row.job_name, 'job_name'));
}

/** Reads what `jobName` must keep; `maxRowsPerJob` undefined means no count limit. */
export async function jobCuts(prisma: PrismaClientLike, jobName: string, maxRowsPerJob: number | undefined): Promise<JobCuts | undefined> {
  const rows = await queryRows(
    prisma,
    `SELECT n.id::text AS newest_id, ${instantOut('k.scheduled_at')} AS keep_at, k.id::text AS keep_id,
       (SELECT max(fencing_token) FROM ${TABLE} WHERE job_name = $1::text)::text AS max_token,
       ${instantOut(`(SELECT max(finished_at) FROM ${TABLE} WHERE job_name = $1::text AND status IN ('completed', 'completed_with_errors'))`)}
         AS last_success
     FROM (SELECT id FROM ${TABLE} WHERE job_name = $1::text ORDER BY scheduled_at DESC, id DESC LIMIT 1) n
     LEFT JOIN (
       SELECT scheduled_at, id FROM ${TABLE} WHERE job_name = $1::text AND $2::integer IS NOT NULL
       ORDER BY scheduled_at DESC, id DESC OFFSET GREATEST(COALESCE($2::integer, 1) - 1, 0) LIMIT 1
     ) k ON TRUE`,
    jobName,
    maxRowsPerJob ?? null,
  );
  const row = rows[0];
  if (!row || row.newest_id === null) return undefined;
  const keepAt = toDateOrNull(row.keep_at, 'keep_at');
  const keepId = toBigIntTextOrNull(row.keep_id, 'keep_id');
  return {
    jobName,
    newestId: toBigIntText(row.newest_id, 'newest_id'),
    maxToken: toBigIntTextOrNull(row.max_token, 'max_token'),
    lastSuccessAt: toDateOrNull(row.last_success, 'last_success'),
    keepFrom: keepAt === null || keepId === null ? null : { at: keepAt, id: keepId },
  };
}

/**
 * Deletes up to `limit` of the job's oldest deletable rows scheduled at or after `from` in one
 * statement; returns how many and the newest slot deleted (where the next batch starts, so a pass
 * does not scan again the rows it deleted or kept).
 * Rows locked by a run that is writing them are skipped, never waited for. A row goes when its
 * kind has passed its age, or when it is older than the job's newest `maxRowsPerJob` rows, and
 * it is none of: running, queued, dead, awaiting a next attempt, the job's newest row, its
 * newest completion, its highest fencing token.
 */
export async function deleteBatch(
  prisma: PrismaClientLike,
  cuts: JobCuts,
  age: AgeCuts,
  limit: number,
  from: Date | null,
): Promise<{ deleted: number; last: Date | null }> {
  const beyondCount = `(scheduled_at, id) < ($7::timestamptz, $8::bigint)`;
  const rows = await queryRows(
    prisma,
    `WITH gone AS (DELETE FROM ${TABLE} WHERE id IN (
       SELECT id FROM ${TABLE}
       WHERE job_name = $1::text
         AND ($12::timestamptz IS NULL OR scheduled_at >= $12::timestamptz)
         AND id <> $2::bigint
         AND (fencing_token IS NULL OR fencing_token < $3::bigint)
         AND ($4::timestamptz IS NULL OR status NOT IN ('completed', 'completed_with_errors') OR finished_at < $4::timestamptz)
         AND (
           (status = ANY($10::text[]) AND (COALESCE(finished_at, updated_at) < $5::timestamptz OR ${beyondCount}))
           OR (status = ANY($11::text[]) AND next_attempt_at IS NULL
               AND (COALESCE(finished_at, updated_at) < $6::timestamptz OR ${beyondCount}))
         )
       ORDER BY scheduled_at
       LIMIT $9::integer
       FOR UPDATE SKIP LOCKED
     ) RETURNING scheduled_at)
     SELECT count(*)::int AS deleted, ${instantOut('max(scheduled_at)')} AS last FROM gone`,
    cuts.jobName,
    cuts.newestId,
    cuts.maxToken,
    cuts.lastSuccessAt,
    age.completedBefore,
    age.failedBefore,
    cuts.keepFrom?.at ?? null,
    cuts.keepFrom?.id ?? null,
    limit,
    [...COMPLETED_STATUSES],
    [...FAILED_STATUSES],
    from,
  );
  const row = rows[0];
  return { deleted: row ? toInt(row.deleted, 'deleted') : 0, last: row ? toDateOrNull(row.last, 'last') : null };
}

/**
 * Runs `work` in a transaction whose statements are cut off after `timeoutMs` (and never wait
 * longer than that for a lock), when the client has interactive transactions (a PrismaClient
 * has); otherwise runs it as is.
 */
export async function withStatementTimeout<T>(
  prisma: PrismaClientLike,
  timeoutMs: number,
  work: (client: PrismaClientLike) => Promise<T>,
): Promise<T> {
  const transaction = (prisma as { $transaction?: unknown }).$transaction;
  if (typeof transaction !== 'function') return work(prisma);
  const run = transaction as (fn: (tx: PrismaClientLike) => Promise<T>, options: { maxWait: number; timeout: number }) => Promise<T>;
  return run.call(
    prisma,
    async (tx) => {
      await queryRows(
        tx,
        `SELECT set_config('statement_timeout', $1::text, true)::text AS statement_timeout,
           set_config('lock_timeout', $1::text, true)::text AS lock_timeout`,
        `${Math.round(timeoutMs)}ms`,
      );
      return work(tx);
    },
    { maxWait: timeoutMs, timeout: timeoutMs * 2 },
  );
}
