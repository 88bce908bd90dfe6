// Idempotency-Key (draft-ietf-httpapi-idempotency-key-header, as Stripe has it) for every route
// that declares `idempotent: true` (registry.ts): a client that got no answer sends the request
// again with the same key and gets the first answer back, never a second write. The keys are
// stored in PostgreSQL (shared/db/idempotency.ts), scoped by site and principal.
//
// - same key, same request (method, path, query, body: the fingerprint) → the stored answer,
//   with `Idempotent-Replayed: true`; the handler does not run;
// - same key, another request → 422; the same request while the first still runs → 409;
// - only a success (2xx) is stored: a refused or failed request gives its key back, so it can be
//   sent again (corrected, or once the fault is gone);
// - a route whose body is parsed before the handler runs (records) runs in one transaction with
//   the stored answer: the write and its key commit together or not at all. A streamed upload
//   cannot hold a transaction while its client sends (the upload commits its object in its own
//   short transaction), so its answer is stored just after: a crash between the two leaves the
//   key's lease to run out, after which a retry uploads again (a replace of the same object at
//   the same path, not a duplicate). docs/api-conventions.md "Idempotency-Key".
import { createHash } from 'node:crypto';
import { Stream } from 'node:stream';
import { complete, release, renew, reserve, type Lease, type StoredAnswer } from '../../shared/db/idempotency.ts';
import { DomainError } from '../../shared/errors.ts';
import type { RouteDef } from './registry.ts';
import type { AppContext } from './types.ts';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';
/** A running request's hold on its key: renewed while it runs; a dead process's runs out. */
const LEASE_MS = 60_000;
/** The answer's headers kept with it (the rest are the server's own, set again on a replay). */
const KEPT_HEADERS = ['content-type', 'location', 'etag', 'preference-applied'];
/** Request headers that are no part of what the request asks for. */
const TRANSPORT_HEADERS = new Set(['x-request-id', 'x-csrf-token', 'x-real-ip']);

/** The key from the header: 1 to 255 visible ASCII characters (a Structured Field string's quotes allowed); else 400. */
export function idempotencyKey(raw: string): string {
  const key = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (!/^[\x21\x23-\x5b\x5d-\x7e]{1,255}$/.test(key)) {
    throw new DomainError('BAD_REQUEST', `Invalid ${IDEMPOTENCY_HEADER} header: 1 to 255 visible ASCII characters without quotes or backslashes (a UUID is a good choice).`);
  }
  return key;
}

/** What the request asks for: method, path, query, the parsed body, or for a streamed body its type, length and the client's `X-` headers. */
function fingerprintOf(ctx: AppContext, def: RouteDef): string {
  const hash = createHash('sha256').update(`${ctx.method} ${ctx.path}?${ctx.querystring}\n`);
  if (def.bodyLimit === 'stream') {
    const type = (ctx.get('Content-Type').split(';')[0] ?? '').trim().toLowerCase();
    hash.update(`${type}\n${type === 'multipart/form-data' ? '' : ctx.get('Content-Length')}\n`);
    const own = Object.keys(ctx.req.headers).filter((h) => h.startsWith('x-') && !h.startsWith('x-forwarded-') && !TRANSPORT_HEADERS.has(h)).sort();
    for (const h of own) hash.update(`${h}: ${ctx.get(h)}\n`);
  } else hash.update(JSON.stringify((ctx.request as { body?: unknown }).body ?? null));
  return hash.digest('hex');
}

/** The answer as it will be sent, if it can be kept (a streamed body cannot). */
function answerOf(ctx: AppContext): StoredAnswer | undefined {
  const body = ctx.body;
  if (body instanceof Stream) return undefined;
  const bytes = body === null || body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const headers: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = ctx.response.get(name);
    if (value) headers[name] = String(value);
  }
  return { status: ctx.status, headers, body: bytes };
}

function replay(ctx: AppContext, def: RouteDef, answer: StoredAnswer): void {
  ctx.status = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) ctx.set(name, value);
  ctx.set(REPLAYED_HEADER, 'true');
  ctx.body = answer.body;
  // An upload's body is not read again: the connection closes after the answer instead.
  if (def.bodyLimit === 'stream') ctx.set('Connection', 'close');
}

const succeeded = (ctx: AppContext) => ctx.status >= 200 && ctx.status < 300;

/** Runs `handle` under the request's Idempotency-Key, if it sent one (see the head of this file). */
export async function idempotent(ctx: AppContext, def: RouteDef, handle: () => Promise<void>): Promise<void> {
  const raw = ctx.get(IDEMPOTENCY_HEADER);
  const actor = ctx.state.actor;
  if (!raw || !actor) return handle();
  const scope = { site: ctx.state.tenant, principal: actor.kind === 'user' ? actor.uuid : `system:${actor.name}`, key: idempotencyKey(raw) };
  // Outside the request's unit of work: the reservation commits at once, and the lease is renewed
  // on a connection of its own while the handler's transaction (if any) holds one.
  const db = ctx.state.reads().fork();
  const found = await reserve(db, scope, fingerprintOf(ctx, def), def.operationId, LEASE_MS);
  if (found.kind === 'replay') return replay(ctx, def, found.answer);
  if (found.kind === 'mismatch') {
    throw new DomainError('BUSINESS_LOGIC_ERROR', `This ${IDEMPOTENCY_HEADER} was sent with another request (method, path or body): a new request needs a new key.`);
  }
  if (found.kind === 'running') {
    ctx.set('Retry-After', '1');
    throw new DomainError('CONFLICT', `A request with this ${IDEMPOTENCY_HEADER} is still being processed: retry once it has been answered.`);
  }
  const { lease } = found;
  const renewal = setInterval(() => void renew(db, lease, LEASE_MS).catch(() => undefined), LEASE_MS / 3).unref();
  try {
    if (def.bodyLimit === 'stream') await handle();
    else await inTransaction(ctx, lease, handle);
    const answer = succeeded(ctx) ? answerOf(ctx) : undefined;
    if (answer && def.bodyLimit === 'stream') await complete(db, lease, answer);
    else if (!answer) await release(db, lease);
  } catch (err) {
    await release(db, lease).catch(() => undefined);
    throw err;
  } finally {
    clearInterval(renewal);
  }
}

/** The handler in a transaction of the request's unit of work (its services' transactions nest in it), with the answer stored before the commit. */
async function inTransaction(ctx: AppContext, lease: Lease, handle: () => Promise<void>): Promise<void> {
  const em = ctx.state.em;
  await em.begin();
  try {
    await handle();
    const answer = succeeded(ctx) ? answerOf(ctx) : undefined;
    if (answer) await complete(em, lease, answer);
    await em.commit();
  } catch (err) {
    await em.rollback().catch(() => undefined); // a lost connection rolled it back already; the first error is the answer
    throw err;
  }
}
