// GET, edit, PUT (docs/api-conventions.md): an update body accepts every field the resource's
// GET returns. Fields the caller cannot change are declared read-only in the update schema
// (JSON Schema `readOnly`, which the OpenAPI document shows): sent back unchanged they are
// ignored, sent with another value they are a 400 naming the field. Fields that GET does not
// return stay unknown (400), as before.
import { Type, type TObject, type TOptional, type TProperties, type TSchema } from '@sinclair/typebox';
import { validationError, type FieldErrors } from '../errors.ts';

export const READ_ONLY_MESSAGE = 'This field is read-only and cannot be changed.';

/** Marks a read-only field the server maintains itself (`modified`, `last_login`): a stale value sent back is ignored, never refused. */
const MAINTAINED = 'x-server-maintained';

/**
 * The view's `keys` as optional read-only properties of an update schema (the view's own
 * types, so a value of the wrong type is refused as such). `maintained`: fields the server
 * changes by itself (timestamps), whose value sent back is ignored whatever it is — a client
 * holding a copy from before another change must not be refused for it.
 */
export function readOnlyProps<P extends TProperties, const K extends keyof P & string>(
  view: TObject<P>,
  keys: readonly K[],
  kind: 'immutable' | 'maintained' = 'immutable',
): { [k in K]: TOptional<P[k]> } {
  const out: Record<string, TSchema> = {};
  for (const key of keys) {
    const { $id: _id, ...schema } = view.properties[key] as TSchema;
    out[key] = Type.Optional({ ...schema, readOnly: true, ...(kind === 'maintained' ? { [MAINTAINED]: true } : {}) } as TSchema);
  }
  return out as { [k in K]: TOptional<P[k]> };
}

function readOnlyKeys(schema: TObject): [string, boolean][] {
  return Object.entries(schema.properties)
    .filter(([, prop]) => (prop as { readOnly?: boolean }).readOnly === true)
    .map(([key, prop]) => [key, (prop as Record<string, unknown>)[MAINTAINED] === true]);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)$/;

/** Equality of a value sent back with the current one: JSON-deep, key order free; UUIDs and timestamps by meaning. */
export function sameValue(sent: unknown, current: unknown): boolean {
  if (current instanceof Date) current = current.toISOString();
  if (typeof sent === 'string' && typeof current === 'string') {
    if (sent === current) return true;
    if (UUID.test(sent) && UUID.test(current)) return sent.toLowerCase() === current.toLowerCase();
    if (TIMESTAMP.test(sent) && TIMESTAMP.test(current)) return Date.parse(sent) === Date.parse(current);
    return false;
  }
  if (Array.isArray(sent) || Array.isArray(current)) {
    return Array.isArray(sent) && Array.isArray(current) && sent.length === current.length && sent.every((v, i) => sameValue(v, current[i]));
  }
  if (sent && current && typeof sent === 'object' && typeof current === 'object') {
    const a = sent as Record<string, unknown>;
    const b = current as Record<string, unknown>;
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].every((k) => sameValue(a[k], b[k]));
  }
  return sent === current || (sent == null && current == null);
}

/**
 * Removes from `input` the read-only fields of `schema` that equal the resource's current
 * values (`current`: its GET body); a read-only field with another value is a 400 naming it.
 * Returns `input` without them, ready for the update.
 */
export function dropReadOnly<T extends object>(schema: TObject, input: T, current: Record<string, unknown>): T {
  const errors: FieldErrors = {};
  const body = input as Record<string, unknown>;
  for (const [key, maintained] of readOnlyKeys(schema)) {
    if (!(key in body)) continue;
    if (!maintained && !sameValue(body[key], current[key])) errors[key] = [READ_ONLY_MESSAGE];
    delete body[key];
  }
  if (Object.keys(errors).length) throw validationError(errors);
  return input;
}

/**
 * Removes the fields of `input` whose value equals the current one (a client that sends a
 * whole body back changes only what differs): what remains is what the caller changes, and
 * only that is authorized field by field. `keep` names fields never treated so (passwords).
 */
export function withoutUnchanged<T extends object>(input: T, current: Record<string, unknown>, keep: readonly string[] = []): T {
  const body = input as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!keep.includes(key) && key in current && sameValue(body[key], current[key])) delete body[key];
  }
  return input;
}
