// One error family for the whole domain. Codes are the spec's (Part 1 §7); the HTTP
// status of each code is fixed here, and the server maps a DomainError to its
// envelope in exactly one place. The remote CLI backend decodes envelopes back into it.

export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  BAD_REQUEST: 400,
  AUTHENTICATION_FAILED: 401,
  INVALID_TOKEN: 401,
  PERMISSION_DENIED: 403,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  DUPLICATE_ENTRY: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  BUSINESS_LOGIC_ERROR: 422,
  /** Not in the spec's table: a plain request to the realtime WebSocket address (docs/realtime.md). */
  UPGRADE_REQUIRED: 426,
  RATE_LIMIT_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
  BAD_GATEWAY: 502,
  SERVICE_UNAVAILABLE: 503,
  GATEWAY_TIMEOUT: 504,
  /** Not in the spec's table (which has no code for it): a full disk, ours (docs/operations.md "When a dependency fails"). */
  INSUFFICIENT_STORAGE: 507,
  /** Not in the spec's table: a CLI command stopped by Ctrl-C (docs/cli.md); 499 as nginx logs a client that went away. Never an API answer. */
  INTERRUPTED: 499,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
/** Field → its messages; a field is a body member's name, a dotted path into it (`settings.display_name`, `0.email`), or `non_field_errors`. */
export type FieldErrors = Record<string, string[]>;

/** The members of the error envelopes (standard, flag, legacy; Part 1 §7): never a field's top-level copy. */
export const ENVELOPE_MEMBERS: ReadonlySet<string> = new Set(['status', 'code', 'message', 'detail', 'errors', 'data', 'success', 'status_code', 'error', 'details', 'retry_after']);

/** An own, enumerable member, whatever its name (`__proto__` included). */
const define = (target: Record<string, unknown>, key: string, value: unknown) =>
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });

/** The exact texts of spec Part 1 §5 item 7. */
export const NOT_AUTHENTICATED_DETAIL = 'Authentication credentials were not provided.';
export const PERMISSION_DENIED_DETAIL = 'You do not have permission to perform this action.';

export interface DomainErrorOptions {
  detail?: string;
  errors?: FieldErrors;
  data?: Record<string, unknown>;
  /** Further top-level body fields (the 429 body's `retry_after`, for example). */
  extra?: Record<string, unknown>;
}

export class DomainError extends Error {
  override name = 'DomainError';
  readonly code: ErrorCode;
  readonly detail?: string;
  readonly errors?: FieldErrors;
  readonly data?: Record<string, unknown>;
  readonly extra?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: DomainErrorOptions = {}) {
    super(message);
    this.code = code;
    this.detail = options.detail;
    this.errors = options.errors;
    this.data = options.data;
    this.extra = options.extra;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  /**
   * The error body: the standard form of spec Part 1 §7, and, for an error naming fields, the
   * field form too — each field's messages also at the top level, as the spec writes field-keyed
   * 400s (`{json_schema: [...]}`, `{paths: [...]}`) — but for a field named like a member of the
   * envelope, which stays in `errors` only (docs/api-conventions.md "Field errors").
   */
  toBody(): Record<string, unknown> {
    const body: Record<string, unknown> = { status: 'error', code: this.code, message: this.message };
    if (this.detail !== undefined) body.detail = this.detail;
    if (this.errors !== undefined) body.errors = this.errors;
    if (this.data !== undefined) body.data = this.data;
    for (const [field, messages] of Object.entries(this.errors ?? {})) {
      if (!ENVELOPE_MEMBERS.has(field) && !Object.hasOwn(this.extra ?? {}, field)) define(body, field, messages);
    }
    return { ...body, ...this.extra };
  }

  /** Rebuilds a DomainError from a standard error body (remote CLI backend). */
  static fromBody(status: number, body: unknown): DomainError {
    const b = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const code = typeof b.code === 'string' && b.code in ERROR_STATUS ? (b.code as ErrorCode) : codeForStatus(status);
    const message = typeof b.message === 'string' ? b.message : typeof b.detail === 'string' ? b.detail : `HTTP ${status}`;
    const { status: _s, code: _c, message: _m, detail, errors, data, ...rest } = b;
    const fields = errors && typeof errors === 'object' ? (errors as FieldErrors) : undefined;
    // Further top-level fields (`retry_after`, …) survive the round trip (toBody() gives the body
    // back); the field form's copies of `errors` are toBody()'s own.
    const extra = Object.fromEntries(Object.entries(rest).filter(([k]) => !(fields && Object.hasOwn(fields, k))));
    return new DomainError(code, message, {
      detail: typeof detail === 'string' ? detail : undefined,
      errors: fields,
      data: data && typeof data === 'object' ? (data as Record<string, unknown>) : undefined,
      extra: Object.keys(extra).length ? extra : undefined,
    });
  }
}

function codeForStatus(status: number): ErrorCode {
  const found = (Object.entries(ERROR_STATUS) as [ErrorCode, number][]).find(([, s]) => s === status);
  return found ? found[0] : status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST';
}

/**
 * Adds a message to a field's list once. Own keys only, defined (not assigned): a field may be
 * named `constructor` or `__proto__`, which a plain object would otherwise resolve or swallow.
 */
export function addFieldError(errors: FieldErrors, field: string, text: string): void {
  if (!Object.hasOwn(errors, field)) define(errors, field, []);
  if (!errors[field]!.includes(text)) errors[field]!.push(text);
}

export const validationError = (errors: FieldErrors, message = 'Invalid input.'): DomainError =>
  new DomainError('VALIDATION_ERROR', message, { errors });

export const fieldError = (field: string, text: string): DomainError => validationError({ [field]: [text] });

/** 404 with the standard detail: the message `<what> not found.`, or a whole message of its own (`{ message }`). */
export const notFound = (what: string | { message: string } = 'Resource'): DomainError =>
  new DomainError('NOT_FOUND', typeof what === 'string' ? `${what} not found.` : what.message, { detail: 'Not found.' });

/** 401: no credentials (`detail` is Part 1 §7's text), or credentials refused (`detail` says the same as `message`: a wrong password is not "not provided"). */
/** 404 for a site, named as the caller named it (`Site "shop_prod" not found.`): one the caller may not view looks the same. */
export const siteNotFound = (ref: string): DomainError => notFound({ message: `Site "${ref.slice(0, 100)}" not found.` });

export const notAuthenticated = (message: string = NOT_AUTHENTICATED_DETAIL): DomainError =>
  new DomainError('AUTHENTICATION_FAILED', message, { detail: message });

export const invalidToken = (message: string): DomainError =>
  new DomainError('INVALID_TOKEN', message, { detail: NOT_AUTHENTICATED_DETAIL });

export const permissionDenied = (message: string = PERMISSION_DENIED_DETAIL): DomainError =>
  new DomainError('PERMISSION_DENIED', message, { detail: PERMISSION_DENIED_DETAIL });
