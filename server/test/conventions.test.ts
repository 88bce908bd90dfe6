// The HTTP conventions every route gets from the middleware layer: envelopes, statuses,
// request ids, body limits, security headers, CORS, OpenAPI and the docs pages.
import test from 'ava';
import { defineRoute } from '../http/registry.ts';
import { ADMIN, capturingLog, startTestServer, type TestServer } from './helpers.ts';

let s: TestServer;
let token: string;
const DB_MARKER = 'marker-7f3a9c';
const { log, lines: logLines } = capturingLog();

test.before(async () => {
  const boom = defineRoute({
    method: 'get',
    path: '/api/test/boom/',
    operationId: 'test_boom',
    summary: 'fails unexpectedly',
    tags: ['test'],
    auth: 'public',
    responses: { 200: null },
    handler() {
      throw new Error('secret internals: SELECT * FROM users WHERE password = hunter2');
    },
  });
  // Database errors nobody handles, whose SQL and PostgreSQL's own texts carry a value (DB_MARKER).
  const dbBoom = defineRoute({
    method: 'get',
    path: '/api/test/db-boom/:kind/',
    operationId: 'test_db_boom',
    summary: 'fails in the database',
    tags: ['test'],
    auth: 'public',
    responses: { 200: null },
    async handler(ctx) {
      const em = ctx.state.em;
      const insert = `INSERT INTO users (uuid, username, password, email) VALUES (gen_random_uuid(), ?, ?, ?)`;
      const values = [DB_MARKER, `$argon2id$${DB_MARKER}`, `${DB_MARKER}@example.com`];
      if (ctx.params.kind === 'unique') {
        await em.execute(`${insert} ON CONFLICT DO NOTHING`, values);
        await em.execute(insert, values); // duplicate key: PostgreSQL's detail names the value
      } else if (ctx.params.kind === 'cast') {
        await em.execute('SELECT ?::integer', [DB_MARKER]); // invalid input syntax: the message quotes the value
      } else {
        await em.execute('SELECT 1 ?', [DB_MARKER]); // syntax error at or near the inlined value
      }
    },
  });
  s = await startTestServer({ CORS_ORIGINS: 'https://app.example.com', BODY_LIMIT_BYTES: '2048' }, { extraRoutes: [boom, dbBoom], log });
  token = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

test('unknown route: 404 NOT_FOUND in the standard envelope', async (t) => {
  const res = await s.api('GET', '/api/nothing-here/');
  t.is(res.status, 404);
  t.like(res.body, { status: 'error', code: 'NOT_FOUND' });
  t.is(typeof res.body.message, 'string');
});

test('wrong method: 405 with Allow', async (t) => {
  const res = await s.api('DELETE', '/api/profile/', { token });
  t.is(res.status, 405);
  t.like(res.body, { status: 'error', code: 'METHOD_NOT_ALLOWED' });
  t.regex(res.headers.get('allow') ?? '', /GET/);
});

test('malformed JSON: 400 BAD_REQUEST saying what is wrong', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { raw: '{"username": "a",', headers: { 'Content-Type': 'application/json' } });
  t.is(res.status, 400);
  t.is(res.body.code, 'BAD_REQUEST');
  t.regex(res.body.message, /Malformed JSON/);
  const scalar = await s.api('POST', '/api/auth/jwt/token/', { raw: '"just a string"', headers: { 'Content-Type': 'application/json' } });
  t.is(scalar.status, 400);
});

test('a JSON array where an object is expected: 400 VALIDATION_ERROR', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { body: [1, 2] });
  t.is(res.status, 400);
  t.is(res.body.code, 'VALIDATION_ERROR');
  t.truthy(res.body.errors.non_field_errors);
});

test('body over the limit: 413', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { body: { username: 'x'.repeat(5000), password: 'y' } });
  t.is(res.status, 413);
  t.like(res.body, { status: 'error', code: 'PAYLOAD_TOO_LARGE' });
});

test('the body is read after routing: a path no route matches is a 404 whatever its body', async (t) => {
  const big = { records: 'x'.repeat(5000) };
  for (const path of ['/api/nothing-here/', '/api/apps/a/DATATABLES/t/data/', '/API/auth/jwt/token/']) {
    const res = await s.api('POST', path, { body: big });
    t.is(res.status, 404, path);
    t.is(res.body.code, 'NOT_FOUND', path);
  }
});

test('unsupported content type on a JSON route: 415', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { raw: 'username=a', headers: { 'Content-Type': 'text/plain' } });
  t.is(res.status, 415);
  t.is(res.body.code, 'UNSUPPORTED_MEDIA_TYPE');
});

test('unexpected exception: 500 INTERNAL_ERROR without internals, logged with the request id', async (t) => {
  const res = await s.api('GET', '/api/test/boom/');
  t.is(res.status, 500);
  t.like(res.body, { status: 'error', code: 'INTERNAL_ERROR' });
  t.false(res.text.includes('SELECT'));
  t.false(res.text.includes('hunter2'));
  t.false(res.text.includes('at '));
  const id = res.headers.get('x-request-id');
  t.truthy(id);
  t.true(res.text.includes(id!));
  const logged = logLines.find((l) => l.includes('unhandled error') && l.includes(id!));
  t.truthy(logged);
  t.regex(logged!, /stack/);
});

test('unhandled database errors are logged with code, constraint, table and message, never the SQL or its values', async (t) => {
  const expected: Record<string, Record<string, unknown>> = {
    unique: { code: '23505', constraint: 'users_username_key', table: 'users', schema: 'public', message: 'duplicate key value violates unique constraint "users_username_key"' },
    cast: { code: '22P02' },
    syntax: { code: '42601' },
  };
  for (const [kind, fields] of Object.entries(expected)) {
    const res = await s.api('GET', `/api/test/db-boom/${kind}/`);
    t.is(res.status, 500, kind);
    t.false(res.text.includes(DB_MARKER), kind);
    const id = res.headers.get('x-request-id')!;
    const line = logLines.find((l) => l.includes('unhandled error') && l.includes(id));
    t.truthy(line, kind);
    const entry = JSON.parse(line!);
    t.like(entry.err, fields, kind);
    t.regex(entry.err.stack, /\n\s+at /, kind);
  }
  t.regex(JSON.parse(logLines.find((l) => l.includes('"22P02"'))!).err.message, /^invalid input syntax for type integer/);
  t.false(logLines.join('\n').includes(DB_MARKER));
  t.false(logLines.join('\n').toLowerCase().includes('insert into'));
});

test('X-Request-Id: generated per request, or the caller\'s own when well-formed', async (t) => {
  const a = await s.api('GET', '/healthz');
  const b = await s.api('GET', '/healthz');
  t.regex(a.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  t.not(a.headers.get('x-request-id'), b.headers.get('x-request-id'));
  t.is((await s.api('GET', '/healthz', { headers: { 'X-Request-Id': 'trace-123' } })).headers.get('x-request-id'), 'trace-123');
  t.not((await s.api('GET', '/healthz', { headers: { 'X-Request-Id': 'bad id\twith tab' } })).headers.get('x-request-id'), 'bad id\twith tab');
});

test('request logs carry id, method, path, status, duration, tenant; never tokens or passwords', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/?token=leak-me', { body: { username: ADMIN.username, password: ADMIN.password } });
  const id = res.headers.get('x-request-id')!;
  await s.api('GET', '/api/profile/', { token });
  const line = logLines.find((l) => l.includes(id) && l.includes('"msg":"request"'));
  t.truthy(line);
  const entry = JSON.parse(line!);
  t.like(entry, { method: 'POST', path: '/api/auth/jwt/token/', status: 200, tenant: null });
  t.is(typeof entry.durationMs, 'number');
  const all = logLines.join('\n');
  t.false(all.includes(ADMIN.password));
  t.false(all.includes(token));
  t.false(all.includes('leak-me'));
});

test('security headers on every response', async (t) => {
  const res = await s.api('GET', '/api/profile/', { token });
  t.is(res.headers.get('x-content-type-options'), 'nosniff');
  t.truthy(res.headers.get('content-security-policy'));
  t.truthy(res.headers.get('x-frame-options'));
  t.is(res.headers.get('referrer-policy'), 'no-referrer');
});

test('CORS: allowed origins get the headers, others do not', async (t) => {
  const ok = await s.api('OPTIONS', '/api/profile/', { headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'GET' } });
  t.is(ok.headers.get('access-control-allow-origin'), 'https://app.example.com');
  t.regex(ok.headers.get('access-control-allow-headers') ?? '', /Authorization/);
  const other = await s.api('GET', '/healthz', { headers: { Origin: 'https://evil.example.com' } });
  t.is(other.headers.get('access-control-allow-origin'), null);
});

test('health and readiness probes live outside /api', async (t) => {
  t.deepEqual((await s.api('GET', '/healthz')).body, { status: 'ok' });
  const ready = await s.api('GET', '/readyz');
  t.is(ready.status, 200);
  t.is(ready.body.database, 'ok');
});

test('OpenAPI 3.1 at /api/schema/, generated from the route schemas', async (t) => {
  const res = await s.api('GET', '/api/schema/');
  t.is(res.status, 200);
  const doc = res.body;
  t.is(doc.openapi, '3.1.0');
  const token = doc.paths['/api/auth/jwt/token/'].post;
  t.deepEqual(token.requestBody.content['application/json'].schema.required, ['username', 'password']);
  t.deepEqual(doc.paths['/api/cloud/users/'].get.security, [{ bearerAuth: [] }, { sessionAuth: [] }]);
  t.deepEqual(token.security, []);
  t.truthy(doc.paths['/api/cloud/users/{user}/'].put);
  t.truthy(doc.paths['/api/users/{user}/'].get, 'the /api/users/ alias is documented too');
  t.truthy(doc.components.schemas.User.properties.username);
  t.falsy(doc.components.schemas.User.properties.password);
  const params = doc.paths['/api/cloud/users/'].get.parameters.map((p: { name: string }) => p.name);
  t.true(params.includes('page_size') && params.includes('search'));
});

test('Swagger UI and Redoc are served from local packages (no CDN)', async (t) => {
  const swagger = await s.api('GET', '/api/docs/');
  t.is(swagger.status, 200);
  t.regex(swagger.headers.get('content-type') ?? '', /text\/html/);
  t.false(/https?:\/\//.test(swagger.text.replace(/<!doctype html>/i, '')));
  for (const src of swagger.text.match(/(?:src|href)="([^"]+)"/g)!.map((m) => m.split('"')[1])) {
    t.is((await s.api('GET', src)).status, 200, src);
  }
  const redoc = await s.api('GET', '/api/redoc/');
  t.is(redoc.status, 200);
  const bundle = await s.api('GET', '/api/redoc/redoc.standalone.js');
  t.is(bundle.status, 200);
  t.true(bundle.text.length > 100_000);
});

test('pagination edges: defaults, clamping, absolute links, page past the end', async (t) => {
  for (let i = 0; i < 3; i++) {
    await s.api('POST', '/api/cloud/users/', { token, body: { username: `pager-${i}`, password: 'pager-pass-1' } });
  }
  const all = await s.api('GET', '/api/cloud/users/?search=pager-', { token });
  t.is(all.body.count, 3);
  t.is(all.body.next, null);
  t.is(all.body.previous, null);
  const p1 = await s.api('GET', '/api/cloud/users/?search=pager-&page_size=2', { token });
  t.is(p1.body.results.length, 2);
  t.is(p1.body.next, `${s.url.replace('127.0.0.1', '127.0.0.1')}/api/cloud/users/?search=pager-&page_size=2&page=2`);
  const p2 = await s.api('GET', new URL(p1.body.next).pathname + new URL(p1.body.next).search, { token });
  t.is(p2.body.results.length, 1);
  t.truthy(p2.body.previous);
  t.false(new URL(p2.body.previous).searchParams.has('page'));
  t.is((await s.api('GET', '/api/cloud/users/?search=pager-&page_size=2&page=3', { token })).status, 404);
  t.is((await s.api('GET', '/api/cloud/users/?page=0', { token })).status, 404);
  t.is((await s.api('GET', '/api/cloud/users/?page=abc', { token })).status, 404);
  t.is((await s.api('GET', "/api/cloud/users/?page=1'--", { token })).status, 404);
  const clamped = await s.api('GET', '/api/cloud/users/?page_size=100000', { token });
  t.is(clamped.status, 200);
  t.true(clamped.body.results.length <= 100);
  const empty = await s.api('GET', '/api/cloud/users/?search=nobody-at-all', { token });
  t.deepEqual(empty.body, { count: 0, next: null, previous: null, results: [] });
});
