// pg_dump and pg_restore for site backups (docs/backup.md). The binaries must match the server's
// major version (pg_dump refuses a newer server; an older pg_restore cannot read a newer dump):
// PG_BIN_DIR, else /usr/lib/postgresql/{major}/bin (Debian's layout), else the PATH. The password
// never reaches a command line: it goes in PGPASSWORD, the URL without it in --dbname.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type pg from 'pg';

export interface PgTools {
  dump: string;
  restore: string;
  /** The server's major version. */
  major: number;
}

/** The pg_dump and pg_restore for a server of `serverVersionNum` (`SHOW server_version_num`). */
export function pgTools(serverVersionNum: number, binDir?: string): PgTools {
  const major = Math.floor(serverVersionNum / 10000);
  const dir = binDir ?? [`/usr/lib/postgresql/${major}/bin`].find((d) => existsSync(path.join(d, 'pg_dump')));
  const bin = (name: string) => (dir ? path.join(dir, name) : name);
  return { dump: bin('pg_dump'), restore: bin('pg_restore'), major };
}

/** `--dbname` without the password, and the environment carrying it. */
export function connectionArgs(databaseUrl: string): { dbname: string; env: NodeJS.ProcessEnv } {
  const url = new URL(databaseUrl);
  const password = decodeURIComponent(url.password);
  url.password = '';
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.PGPASSWORD;
  if (password) env.PGPASSWORD = password;
  return { dbname: url.toString(), env };
}

export interface Run {
  /** The command's standard output (when it writes there). */
  stdout: Readable;
  /** Resolves when it exited 0; rejects with its last lines of stderr otherwise. */
  done: Promise<void>;
  /** Ends it if it still runs (its reader gave up). */
  stop(): void;
}

/** Runs a PostgreSQL client program; `what` names it in errors. */
export function runTool(command: string, args: string[], env: NodeJS.ProcessEnv, what: string): Run {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4000)));
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(err.code === 'ENOENT' ? `${what}: ${command} was not found; install the PostgreSQL client programs of the server's major version or set PG_BIN_DIR (docs/backup.md).` : `${what}: ${err.message}`)),
    );
    child.on('close', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${what} failed (${signal ?? `exit ${code}`}): ${stderr.trim() || 'no message'}`))));
  });
  done.catch(() => undefined); // the caller awaits it; an early failure must not be unhandled meanwhile
  return { stdout: child.stdout, done, stop: () => void (child.exitCode === null && child.signalCode === null && child.kill()) };
}

/** The rows of a statement on a connection of its own (backup, restore, site moves: no ORM). */
export async function queryRows<T>(client: pg.Client, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await client.query(sql, params)).rows as T[];
}
