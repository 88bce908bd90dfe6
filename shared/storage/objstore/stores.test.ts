// One suite, three stores: the filesystem under a temp directory, and S3 (s3rver in process,
// shared/testing/s3.ts) with one bucket for every site and with a bucket per site. Every case
// runs against each, so the backends behave the same where the service can tell.
import test, { type ExecutionContext } from 'ava';
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Client } from 'minio';
import { loadConfig } from '../../config.ts';
import { startS3, type TestS3 } from '../../testing/s3.ts';
import { s3Store } from './s3.ts';
import { filesystemStore, loadStorageConfig, storeFromConfig, sweepTemp, wholeBytes, BlobNotFound, InvalidRange, type ObjectStore, type SiteStore } from './index.ts';
import { InvalidKey } from './keys.ts';
import { siteBucketName, validBucketName, type S3ObjectStore } from './s3.ts';

const MIB = 1024 * 1024;

let dir: string;
let s3: TestS3;
const stores: Record<string, ObjectStore> = {};
const BACKENDS = ['filesystem', 's3-shared', 's3-per-site'] as const;
type Backend = (typeof BACKENDS)[number];

test.before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'objstore-'));
  s3 = await startS3();
  const common = { endpoint: s3.endpoint, accessKey: s3.accessKey, secretKey: s3.secretKey, region: 'us-east-1', pathStyle: true, partSize: 5 * MIB };
  stores['s3-shared'] = s3Store({ ...common, bucket: 'shared-bucket', bucketPerSite: false });
  stores['s3-per-site'] = s3Store({ ...common, bucket: 'per-site', bucketPerSite: true });
});
test.after.always(async () => {
  for (const store of Object.values(stores)) await store.close();
  await s3?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Deterministic bytes (mulberry32), so a failure can be replayed. */
function bytes(size: number, seed: number): Buffer {
  const buf = Buffer.alloc(size);
  let s = seed;
  for (let i = 0; i + 4 <= size; i += 4) {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    buf.writeUInt32LE((t ^ (t >>> 14)) >>> 0, i);
  }
  return buf;
}

/** `data` as a stream of 64 KiB chunks (a network-like source). */
function chunked(data: Buffer, chunk = 64 * 1024): Readable {
  return Readable.from((function* () {
    for (let i = 0; i < data.length; i += chunk) yield data.subarray(i, i + chunk);
  })());
}

/** A source that sends `before` bytes, then fails with `error` (or is destroyed without one). */
function failing(before: number, error?: Error): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= before) {
        setImmediate(() => this.destroy(error));
        return;
      }
      const n = Math.min(64 * 1024, before - sent);
      sent += n;
      this.push(bytes(n, sent));
    },
  });
}

async function read(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function keys(site: SiteStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const k of site.list(prefix)) out.push(k);
  return out.sort();
}

/** The etag a store gives these bytes: S3's is the MD5 (one part), the filesystem's a SHA-256 prefix. */
const tagOf = (backend: Backend, b: Buffer): string =>
  backend === 'filesystem' ? `"${createHash('sha256').update(b).digest('hex').slice(0, 32)}"` : `"${createHash('md5').update(b).digest('hex')}"`;
/** A fresh site and bucket for one test, so tests of one backend never see each other's keys. */
const fresh = () => ({ schema: `site_${randomUUID().slice(0, 8)}`, bucket: randomUUID() });

/** No multipart upload left behind (S3), no temp file left behind (filesystem). */
async function nothingInFlight(t: ExecutionContext, backend: Backend, schema: string): Promise<void> {
  if (backend === 'filesystem') return;
  const store = stores[backend] as S3ObjectStore;
  const where = store.location(schema);
  const uploads: unknown[] = [];
  for await (const u of store.client.listIncompleteUploads(where.bucket, where.prefix, true)) uploads.push(u);
  t.deepEqual(uploads, [], 'no incomplete multipart upload');
}

function each(title: string, run: (t: ExecutionContext, store: ObjectStore, backend: Backend) => Promise<void>): void {
  for (const backend of BACKENDS) {
    test(`${backend}: ${title}`, async (t) => {
      if (backend !== 'filesystem') return run(t, stores[backend]!, backend);
      const root = path.join(dir, 'fs', randomUUID());
      const store = filesystemStore(root);
      await run(t, store, backend);
      // Whatever happened, no temp file stays behind.
      t.deepEqual(await readdir(path.join(root, '.tmp')).catch(() => []), [], 'no temp file left');
    });
  }
}

each('put, get and stat round-trip binary data; the etag is the quoted content hash', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const data = bytes(3 * MIB + 17, 1);
  const key = `${bucket}/${randomUUID()}`;
  const put = await site.put(key, chunked(data), { contentType: 'application/octet-stream' });
  t.is(put.size, data.length);
  t.is(put.etag, tagOf(backend, data));
  t.true((await read(await site.get(key))).equals(data));
  t.deepEqual(await site.stat(key), { size: data.length, etag: put.etag });
  await nothingInFlight(t, backend, schema);
});

each('a small blob read whole hands its bytes over (filesystem) while its stream reads them too; none once the stream was read, none for a range', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const data = bytes(100 * 1024, 3);
  const key = `${bucket}/small`;
  await site.put(key, chunked(data), { contentType: 'application/octet-stream' });
  const whole = wholeBytes(await site.get(key));
  if (backend === 'filesystem') t.true(whole?.equals(data));
  else t.is(whole, undefined, 'an S3 body streams');
  const stream = await site.get(key);
  t.true((await read(stream)).equals(data));
  t.is(wholeBytes(stream), undefined, 'not after the stream was read: the bytes would go twice');
  t.is(wholeBytes(await site.get(key, { start: 0, end: 9 })), undefined);
});

each('get with the size the record gives: the blob whole; a size that is not the file\'s still reads the file as it is', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const data = bytes(100 * 1024, 4);
  const key = `${bucket}/sized`;
  await site.put(key, chunked(data), { contentType: 'application/octet-stream' });
  const exact = await site.get(key, undefined, data.length);
  if (backend === 'filesystem') t.true(wholeBytes(exact)?.equals(data));
  t.true((await read(exact)).equals(data));
  for (const wrong of [data.length - 1, data.length + 1, 0]) t.true((await read(await site.get(key, undefined, wrong))).equals(data), `size ${wrong}`);
  await t.throwsAsync(site.get(`${bucket}/missing`, undefined, 10), { instanceOf: BlobNotFound });
  if (backend === 'filesystem') {
    // A directory where a blob would be (never made by the store): not found, as without the size.
    await site.put(`${bucket}/dir/inner`, chunked(data), { contentType: 'application/octet-stream' });
    await t.throwsAsync(site.get(`${bucket}/dir`, undefined, 10), { instanceOf: BlobNotFound });
  }
});

each('putMany writes many small blobs, each readable whole; an existing key is replaced', async (t, store) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const items = Array.from({ length: 20 }, (_, i) => ({ key: `${bucket}/many/${i % 3}/${i}`, data: bytes(100 + i, i), contentType: 'text/plain' }));
  await site.putMany(items);
  for (const item of items) t.true((await read(await site.get(item.key))).equals(item.data), item.key);
  await site.putMany([{ key: items[0]!.key, data: Buffer.from('new'), contentType: 'text/plain' }]);
  t.is((await read(await site.get(items[0]!.key))).toString(), 'new');
});

each('a body larger than a part (multipart on S3) round-trips; an empty body stores zero bytes', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const data = bytes(12 * MIB + 5, 2);
  const key = `${bucket}/big`;
  const put = await site.put(key, chunked(data), { contentType: 'application/octet-stream' });
  t.is(put.size, data.length);
  t.regex(put.etag, /^"[0-9a-f]{32}(-\d+)?"$/);
  t.true((await read(await site.get(key))).equals(data));
  t.is((await site.stat(key))?.size, data.length);
  const empty = await site.put(`${bucket}/empty`, Readable.from([]), { contentType: 'text/plain' });
  t.deepEqual(empty, { size: 0, etag: tagOf(backend, Buffer.alloc(0)) });
  t.is((await read(await site.get(`${bucket}/empty`))).length, 0);
  await nothingInFlight(t, backend, schema);
});

each('range reads are inclusive; an end past the last byte is clamped; a start past it is refused', async (t, store) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const data = bytes(100_000, 3);
  const key = `${bucket}/r`;
  await site.put(key, chunked(data, 4096), { contentType: 'application/octet-stream' });
  t.deepEqual(await read(await site.get(key, { start: 0, end: 0 })), data.subarray(0, 1));
  t.deepEqual(await read(await site.get(key, { start: 10, end: 19 })), data.subarray(10, 20));
  t.deepEqual(await read(await site.get(key, { start: 99_999, end: 99_999 })), data.subarray(99_999));
  t.deepEqual(await read(await site.get(key, { start: 99_000, end: 500_000 })), data.subarray(99_000));
  await t.throwsAsync(site.get(key, { start: 100_000, end: 100_010 }), { instanceOf: InvalidRange });
  await t.throwsAsync(site.get(key, { start: 5, end: 4 }), { instanceOf: InvalidRange });
  await t.throwsAsync(site.get(`${bucket}/missing`, { start: 0, end: 1 }), { instanceOf: BlobNotFound });
});

each('copy makes an independent blob; a missing source is BlobNotFound', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const data = bytes(1 * MIB, 4);
  await site.put(`${bucket}/a`, chunked(data), { contentType: 'image/png' });
  await site.copy(`${bucket}/a`, `${bucket}/b`);
  await site.delete([`${bucket}/a`]);
  t.is(await site.stat(`${bucket}/a`), null);
  t.true((await read(await site.get(`${bucket}/b`))).equals(data));
  t.is((await site.stat(`${bucket}/b`))?.etag, tagOf(backend, data));
  await t.throwsAsync(site.copy(`${bucket}/a`, `${bucket}/c`), { instanceOf: BlobNotFound });
  t.is(await site.stat(`${bucket}/c`), null);
});

each('delete removes what exists and ignores what does not', async (t, store) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  await site.put(`${bucket}/x`, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' });
  await site.put(`${bucket}/y`, Readable.from([Buffer.from('y')]), { contentType: 'text/plain' });
  await site.delete([`${bucket}/x`, `${bucket}/never`, `${randomUUID()}/never`]);
  await site.delete([]);
  t.is(await site.stat(`${bucket}/x`), null);
  await t.throwsAsync(site.get(`${bucket}/x`), { instanceOf: BlobNotFound });
  t.deepEqual(await keys(site), [`${bucket}/y`]);
});

each('deletePrefix removes one bucket\'s blobs only; list walks prefixes', async (t, store) => {
  const { schema } = fresh();
  const site = store.site(schema);
  const put = (k: string) => site.put(k, Readable.from([Buffer.from(k)]), { contentType: 'text/plain' });
  for (const k of ['b1/one', 'b1/two', 'b10/three', 'b2/four', 'b1x']) await put(k);
  t.deepEqual(await keys(site), ['b1/one', 'b1/two', 'b10/three', 'b1x', 'b2/four']);
  t.deepEqual(await keys(site, 'b1/'), ['b1/one', 'b1/two']);
  t.deepEqual(await keys(site, 'b1'), ['b1/one', 'b1/two', 'b10/three', 'b1x']);
  t.deepEqual(await keys(site, 'b1/t'), ['b1/two']);
  t.deepEqual(await keys(site, 'nothing/'), []);
  await site.deletePrefix('b1/');
  t.deepEqual(await keys(site), ['b10/three', 'b1x', 'b2/four']);
  await site.deletePrefix('b9/');
  await site.deletePrefix('');
  t.deepEqual(await keys(site), []);
});

// S3 deletes at most 1,000 keys per request. The filesystem has no batches (and its fsyncs make
// thousands of writes slow); the two S3 modes share this code, so the shared one stands for both
// (s3rver takes ~5 ms a write: one round of 1,000 keys).
test('s3-shared: delete and deletePrefix work in batches (over 1,000 keys)', async (t) => {
  const site = stores['s3-shared']!.site(fresh().schema);
  const { bucket } = fresh();
  const names = Array.from({ length: 1_003 }, (_, i) => `${bucket}/${String(i).padStart(4, '0')}`);
  const put = (list: string[]) => Promise.all(list.map((k) => site.put(k, Readable.from([Buffer.from('.')]), { contentType: 'text/plain' })));
  // delete: 1,003 keys of which the first batch holds two stored ones and the second batch three.
  await put([names[0]!, names[999]!, ...names.slice(1_000)]);
  await site.delete(names);
  t.deepEqual(await keys(site), []);
  // deletePrefix: 1,003 stored keys, listed and removed in two batches; a neighbour stays.
  for (let i = 0; i < names.length; i += 100) await put(names.slice(i, i + 100));
  await put(['other/keep']);
  t.is((await keys(site, `${bucket}/`)).length, 1_003);
  await site.deletePrefix(`${bucket}/`);
  t.deepEqual(await keys(site), ['other/keep']);
});

each('sites are isolated: one site\'s keys are invisible to another', async (t, store) => {
  const a = store.site(fresh().schema);
  const schemaB = fresh().schema;
  const b = store.site(schemaB);
  const key = `${randomUUID()}/${randomUUID()}`;
  await a.put(key, Readable.from([Buffer.from('secret of A')]), { contentType: 'text/plain' });
  t.is(await b.stat(key), null);
  await t.throwsAsync(b.get(key), { instanceOf: BlobNotFound });
  t.deepEqual(await keys(b), []);
  await t.throwsAsync(b.copy(key, 'x/y'), { instanceOf: BlobNotFound });
  await b.delete([key]);
  await b.deletePrefix('');
  t.is((await read(await a.get(key))).toString(), 'secret of A');
  t.deepEqual(await keys(a), [key]);
});

for (const [title, error, size] of [
  ['a source that fails after a few bytes', new Error('client went away'), 100_000],
  ['a source that fails after several parts', new Error('client went away'), 11 * MIB],
  ['a source destroyed without an error after several parts', undefined, 11 * MIB],
] as const) {
  each(`${title}: put rejects and nothing is left`, async (t, store, backend) => {
    const { schema, bucket } = fresh();
    const site = store.site(schema);
    const key = `${bucket}/${randomUUID()}`;
    const source = failing(size, error);
    const err = await t.throwsAsync(site.put(key, source, { contentType: 'application/octet-stream' }));
    if (error) t.is(err?.message, error.message);
    else t.is((err as NodeJS.ErrnoException).code, 'ERR_STREAM_PREMATURE_CLOSE');
    t.true(source.destroyed);
    t.is(await site.stat(key), null);
    await t.throwsAsync(site.get(key), { instanceOf: BlobNotFound });
    t.deepEqual(await keys(site), []);
    await nothingInFlight(t, backend, schema);
  });
}

each('a failed or short write over an existing key leaves the earlier bytes', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const key = `${bucket}/k`;
  const old = bytes(200_000, 5);
  const put = await site.put(key, chunked(old), { contentType: 'application/octet-stream' });
  await t.throwsAsync(site.put(key, failing(11 * MIB, new Error('boom')), { contentType: 'application/octet-stream' }), { message: 'boom' });
  await t.throwsAsync(site.put(key, Readable.from([Buffer.from('short')]), { contentType: 'text/plain', size: 10 }), { message: /Expected 10 bytes, received 5/ });
  t.deepEqual(await site.stat(key), { size: old.length, etag: put.etag });
  t.true((await read(await site.get(key))).equals(old));
  await nothingInFlight(t, backend, schema);
});

each('a new key leaves the old one untouched; a put at the same key replaces it whole', async (t, store, backend) => {
  const { schema, bucket } = fresh();
  const site = store.site(schema);
  const first = bytes(300_000, 6);
  const second = bytes(1_000, 7);
  await site.put(`${bucket}/v1`, chunked(first), { contentType: 'application/octet-stream' });
  await site.put(`${bucket}/v2`, chunked(second), { contentType: 'application/octet-stream' });
  t.true((await read(await site.get(`${bucket}/v1`))).equals(first));
  t.true((await read(await site.get(`${bucket}/v2`))).equals(second));
  await site.put(`${bucket}/v1`, chunked(second), { contentType: 'application/octet-stream' });
  t.true((await read(await site.get(`${bucket}/v1`))).equals(second));
  t.deepEqual(await site.stat(`${bucket}/v1`), { size: second.length, etag: tagOf(backend, second) });
});

each('keys that could escape the site are refused before anything is touched', async (t, store) => {
  const site = store.site(fresh().schema);
  const bad = ['', '/etc/passwd', '../escape', 'a/../../escape', 'a/..', './a', 'a//b', 'a/./b', 'a\\..\\b', 'a\0b', 'b/'];
  for (const key of bad) {
    await t.throwsAsync(site.put(key, Readable.from([Buffer.from('x')]), { contentType: 'text/plain' }), { instanceOf: InvalidKey }, JSON.stringify(key));
    await t.throwsAsync(site.get(key), { instanceOf: InvalidKey });
    await t.throwsAsync(site.stat(key), { instanceOf: InvalidKey });
    await t.throwsAsync(site.copy('a/b', key), { instanceOf: InvalidKey });
    await t.throwsAsync(site.delete([key]), { instanceOf: InvalidKey });
  }
  for (const prefix of ['/', '../', '..', 'a/../', 'a\\b/']) {
    await t.throwsAsync(site.deletePrefix(prefix), { instanceOf: InvalidKey }, prefix);
    await t.throwsAsync(keys(site, prefix), { instanceOf: InvalidKey });
  }
  t.throws(() => store.site('../x'));
  t.throws(() => store.site('Site'));
});

test('filesystem: writes stay under the root, in {root}/{schema}/{key}; nothing else appears', async (t) => {
  const root = path.join(dir, 'escape');
  const store = filesystemStore(root);
  const site = store.site('site_e');
  await writeFile(path.join(dir, 'outside.txt'), 'keep');
  await t.throwsAsync(site.put('../../outside.txt', Readable.from([Buffer.from('x')]), { contentType: 'text/plain' }), { instanceOf: InvalidKey });
  await t.throwsAsync(site.delete(['../../outside.txt']), { instanceOf: InvalidKey });
  await site.put('b/c', Readable.from([Buffer.from('inside')]), { contentType: 'text/plain' });
  t.is((await stat(path.join(root, 'site_e', 'b', 'c'))).size, 6);
  t.deepEqual((await readdir(root)).sort(), ['.tmp', 'site_e']);
  t.deepEqual(await readdir(path.join(root, '.tmp')), []);
  t.is((await stat(path.join(dir, 'outside.txt'))).size, 4);
});

test('filesystem: sweepTemp removes stale temp files only', async (t) => {
  const root = path.join(dir, 'sweep');
  await mkdir(path.join(root, '.tmp'), { recursive: true });
  const old = path.join(root, '.tmp', 'crashed.part');
  const young = path.join(root, '.tmp', 'in-flight.part');
  await writeFile(old, 'x');
  await writeFile(young, 'y');
  const past = new Date(Date.now() - 2 * 3600_000);
  await utimes(old, past, past);
  t.is(await sweepTemp(root, 3600_000), 1);
  t.deepEqual(await readdir(path.join(root, '.tmp')), ['in-flight.part']);
  t.is(await sweepTemp(path.join(dir, 'no-such-root'), 0), 0);
});

test('S3 bucket names: per-site buckets are valid, distinct and readable', (t) => {
  t.is(siteBucketName('platform', 'site_abc'), 'platform-site-abc');
  t.is(siteBucketName('platform', '_x'), 'platform--x');
  const trailing = siteBucketName('platform', 'site_');
  t.regex(trailing, /^platform-site-[0-9a-f]{8}$/);
  const long = siteBucketName('platform', 'a'.repeat(63));
  t.true(long.length <= 63);
  t.not(long, siteBucketName('platform', 'a'.repeat(62)));
  for (const name of ['platform-site-abc', trailing, long, siteBucketName('platform', 'x_s3alias')]) t.true(validBucketName(name), name);
  for (const name of ['ab', 'Platform', 'a..b', '-abc', 'abc-', '192.168.1.1', 'xn--abc', 'abc-s3alias', 'a_b']) t.false(validBucketName(name), name);
});

test('S3 per-site mode: one bucket per site, keys at its root; shared mode: keys under {schema}/', async (t) => {
  const perSite = stores['s3-per-site'] as S3ObjectStore;
  const shared = stores['s3-shared'] as S3ObjectStore;
  const { schema, bucket } = fresh();
  const key = `${bucket}/blob`;
  await perSite.site(schema).put(key, Readable.from([Buffer.from('p')]), { contentType: 'text/plain' });
  await shared.site(schema).put(key, Readable.from([Buffer.from('s')]), { contentType: 'text/plain' });
  const own = siteBucketName('per-site', schema);
  t.deepEqual(perSite.location(schema), { bucket: own, prefix: '' });
  t.true(await perSite.client.bucketExists(own));
  t.is((await perSite.client.statObject(own, key)).size, 1);
  t.is((await shared.client.statObject('shared-bucket', `${schema}/${key}`)).size, 1);
});

// ---- configuration ------------------------------------------------------------------------------

test('loadStorageConfig: the filesystem by default, under the data dir unless STORAGE_DIR', async (t) => {
  t.deepEqual(loadStorageConfig({}), { kind: 'filesystem', dir: undefined });
  t.deepEqual(loadStorageConfig({ STORAGE_DIR: '/srv/blobs' }), { kind: 'filesystem', dir: '/srv/blobs' });
  t.deepEqual(loadConfig({ STORAGE_DIR: '/srv/blobs' }).storage, { kind: 'filesystem', dir: '/srv/blobs' });
  const dataDir = path.join(dir, 'data');
  const store = await storeFromConfig(loadStorageConfig({}), dataDir);
  t.is(store.kind, 'filesystem');
  await store.site('site_cfg').put('a/b', Readable.from([Buffer.from('hi')]), { contentType: 'text/plain' });
  t.is((await stat(path.join(dataDir, 'storage', 'site_cfg', 'a', 'b'))).size, 2);
});

test('loadStorageConfig: S3 variables, defaults and errors naming the variable', (t) => {
  const base = { S3_ENDPOINT: 'https://s3.example.com', S3_ACCESS_KEY: 'AK', S3_SECRET_KEY: 'SK' };
  t.deepEqual(loadStorageConfig(base), {
    kind: 's3', endpoint: 'https://s3.example.com', accessKey: 'AK', secretKey: 'SK', bucket: 'platform', bucketPerSite: false, region: 'us-east-1', pathStyle: true,
  });
  t.like(loadStorageConfig({ ...base, S3_BUCKET: 'blobs', S3_BUCKET_PER_SITE: 'true', S3_REGION: 'eu-west-3', S3_FORCE_PATH_STYLE: 'false' }), {
    bucket: 'blobs', bucketPerSite: true, region: 'eu-west-3', pathStyle: false,
  });
  t.throws(() => loadStorageConfig({ ...base, S3_ACCESS_KEY: '' }), { message: 'S3_ACCESS_KEY is required when S3_ENDPOINT is set' });
  t.throws(() => loadStorageConfig({ S3_ENDPOINT: base.S3_ENDPOINT, S3_ACCESS_KEY: 'AK' }), { message: 'S3_SECRET_KEY is required when S3_ENDPOINT is set' });
  t.throws(() => loadStorageConfig({ ...base, S3_ENDPOINT: 'ftp://s3.example.com' }), { message: /^S3_ENDPOINT must use http: or https:/ });
  t.throws(() => loadStorageConfig({ ...base, S3_ENDPOINT: 'not a url' }), { message: /^S3_ENDPOINT is not a valid URL/ });
  t.throws(() => loadStorageConfig({ ...base, S3_ENDPOINT: 'https://s3.example.com/some/path' }), { message: /^S3_ENDPOINT must be the service origin/ });
  t.throws(() => loadStorageConfig({ ...base, S3_BUCKET: 'Bad_Bucket' }), { message: /^S3_BUCKET is not a valid bucket name/ });
  t.throws(() => loadStorageConfig({ ...base, S3_BUCKET_PER_SITE: 'maybe' }), { message: /^S3_BUCKET_PER_SITE must be true or false/ });
  t.throws(() => loadStorageConfig({ ...base, S3_FORCE_PATH_STYLE: 'sometimes' }), { message: /^S3_FORCE_PATH_STYLE must be true or false/ });
  t.throws(() => loadConfig({ S3_ENDPOINT: base.S3_ENDPOINT }), { message: 'S3_ACCESS_KEY is required when S3_ENDPOINT is set' });
});

test('a store built from the S3 variables signs path-style requests with them and talks to the service', async (t) => {
  const config = loadStorageConfig({ S3_ENDPOINT: s3.endpoint, S3_ACCESS_KEY: 'S3RVER', S3_SECRET_KEY: 'config-secret', S3_BUCKET: 'from-config', S3_REGION: 'eu-west-3' });
  const store = (await storeFromConfig(config, dir)) as S3ObjectStore;
  t.is(store.kind, 's3');
  const site = store.site('site_conf');
  await site.put('k/1', Readable.from([Buffer.from('configured')]), { contentType: 'text/plain' });
  t.is((await read(await site.get('k/1'))).toString(), 'configured');

  // The request the client would send: path-style URL on the endpoint, credential scope of the
  // access key and region, and a signature only the configured secret reproduces.
  const when = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
  const signed = new URL(await store.client.presignedGetObject('from-config', 'site_conf/k/1', 600, {}, when));
  t.is(signed.origin, s3.endpoint);
  t.is(signed.pathname, '/from-config/site_conf/k/1');
  t.is(signed.searchParams.get('X-Amz-Credential'), 'S3RVER/20260102/eu-west-3/s3/aws4_request');
  const endpoint = new URL(s3.endpoint);
  const sign = (secretKey: string) =>
    new Client({ endPoint: endpoint.hostname, port: Number(endpoint.port), useSSL: false, accessKey: 'S3RVER', secretKey, region: 'eu-west-3', pathStyle: true })
      .presignedGetObject('from-config', 'site_conf/k/1', 600, {}, when)
      .then((u) => new URL(u).searchParams.get('X-Amz-Signature'));
  t.is(signed.searchParams.get('X-Amz-Signature'), await sign('config-secret'));
  t.not(signed.searchParams.get('X-Amz-Signature'), await sign('another-secret'));

  // Without S3_FORCE_PATH_STYLE the bucket would be a host name.
  const virtual = (await storeFromConfig(loadStorageConfig({ S3_ENDPOINT: 'https://s3.example.com', S3_ACCESS_KEY: 'a', S3_SECRET_KEY: 'b', S3_FORCE_PATH_STYLE: 'false' }), dir)) as S3ObjectStore;
  t.is(new URL(await virtual.client.presignedGetObject('platform', 'x', 600, {}, when)).host, 'platform.s3.example.com');
  await store.close();
  await virtual.close();
});
