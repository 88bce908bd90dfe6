// `npm run bench:storage`: the storage API's throughput, memory and object list (issue 13, Benchmark).
// ONE platform server (a child process: bench/server.ts) on a fresh database, its objects on the
// filesystem store (STORAGE_DIR in a temporary directory of the same disk); S3 is not measured.
//
// 1. Throughput over HTTP on loopback, absolute MB/s (10^6 bytes per second): upload
//    (`PUT …/storage/buckets/{bucket}/objects/{key}`, raw body streamed from a file) and download
//    (`GET` the same path, the body streamed to a counting sink) of 100 KiB objects (200, one at a
//    time and 8 at a time), 10 MiB objects (20, one and 4 at a time) and 1 GiB objects (one per
//    round, BENCH_LARGE_ROUNDS rounds: 2); the bucket's file_size_limit is raised by PATCH first,
//    and 20 small objects go both ways on each server first (warm-up, not measured). The same client
//    (node:http, keep-alive, streams — never a whole object in memory) against the baselines of
//    the same run:
//      bare  a bare node:http server (no framework, a child process too, this file with
//            BENCH_STORAGE_ROLE=bare) that streams the body to a temp file in its directory on
//            the same disk (fsync on close), renames it into place and fsyncs the directory —
//            what the filesystem store does — and streams a file back;
//      cp    reference only (kernel copy paths): `cp` of the same source files on the same disk
//            followed by `sync FILE…` (fsync; the servers fsync too), and `cat FILE… > /dev/null`.
//    Each scenario runs BENCH_ROUNDS rounds (2), the order alternating (bare, platform | platform,
//    bare); a figure is all bytes of its rounds ÷ the wall time of their batches. Every file is in
//    the page cache (24 GB of RAM here): downloads and `cat` read memory, uploads and `cp` write
//    through to the disk by their fsync. Also: p50 per object (sequential runs), the servers'
//    CPU seconds per GB moved (/proc/{pid}/stat), and the PostgreSQL transactions per 100 KiB
//    upload and download (pg_stat_database around the first sequential batch).
// 2. Memory: the platform's (and the bare server's) RSS from /proc/{pid}/status — VmRSS when idle
//    (before the 1 GiB scenario), and the peak during each 1 GiB upload and download: VmHWM after
//    its reset (`echo 5 > /proc/{pid}/clear_refs` before the phase) and the maximum of VmRSS
//    sampled every 50 ms. Target: peak − idle under 100 MB.
// 3. List: a bucket of BENCH_LIST_ROWS (1,000,000) objects seeded in SQL (one INSERT … SELECT
//    generate_series: paths `dir0042/file123456.bin` over 1,000 prefixes, created_at one second
//    apart, no blobs), VACUUM ANALYZE; then sequential requests per query after a warm-up (the
//    prefix or search term changes with each request): BENCH_LIST_RUNS (200) for the target
//    query, half as many for the others, a tenth for `search`; p50, p99, rows per page, and the
//    page statement alone (EXPLAIN ANALYZE). Controls: one object's record (?metadata=true) in
//    that bucket and in the small one, and the bucket lookup's statement (EXPLAIN ANALYZE).
//    Target: `prefix` + `ordering=created_at` + `_count=planned` p50 under 20 ms.
//
// Output: tables on stdout, the command that reproduces the run, bench/results/storage-latest.json
// and a timestamped copy. Temporary files (several GiB) and the database are removed at the end,
// also on failure.
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ROUNDS
// (2), BENCH_SMALL_COUNT (200), BENCH_MEDIUM_COUNT (20), BENCH_LARGE_MIB (1024),
// BENCH_LARGE_ROUNDS (2), BENCH_LIST_ROWS (1000000), BENCH_LIST_RUNS (200), BENCH_ONLY (comma
// list of transfer, list, or transfer scenarios by id: 100k-c1, 100k-c8, 10m-c1, 10m-c4, 1g —
// `BENCH_ONLY=100k-c1,100k-c8` runs the small objects alone), BENCH_CPU_PROFILE (a directory: V8 CPU profiles of both servers,
// written when they stop), BENCH_STRICT=1 (exit 1 when a target is missed).
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, openSync, closeSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, open, rename, rm, unlink } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import type { Child } from './children.ts';
import type { BenchDatabase } from './database.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const log = (msg: string) => process.stderr.write(`[bench:storage] ${msg}\n`);

// ---- the bare baseline server (a child process: this file with BENCH_STORAGE_ROLE=bare) ------

async function serveBare(): Promise<void> {
  const dir = process.env.BENCH_BARE_DIR!;
  const temp = path.join(dir, '.tmp');
  mkdirSync(temp, { recursive: true });
  const server = http.createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? '/', 'http://bare');
      if (url.pathname === '/readyz') {
        res.end('ok');
        return;
      }
      const name = decodeURIComponent(url.pathname.slice('/o/'.length));
      if (!url.pathname.startsWith('/o/') || !/^[\w.-]+$/.test(name)) {
        res.writeHead(404).end();
        return;
      }
      const file = path.join(dir, name);
      if (req.method === 'PUT') {
        const part = path.join(temp, `${randomUUID()}.part`);
        const out = createWriteStream(part, { flags: 'wx', flush: true });
        await pipeline(req, out);
        await rename(part, file);
        const d = await open(dir, 'r');
        await d.sync();
        await d.close();
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ size: out.bytesWritten }));
      } else if (req.method === 'GET') {
        const fh = await open(file, 'r');
        const { size } = await fh.stat();
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
        await pipeline(fh.createReadStream(), res);
      } else if (req.method === 'DELETE') {
        await unlink(file);
        res.writeHead(204).end();
      } else res.writeHead(405).end();
    } catch (err) {
      if (!res.headersSent) res.writeHead(500).end(String(err));
      else res.destroy();
    }
  });
  server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// ---- the client ------------------------------------------------------------------------------

interface Reply {
  status: number;
  bytes: number;
  text: string;
}

/** One request over node:http: the body streamed from `source`, the answer counted (kept only when small or an error). */
function send(agent: http.Agent, url: string, method: string, headers: Record<string, string | number>, source?: Readable, keep = true): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (err: Error) => {
      if (!settled) {
        settled = true;
        reject(new Error(`${method} ${url}: ${err.message}`));
      }
    };
    const req = http.request(url, { method, headers, agent }, (res) => {
      let bytes = 0;
      const chunks: Buffer[] = [];
      const status = res.statusCode ?? 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if ((keep || status >= 300) && bytes <= 64 * KiB) chunks.push(c);
      });
      res.on('end', () => {
        settled = true;
        resolve({ status, bytes, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', fail);
    });
    req.on('error', fail);
    if (source) pipeline(source, req).catch((err) => fail(err as Error));
    else req.end();
  });
}

function expect(r: Reply, statuses: number[], what: string): Reply {
  if (!statuses.includes(r.status)) throw new Error(`${what}: HTTP ${r.status} (expected ${statuses.join('/')}): ${r.text.slice(0, 400)}`);
  return r;
}

/** Runs `jobs` with at most `concurrency` in flight. */
async function pool(count: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) await job(next++);
  }));
}

const quantile = (xs: number[], q: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
};
const r1 = (n: number) => Math.round(n * 10) / 10;
const r2 = (n: number) => Math.round(n * 100) / 100;

// ---- process memory --------------------------------------------------------------------------

function status(pid: number): { rss: number; hwm: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** Samples VmRSS every 50 ms while `run` runs; VmHWM reset before (clear_refs 5) and read after. */
async function peakDuring<T>(pid: number, run: () => Promise<T>): Promise<{ result: T; sampledMax: number; hwm: number; hwmReset: boolean; samples: number }> {
  let hwmReset = true;
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    hwmReset = false;
  }
  let sampledMax = status(pid).rss;
  let samples = 1;
  const timer = setInterval(() => {
    try {
      sampledMax = Math.max(sampledMax, status(pid).rss);
      samples++;
    } catch {
      /* exited: the run fails on its own */
    }
  }, 50);
  try {
    const result = await run();
    const end = status(pid);
    return { result, sampledMax: Math.max(sampledMax, end.rss), hwm: end.hwm, hwmReset, samples };
  } finally {
    clearInterval(timer);
  }
}

// ---- the bench -------------------------------------------------------------------------------

async function benchMain(): Promise<void> {
  const { default: pgLib } = await import('pg');
  const { cpuSeconds, runBench, startChild } = await import('./children.ts');
  const { openBenchDatabase } = await import('./database.ts');
  const { api, envNumber, ok, serverEnv, siteToken } = await import('./records-setup.ts');
  const { machineInfo, reproduceCommand, writeResults } = await import('./report.ts');

  const ROUNDS = Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2)));
  const SMALL_COUNT = Math.max(1, Math.round(envNumber('BENCH_SMALL_COUNT', 200)));
  const MEDIUM_COUNT = Math.max(1, Math.round(envNumber('BENCH_MEDIUM_COUNT', 20)));
  const LARGE = Math.max(16, Math.round(envNumber('BENCH_LARGE_MIB', 1024))) * MiB;
  const LIST_ROWS = Math.max(1000, Math.round(envNumber('BENCH_LIST_ROWS', 1_000_000)));
  const LARGE_ROUNDS = Math.max(1, Math.round(envNumber('BENCH_LARGE_ROUNDS', 2)));
  const LIST_RUNS = Math.max(1, Math.round(envNumber('BENCH_LIST_RUNS', 200)));
  const LIST_WARMUP = 20;
  const TRANSFERS = ['100k-c1', '100k-c8', '10m-c1', '10m-c4', '1g'];
  const ONLY = new Set((process.env.BENCH_ONLY || 'transfer,list').split(',').map((s) => s.trim()));
  const unknown = [...ONLY].filter((s) => s !== 'transfer' && s !== 'list' && !TRANSFERS.includes(s));
  if (unknown.length) throw new Error(`BENCH_ONLY: unknown part ${unknown.join(', ')} (transfer, list, ${TRANSFERS.join(', ')})`);
  /** A transfer scenario runs with `transfer`, or when named itself. */
  const wanted = (id: string) => ONLY.has('transfer') || ONLY.has(id);
  const SECRET = randomBytes(32).toString('base64url');
  const APP = 'bench';
  const TARGET_SHARE = 70;
  const TARGET_RSS_MB = 100;
  const TARGET_LIST_P50_MS = 20;

  let db: BenchDatabase | undefined;
  let client: pg.Client | undefined;
  let tmp: string | undefined;
  const children: Child[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      await client?.end().catch(() => undefined);
      await Promise.allSettled(children.map((c) => c.stop()));
      await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
      if (tmp) await rm(tmp, { recursive: true, force: true }).catch((err) => log(`removing ${tmp} failed: ${err.message}`));
    })());


  async function main(): Promise<number> {
    const timestamp = new Date().toISOString();
    const machine = machineInfo();
    const command = reproduceCommand('bench:storage');
    log(`reproduce with: ${command}`);
    log(`${machine.cpus} cores (${machine.cpuModel}), ${machine.totalMemoryMiB} MiB RAM, load average ${(machine.loadAverageAtStart as number[]).join(' ')}`);
    tmp = await mkdtemp(path.join(os.tmpdir(), 'platform-bench-storage-'));
    const dirs = { src: path.join(tmp, 'src'), store: path.join(tmp, 'store'), bare: path.join(tmp, 'bare'), cp: path.join(tmp, 'cp') };
    for (const d of Object.values(dirs)) await mkdir(d, { recursive: true });
    const fsType = spawnSync('stat', ['-f', '-c', '%T', tmp], { encoding: 'utf8' }).stdout.trim();
    log(`temporary files in ${tmp} (${fsType})`);

    db = await openBenchDatabase(log);
    log(`database: ${db.source} (${db.version.split(',')[0]})`);
    const cpuProfileDir = process.env.BENCH_CPU_PROFILE ? path.resolve(process.env.BENCH_CPU_PROFILE) : undefined;
    const platform = await startChild('platform', 'server.ts', {
      env: { ...serverEnv(db.url, SECRET), PGAPPNAME: 'bench-storage', STORAGE_DIR: dirs.store, STORAGE_MAINTENANCE_INTERVAL_MS: '0' },
      cpuProfileDir,
    });
    children.push(platform);
    const platformStartRss = status(platform.pid).rss;
    const bare = await startChild('bare', 'storage.ts', { env: { PATH: process.env.PATH ?? '', BENCH_STORAGE_ROLE: 'bare', BENCH_BARE_DIR: dirs.bare }, cpuProfileDir });
    children.push(bare);
    const bareStartRss = status(bare.pid).rss;

    // A site, an app and two buckets, over the API.
    const admin = ok(await api(`${platform.url}/api/auth/jwt/token/`, 'POST', { body: { username: 'benchadmin', password: 'bench-admin-password' } }), 200, 'admin login');
    const org = ok(await api(`${platform.url}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Storage Bench' } }), 201, 'organization');
    const site = ok(await api(`${platform.url}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name: 'Storage Bench' } }), 201, 'site').schema_name as string;
    const siteBase = `${platform.url}/sites/${site}`;
    let token = await siteToken(platform.url, site);
    const app = ok(await api(`${siteBase}/api/apps/`, 'POST', { token, body: { name: 'Bench' } }), 201, 'app');
    if (app.slug !== APP) throw new Error(`app slug ${app.slug}, expected ${APP}`);
    const buckets = `${siteBase}/api/apps/${APP}/storage/buckets/`;
    const files = ok(await api(buckets, 'POST', { token, body: { name: 'Files', app_category: 'attachments' } }), 201, 'bucket files');
    const limit = 2 ** 40;
    const patched = ok(await api(`${buckets}${files.slug}/`, 'PATCH', { token, body: { file_size_limit: limit } }), 200, 'bucket file_size_limit');
    if (patched.file_size_limit !== limit) throw new Error(`file_size_limit is ${patched.file_size_limit} after PATCH, expected ${limit}`);
    const objectsUrl = `${buckets}${files.slug}/objects/`;

    interface Side {
      mbps: number;
      seconds: number;
      bytes: number;
      p50Ms: number | null;
      cpuSecPerGB: number | null;
      perRound: number[];
    }
    interface TransferRow {
      id: string;
      title: string;
      size: number;
      count: number;
      concurrency: number;
      rounds: number;
      upload: { platform: Side; bare: Side; cp: Side; cpNoSync: Side; platformPctOfBare: number; platformPctOfCp: number };
      download: { platform: Side; bare: Side; cat: Side; platformPctOfBare: number; platformPctOfCat: number };
    }
    interface Memory {
      server: string;
      startMiB: number;
      idleMiB: number;
      upload: { hwmMiB: number; sampledMaxMiB: number; deltaMB: number };
      download: { hwmMiB: number; sampledMaxMiB: number; deltaMB: number };
      hwmReset: boolean;
      samples: number;
    }
    const transfers: TransferRow[] = [];
    const memory: Memory[] = [];
    let listRows: Record<string, unknown>[] = [];
    let listSetup: Record<string, unknown> = {};
    const plans: Record<string, string[]> = {};
    let transactionsPerObject: { upload: number; download: number } | undefined;

    if (TRANSFERS.some(wanted)) {
      // Source files: random bytes, written once and fsynced (no writeback during the runs).
      const makeFiles = async (prefix: string, size: number, count: number) => {
        const list: string[] = [];
        for (let i = 0; i < count; i++) {
          const file = path.join(dirs.src, `${prefix}-${i}.bin`);
          if (size <= 16 * MiB) writeFileSync(file, randomBytes(size));
          else {
            const block = randomBytes(16 * MiB);
            const fh = await open(file, 'w');
            for (let off = 0; off < size; off += block.length) {
              block.writeUInt32LE(off / block.length, 0);
              await fh.write(block, 0, Math.min(block.length, size - off));
            }
            await fh.close();
          }
          list.push(file);
        }
        return list;
      };
      log('source files…');
      const small = await makeFiles('small', 100 * KiB, SMALL_COUNT);
      const medium = wanted('10m-c1') || wanted('10m-c4') ? await makeFiles('medium', 10 * MiB, MEDIUM_COUNT) : [];
      const large = wanted('1g') ? await makeFiles('large', LARGE, 1) : [];
      const synced = spawnSync('sync', [...small, ...medium, ...large]);
      if (synced.status !== 0) throw new Error(`sync failed: ${synced.stderr}`);

      const scenarios = [
        { id: '100k-c1', title: `100 KiB × ${SMALL_COUNT}, sequential`, size: 100 * KiB, files: small, concurrency: 1, rounds: ROUNDS },
        { id: '100k-c8', title: `100 KiB × ${SMALL_COUNT}, 8 concurrent`, size: 100 * KiB, files: small, concurrency: 8, rounds: ROUNDS },
        { id: '10m-c1', title: `10 MiB × ${MEDIUM_COUNT}, sequential`, size: 10 * MiB, files: medium, concurrency: 1, rounds: ROUNDS },
        { id: '10m-c4', title: `10 MiB × ${MEDIUM_COUNT}, 4 concurrent`, size: 10 * MiB, files: medium, concurrency: 4, rounds: ROUNDS },
        { id: '1g', title: `${LARGE / MiB >= 1024 ? `${LARGE / 1024 / MiB} GiB` : `${LARGE / MiB} MiB`} × 1 per round`, size: LARGE, files: large, concurrency: 1, rounds: LARGE_ROUNDS },
      ].filter((s) => wanted(s.id));

      type Who = 'platform' | 'bare';
      const keyOf = (id: string, round: number, i: number) => `${id}/r${round}/obj${String(i).padStart(4, '0')}.bin`;
      const urlOf = (who: Who, key: string) => (who === 'platform' ? `${objectsUrl}${key}` : `${bare.url}/o/${key.replaceAll('/', '_')}`);
      const pidOf = (who: Who) => (who === 'platform' ? platform.pid : bare.pid);
      const auth = (who: Who): Record<string, string> => (who === 'platform' ? { authorization: `Bearer ${token}` } : {});

      /** One batch: every file uploaded (or downloaded) once; wall time, per-object times, server CPU. */
      async function batch(who: Who, op: 'upload' | 'download', s: (typeof scenarios)[number], round: number) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: s.concurrency });
        const times: number[] = [];
        const cpu0 = cpuSeconds(pidOf(who));
        const t0 = performance.now();
        try {
          await pool(s.files.length, s.concurrency, async (i) => {
            const key = keyOf(s.id, round, i);
            const t1 = performance.now();
            if (op === 'upload') {
              const r = await send(agent, urlOf(who, key), 'PUT', { ...auth(who), 'content-type': 'application/octet-stream', 'content-length': s.size }, createReadStream(s.files[i]!));
              expect(r, [201], `${who} upload ${key}`);
              if (who === 'platform') {
                const size = JSON.parse(r.text).data?.size;
                if (size !== s.size) throw new Error(`platform upload ${key}: size ${size} in the answer, expected ${s.size}`);
              }
            } else {
              const r = expect(await send(agent, urlOf(who, key), 'GET', auth(who), undefined, false), [200], `${who} download ${key}`);
              if (r.bytes !== s.size) throw new Error(`${who} download ${key}: ${r.bytes} bytes, expected ${s.size}`);
            }
            times.push(performance.now() - t1);
          });
        } finally {
          agent.destroy();
        }
        const seconds = (performance.now() - t0) / 1000;
        const cpu1 = cpuSeconds(pidOf(who));
        return { seconds, times, cpu: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0 };
      }

      async function removeObjects(who: Who, s: (typeof scenarios)[number], round: number) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
        try {
          await pool(s.files.length, 4, async (i) => {
            const key = keyOf(s.id, round, i);
            expect(await send(agent, urlOf(who, key), 'DELETE', auth(who)), [200, 204], `${who} delete ${key}`);
          });
        } finally {
          agent.destroy();
        }
      }

      const hashOf = async (source: Readable) => {
        const h = createHash('sha256');
        for await (const chunk of source) h.update(chunk as Buffer);
        return h.digest('hex');
      };
      /**
       * Checks once per scenario that what comes back is what went in: the SHA-256 of the
       * downloaded bytes (both servers) and the platform's ETag (the filesystem store's: the first
       * 128 bits of the SHA-256) against the source file's; for the large object only the ETag (the headers of a GET, the body left unread: HEAD answers 204 without
       * a length today; the byte counts are checked by every download).
       */
      async function verify(s: (typeof scenarios)[number], round: number) {
        const want = await hashOf(createReadStream(s.files[0]!));
        const key = keyOf(s.id, round, 0);
        const whole = s.size < 100 * MiB;
        for (const who of ['platform', 'bare'] as const) {
          if (!whole && who === 'bare') continue;
          const agent = new http.Agent({ keepAlive: false });
          const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
            http.request(urlOf(who, key), { method: 'GET', headers: auth(who), agent }, resolve).on('error', reject).end();
          });
          if (res.statusCode !== 200) throw new Error(`${who} GET ${key}: HTTP ${res.statusCode}`);
          const got = whole ? await hashOf(res) : (res.destroy(), want);
          agent.destroy();
          if (got !== want) throw new Error(`${who}: the downloaded bytes of ${key} differ from the uploaded file`);
          if (who === 'platform' && res.headers.etag !== `"${want.slice(0, 32)}"`) throw new Error(`platform ETag ${res.headers.etag} for ${key}, expected "${want.slice(0, 32)}"`);
        }
      }

      const idle: Record<Who, number> = { platform: 0, bare: 0 };
      const peaks: Record<Who, { up: { hwm: number; max: number }; down: { hwm: number; max: number }; reset: boolean; samples: number }> = {
        platform: { up: { hwm: 0, max: 0 }, down: { hwm: 0, max: 0 }, reset: true, samples: 0 },
        bare: { up: { hwm: 0, max: 0 }, down: { hwm: 0, max: 0 }, reset: true, samples: 0 },
      };

      client = new pgLib.Client({ connectionString: db.url, application_name: 'bench-sql' });
      await client.connect();
      const statsClient = client;
      /** Transactions committed or rolled back in the bench database (the statistics are flushed by idle backends within ~1 s). */
      const transactions = async () => {
        await new Promise((r) => setTimeout(r, 1500));
        await statsClient.query('SELECT pg_stat_clear_snapshot()');
        return Number((await statsClient.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0].n);
      };

      // Warm-up (not measured): both servers' code paths compiled, connections and caches made.
      token = await siteToken(platform.url, site);
      const warm = { id: 'warmup', title: 'warm-up', size: 100 * KiB, files: small.slice(0, 20), concurrency: 2, rounds: 1 };
      for (const who of ['bare', 'platform'] as const) {
        await batch(who, 'upload', warm, 0);
        await batch(who, 'download', warm, 0);
        await removeObjects(who, warm, 0);
      }

      for (const s of scenarios) {
        const large = s.size >= 100 * MiB;
        const acc = {
          platform: { up: [] as Awaited<ReturnType<typeof batch>>[], down: [] as Awaited<ReturnType<typeof batch>>[] },
          bare: { up: [] as Awaited<ReturnType<typeof batch>>[], down: [] as Awaited<ReturnType<typeof batch>>[] },
          cp: [] as number[],
          cpNoSync: [] as number[],
          cat: [] as number[],
        };
        if (large) {
          await new Promise((r) => setTimeout(r, 1000));
          idle.platform = status(platform.pid).rss;
          idle.bare = status(bare.pid).rss;
        }
        for (let round = 0; round < s.rounds; round++) {
          token = await siteToken(platform.url, site);
          const order: Who[] = round % 2 === 0 ? ['bare', 'platform'] : ['platform', 'bare'];
          for (const who of order) {
            log(`${s.title}: ${who}, round ${round + 1}/${s.rounds}…`);
            if (large) {
              const up = await peakDuring(pidOf(who), () => batch(who, 'upload', s, round));
              const down = await peakDuring(pidOf(who), () => batch(who, 'download', s, round));
              acc[who].up.push(up.result);
              acc[who].down.push(down.result);
              const p = peaks[who];
              p.up = { hwm: Math.max(p.up.hwm, up.hwm), max: Math.max(p.up.max, up.sampledMax) };
              p.down = { hwm: Math.max(p.down.hwm, down.hwm), max: Math.max(p.down.max, down.sampledMax) };
              p.reset &&= up.hwmReset && down.hwmReset;
              p.samples += up.samples + down.samples;
            } else if (who === 'platform' && s.id === '100k-c1' && round === 0) {
              // Also the database transactions per request (pg_stat_database, outside the timed batches).
              const x0 = await transactions();
              acc[who].up.push(await batch(who, 'upload', s, round));
              const x1 = await transactions();
              acc[who].down.push(await batch(who, 'download', s, round));
              const x2 = await transactions();
              transactionsPerObject = { upload: r1((x1 - x0 - 1) / s.files.length), download: r1((x2 - x1 - 1) / s.files.length) };
            } else {
              acc[who].up.push(await batch(who, 'upload', s, round));
              acc[who].down.push(await batch(who, 'download', s, round));
            }
          }
          if (round === 0) await verify(s, round);
          // The reference: cp (+ fsync) of the same files on the same disk, cat to /dev/null.
          const dst = path.join(dirs.cp, `${s.id}-r${round}`);
          await mkdir(dst);
          const run = (cmd: string, args: string[], stdout: 'ignore' | number = 'ignore') => {
            const t0 = performance.now();
            const r = spawnSync(cmd, args, { stdio: ['ignore', stdout, 'pipe'], encoding: 'utf8' });
            if (r.status !== 0) throw new Error(`${cmd} failed (${r.status ?? r.signal}): ${r.stderr}`);
            return (performance.now() - t0) / 1000;
          };
          const copied = run('cp', [...s.files, dst]);
          const syncedCp = run('sync', s.files.map((f) => path.join(dst, path.basename(f))));
          acc.cpNoSync.push(copied);
          acc.cp.push(copied + syncedCp);
          const devNull = openSync('/dev/null', 'w');
          try {
            acc.cat.push(run('cat', s.files, devNull));
          } finally {
            closeSync(devNull);
          }
          await rm(dst, { recursive: true, force: true });
          if (large) for (const who of order) await removeObjects(who, s, round);
        }
        const bytesPerRound = s.size * s.files.length;
        const side = (runs: { seconds: number; times: number[]; cpu: number | null }[]): Side => {
          const seconds = runs.reduce((a, r) => a + r.seconds, 0);
          const bytes = bytesPerRound * runs.length;
          const cpu = runs.some((r) => r.cpu === null) ? null : runs.reduce((a, r) => a + r.cpu!, 0);
          return {
            mbps: r1(bytes / seconds / 1e6),
            seconds: r2(seconds),
            bytes,
            p50Ms: s.concurrency === 1 ? r2(quantile(runs.flatMap((r) => r.times), 0.5)) : null,
            cpuSecPerGB: cpu === null ? null : r2(cpu / (bytes / 1e9)),
            perRound: runs.map((r) => r1(bytesPerRound / r.seconds / 1e6)),
          };
        };
        const ref = (secs: number[]): Side => {
          const seconds = secs.reduce((a, b) => a + b, 0);
          return { mbps: r1((bytesPerRound * secs.length) / seconds / 1e6), seconds: r2(seconds), bytes: bytesPerRound * secs.length, p50Ms: null, cpuSecPerGB: null, perRound: secs.map((x) => r1(bytesPerRound / x / 1e6)) };
        };
        const pct = (a: Side, b: Side) => Math.round((a.mbps / b.mbps) * 100);
        const up = { platform: side(acc.platform.up), bare: side(acc.bare.up), cp: ref(acc.cp), cpNoSync: ref(acc.cpNoSync) };
        const down = { platform: side(acc.platform.down), bare: side(acc.bare.down), cat: ref(acc.cat) };
        transfers.push({
          id: s.id,
          title: s.title,
          size: s.size,
          count: s.files.length,
          concurrency: s.concurrency,
          rounds: s.rounds,
          upload: { ...up, platformPctOfBare: pct(up.platform, up.bare), platformPctOfCp: pct(up.platform, up.cp) },
          download: { ...down, platformPctOfBare: pct(down.platform, down.bare), platformPctOfCat: pct(down.platform, down.cat) },
        });
        log(`${s.title}: upload ${up.platform.mbps} MB/s (bare ${up.bare.mbps}, cp+fsync ${up.cp.mbps}); download ${down.platform.mbps} MB/s (bare ${down.bare.mbps}, cat ${down.cat.mbps})`);
      }
      const mib = (n: number) => r1(n / MiB);
      for (const who of wanted('1g') ? (['platform', 'bare'] as const) : []) {
        const p = peaks[who];
        memory.push({
          server: who,
          startMiB: mib(who === 'platform' ? platformStartRss : bareStartRss),
          idleMiB: mib(idle[who]),
          upload: { hwmMiB: mib(p.up.hwm), sampledMaxMiB: mib(p.up.max), deltaMB: r1((Math.max(p.up.hwm, p.up.max) - idle[who]) / 1e6) },
          download: { hwmMiB: mib(p.down.hwm), sampledMaxMiB: mib(p.down.max), deltaMB: r1((Math.max(p.down.hwm, p.down.max) - idle[who]) / 1e6) },
          hwmReset: p.reset,
          samples: p.samples,
        });
      }
      await rm(dirs.src, { recursive: true, force: true });
    }

    if (ONLY.has('list')) {
      token = await siteToken(platform.url, site);
      const listing = ok(await api(buckets, 'POST', { token, body: { name: 'Listing', app_category: 'attachments' } }), 201, 'bucket listing');
      if (!client) {
        client = new pgLib.Client({ connectionString: db.url, application_name: 'bench-sql' });
        await client.connect();
      }
      const c = client;
      const q = `"${site}"`;
      const { rows: [b] } = await c.query(`SELECT id, uuid FROM ${q}.storage_buckets WHERE slug = $1`, [listing.slug]);
      const { rows: [u] } = await c.query(`SELECT uuid FROM ${q}.users WHERE username = 'benchadmin'`);
      if (!b || !u) throw new Error('the listing bucket or the site admin is missing from the site schema');
      log(`${LIST_ROWS.toLocaleString('en')} objects in SQL…`);
      const t0 = performance.now();
      await c.query(
        `INSERT INTO ${q}.storage_objects (uuid, bucket_id, path, filename, size, mimetype, metadata, visibility, blob_key, etag, created_at, updated_at, created_by, modified_by)
         SELECT x.u, $1, x.d || x.f, x.f, 1024 + (hashint4(x.g) & 1048575), (ARRAY['application/pdf', 'image/png', 'image/jpeg', 'text/plain', 'application/octet-stream'])[1 + x.g % 5],
                '{}', NULL, $2::text || '/' || x.u, '"' || md5(x.g::text) || '"', x.t, x.t, $3::uuid, $3::uuid
           FROM (SELECT g, md5('object' || g)::uuid AS u, 'dir' || lpad(((g - 1) % 1000)::text, 4, '0') || '/' AS d,
                        'file' || lpad((g - 1)::text, 6, '0') || '.bin' AS f, timestamptz '2025-01-01 00:00:00+00' + g * interval '1 second' AS t
                   FROM generate_series(1, $4::int) AS g) x`,
        [b.id, b.uuid, u.uuid, LIST_ROWS],
      );
      const insertSec = r2((performance.now() - t0) / 1000);
      const t1 = performance.now();
      await c.query(`VACUUM ANALYZE ${q}.storage_objects`);
      const vacuumSec = r2((performance.now() - t1) / 1000);
      const sizes = (await c.query(`SELECT pg_table_size('${q}.storage_objects') AS t, pg_indexes_size('${q}.storage_objects') AS i`)).rows[0];
      listSetup = { rows: LIST_ROWS, prefixes: 1000, insertSec, vacuumSec, tableMiB: r2(Number(sizes.t) / MiB), indexesMiB: r2(Number(sizes.i) / MiB) };
      log(`seeded in ${insertSec} s, vacuum analyze ${vacuumSec} s; ${JSON.stringify(listSetup)}`);

      const listUrl = `${buckets}${listing.slug}/objects/`;
      const prefixOf = (i: number) => `dir${String((i * 37) % 1000).padStart(4, '0')}/`;
      const searchOf = (i: number) => `file${String((i * 37) % Math.min(10000, Math.ceil(LIST_ROWS / 100))).padStart(4, '0')}`;
      const like = (s: string) => s.replace(/[\\%_]/g, (ch) => `\\${ch}`);
      const prefixRows = Math.min(100, Math.floor(LIST_ROWS / 1000));
      // One object's record (?metadata=true) in the big bucket and in the small one: what any
      // object request costs before its own work (authentication, app, bucket).
      token = await siteToken(platform.url, site);
      const probe = `${objectsUrl}probe.bin`;
      const agent = new http.Agent({ keepAlive: false });
      expect(await send(agent, probe, 'PUT', { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'content-length': 1024 }, Readable.from([randomBytes(1024)])), [201, 200], 'upload probe.bin');
      agent.destroy();
      const smallBucketObjects = Number((await c.query(`SELECT count(*) AS n FROM ${q}.storage_objects WHERE bucket_id = (SELECT id FROM ${q}.storage_buckets WHERE slug = $1)`, [files.slug])).rows[0].n);
      type ListQuery = { id: string; title: string; url: (i: number) => string; rows: number | null; runs: number; warmup: number; sql: ((i: number) => { where: string; p: unknown[]; order: string }) | null; target: boolean };
      const page = (qs: (i: number) => string) => (i: number) => `${listUrl}?${qs(i)}`;
      const queries: ListQuery[] = [
        { id: 'prefix-asc-planned', title: 'prefix, ordering=created_at, _count=planned', url: page((i) => `prefix=${encodeURIComponent(prefixOf(i))}&ordering=created_at&page_size=100&_count=planned`), rows: prefixRows, runs: LIST_RUNS, warmup: LIST_WARMUP, sql: (i) => ({ where: `o.path LIKE $2 ESCAPE '\\'`, p: [`${like(prefixOf(i))}%`], order: 'o.created_at ASC, o.id ASC' }), target: true },
        { id: 'prefix-desc-planned', title: 'prefix, ordering=-created_at, _count=planned', url: page((i) => `prefix=${encodeURIComponent(prefixOf(i))}&ordering=-created_at&page_size=100&_count=planned`), rows: prefixRows, runs: Math.ceil(LIST_RUNS / 2), warmup: 10, sql: (i) => ({ where: `o.path LIKE $2 ESCAPE '\\'`, p: [`${like(prefixOf(i))}%`], order: 'o.created_at DESC, o.id DESC' }), target: false },
        { id: 'prefix-asc-exact', title: 'prefix, ordering=created_at, _count=exact', url: page((i) => `prefix=${encodeURIComponent(prefixOf(i))}&ordering=created_at&page_size=100&_count=exact`), rows: prefixRows, runs: Math.ceil(LIST_RUNS / 2), warmup: 10, sql: null, target: false },
        { id: 'search-asc-planned', title: 'search (100 matches), ordering=created_at, _count=planned', url: page((i) => `search=${searchOf(i)}&ordering=created_at&page_size=100&_count=planned`), rows: 100, runs: Math.ceil(LIST_RUNS / 10), warmup: 3, sql: (i) => ({ where: `(o.filename ILIKE $2 ESCAPE '\\' OR o.path ILIKE $2 ESCAPE '\\')`, p: [`%${like(searchOf(i))}%`], order: 'o.created_at ASC, o.id ASC' }), target: false },
        { id: 'all-desc-planned', title: 'no filter, ordering=-created_at, _count=planned', url: page(() => 'ordering=-created_at&page_size=100&_count=planned'), rows: 100, runs: Math.ceil(LIST_RUNS / 2), warmup: 10, sql: () => ({ where: 'TRUE', p: [], order: 'o.created_at DESC, o.id DESC' }), target: false },
        { id: 'record-big', title: `one object's record (?metadata=true), bucket of ${LIST_ROWS.toLocaleString('en')}`, url: (i) => `${listUrl}dir${String(i % 1000).padStart(4, '0')}/file${String(i % LIST_ROWS).padStart(6, '0')}.bin?metadata=true`, rows: null, runs: Math.ceil(LIST_RUNS / 4), warmup: 5, sql: null, target: false },
        { id: 'record-small', title: `one object's record (?metadata=true), bucket of ${smallBucketObjects.toLocaleString('en')}`, url: () => `${probe}?metadata=true`, rows: null, runs: Math.ceil(LIST_RUNS / 4), warmup: 5, sql: null, target: false },
      ];
      for (const query of queries) {
        log(`list: ${query.title} (${query.runs} requests)…`);
        token = await siteToken(platform.url, site);
        const times: number[] = [];
        const perPage = new Set<number>();
        const counts = new Set<number | null>();
        for (let i = -query.warmup; i < query.runs; i++) {
          const t = performance.now();
          const res = await fetch(query.url(i + query.warmup), { headers: { authorization: `Bearer ${token}` } });
          const text = await res.text();
          const ms = performance.now() - t;
          if (res.status !== 200) throw new Error(`${query.id}: HTTP ${res.status}: ${text.slice(0, 400)}`);
          const body = JSON.parse(text);
          if (i < 0) continue;
          times.push(ms);
          if (query.rows === null) {
            if (typeof body.data?.file_path !== 'string') throw new Error(`${query.id}: no object record in ${text.slice(0, 300)}`);
          } else {
            perPage.add(body.results.length);
            counts.add(body.count);
          }
        }
        if (query.rows !== null && (!perPage.has(query.rows) || perPage.size !== 1)) throw new Error(`${query.id}: pages of ${[...perPage].join(', ')} rows (expected ${query.rows})`);
        const plan: string[] = [];
        if (query.sql) {
          const s = query.sql(0);
          const text = `SELECT o.* FROM ${q}.storage_objects o WHERE (o.bucket_id = $1) AND (${s.where}) ORDER BY ${s.order} LIMIT 100 OFFSET 0`;
          plan.push(...(await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, [b.id, ...s.p])).rows.map((r) => r['QUERY PLAN'] as string));
          plans[query.id] = plan;
        }
        listRows.push({
          id: query.id,
          title: query.title,
          runs: times.length,
          rowsPerPage: query.rows === null ? 1 : [...perPage][0],
          count: [...counts].slice(0, 3),
          p50Ms: r2(quantile(times, 0.5)),
          p99Ms: r2(quantile(times, 0.99)),
          meanMs: r2(times.reduce((a, x) => a + x, 0) / times.length),
          sqlMs: plan.length ? Number(/Execution Time: ([\d.]+)/.exec(plan.at(-1)!)?.[1]) : null,
          target: query.target,
        });
      }
      // Every object request looks its bucket up with the bucket's object count (bucket.service.ts findBucket).
      const lookup = (await c.query(
        `EXPLAIN (ANALYZE, BUFFERS) SELECT b.*, (SELECT count(*) FROM ${q}.storage_objects o WHERE o.bucket_id = b.id) AS object_count FROM ${q}.storage_buckets b WHERE b.app_id = (SELECT id FROM ${q}.apps WHERE slug = $1) AND b.slug = $2`,
        [APP, listing.slug],
      )).rows.map((r) => r['QUERY PLAN'] as string);
      plans['bucket-lookup'] = lookup;
      listSetup.bucketLookupMs = Number(/Execution Time: ([\d.]+)/.exec(lookup.at(-1)!)?.[1]);
      listSetup.smallBucketObjects = smallBucketObjects;
    }

    // ---- the report ----
    const table = (head: string[], body: string[][]) => {
      const widths = head.map((h, i) => Math.max(h.length, ...body.map((x) => x[i]!.length)));
      const line = (cells: string[]) => `| ${cells.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join(' | ')} |`;
      return [line(head), `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...body.map(line)];
    };
    const f = (n: number | null | undefined, d = 1) => (n === null || n === undefined || Number.isNaN(n) ? '–' : n.toFixed(d));
    const out: string[] = [];
    out.push(`${machine.cpus} cores (${machine.cpuModel}), ${machine.totalMemoryMiB} MiB RAM, Node ${process.version}, ${db.version.split(',')[0]}, ${fsType} on ${tmp}; all figures from this one run.`);
    if (transfers.length) {
      out.push('', 'Throughput (MB/s = 10^6 bytes/s; HTTP on loopback, one client; ref = cp + fsync for uploads, cat > /dev/null for downloads):', '');
      out.push(...table(
        ['scenario', 'op', 'platform MB/s', 'bare MB/s', '% of bare', 'ref MB/s', '% of ref', 'platform p50 ms', 'bare p50 ms', 'srv CPU s/GB platform', 'bare'],
        transfers.flatMap((t) => [
          [t.title, 'upload', f(t.upload.platform.mbps), f(t.upload.bare.mbps), `${t.upload.platformPctOfBare}%`, f(t.upload.cp.mbps), `${t.upload.platformPctOfCp}%`, f(t.upload.platform.p50Ms, 2), f(t.upload.bare.p50Ms, 2), f(t.upload.platform.cpuSecPerGB, 2), f(t.upload.bare.cpuSecPerGB, 2)],
          [t.title, 'download', f(t.download.platform.mbps), f(t.download.bare.mbps), `${t.download.platformPctOfBare}%`, f(t.download.cat.mbps), `${t.download.platformPctOfCat}%`, f(t.download.platform.p50Ms, 2), f(t.download.bare.p50Ms, 2), f(t.download.platform.cpuSecPerGB, 2), f(t.download.bare.cpuSecPerGB, 2)],
        ]),
      ));
      out.push('', `cp without fsync: ${transfers.map((t) => `${t.id} ${f(t.upload.cpNoSync.mbps)} MB/s`).join(', ')}`);
      if (transactionsPerObject) out.push(`PostgreSQL transactions per 100 KiB object (platform, sequential): upload ${transactionsPerObject.upload}, download ${transactionsPerObject.download}`);
      out.push(`per round (platform / bare MB/s): ${transfers.map((t) => `${t.id} up ${t.upload.platform.perRound.join('/')} vs ${t.upload.bare.perRound.join('/')}, down ${t.download.platform.perRound.join('/')} vs ${t.download.bare.perRound.join('/')}`).join('; ')}`);
    }
    if (memory.length) {
      out.push('', `Memory of the server process during the ${LARGE / MiB} MiB objects (MiB; Δ = peak − idle in MB; peak = max(VmHWM after reset, VmRSS sampled every 50 ms)):`, '');
      out.push(...table(
        ['server', 'at start', 'idle', 'upload VmHWM', 'upload max sampled', 'upload Δ MB', 'download VmHWM', 'download max sampled', 'download Δ MB'],
        memory.map((m) => [m.server, f(m.startMiB), f(m.idleMiB), f(m.upload.hwmMiB), f(m.upload.sampledMaxMiB), f(m.upload.deltaMB), f(m.download.hwmMiB), f(m.download.sampledMaxMiB), f(m.download.deltaMB)]),
      ));
      if (memory.some((m) => !m.hwmReset)) out.push('(VmHWM could not be reset: it is the process lifetime peak; the sampled maximum is the phase\'s)');
    }
    if (listRows.length) {
      out.push('', `List of a bucket of ${LIST_ROWS.toLocaleString('en')} objects (1,000 prefixes; sequential requests after warm-ups of 20 (target), 10, 3 (search), 5 (records); whole body read):`, '');
      out.push(...table(
        ['query', 'rows/page', 'count', 'p50 ms', 'p99 ms', 'mean ms', 'SQL page ms', 'requests'],
        listRows.map((r) => [r.title as string, String(r.rowsPerPage), (r.count as unknown[]).map(String).join(', '), f(r.p50Ms as number, 2), f(r.p99Ms as number, 2), f(r.meanMs as number, 2), f(r.sqlMs as number | null, 2), String(r.runs)]),
      ));
      out.push('', 'SQL page ms: EXPLAIN ANALYZE of the page statement alone (the first request\'s values), server execution time.');
      out.push(`setup: ${JSON.stringify(listSetup)}`);
      out.push(`the bucket lookup every object request makes (bucket.service.ts findBucket, with the bucket's object count) on the ${LIST_ROWS.toLocaleString('en')}-object bucket: ${listSetup.bucketLookupMs} ms (EXPLAIN ANALYZE)`);
      for (const [id, plan] of Object.entries(plans)) out.push(`plan ${id}: ${plan.filter((l) => /->|Scan|Sort|Limit|Execution/.test(l)).map((l) => l.trim()).slice(0, 6).join(' · ')}`);
    }
    const verdicts: { ok: boolean; text: string }[] = [];
    const big = transfers.find((t) => t.id === '1g');
    if (big) {
      verdicts.push({ ok: big.upload.platformPctOfBare >= TARGET_SHARE, text: `large upload ≥ ${TARGET_SHARE}% of bare: ${big.upload.platformPctOfBare}%` });
      verdicts.push({ ok: big.download.platformPctOfBare >= TARGET_SHARE, text: `large download ≥ ${TARGET_SHARE}% of bare: ${big.download.platformPctOfBare}%` });
    }
    const pm = memory.find((m) => m.server === 'platform');
    if (pm) verdicts.push({ ok: Math.max(pm.upload.deltaMB, pm.download.deltaMB) < TARGET_RSS_MB, text: `platform RSS peak − idle < ${TARGET_RSS_MB} MB: upload ${pm.upload.deltaMB}, download ${pm.download.deltaMB}` });
    const lt = listRows.find((r) => r.target);
    if (lt) verdicts.push({ ok: (lt.p50Ms as number) < TARGET_LIST_P50_MS, text: `list (prefix, created_at, planned count) p50 < ${TARGET_LIST_P50_MS} ms: ${lt.p50Ms}` });
    out.push('', ...verdicts.map((v) => `${v.ok ? 'PASS' : 'MISS'}  ${v.text}`), '', `reproduce: ${command}`);
    console.log(`\n${out.join('\n')}\n`);

    const report = {
      timestamp,
      command,
      machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2), filesystem: fsType },
      database: { source: db.source, version: db.version },
      settings: { rounds: ROUNDS, largeRounds: LARGE_ROUNDS, smallCount: SMALL_COUNT, mediumCount: MEDIUM_COUNT, largeBytes: LARGE, listRows: LIST_ROWS, listRuns: LIST_RUNS, store: 'filesystem' },
      transfers,
      transactionsPerObject,
      memory,
      list: { setup: listSetup, queries: listRows, plans },
      targets: verdicts,
    };
    writeResults('storage', report, timestamp, log);
    return verdicts.some((v) => !v.ok) && process.env.BENCH_STRICT === '1' ? 1 : 0;
  }

  await runBench(main, cleanup, log);
}

if (process.env.BENCH_STORAGE_ROLE === 'bare') await serveBare();
else await benchMain();
