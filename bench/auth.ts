// `npm run bench:auth`: throughput and latency of three request paths of the platform (token
// issue, profile, users list), each measured against a bare baseline serving the same path in the
// same run.
//
// Method. A fresh database (BENCH_USERS users, default 10,000) is served by two child
// processes: the platform (bench/server.ts: startServer, the whole middleware stack,
// MikroORM) and the baseline (bench/baseline.ts: Koa alone + pg, the same checks and answers
// with the SQL a hand-writer would send — the users page and its count in one statement).
// autocannon, in this process, drives both with the same connections (default 50): a warm-up each, then
// BENCH_DURATION seconds each (default 10) split over rounds in alternating order
// (P B | B P), so load that comes and goes on the machine falls on both alike. Absolute
// req/s depends on the machine and on whatever else runs on it; the ratio of two servers
// measured side by side holds much better, so the overhead ratio (baseline req/s ÷ platform
// req/s) is the figure to track, with the servers' CPU time per request as a cross-check.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL),
// BENCH_DURATION, BENCH_WARMUP (default 2), BENCH_ROUNDS (default 2), BENCH_CONNECTIONS,
// BENCH_USERS, BENCH_ONLY=token,profile,users (a subset), BENCH_CPU_PROF=<dir> (V8 CPU
// profiles of both servers), BENCH_STRICT=1 (exit 1 when a target is missed).
// Output: a table on stdout, bench/results/auth-latest.json and a timestamped copy.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, seedUsername, seedUsers, SEED_PASSWORD, type BenchDatabase } from './database.ts';
import { compare, type LoadSettings, type Request, settingsFromEnv } from './load.ts';
import { envNumber } from './records-setup.ts';
import { formatTable, machineInfo, targets, writeResults, type Report, type ScenarioResult } from './report.ts';

const settings: LoadSettings = settingsFromEnv();
const USERS = envNumber('BENCH_USERS', 10_000);
const ADMIN = { username: 'benchadmin', password: 'bench-admin-password' };
const SECRET = randomBytes(32).toString('base64url');
const log = (msg: string) => process.stderr.write(`[bench:auth] ${msg}\n`);

let db: BenchDatabase | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
/** Stops the children (by PID), then drops the database and stops the embedded PostgreSQL. */
const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());
async function api(base: string, method: string, path: string, init: { token?: string; body?: unknown } = {}) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), ...(init.body ? { 'content-type': 'application/json' } : {}) },
    body: init.body ? JSON.stringify(init.body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** Both servers answer each request path alike (so the comparison compares the same work). */
async function checkEquivalence(platform: string, baseline: string, token: string): Promise<void> {
  const [p1, b1] = [await api(platform, 'GET', '/api/profile/', { token }), await api(baseline, 'GET', '/api/profile/', { token })];
  assert.equal(p1.status, 200, 'platform profile');
  assert.deepEqual(b1, p1, 'baseline profile body differs from the platform');
  const list = '/api/cloud/users/?page_size=100';
  const [p2, b2] = [await api(platform, 'GET', list, { token }), await api(baseline, 'GET', list, { token })];
  assert.equal(p2.status, 200, 'platform user list');
  const strip = (b: Record<string, any>) => ({ ...b, next: b.next && new URL(b.next).search, previous: b.previous && new URL(b.previous).search });
  assert.deepEqual(strip(b2.body), strip(p2.body), 'baseline user list differs from the platform');
  const login = { username: seedUsername(1), password: SEED_PASSWORD };
  for (const base of [platform, baseline]) {
    const res = await api(base, 'POST', '/api/auth/jwt/token/', { body: login });
    assert.equal(res.status, 200, `token issue on ${base}`);
    assert.deepEqual(Object.keys(res.body).sort(), ['access', 'refresh']);
  }
}

interface Scenario {
  id: string;
  title: string;
  request: Request;
  settleMs?: number;
}

function scenarios(token: string, seeded: number): Scenario[] {
  const auth = { authorization: `Bearer ${token}` };
  // Each connection logs in as its own user, as 50 clients would, spread over the whole
  // table (where a user sits matters to a lookup that cannot use an index).
  const n = Math.max(1, Math.min(settings.connections, seeded));
  const logins = Array.from({ length: n }, (_, k) =>
    JSON.stringify({ username: seedUsername(1 + Math.floor((k * (seeded - 1)) / Math.max(1, n - 1))), password: SEED_PASSWORD }),
  );
  return [
    {
      id: 'token',
      title: 'token issue (argon2)',
      request: { method: 'POST', path: '/api/auth/jwt/token/', bodies: logins },
      // argon2 at tens of ms a hash: abandoned logins take seconds of CPU to drain.
      settleMs: 5000,
    },
    { id: 'profile', title: 'GET /api/profile/', request: { method: 'GET', path: '/api/profile/', headers: auth } },
    { id: 'users', title: `GET /api/cloud/users/?page_size=100`, request: { method: 'GET', path: '/api/cloud/users/?page_size=100', headers: auth } },
  ];
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  db = await openBenchDatabase(log);
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: db.url,
    PLATFORM_SECRET_KEY: SECRET,
    PLATFORM_ADMIN_USERNAME: ADMIN.username,
    PLATFORM_ADMIN_PASSWORD: ADMIN.password,
    PLATFORM_DATA_DIR: path.join(os.tmpdir(), 'platform-bench-data'), // unused with DATABASE_URL and a secret set
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: 'warn',
  };
  const cpuProfileDir = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
  const platform = await startChild('platform', 'server.ts', { env, cpuProfileDir });
  children.push(platform);
  const baseline = await startChild('baseline', 'baseline.ts', { env, cpuProfileDir });
  children.push(baseline);
  log(`platform pid ${platform.pid} at ${platform.url}; baseline pid ${baseline.pid} at ${baseline.url}`);

  const users = await seedUsers(db.url, USERS);
  log(`users table holds ${users} users`);
  const login = await api(platform.url, 'POST', '/api/auth/jwt/token/', { body: ADMIN });
  assert.equal(login.status, 200, 'admin login');
  const token = login.body.access as string;
  await checkEquivalence(platform.url, baseline.url, token);
  log('both servers answer alike; measuring');

  const results: ScenarioResult[] = [];
  const problems: string[] = [];
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  for (const s of scenarios(token, users - 1).filter((s) => !only || only.includes(s.id))) {
    log(`${s.title}…`);
    const { platform: p, baseline: b, roundRatios } = await compare(platform, baseline, s.request, { ...settings, settleMs: s.settleMs ?? settings.settleMs });
    for (const [who, m] of [['platform', p], ['baseline', b]] as const) {
      if (m.non2xx || m.errors || m.timeouts) problems.push(`${s.id} on ${who}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`);
    }
    const ratio = (x: number | null, y: number | null) => (x && y ? Math.round((x / y) * 100) / 100 : null);
    results.push({
      id: s.id,
      title: s.title,
      request: `${s.request.method} ${s.request.path}`,
      platform: p,
      baseline: b,
      overheadRatio: ratio(b.requestsPerSec, p.requestsPerSec) ?? NaN,
      roundRatios,
      cpuRatio: ratio(p.serverCpuUsPerRequest, b.serverCpuUsPerRequest),
    });
  }

  const report: Report = {
    timestamp,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map((n) => Math.round(n * 100) / 100) },
    database: { source: db.source, version: db.version, users },
    settings: { ...settings, tokenSettleMs: 5000, loadGenerator: 'autocannon 8 (in the bench process)' },
    scenarios: results,
    targets: targets(results),
    valid: problems.length === 0,
    problems,
  };
  console.log(`\n${formatTable(report)}\n`);
  writeResults('auth', report, timestamp, log);
  if (cpuProfileDir) log(`CPU profiles (written when the servers stop): ${cpuProfileDir}`);
  if (!report.valid) return 1;
  const missed = Object.values(report.targets).some((t) => !t.ok);
  return missed && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
