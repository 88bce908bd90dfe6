// Data tables over HTTP: create with Table Schema validation (all problems, field-keyed),
// injection attempts refused with nothing created, materialization for the three providers
// (FK order, twice → 400), schema changes, validate_data, delete (drops; refused while
// referenced), permissions, isolation between sites, import-reference rules.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { FIELD_TYPES } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const appIds: Record<string, number> = {};
const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../../fixtures/schemas/${name}`, import.meta.url), 'utf8'));

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

/** An app with data sources, straight in SQL (the apps API is another feature). */
async function seedApp(site: TestSite, slug: string, sources: [string, string][]): Promise<number> {
  const [app] = await sql(`INSERT INTO "${site.schema}".apps (name, slug) VALUES (?, ?) RETURNING id`, [`App ${slug}`, slug]);
  await sql(`INSERT INTO "${site.schema}".app_settings (app_id, display_name) VALUES (?, ?)`, [app.id, `App ${slug}`]);
  for (const [ds, provider] of sources) {
    await sql(`INSERT INTO "${site.schema}".data_sources (app_id, name, slug, provider_type) VALUES (?, ?, ?, ?)`, [app.id, ds, ds, provider]);
  }
  return app.id;
}
const onA = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const physical = async (site: TestSite, table: string) => (await sql('SELECT to_regclass(?) AS r', [`"${site.schema}"."${table}"`]))[0].r;
const tableCount = async () => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}".data_tables`))[0].n);

const CRM = '/api/apps/crm/datasources/main/datatables/';

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  appIds.crm = await seedApp(a, 'crm', [['main', 'flat_table'], ['events', 'jsonb'], ['docs', 'docstore']]);
  appIds.reports = await seedApp(a, 'reports', [['refs', 'flat_table']]);
  await seedApp(b, 'crm', [['main', 'flat_table']]);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('invalid schemas: 400 VALIDATION_ERROR with every message under errors.json_schema; nothing created', async (t) => {
  const bad = await onA('POST', CRM, { name: 'people', json_schema: { fields: [{ name: 'age', type: 'strnig' }, { name: 'x', type: 'string', format: 'mail' }] } });
  t.is(bad.status, 400);
  t.like(bad.body, { status: 'error', code: 'VALIDATION_ERROR' });
  t.is(bad.body.errors.json_schema.length, 2);
  t.true(bad.body.errors.json_schema[0].includes(`valid types are ${FIELD_TYPES.join(', ')}`));
  t.deepEqual(bad.body.json_schema, bad.body.errors.json_schema, 'the spec\'s {json_schema: [messages]} beside the envelope');
  const injections: [string, unknown][] = [
    ['people; DROP TABLE x', { fields: [{ name: 'a', type: 'string' }] }],
    ['people', { fields: [{ name: 'a"; DROP TABLE apps; --', type: 'string' }] }],
    ['people', { fields: [{ name: 'a', type: 'string' }], indexes: [{ name: 'i', expression: 'a); DROP TABLE apps; --' }] }],
    ['people', { fields: [{ name: 'a', type: 'string' }], indexes: [{ name: 'i', fields: ['a'], where: 'pg_sleep(5) IS NULL' }] }],
    ['people', { fields: [{ name: 'a', type: 'string', default: "x\u0000'; DROP TABLE apps" }] }],
    ['people', { fields: [{ name: 'a', type: 'string', constraints: { pattern: '(unclosed' } }] }],
    ['people', { fields: [{ name: 'a', type: 'string' }], indexes: [{ name: 'i; DROP', fields: ['a'] }] }],
  ];
  for (const [name, json_schema] of injections) {
    const res = await onA('POST', CRM, { name, json_schema });
    t.is(res.status, 400, JSON.stringify(json_schema));
    t.truthy(res.body.errors.name ?? res.body.errors.json_schema);
  }
  t.is(await tableCount(), 0);
  t.truthy(await physical(a, 'apps'));
});

test.serial('a table cannot be named stats (the fixed route /datatables/stats/ would hide it)', async (t) => {
  const res = await onA('POST', CRM, { name: 'stats', json_schema: { fields: [{ name: 'a', type: 'string' }] } });
  t.is(res.status, 400);
  t.regex(res.body.errors.name[0], /reserved/);
  const ref = await onA('POST', '/api/apps/reports/datatables/import-reference/', { source_app_slug: 'crm', source_table_name: 'companies', reference_name: 'stats' });
  t.is(ref.status, 400);
  t.regex(ref.body.errors.reference_name[0], /reserved/);
  t.is(await tableCount(), 0);
});

test.serial('create, read, list, schema; materialize in FK order (twice → 400) with the physical tables in place', async (t) => {
  const companies = await onA('POST', CRM, { name: 'companies', description: 'Firms', json_schema: fixture('companies.json') });
  t.is(companies.status, 201, companies.text);
  t.like(companies.body, {
    status: 'success',
    data: {
      name: 'companies', description: 'Firms', datasource_slug: 'main', app_slug: 'crm', provider_type: 'flat_table', schema_format: 'frictionless',
      physical_table_name: `a${appIds.crm}_companies`, is_materialized: false, is_active: true, is_reference: false, source_info: null, primary_key: ['id'], field_count: 12,
    },
  });
  t.regex(companies.body.data.schema_hash, /^[0-9a-f]{64}$/);
  t.is((await onA('POST', CRM, { name: 'companies', json_schema: fixture('companies.json') })).status, 400, 'name unique in the app');
  const contacts = await onA('POST', CRM, { name: 'contacts', json_schema: fixture('contacts.json') });
  t.is(contacts.status, 201, contacts.text);
  t.is((await onA('POST', CRM, { name: 'orders', json_schema: fixture('orders.json') })).status, 201);
  const orphan = await onA('POST', CRM, { name: 'orphans', json_schema: { fields: [{ name: 'c', type: 'integer' }], foreignKeys: [{ fields: ['c'], reference: { resource: 'ghosts', fields: ['id'] } }] } });
  t.is(orphan.status, 400);
  t.regex(orphan.body.errors.json_schema[0], /'ghosts' is not a table of this app/);

  const early = await onA('POST', `${CRM}contacts/materialize/`);
  t.is(early.status, 400);
  t.regex(early.body.errors.json_schema[0], /foreignKeys\[0\] \(company_id → companies\): the referenced table "companies" is not materialized/);
  const m = await onA('POST', '/api/apps/crm/datatables/companies/materialize/');
  t.is(m.status, 200, m.text);
  t.like(m.body, { status: 'success', message: 'Data table materialized.', data: { is_materialized: true } });
  t.is((await onA('POST', `${CRM}companies/materialize/`)).status, 400, 'twice');
  t.is((await onA('POST', `${CRM}contacts/materialize/`)).status, 200);
  t.is((await onA('POST', `${CRM}orders/materialize/`)).status, 200);
  t.truthy(await physical(a, `a${appIds.crm}_orders`));
  const fk = await sql(
    `SELECT pg_get_constraintdef(c.oid) AS def FROM pg_constraint c WHERE c.conrelid = to_regclass(?) AND c.contype = 'f'`,
    [`"${a.schema}".a${appIds.crm}_contacts`],
  );
  t.regex(fk[0].def, new RegExp(`REFERENCES ${a.schema}\\.a${appIds.crm}_companies\\(id\\) ON DELETE SET NULL`));

  t.like((await onA('GET', `${CRM}contacts/`, undefined, 'pleb')).body, { name: 'contacts', is_materialized: true, field_names: fixture('contacts.json').fields.map((f: { name: string }) => f.name) });
  const sch = await onA('GET', '/api/apps/crm/datatables/orders/schema/');
  t.like(sch.body, { name: 'orders', field_count: 16, schema: { primaryKey: ['order_number', 'line_no'] } });
  const list = await onA('GET', CRM);
  t.is(list.body.count, 3);
  t.deepEqual(Object.keys(list.body.results[0]).sort(), ['app_name', 'app_slug', 'created_at', 'datasource_name', 'datasource_slug', 'field_count', 'id', 'is_active', 'is_materialized', 'name', 'physical_table_name', 'updated_at']);
  t.is((await onA('GET', '/api/apps/crm/datasources/main/tables/')).body.count, 3);
  t.is((await onA('GET', '/api/apps/crm/datatables/?datasource=main&is_materialized=true')).body.count, 3);
  t.is((await onA('GET', '/api/apps/crm/datatables/?datasource=events')).body.count, 0);
  t.is((await onA('GET', '/api/apps/crm/datasources/nope/datatables/companies/')).status, 404);
  t.is((await onA('GET', '/api/apps/nope/datatables/companies/')).status, 404);
  await sql(`UPDATE "${a.schema}".apps SET is_active = false WHERE slug = 'crm'`);
  t.is((await onA('GET', '/api/apps/crm/datatables/companies/')).status, 404, 'a soft-deleted app hides its tables');
  await sql(`UPDATE "${a.schema}".apps SET is_active = true WHERE slug = 'crm'`);
});

test.serial('jsonb and docstore sources materialize their own layouts', async (t) => {
  t.is((await onA('POST', '/api/apps/crm/datasources/events/datatables/', { name: 'events', json_schema: fixture('events.jsonb.json') })).status, 201);
  t.is((await onA('POST', '/api/apps/crm/datasources/docs/datatables/', { name: 'notes', json_schema: fixture('notes.docstore.json') })).status, 201);
  const ev = await onA('POST', '/api/apps/crm/datasources/events/datatables/events/materialize/');
  t.like(ev.body.data, { provider_type: 'jsonb', is_materialized: true, primary_key: ['id'], field_names: ['id', 'event_type', 'occurred_at', 'user_ref', 'payload'] });
  t.is((await onA('POST', '/api/apps/crm/datatables/notes/materialize/')).status, 200);
  const cols = async (tbl: string) => (await sql(`SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`, [a.schema, tbl])).map((r) => String(r.column_name));
  t.deepEqual(await cols(`a${appIds.crm}_events`), ['id', 'data', 'created_at', 'updated_at']);
  t.deepEqual(await cols(`a${appIds.crm}_notes`), ['id', 'doc', 'created_at', 'updated_at']);
  const stats = await onA('GET', '/api/apps/crm/datatables/stats/', undefined, 'pleb');
  t.like(stats.body, { total_tables: 5, materialized_tables: 5, unmaterialized_tables: 0, datasource_count: 3, datasources: { main: { table_count: 3, materialized_count: 3, provider_type: 'flat_table' }, docs: { table_count: 1 } } });
});

test.serial('validate_data: per-row messages from the compiled field validators', async (t) => {
  const res = await onA('POST', `${CRM}contacts/validate_data/`, {
    data: [
      { id: 1, first_name: 'Ada', last_name: 'L', email: 'ada@example.com', tags: ['vip'] },
      { id: 'two', first_name: 'B', last_name: 'C', email: 'not-an-email', status: 'gone' },
      { id: 3, first_name: 'C' },
    ],
  }, 'pleb');
  t.is(res.status, 200);
  t.is(res.body.is_valid, false);
  t.is(res.body.validated_rows, 3);
  t.true(res.body.errors.some((e: string) => e.startsWith("row 1: field 'email':")));
  t.true(res.body.errors.some((e: string) => e.startsWith("row 1: field 'id':")));
  t.true(res.body.errors.some((e: string) => e.startsWith("row 1: field 'status':")));
  t.true(res.body.errors.some((e: string) => e === "row 2: field 'last_name': is required"));
  t.false(res.body.errors.some((e: string) => e.startsWith('row 0')));
  t.deepEqual((await onA('POST', `${CRM}contacts/validate_data/`, { data: [{ id: 1, first_name: 'A', last_name: 'B', email: 'a@b.example' }] })).body, { is_valid: true, errors: [], validated_rows: 1 });
});

test.serial('schema changes: free before materialization (hash recomputed), a migration after; description always', async (t) => {
  const draft = await onA('POST', CRM, { name: 'draft', json_schema: { fields: [{ name: 'a', type: 'string' }] } });
  const patched = await onA('PATCH', `${CRM}draft/`, { json_schema: { fields: [{ name: 'a', type: 'string' }, { name: 'b', type: 'integer' }] } });
  t.is(patched.status, 200, patched.text);
  t.not(patched.body.schema_hash, draft.body.data.schema_hash);
  t.deepEqual(patched.body.field_names, ['id', 'a', 'b']);
  t.is((await onA('PUT', '/api/apps/crm/datatables/draft/', { json_schema: { fields: [{ name: 'a', type: 'nope' }] } })).status, 400);
  const keyless = await onA('PATCH', `${CRM}companies/`, { json_schema: { fields: [{ name: 'name', type: 'string' }] } });
  t.is(keyless.status, 400, 'a materialized table migrates (server/test/migrations.test.ts): not to another primary key');
  t.regex(keyless.body.json_schema.join(' '), /primaryKey cannot change/);
  const same = await onA('PATCH', `${CRM}companies/`, { description: 'Changed', json_schema: { ...fixture('companies.json') } });
  t.is(same.status, 200, 'the same schema (same hash) is not a change');
  t.is(same.body.description, 'Changed');
  t.is((await onA('DELETE', `${CRM}draft/`)).status, 200);
});

test.serial('permissions: site users read, only site admins write; other sites see nothing', async (t) => {
  t.is((await onA('GET', CRM, undefined, 'pleb')).status, 200);
  t.is((await onA('POST', CRM, { name: 'x', json_schema: { fields: [{ name: 'a', type: 'string' }] } }, 'pleb')).status, 403);
  t.is((await onA('POST', `${CRM}companies/materialize/`, undefined, 'pleb')).status, 403);
  t.is((await onA('DELETE', `${CRM}companies/`, undefined, 'pleb')).status, 403);
  // Site B has an app "crm" too, with none of A's tables.
  const onB = (method: string, path: string) => s.api(method, path, { host: b.domain, token: tok.adminB });
  t.is((await onB('GET', CRM)).body.count, 0);
  t.is((await onB('GET', `${CRM}companies/`)).status, 404);
  t.not((await s.api('GET', CRM, { host: a.domain, token: tok.adminB })).status, 200, 'a B token on A');
});

test.serial('import-reference: single 201, bulk 207 with per-item errors, every rule', async (t) => {
  const one = await onA('POST', '/api/apps/reports/datatables/import-reference/', { source_app_slug: 'crm', source_table_name: 'companies' });
  t.is(one.status, 201, one.text);
  t.like(one.body.data, {
    name: 'companies', app_slug: 'reports', is_reference: true, is_materialized: true, physical_table_name: `a${appIds.crm}_companies`,
    source_info: { app: 'crm', table: 'companies', physical_table_name: `a${appIds.crm}_companies` },
  });
  t.is((await onA('POST', '/api/apps/reports/datatables/import-reference/', { source_app_slug: 'crm', source_table_name: 'companies' })).status, 400, 'name taken');
  await onA('POST', CRM, { name: 'unmat', json_schema: { fields: [{ name: 'a', type: 'string' }] } });
  const bulk = await onA('POST', '/api/apps/reports/datatables/import-reference/', [
    { source_app_slug: 'crm', source_table_name: 'contacts', reference_name: 'people' },
    { source_app_slug: 'crm', source_table_name: 'unmat' },
    { source_app_slug: 'reports', source_table_name: 'companies' },
    { source_app_slug: 'nope', source_table_name: 'x' },
    { source_app_slug: 'crm', source_table_name: 'companies' },
    { bogus: true },
  ]);
  t.is(bulk.status, 207, bulk.text);
  t.is(bulk.body.created, 1);
  t.is(bulk.body.failed, 5);
  t.is(bulk.body.references[0].name, 'people');
  t.deepEqual(bulk.body.errors.map((e: { index: number }) => e.index), [1, 2, 3, 4, 5]);
  t.regex(JSON.stringify(bulk.body.errors[0].error), /not materialized/);
  t.regex(JSON.stringify(bulk.body.errors[1].error), /another app/);
  t.regex(JSON.stringify(bulk.body.errors[2].error), /not found/);
  t.regex(JSON.stringify(bulk.body.errors[3].error), /already exists/);
  // A reference of a reference: crm importing reports.people (itself a reference).
  const chain = await onA('POST', '/api/apps/crm/datatables/import-reference/', { source_app_slug: 'reports', source_table_name: 'people', reference_name: 'again' });
  t.is(chain.status, 400);
  t.regex(JSON.stringify(chain.body.errors), /itself a reference/);
  t.is((await onA('POST', '/api/apps/reports/datatables/people/materialize/')).status, 400, 'references are not materialized');
  await sql(`UPDATE "${a.schema}".app_settings SET max_datatables = 2 WHERE app_id = ?`, [appIds.reports]);
  const limited = await onA('POST', '/api/apps/reports/datatables/import-reference/', { source_app_slug: 'crm', source_table_name: 'orders' });
  t.is(limited.status, 400);
  t.regex(limited.body.errors.non_field_errors[0], /limit of 2 data tables/);
  await sql(`UPDATE "${a.schema}".app_settings SET max_datatables = 50 WHERE app_id = ?`, [appIds.reports]);
  t.is((await onA('DELETE', `${CRM}contacts/`)).status, 400, 'source of a reference');
  t.is((await onA('DELETE', '/api/apps/reports/datatables/people/')).status, 200);
  t.truthy(await physical(a, `a${appIds.crm}_contacts`), 'deleting a reference keeps the source table');
});

test.serial('import-reference into an app without a data source creates its default data source', async (t) => {
  await seedApp(a, 'bare', []);
  const ref = await onA('POST', '/api/apps/bare/datatables/import-reference/', { source_app_slug: 'crm', source_table_name: 'companies' });
  t.is(ref.status, 201, ref.text);
  t.like(ref.body.data, { app_slug: 'bare', name: 'companies', is_reference: true, datasource_slug: 'default', provider_type: 'flat_table' });
  const sources = await onA('GET', '/api/apps/bare/datasources/');
  t.like(sources.body.data, [{ slug: 'default', name: 'Default', provider_type: 'flat_table', table_count: 1 }]);
  const data = await onA('GET', '/api/apps/bare/datatables/companies/data/?page_size=1', undefined, 'pleb');
  t.is(data.status, 200, data.text);
  t.is((await s.api('POST', '/api/apps/bare/datatables/import-reference/', { host: b.domain, token: tok.adminB, body: { source_app_slug: 'crm', source_table_name: 'companies' } })).status, 404, 'site B has no such app');
  t.is((await onA('DELETE', '/api/apps/bare/datatables/companies/')).status, 200);
});

test.serial('delete: refused while a foreign key references the table; drops the physical table', async (t) => {
  t.is((await onA('DELETE', '/api/apps/reports/datatables/companies/')).status, 200);
  const refused = await onA('DELETE', `${CRM}companies/`);
  t.is(refused.status, 400);
  t.regex(refused.body.message, /referenced by a foreign key of: contacts/);
  t.is((await onA('DELETE', `${CRM}orders/`)).status, 200);
  t.is(await physical(a, `a${appIds.crm}_orders`), null);
  t.is((await onA('GET', `${CRM}orders/`)).status, 404);
  t.is((await onA('DELETE', `${CRM}contacts/`)).status, 200);
  t.is((await onA('DELETE', `${CRM}companies/`)).status, 200);
  t.is(await physical(a, `a${appIds.crm}_companies`), null);
});
