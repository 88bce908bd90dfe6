// A real PgBouncer (Debian's `pgbouncer` package) in transaction pooling mode in front of a
// PostgreSQL, for tests and benchmarks: its own configuration in a temporary directory, a free
// port on 127.0.0.1, started as a child process and stopped by its PID (never by name).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export const PGBOUNCER = process.env.PGBOUNCER_PATH || '/usr/sbin/pgbouncer';
export const pgbouncerMissing = fs.existsSync(PGBOUNCER) ? null : `no PgBouncer at ${PGBOUNCER} (apt-get install pgbouncer, or set PGBOUNCER_PATH)`;

export interface PgBouncer {
  port: number;
  /** `databaseUrl` (a URL of the PostgreSQL behind it) through the proxy: same user, same database or `alias`. */
  url(databaseUrl: string, alias?: string): string;
  /** A statement on the admin console (`SHOW STATS`, `SHOW POOLS`…). */
  admin<T = Record<string, string>>(command: string): Promise<T[]>;
  /** What it logged. */
  output(): string;
  close(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server connections per database and user (default_pool_size, default 20). */
  poolSize?: number;
  /** Databases of their own name (and so pools of their own) for a database: alias → database name. */
  aliases?: Record<string, string>;
  /** More [pgbouncer] settings (`max_prepared_statements`, …). */
  settings?: Record<string, string | number>;
}

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** Starts PgBouncer in front of the PostgreSQL of `serverUrl` (an admin URL; its user logs in to the proxy without a password: auth_type=trust). */
export async function startPgBouncer(serverUrl: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
  if (pgbouncerMissing) throw new Error(pgbouncerMissing);
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username) || 'postgres';
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgbouncer-'));
  fs.chmodSync(dir, 0o755); // readable by the user it runs as
  const settings: Record<string, string | number> = {
    listen_addr: '127.0.0.1',
    listen_port: port,
    unix_socket_dir: '',
    auth_type: 'trust',
    auth_file: path.join(dir, 'users.txt'),
    admin_users: user,
    pool_mode: 'transaction',
    default_pool_size: options.poolSize ?? 20,
    max_client_conn: 1000,
    ...options.settings,
  };
  const target = `host=${server.hostname} port=${server.port || 5432}`;
  const databases = [...Object.entries(options.aliases ?? {}).map(([alias, name]) => `${alias} = ${target} dbname=${name}`), `* = ${target}`];
  const ini = ['[databases]', ...databases, '[pgbouncer]', ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`)].join('\n');
  fs.writeFileSync(path.join(dir, 'pgbouncer.ini'), `${ini}\n`, { mode: 0o644 });
  // Clients log in without a password (trust); PgBouncer logs in to PostgreSQL with the URL's.
  fs.writeFileSync(path.join(dir, 'users.txt'), `"${user}" "${decodeURIComponent(server.password).replaceAll('"', '""')}"\n`, { mode: 0o600 });
  // It refuses to run as root: then it runs as the `postgres` system user.
  const asRoot = process.getuid?.() === 0 ? ['-u', 'postgres'] : [];
  const child: ChildProcess = spawn(PGBOUNCER, [...asRoot, path.join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`PgBouncer did not start:\n${log}`)), 10_000);
    const read = (d: Buffer) => {
      log += d.toString();
      if (log.includes('process up')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', () => reject(new Error(`PgBouncer exited:\n${log}`)));
  }).catch((err: unknown) => {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  const through = (databaseUrl: string, alias?: string) => {
    const u = new URL(databaseUrl);
    if (alias) u.pathname = `/${alias}`;
    u.hostname = '127.0.0.1';
    u.port = String(port);
    return u.toString();
  };
  return {
    port,
    url: through,
    async admin<T>(command: string) {
      const u = new URL(through(serverUrl));
      u.pathname = '/pgbouncer';
      const client = new pg.Client({ connectionString: u.toString() });
      await client.connect();
      try {
        return (await client.query(command)).rows as T[];
      } finally {
        await client.end();
      }
    },
    output: () => log,
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM'); // by its PID
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
