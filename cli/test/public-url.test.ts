// Direct mode's absolute links (pagination) name the public URL the server was configured with
// (PLATFORM_PUBLIC_URL, recorded in the database at start), though the CLI's own environment
// does not carry it; the server's answer and the CLI's agree.
import fs from 'node:fs';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, json, runCli, storeLogin, tempConfigDir } from './helpers.ts';

const PUBLIC = 'https://api.example.test';
let s: TestServer;
let dir: string;

test.before(async () => {
  s = await startTestServer({ PLATFORM_PUBLIC_URL: PUBLIC });
  dir = tempConfigDir();
  await storeLogin(s, dir);
  const { access } = await s.login();
  for (const username of ['pu-1', 'pu-2']) {
    const res = await s.api('POST', '/api/cloud/users/', { token: access, body: { username, email: `${username}@example.com`, password: 'Public-url-pass-1' } });
    if (res.status !== 201) throw new Error(res.text);
  }
});
test.after.always(async () => {
  await s?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('direct mode: the next link is on the server\'s public URL, as the remote answer', async (t) => {
  const env = cliEnv(s, dir); // no PLATFORM_PUBLIC_URL here: HOST and PORT of this process would give another origin
  const remote = await runCli(['user', 'list', '--page-size', '1', '--json'], env);
  const direct = await runCli(['user', 'list', '--page-size', '1', '--json', '--direct'], env);
  t.is(direct.code, 0, direct.stderr + direct.stdout);
  t.true(json(remote).next.startsWith(`${PUBLIC}/api/cloud/users/?`), json(remote).next);
  t.is(json(direct).next, json(remote).next);
  // This process's own PLATFORM_PUBLIC_URL still wins.
  const own = await runCli(['user', 'list', '--page-size', '1', '--json', '--direct'], { ...env, PLATFORM_PUBLIC_URL: 'https://cli.example.test' });
  t.true(json(own).next.startsWith('https://cli.example.test/api/cloud/users/?'));
});
