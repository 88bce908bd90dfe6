// The benches' output: a table on stdout and the same figures as JSON in bench/results/
// ({bench}-latest.json and a timestamped copy; both ignored by git). When the scenarios carry the
// CPU of the servers' PostgreSQL backends (`npm run bench:hotpath`), the table shows it next
// to the server's, their sum, and the ratios platform ÷ baseline.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Measurement } from './load.ts';

export interface ScenarioResult {
  id: string;
  title: string;
  request: string;
  platform: Measurement;
  baseline: Measurement;
  /** baseline req/s ÷ platform req/s: how many times slower the platform serves the same path. */
  overheadRatio: number;
  /** The same ratio per round (P B | B P | …): its spread shows how steady the machine was. */
  roundRatios: number[];
  /** platform ÷ baseline server CPU per request: the overhead without the machine's noise. */
  cpuRatio: number | null;
  /** platform ÷ baseline CPU per request of server and PostgreSQL backends together (when measured). */
  totalCpuRatio?: number | null;
}

export interface Target {
  description: string;
  value: number;
  limit: number;
  ok: boolean;
}

export interface Report {
  timestamp: string;
  machine: Record<string, unknown>;
  database: { source: string; version: string; users: number };
  settings: Record<string, unknown>;
  scenarios: ScenarioResult[];
  targets: Record<string, Target>;
  valid: boolean;
  problems: string[];
}

export const PROFILE_RATIO_LIMIT = 2.0;
export const PROFILE_P99_LIMIT_MS = 25;

export function machineInfo(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model,
    totalMemoryMiB: Math.round(os.totalmem() / 2 ** 20),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    loadAverageAtStart: os.loadavg().map((n) => Math.round(n * 100) / 100),
  };
}

export function targets(scenarios: ScenarioResult[]): Record<string, Target> {
  const profile = scenarios.find((s) => s.id === 'profile');
  if (!profile) return {};
  const ratio = profile.overheadRatio;
  const p99 = profile.platform.p99Ms;
  return {
    profileOverheadRatio: { description: `profile GET overhead ratio ≤ ${PROFILE_RATIO_LIMIT}`, value: ratio, limit: PROFILE_RATIO_LIMIT, ok: ratio <= PROFILE_RATIO_LIMIT },
    profileP99: { description: `platform profile GET p99 < ${PROFILE_P99_LIMIT_MS} ms`, value: p99, limit: PROFILE_P99_LIMIT_MS, ok: p99 < PROFILE_P99_LIMIT_MS },
  };
}

const fixed = (n: number | null, digits: number) => (n === null || Number.isNaN(n) ? '–' : n.toFixed(digits));

/** Server + PostgreSQL backends CPU per request, in µs (null unless both were measured). */
export const totalCpuUs = (m: Measurement) => (m.serverCpuUsPerRequest === null || m.dbCpuUsPerRequest === null ? null : m.serverCpuUsPerRequest + m.dbCpuUsPerRequest);

export function formatTable(report: Pick<Report, 'scenarios' | 'targets' | 'problems'>): string {
  const withDb = report.scenarios.some((s) => s.platform.dbCpuUsPerRequest !== null && s.platform.dbCpuUsPerRequest !== undefined);
  const side = (m: Measurement) => [
    fixed(m.requestsPerSec, 1),
    fixed(m.p50Ms, 2),
    fixed(m.p99Ms, 2),
    fixed(m.serverCpuUsPerRequest, 0),
    ...(withDb ? [fixed(m.dbCpuUsPerRequest, 0), fixed(totalCpuUs(m), 0)] : []),
  ];
  const sideHead = (who: string) => [`${who} req/s`, 'p50 ms', 'p99 ms', withDb ? 'srv µs/req' : 'CPU µs/req', ...(withDb ? ['pg µs/req', 'Σ µs/req'] : [])];
  // bench:hotpath reads throughput as platform ÷ baseline (≥ 0.8 wanted); npm run bench:auth as overhead, baseline ÷ platform.
  const head = ['scenario', ...sideHead('platform'), ...sideHead('baseline'), withDb ? 'req/s P÷B' : 'overhead', 'CPU ratio'];
  const rows = report.scenarios.map((s) => [
    s.title,
    ...side(s.platform),
    ...side(s.baseline),
    `${fixed(withDb ? s.platform.requestsPerSec / s.baseline.requestsPerSec : s.overheadRatio, 2)}x`,
    `${fixed(withDb ? (s.totalCpuRatio ?? null) : s.cpuRatio, 2)}x`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const sep = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  const out = [line(head), sep, ...rows.map(line), ''];
  if (withDb) {
    out.push('srv = CPU of the server process, pg = CPU of its PostgreSQL backends, Σ = both, per response (µs);');
    out.push('req/s P÷B = platform ÷ baseline req/s; CPU ratio = platform Σ ÷ baseline Σ.');
    out.push(`req/s P÷B per round: ${report.scenarios.map((s) => `${s.id} ${s.roundRatios.map((r) => fixed(1 / r, 2)).join(' / ')}`).join('; ')}`);
  } else {
    out.push('overhead = baseline req/s ÷ platform req/s; CPU ratio = platform ÷ baseline server CPU per request.');
    out.push(`overhead per round: ${report.scenarios.map((s) => `${s.id} ${s.roundRatios.join(' / ')}`).join('; ')}`);
  }
  out.push('');
  for (const t of Object.values(report.targets)) out.push(`${t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value}`);
  for (const p of report.problems) out.push(`INVALID  ${p}`);
  return out.join('\n');
}

/** bench/results/{name}-latest.json and a timestamped copy (not committed). */
export function writeResults(name: string, report: unknown, timestamp: string, log: (line: string) => void): void {
  const dir = path.join(import.meta.dirname, 'results');
  fs.mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(report, null, 2)}\n`;
  const files = [path.join(dir, `${name}-latest.json`), path.join(dir, `${name}-${timestamp.replace(/:/g, '-')}.json`)];
  for (const f of files) fs.writeFileSync(f, json);
  log(`written: ${files.map((f) => path.relative(process.cwd(), f)).join(', ')}`);
}

/** The command that reproduces a run of `npm run {script}`: the BENCH_* variables it was given (a URL's password hidden). */
export function reproduceCommand(script: string): string {
  const quote = (v: string) => (/^[\w@%+=:,./-]*$/.test(v) ? v : `'${v.replace(/'/g, `'\\''`)}'`);
  const hide = (v: string) => v.replace(/^([a-z]+:\/\/[^:/@]+):[^@]*@/i, '$1:***@');
  const vars = Object.entries(process.env)
    .filter(([k, v]) => v !== undefined && (k.startsWith('BENCH_') || (k === 'TEST_DATABASE_URL' && !process.env.BENCH_DATABASE_URL)))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${quote(hide(v!))}`);
  return [...vars, `npm run ${script}`].join(' ');
}
