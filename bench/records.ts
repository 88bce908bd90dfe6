// `npm run bench:records`: the records API of a flat_table table of BENCH_ROWS rows (default
// 1,000,000) seen from inside — the records service in process, the records SQL alone, and the
// CSV export with the platform's memory. The HTTP comparisons with a hand-written baseline (get,
// list, bulk create) are `npm run bench:hotpath` (bench/hotpath.ts).
//
// Setup (not measured; bench/records-setup.ts). A fresh database (bench/database.ts) served by
// the platform child (bench/server.ts, rate limits off). Over the platform's HTTP API: a site,
// its superuser's token, an app, a flat_table data source and a table `people` (id integer
// primary key, name, email, age with an index, city, created_at, score), materialized. The rows
// are then written straight into the physical table by one INSERT … SELECT over generate_series
// (deterministic values from hashint4), followed by VACUUM ANALYZE (visibility map and
// statistics, as a table that has lived a while has them).
//
// Scenarios:
//   service  listRecords / getRecord called in this process (MikroORM, pool of 4), sequentially:
//          the platform's own time for a request without HTTP, routing and authentication — the
//          list page ?age__gte=30&age__lt=32&_sort=-age&page_size=20 (an indexed range, ≈ 3 % of
//          the rows), the same with _sort=id (a plan that stops after 20 matches), one record.
//   sql    the platform's records SQL alone, from this process over one pg connection (the
//          database's share of list and get), with EXPLAIN (ANALYZE, BUFFERS) of each statement in the report.
//   csv    GET …/data/?format=csv: every row streamed and discarded; duration, rows/s, and the
//          platform process's RSS (VmRSS every 100 ms): start, peak, end. Skipped with a message
//          when the platform does not answer text/csv. Repeated (BENCH_CSV_REPEAT, 2): memory that
//          is only lazily collected levels off on the second export; memory kept per row does not.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ROWS
// (1000000), BENCH_SQL_ITERATIONS (200), BENCH_CSV_REPEAT (2), BENCH_ONLY=service,sql,csv,
// BENCH_STRICT=1 (exit 1 when the CSV target is missed).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import pg from 'pg';
import { systemActor } from '../shared/auth/actor.ts';
import { makeContext } from '../shared/context.ts';
import { getRecord, listRecords } from '../shared/data/records.service.ts';
import { createOrm } from '../shared/db/orm.ts';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { APP, FILTER, TABLE, envNumber, r2, seedRows, serverEnv, setupTable } from './records-setup.ts';
import { machineInfo, writeResults } from './report.ts';

const ROWS = Math.max(100, Math.round(envNumber('BENCH_ROWS', 1_000_000)));
const SQL_ITERATIONS = Math.max(1, Math.round(envNumber('BENCH_SQL_ITERATIONS', 200)));
const CSV_REPEAT = Math.max(1, Math.round(envNumber('BENCH_CSV_REPEAT', 2)));
const SETTLE_MS = 1000;
const SCENARIOS = ['service', 'sql', 'csv'];
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const unknown = ONLY?.filter((s) => !SCENARIOS.includes(s));
if (unknown?.length) throw new Error(`BENCH_ONLY: unknown scenario ${unknown.join(', ')} (${SCENARIOS.join(', ')}; get, list and bulk are npm run bench:hotpath)`);
const wanted = (id: string) => !ONLY || ONLY.includes(id);
const SECRET = randomBytes(32).toString('base64url');
// The same rows in primary-key order: a plan that stops after 20 matches (a reference for FILTER's).
const FILTER_PK = 'age__gte=30&age__lt=32&_sort=id&page_size=20';
const log = (msg: string) => process.stderr.write(`[bench:records] ${msg}\n`);
const MiB = (kb: number) => r2(kb / 1024);

let db: BenchDatabase | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
/** Stops the children (by PID), then drops the database and stops the embedded PostgreSQL. */
const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());
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

interface CsvRuns {
  csv: CsvResult | undefined;
  csvRuns: CsvResult[];
  csvRepeatGrowth: number | null;
}

/** The CSV export, BENCH_CSV_REPEAT times, with the platform's RSS; `flat` when memory stays bounded. */
async function runCsv(url: string, token: string, pid: number, countRows: () => Promise<number>, problems: string[]): Promise<CsvRuns> {
  const csvRuns: CsvResult[] = [];
  let csvRepeatGrowth: number | null = null;
  const expected = await countRows();
  for (let i = 0; i < CSV_REPEAT; i++) {
    log(`CSV export of ${expected.toLocaleString('en')} rows (${i + 1}/${CSV_REPEAT}; platform RSS sampled every 100 ms)…`);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
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

/** The CSV target, when the export ran. */
function verdicts(runs: CsvRuns | undefined): Record<string, Target> {
  const csv = runs?.csv;
  if (!runs || !csv) return {};
  const { csvRuns, csvRepeatGrowth } = runs;
  const value = csv.skipped
    ? `skipped: ${csv.skipped.slice(0, 120)}`
    : `${csvRuns.filter((r) => !r.skipped).map((r) => `+${r.rssMiB?.growthAfterFirstQuarter}`).join(' / ')} MiB after the first quarter; peak of the last export ${csvRepeatGrowth === null ? 'n/a' : `${csvRepeatGrowth >= 0 ? '+' : ''}${csvRepeatGrowth} MiB`} vs the first`;
  return {
    csvFlat: {
      description: `CSV export: RSS flat (≤ 32 MiB growth after the first quarter of the rows, and a repeated export peaks ≤ 16 MiB higher)`,
      value,
      ok: csv.skipped ? null : (csv.flat ?? null),
    },
  };
}

type ServiceTimes = Awaited<ReturnType<typeof serviceInProcess>>;
type SqlTimes = Awaited<ReturnType<typeof sqlAlone>>;

/** The text summary printed at the end: a paragraph per measurement, then the verdicts. */
function summary(m: { service?: ServiceTimes; sql?: SqlTimes; runs?: CsvRuns }, targets: Record<string, Target>, problems: string[]): string {
  const { service, sql } = m;
  const out: string[] = [];
  if (service) {
    out.push(`records service in process (no HTTP/auth, ${SQL_ITERATIONS} calls): list p50 ${service.list.p50Ms} ms (sorted by id: ${service.listByPk.p50Ms} ms), get p50 ${service.get.p50Ms} ms`);
  }
  if (sql) {
    out.push(`records SQL alone (one pg connection from the bench process, ${SQL_ITERATIONS} runs): count p50 ${sql.count.p50Ms} ms, page p50 ${sql.page.p50Ms} ms (sorted by id: ${sql.pagePk.p50Ms} ms), count + page p50 ${sql.listCountPlusPage.p50Ms} ms, get p50 ${sql.get.p50Ms} ms`);
  }
  const csv = m.runs?.csv;
  if (csv) {
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

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  db = await openBenchDatabase(log);
  const dbUrl = db.url;
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const platform = await startChild('platform', 'server.ts', { env: serverEnv(dbUrl, SECRET) });
  children.push(platform);
  log(`platform pid ${platform.pid} at ${platform.url}`);

  const { site, token, physical } = await setupTable(platform.url);
  const table = `"${site}"."${physical}"`;
  const prefix = `/sites/${site}/api/apps/${APP}/datatables/${TABLE}/data/`;
  log(`site ${site}, table ${table}; seeding ${ROWS.toLocaleString('en')} rows…`);
  const seed = await seedRows(dbUrl, table, ROWS);
  log(`seeded ${seed.rows.toLocaleString('en')} rows in ${seed.seconds} s (table ${seed.tableMiB} MiB, indexes ${seed.indexesMiB} MiB)`);

  const problems: string[] = [];
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
  const runs = wanted('csv') ? await runCsv(platform.url + `${prefix}?format=csv`, token, platform.pid, countRows, problems) : undefined;

  const targets = verdicts(runs);
  const report = {
    timestamp,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version, rows: seed.rows, seedSeconds: seed.seconds, tableMiB: seed.tableMiB, indexesMiB: seed.indexesMiB },
    settings: { rows: ROWS, sqlIterations: SQL_ITERATIONS, csvRepeat: CSV_REPEAT, filter: FILTER, filterPk: FILTER_PK },
    serviceInProcess: service,
    sqlAlone: sql,
    csv: runs?.csv,
    csvRuns: runs?.csvRuns ?? [],
    csvRepeatGrowthMiB: runs?.csvRepeatGrowth ?? null,
    targets,
    valid: problems.length === 0,
    problems,
  };
  console.log(`\n${summary({ service, sql, runs }, targets, problems)}\n`);
  writeResults('records', report, timestamp, log);
  if (!report.valid) return 1;
  const missed = Object.values(targets).some((t) => t.ok === false);
  return missed && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
