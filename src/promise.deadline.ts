/**
 * What `start()` settles with, or a rejection with `timeoutError()` once `ms` have passed, whichever
 * comes first. The timer is cleared when the work settles, and the work's late rejection is never
 * unhandled. The work itself is not stopped: a caller that must not act on a late result checks
 * for that itself (`timeoutError` runs when the time is up, so it can note it).
 */
export function withDeadline<T>(start: () => PromiseLike<T>, ms: number, timeoutError: () => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timeoutError()), ms);
    const done = (): void => clearTimeout(timer);
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
