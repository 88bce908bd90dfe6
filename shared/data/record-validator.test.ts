// Record validation compiled from field descriptors: types, formats, required, constraints,
// null for optional fields, caching by hash; the CSV fixtures are valid records.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { csvRecords } from './fixtures-csv.ts';
import { recordValidator, validateRecords } from './record-validator.ts';
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
  t.true(validateRecords(schema, [{ s: 'ab', e: null, i: 5, g: [1, 2], ym: '2026-01', dt: '2026-01-01T00:00:00Z', d: '2026-01-01', arr: [] }]).is_valid);
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
