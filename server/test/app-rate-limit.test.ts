// An app's `rate_limit_per_hour` (Part 2 §2): per app and per caller (user, else client
// address) over the app's routes (/api/apps/{app_slug}/…) on its site, with the standard headers
// and 429 body; 0 closes the app; the settings routes stay reachable to change it.
import { randomBytes } from 'node:crypto';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type ApiResponse, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};

const onA = (method: string, p: string, options: { body?: unknown; who?: string | null } = {}) =>
  s.api(method, p, { host: a.domain, token: options.who === null ? undefined : tok[options.who ?? 'adminA'], body: options.body });
const limitHeaders = (res: ApiResponse) => [res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining')];

test.before(async () => {
  s = await startTestServer({
    RATE_LIMIT_ENABLED: 'true',
    RATE_LIMIT_KEY_PREFIX: `t${randomBytes(4).toString('hex')}`,
    RATE_LIMIT_ANON_PER_HOUR: '1000',
    RATE_LIMIT_BURST_PER_MINUTE: '1000',
    RATE_LIMIT_WRITE_PER_MINUTE: '1000',
  });
  ({ a } = await twoSitesWithUsers(s, tok));
  for (const [name, limit] of [['One', 3], ['Two', 1000]] as const) {
    const res = await onA('POST', '/api/apps/', { body: { name, settings: { rate_limit_per_hour: limit } } });
    if (res.status !== 201) throw new Error(res.text);
  }
});
test.after.always(async () => {
  await s?.close();
});

function assert429(t: import('ava').ExecutionContext, res: ApiResponse, limit: string) {
  t.is(res.status, 429, res.text);
  t.like(res.body, { status: 'error', code: 'RATE_LIMIT_EXCEEDED', error: 'Too many requests.' });
  t.regex(res.body.detail, /Expected available in \d+ seconds?\./);
  t.true(res.body.retry_after > 0 && res.body.retry_after <= 3600);
  t.is(res.headers.get('retry-after'), String(res.body.retry_after));
  t.deepEqual(limitHeaders(res), [limit, '0']);
}

test.serial('N requests per hour per app and caller, counted over all the app routes, with the standard headers and 429', async (t) => {
  const seen = [];
  for (const p of ['/api/apps/one/', '/api/apps/one/stats/', `/sites/${a.schema}/api/apps/one/datasources/`]) {
    const res = p.startsWith('/sites/') ? await s.api('GET', p, { token: tok.adminA }) : await onA('GET', p);
    t.is(res.status, 200, res.text);
    seen.push(limitHeaders(res));
  }
  t.deepEqual(seen, [['3', '2'], ['3', '1'], ['3', '0']]);
  assert429(t, await onA('GET', '/api/apps/one/'), '3');
  // Another caller has a counter of its own: a user, and an anonymous client by its address.
  t.deepEqual(limitHeaders(await onA('GET', '/api/apps/one/', { who: 'pleb' })), ['3', '2']);
  for (let i = 0; i < 3; i++) t.is((await onA('GET', '/api/apps/one/', { who: null })).status, 401);
  assert429(t, await onA('GET', '/api/apps/one/', { who: null }), '3');
  // Another app is not affected; nor are routes outside the apps.
  t.is((await onA('GET', '/api/apps/two/')).status, 200);
  t.is((await onA('GET', '/api/apps/')).status, 200);
});

test.serial('a settings change takes effect at once; 0 closes the app, and its settings stay reachable', async (t) => {
  t.is((await onA('GET', '/api/apps/one/')).status, 429);
  const raised = await onA('PATCH', '/api/apps/one/settings/', { body: { rate_limit_per_hour: 10 } });
  t.is(raised.status, 200, raised.text);
  const res = await onA('GET', '/api/apps/one/');
  t.is(res.status, 200);
  t.is(res.headers.get('x-ratelimit-limit'), '10');
  t.is((await onA('PATCH', '/api/apps/one/settings/', { body: { rate_limit_per_hour: 0 } })).status, 200);
  assert429(t, await onA('GET', '/api/apps/one/', { who: 'pleb' }), '0');
  t.is((await onA('GET', '/api/apps/one/settings/')).status, 200);
  t.is((await onA('GET', '/api/apps/two/')).status, 200);
});
