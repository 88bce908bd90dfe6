// The stored side of Idempotency-Key (public.idempotency_keys, platform migration 0007): a key is
// reserved by its first request (a lease), then holds that request's answer for 24 hours. The
// HTTP side (what a request's fingerprint and answer are, replays) is server/http/idempotency.ts;
// docs/api-conventions.md "Idempotency-Key".
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { countOf, firstRow } from './sql.ts';

/** How long an answer is kept (and a key stays taken). */
export const IDEMPOTENCY_TTL_HOURS = 24;

/** Whose key it is: the site (null: the platform host) and the principal that sent it. */
export interface IdempotencyScope {
  site: string | null;
  principal: string;
  key: string;
}

export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A reservation held by one request: its row and the token that proves it still holds it. */
export interface Lease {
  id: string;
  token: string;
}

export type Reservation =
  | { kind: 'reserved'; lease: Lease }
  /** The key answered a request with the same fingerprint: its answer. */
  | { kind: 'replay'; answer: StoredAnswer }
  /** The key belongs to another request (another method, path or body). */
  | { kind: 'mismatch' }
  /** The key's first request is still running (its lease is live). */
  | { kind: 'running' };

/**
 * Takes the key for a request with `fingerprint`, unless it is held: a key whose answer expired,
 * or whose request died without one (its lease ran out), is taken again.
 */
export async function reserve(em: EntityManager, scope: IdempotencyScope, fingerprint: string, operation: string, leaseMs: number): Promise<Reservation> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const token = randomUUID();
    const taken = await firstRow<{ id: string }>(
      em,
      `INSERT INTO public.idempotency_keys AS k (site_schema, principal, key, fingerprint, operation, lock_token, locked_until, expires_at)
       VALUES (?, ?, ?, ?, ?, ?::uuid, now() + ? * interval '1 millisecond', now() + ? * interval '1 hour')
       ON CONFLICT ON CONSTRAINT idempotency_keys_scope_key DO UPDATE
         SET fingerprint = EXCLUDED.fingerprint, operation = EXCLUDED.operation, lock_token = EXCLUDED.lock_token, locked_until = EXCLUDED.locked_until,
             expires_at = EXCLUDED.expires_at, created_at = now(), status = NULL, headers = NULL, body = NULL
         WHERE k.expires_at <= now() OR (k.status IS NULL AND k.locked_until <= now())
       RETURNING id`,
      [scope.site, scope.principal, scope.key, fingerprint, operation, token, leaseMs, IDEMPOTENCY_TTL_HOURS],
    );
    if (taken) return { kind: 'reserved', lease: { id: String(taken.id), token } };
    const held = await firstRow<{ fingerprint: string; status: number | null; headers: Record<string, string> | null; body: Buffer | null }>(
      em,
      'SELECT fingerprint, status, headers, body FROM public.idempotency_keys WHERE site_schema IS NOT DISTINCT FROM ? AND principal = ? AND key = ?',
      [scope.site, scope.principal, scope.key],
    );
    if (!held) continue; // released meanwhile: take it
    if (held.fingerprint !== fingerprint) return { kind: 'mismatch' };
    if (held.status === null) return { kind: 'running' };
    return { kind: 'replay', answer: { status: held.status, headers: held.headers ?? {}, body: held.body ?? Buffer.alloc(0) } };
  }
  return { kind: 'running' };
}

/** Keeps a running request's lease alive. */
export async function renew(em: EntityManager, lease: Lease, leaseMs: number): Promise<void> {
  await em.execute(`UPDATE public.idempotency_keys SET locked_until = now() + ? * interval '1 millisecond' WHERE id = ? AND lock_token = ?::uuid AND status IS NULL`, [leaseMs, lease.id, lease.token]);
}

/** Stores the answer of the request holding `lease` (in `em`'s transaction, when it has one: the write's). */
export async function complete(em: EntityManager, lease: Lease, answer: StoredAnswer): Promise<void> {
  await em.execute(
    'UPDATE public.idempotency_keys SET status = ?, headers = ?::jsonb, body = ?, lock_token = NULL, locked_until = NULL WHERE id = ? AND lock_token = ?::uuid',
    [answer.status, JSON.stringify(answer.headers), answer.body, lease.id, lease.token],
  );
}

/** Gives the key up (the request failed: nothing it did is kept, so it may be sent again). */
export async function release(em: EntityManager, lease: Lease): Promise<void> {
  await em.execute('DELETE FROM public.idempotency_keys WHERE id = ? AND lock_token = ?::uuid AND status IS NULL', [lease.id, lease.token]);
}

/** Expired keys go (the scheduled prune); returns how many. */
export async function pruneIdempotencyKeys(em: EntityManager): Promise<number> {
  return countOf(em, 'WITH d AS (DELETE FROM public.idempotency_keys WHERE expires_at < now() RETURNING 1) SELECT count(*) AS n FROM d');
}
