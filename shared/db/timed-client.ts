// The pool's connection class: pg's Client with a client-side limit on every statement and
// failures that name themselves.
//
// PostgreSQL's statement_timeout ends a slow statement, but only a database that still runs: a
// frozen server (SIGSTOP, a VM paused, a network black hole that keeps the socket open) answers
// nothing, and without a limit of its own the client waits forever. Each statement here gets
// pg's `query_timeout`: the connection's statement_timeout plus a margin (DATABASE_QUERY_TIMEOUT_MARGIN_MS),
// so a healthy server always answers first (its own 57014). Inside a long operation's
// transaction the statement timeout is raised with setLocalStatementTimeout (statement-timeout.ts):
// this class sees that statement and raises its limit with it until the connection goes back to
// the pool (driver.ts resets it). A statement past the limit fails ("Query read timeout") and its
// connection is closed (the statement may still be running there: the connection cannot be
// reused), and so is every connection a failed socket left behind; such errors are marked
// (errors.ts markUnavailable) so that the request answers 503, not 500.
//
// Cursors (pg-cursor: CSV exports) get no client-side limit: each batch they fetch is bounded
// by statement_timeout on the server, and a reader that stops reading by
// idle_in_transaction_session_timeout.
//
// A connection that ends while checked out goes back to the pool at once (and the pool drops
// it). Kysely gives a transaction's connection back only when its BEGIN, COMMIT or ROLLBACK
// succeeds, which it cannot on a connection that is gone: without this, every transaction in
// flight when the database went away would keep its pool slot forever, and the pool would stay
// exhausted after the database came back. Giving it back twice is harmless (the second is ignored).
import pg from 'pg';
import { bind } from './bind.ts';
import { isDatabaseError, markUnavailable } from './errors.ts';
import { LOCAL_STATEMENT_TIMEOUT_SQL } from './statement-timeout.ts';

/** What the connections of one pool share. */
export interface PoolState {
  /** The client-side limit of a statement outside a long transaction (0: none). */
  baseTimeoutMs: number;
  /** Added to a transaction's own statement timeout. */
  marginMs: number;
  /** Shutdown cut the pool off: every statement fails. */
  cut: boolean;
}

export interface TimedClient extends pg.Client {
  /** The client-side limit of this connection's statements now (ms; 0: none). */
  limitMs: number;
  /** PostgreSQL's process id of this connection's backend. */
  readonly processID?: number;
  /** Closes the socket at once: whatever was not sent is never sent. */
  cut(): void;
}

/** pg's message when query_timeout passes. */
const READ_TIMEOUT = 'Query read timeout';
const LOCAL_TIMEOUT_TEXT = bind(LOCAL_STATEMENT_TIMEOUT_SQL, ['0']).text;

type Callback = (err: Error | null, res?: unknown) => void;
interface Internals {
  _ended?: boolean;
  _queryable?: boolean;
  connection?: { stream?: { destroy(): void } };
}

export function timedClientClass(state: PoolState): new (config?: pg.ClientConfig) => TimedClient {
  class Timed extends pg.Client {
    limitMs = state.baseTimeoutMs;
    #release: ((err?: Error) => void) | undefined;

    constructor(config?: pg.ClientConfig) {
      super(config);
      this.on('end', () => this.#release?.(markUnavailable(new Error('The database connection ended.'))));
    }

    /** pg-pool sets it at each checkout: kept here, callable once per checkout. */
    set release(give: (err?: Error) => void) {
      let given = false;
      this.#release = (err) => {
        if (given) return;
        given = true;
        give(err);
      };
    }

    get release(): ((err?: Error) => void) | undefined {
      return this.#release;
    }

    cut(): void {
      (this as unknown as Internals).connection?.stream?.destroy();
    }

    /** An error of this connection rather than of the statement: marked (503), and the connection closed after a read timeout. */
    private failed(err: Error): Error {
      if (isDatabaseError(err)) return err;
      const self = this as unknown as Internals;
      const code = (err as { code?: unknown }).code;
      const connectionLost = self._ended === true || self._queryable === false || (typeof code === 'string' && /^E[A-Z]+$/.test(code));
      if (err.message === READ_TIMEOUT) this.cut();
      return err.message === READ_TIMEOUT || connectionLost ? markUnavailable(err) : err;
    }

    override connect(callback?: any): any {
      const mark = (err: Error) => (isDatabaseError(err) ? err : markUnavailable(err));
      if (callback) return super.connect(((err: Error | null, c: unknown) => (callback as Callback)(err && mark(err), c)) as never);
      return super.connect().catch((err: Error) => {
        throw mark(err);
      });
    }

    override query(config: any, values?: any, callback?: any): any {
      const plain = typeof config === 'string' || (config !== null && typeof config === 'object' && typeof config.submit !== 'function' && typeof config.text === 'string');
      if (!plain) return super.query(config, values, callback);
      if (typeof values === 'function') [callback, values] = [values, undefined];
      const q = typeof config === 'string' ? { text: config, values } : values === undefined ? { ...config } : { ...config, values };
      if (q.text === LOCAL_TIMEOUT_TEXT) {
        const ms = Number(q.values?.[0]);
        this.limitMs = ms > 0 ? ms + state.marginMs : 0;
      }
      if (this.limitMs > 0 && q.query_timeout === undefined) q.query_timeout = this.limitMs;
      if (state.cut) {
        this.cut();
        const err = markUnavailable(new Error('The database connections were closed for shutdown.'));
        if (callback) return void process.nextTick(() => (callback as Callback)(err));
        return Promise.reject(err);
      }
      if (callback) return super.query(q, (err: Error | null, res: unknown) => (callback as Callback)(err && this.failed(err), res));
      return (super.query(q) as Promise<unknown>).catch((err: Error) => {
        throw this.failed(err);
      });
    }
  }
  return Timed as unknown as new (config?: pg.ClientConfig) => TimedClient;
}
