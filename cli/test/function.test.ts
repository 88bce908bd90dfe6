// `platform function …` and `platform event …` in both modes (remote with the site's login,
// direct as the system actor): a function created from a file, invoked with a payload, its logs
// read back; subscriptions made and removed; the same output in both modes.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { seedCrm } from '../../server/test/crm.ts';
import { cliEnv, json, MODES, runCli, siteWithLogin, volatile } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let admin: string;

const env = () => cliEnv(s, configDir);
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  await seedCrm(s, [site]);
});
test.after.always(async () => {
  await s?.close();
});

test('function create --file, invoke, logs, update, delete; event subscribe, list, unsubscribe: both modes alike', async (t) => {
  const out: Record<string, string[]> = { remote: [], direct: [] };
  const file = path.join(configDir, 'handler.js');
  fs.writeFileSync(file, 'export default async (event, context) => { console.log("greeting", event.name); return { hello: event.name, by: context.user?.username ?? null } }\n');
  for (const mode of MODES) {
    const direct = mode === 'direct' ? ['--direct'] : [];
    const run = (args: string[]) => runCli([...args, '--site', site.schema, '--app', 'crm', ...direct], env());
    const runSite = (args: string[]) => runCli([...args, '--site', site.schema, ...direct], env());
    const created = await run(['function', 'create', '--name', `Greeter ${mode}`, '--file', file, '--timeout', '30', '--json']);
    t.is(created.code, 0, created.stderr);
    const fn = json(created);
    t.like(fn, { slug: `greeter-${mode}`, timeout: 30, runtime: 'javascript' });
    t.is((await api('GET', `/api/apps/crm/functions/${fn.slug}/`)).body.code, fs.readFileSync(file, 'utf8'));

    const invoked = await run(['function', 'invoke', fn.slug, '--payload', '{"name":"Ada"}']);
    t.is(invoked.code, 0, invoked.stderr);
    t.regex(invoked.stdout, /^status: +succeeded$/m);
    t.regex(invoked.stdout, /"hello": "Ada"/);
    t.regex(invoked.stdout, /greeting Ada/);
    out[mode]!.push(invoked.stdout.replace(/invocation: .*/, '').replace(/duration: .*/, '').replace(/ *"by": .*\n/, '').replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, '<at>'));
    const asJson = json(await run(['function', 'invoke', fn.slug, '--payload', '{"name":"Bo"}', '--json']));
    t.like(asJson, { status: 'succeeded', result: { hello: 'Bo', by: mode === 'remote' ? 'boss' : null } });

    const logs = await run(['function', 'logs', fn.slug, '--page-size', '5']);
    t.is(logs.code, 0, logs.stderr);
    t.regex(logs.stdout, /greeting Bo[\s\S]*greeting Ada/);
    t.regex(logs.stdout, /2 invocations\./);

    t.is((await run(['function', 'update', fn.slug, '--no-active'])).code, 0);
    t.false((await api('GET', `/api/apps/crm/functions/${fn.slug}/`)).body.is_active);
    const refused = await run(['function', 'invoke', fn.slug]);
    t.not(refused.code, 0);
    t.regex(refused.stderr, /inactive/);
    t.is((await run(['function', 'update', fn.slug, '--active'])).code, 0);

    const sub = await runSite(['event', 'subscribe', 'POST_USER_CREATE', '--function-id', String(fn.id)]);
    t.is(sub.code, 0, sub.stderr);
    const listed = await run(['event', 'list', 'POST_USER_CREATE']);
    t.is(listed.code, 0, listed.stderr);
    t.regex(listed.stdout, new RegExp(`${fn.id}\\t${fn.slug}`));
    t.is((await runSite(['event', 'list'])).stdout.trim(), 'PRE_USER_CREATE\nPOST_USER_CREATE');
    const bad = await runSite(['event', 'subscribe', 'NOPE', '--function-id', String(fn.id)]);
    t.not(bad.code, 0);
    t.regex(bad.stderr, /Valid types: PRE_USER_CREATE, POST_USER_CREATE/);
    out[mode]!.push(bad.stderr);
    t.is((await runSite(['event', 'unsubscribe', 'POST_USER_CREATE', '--function-id', String(fn.id)])).code, 0);
    t.is((await api('GET', '/api/apps/crm/events/POST_USER_CREATE/')).body.data.total_subscribers, 0);

    t.is((await run(['function', 'delete', fn.slug])).code, 0);
    t.is((await api('GET', `/api/apps/crm/functions/${fn.slug}/`)).status, 404);
  }
  t.deepEqual(out.direct!.map((x) => volatile(x)), out.remote!.map((x) => volatile(x)));
});
