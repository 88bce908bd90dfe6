// Long loops over one request's input (a bulk write's 10,000 records) give the event loop back
// while they run: other requests, of every site, are served in between. The change feed has its
// own scheduler (realtime/feed.ts turns; docs/realtime.md "Fairness"): many deliveries take
// turns there, in order.

/** How long such a loop may run before it lets the event loop serve something else. */
const PACE_MS = 5;

/**
 * A pacer for one loop: call it after each step; it answers a promise to await (a turn of the
 * event loop: I/O is served first) once the loop has run PACE_MS since it last waited, else
 * undefined (go on at once).
 */
export function pacer(): () => Promise<void> | undefined {
  let since = performance.now();
  return () => {
    if (performance.now() - since < PACE_MS) return undefined;
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        since = performance.now();
        resolve();
      }),
    );
  };
}
