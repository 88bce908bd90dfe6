// Ctrl-C (SIGINT) in the CLI: one line `interrupted: …` saying what was changed, exit 130. The
// API is a server that answers the first write and then never answers: the command is caught
// mid-request, as a person would stop it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import test from 'ava';
import { tempConfigDir, type CliResult } from './helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
let server: http.Server;
let url: string;
let dir: string;
/** Requests received and left waiting, by path: the test interrupts once one arrives. */
const waiting = new Map<string, () => void>();

test.before(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      // The first batch of edges is stored; everything else waits forever.
      if (req.method === 'POST' && req.url?.endsWith('/edges/') && !waiting.has('first-batch')) {
        waiting.set('first-batch', () => undefined);
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ total: 1, results: [] }));
        return;
      }
      waiting.get(`${req.method} ${req.url?.split('?')[0]}`)?.();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  dir = tempConfigDir();
  const creds = { access: 'a', refresh: 'r', username: 'op' };
  fs.writeFileSync(path.join(dir, 'credentials.json'), JSON.stringify({ version: 1, apis: { [url]: creds, [`${url}/sites/shop`]: creds } }), { mode: 0o600 });
});
test.after.always(() => {
  server?.closeAllConnections();
  server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs `platform …args`, sends SIGINT once the API holds `request` (METHOD /path), and waits for the end. */
function interrupt(args: string[], request: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = { PATH: process.env.PATH!, HOME: dir, PLATFORM_CONFIG_DIR: dir, PLATFORM_API_URL: url, LOG_LEVEL: 'silent' };
    const child = spawn(process.execPath, ['bin/run.js', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    waiting.set(request, () => child.kill('SIGINT'));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no ${request} arrived\n${stdout}\n${stderr}`));
    }, 30_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      waiting.delete(request);
      resolve({ code: code ?? (signal ? 128 : 0), stdout, stderr });
    });
  });
}

test.serial('a read: nothing was changed, exit 130', async (t) => {
  const r = await interrupt(['user', 'list'], 'GET /api/cloud/users/');
  t.is(r.code, 130);
  t.is(r.stdout, '');
  t.is(r.stderr, '\ninterrupted: nothing was changed\n');
});

test.serial('--json: the error body on stdout', async (t) => {
  const r = await interrupt(['user', 'get', 'alice', '--json'], 'GET /api/cloud/users/alice/');
  t.is(r.code, 130);
  t.deepEqual(JSON.parse(r.stdout), { status: 'error', code: 'INTERRUPTED', message: 'interrupted: nothing was changed' });
});

test.serial('a write without its answer: named, it may have been applied', async (t) => {
  const r = await interrupt(['user', 'create', '--username', 'zed', '--email', 'zed@example.com', '--password', 'Zed-pass-word-1'], 'POST /api/cloud/users/');
  t.is(r.code, 130);
  t.is(r.stderr, '\ninterrupted: POST /api/cloud/users/ had no answer yet: it may have been applied, check before retrying\n');
});

test.serial('writes in steps: the ones made are said', async (t) => {
  const edges = JSON.stringify([
    { from_id: 1, to_id: 2, type: 't' },
    { from_id: 2, to_id: 3, type: 't' },
  ]);
  const edgesPath = '/sites/shop/api/apps/crm/datatables/people/edges/';
  const r = await interrupt(['edges', 'create', '--site', 'shop', '--app', 'crm', '--table', 'people', '--data', edges, '--batch-size', '1'], `POST ${edgesPath}`);
  t.is(r.code, 130);
  t.is(r.stderr.split('\n').at(-2), `interrupted: POST ${edgesPath} had no answer yet: it may have been applied, check before retrying; 1 change was made before (POST ${edgesPath})`);
});
