// Long operations (CSV imports and exports, materializations, schema migrations and their
// rollbacks, site creation) hold a pooled connection for seconds or minutes. However many a site
// starts, it holds at most LONG_OPERATIONS_PER_SITE connections that way, and the process at most
// LONG_OPERATIONS_TOTAL (default: half the pool): the rest of the pool always serves everyone's
// short requests. One over the limit waits for a slot (at most LONG_OPERATION_WAIT_MS, holding no
// connection), then is refused with Retry-After: 429 when its site has its share running, 503
// when the process is full.
//
// The way in is longTransaction(): a slot, then the transaction with the long statement timeout
// (the only way to get it), so a new long operation cannot skip the slot; a long read outside a
// transaction (an export's cursor) takes its slot with longOperation().
import type { EntityManager } from '@mikro-orm/postgresql';
import type { LongOperationLimits } from '../config.ts';
import type { ServiceContext } from '../context.ts';
import { DomainError } from '../errors.ts';
import { setLocalStatementTimeout } from './statement-timeout.ts';

/** What a refused long operation is told to wait (seconds). */
export const LONG_RETRY_AFTER = 5;

const WHAT = 'long operations (imports, exports, materializations, migrations, site creation)';

export class LongOperations {
  readonly limits: LongOperationLimits;
  readonly #running = new Map<string, number>();
  #total = 0;
  readonly #waiting: { key: string; grant: () => void }[] = [];

  constructor(limits: LongOperationLimits) {
    this.limits = limits;
  }

  #fits(key: string): boolean {
    return this.#total < this.limits.total && (this.#running.get(key) ?? 0) < this.limits.perSite;
  }

  #take(key: string): () => void {
    this.#total++;
    this.#running.set(key, (this.#running.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total--;
      const left = this.#running.get(key)! - 1;
      if (left) this.#running.set(key, left);
      else this.#running.delete(key);
      this.#wake();
    };
  }

  /** Hands freed slots to the waiters that fit, oldest first. */
  #wake(): void {
    for (let i = 0; i < this.#waiting.length; ) {
      const w = this.#waiting[i]!;
      if (!this.#fits(w.key)) i++;
      else {
        this.#waiting.splice(i, 1);
        w.grant();
      }
    }
  }

  /** A slot for one long operation of `key` (a site, or an organization for site creation); the function returned gives it back. */
  async acquire(key: string): Promise<() => void> {
    if (this.#fits(key)) return this.#take(key);
    return new Promise((resolve, reject) => {
      const waiter = {
        key,
        grant: () => {
          clearTimeout(timer);
          resolve(this.#take(key));
        },
      };
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        reject(this.#refusal(key));
      }, this.limits.waitMs);
      this.#waiting.push(waiter);
    });
  }

  #refusal(key: string): DomainError {
    const extra = { retry_after: LONG_RETRY_AFTER };
    if ((this.#running.get(key) ?? 0) >= this.limits.perSite) {
      const text = `Too many ${WHAT} running for this site: at most ${this.limits.perSite} at a time. Retry in ${LONG_RETRY_AFTER} seconds.`;
      return new DomainError('RATE_LIMIT_EXCEEDED', text, { detail: text, extra });
    }
    const text = `The server runs as many ${WHAT} as it may (${this.limits.total}). Retry in ${LONG_RETRY_AFTER} seconds.`;
    return new DomainError('SERVICE_UNAVAILABLE', text, { detail: 'Service temporarily unavailable.', extra });
  }
}

/** The slot's key: the call's site, else the platform. */
const keyOf = (ctx: ServiceContext, key?: string): string => key ?? ctx.tenant ?? 'platform';

/** A slot for a long operation outside a transaction (an export's cursor); call the result when it ends. Without a limiter (the CLI's direct commands): no limit. */
export async function longOperation(ctx: ServiceContext, key?: string): Promise<() => void> {
  return ctx.longOperations ? ctx.longOperations.acquire(keyOf(ctx, key)) : () => undefined;
}

/**
 * A long operation's transaction: a slot of its site (`key`: another scope, such as an
 * organization), then the transaction, whose statements may run up to the call's longer
 * statement timeout where it has one (a route marked `statementTimeout: 'long'`; CLI commands
 * have it for their whole pool).
 */
export async function longTransaction<T>(ctx: ServiceContext, work: (tx: EntityManager) => Promise<T>, key?: string): Promise<T> {
  const release = await longOperation(ctx, key);
  try {
    return await ctx.em.transactional(async (tx) => {
      if (ctx.statementTimeoutMs !== undefined) await setLocalStatementTimeout(tx as EntityManager, ctx.statementTimeoutMs);
      return work(tx as EntityManager);
    });
  } finally {
    release();
  }
}
