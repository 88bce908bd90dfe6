// The change log's guarantee under concurrent writers (issue 35 #1): a reader gets every committed
// change exactly once, in position order, whatever order the writers commit in; a gap left by a
// transaction still in flight is waited for, one left by a rollback is passed; a writer that came
// after the gap does not hold the reader up. Updates carry the old row; a changed key is a delete
// and a create; a statement that changes no row logs nothing.
import test from 'ava';
import pg from 'pg';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite } from '../testing/sites.ts';
import { attachChangeLog, logBounds, readChanges, recordsSource, type ReadState } from './changelog.ts';
import type { TableView } from '../data/records/target.ts';

const orm = platformDatabase(test);

async function setup() {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  const table = `"${site.schema}".t1`;
  await em.execute(`CREATE TABLE ${table} (id integer PRIMARY KEY, v text)`);
  await attachChangeLog(em, site.schema, 't1', ['id']);
  const [{ oid }] = await em.execute(`SELECT to_regclass(?)::oid AS oid`, [table]);
  const view = {
    name: 't1',
    provider: 'flat_table',
    table,
    schema: { fields: [{ name: 'id', type: 'integer' }, { name: 'v', type: 'string' }], primaryKey: ['id'] },
    pk: ['id'],
    columns: new Map([['id', { column: 'id', pgType: 'integer' }], ['v', { column: 'v', pgType: 'text' }]]),
    recordSql: (alias: string) => `to_jsonb(${alias}.*)`,
  } as unknown as TableView;
  const client = async () => {
    const c = new pg.Client({ connectionString: orm().config.get('clientUrl') });
    await c.connect();
    return c;
  };
  const state: ReadState = { pos: 0 };
  const read = async () => {
    const { changes, waiting } = await readChanges(em, site.schema, 't1', Number(oid), recordsSource(view), state);
    return { keys: changes.map((c) => `${c.op}:${(c.record ?? c.old)!.id}`), positions: changes.map((c) => c.pos), waiting };
  };
  return { em, site, table, client, read, state, changes: (from: number) => readChanges(em, site.schema, 't1', Number(oid), recordsSource(view), { pos: from }) };
}

test.serial('a gap a writer in flight will fill is waited for; a rollback\'s is passed; a later writer does not hold the reader', async (t) => {
  const { table, client, read } = await setup();
  const [c1, c2, c3] = [await client(), await client(), await client()];
  try {
    await c1.query('BEGIN');
    await c1.query(`INSERT INTO ${table} VALUES (1, 'a')`); // position 1, not committed
    await c2.query(`INSERT INTO ${table} VALUES (2, 'b')`); // position 2, committed
    t.deepEqual(await read(), { keys: [], positions: [], waiting: true });
    await c1.query('COMMIT');
    t.deepEqual(await read(), { keys: ['create:1', 'create:2'], positions: [1, 2], waiting: false });

    await c1.query('BEGIN');
    await c1.query(`INSERT INTO ${table} VALUES (3, 'c')`); // position 3, will roll back
    await c2.query(`INSERT INTO ${table} VALUES (4, 'd')`); // position 4
    t.true((await read()).waiting);
    // A writer that starts after the gap was seen holds the lock too: it must not hold the reader.
    await c3.query('BEGIN');
    await c3.query(`INSERT INTO ${table} VALUES (5, 'e')`); // position 5, in flight
    await c1.query('ROLLBACK');
    t.deepEqual(await read(), { keys: ['create:4'], positions: [4], waiting: false });
    await c3.query('COMMIT');
    t.deepEqual(await read(), { keys: ['create:5'], positions: [5], waiting: false });
  } finally {
    for (const c of [c1, c2, c3]) await c.end();
  }
});

test.serial('updates carry the old row; a changed key is a delete and a create; a statement that changes nothing logs nothing; bounds follow', async (t) => {
  const { em, site, table, changes } = await setup();
  await em.execute(`INSERT INTO ${table} VALUES (1, 'a'), (2, 'b')`);
  await em.execute(`UPDATE ${table} SET v = 'x' WHERE id = 1`);
  await em.execute(`UPDATE ${table} SET id = 3 WHERE id = 2`);
  await em.execute(`UPDATE ${table} SET v = 'y' WHERE id = 99`);
  await em.execute(`DELETE FROM ${table} WHERE id = 1`);
  const { changes: all } = await changes(0);
  t.deepEqual(
    all.map((c) => [c.pos, c.op, c.old, c.record]),
    [
      [1, 'create', null, { id: 1, v: 'a' }],
      [2, 'create', null, { id: 2, v: 'b' }],
      [3, 'update', { id: 1, v: 'a' }, { id: 1, v: 'x' }],
      ...(all[3]!.op === 'create'
        ? [[4, 'create', null, { id: 3, v: 'b' }], [5, 'delete', { id: 2, v: 'b' }, null]]
        : [[4, 'delete', { id: 2, v: 'b' }, null], [5, 'create', null, { id: 3, v: 'b' }]]),
      [6, 'delete', { id: 1, v: 'x' }, null],
    ] as never,
  );
  t.deepEqual(await logBounds(em, site.schema, 't1'), { first: 1, last: 6 });
  await em.execute(`DELETE FROM "${site.schema}".record_changes`);
  t.deepEqual(await logBounds(em, site.schema, 't1'), { first: null, last: 6 }, 'an empty log stands where the sequence does');
});

test.serial('migration 16 logs the tables materialized before it: flat tables by their declared key, the others by id', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  const q = `"${site.schema}"`;
  const [app] = await em.execute(`INSERT INTO ${q}.apps (name, slug) VALUES ('A', 'a') RETURNING id`);
  const tables: [string, string, unknown][] = [['flat_table', 'a_flat', { fields: [{ name: 'code', type: 'string' }], primaryKey: 'code' }], ['jsonb', 'a_docs', { fields: [] }]];
  for (const [provider, physical, schema] of tables) {
    const [ds] = await em.execute(`INSERT INTO ${q}.data_sources (app_id, name, slug, provider_type) VALUES (?, ?, ?, ?) RETURNING id`, [app.id, provider, provider, provider]);
    await em.execute(
      `INSERT INTO ${q}.data_tables (app_id, data_source_id, name, json_schema, schema_hash, physical_table_name, is_materialized) VALUES (?, ?, ?, ?::jsonb, repeat('0', 64), ?, true)`,
      [app.id, ds.id, physical, JSON.stringify(schema), physical],
    );
  }
  await em.execute(`CREATE TABLE ${q}.a_flat (code text PRIMARY KEY)`);
  await em.execute(`CREATE TABLE ${q}.a_docs (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), data jsonb NOT NULL)`);
  await em.execute(`DROP TABLE ${q}.record_changes`);
  await em.execute('UPDATE public.tenant_schemas SET version = 15 WHERE schema_name = ?', [site.schema]);
  const { migrateTenantSchema } = await import('../tenancy/migrations.ts');
  t.deepEqual((await migrateTenantSchema(orm().em.fork(), site.schema)).applied, ['0016_record_changes']);
  await em.execute(`INSERT INTO ${q}.a_flat VALUES ('x')`);
  await em.execute(`UPDATE ${q}.a_flat SET code = 'y'`);
  await em.execute(`INSERT INTO ${q}.a_docs (data) VALUES ('{"n": 1}')`);
  const logged = await em.execute(`SELECT tbl, pos, op FROM ${q}.record_changes ORDER BY tbl, pos`);
  // The changed key is a delete and a create, in either order: positions 2 and 3.
  t.deepEqual(logged.map((r) => `${r.tbl} ${r.pos}`), ['a_docs 1', 'a_flat 1', 'a_flat 2', 'a_flat 3']);
  t.deepEqual(logged.map((r) => `${r.tbl} ${r.op}`).sort(), ['a_docs create', 'a_flat create', 'a_flat create', 'a_flat delete']);
});

test.serial('the trigger functions name their schema: after a rename (a restore under another name) reattach writes them again, and the log is the renamed schema\'s', async (t) => {
  const { em, site, table } = await setup();
  const { forgetChangeLog } = await import('./changelog.ts');
  await em.execute(`INSERT INTO ${table} VALUES (1, 'a')`);
  const renamed = `${site.schema}_r`;
  await em.execute(`ALTER SCHEMA "${site.schema}" RENAME TO "${renamed}"`);
  // A schema of the old name again (as when the original site is restored beside itself).
  await em.execute(`CREATE SCHEMA "${site.schema}"`);
  await em.execute(`CREATE TABLE "${site.schema}".record_changes (LIKE "${renamed}".record_changes INCLUDING ALL)`);
  await em.execute(`SELECT "${renamed}".record_changes_reattach(?)`, [renamed]);
  await em.execute(`INSERT INTO "${renamed}".t1 VALUES (2, 'b')`);
  t.deepEqual((await em.execute(`SELECT pos, op FROM "${renamed}".record_changes ORDER BY pos`)).map((r) => `${r.pos} ${r.op}`), ['1 create', '2 create']);
  t.deepEqual(await em.execute(`SELECT * FROM "${site.schema}".record_changes`), [], 'nothing written under the old name');
  // A dropped table's function goes with its log.
  await em.execute(`DROP TABLE "${renamed}".t1`);
  await forgetChangeLog(em, renamed, 't1');
  t.deepEqual(await em.execute(`SELECT proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ? AND proname LIKE 't1%'`, [renamed]), []);
  t.deepEqual(await em.execute(`SELECT * FROM "${renamed}".record_changes_tables WHERE tbl = 't1'`), []);
});

test.serial('a table whose columns are named like the trigger\'s aliases and variables (n, o, c, at, log_who, log_at, tbl, pos) is logged as any other', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  const table = `"${site.schema}".odd`;
  await em.execute(`CREATE TABLE ${table} (n integer PRIMARY KEY, o text, c text, at text, log_who text, log_at text, tbl text, pos text)`);
  await attachChangeLog(em, site.schema, 'odd', ['n']);
  await em.execute(`INSERT INTO ${table} VALUES (1, 'o', 'c', 'at', 'w', 'a', 't', 'p')`);
  await em.execute(`UPDATE ${table} SET o = 'o2'`);
  await em.execute(`DELETE FROM ${table}`);
  const logged = await em.execute(`SELECT pos, op, record, old FROM "${site.schema}".record_changes WHERE tbl = 'odd' ORDER BY pos`);
  const row = { n: 1, o: 'o', c: 'c', at: 'at', log_who: 'w', log_at: 'a', tbl: 't', pos: 'p' };
  t.deepEqual(logged.map((r) => [Number(r.pos), r.op, r.record, r.old]), [
    [1, 'create', row, null],
    [2, 'update', { ...row, o: 'o2' }, row],
    [3, 'delete', null, { ...row, o: 'o2' }],
  ]);
});
