// The storage API over HTTP on real PostgreSQL (issue 13), one suite run against both object
// stores (storage-fs.test.ts: a directory; storage-s3.test.ts: an S3-protocol server): buckets,
// every object route, filters, validation while streaming, keys that try to escape, aborted
// uploads, visibility and ownership, quotas, and isolation between sites.
import http from 'node:http';
import type { TestFn } from 'ava';
import { storeFromConfig } from '../../shared/storage/objstore/index.ts';
import type { ObjectStore } from '../../shared/storage/objstore/types.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { seedCrm } from './crm.ts';
import { capturingLog, startTestServer, type ApiResponse, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';
import { issue29StorageSuite } from './storage-suite-29.ts';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d1c3d20000000049454e44ae426082', 'hex');
const B = '/api/apps/crm/storage/buckets/';

export function storageSuite(test: TestFn, env: () => Promise<Record<string, string>>, cleanup: () => Promise<void> = async () => undefined): void {
  let s: TestServer;
  let a: TestSite;
  let b: TestSite;
  let store: ObjectStore;
  const tok: Record<string, string> = {};
  const logged = capturingLog();
  const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
  const on = (method: string, path: string, options: { body?: unknown; raw?: Buffer | string; headers?: Record<string, string>; who?: string | null; site?: TestSite } = {}): Promise<ApiResponse> =>
    s.api(method, path, { host: (options.site ?? a).domain, token: options.who === null ? undefined : tok[options.who ?? 'adminA'], body: options.body, raw: options.raw, headers: options.headers });
  const put = (bucket: string, key: string, data: Buffer | string, headers: Record<string, string> = {}, who?: string | null) =>
    on('PUT', `${B}${bucket}/objects/${key}`, { raw: data, headers: { 'Content-Type': 'application/octet-stream', ...headers }, who });
  async function multipart(method: string, path: string, parts: [string, string | Blob, string?][], who?: string): Promise<ApiResponse> {
    const form = new FormData();
    for (const [name, value, filename] of parts) (typeof value === 'string' ? form.append(name, value) : form.append(name, value, filename));
    const encoded = new Response(form);
    return on(method, path, { raw: Buffer.from(await encoded.arrayBuffer()), headers: { 'Content-Type': encoded.headers.get('content-type')! }, who });
  }
  const blobs = async (site: TestSite = a) => {
    const keys: string[] = [];
    for await (const k of store.site(site.schema).list('')) keys.push(k);
    return keys;
  };
  const objectRows = async (bucket: string) => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}".storage_objects o JOIN "${a.schema}".storage_buckets b ON b.id = o.bucket_id WHERE b.slug = ?`, [bucket]))[0].n);
  const journal = async () => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}".storage_blob_journal`))[0].n);
  const bucket = async (body: Record<string, unknown>, site: TestSite = a, who = 'adminA') => {
    const r = await on('POST', B, { body: { app_category: 'attachments', ...body }, site, who });
    if (r.status !== 201) throw new Error(r.text);
    return r.body;
  };

  test.before(async () => {
    s = await startTestServer(await env(), { log: logged.log });
    ({ a, b } = await twoSitesWithUsers(s, tok));
    await seedCrm(s, [a, b]);
    store = await storeFromConfig(s.config.storage, s.config.dataDir);
  });
  test.after.always(async () => {
    await store?.close();
    await s?.close();
    await cleanup();
  });

  test.serial('buckets: create with defaults, slug from the name, MIME patterns and quotas checked, list filters, PATCH only, doclib disabled', async (t) => {
    const made = await bucket({ name: 'Team Photos!', visibility: 'public', allowed_mime_types: ['image/*', 'application/pdf'] });
    t.like(made, { name: 'Team Photos!', slug: 'team-photos', visibility: 'public', file_size_limit: 52428800, app_category: 'attachments', storage_provider: 'objstore', object_count: 0, max_size_bytes: null, quota_exceeded: false, quota_status: null });
    t.deepEqual(made.allowed_mime_types, ['image/*', 'application/pdf']);
    t.like(made.usage, { total_size: 0, total_objects: 0 });
    t.is((await bucket({ name: 'Team Photos' })).slug, 'team-photos-2');
    // Part 3 §2: special characters are removed, not turned into hyphens (issue 30 #9).
    for (const [name, slug] of [["Team's Files", 'teams-files'], ['Café v1.2 — assets_old', 'cafe-v12-assets-old']]) {
      t.is((await bucket({ name })).slug, slug);
      t.is((await on('DELETE', `${B}${slug}/`)).status, 200);
    }

    const noCategory = await on('POST', B, { body: { name: 'x' } });
    t.is(noCategory.status, 400);
    t.truthy(noCategory.body.errors.app_category);
    const badTypes = ['image/', 'image', '*/png', '', '/png', 'image/*pdf'];
    const bad = await on('POST', B, { body: { name: 'bad', app_category: 'assets', allowed_mime_types: [...badTypes, 'text/plain', 'application/vnd.ms-excel', '*/*'] } });
    t.is(bad.status, 400);
    t.is(bad.body.errors.allowed_mime_types.length, badTypes.length);
    for (const [i, p] of badTypes.entries()) t.true(bad.body.errors.allowed_mime_types[i].includes(JSON.stringify(p)));
    const quota = await on('POST', B, { body: { name: 'q', app_category: 'assets', max_size_bytes: 0 } });
    t.is(quota.status, 400);
    t.truthy(quota.body.errors.max_size_bytes);
    t.is((await sql(`SELECT count(*) AS n FROM "${a.schema}".storage_buckets WHERE name IN ('bad', 'q')`))[0].n, '0');

    const doclib = await on('POST', B, { body: { name: 'docs', app_category: 'assets', storage_provider: 'doclib' } });
    t.is(doclib.status, 503);
    t.is(doclib.body.code, 'INTERNAL_ERROR');
    t.is((await on('POST', B, { body: { name: 'mine', app_category: 'assets' }, who: 'pleb' })).status, 403);

    await bucket({ name: 'Assets', app_category: 'assets' });
    const listed = await on('GET', `${B}?app_category=assets`);
    t.deepEqual(listed.body.results.map((r: { slug: string }) => r.slug), ['assets']);
    t.deepEqual((await on('GET', `${B}?search=PHOTO&ordering=slug`, { who: 'pleb' })).body.results.map((r: { slug: string }) => r.slug), ['team-photos', 'team-photos-2']);
    t.deepEqual((await on('GET', `${B}?visibility=public`)).body.results.map((r: { slug: string }) => r.slug), ['team-photos']);
    const paged = await on('GET', `${B}?page_size=2&ordering=-slug`);
    t.is(paged.body.count, 3);
    t.is(paged.body.results.length, 2);
    t.truthy(paged.body.next);

    // GET, change a field, PATCH the whole body back.
    const got = (await on('GET', `${B}assets/`)).body;
    const patched = await on('PATCH', `${B}assets/`, { body: { ...got, name: 'Assets v2', max_objects: 5 } });
    t.is(patched.status, 200, patched.text);
    t.like(patched.body, { name: 'Assets v2', slug: 'assets', max_objects: 5 });
    t.like(patched.body.quota_status, { exceeded: { size: false, objects: false, any: false } });
    for (const [field, value] of [['slug', 'other'], ['storage_provider', 'doclib'], ['uuid', '00000000-0000-4000-8000-000000000000']] as const) {
      const r = await on('PATCH', `${B}assets/`, { body: { [field]: value } });
      t.is(r.status, 400, field);
      t.truthy(r.body.errors[field]);
    }
    t.is((await on('PUT', `${B}assets/`, { body: got })).status, 405);
    t.is((await on('PATCH', `${B}assets/`, { body: { name: 'hijack' }, who: 'pleb' })).status, 403);
    t.is((await on('GET', `${B}nope/`)).status, 404);
  });

  test.serial('objects: raw upload creates then replaces (no duplicate); download with type, length, ETag, ranges; metadata headers; ?metadata=true; PATCH; DELETE', async (t) => {
    await bucket({ name: 'docs' });
    const first = await put('docs', 'reports/2024/q1.txt', 'hello world', { 'Content-Type': 'text/plain', 'X-Metadata-User-Id': '7', 'X-Amz-Meta-Source': 'scanner' });
    t.is(first.status, 201, first.text);
    t.like(first.body, { success: true, status_code: 201 });
    t.like(first.body.data, { file_path: 'reports/2024/q1.txt', filename: 'q1.txt', size: 11, mimetype: 'text/plain', bucket_slug: 'docs', bucket_name: 'docs', visibility: null, is_document_editable: false });
    t.deepEqual(first.body.data.metadata, { 'user-id': '7', source: 'scanner' });
    t.is(first.body.data.file_url, '/api/apps/crm/storage/buckets/docs/objects/reports/2024/q1.txt');

    const second = await put('docs', 'reports/2024/q1.txt', 'HELLO AGAIN!', { 'Content-Type': 'text/plain' });
    t.is(second.status, 200);
    t.is(second.body.data.uuid, first.body.data.uuid);
    t.deepEqual(second.body.data.metadata, {});
    t.is(await objectRows('docs'), 1);

    const dl = await on('GET', `${B}docs/objects/reports/2024/q1.txt`);
    t.is(dl.status, 200);
    t.is(dl.text, 'HELLO AGAIN!');
    t.regex(dl.headers.get('content-type')!, /^text\/plain/);
    t.is(dl.headers.get('content-length'), '12');
    const etag = dl.headers.get('etag')!;
    t.regex(etag, /^"[^"]+"$/);
    t.is((await on('GET', `${B}docs/objects/reports/2024/q1.txt/`)).text, 'HELLO AGAIN!');
    const head = await on('HEAD', `${B}docs/objects/reports/2024/q1.txt`);
    t.is(head.status, 200);
    t.is(head.headers.get('content-length'), '12');
    t.is(head.headers.get('etag'), etag);
    t.is((await on('GET', `${B}docs/objects/reports/2024/q1.txt`, { headers: { 'If-None-Match': etag } })).status, 304);
    const part = await on('GET', `${B}docs/objects/reports/2024/q1.txt`, { headers: { Range: 'bytes=6-10' } });
    t.is(part.status, 206);
    t.is(part.text, 'AGAIN');
    t.is(part.headers.get('content-range'), 'bytes 6-10/12');
    t.is((await on('GET', `${B}docs/objects/reports/2024/q1.txt`, { headers: { Range: 'bytes=-3' } })).text, 'IN!');
    const unsatisfiable = await on('GET', `${B}docs/objects/reports/2024/q1.txt`, { headers: { Range: 'bytes=50-60' } });
    t.is(unsatisfiable.status, 416);
    t.is(unsatisfiable.headers.get('content-range'), 'bytes */12');

    const meta = await on('GET', `${B}docs/objects/reports/2024/q1.txt?metadata=true`);
    t.like(meta.body.data, { uuid: first.body.data.uuid, size: 12 });
    const patched = await on('PATCH', `${B}docs/objects/reports/2024/q1.txt/`, { body: { ...meta.body.data, metadata: { tag: 'x' }, visibility: 'public' } });
    t.is(patched.status, 200, patched.text);
    t.like(patched.body.data, { metadata: { tag: 'x' }, visibility: 'public' });
    const renamed = await on('PATCH', `${B}docs/objects/reports/2024/q1.txt/`, { body: { file_path: 'elsewhere.txt' } });
    t.is(renamed.status, 400);
    t.truthy(renamed.body.errors.file_path);

    t.is((await on('DELETE', `${B}docs/objects/reports/2024/q1.txt`)).status, 200);
    t.is((await on('GET', `${B}docs/objects/reports/2024/q1.txt`)).status, 404);
    t.is((await on('DELETE', `${B}docs/objects/reports/2024/q1.txt`)).status, 404);
    t.is(await objectRows('docs'), 0);
    t.deepEqual(await blobs(), []);
    t.is(await journal(), 0);
  });

  test.serial('uploads are checked while streaming: size limit, sniffed type against allowed types, empty file; nothing is stored when refused', async (t) => {
    await bucket({ name: 'strict', file_size_limit: 1000, allowed_mime_types: ['text/*', 'application/pdf'] });
    const before = await blobs();
    const big = await put('strict', 'big.txt', 'x'.repeat(5000), { 'Content-Type': 'text/plain' });
    t.is(big.status, 400);
    t.like(big.body, { success: false, status_code: 400 });
    t.true(big.body.message.includes('1000'), big.body.message);
    const lying = await put('strict', 'fake.txt', PNG, { 'Content-Type': 'text/plain' });
    t.is(lying.status, 400);
    t.true(lying.body.message.includes('image/png'), lying.body.message);
    t.true(lying.body.message.includes('text/*'), lying.body.message);
    const empty = await multipart('POST', `${B}strict/objects/`, [['file', new Blob([]), 'empty.txt']]);
    t.is(empty.status, 400);
    t.truthy(empty.body.error, empty.text);
    t.is(await objectRows('strict'), 0);
    t.deepEqual(await blobs(), before);
    t.is(await journal(), 0);
    // Text is trusted as declared once it is text.
    const csv = await put('strict', 'data.csv', 'a,b\n1,2\n', { 'Content-Type': 'text/csv' });
    t.is(csv.status, 201, csv.text);
    t.is(csv.body.data.mimetype, 'text/csv');
  });

  test.serial('legacy multipart POST, multipart at a key, batch upload with per-file results', async (t) => {
    await bucket({ name: 'mp', file_size_limit: 100 });
    const before = (await blobs()).length;
    const legacy = await multipart('POST', `${B}mp/objects/`, [['file', new Blob(['one']), 'one.txt'], ['path', 'dir/one.txt'], ['metadata', '{"k": 1}']]);
    t.is(legacy.status, 201, legacy.text);
    t.like(legacy.body.data, { file_path: 'dir/one.txt', size: 3, metadata: { k: 1 } });
    t.is((await multipart('POST', `${B}mp/objects/`, [['file', new Blob(['uno']), 'one.txt'], ['path', 'dir/one.txt']])).status, 200);
    const noPath = await multipart('POST', `${B}mp/objects/`, [['file', new Blob(['two']), 'two.txt']]);
    t.is(noPath.body.data.file_path, 'two.txt');
    const atKey = await multipart('PUT', `${B}mp/objects/k/three.txt`, [['file', new Blob(['three']), 'whatever.txt']]);
    t.is(atKey.status, 201);
    t.is(atKey.body.data.file_path, 'k/three.txt');
    t.is((await multipart('POST', `${B}mp/objects/`, [['attachment', new Blob(['x']), 'x.txt']])).status, 400);

    const batch = await multipart('POST', `${B}mp/objects/batch-upload/`, [
      ['files', new Blob(['a1']), 'a.txt'],
      ['files', new Blob(['b'.repeat(500)]), 'b.txt'],
      ['files', new Blob(['c1']), 'c.txt'],
      ['paths', JSON.stringify(['batch/a.txt', 'batch/b.txt', '../c.txt'])],
    ]);
    t.is(batch.status, 207, batch.text);
    t.deepEqual(batch.body.data.uploaded.map((o: { file_path: string }) => o.file_path), ['batch/a.txt']);
    t.deepEqual(batch.body.data.failed.map((f: { path: string }) => f.path), ['batch/b.txt', '../c.txt']);
    t.true(batch.body.data.failed[0].error.includes('100'));
    const tooMany = await multipart('POST', `${B}mp/objects/batch-upload/`, Array.from({ length: 11 }, (_, i) => ['files', new Blob([`f${i}`]), `f${i}.txt`] as [string, Blob, string]));
    t.is(tooMany.status, 400);
    t.is(await objectRows('mp'), 4);
    t.is((await blobs()).length, before + 4);
    t.is(await journal(), 0);
  });

  test.serial('keys: traversal, absolute paths, backslashes and NUL are refused; keys named like fixed routes stay reachable', async (t) => {
    await bucket({ name: 'keys' });
    // Sent as written (fetch would resolve dot segments before they leave the client).
    const raw = (path: string) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const url = new URL(s.url);
        const req = http.request({ host: url.hostname, port: url.port, method: 'PUT', path, headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'text/plain' } }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }));
        });
        req.on('error', reject);
        req.end('x');
      });
    for (const key of ['a/../../etc/passwd', 'a/%2e%2e/%2e%2e/etc/passwd', '..%2Fsecret', './here', '%2Fabs', 'a%5Cb', 'nul%00byte', 'a/%0d%0aSet-Cookie']) {
      const r = await raw(`${B}keys/objects/${key}`);
      t.is(r.status, 400, key);
      t.truthy(r.body.errors?.path, key);
    }
    t.is(await objectRows('keys'), 0);
    t.is((await put('keys', 'a//b', 'x')).body.data.file_path, 'a/b');
    for (const name of ['search', 'copy', 'move', 'batch-upload', 'batch-delete']) {
      const r = await on('POST', `${B}keys/objects/${name}`, { raw: name, headers: { 'Content-Type': 'text/plain' } });
      t.is(r.status, 201, `${name}: ${r.text}`);
      t.is((await on('GET', `${B}keys/objects/${name}`)).text, name);
    }
    t.is((await on('POST', `${B}keys/objects/search/`, { body: { prefix: 'sea' } })).body.data.count, 1);
    t.is((await put('keys', 'doc/view', 'viewed')).status, 201);
    t.is((await on('GET', `${B}keys/objects/doc/view`)).text, 'viewed');
    t.is((await on('GET', `${B}keys/objects/doc%2Fview/`)).text, 'viewed');
    const view = await on('GET', `${B}keys/objects/doc/view/`);
    t.is(view.status, 404); // the view route of object "doc", which does not exist
    const objstoreView = await on('GET', `${B}keys/objects/doc/view/view/`);
    t.is(objstoreView.status, 422);
  });

  test.serial('list filters, ordering, pages and count modes; legacy search', async (t) => {
    await bucket({ name: 'list' });
    const files: [string, string | Buffer, string][] = [
      ['img/cat.png', PNG, 'image/png'],
      ['img/dog.png', PNG, 'image/png'],
      ['notes/todo.txt', 'buy milk', 'text/plain'],
      ['notes/Report-Final.txt', 'quarterly numbers here', 'text/plain'],
      ['data.json', '{"a": 1}', 'application/json'],
    ];
    for (const [key, data, type] of files) t.is((await put('list', key, data, { 'Content-Type': type, 'X-Metadata-Owner': key.includes('cat') ? 'felix' : 'rex' })).status, 201);
    t.is((await put('list', 'notes/pleb.txt', 'mine', { 'Content-Type': 'text/plain' }, 'pleb')).status, 201);
    const paths = async (query: string, who = 'adminA') => {
      const r = await on('GET', `${B}list/objects/?${query}`, { who });
      if (r.status !== 200) throw new Error(`${query}: ${r.text}`);
      return r.body.results.map((o: { file_path: string }) => o.file_path);
    };
    t.deepEqual(await paths('prefix=img/&ordering=path'), ['img/cat.png', 'img/dog.png']);
    t.deepEqual(await paths('file__startswith=notes/&ordering=-filename'), ['notes/todo.txt', 'notes/pleb.txt', 'notes/Report-Final.txt']);
    t.deepEqual(await paths('search=REPORT'), ['notes/Report-Final.txt']);
    t.deepEqual(await paths('filename__iendswith=.JSON'), ['data.json']);
    t.deepEqual(await paths('mimetype_category=image&ordering=path'), ['img/cat.png', 'img/dog.png']);
    t.deepEqual(await paths('mimetype__in=application/json,text/csv'), ['data.json']);
    t.deepEqual(await paths('size__gte=20&ordering=size'), ['notes/Report-Final.txt', 'img/cat.png', 'img/dog.png']);
    t.deepEqual(await paths('metadata_search=felix'), ['img/cat.png']);
    t.deepEqual(await paths('created_by_me=true', 'pleb'), ['notes/pleb.txt']);
    t.deepEqual(await paths('created_by__username=pleb'), ['notes/pleb.txt']);
    const year = new Date().getUTCFullYear();
    t.is((await paths(`created_at__year=${year}&page_size=100`)).length, 6);
    t.is((await paths(`created_at__year=${year - 1}`)).length, 0);
    t.is((await paths('created_after=2000-01-01&page_size=3')).length, 3);
    const page = await on('GET', `${B}list/objects/?page_size=500`);
    t.is(page.body.results.length, 6);
    t.is(page.body.count, 6);
    const uncounted = await on('GET', `${B}list/objects/?_count=none&page_size=4`);
    t.like(uncounted.body, { count: null });
    t.regex(uncounted.body.next, /page=2/, 'a next page exists: its link, without a count');
    const last = await on('GET', `${B}list/objects/?_count=none&page_size=4&page=2`);
    t.is(last.body.results.length, 2);
    t.is(last.body.next, null, 'the last page has no next link, without a count');
    t.is((await on('GET', `${B}list/objects/?_count=none&page_size=6`)).body.next, null, 'a page that ends exactly at the last object');
    t.is((await on('GET', `${B}list/objects/`)).body.results.length, 6);
    for (const bad of ['bogus=1', 'size__gte=abc', 'ordering=owner', 'created_at__month=13', 'mimetype_category=font']) t.is((await on('GET', `${B}list/objects/?${bad}`)).status, 400, bad);

    const search = await on('POST', `${B}list/objects/search/`, { body: { prefix: 'notes/', sortBy: { column: 'size', order: 'desc' }, limit: 2 } });
    t.is(search.status, 200, search.text);
    t.is(search.body.data.count, 3);
    t.deepEqual(search.body.data.objects.map((o: { file_path: string }) => o.file_path), ['notes/Report-Final.txt', 'notes/todo.txt']);
    t.is(search.body.data.bucket, 'list');
    t.is((await on('POST', `${B}list/objects/search/`, { body: { limit: 1001 } })).status, 400);
  });

  test.serial('copy (new uuid, copied_from, across buckets) and move (uuid kept, destination must be free); batch delete', async (t) => {
    await bucket({ name: 'src' });
    await bucket({ name: 'dst' });
    const orig = (await put('src', 'a.txt', 'payload', { 'Content-Type': 'text/plain', 'X-Metadata-K': 'v' })).body.data;
    const copy = await on('POST', `${B}src/objects/copy/`, { body: { source_path: 'a.txt', destination_bucket: 'dst', destination_path: 'copies/a.txt' } });
    t.is(copy.status, 201, copy.text);
    t.not(copy.body.data.uuid, orig.uuid);
    t.like(copy.body.data, { bucket_slug: 'dst', file_path: 'copies/a.txt', size: 7 });
    t.like(copy.body.data.metadata, { k: 'v', copied_from: { bucket: 'src', path: 'a.txt', uuid: orig.uuid } });
    t.is((await on('GET', `${B}dst/objects/copies/a.txt`)).text, 'payload');
    t.is((await on('GET', `${B}src/objects/a.txt`)).text, 'payload');
    const missing = await on('POST', `${B}src/objects/copy/`, { body: { source_path: 'none.txt', destination_path: 'x.txt' } });
    t.is(missing.status, 404);
    t.like(missing.body, { success: false, status_code: 404 });

    const moved = await on('POST', `${B}src/objects/move/`, { body: { source_path: 'a.txt', destination_path: 'moved/b.txt' } });
    t.is(moved.status, 200, moved.text);
    t.like(moved.body.data, { uuid: orig.uuid, file_path: 'moved/b.txt', filename: 'b.txt' });
    t.is((await on('GET', `${B}src/objects/moved/b.txt`)).text, 'payload');
    t.is((await on('GET', `${B}src/objects/a.txt`)).status, 404);
    await put('src', 'taken.txt', 'x');
    t.is((await on('POST', `${B}src/objects/move/`, { body: { source_path: 'moved/b.txt', destination_path: 'taken.txt' } })).status, 409);

    const del = await on('POST', `${B}src/objects/batch-delete/`, { body: { paths: ['taken.txt', 'taken.txt', 'moved/b.txt', 'ghost.txt'] } });
    t.is(del.status, 207, del.text);
    t.is(del.body.data.deleted_count, 2);
    t.deepEqual(del.body.data.failed, [{ path: 'ghost.txt', error: 'Object not found.' }]);
    const empty = await on('POST', `${B}src/objects/batch-delete/`, { body: { paths: [] } });
    t.is(empty.status, 400);
    t.deepEqual(empty.body.errors.paths, ['Paths list cannot be empty']);
    const many = await on('POST', `${B}src/objects/batch-delete/`, { body: { paths: Array.from({ length: 101 }, (_, i) => `f${i}`) } });
    t.deepEqual(many.body.errors.paths, ['Cannot delete more than 100 objects at once']);
    await put('dst', 'z.txt', 'z');
    t.is((await on('POST', `${B}dst/objects/batch-delete/`, { body: { paths: ['z.txt', 'copies/a.txt'] } })).status, 200);
    t.is(await objectRows('src') + (await objectRows('dst')), 0);
  });

  test.serial('visibility and ownership: public objects without a token, private ones by owner or staff; writes over others\' files refused', async (t) => {
    await bucket({ name: 'pub', visibility: 'public' });
    await bucket({ name: 'priv' });
    await put('pub', 'open.txt', 'open', { 'Content-Type': 'text/plain' });
    await put('priv', 'secret.txt', 'secret', { 'Content-Type': 'text/plain' });
    const shared = (await put('priv', 'shared.txt', 'shared', { 'Content-Type': 'text/plain' })).body.data;
    await on('PATCH', `${B}priv/objects/shared.txt/`, { body: { visibility: 'public' } });
    t.is((await on('GET', `${B}pub/objects/open.txt`, { who: null })).text, 'open');
    t.is((await on('GET', `${B}priv/objects/shared.txt`, { who: null })).text, 'shared');
    // Without a token a private object answers exactly as a missing one (issue 29 #9).
    const hidden = await on('GET', `${B}priv/objects/secret.txt`, { who: null });
    const missing = await on('GET', `${B}priv/objects/secret.txv`, { who: null });
    t.is(hidden.status, 404);
    t.deepEqual(hidden.body, { ...missing.body, message: missing.body.message.replace('secret.txv', 'secret.txt') });
    t.deepEqual((await on('GET', `${B}nope/objects/secret.txt`, { who: null })).body, hidden.body);
    t.is((await on('GET', `${B}priv/objects/secret.txt`, { who: 'pleb' })).status, 404);
    t.is((await on('GET', `${B}pub/objects/open.txt`, { who: 'pleb' })).text, 'open');
    t.is((await put('pub', 'open.txt', 'defaced', {}, 'pleb')).status, 403);
    t.is((await on('DELETE', `${B}pub/objects/open.txt`, { who: 'pleb' })).status, 403);
    t.is((await put('pub', 'open.txt', 'x', {}, null)).status, 401);
    t.is((await on('GET', `${B}pub/objects/open.txt`)).text, 'open');
    // A user's own file in a private bucket: theirs to read and delete; not another user's.
    t.is((await put('priv', 'pleb.txt', 'mine', { 'Content-Type': 'text/plain' }, 'pleb')).status, 201);
    t.is((await on('GET', `${B}priv/objects/pleb.txt`, { who: 'pleb' })).text, 'mine');
    t.is((await on('GET', `${B}priv/objects/pleb.txt`)).text, 'mine'); // staff
    const listed = await on('GET', `${B}priv/objects/?ordering=path`, { who: 'pleb' });
    t.deepEqual(listed.body.results.map((o: { file_path: string }) => o.file_path), ['pleb.txt', 'shared.txt']);
    t.is((await on('DELETE', `${B}priv/objects/pleb.txt`, { who: 'pleb' })).status, 200);
    const denied = await on('POST', `${B}priv/objects/batch-delete/`, { body: { paths: ['secret.txt', shared.file_path] }, who: 'pleb' });
    t.is(denied.status, 207);
    t.is(denied.body.data.deleted_count, 0);
    t.deepEqual(denied.body.data.failed.map((f: { path: string }) => f.path).sort(), ['secret.txt', 'shared.txt']);
    t.is((await on('GET', `${B}priv/objects/secret.txt`)).text, 'secret');
  });

  test.serial('policies: the bucket\'s policy decides as well (the list filtered in SQL, download, upload, delete)', async (t) => {
    await bucket({ name: 'pol', visibility: 'public' });
    t.is((await sql(`SELECT count(*) AS n FROM "${a.schema}".policies WHERE name = 'storage:pol' AND is_system`))[0].n, '2');
    for (const [key, size] of [['a/small.txt', 5], ['a/big.txt', 50], ['b/x.txt', 7]] as const) await put('pol', key, 'x'.repeat(size), { 'Content-Type': 'text/plain' });
    const policy = await on('PUT', '/api/apps/crm/policies/', {
      body: {
        resourcePolicy: {
          resource: 'storage:pol',
          version: 'default',
          rules: [
            { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
            { actions: ['read', 'download'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.size < 20' } } },
            { actions: ['upload'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.size < 100' } } },
          ],
        },
      },
    });
    t.true([200, 201].includes(policy.status), policy.text);
    const listed = await on('GET', `${B}pol/objects/?ordering=path`, { who: 'pleb' });
    t.deepEqual(listed.body.results.map((o: { file_path: string }) => o.file_path), ['a/small.txt', 'b/x.txt']);
    t.is(listed.body.count, 2);
    t.is((await on('GET', `${B}pol/objects/a/big.txt`, { who: 'pleb' })).status, 404); // hidden by the read policy: as missing
    t.is((await on('GET', `${B}pol/objects/a/small.txt`, { who: 'pleb' })).text, 'xxxxx');
    t.is((await on('GET', `${B}pol/objects/a/big.txt`)).status, 200);
    t.is((await put('pol', 'p.txt', 'abc', { 'Content-Type': 'text/plain' }, 'pleb')).status, 201);
    const before = await blobs();
    t.is((await put('pol', 'p2.txt', 'y'.repeat(150), { 'Content-Type': 'text/plain' }, 'pleb')).status, 403);
    t.deepEqual(await blobs(), before);
    t.is(await journal(), 0);
    t.is((await on('DELETE', `${B}pol/objects/p.txt`, { who: 'pleb' })).status, 403);
  });

  test.serial('quotas monitor only: uploads beyond them are accepted; check-quotas refreshes the counters; usage/ body', async (t) => {
    await bucket({ name: 'quota', max_objects: 1, max_size_bytes: 10 });
    t.is((await put('quota', 'a.txt', '123456', { 'Content-Type': 'text/plain' })).status, 201);
    t.is((await put('quota', 'b.txt', '123456', { 'Content-Type': 'text/plain' })).status, 201);
    t.false((await on('GET', `${B}quota/`)).body.quota_exceeded);
    t.is((await on('POST', '/api/storage/check-quotas/', { who: 'pleb' })).status, 403);
    const check = await on('POST', '/api/storage/check-quotas/');
    t.is(check.status, 200, check.text);
    t.true(check.body.data.exceeded.some((e: { slug: string }) => e.slug === 'quota'));
    const got = (await on('GET', `${B}quota/`)).body;
    t.true(got.quota_exceeded);
    t.is(got.object_count, 2);
    const usage = (await on('GET', `${B}quota/usage/`)).body;
    t.deepEqual(usage.bucket, { id: got.id, name: 'quota', slug: 'quota', has_quota: true });
    t.like(usage.usage, { total_size: 12, total_objects: 2 });
    t.truthy(usage.usage.last_updated);
    t.deepEqual(usage.exceeded, { size: true, objects: true, any: true });
    t.deepEqual(usage.percent_used, { size: 120, objects: 200 });
    t.like(usage.overage, { size_bytes: 2, objects: 1 });
    t.like(usage.quota, { max_size_bytes: 10, max_objects: 1 });
  });

  test.serial('an aborted upload leaves neither a record nor a blob, and is logged as the client closing it (499, info), not as an error', async (t) => {
    await bucket({ name: 'abort' });
    const before = await blobs();
    const from = logged.lines.length;
    await new Promise<void>((resolve) => {
      const url = new URL(s.url);
      const req = http.request({ host: url.hostname, port: url.port, method: 'PUT', path: `${B}abort/objects/half.bin`, headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'application/octet-stream', 'Content-Length': String(4 * 1024 * 1024) } });
      req.on('error', () => resolve());
      req.write(Buffer.alloc(1024 * 1024, 1));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 300);
    });
    for (let i = 0; i < 40 && (await journal()) > 0; i++) await new Promise((r) => setTimeout(r, 50));
    t.is(await objectRows('abort'), 0);
    t.is(await journal(), 0);
    t.deepEqual(await blobs(), before);
    let line: string | undefined;
    for (let i = 0; i < 40 && !line; i++) {
      line = logged.lines.slice(from).find((l) => l.includes('"msg":"request"') && l.includes('/abort/objects/'));
      if (!line) await new Promise((r) => setTimeout(r, 50));
    }
    t.like(JSON.parse(line ?? '{}'), { level: 30, msg: 'request', method: 'PUT', status: 499 }, logged.lines.slice(from).join('\n'));
    t.false(logged.lines.slice(from).some((l) => JSON.parse(l).level >= 50), 'no error logged');
  });

  test.serial('deleting a bucket removes its objects and their files; other buckets keep theirs', async (t) => {
    await bucket({ name: 'gone' });
    await put('gone', 'x/1.txt', 'one');
    await put('gone', 'x/2.txt', 'two');
    const keep = (await on('GET', `${B}pub/`)).body;
    const before = await blobs();
    const r = await on('DELETE', `${B}gone/`);
    t.is(r.status, 200, r.text);
    t.like(r.body, { success: true, status_code: 200 });
    t.is((await on('GET', `${B}gone/`)).status, 404);
    t.is(await objectRows('gone'), 0);
    t.is((await blobs()).length, before.length - 2);
    t.is((await on('GET', `${B}pub/objects/open.txt`)).text, 'open');
    t.is(keep.slug, 'pub');
    t.is((await sql(`SELECT count(*) AS n FROM "${a.schema}".policies WHERE name = 'storage:gone'`))[0].n, '0');
  });

  test.serial('isolation: another site\'s users and tokens reach none of it; the same app and bucket names on site B are B\'s own', async (t) => {
    await bucket({ name: 'pub' }, b, 'adminB').catch(() => undefined);
    // Site A's token on site B's host, and B's on A's: refused where a token is needed; on a
    // public download it counts for nothing (anonymous), so only public objects of that host's own site.
    t.is((await on('GET', `${B}pub/`, { site: b })).status, 401);
    t.is((await on('GET', `${B}pub/objects/open.txt`, { site: b })).status, 404);
    t.is((await on('GET', `${B}pub/objects/open.txt`, { site: b, who: 'adminB' })).status, 404);
    t.is((await on('GET', `${B}priv/objects/secret.txt`, { who: 'adminB' })).status, 404);
    t.is((await on('GET', `${B}priv/objects/`, { who: 'adminB' })).status, 401);
    t.is((await put('priv', 'x.txt', 'x', {}, 'adminB')).status, 401);
    t.is((await on('DELETE', `${B}pub/`, { who: 'adminB' })).status, 401);
    t.is((await on('POST', '/api/storage/check-quotas/', { who: 'adminB' })).status, 401);
    const listB = await on('GET', B, { site: b, who: 'adminB' });
    t.deepEqual(listB.body.results.map((r: { slug: string }) => r.slug), ['pub']);
    t.deepEqual(await blobs(b), []);
    t.is((await on('GET', `${B}pub/objects/open.txt`, { who: null, site: b })).status, 404);
  });

  issue29StorageSuite(test, { server: () => s, site: () => a, tokens: tok, on, put, multipart, blobs: () => blobs(), objectRows, journal, bucket });
}
