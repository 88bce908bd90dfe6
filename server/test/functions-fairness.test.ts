// issue 29 #3, end to end: one site's hostile functions (a memory filler, a CPU spinner, invoked
// over and over, several at a time) cost another site's invocations nothing that matters: its
// p99 stays within 2x of its unloaded p99 measured in the same run, and none of them fails.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { seedSiteUser, siteToken, twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const F = '/api/apps/crm/functions/';
const SAMPLES = 150;

const on = (site: TestSite, token: string, method: string, path: string, body?: unknown) => s.api(method, path, { host: site.domain, token, body });

test.before(async () => {
  s = await startTestServer({ FUNCTION_PREWARM: 'true', FUNCTION_CPU_LIMIT_MS: '2000', FUNCTION_MEMORY_LIMIT_MB: '64' });
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedSiteUser(s, b, 'user-b');
  tok.userB = await siteToken(s, b, 'user-b');
  await seedCrm(s, [a, b]);
  const make = async (site: TestSite, token: string, name: string, code: string) => {
    const res = await on(site, token, 'POST', F, { name, code });
    if (res.status !== 201) throw new Error(res.text);
  };
  // The reproduction: a memory filler (it ran until timeout + 5 s and took its thread down), and a spinner.
  await make(a, tok.adminA, 'fill', "export default () => { const a = []; for(;;) a.push('x'.repeat(1<<20)+a.length) }");
  await make(a, tok.adminA, 'spin', 'export default () => { for (;;) {} }');
  await make(b, tok.adminB, 'tiny', 'export default (e) => ({ n: e.n + 1 })');
});
test.after.always(async () => {
  await s?.close();
});

/** B's latencies for SAMPLES sequential invocations (after a warm-up), and the failures among them. */
async function measureB(): Promise<{ p50: number; p99: number; failures: string[] }> {
  const times: number[] = [];
  const failures: string[] = [];
  for (let i = -10; i < SAMPLES; i++) {
    const started = performance.now();
    const res = await on(b, tok.userB, 'POST', `${F}tiny/invoke/`, { payload: { n: i } });
    const took = performance.now() - started;
    if (res.status !== 200 || res.body.status !== 'succeeded' || res.body.result?.n !== i + 1) failures.push(`${res.status} ${res.body?.status} ${JSON.stringify(res.body?.error)}`);
    if (i >= 0) times.push(took);
  }
  times.sort((x, y) => x - y);
  return { p50: times[Math.floor(SAMPLES * 0.5)]!, p99: times[Math.ceil(SAMPLES * 0.99) - 1]!, failures };
}

test('issue 29 #3: site A runs hostile functions (memory filler, CPU spinner) while site B invokes a trivial one: B fails none, its p99 within 2x of unloaded', async (t) => {
  const unloaded = await measureB();
  t.deepEqual(unloaded.failures, []);

  let stop = false;
  const hostile: { status: string; type?: string; cpu: number }[] = [];
  const attacker = async (name: string) => {
    while (!stop) {
      const res = await on(a, tok.pleb, 'POST', `${F}${name}/invoke/`, {});
      hostile.push({ status: res.body?.status ?? String(res.status), type: res.body?.error?.type, cpu: res.body?.cpu_ms });
    }
  };
  const attackers = [attacker('fill'), attacker('fill'), attacker('spin'), attacker('spin')];
  await new Promise((r) => setTimeout(r, 500));
  const loaded = await measureB();
  stop = true;
  await Promise.all(attackers);

  t.deepEqual(loaded.failures, [], "none of B's invocations failed");
  t.true(loaded.p99 <= 2 * unloaded.p99, `B's p99 ${loaded.p99.toFixed(1)} ms under attack, ${unloaded.p99.toFixed(1)} ms alone (p50 ${loaded.p50.toFixed(1)} / ${unloaded.p50.toFixed(1)})`);
  t.log(`B p50/p99 alone ${unloaded.p50.toFixed(1)}/${unloaded.p99.toFixed(1)} ms, beside A ${loaded.p50.toFixed(1)}/${loaded.p99.toFixed(1)} ms; A ran ${hostile.length} hostile invocations`);
  const fills = hostile.filter((h) => h.type === 'MemoryLimitExceeded');
  t.true(fills.length > 0, 'the memory filler ended at the memory limit');
  t.true(fills.every((h) => h.cpu < 2000), 'before its CPU limit');
  t.false(hostile.some((h) => h.type === 'SandboxError'), 'no sandbox was restarted');
});
