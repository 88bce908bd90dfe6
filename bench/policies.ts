// `npm run bench:policies`: authorization checks in process (our engine, compilePolicies(...).check)
// against the Cerbos 0.51 binary over HTTP (POST /api/check/resources, keep-alive, one request at a
// time), on the same policies and the same inputs, in the same run.
//
// Policies and inputs: the differential corpus (shared/policies/differential/: its policies; its
// check cases as the pool of principals and resources). For each batch size (BENCH_BATCHES, default
// 1, 20 and 50 resources per request) BENCH_REQUESTS (200) requests are drawn with a seeded PRNG: one
// principal, then that many resources of the principal's cases (ids made unique), each with 2-5
// actions (its case's, completed with actions no rule names, `bench:unlisted<k>`). Known
// differences (cases.json) are not in the pool. Before measuring, every request goes to both and
// every action's effect must be identical, else the bench fails and lists them; BENCH_SKIP_CASES
// (comma-separated case ids) leaves cases out of the pool, e.g. while an engine difference is open.
//
// Measured, per batch size and side: BENCH_DURATION seconds (3) of sequential requests cycling
// through the drawn ones, after BENCH_WARMUP seconds (1) discarded, in BENCH_ROUNDS (2) alternating
// rounds (in process, Cerbos | Cerbos, in process | …). Per request: p50, p99 and mean latency (in
// process: the check() call; Cerbos: from fetch to the parsed answer, JSON both ways included), µs
// per resource × action (total time ÷ decisions), Cerbos' CPU per request (/proc of its PID), and
// the ratio Cerbos ÷ in process.
//
// Targets (BENCH_STRICT=1: exit 1 when one is missed): at 1 resource in process ≥ 100x faster
// than Cerbos (p50); at 20 and 50 resources ≤ 20 µs per resource and action in process (mean).
// Output: a table on stdout, bench/results/policies-latest.json and a timestamped copy.
import os from 'node:os';
import { cpuSeconds, runBench } from './children.ts';
import { machineInfo, writeResults } from './report.ts';
import { batchRequests, loadCorpus, type CheckCase, type CheckItem } from '../shared/policies/differential/corpus.ts';
import { compilePolicies } from '../shared/policies/engine.ts';
import type { CheckRequest, CheckResponse } from '../shared/policies/model.ts';
import { cerbosBinary, startCerbos, type CerbosServer } from '../shared/testing/cerbos.ts';

const log = (msg: string) => process.stderr.write(`[bench:policies] ${msg}\n`);
const envNumber = (name: string, def: number) => {
  const v = Number(process.env[name] || def);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a non-negative number`);
  return v;
};
const r2 = (n: number) => Math.round(n * 100) / 100;
const r3 = (n: number) => Math.round(n * 1000) / 1000;

const BATCHES = (process.env.BENCH_BATCHES ?? '1,20,50').split(',').map((s) => Number(s.trim()));
if (BATCHES.some((b) => !Number.isInteger(b) || b < 1 || b > 50)) throw new Error('BENCH_BATCHES: integers from 1 to 50 (Cerbos answers at most 50 resources a request)');
const REQUESTS = Math.max(1, Math.round(envNumber('BENCH_REQUESTS', 200)));
const DURATION = envNumber('BENCH_DURATION', 3);
const WARMUP = envNumber('BENCH_WARMUP', 1);
const ROUNDS = Math.max(1, Math.round(envNumber('BENCH_ROUNDS', 2)));
const SKIP = new Set((process.env.BENCH_SKIP_CASES ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const SEED = Math.round(envNumber('BENCH_SEED', 42));

// Targets.
const MIN_RATIO_1 = 100; // Cerbos p50 ÷ in-process p50 at 1 resource
const MAX_US_PER_DECISION = 20; // in process, at 20 and 50 resources

let cerbos: CerbosServer | undefined;
const cleanup = async () => {
  await cerbos?.stop();
};

/** mulberry32: a small seeded PRNG, so that every run draws the same requests. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `n` requests of `size` resources each, every resource with 2-5 actions. */
function drawRequests(cases: CheckCase[], principals: ReturnType<typeof loadCorpus>['principals'], size: number, n: number, random: () => number): CheckRequest[] {
  const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)]!;
  const byPrincipal = new Map<string, CheckCase[]>();
  for (const c of cases) byPrincipal.set(c.principal, [...(byPrincipal.get(c.principal) ?? []), c]);
  const names = [...byPrincipal.keys()];
  const out: CheckRequest[] = [];
  for (let r = 0; r < n; r++) {
    const name = pick(names);
    const pool = byPrincipal.get(name)!;
    const items: CheckItem[] = [];
    for (let i = 0; i < size; i++) {
      const c = pick(pool);
      const want = 2 + Math.floor(random() * 4);
      const own = Object.keys(c.expect);
      const start = Math.floor(random() * own.length);
      const actions = [...own.slice(start), ...own.slice(0, start)].slice(0, want);
      for (let k = 1; actions.length < want; k++) actions.push(`bench:unlisted${k}`);
      items.push({ id: `${c.id}-${r}-${i}`, principal: name, resource: { ...c.resource, id: `${c.resource.id}-${r}-${i}` }, actions });
    }
    out.push(...batchRequests(principals, items, `bench${size}-${r}`).map((b) => b.request));
  }
  return out;
}

const decisionsOf = (req: CheckRequest) => req.resources.reduce((n, r) => n + r.actions.length, 0);

/** Every action's effect of every resource, both sides (meta is the differential test's business). */
function compareAnswers(req: CheckRequest, theirs: CheckResponse, ours: CheckResponse): string[] {
  const out: string[] = [];
  req.resources.forEach(({ resource, actions }, i) => {
    const [t, o] = [theirs.results[i], ours.results[i]];
    for (const a of actions) if (t?.actions[a] !== o?.actions[a]) out.push(`${req.principal.id} ${resource.kind}${resource.scope ? `@${resource.scope}` : ''} ${resource.id} ${a}: Cerbos ${t?.actions[a]}, ours ${o?.actions[a]}`);
  });
  return out;
}

interface Side {
  requests: number;
  decisions: number;
  totalMs: number;
  p50Us: number;
  p99Us: number;
  meanUs: number;
  usPerDecision: number;
  cpuUsPerRequest?: number | null;
}

function summarise(samplesMs: number[], decisions: number, cpuSec?: number | null): Side {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  const total = samplesMs.reduce((a, b) => a + b, 0);
  return {
    requests: samplesMs.length,
    decisions,
    totalMs: r2(total),
    p50Us: r2(at(0.5) * 1000),
    p99Us: r2(at(0.99) * 1000),
    meanUs: r2((total * 1000) / samplesMs.length),
    usPerDecision: r3((total * 1000) / decisions),
    ...(cpuSec === undefined ? {} : { cpuUsPerRequest: cpuSec === null ? null : r2((cpuSec * 1e6) / samplesMs.length) }),
  };
}

async function main(): Promise<number> {
  const timestamp = new Date().toISOString();
  const machine = machineInfo();
  const corpus = loadCorpus();
  const unknown = [...SKIP].filter((id) => !corpus.checks.some((c) => c.id === id));
  if (unknown.length) throw new Error(`BENCH_SKIP_CASES: unknown case ids ${unknown.join(', ')}`);
  const cases = corpus.checks.filter((c) => !SKIP.has(c.id));
  log(`${corpus.docs.length} policies, ${cases.length} cases in the pool${SKIP.size ? ` (left out: ${[...SKIP].join(', ')})` : ''}; Cerbos ${cerbosBinary()}`);
  const set = compilePolicies(corpus.docs);
  cerbos = await startCerbos(corpus.docs);
  const server = cerbos;
  const url = `${server.url}/api/check/resources`;
  const post = async (req: CheckRequest): Promise<CheckResponse> => {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(req) });
    if (!res.ok) throw new Error(`cerbos: ${res.status} ${(await res.text()).slice(0, 500)}`);
    return (await res.json()) as CheckResponse;
  };

  const random = prng(SEED);
  const workloads = BATCHES.map((size) => ({ size, requests: drawRequests(cases, corpus.principals, size, REQUESTS, random) }));

  // Identical decisions first.
  const mismatches: string[] = [];
  let compared = 0;
  for (const { requests } of workloads) {
    for (const req of requests) {
      mismatches.push(...compareAnswers(req, await post(req), set.check(req)));
      compared += decisionsOf(req);
    }
  }
  if (mismatches.length) {
    for (const m of mismatches.slice(0, 50)) log(`MISMATCH ${m}`);
    throw new Error(`${mismatches.length} of ${compared} decisions differ between Cerbos and the engine (listed above); BENCH_SKIP_CASES leaves cases out`);
  }
  log(`identical decisions: ${compared} resource × action decisions on ${workloads.reduce((n, w) => n + w.requests.length, 0)} requests`);

  const results = [];
  for (const { size, requests } of workloads) {
    const inProcess: number[] = [];
    const overHttp: number[] = [];
    let inDecisions = 0;
    let httpDecisions = 0;
    let cpu: number | null = 0;
    const runInProcess = (seconds: number, keep: boolean) => {
      const until = performance.now() + seconds * 1000;
      for (let i = 0; performance.now() < until; i++) {
        const req = requests[i % requests.length]!;
        const t0 = performance.now();
        set.check(req);
        const ms = performance.now() - t0;
        if (keep) inProcess.push(ms), (inDecisions += decisionsOf(req));
      }
    };
    const runHttp = async (seconds: number, keep: boolean) => {
      const cpu0 = cpuSeconds(server.pid);
      const until = performance.now() + seconds * 1000;
      for (let i = 0; performance.now() < until; i++) {
        const req = requests[i % requests.length]!;
        const t0 = performance.now();
        await post(req);
        const ms = performance.now() - t0;
        if (keep) overHttp.push(ms), (httpDecisions += decisionsOf(req));
      }
      const cpu1 = cpuSeconds(server.pid);
      if (keep) cpu = cpu === null || cpu0 === null || cpu1 === null ? null : cpu + (cpu1 - cpu0);
    };
    log(`${size} resource(s) a request: warm-up ${WARMUP} s each, then ${ROUNDS} × ${r2(DURATION / ROUNDS)} s each…`);
    runInProcess(WARMUP, false);
    await runHttp(WARMUP, false);
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        runInProcess(DURATION / ROUNDS, true);
        await runHttp(DURATION / ROUNDS, true);
      } else {
        await runHttp(DURATION / ROUNDS, true);
        runInProcess(DURATION / ROUNDS, true);
      }
    }
    const ours = summarise(inProcess, inDecisions);
    const theirs = summarise(overHttp, httpDecisions, cpu);
    results.push({
      id: `batch-${size}`,
      resourcesPerRequest: size,
      decisionsPerRequest: r2(inDecisions / inProcess.length),
      inProcess: ours,
      cerbos: theirs,
      ratioP50: r2(theirs.p50Us / ours.p50Us),
      ratioMean: r2(theirs.meanUs / ours.meanUs),
    });
  }

  const targets: Record<string, { description: string; value: number | null; ok: boolean | null }> = {};
  const one = results.find((r) => r.resourcesPerRequest === 1);
  targets.ratioAt1 = {
    description: `1 resource: in process ≥ ${MIN_RATIO_1}x faster than Cerbos (p50)`,
    value: one?.ratioP50 ?? null,
    ok: one ? one.ratioP50 >= MIN_RATIO_1 : null,
  };
  for (const size of [20, 50]) {
    const r = results.find((x) => x.resourcesPerRequest === size);
    targets[`usPerDecisionAt${size}`] = {
      description: `${size} resources: in process ≤ ${MAX_US_PER_DECISION} µs per resource × action`,
      value: r?.inProcess.usPerDecision ?? null,
      ok: r ? r.inProcess.usPerDecision <= MAX_US_PER_DECISION : null,
    };
  }

  const head = ['resources', 'decisions/req', 'in-process p50 µs', 'mean µs', 'p99 µs', 'µs/decision', 'Cerbos p50 µs', 'mean µs', 'p99 µs', 'µs/decision', 'Cerbos CPU µs/req', 'ratio p50', 'ratio mean'];
  const rows = results.map((r) => [
    String(r.resourcesPerRequest),
    String(r.decisionsPerRequest),
    String(r.inProcess.p50Us),
    String(r.inProcess.meanUs),
    String(r.inProcess.p99Us),
    String(r.inProcess.usPerDecision),
    String(r.cerbos.p50Us),
    String(r.cerbos.meanUs),
    String(r.cerbos.p99Us),
    String(r.cerbos.usPerDecision),
    String(r.cerbos.cpuUsPerRequest ?? '–'),
    `${r.ratioP50}x`,
    `${r.ratioMean}x`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(' | ')} |`;
  const out = [line(head), `|${widths.map((w) => `${'-'.repeat(w + 1)}:`).join('|')}|`, ...rows.map(line), ''];
  out.push('in process = compilePolicies(corpus).check(request); Cerbos = POST /api/check/resources over HTTP (keep-alive, sequential).');
  out.push('decision = one resource × action; ratio = Cerbos ÷ in process.');
  out.push('');
  for (const t of Object.values(targets)) out.push(`${t.ok === null ? 'SKIP' : t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value ?? '–'}`);
  console.log(`\n${out.join('\n')}\n`);

  const report = {
    timestamp,
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r2) },
    settings: { batches: BATCHES, requestsPerBatch: REQUESTS, durationSec: DURATION, warmupSec: WARMUP, rounds: ROUNDS, seed: SEED, skippedCases: [...SKIP], policies: corpus.docs.length, cases: cases.length, cerbos: '0.51.0 (npm cerbos), disk store, HTTP keep-alive' },
    identicalDecisions: compared,
    scenarios: results,
    targets,
  };
  writeResults('policies', report, timestamp, log);
  const missed = Object.values(targets).some((t) => t.ok === false);
  return missed && process.env.BENCH_STRICT === '1' ? 1 : 0;
}

await runBench(main, cleanup, log);
