// Operator commands on the database: `platform migrate [--status]` and `platform serve`.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import pg from 'pg';
import { TEST_SECRET } from '../../server/test/helpers.ts';
import { killGroup, ROOT, serve } from '../../server/test/processes.ts';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { json, runCli, tempConfigDir } from './helpers.ts';

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

test('prune: expired token-blacklist rows, expired sessions and expired idempotency keys go', async (t) => {
  const db = await freshDatabase();
  const e = env(db);
  t.is((await runCli(['migrate'], e)).code, 0);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await client.query(`INSERT INTO users (uuid, username, password) VALUES (gen_random_uuid(), 'u', 'x')`);
    await client.query(`INSERT INTO token_blacklist (jti, user_uuid, expires_at) SELECT gen_random_uuid(), uuid, e FROM users, (VALUES (now() - interval '1 second'), (now() + interval '1 hour')) v(e)`);
    await client.query(
      `INSERT INTO sessions (key_hash, user_uuid, generation, expires_at) SELECT sha256(random()::text::bytea), uuid, 0, e FROM users, (VALUES (now() - interval '1 second'), (now() + interval '1 hour')) v(e)`,
    );
    await client.query(
      `INSERT INTO idempotency_keys (principal, key, fingerprint, operation, status, expires_at) SELECT 'p', e::text, 'f', 'op', 201, e FROM (VALUES (now() - interval '1 second'), (now() + interval '1 hour')) v(e)`,
    );
    const r = await runCli(['prune'], e);
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'Deleted 1 expired token-blacklist row(s), 1 expired session(s), 1 expired idempotency key(s) and 0 record change(s) past their retention (REALTIME_RETENTION_HOURS, REALTIME_RETENTION_ROWS).\n');
    t.deepEqual(json(await runCli(['prune', '--json'], e)), { deleted: 0, sessions: 0, idempotencyKeys: 0, changes: 0 });
    t.is((await client.query('SELECT count(*)::int AS n FROM idempotency_keys')).rows[0].n, 1);
    t.is((await client.query('SELECT count(*)::int AS n FROM token_blacklist')).rows[0].n, 1);
    t.is((await client.query('SELECT count(*)::int AS n FROM sessions WHERE expires_at > now()')).rows[0].n, 1);
    t.is((await client.query('SELECT count(*)::int AS n FROM sessions')).rows[0].n, 1);
  } finally {
    await client.end();
  }
});

test('serve: listens, answers, and stops cleanly on SIGTERM with exit code 0', async (t) => {
  const db = await freshDatabase();
  const e = env(db, { LOG_LEVEL: 'info', HOST: '127.0.0.1', PLATFORM_ADMIN_PASSWORD: 'serve-admin-pw-1' });
  const s = await serve(process.execPath, ['bin/run.js', 'serve', '--port', '0'], e);
  try {
    t.is((await fetch(`${s.url}/healthz`)).status, 200);
    const token = await fetch(`${s.url}/api/auth/jwt/token/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: 'serve-admin-pw-1' }),
    });
    t.is(token.status, 200); // migrated and bootstrapped
    s.child.kill('SIGTERM');
    t.is(await s.exited, 0);
    t.regex(s.output().stdout, /"msg":"platform stopped"/);
    await t.throwsAsync(fetch(`${s.url}/healthz`));
  } finally {
    killGroup(s.child);
  }
});

// A newcomer's shell: npm and npx on the machine's Node (20 here), the project's Node 24 only
// inside them. And the same with the project's Node first on the PATH.
const SYSTEM_PATH = (process.env.PATH ?? '').split(path.delimiter).filter((p) => !p.includes(`${path.sep}node_modules${path.sep}`)).join(path.delimiter);
const PROJECT_PATH = `${path.join(ROOT, 'node_modules', '.bin')}${path.delimiter}${SYSTEM_PATH}`;
/** stderr without what this machine's own npm configuration prints (not the project's doing). */
const projectNoise = (stderr: string) => stderr.split('\n').filter((l) => l && !/^npm warn Unknown (user|env) config /.test(l)).join('\n');

test('npx platform prints only the command output, on the system Node and on the project Node', async (t) => {
  for (const PATH of [SYSTEM_PATH, PROJECT_PATH]) {
    // A fresh npm cache: the first `npx platform` installs the project into npx's cache (where npm checked engines).
    const cache = tempConfigDir();
    dirs.push(cache);
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile('npx', ['platform', '--version'], { cwd: ROOT, env: { ...process.env, PATH, npm_config_cache: cache } }, (err, stdout, stderr) =>
        resolve({ code: err ? (err as { code?: number }).code ?? 1 : 0, stdout, stderr }));
    });
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^platform\/\d+\.\d+\.\d+ \S+ node-v24\./);
    t.is(projectNoise(r.stderr), '', PATH);
  }
});

test('npm start: SIGTERM to the npm process stops the server gracefully', async (t) => {
  const db = await freshDatabase();
  const e = { ...env(db, { LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: '0', PLATFORM_ADMIN_PASSWORD: 'serve-admin-pw-1' }), PATH: SYSTEM_PATH, HOME: process.env.HOME ?? '' };
  const s = await serve('npm', ['start'], e);
  try {
    t.is((await fetch(`${s.url}/healthz`)).status, 200);
    s.child.kill('SIGTERM'); // the npm process, as a process manager would
    await s.exited;
    t.regex(s.output().stdout, /"msg":"platform stopped"/);
    await t.throwsAsync(fetch(`${s.url}/healthz`));
    t.is(projectNoise(s.output().stderr), '');
  } finally {
    killGroup(s.child);
  }
});

test('serve with a bad configuration: one line on stderr, exit 1', async (t) => {
  const r = await runCli(['serve'], env({ url: 'postgres://127.0.0.1:1/none' }, { PORT: 'eighty' }));
  t.is(r.code, 1);
  t.is(r.stdout, '');
  t.is(r.stderr, 'Error: Configuration: PORT must be a whole number, got "eighty"\n');
});
