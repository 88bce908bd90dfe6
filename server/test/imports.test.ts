// App package import (issue 32 items 2, 4b; spec Part 2 §4 "Packages"): a round trip into a
// fresh site and into a site holding an older version, compared module by module; the dry run's
// plan equal to what the import then does, and changing nothing; a second import reporting and
// changing nothing (row versions, updated_at); a failure halfway leaving the site as it was (no
// row, no table, no stored byte); refusals; isolation.
import AdmZip from 'adm-zip';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTestSite } from '../../shared/testing/sites.ts';
import { BUCKET_METADATA, SECRET_PLACEHOLDER, type Manifest } from '../../shared/packages/layout.ts';
import { storeFromConfig } from '../../shared/storage/objstore/index.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { createTables, fixture, seedCrm } from './crm.ts';
import { seedSiteUser, siteToken, twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const fresh: Record<string, TestSite> = {};
const tok: Record<string, string> = {};
const SECRET_VALUE = 'sk-live-a-only-4242';
const B_SECRET = 'b-keeps-its-own-value';

const on = (site: TestSite, method: string, path: string, body?: unknown, token = tok.adminA) => s.api(method, path, { host: site.domain, token, body });
const onA = (method: string, path: string, body?: unknown) => on(a, method, path, body);
const onB = (method: string, path: string, body?: unknown) => on(b, method, path, body, tok.adminB);
const put = (site: TestSite, token: string, bucket: string, key: string, data: string | Buffer, type = 'text/plain') =>
  s.api('PUT', `/api/apps/crm/storage/buckets/${bucket}/objects/${key}`, { host: site.domain, token, raw: Buffer.from(data), headers: { 'Content-Type': type } });
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const must = async (res: Promise<{ status: number; text: string }>, ...ok: number[]) => {
  const r = await res;
  if (!ok.includes(r.status)) throw new Error(`${r.status} ${r.text}`);
};
// A PNG's first bytes and some more: a binary file whose type is sniffed from the bytes.
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a1d3b0c70000000049454e44ae426082', 'hex');

/** A site with its administrator `boss` signed in (token under `name`). */
async function freshSite(name: string): Promise<TestSite> {
  const site = await createTestSite(s.handle.db.orm.em.fork());
  await seedSiteUser(s, site, 'boss', { staff: true });
  tok[name] = await siteToken(s, site, 'boss');
  fresh[name] = site;
  return site;
}

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a, b]);
  // A: every module.
  await createTables((m, p, body) => onA(m, p, body), [['main', 'companies', fixture('companies.json')]]);
  await must(onA('POST', '/api/apps/crm/roles/', { name: 'staff' }), 201);
  await must(onA('POST', '/api/apps/crm/roles/', { name: 'manager', parent_name: 'staff', description: 'Runs the team' }), 201);
  await must(onA('POST', '/api/secret-types/', { name: 'Token', slug: 'token', json_schema: { type: 'object', required: ['token'] } }), 201);
  await must(onA('POST', '/api/secrets/', { key: 'API_TOKEN', value: { token: SECRET_VALUE }, app: 'crm', secret_type: 'token' }), 201);
  const fn = await onA('POST', '/api/apps/crm/functions/', { name: 'Audit', code: 'export default () => 1', environment: { TOKEN: 'API_TOKEN' } });
  if (fn.status !== 201) throw new Error(fn.text);
  await must(onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.body.id ?? fn.body.data?.id }), 200, 201);
  await must(onA('PUT', '/api/apps/crm/policies/', { resourcePolicy: { resource: 'datatable:companies', version: 'default', rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }, { actions: ['delete'], effect: 'EFFECT_DENY', roles: ['staff'] }] } }), 200, 201);
  await must(onA('POST', '/api/apps/crm/storage/buckets/', { name: 'Media', app_category: 'assets', allowed_mime_types: ['text/*', 'image/*'] }), 201);
  await must(put(a, tok.adminA, 'media', 'img/logo.png', PNG, 'image/png'), 201);
  await must(put(a, tok.adminA, 'media', 'notes/readme.txt', 'the notes'), 201);
  await must(put(a, tok.adminA, 'media', BUCKET_METADATA, 'an object that only looks like the metadata'), 201);

  // B: an older version of the app: the table without two fields, one role, its own secret value, a role the package lacks, an older file.
  const older = fixture('companies.json');
  older.fields = older.fields.filter((f) => f.name !== 'revenue' && f.name !== 'updated');
  await createTables((m, p, body) => onB(m, p, body), [['main', 'companies', older]]);
  await must(onB('POST', '/api/apps/crm/roles/', { name: 'staff' }), 201);
  await must(onB('POST', '/api/apps/crm/roles/', { name: 'legacy' }), 201);
  await must(onB('POST', '/api/secret-types/', { name: 'Token', slug: 'token', json_schema: { type: 'object', required: ['token'] } }), 201);
  await must(onB('POST', '/api/secrets/', { key: 'API_TOKEN', value: { token: B_SECRET }, app: 'crm', secret_type: 'token', description: 'older' }), 201);
  await must(onB('POST', '/api/apps/crm/storage/buckets/', { name: 'Media', app_category: 'assets', allowed_mime_types: ['text/*', 'image/*'] }), 201);
  await must(put(b, tok.adminB, 'media', 'notes/readme.txt', 'the old notes'), 201);
  await must(put(b, tok.adminB, 'media', 'only-in-b.txt', 'kept'), 201);
});
test.after.always(async () => {
  await s?.close();
});

async function exportOf(site: TestSite, token: string): Promise<Buffer> {
  const res = await on(site, 'POST', '/api/apps/crm/packages/', undefined, token);
  if (res.status !== 200) throw new Error(`${res.status} ${res.text}`);
  return res.bytes;
}

/** POST /api/apps/imports/ with the package and form fields. */
async function importInto(site: TestSite, token: string, zip: Buffer, fields: Record<string, string> = {}) {
  const form = new FormData();
  form.append('file', new Blob([zip], { type: 'application/zip' }), 'crm.zip');
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  const req = new Request('http://x/', { method: 'POST', body: form });
  return s.api('POST', '/api/apps/imports/', { host: site.domain, token, raw: Buffer.from(await req.arrayBuffer()), headers: { 'Content-Type': req.headers.get('content-type')! } });
}

/** Every row an import may write in the site, with its row version and updated_at: what "changing nothing" is compared on. */
async function rowVersions(site: TestSite) {
  const q = `"${site.schema}"`;
  const out: Record<string, unknown> = {};
  for (const table of ['apps', 'app_settings', 'app_roles', 'data_sources', 'data_tables', 'functions', 'event_subscriptions', 'secrets', 'secret_types', 'policies', 'storage_buckets', 'storage_objects', 'table_operations']) {
    const exists = await sql(`SELECT to_regclass(?) AS t`, [`${q}.${table}`]);
    if (!exists[0].t) continue;
    out[table] = await sql(`SELECT xmin::text AS v, to_jsonb(x) AS row FROM ${q}.${table} x ORDER BY 1, 2::text`);
  }
  return out;
}

/** The module files of a package, each parsed; a bucket by its objects (path, size, type, digest, metadata, visibility). */
function modulesOf(zip: Buffer) {
  const z = new AdmZip(zip);
  const manifest = JSON.parse(z.readAsText('manifest.json')) as Manifest;
  const out: Record<string, unknown> = {};
  for (const [name, m] of Object.entries(manifest.modules)) {
    if (name === 'storage') {
      out.storage = JSON.parse(z.readAsText('storage/metadata.json')).buckets.map(({ archive: _a, ...bucket }: Record<string, unknown>) => bucket);
      for (const file of Object.keys(m!.files).filter((f) => f.endsWith('.zip'))) {
        const inner = new AdmZip(z.readFile(file)!);
        out[file] = JSON.parse(inner.readAsText(BUCKET_METADATA));
      }
    } else out[name] = JSON.parse(z.readAsText(`${name}/metadata.json`));
  }
  return out;
}

test.serial('round trip into a fresh site: the dry run plans and changes nothing; the import does what it planned; the site exports the same app', async (t) => {
  const c = await freshSite('c');
  const zip = await exportOf(a, tok.adminA);
  const before = await rowVersions(c);

  const dry = await importInto(c, tok.c, zip, { dry_run: 'true' });
  t.is(dry.status, 200, dry.text);
  t.like(dry.body, { success: true, status_code: 200 });
  t.like(dry.body.data.job, { status: 'completed', dry_run: true, app_slug: 'crm' });
  const planned = dry.body.data.report;
  t.like(planned.modules, { app: { created: 1 }, app_roles: { created: 2 }, datatables: { created: 2 }, functions: { created: 1 }, events: { created: 1 }, secrets: { created: 2 }, policies: { created: 1 }, storage: { created: 4 } });
  t.deepEqual(planned.plan.modules.storage.create.sort(), ['bucket:media', `media/${BUCKET_METADATA}`, 'media/img/logo.png', 'media/notes/readme.txt']);
  t.true(planned.warnings.some((w: string) => w.includes('API_TOKEN')), 'the secret needs its value');
  t.deepEqual(await rowVersions(c), before, 'a dry run changes nothing');
  t.is((await on(c, 'GET', '/api/apps/crm/', undefined, tok.c)).status, 404);

  const done = await importInto(c, tok.c, zip);
  t.is(done.status, 200, done.text);
  t.is(done.body.message, `Imported: ${planned.summary}.`);
  t.like(done.body.data.job, { status: 'completed', dry_run: false, app_slug: 'crm', error_message: null });
  t.deepEqual(done.body.data.report.plan, planned.plan, 'the import did what the dry run planned');
  t.deepEqual(done.body.data.report.modules, planned.modules);

  // The site now exports the same app, module by module (the bucket by its objects' digests).
  const again = modulesOf(await exportOf(c, tok.c));
  const original = modulesOf(zip);
  for (const name of Object.keys(original)) t.deepEqual(again[name], original[name], name);
  // What the package leaves out or protects: the secret holds the placeholder (its type kept), the table is materialized and empty.
  const secret = await on(c, 'GET', '/api/secrets/API_TOKEN/?app=crm', undefined, tok.c);
  t.is(secret.body.value ?? secret.body.data?.value, SECRET_PLACEHOLDER);
  t.like(secret.body.data ?? secret.body, { secret_type: 'token' });
  const records = await on(c, 'GET', '/api/apps/crm/datatables/companies/data/', undefined, tok.c);
  t.is(records.status, 200, records.text);
  const logo = await s.api('GET', '/api/apps/crm/storage/buckets/media/objects/img/logo.png', { host: c.domain, token: tok.c });
  t.deepEqual(Buffer.from(logo.bytes), PNG);
  t.is(logo.headers.get('content-type'), 'image/png');
  t.deepEqual((await sql(`SELECT count(*)::int AS n FROM "${c.schema}".storage_blob_journal`))[0].n, 0, 'no staged blob left journaled');

  // A second import of the same package: 0 changes, and not a row touched.
  const versions = await rowVersions(c);
  const second = await importInto(c, tok.c, zip);
  t.is(second.status, 200, second.text);
  t.is(second.body.data.report.summary, '0 changes');
  t.is(second.body.message, 'Imported: 0 changes.');
  t.deepEqual(await rowVersions(c), versions, 'row versions and updated_at unchanged');

  // The jobs: the dry run, the import and the second one, with the manifest on the detail.
  const jobs = await on(c, 'GET', '/api/apps/imports/', undefined, tok.c);
  t.is(jobs.status, 200, jobs.text);
  t.deepEqual(jobs.body.data.map((j: { dry_run: boolean; status: string }) => [j.dry_run, j.status]), [[false, 'completed'], [false, 'completed'], [true, 'completed']]);
  const detail = await on(c, 'GET', `/api/apps/imports/${done.body.data.job.uuid}/`, undefined, tok.c);
  t.like(detail.body.data, { uuid: done.body.data.job.uuid, manifest: { format: 'app-package', package: { app_slug: 'crm' } } });
});

test.serial('into a site holding an older version: the table migrates, its own secret value and extras stay, and a second plan is 0 changes', async (t) => {
  const zip = await exportOf(a, tok.adminA);
  const before = await rowVersions(b);
  const dry = await importInto(b, tok.adminB, zip, { dry_run: 'true' });
  t.is(dry.status, 200, dry.text);
  t.deepEqual(await rowVersions(b), before, 'the rehearsed migration and writes are rolled back');
  t.deepEqual((await sql(`SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND column_name = 'revenue'`, [b.schema])), []);
  const plan = dry.body.data.report.plan;
  t.deepEqual(plan.modules.datatables.update, ['companies']);
  t.true(plan.migrations.companies.is_safe);
  t.deepEqual(plan.modules.app_roles.create, ['manager']);
  t.true(plan.warnings.some((w: string) => w.includes('legacy')), 'the role the package lacks is kept, with a warning');
  t.true(plan.modules.storage.update.includes('media/notes/readme.txt'));
  t.true(plan.warnings.some((w: string) => w.includes('1 file(s) not in the package are kept')));

  const done = await importInto(b, tok.adminB, zip);
  t.is(done.status, 200, done.text);
  t.deepEqual(done.body.data.report.plan, plan);
  // The secret keeps its value (never the placeholder); the extras stay; the table has the new fields; the file has the new bytes.
  const secret = await onB('GET', '/api/secrets/API_TOKEN/?app=crm');
  t.deepEqual(secret.body.value ?? secret.body.data?.value, { token: B_SECRET });
  t.is((await onB('GET', '/api/apps/crm/roles/legacy/')).status, 200);
  const table = await onB('GET', '/api/apps/crm/datatables/companies/');
  t.true((table.body.field_names ?? table.body.data?.field_names).includes('revenue'));
  const notes = await s.api('GET', '/api/apps/crm/storage/buckets/media/objects/notes/readme.txt', { host: b.domain, token: tok.adminB });
  t.is(Buffer.from(notes.bytes).toString(), 'the notes');
  t.is((await s.api('GET', '/api/apps/crm/storage/buckets/media/objects/only-in-b.txt', { host: b.domain, token: tok.adminB })).status, 200);
  // The old bytes of the replaced file are gone from the store (nothing journaled left either).
  t.deepEqual((await sql(`SELECT count(*)::int AS n FROM "${b.schema}".storage_blob_journal`))[0].n, 0);

  const replan = await importInto(b, tok.adminB, zip, { dry_run: 'true' });
  t.is(replan.body.data.report.summary, '0 changes');
});

test.serial('a failure halfway (a policy that does not compile) leaves the site as it was: no app, no table, no stored byte; the job says why', async (t) => {
  const d = await freshSite('d');
  const zip = new AdmZip(await exportOf(a, tok.adminA));
  const policies = JSON.parse(zip.readAsText('policies/metadata.json'));
  policies.policies[0].rules[0].condition = { match: { expr: 'request.resource.attr.x +' } };
  zip.updateFile('policies/metadata.json', Buffer.from(JSON.stringify(policies)));
  const bad = zip.toBuffer();
  const before = await rowVersions(d);

  // With checksums checked, the changed byte is refused before anything, and no job is recorded.
  const refused = await importInto(d, tok.d, bad);
  t.is(refused.status, 400, refused.text);
  t.regex(JSON.stringify(refused.body), /policies\/metadata\.json.*digest/);
  t.deepEqual((await on(d, 'GET', '/api/apps/imports/', undefined, tok.d)).body.data, []);

  // Without them the package is read and planned; the dry run rehearses the writes and finds the policy refused, changing nothing.
  const rehearsed = await importInto(d, tok.d, bad, { validate_checksum: 'false', dry_run: 'true' });
  t.is(rehearsed.status, 400, rehearsed.text);
  t.regex(rehearsed.text, /policies/);
  t.deepEqual(await rowVersions(d), before, 'the rehearsal is rolled back');
  // The import fails while applying: everything is rolled back.
  const failed = await importInto(d, tok.d, bad, { validate_checksum: 'false' });
  t.is(failed.status, 400, failed.text);
  t.deepEqual(await rowVersions(d), before, 'no row of any module');
  t.deepEqual(await sql(`SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name LIKE '%companies%'`, [d.schema]), [], 'no physical table');
  const store = (await storeFromConfig(s.config.storage, s.config.dataDir)).site(d.schema);
  const keys: string[] = [];
  for await (const key of store.list('')) keys.push(key);
  t.deepEqual(keys, [], 'the staged files are removed from the store');
  const [job, dryJob] = (await on(d, 'GET', '/api/apps/imports/', undefined, tok.d)).body.data;
  t.like(dryJob, { status: 'failed', dry_run: true });
  t.like(job, { status: 'failed', dry_run: false });
  t.truthy(job.error_message);
  t.deepEqual(job.report.errors, [job.error_message]);
});

test.serial('an unsafe migration (text the package makes an integer) is refused, dry run included, unless the site\'s own data source allows data loss; the package never changes that setting', async (t) => {
  const f = await freshSite('f');
  await seedCrm(s, [f]);
  // Here `employees` holds text: the package's integer is a conversion that may lose data (unsafe).
  const texts = fixture('companies.json');
  texts.fields = texts.fields.map((x) => (x.name === 'employees' ? { name: 'employees', type: 'string' } : x));
  await createTables((m, p, body) => on(f, m, p, body, tok.f), [['main', 'companies', texts]]);
  await must(on(f, 'POST', '/api/apps/crm/datatables/companies/data/', { id: 1, name: 'Acme', employees: '12' }, tok.f), 201);
  const zip = await exportOf(a, tok.adminA);
  const before = await rowVersions(f);
  for (const dry_run of ['true', 'false']) {
    const refused = await importInto(f, tok.f, zip, { dry_run });
    t.is(refused.status, 400, refused.text);
    t.regex(refused.text, /unsafe operations.*allow_data_loss/);
  }
  t.deepEqual(await rowVersions(f), before, 'nothing changed');
  t.is((await on(f, 'PATCH', '/api/apps/crm/datasources/main/', { provider_config: { allow_data_loss: true } }, tok.f)).status, 200);
  const done = await importInto(f, tok.f, zip);
  t.is(done.status, 200, done.text);
  t.false(done.body.data.report.plan.migrations.companies.is_safe);
  t.deepEqual(await sql(`SELECT data_type FROM information_schema.columns WHERE table_schema = ? AND table_name LIKE '%companies' AND column_name = 'employees'`, [f.schema]), [{ data_type: 'bigint' }]);
  const [source] = await sql(`SELECT provider_config FROM "${f.schema}".data_sources WHERE slug = 'main'`);
  t.deepEqual(source.provider_config, { allow_data_loss: true }, 'the site keeps its own setting');
});

test.serial('two imports of one package at once into a fresh site: one app, never a 500; the later one finds the first\'s work (0 changes) or is a 409 that changed nothing', async (t) => {
  const e = await freshSite('e');
  const zip = await exportOf(a, tok.adminA);
  const answers = await Promise.all([importInto(e, tok.e, zip), importInto(e, tok.e, zip)]);
  const statuses = answers.map((r) => r.status).sort();
  t.true(JSON.stringify(statuses) === '[200,200]' || JSON.stringify(statuses) === '[200,409]', answers.map((r) => r.text.slice(0, 300)).join('\n'));
  const conflict = answers.find((r) => r.status === 409);
  if (conflict) t.regex(conflict.body.message ?? conflict.text, /changed while the import was planned/);
  else t.deepEqual(answers.map((r) => r.body.data.report.summary).filter((x: string) => x === '0 changes').length, 1);
  t.deepEqual(await sql(`SELECT slug FROM "${e.schema}".apps`), [{ slug: 'crm' }]);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${e.schema}".storage_objects`))[0].n, 3);
  const replan = await importInto(e, tok.e, zip, { dry_run: 'true' });
  t.is(replan.body.data.report.summary, '0 changes');
});

test.serial('bad requests: no file, a field that is not a boolean, an unknown field, JSON instead of a form; each a 400/415 that records nothing', async (t) => {
  const zip = await exportOf(a, tok.adminA);
  const noFile = await s.api('POST', '/api/apps/imports/', { host: b.domain, token: tok.adminB, body: { dry_run: true } });
  t.is(noFile.status, 415);
  const notBool = await importInto(b, tok.adminB, zip, { dry_run: 'maybe' });
  t.is(notBool.status, 400);
  t.truthy(notBool.body.errors?.dry_run ?? notBool.body.dry_run);
  const unknown = await importInto(b, tok.adminB, zip, { overwrite: 'true' });
  t.is(unknown.status, 400);
  t.regex(unknown.text, /overwrite/);
  const form = new FormData();
  form.append('dry_run', 'true');
  const req = new Request('http://x/', { method: 'POST', body: form });
  const empty = await s.api('POST', '/api/apps/imports/', { host: b.domain, token: tok.adminB, raw: Buffer.from(await req.arrayBuffer()), headers: { 'Content-Type': req.headers.get('content-type')! } });
  t.is(empty.status, 400);
  t.regex(empty.text, /file/);
  const garbage = await importInto(b, tok.adminB, Buffer.from('not a zip at all'));
  t.is(garbage.status, 400);
  t.regex(garbage.text, /refused/);
});

test.serial('isolation: a site user without the right, another site\'s administrator and another site\'s jobs reach nothing', async (t) => {
  const zip = await exportOf(a, tok.adminA);
  const pleb = await importInto(a, tok.pleb, zip, { dry_run: 'true' });
  t.is(pleb.status, 403, pleb.text);
  // B's administrator on A's host: their token is not A's.
  const other = await importInto(a, tok.adminB, zip, { dry_run: 'true' });
  t.true([401, 403].includes(other.status), other.text);
  // B's jobs are not listed on A, and one of them is 404 there.
  const bJobs = (await onB('GET', '/api/apps/imports/')).body.data;
  t.true(bJobs.length > 0);
  const aJobs = (await onA('GET', '/api/apps/imports/')).body.data;
  t.false(aJobs.some((j: { uuid: string }) => bJobs.some((x: { uuid: string }) => x.uuid === j.uuid)));
  t.is((await onA('GET', `/api/apps/imports/${bJobs[0].uuid}/`)).status, 404);
  t.is((await on(a, 'GET', '/api/apps/imports/', undefined, tok.pleb)).status, 403);
});
