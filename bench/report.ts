// The bench's output: a table on stdout and the same figures as JSON in bench/results/
// (latest.json and a timestamped copy; both ignored by git).
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

export function formatTable(report: Report): string {
  const head = ['scenario', 'platform req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'baseline req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'overhead', 'CPU ratio'];
  const rows = report.scenarios.map((s) => [
    s.title,
    fixed(s.platform.requestsPerSec, 1),
    fixed(s.platform.p50Ms, 2),
    fixed(s.platform.p99Ms, 2),
    fixed(s.platform.serverCpuUsPerRequest, 0),
    fixed(s.baseline.requestsPerSec, 1),
    fixed(s.baseline.p50Ms, 2),
    fixed(s.baseline.p99Ms, 2),
    fixed(s.baseline.serverCpuUsPerRequest, 0),
    `${fixed(s.overheadRatio, 2)}x`,
    `${fixed(s.cpuRatio, 2)}x`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const sep = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  const out = [line(head), sep, ...rows.map(line), ''];
  out.push('overhead = baseline req/s ÷ platform req/s; CPU ratio = platform ÷ baseline server CPU per request.');
  out.push(`overhead per round: ${report.scenarios.map((s) => `${s.id} ${s.roundRatios.join(' / ')}`).join('; ')}`);
  out.push('');
  for (const t of Object.values(report.targets)) out.push(`${t.ok ? 'PASS' : 'MISS'}  ${t.description}: ${t.value}`);
  for (const p of report.problems) out.push(`INVALID  ${p}`);
  return out.join('\n');
}

/** Writes latest.json and <ISO timestamp>.json; returns the paths. */
export function writeReport(report: Report, dir: string): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const json = JSON.stringify(report, null, 2) + '\n';
  const files = [path.join(dir, 'latest.json'), path.join(dir, `${report.timestamp.replace(/:/g, '-')}.json`)];
  for (const file of files) fs.writeFileSync(file, json);
  return files;
}
