/**
 * What `start()` settles with, or a rejection with `timeoutError()` once `ms` have passed, whichever
 * comes first (a reply already waiting to be read when the time is up counts as first). The timer
 * is cleared when the work settles, and the work's late rejection is never unhandled. The work
 * itself is not stopped: a caller that must not act on a late result checks for that itself (`timeoutError` runs when the time is up, so it can note it).
 */
export function withDeadline<T>(start: () => PromiseLike<T>, ms: number, timeoutError: () => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    // Timers run before the event loop reads its sockets: a reply that came while this process was
    // busy is read first (setImmediate runs after that), not taken for the other side's slowness.
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (!settled) reject(timeoutError());
        }),
      ms,
    );
    const done = (): void => {
      settled = true;
      clearTimeout(timer);
    };
    try {
      Promise.resolve(start()).then(
        (value) => {
          done();
          resolve(value);
        },
        (error: unknown) => {
          done();
          reject(error);
        },
      );
    } catch (error) {
      done();
      reject(error);
    }
  });
}
