/**
 * The run history's read model: what the dashboard shows (job summaries, counts, the timeline,
 * history pages, charts). Reads only; `PrismaRunReadModel` is the PostgreSQL implementation. Rows
 * by execution ID, lists and the last success are `RunReads`, one of the run history's ports.
 */
import type { RunRecord, RunStatus, RunTrigger } from '../distributed-cron.interfaces.js';

export interface HistoryCursor {
  scheduledAt: Date;
  id: string;
}

export interface HistoryPageQuery {
  jobName?: string;
  statuses?: RunStatus[];
  trigger?: RunTrigger;
  /** Scheduled at or after. */
  from?: Date;
  /** Scheduled before. */
  to?: Date;
  executionId?: string;
  /** Only the runs of this schedule (`DistributedCronService.schedules`). */
  scheduleId?: string;
  /** The page starts after this row. */
  after?: HistoryCursor;
  limit: number;
}

export interface HistoryPage {
  rows: RunRecord[];
  /** Where the next page starts; absent on the last page. */
  next?: string;
}

export interface JobSummaryRow {
  jobName: string;
  last: RunRecord | undefined;
  lastSuccess: Date | undefined;
  /** When the fleet first saw the job with its current expression and zone. */
  firstSeen: Date | undefined;
}

export interface DayCount {
  day: string;
  status: RunStatus;
  count: number;
}

export interface JobTimings {
  jobName: string;
  runs: number;
  durationP50: number | null;
  durationP95: number | null;
  delayP50: number | null;
  delayP95: number | null;
}

export interface RunReadModel {
  /** A page of rows, newest first (keyset pagination). */
  historyPage(query: HistoryPageQuery): Promise<HistoryPage>;
  /** Rows per job and status scheduled since `since`. */
  counts(jobNames: string[], since: Date): Promise<Map<string, Partial<Record<RunStatus, number>>>>;
  /** Each job's last row, last success and first sighting. */
  jobSummaries(jobNames: string[]): Promise<Map<string, JobSummaryRow>>;
  /** `running` rows of these jobs. */
  running(jobNames: string[]): Promise<RunRecord[]>;
  /** Rows of these jobs scheduled since `since`, at most `limit`. */
  timeline(jobNames: string[], since: Date, limit: number): Promise<RunRecord[]>;
  /** Rows per day (in `timeZone`) and status since `since`. */
  perDay(jobNames: string[], since: Date, timeZone: string): Promise<DayCount[]>;
  /** Duration and start delay percentiles per job since `since`. */
  timings(jobNames: string[], since: Date): Promise<JobTimings[]>;
}
