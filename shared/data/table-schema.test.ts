// Table Schema validation: every rule reports a message (all problems at once), the fragment
// grammar of index expressions/where refuses anything outside it, canonical form and hash.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { compileFragment } from './index-expression.ts';
import { FIELD_TYPES, canonicalSchema, fieldNamesOf, primaryKeyOf, schemaHash, validateTableSchema } from './table-schema.ts';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../../fixtures/schemas/${name}`, import.meta.url), 'utf8'));
const ok = (doc: unknown, tables = new Map<string, string[]>()) => validateTableSchema(doc, tables, 'self_table');
const has = (errors: string[], text: string | RegExp) => errors.some((e) => (typeof text === 'string' ? e.includes(text) : text.test(e)));

test('the fixtures are valid (with their FK targets)', (t) => {
  const tables = new Map([['companies', ['id', 'name']], ['contacts', ['id', 'email']]]);
  for (const f of ['companies.json', 'contacts.json', 'orders.json', 'events.jsonb.json', 'notes.docstore.json']) t.deepEqual(ok(fixture(f), tables), [], f);
});

test('fields: required, non-empty, names, types (listing the valid ones), formats, unknown keys, duplicates', (t) => {
  t.deepEqual(ok({}), ["'fields' is required and must be a non-empty array."]);
  t.deepEqual(ok({ fields: [] }), ["'fields' is required and must be a non-empty array."]);
  const errors = ok({
    fields: [
      { name: 'Bad-Name', type: 'string' },
      { name: 'age', type: 'strnig' },
      { name: 'email', type: 'string', format: 'mail' },
      { name: 'n', type: 'integer', format: 'email' },
      { name: 'x', type: 'string', colour: 'red' },
      { name: 'x', type: 'string' },
      { name: 'a"; DROP TABLE t; --', type: 'string' },
    ],
    extra: 1,
  });
  t.true(has(errors, `Field 'Bad-Name': name "Bad-Name" must match`));
  t.true(has(errors, `Field 'age': invalid type "strnig"; valid types are ${FIELD_TYPES.join(', ')}.`));
  t.true(has(errors, "Field 'email': invalid format \"mail\" for type string; valid formats are default, email, uri, binary, uuid."));
  t.true(has(errors, "Field 'n': type \"integer\" takes no format"));
  t.true(has(errors, "Field 'x': unknown property 'colour'."));
  t.true(has(errors, "Field name 'x' is used more than once."));
  t.true(has(errors, 'DROP TABLE'));
  t.true(has(errors, "Unknown top-level property 'extra'."));
  t.true(errors.length >= 8, 'every problem at once');
});

test('constraints: types of each, pattern must compile, enum non-empty, NUL refused', (t) => {
  const errors = ok({
    fields: [
      { name: 'a', type: 'string', constraints: { required: 'yes', minLength: -1, pattern: '([a-z' } },
      { name: 'b', type: 'integer', constraints: { minimum: 'low', enum: [] } },
      { name: 'c', type: 'string', default: 'x\u0000y', constraints: { nope: 1 } },
    ],
  });
  t.true(has(errors, "Field 'a': constraint required must be a boolean."));
  t.true(has(errors, "Field 'a': constraint minLength must be a non-negative integer."));
  t.true(has(errors, "Field 'a': constraint pattern does not compile"));
  t.true(has(errors, "Field 'b': constraint minimum must be a number."));
  t.true(has(errors, "Field 'b': constraint enum must be a non-empty array."));
  t.true(has(errors, "Field 'c': default must not contain NUL characters."));
  t.true(has(errors, "Field 'c': unknown constraint 'nope'."));
});

test('primary key: string or array, fields exist; `id` is reserved only without a declared key', (t) => {
  t.deepEqual(ok({ fields: [{ name: 'a', type: 'string' }], primaryKey: 'a' }), []);
  t.deepEqual(ok({ fields: [{ name: 'a', type: 'string' }, { name: 'b', type: 'integer' }], primaryKey: ['a', 'b'] }), []);
  t.true(has(ok({ fields: [{ name: 'a', type: 'string' }], primaryKey: ['nope'] }), "primaryKey: field 'nope' does not exist."));
  t.true(has(ok({ fields: [{ name: 'a', type: 'string' }], primaryKey: [] }), 'primaryKey must be'));
  t.true(has(ok({ fields: [{ name: 'id', type: 'integer' }] }), "Field 'id' is reserved for the generated primary key"));
  t.deepEqual(ok({ fields: [{ name: 'id', type: 'integer' }], primaryKey: 'id' }), []);
  const generated = { fields: [{ name: 'title', type: 'string' }] };
  t.deepEqual(fieldNamesOf(generated as never), ['id', 'title']);
  t.deepEqual(primaryKeyOf(generated as never), ['id']);
  t.deepEqual(primaryKeyOf(fixture('orders.json')), ['order_number', 'line_no']);
});

test('foreign keys: fields exist, target table and fields exist, arity, onDelete values and their conditions', (t) => {
  const tables = new Map([['companies', ['id', 'name']]]);
  const base = [
    { name: 'company_id', type: 'integer', constraints: { required: true } },
    { name: 'other', type: 'integer' },
    { name: 'parent', type: 'integer' },
  ];
  const fk = (x: unknown) => ok({ fields: base, foreignKeys: [x] }, tables);
  t.deepEqual(fk({ fields: ['other'], reference: { resource: 'companies', fields: ['id'] } }), []);
  t.deepEqual(fk({ fields: 'parent', reference: { resource: '', fields: 'id' } }), [], 'self reference to the generated id');
  t.true(has(fk({ fields: ['nope'], reference: { resource: 'companies', fields: ['id'] } }), "foreignKeys[0]: field 'nope' does not exist."));
  t.true(has(fk({ fields: ['other'], reference: { resource: 'ghosts', fields: ['id'] } }), "reference.resource 'ghosts' is not a table of this app."));
  t.true(has(fk({ fields: ['other'], reference: { resource: 'companies', fields: ['uuid'] } }), "referenced field 'uuid' does not exist in 'companies'."));
  t.true(has(fk({ fields: ['other', 'parent'], reference: { resource: 'companies', fields: ['id'] } }), '2 local field(s) but 1 referenced field(s).'));
  t.true(has(fk({ fields: ['other'], reference: { resource: 'companies', fields: ['id'] }, 'x-actions': { onDelete: 'EXPLODE' } }), 'onDelete "EXPLODE" is not one of RESTRICT, CASCADE, SET NULL, SET DEFAULT, NO ACTION.'));
  t.true(has(fk({ fields: ['company_id'], reference: { resource: 'companies', fields: ['id'] }, 'x-actions': { onDelete: 'SET NULL' } }), "needs field 'company_id' to be nullable"));
  t.true(has(fk({ fields: ['other'], reference: { resource: 'companies', fields: ['id'] }, 'x-actions': { onDelete: 'SET DEFAULT' } }), "needs field 'other' to define a default"));
  for (const onDelete of ['RESTRICT', 'CASCADE', 'NO ACTION']) {
    t.deepEqual(fk({ fields: ['company_id'], reference: { resource: 'companies', fields: ['id'] }, 'x-actions': { onDelete } }), [], onDelete);
  }
});

test('indexes: name, fields or expression, method, unique names; expression and where only in the grammar', (t) => {
  const fields = [{ name: 'email', type: 'string' }, { name: 'n', type: 'integer' }];
  const ix = (...indexes: unknown[]) => ok({ fields, indexes });
  t.deepEqual(ix({ name: 'e', expression: "lower(coalesce(email, ''))", unique: true, where: 'n >= 0 AND NOT email IS NULL', method: 'btree' }), []);
  t.true(has(ix({ name: 'e' }), "Index 'e': needs fields or expression."));
  t.true(has(ix({ name: 'e', fields: ['email'] }, { name: 'e', fields: ['n'] }), 'index name is used more than once'));
  t.true(has(ix({ name: 'Bad Name', fields: ['email'] }), 'must match'));
  t.true(has(ix({ name: 'e', fields: ['nope'] }), "Index 'e': field 'nope' does not exist."));
  t.true(has(ix({ name: 'e', fields: ['email'], method: 'spgist' }), 'method "spgist" is not one of btree, hash, gin, gist, brin.'));
  for (const bad of [
    'email); DROP TABLE users; --',
    'pg_sleep(10)',
    "email || 'x'",
    'nope = 1',
    "email = 'a' -- comment",
    'email = $1',
    '(SELECT 1)',
    "email = E'\\x00'",
    'email::text',
  ]) {
    const errors = ix({ name: 'e', expression: bad });
    t.true(has(errors, "Index 'e': expression is not allowed:"), bad);
    t.true(has(ix({ name: 'w', fields: ['email'], where: bad }), "Index 'w': where is not allowed:"), bad);
  }
});

test('the fragment grammar re-emits quoted fields and normalised operators', (t) => {
  const f = new Set(['email', 'n']);
  t.is(compileFragment("lower(email) != 'A''B' or n is not null", f), `lower("email") <> 'A''B' OR "n" IS NOT NULL`);
  t.is(compileFragment('NOT (n > 1 AND n <= 10.5)', f), 'NOT ("n" > 1 AND "n" <= 10.5)');
  t.throws(() => compileFragment('', f));
  t.throws(() => compileFragment('n n', f));
});

test('top level: title/description strings, hierarchy boolean, graph object', (t) => {
  const errors = ok({ fields: [{ name: 'a', type: 'any' }], title: 1, hierarchy: 'yes', graph: [] });
  t.true(has(errors, 'title must be a string.'));
  t.true(has(errors, 'hierarchy must be a boolean.'));
  t.true(has(errors, 'graph must be an object.'));
  t.deepEqual(ok({ fields: [{ name: 'a', type: 'any' }], hierarchy: true, graph: { enabled: true, types: [] } }), []);
});

test('canonical form and hash: key order never changes the hash, content does', (t) => {
  const a = { fields: [{ name: 'a', type: 'string', constraints: { required: true, maxLength: 3 } }], primaryKey: ['a'] };
  const b = { primaryKey: ['a'], fields: [{ constraints: { maxLength: 3, required: true }, type: 'string', name: 'a' }] };
  t.deepEqual(JSON.stringify(canonicalSchema(a)), JSON.stringify(canonicalSchema(b)));
  t.is(schemaHash(a), schemaHash(b));
  t.regex(schemaHash(a), /^[0-9a-f]{64}$/);
  t.not(schemaHash(a), schemaHash({ ...a, title: 'x' }));
});

test('patterns: lookaround and backreferences are refused (RE2, linear time), saying so', (t) => {
  for (const pattern of ['(?=a)b', '(?!x)y', '(?<=a)b', '(?<!a)b', '(a)\\1', '(?<n>a)\\k<n>']) {
    const errors = ok({ fields: [{ name: 'p', type: 'string', constraints: { pattern } }] });
    t.deepEqual(errors, ["Field 'p': constraint pattern uses lookahead, lookbehind or a backreference, which are not supported (patterns run on RE2, a linear-time engine)."], pattern);
  }
  t.true(has(ok({ fields: [{ name: 'p', type: 'string', constraints: { pattern: '(' } }] }), "Field 'p': constraint pattern does not compile: "));
  t.deepEqual(ok({ fields: [{ name: 'p', type: 'string', constraints: { pattern: '^[A-Z]{2}\\u00e9\\d+$' } }] }), []);
});
