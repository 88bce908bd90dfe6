// Record validation compiled from a table's field descriptors (Ajv), once per schema_hash:
// validate_data uses it now, the records API reuses it. Fields not marked required accept
// null or absence; the generated `id` is not part of a record.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { linearRegExp } from '../common/linear-regexp.ts';
import { FORMATS, typeSchema } from './field-types.ts';
import { anchored, schemaHash, type Field, type TableSchema } from './table-schema.ts';

// Patterns come from users: RE2 (linear time), never the backtracking engine. Formats are the
// Frictionless ones (field-types.ts).
const ajv = new Ajv({ allErrors: true, strict: false, code: { regExp: linearRegExp }, formats: FORMATS });
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

function describe(e: ErrorObject): string {
  const field = e.instancePath.split('/')[1] ?? (e.keyword === 'required' ? String((e.params as { missingProperty: string }).missingProperty) : '');
  const text = e.keyword === 'required' ? 'is required' : (e.message ?? 'is invalid');
  return field ? `field '${field}': ${text}` : text;
}

export interface RecordCheck {
  is_valid: boolean;
  errors: string[];
  validated_rows: number;
}

/** Checks records: messages like `row 0: field 'email': must match format "email"`. */
export function validateRecords(schema: TableSchema, records: unknown[], hash?: string): RecordCheck {
  const fn = recordValidator(schema, hash);
  const errors: string[] = [];
  records.forEach((r, i) => {
    if (fn(r)) return;
    // anyOf(null, …) adds a noise error per branch; keep the distinct, informative ones.
    const msgs = [...new Set((fn.errors ?? []).filter((e) => e.keyword !== 'anyOf' && !(e.keyword === 'type' && (e.params as { type: string }).type === 'null')).map(describe))];
    for (const m of msgs.length ? msgs : ['is invalid']) errors.push(`row ${i}: ${m}`);
  });
  return { is_valid: errors.length === 0, errors, validated_rows: records.length };
}
