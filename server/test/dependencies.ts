// Dependencies a fault test may freeze, stop and restart: a PostgreSQL cluster and a Redis of the
// test's own, on free ports in temporary directories (never the machine's shared ones). Every
// signal goes to a process the test started, by its PID (PostgreSQL: the postmaster and each of
// its children, found by their parent PID in /proc: a backend is a session of its own, so a
// process-group signal would miss it).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { EmbeddedPostgres, freePort } from '../../shared/db/embedded.ts';

const quiet = { info: () => undefined, error: () => undefined };

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The PIDs of `pid`'s children (Linux /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export interface OwnPostgres {
  /** The URL of database `name` (created by createDatabase). */
  url(name?: string): string;
  createDatabase(name: string): Promise<void>;
  /** The postmaster's PID now. */
  pid(): number;
  /** SIGSTOP to the postmaster and its children (backends, background processes); thaw() sends SIGCONT. */
  freeze(): void;
  thaw(): void;
  /** An immediate stop (SIGQUIT, as `pg_ctl stop -m immediate`): no checkpoint, every connection cut. */
  crash(): Promise<void>;
  /** Starts it again on the same port and data. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function ownPostgres(): Promise<OwnPostgres> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-fault-pg-'));
  const port = await freePort();
  let cluster = new EmbeddedPostgres(dir, { port, log: quiet });
  await cluster.start();
  const pid = () => Number(fs.readFileSync(path.join(cluster.clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  let frozen = false;
  const self: OwnPostgres = {
    url: (name = 'postgres') => cluster.url(name),
    createDatabase: (name) => cluster.ensureDatabase(name),
    pid,
    freeze() {
      const leader = pid();
      process.kill(leader, 'SIGSTOP'); // first: it forks no new backend meanwhile
      for (const child of childrenOf(leader)) process.kill(child, 'SIGSTOP');
      frozen = true;
    },
    thaw() {
      const leader = pid();
      for (const child of childrenOf(leader)) process.kill(child, 'SIGCONT');
      process.kill(leader, 'SIGCONT');
      frozen = false;
    },
    async crash() {
      const leader = pid();
      process.kill(leader, 'SIGQUIT');
      await until('PostgreSQL to exit', () => !alive(leader));
    },
    async restart() {
      cluster = new EmbeddedPostgres(dir, { port, log: quiet });
      await cluster.start();
    },
    async close() {
      if (frozen) self.thaw();
      await cluster.stop().catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return self;
}

/** Rows of a query through a fresh connection (never the server's pool). */
export async function freshQuery<T>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

export interface OwnRedis {
  url: string;
  pid: number;
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

/** redis-server (on the PATH) on a free port, without persistence. */
export async function ownRedis(): Promise<OwnRedis> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-fault-redis-'));
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  await until('redis-server to start', () => out.includes('Ready to accept connections') || child.exitCode !== null);
  if (child.exitCode !== null) throw new Error(`redis-server exited: ${out}`);
  const pid = child.pid!;
  let frozen = false;
  return {
    url: `redis://127.0.0.1:${port}`,
    pid,
    freeze() {
      process.kill(pid, 'SIGSTOP');
      frozen = true;
    },
    thaw() {
      process.kill(pid, 'SIGCONT');
      frozen = false;
    },
    async close() {
      if (frozen) process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGTERM');
      await until('redis-server to exit', () => child.exitCode !== null || child.signalCode !== null);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
