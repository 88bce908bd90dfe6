// `platform site move` (issue 34 items 6 and 7, docs/scale-out.md "Moving a site"). The test bed:
// two more PostgreSQL clusters on this machine (the machine's PostgreSQL binaries, so that its
// pg_dump matches, each on a port of its own with wal_level = logical), registered beside the
// primary. A site moved under read and write load loses no acknowledged write and is served from
// its target after; a move killed (SIGKILL) at each step leaves a serving site, and --resume
// finishes it or --abort undoes it; a site on a cluster without logical replication moves by a
// copy inside the freeze, said first. The servers reach the west cluster through PgBouncer in
// transaction mode (the moves themselves use its direct address).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import pg from 'pg';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { makeOrg, makeUser, type TestUser } from '../../server/test/site-fixtures.ts';
import { addCluster } from '../../shared/db/clusters.ts';
import { EmbeddedPostgres } from '../../shared/db/embedded.ts';
import { pgbouncerMissing, startPgBouncer, type PgBouncer } from '../../shared/testing/pgbouncer.ts';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import { cliEnv, json, pgDumpMissing, runCli, tempConfigDir } from './helpers.ts';

const PG_BIN = process.env.TEST_PG_BIN_DIR ?? '/usr/lib/postgresql/15/bin';
const missing = (fs.existsSync(path.join(PG_BIN, 'postgres')) ? null : `no PostgreSQL binaries at ${PG_BIN} (apt-get install postgresql, or set TEST_PG_BIN_DIR)`) ?? pgbouncerMissing;
// The copy test moves from the primary (the test PostgreSQL) with its pg_dump: skipped, saying why,
// where that is missing (not in CI). Awaited before any test is declared (AVA's rule).
const dumpMissing = await pgDumpMissing();
if (dumpMissing) console.error(`site-move: the copy test skipped: ${dumpMissing}`);
const SCHEMA: TableSchema = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../fixtures/schemas/companies.json'), 'utf8'));

let s: TestServer;
let root: string;
let owner: TestUser;
let configDir: string;
let bouncer: PgBouncer | undefined;
const clusters: Record<string, { pg: EmbeddedPostgres; dir: string; url: string }> = {};
const ORG = 'movers';
const env = () => cliEnv(s, configDir);

async function on<T = Record<string, unknown>>(cluster: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: cluster === 'primary' ? s.db.url : clusters[cluster]!.url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}
const schemaOn = async (cluster: string, schema: string) => (await on(cluster, 'SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).length === 1;

interface Site {
  slug: string;
  schema: string;
  host: string;
  token: string;
}

/** A site on `cluster` with an app and a table of companies holding `n` rows; its administrator's token. */
async function siteOn(cluster: string, name: string, n = 5): Promise<Site> {
  const made = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: root, body: { name, cluster } });
  if (made.status !== 201) throw new Error(made.text);
  const site = { slug: made.body.data.slug, schema: made.body.data.schema_name, host: made.body.data.primary_domain, token: '' };
  const exchanged = await s.api('POST', `/api/cloud/sites/${site.schema}/token/`, { token: owner.token });
  if (exchanged.status !== 200) throw new Error(exchanged.text);
  site.token = exchanged.body.access;
  for (const [method, p, body] of [
    ['POST', '/api/apps/', { name: 'Shop' }],
    ['POST', '/api/apps/shop/datasources/', { name: 'Main', slug: 'main', provider_type: 'flat_table' }],
    ['POST', '/api/apps/shop/datasources/main/datatables/', { name: 'companies', json_schema: SCHEMA }],
    ['POST', '/api/apps/shop/datatables/companies/materialize/', undefined],
  ] as const) {
    const r = await s.api(method, p, { host: site.host, token: site.token, body });
    if (r.status >= 300) throw new Error(`${p}: ${r.text}`);
  }
  for (let i = 1; i <= n; i++) if ((await write(site, i)) !== 201) throw new Error('seed write failed');
  return site;
}
const write = async (site: Site, id: number) =>
  (await s.api('POST', '/api/apps/shop/datatables/companies/data/', { host: site.host, token: site.token, body: { id, name: `company-${id}` } })).status;
/** Every record's id, page by page, through the API. */
const ids = async (site: Site): Promise<number[]> => {
  const all: number[] = [];
  for (let page = 1; ; page++) {
    const r = await s.api('GET', `/api/apps/shop/datatables/companies/data/?page_size=1000&page=${page}&_sort=id`, { host: site.host, token: site.token });
    if (r.status !== 200) throw new Error(r.text);
    all.push(...(r.body.data as { id: number }[]).map((x) => x.id));
    if (page * 1000 >= r.body.total) return all.sort((a, b) => a - b);
  }
};
const clusterOf = async (site: Site) => (await on<{ cluster: string }>('primary', 'SELECT cluster FROM public.sites WHERE schema_name = $1', [site.schema]))[0]?.cluster;
const move = (args: string[], extra: Record<string, string> = {}) => runCli(['site', 'move', ...args, '--json'], { ...env(), ...extra }, 120_000);

test.before(async () => {
  if (missing) return;
  await Promise.all(
    ['east', 'west'].map(async (name) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `move-${name}-`));
      const cluster = new EmbeddedPostgres(dir, { log: { info: () => undefined, error: () => undefined }, settings: { wal_level: 'logical', max_wal_senders: '20', max_replication_slots: '20' }, binDir: PG_BIN });
      await cluster.start();
      await cluster.ensureDatabase('platform');
      clusters[name] = { pg: cluster, dir, url: cluster.url('platform') };
    }),
  );
  s = await startTestServer({ PG_BIN_DIR: PG_BIN });
  configDir = tempConfigDir();
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'mover');
  await makeOrg(s, ORG, [{ uuid: owner.uuid, owner: true }]);
  bouncer = await startPgBouncer(clusters.west!.url);
  await addCluster(s.handle.db.orm.em.fork(), s.handle.db.directUrl, { name: 'east', url: clusters.east!.url });
  await addCluster(s.handle.db.orm.em.fork(), s.handle.db.directUrl, { name: 'west', url: bouncer.url(clusters.west!.url), directUrl: clusters.west!.url });
});
test.after.always(async () => {
  await s?.close();
  await bouncer?.close();
  for (const c of Object.values(clusters)) {
    await c.pg.stop();
    fs.rmSync(c.dir, { recursive: true, force: true });
  }
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

test.serial('a move under read and write load: every acknowledged write is on the target, none refused; the freeze is short; --cleanup drops the old copy', async (t) => {
  if (missing) return t.log(`skipped: ${missing}`) as unknown as void;
  const site = await siteOn('east', 'Busy', 20);
  let running = true;
  const acknowledged: number[] = [];
  const refused: string[] = [];
  let reads = 0;
  let next = 1000;
  const writer = async () => {
    while (running) {
      const id = next++;
      const status = await write(site, id);
      if (status === 201) acknowledged.push(id);
      else refused.push(`${id}: ${status}`);
    }
  };
  const reader = async () => {
    while (running) {
      const r = await s.api('GET', '/api/apps/shop/datatables/companies/data/?page_size=5', { host: site.host, token: site.token });
      if (r.status === 200) reads++;
      else refused.push(`read: ${r.status}`);
    }
  };
  const load = [writer(), writer(), writer(), reader()];
  await new Promise((r) => setTimeout(r, 300));
  const moved = await move([site.slug, '--to', 'west']);
  await new Promise((r) => setTimeout(r, 300));
  running = false;
  await Promise.all(load);
  t.is(moved.code, 0, moved.stderr + moved.stdout);
  const result = json(moved);
  t.like(result, { source: 'east', target: 'west', method: 'logical', step: 'done' });
  t.log(`freeze ${result.freeze_ms} ms, move ${result.duration_ms} ms, ${acknowledged.length} writes acknowledged, ${reads} reads during the run`);
  t.true(result.freeze_ms < 2000, `freeze ${result.freeze_ms} ms`);
  t.deepEqual(refused, [], 'no write or read refused');
  t.true(acknowledged.length > 20, 'writes ran throughout');
  t.is(await clusterOf(site), 'west');
  // Every acknowledged write, through the API and in the target's table itself.
  const served = new Set(await ids(site));
  t.deepEqual(acknowledged.filter((id) => !served.has(id)), []);
  const table = (await on<{ t: string }>('west', `SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 AND tablename LIKE '%companies%'`, [site.schema]))[0]!.t;
  const onWest = new Set((await on<{ id: number }>('west', `SELECT id FROM "${site.schema}"."${table}"`)).map((r) => Number(r.id)));
  t.deepEqual(acknowledged.filter((id) => !onWest.has(id)), []);
  // Sequences came along: a new app gets a fresh id.
  t.is((await s.api('POST', '/api/apps/', { host: site.host, token: site.token, body: { name: 'After' } })).status, 201);
  // The old copy refuses writes and stays until --cleanup; no replication is left.
  const stale = await on('east', `INSERT INTO "${site.schema}"."${table}" (id, name) VALUES (999999, 'stale')`).catch((err: Error) => err);
  t.regex(String(stale), /moved to another cluster/);
  t.deepEqual(await on('east', 'SELECT slot_name FROM pg_replication_slots'), []);
  t.deepEqual(await on('west', 'SELECT subname FROM pg_subscription'), []);
  const pooled = await bouncer!.admin<{ database: string; sv_active: string; sv_idle: string; sv_used: string }>('SHOW POOLS');
  t.true(pooled.some((p) => p.database === 'platform'), 'the servers reach the west cluster through PgBouncer');
  const cleaned = await move([site.slug, '--cleanup']);
  t.is(cleaned.code, 0, cleaned.stderr);
  t.false(await schemaOn('east', site.schema));
  t.true(await schemaOn('west', site.schema));
});

test.serial('a move killed at each step leaves a serving site; --resume finishes it, --abort undoes it', async (t) => {
  if (missing) return t.log(`skipped: ${missing}`) as unknown as void;
  for (const [step, then] of [
    ['schema', 'resume'],
    ['replicating', 'abort'],
    ['synced', 'resume'],
    ['freeze', 'resume'],
    ['switched', 'resume'],
  ] as const) {
    const site = await siteOn('east', `Kill ${step}`, 3);
    const killed = await move([site.slug, '--to', 'west', '--freeze-timeout', '2'], { PLATFORM_MOVE_STOP_AFTER: step });
    t.not(killed.code, 0, `killed after ${step}`);
    // Serving: from the source before the switch, the target after it; reads and writes.
    t.is(await clusterOf(site), step === 'switched' ? 'west' : 'east', step);
    t.is(await write(site, 100), 201, `a write after the kill at ${step}`);
    t.deepEqual(await ids(site), [1, 2, 3, 100], step);
    const again = await move([site.slug, `--${then}`]);
    t.is(again.code, 0, `${step} --${then}: ${again.stderr}${again.stdout}`);
    t.is(await clusterOf(site), then === 'abort' ? 'east' : 'west', step);
    t.deepEqual(await ids(site), [1, 2, 3, 100], `${step} --${then}: every write kept`);
    if (then === 'abort') t.false(await schemaOn('west', site.schema), 'the target copy is dropped');
    t.deepEqual(await on('east', 'SELECT slot_name FROM pg_replication_slots'), [], `${step}: no slot left`);
  }
});

test.serial('a freeze that cannot end in time (a write still running on a server past the freeze timeout) aborts the move: the site stays on its source, serving', async (t) => {
  if (missing) return t.log(`skipped: ${missing}`) as unknown as void;
  const site = await siteOn('east', 'Slow', 2);
  // A write in flight all along: a CSV import whose body is still coming.
  const slow = http.request(new URL('/api/apps/shop/datatables/companies/data/import/', s.url), {
    method: 'POST',
    headers: { Host: site.host, Authorization: `Bearer ${site.token}`, 'Content-Type': 'text/csv', 'Content-Length': '100000' },
  });
  slow.on('error', () => undefined);
  slow.write('id,name\n');
  await new Promise((r) => setTimeout(r, 300));
  const moved = await move([site.slug, '--to', 'west', '--freeze-timeout', '2']);
  slow.destroy();
  t.is(moved.code, 1, moved.stdout);
  t.regex(moved.stderr, /did not report their writes done within 2000 ms[^\n]*aborting; the site stays on east/);
  t.is(await clusterOf(site), 'east');
  t.false(await schemaOn('west', site.schema), 'the target copy is dropped');
  t.deepEqual(await on('east', 'SELECT slot_name FROM pg_replication_slots'), []);
  t.deepEqual(await on('primary', 'SELECT site_uuid FROM public.site_moves WHERE schema_name = $1', [site.schema]), [], 'no move recorded');
  t.is(await write(site, 3), 201, 'writes go on, on the source');
  t.deepEqual(await ids(site), [1, 2, 3]);
});

test.serial('refusals: an unknown or the same cluster, a second move while one is under way, --abort after the switch', async (t) => {
  if (missing) return t.log(`skipped: ${missing}`) as unknown as void;
  const site = await siteOn('east', 'Refusals', 1);
  t.deepEqual(Object.keys(json(await move([site.slug, '--to', 'nowhere'])).errors), ['to']);
  t.deepEqual(Object.keys(json(await move([site.slug, '--to', 'east'])).errors), ['to']);
  t.is((await move([site.slug, '--to', 'west'], { PLATFORM_MOVE_STOP_AFTER: 'schema' })).code === 0, false);
  const twice = await move([site.slug, '--to', 'west']);
  t.is(twice.code, 1);
  t.regex(json(twice).message, /under way \(step schema\)/);
  const busy = await s.api('DELETE', `/api/cloud/sites/${site.slug}/`, { token: root });
  t.is(busy.status, 409, 'no delete while replication is set up for a move');
  t.regex(busy.body.message, /being moved/);
  t.is((await move([site.slug, '--resume'], { PLATFORM_MOVE_STOP_AFTER: 'switched' })).code === 0, false);
  const late = await move([site.slug, '--abort']);
  t.is(late.code, 1);
  t.regex(json(late).message, /switched the site/);
  t.is((await move([site.slug, '--resume'])).code, 0);
  // Deleted after the move: both copies go (the old one was not cleaned up yet).
  t.is((await s.api('DELETE', `/api/cloud/sites/${site.slug}/`, { token: root })).status, 200);
  t.false(await schemaOn('east', site.schema));
  t.false(await schemaOn('west', site.schema));
});

(dumpMissing ? test.serial.skip : test.serial)('without wal_level = logical on the source (the primary here), the site is copied whole inside the freeze, said first', async (t) => {
  if (missing) return t.log(`skipped: ${missing}`) as unknown as void;
  const [{ wal_level }] = await on<{ wal_level: string }>('primary', 'SHOW wal_level');
  if (wal_level === 'logical') return t.log('skipped: the primary has wal_level = logical') as unknown as void;
  const site = await siteOn('primary', 'Copied', 8);
  const moved = await move([site.slug, '--to', 'west']);
  t.is(moved.code, 0, moved.stderr + moved.stdout);
  t.regex(moved.stderr, /wal_level = replica, not logical: the site is copied whole during the write freeze/);
  t.like(json(moved), { method: 'copy', source: 'primary', target: 'west', step: 'done' });
  t.deepEqual(await ids(site), [1, 2, 3, 4, 5, 6, 7, 8]);
  t.is(await write(site, 9), 201);
  t.true(await schemaOn('west', site.schema));
});
