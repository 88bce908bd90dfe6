// Secrets and secret types of a site: encryption at rest, masked lists, app → tenant
// inheritance, audit history without values, JSON-Schema validation, who may, isolation
// between sites, inert injection attempts, and no value in the logs.
import test from 'ava';
import { hashPassword } from '../../shared/auth/passwords.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { capturingLog, startTestServer, type TestServer } from './helpers.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const { log, lines: logLines } = capturingLog();
const PASSWORD = 'Site-pass-word-1';
const tok: Record<string, string> = {};

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

async function seedSiteUser(site: TestSite, username: string, admin: boolean): Promise<string> {
  const [row] = await sql(`INSERT INTO "${site.schema}".users (uuid, username, password, is_staff) VALUES (gen_random_uuid(), ?, ?, ?) RETURNING uuid`, [
    username, await hashPassword(PASSWORD), admin,
  ]);
  return row.uuid;
}

async function siteToken(site: TestSite, username: string): Promise<string> {
  const res = await s.api('POST', '/api/auth/jwt/token/', { host: site.domain, body: { username, password: PASSWORD } });
  if (res.status !== 200) throw new Error(res.text);
  return res.body.access;
}

/** A call on site A as `who` (default: its admin). */
const onA = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });

test.before(async () => {
  s = await startTestServer({}, { log });
  const em = s.handle.db.orm.em.fork();
  a = await createTestSite(em);
  b = await createTestSite(em);
  await seedSiteUser(a, 'boss', true);
  await seedSiteUser(a, 'pleb', false);
  const reader = await seedSiteUser(a, 'reader', false);
  await seedSiteUser(b, 'boss', true);
  // `reader` holds view_secret through a group of site A (as the seeded Editors/Viewers do).
  await sql(`INSERT INTO "${a.schema}".permissions (codename, name, model) VALUES ('view_secret', 'Can view secret', 'secret')`);
  await sql(`INSERT INTO "${a.schema}".groups (name) VALUES ('Readers')`);
  await sql(`INSERT INTO "${a.schema}".group_permissions SELECT g.id, p.id FROM "${a.schema}".groups g, "${a.schema}".permissions p`);
  await sql(`INSERT INTO "${a.schema}".user_groups SELECT ?, id FROM "${a.schema}".groups`, [reader]);
  tok.adminA = await siteToken(a, 'boss');
  tok.pleb = await siteToken(a, 'pleb');
  tok.reader = await siteToken(a, 'reader');
  tok.adminB = await siteToken(b, 'boss');
  tok.platform = (await s.login()).access;
  // Apps that secrets name (a secret's app must exist).
  for (const slug of ['shop', 'blog']) await sql(`INSERT INTO "${a.schema}".apps (name, slug) VALUES (?, ?)`, [slug, slug]);
});
test.after.always(async () => {
  await s?.close();
});

test('secret types: slug from the name, json_schema compiled by Ajv (400 naming it), CRUD', async (t) => {
  const bad = await onA('POST', '/api/secret-types/', { name: 'Broken', json_schema: { type: 'strnig' } });
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.json_schema?.[0]);
  t.is((await onA('POST', '/api/secret-types/', { name: 'Broken', json_schema: { type: 'object', propertiez: {} } })).body.errors?.json_schema?.length, 1, 'unknown keyword');
  const created = await onA('POST', '/api/secret-types/', { name: 'API Token', description: 'A bearer token', json_schema: { type: 'string', minLength: 10 } });
  t.is(created.status, 201, created.text);
  t.like(created.body, { status: 'success', message: 'Secret type created.', data: { slug: 'api-token', name: 'API Token', json_schema: { type: 'string', minLength: 10 } } });
  t.is((await onA('POST', '/api/secret-types/', { name: 'API token' })).body.data.slug, 'api-token-2');
  t.is((await onA('GET', '/api/secret-types/api-token/')).body.description, 'A bearer token');
  t.is((await onA('GET', `/api/secret-types/${created.body.data.uuid}/`)).body.slug, 'api-token');
  const put = await onA('PUT', '/api/secret-types/api-token-2/', { description: 'changed', json_schema: { type: 'string' } });
  t.like(put.body, { slug: 'api-token-2', name: 'API token', description: 'changed' });
  t.is((await onA('PUT', '/api/secret-types/api-token-2/', { json_schema: { type: 42 } })).status, 400);
  const list = await onA('GET', '/api/secret-types/?search=token');
  t.deepEqual(list.body.results.map((x: { slug: string }) => x.slug).sort(), ['api-token', 'api-token-2']);
  t.is((await onA('DELETE', '/api/secret-types/api-token-2/')).status, 200);
  t.is((await onA('GET', '/api/secret-types/api-token-2/')).status, 404);
});

test('values are validated against the type\'s JSON Schema; a type in use cannot be deleted', async (t) => {
  const schema = { type: 'object', required: ['user', 'password'], properties: { user: { type: 'string' }, password: { type: 'string', minLength: 8 }, port: { type: 'integer' } } };
  t.is((await onA('POST', '/api/secret-types/', { name: 'DB credentials', json_schema: schema })).status, 201);
  const bad = await onA('POST', '/api/secrets/', { key: 'DB', secret_type: 'db-credentials', value: { user: 'app', port: 'x' } });
  t.is(bad.status, 400);
  t.deepEqual(bad.body.errors.value.sort(), ["/port: must be integer", "must have required property 'password'"]);
  t.is((await onA('POST', '/api/secrets/', { key: 'DB', secret_type: 'no-such-type', value: 'x' })).body.errors.secret_type[0], 'Unknown secret type "no-such-type".');
  t.is((await onA('GET', '/api/secrets/DB/')).status, 404, 'nothing was stored');
  const ok = await onA('POST', '/api/secrets/', { key: 'DB', secret_type: 'db-credentials', value: { user: 'app', password: 'db-pass-word-77' } });
  t.is(ok.status, 201, ok.text);
  t.like(ok.body.data, { key: 'DB', secret_type: 'db-credentials', value: '********' });
  // A new type must accept the stored value; so must a new value.
  t.is((await onA('PUT', '/api/secrets/DB/', { value: { user: 'app' } })).status, 400);
  await onA('POST', '/api/secret-types/', { name: 'Just a string', json_schema: { type: 'string' } });
  t.is((await onA('PUT', '/api/secrets/DB/', { secret_type: 'just-a-string' })).body.errors.value.length, 1);
  const inUse = await onA('DELETE', '/api/secret-types/db-credentials/');
  t.is(inUse.status, 400);
  t.is(inUse.body.message, 'This secret type is used by 1 secret: delete them or change their type first.');
  t.is((await onA('PUT', '/api/secrets/DB/', { secret_type: null })).body.secret_type, null);
  t.is((await onA('DELETE', '/api/secret-types/db-credentials/')).status, 200);
  t.deepEqual((await onA('GET', '/api/secrets/DB/')).body.value, { user: 'app', password: 'db-pass-word-77' });
});

test('values are encrypted at rest and masked in lists', async (t) => {
  const value = 'sk_live_plaintext_abcdef123456';
  const created = await onA('POST', '/api/secrets/', { key: 'STRIPE_KEY', value, description: 'payments' });
  t.is(created.status, 201);
  t.false(created.text.includes(value), 'the create response masks the value');
  const [row] = await sql(`SELECT ciphertext, key_version FROM "${a.schema}".secrets WHERE key = 'STRIPE_KEY'`);
  t.is(row.key_version, 1);
  t.false(row.ciphertext.includes(value));
  t.false(Buffer.from(row.ciphertext, 'base64').toString('latin1').includes(value));
  t.is(Buffer.from(row.ciphertext, 'base64').length, 12 + 16 + JSON.stringify(value).length);
  const list = await onA('GET', '/api/secrets/?search=STRIPE');
  t.is(list.status, 200);
  t.is(list.body.count, 1);
  t.like(list.body.results[0], { key: 'STRIPE_KEY', app: null, value: '********', description: 'payments', created_by: 'boss' });
  t.false(list.text.includes(value));
  const one = await onA('GET', '/api/secrets/STRIPE_KEY/');
  t.is(one.status, 200);
  t.like(one.body, { key: 'STRIPE_KEY', value, inherited_from: null });
});

test('inheritance: an app\'s own secret, else the tenant-wide one with inherited_from "tenant"', async (t) => {
  t.is((await onA('POST', '/api/secrets/', { key: 'DATABASE_URL', value: 'postgres://tenant' })).status, 201);
  t.is((await onA('POST', '/api/secrets/', { key: 'DATABASE_URL', value: 'postgres://shop', app: 'shop' })).status, 201);
  const dup = await onA('POST', '/api/secrets/', { key: 'DATABASE_URL', value: 'again', app: 'shop' });
  t.is(dup.status, 400);
  t.is(dup.body.errors.key[0], 'A secret with this key already exists for app "shop".');
  t.like((await onA('GET', '/api/secrets/DATABASE_URL/?app=shop')).body, { value: 'postgres://shop', app: 'shop', inherited_from: null });
  t.like((await onA('GET', '/api/secrets/DATABASE_URL/?app=blog')).body, { value: 'postgres://tenant', app: null, inherited_from: 'tenant' });
  t.like((await onA('GET', '/api/secrets/DATABASE_URL/')).body, { value: 'postgres://tenant', inherited_from: null });
  t.is((await onA('PUT', '/api/secrets/DATABASE_URL/?app=blog', { value: 'x' })).status, 404, 'an inherited secret is not the app\'s');
  t.is((await onA('GET', '/api/secrets/?app=shop')).body.count, 1);
  t.is((await onA('DELETE', '/api/secrets/DATABASE_URL/?app=shop')).status, 200);
  t.like((await onA('GET', '/api/secrets/DATABASE_URL/?app=shop')).body, { value: 'postgres://tenant', inherited_from: 'tenant' });
  t.is((await onA('GET', '/api/secrets/NOPE/?app=shop')).status, 404);
});

test('history lists create, update and delete with actor and time, never values', async (t) => {
  const values = ['history-value-one-1', 'history-value-two-2'];
  await onA('POST', '/api/secrets/', { key: 'AUDITED', value: values[0] });
  await onA('PUT', '/api/secrets/AUDITED/', { value: values[1], description: 'rotated' });
  await onA('DELETE', '/api/secrets/AUDITED/');
  t.is((await onA('GET', '/api/secrets/AUDITED/')).status, 404);
  const history = await onA('GET', '/api/secrets/AUDITED/history/');
  t.is(history.status, 200);
  t.is(history.body.count, 3);
  t.deepEqual(history.body.results.map((h: { action: string }) => h.action), ['delete', 'update', 'create']);
  for (const item of history.body.results) {
    t.deepEqual(Object.keys(item).sort(), ['action', 'actor', 'app', 'at', 'id', 'key']);
    t.like(item, { key: 'AUDITED', app: null, actor: 'boss' });
    t.regex(item.at, /^\d{4}-\d\d-\d\dT/);
  }
  for (const v of values) t.false(history.text.includes(v));
  const [columns] = await sql(`SELECT string_agg(column_name, ',') AS c FROM information_schema.columns WHERE table_schema = ? AND table_name = 'secret_history'`, [a.schema]);
  t.false(/value|cipher/.test(columns.c), 'the history table has no place for a value');
  t.is((await onA('GET', '/api/secrets/NEVER_EXISTED/history/')).status, 404);
});

test('who may: site admins manage; view_secret holders read; other site users 403; platform tokens 401; not on the platform host', async (t) => {
  await onA('POST', '/api/secrets/', { key: 'PERMS', value: 'perm-value' });
  for (const [method, path, body] of [
    ['GET', '/api/secrets/'], ['POST', '/api/secrets/', { key: 'X', value: 'y' }], ['GET', '/api/secrets/PERMS/'], ['PUT', '/api/secrets/PERMS/', { value: 'z' }],
    ['DELETE', '/api/secrets/PERMS/'], ['GET', '/api/secrets/PERMS/history/'], ['GET', '/api/secret-types/'], ['POST', '/api/secret-types/', { name: 'T' }],
  ] as [string, string, unknown?][]) {
    const res = await onA(method, path, body, 'pleb');
    t.is(res.status, 403, `${method} ${path}`);
    t.is(res.body.code, 'PERMISSION_DENIED');
  }
  t.is((await onA('GET', '/api/secrets/PERMS/', undefined, 'reader')).body.value, 'perm-value');
  t.is((await onA('GET', '/api/secrets/', undefined, 'reader')).status, 200);
  t.is((await onA('PUT', '/api/secrets/PERMS/', { value: 'z' }, 'reader')).status, 403);
  t.is((await onA('GET', '/api/secrets/', undefined, 'platform')).status, 401);
  t.is((await s.api('GET', '/api/secrets/', { token: tok.platform })).status, 404, 'no such route on the platform host');
  t.is((await s.api('GET', '/api/secrets/', { host: a.domain })).status, 401);
});

test('site permissions, through a group or held directly, each allow their own action only', async (t) => {
  await onA('POST', '/api/secrets/', { key: 'GRANTED', value: 'granted-value' });
  // `reader` holds view_secret through its group: it reads, and nothing more.
  for (const [method, path, body] of [
    ['POST', '/api/secrets/', { key: 'BY_READER', value: 'x' }], ['DELETE', '/api/secrets/GRANTED/'], ['POST', '/api/secret-types/', { name: 'By reader' }],
  ] as [string, string, unknown?][]) t.is((await onA(method, path, body, 'reader')).status, 403, `reader ${method} ${path}`);
  t.is((await onA('GET', '/api/secret-types/', undefined, 'reader')).status, 200);
  t.is((await onA('GET', '/api/secrets/GRANTED/history/', undefined, 'reader')).status, 200);
  // `adder` holds add_secret directly (user_permissions): it creates, and reads nothing.
  const adder = await seedSiteUser(a, 'adder', false);
  await sql(`INSERT INTO "${a.schema}".permissions (codename, name, model) VALUES ('add_secret', 'Can add secret', 'secret') ON CONFLICT (codename) DO NOTHING`);
  await sql(`INSERT INTO "${a.schema}".user_permissions SELECT ?, id FROM "${a.schema}".permissions WHERE codename = 'add_secret'`, [adder]);
  tok.adder = await siteToken(a, 'adder');
  const created = await onA('POST', '/api/secrets/', { key: 'BY_ADDER', value: 'added' }, 'adder');
  t.is(created.status, 201, created.text);
  t.is((await onA('POST', '/api/secret-types/', { name: 'By adder' }, 'adder')).status, 201);
  for (const path of ['/api/secrets/', '/api/secrets/BY_ADDER/', '/api/secret-types/']) t.is((await onA('GET', path, undefined, 'adder')).status, 403, `adder GET ${path}`);
  t.is((await onA('PUT', '/api/secrets/BY_ADDER/', { value: 'changed' }, 'adder')).status, 403);
  t.is((await onA('GET', '/api/secrets/BY_ADDER/')).body.value, 'added', 'stored as created, unchanged');
});

test('isolation: one site\'s secrets are invisible from another', async (t) => {
  await onA('POST', '/api/secrets/', { key: 'ONLY_IN_A', value: 'a-only-value' });
  const onB = (path: string) => s.api('GET', path, { host: b.domain, token: tok.adminB });
  t.is((await onB('/api/secrets/ONLY_IN_A/')).status, 404);
  t.is((await onB('/api/secrets/ONLY_IN_A/history/')).status, 404);
  t.is((await onB('/api/secrets/')).body.count, 0);
  t.is((await s.api('GET', `/sites/${b.schema}/api/secrets/ONLY_IN_A/`, { token: tok.adminB })).status, 404);
  // A's admin token on B, by host or path: refused.
  t.is((await s.api('GET', '/api/secrets/', { host: b.domain, token: tok.adminA })).status, 401);
  t.is((await s.api('GET', `/sites/${b.schema}/api/secrets/`, { token: tok.adminA })).status, 401);
  // A ciphertext copied into B does not decrypt there (bound to its site and row).
  const [row] = await sql(`SELECT * FROM "${a.schema}".secrets WHERE key = 'ONLY_IN_A'`);
  await sql(`INSERT INTO "${b.schema}".secrets (uuid, key, ciphertext, key_version) VALUES (?, 'COPIED', ?, 1)`, [row.uuid, row.ciphertext]);
  const copied = await onB('/api/secrets/COPIED/');
  t.is(copied.status, 500);
  t.false(copied.text.includes('a-only-value'));
});

test('injection attempts in key, app and search are inert', async (t) => {
  await onA('POST', '/api/secrets/', { key: 'INJECT_TARGET', value: 'v' });
  // Other tests of this file add secrets concurrently: count only this test's keys.
  const count = async () => (await sql(`SELECT count(*)::int AS n FROM "${a.schema}".secrets WHERE key LIKE 'INJECT%'`))[0].n;
  const keys = ["x' OR '1'='1", 'x"; DROP TABLE secrets; --', '../INJECT_TARGET', 'INJECT_TARGET%00'];
  for (const key of keys) {
    const res = await onA('GET', `/api/secrets/${encodeURIComponent(key)}/`);
    t.true([400, 404].includes(res.status), key);
    t.is((await onA('POST', '/api/secrets/', { key, value: 'v' })).status, 400, key);
  }
  for (const app of ["shop' OR 1=1 --", 'Shop', 'a b']) {
    t.is((await onA('GET', `/api/secrets/INJECT_TARGET/?app=${encodeURIComponent(app)}`)).status, 400);
    t.is((await onA('GET', `/api/secrets/?app=${encodeURIComponent(app)}`)).status, 400);
  }
  for (const search of ["%' OR 1=1 --", '%', "'; DELETE FROM secrets; --"]) {
    const res = await onA('GET', `/api/secrets/?search=${encodeURIComponent(search)}`);
    t.is(res.status, 200);
    t.is(res.body.count, 0, search);
  }
  // LIKE wildcards match literally: `_` is an underscore, not "any character".
  await onA('POST', '/api/secrets/', { key: 'INJECTXTARGET', value: 'v' });
  const literal = await onA('GET', `/api/secrets/?search=${encodeURIComponent('T_TARGET')}`);
  t.deepEqual(literal.body.results.map((r: { key: string }) => r.key), ['INJECT_TARGET']);
  t.is((await onA('GET', `/api/secrets/?secret_type=${encodeURIComponent("x' OR 1=1 --")}`)).body.count, 0);
  t.is(await count(), 2);
  t.is((await onA('GET', '/api/secrets/INJECT_TARGET/')).body.value, 'v');
});

test('secret values never reach the logs', async (t) => {
  const value = 'log-canary-value-9f8e7d6c';
  await onA('POST', '/api/secrets/', { key: 'LOG_CANARY', value });
  await onA('PUT', '/api/secrets/LOG_CANARY/', { value: `${value}-2` });
  t.is((await onA('GET', '/api/secrets/LOG_CANARY/')).body.value, `${value}-2`);
  await onA('POST', '/api/secrets/', { key: 'LOG_CANARY', value: `${value}-3` }); // a 400, with the body
  await onA('POST', '/api/secrets/', { key: 'LOG CANARY', value: `${value}-4` }); // a validation failure
  await new Promise((r) => setTimeout(r, 50));
  const requestLines = logLines.filter((l) => l.includes('LOG_CANARY'));
  t.true(requestLines.length >= 2, 'the requests were logged');
  t.false(logLines.some((l) => l.includes(value)));
  t.false(logLines.some((l) => l.includes(PASSWORD)));
});
