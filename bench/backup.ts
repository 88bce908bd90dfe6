// `npm run bench:backup`: `platform site backup` and `platform site restore --as` (issue 34 item 5,
// docs/backup.md) of a site with BENCH_ROWS rows (default 1,000,000) and BENCH_OBJECT_BYTES of
// storage objects (default 1 GiB, in objects of BENCH_OBJECT_SIZE bytes: 1 MiB; random, so nothing
// compresses), against pg_dump and pg_restore alone of the same schema.
//
// Setup (not measured), in this process: a fresh database (bench/database.ts), the platform's
// migrations, a site (shared/testing/sites.ts: its schema at the current version), a table of
// BENCH_ROWS rows in it by generate_series (a physical table, as a materialized data table is:
// id, name, email, age, city, created_at, score; primary key and an index), an app, a bucket and
// its objects (rows in storage_objects, bytes through the filesystem store), VACUUM ANALYZE.
//
// Measured, wall time, one run each, in this order:
//   dump        baseline: `pg_dump --format=custom --schema=<schema>` to a file
//   backup      backupSite (the command's work): snapshot, pg_dump, the tar of the dump, the
//               platform rows and every blob, SHA-256 of each entry
//   pg_restore  baseline: `pg_restore --single-transaction --no-owner` of that dump into a
//               database of its own holding the platform's tables only (its migrations)
//   restore     restoreSite --as <schema>_copy: both passes over the archive (checksums), the
//               blobs into the new site's store, the schema through COPY in one transaction, the
//               rename and the platform rows
// Results: lines on stderr and bench/results/backup-latest.json (plus a timestamped copy).
// The full size needs ≈ 4 GB of disk and takes minutes: run by hand, never in CI.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import pg from 'pg';
import { backupSite } from '../shared/backup/backup.ts';
import { connectionArgs, pgTools, runTool } from '../shared/backup/pg-tools.ts';
import { restoreSite } from '../shared/backup/restore.ts';
import { createOrm, migratePlatform, type Orm } from '../shared/db/orm.ts';
import { SecretKeyring } from '../shared/secrets/crypto.ts';
import { filesystemStore } from '../shared/storage/objstore/index.ts';
import { TENANT_EXTENSIONS } from '../shared/tenancy/migrations.ts';
import { createTestSite } from '../shared/testing/sites.ts';
import { runBench } from './children.ts';
import { createPeopleTable, openBenchDatabase, withClient, type BenchDatabase } from './database.ts';
import { envNumber, r2 } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const ROWS = Math.max(1, Math.round(envNumber('BENCH_ROWS', 1_000_000)));
const OBJECT_BYTES = Math.max(1, Math.round(envNumber('BENCH_OBJECT_BYTES', 1 << 30)));
const OBJECT_SIZE = Math.max(1, Math.round(envNumber('BENCH_OBJECT_SIZE', 1 << 20)));
const OBJECTS = Math.ceil(OBJECT_BYTES / OBJECT_SIZE);
const log = (line: string) => console.error(`[bench:backup] ${line}`);

let db: BenchDatabase | undefined;
let baselineDb: string | undefined;
let orm: Orm | undefined;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-bench-backup-'));
const cleanup = async () => {
  await orm?.close(true);
  if (db && baselineDb) await withClient(db.url, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(baselineDb!)} WITH (FORCE)`)).catch(() => undefined);
  await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  fs.rmSync(scratch, { recursive: true, force: true });
};


const seconds = async (what: string, fn: () => Promise<unknown>): Promise<number> => {
  const started = process.hrtime.bigint();
  await fn();
  const s = Number(process.hrtime.bigint() - started) / 1e9;
  log(`${what}: ${r2(s)} s`);
  return r2(s);
};

async function main(): Promise<number> {
  db = await openBenchDatabase(log);
  orm = await createOrm(db.url, { poolMax: 4, statementTimeoutMs: 0 });
  await migratePlatform(orm, db.url);
  const site = await createTestSite(orm.em.fork());
  const q = `"${site.schema}"`;
  const store = filesystemStore(path.join(scratch, 'storage'));
  log(`setup: ${ROWS.toLocaleString('en')} rows, ${OBJECTS} objects of ${OBJECT_SIZE} bytes in ${site.schema}`);
  await withClient(db.url, async (c) => {
    await createPeopleTable(c, q, ROWS);
    const [{ id: appId }] = (await c.query(`INSERT INTO ${q}.apps (name, slug) VALUES ('Bench', 'bench') RETURNING id`)).rows;
    const [bucket] = (await c.query(`INSERT INTO ${q}.storage_buckets (app_id, name, slug, app_category) VALUES ($1, 'Files', 'files', 'attachments') RETURNING id, uuid`, [appId])).rows;
    const siteStore = store.site(site.schema);
    for (let i = 0; i < OBJECTS; i++) {
      const size = Math.min(OBJECT_SIZE, OBJECT_BYTES - i * OBJECT_SIZE);
      const key = `${bucket.uuid}/${randomUUID()}`;
      const { etag } = await siteStore.put(key, Readable.from([randomBytes(size)]), { contentType: 'application/octet-stream', size });
      const name = `f${String(i).padStart(5, '0')}.bin`;
      await c.query(`INSERT INTO ${q}.storage_objects (uuid, bucket_id, path, filename, size, mimetype, blob_key, etag) VALUES ($1, $2, $3, $4, $5, 'application/octet-stream', $6, $7)`, [
        randomUUID(), bucket.id, `files/${name}`, name, size, key, etag,
      ]);
    }
  });

  const [{ server_version_num }] = await withClient(db.url, async (c) => (await c.query('SHOW server_version_num')).rows);
  const tools = pgTools(Number(server_version_num), process.env.PG_BIN_DIR);
  const { dbname, env } = connectionArgs(db.url);
  const dumpFile = path.join(scratch, 'baseline.dump');
  const archive = path.join(scratch, 'site.tar');

  const dump_s = await seconds('pg_dump (baseline)', () => runTool(tools.dump, ['--dbname', dbname, `--schema=${site.schema}`, '--format=custom', '--file', dumpFile], env, 'pg_dump').done);
  const backup = await backupSite(site.schema, archive, { databaseUrl: db.url, store });
  log(`backup: ${r2(backup.duration_ms / 1000)} s (${backup.blobs} blobs, archive ${r2(backup.bytes / 2 ** 20)} MiB)`);

  baselineDb = `bench_restore_${randomBytes(4).toString('hex')}`;
  await withClient(db.url, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(baselineDb!)}`));
  const target = new URL(db.url);
  target.pathname = `/${baselineDb}`;
  // A platform database to restore into (the schema's triggers and indexes use the platform's functions and extensions).
  const baselineOrm = await createOrm(target.toString(), { poolMax: 2, statementTimeoutMs: 0 });
  await migratePlatform(baselineOrm, target.toString()).finally(() => baselineOrm.close(true));
  await withClient(target.toString(), async (c) => {
    for (const sql of TENANT_EXTENSIONS) await c.query(sql);
  });
  const restore_baseline_s = await seconds('pg_restore (baseline)', () =>
    runTool(tools.restore, ['--dbname', connectionArgs(target.toString()).dbname, '--single-transaction', '--no-owner', '--no-privileges', dumpFile], env, 'pg_restore').done,
  );

  const restored = await restoreSite(archive, {
    databaseUrl: db.url,
    store,
    keyring: new SecretKeyring(randomBytes(32).toString('base64url')),
    em: orm.em,
    settings: { environment: 'production', baseDomain: 'bench.test', platformHosts: [] },
    as: `${site.schema}_copy`,
  });
  log(`restore: ${r2(restored.duration_ms / 1000)} s (${restored.blobs} blobs)`);
  const [{ n }] = await withClient(db.url, async (c) => (await c.query(`SELECT count(*)::int AS n FROM "${site.schema}_copy".people`)).rows);
  if (n !== ROWS) throw new Error(`the restored table has ${n} rows, not ${ROWS}`);

  const timestamp = new Date().toISOString();
  const result = {
    rows: ROWS,
    objects: OBJECTS,
    object_bytes: OBJECT_BYTES,
    dump_bytes: fs.statSync(dumpFile).size,
    archive_bytes: backup.bytes,
    backup_s: r2(backup.duration_ms / 1000),
    dump_baseline_s: dump_s,
    restore_s: r2(restored.duration_ms / 1000),
    restore_baseline_s,
  };
  writeResults('backup', { timestamp, machine: machineInfo(), command: reproduceCommand('bench:backup'), database: { source: db.source, version: db.version }, ...result }, timestamp, log);
  return 0;
}

await runBench(main, cleanup, log);
