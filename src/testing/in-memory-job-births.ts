import type { JobBirths, JobIdentity } from '../history/job-births.js';

/** Job births in process memory: the earliest `seenAt` per job and its current expression and zone. */
export class InMemoryJobBirths implements JobBirths {
  private readonly births = new Map<string, { expression: string; timeZone: string; bornAt: Date }>();

  async record(jobs: readonly JobIdentity[], seenAt: Date): Promise<Map<string, Date>> {
    const result = new Map<string, Date>();
    for (const { jobName, expression, timeZone } of jobs) {
      let birth = this.births.get(jobName);
      if (!birth || birth.expression !== expression || birth.timeZone !== timeZone) {
        birth = { expression, timeZone, bornAt: new Date(seenAt.getTime()) };
        this.births.set(jobName, birth);
      } else if (seenAt.getTime() < birth.bornAt.getTime()) {
        birth.bornAt = new Date(seenAt.getTime());
      }
      result.set(jobName, new Date(birth.bornAt.getTime()));
    }
    return result;
  }
}
