// `npm run bench:move`: `platform site move` (issue 34 item 6, docs/scale-out.md "Moving a site")
// of a site with BENCH_ROWS rows (default 1,000,000) from one PostgreSQL cluster to another, with
// logical replication: the move's total time and its write freeze, against the offline copy an
// operator would otherwise make, writes stopped all along (pg_dump --format=custom of the schema,
// pg_restore --single-transaction into the other cluster).
//
// Setup (not measured): the platform's database (bench/database.ts), two more clusters started
// here from PostgreSQL's binaries (BENCH_PG_BIN_DIR, default /usr/lib/postgresql/15/bin) with
// wal_level = logical, registered as `east` and `west`; a site on east with a table of BENCH_ROWS
// rows by generate_series (as bench/backup.ts: a primary key and an index), VACUUM ANALYZE.
// Storage objects do not move (the object store is the deployment's, not a cluster's).
// Measured, wall time, one run each: the baseline (into a scratch database on west), then the move.
// Results: lines on stderr and bench/results/move-latest.json (plus a timestamped copy).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectionArgs, pgTools, runTool } from '../shared/backup/pg-tools.ts';
import { addCluster, Clusters, setClusterState } from '../shared/db/clusters.ts';
import { EmbeddedPostgres } from '../shared/db/embedded.ts';
import { createOrm, migratePlatform, type Orm } from '../shared/db/orm.ts';
import { moveSite } from '../shared/sites/site-move.ts';
import { CLUSTER_TABLES } from '../shared/db/clusters.ts';
import { TENANT_EXTENSIONS } from '../shared/tenancy/migrations.ts';
import { createTestSite } from '../shared/testing/sites.ts';
import { runBench } from './children.ts';
import { createPeopleTable, openBenchDatabase, withClient, type BenchDatabase } from './database.ts';
import { envNumber, r2 } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const ROWS = Math.max(1, Math.round(envNumber('BENCH_ROWS', 1_000_000)));
const PG_BIN = process.env.BENCH_PG_BIN_DIR ?? '/usr/lib/postgresql/15/bin';
const log = (line: string) => console.error(`[bench:move] ${line}`);

let db: BenchDatabase | undefined;
let orm: Orm | undefined;
let clusters: Clusters | undefined;
const started: { pg: EmbeddedPostgres; dir: string }[] = [];
const cleanup = async () => {
  await clusters?.close();
  await orm?.close(true);
  await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  for (const c of started) {
    await c.pg.stop().catch(() => undefined);
    fs.rmSync(c.dir, { recursive: true, force: true });
  }
};

async function cluster(name: string): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `bench-move-${name}-`));
  const pg = new EmbeddedPostgres(dir, { log: { info: () => undefined, error: log }, settings: { wal_level: 'logical' }, binDir: PG_BIN });
  started.push({ pg, dir });
  await pg.start();
  await pg.ensureDatabase('platform');
  return pg.url('platform');
}

async function main(): Promise<number> {
  db = await openBenchDatabase(log);
  orm = await createOrm(db.url, { poolMax: 4, statementTimeoutMs: 0 });
  clusters = new Clusters(orm, { orm: { poolMax: 4, statementTimeoutMs: 0 } });
  await migratePlatform(orm, db.url);
  const [east, west] = [await cluster('east'), await cluster('west')];
  for (const [name, url] of [['east', east], ['west', west]] as const) await addCluster(orm.em.fork(), db.url, { name, url });
  for (const name of ['primary', 'west']) await setClusterState(orm.em.fork(), name, 'draining');
  const site = await createTestSite(orm.em.fork()); // placed on east, the one active cluster
  await setClusterState(orm.em.fork(), 'west', 'active');
  const q = `"${site.schema}"`;
  log(`setup: ${ROWS.toLocaleString('en')} rows in ${site.schema} on east`);
  await withClient(east, (c) => createPeopleTable(c, q, ROWS));

  // The baseline: an offline copy to a scratch database on west (writes would be stopped all along).
  const tools = pgTools(Number((await withClient(east, (c) => c.query('SHOW server_version_num'))).rows[0].server_version_num), PG_BIN);
  const dumpFile = path.join(os.tmpdir(), `bench-move-${process.pid}.dump`);
  const scratchUrl = new URL(west);
  scratchUrl.pathname = '/baseline';
  await withClient(west, (c) => c.query('CREATE DATABASE baseline'));
  await withClient(scratchUrl.toString(), async (c) => {
    for (const sql of [...CLUSTER_TABLES, ...TENANT_EXTENSIONS]) await c.query(sql);
  });
  const t0 = process.hrtime.bigint();
  const source = connectionArgs(east);
  await runTool(tools.dump, ['--dbname', source.dbname, `--schema=${site.schema}`, '--format=custom', '--file', dumpFile], source.env, 'pg_dump').done;
  const target = connectionArgs(scratchUrl.toString());
  await runTool(tools.restore, ['--dbname', target.dbname, '--single-transaction', '--no-owner', '--no-privileges', dumpFile], target.env, 'pg_restore').done;
  const baseline_s = r2(Number(process.hrtime.bigint() - t0) / 1e9);
  fs.rmSync(dumpFile, { force: true });
  log(`offline copy (pg_dump | pg_restore, writes stopped throughout): ${baseline_s} s`);

  const moved = await moveSite(site.schema, 'west', { em: orm.em.fork(), directUrl: db.url, pgBinDir: PG_BIN, freezeTimeoutMs: 25_000, onProgress: (line) => log(line) });
  const [{ n }] = (await withClient(west, (c) => c.query(`SELECT count(*)::int AS n FROM ${q}.people`))).rows;
  if (n !== ROWS) throw new Error(`the moved table has ${n} rows, not ${ROWS}`);
  log(`move: ${r2(moved.duration_ms / 1000)} s in all, writes frozen ${moved.freeze_ms} ms (${moved.tables} tables, ${moved.rows.toLocaleString('en')} rows verified)`);

  const timestamp = new Date().toISOString();
  writeResults(
    'move',
    {
      timestamp,
      machine: machineInfo(),
      command: reproduceCommand('bench:move'),
      database: { source: db.source, version: db.version },
      rows: ROWS,
      move_s: r2(moved.duration_ms / 1000),
      freeze_ms: moved.freeze_ms,
      offline_copy_s: baseline_s,
      freeze_vs_offline: r2((moved.freeze_ms ?? 0) / 1000 / baseline_s),
    },
    timestamp,
    log,
  );
  return 0;
}

await runBench(main, cleanup, log);
