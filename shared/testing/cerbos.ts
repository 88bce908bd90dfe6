// Test and bench utility: the Cerbos PDP (the reference for our policy engine, npm `cerbos`,
// binary `@cerbos/cerbos-<os>-<arch>`) as a child process on a disk store of given policies.
//
// startCerbos(docs) writes, into a fresh temp dir, `policies/NNN-<policy id>.json` (one file per document,
// `apiVersion: api.cerbos.dev/v1` added when missing) and `config.yaml` (HTTP and gRPC on free
// loopback ports, `storage.driver: disk`, no watching, no audit, no telemetry), spawns the binary,
// waits until `GET /_cerbos/health` answers 200 and returns `{url, pid, stop()}`. stop() kills by
// the PID it spawned (SIGTERM, then SIGKILL) and removes the temp dir. If the policies do not
// compile, Cerbos exits at start and the error carries its log. compileCerbosPolicies(docs) runs
// `cerbos compile` on the same layout (for checking a corpus without a server).
//
// CERBOS_BIN overrides the binary's path; if the binary is absent, both throw a clear error.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../db/embedded.ts';
import { policyId, type PolicyDocument } from '../policies/model.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface CerbosServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  pid: number;
  /** The temp dir holding config.yaml and policies/. */
  dir: string;
  /** The last lines Cerbos logged. */
  logTail(): string;
  stop(): Promise<void>;
}

export interface StartCerbosOptions {
  /** Cerbos' log level (default `error`); its output goes nowhere unless `echo`. */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** Copy Cerbos' log lines to stderr. */
  echo?: boolean;
  /** Extra config (merged at the top level of config.yaml, e.g. `{engine: {...}}`). */
  config?: Record<string, unknown>;
  /** How long to wait for the health check (default 30 s). */
  timeoutMs?: number;
}

/** The path of the Cerbos binary, or a clear error when it is not installed. */
export function cerbosBinary(): string {
  const fromEnv = process.env.CERBOS_BIN;
  if (fromEnv) {
    if (!fs.existsSync(fromEnv)) throw new Error(`CERBOS_BIN=${fromEnv}: no such file`);
    return fromEnv;
  }
  const pkg = `@cerbos/cerbos-${process.platform}-${process.arch}`;
  let file: string;
  try {
    file = path.join(path.dirname(createRequire(path.join(ROOT, 'package.json')).resolve(`${pkg}/package.json`)), `cerbos-${process.platform}-${process.arch}`);
  } catch {
    throw new Error(
      `The Cerbos binary is not installed: package ${pkg} not found (the optional dependency @cerbos/cerbos-linux-x64 is the only ` +
        `platform build this registry has; elsewhere set CERBOS_BIN to a cerbos 0.51 binary).`,
    );
  }
  if (!fs.existsSync(file)) throw new Error(`The Cerbos binary is missing: ${file} (reinstall ${pkg}, or set CERBOS_BIN).`);
  return file;
}

/** Writes the documents as policies/NNN-<policy id>.json under `dir`; returns that directory. */
export function writePolicyDir(dir: string, docs: PolicyDocument[]): string {
  const policies = path.join(dir, 'policies');
  fs.mkdirSync(policies, { recursive: true });
  docs.forEach((doc, i) => {
    const body = { apiVersion: 'api.cerbos.dev/v1', ...doc };
    const name = `${String(i).padStart(3, '0')}-${policyId(doc).replace(/[^\w.-]+/g, '.')}.json`;
    fs.writeFileSync(path.join(policies, name), `${JSON.stringify(body, null, 2)}\n`);
  });
  return policies;
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'cerbos-'));
}

/** `cerbos compile` on the documents: resolves with its output, rejects with it when compilation fails. */
export async function compileCerbosPolicies(docs: PolicyDocument[]): Promise<string> {
  const bin = cerbosBinary();
  const dir = tempDir();
  try {
    const policies = writePolicyDir(dir, docs);
    return await new Promise<string>((resolve, reject) => {
      execFile(bin, ['compile', '--skip-tests', policies], { env: { ...process.env, CERBOS_NO_TELEMETRY: '1' } }, (err, stdout, stderr) => {
        const out = `${stdout}${stderr}`.trim();
        if (err) reject(new Error(`cerbos compile failed:\n${out}`));
        else resolve(out);
      });
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Starts Cerbos on the documents (see the file's head). */
export async function startCerbos(docs: PolicyDocument[], options: StartCerbosOptions = {}): Promise<CerbosServer> {
  const bin = cerbosBinary();
  const dir = tempDir();
  let child: ChildProcess | undefined;
  const tail: string[] = [];
  const logTail = () => tail.join('').trim().slice(-4000);
  const removeDir = () => fs.rmSync(dir, { recursive: true, force: true });
  try {
    const policies = writePolicyDir(dir, docs);
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const config = {
      server: { httpListenAddr: `127.0.0.1:${httpPort}`, grpcListenAddr: `127.0.0.1:${grpcPort}` },
      storage: { driver: 'disk', disk: { directory: policies, watchForChanges: false } },
      audit: { enabled: false },
      telemetry: { disabled: true },
      ...options.config,
    };
    // JSON is YAML.
    const configFile = path.join(dir, 'config.yaml');
    fs.writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);
    child = spawn(bin, ['server', `--config=${configFile}`, `--log-level=${options.logLevel ?? 'error'}`], {
      cwd: dir,
      env: { ...process.env, CERBOS_NO_TELEMETRY: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (!child.pid) throw new Error(`could not spawn ${bin}`);
    live.add(child);
    const proc = child;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    void exited.then(() => live.delete(proc));
    for (const stream of [proc.stdout, proc.stderr]) {
      stream?.setEncoding('utf8');
      stream?.on('data', (text: string) => {
        tail.push(text);
        if (tail.length > 100) tail.shift();
        if (options.echo) for (const line of text.split('\n')) if (line.trim()) process.stderr.write(`[cerbos] ${line}\n`);
      });
    }
    const url = `http://127.0.0.1:${httpPort}`;
    const pid = proc.pid!;
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        if (proc.exitCode === null && proc.signalCode === null) {
          process.kill(pid, 'SIGTERM');
          const timer = setTimeout(() => {
            if (proc.exitCode === null && proc.signalCode === null) process.kill(pid, 'SIGKILL');
          }, 5000);
          await exited;
          clearTimeout(timer);
        }
        removeDir();
      })());
    const until = Date.now() + (options.timeoutMs ?? 30_000);
    for (;;) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        await stop();
        throw new Error(`cerbos exited during start (${proc.exitCode ?? proc.signalCode}):\n${logTail()}`);
      }
      try {
        const res = await fetch(`${url}/_cerbos/health`, { signal: AbortSignal.timeout(1000) });
        if (res.ok) break;
      } catch {
        /* not listening yet */
      }
      if (Date.now() > until) {
        await stop();
        throw new Error(`cerbos not healthy within ${options.timeoutMs ?? 30_000} ms:\n${logTail()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return { url, pid, dir, logTail, stop };
  } catch (err) {
    if (child?.pid && child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
    removeDir();
    throw err;
  }
}

/** POST a JSON body to Cerbos; throws with the answer when it is not 200. */
export async function cerbosPost<T>(server: Pick<CerbosServer, 'url'>, route: string, body: unknown): Promise<T> {
  const res = await fetch(`${server.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`cerbos ${route}: ${res.status} ${text.slice(0, 1000)}`);
  return JSON.parse(text) as T;
}
