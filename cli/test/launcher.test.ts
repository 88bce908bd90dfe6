// The README's `platform` on PATH: a link to bin/platform, run from a directory outside the
// project by a shell whose `node` is the system's (Node 20 here), in remote and direct mode.
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { ADMIN, startTestServer, TEST_SECRET, type TestServer } from '../../server/test/helpers.ts';
import { storeLogin, tempConfigDir } from './helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
let s: TestServer;
let home: string;
let env: Record<string, string>;

test.before(async () => {
  s = await startTestServer();
  home = tempConfigDir();
  await storeLogin(s, home);
  // As the README says: a link in a directory of the PATH; the project's node_modules not on it.
  const bin = path.join(home, 'bin');
  fs.mkdirSync(bin);
  fs.symlinkSync(path.join(ROOT, 'bin/platform'), path.join(bin, 'platform'));
  const systemPath = (process.env.PATH ?? '').split(':').filter((dir) => !dir.includes('node_modules'));
  env = { PATH: [bin, ...systemPath].join(':'), HOME: home, PLATFORM_CONFIG_DIR: home, PLATFORM_API_URL: s.url, DATABASE_URL: s.db.url, PLATFORM_SECRET_KEY: TEST_SECRET, LOG_LEVEL: 'silent' };
});
test.after.always(async () => {
  await s?.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

/** Runs `platform …` as a shell would find it on PATH (asynchronously: the server answers in this process). */
const platform = (args: string[], cwd: string) => promisify(execFile)('platform', args, { cwd, env, encoding: 'utf8' });
const outside = () => fs.mkdtempSync(path.join(os.tmpdir(), 'platform-elsewhere-'));

test('the PATH of these runs has an older system Node first (or none): the launcher brings its own', (t) => {
  const found = spawnSync('node', ['--version'], { env, encoding: 'utf8' });
  if (found.error) return t.pass('no system node at all: the launcher still runs (below)');
  t.true(Number(found.stdout.trim().slice(1).split('.')[0]) < 24, `system node ${found.stdout.trim()}`);
});

test('platform --version from outside the project', async (t) => {
  const { stdout: out } = await platform(['--version'], outside());
  t.regex(out, /^platform\/\d+\.\d+\.\d+ .* node-v24\./);
});

test('a remote and a direct command from outside the project answer alike', async (t) => {
  const cwd = outside();
  const remote = await platform(['user', 'get', ADMIN.username, '--json'], cwd);
  const direct = await platform(['user', 'get', ADMIN.username, '--json', '--direct'], cwd);
  t.is(JSON.parse(direct.stdout).username, ADMIN.username);
  t.deepEqual(JSON.parse(direct.stdout), JSON.parse(remote.stdout));
});
