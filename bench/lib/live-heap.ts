import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * What a process holds on to: the heap a full garbage collection leaves. RSS also counts the
 * garbage V8 has not collected yet, and under a steady load V8 lets the old generation grow to a
 * multiple of the live heap before it runs a full collection (a minute can pass without one), so
 * RSS alone rises for a while under a load that retains nothing.
 */
export class LiveHeap {
  /** [Date.now(), MB] left by each full collection `collectNow` ran. */
  readonly readings: Array<[number, number]> = [];

  /** A full collection now, and what it left. It pauses the process as long as one V8 runs by itself. */
  collectNow(): void {
    setFlagsFromString('--expose-gc');
    (runInNewContext('gc') as () => void)();
    this.readings.push([Date.now(), Math.round(getHeapStatistics().used_heap_size / 1_048_576)]);
  }
}
