// `npm run bench:policy-records`: what an app's policy on a data table costs its records API. ONE
// platform server, ONE table of BENCH_ROWS rows (default 1,000,000), ONE non-admin site user; the
// same requests (a) under the table's system policies (`ALLOW *` to every role: the read plan is
// ALWAYS_ALLOWED, no SQL condition) and (b) under a policy that lets role `user` read only the
// records of its own city (`R.attr.city == P.attr.city`: a condition compiled into the list's SQL
// WHERE, and selected beside the row of a get).
//
// Setup (not measured). As bench/hotpath.ts (bench/records-setup.ts): a fresh database
// (bench/database.ts), the platform child (bench/server.ts, PGAPPNAME=bench-platform), over its
// HTTP API a site, its superuser's token, an app, a flat_table data source and the table `people`
// (`age` indexed as `(age, id)`), materialized; BENCH_ROWS rows by one INSERT … SELECT
// generate_series (city: one of 10, ≈ 1/10 of the rows each, from hashint4), VACUUM ANALYZE. Then
// the index the condition uses, declared in the table's schema by a PATCH of its json_schema (a
// schema migration): `{name: 'city', fields: BENCH_INDEX}`, by default `city` — the platform's DDL
// makes `(city, id)` of it; `BENCH_INDEX=city,age` declares `(city, age, id)`, the index of the
// condition and the list's filter together — and ANALYZE. A site user `reader` (no app role: its principal roles are ['user']) is created by
// the site's superuser (POST /api/users/), given `{"city": "Paris"}` (PUT /api/users/reader/) and
// signs in on the site.
//
// (a) and (b) are switched by PUT /api/apps/bench/policies/ of the table's resource policy
// (`datatable:people`): (a) `{actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*']}`, the system
// policy's rule (the real system policy before the first switch); (b) `*` to `admin`, `read` to
// `user` when `R.attr.city == P.attr.city`. Each run of load.ts `compare` asks its target for the
// PostgreSQL backends to meter right before it starts: there the target first puts its policy if
// the other one is in force (then one get as the reader, so its principal and plan are cached
// again, as they are after the first request), so rounds alternate a, b | b, a with the right
// policy each, and the switch is neither timed nor metered.
//
// Checks, before measuring (the bench fails otherwise): under (a) the list's total is the number of
// rows its filter matches, an unfiltered list's total is BENCH_ROWS, a record of another city reads
// 200; under (b) the list's total is the number of Paris rows its filter matches and every record of
// its page is of Paris, an unfiltered list's total is the number of Paris rows, a record of another
// city is 404 (missing to the reader) and one of Paris 200; a missing id is 404 under both; then (a) again after switching
// back; under (a) the list with `&city=Paris` gives exactly (b)'s page and total. Then each list's
// SQL, as the server sent it (pg_stat_activity of its backends), is prepared on the bench's own
// connection, executed 5 times (PostgreSQL may then switch a prepared statement to its generic
// plan, as on the server's connections) and EXPLAIN (ANALYZE, BUFFERS)-ed: the plans go into the
// output (one line each) and the JSON (whole).
//
// Scenarios (BENCH_ONLY=list,list-explicit,get), each at 1 connection and at BENCH_CONNECTIONS,
// (a) and (b) in alternating rounds:
//   list           GET …/data/?age__gte=30&age__lt=32&_sort=-age&page_size=20 (a page of 20 and its
//                  exact total): (a) counts every city's rows of the filter, (b) Paris' only
//   list-explicit  the control: under (a) GET …/data/?city=Paris&age__gte=…, under (b) the list
//                  above: the same page and total, asked for by a filter vs given by the policy
//   get            GET …/data/{a random id of a Paris row}/ (a record both (a) and (b) let the reader read)
// CPU per request: the server process and its PostgreSQL backends (application_name
// bench-platform), as bench:hotpath measures them.
//
// Targets (BENCH_STRICT=1: exit 1 when one is missed): (b) ≤ 1.3x (a) for the list and ≤ 1.2x for
// the get, in p50 at 1 connection and in req/s at BENCH_CONNECTIONS ((a) req/s ÷ (b) req/s);
// list-explicit has none (its ratios are printed).
// Output: a table on stdout, the command that reproduces the run, bench/results/
// policy-records-latest.json and a timestamped copy.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ROWS
// (1000000), BENCH_DURATION (10 s per policy and scenario, over BENCH_ROUNDS = 2 rounds),
// BENCH_WARMUP (2), BENCH_CONNECTIONS (50), BENCH_SEQ_DURATION (the 1-connection runs; default
// BENCH_DURATION), BENCH_INDEX (city), BENCH_ONLY, BENCH_STRICT=1.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { compare, type LoadSettings, type Measurement, type Request, type Target, settingsFromEnv } from './load.ts';
import { APP, CITIES, FILTER, TABLE, api, envNumber, ok, r2, seedRows, serverEnv, setupTable, siteToken } from './records-setup.ts';
import { machineInfo, totalCpuUs, writeResults, reproduceCommand } from './report.ts';

const settings: LoadSettings = settingsFromEnv();
const SEQ_DURATION = envNumber('BENCH_SEQ_DURATION', settings.durationSec);
const ROWS = Math.max(1000, Math.round(envNumber('BENCH_ROWS', 1_000_000)));
const SCENARIOS = ['list', 'list-explicit', 'get'] as const;
type Scenario = (typeof SCENARIOS)[number];
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const unknown = ONLY?.filter((s) => !(SCENARIOS as readonly string[]).includes(s));
if (unknown?.length) throw new Error(`BENCH_ONLY: unknown scenario ${unknown.join(', ')} (${SCENARIOS.join(', ')})`);
const SECRET = randomBytes(32).toString('base64url');
const APP_NAME = 'bench-platform';
const REGION = CITIES[0];
const OTHER_REGION = CITIES[1];
const READER = { username: 'reader', password: 'Bench-reader-pass-1' };
/** The fields of the index declared for the condition (BENCH_INDEX): `city` (the default) or, e.g., `city,age`. */
const INDEX_FIELDS = (process.env.BENCH_INDEX ?? 'city').split(',').map((s) => s.trim());
/** The physical index the platform's DDL makes of it: the fields, then the primary key. */
const INDEX = `(${[...INDEX_FIELDS, 'id'].join(', ')})`;
/** (b) ÷ (a) at most: p50 at 1 connection, and (a) req/s ÷ (b) req/s at BENCH_CONNECTIONS (list-explicit is a control: no target). */
const TARGET: Partial<Record<Scenario, number>> = { list: 1.3, get: 1.2 };
const log = (msg: string) => process.stderr.write(`[bench:policy-records] ${msg}\n`);
const ratio = (x: number | null | undefined, y: number | null | undefined) => (x && y ? r2(x / y) : null);

type Mode = 'system' | 'policy';
const MODES: Record<Mode, { label: string; rules: unknown[] }> = {
  system: { label: '(a) system policies', rules: [{ actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['*'] }] },
  policy: {
    label: '(b) city policy',
    rules: [
      { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
      { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.city == P.attr.city' } } },
    ],
  },
};

let db: BenchDatabase | undefined;
let monitor: pg.Client | undefined;
const children: Child[] = [];
let cleaning: Promise<void> | undefined;
const cleanup = () =>
  (cleaning ??= (async () => {
    await monitor?.end().catch(() => undefined);
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());


interface Page {
  rows: number;
  total: number;
}

interface Row {
  scenario: Scenario;
  connections: number;
  title: string;
  request: string;
  /** What one answer holds under each policy: the list's page and total, or one record. */
  answers: Record<Mode, string>;
  system: Measurement;
  policy: Measurement;
  /** (b) req/s ÷ (a) req/s per round. */
  roundRatios: number[];
  p50Ratio: number | null;
  /** (a) req/s ÷ (b) req/s: how many times more the policy costs in throughput. */
  throughputRatio: number | null;
  cpuRatio: number | null;
}

interface Verdict {
  description: string;
  value: number | null;
  ok: boolean;
}

function verdicts(rows: Row[]): Record<string, Verdict> {
  const out: Record<string, Verdict> = {};
  for (const r of rows) {
    const limit = TARGET[r.scenario];
    if (limit === undefined) continue;
    if (r.connections === 1) {
      out[`${r.scenario}P50`] = { description: `${r.scenario} at 1 conn: p50 (b) ÷ (a) ≤ ${limit}`, value: r.p50Ratio, ok: r.p50Ratio !== null && r.p50Ratio <= limit };
    } else {
      const v = r.throughputRatio;
      out[`${r.scenario}Throughput`] = { description: `${r.scenario} at ${r.connections} conn: req/s (a) ÷ (b) ≤ ${limit}`, value: v, ok: v !== null && v <= limit };
    }
  }
  return out;
}

function problemsOf(id: string, mode: Mode, m: Measurement): string[] {
  const out: string[] = [];
  if (m.non2xx || m.errors || m.timeouts) out.push(`${id} under ${MODES[mode].label}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`);
  if (m.dbCpuUsPerRequest !== null && !m.dbBackends) out.push(`${id} under ${MODES[mode].label}: no PostgreSQL backend with application_name ${APP_NAME}`);
  return out;
}

/** A plan in one line: generic or custom, its scans, its execution time. */
function planSummary(plan: string[]): string {
  const nodes = plan.filter((l) => /Scan|BitmapAnd/.test(l)).map((l) => l.trim().replace(/^->\s*/, '').replace(/\s+\(cost=.*$/, ''));
  const time = plan.find((l) => l.startsWith('Execution Time'))?.replace('Execution Time: ', '');
  return `${plan.some((l) => /\$\d/.test(l)) ? 'generic' : 'custom'} plan; ${nodes.join(' · ')}; ${time}`;
}

function formatRows(rows: Row[]): string {
  const f = (n: number | null, d: number) => (n === null || Number.isNaN(n) ? '–' : n.toFixed(d));
  const head = ['scenario', 'policy', 'answer', 'req/s', 'p50 ms', 'p99 ms', 'srv µs/req', 'pg µs/req', 'Σ µs/req'];
  const body = rows.flatMap((r) =>
    (['system', 'policy'] as const).map((mode) => {
      const m = r[mode];
      return [r.title, MODES[mode].label, r.answers[mode], f(m.requestsPerSec, 1), f(m.p50Ms, 2), f(m.p99Ms, 2), f(m.serverCpuUsPerRequest, 0), f(m.dbCpuUsPerRequest, 0), f(totalCpuUs(m), 0)];
    }),
  );
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i < 3 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const sep = `|${widths.map((w, i) => (i < 3 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  const ratios = rows.map(
    (r) => `${r.title}: p50 (b)÷(a) ${f(r.p50Ratio, 2)}x, req/s (a)÷(b) ${f(r.throughputRatio, 2)}x, CPU Σ (b)÷(a) ${f(r.cpuRatio, 2)}x; (a)÷(b) req/s per round ${r.roundRatios.map((x) => f(1 / x, 2)).join(' / ')}`,
  );
  return [line(head), sep, ...body.map(line), '', 'srv = CPU of the server process, pg = of its PostgreSQL backends, Σ = both, per response (µs).', ...ratios].join('\n');
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  const command = reproduceCommand('bench:policy-records');
  log(`reproduce with: ${command}`);
  db = await openBenchDatabase(log);
  const dbUrl = db.url;
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const platform = await startChild('platform', 'server.ts', { env: { ...serverEnv(dbUrl, SECRET), PGAPPNAME: APP_NAME } });
  children.push(platform);

  const { site, token: adminToken, physical } = await setupTable(platform.url);
  const table = `"${site}"."${physical}"`;
  const siteBase = `${platform.url}/sites/${site}`;
  const prefix = `/sites/${site}/api/apps/${APP}/datatables/${TABLE}/data/`;
  log(`site ${site}, table ${table}; seeding ${ROWS.toLocaleString('en')} rows…`);
  const seed = await seedRows(dbUrl, table, ROWS);
  log(`seeded ${seed.rows.toLocaleString('en')} rows in ${seed.seconds} s (table ${seed.tableMiB} MiB, indexes ${seed.indexesMiB} MiB)`);

  monitor = new pg.Client({ connectionString: dbUrl, application_name: 'bench-monitor' });
  await monitor.connect();
  const mon = monitor;
  // The index the condition uses, declared in the table's schema: a migration over the API.
  const t0 = performance.now();
  const tableUrl = `${siteBase}/api/apps/${APP}/datatables/${TABLE}/`;
  const current = ok(await api(tableUrl, 'GET', { token: adminToken }), 200, 'table').json_schema as { indexes?: unknown[] };
  const jsonSchema = { ...current, indexes: [...(current.indexes ?? []), { name: 'city', fields: INDEX_FIELDS }] };
  ok(await api(tableUrl, 'PATCH', { token: adminToken, body: { json_schema: jsonSchema } }), 200, 'index migration');
  await mon.query(`ANALYZE ${table}`);
  const indexesMiB = r2(Number((await mon.query<{ i: string }>(`SELECT pg_indexes_size('${table}') AS i`)).rows[0].i) / 2 ** 20);
  log(`index ${INDEX} (a migration) in ${r2((performance.now() - t0) / 1000)} s (indexes now ${indexesMiB} MiB)`);

  // The reader: a site user without app roles, of Paris.
  const tokens = { admin: adminToken, reader: '' };
  ok(await api(`${siteBase}/api/users/`, 'POST', { token: tokens.admin, body: READER }), 201, 'site user');
  ok(await api(`${siteBase}/api/users/${READER.username}/`, 'PUT', { token: tokens.admin, body: { attributes: { city: REGION } } }), 200, 'attributes');
  const signIn = async () => {
    tokens.admin = await siteToken(platform.url, site);
    tokens.reader = ok(await api(`${siteBase}/api/auth/jwt/token/`, 'POST', { body: READER }), 200, 'reader login').access as string;
  };
  await signIn();

  // What the data holds: the expected totals, the ids of Paris rows (the gets' pool), one of another city.
  const filter = new URLSearchParams(FILTER);
  const [ageFrom, ageTo] = [Number(filter.get('age__gte')), Number(filter.get('age__lt'))];
  const count = async (where: string, params: unknown[]) => (await mon.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`, params)).rows[0].n;
  const expected = {
    all: ROWS,
    region: await count('city = $1', [REGION]),
    filter: await count('age >= $1 AND age < $2', [ageFrom, ageTo]),
    filterRegion: await count('age >= $1 AND age < $2 AND city = $3', [ageFrom, ageTo, REGION]),
  };
  const regionIds = (await mon.query<{ id: string }>(`SELECT id FROM ${table} WHERE city = $1 ORDER BY id`, [REGION])).rows.map((r) => Number(r.id));
  const otherId = Number((await mon.query<{ id: string }>(`SELECT id FROM ${table} WHERE city = $1 ORDER BY id LIMIT 1`, [OTHER_REGION])).rows[0].id);
  const randomRegionId = () => regionIds[Math.floor(Math.random() * regionIds.length)];
  log(
    `${REGION}: ${expected.region.toLocaleString('en')} of ${ROWS.toLocaleString('en')} rows (${r2((100 * expected.region) / ROWS)} %); ` +
      `the list's filter matches ${expected.filter.toLocaleString('en')}, of Paris ${expected.filterRegion.toLocaleString('en')}`,
  );

  // Switching policies.
  let active: Mode = 'system';
  let switches = 0;
  const asReader = (path: string) => api(platform.url + path, 'GET', { token: tokens.reader });
  const usePolicy = async (mode: Mode) => {
    if (mode === active) return;
    const body = { resourcePolicy: { resource: `datatable:${TABLE}`, version: 'default', rules: MODES[mode].rules } };
    const res = await api(`${siteBase}/api/apps/${APP}/policies/`, 'PUT', { token: tokens.admin, body });
    if (res.status !== 200 && res.status !== 201) throw new Error(`PUT the ${mode} policy: ${res.status} ${res.text.slice(0, 300)}`);
    active = mode;
    switches++;
    const warm = await asReader(`${prefix}${regionIds[0]}/`);
    if (warm.status !== 200) throw new Error(`a get after the switch to ${mode}: ${warm.status} ${warm.text.slice(0, 300)}`);
  };
  const backends = async () =>
    (await mon.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [APP_NAME])).rows.map((r) => r.pid);
  /** One policy's side of a comparison: the platform, with `path` (a list's URL) or none (the request's own paths). */
  const targetOf = (mode: Mode, path = ''): Target => ({
    url: platform.url + path,
    pid: platform.pid,
    backendPids: async () => {
      await usePolicy(mode); // load.ts asks right before a run starts (and after it ends: then a no-op)
      return backends();
    },
  });

  // The lists compared: the same URL under (a) and (b), and the control: under (a) the page (b)
  // gives, asked for with an explicit filter on the city.
  const LIST = `${prefix}?${FILTER}`;
  const EXPLICIT = `${prefix}?city=${REGION}&${FILTER}`;
  // The statement the server sends for a list, from its backends (each shows its last one); the
  // policy's condition is `"city" IS NOT NULL AND "city" = $n`, the explicit filter's `"city" = $n`.
  type ListKind = 'system' | 'explicit' | 'policy';
  const kindOf = (q: string): ListKind => (q.includes('"city" IS NOT NULL') ? 'policy' : /"city" = \$\d/.test(q) ? 'explicit' : 'system');
  const listSql: Partial<Record<ListKind, string>> = {};
  const listed = async (path: string, kind: ListKind) => {
    const res = await asReader(path);
    for (let i = 0; i < 5 && !listSql[kind]; i++) {
      if (i) await asReader(path);
      const sent = await mon.query<{ query: string }>(`SELECT DISTINCT query FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'SELECT c.n, p.r FROM%' AND query LIKE '%"age" >=%'`, [APP_NAME]);
      listSql[kind] = sent.rows.map((r) => r.query).find((q) => kindOf(q) === kind);
    }
    if (!listSql[kind]) log(`the SQL of the ${kind} list was not found in pg_stat_activity: not explained`);
    return res;
  };

  // Checks: (b) filters, (a) does not; the control's page is (b)'s.
  const pages = {} as Record<ListKind, Page>;
  const pageData = {} as Record<ListKind, unknown>;
  const check = async (mode: Mode) => {
    await usePolicy(mode);
    const filtered = mode === 'policy';
    const list = await listed(LIST, mode);
    assert.equal(list.status, 200, `list under ${mode}: ${list.text.slice(0, 300)}`);
    assert.equal(list.body.data.length, 20, `list under ${mode}: a page of 20`);
    assert.equal(list.body.total, filtered ? expected.filterRegion : expected.filter, `list under ${mode}: its total`);
    const cities = new Set((list.body.data as { city: string }[]).map((r) => r.city));
    if (filtered) assert.deepEqual([...cities], [REGION], `list under ${mode}: records of ${REGION} only`);
    else assert.ok(cities.size > 1, `list under ${mode}: records of every city`);
    pages[mode] = { rows: list.body.data.length, total: list.body.total };
    pageData[mode] = list.body.data;
    if (!filtered) {
      const explicit = await listed(EXPLICIT, 'explicit');
      assert.equal(explicit.status, 200, `explicit list under ${mode}: ${explicit.text.slice(0, 300)}`);
      pages.explicit = { rows: explicit.body.data.length, total: explicit.body.total };
      pageData.explicit = explicit.body.data;
    }
    const all = await asReader(`${prefix}?page_size=1`);
    assert.equal(all.body.total, filtered ? expected.region : expected.all, `unfiltered list under ${mode}: its total`);
    assert.equal((await asReader(`${prefix}${randomRegionId()}/`)).status, 200, `get of a ${REGION} record under ${mode}`);
    assert.equal((await asReader(`${prefix}${otherId}/`)).status, filtered ? 404 : 200, `get of a ${OTHER_REGION} record under ${mode}`);
    assert.equal((await asReader(`${prefix}${ROWS * 10 + 7}/`)).status, 404, `get of a missing record under ${mode}`);
  };
  await check('system');
  await check('policy');
  await check('system');
  assert.deepEqual(pageData.explicit, pageData.policy, `the explicit list under (a) and the list under (b): the same page`);
  assert.equal(pages.explicit.total, pages.policy.total, `the explicit list under (a) and the list under (b): the same total`);
  log(
    `checked: the list's total is ${pages.system.total} under (a), ${pages.policy.total} under (b) (the ${REGION} rows of its filter), ` +
      `and with &city=${REGION} under (a) the page and total of (b); a ${OTHER_REGION} record: 200 under (a), 404 under (b)`,
  );

  // The plans PostgreSQL gives the lists, as the server's prepared statements run them: prepared,
  // executed 5 times (PostgreSQL may then choose the generic plan), then EXPLAIN ANALYZE-d.
  const paramsOf = (sql: string): unknown[] => {
    const values: unknown[] = [];
    for (const m of sql.matchAll(/"(\w+)" (>=|<|=) \$(\d+)|(LIMIT|OFFSET) \$(\d+)/g)) {
      values[Number(m[3] ?? m[5]) - 1] = m[4] === 'LIMIT' ? 20 : m[4] === 'OFFSET' ? 0 : m[1] === 'city' ? REGION : m[2] === '>=' ? ageFrom : ageTo;
    }
    return values;
  };
  const plans: Partial<Record<ListKind, { sql: string; plan: string[] } | { sql: string; error: string }>> = {};
  for (const kind of ['system', 'policy', 'explicit'] as const) {
    const sql = listSql[kind];
    if (!sql) continue;
    const name = `explain_${kind}`;
    try {
      const params = paramsOf(sql);
      if (params.length !== (sql.match(/\$\d+/g) ?? []).length || params.includes(undefined)) throw new Error(`parameters not recognised (${JSON.stringify(params)})`);
      const args = params.map((p) => (typeof p === 'number' ? String(p) : `'${String(p).replace(/'/g, "''")}'`)).join(', ');
      await mon.query(`PREPARE ${name} AS ${sql}`);
      for (let i = 0; i < 5; i++) await mon.query(`EXECUTE ${name}(${args})`);
      const plan = (await mon.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE ${name}(${args})`)).rows.map((r) => r['QUERY PLAN']);
      await mon.query(`DEALLOCATE ${name}`);
      plans[kind] = { sql, plan };
      log(`plan of the ${kind} list:\n  ${plan.join('\n  ')}`);
    } catch (err) {
      plans[kind] = { sql, error: (err as Error).message };
      log(`EXPLAIN of the ${kind} list failed: ${(err as Error).message}\n  ${sql}`);
    }
  }

  const problems: string[] = [];
  const rows: Row[] = [];
  const answer = (p: Page) => `${p.rows} of ${p.total}`;
  for (const scenario of SCENARIOS.filter((s) => !ONLY || ONLY.includes(s))) {
    await signIn(); // access tokens live 15 minutes
    const auth = { authorization: `Bearer ${tokens.reader}` };
    const randomPath = () => `${prefix}${randomRegionId()}/`;
    const { what, request, targets, answers, shown } = {
      list: () => ({
        what: 'list, filtered page of 20 + total',
        request: { method: 'GET', path: LIST, headers: auth } as Request,
        targets: [targetOf('system'), targetOf('policy')],
        answers: { system: answer(pages.system), policy: answer(pages.policy) },
        shown: `GET ${LIST}`,
      }),
      'list-explicit': () => ({
        what: `list, (a) with &city=${REGION}`,
        request: { method: 'GET', path: '', headers: auth } as Request, // the URL is each target's
        targets: [targetOf('system', EXPLICIT), targetOf('policy', LIST)],
        answers: { system: answer(pages.explicit), policy: answer(pages.policy) },
        shown: `GET ${EXPLICIT} under (a), GET ${LIST} under (b)`,
      }),
      get: () => ({
        what: `get by random id (${REGION})`,
        request: { method: 'GET', path: randomPath(), headers: auth, nextPath: randomPath } as Request,
        targets: [targetOf('system'), targetOf('policy')],
        answers: { system: '1 record', policy: '1 record' },
        shown: `GET ${prefix}{random ${REGION} id}/`,
      }),
    }[scenario]();
    for (const connections of [1, settings.connections]) {
      const title = `${what} (${connections} conn)`;
      log(`${title}…`);
      const durationSec = connections === 1 ? SEQ_DURATION : settings.durationSec;
      // (a) as compare's first target: rounds a, b | b, a; its roundRatios (second ÷ first) are (b) req/s ÷ (a) req/s.
      const c = await compare(targets[0], targets[1], request, { ...settings, connections, durationSec });
      const [a, b] = [c.platform, c.baseline];
      const id = `${scenario}-${connections === 1 ? '1' : 'n'}`;
      problems.push(...problemsOf(id, 'system', a), ...problemsOf(id, 'policy', b));
      rows.push({
        scenario,
        connections,
        title,
        request: shown,
        answers,
        system: a,
        policy: b,
        roundRatios: c.roundRatios,
        p50Ratio: ratio(b.p50Ms, a.p50Ms),
        throughputRatio: ratio(a.requestsPerSec, b.requestsPerSec),
        cpuRatio: ratio(totalCpuUs(b), totalCpuUs(a)),
      });
    }
  }

  const targets = verdicts(rows);
  const report = {
    timestamp,
    command,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version, rows: seed.rows, seedSeconds: seed.seconds, tableMiB: seed.tableMiB, indexesMiB },
    settings: { ...settings, seqDurationSec: SEQ_DURATION, rows: ROWS, filter: FILTER, region: REGION, applicationName: APP_NAME, loadGenerator: 'autocannon 8 (in the bench process)' },
    data: { ...expected, regionShare: r2(expected.region / ROWS), index: INDEX },
    policies: Object.fromEntries(Object.entries(MODES).map(([k, v]) => [k, v.rules])),
    policySwitches: switches,
    pages,
    plans,
    scenarios: rows,
    targets,
    valid: problems.length === 0,
    problems,
  };
  const out = [
    formatRows(rows),
    '',
    `data: ${ROWS.toLocaleString('en')} rows, ${REGION} ${expected.region.toLocaleString('en')} (${r2((100 * expected.region) / ROWS)} %); the list's filter ${FILTER} matches ${expected.filter.toLocaleString('en')} rows, ${expected.filterRegion.toLocaleString('en')} of them of ${REGION}; index ${INDEX}`,
    '',
    ...Object.entries(plans).map(([kind, p]) => `plan of the ${kind} list: ${'error' in p ? `not explained (${p.error})` : planSummary(p.plan)}`),
    '',
    ...Object.values(targets).map((t) => `${t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value ?? '–'}`),
    ...problems.map((p) => `INVALID  ${p}`),
    '',
    `reproduce: ${command}`,
  ];
  console.log(`\n${out.join('\n')}\n`);
  writeResults('policy-records', report, timestamp, log);
  if (!report.valid) return 1;
  return Object.values(targets).some((t) => !t.ok) && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
