// `npm run bench:records`: the records API on a flat_table table of BENCH_ROWS rows (default
// 1,000,000), against a bare baseline serving the same SQL through `pg` in the same run.
//
// Setup (not measured). A fresh database (as `npm run bench`) served by the platform child
// (bench/server.ts, rate limits off) and the baseline child (bench/baseline.ts: Koa + pg). Over
// the platform's HTTP API: the platform admin signs in, creates an organization (becoming its
// owner) and a site, signs in on the site (the seeded site superuser), creates an app, a
// flat_table data source and a table `people` (id integer primary key, name, email, age with
// an index, city, created_at, score), and materializes it. The rows are then written straight
// into the physical table by one INSERT … SELECT over generate_series (deterministic values
// from hashint4), followed by VACUUM ANALYZE (visibility map and statistics, as a table that
// has lived a while has them).
//
// Scenarios:
//   list   GET …/data/?age__gte=30&age__lt=32&_sort=-age&page_size=20 (an indexed range, ≈ 3 % of
//          the rows): with 1 connection (sequential, keep-alive: the per-request latency) and
//          with BENCH_CONNECTIONS (throughput), each against the baseline in alternating rounds.
//   listpk the same filter with _sort=id (a plan that stops after 20 matches): the reference that
//          shows what the sort of `list` costs.
//   get    GET …/data/{random id}/, the same two ways.
//   service  listRecords / getRecord called in this process (MikroORM, pool of 4), sequentially:
//          the platform's own time for a request without HTTP, routing and authentication.
//   sql    the records SQL alone, from this process over one pg connection (the database's
//          share of list and get), with EXPLAIN (ANALYZE, BUFFERS) of each statement in the report.
//   bulk   one POST …/data/ with an array of BENCH_BULK (10,000) new records, end to end, 3 times;
//          then 3 batches of 1,000 (the limit the records service had when this bench was written).
//   csv    GET …/data/?format=csv: every row streamed and discarded; duration, rows/s, and the
//          platform process's RSS (VmRSS every 100 ms): start, peak, end. Skipped with a message
//          when the platform does not answer text/csv. Repeated (BENCH_CSV_REPEAT, 2): memory that
//          is only lazily collected levels off on the second export; memory kept per row does not.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ROWS
// (1000000), BENCH_DURATION (10 s per server and scenario, over BENCH_ROUNDS = 2 alternating
// rounds), BENCH_WARMUP (2), BENCH_CONNECTIONS (50), BENCH_SEQ_DURATION (the 1-connection runs;
// default BENCH_DURATION), BENCH_BULK (10000), BENCH_BULK_REPEAT (3), BENCH_SQL_ITERATIONS (200), BENCH_CSV_REPEAT (2),
// BENCH_ONLY=list,listpk,get,service,sql,bulk,csv, BENCH_STRICT=1 (exit 1 when a target is missed).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { systemActor } from '../shared/auth/actor.ts';
import { makeContext } from '../shared/context.ts';
import { getRecord, listRecords } from '../shared/data/records.service.ts';
import { createOrm } from '../shared/db/orm.ts';
import { startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { compare, type LoadSettings, type Request } from './load.ts';
import { formatTable, machineInfo, type Report, type ScenarioResult } from './report.ts';

const num = (name: string, def: number) => {
  const v = Number(process.env[name] || def);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a non-negative number`);
  return v;
};
const settings: LoadSettings = {
  connections: num('BENCH_CONNECTIONS', 50),
  durationSec: num('BENCH_DURATION', 10),
  warmupSec: num('BENCH_WARMUP', 2),
  rounds: Math.max(1, Math.round(num('BENCH_ROUNDS', 2))),
  settleMs: 1000,
};
const SEQ_DURATION = num('BENCH_SEQ_DURATION', settings.durationSec);
const ROWS = Math.max(100, Math.round(num('BENCH_ROWS', 1_000_000)));
const BULK = Math.max(1, Math.round(num('BENCH_BULK', 10_000)));
const BULK_REPEAT = Math.max(1, Math.round(num('BENCH_BULK_REPEAT', 3)));
const SQL_ITERATIONS = Math.max(1, Math.round(num('BENCH_SQL_ITERATIONS', 200)));
const CSV_REPEAT = Math.max(1, Math.round(num('BENCH_CSV_REPEAT', 2)));
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const wanted = (id: string) => !ONLY || ONLY.includes(id);
const ADMIN = { username: 'benchadmin', password: 'bench-admin-password' };
const SECRET = randomBytes(32).toString('base64url');
const APP = 'bench';
const TABLE = 'people';
const FILTER = 'age__gte=30&age__lt=32&_sort=-age&page_size=20';
// The same rows in primary-key order: a plan that stops after 20 matches (a reference for FILTER's).
const FILTER_PK = 'age__gte=30&age__lt=32&_sort=id&page_size=20';
const log = (msg: string) => process.stderr.write(`[bench:records] ${msg}\n`);
const r2 = (n: number) => Math.round(n * 100) / 100;
const MiB = (kb: number) => r2(kb / 1024);

// Targets (the issue's words).
const LIST_P50_MS = 5;
const GET_P50_MS = 2;
const BULK_MS = 1000;
const RATIO_LIMIT = 2;

const SCHEMA = {
  title: 'People',
  fields: [
    { name: 'id', type: 'integer', constraints: { required: true, minimum: 1 } },
    { name: 'name', type: 'string', constraints: { required: true, maxLength: 200 } },
    { name: 'email', type: 'string', format: 'email' },
    { name: 'age', type: 'integer', constraints: { minimum: 0, maximum: 150 } },
    { name: 'city', type: 'string' },
    { name: 'created_at', type: 'datetime' },
    { name: 'score', type: 'number' },
  ],
  primaryKey: ['id'],
  indexes: [{ name: 'age', fields: ['age'] }],
};
const CITIES = ['Paris', 'Berlin', 'Madrid', 'Rome', 'Lisbon', 'Vienna', 'Prague', 'Warsaw', 'Dublin', 'Oslo'];

let db: BenchDatabase | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
/** Stops the children (by PID), then drops the database and stops the embedded PostgreSQL. */
const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping`);
    void cleanup().finally(() => process.exit(130));
  });
}

interface ApiResult {
  status: number;
  body: Record<string, any>;
  text: string;
}
async function api(url: string, method: string, init: { token?: string; body?: unknown; raw?: string } = {}): Promise<ApiResult> {
  const body = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
  const res = await fetch(url, {
    method,
    headers: { ...(init.token ? { authorization: `Bearer ${init.token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body,
  });
  const text = await res.text();
  let parsed: Record<string, any> = {};
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, text };
}
const ok = (res: ApiResult, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text.slice(0, 500)}`);
  return (res.body.data ?? res.body) as Record<string, any>;
};

/** Site, site admin token, app, data source, table, materialized — all over the platform's HTTP API. */
async function setupTable(base: string): Promise<{ site: string; token: string; physical: string }> {
  const admin = ok(await api(`${base}/api/auth/jwt/token/`, 'POST', { body: ADMIN }), 200, 'admin login');
  const org = ok(await api(`${base}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Records Bench' } }), 201, 'organization');
  const site = ok(await api(`${base}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Records Bench' } }), 201, 'site');
  const siteBase = `${base}/sites/${site.schema_name}`;
  // The organization's owner is seeded as the site's superuser; it signs in with its platform password.
  const token = ok(await api(`${siteBase}/api/auth/jwt/token/`, 'POST', { body: ADMIN }), 200, 'site admin login').access as string;
  const app = ok(await api(`${siteBase}/api/apps/`, 'POST', { token, body: { name: 'Bench' } }), 201, 'app');
  assert.equal(app.slug, APP);
  ok(await api(`${siteBase}/api/apps/${APP}/datasources/`, 'POST', { token, body: { name: 'Main', slug: 'main', provider_type: 'flat_table' } }), 201, 'data source');
  ok(await api(`${siteBase}/api/apps/${APP}/datasources/main/datatables/`, 'POST', { token, body: { name: TABLE, json_schema: SCHEMA } }), 201, 'data table');
  const table = ok(await api(`${siteBase}/api/apps/${APP}/datatables/${TABLE}/materialize/`, 'POST', { token }), 200, 'materialize');
  return { site: site.schema_name as string, token, physical: table.physical_table_name as string };
}

/** BENCH_ROWS rows straight into the physical table (setup: one statement, then VACUUM ANALYZE). */
async function seedRows(url: string, table: string): Promise<{ rows: number; seconds: number; tableMiB: number; indexesMiB: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const t0 = performance.now();
    const cities = `ARRAY[${CITIES.map((c) => `'${c}'`).join(', ')}]`;
    await client.query(
      `INSERT INTO ${table} (id, name, email, age, city, created_at, score)
       SELECT i, 'Person ' || i, 'person' || i || '@example.com',
              18 + (hashint4(i) & 2147483647) % 63,
              (${cities})[1 + (hashint4(i + 7) & 2147483647) % ${CITIES.length}],
              timestamptz '2020-01-01 00:00:00+00' + i * interval '1 minute',
              ((hashint4(i + 13) & 2147483647) % 100000) / 100.0
         FROM generate_series(1, $1::int) AS i`,
      [ROWS],
    );
    await client.query(`VACUUM ANALYZE ${table}`);
    const seconds = r2((performance.now() - t0) / 1000);
    const { rows } = await client.query<{ n: number; t: string; i: string }>(
      `SELECT (SELECT count(*)::int FROM ${table}) AS n, pg_table_size('${table}') AS t, pg_indexes_size('${table}') AS i`,
    );
    return { rows: rows[0].n, seconds, tableMiB: r2(Number(rows[0].t) / 2 ** 20), indexesMiB: r2(Number(rows[0].i) / 2 ** 20) };
  } finally {
    await client.end();
  }
}

/** Both servers answer the list page and a record alike (so the comparison compares the same work). */
async function checkEquivalence(platform: string, baseline: string, prefix: string, token: string): Promise<void> {
  for (const p of [`${prefix}?${FILTER}`, `${prefix}?${FILTER}&page=3`, `${prefix}?${FILTER_PK}`, `${prefix}${Math.ceil(ROWS / 2)}/`, `${prefix}1/`]) {
    const [a, b] = [await api(platform + p, 'GET', { token }), await api(baseline + p, 'GET', { token })];
    assert.equal(a.status, 200, `platform ${p}: ${a.text.slice(0, 300)}`);
    assert.deepEqual(b.body, a.body, `baseline ${p} differs from the platform`);
  }
}

/** The SQL the records service sends for the list page and for one record ($n placeholders). */
function recordsSql(table: string) {
  const where = '(t."age" >= $1::bigint AND t."age" < $2::bigint)';
  return {
    count: { text: `SELECT count(*) AS n FROM ${table} t WHERE ${where}`, values: [30, 32] },
    page: { text: `SELECT to_jsonb(t) AS r FROM ${table} t WHERE ${where} ORDER BY t."age" DESC, t."id" DESC LIMIT $3 OFFSET $4`, values: [30, 32, 20, 0] },
    pagePk: { text: `SELECT to_jsonb(t) AS r FROM ${table} t WHERE ${where} ORDER BY t."id" ASC LIMIT $3 OFFSET $4`, values: [30, 32, 20, 0] },
    get: (id: number) => ({ text: `SELECT to_jsonb(t) AS r FROM ${table} t WHERE t."id" = $1::bigint`, values: [id] }),
  };
}

const randomId = () => 1 + Math.floor(Math.random() * ROWS);

function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return { n: s.length, p50Ms: r2(at(0.5)), p99Ms: r2(at(0.99)), meanMs: r2(s.reduce((a, b) => a + b, 0) / (s.length || 1)) };
}

/** The records SQL alone over one connection from this process: what the database itself takes. */
async function sqlAlone(url: string, table: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const sql = recordsSql(table);
    const timeIt = async (fn: () => Promise<unknown>) => {
      for (let i = 0; i < Math.min(20, SQL_ITERATIONS); i++) await fn(); // warm (plans, cache)
      const out: number[] = [];
      for (let i = 0; i < SQL_ITERATIONS; i++) {
        const t0 = performance.now();
        await fn();
        out.push(performance.now() - t0);
      }
      return stats(out);
    };
    const count = await timeIt(() => client.query(sql.count));
    const page = await timeIt(() => client.query(sql.page));
    const pagePk = await timeIt(() => client.query(sql.pagePk));
    const listBoth = await timeIt(async () => {
      await client.query(sql.count);
      await client.query(sql.page);
    });
    const get = await timeIt(() => client.query(sql.get(randomId())));
    const explain = async (q: { text: string; values: unknown[] }) =>
      (await client.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, values: q.values })).rows.map((r) => r['QUERY PLAN']);
    return {
      iterations: SQL_ITERATIONS,
      count,
      page,
      pagePk,
      listCountPlusPage: listBoth,
      get,
      statements: { count: sql.count.text, page: sql.page.text, pagePk: sql.pagePk.text, get: sql.get(1).text },
      explain: { count: await explain(sql.count), page: await explain(sql.page), pagePk: await explain(sql.pagePk), get: await explain(sql.get(randomId())) },
    };
  } finally {
    await client.end();
  }
}

/** The records service in this process (no HTTP, no authentication): the platform's own time per call. */
async function serviceInProcess(url: string, site: string) {
  const orm = await createOrm(url, { poolMax: 4 });
  try {
    const scope = { app_slug: APP };
    const query = (q: string) => Object.fromEntries(new URLSearchParams(q));
    const call = (fn: (ctx: ReturnType<typeof makeContext>) => Promise<unknown>) => fn(makeContext(orm.em.fork(), systemActor('bench'), site));
    const timeIt = async (fn: () => Promise<unknown>) => {
      for (let i = 0; i < Math.min(20, SQL_ITERATIONS); i++) await fn();
      const out: number[] = [];
      for (let i = 0; i < SQL_ITERATIONS; i++) {
        const t0 = performance.now();
        await fn();
        out.push(performance.now() - t0);
      }
      return stats(out);
    };
    return {
      iterations: SQL_ITERATIONS,
      list: await timeIt(() => call((ctx) => listRecords(ctx, scope, TABLE, query(FILTER)))),
      listByPk: await timeIt(() => call((ctx) => listRecords(ctx, scope, TABLE, query(FILTER_PK)))),
      get: await timeIt(() => call((ctx) => getRecord(ctx, scope, TABLE, String(randomId())))),
    };
  } finally {
    await orm.close(true);
  }
}

function makeRecords(firstId: number, n: number): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, k) => {
    const id = firstId + k;
    return {
      id,
      name: `Bulk ${id}`,
      email: `bulk${id}@example.com`,
      age: 18 + (id % 63),
      city: CITIES[id % CITIES.length],
      created_at: new Date(Date.UTC(2024, 0, 1) + id * 1000).toISOString(),
      score: (id % 10000) / 100,
    };
  });
}

interface BulkAttempt {
  records: number;
  bodyBytes: number;
  status: number;
  ms: number;
  stored: boolean;
  error?: string;
}

/** One POST of `n` records, timed from sending the request to the end of the answer. */
async function bulkOnce(url: string, token: string, firstId: number, n: number, countRows: () => Promise<number>): Promise<BulkAttempt> {
  const raw = JSON.stringify(makeRecords(firstId, n));
  const before = await countRows();
  const t0 = performance.now();
  const res = await api(url, 'POST', { token, raw });
  const ms = r2(performance.now() - t0);
  const after = await countRows();
  const stored = res.status === 201 && after - before === n && Array.isArray(res.body.data) && res.body.data.length === n;
  const error = res.status === 201 ? undefined : `${res.body.message ?? ''} ${res.body.errors ? JSON.stringify(res.body.errors).slice(0, 200) : res.text.slice(0, 200)}`.trim();
  return { records: n, bodyBytes: Buffer.byteLength(raw), status: res.status, ms, stored, ...(error ? { error } : {}) };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? r2(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN;
};

function vmRssKb(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

interface CsvResult {
  skipped?: string;
  status?: number;
  contentType?: string;
  rows?: number;
  expectedRows?: number;
  bytes?: number;
  firstByteMs?: number;
  seconds?: number;
  rowsPerSec?: number;
  mibPerSec?: number;
  rssMiB?: { start: number; peak: number; end: number; atQuarter: number; atHalf: number; atThreeQuarters: number; growthAfterFirstQuarter: number; growth: number };
  rssSamples?: number;
  /** At most 60 samples, evenly spaced: [seconds, RSS MiB, rows received]. */
  rssTrace?: [number, number, number][];
  flat?: boolean;
}

/** Streams the whole table as CSV (discarding it) while sampling the platform's RSS every 100 ms. */
function streamCsv(url: string, token: string, pid: number, expectedRows: number): Promise<CsvResult> {
  return new Promise((resolve, reject) => {
    const samples: { t: number; kb: number; rows: number }[] = [];
    let rowsSeen = 0;
    let newlines = 0;
    let bytes = 0;
    let last = 10;
    const startKb = vmRssKb(pid) ?? NaN;
    const t0 = performance.now();
    let firstByte = NaN;
    const req = http.get(url, { headers: { authorization: `Bearer ${token}` }, agent: false }, (res) => {
      const type = String(res.headers['content-type'] ?? '');
      if (res.statusCode !== 200 || !type.startsWith('text/csv')) {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d.slice(0, 2000)));
        res.on('end', () => resolve({ skipped: `GET ?format=csv answered ${res.statusCode} ${type}: ${text.slice(0, 300)}`, status: res.statusCode, contentType: type }));
        return;
      }
      const timer = setInterval(() => {
        const kb = vmRssKb(pid);
        if (kb !== null) samples.push({ t: performance.now() - t0, kb, rows: rowsSeen });
      }, 100);
      res.on('data', (chunk: Buffer) => {
        if (Number.isNaN(firstByte)) firstByte = performance.now() - t0;
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) newlines++;
        last = chunk[chunk.length - 1]!;
        rowsSeen = Math.max(0, newlines - 1);
      });
      res.on('error', (err) => {
        clearInterval(timer);
        reject(err);
      });
      res.on('end', () => {
        clearInterval(timer);
        const seconds = (performance.now() - t0) / 1000;
        const endKb = vmRssKb(pid) ?? NaN;
        const lines = newlines + (bytes && last !== 10 ? 1 : 0);
        const rows = Math.max(0, lines - 1); // minus the header line
        const kbAt = (fraction: number) => {
          const s = samples.find((x) => x.rows >= fraction * rows);
          return s ? s.kb : endKb;
        };
        const peak = Math.max(startKb, endKb, ...samples.map((s) => s.kb));
        const quarter = kbAt(0.25);
        const growthAfterFirstQuarter = MiB(peak - quarter);
        resolve({
          status: 200,
          contentType: type,
          rows,
          expectedRows,
          bytes,
          firstByteMs: r2(firstByte),
          seconds: r2(seconds),
          rowsPerSec: Math.round(rows / seconds),
          mibPerSec: r2(bytes / 2 ** 20 / seconds),
          rssMiB: {
            start: MiB(startKb),
            peak: MiB(peak),
            end: MiB(endKb),
            atQuarter: MiB(quarter),
            atHalf: MiB(kbAt(0.5)),
            atThreeQuarters: MiB(kbAt(0.75)),
            growthAfterFirstQuarter,
            growth: MiB(peak - startKb),
          },
          rssSamples: samples.length,
          rssTrace: samples
            .filter((_, i) => i % Math.max(1, Math.ceil(samples.length / 60)) === 0)
            .map((x) => [r2(x.t / 1000), MiB(x.kb), x.rows] as [number, number, number]),
          // Within one export: the last three quarters of the rows add no more than 32 MiB
          // (the verdict also asks that a repeated export does not climb higher; see main).
          flat: growthAfterFirstQuarter <= 32,
        });
      });
    });
    req.on('error', reject);
  });
}

interface Target {
  description: string;
  value: number | string | null;
  ok: boolean | null;
}

interface BulkResult {
  big: BulkAttempt[];
  bigMedianMs: number | null;
  small: BulkAttempt[];
  smallMedianMs: number | null;
}

interface CsvRuns {
  csv: CsvResult | undefined;
  csvRuns: CsvResult[];
  csvRepeatGrowth: number | null;
}

/** The platform child and the baseline child on the bench database. */
async function startServers(url: string): Promise<{ platform: Child; baseline: Child }> {
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: url,
    PLATFORM_SECRET_KEY: SECRET,
    PLATFORM_ADMIN_USERNAME: ADMIN.username,
    PLATFORM_ADMIN_PASSWORD: ADMIN.password,
    PLATFORM_BASE_DOMAIN: 'bench.localhost',
    PLATFORM_DATA_DIR: path.join(os.tmpdir(), 'platform-bench-data'), // unused with DATABASE_URL and a secret set
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: 'warn',
  };
  const platform = await startChild('platform', 'server.ts', { env });
  children.push(platform);
  const baseline = await startChild('baseline', 'baseline.ts', { env });
  children.push(baseline);
  log(`platform pid ${platform.pid} at ${platform.url}; baseline pid ${baseline.pid} at ${baseline.url}`);
  return { platform, baseline };
}

/** The HTTP scenarios (list, listpk, get) of BENCH_ONLY, each with 1 connection and with BENCH_CONNECTIONS. */
function httpLoads(prefix: string, token: string) {
  const auth = { authorization: `Bearer ${token}` };
  const loads: { id: string; title: string; request: Request; connections: number; durationSec: number }[] = [];
  const list: Request = { method: 'GET', path: `${prefix}?${FILTER}`, headers: auth };
  const get: Request = { method: 'GET', path: `${prefix}1/`, headers: auth, nextPath: () => `${prefix}${randomId()}/` };
  if (wanted('list')) {
    loads.push({ id: 'list-1', title: `list, filtered + sorted page of 20 (1 conn)`, request: list, connections: 1, durationSec: SEQ_DURATION });
    loads.push({ id: 'list-n', title: `list, filtered + sorted page of 20 (${settings.connections} conn)`, request: list, connections: settings.connections, durationSec: settings.durationSec });
  }
  if (wanted('listpk')) {
    const byPk: Request = { method: 'GET', path: `${prefix}?${FILTER_PK}`, headers: auth };
    loads.push({ id: 'listpk-1', title: `list, same filter, sorted by id (1 conn)`, request: byPk, connections: 1, durationSec: SEQ_DURATION });
    loads.push({ id: 'listpk-n', title: `list, same filter, sorted by id (${settings.connections} conn)`, request: byPk, connections: settings.connections, durationSec: settings.durationSec });
  }
  if (wanted('get')) {
    loads.push({ id: 'get-1', title: 'get by random id (1 conn)', request: get, connections: 1, durationSec: SEQ_DURATION });
    loads.push({ id: 'get-n', title: `get by random id (${settings.connections} conn)`, request: get, connections: settings.connections, durationSec: settings.durationSec });
  }
  return loads;
}

const ratio = (x: number | null, y: number | null) => (x && y ? r2(x / y) : null);

/** Each HTTP scenario against both servers (alternating rounds); failed requests are problems of the run. */
async function runLoads(platform: Child, baseline: Child, prefix: string, token: string, problems: string[]): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const l of httpLoads(prefix, token)) {
    log(`${l.title}…`);
    const { platform: p, baseline: b, roundRatios } = await compare(platform, baseline, l.request, { ...settings, connections: l.connections, durationSec: l.durationSec });
    for (const [who, m] of [['platform', p], ['baseline', b]] as const) {
      if (m.non2xx || m.errors || m.timeouts) problems.push(`${l.id} on ${who}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`);
    }
    results.push({
      id: l.id,
      title: l.title,
      request: `${l.request.method} ${l.request.nextPath ? `${prefix}{random id}/` : l.request.path}`,
      platform: p,
      baseline: b,
      overheadRatio: ratio(b.requestsPerSec, p.requestsPerSec) ?? NaN,
      roundRatios,
      cpuRatio: ratio(p.serverCpuUsPerRequest, b.serverCpuUsPerRequest),
    });
  }
  return results;
}

/** BENCH_BULK records in one request, then 1,000, BENCH_BULK_REPEAT times each; new ids after the seeded rows. */
async function runBulk(url: string, token: string, countRows: () => Promise<number>): Promise<BulkResult> {
  let nextId = ROWS + 1;
  const big: BulkAttempt[] = [];
  const small: BulkAttempt[] = [];
  for (let i = 0; i < BULK_REPEAT; i++) {
    log(`bulk create: ${BULK.toLocaleString('en')} records in one request (${i + 1}/${BULK_REPEAT})…`);
    const a = await bulkOnce(url, token, nextId, BULK, countRows);
    if (a.stored) nextId += BULK;
    log(`  → ${a.status} in ${a.ms} ms${a.error ? `: ${a.error}` : ''}`);
    big.push(a);
  }
  for (let i = 0; i < BULK_REPEAT; i++) {
    log(`bulk create: 1,000 records in one request (${i + 1}/${BULK_REPEAT})…`);
    const a = await bulkOnce(url, token, nextId, 1000, countRows);
    if (a.stored) nextId += 1000;
    log(`  → ${a.status} in ${a.ms} ms${a.error ? `: ${a.error}` : ''}`);
    small.push(a);
  }
  const med = (xs: BulkAttempt[]) => (xs.every((x) => x.stored) ? median(xs.map((x) => x.ms)) : null);
  return { big, bigMedianMs: med(big), small, smallMedianMs: med(small) };
}

/** The CSV export, BENCH_CSV_REPEAT times, with the platform's RSS; `flat` when memory stays bounded. */
async function runCsv(url: string, token: string, pid: number, countRows: () => Promise<number>, problems: string[]): Promise<CsvRuns> {
  const csvRuns: CsvResult[] = [];
  let csvRepeatGrowth: number | null = null;
  const expected = await countRows();
  for (let i = 0; i < CSV_REPEAT; i++) {
    log(`CSV export of ${expected.toLocaleString('en')} rows (${i + 1}/${CSV_REPEAT}; platform RSS sampled every 100 ms)…`);
    await new Promise((r) => setTimeout(r, settings.settleMs));
    const run = await streamCsv(url, token, pid, expected);
    csvRuns.push(run);
    if (run.skipped) {
      log(`  skipped: ${run.skipped}`);
      break;
    }
    log(`  → ${run.rows?.toLocaleString('en')} rows in ${run.seconds} s (${run.rowsPerSec?.toLocaleString('en')} rows/s); RSS MiB ${JSON.stringify(run.rssMiB)}`);
    if (run.rows !== run.expectedRows) problems.push(`csv: ${run.rows} rows streamed, ${run.expectedRows} in the table`);
  }
  const csv = csvRuns[0];
  const done = csvRuns.filter((r) => !r.skipped);
  // A repeated export of the same rows must not climb higher: memory bounded, not retained per row.
  if (done.length > 1) csvRepeatGrowth = r2(done.at(-1)!.rssMiB!.peak - done[0]!.rssMiB!.peak);
  if (csv && !csv.skipped) csv.flat = done.every((r) => r.flat) && (csvRepeatGrowth === null || csvRepeatGrowth <= 16);
  return { csv, csvRuns, csvRepeatGrowth };
}

/** The issue's targets, for what was measured. */
function verdicts(results: ScenarioResult[], bulk: BulkResult | undefined, runs: CsvRuns | undefined): Record<string, Target> {
  const byId = (id: string) => results.find((r) => r.id === id);
  const targets: Record<string, Target> = {};
  const put = (key: string, description: string, value: number | string | null, pass: boolean | null) => (targets[key] = { description, value, ok: pass });
  const l1 = byId('list-1');
  const ln = byId('list-n');
  const g1 = byId('get-1');
  const gn = byId('get-n');
  if (l1) put('listP50', `list page p50 < ${LIST_P50_MS} ms (1 connection)`, l1.platform.p50Ms, l1.platform.p50Ms < LIST_P50_MS);
  if (g1) put('getP50', `get by id p50 < ${GET_P50_MS} ms (1 connection)`, g1.platform.p50Ms, g1.platform.p50Ms < GET_P50_MS);
  if (bulk) {
    const refused = bulk.big.find((a) => !a.stored);
    put('bulk', `${BULK.toLocaleString('en')} records in one request < ${BULK_MS} ms (median of ${BULK_REPEAT})`, bulk.bigMedianMs ?? `refused: ${refused?.status} ${refused?.error ?? ''}`.trim(), bulk.bigMedianMs === null ? false : bulk.bigMedianMs < BULK_MS);
  }
  const csv = runs?.csv;
  if (runs && csv) {
    const { csvRuns, csvRepeatGrowth } = runs;
    const value = csv.skipped
      ? `skipped: ${csv.skipped.slice(0, 120)}`
      : `${csvRuns.filter((r) => !r.skipped).map((r) => `+${r.rssMiB?.growthAfterFirstQuarter}`).join(' / ')} MiB after the first quarter; peak of the last export ${csvRepeatGrowth === null ? 'n/a' : `${csvRepeatGrowth >= 0 ? '+' : ''}${csvRepeatGrowth} MiB`} vs the first`;
    put('csvFlat', `CSV export: RSS flat (≤ 32 MiB growth after the first quarter of the rows, and a repeated export peaks ≤ 16 MiB higher)`, value, csv.skipped ? null : (csv.flat ?? null));
  }
  if (ln) put('listRatio', `list overhead ratio ≤ ${RATIO_LIMIT} (${settings.connections} conn, baseline ÷ platform req/s)`, ln.overheadRatio, ln.overheadRatio <= RATIO_LIMIT);
  if (gn) put('getRatio', `get overhead ratio ≤ ${RATIO_LIMIT} (${settings.connections} conn, baseline ÷ platform req/s)`, gn.overheadRatio, gn.overheadRatio <= RATIO_LIMIT);
  return targets;
}

type ServiceTimes = Awaited<ReturnType<typeof serviceInProcess>>;
type SqlTimes = Awaited<ReturnType<typeof sqlAlone>>;

/** The text summary printed at the end: the scenario table, then a paragraph per measurement, then the verdicts. */
function summary(
  m: { results: ScenarioResult[]; p50Ratios: Record<string, number | null>; service?: ServiceTimes; sql?: SqlTimes; bulk?: BulkResult; runs?: CsvRuns },
  targets: Record<string, Target>,
  problems: string[],
): string {
  const { results, p50Ratios, service, sql, bulk } = m;
  const out: string[] = [];
  if (results.length) {
    out.push(formatTable({ scenarios: results, targets: {}, problems: [] } as unknown as Report).trimEnd());
    out.push(`p50 ratio (platform ÷ baseline): ${results.map((r) => `${r.id} ${p50Ratios[r.id]}`).join('; ')}`);
  }
  if (service) {
    out.push('');
    out.push(`records service in process (no HTTP/auth, ${SQL_ITERATIONS} calls): list p50 ${service.list.p50Ms} ms (sorted by id: ${service.listByPk.p50Ms} ms), get p50 ${service.get.p50Ms} ms`);
  }
  if (sql) {
    if (!service) out.push('');
    out.push(`records SQL alone (one pg connection from the bench process, ${SQL_ITERATIONS} runs): count p50 ${sql.count.p50Ms} ms, page p50 ${sql.page.p50Ms} ms (sorted by id: ${sql.pagePk.p50Ms} ms), count + page p50 ${sql.listCountPlusPage.p50Ms} ms, get p50 ${sql.get.p50Ms} ms`);
  }
  if (bulk) {
    out.push('');
    const line = (a: BulkAttempt) => `${a.status}${a.stored ? '' : ' (not stored)'} ${a.ms} ms`;
    out.push(`bulk create ${BULK.toLocaleString('en')} (${bulk.big[0] ? (bulk.big[0].bodyBytes / 2 ** 20).toFixed(2) : '?'} MiB body): ${bulk.big.map(line).join(', ')}; median ${bulk.bigMedianMs ?? '–'} ms`);
    if (bulk.big.some((a) => a.error)) out.push(`  refused: ${bulk.big.find((a) => a.error)!.error}`);
    out.push(`bulk create 1,000: ${bulk.small.map(line).join(', ')}; median ${bulk.smallMedianMs ?? '–'} ms`);
  }
  const csv = m.runs?.csv;
  if (csv) {
    out.push('');
    if (csv.skipped) out.push(`CSV export: SKIPPED — ${csv.skipped}`);
    else
      for (const [i, c] of m.runs!.csvRuns.entries()) {
        out.push(
          `CSV export ${i + 1}: ${c.rows?.toLocaleString('en')} rows, ${((c.bytes ?? 0) / 2 ** 20).toFixed(1)} MiB in ${c.seconds} s = ${c.rowsPerSec?.toLocaleString('en')} rows/s (first byte ${c.firstByteMs} ms); ` +
            `platform RSS MiB start ${c.rssMiB?.start}, at 25/50/75 % ${c.rssMiB?.atQuarter}/${c.rssMiB?.atHalf}/${c.rssMiB?.atThreeQuarters}, peak ${c.rssMiB?.peak}, end ${c.rssMiB?.end}`,
        );
      }
  }
  out.push('');
  for (const t of Object.values(targets)) out.push(`${t.ok === null ? 'SKIP' : t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value}`);
  for (const p of problems) out.push(`INVALID  ${p}`);
  return out.join('\n');
}

/** bench/results/records-latest.json and a timestamped copy. */
function writeResults(report: unknown, timestamp: string): void {
  const dir = path.join(import.meta.dirname, 'results');
  fs.mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(report, null, 2)}\n`;
  const files = [path.join(dir, 'records-latest.json'), path.join(dir, `records-${timestamp.replace(/:/g, '-')}.json`)];
  for (const f of files) fs.writeFileSync(f, json);
  log(`written: ${files.map((f) => path.relative(process.cwd(), f)).join(', ')}`);
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  db = await openBenchDatabase(log);
  const dbUrl = db.url;
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const { platform, baseline } = await startServers(dbUrl);

  const { site, token, physical } = await setupTable(platform.url);
  const table = `"${site}"."${physical}"`;
  const prefix = `/sites/${site}/api/apps/${APP}/datatables/${TABLE}/data/`;
  log(`site ${site}, table ${table}; seeding ${ROWS.toLocaleString('en')} rows…`);
  const seed = await seedRows(dbUrl, table);
  log(`seeded ${seed.rows.toLocaleString('en')} rows in ${seed.seconds} s (table ${seed.tableMiB} MiB, indexes ${seed.indexesMiB} MiB)`);
  await checkEquivalence(platform.url, baseline.url, prefix, token);
  log('both servers answer the list page and records alike; measuring');

  const problems: string[] = [];
  const results = await runLoads(platform, baseline, prefix, token, problems);
  let service: ServiceTimes | undefined;
  if (wanted('service')) {
    log(`the records service in process, ${SQL_ITERATIONS} calls each…`);
    service = await serviceInProcess(dbUrl, site);
  }
  let sql: SqlTimes | undefined;
  if (wanted('sql')) {
    log(`the records SQL alone, ${SQL_ITERATIONS} times each over one connection…`);
    sql = await sqlAlone(dbUrl, table);
  }
  const countRows = async () => {
    const client = new pg.Client({ connectionString: dbUrl });
    await client.connect();
    try {
      return (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
    } finally {
      await client.end();
    }
  };
  const bulk = wanted('bulk') ? await runBulk(platform.url + prefix, token, countRows) : undefined;
  const runs = wanted('csv') ? await runCsv(platform.url + `${prefix}?format=csv`, token, platform.pid, countRows, problems) : undefined;

  const targets = verdicts(results, bulk, runs);
  const p50Ratios = Object.fromEntries(results.map((r) => [r.id, ratio(r.platform.p50Ms, r.baseline.p50Ms)]));
  const report = {
    timestamp,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version, rows: seed.rows, seedSeconds: seed.seconds, tableMiB: seed.tableMiB, indexesMiB: seed.indexesMiB },
    settings: { ...settings, seqDurationSec: SEQ_DURATION, rows: ROWS, bulk: BULK, bulkRepeat: BULK_REPEAT, sqlIterations: SQL_ITERATIONS, filter: FILTER, loadGenerator: 'autocannon 8 (in the bench process)' },
    scenarios: results,
    p50Ratios,
    serviceInProcess: service,
    sqlAlone: sql,
    bulk,
    csv: runs?.csv,
    csvRuns: runs?.csvRuns ?? [],
    csvRepeatGrowthMiB: runs?.csvRepeatGrowth ?? null,
    targets,
    valid: problems.length === 0,
    problems,
  };
  console.log(`\n${summary({ results, p50Ratios, service, sql, bulk, runs }, targets, problems)}\n`);
  writeResults(report, timestamp);
  if (!report.valid) return 1;
  const missed = Object.values(targets).some((t) => t.ok === false);
  return missed && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

let code = 1;
try {
  code = await main();
} catch (err) {
  log(`failed: ${(err as Error).stack ?? err}`);
} finally {
  await cleanup();
}
process.exit(code);
