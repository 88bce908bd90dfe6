// The bench's database: a fresh database (dropped at the end) on BENCH_DATABASE_URL, else
// TEST_DATABASE_URL, else an embedded PostgreSQL started in a temporary directory.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { hashPassword } from '../shared/auth/passwords.ts';
import { EmbeddedPostgres } from '../shared/db/embedded.ts';

export interface BenchDatabase {
  /** Connection URL of the fresh database (what the servers get as DATABASE_URL). */
  url: string;
  /** Where it runs: `BENCH_DATABASE_URL`, `TEST_DATABASE_URL` or `embedded`. */
  source: string;
  /** `SELECT version()` of the server. */
  version: string;
  /** Drops the database, then stops the embedded PostgreSQL (if any) and removes its directory. */
  close(): Promise<void>;
}

/** `fn` on a connection of its own to `url`, closed afterwards. */
export async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * The large table of the backup and move benches in the site schema `schema` (quoted): `rows` rows
 * by generate_series, as a materialized data table has them (a primary key and an index), analysed.
 */
export async function createPeopleTable(c: pg.Client, schema: string, rows: number): Promise<void> {
  await c.query(`CREATE TABLE ${schema}.people (id bigint PRIMARY KEY, name text NOT NULL, email text, age integer, city text, created_at timestamptz, score double precision)`);
  await c.query(
    `INSERT INTO ${schema}.people SELECT i, 'Person ' || i, 'person' || i || '@example.com', abs(hashint4(i)) % 100, 'City ' || (abs(hashint4(i + 7)) % 500),
            timestamptz '2024-01-01' + (i || ' seconds')::interval, (abs(hashint4(i + 13)) % 10000) / 100.0 FROM generate_series(1, $1::int) i`,
    [rows],
  );
  await c.query(`CREATE INDEX people_age_idx ON ${schema}.people (age)`);
  await c.query(`VACUUM ANALYZE ${schema}.people`);
}

export async function openBenchDatabase(log: (msg: string) => void): Promise<BenchDatabase> {
  let serverUrl = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL;
  let source = process.env.BENCH_DATABASE_URL ? 'BENCH_DATABASE_URL' : 'TEST_DATABASE_URL';
  let embedded: EmbeddedPostgres | undefined;
  let tmp: string | undefined;
  if (!serverUrl) {
    source = 'embedded';
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-bench-pg-'));
    embedded = new EmbeddedPostgres(tmp, { log: { info: (m) => log(`[embedded-pg] ${m}`), error: (m) => log(`[embedded-pg] ${m}`) } });
    await embedded.start();
    serverUrl = embedded.url('postgres');
  }
  const admin = serverUrl;
  const name = `bench_${randomBytes(6).toString('hex')}`;
  const stopEmbedded = async () => {
    await embedded?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  };
  let version: string;
  try {
    version = await withClient(admin, async (c) => {
      await c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`);
      return (await c.query<{ version: string }>('SELECT version()')).rows[0].version;
    });
  } catch (err) {
    await stopEmbedded();
    throw err;
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  let closed = false;
  return {
    url: url.toString(),
    source,
    version,
    async close() {
      if (closed) return;
      closed = true;
      try {
        await withClient(admin, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
      } finally {
        await stopEmbedded();
      }
    },
  };
}

export const SEED_PASSWORD = 'bench-password-2024';
export const seedUsername = (i: number) => `bench${String(i).padStart(5, '0')}`;

/**
 * Fills `users` up to `total` rows (the admin the server created counts) with one INSERT …
 * SELECT over generate_series. Every row reuses ONE argon2 hash: hashing is ~75 ms by design,
 * 10,000 of them would be 12 minutes of CPU. `date_joined` is distinct per row, as in life.
 */
export async function seedUsers(url: string, total: number): Promise<number> {
  const hash = await hashPassword(SEED_PASSWORD);
  return withClient(url, async (c) => {
    const { rows } = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM users');
    const missing = Math.max(0, total - rows[0].n);
    await c.query(
      `INSERT INTO users (uuid, username, email, first_name, last_name, password, date_joined, modified)
       SELECT gen_random_uuid(), 'bench' || lpad(i::text, 5, '0'), 'bench' || lpad(i::text, 5, '0') || '@example.com',
              'Bench', 'User ' || i, $1, now() - interval '1 day' + i * interval '1 second', now()
         FROM generate_series(1, $2::int) AS i`,
      [hash, missing],
    );
    await c.query('ANALYZE users');
    return (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM users')).rows[0].n;
  });
}
