// `npm run bench:tenancy`: the costs of tenancy.
//
// 1. Site creation with its seed (site row, CREATE SCHEMA, tenant migrations, default data,
//    primary domain, routing notification — one transaction): BENCH_SITES creations through
//    the service in process, and BENCH_HTTP_SITES through POST /api/cloud/organizations/{org}/sites/.
//    Target: p95 < 500 ms.
// 2. Host resolution at steady state: resolveHost on a warm HostResolver, BENCH_RESOLVE_CALLS
//    calls (target < 0.1 ms each); then the same public probe route (bench/server.ts with BENCH_PROBE=1)
//    through the server on the platform host, on a site host and under /sites/{schema}/, with
//    autocannon in alternating rounds: the difference is what host routing costs a request.
// 3. `platform migrate` over BENCH_SCHEMAS site schemas at version 0 (made in bulk: site rows
//    by generate_series, schemas by one DO block), run as the real CLI command.
// 4. At that scale (issue 34 #3): the catalog's size (relations, columns, bytes), a fresh
//    server's memory before and after one request routed to every site (its caches full), and
//    BENCH_SITES site creations more with BENCH_SCHEMAS sites already on the cluster.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_SITES
// (30), BENCH_HTTP_SITES (10), BENCH_RESOLVE_CALLS (100000), BENCH_SCHEMAS (1000),
// BENCH_DURATION (24 s per variant, split over BENCH_ROUNDS = 4), BENCH_CONNECTIONS (50).
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { systemActor } from '../shared/auth/actor.ts';
import { makeContext } from '../shared/context.ts';
import { createOrm, type Orm } from '../shared/db/orm.ts';
import { createSite } from '../shared/sites/site.service.ts';
import { HostResolver } from '../shared/tenancy/host-resolver.ts';
import { tenantStatus } from '../shared/tenancy/migrations.ts';
import { cpuSeconds, runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { machineInfo } from './report.ts';

const num = (name: string, def: number) => {
  const v = Number(process.env[name] || def);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a non-negative number`);
  return Math.round(v);
};
const SITES = num('BENCH_SITES', 30);
const HTTP_SITES = num('BENCH_HTTP_SITES', 10);
const RESOLVE_CALLS = num('BENCH_RESOLVE_CALLS', 100_000);
const SCHEMAS = num('BENCH_SCHEMAS', 1000);
const DURATION = num('BENCH_DURATION', 24);
const ROUNDS = Math.max(1, num('BENCH_ROUNDS', 4));
const CONNECTIONS = num('BENCH_CONNECTIONS', 50);
const ADMIN = { username: 'benchadmin', password: 'bench-admin-password' };
const log = (msg: string) => process.stderr.write(`[bench:tenancy] ${msg}\n`);
const ms = (ns: bigint | number) => Math.round(Number(ns) / 1e4) / 100;
const r2 = (n: number) => Math.round(n * 100) / 100;

function stats(samplesMs: number[]) {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
  return { n: sorted.length, p50Ms: r2(at(0.5)), p95Ms: r2(at(0.95)), maxMs: r2(sorted.at(-1) ?? NaN), meanMs: r2(sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1)) };
}

let db: BenchDatabase | undefined;
let orm: Orm | undefined;
let server: Child | undefined;
const cleanup = async () => {
  await server?.stop().catch(() => undefined);
  await orm?.close(true).catch(() => undefined);
  await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
};
/** An organization with an owner and an admin (their tenant users are part of every seed). */
async function makeOrganization(o: Orm): Promise<string> {
  const em = o.em.fork();
  const org = randomUUID();
  await em.execute('INSERT INTO public.organizations (uuid, name, slug) VALUES (?, ?, ?)', [org, 'Bench', 'bench']);
  for (const [name, owner] of [['bench-owner', true], ['bench-admin', false]] as const) {
    const user = randomUUID();
    await em.execute(`INSERT INTO public.users (uuid, username, email, password) VALUES (?, ?, ?, 'unusable')`, [user, name, `${name}@example.com`]);
    await em.execute('INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid, is_owner, is_admin) VALUES (?, ?, ?, ?, true)', [randomUUID(), org, user, owner]);
  }
  return org;
}

async function siteCreation(o: Orm, baseUrl: string | null, label = 'Bench') {
  const settings = { environment: 'production' as const, baseDomain: 'bench.localhost', platformHosts: ['localhost', '127.0.0.1'], quotas: { organizationsPerUser: 0, sitesPerOrganization: 0 } };
  const create = (name: string) => createSite(makeContext(o.em.fork(), systemActor('bench')), 'bench', { name }, settings);
  await create(`${label} Warm Up`); // JIT, pool connections
  const inProcess: number[] = [];
  for (let i = 0; i < SITES; i++) {
    const t0 = process.hrtime.bigint();
    await create(`${label} Site ${i}`);
    inProcess.push(ms(process.hrtime.bigint() - t0));
  }
  if (baseUrl === null) return { inProcess: stats(inProcess), http: stats([]), site: {} };
  const token = (await (await fetch(`${baseUrl}/api/auth/jwt/token/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })).json() as { access: string }).access;
  const http: number[] = [];
  let last: Record<string, any> = {};
  for (let i = 0; i < HTTP_SITES; i++) {
    const t0 = process.hrtime.bigint();
    const res = await fetch(`${baseUrl}/api/cloud/organizations/bench/sites/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: `Http Site ${i}` }),
    });
    last = ((await res.json()) as { data: Record<string, any> }).data;
    if (res.status !== 201) throw new Error(`HTTP site create: ${res.status}`);
    http.push(ms(process.hrtime.bigint() - t0));
  }
  return { inProcess: stats(inProcess), http: stats(http), site: last };
}

async function resolverMicro(o: Orm, host: string, schema: string) {
  const resolver = new HostResolver(o);
  if (!(await resolver.resolveHost(host)) || !(await resolver.resolveSchema(schema))) throw new Error('probe site not resolvable');
  const time = async (fn: () => unknown) => {
    for (let i = 0; i < 10_000; i++) await fn(); // warm the JIT
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < RESOLVE_CALLS; i++) await fn();
    return Number(process.hrtime.bigint() - t0) / RESOLVE_CALLS / 1e6;
  };
  const before = resolver.misses;
  const hostMs = await time(() => resolver.resolveHost(host));
  const schemaMs = await time(() => resolver.resolveSchema(schema));
  return { calls: RESOLVE_CALLS, resolveHostMs: Number(hostMs.toFixed(5)), resolveSchemaMs: Number(schemaMs.toFixed(5)), databaseQueries: resolver.misses - before };
}

/** One autocannon run; latencies from every 2xx response (sub-millisecond precision). */
async function load(url: string, pid: number, headers: Record<string, string>, seconds: number) {
  const latencies: number[] = [];
  const cpu0 = cpuSeconds(pid);
  const inst = autocannon({ url, headers, connections: CONNECTIONS, duration: seconds });
  inst.on('response', (_c, status, _b, t) => status >= 200 && status < 300 && latencies.push(t));
  const res = await inst;
  const cpu1 = cpuSeconds(pid);
  return { latencies, seconds: res.duration, cpu: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0, bad: res.non2xx + res.errors + res.timeouts };
}

/** GET with a Host header of our choosing (fetch does not let one set Host). */
function getJson(url: string, host: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { host }, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(JSON.parse(text)));
      })
      .on('error', reject);
  });
}

async function routingThroughServer(child: Child, site: Record<string, any>) {
  const port = new URL(child.url).port;
  const variants = {
    platform: { url: `${child.url}/api/bench/probe/`, headers: { host: `127.0.0.1:${port}` } },
    siteHost: { url: `${child.url}/api/bench/probe/`, headers: { host: `${site.primary_domain}:${port}` } },
    sitePath: { url: `${child.url}/sites/${site.schema_name}/api/bench/probe/`, headers: { host: `127.0.0.1:${port}` } },
  };
  const acc: Record<string, { latencies: number[]; seconds: number; cpu: number; bad: number }> = {};
  for (const [name, v] of Object.entries(variants)) {
    const probe = (await getJson(v.url, v.headers.host)) as { tenant?: string | null };
    if ((probe.tenant ?? null) !== (name === 'platform' ? null : site.schema_name)) throw new Error(`probe ${name} answered ${JSON.stringify(probe)}`);
    await load(v.url, child.pid, v.headers, 2); // warm-up
    acc[name] = { latencies: [], seconds: 0, cpu: 0, bad: 0 };
  }
  const names = Object.keys(variants) as (keyof typeof variants)[];
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of r % 2 ? [...names].reverse() : names) {
      const res = await load(variants[name].url, child.pid, variants[name].headers, DURATION / ROUNDS);
      acc[name].latencies.push(...res.latencies);
      acc[name].seconds += res.seconds;
      acc[name].cpu += res.cpu ?? NaN;
      acc[name].bad += res.bad;
      await new Promise((res) => setTimeout(res, 500));
    }
  }
  const out: Record<string, Record<string, number>> = {};
  for (const [name, a] of Object.entries(acc)) {
    const s = stats(a.latencies);
    out[name] = { requestsPerSec: Math.round(a.latencies.length / a.seconds), p50Ms: s.p50Ms, p95Ms: s.p95Ms, cpuUsPerRequest: Math.round((a.cpu * 1e6) / a.latencies.length), non2xx: a.bad };
  }
  return out;
}

/** BENCH_SCHEMAS sites whose schemas exist, empty, at version 0 — then the real `platform migrate`. */
async function migrateMany(o: Orm, orgUuid: string, url: string) {
  const em = o.em.fork();
  const t0 = process.hrtime.bigint();
  await em.execute(
    `INSERT INTO public.sites (uuid, slug, name, schema_name, environment, organization_uuid)
     SELECT gen_random_uuid(), 'mig-' || lpad(i::text, 5, '0'), 'Mig ' || i, 'mig_' || lpad(i::text, 5, '0'), 'production', ?
       FROM generate_series(1, ?::int) AS i`,
    [orgUuid, SCHEMAS],
  );
  await em.execute(`DO $$ BEGIN FOR i IN 1..${SCHEMAS} LOOP EXECUTE format('CREATE SCHEMA %I', 'mig_' || lpad(i::text, 5, '0')); END LOOP; END $$`);
  const setupMs = ms(process.hrtime.bigint() - t0);
  const pendingBefore = (await tenantStatus(em)).filter((s) => s.pending > 0).length;
  const t1 = process.hrtime.bigint();
  const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/run.js', 'migrate'], {
      cwd: path.resolve(import.meta.dirname, '..'),
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: url, LOG_LEVEL: 'warn', HOME: os.tmpdir() },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.on('close', (c) => resolve({ code: c ?? 1, stderr: err }));
  });
  const totalMs = ms(process.hrtime.bigint() - t1);
  if (code !== 0) throw new Error(`platform migrate failed: ${stderr.slice(-800)}`);
  const pendingAfter = (await tenantStatus(em)).filter((s) => s.pending > 0).length;
  return { schemas: SCHEMAS, pendingBefore, pendingAfter, bulkSetupMs: setupMs, migrateTotalSec: r2(totalMs / 1000), perSchemaMs: r2(totalMs / Math.max(1, pendingBefore)) };
}

/** The catalog once every schema is migrated: relations, columns, the catalog's own size and the database's. */
async function catalogSize(o: Orm) {
  const [row] = await o.em.fork().execute(
    `SELECT (SELECT count(*) FROM pg_class)::int AS relations, (SELECT count(*) FROM pg_attribute)::int AS columns,
            (SELECT count(*) FROM pg_namespace)::int AS schemas,
            (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r')::bigint AS catalog_bytes,
            pg_database_size(current_database())::bigint AS database_bytes`,
  );
  return { relations: row!.relations, columns: row!.columns, schemas: row!.schemas, catalogMiB: r2(Number(row!.catalog_bytes) / 2 ** 20), databaseMiB: r2(Number(row!.database_bytes) / 2 ** 20) };
}

const rssMiB = (pid: number) => r2(Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);

/** A fresh server's memory before and after one probe request under /sites/{schema}/ of every migrated site (its routing caches full). */
async function memoryPerProcess(env: Record<string, string>) {
  const s = await startChild('platform', 'server.ts', { env });
  try {
    const before = rssMiB(s.pid);
    const t0 = process.hrtime.bigint();
    for (let i = 1; i <= SCHEMAS; i++) {
      const res = await fetch(`${s.url}/sites/mig_${String(i).padStart(5, '0')}/api/bench/probe/`);
      if (res.status !== 200) throw new Error(`probe of site ${i}: ${res.status}`);
      await res.arrayBuffer();
    }
    const routedMs = ms(process.hrtime.bigint() - t0);
    return { sites: SCHEMAS, rssMiBAtStart: before, rssMiBAfterEverySite: rssMiB(s.pid), firstRequestPerSiteMs: r2(routedMs / SCHEMAS) };
  } finally {
    await s.stop();
  }
}

async function main() {
  const machine = machineInfo();
  db = await openBenchDatabase(log);
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: db.url,
    PLATFORM_SECRET_KEY: randomBytes(32).toString('base64url'),
    PLATFORM_ADMIN_USERNAME: ADMIN.username,
    PLATFORM_ADMIN_PASSWORD: ADMIN.password,
    PLATFORM_BASE_DOMAIN: 'bench.localhost',
    PLATFORM_DATA_DIR: path.join(os.tmpdir(), 'platform-bench-data'),
    RATE_LIMIT_ENABLED: 'false',
    LOG_LEVEL: 'warn',
    BENCH_PROBE: '1',
  };
  server = await startChild('platform', 'server.ts', { env });
  orm = await createOrm(db.url, { poolMax: 4 });
  const orgUuid = await makeOrganization(orm);
  log(`site creation: ${SITES} in process, ${HTTP_SITES} over HTTP…`);
  const creation = await siteCreation(orm, server.url);
  log(`host resolution: ${RESOLVE_CALLS} calls on a warm resolver…`);
  const resolver = await resolverMicro(orm, creation.site.primary_domain, creation.site.schema_name);
  log(`the probe route through the server: platform host, site host, /sites/{schema}/ (${DURATION} s each)…`);
  const routing = await routingThroughServer(server, creation.site);
  await server.stop();
  server = undefined;
  log(`platform migrate over ${SCHEMAS} schemas at version 0…`);
  const migrate = await migrateMany(orm, orgUuid, db.url);
  const catalog = await catalogSize(orm);
  log(`catalog: ${JSON.stringify(catalog)}; a server's memory across ${SCHEMAS} sites…`);
  const memory = await memoryPerProcess(env);
  log(`site creation with ${SCHEMAS} sites on the cluster…`);
  const crowded = await siteCreation(orm, null, 'Crowded');
  const perRequestUs = (name: string) => routing[name].cpuUsPerRequest - routing.platform.cpuUsPerRequest;
  const report = {
    timestamp: new Date().toISOString(),
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version },
    settings: { SITES, HTTP_SITES, RESOLVE_CALLS, SCHEMAS, DURATION, ROUNDS, CONNECTIONS },
    siteCreation: { inProcess: creation.inProcess, http: creation.http, targetP95Ms: 500, ok: creation.inProcess.p95Ms < 500 && creation.http.p95Ms < 500 },
    hostResolution: { ...resolver, targetMs: 0.1, ok: resolver.resolveHostMs < 0.1 },
    routingThroughServer: { ...routing, extraCpuUsPerRequest: { siteHost: perRequestUs('siteHost'), sitePath: perRequestUs('sitePath') } },
    migrate,
    atScale: { sites: SCHEMAS, catalog, memory, siteCreationInProcess: crowded.inProcess },
  };
  console.log(JSON.stringify(report, null, 2));
  const dir = path.join(import.meta.dirname, 'results');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tenancy-latest.json'), `${JSON.stringify(report, null, 2)}\n`);
  log(`written: bench/results/tenancy-latest.json`);
  return report.siteCreation.ok && report.hostResolution.ok && migrate.pendingAfter === 0 ? 0 : 1;
}

await runBench(main, cleanup, log);
