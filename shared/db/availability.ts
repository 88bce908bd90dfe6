// Whether the database is there, and how its failures are logged.
//
// DatabaseProbe: /readyz asks on a connection of its own (never queued behind a pool whose
// connections may all be taken), and gets an answer within DATABASE_READY_TIMEOUT_MS whatever the
// database does (refuses, is frozen, is slow).
//
// FaultLog: a fault that fails many requests at once (the database gone, a disk full) is logged
// once per burst, without a stack: one warning when the first request fails, then one line when
// it is over, with how many requests failed meanwhile (a 30 s outage once wrote 4,296 stack
// traces). A burst is over at the first check, once a second (or `intervalMs`), that finds no
// new failure since the previous one and, for the database, the probe answering.
import pg from 'pg';
import type { Logger } from '../common/logger.ts';
import { describeError } from './errors.ts';

export class DatabaseProbe {
  readonly #url: string;
  readonly #timeoutMs: number;
  #client: { pg: pg.Client; ready: Promise<unknown> } | undefined;
  #running: Promise<boolean> | undefined;

  constructor(url: string, timeoutMs: number) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
  }

  /** Whether the database answers `SELECT 1` within the limit (connecting first when needed); concurrent calls share one check. */
  check(): Promise<boolean> {
    this.#running ??= this.#check().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #check(): Promise<boolean> {
    const client = (this.#client ??= this.#connect());
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.#timeoutMs)));
    const answered = (async () => {
      await client.ready;
      await client.pg.query('SELECT 1');
      return true as const;
    })().catch(() => false as const);
    const ok = await Promise.race([answered, late]);
    clearTimeout(timer);
    if (!ok) this.#drop();
    return ok;
  }

  #connect(): { pg: pg.Client; ready: Promise<unknown> } {
    const client = new pg.Client({ connectionString: this.#url, connectionTimeoutMillis: this.#timeoutMs, query_timeout: this.#timeoutMs, keepAlive: true });
    client.on('error', () => this.#drop());
    const ready = client.connect();
    ready.catch(() => undefined);
    return { pg: client, ready };
  }

  /** A connection that failed once is not trusted again: the next check makes a new one. */
  #drop(): void {
    const client = this.#client?.pg;
    this.#client = undefined;
    (client as unknown as { connection?: { stream?: { destroy(): void } } } | undefined)?.connection?.stream?.destroy();
    client?.end().catch(() => undefined);
  }

  async close(): Promise<void> {
    const client = this.#client?.pg;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }
}

export interface FaultLogOptions {
  /** The warning's message when a burst starts (`database unavailable`). */
  started: string;
  /** The line's message when it is over (`database available again`). */
  ended: string;
  /** Whether the cause is gone (the database answers); default: yes, once a check finds no new failure. */
  recovered?: () => Promise<boolean>;
  intervalMs?: number;
}

export class FaultLog {
  readonly #log: Logger;
  readonly #options: Required<FaultLogOptions>;
  #failed = 0;
  #sinceCheck = 0;
  #since = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(log: Logger, options: FaultLogOptions) {
    this.#log = log;
    this.#options = { recovered: async () => true, intervalMs: 1000, ...options };
  }

  /** Counts one failure; the first of a burst is logged (what failed, no stack). */
  failed(err: unknown, context: Record<string, unknown> = {}): void {
    this.#failed++;
    this.#sinceCheck++;
    if (this.#failed > 1) return;
    this.#since = Date.now();
    const code = (err as { code?: unknown } | null)?.code;
    this.#log.warn({ ...context, error: describeError(err), ...(typeof code === 'string' ? { code } : {}) }, this.#options.started);
    this.#schedule();
  }

  #schedule(): void {
    if (!this.#closed) this.#timer = setTimeout(() => void this.#check(), this.#options.intervalMs).unref();
  }

  async #check(): Promise<void> {
    const quiet = this.#sinceCheck === 0;
    this.#sinceCheck = 0;
    if (!quiet || !(await this.#options.recovered().catch(() => false))) return this.#schedule();
    this.#log.info({ failed: this.#failed, durationMs: Date.now() - this.#since }, this.#options.ended);
    this.#failed = 0;
    this.#timer = undefined;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}
