// Who made a change, for the change log (changelog.ts; issue 35): the log's trigger records the
// transaction's `platform.actor` setting. Every write to a logged table (records, storage
// objects) attributes itself here: a transaction sets it first (writeTransaction); a write that
// is one statement outside any transaction (issue 33's one round trip) joins a one-row FROM item
// that sets it (actorItem), so it costs no round trip. The system actor (operators, the CLI's
// direct mode without --as) sets nothing: its changes have no actor. Both tell the call that it
// wrote a logged table (ServiceContext.wrote): the request announces it (announce.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { actorUuid, type ServiceContext } from '../context.ts';
import type { SqlFragment } from '../data/query/filter.ts';

/** Attributes the changes of the transaction `tx` to the call's actor. */
export async function attribute(tx: EntityManager, ctx: ServiceContext): Promise<void> {
  ctx.wrote?.();
  const who = actorUuid(ctx);
  if (who) await tx.execute(`SELECT set_config('platform.actor', ?, true)`, [who]);
}

/** `ctx.em.transactional` whose changes are attributed to the call's actor. */
export function writeTransaction<T>(ctx: ServiceContext, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  return ctx.em.transactional(async (tx) => {
    await attribute(tx as EntityManager, ctx);
    return work(tx as EntityManager);
  });
}

/**
 * A FROM item (`, <item>` after a statement's own) that attributes a statement's changes to the
 * call's actor: set once, when the statement reads it, before its end-of-statement triggers run.
 * Undefined for the system actor.
 */
export function actorItem(ctx: ServiceContext): SqlFragment | undefined {
  ctx.wrote?.();
  return byUser(actorUuid(ctx));
}

/** actorItem for a user known by its UUID (null: the system actor, nothing). */
export const byUser = (who: string | null): SqlFragment | undefined =>
  who ? { sql: `(SELECT set_config('platform.actor', ?, true)) AS platform_actor`, params: [who] } : undefined;
