import test from 'ava';
import { Type } from '@sinclair/typebox';
import { DomainError } from '../errors.ts';
import { dropReadOnly, READ_ONLY_MESSAGE, readOnlyProps, sameValue } from './read-only.ts';

const View = Type.Object({ uuid: Type.String({ format: 'uuid' }), name: Type.String(), created: Type.String(), tags: Type.Array(Type.String()) });
const View2 = Type.Object({ ...View.properties, modified: Type.String() });
const Update = Type.Object(
  { name: Type.Optional(Type.String()), ...readOnlyProps(View, ['uuid', 'created', 'tags']), ...readOnlyProps(View2, ['modified'], 'maintained') },
  { additionalProperties: false },
);
const current = { uuid: '0b5f1c1e-1111-4222-8333-444455556666', name: 'a', created: '2026-01-02T03:04:05.000Z', tags: ['x', 'y'] };

test('read-only fields sent back unchanged are dropped; the writable ones stay', (t) => {
  const input = { name: 'b', uuid: current.uuid.toUpperCase(), created: '2026-01-02T03:04:05Z', tags: ['x', 'y'] };
  t.deepEqual(dropReadOnly(Update, input, current), { name: 'b' });
});

test('a maintained field (a timestamp the server sets) is dropped whatever its value: a stale copy is no attempt to change it', (t) => {
  t.deepEqual(dropReadOnly(Update, { name: 'c', modified: '1999-01-01T00:00:00Z' }, { ...current, modified: '2026-01-01T00:00:00Z' }), { name: 'c' });
});

test('a read-only field with another value is a 400 naming it, and nothing else is dropped silently', (t) => {
  const err = t.throws(() => dropReadOnly(Update, { name: 'b', created: '2020-01-01T00:00:00Z', tags: ['y', 'x'] }, current), { instanceOf: DomainError });
  t.deepEqual(err?.errors, { created: [READ_ONLY_MESSAGE], tags: [READ_ONLY_MESSAGE] });
});

test('sameValue: deep, key order free; arrays in order; null and absent alike', (t) => {
  t.true(sameValue({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 }));
  t.false(sameValue({ a: 1 }, { a: 2 }));
  t.false(sameValue([1, 2], [2, 1]));
  t.true(sameValue(null, undefined));
  t.false(sameValue('2026-01-02', '2026-01-02T00:00:00Z'));
  t.true(sameValue('2026-01-02T03:04:05+00:00', new Date('2026-01-02T03:04:05Z')));
});

test('the schema documents the fields as readOnly (OpenAPI shows it)', (t) => {
  t.true((Update.properties.uuid as { readOnly?: boolean }).readOnly);
  t.is((Update.properties.uuid as { format?: string }).format, 'uuid');
});
