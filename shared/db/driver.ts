// The ORM's PostgreSQL driver with real bound parameters. MikroORM 7 formats every value into the
// SQL text on the client (Platform.formatQuery) before sending it; this connection sends the same
// statements with the values as protocol parameters instead (db/bind.ts), for the ORM's own
// queries and for every `em.execute`/`rows()` of ours alike. Statements and their parameters are
// logged apart (never a value in the SQL text).
//
// Its connections are TimedClients (db/timed-client.ts: every statement has a client-side limit,
// a connection that failed says so); the pool knows which of them are checked out, so that a
// shutdown past its timeout can cut them off (cutOff).
import { isRaw, raw } from '@mikro-orm/core';
import { PostgreSqlConnection, PostgreSqlDriver } from '@mikro-orm/postgresql';
import { NativeQueryBuilder } from '@mikro-orm/sql';
import type { Configuration } from '@mikro-orm/core';
import pg from 'pg';
import { bind, type BoundQuery } from './bind.ts';
import { timedClientClass, type PoolState, type TimedClient } from './timed-client.ts';

type Query = string | NativeQueryBuilder | { sql: string; params: unknown[] };
type Method = 'all' | 'get' | 'run';
/** What Kysely executes (kysely's CompiledQuery.raw, built here as MikroORM's own stream() builds it). */
const compiled = (q: BoundQuery, kind = 'RawNode') => ({ query: { kind, sqlFragments: [q.text], parameters: [] }, sql: q.text, parameters: q.values });

/** Statement names by SQL text: at most this many texts are ever prepared (per connection, by PostgreSQL). */
const MAX_PREPARED = 500;
const names = new Map<string, string>();
let sequence = 0;
function statementName(text: string): string | undefined {
  const known = names.get(text);
  if (known || names.size >= MAX_PREPARED) return known;
  const name = `p${++sequence}`;
  names.set(text, name);
  return name;
}

export class BoundConnection extends PostgreSqlConnection {
  /**
   * Whether hot statements are prepared (named) on each connection: off behind a proxy that pools
   * transactions (PgBouncer before 1.21 cannot carry named statements; DATABASE_PREPARED_STATEMENTS).
   */
  preparedStatements = true;
  /** The connections go through a transaction pooler: their process ids are the proxy's, not PostgreSQL's (cutOff). */
  proxied = false;
  /** Statements sent (tests count the round trips of a request with it). */
  statements = 0;
  #pool: pg.Pool | undefined;
  #state: PoolState | undefined;
  /** The connections checked out of the pool now. */
  readonly #inUse = new Set<TimedClient>();

  /** How many connections are checked out now (a cluster's pool is closed when idle only with none: db/clusters.ts). */
  get busy(): number {
    return this.#inUse.size;
  }

  /**
   * The pool, made of TimedClients. `statementTimeoutMs` and `queryTimeoutMarginMs` (driverOptions,
   * ours): the client-side limit of a statement is the connection's statement timeout plus this margin.
   */
  override createKyselyDialect(overrides: pg.PoolConfig & { statementTimeoutMs?: number; queryTimeoutMarginMs?: number }) {
    const { statementTimeoutMs: timeout = 0, queryTimeoutMarginMs = 0, ...options } = overrides;
    const state: PoolState = { baseTimeoutMs: timeout ? timeout + queryTimeoutMarginMs : 0, marginMs: queryTimeoutMarginMs, cut: false };
    this.#state = state;
    const onPoolCreated = (pool: pg.Pool) => {
      this.#pool = pool;
      const timed = (c: pg.PoolClient | pg.Client) => c as unknown as TimedClient;
      pool.on('acquire', (c) => void this.#inUse.add(timed(c)));
      pool.on('release', (_err: Error | undefined, c: pg.PoolClient) => {
        this.#inUse.delete(timed(c));
        timed(c).limitMs = state.baseTimeoutMs; // a transaction's longer limit ends with it
      });
      pool.on('remove', (c) => void this.#inUse.delete(timed(c)));
    };
    return super.createKyselyDialect({ ...options, Client: timedClientClass(state), onPoolCreated } as pg.PoolConfig);
  }

  /**
   * Cuts off every connection checked out now (shutdown past SHUTDOWN_TIMEOUT_MS): their sockets
   * are closed, so no COMMIT can follow on them, and their backends are terminated through a
   * connection of its own, so that a running statement stops at once and its transaction rolls
   * back. Any later statement of this pool fails (503). Resolves with how many were cut.
   * Behind a transaction pooler only the sockets are closed (the process ids it gives are its own,
   * not PostgreSQL's): the proxy drops a server connection whose client left mid-transaction, so
   * nothing commits either; a statement running there ends at its statement timeout.
   */
  async cutOff(): Promise<number> {
    if (this.#state) this.#state.cut = true;
    const clients = [...this.#inUse];
    const pids = this.proxied ? [] : clients.map((c) => c.processID).filter((pid): pid is number => typeof pid === 'number');
    for (const c of clients) c.cut();
    if (pids.length && this.#pool) {
      const options = this.#pool.options as pg.ClientConfig;
      const control = new pg.Client({ ...options, password: options.password, connectionTimeoutMillis: 2000, query_timeout: 2000 });
      control.on('error', () => undefined);
      try {
        await control.connect();
        await control.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
      } catch {
        /* the database is gone: closed sockets are enough (nothing can commit on them) */
      } finally {
        await control.end().catch(() => undefined);
      }
    }
    return clients.length;
  }

  /**
   * A read outside any transaction, on a pooled connection, its SQL prepared once per
   * connection (parsed and planned once, then only bound and executed): the hot path's statements,
   * whose texts are few (one per table and query shape; the first MAX_PREPARED texts only).
   */
  async prepared<T>(sql: string, params: readonly unknown[]): Promise<T[]> {
    await this.ensureConnection();
    const q = bind(sql, params);
    this.statements++;
    const pool = await this.getNativeClient();
    const name = this.preparedStatements ? statementName(q.text) : undefined;
    return this.executeQuery(q.text, async () => (await pool.query({ name, text: q.text, values: q.values })).rows, { query: q.text, params: q.values } as never);
  }

  /** The statement and its values (the ORM's `onQuery` hook applied, as its own execute does). */
  private bound(query: Query, params: unknown): { params: unknown[]; q: BoundQuery } {
    let q: Query = query instanceof NativeQueryBuilder ? query.toRaw() : query;
    let values = params as unknown[];
    if (typeof q === 'string' && !Array.isArray(params)) q = raw(q, params as never);
    if (isRaw(q)) {
      values = q.params;
      q = q.sql;
    }
    return { params: values, q: bind(this.config.get('onQuery')(q as string, values), values) };
  }

  override async execute(query: Query, params: unknown = [], method: Method = 'all', ctx?: unknown, loggerContext?: Record<string, unknown>): Promise<any> {
    await this.ensureConnection();
    const { params: values, q } = this.bound(query, params);
    this.statements++;
    const { signal, inflightQueryAbortStrategy, ...logContext } = loggerContext ?? {};
    const abort = signal == null && inflightQueryAbortStrategy == null ? undefined : { signal, inflightQueryAbortStrategy };
    const client = (ctx ?? this.getClient()) as { executeQuery(c: unknown, abort?: unknown): Promise<any> };
    return this.executeQuery(q.text, async () => this.transformRawResult(await client.executeQuery(compiled(q), abort), method), {
      ...logContext,
      query: q.text,
      params: values,
    } as never);
  }

  override async *stream(query: Query, params: unknown[] = [], ctx?: unknown, loggerContext?: Record<string, unknown>, chunkSize?: number): AsyncIterableIterator<any> {
    await this.ensureConnection();
    const { q } = this.bound(query, params);
    this.statements++;
    const { signal } = loggerContext ?? {};
    const executor = ((ctx ?? this.getClient()) as { getExecutor(): { stream(c: unknown, size: number, o?: unknown): AsyncIterable<unknown> } }).getExecutor();
    this.logQuery(q.text, loggerContext as never);
    // kind SelectQueryNode, as MikroORM's stream() sends it.
    for await (const items of executor.stream(compiled(q, 'SelectQueryNode'), chunkSize ?? 100, signal ? { signal } : undefined)) {
      for (const row of this.transformRawResult(items as never, 'all') as unknown[]) yield row;
    }
  }
}

export class BoundDriver extends PostgreSqlDriver {
  constructor(config: Configuration) {
    super(config);
    (this as unknown as { connection: PostgreSqlConnection }).connection = new BoundConnection(this.config);
  }
}
