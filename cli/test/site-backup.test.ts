// `platform site backup` / `platform site restore` (issue 34 item 5, docs/backup.md): a site with
// records, objects, a frontend worker build, a secret, a customer domain and a member, backed up
// and restored beside itself (--as): every record, object byte and build file the same, served on
// its own hosts, the original untouched. A tampered archive and one whose dump fails mid-restore
// leave nothing behind; the original name comes back after the original is deleted.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { grantSite, makeOrg, makeUser, sql, type TestUser } from '../../server/test/site-fixtures.ts';
import { ArchiveWriter, readArchive, verifyArchive, DUMP_ENTRY, MANIFEST, type Manifest } from '../../shared/backup/archive.ts';
import { CURRENT_TENANT_VERSION, tenantMigrations } from '../../shared/tenancy/migrations.ts';
import { filesystemStore } from '../../shared/storage/objstore/index.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTestDatabase } from '../../shared/testing/database.ts';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import { csvRecords } from '../../shared/testing/fixtures-csv.ts';
import { cliEnv, json, pgDumpMissing, runCli, siteWithLogin, homeOf, SITE_PASSWORD } from './helpers.ts';

const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures');
const schemaOf = (name: string): TableSchema => JSON.parse(fs.readFileSync(path.join(FIXTURES, 'schemas', `${name}.json`), 'utf8'));
const COMPANIES = csvRecords(path.join(FIXTURES, 'csv', 'companies.csv'), schemaOf('companies'));
const BINARY = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256));

let s: TestServer;
let site: TestSite;
let admin: string;
let configDir: string;
let root: string;
let alice: TestUser;
const storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'site-backup-store-'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'site-backup-test-'));
const archive = path.join(tmp, 'site.tar');
const env = () => cliEnv(s, configDir, { STORAGE_DIR: storageDir });
const onSite = (schema: string, method: string, p: string, token: string, options: { body?: unknown; raw?: Buffer; headers?: Record<string, string> } = {}) =>
  s.api(method, `/sites/${schema}${p}`, { token, ...options });
const BUCKET = '/api/apps/shop/storage/buckets/media/objects/';

async function ok(res: Promise<{ status: number; text: string }>, what: string) {
  const r = await res;
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}

/** A site user's token on `schema` (the site users are restored with the schema). */
async function bossOf(schema: string): Promise<string> {
  const res = await s.api('POST', `/sites/${schema}/api/auth/jwt/token/`, { body: { username: 'boss', password: SITE_PASSWORD } });
  if (res.status !== 200) throw new Error(res.text);
  return res.body.access;
}


const recordsOf = async (schema: string, token: string) => {
  const r = await onSite(schema, 'GET', '/api/apps/shop/datatables/companies/data/?page_size=1000', token);
  if (r.status !== 200) throw new Error(r.text);
  return r.body.data as Record<string, unknown>[];
};
const download = async (schema: string, token: string, key: string) => (await onSite(schema, 'GET', `${BUCKET}${key}`, token)).bytes;
const keysIn = async (schema: string) => {
  const keys: string[] = [];
  for await (const key of filesystemStore(storageDir).site(schema).list('')) keys.push(key);
  return keys;
};
const bytesOf = async (body: AsyncIterable<Buffer>) => {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
};
/** What a restore that must not happen could have left of the site `schema`. */
const traces = async (schema: string) => ({
  sites: (await sql(s, 'SELECT 1 FROM public.sites WHERE schema_name = ?', [schema])).length,
  schemas: (await sql(s, 'SELECT 1 FROM pg_namespace WHERE nspname = ?', [schema])).length,
  blobs: (await keysIn(schema)).length,
});

/** A copy of the archive with entries' bytes changed by `change` and the manifest's fields by `patch`, its checksums rewritten to match (a forged, self-consistent archive). */
async function forged(change: (name: string, data: Buffer) => Buffer, patch: Partial<Manifest> = {}): Promise<string> {
  const out = path.join(tmp, `forged-${Date.now()}.tar`);
  const manifest = await verifyArchive(archive);
  const writer = await ArchiveWriter.open(fs.createWriteStream(out));
  const byName = new Map(manifest.entries.map((e) => [e.name, e]));
  await readArchive(archive, async (name, _size, body) => {
    const data = await bytesOf(body);
    if (name === MANIFEST) return;
    const changed = change(name, data);
    const { key, content_type } = byName.get(name)!;
    await writer.add(name, changed.length, changed, key === undefined ? {} : { key, content_type });
  });
  const { entries: _entries, ...rest } = manifest;
  await writer.finish({ ...rest, ...patch });
  return out;
}

// Every test here dumps the test PostgreSQL: skipped, saying why, where its pg_dump is missing (not in CI).
const dumpMissing = await pgDumpMissing();
if (dumpMissing) console.error(`site-backup tests skipped: ${dumpMissing}`);
const serial = dumpMissing ? test.serial.skip : test.serial;

test.before(async () => {
  s = await startTestServer({ STORAGE_DIR: storageDir });
  ({ site, admin, configDir } = await siteWithLogin(s));
  root = (await s.login()).access;
  const app = '/api/apps/shop';
  await ok(onSite(site.schema, 'POST', '/api/apps/', admin, { body: { name: 'Shop' } }), 'app');
  await ok(onSite(site.schema, 'POST', `${app}/datasources/`, admin, { body: { name: 'Main', slug: 'main', provider_type: 'flat_table' } }), 'datasource');
  await ok(onSite(site.schema, 'POST', `${app}/datasources/main/datatables/`, admin, { body: { name: 'companies', json_schema: schemaOf('companies') } }), 'table');
  await ok(onSite(site.schema, 'POST', `${app}/datatables/companies/materialize/`, admin), 'materialize');
  await ok(onSite(site.schema, 'POST', `${app}/datatables/companies/data/`, admin, { body: COMPANIES }), 'records');
  await ok(onSite(site.schema, 'POST', `${app}/storage/buckets/`, admin, { body: { name: 'Media', app_category: 'attachments' } }), 'bucket');
  await ok(onSite(site.schema, 'PUT', `${BUCKET}docs/a.txt`, admin, { raw: Buffer.from('alpha\n'), headers: { 'Content-Type': 'text/plain' } }), 'object');
  await ok(onSite(site.schema, 'PUT', `${BUCKET}bin/data.bin`, admin, { raw: BINARY, headers: { 'Content-Type': 'application/octet-stream' } }), 'object');
  const dist = path.join(tmp, 'dist');
  fs.mkdirSync(path.join(dist, 'assets'), { recursive: true });
  fs.writeFileSync(path.join(dist, 'index.html'), '<title>shop front v1</title>');
  fs.writeFileSync(path.join(dist, 'assets', 'app.js'), 'console.log("shop")');
  const deployed = await runCli(['worker', 'deploy', dist, '--name', 'Front', '--subdomain', 'shopfront', '--activate', '--site', site.schema], env());
  if (deployed.code) throw new Error(deployed.stderr);
  const secret = await runCli(['secret', 'set', 'API_TOKEN', 'sealed-value-1', '--site', site.schema], env());
  if (secret.code) throw new Error(secret.stderr);
  await ok(s.api('POST', `/api/cloud/sites/${site.slug}/domains/`, { token: root, body: { domain: 'shop.example.com' } }), 'domain');
  alice = await makeUser(s, root, 'alice');
  await grantSite(s, alice.uuid, site.uuid, ['view_site', 'manage_site']);
});
test.after.always(async () => {
  await s?.close();
  for (const dir of [configDir, storageDir, tmp]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

serial('backup, then restore --as beside the original: records, object bytes, build files, secrets, member and policies carried over; each site on its own hosts', async (t) => {
  const backup = await runCli(['site', 'backup', site.slug, '-o', archive, '--json'], env());
  t.is(backup.code, 0, backup.stderr);
  t.like(json(backup), { status: 'success', site: { schema_name: site.schema, slug: site.slug }, blobs: 2 + 2 });
  t.regex(backup.stderr, /Dumping the schema \(one snapshot\)/);
  t.false(fs.existsSync(`${archive}.partial`));

  const restore = await runCli(['site', 'restore', archive, '--as', 'shop_copy', '--json'], env());
  t.is(restore.code, 0, restore.stderr + restore.stdout);
  const result = json(restore);
  t.like(result, { site: { schema_name: 'shop_copy', slug: 'shop-copy' }, primary_domain: 'shop-copy.localhost', grants: { attached: 2, missing: [] } });
  t.deepEqual(result.domains.find((d: { domain: string }) => d.domain === 'shop.example.com'), { domain: 'shop.example.com', restored: false, note: 'held by another site' });
  t.like(result.workers[0], { slug: 'shopfront', host: 'shopfront-2.localhost' });
  t.regex(restore.stderr, /Checking the archive…[\s\S]*Committed\./);

  const [original, copy] = [await bossOf(site.schema), await bossOf('shop_copy')];
  const records = await recordsOf('shop_copy', copy);
  t.is(records.length, COMPANIES.length);
  t.deepEqual(records, await recordsOf(site.schema, original));
  t.deepEqual(await download('shop_copy', copy, 'bin/data.bin'), BINARY);
  t.is((await download('shop_copy', copy, 'docs/a.txt')).toString(), 'alpha\n');
  // Every blob (object bytes, build files and their compressed variants) the same, in the copy's own store.
  const blobs = await keysIn(site.schema);
  t.is(blobs.filter((k) => k.startsWith('_workers/')).length >= 2, true);
  t.deepEqual((await keysIn('shop_copy')).sort(), [...blobs].sort());
  const stores = filesystemStore(storageDir);
  for (const key of blobs) t.deepEqual(await bytesOf(await stores.site('shop_copy').get(key)), await bytesOf(await stores.site(site.schema).get(key)), key);
  t.regex(await homeOf(s.url, 'shopfront-2.localhost'), /shop front v1/);
  t.regex(await homeOf(s.url, 'shopfront.localhost'), /shop front v1/);
  const secret = await runCli(['secret', 'get', 'API_TOKEN', '--site', 'shop_copy', '--direct', '--json'], env());
  t.is(secret.code, 0, secret.stderr);
  t.like(json(secret), { value: 'sealed-value-1' });
  t.deepEqual(await sql(s, `SELECT id FROM shop_copy.policies WHERE scope LIKE ? OR id LIKE ?`, [`${site.schema}%`, `%/${site.schema}%`]), []);
  t.true((await sql(s, `SELECT 1 FROM shop_copy.policies WHERE scope = 'shop_copy_shop'`)).length > 0);
  const copyUuid = result.site.uuid as string;
  t.deepEqual((await sql(s, `SELECT p.codename FROM public.object_permissions o JOIN public.permissions p ON p.id = o.permission_id WHERE o.object_uuid = ? AND o.user_uuid = ? ORDER BY 1`, [copyUuid, alice.uuid])).map((r) => r.codename), ['manage_site', 'view_site']);

  // Tenant isolation: each host resolves to its own site; a change in the copy stays there.
  t.like((await s.api('GET', '/api/cloud/sites/config/', { host: 'shop-copy.localhost' })).body, { uuid: copyUuid, schema_name: 'shop_copy' });
  t.like((await s.api('GET', '/api/cloud/sites/config/', { host: site.domain })).body, { uuid: site.uuid, schema_name: site.schema });
  const id = records[0]!.id;
  await ok(onSite('shop_copy', 'DELETE', `/api/apps/shop/datatables/companies/data/${id}/`, copy), 'delete in copy');
  t.is((await recordsOf('shop_copy', copy)).length, COMPANIES.length - 1);
  t.is((await recordsOf(site.schema, original)).length, COMPANIES.length);
});

serial('a blob removed while the backup runs (a concurrent replace or delete) fails the backup clearly and leaves no archive', async (t) => {
  const [{ blob_key }] = await sql(s, `SELECT o.blob_key FROM shop_copy.storage_objects o WHERE o.path = 'bin/data.bin'`);
  await filesystemStore(storageDir).site('shop_copy').delete([blob_key]);
  const out = path.join(tmp, 'vanished.tar');
  const r = await runCli(['site', 'backup', 'shop_copy', '-o', out], env());
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`^Error: The blob "${blob_key}" was removed while the backup ran .* No archive was written; run the backup again\\.$`, 'm'));
  t.false(fs.existsSync(out));
  t.false(fs.existsSync(`${out}.partial`));
});

serial('an archive of a newer site schema version than this platform knows is refused', async (t) => {
  const file = await forged((_name, data) => data, { schema_version: CURRENT_TENANT_VERSION + 1 });
  const r = await runCli(['site', 'restore', file, '--as', 'from_the_future'], env());
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`its site schema is at version ${CURRENT_TENANT_VERSION + 1}, newer than this platform's ${CURRENT_TENANT_VERSION}: upgrade this platform first`));
  t.deepEqual(await traces('from_the_future'), { sites: 0, schemas: 0, blobs: 0 });
});

serial('an archive with one byte changed in one entry is refused before anything is written', async (t) => {
  const bytes = fs.readFileSync(archive);
  const at = bytes.indexOf(Buffer.from('alpha\n'));
  t.true(at > 0);
  bytes[at] ^= 1;
  const tampered = path.join(tmp, 'tampered.tar');
  fs.writeFileSync(tampered, bytes);
  const r = await runCli(['site', 'restore', tampered, '--as', 'tampered_site'], env());
  t.is(r.code, 1);
  t.regex(r.stderr, /^Error: The archive is refused, nothing was changed: the checksum of "blobs\/\d+" does not match the manifest/m);
  t.notRegex(r.stderr, /Copying blobs/, 'refused by the first pass, before anything was written');
  t.deepEqual(await traces('tampered_site'), { sites: 0, schemas: 0, blobs: 0 });
});

serial('a forged archive whose dump fails in the middle of the restore leaves no site, schema, rows or blobs', async (t) => {
  const file = await forged((name, data) => (name === DUMP_ENTRY ? data.subarray(0, Math.floor(data.length * 0.6)) : data));
  const r = await runCli(['site', 'restore', file, '--as', 'half_made'], env());
  t.is(r.code, 1);
  t.regex(r.stderr, /pg_restore failed/);
  t.deepEqual(await traces('half_made'), { sites: 0, schemas: 0, blobs: 0 });
  t.deepEqual(await sql(s, `SELECT 1 FROM public.domains WHERE domain = 'half-made.localhost'`), []);
  t.is((await sql(s, 'SELECT 1 FROM pg_namespace WHERE nspname = ?', [site.schema])).length, 1, 'the original schema is back under its name');
});

serial('restore under the original name: refused while the original exists; after it is deleted, it comes back with its customer domain unverified', async (t) => {
  const refused = await runCli(['site', 'restore', archive, '--json'], env());
  t.is(refused.code, 1);
  t.like(json(refused), { code: 'CONFLICT' });
  t.regex(json(refused).message, /A site with the schema name ".*" exists/);
  t.notRegex(refused.stderr, /Copying blobs/, 'refused before anything was written');

  await ok(s.api('DELETE', `/api/cloud/sites/${site.slug}/`, { token: root }), 'delete the original');
  const r = await runCli(['site', 'restore', archive, '--json'], env());
  t.is(r.code, 0, r.stderr);
  t.like(json(r), { site: { uuid: site.uuid, schema_name: site.schema, slug: site.slug } });
  t.deepEqual(await sql(s, 'SELECT domain, is_primary, verified_at IS NOT NULL AS verified FROM public.domains WHERE site_uuid = ? ORDER BY is_primary DESC', [site.uuid]), [
    { domain: site.domain, is_primary: true, verified: true },
    { domain: 'shop.example.com', is_primary: false, verified: false },
  ]);
  const boss = await bossOf(site.schema);
  t.is((await recordsOf(site.schema, boss)).length, COMPANIES.length);
  t.deepEqual(await download(site.schema, boss, 'bin/data.bin'), BINARY);
});

serial('a backup of an older site schema version is restored at its version, then migrated; --org puts it in another organization', async (t) => {
  const older = CURRENT_TENANT_VERSION - 1;
  const org = await makeOrg(s);
  await s.handle.db.orm.em.fork().transactional(async (tx) => {
    await tx.execute(`INSERT INTO public.sites (uuid, slug, name, schema_name, environment, organization_uuid) VALUES (gen_random_uuid(), 'old-site', 'Old site', 'old_site', 'production', ?)`, [org.uuid]);
    await tx.execute('CREATE SCHEMA old_site');
    await tx.execute('SET LOCAL search_path TO old_site');
    for (const m of tenantMigrations.filter((m) => m.version <= older)) for (const statement of m.statements) await tx.execute(statement);
    await tx.execute('SET LOCAL search_path TO public');
    await tx.execute('INSERT INTO public.tenant_schemas (schema_name, version) VALUES (?, ?)', ['old_site', older]);
  });
  const file = path.join(tmp, 'old.tar');
  const backup = await runCli(['site', 'backup', 'old-site', '-o', file, '--json'], env());
  t.is(backup.code, 0, backup.stderr);
  t.is(json(backup).schema_version, older);
  const target = await makeOrg(s);
  const r = await runCli(['site', 'restore', file, '--as', 'old_copy', '--org', target.slug, '--json'], env());
  t.is(r.code, 0, r.stderr + r.stdout);
  t.like(json(r), { organization: target.slug, schema_version: { archive: older, now: CURRENT_TENANT_VERSION } });
  t.deepEqual(await sql(s, `SELECT version FROM public.tenant_schemas WHERE schema_name = 'old_copy'`), [{ version: CURRENT_TENANT_VERSION }]);
  t.deepEqual(await sql(s, `SELECT o.slug FROM public.sites s JOIN public.organizations o ON o.uuid = s.organization_uuid WHERE s.schema_name = 'old_copy'`), [{ slug: target.slug }]);
});

serial('clusters: `platform cluster add` and `list`; restore --cluster puts the site on the second cluster, served from there; a backup of it restores back onto the primary, the same', async (t) => {
  const second = await createTestDatabase('cluster');
  try {
    const unknown = await runCli(['site', 'restore', archive, '--as', 'shop_nowhere', '--cluster', 'eu', '--json'], env());
    t.is(unknown.code, 1);
    t.deepEqual(Object.keys(json(unknown).errors ?? {}), ['cluster'], unknown.stdout);
    const added = await runCli(['cluster', 'add', 'second', '--url', second.url, '--json'], env());
    t.is(added.code, 0, added.stderr + added.stdout);
    t.like(json(added), { name: 'second', state: 'active', sites: 0 });
    const listed = await runCli(['cluster', 'list', '--json'], env());
    t.deepEqual(json(listed).map((c: { name: string }) => c.name), ['primary', 'second']);

    const away = await runCli(['site', 'restore', archive, '--as', 'shop_away', '--cluster', 'second', '--json'], env());
    t.is(away.code, 0, away.stderr + away.stdout);
    const onSecond = await sql(s, "SELECT cluster FROM public.sites WHERE schema_name = 'shop_away'");
    t.deepEqual(onSecond, [{ cluster: 'second' }]);
    t.is((await sql(s, "SELECT 1 FROM pg_namespace WHERE nspname = 'shop_away'")).length, 0, 'not on the primary');
    const original = await recordsOf(site.schema, await bossOf(site.schema));
    const awayBoss = await bossOf('shop_away');
    t.deepEqual(await recordsOf('shop_away', awayBoss), original);
    t.deepEqual(await download('shop_away', awayBoss, 'bin/data.bin'), BINARY);

    const file = path.join(tmp, 'away.tar');
    const backup = await runCli(['site', 'backup', 'shop_away', '-o', file, '--json'], env());
    t.is(backup.code, 0, backup.stderr);
    const back = await runCli(['site', 'restore', file, '--as', 'shop_back', '--cluster', 'primary', '--json'], env());
    t.is(back.code, 0, back.stderr + back.stdout);
    t.deepEqual(await recordsOf('shop_back', await bossOf('shop_back')), original);
    t.deepEqual(await sql(s, "SELECT cluster FROM public.sites WHERE schema_name = 'shop_back'"), [{ cluster: 'primary' }]);

    const drained = await runCli(['cluster', 'drain', 'second', '--json'], env());
    t.like(json(drained), { name: 'second', state: 'draining', sites: 1 });
    const refused = await runCli(['site', 'restore', archive, '--as', 'shop_refused', '--cluster', 'second', '--json'], env());
    t.is(refused.code, 1);
    t.regex(json(refused).errors.cluster[0], /draining/);
    t.is((await traces('shop_refused')).sites, 0);
    for (const schema of ['shop_away', 'shop_back']) t.is((await s.api('DELETE', `/api/cloud/sites/${schema.replace('_', '-')}/`, { token: root })).status, 200);
  } finally {
    await second.drop();
  }
});
