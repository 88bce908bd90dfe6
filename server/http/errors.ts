// The one place where anything thrown becomes an HTTP response in the standard envelope.
// Faults answer as faults: the database unreachable → 503 SERVICE_UNAVAILABLE with Retry-After,
// a full disk → 507 INSUFFICIENT_STORAGE; both are logged once per burst (db/availability.ts
// FaultLog), never a stack per request.
import type { Next } from 'koa';
import type { FaultLog } from '../../shared/db/availability.ts';
import { isDatabaseUnavailable, isStorageFull } from '../../shared/db/errors.ts';
import { isStatementTimeout } from '../../shared/db/statement-timeout.ts';
import { DomainError, notFound } from '../../shared/errors.ts';
import type { Logger } from '../../shared/common/logger.ts';
import { redactPath } from './redact.ts';
import type { AppContext } from './types.ts';

/** What a client is told to wait before retrying after a 503 of the database (seconds). */
export const UNAVAILABLE_RETRY_AFTER = 5;

/** How the faults of a dependency are logged: one line per burst (db/availability.ts). */
export interface FaultLogs {
  database: FaultLog;
  storage: FaultLog;
}

export const databaseUnavailable = (): DomainError =>
  new DomainError('SERVICE_UNAVAILABLE', `The database is unavailable; retry in ${UNAVAILABLE_RETRY_AFTER} seconds.`, {
    detail: 'Service temporarily unavailable.',
    extra: { retry_after: UNAVAILABLE_RETRY_AFTER },
  });

export const storageFull = (): DomainError =>
  new DomainError('INSUFFICIENT_STORAGE', 'Not enough storage space to complete the request; nothing was written.', { detail: 'Insufficient storage.' });

function toDomainError(err: unknown): DomainError | undefined {
  if (err instanceof DomainError) return err;
  const e = err as { status?: number; statusCode?: number; httpCode?: number; type?: string; message?: string; expose?: boolean; name?: string };
  const status = e?.status ?? e?.statusCode ?? e?.httpCode;
  if (status === 413 || e?.type === 'entity.too.large') {
    return new DomainError('PAYLOAD_TOO_LARGE', 'Request body is too large.', { detail: 'Request body is too large.' });
  }
  if (err instanceof SyntaxError || e?.type === 'entity.parse.failed') {
    return new DomainError('BAD_REQUEST', `Malformed JSON in request body: ${e.message}`, { detail: 'JSON parse error.' });
  }
  if (status === 415) return new DomainError('UNSUPPORTED_MEDIA_TYPE', e.message ?? 'Unsupported media type.');
  if (status === 405) return new DomainError('METHOD_NOT_ALLOWED', 'Method not allowed.', { detail: 'Method not allowed.' });
  if (status === 400 && e.expose) return new DomainError('BAD_REQUEST', e.message ?? 'Bad request.');
  if (status === 404) return notFound({ message: 'Not found.' });
  if (isStatementTimeout(err)) {
    return new DomainError('GATEWAY_TIMEOUT', 'The database did not answer in time.', { detail: 'The request took too long; try again, or narrow it down.' });
  }
  return undefined;
}

/** A fault of a dependency, logged through its burst log: the answer, or undefined for anything else. */
function fault(err: unknown, faults: FaultLogs, context: Record<string, unknown>): DomainError | undefined {
  if (err instanceof DomainError) return undefined;
  if (isDatabaseUnavailable(err)) {
    faults.database.failed(err, context);
    return databaseUnavailable();
  }
  if (isStorageFull(err)) {
    faults.storage.failed(err, context);
    return storageFull();
  }
  return undefined;
}

/** nginx's status for a request its client abandoned: only ever in the log. */
const CLIENT_CLOSED_REQUEST = 499;

/** Whether the client is gone before sending all of its body (what then failed is of no interest to anyone). */
const clientGone = (ctx: AppContext): boolean => !ctx.req.complete && (ctx.req.destroyed || ctx.req.socket?.destroyed === true);

export function errorMiddleware(log: Logger, faults: FaultLogs) {
  return async (ctx: AppContext, next: Next) => {
    try {
      await next();
      if (ctx.body === undefined || ctx.body === null) {
        if (ctx.status === 404) throw notFound({ message: `No route matches ${ctx.method} ${ctx.path}.` });
        // The router answered 405 (with Allow) or 501 for an unknown method: add the envelope.
        if (ctx.status === 405 || ctx.status === 501) {
          const text = `Method "${ctx.method}" not allowed.`;
          ctx.body = new DomainError('METHOD_NOT_ALLOWED', text, { detail: text }).toBody();
          ctx.status = 405;
        }
      }
    } catch (err) {
      if (clientGone(ctx)) {
        // The client went away before its request's body ended (an upload cut off): nobody reads an
        // answer; the request's log line says 499 (nginx's "client closed request"), no error.
        ctx.status = CLIENT_CLOSED_REQUEST;
        ctx.body = new DomainError('BAD_REQUEST', 'The client closed the request before its body ended.').toBody();
        return;
      }
      let domain = fault(err, faults, { requestId: ctx.state.requestId, method: ctx.method, path: redactPath(ctx.path) }) ?? toDomainError(err);
      if (!domain) {
        // Unexpected: log it whole (with the request id), answer without internals.
        log.error({ err, requestId: ctx.state.requestId, method: ctx.method, path: redactPath(ctx.path) }, 'unhandled error');
        domain = new DomainError('INTERNAL_ERROR', 'An internal error occurred.', {
          detail: `An internal error occurred. Quote request id ${ctx.state.requestId} when reporting it.`,
        });
      }
      // A statement timeout is an answer (504), but operators need to see it.
      if (domain.code === 'GATEWAY_TIMEOUT') log.warn({ err, requestId: ctx.state.requestId, method: ctx.method, path: redactPath(ctx.path) }, 'database statement timeout');
      ctx.status = domain.status;
      ctx.body = domain.toBody();
      // Every answer that says when to retry (429 of the rate limits and long operations, 503) says it in Retry-After too.
      const retryAfter = domain.extra?.retry_after;
      if (typeof retryAfter === 'number') ctx.set('Retry-After', String(retryAfter));
      const allow = (err as { headers?: Record<string, string> })?.headers?.Allow;
      if (allow) ctx.set('Allow', allow);
      if (domain.status === 401) ctx.set('WWW-Authenticate', 'Bearer realm="api"');
    }
  };
}
