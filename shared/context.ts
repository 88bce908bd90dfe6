import type { EntityManager } from '@mikro-orm/postgresql';
import { defineAbility, type Actor, type AppAbility } from './auth/actor.ts';
import { DomainError } from './errors.ts';
import type { Grants } from './permissions/grants.ts';
import type { RequestCaches } from './common/request-caches.ts';
import type { UserEvents } from './functions/events.service.ts';
import type { LongOperations } from './db/long-operations.ts';

/** What every service call receives: its unit of work, who acts, what they may do, and the tenant. */
export interface ServiceContext {
  em: EntityManager;
  actor: Actor;
  ability: AppAbility;
  /** The site schema the call works in; null on the platform (control plane). */
  tenant: string | null;
  /** A platform user's organization and site grants, once loaded (permissions/grants.ts: abilityWithGrants). */
  grants?: Grants;
  /** A site user's permission codenames in its site, once loaded (the same abilityWithGrants). */
  sitePermissions?: ReadonlySet<string>;
  /** A longer statement timeout for this call's long transaction (db/long-operations.ts longTransaction); unset: the pool's. */
  statementTimeoutMs?: number;
  /** The process's slots for long operations (db/long-operations.ts); none in the CLI's direct commands (no limit). */
  longOperations?: LongOperations;
  /** The server process's caches (table definitions); none in the CLI's direct mode. */
  caches?: RequestCaches;
  /**
   * Where a statement that stands alone goes (readsOf: a read, or a write of one statement outside
   * any transaction, no entity): the request's unit of work once it has one, else the ORM's root
   * (no unit of work is made for it: a fork costs more than the statement's own work here).
   */
  reads?: () => EntityManager;
  /** Publishes the site's user-creation events (functions/events.service.ts); the server and the CLI always pass it. */
  events?: UserEvents;
  /** Told when the call writes a table the change log follows (realtime/actor.ts): the request announces it once committed (realtime/announce.ts). */
  wrote?: () => void;
}

/** The EntityManager a statement that stands alone (a read, or a one-statement write; no transaction, no entity) uses: see ServiceContext.reads. */
export const readsOf = (ctx: ServiceContext): EntityManager => ctx.reads?.() ?? ctx.em;

/** A request's unit of work, made on first use: `get()` forks the ORM's root EntityManager then; `reads()` is that fork if made, else the root. */
export interface LazyEntityManager {
  get(): EntityManager;
  reads(): EntityManager;
}

/** `root`: the pool's root EntityManager, or where to find it when first used (the request's site's cluster: server/http/middleware.ts). */
export function lazyEntityManager(root: EntityManager | (() => EntityManager)): LazyEntityManager {
  let em: EntityManager | undefined;
  const rootOf = typeof root === 'function' ? root : () => root;
  return { get: () => (em ??= rootOf().fork()), reads: () => em ?? rootOf() };
}

/** `em`: the call's unit of work, or a request's made on first use; `ability`: the actor's, when authentication has it already (cached with the user). */
export function makeContext(
  em: EntityManager | LazyEntityManager,
  actor: Actor,
  tenant: string | null = null,
  extra: { ability?: AppAbility; caches?: RequestCaches; events?: UserEvents; longOperations?: LongOperations } = {},
): ServiceContext {
  const fields = { actor, ability: extra.ability ?? defineAbility(actor), tenant, caches: extra.caches, events: extra.events, longOperations: extra.longOperations };
  if ('reads' in em) return Object.assign(new WithLazyEm(em), fields, { reads: em.reads }) as unknown as ServiceContext;
  return { em, ...fields };
}

/**
 * An object whose `em` is a lazy unit of work's, made on first use, by a getter of the class: the
 * objects of every request share one shape. (A getter put on each object by defineProperty gives
 * each its own hidden class, and every property read on such objects takes V8's slow path.)
 */
export class WithLazyEm {
  readonly #unit: LazyEntityManager;

  constructor(unit: LazyEntityManager) {
    this.#unit = unit;
  }

  get em(): EntityManager {
    return this.#unit.get();
  }
}

/** The acting user's UUID (what created_by / modified_by record); null for a system actor. */
export const actorUuid = (ctx: ServiceContext): string | null => (ctx.actor.kind === 'user' ? ctx.actor.uuid : null);

/** The signed-in user whose profile the call works on: the system actor has none (400). */
export function ownUuid(ctx: ServiceContext): string {
  if (ctx.actor.kind !== 'user') throw new DomainError('BAD_REQUEST', 'The profile belongs to a signed-in user; the system actor has none.');
  return ctx.actor.uuid;
}
