// Frictionless types and formats as the Table Schema specification defines them: for each,
// the spec's valid examples are accepted and invalid ones refused with the field named, in a
// JSON record and as a CSV cell (cast, then validated like a record): both agree.
import test from 'ava';
import { castCell, fromStored, toStored } from './field-types.ts';
import { validateRecords } from './record-validator.ts';
import { validateTableSchema, type Field } from './table-schema.ts';

/** [field, JSON values accepted, JSON values refused, CSV cells accepted (→ value), CSV cells refused]. */
const CASES: [Field, unknown[], unknown[], [string, unknown][], string[]][] = [
  [{ name: 'f', type: 'time' }, ['13:45:00', '13:45', '13:45:00.25', '13:45:00Z', '13:45:00+02:00', '23:59:59-0530'], ['24:00:00', '13:45:00 ', '1:45', '13:60', 'noon', 1345], [['13:45:00', '13:45:00']], ['25:00:00', '13h45']],
  [{ name: 'f', type: 'date' }, ['2026-02-28', '2024-02-29'], ['2026-02-29', '2026-13-01', '26-01-01', '2026-01-01T00:00:00Z'], [['2026-02-28', '2026-02-28']], ['28/02/2026']],
  [{ name: 'f', type: 'datetime' }, ['2026-02-27T09:15:00Z', '2026-02-27T09:15:00', '2026-02-27T09:15:00.123+01:00', '2026-02-27T09:15'], ['2026-02-27 09:15:00', '2026-02-30T09:15:00Z', '2026-02-27T25:00:00Z', '2026-02-27'], [['2026-02-27T09:15:00Z', '2026-02-27T09:15:00Z']], ['yesterday']],
  [{ name: 'f', type: 'year' }, [2026, -44], [2026.5, '2026'], [['2026', 2026], ['0044', 44]], ['26', '2026a']],
  [{ name: 'f', type: 'yearmonth' }, ['2026-01', '2026-12'], ['2026-13', '2026-1', 202601], [['2026-02', '2026-02']], ['02/2026']],
  [{ name: 'f', type: 'duration' }, ['P1Y2M3DT4H5M6.5S', 'PT0S', 'P1D', 'PT36H', '-P1D'], ['P', 'PT', 'P1DT', '1 day', 'P1.5D', 'P2W'], [['P1DT2H', 'P1DT2H']], ['2 hours']],
  [{ name: 'f', type: 'geopoint' }, ['90, 45', '90,45', '-122.4, 37.78'], ['90 45', '200, 45', [90, 45], { lon: 90, lat: 45 }], [['90, 45', '90, 45']], ['90;45']],
  [{ name: 'f', type: 'geopoint', format: 'array' }, [[90, 45], [-180, -90]], [[90], [90, 45, 0], [90, 100], '90, 45'], [['[90, 45]', [90, 45]]], ['90, 45', '[90]']],
  [{ name: 'f', type: 'geopoint', format: 'object' }, [{ lon: 90, lat: 45 }], [{ lon: 90 }, { lon: 90, lat: 45, alt: 1 }, [90, 45]], [['{"lon": 90, "lat": 45}', { lon: 90, lat: 45 }]], ['{lon: 90}']],
  [{ name: 'f', type: 'geojson' }, [{ type: 'Point', coordinates: [1, 2] }, { type: 'Feature', geometry: null, properties: {} }, { type: 'FeatureCollection', features: [] }], [{ type: 'Point' }, { type: 'Circle' }, { coordinates: [] }, 'Point'], [['{"type":"Point","coordinates":[1,2]}', { type: 'Point', coordinates: [1, 2] }]], ['Point(1 2)']],
  [{ name: 'f', type: 'geojson', format: 'topojson' }, [{ type: 'Topology', objects: {}, arcs: [] }], [{ type: 'Point', coordinates: [1, 2] }], [], []],
  [{ name: 'f', type: 'number' }, [1.5, -3, 1e21, 'NaN', 'INF', '-inf'], ['1.5', 'one', true], [['-1.23', -1.23], ['+100000.00', 100000], ['.5', 0.5], ['1.5E3', 1500], ['NaN', 'NaN'], ['-INF', '-INF']], ['1,000', '95%', '1.2.3', '', 'Infinity']],
  [{ name: 'f', type: 'number', decimalChar: ',', groupChar: '.' } as Field, [1000.5], [], [['1.000,5', 1000.5], ['1,5', 1.5]], ['1,000,5']],
  [{ name: 'f', type: 'number', groupChar: ',' } as Field, [], [], [['1,000,000.25', 1000000.25]], ['1.000.000']],
  [{ name: 'f', type: 'number', bareNumber: false } as Field, [], [], [['95%', 95], ['€95', 95], ['EUR 95.5', 95.5]], ['EUR']],
  [{ name: 'f', type: 'integer' }, [1, -7, 0], [1.5, '1', 'x'], [['42', 42], ['-7', -7], ['+3', 3]], ['4.0', '1e3', '95%', '0x10']],
  [{ name: 'f', type: 'integer', bareNumber: false } as Field, [], [], [['95%', 95], ['$ 12', 12]], ['%']],
  [{ name: 'f', type: 'boolean' }, [true, false], ['true', 1, 'yes'], [['true', true], ['True', true], ['TRUE', true], ['1', true], ['false', false], ['FALSE', false], ['0', false]], ['yes', 'tRuE', 'T']],
  [{ name: 'f', type: 'boolean', trueValues: ['yes', 'Y'], falseValues: ['no', 'N'] } as Field, [], [], [['yes', true], ['N', false]], ['true', '1']],
  [{ name: 'f', type: 'object' }, [{ a: 1 }, {}], [[1], 'x', 1], [['{"a":1}', { a: 1 }]], ['[1]', 'a=1']],
  [{ name: 'f', type: 'array' }, [[1, 'x'], []], [{ a: 1 }, 'x'], [['[1,"x"]', [1, 'x']]], ['{"a":1}', '1,2']],
  [{ name: 'f', type: 'any' }, [1, 'x', { a: [1] }, [null]], [], [['{"a":1}', { a: 1 }], ['plain text', 'plain text']], []],
  [{ name: 'f', type: 'string', format: 'email' }, ['ada@example.com'], ['ada', 'ada@'], [['ada@example.com', 'ada@example.com']], ['@example.com']],
  [{ name: 'f', type: 'string', format: 'uri' }, ['https://example.com/a?b=c', 'urn:isbn:0451450523'], ['example.com', 'http//x'], [['mailto:ada@example.com', 'mailto:ada@example.com']], ['not a uri']],
  [{ name: 'f', type: 'string', format: 'binary' }, ['aGVsbG8=', 'aGVsbG8gd29ybGQ=', ''], ['aGVsbG8', 'a===', 'hé=='], [['aGk=', 'aGk=']], ['aGk']],
  [{ name: 'f', type: 'string', format: 'uuid' }, ['0b5f1c1e-1111-4222-8333-444455556666'], ['0b5f1c1e11114222833344445555666', 'x'], [['0B5F1C1E-1111-4222-8333-444455556666', '0B5F1C1E-1111-4222-8333-444455556666']], ['{0b5f1c1e}']],
  [{ name: 'f', type: 'string' }, ['', 'any text'], [1, {}], [['12', '12']], []],
];

for (const [field, good, bad, cells, badCells] of CASES) {
  const label = `${field.type}${field.format ? `/${field.format}` : ''}${Object.keys(field).filter((k) => !['name', 'type', 'format'].includes(k)).map((k) => ` ${k}`).join('')}`;
  test(`${label}: JSON records and CSV cells, the spec's examples`, (t) => {
    const schema = { fields: [field] };
    t.deepEqual(validateTableSchema(schema), [], 'the field is a valid descriptor');
    for (const v of good) t.true(validateRecords(schema, [{ f: v }]).is_valid, `JSON ${JSON.stringify(v)} accepted`);
    for (const v of bad) t.regex(validateRecords(schema, [{ f: v }]).errors[0] ?? '', /^row 0: field 'f': /, `JSON ${JSON.stringify(v)} refused`);
    for (const [cell, value] of cells) {
      const cast = castCell(field, cell);
      t.deepEqual(cast, { value }, `CSV ${JSON.stringify(cell)}`);
      t.true(validateRecords(schema, [{ f: (cast as { value: unknown }).value }]).is_valid, `CSV ${JSON.stringify(cell)} then valid`);
    }
    for (const cell of badCells) {
      const cast = castCell(field, cell);
      const refused = 'error' in cast || !validateRecords(schema, [{ f: cast.value }]).is_valid;
      t.true(refused, `CSV ${JSON.stringify(cell)} refused`);
    }
  });
}

test('formats and properties a type does not take are refused, naming the field', (t) => {
  const errors = validateTableSchema({
    fields: [
      { name: 'd', type: 'date', format: '%d/%m/%Y' },
      { name: 'g', type: 'geopoint', format: 'wkt' },
      { name: 's', type: 'string', decimalChar: ',' },
      { name: 'b', type: 'boolean', trueValues: 'yes' },
      { name: 'n', type: 'number', decimalChar: '.', groupChar: '.' },
      { name: 'o', type: 'boolean', trueValues: ['x'], falseValues: ['x'] },
    ],
  });
  t.deepEqual(errors, [
    `Field 'd': type "date" takes no format other than 'default' (ISO 8601 values only: "any" and strptime patterns are not supported).`,
    "Field 'g': invalid format \"wkt\" for type geopoint; valid formats are default, array, object.",
    "Field 's': property 'decimalChar' applies to number fields only.",
    "Field 'b': trueValues must be a non-empty array of strings.",
    "Field 'n': decimalChar and groupChar must differ.",
    "Field 'o': trueValues and falseValues overlap.",
  ]);
});

test('stored forms: time offsets folded into UTC, negative durations per component; shown back as XSD', (t) => {
  const fields: Field[] = [{ name: 't', type: 'time' }, { name: 'u', type: 'time' }, { name: 'd', type: 'duration' }, { name: 'z', type: 'time' }];
  const rec: Record<string, unknown> = { t: '13:45:00.5+02:00', u: '00:30-01:00', d: '-P1DT2.5S', z: '08:00:00Z' };
  toStored(fields, rec);
  t.deepEqual(rec, { t: '11:45:00.5', u: '01:30', d: 'P-1DT-2.5S', z: '08:00:00' });
  t.is(fromStored(fields[2], 'P-1DT-2.5S'), '-P1DT2.5S');
  t.is(fromStored(fields[2], 'P1DT-2H'), 'P1DT-2H');
  t.is(fromStored({ name: 'n', type: 'number' }, '-Infinity'), '-INF');
});
