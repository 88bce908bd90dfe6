// Record validation compiled from field descriptors: types, formats, required, constraints,
// null for optional fields, caching by hash; the CSV fixtures are valid records.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { csvRecords } from '../testing/fixtures-csv.ts';
import { CACHE_LIMIT, compiledSchemaCount, recordValidator, validateRecords } from './record-validator.ts';
import { schemaHash, type TableSchema } from './table-schema.ts';

const fixture = (name: string): TableSchema => JSON.parse(readFileSync(new URL(`../../fixtures/schemas/${name}`, import.meta.url), 'utf8'));
const csv = (name: string) => new URL(`../../fixtures/csv/${name}`, import.meta.url);

test('the CSV fixtures are valid records of their schemas (20–50 rows each)', (t) => {
  for (const [schema, file] of [['companies.json', 'companies.csv'], ['contacts.json', 'contacts.csv']] as const) {
    const rows = csvRecords(csv(file), fixture(schema));
    t.true(rows.length >= 20 && rows.length <= 50, file);
    t.deepEqual(validateRecords(fixture(schema), rows), { is_valid: true, errors: [], validated_rows: rows.length }, file);
  }
});

test('each field type and constraint', (t) => {
  const schema: TableSchema = {
    fields: [
      { name: 's', type: 'string', constraints: { required: true, minLength: 2, maxLength: 4, pattern: '^[a-z]+$' } },
      { name: 'e', type: 'string', format: 'email' },
      { name: 'u', type: 'string', format: 'uuid' },
      { name: 'i', type: 'integer', constraints: { minimum: 1, maximum: 9 } },
      { name: 'n', type: 'number' },
      { name: 'b', type: 'boolean' },
      { name: 'd', type: 'date' },
      { name: 'dt', type: 'datetime' },
      { name: 'ym', type: 'yearmonth' },
      { name: 'g', type: 'geopoint' },
      { name: 'en', type: 'string', constraints: { enum: ['x', 'y'] } },
      { name: 'arr', type: 'array', constraints: { maxLength: 1 } },
    ],
  };
  t.true(validateRecords(schema, [{ s: 'ab', e: null, i: 5, g: '1, 2', ym: '2026-01', dt: '2026-01-01T00:00:00Z', d: '2026-01-01', arr: [] }]).is_valid);
  const { errors } = validateRecords(schema, [
    { s: 'ABCDE', e: 'nope', u: 'nope', i: 1.5, n: 'x', b: 'yes', d: '2026-13-01', dt: 'yesterday', ym: '2026-13', g: 'here', en: 'z', arr: [1, 2] },
    {},
  ]);
  for (const f of ['s', 'e', 'u', 'i', 'n', 'b', 'd', 'dt', 'ym', 'g', 'en', 'arr']) t.true(errors.some((e) => e.startsWith(`row 0: field '${f}':`)), f);
  t.true(errors.includes("row 1: field 's': is required"));
});

test('validators are compiled once per schema hash', (t) => {
  const schema = fixture('contacts.json');
  t.is(recordValidator(schema), recordValidator(JSON.parse(JSON.stringify(schema)), schemaHash(schema)));
});

test('patterns run on RE2: a catastrophic pattern on a 50,000-character value answers, correctly', (t) => {
  const schema: TableSchema = { fields: [{ name: 's', type: 'string', constraints: { pattern: '(a+)+' } }] };
  const long = `${'a'.repeat(50_000)}!`;
  t.false(validateRecords(schema, [{ s: long }]).is_valid);
  t.true(validateRecords(schema, [{ s: 'a'.repeat(50_000) }]).is_valid);
});

test('Frictionless patterns are anchored: the whole value must match', (t) => {
  const schema: TableSchema = { fields: [{ name: 'code', type: 'string', constraints: { pattern: '[A-Z]{2}|[0-9]{3}' } }] };
  t.deepEqual(validateRecords(schema, [{ code: 'AB' }, { code: '123' }]).errors, []);
  const { errors } = validateRecords(schema, [{ code: 'xABx' }, { code: '1234' }, { code: 'AB123' }]);
  t.deepEqual(errors.map((e) => e.slice(0, 17)), ["row 0: field 'cod", "row 1: field 'cod", "row 2: field 'cod"]);
});

test('evicted validators leave Ajv too: compiled schemas stay bounded by the cache size', (t) => {
  for (let i = 0; i < CACHE_LIMIT + 50; i++) recordValidator({ fields: [{ name: `f${i}`, type: 'string' }] });
  // At most the cached validators' schemas and Ajv's own meta-schema.
  t.true(compiledSchemaCount() <= CACHE_LIMIT + 1, String(compiledSchemaCount()));
});
