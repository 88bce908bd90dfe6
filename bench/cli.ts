// `npm run bench:cli`: how long a `platform` command takes to start and answer, the way an
// operator types it. Each line is the median wall time of BENCH_CLI_RUNS (7) runs, after one
// warm-up run (the compile cache filled), of:
//   launcher   bin/platform (the README's `platform` on PATH), started by a shell whose PATH
//              holds the system Node 20 first, from inside the project and from a directory
//              outside it;
//   npx        `npx platform …` inside the project (outside it, npx has no `platform` to run:
//              tried once, reported as failing with its exit code);
// for `--version`, and `user list` against a running server (remote: one HTTP request) and
// `user list --direct` (the database in process). Baseline: `node -e 0` with the same Node 24,
// the floor of any Node command. Target: every launcher command ≤ 0.5 s.
// Setup (not measured): a fresh database (bench/database.ts), the platform child, a login stored
// in a scratch config directory.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBench, startChild, type Child } from './children.ts';
import { openBenchDatabase, type BenchDatabase } from './database.ts';
import { ADMIN, envNumber, serverEnv } from './records-setup.ts';
import { machineInfo, reproduceCommand, writeResults } from './report.ts';

const RUNS = envNumber('BENCH_CLI_RUNS', 7);
const TARGET_S = 0.5;
const ROOT = path.resolve(import.meta.dirname, '..');
const SECRET = randomBytes(32).toString('hex');
const log = (line: string) => console.error(`[bench:cli] ${line}`);

let db: BenchDatabase | undefined;
let platform: Child | undefined;
let scratch: string | undefined;
const cleanup = async () => {
  await platform?.stop();
  await db?.close().catch((err) => log(`dropping the bench database failed: ${err.message}`));
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
};

interface Line {
  how: string;
  where: 'inside' | 'outside';
  command: string;
  medianS: number | null;
  minS: number | null;
  exit: number;
  target?: 'ok' | 'over';
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Runs `argv` `runs` times (plus a warm-up) in `cwd`, each at most 60 s; the times of the runs and the last exit code. */
function time(argv: string[], cwd: string, env: NodeJS.ProcessEnv, runs = RUNS): { times: number[]; exit: number; stderr: string } {
  const times: number[] = [];
  let exit = 0;
  let stderr = '';
  for (let i = 0; i <= runs; i++) {
    const t0 = performance.now();
    const r = spawnSync(argv[0]!, argv.slice(1), { cwd, env, encoding: 'utf8', timeout: 60_000 });
    const s = (performance.now() - t0) / 1000;
    exit = r.status ?? 128;
    stderr = r.stderr;
    if (i > 0) times.push(s);
  }
  return { times, exit, stderr };
}

async function main(): Promise<number> {
  db = await openBenchDatabase(log);
  platform = await startChild('platform', 'server.ts', { env: serverEnv(db.url, SECRET) });
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-bench-cli-'));
  const outside = path.join(scratch, 'elsewhere');
  fs.mkdirSync(outside);
  // A PATH whose `node` is the system's (Node 20 on these machines), the project's Node 24 not on it.
  const systemPath = (process.env.PATH ?? '').split(':').filter((dir) => !dir.includes('node_modules')).join(':');
  const systemNode = spawnSync('node', ['--version'], { env: { PATH: systemPath }, encoding: 'utf8' }).stdout.trim();
  const env = { PATH: systemPath, HOME: scratch, PLATFORM_CONFIG_DIR: scratch, PLATFORM_SECRET_KEY: SECRET, DATABASE_URL: db.url, LOG_LEVEL: 'warn' };
  const login = spawnSync(path.join(ROOT, 'bin/platform'), ['login', '--api-url', platform.url, '--username', ADMIN.username, '--password', ADMIN.password], { env, encoding: 'utf8' });
  if (login.status !== 0) throw new Error(`login failed: ${login.stderr}`);
  log(`system node ${systemNode}; ${RUNS} runs each`);

  const launcher = path.join(ROOT, 'bin/platform');
  const npxEnv = { ...env, PATH: process.env.PATH ?? '' }; // npx as installed (npm's own Node)
  const commands: [string, string[]][] = [
    ['--version', ['--version']],
    ['user list', ['user', 'list', '--page-size', '5']],
    ['user list --direct', ['user', 'list', '--page-size', '5', '--direct']],
  ];
  const lines: Line[] = [];
  const bare = time([path.join(ROOT, 'node_modules/.bin/node'), '-e', '0'], ROOT, env);
  lines.push({ how: 'baseline: node -e 0', where: 'inside', command: '-', medianS: median(bare.times), minS: Math.min(...bare.times), exit: bare.exit });
  for (const [name, args] of commands) {
    for (const where of ['inside', 'outside'] as const) {
      const cwd = where === 'inside' ? ROOT : outside;
      const l = time([launcher, ...args], cwd, env);
      if (l.exit !== 0) log(`launcher ${name} (${where}) exited ${l.exit}: ${l.stderr.trim()}`);
      const m = median(l.times);
      lines.push({ how: 'launcher', where, command: name, medianS: m, minS: Math.min(...l.times), exit: l.exit, target: m <= TARGET_S ? 'ok' : 'over' });
      // Outside the project npx has no `platform`: it asks the registry (seconds to minutes), then fails. Tried once.
      const n = time(['npx', '--no-install', 'platform', ...args], cwd, npxEnv, where === 'inside' ? RUNS : 0);
      lines.push({ how: 'npx', where, command: name, medianS: n.exit === 0 ? median(n.times) : null, minS: n.exit === 0 ? Math.min(...n.times) : null, exit: n.exit });
    }
  }
  const fmt = (s: number | null) => (s === null ? 'fails' : s.toFixed(3));
  console.log(`| how | where | command | median s | min s | exit | ≤ ${TARGET_S} s |`);
  console.log('|---|---|---|---:|---:|---:|---|');
  for (const l of lines) console.log(`| ${l.how} | ${l.where} | ${l.command} | ${fmt(l.medianS)} | ${fmt(l.minS)} | ${l.exit} | ${l.target ?? ''} |`);
  const timestamp = new Date().toISOString();
  writeResults('cli', { timestamp, machine: machineInfo(), systemNode, runs: RUNS, command: reproduceCommand('bench:cli'), lines }, timestamp, log);
  return lines.some((l) => l.target === 'over') ? 1 : 0;
}

await runBench(main, cleanup, log);
