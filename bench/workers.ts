// `npm run bench:workers`: frontend workers (issue 31) — static serving against nginx, deploys,
// activation. ONE platform server (a child process: bench/server.ts) on a fresh database, rate
// limits off (they never apply to worker hosts anyway), LOG_LEVEL=warn (no request logs),
// PLATFORM_BASE_DOMAIN=localhost, the filesystem store in a temporary directory.
//
// 1. Static throughput: one 10 KiB `.js` asset (generated JavaScript-like text, brotli and gzip
//    apply) with Debian's `wrk -t2 -c50 -d10s` (after a 5 s warm-up run), against
//      platform br    Host shop.localhost, `Accept-Encoding: br, gzip` → the brotli variant;
//      nginx gzip     /usr/sbin/nginx (worker_processes 1, access_log off, sendfile on,
//                     keepalive_requests 100000 as Node has no per-connection limit), serving
//                     the same files from a directory on disk; Debian's nginx has no brotli, so
//                     `gzip_static on` with a `.gz` (level 9) beside the file: gzip from disk,
//                     the same `Accept-Encoding: br, gzip` sent;
//      platform gzip  `Accept-Encoding: gzip` only: the like-for-like comparison.
//    nginx runs as a child (its own prefix, pid file and error log in the temporary directory,
//    a free port), stopped by its PID. Each answer is checked first (200, the encoding, the
//    length, the decoded bytes); a run with non-2xx answers or socket errors is invalid.
//    BENCH_ROUNDS rounds (2) in alternating order; the figure is the median of the rounds. Also
//    the server's CPU µs per request (/proc/{pid}/stat: the platform, nginx's worker process).
//    wrk shares the 2 vCPUs with the server it loads.
// 2. Deploy: a .tar.gz of 5,000 unique files, ~50 MB (3,500 generated html/js/css/json texts
//    of 4–16 KiB that compress 3–5x; 1,500 png/jpg/woff2 of random bytes), through
//    `POST /api/frontend_workers/` (multipart, set_active) on a fresh site per run (content
//    addressing is per site): wall time from request start to the 201's end. Then, on the same
//    worker, a second build with 3 files changed (`POST …/builds/`, set_active). BENCH_DEPLOYS
//    runs (3), medians, and the platform's CPU seconds per deploy; stored_files must be 5,000
//    and 3, and the changed file must serve its new content.
// 3. Activation: 50 activations alternating between two ready builds (after 4 not measured),
//    p50/p95 of the request; after each answer, `/` is polled on the worker's host until the
//    newly active build answers ("time to visible": routing is invalidated by NOTIFY at commit).
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL),
// BENCH_ROUNDS (2), BENCH_DEPLOYS (3), BENCH_ACTIVATIONS (50), BENCH_DURATION (10, seconds per
// wrk run), BENCH_ONLY (comma list of throughput, deploy, activation), BENCH_CPU_PROFILE (a
// directory: the platform's V8 CPU profile, written when it stops).
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import * as tar from 'tar';
import { freePort } from '../shared/db/embedded.ts';
import { cpuSeconds, runBench, startChild, startNginx, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { ADMIN, api, envNumber, ok, r2, serverEnv, siteToken } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const ROUNDS = Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2)));
const DEPLOYS = Math.max(1, Math.round(envNumber('BENCH_DEPLOYS', 3)));
const ACTIVATIONS = Math.max(2, Math.round(envNumber('BENCH_ACTIVATIONS', 50)));
const DURATION = Math.max(1, Math.round(envNumber('BENCH_DURATION', 10)));
const PARTS = ['throughput', 'deploy', 'activation'] as const;
const ONLY = new Set((process.env.BENCH_ONLY || PARTS.join(',')).split(',').map((s) => s.trim()));
const unknownPart = [...ONLY].filter((s) => !(PARTS as readonly string[]).includes(s));
if (unknownPart.length) throw new Error(`BENCH_ONLY: unknown part ${unknownPart.join(', ')} (${PARTS.join(', ')})`);
const SECRET = randomBytes(32).toString('base64url');
const NGINX = '/usr/sbin/nginx';
const WRK = '/usr/bin/wrk';
const ASSET = 'assets/app-3f9a1b2c.js';
const ASSET_BYTES = 10 * 1024;
const HOST = 'shop.localhost';
const FILES = { text: 3500, binary: 1500 };
const CHANGED = 3;
const TARGETS = { ratio: 0.5, deploySeconds: 10, secondShare: 0.1, activationP50Ms: 50 };
const log = (msg: string) => process.stderr.write(`[bench:workers] ${msg}\n`);
const run = promisify(execFile);

// ---- generated content -----------------------------------------------------------------------

/** A deterministic generator (mulberry32): the same seed, the same file. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]) => xs[int(xs.length)]!;
  return { next, int, pick };
}

const WORDS = (
  'account action active address admin album amount answer apply archive article author balance banner basket billing block board booking border brand browse budget button cache calendar ' +
  'camera cancel caption card cart catalog category center change channel chart checkout city client close cloud code collection color column comment company config contact content ' +
  'context count country coupon course create credit currency customer dashboard data date default delete delivery detail device dialog discount display document domain download draft ' +
  'editor email empty entry error event export feature field filter footer format friend gallery group header height helper history image index input invoice item label language layout ' +
  'level library limit link list loader location login message method modal module month notice number offer option order owner package page panel parent password payment photo picker ' +
  'place plan player point policy popup post preview price print product profile project query quote range rating record region report request result review route sales schedule ' +
  'search section select service session setting share shipping sidebar size slider source status step store style summary support table tag task team template theme ticket title ' +
  'toggle token total track type update upload user value vendor video view wallet week width window'
).split(' ');
const KEYWORDS = ['const', 'let', 'return', 'if', 'else', 'await', 'async', 'function', 'new', 'this', 'null', 'true', 'false', 'typeof', 'export'];
const PROPS = ['display', 'margin', 'padding', 'color', 'background', 'border', 'font-size', 'line-height', 'width', 'height', 'flex', 'gap', 'position', 'opacity', 'transition'];

function textGen(seed: number) {
  const r = prng(seed);
  const word = () => r.pick(WORDS);
  const camel = () => word() + word().replace(/^./, (c) => c.toUpperCase());
  const kebab = () => `${word()}-${word()}`;
  const num = () => String(r.int(r.next() < 0.7 ? 100 : 100_000));
  const sentence = (n: number) => Array.from({ length: n }, word).join(' ').replace(/^./, (c) => c.toUpperCase()) + '.';
  const hex = () => r.int(0x1000000).toString(16).padStart(6, '0');
  return {
    js: () => {
      const name = camel();
      const arg = word();
      return [
        `${r.pick(['export ', ''])}${r.pick(['async ', ''])}function ${name}(${arg}, options = {}) {`,
        `  const ${camel()} = ${arg}.${camel()}(${num()});`,
        `  if (${arg}.${word()} ${r.pick(['>', '<', '===', '!=='])} ${num()}) ${r.pick(KEYWORDS)} ${camel()}(${arg}, '${kebab()}');`,
        `  return ${arg}.${word()}s.map((x) => x.${word()} + ${num()}).filter(Boolean); // ${sentence(4)}`,
        '}',
      ].join('\n');
    },
    css: () => `.${kebab()} ${r.next() < 0.5 ? `.${kebab()} ` : ''}{\n${Array.from({ length: 2 + r.int(4) }, () => `  ${r.pick(PROPS)}: ${r.next() < 0.4 ? `#${hex()}` : `${num()}px`};`).join('\n')}\n}`,
    html: () => `<section class="${kebab()}">\n  <h2>${sentence(3)}</h2>\n  <p>${sentence(8 + r.int(12))}</p>\n  <a href="/${word()}/${kebab()}/${num()}" class="${kebab()}">${sentence(2)}</a>\n</section>`,
    json: () => JSON.stringify({ id: Number(num()), name: sentence(2), slug: kebab(), price: r.int(100_000) / 100, tags: [word(), word()], [word()]: sentence(5) }, null, 2),
  };
}

/** About `bytes` of one kind of text (whole units); `tag` makes the file unique. */
function textFile(kind: 'js' | 'css' | 'html' | 'json', seed: number, bytes: number, tag: string): string {
  const g = textGen(seed);
  const [head, sep, tail] = {
    js: [`// ${tag}\n'use strict';\n`, '\n\n', '\n'],
    css: [`/* ${tag} */\n`, '\n', '\n'],
    html: [`<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${tag}</title></head>\n<body>\n`, '\n', '\n</body></html>\n'],
    json: [`{"source": ${JSON.stringify(tag)}, "items": [\n`, ',\n', '\n]}\n'],
  }[kind];
  const parts: string[] = [];
  let length = head.length + tail.length;
  while (length < bytes) {
    const unit = g[kind]();
    parts.push(unit);
    length += unit.length + sep.length;
  }
  return head + parts.join(sep) + tail;
}

/** The 10 KiB asset: JavaScript-like text of exactly ASSET_BYTES bytes. */
const assetText = () => textFile('js', 424242, ASSET_BYTES + 2048, 'app bundle').slice(0, ASSET_BYTES - 1) + '\n';

/** Writes the 5,000-file site into `dir`; its paths, the text files' paths, bytes written. */
function writeBigSite(dir: string): { paths: string[]; texts: string[]; bytes: number } {
  const paths: string[] = [];
  const texts: string[] = [];
  let bytes = 0;
  const put = (rel: string, data: string | Buffer) => {
    fs.mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), data);
    paths.push(rel);
    bytes += Buffer.byteLength(data);
  };
  const r = prng(7);
  const kinds = [
    ['html', 500, (i: number) => `pages/section-${i % 20}/page-${i}.html`],
    ['js', 1500, (i: number) => `assets/js/chunk-${i}-${(i * 2654435761 >>> 0).toString(16)}.js`],
    ['css', 700, (i: number) => `assets/css/style-${i}.css`],
    ['json', 800, (i: number) => `data/${i % 10}/records-${i}.json`],
  ] as const;
  let seed = 1;
  for (const [kind, n, name] of kinds) {
    for (let i = 0; i < n; i++) {
      const rel = i === 0 && kind === 'html' ? 'index.html' : name(i);
      put(rel, textFile(kind, seed++, 4096 + r.int(12 * 1024), rel));
      texts.push(rel);
    }
  }
  const binaries = [['png', 900, 'img/photos'], ['jpg', 400, 'img/thumbs'], ['woff2', 200, 'fonts']] as const;
  for (const [ext, n, folder] of binaries) for (let i = 0; i < n; i++) put(`${folder}/${ext}-${i}.${ext}`, randomBytes(2048 + r.int(16 * 1024)));
  return { paths, texts, bytes };
}

const tarGz = (cwd: string, file: string, paths: string[]) => tar.c({ gzip: true, cwd, file, portable: true }, paths);

// ---- HTTP --------------------------------------------------------------------------------------

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  ms: number;
}

/** One request (keep-alive); the body as a buffer, a stream, or nothing; the time to the answer's end. */
function request(url: string, init: { method?: string; headers?: Record<string, string>; body?: Buffer | (() => NodeJS.ReadableStream); length?: number } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const headers: Record<string, string> = { ...init.headers };
    if (init.length !== undefined) headers['content-length'] = String(init.length);
    const req = http.request(url, { method: init.method ?? 'GET', headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), ms: performance.now() - t0 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (typeof init.body === 'function') init.body().pipe(req);
    else req.end(init.body);
  });
}

const json = (a: Answer) => {
  try {
    return JSON.parse(a.body.toString('utf8')) as Record<string, any>;
  } catch {
    return {};
  }
};

/** A multipart upload of `file` (streamed from disk) with `fields` before it. */
function upload(url: string, token: string, fields: Record<string, string>, file: string): Promise<Answer> {
  const boundary = `----bench${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    Object.entries(fields).map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('') +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${path.basename(file)}"\r\nContent-Type: application/gzip\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  async function* parts() {
    yield head;
    yield* fs.createReadStream(file, { highWaterMark: 1 << 20 });
    yield tail;
  }
  return request(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    length: head.length + fs.statSync(file).size + tail.length,
    body: () => Readable.from(parts()),
  });
}

// ---- wrk and nginx -----------------------------------------------------------------------------

interface WrkResult {
  requestsPerSec: number;
  requests: number;
  p50Ms: number;
  p99Ms: number;
  bytesPerResponse: number;
  non2xx: number;
  socketErrors: number;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };
const SIZE: Record<string, number> = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };

/** Parses wrk's report (with --latency). */
function parseWrk(out: string): WrkResult {
  const latency = new Map([...out.matchAll(/^\s*(\d+)%\s+([\d.]+)(us|ms|s|m)\s*$/gm)].map((m) => [m[1], r2(Number(m[2]) * UNIT_MS[m[3]!]!)]));
  const ms = (percent: string) => latency.get(percent) ?? NaN;
  const total = out.match(/(\d+) requests in [\d.]+\w+, ([\d.]+)(B|KB|MB|GB) read/);
  const rps = out.match(/Requests\/sec:\s+([\d.]+)/);
  if (!total || !rps) throw new Error(`wrk: unexpected output\n${out}`);
  const socket = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/);
  const requests = Number(total[1]);
  return {
    requestsPerSec: Math.round(Number(rps[1])),
    requests,
    p50Ms: ms('50'),
    p99Ms: ms('99'),
    bytesPerResponse: Math.round((Number(total[2]) * SIZE[total[3]!]!) / requests),
    non2xx: Number(out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0),
    socketErrors: socket ? socket.slice(1).reduce((s, n) => s + Number(n), 0) : 0,
  };
}

async function wrk(url: string, headers: Record<string, string>, seconds: number): Promise<WrkResult> {
  const args = ['-t2', '-c50', `-d${seconds}s`, '--latency', ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]), url];
  const { stdout } = await run(WRK, args, { maxBuffer: 1 << 20 });
  return parseWrk(stdout);
}

/** nginx as a child (master + 1 worker) serving `root` on a free port, the same files as the platform's build; stopped by its PID. */
const startStaticNginx = (dir: string, root: string) =>
  startNginx(
    dir,
    (port) => `  sendfile on;
  tcp_nopush on;
  types { text/html html; application/javascript js; }
  default_type application/octet-stream;
  gzip off;
  gzip_static on;
  gzip_vary on;
  server {
    listen 127.0.0.1:${port};
    server_name _;
    root ${root};
    index index.html;
  }`,
    '/index.html',
  );

/**
 * The hand-written baseline in Node: one process answering every request with the asset's gzip
 * bytes read once at start and the same headers as the platform (no routing, no lookup): the
 * most one Node process serves here, the ceiling of any Node static server.
 */
async function startBareNode(gzFile: string): Promise<Child> {
  const port = await freePort();
  const code = `const http = require('node:http'); const body = require('node:fs').readFileSync(${JSON.stringify(gzFile)});
const headers = { 'Content-Type': 'text/javascript; charset=utf-8', 'Content-Encoding': 'gzip', 'Content-Length': String(body.length), ETag: '"bare-gz"', 'Cache-Control': 'public, max-age=31536000, immutable', Vary: 'Accept-Encoding', 'X-Content-Type-Options': 'nosniff' };
http.createServer((req, res) => res.writeHead(200, headers).end(body)).listen(${port}, '127.0.0.1', () => console.log('ready'));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`bare node exited (${c})`)));
  });
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  };
  return { name: 'node-bare', url: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
}

// ---- the parts ---------------------------------------------------------------------------------

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

let db: BenchDatabase | undefined;
const children: Child[] = [];
let tmp: string | undefined;
let cleaning: Promise<void> | undefined;
const cleanup = () =>
  (cleaning ??= (async () => {
    agent.destroy();
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  })());

interface Site {
  schema: string;
  token: string;
  workers: string;
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  const command = reproduceCommand('bench:workers');
  log(`reproduce with: ${command}`);
  log(`${machine.cpus} cores (${machine.cpuModel}), load average ${(machine.loadAverageAtStart as number[]).join(' ')}`);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-bench-workers-'));
  const dirs = { store: path.join(tmp, 'store'), data: path.join(tmp, 'data'), small: path.join(tmp, 'small'), big: path.join(tmp, 'big'), nginx: path.join(tmp, 'nginx') };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  fs.chmodSync(tmp, 0o755); // nginx's worker runs as nobody when the bench runs as root: it must read dirs.small
  db = await openBenchDatabase(log);
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const platform = await startChild('platform', 'server.ts', {
    env: {
      ...serverEnv(db.url, SECRET),
      PLATFORM_BASE_DOMAIN: 'localhost',
      PLATFORM_DATA_DIR: dirs.data,
      STORAGE_DIR: dirs.store,
      STORAGE_MAINTENANCE_INTERVAL_MS: '0',
      PGAPPNAME: 'bench-workers',
    },
    cpuProfileDir: process.env.BENCH_CPU_PROFILE ? path.resolve(process.env.BENCH_CPU_PROFILE) : undefined,
  });
  children.push(platform);
  log(`platform pid ${platform.pid} at ${platform.url}`);
  const port = new URL(platform.url).port;
  const problems: string[] = [];
  const admin = ok(await api(`${platform.url}/api/auth/jwt/token/`, 'POST', { body: ADMIN }), 200, 'admin login');
  const org = ok(await api(`${platform.url}/api/cloud/organizations/`, 'POST', { token: admin.access, body: { name: 'Workers Bench' } }), 201, 'organization');
  const makeSite = async (name: string): Promise<Site> => {
    const site = ok(await api(`${platform.url}/api/cloud/organizations/${org.slug}/sites/`, 'POST', { token: admin.access, body: { name } }), 201, `site ${name}`);
    const schema = site.schema_name as string;
    return { schema, token: await siteToken(platform.url, schema), workers: `${platform.url}/sites/${schema}/api/frontend_workers/` };
  };
  /** GET on the worker host of the platform. */
  const visit = (p: string, headers: Record<string, string> = {}) => request(`${platform.url}${p}`, { headers: { host: HOST, ...headers } });

  // The small site of parts 1 and 3: two builds (index.html differs), the same asset.
  const asset = Buffer.from(assetText());
  const index = (v: string) => `<!doctype html><html><head><title>Shop ${v}</title><script src="/${ASSET}"></script></head><body><div id="app" data-build="${v}"></div></body></html>\n`;
  fs.mkdirSync(path.join(dirs.small, 'assets'));
  fs.writeFileSync(path.join(dirs.small, ASSET), asset);
  const gz = gzipSync(asset, { level: 9 });
  fs.writeFileSync(path.join(dirs.small, `${ASSET}.gz`), gz);
  const smallArchive = async (v: string) => {
    fs.writeFileSync(path.join(dirs.small, 'index.html'), index(v));
    const file = path.join(tmp!, `shop-${v}.tar.gz`);
    await tarGz(dirs.small, file, ['index.html', ASSET]);
    return file;
  };
  const shopSite = await makeSite('Shop Bench');
  const first = await upload(shopSite.workers, shopSite.token, { name: 'Shop', subdomain_input: 'shop', set_active: 'true' }, await smallArchive('A'));
  if (first.status !== 201) throw new Error(`create worker shop: ${first.status} ${first.body.toString().slice(0, 500)}`);
  const buildA = json(first).data.build.uuid as string;
  const second = await upload(`${shopSite.workers}shop/builds/`, shopSite.token, {}, await smallArchive('B'));
  if (second.status !== 201) throw new Error(`build B: ${second.status} ${second.body.toString().slice(0, 500)}`);
  const buildB = json(second).data.uuid as string;
  fs.writeFileSync(path.join(dirs.small, 'index.html'), index('A')); // the directory nginx serves = build A
  log(`worker shop on ${shopSite.schema}: builds A ${buildA} (active), B ${buildB}; asset ${asset.length} B, gzip ${gz.length} B`);

  // ---- 1. throughput -----------------------------------------------------------------------
  type Target = 'platform-br' | 'nginx-gzip' | 'platform-gzip' | 'node-bare-gzip';
  const throughput: { target: Target; round: number; result: WrkResult; cpuUsPerRequest: number | null }[] = [];
  let sizes: Record<Target, { encoding: string; bytes: number }> | undefined;
  if (ONLY.has('throughput')) {
    const nginx = await startStaticNginx(dirs.nginx, dirs.small);
    children.push(nginx);
    log(`${spawnSync(NGINX, ['-v'], { encoding: 'utf8' }).stderr.trim()}, pid ${nginx.pid} at ${nginx.url} (worker_processes 1, gzip_static)`);
    const bare = await startBareNode(path.join(dirs.small, `${ASSET}.gz`));
    children.push(bare);
    const targets: Record<Target, { url: string; headers: Record<string, string>; encoding: string; decode: (b: Buffer) => Buffer }> = {
      'platform-br': { url: `${platform.url}/${ASSET}`, headers: { Host: HOST, 'Accept-Encoding': 'br, gzip' }, encoding: 'br', decode: brotliDecompressSync },
      'nginx-gzip': { url: `${nginx.url}/${ASSET}`, headers: { Host: HOST, 'Accept-Encoding': 'br, gzip' }, encoding: 'gzip', decode: gunzipSync },
      'platform-gzip': { url: `${platform.url}/${ASSET}`, headers: { Host: HOST, 'Accept-Encoding': 'gzip' }, encoding: 'gzip', decode: gunzipSync },
      'node-bare-gzip': { url: `${bare.url}/${ASSET}`, headers: { Host: HOST, 'Accept-Encoding': 'gzip' }, encoding: 'gzip', decode: gunzipSync },
    };
    sizes = {} as NonNullable<typeof sizes>;
    for (const [name, t] of Object.entries(targets) as [Target, (typeof targets)[Target]][]) {
      const a = await request(t.url, { headers: t.headers });
      const length = Number(a.headers['content-length']);
      const valid = a.status === 200 && a.headers['content-encoding'] === t.encoding && length === a.body.length && t.decode(a.body).equals(asset);
      if (!valid) throw new Error(`${name}: ${a.status}, encoding ${a.headers['content-encoding']}, length ${length} (${a.body.length} read): not the asset`);
      sizes[name] = { encoding: t.encoding, bytes: length };
      log(`${name}: 200, ${t.encoding}, ${length} B (decoded: the asset)`);
    }
    const order = Object.keys(targets) as Target[];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const name of round % 2 ? order : [...order].reverse()) {
        const t = targets[name];
        await wrk(t.url, t.headers, 5); // warm-up
        const pid = name === 'nginx-gzip' ? nginx.worker : name === 'node-bare-gzip' ? bare.pid : platform.pid;
        const cpu0 = cpuSeconds(pid);
        const result = await wrk(t.url, t.headers, DURATION);
        const cpu1 = cpuSeconds(pid);
        const cpuUsPerRequest = cpu0 === null || cpu1 === null ? null : Math.round(((cpu1 - cpu0) * 1e6) / result.requests);
        if (result.non2xx || result.socketErrors) problems.push(`${name} round ${round}: ${result.non2xx} non-2xx answers, ${result.socketErrors} socket errors`);
        throughput.push({ target: name, round, result, cpuUsPerRequest });
        log(`${name} (round ${round}): ${result.requestsPerSec.toLocaleString('en')} req/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, ${result.bytesPerResponse} B/answer, server CPU ${cpuUsPerRequest} µs/request`);
      }
    }
    for (const c of [nginx, bare]) {
      await c.stop();
      children.splice(children.indexOf(c), 1);
    }
  }
  const rps = (t: Target) => Math.round(median(throughput.filter((x) => x.target === t).map((x) => x.result.requestsPerSec)));
  const throughputSummary = throughput.length
    ? {
        platformBr: rps('platform-br'),
        nginxGzip: rps('nginx-gzip'),
        platformGzip: rps('platform-gzip'),
        nodeBareGzip: rps('node-bare-gzip'),
        ratioBr: r2(rps('platform-br') / rps('nginx-gzip')),
        ratioGzip: r2(rps('platform-gzip') / rps('nginx-gzip')),
        ratioBare: r2(rps('node-bare-gzip') / rps('nginx-gzip')),
      }
    : null;

  // ---- 2. deploys --------------------------------------------------------------------------
  const deploys: { run: number; site: string; seconds: number; cpuSeconds: number | null; storedFiles: number; secondSeconds: number; secondCpuSeconds: number | null; secondStoredFiles: number; manifestSeconds: number; manifestStoredFiles: number; manifestSent: number }[] = [];
  /** The platform's CPU seconds during `fn`. */
  const cpuOf = async <T>(fn: () => Promise<T>): Promise<[T, number | null]> => {
    const c0 = cpuSeconds(platform.pid);
    const out = await fn();
    const c1 = cpuSeconds(platform.pid);
    return [out, c0 === null || c1 === null ? null : r2(c1 - c0)];
  };
  let bigInfo: Record<string, unknown> | undefined;
  if (ONLY.has('deploy')) {
    const t0 = performance.now();
    const site = writeBigSite(dirs.big);
    const archive = path.join(tmp, 'site.tar.gz');
    await tarGz(dirs.big, archive, site.paths);
    // The second builds: CHANGED text files rewritten (variant k), the originals restored afterwards.
    const changed = site.texts.filter((_, i) => i % 1000 === 1).slice(0, CHANGED);
    const originals = changed.map((p) => fs.readFileSync(path.join(dirs.big, p)));
    const variants: string[] = [];
    for (let k = 1; k <= DEPLOYS; k++) {
      changed.forEach((p, i) => fs.writeFileSync(path.join(dirs.big, p), Buffer.concat([originals[i]!, Buffer.from(`\n<!-- change ${k} -->\n`)])));
      variants.push(path.join(tmp, `site-v${k}.tar.gz`));
      await tarGz(dirs.big, variants[k - 1]!, site.paths);
    }
    changed.forEach((p, i) => fs.writeFileSync(path.join(dirs.big, p), originals[i]!));
    const textBytes = site.texts.reduce((s, p) => s + fs.statSync(path.join(dirs.big, p)).size, 0);
    const sample = Buffer.concat(site.texts.slice(0, 400).map((p) => fs.readFileSync(path.join(dirs.big, p))));
    bigInfo = {
      files: site.paths.length,
      textFiles: site.texts.length,
      binaryFiles: site.paths.length - site.texts.length,
      megabytes: r2(site.bytes / 1e6),
      textMegabytes: r2(textBytes / 1e6),
      archiveMegabytes: r2(fs.statSync(archive).size / 1e6),
      textGzipRatio: r2(sample.length / gzipSync(sample, { level: 6 }).length),
      changedFiles: changed,
    };
    log(`archive: ${JSON.stringify(bigInfo)} (made in ${r2((performance.now() - t0) / 1000)} s)`);
    /** The build just activated answers `file` with `marker` within a second (routing follows a NOTIFY at commit). */
    const servesChange = async (host: string, file: string, marker: string, what: string) => {
      const t0 = performance.now();
      for (;;) {
        const page = await request(`${platform.url}/${file}`, { headers: { host } });
        if (page.status === 200 && page.body.toString().includes(marker)) return;
        if (performance.now() - t0 > 1000) return void problems.push(`${what}: ${file} does not serve the change (${page.status})`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    for (let k = 1; k <= DEPLOYS; k++) {
      const s = await makeSite(`Deploy Bench ${k}`);
      const [made, cpu] = await cpuOf(() => upload(s.workers, s.token, { name: `Big ${k}`, subdomain_input: `big-${k}`, set_active: 'true' }, archive));
      const data = json(made).data;
      if (made.status !== 201) throw new Error(`deploy ${k}: ${made.status} ${made.body.toString().slice(0, 500)}`);
      const [again, secondCpu] = await cpuOf(() => upload(`${s.workers}big-${k}/builds/`, s.token, { set_active: 'true' }, variants[k - 1]!));
      if (again.status !== 201) throw new Error(`second build ${k}: ${again.status} ${again.body.toString().slice(0, 500)}`);
      const next = json(again).data;
      await servesChange(`big-${k}.localhost`, changed[0]!, `<!-- change ${k} -->`, `second build ${k}`);
      // The same kind of change deployed as `platform worker deploy DIR` does for an existing worker
      // (the wall time of all of it): every file hashed here, POST …/builds/missing/, a .tar.gz of
      // the files the site lacks, the upload with the manifest.
      changed.forEach((p, i) => fs.writeFileSync(path.join(dirs.big, p), Buffer.concat([originals[i]!, Buffer.from(`\n<!-- manifest ${k} -->\n`)])));
      const m0 = performance.now();
      const manifest = Object.fromEntries(site.paths.map((p) => [p, createHash('sha256').update(fs.readFileSync(path.join(dirs.big, p))).digest('hex')]));
      const asked = ok(await api(`${s.workers}big-${k}/builds/missing/`, 'POST', { token: s.token, body: { hashes: [...new Set(Object.values(manifest))] } }), 200, 'missing');
      const lacking = new Set(asked.missing as string[]);
      const send = site.paths.filter((p) => lacking.has(manifest[p]!));
      const changes = path.join(tmp, `changes-${k}.tar.gz`);
      await tarGz(dirs.big, changes, send);
      const byManifest = await upload(`${s.workers}big-${k}/builds/`, s.token, { set_active: 'true', manifest: JSON.stringify(manifest) }, changes);
      const manifestSeconds = r2((performance.now() - m0) / 1000);
      changed.forEach((p, i) => fs.writeFileSync(path.join(dirs.big, p), originals[i]!));
      if (byManifest.status !== 201) throw new Error(`build by manifest ${k}: ${byManifest.status} ${byManifest.body.toString().slice(0, 500)}`);
      const third = json(byManifest).data;
      const d = { run: k, site: s.schema, seconds: r2(made.ms / 1000), cpuSeconds: cpu, storedFiles: data.build.stored_files as number, secondSeconds: r2(again.ms / 1000), secondCpuSeconds: secondCpu, secondStoredFiles: next.stored_files as number, manifestSeconds, manifestStoredFiles: third.stored_files as number, manifestSent: send.length };
      if (d.manifestStoredFiles !== CHANGED || third.file_count !== site.paths.length) problems.push(`build by manifest ${k}: stored_files ${d.manifestStoredFiles}, file_count ${third.file_count}`);
      if (d.storedFiles !== site.paths.length || data.build.file_count !== site.paths.length) problems.push(`deploy ${k}: stored_files ${d.storedFiles}, file_count ${data.build.file_count}, expected ${site.paths.length}`);
      if (d.secondStoredFiles !== CHANGED) problems.push(`second build ${k}: stored_files ${d.secondStoredFiles}, expected ${CHANGED}`);
      await servesChange(`big-${k}.localhost`, changed[0]!, `<!-- manifest ${k} -->`, `build by manifest ${k}`);
      deploys.push(d);
      log(`deploy ${k}: ${d.seconds} s, platform CPU ${d.cpuSeconds} s (stored ${d.storedFiles}); second build ${d.secondSeconds} s, CPU ${d.secondCpuSeconds} s (stored ${d.secondStoredFiles}); by manifest ${d.manifestSeconds} s (sent ${d.manifestSent}, stored ${d.manifestStoredFiles})`);
    }
  }
  const deploySummary = deploys.length
    ? { firstMedianSeconds: r2(median(deploys.map((d) => d.seconds))), secondMedianSeconds: r2(median(deploys.map((d) => d.secondSeconds))), manifestMedianSeconds: r2(median(deploys.map((d) => d.manifestSeconds))) }
    : null;

  // ---- 3. activation -----------------------------------------------------------------------
  const activations: { ms: number; visibleMs: number; polls: number }[] = [];
  if (ONLY.has('activation')) {
    const activate = (uuid: string) => request(`${shopSite.workers}shop/builds/${uuid}/activate/`, { method: 'POST', headers: { authorization: `Bearer ${shopSite.token}` } });
    const builds = [buildB, buildA];
    for (let i = 0; i < ACTIVATIONS + 4; i++) {
      const uuid = builds[i % 2]!;
      const marker = `data-build="${uuid === buildA ? 'A' : 'B'}"`;
      const a = await activate(uuid);
      if (a.status !== 200 || json(a).data?.active_build_uuid !== uuid) throw new Error(`activate ${uuid}: ${a.status} ${a.body.toString().slice(0, 300)}`);
      const t0 = performance.now();
      let polls = 0;
      for (;;) {
        polls++;
        const page = await visit('/');
        if (page.status === 200 && page.body.toString().includes(marker)) break;
        if (performance.now() - t0 > 5000) {
          problems.push(`activation ${i}: the new build not visible after 5 s`);
          break;
        }
      }
      if (i >= 4) activations.push({ ms: r2(a.ms), visibleMs: r2(performance.now() - t0), polls });
    }
  }
  const activationSummary = activations.length
    ? {
        count: activations.length,
        p50Ms: r2(percentile(activations.map((a) => a.ms), 50)),
        p95Ms: r2(percentile(activations.map((a) => a.ms), 95)),
        visibleP50Ms: r2(percentile(activations.map((a) => a.visibleMs), 50)),
        visibleP95Ms: r2(percentile(activations.map((a) => a.visibleMs), 95)),
        visibleMaxMs: r2(Math.max(...activations.map((a) => a.visibleMs))),
        pollsMax: Math.max(...activations.map((a) => a.polls)),
      }
    : null;

  // ---- report ------------------------------------------------------------------------------
  const targets: Record<string, { description: string; value: number; limit: number; ok: boolean }> = {};
  if (throughputSummary) targets.throughputRatio = { description: `platform (br) ÷ nginx (gzip) req/s ≥ ${TARGETS.ratio}`, value: throughputSummary.ratioBr, limit: TARGETS.ratio, ok: throughputSummary.ratioBr >= TARGETS.ratio };
  if (deploySummary) {
    const share = r2(deploySummary.secondMedianSeconds / deploySummary.firstMedianSeconds);
    targets.firstDeploy = { description: `first deploy of 5,000 files median < ${TARGETS.deploySeconds} s`, value: deploySummary.firstMedianSeconds, limit: TARGETS.deploySeconds, ok: deploySummary.firstMedianSeconds < TARGETS.deploySeconds };
    targets.secondBuild = { description: `second build (3 changed, the whole archive) < ${TARGETS.secondShare * 100} % of the first`, value: share, limit: TARGETS.secondShare, ok: share < TARGETS.secondShare };
    const byManifest = r2(deploySummary.manifestMedianSeconds / deploySummary.firstMedianSeconds);
    targets.secondByManifest = { description: `second build (3 changed, by manifest as the CLI deploys) < ${TARGETS.secondShare * 100} % of the first`, value: byManifest, limit: TARGETS.secondShare, ok: byManifest < TARGETS.secondShare };
  }
  if (activationSummary) targets.activationP50 = { description: `activation p50 < ${TARGETS.activationP50Ms} ms`, value: activationSummary.p50Ms, limit: TARGETS.activationP50Ms, ok: activationSummary.p50Ms < TARGETS.activationP50Ms };
  const report = {
    timestamp,
    command,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    database: { source: db.source, version: db.version },
    settings: { rounds: ROUNDS, deploys: DEPLOYS, activations: ACTIVATIONS, wrk: `-t2 -c50 -d${DURATION}s (5 s warm-up)`, logLevel: 'warn', storage: 'filesystem', port, nginx: 'worker_processes 1, gzip_static on, sendfile on, access_log off, keepalive_requests 100000' },
    throughput: { asset: { path: ASSET, bytes: asset.length, answers: sizes }, runs: throughput, summary: throughputSummary },
    deploy: { archive: bigInfo, runs: deploys, summary: deploySummary },
    activation: { runs: activations, summary: activationSummary },
    targets,
    valid: problems.length === 0,
    problems,
  };
  const lines: string[] = [];
  if (throughputSummary && sizes) {
    lines.push('| static 10 KiB .js, wrk -t2 -c50 | encoding (bytes) | req/s (median) | per round | p50 ms | p99 ms | server CPU µs/req |', '|---|---|--:|---|--:|--:|--:|');
    for (const t of ['platform-br', 'nginx-gzip', 'platform-gzip', 'node-bare-gzip'] as Target[]) {
      const runs = throughput.filter((x) => x.target === t);
      const mine = runs.map((x) => x.result);
      const cpu = runs.every((x) => x.cpuUsPerRequest !== null) ? Math.round(median(runs.map((x) => x.cpuUsPerRequest!))) : '–';
      lines.push(`| ${t} | ${sizes[t].encoding} (${sizes[t].bytes}) | ${rps(t).toLocaleString('en')} | ${mine.map((m) => m.requestsPerSec).join(' / ')} | ${r2(median(mine.map((m) => m.p50Ms)))} | ${r2(median(mine.map((m) => m.p99Ms)))} | ${cpu} |`);
    }
    lines.push('', `platform ÷ nginx: ${throughputSummary.ratioBr} (br vs gzip), ${throughputSummary.ratioGzip} (gzip vs gzip); bare Node ÷ nginx: ${throughputSummary.ratioBare}`, '');
  }
  if (deploySummary) {
    lines.push('| deploy (5,000 files) | runs (s) | median s | platform CPU s | stored_files |', '|---|---|--:|---|---|');
    lines.push(`| first (create, set_active) | ${deploys.map((d) => d.seconds).join(' / ')} | ${deploySummary.firstMedianSeconds} | ${deploys.map((d) => d.cpuSeconds).join(' / ')} | ${deploys.map((d) => d.storedFiles).join(' / ')} |`);
    lines.push(`| second (${CHANGED} changed, the whole archive) | ${deploys.map((d) => d.secondSeconds).join(' / ')} | ${deploySummary.secondMedianSeconds} | ${deploys.map((d) => d.secondCpuSeconds).join(' / ')} | ${deploys.map((d) => d.secondStoredFiles).join(' / ')} |`);
    lines.push(`| second (${CHANGED} changed, by manifest: hashing, missing/, upload) | ${deploys.map((d) => d.manifestSeconds).join(' / ')} | ${deploySummary.manifestMedianSeconds} | – | ${deploys.map((d) => d.manifestStoredFiles).join(' / ')} |`, '');
  }
  if (activationSummary) lines.push(`activation (${activationSummary.count}): p50 ${activationSummary.p50Ms} ms, p95 ${activationSummary.p95Ms} ms; time to visible p50 ${activationSummary.visibleP50Ms} ms, p95 ${activationSummary.visibleP95Ms} ms, max ${activationSummary.visibleMaxMs} ms (${activationSummary.pollsMax} polls at most)`, '');
  for (const t of Object.values(targets)) lines.push(`${t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value}`);
  for (const p of problems) lines.push(`INVALID  ${p}`);
  lines.push(`load average: ${(machine.loadAverageAtStart as number[]).join(' ')} at start, ${report.machine.loadAverageAtEnd.join(' ')} at end`);
  console.log(`\n${lines.join('\n')}\n`);
  writeResults('workers', report, timestamp, log);
  return report.valid ? 0 : 1;
}

await runBench(main, cleanup, log);
