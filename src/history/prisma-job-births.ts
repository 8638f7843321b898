import type { PrismaClientLike } from '../distributed-cron.interfaces.js';
import type { JobBirths, JobIdentity } from './job-births.js';

import { instantOut, queryRows, toDate, toText } from './raw-sql.js';

/** Table of the `DistributedCronJob` model (see prisma/schema/distributed-cron.prisma). */
const TABLE = 'distributed_cron_jobs';
const RUNS = 'distributed_cron_runs';

/**
 * Job births in the user's database, one statement per start-up for all jobs. The row lock of
 * `ON CONFLICT DO UPDATE` makes each change a compare-and-set: the same expression and zone keep
 * the earliest sighting; another one starts a new birth.
 *
 * A job seen for the first time that already has rows in the run history (it ran before this
 * table existed) is taken to be born at its oldest slot, so the first start-up after an upgrade
 * still catches up what it missed.
 */
export class PrismaJobBirths implements JobBirths {
  constructor(private readonly prisma: PrismaClientLike) {}

  async record(jobs: readonly JobIdentity[], seenAt: Date): Promise<Map<string, Date>> {
    if (jobs.length === 0) return new Map();
    const rows = await queryRows(
      this.prisma,
      `INSERT INTO ${TABLE} AS j (job_name, expression, time_zone, first_seen_at)
       SELECT v.job_name, v.expression, v.time_zone,
              LEAST($4::timestamptz, (SELECT min(r.scheduled_at) FROM ${RUNS} r WHERE r.job_name = v.job_name))
       FROM unnest($1::text[], $2::text[], $3::text[]) AS v(job_name, expression, time_zone)
       ON CONFLICT (job_name) DO UPDATE SET
         first_seen_at = CASE WHEN j.expression = EXCLUDED.expression AND j.time_zone = EXCLUDED.time_zone
                              THEN LEAST(j.first_seen_at, $4::timestamptz) ELSE $4::timestamptz END,
         expression = EXCLUDED.expression,
         time_zone = EXCLUDED.time_zone
       RETURNING j.job_name, ${instantOut('j.first_seen_at')} AS first_seen_at`,
      jobs.map((job) => job.jobName),
      jobs.map((job) => job.expression),
      jobs.map((job) => job.timeZone),
      seenAt,
    );
    return new Map(rows.map((row) => [toText(row.job_name, 'job_name'), toDate(row.first_seen_at, 'first_seen_at')]));
  }
}
