// The one place where anything thrown becomes an HTTP response in the standard envelope.
import type { Next } from 'koa';
import { isStatementTimeout } from '../../shared/db/statement-timeout.ts';
import { DomainError, notFound } from '../../shared/errors.ts';
import type { Logger } from '../../shared/common/logger.ts';
import { redactPath } from './redact.ts';
import type { AppContext } from './types.ts';

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

export function errorMiddleware(log: Logger) {
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
      let domain = toDomainError(err);
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
      const allow = (err as { headers?: Record<string, string> })?.headers?.Allow;
      if (allow) ctx.set('Allow', allow);
      if (domain.status === 401) ctx.set('WWW-Authenticate', 'Bearer realm="api"');
    }
  };
}
