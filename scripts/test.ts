// `npm test`: runs AVA against a real PostgreSQL. TEST_DATABASE_URL when set (CI points it
// at the machine's server); otherwise an embedded cluster in a temporary directory, started
// here once and stopped at the end. Ends with the line `N passed, N failed`.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedPostgres } from '../shared/db/embedded.ts';

const root = path.resolve(import.meta.dirname, '..');
let embedded: EmbeddedPostgres | undefined;
let tmp: string | undefined;
const env = { ...process.env };

if (!env.TEST_DATABASE_URL) {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-test-pg-'));
  embedded = new EmbeddedPostgres(tmp, { log: { info: (m) => console.error(`[embedded-pg] ${m}`), error: (m) => console.error(`[embedded-pg] ${m}`) } });
  await embedded.start();
  env.TEST_DATABASE_URL = embedded.url('postgres');
}

let passed = 0;
let failed = 0;

/** One AVA run (TAP on stdout), counting its results; its exit code. */
async function ava(extra: string[], alone?: '0' | '1'): Promise<number> {
  const args = [path.join(root, 'node_modules/ava/entrypoints/cli.js'), '--tap', ...extra];
  const child = spawn(process.execPath, args, { cwd: root, env: alone ? { ...env, TEST_ALONE: alone } : env, stdio: ['ignore', 'pipe', 'inherit'] });
  let buffer = '';
  child.stdout.on('data', (chunk: Buffer) => {
    process.stdout.write(chunk);
    buffer += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (/^ok \d+/.test(line) && !/# SKIP/i.test(line)) passed++;
      else if (/^not ok \d+/.test(line) && !/# TODO/i.test(line)) failed++;
    }
  });
  return new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
}

// Given files or options: one run of those. Else every file, then the timing-sensitive ones alone (ava.config.js).
const given = process.argv.slice(2);
let code = given.length ? await ava(given) : await ava([], '0');
if (!given.length) code = (await ava(['--concurrency', '1'], '1')) || code;

if (embedded) await embedded.stop();
if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
if (code !== 0 && failed === 0) failed = 1; // AVA itself failed (no files, a crash, a timeout)
console.log(`${passed} passed, ${failed} failed`);
process.exit(code === 0 && failed === 0 ? 0 : 1);
