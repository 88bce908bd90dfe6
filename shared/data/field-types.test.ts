// Frictionless types and formats as the Table Schema specification defines them: for each,
// the spec's valid examples are accepted and invalid ones refused with the field named, in a
// JSON record and as a CSV cell (cast, then validated like a record): both agree. The one cast
// (castValue) with every field property and the schema's missingValues.
import test from 'ava';
import { castValue, cellReader, fromStored, recordCaster, toStored, type Cast } from './field-types.ts';
import { validateRecords } from './record-validator.ts';
import { validateTableSchema, type Field, type TableSchema } from './table-schema.ts';

const MISSING = new Set(['']);
/** A CSV cell as the import reads it: the cell's reader, then the record's cast. */
function fromCsv(field: Field, cell: string, missing: ReadonlySet<string> = MISSING): Cast {
  const read = cellReader(field, missing)(cell);
  return 'error' in read ? read : castValue(field, read.value, missing);
}

/** [field, JSON values accepted, JSON values refused, CSV cells accepted (→ value), CSV cells refused]. */
const CASES: [Field, unknown[], unknown[], [string, unknown][], string[]][] = [
  [{ name: 'f', type: 'time' }, ['13:45:00', '13:45', '13:45:00.25', '13:45:00Z', '13:45:00+02:00', '23:59:59-0530'], ['24:00:00', '13:45:00 ', '1:45', '13:60', 'noon', 1345], [['13:45:00', '13:45:00']], ['25:00:00', '13h45']],
  [{ name: 'f', type: 'date' }, ['2026-02-28', '2024-02-29'], ['2026-02-29', '2026-13-01', '26-01-01', '2026-01-01T00:00:00Z'], [['2026-02-28', '2026-02-28']], ['28/02/2026']],
  [{ name: 'f', type: 'datetime' }, ['2026-02-27T09:15:00Z', '2026-02-27T09:15:00', '2026-02-27T09:15:00.123+01:00', '2026-02-27T09:15'], ['2026-02-27 09:15:00', '2026-02-30T09:15:00Z', '2026-02-27T25:00:00Z', '2026-02-27'], [['2026-02-27T09:15:00Z', '2026-02-27T09:15:00Z']], ['yesterday']],
  [{ name: 'f', type: 'year' }, [2026, -44, '2026'], [2026.5, '26'], [['2026', 2026], ['0044', 44]], ['26', '2026a']],
  [{ name: 'f', type: 'yearmonth' }, ['2026-01', '2026-12'], ['2026-13', '2026-1', 202601], [['2026-02', '2026-02']], ['02/2026']],
  [{ name: 'f', type: 'duration' }, ['P1Y2M3DT4H5M6.5S', 'PT0S', 'P1D', 'PT36H', '-P1D'], ['P', 'PT', 'P1DT', '1 day', 'P1.5D', 'P2W'], [['P1DT2H', 'P1DT2H']], ['2 hours']],
  [{ name: 'f', type: 'geopoint' }, ['90, 45', '90,45', '-122.4, 37.78'], ['90 45', '200, 45', [90, 45], { lon: 90, lat: 45 }], [['90, 45', '90, 45']], ['90;45']],
  [{ name: 'f', type: 'geopoint', format: 'array' }, [[90, 45], [-180, -90]], [[90], [90, 45, 0], [90, 100], '90, 45'], [['[90, 45]', [90, 45]]], ['90, 45', '[90]']],
  [{ name: 'f', type: 'geopoint', format: 'object' }, [{ lon: 90, lat: 45 }], [{ lon: 90 }, { lon: 90, lat: 45, alt: 1 }, [90, 45]], [['{"lon": 90, "lat": 45}', { lon: 90, lat: 45 }]], ['{lon: 90}']],
  [{ name: 'f', type: 'geojson' }, [{ type: 'Point', coordinates: [1, 2] }, { type: 'Feature', geometry: null, properties: {} }, { type: 'FeatureCollection', features: [] }], [{ type: 'Point' }, { type: 'Circle' }, { coordinates: [] }, 'Point'], [['{"type":"Point","coordinates":[1,2]}', { type: 'Point', coordinates: [1, 2] }]], ['Point(1 2)']],
  [{ name: 'f', type: 'geojson', format: 'topojson' }, [{ type: 'Topology', objects: {}, arcs: [] }], [{ type: 'Point', coordinates: [1, 2] }], [], []],
  [{ name: 'f', type: 'number' }, [1.5, -3, 1e21, 'NaN', 'INF', '-inf', '1.5'], ['one', true, '1,000'], [['-1.23', -1.23], ['+100000.00', 100000], ['.5', 0.5], ['1.5E3', 1500], ['NaN', 'NaN'], ['-INF', '-INF']], ['1,000', '95%', '1.2.3', 'Infinity']],
  [{ name: 'f', type: 'number', decimalChar: ',', groupChar: '.' } as Field, [1000.5, '1.000,5'], ['1,000,5', '1,5,'], [['1.000,5', 1000.5], ['1,5', 1.5]], ['1,000,5']],
  [{ name: 'f', type: 'number', groupChar: ',' } as Field, [1000, '1,234.5'], ['1.000.000'], [['1,000,000.25', 1000000.25]], ['1.000.000']],
  [{ name: 'f', type: 'number', bareNumber: false } as Field, [95, '95%'], ['EUR'], [['95%', 95], ['€95', 95], ['EUR 95.5', 95.5]], ['EUR']],
  [{ name: 'f', type: 'integer' }, [1, -7, 0, '1'], [1.5, 'x', '1.5'], [['42', 42], ['-7', -7], ['+3', 3]], ['4.0', '1e3', '95%', '0x10']],
  [{ name: 'f', type: 'integer', bareNumber: false } as Field, [12, '$ 12'], ['%', '12.5%'], [['95%', 95], ['$ 12', 12]], ['%']],
  [{ name: 'f', type: 'boolean' }, [true, false, 'true', '0'], [1, 'yes'], [['true', true], ['True', true], ['TRUE', true], ['1', true], ['false', false], ['FALSE', false], ['0', false]], ['yes', 'tRuE', 'T']],
  [{ name: 'f', type: 'boolean', trueValues: ['yes', 'Y'], falseValues: ['no', 'N'] } as Field, [true, 'yes', 'N'], ['true', 1], [['yes', true], ['N', false]], ['true', '1']],
  [{ name: 'f', type: 'object' }, [{ a: 1 }, {}, '{"a":1}'], [[1], 'x', 1], [['{"a":1}', { a: 1 }]], ['[1]', 'a=1']],
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
      const cast = fromCsv(field, cell);
      t.deepEqual(cast, { value }, `CSV ${JSON.stringify(cell)}`);
      t.true(validateRecords(schema, [{ f: (cast as { value: unknown }).value }]).is_valid, `CSV ${JSON.stringify(cell)} then valid`);
    }
    for (const cell of badCells) {
      const cast = fromCsv(field, cell);
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

test('field properties with bad definitions are refused, naming the field and the property', (t) => {
  const errors = validateTableSchema({
    missingValues: ['', 0],
    fields: [
      { name: 'a', type: 'number', decimalChar: ',,' },
      { name: 'b', type: 'number', groupChar: '' },
      { name: 'c', type: 'number', decimalChar: 1 },
      { name: 'd', type: 'number', bareNumber: 'no' },
      { name: 'e', type: 'integer', groupChar: ',' },
      { name: 'f', type: 'boolean', falseValues: [] },
      { name: 'g', type: 'boolean', trueValues: ['yes', 2] },
      { name: 'h', type: 'number', decimalChar: ',', groupChar: ',' },
    ],
  });
  t.deepEqual(errors, [
    'missingValues must be an array of strings.',
    "Field 'a': decimalChar must be a single character.",
    "Field 'b': groupChar must be a single character.",
    "Field 'c': decimalChar must be a single character.",
    "Field 'd': bareNumber must be a boolean.",
    "Field 'e': property 'groupChar' applies to number fields only.",
    "Field 'f': falseValues must be a non-empty array of strings.",
    "Field 'g': trueValues must be a non-empty array of strings.",
    "Field 'h': decimalChar and groupChar must differ.",
  ]);
  t.deepEqual(validateTableSchema({ missingValues: 'NA', fields: [{ name: 'x', type: 'string' }] }), ['missingValues must be an array of strings.']);
  // One character is one code point: a Swiss apostrophe or a narrow no-break space groups digits.
  t.deepEqual(validateTableSchema({ missingValues: [], fields: [{ name: 'x', type: 'number', groupChar: '\u2019' }, { name: 'y', type: 'number', groupChar: '\u202f', decimalChar: ',' }] }), []);
});

test('castValue: JSON values stay as they are, strings are read with the field\'s properties, missing values are null', (t) => {
  const missing = new Set(['', 'NA', 'n/a']);
  const cases: [Field, unknown, Cast][] = [
    [{ name: 'n', type: 'number' }, 1.5, { value: 1.5 }],
    [{ name: 'n', type: 'number' }, '1.5', { value: 1.5 }],
    [{ name: 'n', type: 'number', groupChar: ',' }, '1,234.5', { value: 1234.5 }],
    [{ name: 'n', type: 'number', decimalChar: ',', groupChar: '.' }, '1.234,5', { value: 1234.5 }],
    [{ name: 'n', type: 'number', decimalChar: ',', groupChar: '\u202f' }, '1\u202f234,5', { value: 1234.5 }],
    [{ name: 'n', type: 'number', decimalChar: ',' }, '1.5', { error: 'Invalid number "1.5".' }],
    [{ name: 'n', type: 'number', bareNumber: false }, '€ 12.50', { value: 12.5 }],
    [{ name: 'n', type: 'number' }, '12.50 €', { error: 'Invalid number "12.50 €".' }],
    [{ name: 'n', type: 'number' }, 'NA', { value: null }],
    [{ name: 'n', type: 'number' }, '', { value: null }],
    [{ name: 'i', type: 'integer' }, '42', { value: 42 }],
    [{ name: 'i', type: 'integer', bareNumber: false }, '42 items', { value: 42 }],
    [{ name: 'i', type: 'integer' }, '42 items', { error: 'Invalid integer "42 items".' }],
    [{ name: 'b', type: 'boolean' }, true, { value: true }],
    [{ name: 'b', type: 'boolean' }, 'TRUE', { value: true }],
    [{ name: 'b', type: 'boolean' }, '0', { value: false }],
    [{ name: 'b', type: 'boolean', trueValues: ['yes'], falseValues: ['no'] }, 'yes', { value: true }],
    [{ name: 'b', type: 'boolean', trueValues: ['yes'], falseValues: ['no'] }, 'true', { error: 'Invalid boolean "true": expected one of yes, no.' }],
    [{ name: 'b', type: 'boolean', trueValues: ['yes'], falseValues: ['no'] }, 'n/a', { value: null }],
    [{ name: 's', type: 'string' }, 'NA', { value: null }],
    [{ name: 's', type: 'string' }, '42', { value: '42' }],
    [{ name: 's', type: 'string' }, 'a\0b', { error: 'Invalid value: NUL characters are not allowed.' }],
    [{ name: 'x', type: 'any' }, '42', { value: '42' }],
    [{ name: 'o', type: 'object' }, '{"a":1}', { value: { a: 1 } }],
    [{ name: 'g', type: 'geopoint' }, '90, 45', { value: '90, 45' }],
  ];
  for (const [field, value, expected] of cases) t.deepEqual(castValue(field, value, missing), expected, `${JSON.stringify(field)} ${JSON.stringify(value)}`);
});

test('recordCaster: casts a record\'s fields in place (into the merged record too) and names those that do not cast', (t) => {
  const cast = recordCaster({
    missingValues: ['-'],
    fields: [{ name: 'amount', type: 'number', groupChar: ',' }, { name: 'active', type: 'boolean', trueValues: ['yes'], falseValues: ['no'] }, { name: 'note', type: 'string' }, { name: 'n', type: 'integer' }],
  });
  const patch: Record<string, unknown> = { amount: '1,234.5', active: 'yes', note: '', n: 'x' };
  const merged: Record<string, unknown> = { ...patch, other: 1 };
  t.deepEqual(cast(patch, merged), { n: 'Invalid integer "x".' });
  // missingValues replaces the default [""]: an empty string is a string again.
  t.deepEqual(patch, { amount: 1234.5, active: true, note: '', n: 'x' });
  t.deepEqual(merged, { amount: 1234.5, active: true, note: '', n: 'x', other: 1 });
  const dash: Record<string, unknown> = { amount: '-', active: false };
  t.is(cast(dash), undefined);
  t.deepEqual(dash, { amount: null, active: false });
});

test('CSV cells: a missing value leaves the field out; an `any` cell is JSON when it parses; everything else is text for the record\'s cast', (t) => {
  const missing = new Set(['', 'NA']);
  t.deepEqual(cellReader({ name: 'n', type: 'number' }, missing)('NA'), { value: undefined });
  t.deepEqual(cellReader({ name: 'n', type: 'number', groupChar: ',' }, missing)('1,000'), { value: '1,000' });
  t.deepEqual(cellReader({ name: 'x', type: 'any' }, missing)('42'), { value: 42 });
  t.deepEqual(cellReader({ name: 'x', type: 'any' }, missing)('plain'), { value: 'plain' });
  t.deepEqual(fromCsv({ name: 'n', type: 'number', groupChar: ',' }, '1,000', missing), { value: 1000 });
});

test('validate_data casts as the writes do: the same values pass and fail, a value that does not cast named by its cast', (t) => {
  const schema = { fields: [{ name: 'amount', type: 'number', groupChar: ',', constraints: { maximum: 2000 } }, { name: 'active', type: 'boolean', trueValues: ['yes'], falseValues: ['no'], constraints: { required: true } }] } as TableSchema;
  t.deepEqual(validateRecords(schema, [{ amount: '1,234.5', active: 'yes' }, { amount: 5, active: false }]).errors, []);
  t.deepEqual(validateRecords(schema, [{ amount: '1.2.3', active: '' }, { amount: '3,000', active: 'maybe' }]).errors, [
    'row 0: field \'amount\': Invalid number "1.2.3".',
    'row 0: field \'active\': Invalid boolean "": expected one of yes, no.', // no missingValues declared: "" is not missing in JSON
    'row 1: field \'active\': Invalid boolean "maybe": expected one of yes, no.',
    'row 1: field \'amount\': must be <= 2000',
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
