// Black-box CLI harness: the real `platform` binary as a child process, against a real
// server (remote mode) and the same database (direct mode). `bothModes` runs one command
// in both modes and asserts that exit code, stdout and stderr are identical.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { hashPassword } from '../../shared/auth/passwords.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { ADMIN, IN_CI, TEST_SECRET, type TestServer } from '../../server/test/helpers.ts';
import pg from 'pg';
import { testServerUrl } from '../../shared/testing/database.ts';
import { pgTools, type PgTools } from '../../shared/backup/pg-tools.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

export type Mode = 'remote' | 'direct';
export const MODES: Mode[] = ['remote', 'direct'];

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Parsed stdout (for --json runs). */
export const json = (r: CliResult): any => JSON.parse(r.stdout);

/** What the server at `base` serves at `/` for `host` (a site's or a worker's address). */
export function homeOf(base: string, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http.get(new URL('/', base), { headers: { Host: host }, agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve(text));
    }).on('error', reject);
  });
}

/** A fresh, private config directory (where `login` keeps its credentials). */
export function tempConfigDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'platform-cli-test-'));
}

/**
 * Stores a login in `configDir` as `platform login` does (tokens from the API), without a
 * CLI process: the login command itself is tested in auth.test.ts.
 */
export async function storeLogin(s: TestServer, configDir: string, username = ADMIN.username, password = ADMIN.password): Promise<void> {
  const tokens = await s.login(username, password);
  const file = path.join(configDir, 'credentials.json');
  fs.writeFileSync(file, JSON.stringify({ version: 1, apis: { [s.url]: { ...tokens, username } } }), { mode: 0o600 });
}

/** The logins stored in `configDir` (a profile's: credentials.json version 2, or a version 1 file's). */
export function storedLogins(configDir: string, profile = 'default'): Record<string, { access: string; refresh: string; username: string }> {
  const data = JSON.parse(fs.readFileSync(path.join(configDir, 'credentials.json'), 'utf8'));
  return data.version === 1 ? data.apis : (data.profiles[profile]?.apis ?? {});
}

/** The environment of a CLI process talking to `s`: remote through its URL, direct through its database. */
export function cliEnv(s: TestServer, configDir: string, extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: configDir,
    PLATFORM_API_URL: s.url,
    PLATFORM_CONFIG_DIR: configDir,
    DATABASE_URL: s.db.url,
    PLATFORM_SECRET_KEY: TEST_SECRET,
    HOST: '127.0.0.1',
    PORT: String(s.handle.port),
    LOG_LEVEL: 'silent',
    ...extra,
  };
  for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
  return env as Record<string, string>;
}

/** Runs `platform …args` to completion (stdin closed: non-interactive). */
export function runCli(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/run.js', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`platform ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 0), stdout, stderr });
    });
  });
}

/** Progress lines (indented, ending in `…`): a transfer prints one a second, so a slow run has them and a fast one not. */
export const withoutProgress = (text: string): string => text.replace(/^ {2}\S.*…\n/gm, '');

/** Replaces what must differ between two runs that each create something: ids, times, the mode tag; drops progress lines. */
export function volatile(text: string): string {
  return withoutProgress(text)
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/\d{4}-\d\d-\d\d \d\d:\d\d/g, '<time>')
    .replace(/\b(remote|direct)\b/g, '<mode>');
}

export interface BothModesSpec {
  /** The command line; a function when each mode needs its own names (creates, deletes). */
  args: string[] | ((mode: Mode) => string[]);
  /** Applied to stdout and stderr before comparing (e.g. `volatile`); the default compares raw text. */
  normalize?: (text: string) => string;
  /** Further assertions on each run (state read back through the API, …). */
  check?: (t: ExecutionContext, result: CliResult, mode: Mode) => void | Promise<void>;
}

/**
 * The AVA macro: the same command in remote mode, then with --direct; both outputs and exit
 * codes must be identical. `env(mode)` gives the process environment.
 */
export function bothModesMacro(env: () => Record<string, string>) {
  return test.macro(async (t, spec: BothModesSpec) => {
    const results = {} as Record<Mode, CliResult>;
    for (const mode of MODES) {
      const args = typeof spec.args === 'function' ? spec.args(mode) : spec.args;
      results[mode] = await runCli(mode === 'direct' ? [...args, '--direct'] : args, env());
    }
    const { remote, direct } = results;
    const norm = spec.normalize ?? ((x: string) => x);
    t.is(direct.code, remote.code, `exit codes differ\nremote stderr: ${remote.stderr}\ndirect stderr: ${direct.stderr}`);
    t.is(norm(direct.stdout), norm(remote.stdout), 'stdout differs between remote and direct mode');
    t.is(norm(direct.stderr), norm(remote.stderr), 'stderr differs between remote and direct mode');
    for (const mode of MODES) await spec.check?.(t, results[mode], mode);
  });
}

export const SITE_PASSWORD = 'Site-pass-word-1';

/**
 * A new site with a staff user `boss`, signed in: its access token (for seeding through the
 * API) and a new config dir holding its login for `<api-url>/sites/<schema>` (remote mode).
 */
export async function siteWithLogin(s: TestServer): Promise<{ site: TestSite; admin: string; configDir: string }> {
  const em = s.handle.db.orm.em.fork();
  const site = await createTestSite(em);
  await em.execute(`INSERT INTO "${site.schema}".users (uuid, username, password, is_staff) VALUES (gen_random_uuid(), 'boss', ?, true)`, [await hashPassword(SITE_PASSWORD)]);
  const res = await s.api('POST', `/sites/${site.schema}/api/auth/jwt/token/`, { body: { username: 'boss', password: SITE_PASSWORD } });
  if (res.status !== 200) throw new Error(res.text);
  const configDir = tempConfigDir();
  fs.writeFileSync(path.join(configDir, 'credentials.json'), JSON.stringify({ version: 1, apis: { [`${s.url}/sites/${site.schema}`]: { ...res.body, username: 'boss' } } }), { mode: 0o600 });
  return { site, admin: res.body.access, configDir };
}

/**
 * Why pg_dump cannot dump the test PostgreSQL here, or null: its client programs must be of the
 * server's major version (the one shared/backup/pg-tools.ts picks, PG_BIN_DIR as the CLI reads it).
 * `npm test` without TEST_DATABASE_URL runs an embedded PostgreSQL 18, whose client programs
 * Debian 12 lacks: the tests that dump it skip there, saying why. In CI (.ci/run: the machine's
 * PostgreSQL 15 and its client) they run, and fail if they cannot.
 */
export async function pgDumpMissing(): Promise<string | null> {
  if (IN_CI) return null;
  const client = new pg.Client({ connectionString: testServerUrl() });
  await client.connect();
  let tools: PgTools;
  try {
    tools = pgTools(Number((await client.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`)).rows[0]!.v), process.env.PG_BIN_DIR);
  } finally {
    await client.end();
  }
  try {
    const found = /\b(\d+)\.\d+/.exec(execFileSync(tools.dump, ['--version'], { encoding: 'utf8' }))?.[1];
    return Number(found) === tools.major ? null : `pg_dump ${found ?? '?'} cannot dump the test PostgreSQL ${tools.major} (install its client programs, or set TEST_DATABASE_URL)`;
  } catch {
    return `no pg_dump for the test PostgreSQL ${tools.major} (install its client programs, or set TEST_DATABASE_URL)`;
  }
}
