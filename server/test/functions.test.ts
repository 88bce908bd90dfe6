// Functions inside apps over HTTP: CRUD (GET → edit → PUT back), max_functions, invocation as the
// caller (the SDK carries the caller's rights), environment from secrets (never in the logs),
// sandbox limits end to end, the policy action `execute`, who sees which invocations, tenant
// isolation, and queued executions surviving a server restart.
import test from 'ava';
import { startServer, type ServerHandle } from '../main.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { request, startTestServer, statementCounter, type TestServer } from './helpers.ts';
import { seedCrm } from './crm.ts';
import { SITE_PASSWORD, seedSiteUser, siteToken, twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const F = '/api/apps/crm/functions/';

const on = (site: TestSite, method: string, path: string, body?: unknown, token = tok.adminA) => s.api(method, path, { host: site.domain, token, body });
const onA = (method: string, path: string, body?: unknown, token?: string) => on(a, method, path, body, token);
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

test.before(async () => {
  s = await startTestServer({ FUNCTION_CPU_LIMIT_MS: '500', FUNCTION_MEMORY_LIMIT_MB: '16' });
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a, b]);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('CRUD: create with defaults, read, list, PATCH, GET → edit → PUT back, immutable slug, delete', async (t) => {
  const made = await onA('POST', F, { name: 'Hello World', code: 'export default (e) => ({ hello: e?.name ?? "world" })' });
  t.is(made.status, 201, made.text);
  t.like(made.body, { name: 'Hello World', slug: 'hello-world', runtime: 'javascript', timeout: 300, environment: {}, is_active: true, app_slug: 'crm', description: '' });
  t.true(Number.isInteger(made.body.id));
  t.is((await onA('POST', F, { name: 'Hello World', code: 'export default () => 1' })).body.slug, 'hello-world-2');
  t.is((await onA('POST', F, { name: 'x', slug: 'hello-world', code: 'export default () => 1' })).status, 400, 'an explicit slug taken');
  const list = await onA('GET', `${F}?search=hello`);
  t.is(list.body.count, 2);

  const patched = await onA('PATCH', `${F}hello-world/`, { description: 'Greets', timeout: 5 });
  t.like(patched.body, { description: 'Greets', timeout: 5, name: 'Hello World' });
  const got = (await onA('GET', `${F}hello-world/`)).body;
  const put = await onA('PUT', `${F}hello-world/`, { ...got, name: 'Hello' });
  t.is(put.status, 200, put.text);
  t.like(put.body, { name: 'Hello', description: 'Greets', slug: 'hello-world' });
  const renamed = await onA('PUT', `${F}hello-world/`, { ...got, slug: 'other' });
  t.is(renamed.status, 400);
  t.truthy(renamed.body.errors.slug);

  const bad = await onA('POST', F, { name: 'bad', code: 'x', timeout: 0, environment: { 'lower-case': 'K' } });
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.timeout);
  t.true(Object.keys(bad.body.errors).some((k) => k.startsWith('environment')), JSON.stringify(bad.body.errors));
  const noSecret = await onA('POST', F, { name: 'env', code: 'export default () => 1', environment: { API_KEY: 'no-such-secret' } });
  t.is(noSecret.status, 400);
  t.regex(noSecret.body.errors.environment[0], /API_KEY: no secret "no-such-secret"/);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".functions WHERE name = 'env'`))[0].n, 0, 'nothing made');

  t.is((await onA('DELETE', `${F}hello-world-2/`)).status, 204);
  t.is((await onA('GET', `${F}hello-world-2/`)).status, 404);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".policies WHERE name = 'function:hello-world-2'`))[0].n, 0, 'its system policies went with it');
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".policies WHERE name = 'function:hello-world' AND is_system`))[0].n, 2, 'system policies: unscoped deny, scoped allow');
});

test.serial('who may: users execute but neither manage nor read code; another site reaches nothing', async (t) => {
  t.is((await onA('POST', F, { name: 'mine', code: 'export default () => 1' }, tok.pleb)).status, 403);
  t.is((await onA('GET', `${F}hello-world/`, undefined, tok.pleb)).status, 403);
  t.is((await onA('GET', F, undefined, tok.pleb)).status, 403);
  t.is((await onA('PATCH', `${F}hello-world/`, { code: 'export default () => 2' }, tok.pleb)).status, 403);
  t.is((await onA('DELETE', `${F}hello-world/`, undefined, tok.pleb)).status, 403);
  t.is((await onA('POST', `${F}hello-world/invoke/`, {})).status, 200);
  t.is((await onA('POST', `${F}hello-world/invoke/`, {}, tok.pleb)).status, 200);
  // Site B's administrator: its token is not valid on A, and B has no such function.
  t.is((await onA('GET', `${F}hello-world/`, undefined, tok.adminB)).status, 401);
  t.is((await onA('POST', `${F}hello-world/invoke/`, {}, tok.adminB)).status, 401);
  t.is((await on(b, 'GET', `${F}hello-world/`, undefined, tok.adminB)).status, 404);
  t.is((await on(b, 'POST', `${F}hello-world/invoke/`, {}, tok.adminB)).status, 404);
  t.is((await on(b, 'GET', F, undefined, tok.adminB)).body.count, 0);
  t.is((await s.api('POST', `${F}hello-world/invoke/`, { host: a.domain, body: {} })).status, 401, 'anonymous');
});

test.serial('invoke: the result, logs, duration; async answers 202 and the record ends', async (t) => {
  await onA('PATCH', `${F}hello-world/`, { code: 'export default async (e, ctx) => { console.log("hi", e.name); return { hello: e.name, fn: ctx.function.slug, user: ctx.user.username } }' });
  const res = await onA('POST', `${F}hello-world/invoke/`, { payload: { name: 'Ada' } });
  t.is(res.status, 200, res.text);
  t.like(res.body, { status: 'succeeded', result: { hello: 'Ada', fn: 'hello-world', user: 'boss' }, trigger: 'api', payload: { name: 'Ada' }, error: null, attempts: 1 });
  t.is(res.body.logs[0].message, 'hi Ada');
  t.true(Number.isInteger(res.body.duration_ms));
  const queued = await onA('POST', `${F}hello-world/invoke/`, { payload: { name: 'Later' }, async: true });
  t.is(queued.status, 202);
  t.true(['queued', 'running', 'succeeded'].includes(queued.body.status));
  let record;
  for (let i = 0; i < 50; i++) {
    record = (await onA('GET', `${F}hello-world/invocations/${queued.body.uuid}/`)).body;
    if (record.status === 'succeeded') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.like(record, { status: 'succeeded', result: { hello: 'Later' } });
  t.is((await sql('SELECT count(*)::int AS n FROM public.function_jobs'))[0].n, 0, 'the queue is empty once they ended');
});

test.serial('issue 33: a warm invocation sends two statements (one when queued), outside any transaction', async (t) => {
  const counter = statementCounter(s);
  try {
    const sent = async (body: unknown, status: number) => {
      const res = await onA('POST', `${F}hello-world/invoke/`, body, tok.pleb);
      t.is(res.status, status, res.text);
      return res.body;
    };
    await sent({ payload: { name: 'warm' } }, 200); // warms the user, the function and the policies
    const ran = await counter.fewest(() => sent({ payload: { name: 'Two' } }, 200));
    t.like(ran, { statements: 2, transactions: 0 });
    t.like(ran.result, { status: 'succeeded', result: { hello: 'Two', user: 'pleb' }, attempts: 1, function_slug: 'hello-world' });
    t.truthy(ran.result.started_at && ran.result.finished_at);
    // Queued: one statement and no transaction (it was a transaction). This process's queue, woken at once,
    // may send its claim and the run's start before the answer goes out: at most 3 are counted.
    const queued = await counter.fewest(() => sent({ payload: { name: 'Later' }, async: true }, 202));
    t.like(queued, { transactions: 0, result: { status: 'queued', attempts: 0 } });
    t.true(queued.statements <= 3, `${queued.statements} statements`);
  } finally {
    counter.restore();
  }
});

test.serial('the SDK calls the API as the invoking user', async (t) => {
  const made = await onA('POST', F, {
    name: 'whoami',
    code: `export default async () => {
      const me = await platform.get('/api/profile/');
      const users = await platform.get('/api/users/');
      return { me: me.data.username, users: users.status };
    }`,
  });
  t.is(made.status, 201, made.text);
  t.like((await onA('POST', `${F}whoami/invoke/`, {})).body, { status: 'succeeded', result: { me: 'boss', users: 200 } });
  t.like((await onA('POST', `${F}whoami/invoke/`, {}, tok.pleb)).body, { status: 'succeeded', result: { me: 'pleb', users: 403 } }, 'pleb may not list users, nor may its function');
  // The SDK's token of a user serves that user's next runs only while its generation holds: after a
  // password change (the user's earlier tokens refused) a run signs a new one.
  await seedSiteUser(s, a, 'sdk-user');
  const first = await siteToken(s, a, 'sdk-user');
  t.like((await onA('POST', `${F}whoami/invoke/`, {}, first)).body, { status: 'succeeded', result: { me: 'sdk-user', users: 403 } });
  const changed = await onA('POST', '/api/profile/change-password/', { old_password: SITE_PASSWORD, new_password: 'Another-pass-word-2' }, first);
  t.is(changed.status, 200, changed.text);
  t.is((await onA('GET', '/api/profile/', undefined, first)).status, 401, 'the tokens from before the change are refused');
  const login = await s.api('POST', '/api/auth/jwt/token/', { host: a.domain, body: { username: 'sdk-user', password: 'Another-pass-word-2' } });
  t.is(login.status, 200, login.text);
  t.like((await onA('POST', `${F}whoami/invoke/`, {}, login.body.access)).body, { status: 'succeeded', result: { me: 'sdk-user', users: 403 } });
});

test.serial('environment from secrets: resolved at run time, the app\'s own first, never in logs or errors', async (t) => {
  t.is((await onA('POST', '/api/secrets/', { key: 'API_TOKEN', value: 'tenant-wide-token-value' })).status, 201);
  t.is((await onA('POST', '/api/secrets/', { key: 'API_TOKEN', app: 'crm', value: 'crm-own-token-value' })).status, 201);
  const made = await onA('POST', F, { name: 'env', environment: { TOKEN: 'API_TOKEN' }, code: 'export default (e, ctx) => { console.log("token is", ctx.env.TOKEN); if (e?.fail) throw new Error("bad " + ctx.env.TOKEN); return ctx.env.TOKEN.length }' });
  t.is(made.status, 201, made.text);
  const ok = (await onA('POST', `${F}env/invoke/`, {})).body;
  t.is(ok.result, 'crm-own-token-value'.length, "the app's own secret");
  t.is(ok.logs[0].message, 'token is ***');
  const failed = (await onA('POST', `${F}env/invoke/`, { payload: { fail: true } })).body;
  t.like(failed, { status: 'failed', error: { type: 'Error', message: 'bad ***' } });
  const [row] = await sql(`SELECT logs::text || error::text AS text FROM "${a.schema}".function_invocations WHERE id = ?`, [failed.id]);
  t.false(row.text.includes('crm-own-token-value'));
  // A secret deleted later: the run fails, naming the variable, without running the code.
  await onA('DELETE', '/api/secrets/API_TOKEN/?app=crm');
  await onA('DELETE', '/api/secrets/API_TOKEN/');
  t.like((await onA('POST', `${F}env/invoke/`, {})).body, { status: 'failed', error: { type: 'MissingSecret' }, logs: [] });
});

test.serial('limits end to end: CPU, memory, the function timeout; escapes stay inside', async (t) => {
  const fn = async (name: string, code: string, extra: Record<string, unknown> = {}) => {
    t.is((await onA('POST', F, { name, code, ...extra })).status, 201);
    return (await onA('POST', `${F}${name}/invoke/`, {})).body;
  };
  t.like(await fn('spin', 'export default () => { for (;;) {} }'), { status: 'failed', error: { type: 'CpuLimitExceeded' } });
  // Large blocks: the memory limit is reached in a few milliseconds, long before the CPU limit (small
  // objects reached it only after ≈ a second of CPU, and a loaded machine hit the CPU limit first).
  t.like(await fn('bomb', 'export default () => { const a = []; for (let i = 0; ; i++) a.push("x".repeat(1 << 20) + i) }'), { status: 'failed', error: { type: 'MemoryLimitExceeded' } });
  const wait = await fn('wait', "export default async () => { for (;;) await platform.get('/api/profile/') }", { timeout: 1 });
  t.true(['timed_out', 'failed'].includes(wait.status), JSON.stringify(wait.error));
  t.like(await fn('escape', "export default () => [typeof require, typeof process, typeof fetch, typeof globalThis.__host_request].join()"), { status: 'succeeded', result: 'undefined,undefined,undefined,undefined' });
  t.like(await fn('pollute', 'export default () => { Object.prototype.isAdmin = true; return 1 }'), { status: 'succeeded' });
  t.is(({} as Record<string, unknown>).isAdmin, undefined, 'the server process is untouched');
  t.is((await onA('POST', `${F}hello-world/invoke/`, { payload: { name: 'x' } })).body.status, 'succeeded', 'the server still serves invocations');
});

test.serial('the policy action `execute` decides invocation; inactive functions are not invoked', async (t) => {
  const policy = await onA('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: {
      resource: 'function:hello-world',
      version: 'default',
      rules: [
        { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
        { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'] },
      ],
    },
  });
  t.true([200, 201].includes(policy.status), policy.text);
  // issue 29 #9: pleb may neither execute it (the policies) nor read it (users never read code):
  // it is missing to them, answered as a function that does not exist.
  const hidden = await onA('POST', `${F}hello-world/invoke/`, { payload: { name: 'p' } }, tok.pleb);
  const missing = await onA('POST', `${F}no-such-function/invoke/`, { payload: { name: 'p' } }, tok.pleb);
  t.is(hidden.status, 404);
  t.deepEqual(hidden.body, JSON.parse(JSON.stringify(missing.body).replaceAll('no-such-function', 'hello-world')));
  t.is((await onA('GET', `${F}hello-world/invocations/`, undefined, tok.pleb)).status, 404, "a hidden function's invocations too");
  t.is((await onA('POST', `${F}hello-world/invoke/`, { payload: { name: 'p' } })).status, 200, 'staff hold the app role admin');
  const restored = await onA('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: { resource: 'function:hello-world', version: 'default', rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }] },
  });
  t.true([200, 201].includes(restored.status), restored.text);
  t.is((await onA('POST', `${F}hello-world/invoke/`, { payload: { name: 'p' } }, tok.pleb)).status, 200);
  t.is((await onA('PATCH', `${F}hello-world/`, { is_active: false })).status, 200);
  const inactive = await onA('POST', `${F}hello-world/invoke/`, {});
  t.is(inactive.status, 400);
  t.regex(inactive.body.message, /inactive/);
  await onA('PATCH', `${F}hello-world/`, { is_active: true });
});

test.serial('issue 29 #9: a function the policies hide from an administrator is left out of the list and is 403 where they may still act on it', async (t) => {
  const policy = await onA('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: {
      resource: 'function:whoami',
      version: 'default',
      rules: [
        { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] },
        { actions: ['read'], effect: 'EFFECT_DENY', roles: ['*'] },
      ],
    },
  });
  t.true([200, 201].includes(policy.status), policy.text);
  const list = await onA('GET', `${F}?page_size=100`);
  t.false(list.body.results.some((f: { slug: string }) => f.slug === 'whoami'), 'not listed');
  t.is(list.body.count, list.body.results.length);
  t.is((await onA('GET', `${F}whoami/`)).status, 403, 'visible (it may be executed), not readable');
  t.is((await onA('POST', `${F}whoami/invoke/`, {})).status, 200);
  const restored = await onA('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: { resource: 'function:whoami', version: 'default', rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }] },
  });
  t.true([200, 201].includes(restored.status), restored.text);
  t.true((await onA('GET', `${F}?page_size=100`)).body.results.some((f: { slug: string }) => f.slug === 'whoami'));
});

test.serial('issue 29 #4: every string of a secret, in every form the sandbox writes it, is masked in logs, results and errors; what is read is who may', async (t) => {
  const secret = { user: 'svc-account', password: 'tok"en-v@lue 42' };
  const made = await onA('POST', '/api/secrets/', { key: 'DB_LOGIN', app: 'crm', value: secret });
  t.is(made.status, 201, made.text);
  const code = `export default (e, ctx) => {
    const p = ctx.env.LOGIN.password;
    console.log('raw', p, 'json', JSON.stringify(ctx.env.LOGIN), 'url', encodeURIComponent(p));
    const b64 = e.b64;
    if (e.fail) throw new Error('bad login ' + JSON.stringify({ p }));
    return { raw: p, user: ctx.env.LOGIN.user, b64, nested: [{ [p]: p + '!' }], reversed: p.split('').reverse().join('') };
  }`;
  t.is((await onA('POST', F, { name: 'leaky', code, environment: { LOGIN: 'DB_LOGIN' } })).status, 201);
  const b64 = Buffer.from(secret.password).toString('base64');
  const ok = (await onA('POST', `${F}leaky/invoke/`, { payload: { b64 } }, tok.pleb)).body;
  t.is(ok.status, 'succeeded', JSON.stringify(ok.error));
  const text = JSON.stringify([ok.logs, ok.result, ok.error]);
  for (const form of [secret.password, JSON.stringify(secret.password).slice(1, -1), encodeURIComponent(secret.password), b64, secret.user]) {
    t.false(text.includes(form), `the form ${form} is masked`);
  }
  t.is(ok.logs[0].message, 'raw *** json {"user":"***","password":"***"} url ***');
  t.deepEqual(ok.result, { raw: '***', user: '***', b64: '***', nested: [{ '***': '***!' }], reversed: [...secret.password].reverse().join('') });
  const failed = (await onA('POST', `${F}leaky/invoke/`, { payload: { fail: true } }, tok.pleb)).body;
  t.is(failed.error.message, 'bad login {"p":"***"}');
  t.false(JSON.stringify(failed).includes('v@lue'));
  // What a function can transform (reversed above) cannot be masked: the defence is who reads the
  // record. Another user of the site sees none of pleb's invocations; another site reaches nothing.
  await seedSiteUser(s, a, 'other-user');
  const otherToken = await siteToken(s, a, 'other-user');
  t.is((await onA('GET', `${F}leaky/invocations/${ok.id}/`, undefined, otherToken)).status, 404);
  t.is((await onA('GET', `${F}leaky/invocations/`, undefined, otherToken)).body.count, 0);
  t.is((await on(b, 'GET', `${F}leaky/invocations/${ok.id}/`, undefined, tok.adminB)).status, 404);
});

test.serial('issue 29 #6: the SDK cannot leave its site\'s API with encoded dot segments (%2e%2e reached any path)', async (t) => {
  const code = `export default async (e) => {
    const out = [];
    for (const path of e.paths) {
      try { const r = await platform.get(path); out.push(r.status) } catch (err) { out.push(err.message) }
    }
    return out;
  }`;
  t.is((await onA('POST', F, { name: 'wander', code })).status, 201);
  const paths = [`/api/%2e%2e/%2e%2e/sites/${b.schema}/api/users/`, '/api/%2E%2E/%2E%2E/api/cloud/organizations/', '/api/..%2f..%2fapi%2fcloud%2forganizations/', '/api/../../sites/x/', '/api/profile/'];
  const res = await onA('POST', `${F}wander/invoke/`, { payload: { paths } });
  t.is(res.body.status, 'succeeded', JSON.stringify(res.body.error));
  const refused = 'platform.request: the path must be an /api/… path of this site.';
  t.deepEqual(res.body.result, [refused, refused, refused, refused, 200]);
});

test.serial('invocations: administrators see all, a user their own; by id or uuid', async (t) => {
  await onA('POST', `${F}whoami/invoke/`, {}, tok.pleb);
  const all = await onA('GET', `${F}whoami/invocations/`);
  t.is(all.status, 200);
  const mine = await onA('GET', `${F}whoami/invocations/`, undefined, tok.pleb);
  t.is(mine.status, 200);
  t.true(all.body.count > mine.body.count);
  t.true(mine.body.results.every((r: { invoked_by: string }) => r.invoked_by === mine.body.results[0].invoked_by));
  const bossRun = all.body.results.find((r: { invoked_by: string }) => r.invoked_by !== mine.body.results[0].invoked_by);
  t.is((await onA('GET', `${F}whoami/invocations/${bossRun.id}/`, undefined, tok.pleb)).status, 404, "another user's run");
  t.is((await onA('GET', `${F}whoami/invocations/${bossRun.id}/`)).body.uuid, bossRun.uuid);
  t.is((await onA('GET', `${F}whoami/invocations/?status=succeeded`)).body.count, all.body.count);
  t.is((await on(b, 'GET', `${F}whoami/invocations/`, undefined, tok.adminB)).status, 404);
});

test.serial('max_functions of the app settings bounds the functions of an app', async (t) => {
  const [{ n }] = await sql(`SELECT count(*)::int AS n FROM "${a.schema}".functions`);
  await sql(`UPDATE "${a.schema}".app_settings SET max_functions = ?`, [n]);
  const refused = await onA('POST', F, { name: 'one too many', code: 'export default () => 1' });
  t.is(refused.status, 400);
  t.regex(refused.body.errors.non_field_errors[0], /limit of \d+ functions/);
  await sql(`UPDATE "${a.schema}".app_settings SET max_functions = 100`);
});

test.serial('queued executions survive a server restart', async (t) => {
  // A server that claims nothing queues an execution and stops; another starts on the same database and runs it.
  const quiet = await startTestServer({ FUNCTION_QUEUE_ENABLED: 'false' });
  let next: ServerHandle | undefined;
  try {
    const site = await createTestSite(quiet.handle.db.orm.em.fork());
    await seedCrm(quiet, [site]);
    await seedSiteUser(quiet, site, 'boss', { staff: true });
    const token = await siteToken(quiet, site, 'boss');
    t.is((await quiet.api('POST', F, { host: site.domain, token, body: { name: 'later', code: 'export default (e) => e.n + 1' } })).status, 201);
    const queued = await quiet.api('POST', `${F}later/invoke/`, { host: site.domain, token, body: { payload: { n: 41 }, async: true } });
    t.is(queued.status, 202, queued.text);
    await new Promise((r) => setTimeout(r, 300));
    t.is((await quiet.api('GET', `${F}later/invocations/${queued.body.id}/`, { host: site.domain, token })).body.status, 'queued');
    await quiet.handle.close();
    next = await startServer({ ...quiet.config, functions: { ...quiet.config.functions, queueEnabled: true } }, { announce: () => undefined });
    let record;
    for (let i = 0; i < 50; i++) {
      record = (await request(next.url, 'GET', `${F}later/invocations/${queued.body.id}/`, { host: site.domain, token })).body;
      if (record.status === 'succeeded') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    t.like(record, { status: 'succeeded', result: 42, attempts: 1 });
  } finally {
    await next?.close();
    await quiet.close();
  }
});
