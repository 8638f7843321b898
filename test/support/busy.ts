/** Blocks this process's event loop for `ms`, as a long synchronous task or a GC pause does. */
export function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}
