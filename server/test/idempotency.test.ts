// Idempotency-Key on record creates and uploads (issue 29 #14): a client whose answer was lost
// retries with the same key and gets the first answer back, with one write, never two; another
// request under the key is a 422, one sent while the first runs a 409; keys are per principal and
// per site; a failed request gives its key back; expired or abandoned keys are taken again.
import http from 'node:http';
import test from 'ava';
import { pruneIdempotencyKeys } from '../../shared/db/idempotency.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type ApiResponse, type TestServer } from './helpers.ts';
import { seedSiteUser, siteToken, twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const NOTES = '/api/apps/crm/datatables/notes/data/';
const BUCKET = '/api/apps/crm/storage/buckets/files/objects/';
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (method: string, path: string, o: { body?: unknown; raw?: string; key?: string; who?: string; site?: TestSite; headers?: Record<string, string> } = {}) =>
  s.api(method, path, { host: (o.site ?? a).domain, token: tok[o.who ?? 'adminA'], body: o.body, raw: o.raw, headers: { ...(o.key === undefined ? {} : { 'Idempotency-Key': o.key }), ...o.headers } });
const notes = async (site: TestSite = a): Promise<string[]> => (await sql(`SELECT title FROM "${site.schema}".${await noteTable(site)} ORDER BY title`)).map((r) => String(r.title));
const noteTable = async (site: TestSite) => `"a${(await sql(`SELECT id FROM "${site.schema}".apps WHERE slug = 'crm'`))[0].id}_notes"`;
const keyRows = async () => Number((await sql('SELECT count(*) AS n FROM public.idempotency_keys'))[0].n);

/**
 * Sends a request and drops its answer: the connection is cut the moment the answer starts, so
 * the client never reads it (the server did the work). Resolves then.
 */
function lostAnswer(method: string, path: string, headers: Record<string, string>, body: string | Buffer): Promise<void> {
  const url = new URL(path, s.url);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) }, agent: false }, (res) => {
      res.destroy();
      resolve();
    });
    req.on('error', (err) => (req.destroyed ? resolve() : reject(err)));
    req.end(body);
  });
}

/** Retries while the first attempt is still running (409 with Retry-After), as a client does. */
async function retry(send: () => Promise<ApiResponse>): Promise<ApiResponse> {
  for (let i = 0; ; i++) {
    const r = await send();
    if (r.status !== 409 || i > 50) return r;
    await new Promise((done) => setTimeout(done, 100));
  }
}

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedSiteUser(s, a, 'boss2', { staff: true });
  tok.admin2A = await siteToken(s, a, 'boss2');
  await seedCrm(s, [a, b]);
  const schema = { fields: [{ name: 'title', type: 'string', constraints: { required: true } }, { name: 'code', type: 'string', constraints: { unique: true } }] };
  await createTables((m, p, body) => on(m, p, { body }), [['main', 'notes', schema as never]]);
  await createTables((m, p, body) => on(m, p, { body, who: 'adminB', site: b }), [['main', 'notes', schema as never]]);
  for (const [site, who] of [[a, 'adminA'], [b, 'adminB']] as const) {
    const r = await on('POST', '/api/apps/crm/storage/buckets/', { body: { name: 'files', app_category: 'attachments' }, who, site });
    if (r.status !== 201) throw new Error(r.text);
  }
});
test.after.always(async () => {
  await s?.close();
});

test.serial('issue 29 #14: a record create whose answer was lost, retried with the same Idempotency-Key, creates one record, not two; the retry replays the first answer', async (t) => {
  const body = JSON.stringify({ title: 'lost-1' });
  await lostAnswer('POST', NOTES, { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'create-lost-1' }, body);
  const again = await retry(() => on('POST', NOTES, { raw: body, headers: { 'Content-Type': 'application/json' }, key: 'create-lost-1' }));
  t.is(again.status, 201, again.text);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.regex(again.headers.get('content-type')!, /^application\/json/);
  t.is(again.body.data.title, 'lost-1');
  const third = await on('POST', NOTES, { raw: body, headers: { 'Content-Type': 'application/json' }, key: 'create-lost-1' });
  t.is(third.text, again.text, 'every replay is the same answer');
  t.deepEqual(await notes(), ['lost-1']);
  // Without a key, the same body is a new record (the header is what makes a retry safe).
  t.is((await on('POST', NOTES, { body: { title: 'lost-1' } })).status, 201);
  t.deepEqual(await notes(), ['lost-1', 'lost-1']);
});

test.serial('issue 29 #14: an upload whose answer was lost, retried with the same key, is answered with the first answer (201, same object), not stored again', async (t) => {
  const headers = { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'text/plain', 'Idempotency-Key': 'upload-lost-1', 'X-Metadata-Batch': '7' };
  await lostAnswer('PUT', `${BUCKET}lost.txt`, headers, 'the bytes');
  const again = await retry(() => on('PUT', `${BUCKET}lost.txt`, { raw: 'the bytes', headers: { 'Content-Type': 'text/plain', 'X-Metadata-Batch': '7' }, key: 'upload-lost-1' }));
  t.is(again.status, 201, again.text);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.like(again.body.data, { file_path: 'lost.txt', size: 9, metadata: { batch: '7' } });
  const [row] = await sql(`SELECT uuid, updated_at, created_at FROM "${a.schema}".storage_objects WHERE path = 'lost.txt'`);
  t.is(row.uuid, again.body.data.uuid);
  t.deepEqual(row.updated_at, row.created_at, 'stored once: never replaced by the retry');
  // The same for a multipart batch upload (its boundary may change between attempts).
  const batch = (boundary: string) => {
    const part = (name: string, text: string) => `--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="${name}"\r\nContent-Type: text/plain\r\n\r\n${text}\r\n`;
    return { raw: `${part('b1.txt', 'one')}${part('b2.txt', 'two')}--${boundary}--\r\n`, headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` } };
  };
  const first = batch('first-boundary-1');
  await lostAnswer('POST', `${BUCKET}batch-upload/`, { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Idempotency-Key': 'batch-lost-1', ...first.headers }, first.raw);
  const replayed = await retry(() => on('POST', `${BUCKET}batch-upload/`, { ...batch('second-boundary-2'), key: 'batch-lost-1' }));
  t.is(replayed.status, 201, replayed.text);
  t.is(replayed.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(replayed.body.data.uploaded.map((o: { file_path: string }) => o.file_path), ['b1.txt', 'b2.txt']);
  t.is(Number((await sql(`SELECT count(*) AS n FROM "${a.schema}".storage_objects WHERE path IN ('b1.txt', 'b2.txt') AND updated_at = created_at`))[0].n), 2);
});

test.serial('issue 29 #14: the same key with another request is 422 and writes nothing; a request sent while the first still runs is 409 with Retry-After', async (t) => {
  t.is((await on('POST', NOTES, { body: { title: 'mismatch-1' }, key: 'k-mismatch' })).status, 201);
  const other = await on('POST', NOTES, { body: { title: 'mismatch-2' }, key: 'k-mismatch' });
  t.is(other.status, 422, other.text);
  t.is(other.body.code, 'BUSINESS_LOGIC_ERROR');
  t.regex(other.body.message, /Idempotency-Key was sent with another request/);
  const elsewhere = await on('POST', '/api/apps/crm/datasources/main/datatables/notes/data/', { body: { title: 'mismatch-1' }, key: 'k-mismatch' });
  t.is(elsewhere.status, 422, 'another path is another request');
  t.deepEqual((await notes()).filter((n) => n.startsWith('mismatch')), ['mismatch-1']);

  // An upload whose body is still arriving holds its key: the same request meanwhile is a 409.
  const url = new URL(`${BUCKET}slow.txt`, s.url);
  const headers = { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'text/plain', 'Content-Length': '10', 'Idempotency-Key': 'k-slow' };
  let firstAnswer: Promise<number> = Promise.resolve(0);
  const slow = http.request(url, { method: 'PUT', headers, agent: false });
  firstAnswer = new Promise((resolve, reject) => {
    slow.on('response', (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    slow.on('error', reject);
  });
  slow.write('01234');
  for (let i = 0; i < 50 && !Number((await sql("SELECT count(*) AS n FROM public.idempotency_keys WHERE key = 'k-slow'"))[0].n); i++) await new Promise((r) => setTimeout(r, 20));
  const during = await on('PUT', `${BUCKET}slow.txt`, { raw: '0123456789', headers: { 'Content-Type': 'text/plain' }, key: 'k-slow' });
  t.is(during.status, 409, during.text);
  t.is(during.headers.get('retry-after'), '1');
  t.is(during.body.code, 'CONFLICT');
  slow.end('56789');
  t.is(await firstAnswer, 201);
  const after = await on('PUT', `${BUCKET}slow.txt`, { raw: '0123456789', headers: { 'Content-Type': 'text/plain' }, key: 'k-slow' });
  t.is(after.status, 201);
  t.is(after.headers.get('idempotent-replayed'), 'true');
});

test.serial('issue 29 #14: keys are per principal and per site: another user\'s or another site\'s same key never replays someone else\'s answer', async (t) => {
  const mine = await on('POST', NOTES, { body: { title: 'scoped' }, key: 'shared-key' });
  t.is(mine.status, 201);
  const colleague = await on('POST', NOTES, { body: { title: 'scoped' }, key: 'shared-key', who: 'admin2A' });
  t.is(colleague.status, 201, colleague.text);
  t.is(colleague.headers.get('idempotent-replayed'), null);
  t.not(colleague.body.data.id, mine.body.data.id);
  const otherSite = await on('POST', NOTES, { body: { title: 'scoped' }, key: 'shared-key', who: 'adminB', site: b });
  t.is(otherSite.status, 201, otherSite.text);
  t.is(otherSite.headers.get('idempotent-replayed'), null);
  t.deepEqual((await notes()).filter((n) => n === 'scoped'), ['scoped', 'scoped']);
  t.deepEqual(await notes(b), ['scoped']);
  // The colleague's and the other site's own retries replay their own answers.
  t.is((await on('POST', NOTES, { body: { title: 'scoped' }, key: 'shared-key', who: 'admin2A' })).body.data.id, colleague.body.data.id);
  t.is((await on('POST', NOTES, { body: { title: 'scoped' }, key: 'shared-key', who: 'adminB', site: b })).body.data.id, otherSite.body.data.id);
  // Uploads too: a colleague's same key and same file is an upload of their own (a replace of the same path here), not a replay.
  t.is((await on('PUT', `${BUCKET}shared.txt`, { raw: 'x', headers: { 'Content-Type': 'text/plain' }, key: 'shared-up' })).status, 201);
  const up = await on('PUT', `${BUCKET}shared.txt`, { raw: 'x', headers: { 'Content-Type': 'text/plain' }, key: 'shared-up', who: 'admin2A' });
  t.is(up.status, 200, up.text);
  t.is(up.headers.get('idempotent-replayed'), null);
});

test.serial('issue 29 #14: a malformed key is 400 and writes nothing; a refused request gives its key back; expired or abandoned keys are taken again and pruned', async (t) => {
  const before = (await notes()).length;
  const keysBefore = await keyRows();
  for (const key of ['x'.repeat(256), 'with space', 'naïve', '"quoted\\"', '']) {
    if (key === '') continue; // an empty header is no key at all
    const r = await on('POST', NOTES, { body: { title: 'bad-key' }, key });
    t.is(r.status, 400, key);
    t.regex(r.body.message, /Idempotency-Key/);
  }
  t.is((await notes()).length, before);
  t.is(await keyRows(), keysBefore);
  t.is((await on('POST', NOTES, { body: { title: 'sf-string' }, key: '"a-quoted-key"' })).status, 201, 'a Structured Field string is accepted');

  const refused = await on('POST', NOTES, { body: { nope: 1 }, key: 'k-retry-fixed' });
  t.is(refused.status, 400);
  // A bulk create that fails on a constraint answers as it does without a key (the failing row named), nothing kept.
  t.is((await on('POST', NOTES, { body: { title: 'coded', code: 'c1' } })).status, 201);
  const bulk = [{ title: 'bulk-ok', code: 'c2' }, { title: 'bulk-dup', code: 'c1' }];
  const plain = await on('POST', NOTES, { body: bulk });
  const keyed = await on('POST', NOTES, { body: bulk, key: 'k-bulk' });
  t.is(keyed.status, plain.status);
  t.true(plain.status >= 400, plain.text);
  t.deepEqual(keyed.body, plain.body);
  t.deepEqual((await notes()).filter((n) => n.startsWith('bulk')), []);
  t.is(Number((await sql("SELECT count(*) AS n FROM public.idempotency_keys WHERE key = 'k-bulk'"))[0].n), 0);
  const fixed = await on('POST', NOTES, { body: { title: 'fixed' }, key: 'k-retry-fixed' });
  t.is(fixed.status, 201, 'the refused request did not keep the key');
  t.is(fixed.headers.get('idempotent-replayed'), null);

  // A process that died holding a key (no answer, lease run out): the retry runs again.
  t.is((await on('POST', NOTES, { body: { title: 'abandoned' }, key: 'k-abandoned' })).status, 201);
  await sql("DELETE FROM " + `"${a.schema}".${await noteTable(a)}` + " WHERE title = 'abandoned'");
  await sql("UPDATE public.idempotency_keys SET status = NULL, headers = NULL, body = NULL, lock_token = gen_random_uuid(), locked_until = now() - interval '1 second' WHERE key = 'k-abandoned'");
  const rerun = await on('POST', NOTES, { body: { title: 'abandoned' }, key: 'k-abandoned' });
  t.is(rerun.status, 201);
  t.is(rerun.headers.get('idempotent-replayed'), null);
  t.deepEqual((await notes()).filter((n) => n === 'abandoned'), ['abandoned']);

  // After 24 hours the key is free again, and the scheduled prune removes it.
  await sql("UPDATE public.idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'create-lost-1'");
  const fresh = await on('POST', NOTES, { body: { title: 'lost-1' }, key: 'create-lost-1' });
  t.is(fresh.status, 201);
  t.is(fresh.headers.get('idempotent-replayed'), null);
  await sql("UPDATE public.idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'k-mismatch'");
  t.is(await pruneIdempotencyKeys(s.handle.db.orm.em.fork()), 1);
  t.is(Number((await sql("SELECT count(*) AS n FROM public.idempotency_keys WHERE key = 'k-mismatch'"))[0].n), 0);
});

test.serial('a route that takes no key ignores it; the OpenAPI document names the header on the routes that do', async (t) => {
  const r = await on('PATCH', '/api/apps/crm/storage/buckets/files/', { body: { name: 'Files' }, key: 'ignored' });
  t.is(r.status, 200, r.text);
  t.is(Number((await sql("SELECT count(*) AS n FROM public.idempotency_keys WHERE key = 'ignored'"))[0].n), 0);
  const doc = (await s.api('GET', '/api/schema/')).body;
  const headerOf = (path: string, method: string) => doc.paths[path]?.[method]?.parameters?.some((p: { in: string; name: string }) => p.in === 'header' && p.name === 'Idempotency-Key');
  t.true(headerOf('/api/apps/{app_slug}/datatables/{name}/data/', 'post'));
  t.true(headerOf('/api/apps/{app_slug}/storage/buckets/{bucket}/objects/batch-upload/', 'post'));
  t.false(headerOf('/api/apps/{app_slug}/datatables/{name}/data/', 'get'));
});
