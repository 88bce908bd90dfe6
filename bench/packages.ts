// `npm run bench:packages`: app package export and import (issue 32) of a large app, against bare baselines.
// ONE platform server (a child process: bench/server.ts) on a fresh database, the filesystem
// store. Setup (not measured): a site and an app with BENCH_TABLES materialized tables (50),
// BENCH_POLICIES resource policies (200), and an assets bucket of BENCH_FILES files (10,000) of
// BENCH_FILE_BYTES random bytes each (204,800: 2 GB in all; random, so nothing compresses, the
// worst case), uploaded 4 at a time; the same files are kept on local disk for the baseline.
//
// Measured: `POST …/packages/` with no body (every module), the ZIP streamed to a file: the wall
// time from request to the last byte, the server's CPU seconds and its peak resident memory (VmRSS
// of /proc/{pid}/status sampled every 50 ms, against its RSS just before). The package is checked
// (manifest counts; its size above the files' bytes).
// Baseline, in the same run: what an engineer would write by hand for the storage part, the bulk
// of the bytes: yazl streaming the same local files into one ZIP on disk (no database, no
// hashing, no store), wall time.
// Then the import of that package into another site (holding an older version of the app: one
// table), `POST /api/apps/imports/` streamed from disk as multipart (as `platform app import`
// sends it): wall time to the answer, the server's CPU seconds and peak memory; the report is
// checked (every table, policy and file created). Its baseline: yauzl extracting the bucket's ZIP
// out of the package and every file out of it into a directory (no checks, no database).
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_TABLES,
// BENCH_POLICIES, BENCH_FILES, BENCH_FILE_BYTES. The full size takes minutes and 6 GB of disk:
// run by hand, never in CI (docs/benchmarks.md "App packages").
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import AdmZip from 'adm-zip';
import yazl from 'yazl';
import yauzl from 'yauzl';
import { multipartUpload } from '../cli/multipart.ts';
import { cpuSeconds, runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { api, APP, envNumber, ok, r2, serverEnv, setupTable } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const TABLES = Math.max(1, Math.round(envNumber('BENCH_TABLES', 50)));
const POLICIES = Math.max(0, Math.round(envNumber('BENCH_POLICIES', 200)));
const FILES = Math.max(1, Math.round(envNumber('BENCH_FILES', 10_000)));
const FILE_BYTES = Math.max(1, Math.round(envNumber('BENCH_FILE_BYTES', 204_800)));
const SECRET = randomBytes(32).toString('base64url');
const log = (line: string) => console.error(`[bench:packages] ${line}`);

let db: BenchDatabase | undefined;
let platform: Child | undefined;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-bench-packages-'));
const cleanup = async () => {
  await platform?.stop();
  await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  fs.rmSync(scratch, { recursive: true, force: true });
};

const rssKiB = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);

async function main(): Promise<number> {
  db = await openBenchDatabase(log);
  const dataDir = path.join(scratch, 'data');
  platform = await startChild('platform', 'server.ts', { env: { ...serverEnv(db.url, SECRET), PLATFORM_DATA_DIR: dataDir }, cpuProfileDir: process.env.BENCH_CPU_PROFILE });
  const { site, token } = await setupTable(platform.url);
  const base = `${platform.url}/sites/${site}/api/apps/${APP}`;
  log(`setup: ${TABLES} tables, ${POLICIES} policies, ${FILES} files of ${FILE_BYTES} bytes`);
  const schema = { fields: [{ name: 'id', type: 'integer', constraints: { required: true } }, { name: 'title', type: 'string' }, { name: 'amount', type: 'number' }], primaryKey: ['id'] };
  for (let i = 1; i < TABLES; i++) {
    ok(await api(`${base}/datasources/main/datatables/`, 'POST', { token, body: { name: `t${i}`, json_schema: schema } }), 201, 'table');
    ok(await api(`${base}/datatables/t${i}/materialize/`, 'POST', { token }), 200, 'materialize');
  }
  for (let i = 0; i < POLICIES; i += 100) {
    const batch = Array.from({ length: Math.min(100, POLICIES - i) }, (_, j) => ({
      resourcePolicy: { resource: `report:r${i + j}`, version: 'default', rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['*'] }] },
    }));
    const res = await api(`${base}/policies/`, 'PUT', { token, body: { policies: batch } });
    if (res.status !== 200 && res.status !== 201) throw new Error(`policies: ${res.status} ${res.text.slice(0, 300)}`);
  }
  ok(await api(`${base}/storage/buckets/`, 'POST', { token, body: { name: 'Assets', app_category: 'assets', file_size_limit: Math.max(FILE_BYTES, 1024) } }), 201, 'bucket');
  const local = path.join(scratch, 'files');
  fs.mkdirSync(local);
  let next = 0;
  const started = Date.now();
  const upload = async () => {
    while (next < FILES) {
      const i = next++;
      const bytes = randomBytes(FILE_BYTES);
      const name = `f${String(i).padStart(5, '0')}.bin`;
      fs.writeFileSync(path.join(local, name), bytes);
      const res = await fetch(`${base}/storage/buckets/assets/objects/files/${name}`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, body: bytes });
      if (res.status !== 201) throw new Error(`upload ${name}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      if (i % 1000 === 999) log(`  uploaded ${i + 1} files (${Math.round((Date.now() - started) / 1000)} s)`);
    }
  };
  await Promise.all(Array.from({ length: 4 }, upload));

  // The export, with the server's memory sampled.
  const before = rssKiB(platform.pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssKiB(platform!.pid))), 50);
  const cpu0 = cpuSeconds(platform.pid);
  const out = path.join(scratch, 'package.zip');
  const t0 = performance.now();
  const res = await fetch(`${base}/packages/`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200 || !res.body) throw new Error(`export: ${res.status} ${await res.text()}`);
  await pipeline(Readable.fromWeb(res.body as never), fs.createWriteStream(out));
  const exportS = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const cpu = cpuSeconds(platform.pid);
  const size = fs.statSync(out).size;
  const manifest = JSON.parse(new AdmZip(out, { readEntries: true } as never).readAsText('manifest.json'));
  if (manifest.modules.datatables.count !== TABLES || manifest.modules.policies.count !== POLICIES || manifest.modules.storage.total_files !== FILES) {
    throw new Error(`the package's counts are wrong: ${JSON.stringify(manifest.modules)}`);
  }

  // The baseline: yazl over the same files on disk.
  const b0 = performance.now();
  const zip = new yazl.ZipFile();
  const written = pipeline(zip.outputStream, fs.createWriteStream(path.join(scratch, 'baseline.zip')));
  for (const name of fs.readdirSync(local).sort()) zip.addFile(path.join(local, name), `files/${name}`, { compress: false });
  zip.end();
  await written;
  const baselineS = (performance.now() - b0) / 1000;
  fs.rmSync(path.join(scratch, 'baseline.zip'));
  fs.rmSync(local, { recursive: true });

  // The import into another site, with the server's memory sampled.
  const target = await setupTable(platform.url);
  const importBefore = rssKiB(platform.pid);
  let importPeak = importBefore;
  const importSampler = setInterval(() => (importPeak = Math.max(importPeak, rssKiB(platform!.pid))), 50);
  const icpu0 = cpuSeconds(platform.pid);
  const i0 = performance.now();
  const form = multipartUpload({ dry_run: 'false', validate_checksum: 'true' }, { path: out, name: 'package.zip', size }, () => undefined);
  const imported = await fetch(`${platform.url}/sites/${target.site}/api/apps/imports/`, {
    method: 'POST',
    headers: { authorization: `Bearer ${target.token}`, 'content-type': form.contentType, 'content-length': String(form.length) },
    body: Readable.toWeb(form.open()) as never,
    duplex: 'half',
  } as RequestInit);
  const answer = (await imported.json()) as { data?: { report: { modules: Record<string, { created: number }> } } };
  const importS = (performance.now() - i0) / 1000;
  clearInterval(importSampler);
  const icpu = cpuSeconds(platform.pid);
  if (imported.status !== 200) throw new Error(`import: ${imported.status} ${JSON.stringify(answer).slice(0, 500)}`);
  const created = answer.data!.report.modules;
  if (created.datatables!.created !== TABLES - 1 || created.policies!.created !== POLICIES || created.storage!.created !== FILES + 1) throw new Error(`the import's counts are wrong: ${JSON.stringify(created)}`);

  // Its baseline: yauzl extracting the bucket's ZIP from the package, then its files into a directory.
  const x0 = performance.now();
  const inner = path.join(scratch, 'bucket.zip');
  await extractEach(out, (name) => (name.startsWith('storage/buckets/') ? inner : undefined));
  const extracted = path.join(scratch, 'extracted');
  fs.mkdirSync(extracted);
  await extractEach(inner, (name) => (name.startsWith('files/') ? path.join(extracted, path.basename(name)) : undefined));
  const importBaselineS = (performance.now() - x0) / 1000;
  fs.rmSync(out);

  const totalMiB = r2((FILES * FILE_BYTES) / 1024 ** 2);
  const result = {
    tables: TABLES,
    policies: POLICIES,
    files: FILES,
    file_bytes: FILE_BYTES,
    total_mib: totalMiB,
    package_mib: r2(size / 1024 ** 2),
    export_s: r2(exportS),
    export_mib_per_s: r2(totalMiB / exportS),
    server_cpu_s: cpu0 !== null && cpu !== null ? r2(cpu - cpu0) : null,
    server_rss_before_mib: r2(before / 1024),
    server_rss_peak_mib: r2(peak / 1024),
    baseline_s: r2(baselineS),
    ratio: r2(exportS / baselineS),
    import_s: r2(importS),
    import_mib_per_s: r2(totalMiB / importS),
    import_server_cpu_s: icpu0 !== null && icpu !== null ? r2(icpu - icpu0) : null,
    import_server_rss_before_mib: r2(importBefore / 1024),
    import_server_rss_peak_mib: r2(importPeak / 1024),
    import_baseline_s: r2(importBaselineS),
    import_ratio: r2(importS / importBaselineS),
  };
  console.log(JSON.stringify(result, null, 2));
  const timestamp = new Date().toISOString();
  writeResults('packages', { timestamp, machine: machineInfo(), command: reproduceCommand('bench:packages'), ...result }, timestamp, log);
  return 0;
}

/** Extracts the entries of the ZIP at `file` for which `to` names a path, one after the other (yauzl, streamed). */
function extractEach(file: string, to: (name: string) => string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    yauzl.open(file, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      zip.on('entry', (entry: yauzl.Entry) => {
        const dest = to(entry.fileName);
        if (!dest) return zip.readEntry();
        zip.openReadStream(entry, (e, stream) => {
          if (e) return reject(e);
          pipeline(stream, fs.createWriteStream(dest)).then(() => zip.readEntry(), reject);
        });
      });
      zip.on('end', resolve);
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

await runBench(main, cleanup, log);
