// Apps and app settings of a site: CRUD, slugs, soft delete and restore cascading to data
// sources and tables, stats, settings rules (each a 400 naming the field, nothing changed),
// icon upload checked by content, who may, isolation between sites, inert injection attempts.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
let dataDir: string;
const tok: Record<string, string> = {};

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

const onA = (method: string, p: string, body?: unknown, who = 'adminA') => s.api(method, p, { host: a.domain, token: tok[who], body });

/** A multipart request (serialised by the platform's own FormData) on site A. */
async function multipart(method: string, p: string, form: FormData, who = 'adminA') {
  const req = new Request('http://x/', { method: 'POST', body: form });
  const raw = Buffer.from(await req.arrayBuffer());
  return s.api(method, p, { host: a.domain, token: tok[who], raw, headers: { 'Content-Type': req.headers.get('content-type')! } });
}

// A real 1×1 PNG.
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a1d3b0c70000000049454e44ae426082',
  'hex',
);

let adminUuid: string;

test.before(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'apps-test-'));
  s = await startTestServer({ PLATFORM_DATA_DIR: dataDir });
  ({ a, b, adminUuid } = await twoSitesWithUsers(s, tok));
  tok.platform = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
  await rm(dataDir, { recursive: true, force: true });
});

test.serial('create: slug from the name, -2 on collision, settings with defaults in the same call', async (t) => {
  const res = await onA('POST', '/api/apps/', { name: 'Sales Tracker', description: 'Deals' });
  t.is(res.status, 201, res.text);
  t.like(res.body, { status: 'success', data: { name: 'Sales Tracker', slug: 'sales-tracker', description: 'Deals', is_active: true, table_count: 0, datasource_count: 0, tables: [], datasources: [] } });
  const st = res.body.data.settings;
  t.true(Number.isInteger(st.id));
  t.like(st, {
    display_name: 'Sales Tracker', icon_url: null, primary_color: '#1976d2', secondary_color: '#dc004e', category: 'analytics',
    max_functions: 100, max_datatables: 50, rate_limit_per_hour: 1000, documentation_url: '', support_email: '', default_frontend_worker_url: null,
  });
  t.deepEqual(res.body.data.package_info, { has_package: false, generated_at: null, download_url: null });
  t.is(res.body.data.created_by, adminUuid);
  t.is(res.body.data.modified_by, adminUuid);
  const second = await onA('POST', '/api/apps/', { name: 'sales tracker', settings: { category: 'storage', primary_color: '#ABCDEF', display_name: 'Second' } });
  t.is(second.status, 201, second.text);
  t.is(second.body.data.slug, 'sales-tracker-2');
  // issue 30 #9: `imports` names the package import route (POST /api/apps/imports/), never an app.
  const imports = await onA('POST', '/api/apps/', { name: 'Imports' });
  t.is(imports.status, 201, imports.text);
  t.is(imports.body.data.slug, 'imports-2');
  t.true((await onA('DELETE', '/api/apps/imports-2/')).status < 300);
  t.like(second.body.data.settings, { category: 'storage', primary_color: '#ABCDEF', display_name: 'Second' });
  // invalid settings: nothing created
  const bad = await onA('POST', '/api/apps/', { name: 'Bad one', settings: { primary_color: 'red' } });
  t.is(bad.status, 400);
  t.truthy(bad.body.errors['settings.primary_color']);
  t.is((await onA('GET', '/api/apps/bad-one/')).status, 404);
  t.is((await onA('POST', '/api/apps/', { description: 'no name' })).status, 400);
  t.is((await onA('POST', '/api/apps/', { name: 'X', colour: 1 })).body.errors.colour[0], 'Unknown field.');
});

test.serial('list (lightweight settings, is_active filter), detail, update of name/description only', async (t) => {
  await onA('POST', '/api/apps/', { name: 'Listed' });
  const list = await onA('GET', '/api/apps/', undefined, 'pleb');
  t.is(list.status, 200);
  t.is(list.body.status, 'success');
  t.is(list.body.total, list.body.data.length);
  const item = list.body.data.find((x: { slug: string }) => x.slug === 'listed');
  t.deepEqual(item.settings, { display_name: 'Listed', category: 'analytics', icon_url: null, primary_color: '#1976d2' });
  const detail = await onA('GET', '/api/apps/listed/', undefined, 'pleb');
  t.like(detail.body, { status: 'success', data: { slug: 'listed' } });
  const put = await onA('PUT', '/api/apps/listed/', { name: 'Renamed', description: 'new' });
  t.is(put.status, 200, put.text);
  t.like(put.body.data, { name: 'Renamed', slug: 'listed', description: 'new' });
  t.is(put.body.data.settings.display_name, 'Listed', 'settings untouched');
  t.is((await onA('PATCH', '/api/apps/listed/', { description: 'patched' })).body.data.description, 'patched');
  const withSettings = await onA('PATCH', '/api/apps/listed/', { settings: { category: 'storage' } });
  t.is(withSettings.status, 400);
  t.true(Object.keys(withSettings.body.errors).every((k) => k.startsWith('settings')), withSettings.text);
  t.is((await onA('PATCH', '/api/apps/listed/', { name: '' })).status, 400);
});

test.serial('soft delete cascades to data sources and tables; restore brings them back; stats', async (t) => {
  await onA('POST', '/api/apps/', { name: 'Cascade' });
  const src = await onA('POST', '/api/apps/cascade/datasources/', { name: 'Main', provider_type: 'flat_table' });
  t.is(src.status, 201, src.text);
  const [appRow] = await sql(`SELECT id FROM "${a.schema}".apps WHERE slug = 'cascade'`);
  await sql(
    `INSERT INTO "${a.schema}".data_tables (app_id, data_source_id, name, json_schema, schema_hash, physical_table_name, is_materialized)
     VALUES (?, ?, 'orders', '{}', repeat('a', 64), 'cascade_orders', true), (?, ?, 'lines', '{}', repeat('b', 64), 'cascade_lines', false)`,
    [appRow.id, src.body.data.id, appRow.id, src.body.data.id],
  );
  const stats = await onA('GET', '/api/apps/cascade/stats/', undefined, 'pleb');
  t.deepEqual(stats.body, {
    app_name: 'Cascade', app_slug: 'cascade', total_datasources: 1, total_tables: 2, materialized_tables: 1, unmaterialized_tables: 1,
    datasources: [{ name: 'Main', slug: 'main', provider_type: 'flat_table', total_tables: 2, materialized_tables: 1 }],
  });
  const detail = await onA('GET', '/api/apps/cascade/');
  t.like(detail.body.data, { table_count: 2, datasource_count: 1 });
  t.deepEqual(detail.body.data.tables.map((x: { name: string }) => x.name), ['lines', 'orders']);
  t.like(detail.body.data.tables[1], { provider_type: 'flat_table', is_materialized: true, physical_table_name: 'cascade_orders' });
  t.like(detail.body.data.datasources[0], { name: 'Main', slug: 'main', provider_type: 'flat_table', table_count: 2 });

  t.is((await onA('DELETE', '/api/apps/cascade/', undefined, 'pleb')).status, 403);
  const del = await onA('DELETE', '/api/apps/cascade/');
  t.deepEqual(del.body, { status: 'success', message: 'App "cascade" deleted.' });
  const flags = async () => (await sql(
    `SELECT (SELECT bool_or(is_active) FROM "${a.schema}".apps WHERE id = ?) AS app,
            (SELECT bool_or(is_active) FROM "${a.schema}".data_sources WHERE app_id = ?) AS ds,
            (SELECT bool_or(is_active) FROM "${a.schema}".data_tables WHERE app_id = ?) AS tables`, [appRow.id, appRow.id, appRow.id]))[0];
  t.deepEqual({ ...(await flags()) }, { app: false, ds: false, tables: false });
  for (const p of ['/api/apps/cascade/', '/api/apps/cascade/settings/', '/api/apps/cascade/stats/', '/api/apps/cascade/datasources/']) t.is((await onA('GET', p)).status, 404, p);
  t.false((await onA('GET', '/api/apps/')).body.data.some((x: { slug: string }) => x.slug === 'cascade'));
  t.true((await onA('GET', '/api/apps/?is_active=false')).body.data.some((x: { slug: string }) => x.slug === 'cascade'));
  t.is((await onA('POST', '/api/apps/cascade/restore/', undefined, 'pleb')).status, 403);
  const restore = await onA('POST', '/api/apps/cascade/restore/');
  t.deepEqual(restore.body, { message: 'App "cascade" restored.' });
  t.deepEqual({ ...(await flags()) }, { app: true, ds: true, tables: true });
  t.is((await onA('GET', '/api/apps/cascade/')).status, 200);
  t.is((await onA('POST', '/api/apps/nope/restore/')).status, 404);
});

test.serial('settings: GET without id, PATCH partial, PUT needs display_name, POST acts as PUT, DELETE 405', async (t) => {
  await onA('POST', '/api/apps/', { name: 'Conf' });
  const got = await onA('GET', '/api/apps/conf/settings/', undefined, 'pleb');
  t.is(got.status, 200);
  t.is(got.body.success, true);
  t.false('id' in got.body.data);
  t.is(got.body.data.display_name, 'Conf');
  const patch = await onA('PATCH', '/api/apps/conf/settings/', { max_functions: 0, documentation_url: 'https://docs.example.com/x', support_email: 'help@example.com', default_frontend_worker: null });
  t.is(patch.status, 200, patch.text);
  t.like(patch.body.data, { max_functions: 0, documentation_url: 'https://docs.example.com/x', support_email: 'help@example.com', display_name: 'Conf' });
  t.false('default_frontend_worker' in patch.body.data, 'write-only');
  t.is((await onA('PUT', '/api/apps/conf/settings/', { category: 'integration' })).body.errors.display_name[0], 'This field is required.');
  const put = await onA('PUT', '/api/apps/conf/settings/', { display_name: 'Configured', category: 'integration' });
  t.like(put.body.data, { display_name: 'Configured', category: 'integration', max_functions: 0 });
  t.is((await onA('POST', '/api/apps/conf/settings/', { display_name: 'Posted' })).body.data.display_name, 'Posted');
  const del = await onA('DELETE', '/api/apps/conf/settings/');
  t.is(del.status, 405);
  t.regex(del.body.message, /cannot be deleted/);
  t.is((await onA('PATCH', '/api/apps/conf/settings/', { category: 'storage' }, 'pleb')).status, 403);
  t.is((await onA('PATCH', '/api/apps/conf/settings/', { documentation_url: '', support_email: '' })).status, 200, 'empty strings allowed');
});

test.serial('settings rules: each bad value → 400 naming the field, nothing changed', async (t) => {
  await onA('POST', '/api/apps/', { name: 'Rules' });
  const before = (await onA('GET', '/api/apps/rules/settings/')).body.data;
  const cases: [string, unknown][] = [
    ['display_name', 'x'.repeat(256)],
    ['display_name', ''],
    ['primary_color', '#12345'],
    ['secondary_color', 'blue'],
    ['primary_color', '#12345G'],
    ['category', 'games'],
    ['max_functions', -1],
    ['max_datatables', 1.5],
    ['rate_limit_per_hour', '10'],
    ['documentation_url', 'ftp://example.com'],
    ['documentation_url', 'javascript:alert(1)'],
    ['support_email', 'not-an-email'],
    ['default_frontend_worker', 3],
  ];
  for (const [field, value] of cases) {
    const res = await onA('PATCH', '/api/apps/rules/settings/', { display_name: 'Changed', [field]: value });
    t.is(res.status, 400, `${field}=${JSON.stringify(value)}`);
    t.truthy(res.body.errors?.[field], `${field} named: ${res.text}`);
  }
  t.is((await onA('PATCH', '/api/apps/rules/settings/', { created_at: '2001-01-01T00:00:00Z' })).body.errors.created_at[0], 'This field is read-only and cannot be changed.');
  t.deepEqual((await onA('GET', '/api/apps/rules/settings/')).body.data, before);
});

test.serial('icon: a real PNG stored and served; disguised HTML, scripted SVG and > 5 MB refused', async (t) => {
  await onA('POST', '/api/apps/', { name: 'Iconic' });
  const form = new FormData();
  form.append('icon', new Blob([PNG], { type: 'image/png' }), 'logo.png');
  form.append('primary_color', '#000000');
  form.append('max_functions', '7');
  const up = await multipart('PATCH', '/api/apps/iconic/settings/', form);
  t.is(up.status, 200, up.text);
  t.like(up.body.data, { primary_color: '#000000', max_functions: 7 });
  t.is(up.body.data.icon_url, `http://${a.domain}/api/apps/iconic/settings/icon/`);
  const [appRow] = await sql(`SELECT id FROM "${a.schema}".apps WHERE slug = 'iconic'`);
  const { readFile, readdir } = await import('node:fs/promises');
  t.deepEqual(await readFile(path.join(dataDir, 'icons', a.schema, `${appRow.id}.png`)), PNG);
  t.deepEqual(await readdir(path.join(dataDir, 'tmp')), [], 'temp files removed');
  // served (bytes compared through /sites/<schema>/ on the platform host, no token needed)
  const res = await fetch(`${s.url}/sites/${a.schema}/api/apps/iconic/settings/icon/`);
  t.is(res.status, 200);
  t.is(res.headers.get('content-type'), 'image/png');
  t.is(res.headers.get('x-content-type-options'), 'nosniff');
  t.deepEqual(Buffer.from(await res.arrayBuffer()), PNG);
  t.is((await onA('GET', '/api/apps/', undefined, 'pleb')).body.data.find((x: { slug: string }) => x.slug === 'iconic').settings.icon_url, up.body.data.icon_url);

  const html = new FormData();
  html.append('icon', new Blob(['<html><script>alert(1)</script></html>'], { type: 'image/png' }), 'evil.png');
  const r1 = await multipart('PATCH', '/api/apps/iconic/settings/', html);
  t.is(r1.status, 400);
  t.truthy(r1.body.errors.icon);

  const svg = new FormData();
  svg.append('icon', new Blob(['<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'], { type: 'image/svg+xml' }), 'x.svg');
  const r2 = await multipart('PATCH', '/api/apps/iconic/settings/', svg);
  t.is(r2.status, 400);
  t.truthy(r2.body.errors.icon);
  const onload = new FormData();
  onload.append('icon', new Blob(['<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>']), 'x.svg');
  t.is((await multipart('PATCH', '/api/apps/iconic/settings/', onload)).status, 400);

  const big = new FormData();
  big.append('icon', new Blob([PNG, Buffer.alloc(5 * 1024 * 1024 + 10)]), 'big.png');
  const r3 = await multipart('PATCH', '/api/apps/iconic/settings/', big);
  t.is(r3.status, 413, r3.text);
  t.truthy(r3.body.errors.icon);
  t.deepEqual(await readdir(path.join(dataDir, 'tmp')), [], 'no partial upload left');

  const badField = new FormData();
  badField.append('icon', new Blob([PNG]), 'ok.png');
  badField.append('category', 'nope');
  t.is((await multipart('PATCH', '/api/apps/iconic/settings/', badField)).status, 400);
  t.is((await onA('GET', '/api/apps/iconic/settings/')).body.data.primary_color, '#000000', 'unchanged');

  // a clean SVG is accepted and served with a restrictive CSP
  const good = new FormData();
  good.append('icon', new Blob(['<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><rect width="1" height="1"/></svg>']), 'ok.svg');
  t.is((await multipart('PATCH', '/api/apps/iconic/settings/', good)).status, 200);
  const served = await fetch(`${s.url}/sites/${a.schema}/api/apps/iconic/settings/icon/`);
  t.is(served.headers.get('content-type'), 'image/svg+xml');
  t.regex(served.headers.get('content-security-policy') ?? '', /default-src 'none'/);
  t.is((await fetch(`${s.url}/sites/${a.schema}/api/apps/listed/settings/icon/`)).status, 404);
  t.is((await multipart('PATCH', '/api/apps/iconic/settings/', form, 'pleb')).status, 403);
});

test('isolation: site B and platform tokens cannot reach site A apps; anonymous 401', async (t) => {
  await onA('POST', '/api/apps/', { name: 'Private' });
  t.is((await s.api('GET', '/api/apps/private/', { host: a.domain, token: tok.adminB })).status, 401);
  t.is((await s.api('GET', '/api/apps/private/', { host: b.domain, token: tok.adminB })).status, 404);
  t.is((await s.api('GET', '/api/apps/', { host: a.domain, token: tok.platform })).status, 401);
  t.is((await s.api('GET', '/api/apps/', { token: tok.platform })).status, 404, 'no such route on the platform host');
  t.is((await s.api('GET', '/api/apps/', { host: a.domain })).status, 401);
  t.is((await s.api('POST', `/sites/${a.schema}/api/apps/`, { token: tok.adminB, body: { name: 'Intruder' } })).status, 401);
});

test('injection attempts in names and slugs are inert', async (t) => {
  const name = `x'; DROP TABLE apps; --`;
  const res = await onA('POST', '/api/apps/', { name, description: '"); DELETE FROM apps; --' });
  t.is(res.status, 201);
  t.is(res.body.data.name, name);
  t.regex(res.body.data.slug, /^[a-z0-9-]+$/);
  t.is((await onA('GET', `/api/apps/${encodeURIComponent("' OR '1'='1")}/`)).status, 404);
  t.is((await onA('GET', `/api/apps/${encodeURIComponent("x'; DROP TABLE apps; --")}/settings/`)).status, 404);
  t.is((await onA('GET', '/api/apps/')).status, 200);
});

test('OpenAPI documents the app, settings and data source routes without dangling references', async (t) => {
  const doc = (await s.api('GET', '/api/schema/')).body;
  for (const p of ['/api/apps/', '/api/apps/{app_slug}/', '/api/apps/{app_slug}/settings/', '/api/apps/{app_slug}/settings/icon/', '/api/apps/{app_slug}/datasources/{ds}/stats/']) t.truthy(doc.paths[p], p);
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]);
  for (const ref of new Set(refs)) t.truthy(doc.components.schemas[ref], ref);
});
