// Operator commands on the database: `platform migrate [--status]` and `platform serve`.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import pg from 'pg';
import { TEST_SECRET } from '../../server/test/helpers.ts';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { json, runCli, tempConfigDir } from './helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dbs: TestDatabase[] = [];
const dirs: string[] = [];

test.after.always(async () => {
  for (const db of dbs) await db.drop();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

async function freshDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase('cli');
  dbs.push(db);
  return db;
}

function env(db: { url: string }, extra: Record<string, string> = {}): Record<string, string> {
  const dir = tempConfigDir();
  dirs.push(dir);
  return {
    PATH: process.env.PATH ?? '',
    HOME: dir,
    PLATFORM_CONFIG_DIR: dir,
    PLATFORM_DATA_DIR: path.join(dir, 'data'),
    DATABASE_URL: db.url,
    PLATFORM_SECRET_KEY: TEST_SECRET,
    LOG_LEVEL: 'silent',
    ...extra,
  };
}

async function executedMigrations(db: TestDatabase): Promise<string[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query('SELECT name FROM platform_migrations ORDER BY id')).rows.map((r) => r.name);
  } finally {
    await client.end();
  }
}

test('migrate on a fresh database: direct mode refuses until then; progress on stderr; --status before and after', async (t) => {
  const db = await freshDatabase();
  const e = env(db);
  const refused = await runCli(['user', 'list', '--direct'], e);
  t.is(refused.code, 1);
  t.regex(refused.stderr, /^Error: The database schema is not current \(\d+ pending migrations?\): run `platform migrate` first\.\n$/);

  const before = json(await runCli(['migrate', '--status', '--json'], e));
  t.deepEqual(before.executed, []);
  t.true(before.pending.length > 0);

  const r = await runCli(['migrate'], e);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `Applied ${before.pending.length} migration(s); the platform schema is at ${before.pending.at(-1)}.\n`);
  t.is(r.stderr, [`Applying ${before.pending.length} platform migration(s): ${before.pending.join(', ')}`, ...before.pending.map((n: string) => `  applied ${n}`), ''].join('\n'));
  t.deepEqual(await executedMigrations(db), before.pending);

  const status = await runCli(['migrate', '--status'], e);
  t.is(status.code, 0);
  const width = Math.max('MIGRATION'.length, ...before.pending.map((n: string) => n.length));
  t.is(status.stdout, [`${'MIGRATION'.padEnd(width)}  STATUS`, ...before.pending.map((n: string) => `${n.padEnd(width)}  executed`), ''].join('\n'));

  const again = await runCli(['migrate', '--json'], e);
  t.deepEqual(json(again), { applied: [], current: before.pending.at(-1), tenants: { migrated: 0, failed: [] } });
  t.is((await runCli(['user', 'list', '--direct'], e)).stdout, '0 users\n');
});

test('prune: expired token-blacklist rows go, of the platform and of every site', async (t) => {
  const db = await freshDatabase();
  const e = env(db);
  t.is((await runCli(['migrate'], e)).code, 0);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await client.query(`INSERT INTO users (uuid, username, password) VALUES (gen_random_uuid(), 'u', 'x')`);
    await client.query(`INSERT INTO token_blacklist (jti, user_uuid, expires_at) SELECT gen_random_uuid(), uuid, e FROM users, (VALUES (now() - interval '1 second'), (now() + interval '1 hour')) v(e)`);
    const r = await runCli(['prune'], e);
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'Deleted 1 expired token-blacklist row(s).\n');
    t.deepEqual(json(await runCli(['prune', '--json'], e)), { deleted: 0 });
    t.is((await client.query('SELECT count(*)::int AS n FROM token_blacklist')).rows[0].n, 1);
  } finally {
    await client.end();
  }
});

test('serve: listens, answers, and stops cleanly on SIGTERM with exit code 0', async (t) => {
  const db = await freshDatabase();
  const e = env(db, { LOG_LEVEL: 'info', HOST: '127.0.0.1', PLATFORM_ADMIN_PASSWORD: 'serve-admin-pw-1' });
  const child = spawn(process.execPath, ['bin/run.js', 'serve', '--port', '0'], { cwd: ROOT, env: e, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve did not start:\n${stdout}\n${stderr}`)), 20_000);
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
        const m = /"url":"(http:[^"]+)"[^\n]*"platform listening"/.exec(stdout);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child.on('exit', () => reject(new Error(`serve exited:\n${stdout}\n${stderr}`)));
    });
    t.is((await fetch(`${url}/healthz`)).status, 200);
    const token = await fetch(`${url}/api/auth/jwt/token/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: 'serve-admin-pw-1' }),
    });
    t.is(token.status, 200); // migrated and bootstrapped
    child.kill('SIGTERM');
    t.is(await exited, 0);
    t.regex(stdout, /"msg":"platform stopped"/);
    await t.throwsAsync(fetch(`${url}/healthz`));
  } finally {
    child.kill('SIGKILL');
  }
});

test('serve with a bad configuration: one line on stderr, exit 1', async (t) => {
  const r = await runCli(['serve'], env({ url: 'postgres://127.0.0.1:1/none' }, { PORT: 'eighty' }));
  t.is(r.code, 1);
  t.is(r.stdout, '');
  t.is(r.stderr, 'Error: Configuration: PORT must be a whole number, got "eighty"\n');
});
