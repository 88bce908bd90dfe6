// Record validation compiled from a table's field descriptors (Ajv), once per schema_hash:
// validate_data uses it now, the records API reuses it. Fields not marked required accept
// null or absence; the generated `id` is not part of a record.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { linearRegExp } from '../common/linear-regexp.ts';
import { FORMATS, recordCaster, typeSchema } from './field-types.ts';
import { anchored, schemaHash, type Field, type TableSchema } from './table-schema.ts';

// Patterns come from users: RE2 (linear time), never the backtracking engine. Formats are the
// Frictionless ones (field-types.ts). The JSON Schemas are written here from table schemas that
// validateTableSchema accepted, never taken from a user: Ajv does not check them against the
// meta-schema (that check compiled the meta-schema's own validator first: a 50 ms stop of the
// event loop, for every site, at a process's first record validation).
const ajv = new Ajv({ allErrors: true, strict: false, validateSchema: false, code: { regExp: linearRegExp }, formats: FORMATS });
/** Validators by schema hash, with the JSON Schema they were compiled from (to remove it from Ajv on eviction). */
const cache = new Map<string, { fn: ValidateFunction; source: object }>();
export const CACHE_LIMIT = 500;

function fieldSchema(f: Field): Record<string, unknown> {
  const c = f.constraints ?? {};
  const s = typeSchema(f);
  const numeric = f.type === 'integer' || f.type === 'number' || f.type === 'year';
  if (numeric && typeof c.minimum === 'number') s.minimum = c.minimum;
  if (numeric && typeof c.maximum === 'number') s.maximum = c.maximum;
  if (c.minLength !== undefined) s[f.type === 'array' ? 'minItems' : 'minLength'] = c.minLength;
  if (c.maxLength !== undefined) s[f.type === 'array' ? 'maxItems' : 'maxLength'] = c.maxLength;
  // Frictionless patterns are XML Schema regular expressions: the whole value must match.
  if (c.pattern !== undefined && s.type === 'string') s.pattern = anchored(c.pattern);
  if (c.enum) s.enum = c.enum;
  return c.required ? s : { anyOf: [{ type: 'null' }, s] };
}

/** The JSON Schema of one record of the table. */
export function recordJsonSchema(schema: TableSchema): Record<string, unknown> {
  return {
    type: 'object',
    properties: Object.fromEntries(schema.fields.map((f) => [f.name, fieldSchema(f)])),
    required: schema.fields.filter((f) => f.constraints?.required).map((f) => f.name),
    additionalProperties: true,
  };
}

/**
 * The compiled validator of a schema, cached by hash (least recently used evicted first). An
 * evicted schema leaves Ajv's own cache too, so memory stays bounded by CACHE_LIMIT schemas.
 */
export function recordValidator(schema: TableSchema, hash = schemaHash(schema)): ValidateFunction {
  let entry = cache.get(hash);
  if (entry) cache.delete(hash);
  else {
    const source = recordJsonSchema(schema);
    entry = { fn: ajv.compile(source), source };
    if (cache.size >= CACHE_LIMIT) {
      const [oldest, evicted] = cache.entries().next().value!;
      cache.delete(oldest);
      ajv.removeSchema(evicted.source);
    }
  }
  cache.set(hash, entry);
  return entry.fn;
}

/** Schemas held by the validator's Ajv instance (tests: it stays bounded by CACHE_LIMIT). */
export const compiledSchemaCount = (): number => (ajv as unknown as { _cache: Map<unknown, unknown> })._cache.size;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One problem the validator found in a record: its field ('' for the record itself); `missing`: no value where one is required. */
export interface RecordProblem {
  field: string;
  missing: boolean;
  message: string;
}

/**
 * The problems of the record `fn` just refused: anyOf(null, …)'s noise dropped; a null in a
 * required field (a missing value included) is missing, as an absent one is; fields in `uncast`
 * (values that did not cast) are left to their cast's message.
 */
export function recordProblems(fn: ValidateFunction, record: unknown, uncast?: Record<string, string>): RecordProblem[] {
  const out: RecordProblem[] = [];
  for (const e of fn.errors ?? []) {
    if (e.keyword === 'anyOf' || (e.keyword === 'type' && (e.params as { type: string }).type === 'null')) continue;
    // `/lat` of a geopoint object is its field's problem; a top-level `required` names the field.
    const path = e.instancePath.split('/');
    const top = e.keyword === 'required' && !e.instancePath;
    const field = top ? String((e.params as { missingProperty: string }).missingProperty) : (path[1] ?? '');
    if (uncast && Object.hasOwn(uncast, field)) continue;
    const missing = top || (e.keyword === 'type' && path.length === 2 && isRecord(record) && record[field] === null);
    out.push({ field, missing, message: e.message ?? 'is invalid' });
  }
  return out;
}

export interface RecordCheck {
  is_valid: boolean;
  errors: string[];
  validated_rows: number;
}

/**
 * Checks records as the records API would write them (the values cast first, castValue):
 * messages like `row 0: field 'email': must match format "email"`.
 */
export function validateRecords(schema: TableSchema, records: unknown[], hash?: string): RecordCheck {
  const fn = recordValidator(schema, hash);
  const cast = recordCaster(schema);
  const errors: string[] = [];
  records.forEach((r, i) => {
    const rec = isRecord(r) ? { ...r } : r;
    const uncast = isRecord(rec) ? cast(rec) : undefined;
    const msgs = Object.entries(uncast ?? {}).map(([field, text]) => `field '${field}': ${text}`);
    if (!fn(rec)) {
      for (const x of recordProblems(fn, rec, uncast)) msgs.push(`${x.field ? `field '${x.field}': ` : ''}${x.missing ? 'is required' : x.message}`);
      if (!msgs.length) msgs.push('is invalid');
    }
    for (const m of new Set(msgs)) errors.push(`row ${i}: ${m}`);
  });
  return { is_valid: errors.length === 0, errors, validated_rows: records.length };
}
