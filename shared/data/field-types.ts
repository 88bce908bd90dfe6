// Frictionless Table Schema types and formats as the specification defines them
// (specs.frictionlessdata.io/table-schema, v1; docs/data-tables.md "Field types"): the JSON
// Schema of a field's logical value (records API, validate_data, CSV rows once cast), the one
// cast of a value to that logical value (castValue: missingValues, then text read with the
// field's decimalChar, groupChar, bareNumber, trueValues, falseValues, geopoint and JSON forms)
// that every write path applies, and the stored form of values PostgreSQL reads otherwise (time
// offsets, negative durations). Every pattern here is our own, anchored and linear: no nested
// quantifiers over user input.
import { Ajv, type ValidateFunction } from 'ajv';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { Field, TableSchema } from './table-schema.ts';

export const TRUE_VALUES = ['true', 'True', 'TRUE', '1'];
export const FALSE_VALUES = ['false', 'False', 'FALSE', '0'];
/** The schema-level missingValues when a schema declares none (Frictionless: `[""]`). */
export const MISSING_VALUES = [''];
/** Formats each non-string type accepts besides `default` (date/time/datetime: `any` and strptime patterns are not offered). */
export const TYPE_FORMATS: Record<string, readonly string[]> = { geopoint: ['default', 'array', 'object'], geojson: ['default', 'topojson'] };
/** Field properties of some types (Frictionless: number and integer lexical options, boolean values). */
export const TYPE_PROPERTIES: Record<string, readonly string[]> = {
  number: ['decimalChar', 'groupChar', 'bareNumber'],
  integer: ['bareNumber'],
  boolean: ['trueValues', 'falseValues'],
};

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
// A time of day, then an optional offset (Z or ±hh[:]mm); DATETIME is a date, `T`, then the same.
const TIME = /^([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(\.\d{1,9})?)?(Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?$/;
const DATETIME = /^(\d{4}-\d{2}-\d{2})T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(\.\d{1,9})?)?(Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?$/;
const DURATION = /^(-?)P(?=\d|T\d)(\d+Y)?(\d+M)?(\d+D)?(?:T(?=\d)(\d+H)?(\d+M)?(\d+(?:\.\d+)?S)?)?$/;
const SPECIAL_NUMBER = /^(?:[Nn][Aa][Nn]|-?[Ii][Nn][Ff])$/;
const DECIMAL = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const INTEGER = /^[+-]?\d+$/;
const YEAR = /^-?\d{4,}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const NUMBER_TEXT = /^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*$/;

const leap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const validDate = (y: number, m: number, d: number) => m >= 1 && m <= 12 && d >= 1 && d <= (m === 2 && leap(y) ? 29 : DAYS[m - 1]!);
function isDate(s: string): boolean {
  const m = DATE.exec(s);
  return !!m && validDate(Number(m[1]), Number(m[2]), Number(m[3]));
}
const isDateTime = (s: string) => {
  const m = DATETIME.exec(s);
  return !!m && isDate(m[1]!);
};
const lonLat = (lon: unknown, lat: unknown) => typeof lon === 'number' && typeof lat === 'number' && Math.abs(lon) <= 180 && Math.abs(lat) <= 90;
/** Geopoint `default` format: "lon, lat" (the space after the comma optional). */
function isLonLatText(s: string): boolean {
  const [lon, lat, more] = s.split(',');
  const num = (x: string | undefined) => (x !== undefined && NUMBER_TEXT.test(x) ? Number(x) : NaN);
  return more === undefined && lonLat(num(lon), num(lat));
}

/** Ajv formats of the record validator (string values). */
export const FORMATS: Record<string, (s: string) => boolean> = {
  email: (s) => (fullFormats.email as RegExp).test(s),
  uri: fullFormats.uri as (s: string) => boolean,
  uuid: (s) => (fullFormats.uuid as RegExp).test(s),
  binary: (s) => s.length % 4 === 0 && BASE64.test(s),
  date: isDate,
  time: (s) => TIME.test(s),
  datetime: isDateTime,
  duration: (s) => DURATION.test(s),
  geopoint: isLonLatText,
};

const LON = { type: 'number', minimum: -180, maximum: 180 };
const LAT = { type: 'number', minimum: -90, maximum: 90 };
const GEOMETRIES = ['Point', 'MultiPoint', 'LineString', 'MultiLineString', 'Polygon', 'MultiPolygon'];
const GEOJSON = {
  type: 'object',
  required: ['type'],
  properties: { type: { enum: [...GEOMETRIES, 'GeometryCollection', 'Feature', 'FeatureCollection'] } },
  allOf: [
    { if: { properties: { type: { enum: GEOMETRIES } } }, then: { required: ['coordinates'], properties: { coordinates: { type: 'array' } } } },
    { if: { properties: { type: { const: 'GeometryCollection' } } }, then: { required: ['geometries'], properties: { geometries: { type: 'array' } } } },
    { if: { properties: { type: { const: 'Feature' } } }, then: { required: ['geometry', 'properties'], properties: { geometry: { type: ['object', 'null'] }, properties: { type: ['object', 'null'] } } } },
    { if: { properties: { type: { const: 'FeatureCollection' } } }, then: { required: ['features'], properties: { features: { type: 'array', items: { type: 'object' } } } } },
  ],
};
const TOPOJSON = { type: 'object', required: ['type', 'objects', 'arcs'], properties: { type: { const: 'Topology' }, objects: { type: 'object' }, arcs: { type: 'array' } } };

/** The JSON Schema of a field's logical value in a JSON record (constraints added by the caller). */
export function typeSchema(f: Pick<Field, 'type' | 'format'>): Record<string, unknown> {
  const format = (name: string) => ({ type: 'string', format: name });
  switch (f.type) {
    case 'string':
      return f.format && f.format !== 'default' ? format(f.format) : { type: 'string' };
    // NaN, INF and -INF (any case) have no JSON number: they travel as those strings.
    case 'number': return { anyOf: [{ type: 'number' }, { type: 'string', pattern: SPECIAL_NUMBER.source }] };
    case 'integer':
    case 'year': return { type: 'integer' };
    case 'boolean': return { type: 'boolean' };
    case 'object': return { type: 'object' };
    case 'array': return { type: 'array' };
    case 'date': return format('date');
    case 'time': return format('time');
    case 'datetime': return format('datetime');
    case 'yearmonth': return { type: 'string', pattern: '^\\d{4}-(0[1-9]|1[0-2])$' };
    case 'duration': return format('duration');
    case 'geopoint':
      if (f.format === 'array') return { type: 'array', items: [LON, LAT], minItems: 2, additionalItems: false };
      if (f.format === 'object') return { type: 'object', required: ['lon', 'lat'], properties: { lon: LON, lat: LAT }, additionalProperties: false };
      return format('geopoint');
    case 'geojson': return f.format === 'topojson' ? TOPOJSON : GEOJSON;
    default: return {}; // any
  }
}

// A field's values in a schema itself (`default`, `enum`, `minimum`…): checked against the type's
// JSON Schema, compiled once per type and format (the table's DDL writes them as typed literals).
// The type schemas are this file's own: not checked against the meta-schema (record-validator.ts).
const values = new Ajv({ strict: false, validateSchema: false, formats: FORMATS });
const valueChecks = new Map<string, ValidateFunction>();

/** Why a value written in a schema is not a value of the field's type, or undefined (null is no value: always fine). */
export function valueProblem(f: Pick<Field, 'type' | 'format'>, value: unknown): string | undefined {
  if (value === null) return undefined;
  const key = `${f.type}/${f.format ?? ''}`;
  let check = valueChecks.get(key);
  if (!check) valueChecks.set(key, (check = values.compile(typeSchema(f))));
  if (check(value)) return undefined;
  const kind = f.format && f.format !== 'default' ? `${f.type} (${f.format})` : f.type;
  return `${JSON.stringify(value).slice(0, 40)} is not a valid ${kind} value (${check.errors?.[0]?.message ?? 'invalid'})`;
}

/** Leading and trailing characters that cannot be part of a number, stripped (bareNumber: false). */
function stripNonNumeric(s: string): string {
  const numeric = (c: string) => (c >= '0' && c <= '9') || c === '.' || c === '+' || c === '-';
  let start = 0;
  let end = s.length;
  while (start < end && !numeric(s[start]!)) start++;
  while (end > start && !(s[end - 1]! >= '0' && s[end - 1]! <= '9') && s[end - 1] !== '.') end--;
  return s.slice(start, end);
}

export type Cast = { value: unknown } | { error: string };

function json(text: string, what: string): Cast {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return { error: `Invalid JSON ${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text)}: expected ${what}.` };
  }
}

const NUL: Cast = { error: 'Invalid value: NUL characters are not allowed.' };

/** A text (physical form: a CSV cell, a JSON string) as the field's logical value, or why it is not one. */
export function castCell(f: Field, text: string): Cast {
  if (text.includes('\0')) return NUL;
  switch (f.type) {
    case 'integer': {
      const s = f.bareNumber === false ? stripNonNumeric(text) : text.trim();
      return INTEGER.test(s) && Number.isSafeInteger(Number(s)) ? { value: Number(s) } : { error: `Invalid integer ${JSON.stringify(text)}.` };
    }
    case 'number': {
      let s = f.bareNumber === false && !SPECIAL_NUMBER.test(text.trim()) ? stripNonNumeric(text) : text.trim();
      if (SPECIAL_NUMBER.test(s)) return { value: s };
      if (f.groupChar) s = s.split(f.groupChar).join('');
      if (f.decimalChar && f.decimalChar !== '.') s = s.includes('.') ? '' : s.split(f.decimalChar).join('.');
      return DECIMAL.test(s) && Number.isFinite(Number(s)) ? { value: Number(s) } : { error: `Invalid number ${JSON.stringify(text)}.` };
    }
    case 'year':
      return YEAR.test(text.trim()) ? { value: Number(text.trim()) } : { error: `Invalid year ${JSON.stringify(text)}: expected YYYY.` };
    case 'boolean':
      if ((f.trueValues ?? TRUE_VALUES).includes(text)) return { value: true };
      if ((f.falseValues ?? FALSE_VALUES).includes(text)) return { value: false };
      return { error: `Invalid boolean ${JSON.stringify(text)}: expected one of ${[...(f.trueValues ?? TRUE_VALUES), ...(f.falseValues ?? FALSE_VALUES)].join(', ')}.` };
    case 'object':
    case 'geojson':
      return json(text, 'a JSON object');
    case 'array':
      return json(text, 'a JSON array');
    case 'geopoint':
      return f.format === 'array' || f.format === 'object' ? json(text, `a JSON ${f.format}`) : { value: text };
    case 'any': {
      const parsed = json(text, '');
      return 'value' in parsed ? parsed : { value: text };
    }
    default: // string, date, time, datetime, yearmonth, duration: text, checked by the record's JSON Schema
      return { value: text };
  }
}

/** Whether a string is the field's logical value as it stands (text types, `any`, a `default` geopoint): no text form to read. */
const textValued = (f: Field): boolean =>
  f.type === 'string' || f.type === 'date' || f.type === 'time' || f.type === 'datetime' || f.type === 'yearmonth' || f.type === 'duration' || f.type === 'any' ||
  (f.type === 'geopoint' && f.format !== 'array' && f.format !== 'object');

/**
 * The one cast of a field's value, whatever wrote it (JSON records of every write path, CSV
 * cells, validate_data): a value that is not a string is the logical value already (a JSON
 * number, boolean, object…); a string equal to one of the schema's missingValues is null; a
 * string where the logical value is not text (number, integer, year, boolean, object, array,
 * geojson, array/object geopoints) is its physical form, read with the field's properties.
 */
export function castValue(f: Field, value: unknown, missing: ReadonlySet<string>): Cast {
  if (typeof value !== 'string') return { value };
  if (missing.has(value)) return { value: null };
  if (!textValued(f)) return castCell(f, value);
  return value.includes('\0') ? NUL : { value };
}

/** The schema's missingValues as a set (the Frictionless default `[""]` when it declares none). */
export const missingValuesOf = (schema: Pick<TableSchema, 'missingValues'>): ReadonlySet<string> => new Set(schema.missingValues ?? MISSING_VALUES);

/**
 * Casts the schema's fields of a record in place (castValue); `also` receives the cast values
 * too (a patch's merged record). Returns field → message for the values that do not cast.
 */
export type RecordCast = (rec: Record<string, unknown>, also?: Record<string, unknown>) => Record<string, string> | undefined;

export function recordCaster(schema: TableSchema): RecordCast {
  // JSON has null for a missing value: only the schema's own missingValues apply to its strings
  // (the Frictionless default `[""]` is for text files). A stored "" read, edited and sent back
  // stays "", and the tables written before keep their meaning.
  const missing: ReadonlySet<string> = new Set(schema.missingValues ?? []);
  const { fields } = schema;
  return (rec, also) => {
    let errors: Record<string, string> | undefined;
    for (const f of fields) {
      const v = rec[f.name];
      if (typeof v !== 'string' || !Object.hasOwn(rec, f.name)) continue;
      const out = castValue(f, v, missing);
      if ('error' in out) (errors ??= {})[f.name] = out.error;
      else if (out.value !== v) {
        rec[f.name] = out.value;
        if (also) also[f.name] = out.value;
      }
    }
    return errors;
  };
}

/**
 * A CSV cell before the record's cast (castValue, as a JSON string would be): a missing value
 * leaves the field out, as an empty cell does (its default applies; `required` reports it); an
 * `any` cell is JSON when it parses, else the text. Every other cell goes on as text.
 */
export function cellReader(f: Field, missing: ReadonlySet<string>): (text: string) => Cast {
  return (text) => (missing.has(text) ? { value: undefined } : f.type === 'any' ? castCell(f, text) : { value: text });
}

/** `13:45:00+02:00` → `11:45:00`: a time with an offset is stored as the UTC time of day (as datetimes are stored in UTC). */
function utcTime(s: string): string {
  const m = TIME.exec(s);
  if (!m?.[5]) return s;
  if (m[5] === 'Z') return s.slice(0, -1);
  const sign = m[5][0] === '-' ? -1 : 1;
  const [oh, om] = [Number(m[5].slice(1, 3)), Number(m[5].slice(-2))];
  const minutes = (((Number(m[1]) * 60 + Number(m[2]) - sign * (oh * 60 + om)) % 1440) + 1440) % 1440;
  const hhmm = `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
  return `${hhmm}${m[3] !== undefined ? `:${m[3]}${m[4] ?? ''}` : ''}`;
}

/** `-P1DT2H` (XSD) ↔ `P-1DT-2H` (the form PostgreSQL reads and writes): each component carries the sign. */
const negateParts = (s: string) => s.replace(/(\d+(?:\.\d+)?)([YMDHS])/g, '-$1$2');
function toStoredDuration(s: string): string {
  return s.startsWith('-P') ? negateParts(s.slice(1)) : s;
}
function fromStoredDuration(s: string): string {
  if (!s.includes('-')) return s;
  const bare = s.replace(/-/g, '');
  return negateParts(bare) === s ? `-${bare}` : s;
}

/** Values in the form they are stored in (after validation): time offsets folded into UTC, negative durations signed per component. */
export function toStored(fields: readonly Field[], rec: Record<string, unknown>): void {
  for (const f of fields) {
    const v = rec[f.name];
    if (typeof v !== 'string') continue;
    if (f.type === 'time') rec[f.name] = utcTime(v);
    else if (f.type === 'duration') rec[f.name] = toStoredDuration(v);
  }
}

/** A stored value as the API shows it: XSD durations, the spec's INF/-INF for infinite numbers. */
export function fromStored(f: Field | undefined, v: unknown): unknown {
  if (typeof v !== 'string' || !f) return v;
  if (f.type === 'duration') return fromStoredDuration(v);
  if (f.type === 'number' && /^-?Infinity$/.test(v)) return v.replace('Infinity', 'INF');
  return v;
}
