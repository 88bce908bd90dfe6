// DDL against real PostgreSQL: all three providers, the type mapping, constraints, foreign
// keys with each ON DELETE action, indexes (method, where, unique, expression), and literals
// that stay literals.
import { readFileSync } from 'node:fs';
import test from 'ava';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../testing/database.ts';
import { createTableDdl, physicalTableName, quoteLiteral } from './ddl.ts';
import { csvRecords } from '../testing/fixtures-csv.ts';
import { validateTableSchema, type TableSchema } from './table-schema.ts';

const fixture = (name: string): TableSchema => JSON.parse(readFileSync(new URL(`../../fixtures/schemas/${name}`, import.meta.url), 'utf8'));
let db: TestDatabase;
let client: pg.Client;
const S = 'site_ddl';

test.before(async () => {
  db = await createTestDatabase('ddl');
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query(`CREATE SCHEMA ${S}`);
});
test.after.always(async () => {
  await client?.end();
  await db?.drop();
});

async function create(doc: TableSchema, table: string, provider: 'flat_table' | 'jsonb' | 'docstore' = 'flat_table') {
  for (const sql of createTableDdl(doc, { schema: S, table, provider })) await client.query(sql);
}
const columns = async (table: string) =>
  Object.fromEntries((await client.query<{ column_name: string; data_type: string; is_nullable: string; column_default: string }>(
    `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
    [S, table],
  )).rows.map((r) => [r.column_name, r]));
const indexes = async (table: string) =>
  Object.fromEntries((await client.query('SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2', [S, table])).rows.map((r) => [r.indexname, r.indexdef as string]));
const constraints = async (table: string) =>
  (await client.query(
    `SELECT c.conname, c.contype, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = $1 AND t.relname = $2`,
    [S, table],
  )).rows as { conname: string; contype: string; def: string }[];

test('quoteLiteral doubles quotes and refuses NUL; physical names are cut to 63 with a suffix', (t) => {
  t.is(quoteLiteral("it's"), "'it''s'");
  t.throws(() => quoteLiteral('a\0b'));
  t.is(physicalTableName(7, 'contacts'), 'a7_contacts');
  const long = 'x'.repeat(63);
  t.is(physicalTableName(12, long).length, 63);
  t.is(physicalTableName(12, long, 2), `a12_${'x'.repeat(57)}_2`);
});

test('flat_table: fixtures companies → contacts → orders with types, checks, keys and indexes', async (t) => {
  await create(fixture('companies.json'), 'a1_companies');
  for (const sql of createTableDdl(fixture('contacts.json'), { schema: S, table: 'a1_contacts', provider: 'flat_table', resolveTable: (r) => `a1_${r}` })) await client.query(sql);
  for (const sql of createTableDdl(fixture('orders.json'), { schema: S, table: 'a1_orders', provider: 'flat_table', resolveTable: (r) => `a1_${r}` })) await client.query(sql);

  const cols = await columns('a1_orders');
  const types = Object.fromEntries(Object.entries(cols).map(([k, v]) => [k, v.data_type]));
  t.like(types, {
    order_number: 'text', line_no: 'bigint', unit_price: 'double precision', ordered_at: 'timestamp with time zone', ship_by: 'date',
    ship_window: 'time without time zone', billing_period: 'text', handling: 'interval', delivery_point: 'jsonb', delivery_area: 'jsonb',
    external_ref: 'uuid', meta: 'jsonb', quantity: 'bigint', status: 'text',
  });
  t.is(cols.order_number.is_nullable, 'NO', 'primary key columns are NOT NULL');
  t.is(cols.ship_by.is_nullable, 'YES');
  t.regex(cols.status.column_default, /'pending'::text/);
  const ctypes = (await columns('a1_companies'));
  t.is(ctypes.founded.data_type, 'integer');
  t.is(ctypes.is_public.data_type, 'boolean');
  t.is(ctypes.is_public.column_default, 'false');

  const pk = (await constraints('a1_orders')).find((c) => c.contype === 'p')!;
  t.is(pk.def, 'PRIMARY KEY (order_number, line_no)');
  const fks = (await constraints('a1_contacts')).filter((c) => c.contype === 'f');
  t.is(fks.length, 1);
  t.regex(fks[0]!.def, /FOREIGN KEY \(company_id\) REFERENCES site_ddl\.a1_companies\(id\) ON DELETE SET NULL/);
  t.regex((await constraints('a1_orders')).find((c) => c.contype === 'f')!.def, /ON DELETE CASCADE/);
  t.true((await constraints('a1_contacts')).some((c) => c.contype === 'u'), 'email UNIQUE');

  const ix = await indexes('a1_contacts');
  t.regex(ix.a1_contacts_email_lower!, /CREATE UNIQUE INDEX a1_contacts_email_lower ON site_ddl\.a1_contacts USING btree \(lower\(email\)\)/);
  t.regex(ix.a1_contacts_company!, /USING btree \(company_id, id\) WHERE \(\(company_id IS NOT NULL\) AND \(status <> 'inactive'::text\)\)/);
  t.regex(ix.a1_contacts_tags_gin!, /USING gin \(tags\)/);
  t.regex((await indexes('a1_companies')).a1_companies_industry!, /USING hash \(industry\)/);
  t.regex((await indexes('a1_orders')).a1_orders_ordered_at_brin!, /USING brin \(ordered_at\)/);
  const comment = await client.query(`SELECT obj_description(to_regclass('${S}.a1_companies_name_lower'), 'pg_class') AS c`);
  t.is(comment.rows[0].c, 'Case-insensitive name lookups');

  // The constraints hold: CHECKs, the yearmonth pattern, enum, SET NULL and CASCADE.
  await client.query(`INSERT INTO ${S}.a1_companies (id, name, domain) VALUES (1, 'Acme', 'acme.example')`);
  await t.throwsAsync(client.query(`INSERT INTO ${S}.a1_companies (id, name, country) VALUES (2, 'X', 'usa')`), { message: /check constraint/ });
  await t.throwsAsync(client.query(`INSERT INTO ${S}.a1_companies (id, name, industry) VALUES (2, 'X', 'mining')`), { message: /check constraint/ });
  await t.throwsAsync(client.query(`INSERT INTO ${S}.a1_companies (id, name, employees) VALUES (2, 'X', -1)`), { message: /check constraint/ });
  await client.query(`INSERT INTO ${S}.a1_contacts (id, company_id, first_name, last_name, email) VALUES (1, 1, 'Ada', 'L', 'ada@x.example')`);
  await client.query(`INSERT INTO ${S}.a1_orders (order_number, line_no, contact_id, sku, ordered_at, billing_period) VALUES ('ORD-000001', 1, 1, 'SKU1', now(), '2026-11')`);
  await t.throwsAsync(client.query(`INSERT INTO ${S}.a1_orders (order_number, line_no, contact_id, sku, ordered_at, billing_period) VALUES ('ORD-000002', 1, 1, 'SKU1', now(), '2026-13')`), { message: /check constraint/ });
  await client.query(`DELETE FROM ${S}.a1_companies WHERE id = 1`);
  t.is((await client.query(`SELECT company_id FROM ${S}.a1_contacts WHERE id = 1`)).rows[0].company_id, null, 'SET NULL');
  await client.query(`DELETE FROM ${S}.a1_contacts WHERE id = 1`);
  t.is((await client.query(`SELECT count(*)::int AS n FROM ${S}.a1_orders`)).rows[0].n, 0, 'CASCADE');
});

test('every ON DELETE action, self references and the generated uuid key', async (t) => {
  await create({ fields: [{ name: 'code', type: 'string' }], primaryKey: ['code'] }, 'parents');
  const actions = ['RESTRICT', 'CASCADE', 'SET NULL', 'SET DEFAULT', 'NO ACTION'] as const;
  for (const [i, onDelete] of actions.entries()) {
    const doc: TableSchema = {
      fields: [{ name: 'parent', type: 'string', ...(onDelete === 'SET DEFAULT' ? { default: 'none' } : {}) }, { name: 'up', type: 'string', format: 'uuid' }],
      foreignKeys: [
        { fields: ['parent'], reference: { resource: 'parents', fields: ['code'] }, 'x-actions': { onDelete } },
        { fields: ['up'], reference: { resource: '', fields: ['id'] } },
      ],
    };
    t.deepEqual(validateTableSchema(doc, new Map([['parents', ['code']]]), `child${i}`), []);
    await create(doc, `child${i}`);
    const fk = (await constraints(`child${i}`)).filter((c) => c.contype === 'f').map((c) => c.def);
    t.true(fk.some((d) => d.includes(`REFERENCES site_ddl.parents(code)${onDelete === 'NO ACTION' ? '' : ` ON DELETE ${onDelete}`}`)), `${onDelete}: ${fk.join(' | ')}`);
    t.true(fk.some((d) => d.includes(`REFERENCES site_ddl.child${i}(id)`)), 'self reference');
  }
  const cols = await columns('child0');
  t.is(cols.id.data_type, 'uuid');
  t.regex(cols.id.column_default, /gen_random_uuid/);
});

test('jsonb and docstore providers', async (t) => {
  await create(fixture('events.jsonb.json'), 'a1_events', 'jsonb');
  const ev = await columns('a1_events');
  t.deepEqual(Object.keys(ev).sort(), ['created_at', 'data', 'id', 'updated_at']);
  t.is(ev.data.data_type, 'jsonb');
  t.is(ev.data.is_nullable, 'NO');
  t.is(ev.id.data_type, 'uuid');
  t.regex(Object.values(await indexes('a1_events')).join('\n'), /USING gin \(data\)/);

  await create({ fields: [{ name: 'sku', type: 'string' }], primaryKey: 'sku' }, 'a1_keyed', 'jsonb');
  t.is((await columns('a1_keyed')).id.data_type, 'text', 'the id takes the single primary key field\'s type');

  await create(fixture('notes.docstore.json'), 'a1_notes', 'docstore');
  const notes = await columns('a1_notes');
  t.deepEqual(Object.keys(notes).sort(), ['created_at', 'doc', 'id', 'updated_at']);
  t.regex(Object.values(await indexes('a1_notes')).join('\n'), /USING gin \(doc jsonb_path_ops\)/);
});

test('defaults, patterns and enums carrying SQL stay literals', async (t) => {
  const evil = "x'); DROP TABLE site_ddl.parents; --";
  const doc: TableSchema = {
    fields: [
      { name: 'a', type: 'string', default: evil, constraints: { pattern: "[a-z']*|.*DROP TABLE.*", enum: [evil, 'ok'] } },
      { name: 'b', type: 'object', default: { k: "it's" } },
      { name: 'c', type: 'integer', default: 5 },
    ],
  };
  t.deepEqual(validateTableSchema(doc), []);
  await create(doc, 'evil');
  t.truthy((await client.query(`SELECT to_regclass('site_ddl.parents') AS r`)).rows[0].r, 'nothing dropped');
  await client.query(`INSERT INTO ${S}.evil (c) VALUES (1)`);
  const row = (await client.query(`SELECT a, b FROM ${S}.evil`)).rows[0];
  t.is(row.a, evil);
  t.deepEqual(row.b, { k: "it's" });
});

test('the CSV fixtures load into their materialized tables', async (t) => {
  const opts = { schema: S, provider: 'flat_table' as const, resolveTable: (r: string) => `csv_${r}` };
  for (const [name, schema] of [['companies', 'companies.json'], ['contacts', 'contacts.json']] as const) {
    for (const statement of createTableDdl(fixture(schema), { ...opts, table: `csv_${name}` })) await client.query(statement);
    const rows = csvRecords(new URL(`../../fixtures/csv/${name}.csv`, import.meta.url), fixture(schema));
    const res = await client.query(`INSERT INTO ${S}.csv_${name} SELECT * FROM json_populate_recordset(null::${S}.csv_${name}, $1::json)`, [JSON.stringify(rows)]);
    t.is(res.rowCount, rows.length, name);
  }
});
