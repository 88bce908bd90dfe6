import { randomBytes } from 'node:crypto';
import test from 'ava';
import { Redis } from 'ioredis';
import { createTestSite } from '../../shared/testing/sites.ts';
import { startServer } from '../main.ts';
import { ownRedis } from './dependencies.ts';
import { ADMIN, REDIS_REQUIRED, request, startTestServer, testRedis, type TestServer } from './helpers.ts';

const LIMITS = {
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_AUTH_PER_HOUR: '4',
  RATE_LIMIT_STANDARD_PER_MINUTE: '6',
  RATE_LIMIT_WRITE_PER_MINUTE: '2',
  RATE_LIMIT_USER_PER_HOUR: '1000',
  RATE_LIMIT_ANON_PER_HOUR: '1000',
  RATE_LIMIT_BURST_PER_MINUTE: '3',
};

// Needs Redis. In CI (REDIS_REQUIRED) it runs, and fails when Redis does not answer; elsewhere,
// without Redis, it is skipped and its title says why.
const redis = await testRedis();
const skipShared = redis.url === undefined && !REDIS_REQUIRED;
const sharedTitle = 'with REDIS_URL, two server processes share the counters';

function assert429(t: import('ava').ExecutionContext, res: Awaited<ReturnType<TestServer['api']>>) {
  t.is(res.status, 429);
  t.like(res.body, { status: 'error', code: 'RATE_LIMIT_EXCEEDED', error: 'Too many requests.' });
  t.true(Number.isInteger(res.body.retry_after) && res.body.retry_after > 0);
  t.regex(res.body.detail, /Expected available in \d+ seconds?\./);
  t.is(res.headers.get('retry-after'), String(res.body.retry_after));
  t.is(res.headers.get('x-ratelimit-remaining'), '0');
  const reset = Number(res.headers.get('x-ratelimit-reset'));
  t.true(reset > Date.now() / 1000 && reset < Date.now() / 1000 + 3700);
}

test('login attempts, cloud-console requests, writes and anonymous bursts are limited (in memory)', async (t) => {
  const s = await startTestServer({ ...LIMITS, RATE_LIMIT_KEY_PREFIX: `t${randomBytes(4).toString('hex')}` });
  try {
    // Authentication: 4 attempts an hour per client address, successful or not.
    const creds = { username: ADMIN.username, password: ADMIN.password };
    const first = await s.api('POST', '/api/auth/jwt/token/', { body: creds });
    t.is(first.status, 200);
    t.is(first.headers.get('x-ratelimit-limit'), '3'); // the tightest limit that applied: burst
    const token = first.body.access;
    for (let i = 0; i < 2; i++) await s.api('POST', '/api/auth/jwt/token/', { body: { ...creds, password: 'wrong-password' } });
    // Anonymous burst (3 a minute) is exhausted by now.
    assert429(t, await s.api('POST', '/api/auth/jwt/token/', { body: creds }));

    // Authenticated cloud-console requests: 6 a minute per user, headers count down.
    const remaining: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await s.api('GET', '/api/cloud/users/', { token });
      t.is(res.status, 200);
      remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
    }
    t.deepEqual(remaining, [5, 4, 3, 2, 1, 0]);
    assert429(t, await s.api('GET', '/api/cloud/users/', { token }));
    // The same route through its alias is the same cloud-console operation; another spelling is no route.
    assert429(t, await s.api('GET', '/api/users/', { token }));
    t.is((await s.api('GET', '/api/Cloud/users/', { token })).status, 404);
    // Outside /api/cloud/ the standard limit does not apply (the hourly user limit does).
    t.is((await s.api('GET', '/api/profile/', { token })).status, 200);
    // Writes: 2 a minute per user.
    t.is((await s.api('PUT', '/api/profile/', { token, body: { first_name: 'A' } })).status, 200);
    t.is((await s.api('PUT', '/api/profile/', { token, body: { first_name: 'B' } })).status, 200);
    assert429(t, await s.api('PUT', '/api/profile/', { token, body: { first_name: 'C' } }));
    // Probes and docs are never limited.
    for (let i = 0; i < 5; i++) t.is((await s.api('GET', '/healthz')).status, 200);
    t.is((await s.api('GET', '/api/schema/')).status, 200);
  } finally {
    await s.close();
  }
});

test('RATE_LIMIT_ENABLED=false turns every limit off', async (t) => {
  const s = await startTestServer({ ...LIMITS, RATE_LIMIT_ENABLED: 'false' });
  try {
    for (let i = 0; i < 6; i++) {
      t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: 'wrong-password' } })).status, 401);
    }
    t.is((await s.api('GET', '/healthz')).headers.get('x-ratelimit-limit'), null);
  } finally {
    await s.close();
  }
});

(skipShared ? test.skip : test)(skipShared ? `${sharedTitle} (skipped outside CI: ${redis.missing})` : sharedTitle, async (t) => {
  const redisUrl = redis.url;
  if (redisUrl === undefined) {
    t.fail(`${redis.missing}: CI provides Redis (.ci/run starts it), so this test must run there.`);
    return;
  }
  const prefix = `t${randomBytes(4).toString('hex')}`;
  const a = await startTestServer({ ...LIMITS, REDIS_URL: redisUrl, RATE_LIMIT_KEY_PREFIX: prefix, RATE_LIMIT_STANDARD_PER_MINUTE: '4' });
  const b = await startServer({ ...a.config, port: 0 }, { migrate: false, announce: () => undefined });
  try {
    const token = (await a.login()).access;
    t.is((await request(a.url, 'GET', '/api/cloud/users/', { token })).status, 200);
    t.is((await request(b.url, 'GET', '/api/cloud/users/', { token })).status, 200);
    t.is((await request(a.url, 'GET', '/api/cloud/users/', { token })).status, 200);
    const last = await request(b.url, 'GET', '/api/cloud/users/', { token });
    t.is(last.status, 200);
    t.is(last.headers.get('x-ratelimit-remaining'), '0');
    const over = await request(a.url, 'GET', '/api/cloud/users/', { token });
    assert429(t, over);
  } finally {
    await b.close();
    await a.close();
  }
});

test('letter case and the /sites/ prefix do not escape the limits: one route, one counter', async (t) => {
  const s = await startTestServer({ ...LIMITS, RATE_LIMIT_BURST_PER_MINUTE: '1000', RATE_LIMIT_KEY_PREFIX: `t${randomBytes(4).toString('hex')}` });
  try {
    const wrong = { username: ADMIN.username, password: 'wrong-password' };
    // Other spellings of the token route either do not exist or count against the same limit (4 an hour).
    for (const path of ['/API/AUTH/JWT/TOKEN/', '/Api/Auth/Jwt/Token/', '/api/auth/jwt/TOKEN/']) {
      const res = await s.api('POST', path, { body: wrong });
      t.is(res.status, 404, path);
      t.is(res.headers.get('x-ratelimit-limit'), null, path);
    }
    for (let i = 0; i < 4; i++) t.is((await s.api('POST', '/api/auth/jwt/token/', { body: wrong })).status, 401);
    assert429(t, await s.api('POST', '/api/auth/jwt/token/', { body: wrong }));
    // A second trailing slash reaches the same route: limited too; no trailing slash is no route.
    assert429(t, await s.api('POST', '/api/auth/jwt/token//', { body: wrong }));
    t.is((await s.api('POST', '/api/auth/jwt/token', { body: wrong })).status, 404);
    // Under /sites/{schema}/ (host routing strips the prefix) the site's token route is limited too.
    const other = await startTestServer({ ...LIMITS, RATE_LIMIT_BURST_PER_MINUTE: '1000' });
    try {
      const onSite = await createTestSite(other.handle.db.orm.em.fork());
      for (const prefix of [`/SITES/${onSite.schema}`, `/sites/${onSite.schema.toUpperCase()}`]) {
        t.is((await other.api('POST', `${prefix}/api/auth/jwt/token/`, { body: wrong })).status, 404, prefix);
      }
      t.is((await other.api('POST', `/sites/${onSite.schema}/API/auth/jwt/token/`, { body: wrong })).status, 404);
      for (let i = 0; i < 4; i++) t.is((await other.api('POST', `/sites/${onSite.schema}/api/auth/jwt/token/`, { body: wrong })).status, 401);
      assert429(t, await other.api('POST', `/sites/${onSite.schema}/api/auth/jwt/token/`, { body: wrong }));
    } finally {
      await other.close();
    }
  } finally {
    await s.close();
  }
});

test('behind TRUST_PROXY_HOPS proxies, the client address is the entry the nearest proxy appended: a spoofed leftmost entry changes nothing', async (t) => {
  const s = await startTestServer({ ...LIMITS, TRUST_PROXY: 'true', RATE_LIMIT_KEY_PREFIX: `t${randomBytes(4).toString('hex')}` });
  const s2 = await startTestServer({ ...LIMITS, TRUST_PROXY: 'true', TRUST_PROXY_HOPS: '2', RATE_LIMIT_KEY_PREFIX: `t${randomBytes(4).toString('hex')}` });
  try {
    // One proxy: it appends the address it saw (203.0.113.7); whatever the client wrote before it is not trusted.
    const via = (spoofed: string) => ({ headers: { 'X-Forwarded-For': `${spoofed}, 203.0.113.7` } });
    for (let i = 0; i < 3; i++) t.is((await s.api('GET', '/api/profile/', via(`198.51.100.${i}`))).status, 401);
    assert429(t, await s.api('GET', '/api/profile/', via('198.51.100.99')));
    // Another client behind the same proxy has a counter of its own.
    t.is((await s.api('GET', '/api/profile/', { headers: { 'X-Forwarded-For': '203.0.113.8' } })).status, 401);
    // Two proxies: the client is the second entry from the right.
    const via2 = (spoofed: string) => ({ headers: { 'X-Forwarded-For': `${spoofed}, 203.0.113.7, 10.0.0.2` } });
    for (let i = 0; i < 3; i++) t.is((await s2.api('GET', '/api/profile/', via2(`198.51.100.${i}`))).status, 401);
    assert429(t, await s2.api('GET', '/api/profile/', via2('198.51.100.99')));
    t.is((await s2.api('GET', '/api/profile/', { headers: { 'X-Forwarded-For': '203.0.113.8, 10.0.0.2' } })).status, 401);
  } finally {
    await s2.close();
    await s.close();
  }
});

test('issue 29 #13: a frozen Redis (SIGSTOP) stalls no rate-limited request: they are answered within the command timeout, counted in process memory, and Redis counts again after SIGCONT', async (t) => {
  const own = await ownRedis();
  const s = await startTestServer({ ...LIMITS, RATE_LIMIT_STANDARD_PER_MINUTE: '1000', RATE_LIMIT_USER_PER_HOUR: '100000', REDIS_URL: own.url, REDIS_COMMAND_TIMEOUT_MS: '300', RATE_LIMIT_KEY_PREFIX: 'frozen' });
  let frozen = false;
  let guard: NodeJS.Timeout | undefined;
  try {
    const { access: token } = await s.login();
    const users = () => s.api('GET', '/api/cloud/users/', { token });
    t.is((await users()).status, 200);
    own.freeze();
    frozen = true;
    // The freeze lasts 8 s at most: every answer must come before it ends.
    guard = setTimeout(() => {
      frozen = false;
      own.thaw();
    }, 8_000);
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await users());
    answers.push(...(await Promise.all(Array.from({ length: 5 }, users))));
    t.true(frozen, 'answered only once the freeze ended');
    for (const res of answers) {
      t.is(res.status, 200, res.text);
      t.is(res.headers.get('x-ratelimit-limit'), '1000');
    }
    // Counted meanwhile, in memory: the sequential answers count down.
    const remaining = answers.slice(0, 5).map((r) => Number(r.headers.get('x-ratelimit-remaining')));
    t.deepEqual(remaining, [...remaining].sort((a, b) => b - a));
    t.is(new Set(remaining).size, 5);
    clearTimeout(guard);
    own.thaw();
    frozen = false;
    // Once the pause is over, the counters are Redis's again (its count went on from before the freeze).
    await new Promise((r) => setTimeout(r, 5_500));
    const again = await users();
    t.is(again.status, 200);
    const keys = new Redis(own.url);
    try {
      const [key] = await keys.keys('frozen:standard:*');
      t.is(Number(await keys.get(key!)), 1000 - Number(again.headers.get('x-ratelimit-remaining')));
    } finally {
      keys.disconnect();
    }
  } finally {
    clearTimeout(guard);
    if (frozen) own.thaw();
    await s.close();
    await own.close();
  }
});
