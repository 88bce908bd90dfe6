// `npm run bench:hierarchy`: hierarchy traversal on a complete 10-ary tree (issue 12, Benchmark).
// ONE platform server, ONE hierarchy table `org` of BENCH_LEVELS levels (default 7: 1,111,111
// records, keys the table's generated uuid `id`), one edge type `reports_to` (child → parent).
//
// Setup (timed, not measured as traversal). Over the platform's HTTP API: a site, an app, a
// flat_table data source and the table (hierarchy: true), materialized — which creates its edges
// table and closure. Then in SQL: the records by one INSERT … SELECT generate_series (node n's
// key md5(n)::uuid, its parent (n − 2) / 10 + 1), the edges by one INSERT … SELECT (the edges'
// trigger builds the closure in that statement), VACUUM ANALYZE. For the comparison only: a
// hand-written closure table `ref_closure(anc, des, depth)` (the textbook one: every ancestor
// pair, indexes (anc, depth) INCLUDE (des) and (des, depth) INCLUDE (anc)), built from the edges.
//
// Scenarios, on several nodes of each kind (taken in turn):
//   desc-3 / desc-2 / desc-1  descendants (include form) of nodes of levels 3, 2, 1: 1,110 /
//                             11,110 / 111,110 descendants in the full tree
//   anc-leaf                  ancestors (include form) of a leaf
//   tree                      tree form of a level-3 node's subtree (include=descendants: 1,111 nodes)
// SQL level, in one run on one connection: EXPLAIN (ANALYZE, TIMING OFF) of (a) the statements
// the API runs for the request (built by the server's own code for the table, as the system
// actor: shared/data/graph/traverse.ts), (b) the hand-written closure query returning the same
// rows (the records as the API writes them, their depth; for the tree also the subtree's edges),
// (c) the API's fallback walk (the recursive CTE it runs under a read policy, a subset of edge
// types or a depth beyond the closure's), and ids only: (d) our closure lookup, (e) the
// hand-written closure's, (f) a plain recursive CTE. Median execution time of BENCH_SQL_RUNS
// (15; 5 for desc-1) after 2 warm-up runs; ratios (a) ÷ (b) (target ≤ 2) and (c) ÷ (b).
// HTTP: BENCH_HTTP_RUNS (20; 5 for desc-1) sequential requests per scenario (one connection,
// the whole body read): p50 and mean latency, body size.
//
// Output: a table on stdout, the command that reproduces the run, bench/results/
// hierarchy-latest.json and a timestamped copy.
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL),
// BENCH_LEVELS (7), BENCH_SQL_RUNS, BENCH_HTTP_RUNS, BENCH_STRICT=1 (exit 1 when (a) ÷ (b) > 2).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import { systemActor } from '../shared/auth/actor.ts';
import { makeContext } from '../shared/context.ts';
import { bind } from '../shared/db/bind.ts';
import { createOrm, type Orm } from '../shared/db/orm.ts';
import { openTarget } from '../shared/data/records/target.ts';
import { graphTarget, type GraphTarget } from '../shared/data/graph/target.ts';
import { edgesAmongStatement, reachStatement, type Walk } from '../shared/data/graph/traverse.ts';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { api, envNumber, ok, r2, serverEnv, siteToken } from './records-setup.ts';
import { machineInfo, writeResults, reproduceCommand } from './report.ts';

const LEVELS = Math.max(4, Math.min(7, Math.round(envNumber('BENCH_LEVELS', 7))));
const NODES = (10 ** LEVELS - 1) / 9;
const MAX_DEPTH = 10;
const SECRET = randomBytes(32).toString('base64url');
const APP_NAME = 'bench-platform';
const APP = 'bench';
const TABLE = 'org';
const SCHEMA = {
  title: 'Org chart',
  fields: [{ name: 'name', type: 'string' }, { name: 'level', type: 'integer' }, { name: 'score', type: 'number' }],
  hierarchy: true,
  graph: { types: [{ name: 'reports_to', inverse: 'direct_reports' }] },
};
const TARGET_RATIO = 2;
const log = (msg: string) => process.stderr.write(`[bench:hierarchy] ${msg}\n`);
const key = (n: number) => createHash('md5').update(String(n)).digest('hex').replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
/** The first node of a level (level 0: the root, node 1). */
const firstOf = (level: number) => (10 ** level - 1) / 9 + 1;
/** Descendants of a node of `level` in the complete tree. */
const descendantsAt = (level: number) => (10 ** (LEVELS - level) - 1) / 9 - 1;
const median = (xs: number[]) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

let db: BenchDatabase | undefined;
let orm: Orm | undefined;
let client: pg.Client | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
const cleanup = () =>
  (cleaning ??= (async () => {
    await client?.end().catch(() => undefined);
    await orm?.close().catch(() => undefined);
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());


interface Scenario {
  id: string;
  title: string;
  /** The nodes asked about, in turn. */
  nodes: number[];
  /** What one answer holds: records (and for the tree, edges). */
  expected: number;
  path: (n: number) => string;
  walk: Walk;
  tree: boolean;
  runs: number;
  httpRuns: number;
}

interface Statement {
  sql: string;
  params: unknown[];
}

/** Median execution time (ms) of EXPLAIN (ANALYZE, TIMING OFF) over the statements of one answer, summed; the rows of the first. */
async function measure(c: pg.Client, statementsOf: (n: number) => Statement[], nodes: number[], runs: number): Promise<{ ms: number; rows: number }> {
  const times: number[] = [];
  let rows = 0;
  for (let i = -2; i < runs; i++) {
    let total = 0;
    for (const [j, st] of statementsOf(nodes[(i + 2) % nodes.length]!).entries()) {
      const q = bind(st.sql, st.params);
      const plan = (await c.query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${q.text}`, q.values)).rows[0]['QUERY PLAN'][0];
      total += plan['Execution Time'];
      if (j === 0) rows = plan.Plan['Actual Rows'];
    }
    if (i >= 0) times.push(total);
  }
  return { ms: r2(median(times)), rows };
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  const command = reproduceCommand('bench:hierarchy');
  log(`reproduce with: ${command}`);
  db = await openBenchDatabase(log);
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const platform = await startChild('platform', 'server.ts', { env: { ...serverEnv(db.url, SECRET), PGAPPNAME: APP_NAME, DATA_SERVICE_GRAPH_MAX_DEPTH: String(MAX_DEPTH + 1) } });
  children.push(platform);

  // The table, over the API.
  const admin = ok(await api(`${platform.url}/api/auth/jwt/token/`, 'POST', { body: { username: 'benchadmin', password: 'bench-admin-password' } }), 200, 'admin login');
  const org = ok(await api(`${platform.url}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Hierarchy Bench' } }), 201, 'organization');
  const site = ok(await api(`${platform.url}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Hierarchy Bench' } }), 201, 'site').schema_name as string;
  const siteBase = `${platform.url}/sites/${site}`;
  let token = await siteToken(platform.url, site);
  ok(await api(`${siteBase}/api/apps/`, 'POST', { token, body: { name: 'Bench' } }), 201, 'app');
  ok(await api(`${siteBase}/api/apps/${APP}/datasources/`, 'POST', { token, body: { name: 'Main', slug: 'main', provider_type: 'flat_table' } }), 201, 'data source');
  ok(await api(`${siteBase}/api/apps/${APP}/datasources/main/datatables/`, 'POST', { token, body: { name: TABLE, json_schema: SCHEMA } }), 201, 'data table');
  const physical = ok(await api(`${siteBase}/api/apps/${APP}/datatables/${TABLE}/materialize/`, 'POST', { token }), 200, 'materialize').physical_table_name as string;

  // The tree, in SQL.
  client = new pg.Client({ connectionString: db.url, application_name: 'bench-sql' });
  await client.connect();
  const c = client;
  const records = `"${site}"."${physical}"`;
  const edges = `"${site}"."${physical}_edges"`;
  const closure = `"${site}"."${physical}_edges_closure"`;
  const timed = async (what: string, sql: string, params: unknown[] = []) => {
    const t0 = performance.now();
    await c.query(sql, params);
    const s = r2((performance.now() - t0) / 1000);
    log(`${what}: ${s} s`);
    return s;
  };
  log(`${NODES.toLocaleString('en')} nodes (${LEVELS} levels)…`);
  const setup = {
    recordsSec: await timed('records', `INSERT INTO ${records} (id, name, level, score) SELECT md5(g::text)::uuid, 'Node ' || g, floor(log((9 * g - 8)::numeric))::int, (hashint4(g) & 1023) / 10.0 FROM generate_series(1, $1::int) g`, [NODES]),
    edgesAndClosureSec: await timed('edges, and the closure by their trigger', `INSERT INTO ${edges} (from_id, to_id, type) SELECT md5(g::text)::uuid, md5(((g - 2) / 10 + 1)::text)::uuid, 'reports_to' FROM generate_series(2, $1::int) g`, [NODES]),
    vacuumSec: 0,
    refClosureSec: 0,
  };
  const t0 = performance.now();
  for (const t of [records, edges, closure]) await c.query(`VACUUM ANALYZE ${t}`);
  setup.vacuumSec = r2((performance.now() - t0) / 1000);
  setup.refClosureSec = await timed(
    'the hand-written closure (comparison only)',
    `CREATE TABLE "${site}".ref_closure AS
       WITH RECURSIVE c(anc, des, depth) AS (SELECT to_id, from_id, 1 FROM ${edges} UNION ALL SELECT e.to_id, c.des, c.depth + 1 FROM c JOIN ${edges} e ON e.from_id = c.anc)
       SELECT anc, des, depth::smallint AS depth FROM c`,
  );
  await c.query(`CREATE INDEX ref_closure_anc ON "${site}".ref_closure (anc, depth) INCLUDE (des)`);
  await c.query(`CREATE INDEX ref_closure_des ON "${site}".ref_closure (des, depth) INCLUDE (anc)`);
  await c.query(`VACUUM ANALYZE "${site}".ref_closure`);
  const size = async (t: string) => r2(Number((await c.query(`SELECT pg_total_relation_size('${t}') AS s`)).rows[0].s) / 2 ** 20);
  const sizes = { recordsMiB: await size(records), edgesMiB: await size(edges), closureMiB: await size(closure), refClosureMiB: await size(`"${site}".ref_closure`) };
  const counts = (await c.query(`SELECT (SELECT count(*) FROM ${edges})::int AS edges, (SELECT count(*) FROM ${closure})::int AS pairs, (SELECT count(*) FROM "${site}".ref_closure)::int AS ref`)).rows[0];
  assert.equal(counts.pairs, counts.ref, 'the maintained closure has every pair of the hand-written one');
  log(`sizes (MiB): ${JSON.stringify(sizes)}; ${counts.pairs.toLocaleString('en')} pairs`);

  // The API's statements, built by the server's own code for this table.
  orm = await createOrm(db.url, { poolMax: 1 });
  const ctx = makeContext(orm.em.fork() as EntityManager, systemActor('bench'), site);
  const g: GraphTarget = graphTarget(await openTarget(ctx, { app_slug: APP }, TABLE, 'read'));
  const record = g.t.jsonSql!;
  const ref = `"${site}".ref_closure`;

  const level = (l: number, count: number) => Array.from({ length: count }, (_, i) => firstOf(l) + Math.floor((i * (10 ** l - 1)) / Math.max(1, count - 1)));
  const scenarios: Scenario[] = [
    ...[3, 2, 1].map((l) => ({
      id: `desc-${l}`,
      title: `descendants, ${descendantsAt(l).toLocaleString('en')}`,
      nodes: level(l, 5),
      expected: descendantsAt(l),
      path: (n: number) => `data/${key(n)}/?include=descendants`,
      walk: { dirs: ['descendants'], types: null, depth: MAX_DEPTH } as Walk,
      tree: false,
      runs: envNumber('BENCH_SQL_RUNS', l === 1 ? 5 : 15),
      httpRuns: envNumber('BENCH_HTTP_RUNS', l === 1 ? 5 : 20),
    })),
    {
      id: 'anc-leaf',
      title: `ancestors of a leaf, ${LEVELS - 1}`,
      nodes: level(LEVELS - 1, 5),
      expected: LEVELS - 1,
      path: (n) => `data/${key(n)}/?include=ancestors`,
      walk: { dirs: ['ancestors'], types: null, depth: MAX_DEPTH },
      tree: false,
      runs: envNumber('BENCH_SQL_RUNS', 15),
      httpRuns: envNumber('BENCH_HTTP_RUNS', 20),
    },
    {
      id: 'tree',
      title: `tree form, ${(descendantsAt(3) + 1).toLocaleString('en')} nodes`,
      nodes: level(3, 5),
      expected: descendantsAt(3),
      path: (n) => `data/${key(n)}/?include=descendants&format=tree`,
      walk: { dirs: ['descendants'], types: null, depth: MAX_DEPTH },
      tree: true,
      runs: envNumber('BENCH_SQL_RUNS', 15),
      httpRuns: envNumber('BENCH_HTTP_RUNS', 20),
    },
  ];

  // Checks: every answer holds what the tree says.
  const prefix = `${siteBase}/api/apps/${APP}/datatables/${TABLE}/`;
  for (const s of scenarios) {
    for (const n of s.nodes) {
      const res = await api(prefix + s.path(n), 'GET', { token });
      assert.equal(res.status, 200, `${s.id}: ${res.text.slice(0, 300)}`);
      if (s.tree) assert.equal(res.body.total, s.expected + 1, `${s.id}: nodes in the tree of ${n}`);
      else assert.equal((res.body[s.walk.dirs[0] === 'descendants' ? 'direct_reports' : 'reports_to'] as unknown[]).length, s.expected, `${s.id}: records reached from ${n}`);
    }
  }
  log('checked: each answer holds the records the tree says');

  // The subtree's keys (the tree form's second statement names them all).
  const subtree = (n: number): string[] => {
    const out: string[] = [];
    let layer = [n];
    while (layer.length) {
      layer = layer.flatMap((p) => Array.from({ length: 10 }, (_, i) => 10 * (p - 1) + 2 + i)).filter((x) => x <= NODES);
      out.push(...layer.map(key));
    }
    return out;
  };
  const treeEdges = (s: Scenario, n: number) => (s.tree ? [edgesAmongStatement(g, [key(n), ...subtree(n)], null)] : []);
  const ours = (s: Scenario) => (n: number): Statement[] => [reachStatement(g, [key(n)], s.walk, true), ...treeEdges(s, n)];
  const walkOf = (s: Scenario) => (n: number): Statement[] => [reachStatement(g, [key(n)], s.walk, false), ...treeEdges(s, n)];
  const near = (s: Scenario) => (s.walk.dirs[0] === 'descendants' ? 'anc' : 'des');
  const far = (s: Scenario) => (s.walk.dirs[0] === 'descendants' ? 'des' : 'anc');
  const handWritten = (s: Scenario) => (n: number): Statement[] => {
    const [from, to] = [near(s), far(s)];
    const list: Statement[] = [{ sql: `SELECT c.depth, ${record} AS r FROM ${ref} c JOIN ${records} t ON t.id = c.${to} WHERE c.${from} = ?::uuid AND c.depth <= ? ORDER BY c.depth, t.id`, params: [key(n), MAX_DEPTH] }];
    if (s.tree) list.push({ sql: `SELECT e.id, e.from_id, e.to_id, e.type, e.metadata FROM ${ref} c JOIN ${edges} e ON e.from_id = c.des WHERE c.anc = ?::uuid AND c.depth <= ? ORDER BY e.from_id`, params: [key(n), MAX_DEPTH] });
    return list;
  };
  const oursIds = (s: Scenario) => (n: number): Statement[] => {
    const [from, to, type] = s.walk.dirs[0] === 'descendants' ? ['anc', 'des', 'first_type'] : ['des', 'anc', 'last_type'];
    return [{ sql: `SELECT c.${to}, c.depth, c.${type} FROM ${closure} c WHERE c.${from} = ?::uuid AND c.depth <= ?`, params: [key(n), MAX_DEPTH] }];
  };
  const refIds = (s: Scenario) => (n: number): Statement[] => [{ sql: `SELECT c.${far(s)}, c.depth FROM ${ref} c WHERE c.${near(s)} = ?::uuid AND c.depth <= ?`, params: [key(n), MAX_DEPTH] }];
  const plainCte = (s: Scenario) => (n: number): Statement[] => {
    const [here, next] = s.walk.dirs[0] === 'descendants' ? ['to_id', 'from_id'] : ['from_id', 'to_id'];
    return [{ sql: `WITH RECURSIVE d(id, depth) AS (SELECT ${next}, 1 FROM ${edges} WHERE ${here} = ?::uuid UNION ALL SELECT e.${next}, d.depth + 1 FROM d JOIN ${edges} e ON e.${here} = d.id WHERE d.depth < ?) SELECT id, depth FROM d`, params: [key(n), MAX_DEPTH] }];
  };

  interface Row {
    id: string;
    title: string;
    ours: { ms: number; rows: number };
    closure: { ms: number; rows: number };
    walk: { ms: number; rows: number };
    oursIds: { ms: number; rows: number };
    closureIds: { ms: number; rows: number };
    plainCte: { ms: number; rows: number };
    ratio: number;
    walkRatio: number;
    idsRatio: number;
    http: { p50Ms: number; meanMs: number; bytes: number; runs: number };
  }
  const rows: Row[] = [];
  const plans: Record<string, string[]> = {};
  for (const s of scenarios) {
    log(`${s.title}: SQL…`);
    for (const [name, make] of [['api', ours(s)], ['walk', walkOf(s)]] as const) {
      const q = bind(make(s.nodes[0]!)[0]!.sql, make(s.nodes[0]!)[0]!.params);
      plans[`${s.id} ${name}`] = (await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.text}`, q.values)).rows.map((x) => x['QUERY PLAN'] as string);
    }
    const m = {
      ours: await measure(c, ours(s), s.nodes, s.runs),
      closure: await measure(c, handWritten(s), s.nodes, s.runs),
      walk: await measure(c, walkOf(s), s.nodes, s.runs),
      oursIds: await measure(c, oursIds(s), s.nodes, s.runs),
      closureIds: await measure(c, refIds(s), s.nodes, s.runs),
      plainCte: await measure(c, plainCte(s), s.nodes, s.runs),
    };
    log(`${s.title}: HTTP…`);
    token = await siteToken(platform.url, site);
    const times: number[] = [];
    let bytes = 0;
    for (let i = -1; i < s.httpRuns; i++) {
      const t1 = performance.now();
      const res = await fetch(prefix + s.path(s.nodes[(i + 1) % s.nodes.length]!), { headers: { authorization: `Bearer ${token}` } });
      const body = await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${s.id}: HTTP ${res.status}`);
      if (i >= 0) times.push(performance.now() - t1);
      bytes = body.byteLength;
    }
    rows.push({
      id: s.id,
      title: s.title,
      ...m,
      ratio: r2(m.ours.ms / m.closure.ms),
      walkRatio: r2(m.walk.ms / m.closure.ms),
      idsRatio: r2(m.oursIds.ms / m.closureIds.ms),
      http: { p50Ms: r2(median(times)), meanMs: r2(times.reduce((x, y) => x + y, 0) / times.length), bytes, runs: times.length },
    });
  }

  const f = (n: number) => n.toFixed(2);
  const head = ['scenario', '(a) API ms', '(b) closure ms', '(a)÷(b)', '(c) walk ms', '(c)÷(b)', '(d) our ids ms', '(e) closure ids ms', '(f) plain CTE ms', 'HTTP p50 ms', 'HTTP mean ms', 'body'];
  const body = rows.map((r) => [r.title, f(r.ours.ms), f(r.closure.ms), `${f(r.ratio)}x`, f(r.walk.ms), `${f(r.walkRatio)}x`, f(r.oursIds.ms), f(r.closureIds.ms), f(r.plainCte.ms), f(r.http.p50Ms), f(r.http.meanMs), `${r2(r.http.bytes / 1024)} KiB`]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((x) => x[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join(' | ')} |`;
  const verdicts = rows.map((r) => ({ id: r.id, ok: r.ratio <= TARGET_RATIO, text: `${r.ratio <= TARGET_RATIO ? 'PASS' : 'MISS'}  ${r.title}: (a) ÷ (b) = ${f(r.ratio)} (≤ ${TARGET_RATIO})` }));
  const out = [
    line(head),
    `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...body.map(line),
    '',
    '(a) the statements the API runs (closure), (b) a hand-written closure query giving the same rows, (c) the API\'s recursive walk (its fallback),',
    '(d)/(e) ids only from our closure / the hand-written one, (f) a plain recursive CTE, ids only: median server execution time (EXPLAIN ANALYZE, timing off).',
    `setup: records ${setup.recordsSec} s, edges + closure (one statement, by the trigger) ${setup.edgesAndClosureSec} s, vacuum ${setup.vacuumSec} s; sizes MiB ${JSON.stringify(sizes)}`,
    '',
    ...verdicts.map((v) => v.text),
    '',
    `reproduce: ${command}`,
  ];
  console.log(`\n${out.join('\n')}\n`);
  const report = {
    timestamp,
    command,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version },
    settings: { levels: LEVELS, nodes: NODES, maxDepth: MAX_DEPTH, key: 'uuid (md5 of the node number)', edgeType: 'reports_to' },
    setup: { ...setup, ...sizes, ...counts },
    scenarios: rows,
    plans,
    targets: verdicts,
  };
  writeResults('hierarchy', report, timestamp, log);
  return verdicts.some((v) => !v.ok) && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
