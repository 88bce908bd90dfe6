// Platform events (spec Part 1 §6): the routes with their bodies and errors; PRE_USER_CREATE
// subscribers run in parallel before a site user is saved and any failure aborts the creation
// (nothing left behind); POST_USER_CREATE subscribers run after it, asynchronously, and their
// failures do not affect it; publication only on the site that owns the subscription.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { seedCrm } from './crm.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const fn: Record<string, number> = {};
const F = '/api/apps/crm/functions/';

const on = (site: TestSite, method: string, path: string, body?: unknown, token = site === a ? tok.adminA : tok.adminB) => s.api(method, path, { host: site.domain, token, body });
const onA = (method: string, path: string, body?: unknown, token?: string) => on(a, method, path, body, token);
const sql = (text: string, params: unknown[] = []): Promise<any[]> => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const userCount = async (site: TestSite, username: string) => (await sql(`SELECT count(*)::int AS n FROM "${site.schema}".users WHERE username = ?`, [username]))[0].n as number;

async function makeFunction(site: TestSite, name: string, code: string): Promise<number> {
  const res = await on(site, 'POST', F, { name, code });
  if (res.status !== 201) throw new Error(res.text);
  return res.body.id;
}

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  let v = await read();
  for (let i = 0; i < 100 && !done(v); i++) {
    await new Promise((r) => setTimeout(r, 50));
    v = await read();
  }
  return v;
}

test.before(async () => {
  s = await startTestServer({ FUNCTION_CPU_LIMIT_MS: '1000' });
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a, b]);
  fn.checkDomain = await makeFunction(a, 'check domain', 'export default async (e) => { if (!e.user.email.endsWith("@corp.example")) throw new Error("only corp addresses: " + e.user.email); return "ok" }');
  fn.audit = await makeFunction(a, 'audit', 'export default async (e) => { console.log("audit", e.user.username); return e.user.username }');
  fn.welcome = await makeFunction(a, 'welcome', 'export default async (e) => { console.log("welcome", e.user.id); return { id: e.user.id, username: e.user.username } }');
  fn.broken = await makeFunction(a, 'broken', 'export default async () => { throw new Error("mailer down") }');
  fn.bBlocker = await makeFunction(b, 'blocker', 'export default () => { throw new Error("site B blocks everyone") }');
});
test.after.always(async () => {
  await s?.close();
});

test.serial('GET /api/cloud/events/ lists the event types; authentication required', async (t) => {
  const res = await onA('GET', '/api/cloud/events/');
  t.is(res.status, 200);
  t.deepEqual(res.body, { success: true, message: 'Event types retrieved.', data: { events: ['PRE_USER_CREATE', 'POST_USER_CREATE'] } });
  t.is((await s.api('GET', '/api/cloud/events/', { host: a.domain })).status, 401);
});

test.serial('subscribe / unsubscribe: bodies and errors of §6', async (t) => {
  const sub = await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.audit });
  t.is(sub.status, 200, sub.text);
  t.like(sub.body, { success: true, data: { event: 'PRE_USER_CREATE', function: fn.audit, function_name: 'audit', function_slug: 'audit', app_name: 'CRM', app_slug: 'crm' } });
  t.truthy(sub.body.data.id && sub.body.data.created_at && sub.body.data.updated_at);
  const again = await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.audit });
  t.is(again.status, 400);
  t.like(again.body, { success: false, message: `Function ${fn.audit} is already subscribed to PRE_USER_CREATE.` });
  const unknown = await onA('POST', '/api/cloud/events/USER_DELETE/subscribe/', { function_id: fn.audit });
  t.is(unknown.status, 400);
  t.is(unknown.body.message, 'Unknown event type "USER_DELETE". Valid types: PRE_USER_CREATE, POST_USER_CREATE.');
  const missing = await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: 999_999 });
  t.is(missing.status, 400);
  t.is(missing.body.message, 'Function with id 999999 does not exist.');
  t.is((await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.welcome }, tok.pleb)).status, 403, 'administrators only');

  const app = await onA('GET', '/api/apps/crm/events/PRE_USER_CREATE/');
  t.is(app.status, 200);
  t.like(app.body.data, { event: 'PRE_USER_CREATE', app: { name: 'CRM', slug: 'crm' }, total_subscribers: 1 });
  t.like(app.body.data.subscribers[0], { subscriber_id: sub.body.data.id, event: 'PRE_USER_CREATE', function_id: fn.audit, function_name: 'audit', function_slug: 'audit', app_slug: 'crm', app_name: 'CRM' });
  t.is((await onA('GET', '/api/apps/crm/events/NOPE/')).status, 400);

  const un = await onA('POST', '/api/cloud/events/PRE_USER_CREATE/unsubscribe/', { function_id: fn.audit });
  t.deepEqual(un.body, { success: true, message: 'Unsubscribed from PRE_USER_CREATE.', data: {} });
  const none = await onA('POST', '/api/cloud/events/PRE_USER_CREATE/unsubscribe/', { function_id: fn.audit });
  t.is(none.status, 404);
  t.is(none.body.success, false);
  t.is((await onA('GET', '/api/apps/crm/events/PRE_USER_CREATE/')).body.data.total_subscribers, 0);
});

test.serial('PRE_USER_CREATE: subscribers run in parallel before the user is saved; a failure aborts with nothing left behind', async (t) => {
  for (const id of [fn.checkDomain, fn.audit]) t.is((await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: id })).status, 200);
  const refused = await onA('POST', '/api/users/', { username: 'mallory', email: 'mallory@evil.example', password: 'a-long-password-1' });
  t.is(refused.status, 422, refused.text);
  t.regex(refused.body.message, /function "check domain": only corp addresses: mallory@evil\.example/);
  t.like(refused.body.data, { event: 'PRE_USER_CREATE', total_subscribers: 2 });
  const failedTask = refused.body.data.tasks.find((x: { function_id: number }) => x.function_id === fn.checkDomain);
  t.like(failedTask, { function_name: 'check domain', code: 'EXECUTION_ERROR' });
  t.true(Number.isInteger(failedTask.invocation_id) && typeof failedTask.task_id === 'string');
  t.is(await userCount(a, 'mallory'), 0, 'no user');
  const [inv] = await sql(`SELECT status, event, payload FROM "${a.schema}".function_invocations WHERE id = ?`, [failedTask.invocation_id]);
  t.like(inv, { status: 'failed', event: 'PRE_USER_CREATE' });
  t.like(inv.payload, { event: 'PRE_USER_CREATE', user: { username: 'mallory', email: 'mallory@evil.example' } });

  const ok = await onA('POST', '/api/users/', { username: 'carol', email: 'carol@corp.example', password: 'a-long-password-1' });
  t.is(ok.status, 201, ok.text);
  t.is(await userCount(a, 'carol'), 1);
  const runs = await sql(`SELECT f.slug, i.status, i.invoked_by FROM "${a.schema}".function_invocations i JOIN "${a.schema}".functions f ON f.id = i.function_id WHERE i.payload->'user'->>'username' = 'carol' ORDER BY f.slug`);
  t.deepEqual(runs.map((r: { slug: string; status: string }) => [r.slug, r.status]), [['audit', 'succeeded'], ['check-domain', 'succeeded']]);
  t.truthy(runs[0].invoked_by, 'run as the administrator who creates the user');

  for (const id of [fn.checkDomain, fn.audit]) await onA('POST', '/api/cloud/events/PRE_USER_CREATE/unsubscribe/', { function_id: id });
});

test.serial('a PRE_USER_CREATE execution is a job of the answering process with no retry left, gone when it ends', async (t) => {
  const slow = await makeFunction(a, 'slow check', 'export default () => { const end = Date.now() + 400; while (Date.now() < end) {} return "ok" }');
  await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: slow });
  const jobs = () => sql('SELECT locked_by, attempts, locked_until > now() AS leased FROM public.function_jobs WHERE site_schema = ?', [a.schema]);
  const creating = onA('POST', '/api/users/', { username: 'dana', email: 'dana@corp.example', password: 'a-long-password-1' });
  // While it runs: claimed by this server (a crash leaves it to another process, which records it failed instead of running it again).
  const running = await until(jobs, (rows) => rows.length > 0);
  t.like(running[0], { attempts: 3, leased: true });
  t.regex(running[0].locked_by, /^[0-9a-f-]{36}$/);
  t.is((await creating).status, 201);
  t.deepEqual(await jobs(), []);
  await onA('POST', '/api/cloud/events/PRE_USER_CREATE/unsubscribe/', { function_id: slow });
});

test.serial('POST_USER_CREATE: runs after the user is saved, with its id; a failing subscriber does not affect the creation', async (t) => {
  for (const id of [fn.welcome, fn.broken]) t.is((await onA('POST', '/api/cloud/events/POST_USER_CREATE/subscribe/', { function_id: id })).status, 200);
  const made = await onA('POST', '/api/users/', { email: 'dave@corp.example', password: 'a-long-password-1' });
  t.is(made.status, 201, made.text);
  const [{ uuid }] = await sql(`SELECT uuid FROM "${a.schema}".users WHERE username = 'dave'`);
  const runs = await until(
    () => sql(`SELECT f.slug, i.status, i.result, i.error FROM "${a.schema}".function_invocations i JOIN "${a.schema}".functions f ON f.id = i.function_id WHERE i.event = 'POST_USER_CREATE' ORDER BY f.slug`),
    (r: { status: string }[]) => r.length === 2 && r.every((x) => ['succeeded', 'failed'].includes(x.status)),
  );
  t.like(runs[0], { slug: 'broken', status: 'failed', error: { message: 'mailer down' } });
  t.like(runs[1], { slug: 'welcome', status: 'succeeded', result: { id: uuid, username: 'dave' } });
  t.is(await userCount(a, 'dave'), 1, 'the user stays');
  t.is((await sql('SELECT count(*)::int AS n FROM public.function_jobs'))[0].n, 0);
  for (const id of [fn.welcome, fn.broken]) await onA('POST', '/api/cloud/events/POST_USER_CREATE/unsubscribe/', { function_id: id });
});

test.serial("a site's subscriptions fire only for its own users; inactive functions are skipped", async (t) => {
  t.is((await on(b, 'POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.bBlocker })).status, 200);
  t.is((await onA('POST', '/api/users/', { username: 'erin', password: 'a-long-password-1' })).status, 201, "B's blocker does not run on A");
  t.is((await on(b, 'POST', '/api/users/', { username: 'erin', password: 'a-long-password-1' })).status, 422, 'it runs on B');
  t.is(await userCount(b, 'erin'), 0);
  t.is((await on(b, 'PATCH', `${F}blocker/`, { is_active: false })).status, 200);
  t.is((await on(b, 'POST', '/api/users/', { username: 'erin', password: 'a-long-password-1' })).status, 201, 'an inactive subscriber is skipped');
  // Another site's token reaches nothing of A's events.
  t.is((await onA('POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: fn.audit }, tok.adminB)).status, 401);
  t.is((await onA('GET', '/api/apps/crm/events/PRE_USER_CREATE/', undefined, tok.adminB)).status, 401);
  t.is((await on(b, 'GET', '/api/apps/crm/events/PRE_USER_CREATE/')).body.data.subscribers[0].function_id, fn.bBlocker);
});

test.serial("issue 29 #9: an app's event subscribers list only the functions the caller may read or execute", async (t) => {
  const policy = (rules: unknown[]) => onA('PUT', '/api/apps/crm/policies/', { resourcePolicy: { resource: 'function:welcome', version: 'default', rules } });
  t.is((await onA('POST', '/api/cloud/events/POST_USER_CREATE/subscribe/', { function_id: fn.welcome })).status, 200);
  const listed = async (token: string) => (await onA('GET', '/api/apps/crm/events/POST_USER_CREATE/', undefined, token)).body.data.subscribers.map((x: { function_id: number }) => x.function_id);
  t.true((await listed(tok.pleb)).includes(fn.welcome), 'pleb may execute it: listed');
  t.true([200, 201].includes((await policy([{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] }])).status));
  t.false((await listed(tok.pleb)).includes(fn.welcome), 'hidden from pleb: not listed');
  t.true((await listed(tok.adminA)).includes(fn.welcome), 'the administrator still sees it');
  t.true([200, 201].includes((await policy([{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }])).status));
  t.is((await onA('POST', '/api/cloud/events/POST_USER_CREATE/unsubscribe/', { function_id: fn.welcome })).status, 200);
});
