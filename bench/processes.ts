// `npm run bench:processes`: one server process against BENCH_PROCESSES (3) on one database
// (issue 34 #1), behind one address: nginx (one worker, keep-alive to its upstreams,
// round-robin) proxies one port to process 1 alone and another to all of them. The same is
// measured for the hand-written server of `bench:hotpath` (bench/hotpath-baseline.ts), so that
// what several processes cost on this machine is told apart from what they cost the platform.
// On 2 cores, several processes cannot add throughput (PostgreSQL, nginx and the load generator
// share the cores).
//
// Scenario: GET one record by random id (the records hot path, as `bench:hotpath`), on a
// flat_table table of BENCH_ROWS rows (100,000), at BENCH_CONNECTIONS (50), BENCH_DURATION
// seconds per side (10) over BENCH_ROUNDS alternating rounds (2), BENCH_WARMUP (2).
// CPU per request: every server process plus nginx's worker (PostgreSQL not counted).
//
// Output: a table on stdout, bench/results/processes-latest.json.
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { freePort } from '../shared/db/embedded.ts';
import { runBench, startChild, startNginx, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { compare, type Measurement, type Target } from './load.ts';
import { APP, TABLE, envNumber, r2, seedRows, serverEnv, setupTable, siteToken } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const SECRET = 'bench-processes-secret-0123456789abcdef';
const log = (msg: string) => process.stderr.write(`[bench:processes] ${msg}\n`);
const settings = {
  connections: envNumber('BENCH_CONNECTIONS', 50),
  durationSec: envNumber('BENCH_DURATION', 10),
  warmupSec: envNumber('BENCH_WARMUP', 2),
  rounds: Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2))),
  settleMs: 500,
};
const ROWS = Math.max(100, Math.round(envNumber('BENCH_ROWS', 100_000)));
const PROCESSES = Math.max(2, Math.round(envNumber('BENCH_PROCESSES', 3)));

let db: BenchDatabase | undefined;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-processes-'));
const children: Child[] = [];

/** nginx in front of `servers`: one port to the first alone, one to them all (round-robin, keep-alive); the two targets. */
async function balance(name: string, servers: Child[]): Promise<{ one: Target; all: Target; nginx: Child }> {
  const second = await freePort();
  let first = 0;
  const upstream = (label: string, members: Child[]) => `  upstream ${label} {
${members.map((s) => `    server ${new URL(s.url).host};`).join('\n')}
    keepalive 64;
  }`;
  const proxy = `proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host $http_host;`;
  const nginx = await startNginx(
    path.join(dir, name),
    (port) => {
      first = port;
      return `${upstream('one', servers.slice(0, 1))}
${upstream('all', servers)}
  server { listen 127.0.0.1:${port}; location / { proxy_pass http://one; ${proxy} } }
  server { listen 127.0.0.1:${second}; location / { proxy_pass http://all; ${proxy} } }`;
    },
    '/readyz',
  );
  children.push(nginx);
  // CPU per request: the first server (`pid`), the others and nginx's worker (`backendPids`).
  const others = (members: Child[]) => async () => [...members.slice(1).map((s) => s.pid), nginx.worker];
  return {
    nginx,
    one: { url: `http://127.0.0.1:${first}`, pid: servers[0]!.pid, backendPids: others(servers.slice(0, 1)) },
    all: { url: `http://127.0.0.1:${second}`, pid: servers[0]!.pid, backendPids: others(servers) },
  };
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  db = await openBenchDatabase(log);
  const env = serverEnv(db.url, SECRET);
  const start = async (label: string, script: string, extra: Record<string, string> = {}) => {
    const started: Child[] = [];
    for (let i = 1; i <= PROCESSES; i++) started.push(await startChild(`${label}-${i}`, script, { env: { ...env, ...extra } }));
    children.push(...started);
    return started;
  };
  const platform = await start('platform', 'server.ts');
  const { site, physical } = await setupTable(platform[0]!.url);
  log(`seeding ${ROWS.toLocaleString('en')} rows…`);
  await seedRows(db.url, `"${site}"."${physical}"`, ROWS);
  const baseline = await start('baseline', 'hotpath-baseline.ts', { HOTPATH_SCHEMA: site, HOTPATH_APP: APP, HOTPATH_TABLE: TABLE, HOTPATH_PHYSICAL: physical });

  const token = await siteToken(platform[0]!.url, site);
  const prefix = `/sites/${site}/api/apps/${APP}/datatables/${TABLE}/data/`;
  const request = {
    method: 'GET' as const,
    path: `${prefix}1/`,
    headers: { authorization: `Bearer ${token}` },
    nextPath: () => `${prefix}${1 + Math.floor(Math.random() * ROWS)}/`,
  };
  const cpu = (m: Measurement) => (m.serverCpuUsPerRequest ?? 0) + (m.dbCpuUsPerRequest ?? 0);
  const lines = [
    '',
    `GET one record by random id, ${settings.connections} connections, through nginx (1 worker): 1 process against ${PROCESSES}`,
    '| server                | processes |    req/s | p50 ms | p99 ms | CPU µs/req | failures |',
    '|-----------------------|----------:|---------:|-------:|-------:|-----------:|---:|',
  ];
  const results: Record<string, unknown> = {};
  const summary: string[] = [];
  let failures = 0;
  for (const [name, servers] of [['platform', platform], ['hand-written baseline', baseline]] as const) {
    const { one, all, nginx } = await balance(name.split(' ')[0]!, servers);
    log(`${name}: ${PROCESSES} processes against 1…`);
    const r = await compare(all, one, request, settings);
    for (const [n, m] of [[1, r.baseline], [PROCESSES, r.platform]] as const) {
      lines.push(`| ${name.padEnd(21)} | ${String(n).padStart(9)} | ${r2(m.requestsPerSec).toFixed(1).padStart(8)} | ${m.p50Ms.toFixed(2).padStart(6)} | ${m.p99Ms.toFixed(2).padStart(6)} | ${String(Math.round(cpu(m))).padStart(10)} | ${m.non2xx + m.errors} |`);
      failures += m.non2xx + m.errors;
    }
    const ratio = r2(r.platform.requestsPerSec / r.baseline.requestsPerSec);
    summary.push(`${name}: ${PROCESSES} ÷ 1 req/s ${ratio}x (per round ${r.roundRatios.map((x) => r2(1 / x)).join(' / ')}), CPU per request ${r2(cpu(r.platform) / cpu(r.baseline))}x`);
    results[name] = { one: r.baseline, many: r.platform, ratio, rounds: r.roundRatios };
    // Their connections back to PostgreSQL for the next side (max_connections).
    for (const c of [nginx, ...servers]) await c.stop();
  }
  lines.push('', ...summary, 'CPU: the server processes and nginx\'s worker (PostgreSQL not counted).', `reproduce: ${reproduceCommand('bench:processes')}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  writeResults('processes', { machine: machineInfo(), settings: { ...settings, rows: ROWS, processes: PROCESSES }, ...results }, timestamp, log);
  return failures > 0 ? 1 : 0;
}

await runBench(main, async () => {
  for (const c of children.reverse()) await c.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  await db?.close();
}, log);
