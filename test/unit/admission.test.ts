/**
 * Admission control of scheduled slots, on a hand-moved clock: which slots start, in what order,
 * which are shed and with what reason, how the limit follows the pipeline's latency, and one log
 * line per overload episode.
 */
import type { LoggerService } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { Admission, EPISODE_QUIET_MS, startBudgetMs, type AdmissionTuning } from '../../src/execution/admission.js';
import { OverloadEpisode } from '../../src/execution/overload.episode.js';
import { busy } from '../support/busy.js';

interface Slot {
  job: string;
  slotMs: number;
  done?: (answered: boolean) => void;
  shed?: string;
}

function rig(tuning: AdmissionTuning = {}) {
  const clock = { now: 1_000_000 };
  const lines: Array<{ level: string; message: string }> = [];
  const logger: LoggerService = {
    log: (message: string) => void lines.push({ level: 'log', message }),
    warn: (message: string) => void lines.push({ level: 'warn', message }),
    error: (message: string) => void lines.push({ level: 'error', message }),
  };
  const admission = new Admission({ clock: () => clock.now, logger }, tuning);
  /** Slots in the order they were started. */
  const started: Slot[] = [];
  /** Every slot started, by job, in order. */
  const startLog: string[] = [];
  const shed: Slot[] = [];
  const submit = (job: string, slotMs: number, budgetMs = 500): Slot => {
    const slot: Slot = { job, slotMs };
    admission.submit({
      job,
      slotMs,
      budgetMs,
      start: (done) => {
        slot.done = done;
        started.push(slot);
        startLog.push(job);
      },
      shed: (why) => {
        slot.shed = why;
        shed.push(slot);
      },
    });
    return slot;
  };
  /** Ends the start pipeline of every started slot not ended yet, `ms` after it was started. */
  const finishAll = (ms: number): void => {
    clock.now += ms;
    for (const slot of started.splice(0)) slot.done?.(true);
  };
  /**
   * Measures the pipeline with a backlog (limit pinned at 1): five slots, each taking `ms`, so
   * its rate is one slot per `ms` and its latency `ms`. Leaves it empty.
   */
  const measure = (ms: number): void => {
    for (let i = 0; i < 5; i++) submit(`warm-${i}`, clock.now + 250, 60_000);
    for (let i = 0; i < 5; i++) finishAll(ms);
    startLog.splice(0);
  };
  return { admission, clock, lines, started, startLog, shed, submit, finishAll, measure };
}

describe('start budget', () => {
  it('is half the shortest period, at most the catch-up window, at least 250 ms', () => {
    expect(startBudgetMs({ minPeriodMs: 1_000, catchUpWindowMs: 1_000 })).toBe(500);
    expect(startBudgetMs({ minPeriodMs: 86_400_000, catchUpWindowMs: 86_400_000 })).toBe(43_200_000);
    expect(startBudgetMs({ minPeriodMs: 3_600_000, catchUpWindowMs: 300_000 })).toBe(300_000);
    expect(startBudgetMs({ minPeriodMs: 100, catchUpWindowMs: 100 })).toBe(250);
  });
});

describe('admission', () => {
  it('starts slots up to its limit at once and the rest in slot order as room frees up', () => {
    const { submit, startLog, shed, finishAll, clock } = rig({ initialLimit: 2, minLimit: 2, maxLimit: 2 });
    const t = clock.now + 250;
    submit('a', t);
    submit('b', t);
    submit('late', t + 1_000);
    submit('early', t - 200);
    submit('c', t);
    expect(startLog).toEqual(['a', 'b']);
    finishAll(10);
    expect(startLog).toEqual(['a', 'b', 'early', 'c']);
    finishAll(10);
    expect(startLog).toEqual(['a', 'b', 'early', 'c', 'late']);
    expect(shed).toEqual([]);
  });

  it('keeps one waiting slot per job: a newer slot of the job sheds the waiting one, with a reason', () => {
    const { submit, started, shed, finishAll, clock } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    submit('busy', clock.now + 250);
    const first = submit('job', clock.now + 250, 10_000);
    const second = submit('job', clock.now + 1_250, 10_000);
    expect(shed).toEqual([first]);
    expect(first.shed).toBe('not started: this instance was overloaded (the next slot of the job came while it still waited to start)');
    finishAll(5);
    expect(started.map((s) => s.job)).toEqual(['job']);
    expect(started[0]).toBe(second);
  });

  it('sheds no slot on a prediction: a long line waits, starts in slot order, and only the slots whose budget ran out are shed', () => {
    const { submit, startLog, shed, finishAll, clock, admission, measure } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    // A slow pipeline: 100 ms per slot.
    measure(100);
    const slotMs = clock.now + 250;
    submit('running', slotMs);
    // Budget 500 ms after the instant, 250 ms ahead of it: 750 ms from now at 100 ms a slot.
    const slots = Array.from({ length: 10 }, (_, i) => submit(`job-${i}`, slotMs));
    expect(shed).toEqual([]);
    expect(admission.reading()).toMatchObject({ inFlight: 1, waiting: 10 });
    for (let i = 0; i < 8; i++) {
      finishAll(100);
      admission.check();
    }
    const ran = startLog.filter((job) => job.startsWith('job-'));
    // Every slot either started by its budget, once, or was shed with the reason.
    expect(new Set(ran).size).toBe(ran.length);
    expect(ran.length).toBeGreaterThanOrEqual(6);
    for (const slot of slots.filter((s) => !ran.includes(s.job))) {
      expect(slot.shed).toMatch(/^not started: this instance was overloaded \(start delay estimate \d+\.\d s > budget 0\.5 s\)$/);
    }
    expect(ran.length + shed.length).toBe(10);
    expect(admission.reading()).toMatchObject({ waiting: 0 });
  });

  it('sheds fairly: the jobs shed at one slot go first at the next, so no job is kept out while others run every second', () => {
    const { submit, startLog, shed, finishAll, clock, admission, measure } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    measure(100);
    const jobs = Array.from({ length: 10 }, (_, i) => `job-${i}`);
    const streaks = new Map<string, number>();
    let longest = 0;
    for (let second = 0; second < 8; second++) {
      const slotMs = clock.now + 250;
      startLog.splice(0);
      shed.splice(0);
      submit('running', slotMs);
      // Submitted in the same order every second, as a fixed list of timers would.
      for (const job of jobs) submit(job, slotMs);
      for (let i = 0; i < 10 && admission.reading().inFlight + admission.reading().waiting > 0; i++) {
        finishAll(100);
        admission.check();
      }
      expect(shed.length, `second ${second}`).toBeGreaterThan(0);
      for (const job of jobs) {
        const streak = startLog.includes(job) ? 0 : (streaks.get(job) ?? 0) + 1;
        streaks.set(job, streak);
        longest = Math.max(longest, streak);
      }
      clock.now = slotMs + 750;
    }
    // About four of ten are shed every second: none is shed twice in a row.
    expect(longest).toBe(1);
  });

  it('sheds nothing on a guess: a slot waits, and is shed only when its budget runs out', () => {
    const { submit, shed, clock } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    submit('running', clock.now + 250);
    for (let i = 0; i < 50; i++) submit(`job-${i}`, clock.now + 250);
    expect(shed).toEqual([]);
  });

  it('sheds a waiting slot once its start can no longer be in time, instead of starting it late', () => {
    const { submit, started, shed, clock, admission } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const stuck = submit('stuck', clock.now);
    const waiting = submit('waiting', clock.now + 250);
    expect(shed).toEqual([]);
    clock.now += 751;
    admission.check();
    expect(shed).toEqual([waiting]);
    expect(waiting.shed).toMatch(/start delay estimate 0\.5 s > budget 0\.5 s/);
    stuck.done!(true);
    expect(started.map((s) => s.job)).toEqual(['stuck']);
  });

  it('sheds a slot that arrives at an overloaded instance already past its budget, instead of claiming it late', () => {
    const { submit, startLog, shed, clock } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    submit('running', clock.now + 250);
    const waiting = submit('waiting', clock.now + 250, 10_000);
    const late = submit('late', clock.now - 3_000);
    expect(shed).toEqual([late]);
    expect(late.shed).toMatch(/^not started: this instance was overloaded \(start delay estimate 3\.0 s > budget 0\.5 s\)$/);
    expect(startLog).toEqual(['running']);
    expect(waiting.shed).toBeUndefined();
  });

  it('starts a late slot when the instance is not overloaded (a clock that jumped is not load)', () => {
    const { submit, startLog, shed, clock } = rig();
    submit('late', clock.now - 3_000);
    expect(shed).toEqual([]);
    expect(startLog).toEqual(['late']);
  });

  it('lets every slot through when nothing answers (an outage, not load): each fails closed with its own reason', () => {
    const { submit, startLog, shed, clock, admission } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const stuck = submit('stuck', clock.now);
    clock.now += 100;
    submit('waits', clock.now + 5_000, 10_000);
    expect(startLog).toEqual(['stuck']);
    expect(admission.overloaded()).toBe(true);
    // No answer for 2 s: Redis or the database is not answering.
    clock.now += 2_001;
    expect(admission.overloaded()).toBe(false);
    admission.check();
    expect(startLog).toEqual(['stuck', 'waits']);
    submit('next', clock.now + 250);
    expect(startLog).toEqual(['stuck', 'waits', 'next']);
    expect(shed).toEqual([]);
    // An answer ends the outage: the limit holds again.
    stuck.done!(true);
    submit('after', clock.now + 250, 10_000);
    expect(startLog).toEqual(['stuck', 'waits', 'next']);
    expect(admission.reading()).toMatchObject({ waiting: 1 });
  });

  it('does not take the missing answers of a lagging event loop for an outage: the limit holds', () => {
    const { submit, startLog, shed, clock, admission } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    submit('stuck', clock.now);
    // The event loop is 400 ms late for the check (a synchronous stretch of work): this instance
    // is too busy to read its answers, which says nothing about Redis or the database.
    admission.check();
    busy(500);
    clock.now += 100;
    admission.check();
    submit('waits', clock.now + 5_000, 10_000);
    clock.now += 2_001;
    expect(admission.overloaded()).toBe(true);
    submit('next', clock.now + 5_000, 10_000);
    expect(startLog).toEqual(['stuck']);
    expect(admission.reading()).toMatchObject({ inFlight: 1, waiting: 2 });
    expect(shed).toEqual([]);
  });

  it('does not take a pipeline slowed by load for an outage while Redis and the database answer other calls', () => {
    const { submit, startLog, shed, clock, admission } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const stuck = submit('stuck', clock.now);
    submit('waits', clock.now + 5_000, 10_000);
    // Its row waits behind the shed slots' rows, which the database writes all along, while
    // Redis answers other claims.
    for (let i = 0; i < 4; i++) {
      clock.now += 600;
      admission.heard('redis');
      admission.heard('database');
    }
    expect(admission.overloaded()).toBe(true);
    admission.check();
    expect(startLog).toEqual(['stuck']);
    // The database stops answering: an outage, every slot goes through and fails closed.
    for (let i = 0; i < 4; i++) {
      clock.now += 600;
      admission.heard('redis');
    }
    admission.check();
    expect(startLog).toEqual(['stuck', 'waits']);
    expect(shed).toEqual([]);
    stuck.done!(true);
  });

  it('tells a wait its load explains from one that met the load only at its end (Redis away for a moment, then a busy second)', () => {
    const { submit, clock, admission, finishAll } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const ticks = (n: number): void => {
      for (let i = 0; i < n; i++) {
        clock.now += 100;
        admission.heard('redis');
        admission.heard('database');
        admission.check();
      }
    };
    const slotMs = clock.now;
    submit('stuck', slotMs);
    ticks(26);
    expect(admission.overloadedThrough(slotMs)).toBe(false);
    // Slots wait from 2.6 s after the instant on: overloaded for the last 0.3 s of a 3 s wait.
    submit('waits', clock.now + 5_000, 60_000);
    ticks(4);
    expect(admission.overloaded()).toBe(true);
    expect(admission.overloadedThrough(slotMs)).toBe(false);
    expect(admission.overloadedThrough(clock.now - 500)).toBe(true);
    // Overloaded for longer than it was not: the load explains the wait.
    ticks(30);
    expect(admission.overloadedThrough(slotMs)).toBe(true);
    // A break shorter than a second does not end the stretch; a longer one does.
    finishAll(0);
    ticks(5);
    expect(admission.overloaded()).toBe(false);
    expect(admission.overloadedThrough(slotMs)).toBe(false);
    submit('again', clock.now + 5_000, 60_000);
    ticks(1);
    expect(admission.overloadedThrough(slotMs)).toBe(true);
    finishAll(0);
    ticks(11);
    submit('after the break', clock.now + 5_000, 60_000);
    ticks(1);
    expect(admission.overloaded()).toBe(true);
    expect(admission.overloadedThrough(slotMs)).toBe(false);
  });

  it('does not put a wait through an outage down to the load that followed it', () => {
    const { submit, clock, admission } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const slotMs = clock.now;
    const stuck = submit('stuck', slotMs);
    // Nothing answers for 2.5 s: Redis or the database is away.
    for (let i = 0; i < 25; i++) {
      clock.now += 100;
      admission.check();
    }
    stuck.done!(true);
    // Then a busy stretch twice as long: slots wait while Redis and the database answer.
    submit('a', clock.now + 5_000, 60_000);
    submit('b', clock.now + 5_000, 60_000);
    for (let i = 0; i < 50; i++) {
      clock.now += 100;
      admission.heard('redis');
      admission.heard('database');
      admission.check();
    }
    expect(admission.overloaded()).toBe(true);
    expect(admission.overloadedThrough(slotMs)).toBe(false);
    expect(admission.overloadedThrough(clock.now - 4_000)).toBe(true);
  });

  it('counts the time its event loop was blocked as overloaded (no check could see it)', () => {
    const { clock, admission } = rig();
    admission.check();
    busy(600);
    clock.now += 600;
    admission.check();
    expect(admission.overloaded()).toBe(true);
    expect(admission.overloadedThrough(clock.now - 800)).toBe(true);
  });

  it('raises its limit while latency stays at its no-load level and lowers it when latency climbs past the start budget', () => {
    const { submit, finishAll, clock, admission } = rig({ initialLimit: 16, minLimit: 4, maxLimit: 1_000 });
    const fill = (n: number): void => {
      for (let i = 0; i < n; i++) submit(`job-${i}`, clock.now + 250, 500);
    };
    for (let round = 0; round < 20; round++) {
      fill(admission.reading().limit);
      finishAll(10);
    }
    const grown = admission.reading().limit;
    expect(grown).toBeGreaterThan(16);
    for (let round = 0; round < 20; round++) {
      fill(admission.reading().limit);
      finishAll(600);
    }
    expect(admission.reading().limit).toBeLessThan(grown / 4);
    expect(admission.reading().limit).toBeGreaterThanOrEqual(4);
  });

  it('holds its limit while latency rises but stays well within the start budget (a machine busy with the whole fleet)', () => {
    const { submit, finishAll, clock, admission } = rig({ initialLimit: 64, minLimit: 4, maxLimit: 1_000 });
    const round = (ms: number): void => {
      const limit = admission.reading().limit;
      for (let i = 0; i < limit; i++) submit(`job-${i}`, clock.now + 250, 1_000);
      finishAll(ms);
    };
    for (let i = 0; i < 10; i++) round(10);
    const before = admission.reading().limit;
    // Fifteen times the no-load latency, yet 150 ms of a 1 s budget: the slots let in start in time.
    for (let i = 0; i < 20; i++) round(150);
    expect(admission.reading().limit).toBeGreaterThanOrEqual(before);
  });

  it('regains its limit within a few windows once latency is low again', () => {
    const { submit, finishAll, clock, admission } = rig({ initialLimit: 32, minLimit: 32, maxLimit: 1_000 });
    let rounds = 0;
    while (admission.reading().limit < 256 && rounds < 100) {
      const limit = admission.reading().limit;
      for (let i = 0; i < limit; i++) submit(`job-${i}`, clock.now + 250, 500);
      finishAll(20);
      rounds++;
    }
    // Growing by about its square root per window, as at latency near what counts as queueing,
    // takes about 40 windows from 32 to 256 (half of each window's samples adapt the limit); by a
    // quarter per window, 15. A spike (a collection, a stalled second) cost seconds of goodput.
    expect(rounds).toBeLessThanOrEqual(11);
  });

  it('keeps its limit down while the pipeline stays as slow as the start budgets, however long that lasts', () => {
    const { submit, finishAll, clock, admission } = rig({ initialLimit: 256, minLimit: 4, maxLimit: 1_000 });
    // 60 s of a pipeline taking 600 ms, for slots with a 500 ms budget: longer than the no-load
    // latency remembers, so that memory alone would take 600 ms for the no-load latency.
    for (let round = 0; round < 100; round++) {
      const limit = admission.reading().limit;
      for (let i = 0; i < limit; i++) submit(`job-${i}`, clock.now + 10_000, 500);
      finishAll(600);
    }
    expect(admission.reading().limit).toBeLessThan(64);
  });

  it('logs one line when an overload episode starts and one when it ends, not one per slot', () => {
    const { submit, finishAll, clock, admission, lines, measure } = rig({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    measure(100);
    submit('running', clock.now + 250);
    for (let i = 0; i < 50; i++) submit(`job-${i}`, clock.now + 250);
    // Nothing is shed while the slots can still start in time.
    expect(lines).toEqual([]);
    // Their budget (0.5 s after the instant, 0.25 s from now) runs out with the pipeline still busy.
    clock.now += 800;
    admission.check();
    expect(lines.filter((l) => l.level === 'warn')).toHaveLength(1);
    expect(lines[0]!.message).toMatch(/^overload: this instance cannot start every scheduled slot in time/);
    expect(admission.overloaded()).toBe(true);
    for (let i = 0; i < 10; i++) finishAll(100);
    clock.now += EPISODE_QUIET_MS;
    admission.check();
    expect(lines.map((l) => l.level)).toEqual(['warn', 'log']);
    expect(lines[1]!.message).toMatch(/^overload ended: 50 slot\(s\) of 50 job\(s\) shed over 0\.0 s$/);
    expect(admission.overloaded()).toBe(false);
  });

  it('names the young generation in the last line of an episode that shed thousands of slots a second for seconds', () => {
    const lines: Array<{ level: string; message: string }> = [];
    const logger = {
      log: (m: string) => lines.push({ level: 'log', message: m }),
      warn: (m: string) => lines.push({ level: 'warn', message: m }),
    };
    const clock = { now: 1_000_000 };
    const run = (perSecond: number, secondsLong: number): string => {
      lines.length = 0;
      const episode = new OverloadEpisode(() => clock.now, logger as never);
      for (let s = 0; s <= secondsLong; s++, clock.now += 1_000) {
        for (let i = 0; i < perSecond; i++) episode.noteShed(`job-${i}`, 'not started: load', () => 'event loop 0 ms behind');
      }
      clock.now += EPISODE_QUIET_MS;
      episode.end(false, 0);
      return lines.at(-1)!.message;
    };
    expect(run(2_000, 6)).toMatch(
      /; at \d+ shed a second, start this process with a larger young generation \(NODE_OPTIONS=--max-semi-space-size=64\)/,
    );
    // Fewer a second, or a burst shorter than the quiet time: the plain line.
    expect(run(500, 6)).toMatch(/^overload ended: 3500 slot\(s\) of 500 job\(s\) shed over 6\.0 s$/);
    expect(run(5_000, 2)).toMatch(/^overload ended: 15000 slot\(s\) of 5000 job\(s\) shed over 2\.0 s$/);
  });
});
