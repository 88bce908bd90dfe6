// `npm run bench:functions`: function invocation latency and throughput, and the cost of
// PRE_USER_CREATE subscribers on user creation (issue 14, Benchmark).
//
// The platform (a child process: bench/server.ts, defaults FUNCTION_WORKERS=2,
// FUNCTION_WORKER_CONCURRENCY=8) on a fresh database; the function `echo` returns its event.
// The baseline (this file with BENCH_FUNCTIONS_ROLE=bare, a child too) is what one would write by
// hand: node:http, the same QuickJS sandbox run in the request's thread (a fresh runtime per call,
// as ours), and one INSERT of the invocation record (pg, one statement) — no auth, no queue, no
// policy, no framework.
//
// 1. Cold: the first invocation after a server starts (its sandbox thread and WebAssembly module
//    start then), BENCH_COLD_RUNS (3) server starts; the baseline's first call likewise.
// 2. Warm: BENCH_WARM_RUNS (200) sequential invocations after 20 warm-up calls; p50 / p99.
// 3. Throughput: 20 concurrent clients for BENCH_DURATION seconds (10) each, invocations per
//    second, the order alternating over BENCH_ROUNDS (2) rounds.
// 4. PRE_USER_CREATE: BENCH_USERS_RUNS (40) site users created one after another
//    (POST /api/users/, argon2 hashing included) with 0, 1 and 5 subscribed functions; p50 and
//    the added milliseconds over 0.
// 5. Noisy neighbour (issue 29 #3): BENCH_NEIGHBOUR_RUNS (200) sequential invocations of `echo`
//    alone and as many while another site runs hostile functions over and over (4 clients: two a
//    memory filler, two a CPU spinner, FUNCTION_CPU_LIMIT_MS 2000), in 5 rounds that alternate
//    (alone, beside) so that whatever else the machine does weighs on both sides alike; p50 / p99
//    and the failures.
//
// BENCH_ONLY=cold,warm,throughput,users,neighbour runs a subset (e.g. warm,throughput while
// iterating on the invocation path); BENCH_CPU_PROF=<dir>: V8 CPU profiles of the servers.
//
// Output: tables on stdout, the reproduce command, bench/results/functions-latest.json.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

const ROLE = process.env.BENCH_FUNCTIONS_ROLE;
const SCENARIOS = ['cold', 'warm', 'throughput', 'users', 'neighbour'];
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const unknown = ONLY?.filter((s) => !SCENARIOS.includes(s));
if (unknown?.length) throw new Error(`BENCH_ONLY: unknown scenario ${unknown.join(', ')} (${SCENARIOS.join(', ')})`);
const wanted = (id: string) => !ONLY || ONLY.includes(id);
const ECHO = 'export default async (event) => ({ echo: event })';
const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! * 100) / 100 : NaN;
};

if (ROLE === 'bare') await bare();
else await benchMain();

/** The hand-written baseline: run the code in QuickJS, record the invocation in one INSERT, answer. */
async function bare(): Promise<void> {
  const { default: pg } = await import('pg');
  const { loadQuickJS, runFunction } = await import('../shared/functions/sandbox/engine.ts');
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  await pool.query('CREATE TABLE IF NOT EXISTS bare_invocations (id bigserial PRIMARY KEY, status text, payload jsonb, result jsonb, logs jsonb, duration_ms int, created_at timestamptz DEFAULT now())');
  let qjs: Awaited<ReturnType<typeof loadQuickJS>> | undefined;
  const limits = { timeoutMs: 300_000, cpuMs: 30_000, memoryBytes: 64 * 2 ** 20, maxLogBytes: 65536, maxApiCalls: 100, maxResultBytes: 2 ** 20 };
  const server = http.createServer((req, res) => {
    if (req.url === '/readyz') return void res.end('ok');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const payload = JSON.parse(Buffer.concat(chunks).toString() || '{}').payload ?? null;
      qjs ??= await loadQuickJS();
      const out = await runFunction(qjs, { code: ECHO, event: payload, context: {}, limits }, async () => ({ status: 404, body: '' }));
      const { rows } = await pool.query('INSERT INTO bare_invocations (status, payload, result, logs, duration_ms) VALUES ($1, $2, $3, $4, $5) RETURNING id', [
        out.status, JSON.stringify(payload), JSON.stringify(out.result ?? null), JSON.stringify(out.logs), out.duration_ms,
      ]);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: rows[0].id, status: out.status, result: out.result }));
    });
  });
  server.listen(Number(process.env.PORT), '127.0.0.1');
  process.once('SIGTERM', () => server.close(() => void pool.end().then(() => process.exit(0))));
}

async function benchMain(): Promise<void> {
  const { runBench, startChild } = await import('./children.ts');
  const { openBenchDatabase } = await import('./database.ts');
  const { api, envNumber, ok, serverEnv, siteToken } = await import('./records-setup.ts');
  const { machineInfo, reproduceCommand, writeResults } = await import('./report.ts');
  type Child = Awaited<ReturnType<typeof startChild>>;

  const COLD_RUNS = Math.max(1, Math.round(envNumber('BENCH_COLD_RUNS', 3)));
  const WARM_RUNS = Math.max(10, Math.round(envNumber('BENCH_WARM_RUNS', 200)));
  const DURATION = envNumber('BENCH_DURATION', 10);
  const ROUNDS = Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2)));
  const USERS_RUNS = Math.max(5, Math.round(envNumber('BENCH_USERS_RUNS', 40)));
  const NEIGHBOUR_RUNS = Math.max(20, Math.round(envNumber('BENCH_NEIGHBOUR_RUNS', 200)));
  const CONCURRENCY = 20;
  const SECRET = randomBytes(32).toString('base64url');

  let db: Awaited<ReturnType<typeof openBenchDatabase>> | undefined;
  const children = new Set<Child>();
  const cleanup = async () => {
    await Promise.allSettled([...children].map((c) => c.stop()));
    await db?.close().catch((err: Error) => log(`dropping the bench database failed: ${err.message}`));
  };
  const start = async (name: string, script: string, env: Record<string, string>) => {
    const c = await startChild(name, script, { env, cpuProfileDir: process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined });
    children.add(c);
    return c;
  };
  const stop = async (c: Child) => {
    await c.stop();
    children.delete(c);
  };

  /** One POST, timed (ms), its JSON body. */
  const post = (url: string, token: string | undefined, body: unknown) =>
    new Promise<{ ms: number; status: number; body: any }>((resolve, reject) => {
      const started = performance.now();
      const data = JSON.stringify(body);
      const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...(token ? { authorization: `Bearer ${token}` } : {}) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') }));
      });
      req.on('error', reject);
      req.end(data);
    });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  async function throughput(call: () => Promise<{ status: number }>): Promise<{ perSecond: number; failures: number }> {
    let done = 0;
    let failures = 0;
    const until = performance.now() + DURATION * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < until) {
          const r = await call();
          if (r.status === 200) done++;
          else failures++;
        }
      }),
    );
    return { perSecond: Math.round((done / ((performance.now() - started) / 1000)) * 10) / 10, failures };
  }

  async function main(): Promise<number> {
    const timestamp = new Date().toISOString();
    const machine = machineInfo();
    const command = reproduceCommand('bench:functions');
    log(`reproduce with: ${command}`);
    db = await openBenchDatabase(log);
    const env = { ...serverEnv(db.url, SECRET), PGAPPNAME: 'bench-functions', FUNCTION_CPU_LIMIT_MS: '2000' };
    let platform = await start('platform', 'server.ts', env);

    // Site, app, function over the API.
    const admin = ok(await api(`${platform.url}/api/auth/jwt/token/`, 'POST', { body: { username: 'benchadmin', password: 'bench-admin-password' } }), 200, 'admin login');
    const org = ok(await api(`${platform.url}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Functions Bench' } }), 201, 'organization');
    const site = ok(await api(`${platform.url}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Functions Bench' } }), 201, 'site').schema_name as string;
    const base = () => `${platform.url}/sites/${site}`;
    let token = await siteToken(platform.url, site);
    ok(await api(`${base()}/api/apps/`, 'POST', { token, body: { name: 'Bench' } }), 201, 'app');
    const fns = `/api/apps/bench/functions/`;
    ok(await api(`${base()}${fns}`, 'POST', { token, body: { name: 'echo', code: ECHO } }), 201, 'function');
    const invoke = () => post(`${base()}${fns}echo/invoke/`, token, { payload: { n: 1 } });

    // 1. Cold starts.
    const cold = { platform: [] as number[], bare: [] as number[] };
    for (let i = 0; i < (wanted('cold') ? COLD_RUNS : 0); i++) {
      if (i > 0) {
        await stop(platform);
        platform = await start('platform', 'server.ts', env);
      }
      const r = await invoke();
      if (r.status !== 200 || r.body.status !== 'succeeded') throw new Error(`cold invoke: ${r.status} ${JSON.stringify(r.body)}`);
      cold.platform.push(r.ms);
      const b = await start('bare', 'functions.ts', { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, BENCH_FUNCTIONS_ROLE: 'bare' });
      cold.bare.push((await post(`${b.url}/invoke`, undefined, { payload: { n: 1 } })).ms);
      await stop(b);
      log(`cold ${i + 1}: platform ${cold.platform.at(-1)!.toFixed(1)} ms, bare ${cold.bare.at(-1)!.toFixed(1)} ms`);
    }
    const bare = await start('bare', 'functions.ts', { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, BENCH_FUNCTIONS_ROLE: 'bare' });
    const bareInvoke = () => post(`${bare.url}/invoke`, undefined, { payload: { n: 1 } });

    // 2. Warm latency.
    token = await siteToken(platform.url, site);
    for (let i = 0; i < 20; i++) await Promise.all([invoke(), bareInvoke()]);
    const warm = { platform: [] as number[], bare: [] as number[] };
    for (let i = 0; i < (wanted('warm') ? WARM_RUNS : 0); i++) {
      warm.platform.push((await invoke()).ms);
      warm.bare.push((await bareInvoke()).ms);
    }
    if (wanted('warm')) log(`warm p50: platform ${pct(warm.platform, 50)} ms, bare ${pct(warm.bare, 50)} ms`);

    // 3. Throughput at 20 concurrent calls.
    const tput = { platform: [] as number[], bare: [] as number[], failures: 0 };
    for (let round = 0; round < (wanted('throughput') ? ROUNDS : 0); round++) {
      token = await siteToken(platform.url, site);
      const order = round % 2 === 0 ? (['platform', 'bare'] as const) : (['bare', 'platform'] as const);
      for (const side of order) {
        const r = await throughput(side === 'platform' ? invoke : bareInvoke);
        tput[side].push(r.perSecond);
        tput.failures += r.failures;
        log(`round ${round + 1} ${side}: ${r.perSecond} invocations/s`);
      }
    }

    // 4. PRE_USER_CREATE overhead.
    token = await siteToken(platform.url, site);
    const ids: number[] = [];
    for (let i = 0; i < (wanted('users') ? 5 : 0); i++) ids.push(ok(await api(`${base()}${fns}`, 'POST', { token, body: { name: `pre ${i}`, code: 'export default (e) => { if (!e.user.username) throw new Error("no name") }' } }), 201, 'pre function').id);
    const users: Record<string, number[]> = {};
    let subscribed = 0;
    let n = 0;
    for (const subscribers of wanted('users') ? [0, 1, 5] : []) {
      token = await siteToken(platform.url, site);
      while (subscribed < subscribers) ok(await api(`${base()}/api/cloud/events/PRE_USER_CREATE/subscribe/`, 'POST', { token, body: { function_id: ids[subscribed++] } }), 200, 'subscribe');
      const times: number[] = [];
      for (let i = 0; i < USERS_RUNS + 3; i++) {
        const r = await post(`${base()}/api/users/`, token, { username: `bench-user-${n++}`, password: 'Bench-user-password-1' });
        if (r.status !== 201) throw new Error(`user create: ${r.status} ${JSON.stringify(r.body)}`);
        if (i >= 3) times.push(r.ms);
      }
      users[subscribers] = times;
      log(`users with ${subscribers} PRE subscribers: p50 ${pct(times, 50)} ms`);
    }

    // 5. Noisy neighbour: another site's hostile functions beside this site's echo.
    const other = !wanted('neighbour') ? '' : ok(await api(`${platform.url}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Noisy Neighbour' } }), 201, 'site').schema_name as string;
    const otherToken = other && (await siteToken(platform.url, other));
    if (other) ok(await api(`${platform.url}/sites/${other}/api/apps/`, 'POST', { token: otherToken, body: { name: 'Bench' } }), 201, 'app');
    for (const [name, code] of !other ? [] : [['fill', "export default () => { const a = []; for(;;) a.push('x'.repeat(1<<20)+a.length) }"], ['spin', 'export default () => { for (;;) {} }']]) {
      ok(await api(`${platform.url}/sites/${other}${fns}`, 'POST', { token: otherToken, body: { name, code } }), 201, 'hostile function');
    }
    token = await siteToken(platform.url, site);
    const neighbourRounds = 5;
    const perRound = Math.ceil(NEIGHBOUR_RUNS / neighbourRounds);
    const echoes = async (times: number[]) => {
      let failures = 0;
      for (let i = 0; i < perRound; i++) {
        const r = await invoke();
        if (r.status !== 200 || r.body.status !== 'succeeded') failures++;
        times.push(r.ms);
      }
      return failures;
    };
    const aloneTimes: number[] = [];
    const besideTimes: number[] = [];
    let besideFailures = 0;
    const hostileOutcomes: Record<string, number> = {};
    for (let round = 0; round < (wanted('neighbour') ? neighbourRounds : 0); round++) {
      await echoes(aloneTimes);
      let stopHostile = false;
      const hostile = async (name: string) => {
        while (!stopHostile) {
          const r = await post(`${platform.url}/sites/${other}${fns}${name}/invoke/`, otherToken, {});
          const key = `${name}: ${r.body.error?.type ?? r.body.status ?? r.status}`;
          hostileOutcomes[key] = (hostileOutcomes[key] ?? 0) + 1;
        }
      };
      const attackers = [hostile('fill'), hostile('fill'), hostile('spin'), hostile('spin')];
      await new Promise((r) => setTimeout(r, 300));
      besideFailures += await echoes(besideTimes);
      stopHostile = true;
      await Promise.all(attackers);
    }
    const alone = { p50: pct(aloneTimes, 50), p99: pct(aloneTimes, 99) };
    const beside = { p50: pct(besideTimes, 50), p99: pct(besideTimes, 99), failures: besideFailures };
    if (wanted('neighbour')) log(`neighbour: alone p50/p99 ${alone.p50}/${alone.p99} ms, beside hostile ${beside.p50}/${beside.p99} ms, failures ${beside.failures}`);

    const mean = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10) / 10;
    const report = {
      timestamp,
      command,
      machine,
      only: ONLY ?? null,
      cold_ms: { platform: cold.platform.map((x) => Math.round(x * 10) / 10), bare: cold.bare.map((x) => Math.round(x * 10) / 10) },
      warm_ms: { platform: { p50: pct(warm.platform, 50), p99: pct(warm.platform, 99) }, bare: { p50: pct(warm.bare, 50), p99: pct(warm.bare, 99) } },
      throughput_per_s: { concurrency: CONCURRENCY, platform: mean(tput.platform), bare: mean(tput.bare), rounds: tput, ratio: Math.round((mean(tput.platform) / mean(tput.bare)) * 100) / 100 },
      pre_user_create_ms: Object.fromEntries(Object.entries(users).map(([k, v]) => [k, { p50: pct(v, 50), p99: pct(v, 99), added_p50: Math.round((pct(v, 50) - pct(users[0]!, 50)) * 100) / 100 }])),
      noisy_neighbour_ms: { runs: NEIGHBOUR_RUNS, alone, beside_hostile: beside, p99_ratio: Math.round((beside.p99 / alone.p99) * 100) / 100, hostile: hostileOutcomes },
    };
    console.log('\nFunction invocation (echo), platform vs hand-written baseline');
    if (wanted('cold')) console.log(`  cold (first call after start) ms: platform ${report.cold_ms.platform.join(', ')}; bare ${report.cold_ms.bare.join(', ')}`);
    if (wanted('warm')) console.log(`  warm p50 / p99 ms: platform ${report.warm_ms.platform.p50} / ${report.warm_ms.platform.p99}; bare ${report.warm_ms.bare.p50} / ${report.warm_ms.bare.p99}`);
    if (wanted('throughput')) console.log(`  ${CONCURRENCY} concurrent: platform ${report.throughput_per_s.platform}/s, bare ${report.throughput_per_s.bare}/s (ratio ${report.throughput_per_s.ratio}; failures ${tput.failures})`);
    if (wanted('users')) console.log('PRE_USER_CREATE on POST /api/users/ (argon2 included)');
    for (const [k, v] of Object.entries(report.pre_user_create_ms)) console.log(`  ${k} subscribers: p50 ${v.p50} ms, p99 ${v.p99} ms, +${v.added_p50} ms over none`);
    const nn = report.noisy_neighbour_ms;
    if (wanted('neighbour')) console.log("Noisy neighbour: echo's p50 / p99 while another site runs a memory filler and a CPU spinner");
    if (wanted('neighbour')) console.log(`  alone ${nn.alone.p50} / ${nn.alone.p99} ms; beside ${nn.beside_hostile.p50} / ${nn.beside_hostile.p99} ms (p99 ratio ${nn.p99_ratio}; failures ${nn.beside_hostile.failures}); hostile outcomes ${JSON.stringify(nn.hostile)}`);
    console.log(`\nreproduce: ${command}`);
    writeResults('functions', report, timestamp, log);
    return tput.failures || beside.failures ? 1 : 0;
  }

  await runBench(main, cleanup, log);
}
