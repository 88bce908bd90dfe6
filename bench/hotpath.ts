// `npm run bench:hotpath`: the platform's records API side by side with a minimal hand-written
// baseline (bench/hotpath-baseline.ts: bare Koa, a pg Pool of 20, the JWT verified in process,
// ONE prepared statement per request), on a flat_table table of BENCH_ROWS rows (default
// 100,000). What the platform spends beyond the baseline — in its own process and in
// PostgreSQL — is the cost of its request path.
//
// Setup (not measured; bench/records-setup.ts). A fresh database (bench/database.ts), the
// platform child (bench/server.ts, PGAPPNAME=bench-platform); over the platform's HTTP API a
// site, its superuser's token, an app, a flat_table data source and the table `people`,
// materialized; BENCH_ROWS rows by one INSERT … SELECT generate_series, VACUUM ANALYZE. Then
// the baseline child (PGAPPNAME=bench-baseline) for that site and physical table. Before
// measuring, both must answer sample gets (whole `data`) and list pages (`data` arrays, and
// the total) alike, else the bench fails.
//
// Scenarios (BENCH_ONLY=get,list,list-nocount,bulk), each at 1 connection and at
// BENCH_CONNECTIONS, platform and baseline in alternating rounds (load.ts `compare`):
//   get           GET …/data/{random id}/
//   list          GET …/data/?age__gte=30&age__lt=32&_sort=-age&page_size=20 (page + exact total)
//   list-nocount  the same with &_count=none (skipped, with the reason, when the platform refuses it)
//   create        POST …/data/ one new record (a fresh id each request)
//   update        PATCH …/data/{random id}/ one field (score)
//   delete        DELETE …/data/{id}/ of rows seeded for it (BENCH_DELETE_ROWS, 500,000; one id per request)
//   bulk          POST …/data/ with BENCH_BULK (10,000) new records, sequential, BENCH_BULK_REPEAT
//                 (3) times per server alternating (after one discarded warm-up each when
//                 BENCH_WARMUP > 0); every answer must give back the records sent.
// CPU per request: the server process (/proc/<pid>/stat) and its PostgreSQL backends — the
// PIDs of `pg_stat_activity` rows of the bench database with the server's application_name,
// listed right before and right after each run (union), their utime + stime from /proc.
//
// Targets (BENCH_STRICT=1: exit 1 when one is missed): at BENCH_CONNECTIONS, get, list, create,
// update and delete each
// ≥ 0.8x the baseline's req/s and ≤ 1.5x its CPU per request (server + PostgreSQL); at 1
// connection, their p50 ≤ 1.5x the baseline's (issue 33 for the writes); bulk p50 ≤ 1.2x the baseline's ms.
// Output: a table on stdout, bench/results/hotpath-latest.json and a timestamped copy.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ROWS
// (100000), BENCH_DURATION (10 s per server and scenario, over BENCH_ROUNDS = 2 alternating
// rounds), BENCH_WARMUP (2), BENCH_CONNECTIONS (50), BENCH_SEQ_DURATION (the 1-connection runs;
// default BENCH_DURATION), BENCH_BULK (10000), BENCH_BULK_REPEAT (15), BENCH_ONLY,
// BENCH_CPU_PROF=<dir> (V8 CPU profiles of both servers), BENCH_STRICT=1.
// BENCH_PROXY=pgbouncer: both servers reach PostgreSQL through a PgBouncer in transaction pooling
// mode (shared/testing/pgbouncer.ts; default_pool_size 20, the servers' pool size): the platform
// with DATABASE_DIRECT_URL set (its named statements off), the baseline with its statements
// unnamed (HOTPATH_UNNAMED). Results: bench/results/hotpath-pgbouncer-latest.json.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { compare, cpuMeter, type LoadSettings, type Measurement, type Request, type Target as LoadTarget, settingsFromEnv } from './load.ts';
import { APP, FILTER, TABLE, api, envNumber, makeRecords, r2, seedRows, serverEnv, setupTable, siteToken } from './records-setup.ts';
import { formatTable, machineInfo, totalCpuUs, writeResults, type ScenarioResult } from './report.ts';
import { startPgBouncer, type PgBouncer } from '../shared/testing/pgbouncer.ts';

const settings: LoadSettings = settingsFromEnv();
const SEQ_DURATION = envNumber('BENCH_SEQ_DURATION', settings.durationSec);
const ROWS = Math.max(100, Math.round(envNumber('BENCH_ROWS', 100_000)));
const BULK = Math.max(1, Math.round(envNumber('BENCH_BULK', 10_000)));
const BULK_REPEAT = Math.max(1, Math.round(envNumber('BENCH_BULK_REPEAT', 15)));
const SCENARIOS = ['get', 'list', 'list-nocount', 'create', 'update', 'delete', 'bulk'];
const WRITES = ['create', 'update', 'delete'];
const DELETE_ROWS = Math.max(1000, Math.round(envNumber('BENCH_DELETE_ROWS', 500_000)));
/** Ids the write scenarios use, far above the seeded rows and the bulk creates. */
const DELETE_BASE = 50_000_000;
const CREATE_BASE = 90_000_000;
let nextCreate = CREATE_BASE;
let nextDelete = DELETE_BASE;
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const unknown = ONLY?.filter((s) => !SCENARIOS.includes(s));
if (unknown?.length) throw new Error(`BENCH_ONLY: unknown scenario ${unknown.join(', ')} (${SCENARIOS.join(', ')})`);
const wanted = (id: string) => !ONLY || ONLY.includes(id);
const SECRET = randomBytes(32).toString('base64url');
const APP_NAME = { platform: 'bench-platform', baseline: 'bench-baseline' } as const;
const NOCOUNT = `${FILTER}&_count=none`;
const log = (msg: string) => process.stderr.write(`[bench:hotpath] ${msg}\n`);
const PROXY = process.env.BENCH_PROXY || undefined;
if (PROXY && PROXY !== 'pgbouncer') throw new Error(`BENCH_PROXY: unknown proxy ${PROXY} (pgbouncer)`);

// Targets.
const MIN_THROUGHPUT = 0.8; // platform ÷ baseline req/s at BENCH_CONNECTIONS
const MAX_CPU = 1.5; // platform ÷ baseline CPU per request (server + PostgreSQL) at BENCH_CONNECTIONS
const MAX_P50 = 1.5; // platform ÷ baseline p50 at 1 connection
const MAX_BULK = 1.2; // platform ÷ baseline p50 ms of one bulk create

let db: BenchDatabase | undefined;
let monitor: pg.Client | undefined;
let bouncer: PgBouncer | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
/** Stops the children (by PID), then drops the database and stops the embedded PostgreSQL. */
const cleanup = () =>
  (cleaning ??= (async () => {
    await monitor?.end().catch(() => undefined);
    await Promise.allSettled(children.map((c) => c.stop()));
    await bouncer?.close();
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());
const randomId = () => 1 + Math.floor(Math.random() * ROWS);
const ratio = (x: number | null | undefined, y: number | null | undefined) => (x && y ? r2(x / y) : null);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Both servers answer alike: sample records (whole `data`), a missing one (404), list pages (`data` and total). */
async function checkEquivalence(platform: string, baseline: string, prefix: string, token: string): Promise<{ nocount: string | null }> {
  const both = async (p: string) => [await api(platform + p, 'GET', { token }), await api(baseline + p, 'GET', { token })] as const;
  for (const id of [1, Math.ceil(ROWS / 2), ROWS]) {
    const [a, b] = await both(`${prefix}${id}/`);
    assert.equal(a.status, 200, `platform GET ${id}: ${a.text.slice(0, 300)}`);
    assert.equal(b.status, 200, `baseline GET ${id}: ${b.text.slice(0, 300)}`);
    assert.deepEqual(b.body.data, a.body.data, `record ${id}: the baseline's data differs from the platform's`);
  }
  const [a404, b404] = await both(`${prefix}${ROWS * 10 + 7}/`);
  assert.deepEqual([a404.status, b404.status], [404, 404], 'a missing record: 404 from both');
  for (const q of [FILTER, `${FILTER}&page=3`]) {
    const [a, b] = await both(`${prefix}?${q}`);
    assert.equal(a.status, 200, `platform list ?${q}: ${a.text.slice(0, 300)}`);
    assert.equal(b.status, 200, `baseline list ?${q}: ${b.text.slice(0, 300)}`);
    assert.equal(a.body.data.length, 20, `platform list ?${q}: a page of 20`);
    assert.deepEqual(b.body.data, a.body.data, `list ?${q}: the baseline's data differs from the platform's`);
    assert.equal(b.body.total, a.body.total, `list ?${q}: the totals differ`);
  }
  // `_count=none`: the page without its count. A platform that ignores it still answers the page.
  const [a, b] = await both(`${prefix}?${NOCOUNT}`);
  assert.equal(b.status, 200, `baseline list ?${NOCOUNT}: ${b.text.slice(0, 300)}`);
  assert.equal(b.body.total, null, 'baseline list with _count=none: total null');
  if (a.status !== 200) return { nocount: `the platform answers ?${NOCOUNT} with ${a.status}: ${a.text.slice(0, 200)}` };
  assert.deepEqual(b.body.data, a.body.data, `list ?${NOCOUNT}: the baseline's data differs from the platform's`);
  return { nocount: null };
}

/** Both servers write alike: a created record, an update of one field, a delete (and a 404 for a missing one). */
async function checkWrites(platform: string, baseline: string, prefix: string, token: string): Promise<void> {
  const both = async (method: string, path: (server: number) => string, body?: (server: number) => unknown) =>
    Promise.all([platform, baseline].map((url, i) => api(url + path(i), method, { token, body: body?.(i) })));
  const ids = [++nextCreate, ++nextCreate];
  const created = await both('POST', () => prefix, (i) => makeRecords(ids[i]!, 1)[0]);
  for (const r of created) assert.equal(r.status, 201, `create: ${r.text.slice(0, 300)}`);
  assert.deepEqual(created[1]!.body.data, makeRecords(ids[1]!, 1)[0], "create: the baseline's answer is the record sent");
  assert.deepEqual(created[0]!.body.data, makeRecords(ids[0]!, 1)[0], "create: the platform's answer is the record sent");
  const updated = await both('PATCH', (i) => `${prefix}${ids[i]}/`, () => ({ score: 12.5 }));
  for (const [i, r] of updated.entries()) {
    assert.equal(r.status, 200, `update: ${r.text.slice(0, 300)}`);
    assert.deepEqual(r.body.data, { ...makeRecords(ids[i]!, 1)[0], score: 12.5 }, `update on ${i ? 'the baseline' : 'the platform'}: one field changed`);
  }
  const deleted = await both('DELETE', (i) => `${prefix}${ids[i]}/`);
  assert.deepEqual(deleted.map((r) => r.status), [204, 204], 'delete: 204 from both');
  const again = await both('DELETE', (i) => `${prefix}${ids[i]}/`);
  assert.deepEqual(again.map((r) => r.status), [404, 404], 'delete of a missing record: 404 from both');
}

interface Load {
  id: string;
  title: string;
  request: Request;
  connections: number;
  durationSec: number;
}

function loads(scenario: string, prefix: string, token: string): Load[] {
  const auth = { authorization: `Bearer ${token}` };
  const requests: Record<string, [string, Request]> = {
    get: ['get by random id', { method: 'GET', path: `${prefix}1/`, headers: auth, nextPath: () => `${prefix}${randomId()}/` }],
    list: ['list, filtered + sorted page of 20 + total', { method: 'GET', path: `${prefix}?${FILTER}`, headers: auth }],
    'list-nocount': ['list, the same page, _count=none', { method: 'GET', path: `${prefix}?${NOCOUNT}`, headers: auth }],
    create: ['create one record', { method: 'POST', path: prefix, headers: auth, nextBody: () => JSON.stringify(makeRecords(++nextCreate, 1)[0]) }],
    update: ['update one field by id', { method: 'PATCH', path: `${prefix}1/`, headers: auth, nextPath: () => `${prefix}${randomId()}/`, nextBody: () => JSON.stringify({ score: Math.round(Math.random() * 10000) / 100 }) }],
    delete: ['delete by id', { method: 'DELETE', path: `${prefix}${++nextDelete}/`, headers: auth, nextPath: () => `${prefix}${++nextDelete}/` }],
  };
  const [title, request] = requests[scenario]!;
  return [
    { id: `${scenario}-1`, title: `${title} (1 conn)`, request, connections: 1, durationSec: SEQ_DURATION },
    { id: `${scenario}-n`, title: `${title} (${settings.connections} conn)`, request, connections: settings.connections, durationSec: settings.durationSec },
  ];
}

function scenarioResult(id: string, title: string, request: string, p: Measurement, b: Measurement, roundRatios: number[]): ScenarioResult {
  return {
    id,
    title,
    request,
    platform: p,
    baseline: b,
    overheadRatio: ratio(b.requestsPerSec, p.requestsPerSec) ?? NaN,
    roundRatios,
    cpuRatio: ratio(p.serverCpuUsPerRequest, b.serverCpuUsPerRequest),
    totalCpuRatio: ratio(totalCpuUs(p), totalCpuUs(b)),
  };
}

/** The problems of a measurement: failed requests, or no PostgreSQL backend found for the server. */
function problemsOf(id: string, who: string, m: Measurement): string[] {
  const out: string[] = [];
  if (m.non2xx || m.errors || m.timeouts) out.push(`${id} on ${who}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`);
  if (m.dbCpuUsPerRequest !== null && !m.dbBackends) out.push(`${id} on ${who}: no PostgreSQL backend with application_name ${APP_NAME[who as keyof typeof APP_NAME]}`);
  return out;
}

interface BulkSample {
  server: 'platform' | 'baseline';
  firstId: number;
  status: number;
  ms: number;
  serverCpuSec: number | null;
  dbCpuSec: number | null;
  dbBackends: number;
  error?: string;
}

/** One POST of `n` new records, timed from sending to the last byte of the answer; the answer must give the records back. */
async function bulkOnce(server: 'platform' | 'baseline', target: LoadTarget, url: string, token: string, firstId: number, n: number, count: (from: number, to: number) => Promise<number>): Promise<BulkSample> {
  const records = makeRecords(firstId, n);
  const raw = JSON.stringify(records);
  const stopCpu = await cpuMeter(target);
  const t0 = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: raw });
  const text = await res.text();
  const ms = r2(performance.now() - t0);
  const cpu = await stopCpu();
  const sample: BulkSample = { server, firstId, status: res.status, ms, serverCpuSec: cpu.serverSec, dbCpuSec: cpu.dbSec, dbBackends: cpu.backends };
  if (res.status !== 201) return { ...sample, error: text.slice(0, 300) };
  assert.deepEqual((JSON.parse(text) as { data: unknown }).data, records, `bulk create on the ${server}: the answer's data differs from the records sent`);
  const stored = await count(firstId, firstId + n - 1);
  return stored === n ? sample : { ...sample, error: `${stored} of ${n} records stored` };
}

function bulkMeasurement(samples: BulkSample[]): Measurement {
  const good = samples.filter((s) => !s.error);
  const ms = good.map((s) => s.ms).sort((a, b) => a - b);
  const at = (q: number) => (ms.length ? ms[Math.min(ms.length - 1, Math.max(0, Math.ceil(q * ms.length) - 1))] : NaN);
  const total = ms.reduce((a, b) => a + b, 0);
  const perRequest = (xs: (number | null)[]) => (good.length && xs.every((x) => x !== null) ? Math.round(((xs as number[]).reduce((a, b) => a + b, 0) * 1e6) / good.length) : null);
  return {
    requestsPerSec: total ? r2(good.length / (total / 1000)) : 0,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    meanMs: r2(total / (good.length || 1)),
    maxMs: ms.at(-1) ?? NaN,
    serverCpuUsPerRequest: perRequest(good.map((s) => s.serverCpuSec)),
    dbCpuUsPerRequest: perRequest(good.map((s) => s.dbCpuSec)),
    dbBackends: Math.max(0, ...good.map((s) => s.dbBackends)),
    responses: samples.length,
    non2xx: samples.filter((s) => s.status < 200 || s.status >= 300).length,
    errors: samples.filter((s) => s.error && s.status === 201).length,
    timeouts: 0,
    durationSec: r2(total / 1000),
  };
}

/** BENCH_BULK new records per request, BENCH_BULK_REPEAT times per server in alternating order (P B | B P | …). */
async function runBulk(targets: Record<'platform' | 'baseline', LoadTarget>, prefix: string, token: string, count: (from: number, to: number) => Promise<number>, mergePending: () => Promise<void>, problems: string[]) {
  let nextId = ROWS + 1;
  const once = async (who: 'platform' | 'baseline') => {
    await mergePending();
    const s = await bulkOnce(who, targets[who], targets[who].url + prefix, token, nextId, BULK, count);
    nextId += BULK; // fresh ids whatever happened, so nothing collides
    log(`  ${who}: ${s.status} in ${s.ms} ms${s.error ? ` — ${s.error}` : ''}`);
    await sleep(settings.settleMs);
    return s;
  };
  if (settings.warmupSec > 0) {
    log(`bulk create ${BULK.toLocaleString('en')} records: one warm-up request per server (discarded)…`);
    for (const who of ['platform', 'baseline'] as const) {
      const s = await once(who);
      if (s.error) problems.push(`bulk warm-up on ${who}: ${s.status} ${s.error}`);
    }
  }
  const samples: BulkSample[] = [];
  const roundRatios: number[] = [];
  for (let r = 0; r < BULK_REPEAT; r++) {
    log(`bulk create ${BULK.toLocaleString('en')} records, round ${r + 1}/${BULK_REPEAT}…`);
    const order = r % 2 === 0 ? (['platform', 'baseline'] as const) : (['baseline', 'platform'] as const);
    const round: Partial<Record<'platform' | 'baseline', BulkSample>> = {};
    for (const who of order) samples.push((round[who] = await once(who)));
    roundRatios.push(r2(round.platform!.ms / round.baseline!.ms)); // baseline req/s ÷ platform req/s, as load.ts
  }
  for (const s of samples) if (s.error) problems.push(`bulk on ${s.server}: ${s.status} ${s.error}`);
  const p = bulkMeasurement(samples.filter((s) => s.server === 'platform'));
  const b = bulkMeasurement(samples.filter((s) => s.server === 'baseline'));
  const title = `bulk create ${BULK.toLocaleString('en')} (sequential, ${BULK_REPEAT} each)`;
  return { result: scenarioResult('bulk', title, `POST ${prefix} [${BULK} records]`, p, b, roundRatios), samples };
}

interface Verdict {
  description: string;
  value: number | string | null;
  ok: boolean | null;
}

function verdicts(results: ScenarioResult[]): Record<string, Verdict> {
  const out: Record<string, Verdict> = {};
  const byId = (id: string) => results.find((r) => r.id === id);
  const n = settings.connections;
  for (const kind of ['get', 'list', ...WRITES]) {
    const many = byId(`${kind}-n`);
    const one = byId(`${kind}-1`);
    if (many) {
      const t = ratio(many.platform.requestsPerSec, many.baseline.requestsPerSec);
      out[`${kind}Throughput`] = { description: `${kind} at ${n} conn: platform req/s ≥ ${MIN_THROUGHPUT}x the baseline's`, value: t, ok: t !== null && t >= MIN_THROUGHPUT };
      const c = many.totalCpuRatio ?? null;
      out[`${kind}Cpu`] = { description: `${kind} at ${n} conn: platform CPU per request (server + PostgreSQL) ≤ ${MAX_CPU}x the baseline's`, value: c, ok: c === null ? null : c <= MAX_CPU };
    }
    if (one) {
      const p = ratio(one.platform.p50Ms, one.baseline.p50Ms);
      out[`${kind}P50`] = { description: `${kind} at 1 conn: platform p50 ≤ ${MAX_P50}x the baseline's`, value: p, ok: p !== null && p <= MAX_P50 };
    }
  }
  const bulk = byId('bulk');
  if (bulk) {
    const b = ratio(bulk.platform.p50Ms, bulk.baseline.p50Ms);
    out.bulk = { description: `bulk create ${BULK.toLocaleString('en')}: platform p50 ms ≤ ${MAX_BULK}x the baseline's`, value: b, ok: b !== null && b <= MAX_BULK };
  }
  return out;
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  db = await openBenchDatabase(log);
  const dbUrl = db.url;
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const cpuProfileDir = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
  // Behind the proxy: the servers' pools through it; the monitor, the seeding and the platform's sessions (DATABASE_DIRECT_URL) direct.
  // Each server has a pool of its own (the baseline's through an alias of the database), so that each backend keeps its server's application_name.
  const name = decodeURIComponent(new URL(dbUrl).pathname.slice(1));
  if (PROXY) bouncer = await startPgBouncer(dbUrl, { poolSize: 20, aliases: { [`${name}_baseline`]: name } });
  const env = bouncer ? { ...serverEnv(bouncer.url(dbUrl), SECRET), DATABASE_DIRECT_URL: dbUrl } : serverEnv(dbUrl, SECRET);
  if (bouncer) log(`through PgBouncer (transaction pooling) on port ${bouncer.port}`);
  const platform = await startChild('platform', 'server.ts', { env: { ...env, PGAPPNAME: APP_NAME.platform }, cpuProfileDir });
  children.push(platform);

  const { site, physical } = await setupTable(platform.url);
  const table = `"${site}"."${physical}"`;
  const prefix = `/sites/${site}/api/apps/${APP}/datatables/${TABLE}/data/`;
  log(`site ${site}, table ${table}; seeding ${ROWS.toLocaleString('en')} rows…`);
  const seed = await seedRows(dbUrl, table, ROWS);
  log(`seeded ${seed.rows.toLocaleString('en')} rows in ${seed.seconds} s (table ${seed.tableMiB} MiB, indexes ${seed.indexesMiB} MiB)`);

  const baselineEnv = { ...env, ...(bouncer ? { DATABASE_URL: bouncer.url(dbUrl, `${name}_baseline`) } : {}), PGAPPNAME: APP_NAME.baseline, HOTPATH_SCHEMA: site, HOTPATH_APP: APP, HOTPATH_TABLE: TABLE, HOTPATH_PHYSICAL: physical, ...(bouncer ? { HOTPATH_UNNAMED: '1' } : {}) };
  const baseline = await startChild('baseline', 'hotpath-baseline.ts', { env: baselineEnv, cpuProfileDir });
  children.push(baseline);
  log(`platform pid ${platform.pid} at ${platform.url}; baseline pid ${baseline.pid} at ${baseline.url}`);

  // The bench's own connection (its application_name is neither server's): lists the backends, counts rows.
  monitor = new pg.Client({ connectionString: dbUrl, application_name: 'bench-monitor' });
  await monitor.connect();
  const mon = monitor;
  const backendsOf = (appName: string) => async () =>
    (await mon.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [appName])).rows.map((r) => r.pid);
  const targets = {
    platform: { url: platform.url, pid: platform.pid, backendPids: backendsOf(APP_NAME.platform) },
    baseline: { url: baseline.url, pid: baseline.pid, backendPids: backendsOf(APP_NAME.baseline) },
  };
  const count = async (from: number, to: number) => (await mon.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE id BETWEEN $1 AND $2`, [from, to])).rows[0].n;
  // Before each bulk request (not timed): the GIN full-text index's pending list merged into the
  // index. Left alone, the merge that every fourth or fifth insert of 10,000 triggers lands on
  // whichever server's request crosses gin_pending_list_limit, doubles that request, and with the
  // P B | B P order falls on the same server round after round.
  const mergePending = async () => {
    await mon.query(
      `SELECT gin_clean_pending_list(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = $1::regclass AND a.amname = 'gin'`,
      [table],
    );
  };

  const { nocount } = await checkEquivalence(platform.url, baseline.url, prefix, await siteToken(platform.url, site));
  log(`both servers answer the records and the list pages alike${nocount ? ` (${nocount}: list-nocount will be skipped)` : ''}; measuring`);
  const backends = (await mon.query<{ application_name: string; n: number }>(
    `SELECT application_name, count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() GROUP BY 1 ORDER BY 1`,
  )).rows;
  log(`backends on the bench database: ${backends.map((r) => `${r.application_name || '(none)'} ${r.n}`).join(', ')}`);
  for (const name of Object.values(APP_NAME)) if (!backends.some((r) => r.application_name === name)) throw new Error(`no PostgreSQL backend with application_name ${name}: its CPU could not be measured`);

  const problems: string[] = [];
  const skipped: Record<string, string> = {};
  const results: ScenarioResult[] = [];
  if (WRITES.some(wanted)) {
    await checkWrites(platform.url, baseline.url, prefix, await siteToken(platform.url, site));
    log(`both servers create, update and delete alike; seeding ${DELETE_ROWS.toLocaleString('en')} rows to delete…`);
    await mon.query(
      `INSERT INTO ${table} (id, name, email, age, city, created_at, score)
       SELECT i, 'Gone ' || i, 'gone' || i || '@example.com', 120, 'Oslo', timestamptz '2024-01-01 00:00:00+00', 1 FROM generate_series($1::bigint, $2::bigint) AS i`,
      [DELETE_BASE + 1, DELETE_BASE + DELETE_ROWS],
    );
    await mon.query(`VACUUM ANALYZE ${table}`);
  }
  for (const scenario of ['get', 'list', 'list-nocount', ...WRITES].filter(wanted)) {
    if (scenario === 'list-nocount' && nocount) {
      skipped[scenario] = nocount;
      log(`list-nocount skipped: ${nocount}`);
      continue;
    }
    const token = await siteToken(platform.url, site); // access tokens live 15 minutes
    for (const l of loads(scenario, prefix, token)) {
      log(`${l.title}…`);
      const { platform: p, baseline: b, roundRatios } = await compare(targets.platform, targets.baseline, l.request, { ...settings, connections: l.connections, durationSec: l.durationSec });
      problems.push(...problemsOf(l.id, 'platform', p), ...problemsOf(l.id, 'baseline', b));
      results.push(scenarioResult(l.id, l.title, `${l.request.method} ${l.request.nextPath ? `${prefix}{id}/` : l.request.path}`, p, b, roundRatios));
    }
  }
  let bulkSamples: BulkSample[] = [];
  if (wanted('bulk')) {
    const { result, samples } = await runBulk(targets, prefix, await siteToken(platform.url, site), count, mergePending, problems);
    problems.push(...problemsOf('bulk', 'platform', result.platform), ...problemsOf('bulk', 'baseline', result.baseline));
    results.push(result);
    bulkSamples = samples;
  }

  const targetsMet = verdicts(results);
  const p50Ratios = Object.fromEntries(results.map((r) => [r.id, ratio(r.platform.p50Ms, r.baseline.p50Ms)]));
  const report = {
    timestamp,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version, rows: seed.rows, seedSeconds: seed.seconds, tableMiB: seed.tableMiB, indexesMiB: seed.indexesMiB },
    settings: { ...settings, seqDurationSec: SEQ_DURATION, rows: ROWS, bulk: BULK, bulkRepeat: BULK_REPEAT, filter: FILTER, applicationNames: APP_NAME, loadGenerator: 'autocannon 8 (in the bench process)', proxy: PROXY ?? null },
    scenarios: results,
    p50Ratios,
    bulkSamples,
    skipped,
    targets: targetsMet,
    valid: problems.length === 0,
    problems,
  };

  const out = [formatTable({ scenarios: results, targets: {}, problems: [] }).trimEnd()];
  if (results.length) out.push(`p50 ratio (platform ÷ baseline): ${results.map((r) => `${r.id} ${p50Ratios[r.id]}`).join('; ')}`);
  if (bulkSamples.length) {
    const line = (who: string) => bulkSamples.filter((s) => s.server === who).map((s) => `${s.ms}`).join(', ');
    const bulk = results.find((r) => r.id === 'bulk')!;
    out.push(
      `bulk create ${BULK.toLocaleString('en')}: platform ${line('platform')} ms (p50 ${bulk.platform.p50Ms}); baseline ${line('baseline')} ms (p50 ${bulk.baseline.p50Ms}); ratio ${p50Ratios.bulk}x`,
    );
  }
  for (const [id, why] of Object.entries(skipped)) out.push(`skipped ${id}: ${why}`);
  out.push('');
  for (const t of Object.values(targetsMet)) out.push(`${t.ok === null ? 'SKIP' : t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value ?? '–'}`);
  for (const p of problems) out.push(`INVALID  ${p}`);
  console.log(`\n${out.join('\n')}\n`);
  writeResults(PROXY ? `hotpath-${PROXY}` : 'hotpath', report, timestamp, log);
  if (cpuProfileDir) log(`CPU profiles (written when the servers stop): ${cpuProfileDir}`);
  if (!report.valid) return 1;
  const missed = Object.values(targetsMet).some((t) => t.ok === false);
  return missed && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
