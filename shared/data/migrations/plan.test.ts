// The migration plan without a database: type changes classified, renames ordered (a chain runs
// back to front, a cycle is refused), a primary key's change refused, rollback statements the
// inverse of each step.
import test from 'ava';
import type { TableSchema } from '../table-schema.ts';
import { planMigration, typeChange, type PlanInput } from './plan.ts';

const input = (old: TableSchema, next: TableSchema, extra: Partial<PlanInput> = {}): PlanInput => ({
  schema: 'site_x', table: 'a1_t', provider: 'flat_table', old, next,
  catalog: { constraints: [], rows: 0 }, resolveTable: () => undefined, referenced: new Map(), ...extra,
});
const T = (fields: TableSchema['fields']): TableSchema => ({ fields: [{ name: 'id', type: 'integer' }, ...fields], primaryKey: ['id'] });
const sqlOf = (plan: ReturnType<typeof planMigration>) => plan.steps.flatMap((st) => st.sql.map((x) => x.sql));

test('type changes: widening, narrowing, incompatible', (t) => {
  t.is(typeChange('integer', 'bigint'), 'widen');
  t.is(typeChange('bigint', 'double precision'), 'widen');
  t.is(typeChange('date', 'timestamptz'), 'widen');
  t.is(typeChange('boolean', 'text'), 'widen');
  t.is(typeChange('double precision', 'bigint'), 'narrow');
  t.is(typeChange('text', 'uuid'), 'narrow');
  t.is(typeChange('boolean', 'bigint'), 'incompatible');
  t.is(typeChange('date', 'interval'), 'incompatible');
});

test('a chain of renames runs back to front; a cycle is refused; x-rename-from is stripped', (t) => {
  const old = T([{ name: 'a', type: 'integer' }, { name: 'b', type: 'integer' }]);
  const chain = planMigration(input(old, T([{ name: 'b', type: 'integer', 'x-rename-from': 'a' }, { name: 'c', type: 'integer', 'x-rename-from': 'b' }])));
  t.deepEqual(chain.errors, []);
  t.deepEqual(sqlOf(chain), ['ALTER TABLE "site_x"."a1_t" RENAME COLUMN "b" TO "c"', 'ALTER TABLE "site_x"."a1_t" RENAME COLUMN "a" TO "b"']);
  // A rollback runs the steps' rollbacks in reverse: b back to a first, then c back to b.
  t.deepEqual([...chain.steps].reverse().flatMap((st) => st.rollback.map((x) => x.sql)), ['ALTER TABLE "site_x"."a1_t" RENAME COLUMN "b" TO "a"', 'ALTER TABLE "site_x"."a1_t" RENAME COLUMN "c" TO "b"']);
  t.false(JSON.stringify(chain.stored).includes('x-rename-from'));
  const swap = planMigration(input(old, T([{ name: 'b', type: 'integer', 'x-rename-from': 'a' }, { name: 'a', type: 'integer', 'x-rename-from': 'b' }])));
  t.regex(swap.errors.join(' '), /form a cycle/);
  const unknown = planMigration(input(old, T([{ name: 'z', type: 'integer', 'x-rename-from': 'nope' }, { name: 'b', type: 'integer' }])));
  t.regex(unknown.errors.join(' '), /x-rename-from 'nope' is not a field of the current schema/);
});

test('refused whatever the flag: a primary key change, a referenced column dropped, a foreign key to a table not materialized', (t) => {
  const old = T([{ name: 'a', type: 'integer' }]);
  t.regex(planMigration(input(old, { fields: old.fields, primaryKey: ['a'] })).errors.join(' '), /primaryKey cannot change/);
  t.regex(planMigration(input(old, { fields: old.fields })).errors.join(' '), /primaryKey cannot change/, 'declared key → generated key');
  t.regex(planMigration(input(old, T([]), { referenced: new Map([['a', ['other']]]) })).errors.join(' '), /Field 'a' cannot be dropped: foreign keys of other reference it/);
  const fk = { ...old, foreignKeys: [{ fields: ['a'], reference: { resource: 'far', fields: ['id'] } }] };
  t.regex(planMigration(input(old, fk)).errors.join(' '), /"far" is not materialized/);
  t.deepEqual(planMigration(input(old, fk, { resolveTable: (r) => (r === 'far' ? 'a1_far' : undefined) })).errors, []);
});

test('safety: what the spec lists as safe and unsafe', (t) => {
  const old = T([{ name: 'n', type: 'integer' }, { name: 'r', type: 'string', constraints: { required: true } }]);
  const safeOf = (next: TableSchema) => planMigration(input(old, next)).steps.filter((st) => st.type !== 'drop_search_index' && st.type !== 'create_search_index').map((st) => [st.type, st.is_safe]);
  t.deepEqual(safeOf(T([...old.fields.slice(1), { name: 'x', type: 'string' }])), [['add_column', true]]);
  t.deepEqual(safeOf(T([...old.fields.slice(1), { name: 'x', type: 'string', constraints: { required: true } }])), [['add_column', false]]);
  t.deepEqual(safeOf(T([...old.fields.slice(1), { name: 'x', type: 'string', default: 'd', constraints: { required: true } }])), [['add_column', true]]);
  t.deepEqual(safeOf(T([{ name: 'n', type: 'number' }, old.fields[2]!])), [['alter_column_type', true]]);
  t.deepEqual(safeOf(T([{ name: 'n', type: 'boolean' }, old.fields[2]!])), [['alter_column_type', false]]);
  t.deepEqual(safeOf(T([old.fields[1]!, { name: 'r', type: 'string' }])), [['drop_not_null', true]]);
  t.deepEqual(safeOf(T([{ name: 'n', type: 'integer', constraints: { required: true } }, old.fields[2]!])), [['set_not_null', false]]);
  t.deepEqual(safeOf(T([old.fields[2]!])), [['drop_column', true]]);
});
