// One validation path for the whole platform: TypeBox schemas (JSON Schema) compiled by
// Ajv. Routes validate with these; services validate the same schemas for direct callers;
// OpenAPI is generated from them. Failures become 400 VALIDATION_ERROR with field-keyed messages.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { addFieldError, validationError, type FieldErrors } from '../errors.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

// The schemas compiled here are the code's own (TypeBox), never a caller's: they are not checked
// against the JSON Schema meta-schema first (compiling it costs each instance ≈ 25 ms, on every
// CLI command that validates anything). The instances that compile schemas built from stored
// definitions (data/record-validator.ts, data/field-types.ts, secrets) keep the check.
function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({ allErrors: true, coerceTypes, useDefaults: true, strict: false, removeAdditional: false, validateSchema: false });
  addFormats(ajv);
  return ajv;
}

const bodies = makeAjv(false);
// Query strings and path parameters arrive as strings: "true", "20" are coerced.
const strings = makeAjv(true);

const cache = new WeakMap<TSchema, { body?: ValidateFunction; query?: ValidateFunction }>();

function compiled(schema: TSchema, mode: 'body' | 'query'): ValidateFunction {
  let entry = cache.get(schema);
  if (!entry) cache.set(schema, (entry = {}));
  return (entry[mode] ??= (mode === 'body' ? bodies : strings).compile(schema));
}

const FORMAT_TEXT: Record<string, string> = {
  email: 'Enter a valid email address.',
  uuid: 'Must be a valid UUID.',
  uri: 'Enter a valid URL.',
  'date-time': 'Datetime has wrong format. Use ISO 8601.',
  date: 'Date has wrong format. Use YYYY-MM-DD.',
};

const TYPE_TEXT: Record<string, string> = {
  string: 'Not a valid string.',
  boolean: 'Must be a valid boolean.',
  integer: 'A valid integer is required.',
  number: 'A valid number is required.',
  object: 'Must be an object.',
  array: 'Expected a list of items.',
  null: 'Must be null.',
};

function messageFor(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return 'This field is required.';
    case 'additionalProperties':
      return 'Unknown field.';
    case 'type':
      return TYPE_TEXT[String(p.type).split(',')[0]] ?? `Must be of type ${p.type}.`;
    case 'format':
      return FORMAT_TEXT[String(p.format)] ?? `Must match format "${p.format}".`;
    case 'minLength':
      return p.limit === 1 ? 'This field may not be blank.' : `Ensure this field has at least ${p.limit} characters.`;
    case 'maxLength':
      return `Ensure this field has no more than ${p.limit} characters.`;
    case 'minimum':
      return `Ensure this value is greater than or equal to ${p.limit}.`;
    case 'maximum':
      return `Ensure this value is less than or equal to ${p.limit}.`;
    case 'pattern':
      return 'Enter a valid value.';
    case 'enum':
      return `Must be one of: ${(p.allowedValues as unknown[]).map(String).join(', ')}.`;
    case 'minProperties':
      return 'Provide at least one field.';
    default:
      return e.message ?? 'Invalid value.';
  }
}

/** Ajv errors → {field: [messages]}; `root` names errors about the whole document. */
export function toFieldErrors(errors: ErrorObject[], root = 'non_field_errors'): FieldErrors {
  const out: FieldErrors = {};
  // A value matching no alternative of an anyOf (`id` or `{id, name}`) is described by the
  // first alternative, the main form: not by every branch, nor by Ajv's "must match a schema in anyOf".
  const alternatives = errors.filter((e) => e.keyword === 'anyOf').map((e) => e.schemaPath);
  errors = errors.filter((e) => !alternatives.some((p) => e.schemaPath === p || (e.schemaPath.startsWith(`${p}/`) && !e.schemaPath.startsWith(`${p}/0/`))));
  for (const e of errors) {
    const p = e.params as Record<string, unknown>;
    let field = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
    if (e.keyword === 'required') field = field ? `${field}.${p.missingProperty}` : String(p.missingProperty);
    if (e.keyword === 'additionalProperties') field = field ? `${field}.${p.additionalProperty}` : String(p.additionalProperty);
    if (!field) field = root;
    addFieldError(out, field, messageFor(e));
  }
  return out;
}

/** A string out of a fixed list: one `enum` keyword (a clear "Must be one of: …" message). */
export const StringEnum = <const T extends readonly string[]>(values: T, options: { description?: string } = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

/**
 * How deep a JSON body may nest (objects and arrays): hashing, storing (JSON.stringify) and
 * checking a document walk it recursively, and a body of a few hundred thousand brackets would
 * overflow the stack of any of them.
 */
export const MAX_BODY_DEPTH = 100;

/** The top-level member (its key, an index in an array) holding a value nested deeper than MAX_BODY_DEPTH, if any. */
function tooDeep(data: object): string | undefined {
  const stack: [object, number, string][] = [[data, 1, '']];
  while (stack.length) {
    const [v, depth, top] = stack.pop()!;
    if (depth > MAX_BODY_DEPTH) return top;
    if (Array.isArray(v)) {
      // By index: `for…in` over an array makes a string of every index (20 ms for 100,000 numbers).
      for (let i = 0; i < v.length; i++) {
        const x: unknown = v[i];
        if (typeof x === 'object' && x !== null) stack.push([x, depth + 1, depth > 1 ? top : String(i)]);
      }
      continue;
    }
    for (const k in v) {
      const x = (v as Record<string, unknown>)[k];
      if (typeof x === 'object' && x !== null) stack.push([x, depth + 1, depth > 1 ? top : k]);
    }
  }
  return undefined;
}

/** Validates (and, for query strings, coerces) `data` in place; returns it typed or throws 400. */
export function validate<S extends TSchema>(schema: S, data: unknown, mode: 'body' | 'query' = 'body'): Static<S> {
  const fn = compiled(schema, mode);
  if (!fn(data)) {
    if (mode === 'body' && (data === null || typeof data !== 'object' || Array.isArray(data)) && schema.type === 'object') {
      throw validationError({ non_field_errors: ['Invalid data. Expected a JSON object.'] });
    }
    throw validationError(toFieldErrors(fn.errors ?? []));
  }
  // The schema's own checks walk only as deep as it declares; what it leaves open (a json_schema, a record) is bounded here.
  if (mode === 'body' && typeof data === 'object' && data !== null) {
    const deep = tooDeep(data);
    if (deep !== undefined) throw validationError({ [deep]: [`Nested more than ${MAX_BODY_DEPTH} levels deep.`] });
  }
  return data as Static<S>;
}
