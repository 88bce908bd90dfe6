// The servers under test run as child processes of the bench (never in the bench's own
// process, where the load generator runs). Each child is stopped by PID: SIGTERM, then
// SIGKILL after a grace period; a last-resort 'exit' hook kills any child still alive.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../shared/db/embedded.ts';
import { SERVER_NODE_FLAGS } from '../server/node-flags.ts';

let clockTicks: number | undefined;

/** CPU time (user + system, all threads) a process has used, in seconds; null where /proc is missing. */
export function cpuSeconds(pid: number): number | null {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    return (Number(fields[11]) + Number(fields[12])) / clockTicks; // utime, stime (fields 14 and 15)
  } catch {
    return null;
  }
}

export interface Child {
  name: string;
  url: string;
  pid: number;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** A child's output, prefixed with its name, goes to the bench's stderr; the tail is kept for errors. */
function relay(child: ChildProcess, name: string, tail: string[]): void {
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding('utf8');
    stream?.on('data', (text: string) => {
      tail.push(text);
      if (tail.length > 50) tail.shift();
      for (const line of text.split('\n')) if (line.trim()) process.stderr.write(`[${name}] ${line}\n`);
    });
  }
}

async function waitReady(url: string, child: ChildProcess, name: string, tail: string[], timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited during start (${child.exitCode ?? child.signalCode}): ${tail.join('').trim().slice(-800)}`);
    }
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} not ready within ${timeoutMs} ms`);
}

export interface SpawnOptions {
  env: Record<string, string>;
  /** Directory for a V8 CPU profile of the child (written when it exits). */
  cpuProfileDir?: string;
}

/** Starts `node <script>` with PORT set to a free port and waits until GET /readyz answers 200. */
export async function startChild(name: string, script: string, options: SpawnOptions): Promise<Child> {
  const port = await freePort();
  const execArgv = [
    ...(script === 'server.ts' ? SERVER_NODE_FLAGS : []),
    ...(options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`, `--cpu-prof-name=${name}.cpuprofile`] : []),
  ];
  const child = spawn(process.execPath, [...execArgv, path.resolve(import.meta.dirname, script)], {
    cwd: path.resolve(import.meta.dirname, '..'),
    env: { ...options.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (!child.pid) throw new Error(`could not start ${name}`);
  live.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => live.delete(child));
  const tail: string[] = [];
  relay(child, name, tail);
  const pid = child.pid;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitReady(url, child, name, tail, 60_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return { name, url, pid, stop };
}

/**
 * A bench's whole run: `main` (its exit code), then `cleanup` (children stopped by PID, the
 * database dropped) whatever happens, also on SIGINT/SIGTERM (exit 130); then the process exits.
 */
export async function runBench(main: () => Promise<number>, cleanup: () => Promise<void>, log: (line: string) => void): Promise<never> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  let code = 1;
  try {
    code = await main();
  } catch (err) {
    log(`failed: ${(err as Error).stack ?? err}`);
  } finally {
    await cleanup();
  }
  process.exit(code);
}

const NGINX = '/usr/sbin/nginx';

/**
 * nginx as a child (master + 1 worker, access log off) on a free port, with `http(port)` as the
 * rest of its http block (its server blocks); ready once `readyPath` answers 200. Stopped by its
 * PID; `worker` is its worker process, whose CPU time the benches measure.
 */
export async function startNginx(dir: string, http: (port: number) => string, readyPath: string): Promise<Child & { worker: number }> {
  const port = await freePort();
  const conf = path.join(dir, 'nginx.conf');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${http(port)}
}
`,
  );
  const child: ChildProcess = spawn(NGINX, ['-p', dir, '-c', conf, '-e', path.join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  if (!child.pid) throw new Error('could not start nginx');
  live.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const pid = child.pid;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    process.kill(pid, 'SIGTERM'); // the master: fast shutdown, its worker with it
    const timer = setTimeout(() => process.kill(pid, 'SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const url = `http://127.0.0.1:${port}`;
  const log = () => output + (fs.existsSync(path.join(dir, 'error.log')) ? fs.readFileSync(path.join(dir, 'error.log'), 'utf8') : '');
  for (const until = Date.now() + 10_000; ; ) {
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}): ${log()}`);
    const status = await fetch(url + readyPath, { signal: AbortSignal.timeout(1000) }).then((r) => r.status, () => 0);
    if (status === 200) break;
    if (Date.now() > until) {
      await stop();
      throw new Error(`nginx not ready (last answer ${status}): ${log()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const worker = Number(fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')[0]);
  return { name: 'nginx', url, pid, worker, stop };
}
