// Smoke test of the default path a new user takes: `platform serve` without DATABASE_URL
// starts the embedded PostgreSQL, survives restarts, stops it on SIGTERM, does not leave it
// running after a SIGKILL, and recovers from an orphaned cluster.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { freePort } from '../../shared/db/embedded.ts';
import { request } from './helpers.ts';

const root = path.resolve(import.meta.dirname, '../..');

interface Served {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

async function serve(dataDir: string): Promise<Served> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, PLATFORM_DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'info' };
  for (const name of ['DATABASE_URL', 'PLATFORM_SECRET_KEY', 'PLATFORM_ADMIN_PASSWORD', 'PLATFORM_ADMIN_USERNAME', 'REDIS_URL']) delete env[name];
  const child = spawn(process.execPath, [path.join(root, 'bin/run.js'), 'serve'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 120; i++) {
    if (child.exitCode !== null) throw new Error(`serve exited early:\n${out}\n${err}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return { child, url, stdout: () => out, stderr: () => err, exited };
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  child.kill('SIGKILL');
  throw new Error(`serve did not become ready:\n${out}\n${err}`);
}

const postmasterPid = (dataDir: string): number | undefined => {
  const file = path.join(dataDir, 'pg', 'postmaster.pid');
  return fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8').split('\n')[0]) : undefined;
};

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Waits up to `ms` for the process to be gone. */
async function gone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  return !alive(pid);
}

test('embedded default: first start, restart with data kept, clean stop, orphan recovery', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-embedded-'));
  const running: ChildProcess[] = [];
  try {
    // First start: a generated admin password is printed once on stderr, never logged.
    const first = await serve(dataDir);
    running.push(first.child);
    const match = /password: (\S+)/.exec(first.stderr());
    t.truthy(match, first.stderr());
    const password = match![1];
    t.false(first.stdout().includes(password));
    const login = await request(first.url, 'POST', '/api/auth/jwt/token/', { body: { username: 'admin', password } });
    t.is(login.status, 200);
    const created = await request(first.url, 'POST', '/api/cloud/users/', {
      token: login.body.access,
      body: { username: 'persisted', password: 'persisted-pass-1' },
    });
    t.is(created.status, 201);
    t.is(fs.statSync(path.join(dataDir, 'secret.key')).mode & 0o777, 0o600);
    const pgPid = postmasterPid(dataDir)!;
    t.true(alive(pgPid));

    // SIGTERM: clean exit, PostgreSQL stopped.
    first.child.kill('SIGTERM');
    t.is(await first.exited, 0);
    t.false(alive(pgPid));

    // Restart: data and signing key kept, no second password.
    const second = await serve(dataDir);
    running.push(second.child);
    t.false(/password: /.test(second.stderr()));
    const again = await request(second.url, 'POST', '/api/auth/jwt/token/', { body: { username: 'persisted', password: 'persisted-pass-1' } });
    t.is(again.status, 200);
    const refreshed = await request(second.url, 'POST', '/api/auth/jwt/token/refresh/', { body: { refresh: login.body.refresh } });
    t.is(refreshed.status, 200, 'a token signed before the restart is still valid');

    // SIGKILL of the server: its watchdog stops PostgreSQL within a few seconds.
    const owned = postmasterPid(dataDir)!;
    second.child.kill('SIGKILL');
    await second.exited;
    t.true(await gone(owned, 10_000), 'PostgreSQL outlived the killed server');

    // Server and watchdog both killed leave PostgreSQL orphaned; the next start stops it and starts afresh.
    const third = await serve(dataDir);
    running.push(third.child);
    const orphan = postmasterPid(dataDir)!;
    const { watchdog } = JSON.parse(fs.readFileSync(path.join(dataDir, 'pg-owner.json'), 'utf8'));
    t.true(Number.isInteger(watchdog) && alive(watchdog));
    process.kill(watchdog, 'SIGKILL');
    third.child.kill('SIGKILL');
    await third.exited;
    t.true(alive(orphan));
    const fourth = await serve(dataDir);
    running.push(fourth.child);
    t.false(alive(orphan));
    t.is((await request(fourth.url, 'POST', '/api/auth/jwt/token/', { body: { username: 'persisted', password: 'persisted-pass-1' } })).status, 200);
    fourth.child.kill('SIGTERM');
    t.is(await fourth.exited, 0);
  } finally {
    for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    const pid = postmasterPid(dataDir);
    if (pid && alive(pid)) process.kill(pid, 'SIGQUIT');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
