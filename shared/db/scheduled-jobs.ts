// Jobs that run on a timer (token pruning, storage maintenance) run once per interval across every
// server process on the database, not once per process: each process looks at a job's row in
// `public.scheduled_jobs` on its own timer, and the one statement that finds it due also moves its
// next run past a lease, so that whichever process claims it first runs it and the others see it
// not due. The run's end sets the next run one interval later; a process that dies mid-run leaves
// the lease to run out, and another runs the job then (the jobs are idempotent, so a run cut
// short is simply done again). One statement per look and no session state: it works through a
// transaction-pooling proxy.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../common/logger.ts';
import { describeError, isDatabaseUnavailable } from './errors.ts';
import { rows } from './sql.ts';

/** How long a claimed run may take before another process may run the job again. */
export const RUN_LEASE_MS = 15 * 60_000;
/** A process looks at a job at least this often (and at most once per interval). */
const MAX_LOOK_MS = 30_000;

export interface ScheduledJob {
  stop(): Promise<void>;
}

/**
 * Claims the job `name` when it is due, for `leaseMs`: one statement; the run's number for the one
 * process whose statement found it due (the row is locked by the first, the others re-read it once
 * it commits), else undefined.
 */
export async function claimRun(em: EntityManager, name: string, owner: string, leaseMs = RUN_LEASE_MS): Promise<number | undefined> {
  const [row] = await rows<{ runs: string }>(
    em,
    `INSERT INTO public.scheduled_jobs AS j (name, next_run_at, runs, last_started_at, last_owner)
     VALUES (?, now() + make_interval(secs => ?), 1, now(), ?)
     ON CONFLICT (name) DO UPDATE SET next_run_at = EXCLUDED.next_run_at, runs = j.runs + 1, last_started_at = now(), last_owner = EXCLUDED.last_owner
       WHERE j.next_run_at <= now()
     RETURNING runs`,
    [name, leaseMs / 1000, owner],
  );
  return row ? Number(row.runs) : undefined;
}

/** Ends the run `run` of `name`: the next one due `intervalMs` from now (unless another process took the job over meanwhile). */
async function finishRun(em: EntityManager, name: string, run: number, intervalMs: number, error: string | null): Promise<void> {
  await em.execute(
    `UPDATE public.scheduled_jobs SET next_run_at = now() + make_interval(secs => ?), last_finished_at = now(), last_error = ?
      WHERE name = ? AND runs = ?`,
    [intervalMs / 1000, error, name, run],
  );
}

/**
 * Runs `job` once every `intervalMs` across the processes sharing the database. This process
 * looks every min(intervalMs, 30 s), the first time that long after it starts, and runs the job
 * when its claim succeeds. Unref'd: it never keeps the process alive.
 */
export function scheduleClusterWide(
  options: { em: () => EntityManager; log: Logger; owner: string; leaseMs?: number },
  name: string,
  intervalMs: number,
  job: () => Promise<Record<string, unknown> | undefined>,
): ScheduledJob {
  const { log } = options;
  let stopped = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout;
  const lookEvery = Math.min(intervalMs, MAX_LOOK_MS);
  const look = async () => {
    const em = options.em();
    const run = await claimRun(em, name, options.owner, options.leaseMs);
    if (run === undefined) return;
    let error: string | null = null;
    try {
      const done = await job();
      if (done) log.info(done, `${name} done`);
    } catch (err) {
      error = describeError(err);
      throw err;
    } finally {
      await finishRun(em, name, run, intervalMs, error).catch(() => undefined);
    }
  };
  const tick = () => {
    running = look().catch(
      // The database gone: one line without a stack (requests log the outage itself: http/errors.ts).
      (err: unknown) => log.warn(isDatabaseUnavailable(err) ? { error: describeError(err) } : { err }, `${name} failed`),
    );
    void running.then(() => {
      if (!stopped) timer = setTimeout(tick, lookEvery).unref();
    });
  };
  timer = setTimeout(tick, lookEvery).unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
