// Server processes for black-box tests: `platform serve` (or `npm start`) as a real child
// process, in a process group of its own so that a test can always clean up after itself.
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { TestDatabase } from '../../shared/testing/database.ts';
import { ADMIN, TEST_SECRET, type ApiResponse } from './helpers.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface Served {
  child: ChildProcess;
  url: string;
  output: () => { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

/**
 * Starts a server process (`command args`) in a process group of its own and waits for its
 * "platform listening" log line. `killGroup(s.child)` kills that group (whatever the test left running).
 */
export async function serve(command: string, args: string[], e: Record<string, string>): Promise<Served> {
  const child = spawn(command, args, { cwd: ROOT, env: e, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`serve did not start:\n${stdout}\n${stderr}`));
    }, 60_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      const m = /"url":"(http:[^"]+)"[^\n]*"platform listening"/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', () => reject(new Error(`serve exited:\n${stdout}\n${stderr}`)));
  });
  return { child, url, output: () => ({ stdout, stderr }), exited };
}

/** Kills the process group the test started (by its leader's PID), if anything of it is left. */
export function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    /* already gone */
  }
}

/**
 * `n` `platform serve` processes on one test database: the first migrates, the others do not
 * (`--no-migrate`). `env` adds to the shared environment (Redis, limits); `each[i]` to process i's alone.
 */
export async function serveMany(db: TestDatabase, n: number, env: Record<string, string> = {}, each: Record<string, string>[] = []): Promise<Served[]> {
  const all = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    DATABASE_URL: db.url,
    PLATFORM_SECRET_KEY: TEST_SECRET,
    PLATFORM_ADMIN_USERNAME: ADMIN.username,
    PLATFORM_ADMIN_PASSWORD: ADMIN.password,
    PLATFORM_DATA_DIR: path.join(os.tmpdir(), db.name), // unused: DATABASE_URL and PLATFORM_SECRET_KEY are set
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info', // serve() waits for the "platform listening" line
    ...env,
  };
  const started: Served[] = [];
  try {
    started.push(await serve(process.execPath, ['bin/run.js', 'serve'], { ...all, ...each[0] }));
    // The others once the first has migrated, together.
    const rest = await Promise.allSettled(Array.from({ length: n - 1 }, (_, i) => serve(process.execPath, ['bin/run.js', 'serve', '--no-migrate'], { ...all, ...each[i + 1] })));
    for (const r of rest) if (r.status === 'fulfilled') started.push(r.value);
    const failed = rest.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return started;
  } catch (err) {
    await Promise.all(started.map(stopServed));
    throw err;
  }
}

/** Two of them (serveMany); `envB` adds to B's environment alone. */
export async function serveTwo(db: TestDatabase, env: Record<string, string> = {}, envB: Record<string, string> = {}): Promise<{ a: Served; b: Served }> {
  const [a, b] = await serveMany(db, 2, env, [{}, envB]);
  return { a: a!, b: b! };
}

/** SIGTERM, up to 10 s to stop, then whatever is left of its process group is killed. */
export async function stopServed(s: Served | undefined): Promise<void> {
  if (!s) return;
  s.child.kill('SIGTERM');
  await Promise.race([s.exited, new Promise((r) => setTimeout(r, 10_000))]);
  killGroup(s.child);
}

/** Polls `probe` (on the other process) until `ok`, for at most a second; the last answer. */
export async function within1s(probe: () => Promise<ApiResponse>, ok: (res: ApiResponse) => boolean): Promise<ApiResponse> {
  const until = Date.now() + 1000;
  let res = await probe();
  while (!ok(res) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 25));
    res = await probe();
  }
  return res;
}
