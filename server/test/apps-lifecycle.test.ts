// App settings and secrets (issue 8, item 13): an icon is cleared with `icon: null` (file
// removed); restore reactivates only what the app's delete deactivated; a secret's `app` must be
// an app of the site (400 naming `app`, nothing stored). Isolation: another site's user reaches
// nothing of it.
import { access, mkdtemp, rm } from 'node:fs/promises';
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
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a1d3b0c70000000049454e44ae426082', 'hex');

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const onA = (method: string, p: string, body?: unknown) => s.api(method, p, { host: a.domain, token: tok.adminA, body });
const exists = (file: string) => access(file).then(() => true, () => false);

test.before(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'apps-lifecycle-'));
  s = await startTestServer({ PLATFORM_DATA_DIR: dataDir });
  ({ a, b } = await twoSitesWithUsers(s, tok));
});
test.after.always(async () => {
  await s?.close();
  await rm(dataDir, { recursive: true, force: true });
});

test.serial('icon: null clears it (icon_url null, the stored file deleted), by PATCH and by PUT', async (t) => {
  const app = await onA('POST', '/api/apps/', { name: 'Iconic' });
  const file = path.join(dataDir, 'icons', a.schema, `${app.body.data.id}.png`);
  for (const method of ['PATCH', 'PUT']) {
    const form = new FormData();
    form.append('icon', new Blob([PNG], { type: 'image/png' }), 'logo.png');
    const req = new Request('http://x/', { method: 'POST', body: form });
    const up = await s.api('PATCH', '/api/apps/iconic/settings/', { host: a.domain, token: tok.adminA, raw: Buffer.from(await req.arrayBuffer()), headers: { 'Content-Type': req.headers.get('content-type')! } });
    t.truthy(up.body.data.icon_url);
    t.true(await exists(file));
    t.is((await s.api(method, '/api/apps/iconic/settings/', { host: b.domain, token: tok.adminB, body: { display_name: 'x', icon: null } })).status, 404, 'other site');
    const cleared = await onA(method, '/api/apps/iconic/settings/', { display_name: 'Iconic', icon: null });
    t.is(cleared.status, 200, cleared.text);
    t.is(cleared.body.data.icon_url, null);
    t.false(await exists(file), method);
    t.is((await s.api('GET', '/api/apps/iconic/settings/icon/', { host: a.domain })).status, 404);
  }
  t.is((await onA('PATCH', '/api/apps/iconic/settings/', { icon: 'logo.png' })).status, 400, 'only null (or a multipart file)');
});

test.serial('restore reactivates only what the delete deactivated', async (t) => {
  const app = await onA('POST', '/api/apps/', { name: 'Cycle' });
  for (const slug of ['live', 'retired']) await onA('POST', '/api/apps/cycle/datasources/', { name: slug, provider_type: 'flat_table' });
  for (const [ds, name] of [['live', 'kept'], ['live', 'parked'], ['retired', 'old']]) {
    t.is((await onA('POST', `/api/apps/cycle/datasources/${ds}/datatables/`, { name, json_schema: { fields: [{ name: 'a', type: 'string' }] } })).status, 201);
  }
  t.is((await onA('PATCH', '/api/apps/cycle/datasources/retired/', { is_active: false })).status, 200);
  await sql(`UPDATE "${a.schema}".data_tables SET is_active = false WHERE name = 'parked' AND app_id = ?`, [app.body.data.id]);
  t.is((await s.api('DELETE', '/api/apps/cycle/', { host: b.domain, token: tok.adminB })).status, 404, 'other site');
  t.is((await onA('DELETE', '/api/apps/cycle/')).status, 200);
  const state = async () => Object.fromEntries((await sql(
    `SELECT 'ds:' || slug AS k, is_active FROM "${a.schema}".data_sources WHERE app_id = ? UNION ALL SELECT 't:' || name, is_active FROM "${a.schema}".data_tables WHERE app_id = ?`,
    [app.body.data.id, app.body.data.id],
  )).map((r) => [r.k as string, r.is_active as boolean]));
  t.deepEqual(await state(), { 'ds:live': false, 'ds:retired': false, 't:kept': false, 't:parked': false, 't:old': false });
  t.is((await s.api('POST', '/api/apps/cycle/restore/', { host: b.domain, token: tok.adminB })).status, 404, 'other site');
  t.is((await onA('POST', '/api/apps/cycle/restore/')).status, 200);
  t.deepEqual(await state(), { 'ds:live': true, 'ds:retired': false, 't:kept': true, 't:parked': false, 't:old': true });
  t.is((await onA('POST', '/api/apps/cycle/restore/')).status, 200, 'idempotent');
  t.deepEqual((await onA('GET', '/api/apps/cycle/')).body.data.datasources.map((d: { slug: string }) => d.slug), ['live']);
});

test.serial("a secret's app must be an app of the site: 400 naming app, nothing stored", async (t) => {
  await onA('POST', '/api/apps/', { name: 'Shop' });
  t.is((await onA('POST', '/api/secrets/', { key: 'K', value: 'v', app: 'shop' })).status, 201);
  const bad = await onA('POST', '/api/secrets/', { key: 'K', value: 'v', app: 'nope' });
  t.is(bad.status, 400);
  t.regex(bad.body.errors.app[0], /No app "nope" in this site/);
  t.is((await sql(`SELECT count(*) AS n FROM "${a.schema}".secrets WHERE app_slug = 'nope'`))[0].n, '0');
  const other = await s.api('POST', '/api/secrets/', { host: b.domain, token: tok.adminB, body: { key: 'K', value: 'v', app: 'shop' } });
  t.is(other.status, 400, 'site B has no app shop');
});
