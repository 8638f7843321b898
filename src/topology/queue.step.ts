import type { FireOutcome } from '../distributed-cron.interfaces.js';

/*
 * A queue-mode step as it travels on a queue: what the BullMQ bridge stores and the executor runs
 * (execution/queue.steps.ts).
 */

/** What a queue job asks a worker to do with one execution. */
export interface QueueStep {
  jobName: string;
  executionId: string;
  /**
   * `run`: its first start (the row is `queued`), or whatever its row says is due; `retry`: the due
   * attempt `ref`; `recover`: the run holding fencing token `ref` lost its owner; `replay`: a
   * replay of attempt `ref`.
   */
  kind: 'run' | 'retry' | 'recover' | 'replay';
  ref?: number;
}

/** Puts a step on the named queue; a step already waiting or running there is not added twice. */
export interface QueueLink {
  enqueue(step: QueueStep, queue: string): Promise<void>;
}

/** What a worker's step led to; `later`: put the queue job back for `renewEvery` and look again. */
export type StepResult = FireOutcome | 'later';

const ID_SUFFIX: Record<QueueStep['kind'], string> = { run: '', retry: '#a', recover: '#r', replay: '#p' };

/**
 * The queue job ID of a step: the execution ID for its first run, so a duplicate enqueue is a
 * no-op. BullMQ refuses ':' and integers in custom IDs, so the ID is URI-encoded (':' → '%3A')
 * and a numeric one gets a '#'.
 */
export function queueJobId(step: QueueStep): string {
  const encoded = encodeURIComponent(step.executionId);
  const id = step.kind === 'run' ? encoded : `${encoded}${ID_SUFFIX[step.kind]}${step.ref ?? ''}`;
  return /^\d+$/.test(id) ? `#${id}` : id;
}
