// The sandbox on its own (the QuickJS instance in this process, the pool's threads): what a
// handler receives and returns, the SDK bridge, and escape attempts — filesystem, process,
// network, module loading, host prototype pollution, infinite loops, memory bombs, deep
// recursion, never-settling promises, oversized output — each stopped with a named error.
import test from 'ava';
import type { QuickJSWASMModule } from 'quickjs-emscripten-core';
import { loadQuickJS, runFunction, type ApiCall, type SandboxLimits } from './engine.ts';
import { SandboxPool } from './pool.ts';
import { sdkUrl } from './sdk-url.ts';

const LIMITS: SandboxLimits = { timeoutMs: 3000, cpuMs: 400, memoryBytes: 16 * 1024 * 1024, maxLogBytes: 2000, maxApiCalls: 3, maxResultBytes: 10_000 };
let qjs: QuickJSWASMModule;
const calls: { method: string; path: string; body?: string }[] = [];
const echo: ApiCall = async (method, path, body) => {
  calls.push({ method, path, body });
  return { status: 200, body: JSON.stringify({ method, path, body: body === undefined ? null : JSON.parse(body) }) };
};
const run = (code: string, options: { event?: unknown; limits?: Partial<SandboxLimits>; api?: ApiCall } = {}) =>
  runFunction(qjs, { code, event: options.event ?? null, context: { user: { id: 'u-1' }, env: { KEY: 'k' } }, limits: { ...LIMITS, ...options.limits } }, options.api ?? echo);

test.before(async () => {
  qjs = await loadQuickJS();
});

test('a handler gets the event and the context, logs, calls the SDK, and returns JSON', async (t) => {
  const out = await run(
    `export default async function (event, context) {
       console.log('got', event.n, { nested: true });
       console.error('careful');
       const r = await platform.post('/api/things/', { n: event.n });
       return { doubled: event.n * 2, user: context.user.id, key: context.env.KEY, sdk: r };
     }`,
    { event: { n: 21 } },
  );
  t.is(out.status, 'succeeded', JSON.stringify(out.error));
  t.deepEqual(out.result, { doubled: 42, user: 'u-1', key: 'k', sdk: { status: 200, ok: true, data: { method: 'POST', path: '/api/things/', body: { n: 21 } } } });
  t.deepEqual(out.logs.map((l) => [l.level, l.message]), [['log', 'got 21 {"nested":true}'], ['error', 'careful']]);
  t.true(out.cpu_ms >= 0 && out.duration_ms >= out.cpu_ms);
});

test('`export function handler` works too; a module without a handler is InvalidFunction; a syntax error is reported', async (t) => {
  t.is((await run('export function handler(e) { return e + 1 }', { event: 1 })).result, 2);
  t.is((await run('const x = 1;')).error?.type, 'InvalidFunction');
  t.is((await run('export default (')).error?.type, 'SyntaxError');
});

test('thrown errors come back with their name, message and stack', async (t) => {
  const out = await run('export default async () => { throw new TypeError("bad input") }');
  t.is(out.status, 'failed');
  t.like(out.error, { type: 'TypeError', message: 'bad input' });
  t.regex(out.error!.stack!, /function\.js/);
});

test('escape attempts: no require, process, filesystem module, network, timers or host bridge', async (t) => {
  t.like((await run("export default () => require('fs').readFileSync('/etc/passwd', 'utf8')")).error, { type: 'ReferenceError' });
  t.like((await run('export default () => process.env')).error, { type: 'ReferenceError' });
  t.like((await run("import fs from 'fs'; export default () => fs")).error, { message: "could not load module 'fs'" });
  t.like((await run("export default async () => (await import('node:child_process')).execSync('id')")).error, { message: "could not load module 'node:child_process'" });
  const globals = await run('export default () => [typeof fetch, typeof XMLHttpRequest, typeof setTimeout, typeof __host_request, typeof __host_log, typeof std, typeof os]');
  t.deepEqual(globals.result, ['undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'undefined']);
});

test('issue 29 #6: the SDK reaches only the API it names: each path is checked as the URL parser that sends it resolves it', (t) => {
  const target = { url: 'http://127.0.0.1:8000', prefix: '/sites/site_a' };
  const sent = (path: string) => {
    const url = sdkUrl(target, path);
    return typeof url === 'string' ? url : url.href;
  };
  t.is(sent('/api/profile/'), 'http://127.0.0.1:8000/sites/site_a/api/profile/');
  t.is(sent('/api/apps/crm/datatables/t/data/?status=lead'), 'http://127.0.0.1:8000/sites/site_a/api/apps/crm/datatables/t/data/?status=lead');
  t.is(sent('/api/a/../profile/'), 'http://127.0.0.1:8000/sites/site_a/api/profile/', 'dot segments inside /api/ resolve there');
  for (const path of [
    '/api/%2e%2e/%2e%2e/sites/site_b/api/users/', // the reproduction: the parser reads %2e%2e as ..
    '/api/%2E%2E/%2E%2E/api/cloud/organizations/',
    '/api/..%2f..%2fsites%2fsite_b/api/users/',
    '/api/\\..\\..\\sites/site_b/api/',
    '/api/../../sites/site_b/api/users/',
    '/api/../../etc/passwd',
    'http://169.254.169.254/latest/meta-data/',
    '//evil.example/api/',
    '/api/x#/../../y',
    '/api/ x',
    '/apix/',
  ]) {
    t.is(sent(path), 'platform.request: the path must be an /api/… path of this site.', path);
  }
});

test('the host is untouched by prototype pollution inside the sandbox, and results cannot carry a prototype', async (t) => {
  const out = await run("export default () => { Object.prototype.polluted = 'yes'; Array.prototype.push = null; return JSON.parse('{\"__proto__\": {\"polluted\": 1}, \"ok\": true}') }");
  t.is(out.status, 'succeeded', JSON.stringify(out.error));
  t.is(({} as Record<string, unknown>).polluted, undefined);
  t.is(typeof [].push, 'function');
  t.is(Object.getPrototypeOf(out.result), Object.prototype);
  t.is((out.result as Record<string, unknown>).polluted, undefined);
  // The next invocation starts from clean intrinsics.
  t.is((await run("export default () => [typeof ({}).polluted, typeof [].push]")).result?.toString(), 'undefined,function');
});

test('an infinite loop stops at the CPU limit, sync or after an await', async (t) => {
  for (const code of ['export default () => { for (;;) {} }', 'export default async () => { await null; while (true) {} }']) {
    const out = await run(code);
    t.like(out, { status: 'failed', error: { type: 'CpuLimitExceeded' } });
    // Stopped near its 400 ms of CPU (CPU time, not the wall clock: a loaded machine stretches the latter).
    t.true(out.cpu_ms < 2000, `${out.cpu_ms} ms of CPU`);
  }
});

test('issue 29 #3: while other sites are served (yieldWhile), a spinning function sleeps two thirds of its run: the same CPU limit, three times the wall clock', async (t) => {
  const spin = 'export default () => { for (;;) {} }';
  let asked = 0;
  const beside = await runFunction(qjs, { code: spin, event: null, context: {}, limits: { ...LIMITS, cpuMs: 300, timeoutMs: 10_000 } }, echo, () => ++asked > 0);
  t.like(beside, { status: 'failed', error: { type: 'CpuLimitExceeded' } }, 'sleeping is no CPU time: the CPU limit still ends it');
  // Load on the machine only stretches the running part, and the pauses follow it: at least three times the CPU time, whatever else runs.
  t.true(beside.duration_ms >= 2.4 * beside.cpu_ms, `beside others: ${beside.duration_ms} ms for ${beside.cpu_ms} ms of CPU`);
  t.true(asked >= 50, `asked ${asked} times`);
});

test('a memory bomb stops at the memory limit', async (t) => {
  // Neither the CPU limit nor the wall clock may come first, even on a loaded machine.
  const out = await run('export default () => { const a = []; for (let i = 0; ; i++) a.push({ i, s: "y" + i }) }', { limits: { cpuMs: 10_000, timeoutMs: 60_000 } });
  t.like(out, { status: 'failed', error: { type: 'MemoryLimitExceeded' } });
  t.falsy(out.broken);
});

test('deep recursion is a stack overflow, and the instance stays usable', async (t) => {
  const out = await run('export default function f() { return f() + 1 }');
  t.like(out, { status: 'failed', error: { type: 'Error', message: 'Stack overflow (too much recursion).' } });
  t.falsy(out.broken);
  t.is((await run('export default () => 7')).result, 7);
});

test('the wall-clock timeout covers time spent waiting for the SDK', async (t) => {
  // The SDK answers after 20 s; the run ends at its 300 ms timeout, long before (the bound is
  // loose so that a loaded machine cannot fail it, and still far below the SDK's answer).
  const slow: ApiCall = () => new Promise((resolve) => setTimeout(() => resolve({ status: 200, body: '{}' }), 20_000).unref());
  const out = await run("export default async () => { await platform.get('/api/slow/'); return 1 }", { api: slow, limits: { timeoutMs: 300 } });
  t.like(out, { status: 'timed_out', error: { type: 'TimeoutError' } });
  t.true(out.duration_ms < 10_000, `${out.duration_ms} ms`);
});

test('a promise that can never settle, too many SDK calls, oversized logs and results: each a clear failure', async (t) => {
  t.like((await run('export default () => new Promise(() => {})')).error, { message: 'The handler returned a promise that never settles (nothing it waits for is pending).' });
  const many = await run("export default async () => { for (let i = 0; i < 10; i++) await platform.get('/api/x/') }");
  t.regex(many.error!.message, /more than 3 requests/);
  const chatty = await run("export default () => { for (let i = 0; i < 1000; i++) console.log('line ' + i); return 1 }");
  t.is(chatty.status, 'succeeded');
  t.regex(chatty.logs.at(-1)!.message, /logs truncated/);
  t.like((await run("export default () => 'x'.repeat(20000)")).error, { type: 'InvalidResult' });
  t.like((await run('export default () => { const o = {}; o.o = o; return o }')).error, { type: 'InvalidResult' });
  t.is((await run('export default () => undefined')).result, null);
});

test('the pool: threads start on demand, run invocations in parallel, and a runaway thread is replaced', async (t) => {
  const pool = new SandboxPool({ size: 2, concurrency: 4, graceMs: 200 });
  try {
    t.is(pool.threads, 0);
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => pool.run({ code: 'export default (e) => e * 2', event: i, context: {}, limits: LIMITS }, null, i % 2 ? 'site_a' : 'site_b')));
    t.deepEqual(results.map((r) => r.result), Array.from({ length: 40 }, (_, i) => i * 2));
    t.is(pool.threads, 2, 'two sites, a thread each');
    // A native operation the interrupt handler cannot stop: the thread is terminated at timeout + grace.
    const stuck = await pool.run({ code: 'export default () => { const a = []; for (;;) a.push("x".repeat(100000) + a.length) }', event: null, context: {}, limits: { ...LIMITS, timeoutMs: 300, cpuMs: 300, memoryBytes: 512 * 1024 * 1024 } }, null, 'site_a');
    t.true(['timed_out', 'failed'].includes(stuck.status), JSON.stringify(stuck));
    t.is((await pool.run({ code: 'export default () => "still here"', event: null, context: {}, limits: LIMITS }, null, 'site_a')).result, 'still here');
    const noApi = await pool.run({ code: "export default async () => platform.get('/api/x/')", event: null, context: {}, limits: LIMITS }, null, 'site_a');
    t.regex(noApi.error!.message, /not reachable/);
  } finally {
    await pool.close();
  }
});

test('issue 29 #3: the memory limit fires (a function filling strings ends with MemoryLimitExceeded long before its CPU limit), and the invocations beside it on its thread go on', async (t) => {
  const pool = new SandboxPool({ size: 1, concurrency: 4 });
  const limits = { ...LIMITS, timeoutMs: 60_000, cpuMs: 60_000, memoryBytes: 32 * 1024 * 1024 };
  try {
    const waiting = "export default async () => { await platform.get('/api/x/').catch(() => null); return 'fine' }";
    const beside = pool.run({ code: waiting, event: null, context: {}, limits }, null, 'site_a');
    const hog = await pool.run({ code: "export default () => { const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length) }", event: null, context: {}, limits }, null, 'site_a');
    t.like(hog, { status: 'failed', error: { type: 'MemoryLimitExceeded', message: 'The function used more than 32 MiB of memory.' } });
    t.true(hog.cpu_ms < 10_000, `${hog.cpu_ms} ms of CPU`);
    t.like(await beside, { status: 'succeeded', result: 'fine' });
    t.is((await pool.run({ code: "export default () => 'x'.repeat(1 << 24).length", event: null, context: {}, limits }, null, 'site_a')).result, 1 << 24, 'a large allocation within the limit still succeeds');
    t.is(pool.threads, 1, 'the thread was not replaced');
  } finally {
    await pool.close();
  }
});

test('issue 29 #3: a site holds at most its share of the threads; another site is served beside it', async (t) => {
  const pool = new SandboxPool({ size: 2, concurrency: 2 });
  try {
    const spin = { code: 'export default () => { for (;;) {} }', event: null, context: {}, limits: { ...LIMITS, timeoutMs: 1500, cpuMs: 1000 } };
    const hogs = Array.from({ length: 6 }, () => pool.run(spin, null, 'site_a'));
    let firstHogEnded = Infinity;
    for (const hog of hogs) void hog.then(() => (firstHogEnded = Math.min(firstHogEnded, performance.now())));
    await new Promise((r) => setTimeout(r, 200));
    const other = await pool.run({ code: 'export default () => 42', event: null, context: {}, limits: LIMITS }, null, 'site_b');
    const served = performance.now();
    t.is(other.result, 42);
    // Served beside the spinners, not after one of them: before any ends (each spins 1 s of CPU; on a loaded machine, longer).
    t.true(served < firstHogEnded, `site_b was served ${Math.round(served - firstHogEnded)} ms after the first of site_a's spinners ended`);
    // Stopped by a limit: its CPU time (1 s), or its timeout (1.5 s) where the machine gave the thread less than 1 s of CPU by then.
    for (const hog of await Promise.all(hogs)) t.true(['CpuLimitExceeded', 'TimeoutError'].includes(hog.error?.type ?? ''), hog.error?.type);
  } finally {
    await pool.close();
  }
});

test("issue 29 #3: while another site is served, a site's CPU-heavy invocations wait until their CPU debt is repaid at its share", async (t) => {
  const pool = new SandboxPool({ size: 2, concurrency: 1, siteCpuShare: 0.1, burstMs: 100 });
  // A fixed amount of work (≈ 180 ms of CPU here), not a wall-clock spin: the debt is the CPU the
  // thread used, which a busy machine does not change (it stretches the wall clock instead).
  const busy = { code: 'export default () => { let x = 0; for (let i = 0; i < 4e6; i++) x += i; return x }', event: null, context: {}, limits: { ...LIMITS, timeoutMs: 20_000 } };
  try {
    let served = true;
    const other = (async () => {
      let n = 0;
      while (served) {
        await pool.run({ code: 'export default () => 1', event: null, context: {}, limits: LIMITS }, null, 'site_b');
        n++;
      }
      return n;
    })();
    const finished: number[] = [];
    await Promise.all(Array.from({ length: 3 }, () => pool.run(busy, null, 'site_a').then(() => finished.push(performance.now()))));
    served = false;
    t.true((await other) > 0);
    finished.sort((x, y) => x - y);
    // Each run leaves its CPU time (≈ 180 ms) as debt; past the 100 ms burst the next waits until it
    // is back under it, at 0.1 ms per ms: ≥ 800 ms apart here (a lower bound: a slower or loaded
    // machine only makes it longer).
    for (let i = 1; i < finished.length; i++) t.true(finished[i]! - finished[i - 1]! >= 400, `${Math.round(finished[i]! - finished[i - 1]!)} ms between A's runs`);
  } finally {
    await pool.close();
  }
});
