// `platform worker …` (issue 31): deploy a folder (packed here, progress on stderr) creating the
// worker, deploy again storing only the changed file, list builds, activate (roll forward and
// back), in both modes; a folder with a symbolic link is refused before anything is sent.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, siteWithLogin, homeOf, volatile } from './helpers.ts';

let s: TestServer;
let schema: string;
let configDir: string;
let dist: string;
// Both modes store builds in one directory (STORAGE_DIR), as a server and the CLI on its machine do.
const storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-workers-store-'));
const env = () => cliEnv(s, configDir, { STORAGE_DIR: storageDir });
const both = bothModesMacro(env);

function write(dir: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
}


test.before(async () => {
  s = await startTestServer({ STORAGE_DIR: storageDir });
  ({ site: { schema }, configDir } = await siteWithLogin(s));
  dist = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-dist-'));
  write(dist, { 'index.html': '<title>v1</title>', 'assets/app-1a2b3c4d.js': 'console.log(1)', 'robots.txt': 'User-agent: *' });
});
test.after.always(async () => {
  await s?.close();
  for (const dir of [configDir, dist, storageDir]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test.serial('worker deploy creates the worker from a folder; a second deploy stores only the changed file; builds and activate in both modes', async (t) => {
  const first = await runCli(['worker', 'deploy', dist, '--name', 'CLI Shop', '--subdomain', 'cli-shop', '--activate', '--site', schema, '--json'], env());
  t.is(first.code, 0, first.stderr);
  t.regex(first.stderr, /Packed 3 files/);
  t.regex(first.stderr, /Uploading .*\.tar\.gz/);
  const made = json(first);
  t.like(made, { worker: { slug: 'cli-shop', subdomain: 'cli-shop' }, build: { status: 'ready', is_active: true, file_count: 3, stored_files: 3 } });
  t.regex(await homeOf(s.url, 'cli-shop.localhost'), /v1/);

  write(dist, { 'index.html': '<title>v2</title>' });
  const second = await runCli(['worker', 'deploy', dist, '--subdomain', 'cli-shop', '--title', 'Release 2', '--site', schema, '--direct'], env());
  t.is(second.code, 0, second.stderr);
  t.regex(second.stdout, /Build uploaded to cli-shop/);
  t.regex(second.stderr, /3 files: 1 to send, the site holds the others/, 'only the changed file goes');
  t.regex(second.stdout, /files: +3 \(1 new\)/);
  t.regex(second.stdout, /Not active/);
  t.regex(await homeOf(s.url, 'cli-shop.localhost'), /v1/, 'not activated');

  const builds = await runCli(['worker', 'builds', 'cli-shop', '--site', schema, '--json'], env());
  t.is(builds.code, 0, builds.stderr);
  const release = json(builds).data.find((b: { title: string }) => b.title === 'Release 2');
  t.truthy(release);
  const activate = await runCli(['worker', 'activate', release.uuid, '--worker', 'cli-shop', '--site', schema], env());
  t.is(activate.code, 0, activate.stderr);
  t.regex(activate.stdout, new RegExp(`Build ${release.uuid} is active`));
  t.regex(await homeOf(s.url, 'cli-shop.localhost'), /v2/);
  const back = await runCli(['worker', 'activate', made.build.uuid, '--worker', 'cli-shop', '--site', schema, '--direct'], env());
  t.is(back.code, 0, back.stderr);
  t.regex(await homeOf(s.url, 'cli-shop.localhost'), /v1/, 'rolled back');
});

test.serial('worker list and builds: the same answer in both modes', both, {
  args: () => ['worker', 'builds', 'cli-shop', '--site', schema],
  normalize: volatile,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /Release 2/);
    t.regex(r.stdout, /2 builds/);
  },
});

test.serial('worker deploy of a folder with a symbolic link: refused, nothing sent', async (t) => {
  const bad = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-bad-'));
  try {
    write(bad, { 'index.html': 'x' });
    fs.symlinkSync('/etc/passwd', path.join(bad, 'passwd'));
    const r = await runCli(['worker', 'deploy', bad, '--name', 'Bad', '--subdomain', 'cli-bad', '--site', schema], env());
    t.is(r.code, 1);
    t.regex(r.stderr, /passwd/);
    t.is((await s.handle.db.orm.em.fork().getConnection().execute(`SELECT count(*)::int AS n FROM "${schema}".frontend_workers WHERE slug = 'cli-bad'`))[0].n, 0);
  } finally {
    fs.rmSync(bad, { recursive: true, force: true });
  }
});
