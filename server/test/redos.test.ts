// Regular-expression denial of service: user-written patterns (Frictionless constraints.pattern
// of data tables, JSON Schema pattern/patternProperties of secret types) run on RE2. A
// catastrophic pattern on a 50,000-character value answers correctly while /healthz keeps
// answering; lookaround and backreferences are refused when the schema is written, and nothing
// is stored. The pattern writers here are the least privileged who can: a site user for
// validate_data, an Editors member (add_secret) for secret types.
import test from 'ava';
import { seedTenantSchema } from '../../shared/tenancy/seed.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const EVIL = `${'a'.repeat(50_000)}!`;
const T = '/api/apps/crm/datatables/codes/';

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const onA = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
const healthz = () => s.api('GET', '/healthz');

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedTenantSchema(s.handle.db.orm.em.fork(), a.schema, a.organizationUuid);
  await sql(`INSERT INTO "${a.schema}".user_groups SELECT u.uuid, g.id FROM "${a.schema}".users u, "${a.schema}".groups g WHERE u.username = 'pleb' AND g.name = 'Editors'`);
  await seedCrm(s, [a]);
  await createTables(onA, [['main', 'codes', { fields: [{ name: 'code', type: 'string', constraints: { pattern: '(a+)+' } }] }]]);
});
test.after.always(async () => {
  await s?.close();
});

test('validate_data (any site user): a catastrophic pattern on 50,000 characters answers while /healthz does', async (t) => {
  const [res, health] = await Promise.all([onA('POST', `${T}validate_data/`, { data: [{ code: EVIL }, { code: 'aaaa' }] }, 'pleb'), healthz()]);
  t.is(health.status, 200);
  t.is(res.status, 200, res.text);
  t.false(res.body.is_valid);
  t.deepEqual(res.body.errors.map((e: string) => e.slice(0, 5)), ['row 0']);
});

test('records writes and CSV import meet the same pattern on RE2', async (t) => {
  const [create, health] = await Promise.all([onA('POST', `${T}data/`, { code: EVIL }), healthz()]);
  t.is(health.status, 200);
  t.is(create.status, 400);
  t.truthy(create.body.errors.code);
  const csv = await s.api('POST', `${T}data/import/`, { host: a.domain, token: tok.adminA, raw: `code\n${EVIL}\naaa\n`, headers: { 'Content-Type': 'text/csv' } });
  t.is(csv.status, 400, csv.text);
  t.like(csv.body.data, { total_rows: 2, created: 0, failed: 1 });
  t.is(csv.body.data.errors[0].row, 1);
});

test('secret types (an Editors member): a catastrophic pattern checks a 50,000-character value while /healthz answers', async (t) => {
  const type = await onA('POST', '/api/secret-types/', { name: 'Evil', json_schema: { type: 'object', properties: { v: { type: 'string', pattern: '^(a+)+$' } }, patternProperties: { '^(x+)+$': { type: 'string' } } } }, 'pleb');
  t.is(type.status, 201, type.text);
  const [res, health] = await Promise.all([onA('POST', '/api/secrets/', { key: 'EVIL', secret_type: 'evil', value: { v: EVIL } }, 'pleb'), healthz()]);
  t.is(health.status, 200);
  t.is(res.status, 400, res.text);
  t.truthy(res.body.errors.value);
  const props = await onA('POST', '/api/secrets/', { key: 'EVIL', secret_type: 'evil', value: { [`${'x'.repeat(50_000)}!`]: 1 } }, 'pleb');
  t.is(props.status, 201, props.text);
  t.is((await onA('POST', '/api/secrets/', { key: 'FINE', secret_type: 'evil', value: { v: 'aaa', xx: 'y' } }, 'pleb')).status, 201);
  t.is((await onA('POST', '/api/secrets/', { key: 'BAD', secret_type: 'evil', value: { xx: 1 } }, 'pleb')).status, 400);
});

test('lookaround and backreferences are refused at schema write time (400 naming the field); nothing is stored', async (t) => {
  // A type of this test's own to update (the tests of this file run concurrently).
  const own = await onA('POST', '/api/secret-types/', { name: 'Plain', json_schema: { type: 'string', pattern: '^a+$' } }, 'pleb');
  t.is(own.status, 201, own.text);
  for (const pattern of ['(?=a)a', '(a)\\1']) {
    const table = await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'looks', json_schema: { fields: [{ name: 'p', type: 'string', constraints: { pattern } }] } });
    t.is(table.status, 400, table.text);
    t.regex(table.body.errors.json_schema[0], /^Field 'p': constraint pattern uses lookahead, lookbehind or a backreference, which are not supported/);
    t.is((await onA('GET', '/api/apps/crm/datatables/looks/')).status, 404);
    for (const json_schema of [{ type: 'string', pattern }, { type: 'object', patternProperties: { [pattern]: {} } }]) {
      const type = await onA('POST', '/api/secret-types/', { name: 'Looks', json_schema }, 'pleb');
      t.is(type.status, 400, type.text);
      t.regex(type.body.errors.json_schema[0], /uses lookahead, lookbehind or a backreference, which are not supported/);
    }
    const update = await onA('PUT', `/api/secret-types/${own.body.data.slug}/`, { json_schema: { type: 'string', pattern } }, 'pleb');
    t.is(update.status, 400, update.text);
  }
  t.is((await sql(`SELECT count(*) AS n FROM "${a.schema}".secret_types WHERE slug LIKE 'looks%'`))[0].n, '0');
  t.is((await onA('GET', `/api/secret-types/${own.body.data.slug}/`, undefined, 'pleb')).body.json_schema.pattern, '^a+$');
});
