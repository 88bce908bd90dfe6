// Response envelopes of spec Part 1 §7/§8 and their schemas (for OpenAPI).
import { Type, type TSchema } from '@sinclair/typebox';
import { createdBody, messageBody } from '../../shared/common/envelopes.ts';
import { pageEnvelope, type Page } from '../../shared/common/pagination.ts';
import { DomainError } from '../../shared/errors.ts';
import type { AppContext } from './types.ts';

export const ErrorBody = Type.Object(
  {
    status: Type.Literal('error'),
    code: Type.String({ description: 'VALIDATION_ERROR, BAD_REQUEST, AUTHENTICATION_FAILED, INVALID_TOKEN, PERMISSION_DENIED, NOT_FOUND, …' }),
    message: Type.String(),
    detail: Type.Optional(Type.String()),
    errors: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()), { description: 'Field (a body member, a dotted path, or non_field_errors) → its messages' })),
    data: Type.Optional(Type.Object({})),
  },
  {
    $id: 'Error',
    description: 'The standard error form (Part 1 §7). Each field of `errors` is also a member of the body with the same messages (the field form), unless named like a member of the envelope; flag-form routes add `success: false` and `status_code`.',
  },
);

export const MessageBody = Type.Object({ status: Type.Literal('success'), message: Type.String() }, { $id: 'Message' });

export const created = (data: TSchema) => Type.Object({ status: Type.Literal('success'), message: Type.String(), data });

/** The flag form of §7 ({success, message, data}). */
export const flagged = (data: TSchema) => Type.Object({ success: Type.Literal(true), message: Type.String(), data });

export const paginated = (item: TSchema) =>
  Type.Object({
    count: Type.Integer(),
    next: Type.Union([Type.String({ format: 'uri' }), Type.Null()]),
    previous: Type.Union([Type.String({ format: 'uri' }), Type.Null()]),
    results: Type.Array(item),
  });

/** The absolute URL of this request, for pagination links (PLATFORM_PUBLIC_URL wins when set). */
export function requestUrl(ctx: AppContext, publicUrl: string | undefined): string {
  return publicUrl ? new URL(ctx.originalUrl, publicUrl).toString() : `${ctx.protocol}://${ctx.host}${ctx.originalUrl}`;
}

export function sendPage<T>(ctx: AppContext, page: Page<T>, publicUrl: string | undefined): void {
  ctx.body = pageEnvelope(page, requestUrl(ctx, publicUrl));
}

export function sendCreated(ctx: AppContext, message: string, data: unknown): void {
  ctx.status = 201;
  ctx.body = createdBody(message, data);
}

/** The schema of the flag form's answer around `data` (sendFlagged). */
export const FlaggedBody = (data: TSchema) => Type.Object({ success: Type.Literal(true), message: Type.String(), status_code: Type.Integer(), data });

/** The flag form with its status code (spec Part 3 §4: storage, frontend workers): {success, message, status_code, data}; `data` left out when undefined. */
export function sendFlagged(ctx: AppContext, status: number, message: string, data?: unknown): void {
  ctx.status = status;
  ctx.body = data === undefined ? { success: true, message, status_code: status } : { success: true, message, status_code: status, data };
}

export function sendMessage(ctx: AppContext, message: string): void {
  ctx.body = messageBody(message);
}

/**
 * An error of a route answering in the flag form (RouteDef.errorForm): its members as well
 * ({success: false, message, status_code}) beside the standard ones (§7).
 */
export const flagForm = (err: DomainError): DomainError =>
  new DomainError(err.code, err.message, { detail: err.detail, errors: err.errors, data: err.data, extra: { ...err.extra, success: false, status_code: err.status } });
