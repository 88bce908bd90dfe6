// One shape for field-keyed 400 bodies across the API (issue 30 #9; docs/api-conventions.md
// "Field errors"): the standard envelope with `errors: {field: [messages]}`, and each field's
// messages at the top level too (the spec's field form) unless the field is named like a member
// of the envelope. Buckets, batch-delete, social apps and table schemas alike; routes answering
// in the flag form add {success: false, status_code} to every error, route validation included.
import { readFileSync, readdirSync } from 'node:fs';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { seedSiteUser, siteToken, twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const onA = (method: string, path: string, body?: unknown, token = tok.adminA) => s.api(method, path, { host: a.domain, token, body });
const BUCKETS = '/api/apps/crm/storage/buckets/';
const MIME = (p: string) => `Invalid MIME type pattern ${JSON.stringify(p)}: use type/subtype, type/* or */* (letters, digits, hyphens, plus signs and dots; a wildcard only as the whole subtype).`;

/** The body of a 400 naming these fields. */
const fieldErrors = (errors: Record<string, string[]>, message = 'Invalid input.', flag = false) => ({
  status: 'error',
  code: 'VALIDATION_ERROR',
  message,
  errors,
  ...errors,
  ...(flag ? { success: false, status_code: 400 } : {}),
});

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a]);
  await seedSiteUser(s, a, 'root', { superuser: true });
  tok.root = await siteToken(s, a, 'root');
  const bucket = await onA('POST', BUCKETS, { name: 'Docs', app_category: 'assets' });
  if (bucket.status !== 201) throw new Error(bucket.text);
});
test.after.always(async () => {
  await s?.close();
});

test('buckets: the MIME pattern and quota rules, create and PATCH', async (t) => {
  const create = await onA('POST', BUCKETS, { name: 'Pics', app_category: 'assets', allowed_mime_types: ['image/png', 'image/', '*/png'], max_size_bytes: 0 });
  t.is(create.status, 400);
  t.deepEqual(create.body, fieldErrors({ allowed_mime_types: [MIME('image/'), MIME('*/png')], max_size_bytes: ['Must be a positive integer, or null for no limit.'] }));
  const patch = await onA('PATCH', `${BUCKETS}docs/`, { max_objects: -1, slug: 'other' });
  t.is(patch.status, 400);
  t.deepEqual(patch.body, fieldErrors({ slug: ['This field is read-only and cannot be changed.'] }));
  const quota = await onA('PATCH', `${BUCKETS}docs/`, { max_objects: -1 });
  t.deepEqual(quota.body, fieldErrors({ max_objects: ['Must be a positive integer, or null for no limit.'] }));
  t.is((await onA('GET', `${BUCKETS}pics/`)).status, 404);
});

test('batch-delete: the spec\'s {paths: [...]} messages, route validation and the service\'s alike, in the flag form', async (t) => {
  const D = `${BUCKETS}docs/objects/batch-delete/`;
  const cases: [unknown, Record<string, string[]>][] = [
    [{ paths: [] }, { paths: ['Paths list cannot be empty'] }],
    [{ paths: Array.from({ length: 101 }, (_, i) => `f${i}.txt`) }, { paths: ['Cannot delete more than 100 objects at once'] }],
    [{}, { paths: ['This field is required.'] }],
    [{ paths: ['a.txt', 7] }, { 'paths.1': ['Not a valid string.'] }],
    [[{ paths: [] }], { non_field_errors: ['Invalid data. Expected a JSON object.'] }],
  ];
  for (const [body, errors] of cases) {
    const res = await onA('POST', D, body);
    t.is(res.status, 400, JSON.stringify(body).slice(0, 80));
    t.deepEqual(res.body, fieldErrors(errors, 'Invalid input.', true), JSON.stringify(body).slice(0, 80));
  }
  // Not only validation: any error of a flag-form route carries the flag members (a 401 here).
  const anonymous = await s.api('POST', D, { host: a.domain, body: { paths: ['a'] } });
  t.like(anonymous.body, { status: 'error', code: 'AUTHENTICATION_FAILED', success: false, status_code: 401 });
});

test('social apps: missing fields, the providers named, settings rules', async (t) => {
  const bare = await onA('POST', '/api/auth/social-apps/', { provider: 'openid_connect', name: 'SSO', client_id: 'c', secret: 's', settings: { server_url: 'ftp://x', auto_redirect: 'yes' } }, tok.root);
  t.is(bare.status, 400);
  t.deepEqual(bare.body, fieldErrors({
    provider_id: ['This field is required when provider is "openid_connect".'],
    settings: ['"server_url" must be an http(s) URL (the issuer, or its discovery document).', '"auto_redirect" must be true or false.'],
  }));
  const unknown = await onA('POST', '/api/auth/social-apps/', { provider: 'myspace', name: 'M', client_id: 'c', secret: 's', extra: 1 }, tok.root);
  t.deepEqual(Object.keys(unknown.body.errors).sort(), ['extra', 'provider']);
  t.deepEqual(unknown.body, fieldErrors(unknown.body.errors));
  t.regex(unknown.body.provider[0], /"myspace" is not a registered provider\. Available providers: openid_connect, /);
  const array = await onA('POST', '/api/auth/social-apps/', [], tok.root);
  t.deepEqual(array.body, fieldErrors({ non_field_errors: ['Invalid data. Expected a JSON object.'] }));
  t.is((await onA('GET', '/api/auth/social-apps/')).body.total, 0);
});

test('table schemas: create, PATCH, preview-changes and materialize: {json_schema: [...]} as every field error', async (t) => {
  const create = await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'things', json_schema: { fields: [{ name: 'a', type: 'strnig' }, { name: 'a', type: 'string' }] } });
  t.is(create.status, 400);
  t.deepEqual(create.body, fieldErrors({
    json_schema: [
      "Field 'a': invalid type \"strnig\"; valid types are string, number, integer, boolean, object, array, date, time, datetime, year, yearmonth, duration, geopoint, geojson, any.",
      "Field name 'a' is used more than once.",
    ],
  }, 'Invalid table schema.'));
  const both = await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'Bad Name', json_schema: {} });
  t.deepEqual(both.body, fieldErrors({ name: ['Enter a valid value.'] }), 'the body\'s own rules first');
  await createTables(onA, [['main', 'things', { fields: [{ name: 'a', type: 'string' }] }]]);
  const patch = await onA('PATCH', '/api/apps/crm/datatables/things/', { json_schema: { fields: 'a' } });
  t.deepEqual(patch.body, fieldErrors({ json_schema: ["'fields' is required and must be a non-empty array."] }, 'Invalid table schema.'));
  const preview = await onA('POST', '/api/apps/crm/datatables/things/preview-changes/', { new_schema: { fields: [{ name: 'a', type: 'string', constraints: { enum: [1] } }] } });
  t.deepEqual(preview.body, fieldErrors({ json_schema: ["Field 'a': constraint enum value 1 is not a valid string value (must be string)."] }, 'Invalid table schema.'));
  await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'later', json_schema: { primaryKey: 'id', fields: [{ name: 'id', type: 'integer' }] } });
  await onA('POST', '/api/apps/crm/datasources/main/datatables/', { name: 'early', json_schema: { fields: [{ name: 'later_id', type: 'integer' }], foreignKeys: [{ fields: 'later_id', reference: { resource: 'later', fields: 'id' } }] } });
  const materialize = await onA('POST', '/api/apps/crm/datatables/early/materialize/');
  t.deepEqual(materialize.body, fieldErrors({ json_schema: ['foreignKeys[0] (later_id → later): the referenced table "later" is not materialized; materialize it first.'] }, 'Foreign key target not materialized.'));
});

test('a field named like a member of the envelope stays in errors only; nested paths keep their dots', async (t) => {
  await createTables(onA, [['main', 'tickets', { fields: [{ name: 'status', type: 'string', constraints: { required: true } }, { name: 'code', type: 'integer' }, { name: 'title', type: 'string' }] }]]);
  const res = await onA('POST', '/api/apps/crm/datatables/tickets/data/', [{ status: 'open', code: 'x', title: 1 }, { code: 1 }]);
  t.is(res.status, 400);
  t.deepEqual(res.body, {
    status: 'error',
    code: 'VALIDATION_ERROR',
    message: 'Invalid records: nothing was stored.',
    errors: { '0.code': ['Invalid integer "x".'], '0.title': ['must be string'], '1.status': ['This field is required.'] },
    '0.code': ['Invalid integer "x".'],
    '0.title': ['must be string'],
    '1.status': ['This field is required.'],
  });
  const one = await onA('POST', '/api/apps/crm/datatables/tickets/data/', { code: '1.5', title: 'x' });
  t.deepEqual(one.body, { status: 'error', code: 'VALIDATION_ERROR', message: 'Invalid record.', errors: { status: ['This field is required.'], code: ['Invalid integer "1.5".'] } });
});

test('every error body is built by DomainError.toBody: no other code writes one (the health probes and the 416 of a range aside)', (t) => {
  const allowed = new Set(['shared/errors.ts', 'server/routes/health.routes.ts', 'server/routes/storage.routes.ts']);
  const root = new URL('../../', import.meta.url);
  const offenders: string[] = [];
  for (const dir of ['shared', 'server', 'cli']) {
    for (const file of readdirSync(new URL(dir, root), { recursive: true, encoding: 'utf8' })) {
      const path = `${dir}/${file}`;
      if (!path.endsWith('.ts') || path.endsWith('.test.ts') || path.includes('/test/') || allowed.has(path)) continue;
      if (/status:\s*'error'/.test(readFileSync(new URL(path, root), 'utf8'))) offenders.push(path);
    }
  }
  t.deepEqual(offenders, []);
  const storage = readFileSync(new URL('server/routes/storage.routes.ts', root), 'utf8');
  t.is(storage.match(/status:\s*'error'/g)?.length, 1, 'only the 416');
});
