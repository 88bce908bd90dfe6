// Load generation: autocannon, run from the bench process against servers in other
// processes. For one scenario both servers get a warm-up run (JIT, pool connections; its
// figures are discarded), then measured runs in alternating order — platform, baseline |
// baseline, platform | … — so that load which comes and goes on the machine falls on both
// alike. A pause after each run lets the server drain requests still queued when autocannon
// stopped, so they do not leak into the next run.
//
// CPU: the server process's (utime + stime from /proc) before and after each run, and — when
// the target lists them — that of the processes serving it besides (its PostgreSQL backends,
// `npm run bench:hotpath`): listed right before and right after the run, the union counted
// (a backend started during the run counts from zero; one gone by the end is lost).
import autocannon from 'autocannon';
import { cpuSeconds } from './children.ts';
import { envNumber } from './records-setup.ts';

export interface Request {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Per-connection bodies: connection i sends bodies[i % length] (overrides `body`). */
  bodies?: string[];
  /** A fresh path for every request (e.g. a random id; overrides `path` after the first request). */
  nextPath?: () => string;
  /** A fresh body for every request (e.g. a new record's id; overrides `body`). */
  nextBody?: () => string;
}

export interface LoadSettings {
  connections: number;
  /** Measured seconds per server and scenario, split over the rounds. */
  durationSec: number;
  warmupSec: number;
  rounds: number;
  /** Pause after each run, for the server to drain what is still queued. */
  settleMs: number;
}

/** The load settings of the environment: BENCH_CONNECTIONS (50), BENCH_DURATION (10 s), BENCH_WARMUP (2 s), BENCH_ROUNDS (2). */
export function settingsFromEnv(): LoadSettings {
  return {
    connections: envNumber('BENCH_CONNECTIONS', 50),
    durationSec: envNumber('BENCH_DURATION', 10),
    warmupSec: envNumber('BENCH_WARMUP', 2),
    rounds: Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2))),
    settleMs: 1000,
  };
}

export interface Target {
  url: string;
  pid: number;
  /**
   * The PIDs of other processes doing this target's work (its PostgreSQL backends on this
   * machine), asked right before and right after each run; their CPU goes to `dbCpuUsPerRequest`.
   */
  backendPids?: () => Promise<number[]>;
}

export interface Measurement {
  /** Successful (2xx) responses per second over the measured runs. */
  requestsPerSec: number;
  /** Latency percentiles of 2xx responses, in ms (nearest rank over every response; sub-ms precision). */
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  maxMs: number;
  /** CPU time of the server process (all its threads) per response, in µs (Linux; null elsewhere). */
  serverCpuUsPerRequest: number | null;
  /** CPU time of the target's backend processes (`Target.backendPids`) per response, in µs; null when not measured. */
  dbCpuUsPerRequest: number | null;
  /** The most backend processes seen in one run (0 when not measured). */
  dbBackends: number;
  responses: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSec: number;
}

interface Sample {
  latencies: number[];
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSec: number;
  cpuSec: number | null;
  dbCpuSec: number | null;
  dbBackends: number;
}

export interface CpuUsage {
  /** Seconds of CPU of the server process; null where /proc is missing. */
  serverSec: number | null;
  /** Seconds of CPU of the backend processes; null when the target lists none or /proc is missing. */
  dbSec: number | null;
  /** Backend processes counted. */
  backends: number;
}

/**
 * Starts counting a target's CPU: the server process, and the backends it lists (right now and
 * again when the returned function is called: the union of both lists). Call the result to stop.
 */
export async function cpuMeter(target: Target): Promise<() => Promise<CpuUsage>> {
  const before = new Map<number, number>();
  for (const pid of (await target.backendPids?.()) ?? []) {
    const cpu = cpuSeconds(pid);
    if (cpu !== null) before.set(pid, cpu);
  }
  const serverBefore = cpuSeconds(target.pid);
  return async () => {
    const serverAfter = cpuSeconds(target.pid);
    const serverSec = serverBefore === null || serverAfter === null ? null : serverAfter - serverBefore;
    if (!target.backendPids) return { serverSec, dbSec: null, backends: 0 };
    const after = await target.backendPids();
    let dbSec = 0;
    let backends = 0;
    const listed = new Set([...before.keys(), ...after]);
    for (const pid of listed) {
      const now = cpuSeconds(pid); // null when the backend has exited meanwhile: its share since `before` is lost
      if (now === null) continue;
      dbSec += now - (before.get(pid) ?? 0);
      backends++;
    }
    return { serverSec, dbSec: listed.size && !backends ? null : dbSec, backends };
  };
}

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: Float64Array, q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * One autocannon run. Latencies are collected from the per-response event rather than from
 * autocannon's histogram, which keeps whole milliseconds only (too coarse at 2–10 ms).
 */
async function run(target: Target, request: Request, connections: number, durationSec: number): Promise<Sample> {
  const latencies: number[] = [];
  let next = 0;
  const bodies = request.bodies;
  const stopCpu = await cpuMeter(target);
  const instance = autocannon({
    url: target.url + request.path,
    method: request.method,
    headers: { ...(request.body || bodies || request.nextBody ? { 'content-type': 'application/json' } : {}), ...request.headers },
    body: request.body ?? bodies?.[0],
    setupClient: bodies ? (client) => client.setBody(bodies[next++ % bodies.length]) : undefined,
    requests: request.nextPath || request.nextBody
      ? [{ method: request.method, setupRequest: (r) => ({ ...r, ...(request.nextPath ? { path: request.nextPath() } : {}), ...(request.nextBody ? { body: request.nextBody() } : {}) }) }]
      : undefined,
    connections,
    duration: durationSec,
    timeout: 30,
  });
  instance.on('response', (_client, status, _bytes, ms) => {
    if (status >= 200 && status < 300) latencies.push(ms);
  });
  const result = await instance;
  const cpu = await stopCpu();
  return {
    latencies,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    durationSec: result.duration,
    cpuSec: cpu.serverSec,
    dbCpuSec: cpu.dbSec,
    dbBackends: cpu.backends,
  };
}

function summarize(samples: Sample[]): Measurement {
  const latencies = samples.flatMap((s) => s.latencies);
  const sorted = Float64Array.from(latencies).sort();
  const durationSec = samples.reduce((a, s) => a + s.durationSec, 0);
  const cpu = samples.every((s) => s.cpuSec !== null) ? samples.reduce((a, s) => a + s.cpuSec!, 0) : null;
  const dbCpu = samples.every((s) => s.dbCpuSec !== null) ? samples.reduce((a, s) => a + s.dbCpuSec!, 0) : null;
  const sum = (k: 'non2xx' | 'errors' | 'timeouts') => samples.reduce((a, s) => a + s[k], 0);
  return {
    requestsPerSec: round(latencies.length / durationSec, 1),
    p50Ms: round(percentile(sorted, 0.5)),
    p99Ms: round(percentile(sorted, 0.99)),
    meanMs: round(latencies.reduce((a, b) => a + b, 0) / (latencies.length || 1)),
    maxMs: round(sorted.at(-1) ?? NaN),
    serverCpuUsPerRequest: cpu === null || !latencies.length ? null : Math.round((cpu * 1e6) / latencies.length),
    dbCpuUsPerRequest: dbCpu === null || !latencies.length ? null : Math.round((dbCpu * 1e6) / latencies.length),
    dbBackends: Math.max(0, ...samples.map((s) => s.dbBackends)),
    responses: latencies.length + sum('non2xx'),
    non2xx: sum('non2xx'),
    errors: sum('errors'),
    timeouts: sum('timeouts'),
    durationSec: round(durationSec),
  };
}

export interface Comparison {
  platform: Measurement;
  baseline: Measurement;
  /** baseline req/s ÷ platform req/s of each round: their spread shows how steady the machine was. */
  roundRatios: number[];
}

/** Warm-ups, then `rounds` rounds in alternating order (P B | B P | …); samples are pooled. */
export async function compare(platform: Target, baseline: Target, request: Request, settings: LoadSettings): Promise<Comparison> {
  const perRun = Math.max(1, settings.durationSec / settings.rounds);
  if (settings.warmupSec > 0) {
    for (const target of [platform, baseline]) {
      await run(target, request, settings.connections, settings.warmupSec);
      await sleep(settings.settleMs);
    }
  }
  const samples = { platform: [] as Sample[], baseline: [] as Sample[] };
  const roundRatios: number[] = [];
  for (let r = 0; r < settings.rounds; r++) {
    const order = r % 2 === 0 ? (['platform', 'baseline'] as const) : (['baseline', 'platform'] as const);
    for (const who of order) {
      samples[who].push(await run(who === 'platform' ? platform : baseline, request, settings.connections, perRun));
      await sleep(settings.settleMs);
    }
    const rate = (s: Sample) => s.latencies.length / s.durationSec;
    roundRatios.push(round(rate(samples.baseline[r]) / rate(samples.platform[r])));
  }
  return { platform: summarize(samples.platform), baseline: summarize(samples.baseline), roundRatios };
}
