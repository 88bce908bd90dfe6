// `npm run bench:migrations`: what schema migrations cost on a table of BENCH_ROWS rows (default
// 1,000,000), each one timed over HTTP (the PATCH, whole) and as the server recorded it
// (operation-history's duration_ms: the transaction's work), beside the same DDL written by hand on
// a twin table (the bare statement a skilled engineer would run in psql, no platform).
//
// Setup (not measured): a fresh database (bench/database.ts), the platform child (bench/server.ts)
// with DATA_SERVICE_MIGRATION_TIMEOUT_MS raised to 10 minutes (the rewrites of the document
// provider exceed the default 30 s at this size: that is a figure to report, not a failure to
// hide), over its HTTP API a site, an app, the flat table `people` (bench/records-setup.ts) with
// BENCH_ROWS rows by generate_series; its twin `people_twin` (CREATE TABLE … (LIKE … INCLUDING
// ALL): the same columns, constraints and indexes, the keyword search index included; the same rows); a jsonb data source with the table `docs` {id, name, score} and BENCH_ROWS
// documents, VACUUM ANALYZE.
//
// Steps, in order (each migration applies to the result of the one before):
//   add_nullable     a nullable integer column                      target: metadata only, < 100 ms
//   rename           `score` → `rating` (x-rename-from)             target: metadata only, < 100 ms
//   add_default      an integer column with a default (1)           metadata only since PostgreSQL 11
//   add_text         a nullable text column: the keyword search index covers text fields and is rebuilt
//   widen            `age` integer → number (bigint → double precision): a rewrite of every row
//   rollback_widen   the rollback of `widen`
//   doc_rename       jsonb: a key renamed in every document
//   doc_default      jsonb: a field with a default, filled into every document
// Results: a table on stdout and bench/results/migrations-latest.json (plus a timestamped copy).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { APP, SCHEMA, TABLE, api, envNumber, ok, r2, seedRows, serverEnv, setupTable, siteToken } from './records-setup.ts';
import { machineInfo, writeResults } from './report.ts';

const ROWS = envNumber('BENCH_ROWS', 1_000_000);
const SECRET = randomBytes(32).toString('hex');
const log = (line: string) => console.error(`[bench:migrations] ${line}`);

let db: BenchDatabase | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());

interface Step {
  id: string;
  what: string;
  target?: number;
  /** The migration's new schema, from the current one. */
  next: (current: Record<string, any>) => Record<string, any>;
  /** The bare statement on the twin table (none for rollback and documents). */
  bare?: string;
  table?: string;
  rollback?: string;
}

type Field = { name: string; type: string; [k: string]: unknown };
const withField = (s: Record<string, any>, f: Field) => ({ ...s, fields: [...s.fields, f] });
const mapField = (s: Record<string, any>, name: string, f: (x: Field) => Field) => ({ ...s, fields: s.fields.map((x: Field) => (x.name === name ? f(x) : x)) });

const STEPS: Step[] = [
  { id: 'add_nullable', what: 'add a nullable integer column', target: 100, next: (s) => withField(s, { name: 'extra', type: 'integer' }), bare: 'ALTER TABLE %t ADD COLUMN extra bigint' },
  { id: 'rename', what: 'rename a column (x-rename-from)', target: 100, next: (s) => mapField(s, 'score', () => ({ name: 'rating', type: 'number', 'x-rename-from': 'score' })), bare: 'ALTER TABLE %t RENAME COLUMN score TO rating' },
  { id: 'add_default', what: 'add an integer column with a default', next: (s) => withField(s, { name: 'level', type: 'integer', default: 1 }), bare: 'ALTER TABLE %t ADD COLUMN level bigint DEFAULT 1' },
  { id: 'add_text', what: 'add a nullable text column (search index rebuilt)', next: (s) => withField(s, { name: 'nickname', type: 'string' }), bare: 'ALTER TABLE %t ADD COLUMN nickname text' },
  { id: 'widen', what: 'widen age: integer → number', next: (s) => mapField(s, 'age', (f) => ({ ...f, type: 'number' })), bare: 'ALTER TABLE %t ALTER COLUMN age TYPE double precision USING age::double precision' },
  { id: 'rollback_widen', what: 'roll back the widening', next: (s) => s, rollback: 'widen' },
  { id: 'doc_rename', what: 'jsonb: rename a key in every document', table: 'docs', next: (s) => mapField(s, 'score', () => ({ name: 'rating', type: 'number', 'x-rename-from': 'score' })) },
  { id: 'doc_default', what: 'jsonb: a field with a default, filled in', table: 'docs', next: (s) => withField(s, { name: 'level', type: 'integer', default: 1 }) },
];

interface Result {
  id: string;
  what: string;
  httpMs: number;
  serverMs: number | null;
  bareMs: number | null;
  operations: string[];
  target?: string;
  ok?: boolean;
}

async function main(): Promise<number> {
  db = await openBenchDatabase(log);
  const platform = await startChild('platform', 'server.ts', { env: { ...serverEnv(db.url, SECRET), DATA_SERVICE_MIGRATION_TIMEOUT_MS: '600000' } });
  children.push(platform);
  const { site, physical } = await setupTable(platform.url);
  const token = await siteToken(platform.url, site);
  const base = `${platform.url}/sites/${site}/api/apps/${APP}`;
  log(`seeding ${ROWS.toLocaleString('en')} rows…`);
  const seeded = await seedRows(db.url, `"${site}"."${physical}"`, ROWS);
  ok(await api(`${base}/datasources/`, 'POST', { token, body: { name: 'Docs', slug: 'docs', provider_type: 'jsonb' } }), 201, 'jsonb data source');
  const docSchema = { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }, { name: 'score', type: 'number' }], primaryKey: ['id'] };
  ok(await api(`${base}/datasources/docs/datatables/`, 'POST', { token, body: { name: 'docs', json_schema: docSchema } }), 201, 'docs table');
  const docs = ok(await api(`${base}/datatables/docs/materialize/`, 'POST', { token }), 200, 'materialize docs');
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const twin = `"${site}"."people_twin"`;
  try {
    await client.query(`INSERT INTO "${site}"."${docs.physical_table_name}" (id, data)
      SELECT i, jsonb_build_object('id', i, 'name', 'Doc ' || i, 'score', i % 1000) FROM generate_series(1, $1::int) AS i`, [ROWS]);
    await client.query(`CREATE TABLE ${twin} (LIKE "${site}"."${physical}" INCLUDING ALL)`);
    await client.query(`INSERT INTO ${twin} SELECT * FROM "${site}"."${physical}"`);
    await client.query(`VACUUM ANALYZE ${twin}`);
    await client.query(`VACUUM ANALYZE "${site}"."${docs.physical_table_name}"`);
    log(`seeded in ${seeded.seconds} s; migrating`);

    const schemas: Record<string, Record<string, any>> = { [TABLE]: SCHEMA, docs: docSchema };
    const results: Result[] = [];
    const revisions: Record<string, string> = {};
    for (const step of STEPS) {
      const table = step.table ?? TABLE;
      const path = `${base}/datatables/${table}/`;
      const t0 = performance.now();
      let res;
      if (step.rollback) res = await api(`${path}rollback/`, 'POST', { token, body: { revision_id: revisions[step.rollback] } });
      else {
        const next = step.next(schemas[table]!);
        res = await api(path, 'PATCH', { token, body: { json_schema: next } });
        if (res.status === 200) schemas[table] = res.body.json_schema;
      }
      const httpMs = r2(performance.now() - t0);
      if (res.status !== 200) throw new Error(`${step.id}: ${res.status} ${res.text}`);
      const [op] = ok(await api(`${path}operation-history/?limit=1`, 'GET', { token }), 200, 'history').results;
      revisions[step.id] = op.operation_type === 'ROLLBACK' ? op.parent_operation : op.revision_id;
      let bareMs: number | null = null;
      if (step.bare) {
        const b0 = performance.now();
        await client.query(step.bare.replace('%t', twin));
        bareMs = r2(performance.now() - b0);
      }
      const r: Result = { id: step.id, what: step.what, httpMs, serverMs: op.duration_ms, bareMs, operations: op.migration_operations.map((o: any) => o.type) };
      if (step.target !== undefined) {
        r.target = `HTTP < ${step.target} ms`;
        r.ok = httpMs < step.target;
      }
      results.push(r);
      log(`${step.id}: ${httpMs} ms over HTTP, ${op.duration_ms} ms in the server${bareMs === null ? '' : `, bare DDL ${bareMs} ms`}`);
    }
    const head = '| step | what | HTTP ms | server ms | bare DDL ms | operations | target |';
    const lines = results.map((r) => `| ${r.id} | ${r.what} | ${r.httpMs} | ${r.serverMs ?? '–'} | ${r.bareMs ?? '–'} | ${r.operations.join(', ')} | ${r.target ? `${r.target}: ${r.ok ? 'met' : 'MISSED'}` : ''} |`);
    console.log([`${ROWS.toLocaleString('en')} rows (flat table ${seeded.tableMiB} MiB + ${seeded.indexesMiB} MiB of indexes; jsonb table of as many documents)`, head, `|${'---|'.repeat(7)}`, ...lines].join('\n'));
    writeResults('migrations', { machine: machineInfo(), rows: ROWS, seeded, results }, new Date().toISOString(), log);
    const missed = results.filter((r) => r.ok === false);
    return process.env.BENCH_STRICT === '1' && missed.length ? 1 : 0;
  } finally {
    await client.end();
  }
}

await runBench(main, cleanup, log);
