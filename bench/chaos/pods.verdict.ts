/**
 * CronJob mode's part of the verdict: what the pods did (exit codes, the CLI's outcomes, the
 * faults they took), and one more way to see a duplicate: two pods of one slot that both exit 0
 * having run it (`outcome: 'ran'`). A pod exiting 0 with "already done" is the CronJob contract,
 * not a duplicate. The pods' handler lines, rows and lives go through the main verdict like the
 * instances' (duplicates, concurrency, losses, fencing).
 */
import type { PodRecord } from './pods.js';

export interface PodVerdict {
  jobs: string[];
  pods: number;
  slots: number;
  /** Slots of the window the controller started no pod for (Forbid: the job's previous pod still ran); not counted. */
  slotsWithoutPod: number;
  byReason: Record<string, number>;
  /** By exit code ('0', '1', '75', '69', ...) or ending signal ('SIGKILL'). */
  exitCodes: Record<string, number>;
  /** By the CLI's `--json` outcome (ran, lost, queued, skipped_overlap, unavailable, ...); 'none' when killed. */
  outcomes: Record<string, number>;
  faults: { kill: number; stop: number };
  /** Slots where two pods or more exited 0 having run the slot (each pod after the first counts). */
  doubleSuccess: number;
  /** Of those, not already counted as a duplicate start in the handler logs (added to the duplicate figure). */
  doubleSuccessUncounted: number;
  examples: unknown[];
}

const bump = (into: Record<string, number>, key: string): void => void (into[key] = (into[key] ?? 0) + 1);

export function podVerdict(pods: PodRecord[], jobs: string[], duplicateIds: ReadonlySet<string>, examples: number): PodVerdict {
  const byReason: Record<string, number> = {};
  const exitCodes: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  const faults = { kill: 0, stop: 0 };
  const ranOk = new Map<string, PodRecord[]>();
  for (const pod of pods) {
    bump(byReason, pod.why);
    bump(exitCodes, pod.exitCode === null || pod.exitCode === undefined ? (pod.life.exitSignal ?? 'none') : String(pod.exitCode));
    bump(outcomes, pod.outcome ?? 'none');
    if (pod.fault?.kind === 'pod-kill') faults.kill++;
    if (pod.fault?.kind === 'pod-stop') faults.stop++;
    if (pod.exitCode === 0 && pod.outcome === 'ran') {
      const list = ranOk.get(pod.executionId) ?? [];
      ranOk.set(pod.executionId, [...list, pod]);
    }
  }
  let doubleSuccess = 0;
  let uncounted = 0;
  const shown: unknown[] = [];
  for (const [id, list] of ranOk) {
    if (list.length < 2) continue;
    doubleSuccess += list.length - 1;
    if (!duplicateIds.has(id)) uncounted += list.length - 1;
    if (shown.length < examples) {
      shown.push({
        executionId: id,
        pods: list.map((p) => ({ pod: p.life.id, why: p.why, exit: p.exitCode, message: p.message, fault: p.fault })),
      });
    }
  }
  return {
    jobs,
    pods: pods.length,
    slots: new Set(pods.map((p) => p.executionId)).size,
    slotsWithoutPod: 0,
    byReason,
    exitCodes,
    outcomes,
    faults,
    doubleSuccess,
    doubleSuccessUncounted: uncounted,
    examples: shown,
  };
}
