// Three server processes on one database and one Redis (real child processes, `platform serve`),
// driven in turn: what one of them changes, the others see within a second — shared rate-limit
// counters, token revocation, host routing, app settings and data table schemas; timer jobs run
// once per interval between them, and queued function executions once each, whichever process
// takes them. (cache-invalidation.test.ts covers every cache the same way, on three processes.)
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { startDnsStandIn, type DnsStandIn } from '../../shared/testing/dns.ts';
import { ADMIN, REDIS_REQUIRED, request, testRedis, type ApiResponse, type RequestOptions } from './helpers.ts';
import { serveMany, stopServed, within1s, type Served } from './processes.ts';
import pg from 'pg';


let redisUrl: string | undefined;
let redisMissing: string | undefined;
let db: TestDatabase;
let dns: DnsStandIn;
let a: Served;
let b: Served;
let c: Served;
let started: number;
const PRUNE_EVERY_MS = 300;

test.before(async () => {
  db = await createTestDatabase();
  const redis = await testRedis();
  redisUrl = redis.url;
  redisMissing = redis.missing;
  dns = await startDnsStandIn();
  started = Date.now();
  [a, b, c] = (await serveMany(db, 3, {
    ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
    RATE_LIMIT_KEY_PREFIX: `t${randomBytes(4).toString('hex')}`,
    DNS_SERVERS: dns.server,
    BLACKLIST_PRUNE_INTERVAL_MS: String(PRUNE_EVERY_MS),
    // The app limit is what is tested: the platform's own limits are counted too, across the three, so room for the tests' requests.
    RATE_LIMIT_AUTH_PER_HOUR: '100',
    RATE_LIMIT_WRITE_PER_MINUTE: '200',
    RATE_LIMIT_BURST_PER_MINUTE: '200',
  })) as [Served, Served, Served];
});
test.after.always(async () => {
  await Promise.all([a, b, c].map(stopServed));
  await db?.drop();
  await dns?.close();
});

const on = (s: Served, method: string, p: string, options?: RequestOptions) => request(s.url, method, p, options);
/** `probe` on B and on C each passes `ok` within a second; the answers. */
const onBoth = (probe: (s: Served) => Promise<ApiResponse>, ok: (res: ApiResponse) => boolean) => Promise.all([b, c].map((s) => within1s(() => probe(s), ok)));
const statuses = (answers: ApiResponse[]) => answers.map((r) => r.status);


test.serial('a site made through A: its domains route on B once verified and stop routing when their proof is gone or they are removed; app limits, settings and table schemas are shared', async (t) => {
  const root = (await on(a, 'POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } })).body.access;
  t.is((await on(a, 'POST', '/api/cloud/organizations/', { token: root, body: { name: 'Two Procs', slug: 'two-procs' } })).status, 201);
  const site = (await on(a, 'POST', '/api/cloud/organizations/two-procs/sites/', { token: root, body: { name: 'Shared' } })).body.data;
  const host = `extra-${randomBytes(3).toString('hex')}.example.com`;

  // Routing: B and C have cached "unknown host" before A adds it.
  t.is((await on(b, 'GET', '/api/apps/', { host })).status, 404);
  t.is((await on(c, 'GET', '/api/apps/', { host })).status, 404);
  const added = await on(a, 'POST', `/api/cloud/sites/${site.slug}/domains/`, { token: root, body: { domain: host } });
  t.is(added.status, 201);
  const verify = () => on(a, 'POST', `/api/cloud/sites/${site.slug}/domains/${host}/verify/`, { token: root });
  t.is((await on(a, 'GET', '/api/apps/', { host })).status, 404, 'unverified: A does not route it');
  dns.setTxt(added.body.data.verification.name, [added.body.data.verification.value]);
  t.is((await verify()).status, 200);
  // A cheap probe (no password hashing), so that load on the machine does not eat the second.
  t.deepEqual(statuses(await onBoth((s) => on(s, 'GET', '/api/apps/', { host }), (r) => r.status !== 404)), [401, 401], 'B and C route the domain A added');
  const login = await on(c, 'POST', '/api/auth/jwt/token/', { host, body: { username: ADMIN.username, password: ADMIN.password } });
  t.is(login.status, 200);
  const tok = login.body.access;

  // App limit: one counter for the three processes (Redis), and A's settings change is used by B and C.
  t.is((await on(a, 'POST', '/api/apps/', { host, token: tok, body: { name: 'crm', settings: { rate_limit_per_hour: 4 } } })).status, 201);
  if (redisUrl) {
    const remaining = [];
    for (const s of [a, b, c, a]) remaining.push((await on(s, 'GET', '/api/apps/crm/', { host, token: tok })).headers.get('x-ratelimit-remaining'));
    t.deepEqual(remaining, ['3', '2', '1', '0']);
    t.is((await on(b, 'GET', '/api/apps/crm/', { host, token: tok })).status, 429);
  } else if (REDIS_REQUIRED) {
    t.fail(`${redisMissing}: CI provides Redis (.ci/run starts it), so the shared counters must be checked there.`);
  } else {
    t.log(`${redisMissing}: shared counters not checked (outside CI)`);
  }
  t.is((await on(a, 'PATCH', '/api/apps/crm/settings/', { host, token: tok, body: { rate_limit_per_hour: 100 } })).status, 200);
  const raised = await onBoth((s) => on(s, 'GET', '/api/apps/crm/', { host, token: tok }), (r) => r.status === 200);
  t.deepEqual(raised.map((r) => r.headers.get('x-ratelimit-limit')), ['100', '100'], 'B and C use the limit A set');

  // Data table schema: changed through A, used by B and C.
  t.is((await on(a, 'POST', '/api/apps/crm/datasources/', { host, token: tok, body: { name: 'main', provider_type: 'flat_table' } })).status, 201);
  const table = '/api/apps/crm/datasources/main/datatables/';
  const fields = (type: string) => ({ fields: [{ name: 'n', type }] });
  t.is((await on(a, 'POST', table, { host, token: tok, body: { name: 'things', json_schema: fields('string') } })).status, 201);
  const check = (s: Served) => on(s, 'POST', `${table}things/validate_data/`, { host, token: tok, body: { data: [{ n: 'abc' }] } });
  t.true((await check(b)).body.is_valid);
  t.true((await check(c)).body.is_valid);
  t.is((await on(a, 'PATCH', `${table}things/`, { host, token: tok, body: { json_schema: fields('integer') } })).status, 200);
  t.deepEqual((await onBoth(check, (r) => r.body.is_valid === false)).map((r) => r.body.is_valid), [false, false], 'B and C validate with the schema A changed');

  // The proof gone, a re-check through A: B and C stop routing it at once; proven again, they route it again.
  dns.setTxt(added.body.data.verification.name, []);
  t.false((await verify()).body.is_verified);
  t.deepEqual(statuses(await onBoth((s) => on(s, 'GET', '/api/apps/', { host, token: tok }), (r) => r.status === 404)), [404, 404], 'B and C drop the domain that lost its proof');
  dns.setTxt(added.body.data.verification.name, [added.body.data.verification.value]);
  t.true((await verify()).body.is_verified);
  t.deepEqual(statuses(await onBoth((s) => on(s, 'GET', '/api/apps/', { host, token: tok }), (r) => r.status === 200)), [200, 200]);

  // Removing the domain through A: B and C stop routing it.
  t.is((await on(a, 'DELETE', `/api/cloud/sites/${site.slug}/domains/${host}/`, { token: root })).status, 200);
  t.deepEqual(statuses(await onBoth((s) => on(s, 'GET', '/api/apps/', { host, token: tok }), (r) => r.status === 404)), [404, 404], 'B and C forget the domain A removed');
});

test.serial('revocation through A holds on B and C: logout (refresh blacklisted) and password change (every token)', async (t) => {
  const user = { username: 'mover', password: 'Mover-pass-word-1' };
  const root = (await on(a, 'POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } })).body.access;
  t.is((await on(a, 'POST', '/api/cloud/users/', { token: root, body: { ...user, email: 'mover@example.com' } })).status, 201);
  const pair = (await on(b, 'POST', '/api/auth/jwt/token/', { body: user })).body;
  t.is((await on(b, 'POST', '/api/auth/jwt/token/refresh/', { body: { refresh: pair.refresh } })).status, 200);
  t.is((await on(a, 'POST', '/api/auth/jwt/token/blacklist/', { body: { refresh: pair.refresh } })).status, 200);
  t.is((await on(b, 'POST', '/api/auth/jwt/token/refresh/', { body: { refresh: pair.refresh } })).status, 401);
  t.is((await on(c, 'POST', '/api/auth/jwt/token/refresh/', { body: { refresh: pair.refresh } })).status, 401);

  t.is((await on(b, 'GET', '/api/profile/', { token: pair.access })).status, 200);
  t.is((await on(c, 'GET', '/api/profile/', { token: pair.access })).status, 200);
  const changed = await on(a, 'POST', '/api/profile/change-password/', { token: pair.access, body: { old_password: user.password, new_password: 'Moved-pass-word-2' } });
  t.is(changed.status, 200, changed.text);
  // B and C learn of the change by its notification: within a second (the cross-process bound), not before A answers.
  t.deepEqual(statuses(await onBoth((s) => on(s, 'GET', '/api/profile/', { token: pair.access }), (r) => r.status === 401)), [401, 401]);
  t.is((await on(c, 'POST', '/api/auth/jwt/token/', { body: user })).status, 401);
});

test.serial('queued function executions run once each, whichever process queued or takes them', async (t) => {
  const root = (await on(a, 'POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } })).body.access;
  const site = (await on(b, 'POST', '/api/cloud/organizations/two-procs/sites/', { token: root, body: { name: 'Queue' } })).body.data;
  const host = site.primary_domain;
  const tok = (await on(c, 'POST', '/api/auth/jwt/token/', { host, body: { username: ADMIN.username, password: ADMIN.password } })).body.access;
  t.is((await on(a, 'POST', '/api/apps/', { host, token: tok, body: { name: 'jobs' } })).status, 201);
  const F = '/api/apps/jobs/functions/';
  t.is((await on(b, 'POST', F, { host, token: tok, body: { name: 'count', code: 'export default (e) => ({ n: e.n })' } })).status, 201);
  const queued: string[] = [];
  for (let n = 0; n < 12; n++) {
    const res = await on([a, b, c][n % 3]!, 'POST', `${F}count/invoke/`, { host, token: tok, body: { payload: { n }, async: true } });
    t.is(res.status, 202, res.text);
    queued.push(res.body.uuid);
  }
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const ended = async () => (await client.query(`SELECT status, attempts, result FROM ${JSON.stringify(site.schema_name)}.function_invocations WHERE uuid = ANY($1::uuid[])`, [queued])).rows;
    const until = Date.now() + 15_000;
    let rows = await ended();
    while (rows.some((r) => r.status !== 'succeeded') && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
      rows = await ended();
    }
    t.is(rows.length, 12);
    t.deepEqual(rows.map((r) => [r.status, r.attempts]), Array(12).fill(['succeeded', 1]), 'each ran once');
    t.deepEqual(rows.map((r) => r.result.n).sort((x, y) => x - y), [...Array(12).keys()]);
    t.is((await client.query('SELECT count(*)::int AS n FROM public.function_jobs')).rows[0].n, 0, 'the queue is empty');
  } finally {
    await client.end();
  }
});

test.serial('a timer job runs once per interval between the three processes, not once per process', async (t) => {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const elapsed = Date.now() - started;
    const { rows } = await client.query(`SELECT runs::int AS runs FROM public.scheduled_jobs WHERE name = 'token blacklist pruning'`);
    const runs = rows[0]?.runs ?? 0;
    // Each process looks every interval: run per process, it would be about three times elapsed / interval.
    t.true(runs >= 2, `ran ${runs} times in ${elapsed} ms`);
    t.true(runs <= Math.ceil(elapsed / PRUNE_EVERY_MS) + 1, `ran ${runs} times in ${elapsed} ms at one run per ${PRUNE_EVERY_MS} ms`);
  } finally {
    await client.end();
  }
});
