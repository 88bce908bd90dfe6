// Schema migrations over HTTP (spec Part 2 §3, §4 "Schema migration endpoints"): every safe and
// unsafe operation on real rows (values kept, or refused and nothing changed), the data source's
// allow_data_loss, the rollback of each, a second rollback refused, the history and its filters,
// preview and validate-schema, concurrent migrations serialised and the lock timeout, the
// document providers, permissions and tenant isolation.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

process.env.DATA_SERVICE_MIGRATION_LOCK_TIMEOUT_MS = '1500';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (site: TestSite, who: string) => (method: string, path: string, body?: unknown) => s.api(method, path, { host: site.domain, token: tok[who], body });
let onA: ReturnType<typeof on>;
let appId: number;

const T = '/api/apps/crm/datatables/';
type Field = { name: string; type: string; [k: string]: unknown };
const ITEMS: { fields: Field[]; primaryKey: string[] } = {
  fields: [
    { name: 'id', type: 'integer' },
    { name: 'name', type: 'string', constraints: { required: true } },
    { name: 'qty', type: 'integer' },
    { name: 'price', type: 'number' },
    { name: 'code', type: 'string' },
    { name: 'note', type: 'string' },
  ],
  primaryKey: ['id'],
};
const ROWS = [
  { id: 1, name: 'one', qty: 10, price: 1.5, code: 'true', note: 'n1' },
  { id: 2, name: 'two', qty: 20, price: 2, code: 'false', note: null },
  { id: 3, name: 'three', qty: null, price: 3.25, code: 'x', note: 'n3' },
];
const withFields = (fields: Field[]) => ({ ...ITEMS, fields });
const replace = (name: string, f: Partial<Field> | null) => ITEMS.fields.flatMap((x) => (x.name !== name ? [x] : f === null ? [] : [{ ...x, ...f } as Field]));

/** Columns of a physical table: name → [type, nullable]. */
async function columns(table: string): Promise<Record<string, [string, boolean]>> {
  const found = await sql(`SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`, [a.schema, table]);
  return Object.fromEntries(found.map((c: any) => [c.column_name, [c.data_type, c.is_nullable === 'YES']]));
}
const records = async (table: string) => (await onA('GET', `${T}${table}/data/?_sort=id&page_size=100`)).body.data;
const history = async (table: string, query = '') => (await onA('GET', `${T}${table}/operation-history/${query}`)).body;
const hashOf = async (table: string) => (await onA('GET', `${T}${table}/`)).body.schema_hash;

/** A fresh materialized `name` table (ITEMS, or `schema`) holding ROWS. */
async function freshTable(name: string, schema: unknown = ITEMS, ds = 'main', rows: unknown[] = ROWS): Promise<void> {
  const made = await onA('POST', `/api/apps/crm/datasources/${ds}/datatables/`, { name, json_schema: schema });
  if (made.status !== 201) throw new Error(made.text);
  const m = await onA('POST', `${T}${name}/materialize/`);
  if (m.status !== 200) throw new Error(m.text);
  if (rows.length) {
    const ins = await onA('POST', `${T}${name}/data/`, rows);
    if (ins.status !== 201) throw new Error(ins.text);
  }
}
const physical = (name: string) => `a${appId}_${name}`;
const setAllowDataLoss = async (ds: string, allow: boolean) => {
  const res = await onA('PATCH', `/api/apps/crm/datasources/${ds}/`, { provider_config: { allow_data_loss: allow } });
  if (res.status !== 200) throw new Error(res.text);
};
/** PATCHes the schema, then rolls the migration back: both answers, and the revision. */
async function migrateAndRollBack(table: string, fields: Field[]) {
  const patched = await onA('PATCH', `${T}${table}/`, { json_schema: withFields(fields) });
  const revision = (await history(table)).results[0].revision_id;
  const rollback = await onA('POST', `${T}${table}/rollback/`, { revision_id: revision });
  return { patched, revision, rollback };
}

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  onA = on(a, 'adminA');
  for (const site of [a, b]) {
    const [app] = await sql(`INSERT INTO "${site.schema}".apps (name, slug) VALUES ('CRM', 'crm') RETURNING id`);
    await sql(`INSERT INTO "${site.schema}".app_settings (app_id, display_name) VALUES (?, 'CRM')`, [app.id]);
    for (const [slug, provider] of [['main', 'flat_table'], ['loose', 'flat_table'], ['events', 'jsonb'], ['docs', 'docstore']]) {
      await sql(`INSERT INTO "${site.schema}".data_sources (app_id, name, slug, provider_type) VALUES (?, ?, ?, ?)`, [app.id, slug, slug, provider]);
    }
    if (site === a) appId = app.id;
  }
  await setAllowDataLoss('loose', true);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('safe changes run at once and keep the values; the history records CREATE_TABLE then each ALTER_TABLE', async (t) => {
  await freshTable('items');
  const created = (await history('items')).results;
  t.is(created.length, 1);
  t.like(created[0], { table: 'items', operation_type: 'CREATE_TABLE', status: 'SUCCESS', rollback_sql: null, parent_operation: null });
  t.regex(created[0].revision_id, /^[0-9a-f]{12}$/);
  t.regex(created[0].executed_sql[0].sql, /^CREATE TABLE/);

  // Add a nullable column, a column with a default, rename with x-rename-from, drop, widen, make nullable.
  const next = withFields([
    { name: 'id', type: 'integer' },
    { name: 'name', type: 'string' }, // required → nullable
    { name: 'quantity', type: 'integer', 'x-rename-from': 'qty' },
    { name: 'price', type: 'string' }, // number → string: widening
    { name: 'code', type: 'string' },
    { name: 'added', type: 'date' },
    { name: 'status', type: 'string', default: 'new' },
  ]); // note: dropped
  const res = await onA('PATCH', `${T}items/`, { json_schema: next, description: 'migrated' });
  t.is(res.status, 200, res.text);
  t.is(res.body.description, 'migrated');
  t.deepEqual(res.body.field_names, ['id', 'name', 'quantity', 'price', 'code', 'added', 'status']);
  t.false(JSON.stringify(res.body.json_schema).includes('x-rename-from'), 'x-rename-from is applied once and stripped');
  t.deepEqual(await columns(physical('items')), {
    id: ['bigint', false], name: ['text', true], quantity: ['bigint', true], price: ['text', true], code: ['text', true], added: ['date', true], status: ['text', true],
  });
  t.deepEqual(await records('items'), [
    { id: 1, name: 'one', quantity: 10, price: '1.5', code: 'true', added: null, status: 'new' },
    { id: 2, name: 'two', quantity: 20, price: '2', code: 'false', added: null, status: 'new' },
    { id: 3, name: 'three', quantity: null, price: '3.25', code: 'x', added: null, status: 'new' },
  ]);
  const [op] = (await history('items')).results;
  t.like(op, { operation_type: 'ALTER_TABLE', status: 'SUCCESS', parent_operation: created[0].revision_id, old_schema_hash: created[0].new_schema_hash, new_schema_hash: res.body.schema_hash });
  t.deepEqual(op.migration_operations, [
    { type: 'drop_search_index', column: null }, { type: 'drop_column', column: 'note' }, { type: 'rename_column', column: 'quantity' }, { type: 'add_column', column: 'added' },
    { type: 'add_column', column: 'status' }, { type: 'alter_column_type', column: 'price' }, { type: 'drop_not_null', column: 'name' }, { type: 'create_search_index', column: null },
  ]);
  t.true(op.rollback_warnings.some((w: string) => w.includes("Column 'note' and its values are dropped")));
  t.true(op.duration_ms >= 0);

  // The same schema sent again, x-rename-from included: no change, no operation.
  const again = await onA('PATCH', `${T}items/`, { json_schema: next });
  t.is(again.status, 200);
  t.is((await history('items')).count, 2);

  // A client GETs the table, changes the description, PUTs the whole body back: no migration.
  const got = (await onA('GET', `${T}items/`)).body;
  const put = await onA('PUT', `${T}items/`, { ...got, description: 'put back' });
  t.is(put.status, 200, put.text);
  t.is((await history('items')).count, 2);
});

test.serial('rollback of each safe operation restores the schema and what data it can; a second rollback is refused', async (t) => {
  await freshTable('rb');
  const rbRecords = () => records('rb');
  const original = await hashOf('rb');

  // Added column: gone again.
  let r = await migrateAndRollBack('rb', [...ITEMS.fields, { name: 'extra', type: 'integer' }]);
  t.is(r.patched.status, 200, r.patched.text);
  t.is(r.rollback.status, 200, r.rollback.text);
  t.like(r.rollback.body, { success: true, operations_reversed: 1, new_status: 'ROLLED_BACK' });
  t.false('extra' in (await columns(physical('rb'))));
  t.is(await hashOf('rb'), original);

  // A second rollback of the same revision is refused, and changes nothing.
  const twice = await onA('POST', `${T}rb/rollback/`, { revision_id: r.revision });
  t.is(twice.status, 400);
  t.regex(twice.body.errors.revision_id[0], /rolled back already/);

  // Renamed column: the values are back under the old name.
  r = await migrateAndRollBack('rb', ITEMS.fields.map((f) => (f.name === 'qty' ? { name: 'amount', type: 'integer', 'x-rename-from': 'qty' } : f)));
  t.is(r.rollback.status, 200, r.rollback.text);
  t.deepEqual((await rbRecords()).map((x: any) => x.qty), [10, 20, null]);

  // Widened column: back to its type with its values.
  r = await migrateAndRollBack('rb', replace('qty', { type: 'number' }));
  t.is(r.patched.status, 200, r.patched.text);
  t.is((await columns(physical('rb'))).qty![0], 'bigint');
  t.deepEqual((await rbRecords()).map((x: any) => x.qty), [10, 20, null]);

  // Made nullable: NOT NULL again.
  r = await migrateAndRollBack('rb', replace('name', { constraints: {} }));
  t.is(r.rollback.status, 200, r.rollback.text);
  t.false((await columns(physical('rb'))).name![1]);

  // Dropped column: back, without its values (the rollback says so).
  r = await migrateAndRollBack('rb', replace('note', null));
  t.is(r.rollback.status, 200, r.rollback.text);
  t.true(r.rollback.body.warnings.some((w: string) => /without its values/.test(w)));
  t.deepEqual((await rbRecords()).map((x: any) => x.note), [null, null, null]);

  // Column with a default: gone again.
  r = await migrateAndRollBack('rb', [...ITEMS.fields, { name: 'flag', type: 'boolean', default: true }]);
  t.is(r.rollback.status, 200, r.rollback.text);
  t.false('flag' in (await columns(physical('rb'))));
  t.is(await hashOf('rb'), original);

  // The history: each migration ROLLED_BACK, each rollback a SUCCESS operation pointing at it.
  const h = (await history('rb', '?limit=100')).results;
  const migrations = h.filter((o: any) => o.operation_type === 'ALTER_TABLE');
  t.is(migrations.length, 6);
  t.true(migrations.every((o: any) => o.status === 'ROLLED_BACK' && o.rolled_back_at));
  const rollbacks = h.filter((o: any) => o.operation_type === 'ROLLBACK');
  t.deepEqual(rollbacks.map((o: any) => o.parent_operation).sort(), migrations.map((o: any) => o.revision_id).sort());
});

/** The keys of an operation-history item (spec Part 2 §2 "Schema operation", and ours where it is silent). */
const OPERATION_KEYS = [
  'completed_at', 'created_by', 'description', 'duration_ms', 'error_message', 'executed_sql', 'execution_time_ms', 'migration_operations', 'new_schema_hash',
  'old_schema_hash', 'operation_type', 'parent_operation', 'revision_id', 'rollback_sql', 'rollback_warnings', 'rolled_back_at', 'rolled_back_by', 'sql', 'started_at', 'status', 'table',
];

test.serial('history items carry the spec\'s names, exactly these keys: a migration, and its rollback pointing at it (parent_operation)', async (t) => {
  await freshTable('named');
  t.is((await onA('PATCH', `${T}named/`, { json_schema: withFields([...ITEMS.fields, { name: 'extra', type: 'integer' }]) })).status, 200);
  const [migration, create] = (await history('named')).results;
  t.deepEqual(Object.keys(migration).sort(), OPERATION_KEYS);
  t.like(migration, { operation_type: 'ALTER_TABLE', status: 'SUCCESS', error_message: null, parent_operation: create.revision_id, description: '' });
  t.deepEqual(migration.migration_operations, [{ type: 'add_column', column: 'extra' }]);
  t.regex(migration.sql, /^ALTER TABLE "[^"]+"\."a\d+_named" ADD COLUMN "extra" bigint$/);
  t.deepEqual(migration.executed_sql, [{ sql: migration.sql }]);
  t.regex(migration.rollback_sql[0].sql, /DROP COLUMN "extra"$/);
  t.true(Number.isInteger(migration.execution_time_ms) && migration.execution_time_ms <= migration.duration_ms, `${migration.execution_time_ms} of ${migration.duration_ms} ms`);
  t.deepEqual(Object.keys(create).sort(), OPERATION_KEYS);

  const rolled = await onA('POST', `${T}named/rollback/`, { revision_id: migration.revision_id });
  t.is(rolled.status, 200, rolled.text);
  const [rollback, reversed] = (await history('named')).results;
  t.deepEqual(Object.keys(rollback).sort(), OPERATION_KEYS);
  t.like(rollback, {
    revision_id: rolled.body.revision_id, operation_type: 'ROLLBACK', status: 'SUCCESS', parent_operation: migration.revision_id, error_message: null,
    migration_operations: [], rollback_sql: null, sql: migration.rollback_sql[0].sql, description: `Rollback of ${migration.revision_id}`,
  });
  t.true(Number.isInteger(rollback.execution_time_ms));
  t.like(reversed, { revision_id: migration.revision_id, status: 'ROLLED_BACK' });
});

test.serial('rollback dry_run: the same checks, and what the rollback would lose (counted); nothing changes', async (t) => {
  await freshTable('dry');
  const next = withFields([...ITEMS.fields, { name: 'extra', type: 'integer' }, { name: 'unused', type: 'integer' }]);
  const preview = await onA('POST', `${T}dry/preview-changes/`, { new_schema: next });
  t.true(preview.body.warnings.includes("A rollback drops column 'extra' with the values written to it."), preview.text);
  t.is((await onA('PATCH', `${T}dry/`, { json_schema: next })).status, 200);
  t.is((await onA('PATCH', `${T}dry/data/`, [{ id: 1, extra: 10 }, { id: 2, extra: 20 }])).status, 200);
  const before = await history('dry');
  const [op] = before.results;
  t.true(op.rollback_warnings.includes("A rollback drops column 'extra' with the values written to it."));

  const dry = await onA('POST', `${T}dry/rollback/`, { revision_id: op.revision_id, dry_run: true });
  t.is(dry.status, 200, dry.text);
  t.deepEqual(dry.body, {
    success: true, message: `Revision ${op.revision_id} of data table "dry" can be rolled back (dry run: nothing was changed).`,
    operations_reversed: 2, new_status: 'ROLLED_BACK', revision_id: null, warnings: op.rollback_warnings,
    data_loss: ["Column 'extra' is dropped with its values (2 rows hold one)."],
  });
  t.deepEqual(await history('dry'), before, 'nothing recorded, the migration still SUCCESS');
  t.deepEqual((await records('dry')).map((r: any) => r.extra), [10, 20, null]);
  t.is((await onA('POST', `${T}dry/rollback/`, { revision_id: '0123456789ab', dry_run: true })).status, 404);

  const real = await onA('POST', `${T}dry/rollback/`, { revision_id: op.revision_id });
  t.is(real.status, 200, real.text);
  t.deepEqual(real.body.data_loss, dry.body.data_loss);
  t.false('extra' in (await columns(physical('dry'))));
  const again = await onA('POST', `${T}dry/rollback/`, { revision_id: op.revision_id, dry_run: true });
  t.is(again.status, 400);
  t.regex(again.body.errors.revision_id[0], /rolled back already/);
});

test.serial('rollback rules: only the latest migration (409 otherwise), not a CREATE_TABLE or a failed one (400), an unknown revision 404', async (t) => {
  await freshTable('order1');
  const first = await onA('PATCH', `${T}order1/`, { json_schema: withFields([...ITEMS.fields, { name: 'a1', type: 'string' }]) });
  t.is(first.status, 200);
  const second = await onA('PATCH', `${T}order1/`, { json_schema: withFields([...ITEMS.fields, { name: 'a1', type: 'string' }, { name: 'a2', type: 'string' }]) });
  t.is(second.status, 200);
  const [latest, earlier, create] = (await history('order1')).results;
  const refused = await onA('POST', `${T}order1/rollback/`, { revision_id: earlier.revision_id });
  t.is(refused.status, 409);
  t.true(refused.body.message.includes(latest.revision_id), refused.text);
  t.true('a2' in (await columns(physical('order1'))), 'nothing changed');
  const ofCreate = await onA('POST', `${T}order1/rollback/`, { revision_id: create.revision_id });
  t.is(ofCreate.status, 400);
  t.regex(ofCreate.body.errors.revision_id[0], /CREATE_TABLE/);
  t.is((await onA('POST', `${T}order1/rollback/`, { revision_id: '0123456789ab' })).status, 404);
  t.is((await onA('POST', `${T}order1/rollback/`, { revision_id: 'nope' })).status, 400);
  t.is((await onA('POST', `${T}order1/rollback/`, { revision_id: latest.revision_id })).status, 200);
  t.is((await onA('POST', `${T}order1/rollback/`, { revision_id: earlier.revision_id })).status, 200, 'then the earlier one');
  t.deepEqual(Object.keys(await columns(physical('order1'))), ['id', 'name', 'qty', 'price', 'code', 'note']);
});

test.serial('unsafe changes are refused (400 naming each) unless the data source allows data loss; nothing changes', async (t) => {
  await freshTable('strict');
  const hash = await hashOf('strict');
  const unsafe = withFields([
    { name: 'id', type: 'integer' },
    { name: 'name', type: 'string', constraints: { required: true } },
    { name: 'qty', type: 'integer', constraints: { required: true } }, // remove nullability
    { name: 'price', type: 'integer' }, // narrow
    { name: 'code', type: 'boolean' }, // incompatible
    { name: 'note', type: 'string' },
    { name: 'must', type: 'string', constraints: { required: true } }, // NOT NULL without default
  ]);
  const res = await onA('PATCH', `${T}strict/`, { json_schema: unsafe });
  t.is(res.status, 400);
  t.regex(res.body.message, /data source "main" allows data loss/);
  t.deepEqual(res.body.unsafe_operations.map((o: any) => [o.type, o.column]).sort(), [['add_column', 'must'], ['alter_column_type', 'code'], ['alter_column_type', 'price'], ['set_not_null', 'qty']]);
  t.is(res.body.json_schema.length, 4);
  t.regex(res.body.json_schema.join(' '), /narrowing its type from number/);
  t.is(await hashOf('strict'), hash);
  t.is((await history('strict')).count, 1, 'no operation recorded');

  // The preview says the same without running anything.
  const preview = await onA('POST', `${T}strict/preview-changes/`, { new_schema: unsafe });
  t.is(preview.status, 200, preview.text);
  t.false(preview.body.is_safe);
  t.is(preview.body.operations.filter((o: any) => !o.is_safe).length, 4);
  t.true(preview.body.warnings.some((w: string) => w.startsWith('Unsafe:')));
  t.true(Number.isInteger(preview.body.estimated_duration_ms));
  const check = await onA('POST', `${T}strict/validate-schema/`, { schema: unsafe });
  t.like(check.body, { valid: false });
  t.is(check.body.errors.length, 4);
});

test.serial('with allow_data_loss: an unsafe change runs when the rows fit, and one that does not fit fails as FAILED and changes nothing', async (t) => {
  await freshTable('lossy', ITEMS, 'loose');
  // price 1.5 does not fit an integer cast? PostgreSQL rounds: 1.5 → 2. code 'x' is not a boolean: the change fails.
  const failing = await onA('PATCH', `${T}lossy/`, { json_schema: withFields(replace('code', { type: 'boolean' })) });
  t.is(failing.status, 400, failing.text);
  t.regex(failing.body.message, /failed and changed nothing: invalid input syntax for type boolean: "x"/);
  t.regex(failing.body.revision_id, /^[0-9a-f]{12}$/);
  const [failed] = (await history('lossy', '?status=failed')).results;
  t.like(failed, { revision_id: failing.body.revision_id, status: 'FAILED', operation_type: 'ALTER_TABLE' });
  t.regex(failed.error_message, /invalid input syntax/);
  t.is(failed.execution_time_ms, null, 'the statements did not all run');
  t.is((await columns(physical('lossy'))).code![0], 'text');
  t.deepEqual((await records('lossy')).map((x: any) => x.code), ['true', 'false', 'x']);
  const ofFailed = await onA('POST', `${T}lossy/rollback/`, { revision_id: failed.revision_id });
  t.is(ofFailed.status, 400);
  t.regex(ofFailed.body.errors.revision_id[0], /FAILED/);

  // Fix the row, then the same change runs; NOT NULL on qty too once every row has a value.
  t.is((await onA('PATCH', `${T}lossy/data/3/`, { code: 'true', qty: 0 })).status, 200);
  const ok = await onA('PATCH', `${T}lossy/`, { json_schema: withFields(replace('code', { type: 'boolean' }).map((f) => (f.name === 'qty' ? { ...f, constraints: { required: true } } : f))) });
  t.is(ok.status, 200, ok.text);
  t.deepEqual((await records('lossy')).map((x: any) => [x.code, x.qty]), [[true, 10], [false, 20], [true, 0]]);
  t.deepEqual((await columns(physical('lossy'))).qty, ['bigint', false]);
  // Its rollback turns the booleans back into text.
  const [op] = (await history('lossy', '?status=success&limit=1')).results;
  t.is((await onA('POST', `${T}lossy/rollback/`, { revision_id: op.revision_id })).status, 200);
  t.deepEqual((await records('lossy')).map((x: any) => x.code), ['true', 'false', 'true']);

  // A required column without a default on a table with rows: allowed by the flag, refused by PostgreSQL.
  const notNull = await onA('PATCH', `${T}lossy/`, { json_schema: withFields([...ITEMS.fields, { name: 'must', type: 'string', constraints: { required: true } }]) });
  t.is(notNull.status, 400);
  t.regex(notNull.body.message, /contains null values/);
  t.is((await history('lossy', '?status=failed')).count, 2);
});

test.serial('constraints, unique, defaults, indexes and foreign keys: added and dropped, checked against the rows, rolled back', async (t) => {
  await freshTable('parents', { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] }, 'main', [{ id: 10, label: 'a' }, { id: 20, label: 'b' }]);
  await freshTable('kids', { fields: [{ name: 'id', type: 'integer' }, { name: 'parent', type: 'integer' }, { name: 'tag', type: 'string', constraints: { pattern: 'a\\?b|x' } }], primaryKey: ['id'] }, 'main', [
    { id: 1, parent: 10, tag: 'a?b' }, { id: 2, parent: 20, tag: 'x' }, { id: 3, parent: 30, tag: 'x' },
  ]);
  // The pattern's `\?` reached PostgreSQL as written (a literal question mark).
  const [check] = await sql(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = to_regclass(?) AND contype = 'c'`, [`"${a.schema}"."${physical('kids')}"`]);
  t.true(check.def.includes('a\\?b|x'), check.def);

  const kids = (fields: Field[], extra: Record<string, unknown> = {}) => ({ json_schema: { fields, primaryKey: ['id'], ...extra } });
  const base: Field[] = [{ name: 'id', type: 'integer' }, { name: 'parent', type: 'integer' }, { name: 'tag', type: 'string', constraints: { pattern: 'a\\?b|x' } }];
  const fk = { foreignKeys: [{ fields: ['parent'], reference: { resource: 'parents', fields: ['id'] } }] };
  // A foreign key that a row breaks: the migration fails and changes nothing.
  const broken = await onA('PATCH', `${T}kids/`, kids(base, fk));
  t.is(broken.status, 400);
  t.regex(broken.body.message, /foreign key constraint/);
  t.is((await onA('DELETE', `${T}kids/data/3/`)).status, 204);
  const linked = await onA('PATCH', `${T}kids/`, kids(base, fk));
  t.is(linked.status, 200, linked.text);
  t.is((await onA('POST', `${T}kids/data/`, { id: 4, parent: 99, tag: 'x' })).status, 400, 'the new foreign key holds');

  // unique + enum + default + an index at once; a duplicate refuses unique.
  const tagged: Field[] = [base[0]!, base[1]!, { name: 'tag', type: 'string', default: 'y', constraints: { unique: true, enum: ['a?b', 'x', 'y'] } }];
  t.is((await onA('POST', `${T}kids/data/`, { id: 3, parent: 10, tag: 'x' })).status, 201);
  const dup = await onA('PATCH', `${T}kids/`, kids(tagged, fk));
  t.is(dup.status, 400);
  t.regex(dup.body.message, /could not create unique index|duplicate key/);
  t.is((await onA('DELETE', `${T}kids/data/3/`)).status, 204);
  const ok = await onA('PATCH', `${T}kids/`, kids(tagged, { ...fk, indexes: [{ name: 'by_parent', fields: ['parent'] }] }));
  t.is(ok.status, 200, ok.text);
  t.is((await onA('POST', `${T}kids/data/`, { id: 5, parent: 10, tag: 'z' })).status, 400, 'enum');
  const dflt = await onA('POST', `${T}kids/data/`, { id: 6, parent: 10 });
  t.is(dflt.body.data?.tag, 'y', dflt.text);
  t.truthy((await sql('SELECT to_regclass(?) AS r', [`"${a.schema}"."${physical('kids')}_by_parent"`]))[0].r);
  const [op] = (await history('kids')).results;
  t.deepEqual(op.migration_operations.map((o: any) => o.type).sort(), ['add_check', 'add_index', 'add_unique', 'drop_check', 'set_default']);
  // Roll it back: pattern check again, no unique, no index, no default.
  t.is((await onA('DELETE', `${T}kids/data/6/`)).status, 204);
  const back = await onA('POST', `${T}kids/rollback/`, { revision_id: op.revision_id });
  t.is(back.status, 200, back.text);
  t.falsy((await sql('SELECT to_regclass(?) AS r', [`"${a.schema}"."${physical('kids')}_by_parent"`]))[0].r);
  const defs = (await sql(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = to_regclass(?) AND contype IN ('c', 'u')`, [`"${a.schema}"."${physical('kids')}"`])).map((r: any) => r.def);
  t.is(defs.length, 1);
  t.true(defs[0].includes('a\\?b|x'));
  // Dropping the foreign key, then a referenced column cannot go.
  t.is((await onA('PATCH', `${T}kids/`, kids(base))).status, 200);
  const refd = await onA('PATCH', `${T}kids/`, kids(base, fk));
  t.is(refd.status, 200);
  const dropRef = await onA('PATCH', `${T}parents/`, { json_schema: { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }, { name: 'uid', type: 'string' }], primaryKey: ['uid'] } });
  t.is(dropRef.status, 400);
  t.regex(dropRef.body.json_schema.join(' '), /primaryKey cannot change/);
  const retype = await onA('PATCH', `${T}parents/`, { json_schema: { fields: [{ name: 'id', type: 'string' }, { name: 'label', type: 'string' }], primaryKey: ['id'] } });
  t.is(retype.status, 400);
  t.regex(retype.body.json_schema.join(' '), /Field 'id' cannot be retyped: foreign keys of kids reference it/);
});

test.serial('concurrent migrations of one table are serialised; a change waiting past the lock timeout is 409 and records nothing', async (t) => {
  await freshTable('busy');
  const add = (n: string) => onA('PATCH', `${T}busy/`, { json_schema: withFields([...ITEMS.fields, { name: n, type: 'integer' }]) });
  const [x, y] = await Promise.all([add('c1'), add('c2')]);
  t.is(x.status, 200, x.text);
  t.is(y.status, 200, y.text);
  const ops = (await history('busy')).results.filter((o: any) => o.operation_type === 'ALTER_TABLE');
  t.is(ops.length, 2);
  t.is(ops[0].parent_operation, ops[1].revision_id, 'the second planned against the first one\'s result');
  t.is(ops[0].old_schema_hash, ops[1].new_schema_hash);
  const cols = Object.keys(await columns(physical('busy')));
  t.is(cols.filter((c) => c === 'c1' || c === 'c2').length, 1, 'each PATCH sends the whole schema: the last one wins');

  // Another session holds the table row's lock: the PATCH waits 1.5 s (DATA_SERVICE_MIGRATION_LOCK_TIMEOUT_MS), then 409.
  const holder = s.handle.db.orm.em.fork();
  await holder.begin();
  try {
    await holder.execute(`SELECT 1 FROM "${a.schema}".data_tables WHERE name = 'busy' FOR UPDATE`);
    const before = (await history('busy')).count;
    const waited = await add('c3');
    t.is(waited.status, 409, waited.text);
    t.regex(waited.body.message, /holds its lock.*retry/);
    t.is((await history('busy')).count, before);
  } finally {
    await holder.rollback();
  }
  t.is((await add('c3')).status, 200, 'once the lock is gone');
});

test.serial('an operation left IN_PROGRESS by a process that ended is marked FAILED by the next change of the table', async (t) => {
  await freshTable('crashy');
  const [row] = await sql(`SELECT id FROM "${a.schema}".data_tables WHERE name = 'crashy'`);
  await sql(`INSERT INTO "${a.schema}".schema_operations (revision_id, data_table_id, app_id, table_name, operation_type, status) VALUES ('aaaaaaaaaaaa', ?, ?, 'crashy', 'ALTER_TABLE', 'IN_PROGRESS')`, [row.id, appId]);
  t.is((await history('crashy', '?status=in_progress')).count, 1);
  t.is((await onA('PATCH', `${T}crashy/`, { json_schema: withFields([...ITEMS.fields, { name: 'z', type: 'integer' }]) })).status, 200);
  const [stale] = (await history('crashy', '?status=failed')).results;
  t.like(stale, { revision_id: 'aaaaaaaaaaaa', status: 'FAILED' });
  t.regex(stale.error_message, /Interrupted/);
});

test.serial('history: limit/offset (default 10) and page/page_size forms, status filter in lower or upper case, newest first', async (t) => {
  await freshTable('many');
  for (let i = 0; i < 11; i++) {
    const res = await onA('PATCH', `${T}many/`, { json_schema: withFields([...ITEMS.fields, { name: `f${i}`, type: 'integer' }]) });
    t.is(res.status, 200, res.text);
  }
  const first = await history('many');
  t.is(first.count, 12);
  t.is(first.results.length, 10);
  t.is(first.previous, null);
  t.true(first.results[0].migration_operations.some((o: any) => o.column === 'f10'));
  const byOffset = await history('many', '?limit=5&offset=10');
  t.is(byOffset.results.length, 2);
  t.is(byOffset.next, null);
  t.true(new URL(byOffset.previous).search.includes('offset=5'));
  t.is(byOffset.results[1].operation_type, 'CREATE_TABLE');
  const byPage = await history('many', '?page=2&page_size=5');
  t.deepEqual(byPage.results.map((o: any) => o.revision_id), (await history('many', '?limit=5&offset=5')).results.map((o: any) => o.revision_id));
  t.is((await history('many', '?status=success')).count, 12);
  t.is((await history('many', '?status=rolled_back')).count, 0);
  t.is((await history('many', '?status=SUCCESS')).count, 12, 'upper case as well (issue 30 #9)');
  t.is((await onA('GET', `${T}many/operation-history/?status=Success`)).status, 400, 'a mixed case is no status');
  t.is((await onA('GET', `/api/apps/crm/datasources/main/datatables/many/operation-history/?limit=1`)).body.count, 12, 'the data source path form');
});

test.serial('preview and validate-schema change nothing; validate-schema names foreign-key targets not materialized', async (t) => {
  await freshTable('pv');
  const next = withFields([...ITEMS.fields, { name: 'extra', type: 'string' }]);
  const preview = await onA('POST', `${T}pv/preview-changes/`, { new_schema: next });
  t.is(preview.status, 200, preview.text);
  t.deepEqual(preview.body.operations.slice(1), [{ type: 'add_column', column: 'extra', sql: `ALTER TABLE "${a.schema}"."${physical('pv')}" ADD COLUMN "extra" text`, is_safe: true }, preview.body.operations[2]]);
  t.deepEqual([preview.body.operations[0].type, preview.body.operations[2].type], ['drop_search_index', 'create_search_index']);
  t.true(preview.body.is_safe);
  t.false('extra' in (await columns(physical('pv'))));
  t.is((await history('pv')).count, 1);
  t.is((await onA('POST', `${T}pv/preview-changes/`, { new_schema: { fields: [] } })).status, 400);
  t.is((await onA('POST', `${T}pv/preview-changes/`, { schema: next })).status, 400, 'the body is {new_schema}');

  t.deepEqual((await onA('POST', `${T}pv/validate-schema/`, { schema: next })).body, {
    valid: true, errors: [], warnings: ["A rollback drops column 'extra' with the values written to it.", "The keyword search index covers the table's text fields: it is rebuilt (time grows with the rows)."],
  });
  const bad = await onA('POST', `${T}pv/validate-schema/`, { schema: { fields: [{ name: 'x', type: 'nope' }] } });
  t.is(bad.status, 200);
  t.false(bad.body.valid);
  t.regex(bad.body.errors[0], /invalid type "nope"/);
  t.is((await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'later', json_schema: { fields: [{ name: 'id', type: 'integer' }], primaryKey: ['id'] } })).status, 201);
  const withFk = withFields([...ITEMS.fields, { name: 'later_id', type: 'integer' }]);
  const fkSchema = { ...withFk, foreignKeys: [{ fields: ['later_id'], reference: { resource: 'later', fields: ['id'] } }] };
  const v = await onA('POST', `${T}pv/validate-schema/`, { schema: fkSchema });
  t.false(v.body.valid);
  t.regex(v.body.errors.join(' '), /referenced table "later" is not materialized/);
  const migrate = await onA('PATCH', `${T}pv/`, { json_schema: fkSchema });
  t.is(migrate.status, 400);
  t.regex(migrate.body.json_schema.join(' '), /"later" is not materialized; materialize it first/);
  // A table not materialized: validate warns, preview says there is nothing to migrate.
  const draft = await onA('POST', '/api/apps/crm/datatables/later/validate-schema/', { schema: { fields: [{ name: 'id', type: 'integer' }, { name: 'p', type: 'integer' }], primaryKey: ['id'], foreignKeys: [{ fields: ['p'], reference: { resource: 'pv', fields: ['id'] } }] } });
  t.deepEqual(draft.body, { valid: true, errors: [], warnings: [] });
  t.like((await onA('POST', '/api/apps/crm/datatables/later/preview-changes/', { new_schema: next })).body, { operations: [], is_safe: true });
});

test.serial('jsonb and docstore tables: keys renamed, filled, dropped and converted in every document; narrowing checked against the documents', async (t) => {
  const EVENTS = { fields: [{ name: 'id', type: 'integer' }, { name: 'kind', type: 'string' }, { name: 'n', type: 'integer' }, { name: 'gone', type: 'string' }], primaryKey: ['id'] };
  for (const [ds, table] of [['events', 'ev'], ['docs', 'dc']] as const) {
    const fields = ds === 'docs' ? EVENTS.fields.filter((f) => f.name !== 'id') : EVENTS.fields;
    const doc = ds === 'docs' ? { fields } : EVENTS;
    const rows = ds === 'docs' ? [{ kind: 'a', n: 1, gone: 'g' }, { kind: 'b', n: 2 }] : [{ id: 1, kind: 'a', n: 1, gone: 'g' }, { id: 2, kind: 'b', n: 2 }];
    await freshTable(table, doc, ds, rows);
    const next = {
      ...doc,
      fields: [
        ...(ds === 'docs' ? [] : [{ name: 'id', type: 'integer' }]),
        { name: 'type', type: 'string', 'x-rename-from': 'kind' },
        { name: 'n', type: 'string' },
        { name: 'level', type: 'integer', default: 3 },
      ],
    };
    const res = await onA('PATCH', `${T}${table}/`, { json_schema: next });
    t.is(res.status, 200, res.text);
    const got = (await onA('GET', `${T}${table}/data/?_sort=n`)).body.data.map(({ id: _id, ...r }: any) => r);
    t.deepEqual(got, [{ type: 'a', n: '1', level: 3 }, { type: 'b', n: '2', level: 3 }], `${ds}: renamed, converted, filled, dropped`);
    const [op] = (await history(table)).results;
    t.deepEqual(op.migration_operations.map((o: any) => o.type), ['drop_key', 'rename_key', 'convert_values', 'fill_default'], ds);
    // Narrowing n back to an integer: unsafe, and refused by the flag; the history has no new entry.
    const narrow = await onA('PATCH', `${T}${table}/`, { json_schema: { ...next, fields: next.fields.map((f) => (f.name === 'n' ? { name: 'n', type: 'integer' } : f)) } });
    t.is(narrow.status, 400);
    t.deepEqual(narrow.body.unsafe_operations.map((o: any) => o.type), ['check_values']);
    // Rollback: the key gets its old name back; the dropped key's values are not restored.
    t.is((await onA('POST', `${T}${table}/rollback/`, { revision_id: op.revision_id })).status, 200);
    const back = (await onA('GET', `${T}${table}/data/?_sort=kind`)).body.data.map(({ id: _id, ...r }: any) => r);
    t.deepEqual(back.map((r: any) => r.kind), ['a', 'b'], ds);
    t.false(back.some((r: any) => 'gone' in r));
  }
  // With the flag, a narrowing that the documents do not fit fails and changes nothing.
  await sql(`UPDATE "${a.schema}".data_sources SET provider_config = '{"allow_data_loss": true}' WHERE slug = 'events'`);
  const toNumber = await onA('PATCH', `${T}ev/`, { json_schema: { ...EVENTS, fields: EVENTS.fields.map((f) => (f.name === 'kind' ? { name: 'kind', type: 'integer' } : f)) } });
  t.is(toNumber.status, 400);
  t.regex(toNumber.body.message, /Field 'kind': some documents hold values that are not of type integer/);
});

test.serial('hierarchy switched on by a migration gets its edges table (and traversal); switched off it is unsafe; both roll back', async (t) => {
  const plain = { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }], primaryKey: ['id'] };
  await freshTable('org', plain, 'main', [{ id: 1, name: 'boss' }, { id: 2, name: 'mid' }, { id: 3, name: 'dev' }]);
  const edgesTable = async () => (await sql('SELECT to_regclass(?) AS r', [`"${a.schema}"."${physical('org')}_edges"`]))[0].r;
  t.falsy(await edgesTable());
  const on = await onA('PATCH', `${T}org/`, { json_schema: { ...plain, hierarchy: true } });
  t.is(on.status, 200, on.text);
  t.truthy(await edgesTable());
  const [op] = (await history('org')).results;
  t.deepEqual(op.migration_operations, [{ type: 'add_edges_table', column: null }]);
  const linked = await onA('POST', `${T}org/edges/`, [{ from_id: 3, to_id: 2, type: 'reports_to' }, { from_id: 2, to_id: 1, type: 'reports_to' }]);
  t.is(linked.status, 201, linked.text);
  const up = await onA('GET', `${T}org/data/3/?include=ancestors`);
  t.is(up.status, 200, up.text);
  t.deepEqual(up.body.ancestors.map((r: any) => [r.id, r._depth]), [[2, 1], [1, 2]]);

  const off = await onA('PATCH', `${T}org/`, { json_schema: plain });
  t.is(off.status, 400);
  t.deepEqual(off.body.unsafe_operations.map((o: any) => o.type), ['drop_edges_table']);
  t.truthy(await edgesTable());
  // The rollback of the switch drops the edges table (and says so: its edges are gone).
  const back = await onA('POST', `${T}org/rollback/`, { revision_id: op.revision_id });
  t.is(back.status, 200, back.text);
  t.deepEqual(back.body.warnings, ['A rollback drops the edges table with its edges.']);
  t.deepEqual(back.body.data_loss, ['The edges table is dropped with its 2 edges.']);
  t.falsy(await edgesTable());
  t.is((await onA('GET', `${T}org/edges/`)).status, 400);
});

test.serial('deleting a table records DROP_TABLE after its other operations; the history stays in the site schema', async (t) => {
  await freshTable('doomed');
  t.is((await onA('PATCH', `${T}doomed/`, { json_schema: withFields([...ITEMS.fields, { name: 'x', type: 'integer' }]) })).status, 200);
  const [row] = await sql(`SELECT id FROM "${a.schema}".data_tables WHERE name = 'doomed'`);
  t.is((await onA('DELETE', `${T}doomed/`)).status, 200);
  const ops = await sql(`SELECT operation_type, status, executed_sql FROM "${a.schema}".schema_operations WHERE data_table_id = ? ORDER BY id`, [row.id]);
  t.deepEqual(ops.map((o: any) => [o.operation_type, o.status]), [['CREATE_TABLE', 'SUCCESS'], ['ALTER_TABLE', 'SUCCESS'], ['DROP_TABLE', 'SUCCESS']]);
  t.regex(ops[2].executed_sql[0].sql, /^DROP TABLE IF EXISTS/);
  t.is((await onA('GET', `${T}doomed/operation-history/`)).status, 404);
});

test.serial('permissions: a site user without update may read the history but not preview, migrate or roll back', async (t) => {
  const pleb = on(a, 'pleb');
  t.is((await pleb('GET', `${T}items/operation-history/`)).status, 200);
  t.is((await pleb('POST', `${T}items/preview-changes/`, { new_schema: ITEMS })).status, 403);
  t.is((await pleb('PATCH', `${T}items/`, { json_schema: ITEMS })).status, 403);
  const [op] = (await history('items')).results;
  t.is((await pleb('POST', `${T}items/rollback/`, { revision_id: op.revision_id })).status, 403);
  t.is((await pleb('POST', `${T}items/rollback/`, { revision_id: op.revision_id, dry_run: true })).status, 403);
  t.is((await history('items')).results[0].status, 'SUCCESS');
});

test.serial('tenant isolation: another site\'s administrator or token reaches no migration route of this site', async (t) => {
  const [op] = (await history('items')).results;
  const onB = on(b, 'adminB');
  for (const [method, suffix, body] of [
    ['GET', 'operation-history/', undefined], ['POST', 'preview-changes/', { new_schema: ITEMS }], ['POST', 'validate-schema/', { schema: ITEMS }],
    ['POST', 'rollback/', { revision_id: op.revision_id }], ['POST', 'rollback/', { revision_id: op.revision_id, dry_run: true }], ['PATCH', '', { json_schema: ITEMS }],
  ] as const) {
    t.is((await onB(method, `${T}items/${suffix}`, body)).status, 404, `${method} ${suffix} on site B`);
    const crossToken = await s.api(method, `${T}items/${suffix}`, { host: a.domain, token: tok.adminB, body });
    t.true([401, 403].includes(crossToken.status), `${method} ${suffix}: B's token on A: ${crossToken.status}`);
  }
  t.is((await history('items')).results[0].status, 'SUCCESS');
});
