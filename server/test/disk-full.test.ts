// A full disk answers 507 INSUFFICIENT_STORAGE, and leaves nothing half-written (issue 29 #14),
// on real full filesystems: tmpfs mounts of a few hundred KiB made by the test (it needs root,
// as the test machines run it; elsewhere it is skipped, saying why, except in CI) for the object
// store, for spooled uploads (TMPDIR) and for a tablespace of the test's own PostgreSQL.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { ownPostgres, type OwnPostgres } from './dependencies.ts';
import { IN_CI, capturingLog, startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

/** A tmpfs of `size` at a new temp dir, or why not. */
function tinyFilesystem(size: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0777`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    fs.rmdirSync(dir);
    throw new Error(`cannot mount a tmpfs here (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})`);
  }
  return dir;
}

let why: string | undefined;
const mounts: string[] = [];
try {
  for (const size of ['1m', '256k', '1m']) mounts.push(tinyFilesystem(size));
} catch (err) {
  why = (err as Error).message;
}
const [storageDir, spoolDir, tablespaceDir] = mounts;
const run = why && !IN_CI ? test.serial.skip : test.serial;
const title = (text: string) => (why && !IN_CI ? `${text} (skipped: ${why})` : text);

let pgOwn: OwnPostgres;
let s: TestServer;
let a: TestSite;
let appId = 0;
const tok: Record<string, string> = {};
const logged = capturingLog();
const B = '/api/apps/crm/storage/buckets/';
const D = (table: string) => `/api/apps/crm/datatables/${table}/data/`;
const schema: TableSchema = { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] };
const on = (method: string, p: string, options: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {}) =>
  s.api(method, p, { host: a.domain, token: tok.adminA, ...options });
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const count = async (table: string) => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_${table}"`))[0].n);

test.before(async () => {
  if (why) return;
  pgOwn = await ownPostgres();
  await pgOwn.createDatabase('platform');
  s = await startTestServer({ DATABASE_URL: pgOwn.url('platform'), STORAGE_DIR: storageDir! }, { log: logged.log });
  ({ a } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a]);
  await createTables((method, p, body) => on(method, p, { body }), [['main', 'big', schema], ['main', 'imported', schema]]);
  // The postgres system user runs the cluster (as root): the tablespace's directory is its.
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
  fs.chownSync(tablespaceDir!, uid, uid);
  await sql(`CREATE TABLESPACE tiny LOCATION '${tablespaceDir}'`);
  await sql(`ALTER TABLE "${a.schema}"."a${appId}_big" SET TABLESPACE tiny`);
});
test.after.always(async () => {
  await s?.close();
  await pgOwn?.close();
  for (const dir of mounts) {
    execFileSync('umount', [dir]);
    fs.rmdirSync(dir);
  }
});

const storageFull = { status: 'error', code: 'INSUFFICIENT_STORAGE', message: 'Not enough storage space to complete the request; nothing was written.', detail: 'Insufficient storage.' };

run(title('issue 29 #14: an upload onto a full disk (a 1 MiB filesystem) answers 507 INSUFFICIENT_STORAGE, stores nothing and leaves no staged or temp file; a small one then succeeds'), async (t) => {
  t.is((await on('POST', B, { body: { name: 'files', app_category: 'attachments' } })).status, 201);
  const big = await on('PUT', `${B}files/objects/big.bin`, { raw: Buffer.alloc(2 * 1024 * 1024, 7), headers: { 'Content-Type': 'application/octet-stream' } });
  t.is(big.status, 507, big.text);
  t.deepEqual(big.body, storageFull);
  const files = fs.readdirSync(storageDir!, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  t.deepEqual(files.map((e) => e.name), [], 'no staged or temp file left');
  t.is((await on('GET', `${B}files/objects/big.bin`)).status, 404);
  const small = await on('PUT', `${B}files/objects/small.bin`, { raw: Buffer.alloc(10 * 1024, 7), headers: { 'Content-Type': 'application/octet-stream' } });
  t.true(small.status === 200 || small.status === 201, small.text);
  t.is(logged.lines.filter((l) => l.includes('storage full')).length, 1);
});

run(title('issue 29 #14: a CSV import whose spooled body fills the disk (TMPDIR on a 256 KiB filesystem) answers 507, imports nothing and leaves no spool file'), async (t) => {
  const tmp = process.env.TMPDIR;
  process.env.TMPDIR = spoolDir;
  try {
    const csv = `id,label\n${Array.from({ length: 20_000 }, (_, i) => `${i + 1},label number ${i + 1}\n`).join('')}`;
    t.true(csv.length > 256 * 1024);
    const res = await on('POST', `${D('imported')}import/`, { raw: csv, headers: { 'Content-Type': 'text/csv' } });
    t.is(res.status, 507, res.text);
    t.deepEqual(res.body, storageFull);
    t.deepEqual(fs.readdirSync(spoolDir!), []);
    t.is(await count('imported'), 0);
  } finally {
    process.env.TMPDIR = tmp;
  }
});

run(title('issue 29 #14: PostgreSQL out of disk space (SQLSTATE 53100: the table on a full 1 MiB tablespace) answers 507; the bulk create wrote nothing'), async (t) => {
  const records = Array.from({ length: 5_000 }, (_, i) => ({ id: i + 1, label: 'x'.repeat(500) }));
  const res = await on('POST', D('big'), { body: records });
  t.is(res.status, 507, res.text);
  t.deepEqual(res.body, storageFull);
  t.is(await count('big'), 0);
  t.is((await on('POST', D('big'), { body: { id: 1, label: 'small' } })).status, 201);
  t.is(await count('big'), 1);
});
