// Where functions run: the sandbox pool of this process, the PostgreSQL job queue every server
// process shares (public.function_jobs), and one execute() that runs an invocation record and
// stores its outcome — the queue's and the events' alike.
//
// The queue: an execution is queued by inserting its invocation record and its job row in the
// caller's transaction (nothing runs unless the caller commits). A process claims ready rows with
// `FOR UPDATE SKIP LOCKED` and a lease (LEASE_SECONDS) that it renews while the function runs; a
// process that dies leaves its rows to be claimed again once their lease runs out (execution is
// at least once; after MAX_ATTEMPTS claims an invocation is failed, not retried). New unclaimed
// rows notify `function-jobs` (a trigger), so idle processes claim them at once; a poll every
// POLL_MS covers lost notifications and expired leases. A synchronous invocation is queued
// already claimed by the process that answers it, which runs it at once: one statement records,
// claims and reads what the run needs, one more stores the outcome and removes the job row
// (issue 33). docs/functions.md.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { signToken, type TokenSettings } from '../auth/tokens.ts';
import type { Logger } from '../common/logger.ts';
import type { FaultLog } from '../db/availability.ts';
import type { ChangeListener } from '../db/changes.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import type { Orm } from '../db/orm.ts';
import { clustersOf, PRIMARY_CLUSTER } from '../db/clusters.ts';
import { preparedRows, rows } from '../db/sql.ts';
import { DomainError } from '../errors.ts';
import type { SecretKeyring } from '../secrets/crypto.ts';
import { appSecretsSql, openSecrets, type StoredSecret } from '../secrets/secret.service.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { failedOutcome, type RunOutcome, type SandboxLimits } from './sandbox/engine.ts';
import { SandboxPool, type ApiTarget } from './sandbox/pool.ts';
import { UserEvents } from './events.service.ts';
import { masker, maskDeep, secretForms } from './masking.ts';

export interface FunctionsConfig {
  /** Sandbox threads of a process (FUNCTION_WORKERS). */
  workers: number;
  /** Invocations one thread runs at once (FUNCTION_WORKER_CONCURRENCY): they interleave where handlers await the SDK. */
  workerConcurrency: number;
  /** CPU time of one invocation (FUNCTION_CPU_LIMIT_MS). */
  cpuLimitMs: number;
  /** Memory of one invocation's QuickJS runtime (FUNCTION_MEMORY_LIMIT_MB). */
  memoryLimitMb: number;
  /** Whether this process claims queued executions (FUNCTION_QUEUE_ENABLED; the CLI's direct mode never does). */
  queueEnabled: boolean;
  /** Whether a server starts its sandbox threads at start (FUNCTION_PREWARM) rather than on first use. */
  prewarm: boolean;
  /** The API base URL the SDK calls (FUNCTION_API_URL); default: the server's own address. */
  apiUrl: string | undefined;
  /** Sandbox threads one site may hold at once (FUNCTION_SITE_THREADS; default half of them). */
  siteThreads: number;
  /** The share of one thread's time a site's functions may use while other sites invoke theirs (FUNCTION_SITE_CPU_PERCENT). */
  siteCpuPercent: number;
  /** A site's invocations that may wait in a process for a thread (FUNCTION_SITE_QUEUE); past it, 429. */
  siteQueue: number;
  /** A site's queued (async) executions not yet claimed (FUNCTION_SITE_BACKLOG); past it, 429. */
  siteBacklog: number;
}

export const LEASE_SECONDS = 60;

/**
 * Claims for `owner` at most `limit` ready jobs (unclaimed, or their lease run out), fairly: the
 * oldest of each site first, in turns, at most `perSite` of each, none of the sites in `skip`. The
 * lease condition is checked again at the level that locks (`FOR UPDATE SKIP LOCKED`): a row
 * another process claimed and committed after this statement's snapshot is re-read there when
 * locked, and only that level's conditions are re-checked on the new version (the inner
 * selection's are not): without it, both processes would run the job.
 */
export function claimJobs(em: EntityManager, owner: string, skip: string[], perSite: number, limit: number) {
  return rows<{ id: string; site_schema: string; invocation_id: string; attempts: number }>(
    em,
    `UPDATE public.function_jobs j SET locked_by = ?, locked_until = now() + make_interval(secs => ?), attempts = j.attempts + 1
      WHERE j.id IN (
        SELECT id FROM public.function_jobs WHERE id IN (
          SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY site_schema ORDER BY locked_until NULLS FIRST, id) AS turn
                            FROM public.function_jobs
                           WHERE (locked_until IS NULL OR locked_until < now()) AND NOT site_schema IN (SELECT jsonb_array_elements_text(?::jsonb))) ready
           WHERE turn <= ? ORDER BY turn, id LIMIT ?)
          AND (locked_until IS NULL OR locked_until < now())
        FOR UPDATE SKIP LOCKED)
      RETURNING j.id, j.site_schema, j.invocation_id, j.attempts`,
    [owner, LEASE_SECONDS, JSON.stringify(skip), perSite, limit],
  );
}
export const MAX_ATTEMPTS = 3;
const POLL_MS = 2000;
const MAX_LOG_BYTES = 64 * 1024;
const MAX_RESULT_BYTES = 1024 * 1024;
const MAX_API_CALLS = 100;

/** What a run needs of an invocation, its function, app, invoking user and the function's secrets: selected with its claim (executionColumns). */
interface ExecutionRow {
  id: string | number;
  uuid: string;
  payload: unknown;
  trigger: 'api' | 'event';
  event: string | null;
  invoked_by: string | null;
  function_id: number;
  function_slug: string;
  function_name: string;
  code: string;
  timeout: number;
  environment: Record<string, string>;
  is_active: boolean;
  app_id: number;
  app_slug: string;
  username: string | null;
  token_generation: number | null;
  secrets: StoredSecret[];
}

/**
 * The columns of an ExecutionRow, over the invocation `i`, its function `f` and app `a` of the
 * schema `q`: the invoking user, and the secrets the function's environment names (not looked
 * for without an environment: CASE evaluates the subquery only then).
 */
const executionColumns = (q: string) => `i.id, i.uuid, i.payload, i.trigger, i.event, i.invoked_by, f.id AS function_id, f.slug AS function_slug, f.name AS function_name,
  f.code, f.timeout, f.environment, f.is_active AND a.is_active AS is_active, a.id AS app_id, a.slug AS app_slug,
  (SELECT u.username FROM ${q}.users u WHERE u.uuid = i.invoked_by) AS username,
  (SELECT u.token_generation FROM ${q}.users u WHERE u.uuid = i.invoked_by AND u.is_active AND NOT u.is_deleted) AS token_generation,
  CASE WHEN f.environment = '{}' THEN '[]' ELSE (SELECT coalesce(jsonb_agg(s), '[]') FROM (${appSecretsSql(q, 'SELECT value FROM jsonb_each_text(f.environment)', 'a.slug')}) s) END AS secrets`;

/** An invocation record as the API shows it (function.service.ts invocationView). */
export interface InvocationRow {
  id: string | number;
  uuid: string;
  function_id: number;
  function_slug: string;
  trigger: 'api' | 'event';
  event: string | null;
  status: 'queued' | 'running' | 'succeeded' | 'failed' | 'timed_out';
  payload: unknown;
  result: unknown;
  error: { type: string; message: string; stack?: string } | null;
  logs: { level: string; message: string; at: string }[];
  invoked_by: string | null;
  attempts: number;
  duration_ms: number | null;
  cpu_ms: number | null;
  created_at: Date | string;
  started_at: Date | string | null;
  finished_at: Date | string | null;
}

/** The columns of an InvocationRow, over the invocation `i` and its function `f`. */
export const INVOCATION_COLUMNS = `i.id, i.uuid, i.function_id, f.slug AS function_slug, i.trigger, i.event, i.status, i.payload, i.result, i.error, i.logs,
  i.invoked_by, i.attempts, i.duration_ms, i.cpu_ms, i.created_at, i.started_at, i.finished_at`;

/** An API invocation of a function: its event, and the site user it runs as (null: none). */
export interface ApiInvocation {
  functionId: number;
  payload: unknown;
  invokedBy: string | null;
}

export interface RuntimeOptions {
  orm: Orm;
  keyring: SecretKeyring;
  tokens: TokenSettings;
  config: FunctionsConfig;
  log: Logger;
  /** The Host header of the SDK's requests: a platform host. */
  platformHost: string;
  /** Where a lost database is logged, once per burst (db/availability.ts); without it, each failure is a line. */
  databaseFaults?: FaultLog;
}

export class FunctionRuntime {
  readonly pool: SandboxPool;
  /** The user-creation events of the sites, published through this runtime. */
  readonly events: UserEvents = new UserEvents(this);
  private readonly options: RuntimeOptions;
  private readonly id = randomUUID();
  private apiUrl: string | undefined;
  /** Jobs running here, by `schema job-id` (job ids are each cluster's own: a site is on one cluster at a time). */
  private readonly active = new Map<string, { schema: string; id: number }>();
  /** Synchronous invocations admitted here and not ended, by site (admitSync). */
  private readonly syncBySite = new Map<string, number>();
  /** Claimed executions running here, by site (the claim's fair share). */
  private readonly activeBySite = new Map<string, number>();
  private draining = false;
  private again = false;
  private started = false;
  private stopped = false;
  private timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<Promise<void>>();
  /** The SDK's access tokens by `schema user generation`, with when they expire (sdkToken). */
  private readonly sdkTokens = new Map<string, { token: string; expires: number }>();

  constructor(options: RuntimeOptions) {
    this.options = options;
    this.apiUrl = options.config.apiUrl;
    const c = options.config;
    this.pool = new SandboxPool({ size: c.workers, concurrency: c.workerConcurrency, siteThreads: c.siteThreads, siteCpuShare: c.siteCpuPercent / 100 });
    this.timers.push(setInterval(() => void this.renewLeases(), (LEASE_SECONDS * 1000) / 3).unref());
  }

  /** A unit of work of its own (never inside a caller's transaction). */
  freshEm(): EntityManager {
    return this.options.orm.em.fork();
  }

  /** Where the statements on the site `schema` go: its cluster's pool (db/clusters.ts), which holds its queue rows too. */
  private async emOf(schema: string): Promise<EntityManager> {
    const clusters = clustersOf(this.options.orm.em);
    return clusters ? (await clusters.siteOrm(schema)).em : this.options.orm.em;
  }

  /** This process's name in the queue's `locked_by`. */
  get owner(): string {
    return this.id;
  }

  /**
   * Starts the sandbox threads, and claiming queued executions when the configuration lets this
   * process. `apiUrl`: the server's own address, for the SDK when FUNCTION_API_URL is unset.
   */
  start(listener: ChangeListener | undefined, apiUrl?: string): void {
    this.apiUrl ??= apiUrl;
    if (this.options.config.prewarm) void this.pool.warm().catch((err: Error) => this.options.log.warn({ err: err.message }, 'function sandboxes did not start'));
    if (!this.options.config.queueEnabled || this.started) return;
    this.started = true;
    listener?.on('function-jobs', () => this.poke());
    this.timers.push(setInterval(() => this.poke(), POLL_MS).unref());
    this.poke();
  }

  /** A background failure of the queue: a lost database counts in its burst (one line for the outage, not one per poll), anything else is logged. */
  private failed(err: Error, message: string, context: Record<string, unknown> = {}, level: 'warn' | 'error' = 'warn'): void {
    const faults = this.options.databaseFaults;
    if (faults && isDatabaseUnavailable(err)) faults.failed(err, { ...context, component: message });
    else this.options.log[level]({ ...context, err: err.message }, message);
  }

  /** Claims what is ready, up to this process's capacity (one claim loop at a time). */
  poke(): void {
    if (!this.started || this.stopped) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = true;
    void this.drain()
      .catch((err: Error) => this.failed(err, 'function queue: claim failed'))
      .finally(() => {
        this.draining = false;
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
  }

  private get capacity(): number {
    return this.options.config.workers * this.options.config.workerConcurrency;
  }

  /** How many executions of one site this process runs at once: its share of the threads, full. */
  private get siteCapacity(): number {
    return this.options.config.siteThreads * this.options.config.workerConcurrency;
  }

  /**
   * Claims ready jobs up to the free capacity, fairly: the oldest of each site first, in turns
   * (one site's backlog never goes ahead of another site's newer job), and none of a site that
   * already runs its share here (claimJobs).
   */
  private async drain(): Promise<void> {
    // Each cluster's queue in turn (db/clusters.ts); one that does not answer is skipped this round.
    const clusters = clustersOf(this.options.orm.em);
    for (const name of clusters ? await clusters.names() : [PRIMARY_CLUSTER]) {
      const em = clusters ? await clusters.orm(name).then((o) => o.em, (err: Error) => (this.failed(err, 'function queue: cluster unreachable', { cluster: name }), undefined)) : this.options.orm.em;
      if (em) await this.drainCluster(em);
    }
  }

  private async drainCluster(em: EntityManager): Promise<void> {
    while (!this.stopped && this.active.size < this.capacity) {
      const full = [...this.activeBySite].filter(([, n]) => n >= this.siteCapacity).map(([site]) => site);
      const jobs = await claimJobs(em, this.id, full, this.siteCapacity, this.capacity - this.active.size);
      if (!jobs.length) return;
      for (const job of jobs) {
        const id = Number(job.id);
        const site = job.site_schema;
        const key = `${site} ${id}`;
        this.active.set(key, { schema: site, id });
        this.activeBySite.set(site, (this.activeBySite.get(site) ?? 0) + 1);
        const run = this.runJob(id, site, Number(job.invocation_id), job.attempts)
          .catch((err: Error) => this.failed(err, 'function queue: job failed', { schema: site, invocation: job.invocation_id }, 'error'))
          .finally(() => {
            this.active.delete(key);
            const left = this.activeBySite.get(site)! - 1;
            if (left) this.activeBySite.set(site, left);
            else this.activeBySite.delete(site);
            this.running.delete(run);
            this.poke();
          });
        this.running.add(run);
      }
    }
  }

  /**
   * Admits one synchronous invocation of `site` in this process, counted from here to its end
   * (call the returned function then): its share of the threads running, FUNCTION_SITE_QUEUE
   * waiting, and 429 past that. Counted before anything awaits, so a burst of concurrent requests
   * cannot all pass. One site's flood waits behind its own work, never anyone else's.
   */
  private admitSync(site: string): () => void {
    const c = this.options.config;
    const admitted = this.syncBySite.get(site) ?? 0;
    if (admitted >= this.siteCapacity + c.siteQueue) throw tooMany(`${c.siteQueue} waiting for a sandbox`);
    this.syncBySite.set(site, admitted + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = this.syncBySite.get(site)! - 1;
      if (left) this.syncBySite.set(site, left);
      else this.syncBySite.delete(site);
    };
  }

  /**
   * Queues an API invocation for any process to run, in one statement: its invocation record and
   * job row — none when `schema` has FUNCTION_SITE_BACKLOG queued executions nobody has claimed
   * yet (429). The record; undefined when the function is gone.
   */
  async enqueue(schema: string, v: ApiInvocation): Promise<InvocationRow | undefined> {
    const q = quotedSchema(schema);
    const limit = this.options.config.siteBacklog;
    const [row] = await preparedRows<InvocationRow & { admitted: boolean }>(
      await this.emOf(schema),
      `WITH room AS (SELECT count(*) < ? AS admitted FROM (SELECT 1 FROM public.function_jobs WHERE site_schema = ? AND locked_by IS NULL LIMIT ?) queued),
            inv AS (INSERT INTO ${q}.function_invocations (function_id, trigger, payload, invoked_by)
                    SELECT f.id, 'api', ?::jsonb, ?::uuid FROM ${q}.functions f, room WHERE f.id = ? AND room.admitted RETURNING *),
            job AS (INSERT INTO public.function_jobs (site_schema, invocation_id) SELECT ?, id FROM inv)
       SELECT room.admitted, ${INVOCATION_COLUMNS} FROM room LEFT JOIN (inv i JOIN ${q}.functions f ON f.id = i.function_id) ON true`,
      [limit, schema, limit, JSON.stringify(v.payload ?? null), v.invokedBy, v.functionId, schema],
    );
    if (!row!.admitted) throw tooMany(`${limit} queued`);
    this.poke();
    return row!.id === null ? undefined : row;
  }

  /**
   * Runs an API invocation here and now (admitSync's bounds), in two statements: one records it
   * running with its job row claimed by this runtime (no other process is woken for it; if this
   * one dies, the lease runs out and another runs it) and reads what the run needs; the other
   * stores the outcome and removes the job row. The record as it ended (queued again when this
   * process stopped meanwhile); undefined when the function is gone.
   *
   * The first commits without waiting for its WAL flush (synchronous_commit off for its own
   * transaction): the second, which waits, flushes the WAL up to itself and so the first too, before
   * the caller hears of the invocation. A crash in between loses at most a record nobody was told
   * of, as a crash before the first statement would.
   */
  async invoke(schema: string, v: ApiInvocation): Promise<InvocationRow | undefined> {
    const done = this.admitSync(schema);
    try {
      const q = quotedSchema(schema);
      const [row] = await preparedRows<ExecutionRow & { job_id: string }>(
        await this.emOf(schema),
        `WITH inv AS (INSERT INTO ${q}.function_invocations (function_id, trigger, payload, invoked_by, status, started_at, attempts)
                      SELECT id, 'api', ?::jsonb, ?::uuid, 'running', now(), 1 FROM ${q}.functions WHERE id = ? RETURNING *),
              job AS (INSERT INTO public.function_jobs (site_schema, invocation_id, locked_by, locked_until, attempts)
                      SELECT ?, id, ?, now() + make_interval(secs => ?), 1 FROM inv RETURNING id)
         SELECT job.id AS job_id, ${executionColumns(q)}
           FROM inv i CROSS JOIN job CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
           JOIN ${q}.functions f ON f.id = i.function_id JOIN ${q}.apps a ON a.id = f.app_id`,
        [JSON.stringify(v.payload ?? null), v.invokedBy, v.functionId, schema, this.id, LEASE_SECONDS],
      );
      if (!row) return undefined;
      const jobId = Number(row.job_id);
      return (await this.tracked(schema, jobId, this.run(schema, row, jobId))).record;
    } finally {
      done();
    }
  }

  /** Runs an execution this runtime claimed when it was queued (events.service.ts); its outcome (undefined: it had ended, or this process is stopping). */
  runClaimed(schema: string, invocationId: number, jobId: number): Promise<RunOutcome | undefined> {
    return this.tracked(schema, jobId, this.execute(schema, invocationId, jobId));
  }

  /** `run`, the execution of the job `jobId` of `schema`, counted as running here: its lease renewed, close() waiting for it. */
  private tracked<T>(schema: string, jobId: number, run: Promise<T>): Promise<T> {
    const key = `${schema} ${jobId}`;
    this.active.set(key, { schema, id: jobId });
    const ended = run.finally(() => {
      this.active.delete(key);
      this.running.delete(settled);
    });
    const settled = ended.then(() => undefined, () => undefined);
    this.running.add(settled);
    return ended;
  }

  private async renewLeases(): Promise<void> {
    if (!this.active.size) return;
    // One statement per cluster that runs jobs here (each cluster's queue holds its sites' rows).
    const byEm = new Map<EntityManager, number[]>();
    for (const { schema, id } of this.active.values()) {
      const em = await this.emOf(schema).catch(() => undefined);
      if (em) byEm.set(em, [...(byEm.get(em) ?? []), id]);
    }
    for (const [em, ids] of byEm) {
      await em
        .execute(`UPDATE public.function_jobs SET locked_until = now() + make_interval(secs => ?) WHERE locked_by = ? AND id IN (?)`, [LEASE_SECONDS, this.id, ids])
        .catch((err: Error) => this.failed(err, 'function queue: lease renewal failed'));
    }
  }

  private async runJob(jobId: number, schema: string, invocationId: number, attempts: number): Promise<void> {
    if (attempts > MAX_ATTEMPTS) {
      await this.finish(schema, invocationId, jobId, failedOutcome(
        'ExecutionInterrupted',
        'The server running the execution stopped, and it has no retry left (an API or POST event execution is tried 3 times, a PRE event one once).',
      ));
      return;
    }
    await this.execute(schema, invocationId, jobId);
  }

  /**
   * Runs the queued invocation `invocationId` of `schema` (its job `jobId` claimed by this
   * runtime) now: one statement marks it running and reads what the run needs, then `run`.
   * Returns the outcome; an invocation already ended (a job claimed twice) is left as it is.
   */
  private async execute(schema: string, invocationId: number, jobId: number): Promise<RunOutcome | undefined> {
    const q = quotedSchema(schema);
    const em = await this.emOf(schema);
    const [row] = await preparedRows<ExecutionRow>(
      em,
      `UPDATE ${q}.function_invocations i SET status = 'running', started_at = now(), attempts = i.attempts + 1
         FROM ${q}.functions f JOIN ${q}.apps a ON a.id = f.app_id
        WHERE i.id = ? AND f.id = i.function_id AND i.status IN ('queued', 'running')
        RETURNING ${executionColumns(q)}`,
      [invocationId],
    );
    if (!row) {
      await em.execute('DELETE FROM public.function_jobs WHERE id = ?', [jobId]);
      return undefined;
    }
    return (await this.run(schema, row, jobId)).outcome;
  }

  /**
   * Runs a claimed execution and ends it: its outcome stored and its job row removed (finish), or,
   * when this process's shutdown stopped the run, back in the queue for the next process. The
   * outcome (none when queued again) and the record as it ended.
   */
  private async run(schema: string, row: ExecutionRow, jobId: number): Promise<{ outcome?: RunOutcome; record?: InvocationRow }> {
    let outcome: RunOutcome;
    const env = this.environment(schema, row);
    if (!row.is_active) {
      outcome = failedOutcome('FunctionInactive', `Function "${row.function_slug}" is inactive.`);
    } else if (env instanceof Error) {
      outcome = failedOutcome('MissingSecret', env.message);
    } else {
      const limits = this.limits(row.timeout);
      const api = this.apiTarget(schema, row, limits.timeoutMs);
      const context = {
        function: { id: row.function_id, slug: row.function_slug, name: row.function_name },
        app: { id: row.app_id, slug: row.app_slug },
        site: schema,
        invocation: { id: Number(row.id), uuid: row.uuid, trigger: row.trigger, event: row.event },
        user: row.invoked_by ? { id: row.invoked_by, username: row.username } : null,
        env: env.values,
      };
      outcome = await this.pool.run({ code: row.code, event: row.payload, context, limits }, api, schema);
      if (this.stopped && outcome.error?.type === 'SandboxError') {
        // Stopped by this process's shutdown: back to the queue, for the next process to run.
        const q = quotedSchema(schema);
        const [record] = await rows<InvocationRow>(
          await this.emOf(schema),
          `WITH back AS (UPDATE public.function_jobs SET locked_by = NULL, locked_until = NULL WHERE id = ?)
           UPDATE ${q}.function_invocations i SET status = 'queued' FROM ${q}.functions f WHERE i.id = ? AND f.id = i.function_id RETURNING ${INVOCATION_COLUMNS}`,
          [jobId, row.id],
        );
        return { record };
      }
      outcome = redact(outcome, env.secrets);
    }
    const record = await this.finish(schema, Number(row.id), jobId, outcome);
    if (outcome.status !== 'succeeded' && row.trigger === 'event') {
      this.options.log.warn({ schema, function: row.function_slug, event: row.event, invocation: row.uuid, error: outcome.error?.message }, 'event subscriber failed');
    }
    return { outcome, record };
  }

  private limits(timeoutSeconds: number): SandboxLimits {
    const c = this.options.config;
    return {
      timeoutMs: timeoutSeconds * 1000,
      cpuMs: Math.min(c.cpuLimitMs, timeoutSeconds * 1000),
      memoryBytes: c.memoryLimitMb * 1024 * 1024,
      maxLogBytes: MAX_LOG_BYTES,
      maxApiCalls: MAX_API_CALLS,
      maxResultBytes: MAX_RESULT_BYTES,
    };
  }

  /** The SDK's target: this site's API as the invoking user (none when the user is gone or inactive: anonymous). */
  private apiTarget(schema: string, row: ExecutionRow, timeoutMs: number): ApiTarget | null {
    if (!this.apiUrl) return null;
    const token = row.invoked_by && row.token_generation !== null ? this.sdkToken(schema, row.invoked_by, Number(row.token_generation), timeoutMs) : null;
    return { url: this.apiUrl, host: this.options.platformHost, prefix: `/sites/${schema}`, token };
  }

  /**
   * An access token of the invoking user for the SDK's requests: one signed for an earlier run of
   * the same user (same site, same token generation) while it outlives this run by a minute, else a
   * new one (signing was 6 % of the server's CPU per warm invocation). It grants what a new one
   * would: the API checks the user and the generation on every request, and guest code never sees it.
   */
  private sdkToken(schema: string, user: string, generation: number, timeoutMs: number): string {
    const key = `${schema} ${user} ${generation}`;
    const now = Date.now();
    const kept = this.sdkTokens.get(key);
    if (kept && kept.expires - now > timeoutMs + 60_000) return kept.token;
    const token = signToken(this.options.tokens, 'access', { uuid: user, token_generation: generation }, schema);
    if (this.sdkTokens.size >= 10_000) this.sdkTokens.clear();
    this.sdkTokens.set(key, { token, expires: now + this.options.tokens.accessTtlSeconds * 1000 });
    return token;
  }

  /** The function's environment: each variable's secret (the app's own, else the tenant-wide one: the row's), decrypted; an Error for a missing one, which fails the run. */
  private environment(schema: string, row: ExecutionRow): { values: Record<string, unknown>; secrets: string[] } | Error {
    try {
      const found = openSecrets(this.options.keyring, schema, row.secrets);
      const values: Record<string, unknown> = {};
      for (const [name, key] of Object.entries(row.environment ?? {})) {
        if (!found.has(key)) return new Error(`The secret "${key}" (environment variable ${name}) does not exist.`);
        values[name] = found.get(key);
      }
      return { values, secrets: secretForms(Object.values(values)) };
    } catch (err) {
      return err as Error;
    }
  }

  /** Stores the outcome and drops the job row, in one statement; the record as it ended (undefined: the function is gone). */
  private async finish(schema: string, invocationId: number, jobId: number, o: RunOutcome): Promise<InvocationRow | undefined> {
    const q = quotedSchema(schema);
    const [record] = await preparedRows<InvocationRow>(
      await this.emOf(schema),
      `WITH job AS (DELETE FROM public.function_jobs WHERE id = ?)
       UPDATE ${q}.function_invocations i SET status = ?, result = ?::jsonb, error = ?::jsonb, logs = ?::jsonb, duration_ms = ?, cpu_ms = ?,
              finished_at = now(), started_at = coalesce(i.started_at, now())
         FROM ${q}.functions f WHERE i.id = ? AND f.id = i.function_id
       RETURNING ${INVOCATION_COLUMNS}`,
      [jobId, o.status, JSON.stringify(o.status === 'succeeded' ? (o.result ?? null) : null), o.error ? JSON.stringify(o.error) : null, JSON.stringify(o.logs), o.duration_ms, o.cpu_ms, invocationId],
    );
    return record;
  }

  /** Stops claiming, lets the running executions end (their rows are claimed again elsewhere if they cannot), stops the sandboxes. */
  async close(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await Promise.race([Promise.allSettled([...this.running]), new Promise((r) => setTimeout(r, 5000).unref())]);
    await this.pool.close();
  }
}

function tooMany(what: string): DomainError {
  const text = `This site has too many function executions waiting (${what}): retry later.`;
  return new DomainError('RATE_LIMIT_EXCEEDED', text, { detail: text, extra: { retry_after: 1 } });
}

/** Secret values never reach the stored logs, result or error (masking.ts): each form of each is `***`. */
function redact(o: RunOutcome, secrets: string[]): RunOutcome {
  if (!secrets.length) return o;
  const clean = masker(secrets);
  return {
    ...o,
    logs: o.logs.map((l) => ({ ...l, message: clean(l.message) })),
    result: maskDeep(o.result, clean),
    error: o.error ? { ...o.error, type: clean(o.error.type), message: clean(o.error.message), stack: o.error.stack === undefined ? undefined : clean(o.error.stack) } : undefined,
  };
}
