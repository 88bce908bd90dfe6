// `npm run bench:realtime`: the realtime feature (issue 35, docs/realtime.md) — what the change
// log costs the writes, how many idle change streams one server process holds and what each costs
// it, and how fast a change reaches its subscribers through a conditional read policy.
//
// Setup (not measured). As bench/hotpath.ts (bench/records-setup.ts): a fresh database
// (bench/database.ts), ONE platform child (bench/server.ts, PGAPPNAME=bench-platform), over its
// HTTP API a site, its superuser's token, an app, a flat_table data source and the table `people`,
// materialized (tenant migration 16 attaches the change log: the statement-level triggers
// record_changes_insert, _update and _delete write every change into the site's `record_changes`);
// BENCH_ROWS rows by one INSERT … SELECT generate_series (the log off meanwhile), VACUUM ANALYZE.
// The child gets REALTIME_MAX_PER_SITE (and REALTIME_MAX_SUBSCRIBERS if need be) above the streams
// the bench opens, and NODE_OPTIONS=--inspect on a free loopback port: the bench asks the child's
// inspector for a full garbage collection before each memory reading (nothing else uses it).
//
// Scenarios (BENCH_ONLY=writes,idle,fanout):
//   writes  The cost of the change log on writes: the same server and table with the log ON and
//           OFF (`ALTER TABLE … DISABLE TRIGGER record_changes_insert, … _update, … _delete`, ENABLE
//           again), switched by the bench's own connection right before each run (never timed).
//           Checked first: a create logs one change with the log on, none with it off.
//           - create one record (POST …/data/, a fresh id each request) at 1 connection (p50) and
//             at BENCH_CONNECTIONS (req/s): load.ts `compare`, ON and OFF in alternating rounds
//             (ON OFF | OFF ON | …) after a warm-up of each;
//           - bulk create of BENCH_BULK (10,000) records in one POST, BENCH_BULK_REPEAT times per
//             side alternating (after one discarded warm-up each), p50 ms; every answer must be 201
//             with the rows stored, and the log must hold BENCH_BULK changes of them when on, none
//             when off. The GIN index's pending list is merged before each (as bench:hotpath).
//           CPU per request: the server process and its PostgreSQL backends (as bench:hotpath).
//           Ratio as `npm run bench` reads it, higher is better, 1.00 = the log costs nothing:
//           OFF ÷ ON for a time, ON ÷ OFF for a rate; "added" = the log's share on top of a write
//           without it (ON ÷ OFF − 1 in time per request).
//   idle    Idle streams held by one process: BENCH_SUBSCRIBERS (10,000) change streams (plain
//           node:http GETs of …/data/changes/, `agent: false`, each reading and discarding what
//           comes), BENCH_OPEN_CONCURRENCY (100) being opened at a time, over BENCH_TOKENS (5)
//           tokens of the site's superuser. Each must answer 200 and send its first `retry:` line.
//           The child's VmRSS (/proc/<pid>/status) and open files, after a full GC and
//           BENCH_SETTLE (5 s), before the streams and with them all open → KiB per stream; its
//           CPU (and its backends') over BENCH_IDLE_CPU (10 s) with and without them (credentials are
//           checked every 15 s and when they may have changed, a heartbeat goes every 15 s); every stream
//           must still be open at the end, none sent `end`. Then all are closed.
//   fanout  Fan-out through a conditional read policy: the policy of `datatable:people` lets role
//           `user` read the records of its city only (`R.attr.city == P.attr.city`); 10 site users
//           (POST /api/users/), one per city of records-setup.ts (its `attributes`), signed in;
//           BENCH_FANOUT_SUBSCRIBERS (1,000) streams, stream i as user i mod 10. One writer (the
//           superuser) creates BENCH_FANOUT_RATE (100) records a second for BENCH_FANOUT_DURATION
//           (10) s after BENCH_WARMUP (2) s of the same, one POST each on a fixed schedule (open
//           loop), the cities in turn. Latency of each event of the measured writes: the client's
//           receive time (Date.now() when its chunk arrives) minus the event's `at`
//           (clock_timestamp() of the change in PostgreSQL, just before its commit; same machine,
//           ms precision both) → p50, p90, p99, max, and p99 second by second (a stall shows).
//           Correctness, the warm-up's writes included: each stream must get exactly the creates
//           of its user's city, once each (delivered = expected, no stream off). The server's,
//           PostgreSQL's and the bench's own CPU over the measured writes (all on the same cores).
// A CHECKPOINT before each scenario (when the role may), so that none flushes the last one's writes.
//
// Targets (BENCH_STRICT=1: exit 1 when one is missed; issue 35): the log adds ≤ 10 % to a single
// write (ratio ≥ 0.91x at 1 connection and at BENCH_CONNECTIONS) and ≤ 20 % to a bulk create
// (≥ 0.83x); ≥ 10,000 idle streams held by one process; fan-out p99 < 100 ms, every event
// delivered exactly once. Bad answers, streams refused or dropped, and events missing or extra
// make the run invalid (exit 1).
// Output: a table on stdout, the command that reproduces the run, bench/results/
// realtime-latest.json (with the commit, and the realtime files changed in the working tree) and a
// timestamped copy.
//
// Environment: BENCH_DATABASE_URL | TEST_DATABASE_URL (else an embedded PostgreSQL), BENCH_ONLY,
// BENCH_ROWS (100000), BENCH_DURATION (10 s per side and load, over BENCH_ROUNDS = 2 rounds),
// BENCH_WARMUP (2), BENCH_CONNECTIONS (50), BENCH_SEQ_DURATION (the 1-connection runs; default
// BENCH_DURATION), BENCH_BULK (10000), BENCH_BULK_REPEAT (10), BENCH_SUBSCRIBERS (10000),
// BENCH_TOKENS (5), BENCH_OPEN_CONCURRENCY (100), BENCH_SETTLE (5), BENCH_IDLE_CPU (10),
// BENCH_FANOUT_SUBSCRIBERS (1000), BENCH_FANOUT_RATE (100), BENCH_FANOUT_DURATION (10),
// BENCH_CPU_PROF=<dir> (a V8 CPU profile of the server), BENCH_STRICT=1. Each side of a
// connection is a file descriptor (the bench's and the server's are separate processes):
// BENCH_SUBSCRIBERS needs `ulimit -n` above it (and as many free local ports).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { compare, cpuMeter, type CpuUsage, type LoadSettings, type Measurement, type Request, type Target, settingsFromEnv } from './load.ts';
import { APP, CITIES, TABLE, api, envNumber, makeRecords, ok, r2, seedRows, serverEnv, setupTable, siteToken } from './records-setup.ts';
import { machineInfo, reproduceCommand, totalCpuUs, writeResults } from './report.ts';
import { freePort } from '../shared/db/embedded.ts';

const settings: LoadSettings = settingsFromEnv();
const SEQ_DURATION = envNumber('BENCH_SEQ_DURATION', settings.durationSec);
const ROWS = Math.max(100, Math.round(envNumber('BENCH_ROWS', 100_000)));
const BULK = Math.max(1, Math.round(envNumber('BENCH_BULK', 10_000)));
const BULK_REPEAT = Math.max(1, Math.round(envNumber('BENCH_BULK_REPEAT', 10)));
const SUBSCRIBERS = Math.max(1, Math.round(envNumber('BENCH_SUBSCRIBERS', 10_000)));
const TOKENS = Math.max(1, Math.round(envNumber('BENCH_TOKENS', 5)));
const OPEN_CONCURRENCY = Math.max(1, Math.round(envNumber('BENCH_OPEN_CONCURRENCY', 100)));
const SETTLE_MS = envNumber('BENCH_SETTLE', 5) * 1000;
const IDLE_CPU_MS = Math.max(1, envNumber('BENCH_IDLE_CPU', 10)) * 1000;
const FANOUT_SUBSCRIBERS = Math.max(CITIES.length, Math.round(envNumber('BENCH_FANOUT_SUBSCRIBERS', 1000)));
const FANOUT_RATE = Math.max(1, envNumber('BENCH_FANOUT_RATE', 100));
const FANOUT_DURATION = Math.max(1, envNumber('BENCH_FANOUT_DURATION', 10));
/** How long the fan-out waits after its last write for events still under way. */
const DRAIN_MS = 15_000;
const SCENARIOS = ['writes', 'idle', 'fanout'] as const;
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const unknown = ONLY?.filter((s) => !(SCENARIOS as readonly string[]).includes(s));
if (unknown?.length) throw new Error(`BENCH_ONLY: unknown scenario ${unknown.join(', ')} (${SCENARIOS.join(', ')})`);
const wanted = (id: (typeof SCENARIOS)[number]) => !ONLY || ONLY.includes(id);
const SECRET = randomBytes(32).toString('base64url');
const APP_NAME = 'bench-platform';
const TRIGGERS = ['record_changes_insert', 'record_changes_update', 'record_changes_delete'];
/** Ids of the records each scenario creates: far above the seeded rows and apart from each other. */
const CREATE_BASE = 90_000_000;
const FANOUT_BASE = 80_000_000;
const log = (msg: string) => process.stderr.write(`[bench:realtime] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ratio = (x: number | null | undefined, y: number | null | undefined) => (x && y ? r2(x / y) : null);
/** The log's share on top of a write without it, in % (from a ratio as above: 1 ÷ ratio − 1). */
const addedPct = (r: number | null) => (r ? Math.round((1 / r - 1) * 1000) / 10 : null);

// Targets (issue 35).
const MIN_SINGLE = 0.91; // OFF ÷ ON time (1 conn) and ON ÷ OFF req/s (BENCH_CONNECTIONS): ≤ 10 % added
const MIN_BULK = 0.83; // OFF ÷ ON ms of a bulk create: ≤ 20 % added
const MIN_HELD = 10_000; // idle streams one process holds
const MAX_FANOUT_P99_MS = 100;

let db: BenchDatabase | undefined;
let monitor: pg.Client | undefined;
const children: Child[] = [];
const streams = new Set<Stream>();
let cleaning: Promise<void> | undefined;
/** Closes the streams, stops the child (by PID), drops the database. */
const cleanup = () =>
  (cleaning ??= (async () => {
    for (const s of streams) s.close();
    await monitor?.end().catch(() => undefined);
    await Promise.allSettled(children.map((c) => c.stop()));
    await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  })());

/** The commit measured, and the files of the realtime feature changed in the working tree (the run measures the tree). */
function treeState(): { commit: string | null; realtimeChanged: string[] } {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: path.resolve(import.meta.dirname, '..'), encoding: 'utf8' }).trim();
  try {
    const changed = git('status', '--porcelain', '--', 'shared/realtime', 'server/routes/realtime.routes.ts', 'shared/tenancy/migrations.ts', 'shared/db/changes.ts');
    return { commit: git('rev-parse', '--short', 'HEAD'), realtimeChanged: changed ? changed.split('\n').map((l) => l.slice(3)) : [] };
  } catch {
    return { commit: null, realtimeChanged: [] };
  }
}

// ---------------------------------------------------------------------------------------------
// The child process: memory, open files, a full GC through its inspector.

/** The VmRSS of a process, in KiB. */
function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]);
}

const openFiles = (pid: number) => fs.readdirSync(`/proc/${pid}/fd`).length;

/**
 * A full garbage collection in the child (its inspector: HeapProfiler.collectGarbage), then its
 * V8 heap as process.memoryUsage() tells it. One short inspector session per call.
 */
async function collectGarbage(inspectPort: number): Promise<{ heapUsedKiB: number; externalKiB: number }> {
  const [target] = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
  const ws = new WebSocket(target!.webSocketDebuggerUrl);
  const pending = new Map<number, (result: any) => void>();
  let next = 0;
  ws.addEventListener('message', (e) => {
    const msg = JSON.parse(String(e.data)) as { id?: number; result?: unknown };
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true });
    ws.addEventListener('error', () => reject(new Error(`the child's inspector on port ${inspectPort} refused the session`)), { once: true });
  });
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<any>((resolve, reject) => {
      const id = ++next;
      const timer = setTimeout(() => reject(new Error(`inspector ${method}: no answer`)), 30_000);
      pending.set(id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage'); // a second pass: what the first one's finalizers freed
    const { result } = await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
    const mem = JSON.parse(result.value as string) as NodeJS.MemoryUsage;
    return { heapUsedKiB: Math.round(mem.heapUsed / 1024), externalKiB: Math.round(mem.external / 1024) };
  } finally {
    ws.close();
  }
}

// ---------------------------------------------------------------------------------------------
// A change stream client: one node:http GET of its own (`agent: false`), as the test's.

interface ChangeEvent {
  id: string;
  event: string;
  data: { op: string; key: unknown; at: string; record?: Record<string, unknown> };
}

class Stream {
  status = 0;
  /** Its first `retry:` line came. */
  opened = false;
  ended = false;
  /** The reason of an `end` event, if one came. */
  endReason: string | undefined;
  /** The start of the answer when it was not a 200. */
  error = '';
  private readonly req: http.ClientRequest;
  private buffer = '';

  /**
   * `settled`: called once the stream is open (its `retry:` line), refused or failed (and again when
   * it ends). `onEvent`: each event parsed, with the time its chunk arrived; without it, what comes
   * is discarded (but `end`).
   */
  constructor(url: string, token: string, settled: () => void, onEvent?: (e: ChangeEvent, receivedAt: number) => void) {
    streams.add(this);
    const done = () => {
      if (this.ended) return;
      this.ended = true;
      settled();
    };
    this.req = http.request(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, agent: false }, (res) => {
      this.status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const receivedAt = Date.now();
        if (this.status !== 200) {
          this.error += chunk;
          return;
        }
        if (!this.opened && chunk.includes('retry:')) {
          this.opened = true;
          settled();
        }
        if (!onEvent) {
          if (chunk.includes('event: end')) this.endReason = /"reason":"(\w+)"/.exec(chunk)?.[1] ?? 'end';
          return;
        }
        this.buffer += chunk;
        let cut;
        while ((cut = this.buffer.indexOf('\n\n')) >= 0) {
          const block = this.buffer.slice(0, cut);
          this.buffer = this.buffer.slice(cut + 2);
          const e: Partial<ChangeEvent> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) e.id = line.slice(4);
            else if (line.startsWith('event: ')) e.event = line.slice(7);
            else if (line.startsWith('data: ')) e.data = JSON.parse(line.slice(6));
          }
          if (e.event === 'end') this.endReason = (e.data as unknown as { reason: string }).reason;
          else if (e.event) onEvent(e as ChangeEvent, receivedAt);
        }
      });
      res.on('end', done);
      res.on('close', done);
    });
    this.req.on('error', (err) => {
      this.error ||= err.message;
      done();
    });
    this.req.end();
  }

  close(): void {
    streams.delete(this);
    this.req.destroy();
  }
}

/**
 * `n` streams of `url`, `OPEN_CONCURRENCY` being opened at a time (each until its `retry:` line,
 * its refusal or its failure), the tokens in turn. Resolves with them all and the seconds taken.
 */
async function openStreams(url: string, tokens: string[], n: number, onEvent?: (i: number) => (e: ChangeEvent, receivedAt: number) => void): Promise<{ all: Stream[]; seconds: number }> {
  const all: Stream[] = [];
  const t0 = performance.now();
  let started = 0;
  const lane = async () => {
    while (started < n) {
      const i = started++;
      await new Promise<void>((resolve) => {
        let settled = false;
        const timer = setTimeout(() => finish(), 30_000);
        const finish = () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve();
        };
        all[i] = new Stream(url, tokens[i % tokens.length]!, finish, onEvent?.(i));
      });
      if (i > 0 && i % 1000 === 0) log(`  ${i.toLocaleString('en')} streams opened…`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, n) }, lane));
  return { all, seconds: r2((performance.now() - t0) / 1000) };
}

/** What went wrong with streams: refused (status), failed, not opened, ended. */
function streamProblems(what: string, all: Stream[]): string[] {
  const out: string[] = [];
  const refused = all.filter((s) => s.status !== 200);
  if (refused.length) out.push(`${what}: ${refused.length} of ${all.length} streams refused or failed (first: ${refused[0]!.status} ${refused[0]!.error.slice(0, 200)})`);
  const silent = all.filter((s) => s.status === 200 && !s.opened);
  if (silent.length) out.push(`${what}: ${silent.length} streams answered 200 without their retry: line`);
  const ended = all.filter((s) => s.status === 200 && (s.ended || s.endReason));
  if (ended.length) out.push(`${what}: ${ended.length} streams ended early (first: ${ended[0]!.endReason ?? 'connection closed'})`);
  return out;
}

const percentile = (sorted: ArrayLike<number>, q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]! : NaN);

// ---------------------------------------------------------------------------------------------
// The scenarios.

interface Ctx {
  platform: Child;
  inspectPort: number;
  site: string;
  /** `"schema"."physical"` */
  table: string;
  physical: string;
  prefix: string;
  mon: pg.Client;
  backends: () => Promise<number[]>;
  problems: string[];
}

interface LoadResult {
  title: string;
  on: Measurement;
  off: Measurement;
  /** OFF ÷ ON p50 (1 conn) or ON ÷ OFF req/s (BENCH_CONNECTIONS): higher is better, 1 = no cost. */
  ratio: number | null;
  addedPct: number | null;
  /** ON ÷ OFF CPU per request, server + PostgreSQL backends. */
  cpuRatio: number | null;
  /** ON ÷ OFF req/s per round (at 1 connection, about the inverse of the p50s' ratio). */
  roundRatios: number[];
}

interface BulkSample {
  log: 'on' | 'off';
  firstId: number;
  status: number;
  ms: number;
  cpu: CpuUsage;
  logged: number;
  error?: string;
}

async function writes(c: Ctx) {
  const { mon, table, physical, prefix, platform } = c;
  const found = (await mon.query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname`, [table])).rows.map((r) => r.tgname);
  for (const t of TRIGGERS) assert.ok(found.includes(t), `trigger ${t} missing on ${table} (found: ${found.join(', ') || 'none'})`);
  let state: 'on' | 'off' = 'on';
  let switches = 0;
  const setLog = async (to: 'on' | 'off') => {
    if (to === state) return;
    const verb = to === 'on' ? 'ENABLE' : 'DISABLE';
    await mon.query(`ALTER TABLE ${table} ${TRIGGERS.map((t) => `${verb} TRIGGER ${t}`).join(', ')}`);
    state = to;
    switches++;
  };
  const logged = async (from: number, to: number) =>
    (await mon.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${c.site}".record_changes c, json_array_elements(c.record) e WHERE c.tbl = $1 AND (e->>'id')::bigint BETWEEN $2 AND $3`, [physical, from, to])).rows[0]!.n;
  const stored = async (from: number, to: number) => (await mon.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE id BETWEEN $1 AND $2`, [from, to])).rows[0]!.n;

  // The switch works: a create is logged with the log on, not with it off.
  let nextCreate = CREATE_BASE;
  let token = await siteToken(platform.url, c.site);
  for (const to of ['off', 'on'] as const) {
    await setLog(to);
    const id = ++nextCreate;
    ok(await api(platform.url + prefix, 'POST', { token, body: makeRecords(id, 1)[0] }), 201, `create with the log ${to}`);
    assert.equal(await logged(id, id), to === 'on' ? 1 : 0, `a create with the log ${to}: ${to === 'on' ? 'one change' : 'no change'} logged`);
  }
  log('checked: a create is logged with the log on and not with it off');

  // ON as compare's first side ("platform"), OFF as its second: rounds ON OFF | OFF ON | …; each side
  // switches the log right before its run starts (load.ts asks for the backends to meter then).
  const side = (to: 'on' | 'off'): Target => ({
    url: platform.url,
    pid: platform.pid,
    backendPids: async () => {
      await setLog(to);
      return c.backends();
    },
  });
  const loads: LoadResult[] = [];
  for (const connections of [1, settings.connections]) {
    token = await siteToken(platform.url, c.site); // access tokens live 15 minutes
    const request: Request = { method: 'POST', path: prefix, headers: { authorization: `Bearer ${token}` }, nextBody: () => JSON.stringify(makeRecords(++nextCreate, 1)[0]) };
    const title = `create one record (${connections} conn)`;
    log(`${title}, log on vs off…`);
    const durationSec = connections === 1 ? SEQ_DURATION : settings.durationSec;
    const r = await compare(side('on'), side('off'), request, { ...settings, connections, durationSec });
    const [on, off] = [r.platform, r.baseline];
    for (const [who, m] of [['on', on], ['off', off]] as const) {
      if (m.non2xx || m.errors || m.timeouts) c.problems.push(`${title} with the log ${who}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts`);
      if (m.dbCpuUsPerRequest !== null && !m.dbBackends) c.problems.push(`${title} with the log ${who}: no PostgreSQL backend with application_name ${APP_NAME}`);
    }
    const rt = connections === 1 ? ratio(off.p50Ms, on.p50Ms) : ratio(on.requestsPerSec, off.requestsPerSec);
    // compare's round ratios are OFF req/s ÷ ON req/s: the inverse of a rate ratio.
    loads.push({ title, on, off, ratio: rt, addedPct: addedPct(rt), cpuRatio: ratio(totalCpuUs(on), totalCpuUs(off)), roundRatios: r.roundRatios.map((x) => r2(1 / x)) });
  }

  // Bulk: one POST of BULK records, ON and OFF alternating (ON OFF | OFF ON | …).
  token = await siteToken(platform.url, c.site);
  const target: Target = { url: platform.url, pid: platform.pid, backendPids: c.backends };
  const mergePending = () =>
    mon.query(
      `SELECT gin_clean_pending_list(i.indexrelid) FROM pg_index i JOIN pg_class k ON k.oid = i.indexrelid JOIN pg_am a ON a.oid = k.relam WHERE i.indrelid = $1::regclass AND a.amname = 'gin'`,
      [table],
    );
  let nextBulk = ROWS + 1;
  const once = async (to: 'on' | 'off'): Promise<BulkSample> => {
    await setLog(to);
    await mergePending();
    const firstId = nextBulk;
    nextBulk += BULK; // fresh ids whatever happens
    const raw = JSON.stringify(makeRecords(firstId, BULK));
    const stopCpu = await cpuMeter(target);
    const t0 = performance.now();
    const res = await fetch(platform.url + prefix, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: raw });
    const text = await res.text();
    const ms = r2(performance.now() - t0);
    const cpu = await stopCpu();
    const sample: BulkSample = { log: to, firstId, status: res.status, ms, cpu, logged: 0 };
    if (res.status !== 201) sample.error = text.slice(0, 300);
    else {
      const rows = await stored(firstId, firstId + BULK - 1);
      sample.logged = await logged(firstId, firstId + BULK - 1);
      const want = to === 'on' ? BULK : 0;
      if (rows !== BULK) sample.error = `${rows} of ${BULK} records stored`;
      else if (sample.logged !== want) sample.error = `${sample.logged} changes logged with the log ${to} (expected ${want})`;
    }
    log(`  log ${to}: ${sample.status} in ${ms} ms${sample.error ? ` — ${sample.error}` : ''}`);
    await sleep(settings.settleMs);
    return sample;
  };
  if (settings.warmupSec > 0) {
    log(`bulk create ${BULK.toLocaleString('en')}: one warm-up each (discarded)…`);
    for (const to of ['on', 'off'] as const) {
      const s = await once(to);
      if (s.error) c.problems.push(`bulk warm-up with the log ${to}: ${s.status} ${s.error}`);
    }
  }
  const samples: BulkSample[] = [];
  const bulkRounds: number[] = [];
  for (let r = 0; r < BULK_REPEAT; r++) {
    log(`bulk create ${BULK.toLocaleString('en')} records, round ${r + 1}/${BULK_REPEAT}…`);
    const round: Partial<Record<'on' | 'off', BulkSample>> = {};
    for (const to of r % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) samples.push((round[to] = await once(to)));
    bulkRounds.push(r2(round.off!.ms / round.on!.ms));
  }
  for (const s of samples) if (s.error) c.problems.push(`bulk with the log ${s.log}: ${s.status} ${s.error}`);
  const bulkSide = (to: 'on' | 'off') => {
    const good = samples.filter((s) => s.log === to && !s.error);
    const ms = good.map((s) => s.ms).sort((a, b) => a - b);
    const per = (xs: (number | null)[]) => (good.length && xs.every((x) => x !== null) ? Math.round(((xs as number[]).reduce((a, b) => a + b, 0) * 1e3) / good.length) : null);
    return { p50Ms: percentile(ms, 0.5), samplesMs: good.map((s) => s.ms), serverCpuMs: per(good.map((s) => s.cpu.serverSec)), dbCpuMs: per(good.map((s) => s.cpu.dbSec)) };
  };
  const bOn = bulkSide('on');
  const bOff = bulkSide('off');
  const bulkRatio = ratio(bOff.p50Ms, bOn.p50Ms);
  const sum = (b: typeof bOn) => (b.serverCpuMs === null || b.dbCpuMs === null ? null : b.serverCpuMs + b.dbCpuMs);
  await setLog('on'); // as the platform runs
  const logRows = (await mon.query<{ n: number; mib: string }>(`SELECT count(*)::int AS n, pg_total_relation_size('"${c.site}".record_changes') AS mib FROM "${c.site}".record_changes`)).rows[0]!;
  return {
    loads,
    bulk: { title: `bulk create ${BULK.toLocaleString('en')} (sequential, ${BULK_REPEAT} each)`, records: BULK, repeat: BULK_REPEAT, on: bOn, off: bOff, ratio: bulkRatio, addedPct: addedPct(bulkRatio), cpuRatio: ratio(sum(bOn), sum(bOff)), roundRatios: bulkRounds, samples },
    switches,
    logAtEnd: { rows: logRows.n, MiB: r2(Number(logRows.mib) / 2 ** 20) },
  };
}

async function idle(c: Ctx) {
  const { platform, site, prefix } = c;
  const url = `${platform.url}${prefix}changes/`;
  const tokens: string[] = [];
  for (let i = 0; i < TOKENS; i++) tokens.push(await siteToken(platform.url, site));
  const pid = platform.pid;
  const reading = async () => {
    await sleep(SETTLE_MS);
    const heap = await collectGarbage(c.inspectPort);
    return { rssKiB: rssKiB(pid), openFiles: openFiles(pid), ...heap };
  };
  const cpuOver = async () => {
    const stop = await cpuMeter({ url: platform.url, pid, backendPids: c.backends });
    await sleep(IDLE_CPU_MS);
    const u = await stop();
    const pct = (s: number | null) => (s === null ? null : r2((100 * s * 1000) / IDLE_CPU_MS));
    return { serverPctOfCore: pct(u.serverSec), dbPctOfCore: pct(u.dbSec), dbBackends: u.backends };
  };

  log(`idle: the server at rest (a full GC, ${SETTLE_MS / 1000} s, ${IDLE_CPU_MS / 1000} s of CPU)…`);
  const before = await reading();
  const cpuBefore = await cpuOver();
  log(`idle: opening ${SUBSCRIBERS.toLocaleString('en')} streams, ${OPEN_CONCURRENCY} at a time, over ${TOKENS} tokens…`);
  const { all, seconds } = await openStreams(url, tokens, SUBSCRIBERS);
  const opened = all.filter((s) => s.status === 200 && s.opened && !s.ended).length;
  log(`idle: ${opened.toLocaleString('en')} of ${SUBSCRIBERS.toLocaleString('en')} open in ${seconds} s; settling…`);
  const during = await reading();
  const cpuDuring = await cpuOver();
  const problems = streamProblems('idle', all);
  const held = all.filter((s) => s.status === 200 && s.opened && !s.ended && !s.endReason).length;
  c.problems.push(...problems);
  for (const s of all) s.close();
  log(`idle: ${held.toLocaleString('en')} held to the end; closed them`);
  const after = await reading();
  const per = (k: 'rssKiB' | 'heapUsedKiB' | 'externalKiB') => (held ? r2((during[k] - before[k]) / held) : null);
  return {
    requested: SUBSCRIBERS,
    tokens: TOKENS,
    status200: all.filter((s) => s.status === 200).length,
    retryLines: all.filter((s) => s.opened).length,
    held,
    openSeconds: seconds,
    opensPerSec: seconds ? Math.round(SUBSCRIBERS / seconds) : null,
    before,
    during,
    afterClose: after,
    kibPerStream: per('rssKiB'),
    heapKibPerStream: per('heapUsedKiB'),
    openFilesAdded: during.openFiles - before.openFiles,
    cpuBefore,
    cpuDuring,
  };
}

async function fanout(c: Ctx) {
  const { platform, site, prefix } = c;
  const siteBase = `${platform.url}/sites/${site}`;
  const admin = await siteToken(platform.url, site);
  // The policy: role `user` reads the records of its own city only.
  const policy = {
    resourcePolicy: {
      resource: `datatable:${TABLE}`,
      version: 'default',
      rules: [
        { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
        { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.city == P.attr.city' } } },
      ],
    },
  };
  const put = await api(`${siteBase}/api/apps/${APP}/policies/`, 'PUT', { token: admin, body: policy });
  if (put.status !== 200 && put.status !== 201) throw new Error(`PUT the policy: ${put.status} ${put.text.slice(0, 300)}`);
  // One site user per city, signed in; each sees only its city's records.
  const users: { city: string; token: string }[] = [];
  for (const [i, city] of CITIES.entries()) {
    const user = { username: `reader${i}`, password: `Bench-reader-pass-${i}` };
    ok(await api(`${siteBase}/api/users/`, 'POST', { token: admin, body: user }), 201, `site user ${user.username}`);
    ok(await api(`${siteBase}/api/users/${user.username}/`, 'PUT', { token: admin, body: { attributes: { city } } }), 200, `attributes of ${user.username}`);
    const token = ok(await api(`${siteBase}/api/auth/jwt/token/`, 'POST', { body: user }), 200, `${user.username} login`).access as string;
    const list = ok(await api(`${platform.url}${prefix}?page_size=5`, 'GET', { token }), 200, `${user.username} list`) as unknown as Record<string, unknown>[];
    assert.ok(list.length > 0 && list.every((r) => r.city === city), `${user.username} (${city}) lists the records of ${city} only: ${JSON.stringify(list.map((r) => r.city))}`);
    users.push({ city, token });
  }
  log(`fanout: the city policy in force, ${users.length} users (one per city) each list their city's records only`);

  // The streams: stream i as user i mod 10; each records what it gets.
  const total = Math.round(FANOUT_RATE * FANOUT_DURATION);
  const got: number[][] = Array.from({ length: FANOUT_SUBSCRIBERS }, () => []);
  const latencies: number[] = [];
  /** The `at` of each event of `latencies` (the same order): the latency second by second. */
  const committedAt: number[] = [];
  /** When the measured writes start (Date.now()): the warm-up's events before it are not timed. */
  let measuredFrom = Infinity;
  const others: string[] = [];
  let delivered = 0;
  const onEvent = (i: number) => (e: ChangeEvent, receivedAt: number) => {
    delivered++;
    if (e.event !== 'create') {
      if (others.length < 20) others.push(`stream ${i}: ${e.event} ${JSON.stringify(e.data).slice(0, 200)}`);
      return;
    }
    got[i]!.push(Number(e.data.key));
    const at = Date.parse(e.data.at);
    if (at < measuredFrom) return; // the warm-up's
    latencies.push(receivedAt - at);
    committedAt.push(at);
  };
  const tokens = users.map((u) => u.token);
  log(`fanout: opening ${FANOUT_SUBSCRIBERS.toLocaleString('en')} streams…`);
  const { all, seconds } = await openStreams(`${platform.url}${prefix}changes/`, tokens, FANOUT_SUBSCRIBERS, onEvent);
  const refused = streamProblems('fanout (opening)', all);
  if (refused.length) {
    c.problems.push(...refused);
    for (const s of all) s.close();
    throw new Error(refused.join('; '));
  }
  log(`fanout: ${all.length} streams open in ${seconds} s; ${FANOUT_RATE} creates/s for ${FANOUT_DURATION} s…`);
  await sleep(1000);

  // The writer: one POST per 1/RATE s on a fixed schedule (open loop: a slow answer does not delay
  // the next); the first BENCH_WARMUP seconds of it are a warm-up (their events are checked, not timed).
  const created: number[] = [];
  const writeMs: number[] = [];
  const failures: string[] = [];
  const interval = 1000 / FANOUT_RATE;
  const warm = Math.round(FANOUT_RATE * settings.warmupSec);
  let stopCpu: (() => Promise<CpuUsage>) | undefined;
  let ownCpu = process.cpuUsage();
  let tMeasured = 0;
  const t0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (let k = 0; k < warm + total; k++) {
    if (k === warm) {
      stopCpu = await cpuMeter({ url: platform.url, pid: platform.pid, backendPids: c.backends });
      ownCpu = process.cpuUsage();
      measuredFrom = Date.now();
      tMeasured = performance.now();
    }
    const wait = t0 + k * interval - performance.now();
    if (wait > 0) await sleep(wait);
    const id = FANOUT_BASE + k;
    const sent = performance.now();
    inflight.push(
      fetch(platform.url + prefix, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify(makeRecords(id, 1)[0]) }).then(
        async (res) => {
          const text = await res.text();
          if (k >= warm) writeMs.push(performance.now() - sent);
          if (res.status === 201) created.push(id);
          else if (failures.length < 10) failures.push(`${id}: ${res.status} ${text.slice(0, 200)}`);
        },
        (err: Error) => void failures.push(`${id}: ${err.message}`),
      ),
    );
  }
  await Promise.all(inflight);
  const writeSeconds = r2((performance.now() - tMeasured) / 1000);
  const cpu = await stopCpu!();
  const own = process.cpuUsage(ownCpu);

  // Expected: each stream gets exactly the creates of its user's city.
  const byCity = new Map<string, Set<number>>(CITIES.map((city) => [city, new Set()]));
  for (const id of created) byCity.get(CITIES[id % CITIES.length]!)!.add(id);
  const expectedOf = (i: number) => byCity.get(users[i % users.length]!.city)!;
  const expected = all.reduce((n, _, i) => n + expectedOf(i).size, 0);
  const drainFrom = Date.now();
  while (delivered < expected && Date.now() - drainFrom < DRAIN_MS) await sleep(50);
  const drainMs = Date.now() - drainFrom;
  await sleep(500); // anything beyond what is expected (a duplicate) would come now
  const off: string[] = [];
  for (const [i, keys] of got.entries()) {
    const want = expectedOf(i);
    const unique = new Set(keys);
    const missing = [...want].filter((k) => !unique.has(k)).length;
    const foreign = [...unique].filter((k) => !want.has(k)).length;
    const twice = keys.length - unique.size;
    if (missing || foreign || twice) off.push(`stream ${i} (${users[i % users.length]!.city}): ${missing} missing, ${foreign} not its city's, ${twice} twice`);
  }
  const ended = all.filter((s) => s.ended || s.endReason);
  for (const s of all) s.close();

  if (failures.length) c.problems.push(`fanout: ${warm + total - created.length} of ${warm + total} creates failed (first: ${failures[0]})`);
  if (off.length) c.problems.push(`fanout: ${off.length} of ${all.length} streams did not get exactly their city's creates (first: ${off[0]})`);
  if (others.length) c.problems.push(`fanout: events other than create (first: ${others[0]})`);
  if (ended.length) c.problems.push(`fanout: ${ended.length} streams ended (first: ${ended[0]!.endReason ?? 'connection closed'})`);
  const sorted = Float64Array.from(latencies).sort();
  const w = Float64Array.from(writeMs).sort();
  // Second by second of the writes (by the changes' `at`): a stall shows as one bad second.
  const bySecond: number[][] = [];
  for (const [k, ms] of latencies.entries()) (bySecond[Math.max(0, Math.floor((committedAt[k]! - measuredFrom) / 1000))] ??= []).push(ms);
  const perSecond = [...bySecond.entries()].map(([sec, xs]) => {
    const s = Float64Array.from(xs ?? []).sort();
    return { second: sec, events: s.length, p50: percentile(s, 0.5), p99: percentile(s, 0.99), max: s.at(-1) ?? NaN };
  });
  return {
    subscribers: all.length,
    users: users.length,
    policy: policy.resourcePolicy.rules,
    openSeconds: seconds,
    ratePerSec: FANOUT_RATE,
    durationSec: FANOUT_DURATION,
    warmupWrites: warm,
    writes: total,
    created: created.length,
    writeSeconds,
    writeP50Ms: r2(percentile(w, 0.5)),
    writeP99Ms: r2(percentile(w, 0.99)),
    expectedEvents: expected,
    deliveredEvents: delivered,
    exact: expected === delivered && off.length === 0 && others.length === 0 && !failures.length,
    streamsOff: off.length,
    drainMs,
    latencyMs: { p50: percentile(sorted, 0.5), p90: percentile(sorted, 0.9), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? NaN, min: sorted[0] ?? NaN },
    latencyBySecond: perSecond,
    /** Events timed (after the warm-up) per second of the measured writes. */
    eventsPerSec: r2(latencies.length / writeSeconds),
    serverPctOfCore: cpu.serverSec === null ? null : r2((100 * cpu.serverSec) / writeSeconds),
    dbPctOfCore: cpu.dbSec === null ? null : r2((100 * cpu.dbSec) / writeSeconds),
    /** The bench process's own (the streams' parsing, the writer), on the same cores. */
    clientPctOfCore: r2((own.user + own.system) / 1e4 / writeSeconds),
    offStreams: off.slice(0, 20),
  };
}

// ---------------------------------------------------------------------------------------------

interface Verdict {
  description: string;
  value: number | boolean | null;
  ok: boolean;
}

type Writes = Awaited<ReturnType<typeof writes>>;
type Idle = Awaited<ReturnType<typeof idle>>;
type Fanout = Awaited<ReturnType<typeof fanout>>;

function verdicts(w: Writes | null, i: Idle | null, f: Fanout | null): Record<string, Verdict> {
  const out: Record<string, Verdict> = {};
  if (w) {
    const [one, many] = w.loads;
    out.singleP50 = { description: `create at 1 conn: p50 OFF ÷ ON ≥ ${MIN_SINGLE} (the log adds ≤ 10 %)`, value: one!.ratio, ok: one!.ratio !== null && one!.ratio >= MIN_SINGLE };
    out.singleThroughput = { description: `create at ${settings.connections} conn: req/s ON ÷ OFF ≥ ${MIN_SINGLE} (the log adds ≤ 10 %)`, value: many!.ratio, ok: many!.ratio !== null && many!.ratio >= MIN_SINGLE };
    out.bulk = { description: `bulk create ${BULK.toLocaleString('en')}: p50 ms OFF ÷ ON ≥ ${MIN_BULK} (the log adds ≤ 20 %)`, value: w.bulk.ratio, ok: w.bulk.ratio !== null && w.bulk.ratio >= MIN_BULK };
  }
  if (i) out.held = { description: `idle streams held by one process ≥ ${MIN_HELD.toLocaleString('en')}`, value: i.held, ok: i.held >= MIN_HELD };
  if (f) {
    out.fanoutP99 = { description: `fan-out commit-to-client p99 < ${MAX_FANOUT_P99_MS} ms`, value: f.latencyMs.p99, ok: f.latencyMs.p99 < MAX_FANOUT_P99_MS };
    out.fanoutExact = { description: 'fan-out: every stream gets exactly its city\'s creates, once each', value: f.exact, ok: f.exact };
  }
  return out;
}

function formatReport(w: Writes | null, i: Idle | null, f: Fanout | null): string {
  const f2 = (n: number | null | undefined, d = 2) => (n === null || n === undefined || Number.isNaN(n) ? '–' : n.toFixed(d));
  const out: string[] = [];
  if (w) {
    const head = ['writes', 'log on', 'log off', 'unit', 'ratio', 'added', 'CPU on÷off', 'ratio per round'];
    const rows = [
      ...w.loads.map((l, k) => {
        const one = k === 0;
        return [l.title, f2(one ? l.on.p50Ms : l.on.requestsPerSec, one ? 2 : 1), f2(one ? l.off.p50Ms : l.off.requestsPerSec, one ? 2 : 1), one ? 'ms p50' : 'req/s', `${f2(l.ratio)}x`, `${f2(l.addedPct, 1)} %`, `${f2(l.cpuRatio)}x`, l.roundRatios.map((x) => f2(x)).join(' / ')];
      }),
      [w.bulk.title, f2(w.bulk.on.p50Ms, 1), f2(w.bulk.off.p50Ms, 1), 'ms p50', `${f2(w.bulk.ratio)}x`, `${f2(w.bulk.addedPct, 1)} %`, `${f2(w.bulk.cpuRatio)}x`, w.bulk.roundRatios.map((x) => f2(x)).join(' / ')],
    ];
    const widths = head.map((h, k) => Math.max(h.length, ...rows.map((r) => r[k]!.length)));
    const line = (cells: string[]) => `| ${cells.map((cell, k) => (k === 0 ? cell.padEnd(widths[k]!) : cell.padStart(widths[k]!))).join(' | ')} |`;
    out.push(line(head), `|${widths.map((wd, k) => (k === 0 ? '-'.repeat(wd + 2) : `${'-'.repeat(wd + 1)}:`)).join('|')}|`, ...rows.map(line));
    out.push('ratio: higher is better, 1.00 = the log costs nothing (OFF ÷ ON for a time, ON ÷ OFF for a rate); added = the log\'s share on top of a write without it;');
    out.push('CPU = server + PostgreSQL backends per request (bulk: per request of BULK records), ON ÷ OFF.');
    for (const l of w.loads) out.push(`  ${l.title}: on p50 ${f2(l.on.p50Ms)} / p99 ${f2(l.on.p99Ms)} ms, ${f2(l.on.requestsPerSec, 1)} req/s, ${totalCpuUs(l.on) ?? '–'} µs/req; off p50 ${f2(l.off.p50Ms)} / p99 ${f2(l.off.p99Ms)} ms, ${f2(l.off.requestsPerSec, 1)} req/s, ${totalCpuUs(l.off) ?? '–'} µs/req`);
    out.push(`  bulk ms: on ${w.bulk.on.samplesMs.join(', ')}; off ${w.bulk.off.samplesMs.join(', ')}`);
    out.push(`  the change log at the end: ${w.logAtEnd.rows.toLocaleString('en')} rows, ${w.logAtEnd.MiB} MiB`);
    out.push('');
  }
  if (i) {
    out.push(
      `idle: ${i.held.toLocaleString('en')} of ${i.requested.toLocaleString('en')} streams held (${i.status200.toLocaleString('en')} answered 200, ${i.retryLines.toLocaleString('en')} sent retry:), opened in ${i.openSeconds} s (${i.opensPerSec ?? '–'}/s, ${OPEN_CONCURRENCY} at a time)`,
      `  server VmRSS ${Math.round(i.before.rssKiB / 1024)} → ${Math.round(i.during.rssKiB / 1024)} MiB: ${f2(i.kibPerStream, 1)} KiB per stream (V8 heap ${f2(i.heapKibPerStream, 1)} KiB of it); after closing them ${Math.round(i.afterClose.rssKiB / 1024)} MiB`,
      `  server open files ${i.before.openFiles} → ${i.during.openFiles} (+${i.openFilesAdded}); CPU at rest ${f2(i.cpuBefore.serverPctOfCore, 1)} % of a core (PostgreSQL ${f2(i.cpuBefore.dbPctOfCore, 1)} %), with the streams ${f2(i.cpuDuring.serverPctOfCore, 1)} % (PostgreSQL ${f2(i.cpuDuring.dbPctOfCore, 1)} %)`,
      '',
    );
  }
  if (f) {
    out.push(
      `fanout: ${f.subscribers.toLocaleString('en')} streams over ${f.users} users (city policy); ${f.writes} creates in ${f.writeSeconds} s after ${f.warmupWrites} of warm-up (${f.created} of ${f.warmupWrites + f.writes} answered 201; write p50 ${f.writeP50Ms} ms, p99 ${f.writeP99Ms} ms)`,
      `  commit-to-client latency p50 ${f.latencyMs.p50} ms, p90 ${f.latencyMs.p90} ms, p99 ${f.latencyMs.p99} ms, max ${f.latencyMs.max} ms`,
      `  p99 second by second: ${f.latencyBySecond.map((x) => x.p99).join(', ')} ms`,
      `  events delivered ${f.deliveredEvents.toLocaleString('en')} of ${f.expectedEvents.toLocaleString('en')} expected (with the warm-up's), ${f.streamsOff} streams off; ${f.eventsPerSec.toLocaleString('en')} events/s timed; server ${f2(f.serverPctOfCore, 1)} % of a core, PostgreSQL ${f2(f.dbPctOfCore, 1)} %, the bench's clients ${f2(f.clientPctOfCore, 1)} %`,
      '',
    );
  }
  return out.join('\n');
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  const command = reproduceCommand('bench:realtime');
  log(`reproduce with: ${command}`);
  const tree = treeState();
  if (tree.realtimeChanged.length) log(`commit ${tree.commit}, with uncommitted changes to ${tree.realtimeChanged.join(', ')}: measuring the working tree`);
  const streamsWanted = Math.max(wanted('idle') ? SUBSCRIBERS : 0, wanted('fanout') ? FANOUT_SUBSCRIBERS : 0);
  db = await openBenchDatabase(log);
  const dbUrl = db.url;
  log(`database: ${db.source} (${db.version.split(',')[0]})`);
  const inspectPort = await freePort();
  const env = {
    ...serverEnv(dbUrl, SECRET),
    PGAPPNAME: APP_NAME,
    REALTIME_MAX_PER_SITE: String(streamsWanted + 100),
    REALTIME_MAX_SUBSCRIBERS: String(Math.max(20_000, streamsWanted + 100)),
    NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}`,
  };
  const cpuProfileDir = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
  const platform = await startChild('platform', 'server.ts', { env, cpuProfileDir });
  children.push(platform);
  log(`platform pid ${platform.pid} at ${platform.url} (inspector on port ${inspectPort})`);

  const { site, physical } = await setupTable(platform.url);
  const table = `"${site}"."${physical}"`;
  const prefix = `/sites/${site}/api/apps/${APP}/datatables/${TABLE}/data/`;
  monitor = new pg.Client({ connectionString: dbUrl, application_name: 'bench-monitor' });
  await monitor.connect();
  const mon = monitor;
  log(`site ${site}, table ${table}; seeding ${ROWS.toLocaleString('en')} rows (the log off meanwhile)…`);
  await mon.query(`ALTER TABLE ${table} ${TRIGGERS.map((t) => `DISABLE TRIGGER ${t}`).join(', ')}`);
  const seed = await seedRows(dbUrl, table, ROWS);
  await mon.query(`ALTER TABLE ${table} ${TRIGGERS.map((t) => `ENABLE TRIGGER ${t}`).join(', ')}`);
  log(`seeded ${seed.rows.toLocaleString('en')} rows in ${seed.seconds} s`);
  const backends = async () =>
    (await mon.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [APP_NAME])).rows.map((r) => r.pid);

  const ctx: Ctx = { platform, inspectPort, site, table, physical, prefix, mon, backends, problems: [] };
  // Before each scenario, a checkpoint (when the role may): the last one's writes are not flushed in the middle of the next.
  const checkpoint = () => mon.query('CHECKPOINT').catch((err: Error) => log(`CHECKPOINT: ${err.message} (going on)`));
  const run = async <T>(id: (typeof SCENARIOS)[number], scenario: (c: Ctx) => Promise<T>): Promise<T | null> => (wanted(id) ? (await checkpoint(), await scenario(ctx)) : null);
  const w = await run('writes', writes);
  const i = await run('idle', idle);
  const f = await run('fanout', fanout);

  const targets = verdicts(w, i, f);
  const report = {
    timestamp,
    command,
    tree,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2), ulimitOpenFiles: fs.readFileSync('/proc/self/limits', 'utf8').match(/Max open files\s+(\d+)/)?.[1] ?? null },
    database: { source: db.source, version: db.version, rows: seed.rows, seedSeconds: seed.seconds },
    settings: {
      ...settings,
      seqDurationSec: SEQ_DURATION,
      rows: ROWS,
      bulk: BULK,
      bulkRepeat: BULK_REPEAT,
      subscribers: SUBSCRIBERS,
      tokens: TOKENS,
      openConcurrency: OPEN_CONCURRENCY,
      settleSec: SETTLE_MS / 1000,
      idleCpuSec: IDLE_CPU_MS / 1000,
      fanoutSubscribers: FANOUT_SUBSCRIBERS,
      fanoutRate: FANOUT_RATE,
      fanoutDurationSec: FANOUT_DURATION,
      serverEnv: { REALTIME_MAX_PER_SITE: env.REALTIME_MAX_PER_SITE, REALTIME_MAX_SUBSCRIBERS: env.REALTIME_MAX_SUBSCRIBERS },
      applicationName: APP_NAME,
      loadGenerator: 'autocannon 8 and node:http streams (in the bench process)',
    },
    writes: w,
    idle: i,
    fanout: f,
    targets,
    valid: ctx.problems.length === 0,
    problems: ctx.problems,
  };
  const out = [
    formatReport(w, i, f),
    ...Object.values(targets).map((t) => `${t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value ?? '–'}`),
    ...ctx.problems.map((p) => `INVALID  ${p}`),
    '',
    `reproduce: ${command}`,
  ];
  console.log(`\n${out.join('\n')}\n`);
  writeResults('realtime', report, timestamp, log);
  if (cpuProfileDir) log(`CPU profile (written when the server stops): ${cpuProfileDir}`);
  if (!report.valid) return 1;
  return Object.values(targets).some((t) => !t.ok) && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
