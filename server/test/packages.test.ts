// App package export (issue 32; spec Part 2 §4 "Packages"): the ZIP's layout and manifest, every
// digest and both checksums verifiable from the bytes, the flags, secrets never leaving as values,
// storage (assets only, a bucket's own ZIP, an object named like the metadata file), the jobs,
// the stored package `packages/1`, package_info, refusals that change nothing, and isolation.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import type { UserActor } from '../../shared/auth/actor.ts';
import { makeContext } from '../../shared/context.ts';
import { sweepPackages } from '../../shared/packages/export.service.ts';
import { planImport, type ImportPlan } from '../../shared/packages/plan.ts';
import { readPackage } from '../../shared/packages/reader.ts';
import { storeFromConfig } from '../../shared/storage/objstore/index.ts';
import AdmZip from 'adm-zip';
import type { TestSite } from '../../shared/testing/sites.ts';
import { BUCKET_METADATA, SECRET_PLACEHOLDER, manifestChecksum, packageChecksum, type Manifest } from '../../shared/packages/layout.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { createTables, fixture, seedCrm } from './crm.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const P = '/api/apps/crm/packages/';
const SECRET_VALUE = 'sk-live-never-in-a-package-4242';

const on = (site: TestSite, method: string, path: string, body?: unknown, token = tok.adminA) => s.api(method, path, { host: site.domain, token, body });
const onA = (method: string, path: string, body?: unknown, token?: string) => on(a, method, path, body, token);
const put = (bucket: string, key: string, data: string) =>
  s.api('PUT', `/api/apps/crm/storage/buckets/${bucket}/objects/${key}`, { host: a.domain, token: tok.adminA, raw: Buffer.from(data), headers: { 'Content-Type': 'text/plain' } });
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const digest = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;
const must = async (res: Promise<{ status: number; text: string }>, ...ok: number[]) => {
  const r = await res;
  if (!ok.includes(r.status)) throw new Error(`${r.status} ${r.text}`);
};

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a, b]);
  await createTables((m, p, body) => onA(m, p, body), [['main', 'companies', fixture('companies.json')]]);
  await must(onA('POST', '/api/apps/crm/roles/', { name: 'staff' }), 201);
  await must(onA('POST', '/api/apps/crm/roles/', { name: 'manager', parent_name: 'staff' }), 201);
  await must(onA('POST', '/api/secrets/', { key: 'API_TOKEN', value: SECRET_VALUE, app: 'crm' }), 201);
  const fn = await onA('POST', '/api/apps/crm/functions/', { name: 'Audit', code: 'export default () => 1', environment: { TOKEN: 'API_TOKEN' } });
  if (fn.status !== 201) throw new Error(fn.text);
  await must(onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.body.id ?? fn.body.data?.id }), 200, 201);
  await must(onA('PUT', '/api/apps/crm/policies/', { resourcePolicy: { resource: 'datatable:companies', version: 'default', rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }, { actions: ['delete'], effect: 'EFFECT_DENY', roles: ['staff'] }] } }), 200, 201);
  await must(onA('POST', '/api/apps/crm/storage/buckets/', { name: 'Media', app_category: 'assets' }), 201);
  await must(onA('POST', '/api/apps/crm/storage/buckets/', { name: 'Inbox', app_category: 'attachments' }), 201);
  await must(put('media', 'img/logo.txt', 'the logo'), 201);
  await must(put('media', BUCKET_METADATA, 'an object that only looks like the metadata'), 201);
  await must(put('inbox', 'letter.txt', 'attachments stay home'), 201);
});
test.after.always(async () => {
  await s?.close();
});

/** Exports app crm of site A with `flags`; the response and the archive. */
async function exportA(flags?: Record<string, unknown>) {
  const res = await onA('POST', P, flags);
  if (res.status !== 200) throw new Error(`${res.status} ${res.text}`);
  return { res, zip: new AdmZip(res.bytes) };
}

const json = (zip: AdmZip, name: string) => JSON.parse(zip.readAsText(name));

test.serial('export: the download, the layout of §4, and a manifest whose digests and checksums the bytes confirm', async (t) => {
  const { res, zip } = await exportA();
  t.is(res.headers.get('content-type'), 'application/zip');
  t.regex(res.headers.get('content-disposition')!, /^attachment; filename=crm_package_\d{8}T\d{6}Z\.zip$/);
  t.regex(res.headers.get('x-export-job-uuid')!, /^[0-9a-f-]{36}$/);
  const names = zip.getEntries().map((e) => e.entryName).sort();
  t.deepEqual(names, [
    'analytics/metadata.json', 'app/metadata.json', 'app_roles/metadata.json', 'datatables/metadata.json', 'events/metadata.json', 'functions/metadata.json',
    'manifest.json', 'policies/metadata.json', 'secrets/metadata.json', 'storage/buckets/media.zip', 'storage/metadata.json', 'tags/metadata.json',
  ]);
  t.is(zip.getEntries().at(-1)!.entryName, 'manifest.json', 'the manifest is written last');
  const manifest = json(zip, 'manifest.json') as Manifest;
  t.like(manifest, { format: 'app-package', version: '1.0.0', created_by: 'boss', package: { app_slug: 'crm', app_name: 'CRM' }, requires: { platform_version: '0.1.0' } });
  t.like(manifest.export_options, { include_storage: true, include_frontend_workers: false, include_widgets: false });
  t.like(manifest.modules, {
    app: { count: 1 },
    app_roles: { count: 2 },
    datatables: { count: 1 },
    functions: { count: 1 },
    events: { count: 1 },
    secrets: { count: 1 },
    policies: { count: 1, by_type: { resource: 1, role: 0, derived_role: 0 } },
    analytics: { count: 0 },
    tags: { count: 0 },
    storage: { count: 1, bucket_count: 1, total_files: 2 },
  });
  for (const m of Object.values(manifest.modules)) {
    for (const [file, d] of Object.entries(m!.files)) t.is(d, digest(zip.readFile(file)!), file);
  }
  t.is(manifest.integrity.package_checksum, packageChecksum(manifest.modules));
  t.is(manifest.integrity.manifest_checksum, manifestChecksum(manifest));
  t.not(manifestChecksum({ ...manifest, created_by: 'mallory' }), manifest.integrity.manifest_checksum, 'a changed manifest has another checksum');
  // The job's checksum is the archive's.
  const job = await onA('GET', `${P}${res.headers.get('x-export-job-uuid')}/`);
  t.like(job.body.data, { status: 'completed', app_slug: 'crm', app_name: 'CRM', size: res.bytes.length, checksum: digest(res.bytes), error_message: null });
});

test.serial('portable modules: roles by parent_name, events by function_slug, secrets as placeholders, policies without scope', async (t) => {
  const { res, zip } = await exportA();
  t.deepEqual(json(zip, 'app_roles/metadata.json').roles.map((r: { name: string; parent_name: string | null }) => [r.name, r.parent_name]), [['manager', 'staff'], ['staff', null]]);
  t.deepEqual(json(zip, 'events/metadata.json').subscriptions, [{ event: 'PRE_USER_CREATE', function_slug: 'audit' }]);
  t.like(json(zip, 'functions/metadata.json').functions[0], { slug: 'audit', environment: { TOKEN: 'API_TOKEN' } });
  t.deepEqual(json(zip, 'secrets/metadata.json').secrets, [{ key: 'API_TOKEN', description: '', secret_type: null, value: SECRET_PLACEHOLDER }]);
  const tables = json(zip, 'datatables/metadata.json');
  t.like(tables.tables[0], { name: 'companies', data_source: 'main', is_materialized: true });
  t.deepEqual(tables.tables[0].json_schema, fixture('companies.json'));
  const [policy] = json(zip, 'policies/metadata.json').policies;
  t.like(policy, { policy_type: 'resource', entity_type: 'datatable' });
  t.false(JSON.stringify(policy).includes(a.schema), 'no scope, no site in a portable policy');
  // Nothing the spec leaves out: no secret value, no user, no record, no other site, anywhere in the bytes (the bucket's ZIP stores its text files deflated: checked inside below).
  for (const e of zip.getEntries()) {
    const text = zip.readAsText(e);
    t.false(text.includes(SECRET_VALUE), e.entryName);
    t.false(/"(created_by|modified_by)"/.test(text) && e.entryName !== 'manifest.json', e.entryName);
  }
  t.false(res.bytes.includes(Buffer.from(SECRET_VALUE)));
});

test.serial('storage: assets buckets only, each a ZIP of its files at their paths and its metadata; an object named like the metadata keeps its bytes', async (t) => {
  const { zip } = await exportA();
  const storage = json(zip, 'storage/metadata.json');
  t.deepEqual(storage.buckets.map((x: { slug: string }) => x.slug), ['media'], 'the attachments bucket stays with the workspace');
  t.like(storage.buckets[0], { name: 'Media', file_count: 2, archive: 'storage/buckets/media.zip' });
  const inner = new AdmZip(zip.readFile('storage/buckets/media.zip')!);
  const meta = JSON.parse(inner.readAsText(BUCKET_METADATA));
  t.like(meta, { slug: 'media', visibility: 'private' });
  const byPath = Object.fromEntries(meta.objects.map((o: { path: string; entry: string; sha256: string }) => [o.path, o]));
  t.is(inner.readAsText(byPath['img/logo.txt'].entry), 'the logo');
  t.is(byPath['img/logo.txt'].entry, 'img/logo.txt');
  t.not(byPath[BUCKET_METADATA].entry, BUCKET_METADATA);
  t.is(inner.readAsText(byPath[BUCKET_METADATA].entry), 'an object that only looks like the metadata');
  for (const o of meta.objects) t.is(o.sha256, digest(inner.readFile(o.entry)!));
});

test.serial('flags: an excluded module has no folder; widgets only when asked; frontend workers as an empty, skipped module', async (t) => {
  const { zip } = await exportA({ include_storage: false, include_secrets: false, include_widgets: true, include_frontend_workers: true });
  const names = zip.getEntries().map((e) => e.entryName);
  t.false(names.some((n) => n.startsWith('storage/') || n.startsWith('secrets/')));
  t.true(names.includes('widgets/metadata.json'));
  t.deepEqual(json(zip, 'frontend_workers/metadata.json').workers, []);
  const manifest = json(zip, 'manifest.json') as Manifest;
  t.is(manifest.modules.storage, undefined);
  t.like(manifest.modules.frontend_workers, { count: 0, build_count: 0 });
  t.like(manifest.export_options, { include_storage: false, include_secrets: false, include_widgets: true, include_frontend_workers: true });
});

test.serial('a bad flag is a 400 naming it, and no job is recorded', async (t) => {
  const count = async () => Number((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".app_export_jobs`))[0].n);
  const before = await count();
  const wrongType = await onA('POST', P, { include_storage: 'yes' });
  t.is(wrongType.status, 400);
  t.truthy(wrongType.body.errors?.include_storage ?? wrongType.body.include_storage, wrongType.text);
  const unknown = await onA('POST', P, { include_everything: true });
  t.is(unknown.status, 400);
  t.is(await count(), before);
});

test.serial('jobs: the list of §4 (status, ordering, pages of 10), the detail; the stored package is the last export; other versions 404', async (t) => {
  const last = await exportA();
  const list = await onA('GET', P);
  t.like(list.body, { success: true, status_code: 200, page: 1, page_size: 10 });
  t.true(list.body.total >= 5);
  t.is(list.body.data[0].uuid, last.res.headers.get('x-export-job-uuid'), 'newest first');
  t.deepEqual(Object.keys(list.body.data[0]).filter((k) => ['id', 'uuid', 'app_name', 'app_slug', 'status', 'started_at', 'completed_at', 'created_at'].includes(k)).length, 8);
  t.true((await onA('GET', `${P}?status=failed`)).body.data.every((j: { status: string }) => j.status === 'failed'));
  t.is((await onA('GET', `${P}?ordering=created_at&page_size=1`)).body.data.length, 1);
  t.is((await onA('GET', `${P}?status=done`)).status, 400);
  const stored = await onA('GET', `${P}1`);
  t.is(stored.status, 200);
  t.true(stored.bytes.equals(last.res.bytes), 'packages/1 is the latest export, byte for byte');
  t.is((await onA('GET', `${P}2`)).status, 404);
  t.is((await onA('GET', `${P}00000000-0000-0000-0000-000000000000/`)).status, 404);
  const detail = await onA('GET', '/api/apps/crm/');
  t.like(detail.body.data?.package_info ?? detail.body.package_info, { has_package: true });
  // Only the latest package is kept, in the jobs and in the store.
  const kept = await sql(`SELECT package_key FROM "${a.schema}".app_export_jobs WHERE package_key IS NOT NULL`);
  t.is(kept.length, 1);
  const store = await storeFromConfig(s.config.storage, s.config.dataDir);
  const inStore: string[] = [];
  for await (const key of store.site(a.schema).list('_packages/')) inStore.push(key);
  await store.close();
  t.deepEqual(inStore, [kept[0].package_key]);
  const config = await onA('GET', `${P}export-config/`);
  t.deepEqual(config.body.order, ['include_app_roles', 'include_datatables', 'include_functions', 'include_events', 'include_secrets', 'include_policies', 'include_analytics', 'include_storage', 'include_frontend_workers', 'include_widgets']);
  t.like(config.body.options.find((o: { key: string }) => o.key === 'include_frontend_workers'), { default: false });
  t.deepEqual(config.body.always_included, ['app', 'tags']);
});

test.serial('isolation: a site user who may not update the app, another site\'s administrator and another site\'s job reach nothing', async (t) => {
  const job = (await onA('GET', P)).body.data[0].uuid;
  t.is((await onA('POST', P, undefined, tok.pleb)).status, 403);
  t.is((await onA('GET', P, undefined, tok.pleb)).status, 403);
  t.is((await onA('GET', `${P}1`, undefined, tok.pleb)).status, 403);
  t.true([401, 403, 404].includes((await onA('GET', P, undefined, tok.adminB)).status), 'B\'s token on A\'s host');
  t.is((await on(b, 'GET', `${P}${job}/`, undefined, tok.adminB)).status, 404, 'A\'s job through B\'s app of the same slug');
  const bList = await on(b, 'GET', P, undefined, tok.adminB);
  t.is(bList.body.total, 0);
  t.is((await onA('POST', '/api/apps/nope/packages/')).status, 404);
});

// ---- the plan of an import (item 4b) -----------------------------------------------------------

/** The plan of importing `bytes` into `site` as its user `username`. */
async function planOf(bytes: Buffer, site: TestSite, username: string, validateChecksum = true): Promise<ImportPlan> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-plan-'));
  const file = path.join(dir, 'p.zip');
  fs.writeFileSync(file, bytes);
  const [row] = await sql(`SELECT uuid, is_staff, is_superuser FROM "${site.schema}".users WHERE username = ?`, [username]);
  const actor: UserActor = { kind: 'user', uuid: row.uuid, username, is_superuser: row.is_superuser, is_staff: row.is_staff, tenant: site.schema };
  const store = await storeFromConfig(s.config.storage, s.config.dataDir);
  const contents = await readPackage(file, { validateChecksum, tmpBase: path.join(dir, 'x') });
  try {
    return await planImport(makeContext(s.handle.db.orm.em.fork(), actor, site.schema), store.site(site.schema), contents);
  } finally {
    await contents.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const counts = (plan: ImportPlan) => Object.fromEntries(Object.entries(plan.modules).map(([k, m]) => [k, [m!.create.length, m!.update.length, m!.unchanged.length]]));

test.serial('plan: the package of an app planned into that same app is 0 changes', async (t) => {
  const { res } = await exportA();
  const plan = await planOf(res.bytes, a, 'boss');
  t.is(plan.summary, '0 changes', JSON.stringify(plan.modules));
  t.true(plan.app_exists);
  t.like(counts(plan), { app: [0, 0, 1], app_roles: [0, 0, 2], datatables: [0, 0, 2], functions: [0, 0, 1], events: [0, 0, 1], secrets: [0, 0, 1], policies: [0, 0, 1], storage: [0, 0, 3] });
});

test.serial('plan: into another site, what is missing there is created; secrets are said to need their values', async (t) => {
  const { res } = await exportA();
  const plan = await planOf(res.bytes, b, 'boss');
  t.true(plan.app_exists, 'site B has an app crm of its own');
  t.like(counts(plan), { app_roles: [2, 0, 0], functions: [1, 0, 0], events: [1, 0, 0], secrets: [1, 0, 0], policies: [1, 0, 0], storage: [3, 0, 0] });
  t.deepEqual(plan.modules.datatables!.create, ['companies']);
  t.deepEqual(plan.policies_changed.length, 1);
  t.true(plan.warnings.some((w) => w.includes('Set the values of API_TOKEN')));
  t.true(plan.changes >= 9);
});

test.serial('plan: changes made after the export are what an import would undo; a table change comes with its migration preview', async (t) => {
  const { res } = await exportA();
  await must(onA('PATCH', '/api/apps/crm/roles/staff/', { description: 'changed since' }), 200);
  await must(onA('POST', '/api/apps/crm/functions/', { name: 'Later', code: 'export default () => 2' }), 201);
  await must(put('media', 'img/logo.txt', 'another logo'), 200);
  const table = await onA('GET', '/api/apps/crm/datatables/companies/');
  const schema = table.body.data?.json_schema ?? table.body.json_schema;
  const grown = { ...schema, fields: [...schema.fields, { name: 'added_later', type: 'string' }] };
  await must(onA('PATCH', '/api/apps/crm/datatables/companies/', { json_schema: grown }), 200);
  const plan = await planOf(res.bytes, a, 'boss');
  t.deepEqual(plan.modules.app_roles!.update, ['staff']);
  t.true(plan.modules.functions!.warnings.some((w) => w.includes('later')), 'a function the package lacks is kept');
  t.deepEqual(plan.modules.storage!.update, ['media/img/logo.txt']);
  t.deepEqual(plan.modules.datatables!.update, ['companies']);
  const migration = plan.migrations.companies!;
  t.true(migration.operations.some((o) => o.type === 'drop_column' && o.column === 'added_later'), JSON.stringify(migration));
  t.true(migration.is_safe, 'a dropped column is a safe step by spec Part 2 §4 rule 4 (docs/migrations.md)');
  t.is(plan.changes, 3);
});

test.serial('plan: a user who may not update the app is refused; a crafted module is a 400 naming it; a changed byte without validate_checksum still plans', async (t) => {
  const { res } = await exportA();
  await t.throwsAsync(planOf(res.bytes, a, 'pleb'), { code: 'PERMISSION_DENIED' });
  const zip = new AdmZip(res.bytes);
  zip.updateFile('functions/metadata.json', Buffer.from(JSON.stringify({ functions: [{ name: 'no slug' }] })));
  const crafted = zip.toBuffer();
  await t.throwsAsync(planOf(crafted, a, 'boss'), { message: /functions\/metadata\.json.*digest/ });
  const err = await t.throwsAsync(planOf(crafted, a, 'boss', false));
  t.regex(err!.message, /functions\/metadata\.json does not have the format's shape/);
});

test.serial('upkeep: an interrupted export is failed, its spool and stored bytes go; a stored package no job names goes; the current one stays', async (t) => {
  await exportA();
  const store = await storeFromConfig(s.config.storage, s.config.dataDir);
  const site = store.site(a.schema);
  const tmpDir = path.join(s.config.dataDir, 'tmp');
  fs.mkdirSync(tmpDir, { recursive: true });
  const [app] = await sql(`SELECT id FROM "${a.schema}".apps WHERE slug = 'crm'`);
  const [stale] = await sql(`INSERT INTO "${a.schema}".app_export_jobs (app_id, app_name, app_slug, started_at) VALUES (?, 'CRM', 'crm', now() - interval '2 hours') RETURNING uuid`, [app.id]);
  const [running] = await sql(`INSERT INTO "${a.schema}".app_export_jobs (app_id, app_name, app_slug) VALUES (?, 'CRM', 'crm') RETURNING uuid`, [app.id]);
  const put = (key: string) => site.put(key, Readable.from([Buffer.from('zip bytes')]), { contentType: 'application/zip' });
  await put(`_packages/${app.id}/${stale.uuid}.zip`);
  await put(`_packages/${app.id}/${running.uuid}.zip`);
  const forgotten = `_packages/${app.id}/00000000-0000-4000-8000-000000000000.zip`;
  await put(forgotten);
  for (const name of [`package-${stale.uuid}.zip`, `package-${stale.uuid}.media.zip`, `package-${running.uuid}.zip`]) fs.writeFileSync(path.join(tmpDir, name), 'spool');
  const [current] = await sql(`SELECT package_key FROM "${a.schema}".app_export_jobs WHERE package_key IS NOT NULL`);

  const swept = await sweepPackages(s.handle.db.orm.em.fork(), site, a.schema, tmpDir);
  t.deepEqual(swept, { interrupted: 1, removed: 2 });
  const [after] = await sql(`SELECT status, error FROM "${a.schema}".app_export_jobs WHERE uuid = ?`, [stale.uuid]);
  t.like(after, { status: 'failed' });
  t.regex(after.error, /interrupted/);
  const keys: string[] = [];
  for await (const key of site.list('_packages/')) keys.push(key);
  t.deepEqual(keys.sort(), [current.package_key, `_packages/${app.id}/${running.uuid}.zip`].sort(), 'the running export\'s bytes and the current package stay');
  const left = fs.readdirSync(tmpDir).filter((f) => f.startsWith('package-'));
  t.deepEqual(left, [`package-${running.uuid}.zip`]);
  fs.rmSync(path.join(tmpDir, `package-${running.uuid}.zip`));
  await sql(`DELETE FROM "${a.schema}".app_export_jobs WHERE uuid = ?`, [running.uuid]);
  await site.delete([`_packages/${app.id}/${running.uuid}.zip`]);
  await store.close();
  t.is((await onA('GET', `${P}1`)).status, 200, 'the stored package still downloads');
});
