// The change log's guarantee under concurrent writers (issue 35 #1): a reader gets every committed
// change exactly once, in position order, whatever order the writers commit in; a gap left by a
// transaction still in flight is waited for, one left by a rollback is passed; a writer that came
// after the gap does not hold the reader up. Updates carry the old row; a changed key is a delete
// and a create; a statement that changes no row logs nothing.
import test from 'ava';
import pg from 'pg';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite } from '../testing/sites.ts';
import { attachChangeLog, logBounds, pruneChangeLogs, readChanges, recordsSource, type ReadState } from './changelog.ts';
import type { TableView } from '../data/records/target.ts';
import { RECORD_CHANGES_CHUNK } from '../tenancy/migrations.ts';

/** The position of the change at index `i` of the log's entry `seq`. */
const at = (seq: number, i = 0) => seq * RECORD_CHANGES_CHUNK + i;

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
    await c1.query(`INSERT INTO ${table} VALUES (1, 'a')`); // entry 1, not committed
    await c2.query(`INSERT INTO ${table} VALUES (2, 'b'), (3, 'c')`); // entry 2, committed
    t.deepEqual(await read(), { keys: [], positions: [], waiting: true });
    await c1.query('COMMIT');
    t.deepEqual(await read(), { keys: ['create:1', 'create:2', 'create:3'], positions: [at(1), at(2), at(2, 1)], waiting: false });

    await c1.query('BEGIN');
    await c1.query(`INSERT INTO ${table} VALUES (4, 'c')`); // entry 3, will roll back
    await c2.query(`INSERT INTO ${table} VALUES (5, 'd')`); // entry 4
    t.true((await read()).waiting);
    // A writer that starts after the gap was seen holds the lock too: it must not hold the reader.
    await c3.query('BEGIN');
    await c3.query(`INSERT INTO ${table} VALUES (6, 'e')`); // entry 5, in flight
    await c1.query('ROLLBACK');
    t.deepEqual(await read(), { keys: ['create:5'], positions: [at(4)], waiting: false });
    await c3.query('COMMIT');
    t.deepEqual(await read(), { keys: ['create:6'], positions: [at(5)], waiting: false });
  } finally {
    for (const c of [c1, c2, c3]) await c.end();
  }
});

test.serial('updates carry the old row; a changed key is a delete and a create; a statement that changes nothing logs nothing; bounds and pruning follow', async (t) => {
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
      [at(1), 'create', null, { id: 1, v: 'a' }],
      [at(1, 1), 'create', null, { id: 2, v: 'b' }],
      [at(2), 'update', { id: 1, v: 'a' }, { id: 1, v: 'x' }],
      ...(all[3]!.op === 'create'
        ? [[at(3), 'create', null, { id: 3, v: 'b' }], [at(3, 1), 'delete', { id: 2, v: 'b' }, null]]
        : [[at(3), 'delete', { id: 2, v: 'b' }, null], [at(3, 1), 'create', null, { id: 3, v: 'b' }]]),
      [at(4), 'delete', { id: 1, v: 'x' }, null],
    ] as never,
  );
  t.deepEqual((await changes(at(1))).changes.map((c) => c.pos), [at(1, 1), at(2), at(3), at(3, 1), at(4)], 'a reader resumes inside an entry');
  t.deepEqual(await logBounds(em, site.schema, 't1'), { pruned: 0, last: at(4) });
  // Pruning takes whole entries, the oldest first, while the later ones hold the rows to keep.
  // (The other tests' sites are pruned too: the count is the database's.)
  t.true((await pruneChangeLogs(em, { retentionHours: 24, retentionRows: 3 })) >= 3);
  t.deepEqual((await changes(0)).changes.map((c) => c.pos), [at(3), at(3, 1), at(4)], 'entries 1 and 2 (three changes) went: entries 3 and 4 hold three');
  t.deepEqual(await logBounds(em, site.schema, 't1'), { pruned: at(2), last: at(4) });
  t.true((await pruneChangeLogs(em, { retentionHours: 24, retentionRows: 0 })) >= 3);
  t.deepEqual((await changes(0)).changes, []);
  t.deepEqual(await logBounds(em, site.schema, 't1'), { pruned: at(4), last: at(4) }, 'an empty log stands where its last pruned change was');
});

test.serial('a statement of more rows than an entry holds writes several entries, read back in order', async (t) => {
  const { em, table, changes } = await setup();
  const rows = RECORD_CHANGES_CHUNK * 2 + 5;
  await em.execute(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, ${rows}) g`);
  const seen: number[] = [];
  let from = 0;
  for (;;) {
    const { changes: batch } = await changes(from);
    if (!batch.length) break;
    seen.push(...batch.map((c) => c.record!.id as number));
    from = batch.at(-1)!.pos;
  }
  t.is(seen.length, rows);
  t.deepEqual([...seen].sort((a, b) => a - b), Array.from({ length: rows }, (_, i) => i + 1), 'every row once');
  t.is(from, at(3, 4), 'three entries, the last of five');
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
  t.deepEqual((await migrateTenantSchema(orm().em.fork(), site.schema)).applied, ['0016_record_changes', '0017_record_changes_entries']);
  await em.execute(`INSERT INTO ${q}.a_flat VALUES ('x')`);
  await em.execute(`UPDATE ${q}.a_flat SET code = 'y'`);
  await em.execute(`INSERT INTO ${q}.a_docs (data) VALUES ('{"n": 1}')`);
  const logged = await em.execute(`SELECT tbl, seq, n, record IS NOT NULL AS created, old IS NOT NULL AS removed FROM ${q}.record_changes ORDER BY tbl, seq`);
  // The changed key is a delete and a create: one entry of two changes.
  t.deepEqual(logged.map((r) => `${r.tbl} ${r.seq} ${r.n} ${r.created} ${r.removed}`), ['a_docs 1 1 true false', 'a_flat 1 1 true false', 'a_flat 2 2 true true']);
});

test.serial('migration 17 replaces the log of migration 16\'s first form: its positions count as pruned, the sequences go on', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  const q = `"${site.schema}"`;
  await em.execute(`CREATE TABLE ${q}.t1 (id integer PRIMARY KEY)`);
  await attachChangeLog(em, site.schema, 't1', ['id']);
  // The first form: a row per change, numbered by the table's sequence.
  await em.execute(`DROP TABLE ${q}.record_changes`);
  await em.execute(`ALTER TABLE ${q}.record_changes_tables DROP COLUMN pruned_to`);
  await em.execute(`CREATE TABLE ${q}.record_changes (tbl text NOT NULL, pos bigint NOT NULL, op text NOT NULL, record json, old json, actor uuid, at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (tbl, pos))`);
  await em.execute(`SELECT setval(?, 7)`, [`${q}.t1_changes`]);
  await em.execute(`INSERT INTO ${q}.record_changes (tbl, pos, op, record) VALUES ('t1', 7, 'create', '{"id": 1}')`);
  await em.execute('UPDATE public.tenant_schemas SET version = 16 WHERE schema_name = ?', [site.schema]);
  const { migrateTenantSchema } = await import('../tenancy/migrations.ts');
  t.deepEqual((await migrateTenantSchema(orm().em.fork(), site.schema)).applied, ['0017_record_changes_entries']);
  t.deepEqual(await logBounds(em, site.schema, 't1'), { pruned: 7, last: 7 });
  await em.execute(`INSERT INTO ${q}.t1 VALUES (2)`);
  t.deepEqual(await logBounds(em, site.schema, 't1'), { pruned: 7, last: at(8) }, 'the trigger writes entries, numbered after the old positions');
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
  t.deepEqual((await em.execute(`SELECT seq, record FROM "${renamed}".record_changes ORDER BY seq`)).map((r) => `${r.seq} ${JSON.stringify(r.record)}`), ['1 [{"id":1,"v":"a"}]', '2 [{"id":2,"v":"b"}]']);
  t.deepEqual(await em.execute(`SELECT * FROM "${site.schema}".record_changes`), [], 'nothing written under the old name');
  // A dropped table's function goes with its log.
  await em.execute(`DROP TABLE "${renamed}".t1`);
  await forgetChangeLog(em, renamed, 't1');
  t.deepEqual(await em.execute(`SELECT proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ? AND proname LIKE 't1%'`, [renamed]), []);
  t.deepEqual(await em.execute(`SELECT * FROM "${renamed}".record_changes_tables WHERE tbl = 't1'`), []);
});

test.serial('a table whose columns are named like the trigger\'s aliases and variables (n, o, c, at, log_who, log_at, log_from, log_n, tbl, pos, seq, chunk) is logged as any other', async (t) => {
  const em = orm().em.fork();
  const site = await createTestSite(em);
  const table = `"${site.schema}".odd`;
  await em.execute(`CREATE TABLE ${table} (n integer PRIMARY KEY, o text, c text, at text, log_who text, log_at text, log_from text, log_n text, tbl text, pos text, seq text, chunk text)`);
  await attachChangeLog(em, site.schema, 'odd', ['n']);
  await em.execute(`INSERT INTO ${table} VALUES (1, 'o', 'c', 'at', 'w', 'a', 'f', 'm', 't', 'p', 's', 'k')`);
  await em.execute(`UPDATE ${table} SET o = 'o2'`);
  await em.execute(`DELETE FROM ${table}`);
  const logged = await em.execute(`SELECT seq, record, old FROM "${site.schema}".record_changes WHERE tbl = 'odd' ORDER BY seq`);
  const row = { n: 1, o: 'o', c: 'c', at: 'at', log_who: 'w', log_at: 'a', log_from: 'f', log_n: 'm', tbl: 't', pos: 'p', seq: 's', chunk: 'k' };
  t.deepEqual(logged.map((r) => [Number(r.seq), r.record, r.old]), [
    [1, [row], null],
    [2, [{ ...row, o: 'o2' }], [row]],
    [3, null, [{ ...row, o: 'o2' }]],
  ]);
});
