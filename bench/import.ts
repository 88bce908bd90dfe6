// `npm run bench:import`: the CSV import of BENCH_ROWS rows (default 400,000) into a flat_table
// table with a foreign key, through the platform and by hand in the same run.
//
// Setup (not measured). A fresh database (bench/database.ts) served by the platform child
// (bench/server.ts). Over its HTTP API: a site, an app, a flat_table data source, the table
// `cities` (id integer primary key, name; 20 rows) and the table `customers` (id integer
// primary key, name required, email format email, age integer 0–150, score number, joined date,
// city_id integer with a foreign key to cities.id), both materialized. `customers_bare` is its
// twin made by hand (CREATE TABLE … (LIKE … INCLUDING ALL) and the same foreign key). The CSV
// file (header + BENCH_ROWS rows, deterministic values) is written to a temporary directory.
//
// Scenarios, each run BENCH_ROUNDS times (default 2) in alternating order (S B H | H B S …), the
// target table emptied (TRUNCATE) before each run:
//   service   importCsv (shared/data/records-csv.ts) in this process: spooling, parsing, casting,
//             validation, the policies, inserts in one transaction (MikroORM, pool of 4).
//   http      POST …/data/import/ with the file as a text/csv body to the platform child.
//   failing   (not in the ratio) importCsv of the same file with two bad rows at its start (a bad
//             number in row 2, a missing city in row 3): nothing is inserted, every other row is
//             still read, validated and checked against the database set-based — the price of a
//             report of every problem in one run. The 400's report must list exactly those two rows.
//   baseline  what a skilled engineer writes by hand with `pg` alone: the same file parsed by
//             fast-csv, cells converted to numbers where the column is numeric, 5,000 rows per
//             INSERT … SELECT FROM unnest($1::bigint[], $2::text[], …) (one array parameter per
//             column: 6.2 s here against 7.0 s for multi-row VALUES with 35,000 parameters), all
//             in one transaction, into the twin table. (pg-copy-streams is not installed: no COPY.)
// Each run's rows are counted afterwards (a run that stored another number is invalid). The
// figures: seconds and rows/s per run, the median per scenario, and baseline ÷ platform.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ROWS
// (400000), BENCH_ROUNDS (2), BENCH_ONLY=service,http,baseline,failing.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'fast-csv';
import pg from 'pg';
import { systemActor } from '../shared/auth/actor.ts';
import { makeContext } from '../shared/context.ts';
import { importCsv } from '../shared/data/records-csv.ts';
import { createOrm } from '../shared/db/orm.ts';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { ADMIN, APP, api, envNumber, ok, r2, serverEnv, siteToken } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const ROWS = Math.max(1, Math.round(envNumber('BENCH_ROWS', 400_000)));
const ROUNDS = Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2)));
const SCENARIOS = ['service', 'http', 'baseline', 'failing'] as const;
type Scenario = (typeof SCENARIOS)[number];
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const unknown = ONLY?.filter((s) => !(SCENARIOS as readonly string[]).includes(s));
if (unknown?.length) throw new Error(`BENCH_ONLY: unknown scenario ${unknown.join(', ')} (${SCENARIOS.join(', ')})`);
const SECRET = randomBytes(32).toString('base64url');
const BATCH = 5000;
const CITIES = 20;
const log = (msg: string) => process.stderr.write(`[bench:import] ${msg}\n`);

const CITY_SCHEMA = { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }], primaryKey: 'id' };
const SCHEMA = {
  fields: [
    { name: 'id', type: 'integer' },
    { name: 'name', type: 'string', constraints: { required: true } },
    { name: 'email', type: 'string', format: 'email' },
    { name: 'age', type: 'integer', constraints: { minimum: 0, maximum: 150 } },
    { name: 'score', type: 'number' },
    { name: 'joined', type: 'date' },
    { name: 'city_id', type: 'integer' },
  ],
  primaryKey: 'id',
  foreignKeys: [{ fields: 'city_id', reference: { resource: 'cities', fields: 'id' } }],
};
const COLUMNS = SCHEMA.fields.map((f) => f.name);
const NUMERIC = new Set(['id', 'age', 'score', 'city_id']);

let db: BenchDatabase | undefined;
const children: Child[] = [];
let tmp: string | undefined;
let cleaning: Promise<void> | undefined;
/** Stops the children (by PID), then drops the database and stops the embedded PostgreSQL; removes the CSV. */
const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  })());

/** The CSV file: a header, then `rows` rows with deterministic values. */
async function writeCsv(file: string, rows: number): Promise<number> {
  const out = fs.createWriteStream(file);
  const day = 86_400_000;
  const start = Date.UTC(2020, 0, 1);
  let chunk = `${COLUMNS.join(',')}\n`;
  for (let i = 1; i <= rows; i++) {
    const joined = new Date(start + (i % 1500) * day).toISOString().slice(0, 10);
    chunk += `${i},Customer ${i},customer${i}@example.com,${18 + (i % 63)},${(i % 100_000) / 100},${joined},${1 + (i % CITIES)}\n`;
    if (chunk.length > 1 << 16 || i === rows) {
      if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      chunk = '';
    }
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return fs.statSync(file).size;
}

/** The same file with a bad number in row 2 and a city that does not exist in row 3. */
async function writeFailingCsv(from: string, to: string): Promise<void> {
  const text = fs.readFileSync(from, 'utf8');
  const lines = text.split('\n', 4);
  const bad2 = lines[2]!.split(',');
  bad2[4] = 'lots';
  const bad3 = lines[3]!.split(',');
  bad3[6] = '999';
  const head = lines.join('\n').length;
  fs.writeFileSync(to, [lines[0], lines[1], bad2.join(','), bad3.join(',')].join('\n') + text.slice(head));
}

/** Site, app, data source, the tables `cities` (seeded) and `customers`, materialized; over the platform's HTTP API. */
async function setup(base: string): Promise<{ site: string; physical: string }> {
  const admin = ok(await api(`${base}/api/auth/jwt/token/`, 'POST', { body: ADMIN }), 200, 'admin login');
  const org = ok(await api(`${base}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Import Bench' } }), 201, 'organization');
  const site = ok(await api(`${base}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Import Bench' } }), 201, 'site');
  const schema = site.schema_name as string;
  const siteBase = `${base}/sites/${schema}/api/apps`;
  const token = await siteToken(base, schema);
  ok(await api(`${siteBase}/`, 'POST', { token, body: { name: 'Bench' } }), 201, 'app');
  ok(await api(`${siteBase}/${APP}/datasources/`, 'POST', { token, body: { name: 'Main', slug: 'main', provider_type: 'flat_table' } }), 201, 'data source');
  let physical = '';
  for (const [name, json_schema] of [['cities', CITY_SCHEMA], ['customers', SCHEMA]] as const) {
    ok(await api(`${siteBase}/${APP}/datasources/main/datatables/`, 'POST', { token, body: { name, json_schema } }), 201, `table ${name}`);
    physical = ok(await api(`${siteBase}/${APP}/datatables/${name}/materialize/`, 'POST', { token }), 200, `materialize ${name}`).physical_table_name as string;
  }
  const cities = Array.from({ length: CITIES }, (_, k) => ({ id: k + 1, name: `City ${k + 1}` }));
  ok(await api(`${siteBase}/${APP}/datatables/cities/data/`, 'POST', { token, body: cities }), 201, 'cities');
  return { site: schema, physical };
}

/** The hand-written import: fast-csv, numbers converted, 5,000 rows per INSERT of unnested array parameters, one transaction. */
async function bareImport(client: pg.Client, table: string, file: string): Promise<void> {
  const types = ['bigint', 'text', 'text', 'bigint', 'float8', 'date', 'bigint'];
  const insert = (rows: unknown[][]) =>
    client.query(`INSERT INTO ${table} (${COLUMNS.map((c) => `"${c}"`).join(', ')}) SELECT * FROM unnest(${types.map((t, i) => `$${i + 1}::${t}[]`).join(', ')})`, COLUMNS.map((_, c) => rows.map((r) => r[c])));
  const numeric = COLUMNS.map((c) => NUMERIC.has(c));
  await client.query('BEGIN');
  try {
    let batch: unknown[][] = [];
    let header = true;
    for await (const cells of fs.createReadStream(file).pipe(parse<string[], string[]>({ headers: false })) as AsyncIterable<string[]>) {
      if (header) {
        header = false;
        continue;
      }
      batch.push(cells.map((v, i) => (v === '' ? null : numeric[i] ? Number(v) : v)));
      if (batch.length === BATCH) {
        await insert(batch);
        batch = [];
      }
    }
    if (batch.length) await insert(batch);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

/** POSTs the file as the import's text/csv body; the answer's status and body. */
function postFile(url: string, token: string, file: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv', 'content-length': String(fs.statSync(file).size) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    fs.createReadStream(file).pipe(req);
  });
}

interface Run {
  scenario: Scenario;
  round: number;
  seconds: number;
  rowsPerSec: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  db = await openBenchDatabase(log);
  const url = db.url;
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const platform = await startChild('platform', 'server.ts', { env: serverEnv(url, SECRET) });
  children.push(platform);
  log(`platform pid ${platform.pid} at ${platform.url}`);
  const { site, physical } = await setup(platform.url);
  const table = `"${site}"."${physical}"`;
  const bare = `"${site}"."customers_bare"`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const orm = await createOrm(url, { poolMax: 4 });
  try {
    await client.query(`CREATE TABLE ${bare} (LIKE ${table} INCLUDING ALL)`);
    const cities = (await client.query<{ t: string }>(`SELECT confrelid::regclass::text AS t FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f'`, [table])).rows[0]!.t;
    await client.query(`ALTER TABLE ${bare} ADD FOREIGN KEY (city_id) REFERENCES ${cities} (id)`);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-bench-import-'));
    const file = path.join(tmp, 'customers.csv');
    const bytes = await writeCsv(file, ROWS);
    const failingFile = path.join(tmp, 'customers-failing.csv');
    await writeFailingCsv(file, failingFile);
    log(`site ${site}, table ${table}; CSV of ${ROWS.toLocaleString('en')} rows, ${r2(bytes / 2 ** 20)} MiB`);

    const problems: string[] = [];
    const scenarios = SCENARIOS.filter((s) => !ONLY || ONLY.includes(s));
    const work: Record<Scenario, { table: string; stores?: 0; run: () => Promise<void> }> = {
      service: {
        table,
        run: async () => {
          const ctx = makeContext(orm.em.fork(), systemActor('bench'), site);
          const report = await importCsv(ctx, { app_slug: APP }, 'customers', fs.createReadStream(file));
          if (report.created !== ROWS) problems.push(`service: created ${report.created} of ${ROWS} (${JSON.stringify(report.errors.slice(0, 3))})`);
        },
      },
      http: {
        table,
        run: async () => {
          const token = await siteToken(platform.url, site);
          const res = await postFile(`${platform.url}/sites/${site}/api/apps/${APP}/datatables/customers/data/import/`, token, file);
          if (res.status !== 200) problems.push(`http: ${res.status} ${res.text.slice(0, 300)}`);
        },
      },
      baseline: { table: bare, run: () => bareImport(client, bare, file) },
      failing: {
        table,
        stores: 0,
        run: async () => {
          const ctx = makeContext(orm.em.fork(), systemActor('bench'), site);
          const failed = await importCsv(ctx, { app_slug: APP }, 'customers', fs.createReadStream(failingFile)).then(
            (report) => report,
            (err: { data?: { errors: { row: number }[] } }) => err.data,
          );
          const rows = failed?.errors.map((e) => e.row);
          if (JSON.stringify(rows) !== '[2,3]') problems.push(`failing: reported rows ${JSON.stringify(rows)}, expected [2,3]`);
        },
      },
    };
    const runs: Run[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const scenario of round % 2 ? scenarios : [...scenarios].reverse()) {
        const { table: into, stores = ROWS, run } = work[scenario];
        await client.query(`TRUNCATE ${into}`);
        await client.query('CHECKPOINT'); // the previous run's writes flushed, not this run's to pay
        const t0 = performance.now();
        await run();
        const seconds = (performance.now() - t0) / 1000;
        const stored = (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${into}`)).rows[0]!.n;
        if (stored !== stores) problems.push(`${scenario} round ${round}: ${stored} rows stored, ${stores} expected`);
        runs.push({ scenario, round, seconds: r2(seconds), rowsPerSec: Math.round(ROWS / seconds) });
        log(`${scenario} (round ${round}): ${r2(seconds)} s, ${Math.round(ROWS / seconds).toLocaleString('en')} rows/s`);
      }
    }
    const summary = Object.fromEntries(
      scenarios.map((s) => {
        const mine = runs.filter((r) => r.scenario === s);
        return [s, { medianSeconds: r2(median(mine.map((r) => r.seconds))), medianRowsPerSec: Math.round(median(mine.map((r) => r.rowsPerSec))) }];
      }),
    ) as Partial<Record<Scenario, { medianSeconds: number; medianRowsPerSec: number }>>;
    const ratio = (s: Scenario) => (summary[s] && summary.baseline ? r2(summary.baseline.medianRowsPerSec / summary[s].medianRowsPerSec) : null);
    const report = {
      timestamp,
      command: reproduceCommand('bench:import'),
      machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
      database: { source: db.source, version: db.version },
      settings: { rows: ROWS, rounds: ROUNDS, csvMiB: r2(bytes / 2 ** 20), baselineBatch: BATCH, schema: SCHEMA },
      runs,
      summary,
      baselineOverService: ratio('service'),
      baselineOverHttp: ratio('http'),
      valid: problems.length === 0,
      problems,
    };
    const lines = scenarios.map((s) => `${s.padEnd(9)} ${runs.filter((r) => r.scenario === s).map((r) => `${r.seconds} s`).join(' / ')} → median ${summary[s]!.medianRowsPerSec.toLocaleString('en')} rows/s`);
    lines.push(`baseline ÷ service ${report.baselineOverService ?? '–'}, baseline ÷ http ${report.baselineOverHttp ?? '–'}`);
    for (const p of problems) lines.push(`INVALID  ${p}`);
    console.log(`\n${lines.join('\n')}\n`);
    writeResults('import', report, timestamp, log);
    return report.valid ? 0 : 1;
  } finally {
    await orm.close(true);
    await client.end();
  }
}

await runBench(main, cleanup, log);
